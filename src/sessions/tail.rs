//! The last timestamp of a transcript, read from its tail.
//!
//! A session's "last active" time is the `timestamp` of its last line that has one (Claude Code
//! and Codex write one on nearly every line). Transcripts grow to hundreds of megabytes, and a
//! listing reads thousands of them, so the file is read backwards from its end in growing blocks
//! until a complete line with a top-level `timestamp` turns up. The search gives up after
//! [`MAX_LINES`] lines or [`MAX_BYTES`] bytes (formats without timestamps, such as OpenAI chat
//! logs, would otherwise be read whole); the caller then uses the file's modification time.
//!
//! A last line without its newline is an interrupted write and is not read (as in `check`).

use super::lines::top_level_string;
use super::timestamp::Timestamp;
use memchr::{memchr, memrchr};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

/// First block read from the end; each further block is twice the previous one.
pub const FIRST_BLOCK: u64 = 64 << 10;
/// At most this many bytes are read from the end.
pub const MAX_BYTES: u64 = 32 << 20;
/// At most this many complete lines are looked at.
pub const MAX_LINES: usize = 512;

/// The top-level `timestamp` of one line, if it is a JSON object that has a valid one. Pure.
pub fn timestamp_of_line(line: &[u8]) -> Option<Timestamp> {
    top_level_string(line, "timestamp").and_then(|t| Timestamp::parse_rfc3339(&t))
}

/// The timestamp of the last complete line of `path` that has one, read from the tail. `None`
/// when no such line is found within the limits.
pub fn last_timestamp(path: &Path) -> io::Result<Option<Timestamp>> {
    let mut file = crate::sources::regular::open_file(path)?;
    let len = file.metadata()?.len();
    last_timestamp_in(&mut file, len)
}

