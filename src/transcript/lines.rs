//! Line framing: byte chunks in, complete lines out.
//!
//! The splitter is fed the file in chunks of any size (one chunk, one byte at a time, or whatever a
//! `read` returned) and hands out [`Block`]s of complete lines that borrow from the chunk whenever
//! they can. Only a line that spans two chunks is copied, into a carry buffer that never grows past
//! the line limit: a longer line is skipped and reported as [`Block::TooLong`] without being held.
//!
//! *Invariant:* the lines and their 1-based physical numbers do not depend on how the input was
//! cut into chunks (a property test in this module proves it).

use memchr::{memchr, memrchr};

/// Lines longer than this (in bytes, without the newline) are skipped as `line_too_long`.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 << 20;

/// The UTF-8 byte-order mark. At the very start of a stream (offset 0) it says how the file is
/// encoded and is not part of the first line's content: framing leaves it out of that line
/// ([`Line::bytes`]), so the line is read as the JSON it is, while repair keeps the bytes (an
/// untouched first line is copied with its mark; a removed one goes to the rejects with it).
/// Anywhere else it is an ordinary (and, for JSON, invalid) character.
pub const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The content of a line that starts at stream `offset`: without a leading [`BOM`] when the
/// line starts the stream.
pub fn without_bom(offset: u64, line: &[u8]) -> &[u8] {
    if offset == 0 {
        line.strip_prefix(BOM).unwrap_or(line)
    } else {
        line
    }
}

/// A piece of framed input handed to the consumer of a [`LineSplitter`], in stream order.
///
/// Blocks carry byte offsets, not line numbers: the consumer numbers lines as it walks them
/// (every `\n` ends one physical line, a [`Block::TooLong`] is one line), which spares a pass
/// over the bytes just to count newlines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block<'a> {
    /// One or more complete lines. `bytes` ends with `\n`; `offset` is the stream offset of its
    /// first byte.
    Lines {
        /// Stream offset of `bytes[0]`.
        offset: u64,
        /// Complete lines, each terminated by `\n`.
        bytes: &'a [u8],
    },
    /// Bytes of a line that has grown over the limit, as they arrive (only with
    /// [`LineSplitter::keep_long`]; the line then ends with a [`Block::TooLong`], or for a blank
    /// line with a `Lines` block holding its newline).
    LongBytes(&'a [u8]),
    /// One line longer than the limit; its bytes were dropped as they arrived.
    TooLong {
        /// Stream offset of its first byte.
        offset: u64,
        /// Its length in bytes, without the newline (and a `\r` before it).
        len: u64,
        /// Its length on disk, its line terminator included.
        raw: u64,
    },
}

/// What [`LineSplitter::cut`] hands on: complete lines inside the chunk it was given, as a
/// range of it, or any other block (lines completed in the carry buffer, over-long lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cut<'a> {
    /// Complete lines at `chunk[range]`, the first at stream offset `offset`.
    InChunk {
        /// Stream offset of `chunk[range.start]`.
        offset: u64,
        /// Where they are in the chunk; the range ends with a `\n`.
        range: std::ops::Range<usize>,
    },
    /// A block that does not lie in the chunk, or is not lines.
    Block(Block<'a>),
}

/// A last line without its newline, reported by [`LineSplitter::finish`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Torn<'a> {
    /// Stream offset of its first byte.
    pub offset: u64,
    /// Its bytes, or `None` when it was longer than the limit and not kept.
    pub bytes: Option<&'a [u8]>,
    /// Its length in bytes.
    pub len: u64,
}

/// Splits a byte stream into lines. See the module docs.
#[derive(Debug)]
pub struct LineSplitter {
    max: usize,
    carry: Vec<u8>,
    carry_offset: u64,
    /// Bytes of an over-long line seen so far, while it is being skipped.
    skipping: Option<u64>,
    /// Whether the last byte of the line being skipped was `\r`.
    skip_last_cr: bool,
    /// Whether the line being skipped is whitespace so far.
    skip_blank: bool,
    /// Hand on the bytes of over-long lines instead of dropping them.
    keep_long: bool,
    offset: u64,
}

