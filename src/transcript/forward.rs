//! Forward reading for the stages that walk a whole stream in order (`history`, `orphans`):
//! framing, format detection and line numbering, with each line handed on together with its
//! meaning.
//!
//! It is the check pipeline's front half without validation: the same [`LineSplitter`](crate::transcript::lines::LineSplitter), the
//! same [`Detector`] and the same [`read_line`], so a line means the same thing to every verb.
//!
//! Calling order: [`Forward::feed`] chunks of the stream in order, then [`Forward::finish`] once.

use super::checker::{read_framed, Outcome};
use super::finding::{Finding, Kind};
use super::formats::{Detector, Format};
use super::lines::{Framed, Numbered};

/// Frames, numbers and reads lines in stream order. See the module docs.
#[derive(Debug)]
pub struct Forward {
    lines: Numbered,
    detector: Detector,
    max: usize,
}

impl Forward {
    /// A reader for a stream of `format` (or one to detect) with lines up to `max_line_bytes`.
    pub fn new(format: Option<Format>, max_line_bytes: usize) -> Self {
        Forward { lines: Numbered::new(max_line_bytes), detector: format.map_or_else(Detector::new, Detector::fixed), max: max_line_bytes }
    }

    /// The format, once known.
    pub fn format(&self) -> Option<Format> {
        self.detector.format()
    }

    /// Feeds the next chunk; `out` receives each complete line's outcome, its bytes (empty for
    /// a line too long to keep) and the format known at that line.
    pub fn feed(&mut self, chunk: &[u8], out: &mut impl FnMut(Outcome<'_>, &[u8], Option<Format>)) {
        let (detector, max) = (&mut self.detector, self.max);
        self.lines.feed(chunk, &mut |f| match f {
            Framed::TooLong { number, len } => {
                let f = Finding::new(number, Kind::LineTooLong, format!("line of {len} bytes is over the limit of {max}"));
                out(Outcome::Fault(f), &[], detector.format());
            }
            Framed::Line(l) => {
                if detector.wants_more() {
                    detector.observe(l.bytes);
                }
                let format = detector.format();
                out(read_framed(&l, max, format), l.bytes, format);
            }
        });
    }

    /// Ends the stream: a last line without a newline is reported as `torn_line` (it is never
    /// read: its writer was interrupted).
    pub fn finish(&mut self, out: &mut impl FnMut(Outcome<'_>, &[u8], Option<Format>)) {
        if let Some((line, t)) = self.lines.finish() {
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
                Outcome::Dataset(n, _) => format!("{n} dataset"),
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