/// [`last_timestamp`] over the first `len` bytes of any seekable reader.
pub fn last_timestamp_in<R: Read + Seek>(r: &mut R, len: u64) -> io::Result<Option<Timestamp>> {
    // `buf` holds bytes [start, len) of the file. `unchecked_end` is the end (exclusive, a line
    // start) of the part not looked at yet; `None` until the last newline has been seen.
    let mut buf: Vec<u8> = Vec::new();
    let mut start = len;
    let mut unchecked_end: Option<u64> = None;
    let mut block = FIRST_BLOCK;
    let mut looked = 0usize;
    while start > 0 && len - start < MAX_BYTES {
        let from = start.saturating_sub(block).max(len.saturating_sub(MAX_BYTES));
        let mut chunk = vec![0u8; (start - from) as usize];
        r.seek(SeekFrom::Start(from))?;
        r.read_exact(&mut chunk)?;
        chunk.extend_from_slice(&buf);
        buf = chunk;
        start = from;
        block = block.saturating_mul(2);

        let end = match unchecked_end {
            Some(e) => e,
            None => match memrchr(b'\n', &buf) {
                Some(i) => start + i as u64 + 1,
                None => continue, // no complete line yet
            },
        };
        // The first line in the buffer may be cut unless the buffer starts the file.
        let first_complete = if start == 0 {
            0
        } else {
            match memchr(b'\n', &buf[..(end - start) as usize]) {
                Some(i) => start + i as u64 + 1,
                None => {
                    unchecked_end = Some(end);
                    continue;
                }
            }
        };
        let region = &buf[(first_complete - start) as usize..(end - start) as usize];
        // Lines of the region, last first. A non-empty region ends with a newline.
        if let Some(mut rest) = region.strip_suffix(b"\n") {
            loop {
                let line_start = memrchr(b'\n', rest).map_or(0, |i| i + 1);
                let line = &rest[line_start..];
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                let line = crate::transcript::lines::without_bom(first_complete + line_start as u64, line);
                if !crate::transcript::lines::is_blank(line) {
                    if let Some(t) = timestamp_of_line(line) {
                        return Ok(Some(t));
                    }
                    looked += 1;
                    if looked >= MAX_LINES {
                        return Ok(None);
                    }
                }
                if line_start == 0 {
                    break;
                }
                rest = &rest[..line_start - 1];
            }
        }
        unchecked_end = Some(first_complete);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn last(data: &[u8]) -> Option<Timestamp> {
        last_timestamp_in(&mut Cursor::new(data), data.len() as u64).unwrap()
    }

    fn ts(s: &str) -> Option<Timestamp> {
        Timestamp::parse_rfc3339(s)
    }

    #[test]
    fn reads_the_top_level_timestamp_only() {
        assert_eq!(timestamp_of_line(br#"{"type":"x","timestamp":"2026-01-01T00:00:00Z"}"#), ts("2026-01-01T00:00:00Z"));
        // Claude's toolUseResult comes after the line's own timestamp and may hold others.
        let line = br#"{"timestamp":"2026-01-01T00:00:00Z","toolUseResult":{"timestamp":"2030-01-01T00:00:00Z"}}"#;
        assert_eq!(timestamp_of_line(line), ts("2026-01-01T00:00:00Z"));
        assert_eq!(timestamp_of_line(br#"{"snapshot":{"timestamp":"2026-01-01T00:00:00Z"}}"#), None);
        assert_eq!(timestamp_of_line(br#"{"timestamp":"not a time"}"#), None);
        assert_eq!(timestamp_of_line(br#"{"timestamp":"2026-01-01T00:00:00Z""#), None);
        assert_eq!(timestamp_of_line(b"\xff"), None);
    }

    #[test]
    fn last_line_with_a_timestamp_wins_and_a_torn_tail_is_ignored() {
        let data =
            b"{\"timestamp\":\"2026-01-01T00:00:01Z\"}\n{\"timestamp\":\"2026-01-01T00:00:02Z\"}\n{\"summary\":1}\n\n{\"timestamp\":\"2026-01-01T00:00:09Z\"";
        assert_eq!(last(data), ts("2026-01-01T00:00:02Z"));
        assert_eq!(last(b"{\"timestamp\":\"2026-01-01T00:00:01Z\"}\r\n"), ts("2026-01-01T00:00:01Z"));
        assert_eq!(last(b""), None);
        assert_eq!(last(b"\n"), None);
        assert_eq!(last(b"{\"timestamp\":\"2026-01-01T00:00:01Z\"}"), None);
        assert_eq!(last(b"{\"role\":\"user\"}\n"), None);
    }

    #[test]
    fn lines_longer_than_a_block_are_read_whole() {
        let big = "x".repeat(3 * FIRST_BLOCK as usize);
        let data = format!("{{\"timestamp\":\"2026-01-01T00:00:01Z\"}}\n{{\"timestamp\":\"2026-01-01T00:00:03Z\",\"t\":\"{big}\"}}\n{{\"t\":\"{big}\"}}\n");
        assert_eq!(last(data.as_bytes()), ts("2026-01-01T00:00:03Z"));
        // The earliest line is found too, across several blocks.
        let data = format!("{{\"timestamp\":\"2026-01-01T00:00:01Z\"}}\n{{\"t\":\"{big}\"}}\n{{\"t\":\"{big}\"}}\n");
        assert_eq!(last(data.as_bytes()), ts("2026-01-01T00:00:01Z"));
    }

    #[test]
    fn gives_up_after_the_line_limit_without_reading_everything() {
        let mut data = b"{\"timestamp\":\"2026-01-01T00:00:01Z\"}\n".to_vec();
        for _ in 0..MAX_LINES {
            data.extend_from_slice(b"{\"role\":\"user\",\"content\":\"hi\"}\n");
        }
        assert_eq!(last(&data), None);
        data.truncate(data.len() - b"{\"role\":\"user\",\"content\":\"hi\"}\n".len());
        assert_eq!(last(&data), ts("2026-01-01T00:00:01Z"));
    }

    #[test]
    fn reads_only_the_tail_of_a_large_file() {
        /// A reader that counts the bytes read.
        struct Counting<'a>(Cursor<&'a [u8]>, u64);
        impl Read for Counting<'_> {
            fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
                let n = self.0.read(b)?;
                self.1 += n as u64;
                Ok(n)
            }
        }
        impl Seek for Counting<'_> {
            fn seek(&mut self, p: SeekFrom) -> io::Result<u64> {
                self.0.seek(p)
            }
        }
        let line = b"{\"type\":\"assistant\",\"timestamp\":\"2026-01-01T00:00:01Z\",\"pad\":\"................................\"}\n";
        let data: Vec<u8> = line.iter().copied().cycle().take(line.len() * 200_000).collect();
        let mut r = Counting(Cursor::new(&data), 0);
        assert_eq!(last_timestamp_in(&mut r, data.len() as u64).unwrap(), ts("2026-01-01T00:00:01Z"));
        assert!(r.1 <= FIRST_BLOCK, "read {} of {} bytes", r.1, data.len());
    }
}