impl LineSplitter {
    /// A splitter at offset 0.
    pub fn new(max_line_bytes: usize) -> Self {
        Self::resume(max_line_bytes, 0)
    }

    /// A splitter that continues a stream at byte `offset`, a line start (used when tailing
    /// resumes from a checkpoint).
    pub fn resume(max_line_bytes: usize, offset: u64) -> Self {
        LineSplitter {
            max: max_line_bytes.max(1),
            carry: Vec::new(),
            carry_offset: offset,
            skipping: None,
            skip_last_cr: false,
            skip_blank: false,
            keep_long: false,
            offset,
        }
    }

    /// Hands on the bytes of over-long lines as [`Block::LongBytes`] (the repair rewriter keeps
    /// them in the rejects file) instead of dropping them.
    pub fn keep_long(mut self) -> Self {
        self.keep_long = true;
        self
    }

    /// Stream offset just after the last complete line handed out: where a reader that restarts
    /// must resume so that a partial line is read again, whole.
    pub fn committed_offset(&self) -> u64 {
        if self.skipping.is_some() || !self.carry.is_empty() {
            self.carry_offset
        } else {
            self.offset
        }
    }

    /// Whether the incomplete last line held so far is whitespace only (a [`BOM`] that starts
    /// the stream is not content).
    pub fn pending_is_blank(&self) -> bool {
        if self.skipping.is_some() {
            self.skip_blank
        } else {
            is_blank(without_bom(self.carry_offset, &self.carry))
        }
    }

    /// The bytes of the incomplete last line held so far (none while an over-long one is
    /// being skipped).
    pub fn pending(&self) -> &[u8] {
        if self.skipping.is_some() {
            &[]
        } else {
            &self.carry
        }
    }

    /// Bytes of an incomplete last line currently held (or being skipped).
    pub fn pending_bytes(&self) -> u64 {
        self.skipping.unwrap_or(self.carry.len() as u64)
    }

