//! Reverse line framing: pages of bytes from the *end* of a stream in, complete lines out,
//! newest first.
//!
//! Resuming a compacted session needs only what follows the last compaction, which usually sits
//! near the end of a file that may be gigabytes long. Reading from the start would cost
//! O(file); reading pages backwards from the end and stopping at the boundary costs
//! O(post-compaction). This module is the pure half of that reader: the shell (a local file
//! with `pread`, an object store with range requests) fetches each page, this splitter frames
//! lines across page edges and hands them to a stage that says when it has seen enough.
//!
//! Lines come out with the same framing rules as the forward [`LineSplitter`]: `\n` ends a line,
//! a `\r` before it is not content, blank lines are skipped but counted, a line longer than the
//! limit is reported without being held, and a last line without a newline is a torn line.
//! Line *numbers* are only knowable once the reader reaches the start of the stream; until then
//! each line carries its offset and its physical position counted from the end (`from_end`,
//! 1 = the last line), which [`ReverseSplitter::number`] turns into a line number after
//! [`ReverseSplitter::finish`].
//!
//! *Invariant:* for any input and any page sizes, the lines, offsets, numbers and too-long and
//! torn reports equal the forward splitter's, in reverse order (property tests here and in
//! `tests/integration/reverse.rs`).
//!
//! Calling order: [`ReverseSplitter::next_page`] says which bytes to read; [`ReverseSplitter::feed`]
//! them (each page ends where the previous one began) until a consumer returns
//! [`Progress::Complete`] or the start is reached; then [`ReverseSplitter::finish`] once to
//! frame the first line of the stream.
//!
//! [`LineSplitter`]: crate::transcript::lines::LineSplitter

use super::lines::{is_blank, without_bom, BOM};
use super::progress::Progress;
use memchr::memrchr;
use std::ops::Range;
use std::sync::Arc;

/// A framed line (or report) handed out by the [`ReverseSplitter`], newest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevItem<'a> {
    /// A complete, non-blank line within the limit.
    Line {
        /// Stream offset of its first byte.
        offset: u64,
        /// Physical position from the end of the stream: 1 for the last line.
        from_end: u64,
        /// Its content, without the `\n` and without a `\r` before it.
        bytes: &'a [u8],
    },
    /// A complete line longer than the limit; its bytes were not kept.
    TooLong {
        /// Stream offset of its first byte.
        offset: u64,
        /// Physical position from the end of the stream.
        from_end: u64,
        /// Its length without the line terminator.
        len: u64,
    },
    /// The last line of the stream has no newline: an interrupted write (always `from_end` 1,
    /// and always the first item, if any).
    Torn {
        /// Stream offset of its first byte.
        offset: u64,
        /// Its bytes, or `None` when it is longer than the limit.
        bytes: Option<&'a [u8]>,
        /// Its length.
        len: u64,
    },
}

impl RevItem<'_> {
    /// Stream offset of the line's first byte.
    pub fn offset(&self) -> u64 {
        match *self {
            RevItem::Line { offset, .. } | RevItem::TooLong { offset, .. } | RevItem::Torn { offset, .. } => offset,
        }
    }

    /// Physical position from the end of the stream (1 = the last line).
    pub fn from_end(&self) -> u64 {
        match *self {
            RevItem::Line { from_end, .. } | RevItem::TooLong { from_end, .. } => from_end,
            RevItem::Torn { .. } => 1,
        }
    }
}

/// A page read from a stream: where it starts and its bytes, shared with the lines kept from it
/// so that keeping a line does not copy it.
#[derive(Debug, Clone)]
pub struct Page {
    /// Stream offset of its first byte.
    pub base: u64,
    /// Its bytes.
    pub data: Arc<Vec<u8>>,
}

impl Page {
    /// A page of `data` starting at stream offset `base`.
    pub fn new(base: u64, data: Vec<u8>) -> Self {
        Page { base, data: Arc::new(data) }
    }

    /// The bytes of the line at `offset` whose content is `bytes` (as the splitter handed them
    /// out): a shared range of this page when the line lies in it, else a copy (a line that
    /// spans pages).
    pub fn keep(&self, offset: u64, bytes: &[u8]) -> LineBytes {
        // Where the content lies in the page, from the slice itself: the content of the
        // stream's first line starts after a byte-order mark, not at its offset.
        let (page, at) = (self.data.as_ptr() as usize, bytes.as_ptr() as usize);
        let inside = offset >= self.base && at >= page && at + bytes.len() <= page + self.data.len();
        if inside {
            let start = at - page;
            return LineBytes { buf: Arc::clone(&self.data), range: start..start + bytes.len() };
        }
        LineBytes::copy(bytes)
    }
}

/// The bytes of a kept line: a range of a shared page, or a copy of its own.
#[derive(Clone)]
pub struct LineBytes {
    buf: Arc<Vec<u8>>,
    range: Range<usize>,
}

impl LineBytes {
    /// A copy of `bytes`.
    pub fn copy(bytes: &[u8]) -> Self {
        bytes.to_vec().into()
    }
}

