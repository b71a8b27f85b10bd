//! The rejects stream: JSON lines, one per input line that is not in the output as it was:
//! `{"line", "action": "removed"|"modified"|"merged", "reason", "text"}` ([`write_record`]), with
//! `"base64"` instead of `"text"` for bytes that are not UTF-8, for text whose escapes would
//! make it longer than base64 (control bytes), and for over-long lines. A record of a long line
//! is emitted in pieces of 64 KiB of the line, so it needs no memory of its size. The
//! bytes are the line's own, without its `\n`: a `\r` before it and a byte-order mark that
//! starts the file are kept, so that the record plus a newline is the line as it was on disk.
//! A modified line's original is kept there too: nothing the repair changes is lost. The
//! rewriter, the salvage and the dataset repair all write these records.

use super::origins::{Action, Change};
use crate::transcript::finding::Kind;
use crate::transcript::lines::{Block, LineSplitter};
use crate::transcript::scan;
use base64::Engine;
use std::collections::VecDeque;
use std::io::Write;

/// Bytes of a removed line a rejects record takes at a time past this size: the record goes out
/// in pieces.
pub(crate) const REJECT_PIECE: usize = 64 << 10;

/// Appends `data` in standard base64 (padded) to `out`.
fn push_base64(out: &mut Vec<u8>, data: &[u8]) {
    let start = out.len();
    out.resize(start + base64::encoded_len(data.len(), true).expect("a line's length fits"), 0);
    let n = base64::engine::general_purpose::STANDARD.encode_slice(data, &mut out[start..]).expect("sized to fit");
    out.truncate(start + n);
}

