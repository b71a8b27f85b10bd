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
use crate::sources::reverse::{read_backwards, FileSource, PageSource};
use crate::transcript::progress::Progress;
use crate::transcript::reverse::{RevItem, ReverseSplitter};
use std::io;
use std::path::Path;

/// First block read from the end; later blocks grow with what was read
/// ([`read_backwards`]).
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
    let file = crate::sources::regular::open_file(path)?;
    last_timestamp_in(&mut FileSource::new(file)?)
}

/// [`last_timestamp`] over any source read backwards, through the same reverse reader as
/// `context` (framing: `\r\n`, blank lines, a byte-order mark, a torn last line).
pub fn last_timestamp_in(source: &mut impl PageSource) -> io::Result<Option<Timestamp>> {
    let len = source.len();
    let floor = len.saturating_sub(MAX_BYTES);
    let mut splitter = ReverseSplitter::new(len, MAX_BYTES as usize);
    let (mut found, mut looked) = (None, 0usize);
    read_backwards(source, &mut splitter, FIRST_BLOCK as usize, |item, _| match item {
        RevItem::Line { offset, .. } | RevItem::TooLong { offset, .. } if offset < floor => Progress::Complete,
        RevItem::Line { bytes, .. } => {
            found = timestamp_of_line(bytes);
            looked += 1;
            if found.is_some() || looked >= MAX_LINES {
                Progress::Complete
            } else {
                Progress::NeedMore
            }
        }
        // A torn last line is an interrupted write, not read (as in `check`).
        RevItem::TooLong { .. } | RevItem::Torn { .. } => Progress::NeedMore,
    })?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last(mut data: &[u8]) -> Option<Timestamp> {
        last_timestamp_in(&mut data).unwrap()
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
        /// A source that counts the bytes read.
        struct Counting<'a>(&'a [u8], u64);
        impl PageSource for Counting<'_> {
            fn len(&self) -> u64 {
                self.0.len() as u64
            }
            fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<()> {
                self.1 += buf.len() as u64;
                self.0.read_exact_at(buf, offset)
            }
        }
        let line = b"{\"type\":\"assistant\",\"timestamp\":\"2026-01-01T00:00:01Z\",\"pad\":\"................................\"}\n";
        let data: Vec<u8> = line.iter().copied().cycle().take(line.len() * 200_000).collect();
        let mut r = Counting(&data, 0);
        assert_eq!(last_timestamp_in(&mut r).unwrap(), ts("2026-01-01T00:00:01Z"));
        assert!(r.1 <= FIRST_BLOCK, "read {} of {} bytes", r.1, data.len());
    }
}
