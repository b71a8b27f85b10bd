//! Event logs (seed 003 `JsonlEvents`): one event object per line, framed strictly.
//!
//! Unlike transcripts, an event log has no conversation to pair; what matters is that every
//! line is a whole JSON object (a line that is not, or a last line without its newline once the
//! file is quiet, is reported naming the line), how many events of each `type` arrived, and
//! which tool calls started without completing.
//!
//! Tool calls are recognised by their type and id: an event whose `type` mentions a tool call or
//! tool use starts a call (id from `call_id`, `tool_call_id`, `tool_use_id` or `id`); an event
//! with the same id whose type says it ended (`result`, `output`, `complete`, `end`, `finish`,
//! `done`, `error`, `cancel`) completes it.

use crate::transcript::checker::read_line;
use crate::transcript::finding::{Finding, Kind};
use crate::transcript::lines::{Framed, Numbered};
use crate::transcript::scan::{self, RawStr};
use std::collections::{BTreeMap, HashMap};

/// Distinct event types counted by name; later ones count as `other` (bounded metric labels).
pub const MAX_TYPES: usize = 64;

/// The event-log stage for one file.
#[derive(Debug)]
pub struct EventLog {
    lines_in: Option<Numbered>,
    max: usize,
    counts: BTreeMap<String, u64>,
    pending: HashMap<String, u64>,
    findings: Vec<Finding>,
    lines: u64,
}

impl EventLog {
    /// A log read from its start.
    pub fn new(max_line_bytes: usize) -> Self {
        EventLog {
            lines_in: Some(Numbered::new(max_line_bytes)),
            max: max_line_bytes,
            counts: BTreeMap::new(),
            pending: HashMap::new(),
            findings: Vec::new(),
            lines: 0,
        }
    }

    /// Feeds the next chunk.
    pub fn feed(&mut self, chunk: &[u8]) {
        let mut lines = self.lines_in.take().expect("lines");
        lines.feed(chunk, &mut |f| match f {
            Framed::TooLong { number, len } => {
                self.findings.push(Finding::new(number, Kind::LineTooLong, format!("event line of {len} bytes is over the limit of {}", self.max)));
            }
            Framed::Line(l) => self.line(l.number, l.bytes),
        });
        self.lines_in = Some(lines);
    }

    fn line(&mut self, number: u64, bytes: &[u8]) {
        self.lines += 1;
        // Framing first: the same rules as transcripts (length, UTF-8, a JSON object).
        if let crate::transcript::checker::Outcome::Fault(f) = read_line(number, bytes, self.max, None) {
            self.findings.push(f);
            return;
        }
        let (mut ty, mut id): (Option<RawStr<'_>>, Option<RawStr<'_>>) = (None, None);
        let _ = scan::object_line(bytes, |s, k| {
            match &*k.key() {
                b"type" => ty = s.opt_string()?,
                b"call_id" | b"tool_call_id" | b"tool_use_id" => id = s.opt_string()?.or(id),
                b"id" if id.is_none() => id = s.opt_string()?,
                _ => s.skip()?,
            }
            Ok(())
        });
        let ty = ty.map(|t| t.decode().into_owned()).unwrap_or_else(|| "untyped".to_owned());
        let known = self.counts.len() < MAX_TYPES || self.counts.contains_key(&ty);
        *self.counts.entry(if known { ty.clone() } else { "other".to_owned() }).or_default() += 1;
        let t = ty.to_ascii_lowercase();
        let Some(id) = id.map(|i| i.decode().into_owned()) else { return };
        let ends = ["result", "output", "complete", "end", "finish", "done", "error", "cancel"].iter().any(|w| t.contains(w));
        if ends {
            self.pending.remove(&id);
        } else if t.contains("tool_call")
            || t.contains("tool_use")
            || t.contains("tool.call")
            || t.contains("toolcall")
            || t.contains("tool_start")
            || t.contains("tool.start")
        {
            self.pending.insert(id, number);
        }
    }

    /// Findings since the last call.
    pub fn drain_findings(&mut self) -> Vec<Finding> {
        std::mem::take(&mut self.findings)
    }

    /// Events by type so far.
    pub fn counts(&self) -> &BTreeMap<String, u64> {
        &self.counts
    }

    /// Non-blank lines read.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Tool calls started and not completed.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// A last line without its newline, reported once the file is quiet or closed.
    pub fn tail(&self) -> Vec<Finding> {
        let lines = self.lines_in.as_ref().expect("lines");
        let (sp, next) = (lines.splitter(), lines.next_line());
        if sp.pending_bytes() > 0 && !sp.pending_is_blank() {
            return vec![Finding::new(next, Kind::TornLine, format!("event line {next} has no newline"))];
        }
        Vec::new()
    }

    /// Offset just after the last complete line.
    pub fn committed_offset(&self) -> u64 {
        self.lines_in.as_ref().expect("lines").splitter().committed_offset()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_types_and_pending_calls() {
        let mut e = EventLog::new(1 << 20);
        e.feed(b"{\"type\":\"turn.started\"}\n{\"type\":\"tool_call\",\"call_id\":\"a\"}\n{\"type\":\"tool_call\",\"call_id\":\"b\"}\n");
        e.feed(b"{\"type\":\"tool_result\",\"call_id\":\"a\"}\nnot json\n{\"type\":\"turn.ended\"");
        assert_eq!(e.counts().get("tool_call"), Some(&2));
        assert_eq!(e.pending(), 1);
        let f = e.drain_findings();
        assert_eq!((f[0].line, f[0].kind), (5, Kind::MalformedLine));
        let t = e.tail();
        assert_eq!((t[0].line, t[0].kind), (6, Kind::TornLine));
        e.feed(b"}\n");
        assert!(e.tail().is_empty());
        assert_eq!(e.counts().get("turn.ended"), Some(&1));
    }
}