    /// Feeds the next chunk of the stream; `out` receives every block it completes, in order.
    pub fn feed(&mut self, chunk: &[u8], out: &mut impl FnMut(Block<'_>)) {
        self.cut(chunk, &mut |c| match c {
            Cut::InChunk { offset, range } => out(Block::Lines { offset, bytes: &chunk[range] }),
            Cut::Block(b) => out(b),
        });
    }

    /// Like [`LineSplitter::feed`], but complete lines that lie inside `chunk` are handed on as
    /// the range they occupy in it, so that a caller that owns the chunk can send it elsewhere
    /// with the ranges instead of copying the lines out.
    pub fn cut(&mut self, chunk: &[u8], out: &mut impl FnMut(Cut<'_>)) {
        let mut pos = 0;
        // 1. Complete the line in progress, if any.
        if self.skipping.is_some() || !self.carry.is_empty() {
            let Some(i) = memchr(b'\n', chunk) else {
                self.hold(chunk, out);
                self.offset += chunk.len() as u64;
                return;
            };
            self.hold(&chunk[..i], out);
            let len = self.pending_bytes() - u64::from(self.held_cr());
            let blank = if self.skipping.is_some() { self.skip_blank } else { is_blank(without_bom(self.carry_offset, &self.carry)) };
            if !blank && (self.skipping.is_some() || len > self.max as u64) {
                let raw = self.pending_bytes() + 1;
                out(Cut::Block(Block::TooLong { offset: self.carry_offset, len, raw }));
            } else {
                // A blank line, however long, still counts as a line: hand it on as one.
                if self.skipping.is_some() {
                    self.carry.clear();
                }
                self.carry.push(b'\n');
                out(Cut::Block(Block::Lines { offset: self.carry_offset, bytes: &self.carry }));
            }
            self.skipping = None;
            self.release_carry();
            pos = i + 1;
        }
        // 2. The complete lines inside this chunk, as one block.
        if let Some(last) = memrchr(b'\n', &chunk[pos..]) {
            out(Cut::InChunk { offset: self.offset + pos as u64, range: pos..pos + last + 1 });
            pos += last + 1;
        }
        // 3. The start of a line that continues in the next chunk.
        let tail = &chunk[pos..];
        if !tail.is_empty() {
            self.carry_offset = self.offset + pos as u64;
            self.hold(tail, out);
        }
        self.offset += chunk.len() as u64;
    }

    /// Adds bytes of the line in progress: kept while the line can still fit the limit (one
    /// byte more is allowed for a `\r` before the newline), counted only once it cannot.
    fn hold(&mut self, bytes: &[u8], out: &mut impl FnMut(Cut<'_>)) {
        if bytes.is_empty() {
            return;
        }
        if let Some(seen) = self.skipping.as_mut() {
            *seen += bytes.len() as u64;
            self.skip_last_cr = bytes.last() == Some(&b'\r');
            self.skip_blank &= is_blank(bytes);
            if self.keep_long {
                out(Cut::Block(Block::LongBytes(bytes)));
            }
        } else if self.carry.len() + bytes.len() > self.max + 1 {
            self.skipping = Some((self.carry.len() + bytes.len()) as u64);
            self.skip_last_cr = bytes.last() == Some(&b'\r');
            // A byte-order mark that starts the stream is not content (it may lie across the
            // held bytes and these; at least three bytes are seen by now).
            let start: Vec<u8> = self.carry.iter().chain(bytes).take(BOM.len()).copied().collect();
            let mark = if self.carry_offset == 0 && start == BOM { BOM.len() } else { 0 };
            let (in_carry, in_bytes) = (mark.min(self.carry.len()), mark.saturating_sub(self.carry.len()).min(bytes.len()));
            self.skip_blank = is_blank(&self.carry[in_carry..]) && is_blank(&bytes[in_bytes..]);
            if self.keep_long {
                out(Cut::Block(Block::LongBytes(&self.carry)));
                out(Cut::Block(Block::LongBytes(bytes)));
            }
            self.release_carry();
        } else {
            self.carry.extend_from_slice(bytes);
        }
    }

    /// Whether the line in progress ends with `\r` (not part of its content if a `\n` follows).
    fn held_cr(&self) -> bool {
        if self.skipping.is_some() {
            self.skip_last_cr
        } else {
            self.carry.last() == Some(&b'\r')
        }
    }

    /// Ends the stream: returns the last line if it had no newline (a torn line). A torn line
    /// made only of whitespace is a blank line and is ignored.
    pub fn finish(&mut self) -> Option<Torn<'_>> {
        if let Some(len) = self.skipping.take() {
            if self.skip_blank {
                return None;
            }
            return Some(Torn { offset: self.carry_offset, bytes: None, len });
        }
        if self.carry.is_empty() || is_blank(without_bom(self.carry_offset, &self.carry)) {
            return None;
        }
        Some(Torn { offset: self.carry_offset, bytes: Some(&self.carry), len: self.carry.len() as u64 })
    }

    fn release_carry(&mut self) {
        if self.carry.capacity() > (1 << 20) {
            self.carry = Vec::new();
        } else {
            self.carry.clear();
        }
    }
}

/// Whether a line holds only ASCII whitespace (such lines are ignored).
pub fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'\x0b' | b'\x0c'))
}

/// One line of a [`Block::Lines`] block, without its `\n` (and without a `\r` before it, and
/// without a [`BOM`] that starts the stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// 1-based physical line number.
    pub number: u64,
    /// Stream offset of its first byte.
    pub offset: u64,
    /// Its content.
    pub bytes: &'a [u8],
    /// Its length on disk including the line terminator.
    pub raw_len: usize,
    /// Whether a [`BOM`] before the content was left out.
    pub bom: bool,
}