impl From<Vec<u8>> for LineBytes {
    fn from(v: Vec<u8>) -> Self {
        let range = 0..v.len();
        LineBytes { buf: Arc::new(v), range }
    }
}

impl std::ops::Deref for LineBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.range.clone()]
    }
}

impl PartialEq for LineBytes {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for LineBytes {}

impl std::fmt::Debug for LineBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

/// A framed line kept by a stage: where it is and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLine {
    /// Stream offset of its first byte.
    pub offset: u64,
    /// Its content, without the line terminator.
    pub bytes: LineBytes,
}

impl SourceLine {
    /// A copy of the line at `offset`.
    pub fn new(offset: u64, bytes: &[u8]) -> Self {
        SourceLine { offset, bytes: LineBytes::copy(bytes) }
    }
}

/// Frames lines from pages fed back to front. See the module docs.
#[derive(Debug)]
pub struct ReverseSplitter {
    max: usize,
    len: u64,
    /// Offset of the earliest byte fed so far: the next page ends here.
    pos: u64,
    /// The line in progress (its end is known, its start not yet): the bytes seen so far,
    /// stored in reverse order so that prepending an earlier page is an append.
    rev: Vec<u8>,
    /// Bytes of the line in progress seen so far (also while skipping an over-long one).
    seen: u64,
    /// The line in progress is too long to hold; its bytes are only counted.
    skipping: bool,
    /// Bytes seen of the line in progress that are not whitespace (counted up to four).
    nonblank: u64,
    /// The first (up to three) bytes seen of the line in progress: a line at offset 0 made of a
    /// byte-order mark and whitespace is blank.
    head: [u8; 3],
    head_len: usize,
    /// The last byte of the line in progress is `\r` (known once `seen > 0`).
    ends_cr: bool,
    /// The line in progress ends with `\n`: false only for the last line of the stream.
    terminated: bool,
    /// Physical lines completed so far, counted from the end.
    done_lines: u64,
    finished: bool,
    stopped: bool,
}

impl ReverseSplitter {
    /// A splitter for a stream of `len` bytes whose lines may be up to `max_line_bytes` long.
    pub fn new(len: u64, max_line_bytes: usize) -> Self {
        ReverseSplitter {
            max: max_line_bytes.max(1),
            len,
            pos: len,
            rev: Vec::new(),
            seen: 0,
            skipping: false,
            nonblank: 0,
            head: [0; 3],
            head_len: 0,
            ends_cr: false,
            terminated: false,
            done_lines: 0,
            finished: false,
            stopped: false,
        }
    }

    /// Length of the stream.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the stream is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Offset of the earliest byte fed so far; the next page must end here.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// The byte range to read next, at most `max_page` bytes ending where the last page began;
    /// `None` once the start is reached or a consumer completed.
    pub fn next_page(&self, max_page: usize) -> Option<Range<u64>> {
        if self.pos == 0 || self.stopped {
            return None;
        }
        let start = self.pos.saturating_sub(max_page.max(1) as u64);
        Some(start..self.pos)
    }

    /// Total physical lines of the stream, once [`ReverseSplitter::finish`] has framed the first.
    pub fn total_lines(&self) -> Option<u64> {
        self.finished.then_some(self.done_lines)
    }

    /// The 1-based line number of the line `from_end` from the end, once the start was reached.
    pub fn number(&self, from_end: u64) -> Option<u64> {
        self.total_lines().map(|t| t + 1 - from_end)
    }

