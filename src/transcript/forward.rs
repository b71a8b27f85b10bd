//! Forward reading for the stages that walk a whole stream in order (`history`, `orphans`):
//! framing, format detection and line numbering, with each line handed on together with its
//! meaning.
//!
//! It is the check pipeline's front half without validation: the same [`LineSplitter`], the
//! same [`Detector`] and the same [`read_line`], so a line means the same thing to every verb.
//!
//! Calling order: [`Forward::feed`] chunks of the stream in order, then [`Forward::finish`] once.

use super::checker::{read_line, Outcome};
use super::finding::{Finding, Kind};
use super::formats::{Detector, Format};
use super::lines::{self, Block, LineSplitter};

/// Frames, numbers and reads lines in stream order. See the module docs.
#[derive(Debug)]
pub struct Forward {
    splitter: LineSplitter,
    detector: Detector,
    max: usize,
    next_line: u64,
}

impl Forward {
    /// A reader for a stream of `format` (or one to detect) with lines up to `max_line_bytes`.
    pub fn new(format: Option<Format>, max_line_bytes: usize) -> Self {
        Forward {
            splitter: LineSplitter::new(max_line_bytes),
            detector: format.map_or_else(Detector::new, Detector::fixed),
            max: max_line_bytes,
            next_line: 1,
        }
    }

    /// The format, once known.
    pub fn format(&self) -> Option<Format> {
        self.detector.format()
    }

    /// Feeds the next chunk; `out` receives each complete line's outcome, its bytes (empty for
    /// a line too long to keep) and the format known at that line.
    pub fn feed(&mut self, chunk: &[u8], out: &mut impl FnMut(Outcome<'_>, &[u8], Option<Format>)) {
        let (detector, max, next_line) = (&mut self.detector, self.max, &mut self.next_line);
        self.splitter.feed(chunk, &mut |b| match b {
            Block::LongBytes(_) => {}
            Block::TooLong { len, .. } => {
                let f = Finding::new(*next_line, Kind::LineTooLong, format!("line of {len} bytes is over the limit of {max}"));
                *next_line += 1;
                out(Outcome::Fault(f), &[], detector.format());
            }
            Block::Lines { offset, bytes } => {
                let mut it = lines::lines(*next_line, offset, bytes);
                for l in it.by_ref() {
                    if detector.wants_more() {
                        detector.observe(l.bytes);
                    }
                    let format = detector.format();
                    out(read_line(l.number, l.bytes, max, format), l.bytes, format);
                }
                *next_line = it.next_number();
            }
        });
    }

    /// Ends the stream: a last line without a newline is reported as `torn_line` (it is never
    /// read: its writer was interrupted).
    pub fn finish(&mut self, out: &mut impl FnMut(Outcome<'_>, &[u8], Option<Format>)) {
        let line = self.next_line;
        if let Some(t) = self.splitter.finish() {
            let f = Finding::new(line, Kind::TornLine, format!("last line ({} bytes) has no newline: an interrupted write", t.len));
            out(Outcome::Fault(f), &[], self.detector.format());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::model::Entry;

    #[test]
    fn numbers_detects_and_reports_faults() {
        let input = b"{\"type\":\"summary\",\"summary\":\"s\",\"leafUuid\":\"u\"}\n\nnot json\n{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n{\"torn";
        let mut f = Forward::new(None, 1000);
        let mut seen = Vec::new();
        let mut record = |o: Outcome<'_>, _: &[u8], _: Option<Format>| {
            seen.push(match o {
                Outcome::Parsed(n, p) => format!("{n} {}", matches!(p.entry, Entry::Message(_))),
                Outcome::Fault(f) => format!("{} {}", f.line, f.kind),
                Outcome::Undetected(n) => format!("{n} undetected"),
            })
        };
        for chunk in input.chunks(7) {
            f.feed(chunk, &mut record);
        }
        f.finish(&mut record);
        assert_eq!(seen, vec!["1 false", "3 malformed_line", "4 true", "5 torn_line"]);
        assert_eq!(f.format(), Some(Format::ClaudeCode));
    }
}