impl Line<'_> {
    /// The line limit for [`Line::bytes`]: `max` counts the whole line on disk (a [`BOM`]
    /// included, a `\r` before the newline not), as the splitter counts it.
    pub fn limit(&self, max: usize) -> usize {
        if self.bom {
            max.saturating_sub(BOM.len())
        } else {
            max
        }
    }
}

/// Iterates the non-blank lines of a block of complete lines, numbering them from
/// `first_line`. After the loop, [`Lines::next_number`] is the number of the line that follows
/// the block (blank lines count).
pub fn lines(first_line: u64, offset: u64, bytes: &[u8]) -> Lines<'_> {
    Lines { bytes, start: 0, number: first_line, offset }
}

/// See [`lines`].
#[derive(Debug, Clone)]
pub struct Lines<'a> {
    bytes: &'a [u8],
    start: usize,
    number: u64,
    offset: u64,
}

impl Lines<'_> {
    /// The number the next line would get: after exhaustion, the line after the block.
    pub fn next_number(&self) -> u64 {
        self.number
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = Line<'a>;

    fn next(&mut self) -> Option<Line<'a>> {
        loop {
            let rest = &self.bytes[self.start..];
            let nl = memchr(b'\n', rest)?;
            let raw = &rest[..nl];
            let offset = self.offset + self.start as u64;
            let content = raw.strip_suffix(b"\r").unwrap_or(raw);
            let bytes = without_bom(offset, content);
            let line = Line { number: self.number, offset, bytes, raw_len: nl + 1, bom: bytes.len() < content.len() };
            self.start += nl + 1;
            self.number += 1;
            if !is_blank(line.bytes) {
                return Some(line);
            }
        }
    }
}

/// What a [`Numbered`] splitter hands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framed<'a> {
    /// A complete, non-blank line.
    Line(Line<'a>),
    /// A line longer than the limit, skipped unread.
    TooLong {
        /// Its 1-based physical line number.
        number: u64,
        /// Its length in bytes, without the newline.
        len: u64,
    },
}

/// A [`LineSplitter`] that also numbers the lines: what every consumer that walks lines one
/// by one needs (the check pipeline numbers its blocks itself, to parse them in parallel).
#[derive(Debug)]
pub struct Numbered {
    splitter: LineSplitter,
    next: u64,
}

impl Numbered {
    /// Lines from the start of a stream, numbered from 1.
    pub fn new(max_line_bytes: usize) -> Self {
        Numbered { splitter: LineSplitter::new(max_line_bytes), next: 1 }
    }

