//! Reading a transcript backwards, in pages from its end: the shell half of the reverse-paged
//! reader (the framing is [`ReverseSplitter`], in the core).
//!
//! Pages start small and grow: each page is as large as everything read before it (up to
//! [`MAX_PAGE`]), so a context that ends a few kilobytes before the end of the file costs a few
//! kilobytes and one of megabytes costs a few large reads. That schedule bounds the waste:
//! every page but the last is needed by the consumer, and the last is no larger than all the
//! others together, so the bytes read stay within twice what the consumer needed (once that
//! is at least half the first page; a smaller tail costs the first page). A [`PageSource`] is
//! anything with a length and positioned reads: a file (`pread`, no seek state), a buffer
//! (stdin read whole), an object store tomorrow.

use crate::transcript::progress::Progress;
use crate::transcript::reverse::{Page, RevItem, ReverseSplitter};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Size of the first page read from the end.
pub const FIRST_PAGE: usize = 16 << 10;
/// Pages grow up to this size.
pub const MAX_PAGE: usize = 1 << 20;

/// Something that can be read at any offset.
pub trait PageSource {
    /// Its length in bytes.
    fn len(&self) -> u64;
    /// Whether it is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fills `buf` with the bytes at `offset`.
    fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

/// A file, with its length fixed when it was opened: bytes appended while it is read are not
/// part of this read.
#[derive(Debug)]
pub struct FileSource {
    file: File,
    len: u64,
}

impl FileSource {
    /// Wraps an open file.
    pub fn new(file: File) -> io::Result<Self> {
        let len = file.metadata()?.len();
        Ok(FileSource { file, len })
    }
}

impl PageSource for FileSource {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                io::Error::new(e.kind(), "the file shrank while it was read")
            } else {
                e
            }
        })
    }
}

impl PageSource for &[u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(io::Error::other)?;
        let src = self.get(start..start + buf.len()).ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// What a backward read cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Bytes read from the source.
    pub bytes_read: u64,
    /// Reads made.
    pub pages: u64,
    /// Whether the read reached the start of the source (line numbers are then known).
    pub reached_start: bool,
}

/// Reads `source` backwards through `splitter` (made for `source.len()` bytes), handing every
/// item, with the page it came from, to `consume` until it returns [`Progress::Complete`] or
/// the start is reached. Each page is a fresh buffer, so a consumer may keep lines by sharing it.
pub fn read_backwards(
    source: &mut impl PageSource,
    splitter: &mut ReverseSplitter,
    first_page: usize,
    mut consume: impl FnMut(RevItem<'_>, &Page) -> Progress,
) -> io::Result<ReadStats> {
    let mut stats = ReadStats::default();
    let first_page = first_page.max(1);
    let mut page = first_page;
    let mut last = Page::new(splitter.len(), Vec::new());
    while let Some(range) = splitter.next_page(page) {
        let n = (range.end - range.start) as usize;
        let mut buf = vec![0u8; n];
        source.read_exact_at(&mut buf, range.start)?;
        stats.bytes_read += n as u64;
        stats.pages += 1;
        last = Page::new(range.start, buf);
        if splitter.feed(&last.data, &mut |item| consume(item, &last)).is_complete() {
            return Ok(stats);
        }
        // The next page is as large as everything read so far: the bytes read never exceed
        // twice the bytes needed.
        page = usize::try_from(stats.bytes_read).unwrap_or(usize::MAX).clamp(first_page, MAX_PAGE.max(first_page));
    }
    stats.reached_start = true;
    let _ = splitter.finish(&mut |item| consume(item, &last));
    Ok(stats)
}

/// The first line of `source` (without its terminator), read forward in small pages; `None`
/// for an empty source or a first line longer than `max` bytes. Adds what it read to `stats`.
pub fn read_head_line(source: &mut impl PageSource, max: usize, stats: &mut ReadStats) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let mut offset = 0u64;
    let mut page = 4096usize;
    while offset < source.len() && line.len() <= max {
        let n = page.min((source.len() - offset) as usize);
        let mut buf = vec![0u8; n];
        source.read_exact_at(&mut buf, offset)?;
        stats.bytes_read += n as u64;
        stats.pages += 1;
        if let Some(i) = memchr::memchr(b'\n', &buf) {
            line.extend_from_slice(&buf[..i]);
            break;
        }
        line.extend_from_slice(&buf);
        offset += n as u64;
        page = (page * 2).min(MAX_PAGE);
    }
    if line.ends_with(b"\r") {
        line.pop();
    }
    Ok((!line.is_empty() && line.len() <= max).then_some(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_grow_and_reading_stops_when_told() {
        let data: Vec<u8> = (0..10_000).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
        let mut src: &[u8] = &data;
        let mut s = ReverseSplitter::new(data.len() as u64, 1000);
        let mut n = 0;
        let stats = read_backwards(&mut src, &mut s, 16, |_, _| {
            n += 1;
            if n == 100 {
                Progress::Complete
            } else {
                Progress::NeedMore
            }
        })
        .unwrap();
        assert_eq!(n, 100);
        assert!(!stats.reached_start);
        // 100 lines of ~10 bytes: what the consumer needed, at most twice over.
        let needed: u64 = data
            .iter()
            .rev()
            .scan(0, |nl, b| {
                *nl += u64::from(*b == b'\n');
                (*nl <= 100).then_some(1)
            })
            .sum();
        assert!(stats.bytes_read <= 2 * needed, "{stats:?} needed {needed}");
    }

    #[test]
    fn reads_to_the_start_and_the_head_line() {
        let data = b"{\"a\":1}\r\nsecond\nthird";
        let mut src: &[u8] = data;
        let mut s = ReverseSplitter::new(data.len() as u64, 1000);
        let mut items = 0;
        let stats = read_backwards(&mut src, &mut s, 4, |_, _| {
            items += 1;
            Progress::NeedMore
        })
        .unwrap();
        assert!(stats.reached_start);
        assert_eq!(items, 3);
        assert_eq!(s.total_lines(), Some(3));
        let mut st = ReadStats::default();
        assert_eq!(read_head_line(&mut src, 100, &mut st).unwrap().as_deref(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(read_head_line(&mut src, 3, &mut st).unwrap(), None);
        let mut empty: &[u8] = b"";
        assert_eq!(read_head_line(&mut empty, 3, &mut st).unwrap(), None);
    }
}