    /// Feeds the page that ends where the previous one began (`page.len() <= pos()`); `out`
    /// receives every line it completes, newest first, and may stop the reading by returning
    /// [`Progress::Complete`], which this returns too.
    pub fn feed(&mut self, page: &[u8], out: &mut impl FnMut(RevItem<'_>) -> Progress) -> Progress {
        assert!(page.len() as u64 <= self.pos, "page of {} bytes before offset {}", page.len(), self.pos);
        if self.stopped {
            return Progress::Complete;
        }
        let base = self.pos - page.len() as u64;
        self.pos = base;
        let mut end = page.len();
        while let Some(nl) = memrchr(b'\n', &page[..end]) {
            if self.complete(&page[nl + 1..end], base + nl as u64 + 1, out).is_complete() {
                self.stopped = true;
                return Progress::Complete;
            }
            self.begin(true);
            end = nl;
        }
        self.hold(&page[..end]);
        Progress::NeedMore
    }

    /// Ends the stream at its start (every page fed): frames the first line.
    pub fn finish(&mut self, out: &mut impl FnMut(RevItem<'_>) -> Progress) -> Progress {
        assert_eq!(self.pos, 0, "finish before the start of the stream was fed");
        if self.stopped || self.finished {
            return Progress::Complete;
        }
        let p = self.complete(&[], 0, out);
        self.finished = true;
        p
    }

    /// Starts a new line in progress that ends at a `\n` (or, for the last line, at the end).
    fn begin(&mut self, terminated: bool) {
        if self.rev.capacity() > (1 << 20) {
            self.rev = Vec::new();
        } else {
            self.rev.clear();
        }
        self.seen = 0;
        self.skipping = false;
        self.nonblank = 0;
        self.head_len = 0;
        self.ends_cr = false;
        self.terminated = terminated;
    }

    /// Prepends `chunk` (no newline in it) to the line in progress: kept while the line can
    /// still fit the limit (one byte more for a `\r`), counted once it cannot.
    fn hold(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        if self.seen == 0 {
            self.ends_cr = chunk.last() == Some(&b'\r');
        }
        self.seen += chunk.len() as u64;
        self.note(chunk);
        if self.skipping {
            return;
        }
        if self.seen > self.max as u64 + 1 {
            self.skipping = true;
            self.rev = Vec::new();
            return;
        }
        self.rev.extend(chunk.iter().rev());
    }

    /// Counts the non-blank bytes of `chunk`, which now starts the line in progress, and keeps
    /// the line's first bytes.
    fn note(&mut self, chunk: &[u8]) {
        // Counted up to four: enough to tell a mark and whitespace from content, and the scan
        // stops at the fourth non-blank byte (the start of almost every line).
        let more = chunk.iter().filter(|b| !is_blank(std::slice::from_ref(b))).take(4).count() as u64;
        self.nonblank = (self.nonblank + more).min(4);
        let mut head = [0; 3];
        let from_chunk = chunk.len().min(3);
        head[..from_chunk].copy_from_slice(&chunk[..from_chunk]);
        let from_old = (3 - from_chunk).min(self.head_len);
        head[from_chunk..from_chunk + from_old].copy_from_slice(&self.head[..from_old]);
        self.head = head;
        self.head_len = from_chunk + from_old;
    }

    /// The line in progress starts with `head`, at `offset`: hand it out.
    fn complete(&mut self, head: &[u8], offset: u64, out: &mut impl FnMut(RevItem<'_>) -> Progress) -> Progress {
        let direct = self.seen == 0;
        if direct {
            // The whole line lies in this page: it is borrowed from it, not copied.
            self.seen = head.len() as u64;
            self.ends_cr = head.last() == Some(&b'\r');
            self.note(head);
            self.skipping = head.len() > self.max + 1;
        } else {
            self.hold(head);
            if !self.skipping {
                self.rev.reverse();
            }
        }
        // Blank: whitespace only, but for a byte-order mark that starts the stream.
        let bom = offset == 0 && self.head[..self.head_len] == *BOM;
        let blank = self.nonblank == if bom { BOM.len() as u64 } else { 0 };
        let len = self.seen;
        if !self.terminated && len == 0 {
            // The stream ends with a newline: there is no last fragment.
            return Progress::NeedMore;
        }
        self.done_lines += 1;
        let from_end = self.done_lines;
        if blank {
            return Progress::NeedMore;
        }
        // A line of up to max + 1 bytes is kept (the `\r` may not be content), as forward.
        let kept: Option<&[u8]> = match (self.skipping, direct) {
            (true, _) => None,
            (false, true) => Some(head),
            (false, false) => Some(&self.rev),
        };
        if !self.terminated {
            return out(RevItem::Torn { offset, bytes: kept, len });
        }
        let content = len - u64::from(self.ends_cr);
        match kept {
            // The limit counts a byte-order mark that starts the stream; the content does not.
            Some(line) if content <= self.max as u64 => out(RevItem::Line { offset, from_end, bytes: without_bom(offset, &line[..content as usize]) }),
            _ => out(RevItem::TooLong { offset, from_end, len: content }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Agreement with the forward splitter, on edge cases, random input and every fixture, is
    // proved in tests/integration/reverse.rs.

    fn collect(r: &mut ReverseSplitter, page: &[u8], seen: &mut Vec<String>) {
        let _ = r.feed(page, &mut |i| {
            seen.push(format!("{i:?}"));
            Progress::NeedMore
        });
    }

    #[test]
    fn lines_come_newest_first_with_offsets() {
        let input = b"one\n\ntwo\r\nthree";
        let mut r = ReverseSplitter::new(input.len() as u64, 100);
        let mut seen = Vec::new();
        collect(&mut r, &input[6..], &mut seen);
        collect(&mut r, &input[..6], &mut seen);
        let _ = r.finish(&mut |i| {
            seen.push(format!("{i:?}"));
            Progress::NeedMore
        });
        assert_eq!(
            seen,
            vec![
                r#"Torn { offset: 10, bytes: Some([116, 104, 114, 101, 101]), len: 5 }"#,
                r#"Line { offset: 5, from_end: 2, bytes: [116, 119, 111] }"#,
                r#"Line { offset: 0, from_end: 4, bytes: [111, 110, 101] }"#,
            ]
        );
        assert_eq!(r.total_lines(), Some(4));
        assert_eq!(r.number(2), Some(3));
    }

    #[test]
    fn a_consumer_stops_the_reading() {
        let input = b"a\nb\nc\n";
        let mut r = ReverseSplitter::new(input.len() as u64, 100);
        let mut n = 0;
        let p = r.feed(input, &mut |_| {
            n += 1;
            if n == 2 {
                Progress::Complete
            } else {
                Progress::NeedMore
            }
        });
        assert_eq!((p, n), (Progress::Complete, 2));
        assert_eq!(r.next_page(10), None);
    }
}