    /// Feeds the next chunk; `out` receives its complete lines in order.
    pub fn feed(&mut self, chunk: &[u8], out: &mut impl FnMut(Framed<'_>)) {
        let next = &mut self.next;
        self.splitter.feed(chunk, &mut |b| match b {
            Block::LongBytes(_) => {}
            Block::TooLong { len, .. } => {
                out(Framed::TooLong { number: *next, len });
                *next += 1;
            }
            Block::Lines { offset, bytes } => {
                let mut it = lines(*next, offset, bytes);
                for l in it.by_ref() {
                    out(Framed::Line(l));
                }
                *next = it.next_number();
            }
        });
    }

    /// Ends the stream: the torn last line, if any, with its number.
    pub fn finish(&mut self) -> Option<(u64, Torn<'_>)> {
        let n = self.next;
        self.splitter.finish().map(|t| (n, t))
    }

    /// The number the next line will get.
    pub fn next_line(&self) -> u64 {
        self.next
    }

    /// The splitter (offsets, the partial line held).
    pub fn splitter(&self) -> &LineSplitter {
        &self.splitter
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What a consumer sees: (line, offset, content) or a skipped/torn marker.
    fn frame(input: &[u8], cuts: &[usize], max: usize) -> Vec<(u64, u64, String)> {
        let mut s = LineSplitter::new(max);
        let mut got = Vec::new();
        let mut next = 1u64;
        let mut push = |b: Block<'_>| match b {
            Block::Lines { offset, bytes } => {
                let mut it = lines(next, offset, bytes);
                for l in it.by_ref() {
                    let text = if l.bytes.len() > max { format!("<too long {}>", l.bytes.len()) } else { String::from_utf8_lossy(l.bytes).into_owned() };
                    got.push((l.number, l.offset, text));
                }
                next = it.next_number();
            }
            Block::TooLong { offset, len, .. } => {
                got.push((next, offset, format!("<too long {len}>")));
                next += 1;
            }
            Block::LongBytes(_) => {}
        };
        let mut start = 0;
        for &c in cuts {
            let c = c.min(input.len()).max(start);
            s.feed(&input[start..c], &mut push);
            start = c;
        }
        s.feed(&input[start..], &mut push);
        if let Some(t) = s.finish() {
            got.push((next, t.offset, format!("<torn {}>", t.len)));
        }
        got
    }

    #[test]
    fn numbers_physical_lines_and_skips_blank_ones() {
        let got = frame(b"a\n\n  \r\nb\r\nc", &[], 100);
        assert_eq!(got, vec![(1, 0, "a".into()), (4, 7, "b".into()), (5, 10, "<torn 1>".into())]);
    }

    #[test]
    fn over_long_line_is_skipped_across_chunks() {
        let input = b"ok\n0123456789\nnext\n";
        let got = frame(input, &[4, 6, 8], 5);
        assert_eq!(got, vec![(1, 0, "ok".into()), (2, 3, "<too long 10>".into()), (3, 14, "next".into())]);
    }

    #[test]
    fn over_long_torn_line() {
        assert_eq!(frame(b"x\n0123456789", &[3], 4), vec![(1, 0, "x".into()), (2, 2, "<torn 10>".into())]);
    }

    #[test]
    fn keep_long_hands_on_every_byte() {
        let input = b"ok\n0123456789\r\nnext\n";
        for cut in 0..input.len() {
            let mut s = LineSplitter::new(5).keep_long();
            let mut out = Vec::new();
            let mut push = |b: Block<'_>| match b {
                Block::Lines { bytes, .. } => out.extend_from_slice(bytes),
                Block::LongBytes(bytes) => out.extend_from_slice(bytes),
                Block::TooLong { .. } => out.extend_from_slice(b"<end>\n"),
            };
            s.feed(&input[..cut], &mut push);
            s.feed(&input[cut..], &mut push);
            let text = String::from_utf8(out).unwrap();
            // An over-long line that spans chunks arrives as LongBytes; one inside a chunk is a
            // plain line the consumer measures.
            assert!(text == "ok\n0123456789\r<end>\nnext\n" || text == "ok\n0123456789\r\nnext\n", "cut {cut}: {text:?}");
        }
    }

    #[test]
    fn committed_offset_excludes_partial_line() {
        let mut s = LineSplitter::new(100);
        s.feed(b"one\ntw", &mut |_| {});
        assert_eq!(s.committed_offset(), 4);
        s.feed(b"o\n", &mut |_| {});
        assert_eq!(s.committed_offset(), 8);
    }

    proptest! {
        #[test]
        fn chunking_does_not_change_lines(
            lines in proptest::collection::vec("[a-z \\r]{0,12}", 0..12),
            torn in proptest::option::of("[a-z]{1,5}"),
            mut cuts in proptest::collection::vec(0usize..200, 0..20),
            max in 3usize..16,
        ) {
            let mut input = lines.join("\n").into_bytes();
            if !lines.is_empty() { input.push(b'\n'); }
            if let Some(t) = torn { input.extend_from_slice(t.as_bytes()); }
            cuts.sort();
            let whole = frame(&input, &[], max);
            let each: Vec<usize> = (0..input.len()).collect();
            prop_assert_eq!(&whole, &frame(&input, &cuts, max));
            prop_assert_eq!(&whole, &frame(&input, &each, max));
        }
    }
}