/// What the rewriter produces.
#[derive(Debug, PartialEq, Eq)]
pub enum Emit<'a> {
    /// Bytes of the repaired transcript.
    Out(&'a [u8]),
    /// Bytes of the rejects stream (whole JSON lines, or pieces of one: the record of a long
    /// line goes out in pieces).
    Reject(&'a [u8]),
}

/// Writes one rejects record, `{"line", "action", "reason", "text" | "base64"}` (action and
/// reason are plain words), into `buf` (a buffer reused between lines) and hands it to `out`, in
/// pieces for a long line. `text` when the line is UTF-8, not over the limit `max` (however it
/// was read: in one piece, or streamed across reads) and its escapes do not make it longer than
/// base64 would (a line of control bytes escapes to six bytes each); `base64` otherwise. The
/// dataset repair writes the same records.
pub fn write_record(buf: &mut Vec<u8>, line: u64, action: Action, reason: Option<Kind>, original: &[u8], max: usize, out: &mut impl FnMut(Emit<'_>)) {
    buf.clear();
    let write = "writing to a Vec cannot fail";
    write!(buf, "{{\"line\":{line},\"action\":\"{}\"", action.as_str()).expect(write);
    if let Some(r) = reason {
        write!(buf, ",\"reason\":\"{}\"", r.as_str()).expect(write);
    }
    let over = original.strip_suffix(b"\r").unwrap_or(original).len() > max;
    let text = simdutf8::basic::from_utf8(original).ok().filter(|_| !over && scan::json_string_len(original) <= original.len().div_ceil(3) * 4);
    match text {
        Some(text) if original.len() <= REJECT_PIECE => {
            buf.extend_from_slice(b",\"text\":");
            scan::write_json_string(buf, text);
        }
        Some(text) => {
            buf.extend_from_slice(b",\"text\":\"");
            out(Emit::Reject(buf));
            let mut rest = text;
            while !rest.is_empty() {
                let mut cut = rest.len().min(REJECT_PIECE);
                while !rest.is_char_boundary(cut) {
                    cut -= 1;
                }
                let (piece, after) = rest.split_at(cut);
                buf.clear();
                scan::write_json_string(buf, piece);
                out(Emit::Reject(&buf[1..buf.len() - 1]));
                rest = after;
            }
            buf.clear();
            buf.push(b'"');
        }
        None if original.len() <= REJECT_PIECE => {
            buf.extend_from_slice(b",\"base64\":\"");
            push_base64(buf, original);
            buf.push(b'"');
        }
        None => {
            buf.extend_from_slice(b",\"base64\":\"");
            out(Emit::Reject(buf));
            // Whole groups of three bytes per piece: no padding until the end.
            for piece in original.chunks(REJECT_PIECE / 3 * 3) {
                buf.clear();
                push_base64(buf, piece);
                out(Emit::Reject(buf));
            }
            buf.clear();
            buf.push(b'"');
        }
    }
    buf.extend_from_slice(b"}\n");
    out(Emit::Reject(buf));
    if buf.capacity() > 1 << 20 {
        // Not kept for every later line.
        *buf = Vec::new();
    }
}

/// The head of the record of an over-long line, whose base64 follows as it streams.
pub(crate) fn long_record_head(line: u64, action: Action, reason: Option<Kind>) -> Vec<u8> {
    let reason = reason.map(|r| format!(",\"reason\":\"{}\"", r.as_str())).unwrap_or_default();
    format!("{{\"line\":{line},\"action\":\"{}\"{reason},\"base64\":\"", action.as_str()).into_bytes()
}

/// Streams an over-long line into a base64 record as its bytes arrive, a piece at a time:
/// nothing the size of the line is held. The dataset repair streams its long lines with it too.
#[derive(Debug, Default)]
pub(crate) struct LongRecord {
    pub(crate) open: bool,
    /// The bytes of an incomplete group of three left over from the last piece.
    rest: Vec<u8>,
    buf: Vec<u8>,
}

impl LongRecord {
    /// Starts the record with its `head` ([`long_record_head`]).
    pub(crate) fn start(&mut self, head: &[u8], out: &mut impl FnMut(Emit<'_>)) {
        self.open = true;
        out(Emit::Reject(head));
    }

    /// The next bytes of the line.
    pub(crate) fn bytes(&mut self, bytes: &[u8], out: &mut impl FnMut(Emit<'_>)) {
        // Complete the group of three bytes left over from the last piece, then encode whole
        // groups straight from `bytes`.
        let mut bytes = bytes;
        if !self.rest.is_empty() {
            let k = (3 - self.rest.len()).min(bytes.len());
            self.rest.extend_from_slice(&bytes[..k]);
            bytes = &bytes[k..];
            if self.rest.len() < 3 {
                return;
            }
            self.buf.clear();
            push_base64(&mut self.buf, &self.rest);
            out(Emit::Reject(&self.buf));
            self.rest.clear();
        }
        let whole = bytes.len() / 3 * 3;
        for piece in bytes[..whole].chunks(REJECT_PIECE / 3 * 3) {
            self.buf.clear();
            push_base64(&mut self.buf, piece);
            out(Emit::Reject(&self.buf));
        }
        self.rest.extend_from_slice(&bytes[whole..]);
    }

    /// Ends the record; whether one was open.
    pub(crate) fn close(&mut self, out: &mut impl FnMut(Emit<'_>)) -> bool {
        if !std::mem::take(&mut self.open) {
            return false;
        }
        self.buf.clear();
        push_base64(&mut self.buf, &self.rest);
        self.buf.extend_from_slice(b"\"}\n");
        out(Emit::Reject(&self.buf));
        self.rest.clear();
        if self.buf.capacity() > 1 << 20 {
            self.buf = Vec::new();
        }
        true
    }

    /// Drops the record without writing its end (its line is not rejected after all).
    pub(crate) fn discard(&mut self) {
        self.open = false;
        self.rest.clear();
    }
}

/// The rejects of a repair that took several rounds, written from the input itself: one record
/// per changed line with its final action, its own bytes and its own line number. Calling
/// order: [`RejectWriter::feed`] the whole input, then [`RejectWriter::finish`].
#[derive(Debug)]
pub struct RejectWriter {
    changes: VecDeque<Change>,
    max: usize,
    splitter: Option<LineSplitter>,
    next_line: u64,
    long: LongRecord,
    buf: Vec<u8>,
}

impl RejectWriter {
    /// A writer for `changes` (sorted by line, one per line), over input framed with
    /// `max_line_bytes`.
    pub fn new(changes: Vec<Change>, max_line_bytes: usize) -> Self {
        RejectWriter {
            changes: changes.into(),
            max: max_line_bytes,
            splitter: Some(LineSplitter::new(max_line_bytes).keep_long()),
            next_line: 1,
            long: LongRecord::default(),
            buf: Vec::new(),
        }
    }

    fn wanted(&mut self, line: u64) -> Option<Change> {
        while self.changes.front().is_some_and(|c| c.line < line) {
            self.changes.pop_front();
        }
        self.changes.front().filter(|c| c.line == line).copied()
    }

    /// Feeds the next chunk of the input.
    pub fn feed(&mut self, chunk: &[u8], out: &mut impl FnMut(Emit<'_>)) {
        let mut splitter = self.splitter.take().expect("not finished");
        splitter.feed(chunk, &mut |b| match b {
            Block::Lines { bytes, .. } => {
                let mut start = 0;
                for nl in memchr::memchr_iter(b'\n', bytes) {
                    if let Some(c) = self.wanted(self.next_line) {
                        write_record(&mut self.buf, c.line, c.action, c.reason, &bytes[start..nl], self.max, out);
                    }
                    self.next_line += 1;
                    start = nl + 1;
                }
            }
            Block::LongBytes(bytes) => {
                if let Some(c) = self.wanted(self.next_line) {
                    if !self.long.open {
                        self.long.start(&long_record_head(c.line, c.action, c.reason), out);
                    }
                    self.long.bytes(bytes, out);
                }
            }
            Block::TooLong { .. } => {
                self.long.close(out);
                self.next_line += 1;
            }
        });
        self.splitter = Some(splitter);
    }

    /// Ends the input (a torn last line).
    pub fn finish(mut self, out: &mut impl FnMut(Emit<'_>)) {
        let mut splitter = self.splitter.take().expect("not finished");
        let line = self.next_line;
        let torn = splitter.finish().map(|t| t.bytes.map(<[u8]>::to_vec));
        if let Some(c) = self.wanted(line) {
            match torn {
                Some(Some(bytes)) => {
                    write_record(&mut self.buf, c.line, c.action, c.reason, &bytes, self.max, out);
                }
                _ => {
                    self.long.close(out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_written_again_from_the_input() {
        let input = b"a\r\n\xEF\xBB\xBFb\nccccccccccc\r\nd";
        let changes = vec![
            Change { line: 1, action: Action::Modified, reason: None, parent: true },
            Change { line: 2, action: Action::Removed, reason: Some(Kind::MalformedLine), parent: false },
            Change { line: 3, action: Action::Removed, reason: Some(Kind::LineTooLong), parent: false },
            Change { line: 4, action: Action::Removed, reason: Some(Kind::TornLine), parent: false },
        ];
        for chunk in [1, 2, 5, 100] {
            let mut w = RejectWriter::new(changes.clone(), 5);
            let mut out = Vec::new();
            let mut emit = |e: Emit<'_>| {
                if let Emit::Reject(b) = e {
                    out.extend_from_slice(b)
                }
            };
            for piece in input.chunks(chunk) {
                w.feed(piece, &mut emit);
            }
            w.finish(&mut emit);
            let text = String::from_utf8(out).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines[0], r#"{"line":1,"action":"modified","text":"a\r"}"#, "chunks of {chunk}");
            // A mark that does not start the file is an ordinary character of its line.
            assert_eq!(lines[1], "{\"line\":2,\"action\":\"removed\",\"reason\":\"malformed_line\",\"text\":\"\u{feff}b\"}", "chunks of {chunk}");
            assert!(lines[2].starts_with(r#"{"line":3,"action":"removed","reason":"line_too_long","base64":""#), "chunks of {chunk}");
            assert_eq!(lines[3], r#"{"line":4,"action":"removed","reason":"torn_line","text":"d"}"#, "chunks of {chunk}");
        }
    }
}
