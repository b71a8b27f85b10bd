//! Event logs (`Harness\Transcript`'s `JsonlEvents`, docs/requirements.md): one event object per line, framed strictly.
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

use crate::transcript::pipeline::{Event, Input, Pairing, Stage};
use crate::transcript::scan::{self, RawStr};
use std::collections::{BTreeMap, HashMap};

/// Distinct event types counted by name; later ones count as `other` (bounded metric labels).
pub const MAX_TYPES: usize = 64;

/// The event-log stage for one file: behind [`crate::transcript::Pipeline::events`], whose
/// front frames the lines strictly (a line that is not a JSON object, a torn last line).
#[derive(Debug, Default)]
pub struct EventLog {
    counts: BTreeMap<String, u64>,
    pending: HashMap<String, u64>,
    lines: u64,
}

impl EventLog {
    /// A log read from its start.
    pub fn new() -> Self {
        EventLog::default()
    }

    /// One complete line that is a JSON object.
    pub fn line(&mut self, number: u64, bytes: &[u8]) {
        self.lines += 1;
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

    /// Non-blank lines read.
    pub fn lines(&self) -> u64 {
        self.lines
    }
}

impl Stage for EventLog {
    fn name(&self) -> &'static str {
        "events"
    }

    fn input(&mut self, input: &Input<'_, '_>, _pairing: &Pairing, _events: &mut Vec<Event>) {
        if let Input::Event { number, bytes } = input {
            self.line(*number, bytes);
        }
    }

    fn pending(&self, _pairing: &Pairing) -> Option<usize> {
        Some(self.pending.len())
    }

    fn counts(&self) -> Option<&BTreeMap<String, u64>> {
        Some(&self.counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_types_and_pending_calls() {
        use crate::transcript::pipeline::{Inputs, Pipeline};
        use crate::transcript::Kind;
        use std::time::Duration;
        let mut p = Pipeline::events(1 << 20, vec![Box::new(EventLog::new())], Duration::from_secs(1));
        p.feed(b"{\"type\":\"turn.started\"}\n{\"type\":\"tool_call\",\"call_id\":\"a\"}\n{\"type\":\"tool_call\",\"call_id\":\"b\"}\n").unwrap();
        p.feed(b"{\"type\":\"tool_result\",\"call_id\":\"a\"}\nnot json\n{\"type\":\"turn.ended\"").unwrap();
        assert_eq!(p.counts().and_then(|c| c.get("tool_call")), Some(&2));
        assert_eq!(p.pending(), 1);
        let f: Vec<_> = p.drain().filter_map(|e| e.finding().cloned()).collect();
        assert_eq!((f[0].line, f[0].kind), (5, Kind::MalformedLine));
        p.grew(Duration::ZERO);
        assert_eq!(p.poll_deadline(), Some(Duration::from_secs(1)));
        p.handle_timeout(Duration::from_secs(1), &Inputs::default());
        let t: Vec<_> = p.drain().filter_map(|e| e.finding().cloned()).collect();
        assert_eq!((t[0].line, t[0].kind), (6, Kind::TornLine));
        p.feed(b"}\n").unwrap();
        assert_eq!(p.counts().and_then(|c| c.get("turn.ended")), Some(&1));
        let (rest, _, _) = p.finish().unwrap();
        assert!(rest.is_empty(), "{rest:?}");
    }
}
