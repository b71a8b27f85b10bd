//! Dataset repair: per line, never one conversation into another.
//!
//! Every line is checked on its own ([`check_line`](super::check_line)); a line without error
//! findings is copied byte for byte (runs of them as one slice). A line with errors is handled
//! by the [`Policy`]:
//!
//! - `drop`: the whole line goes to the rejects stream;
//! - `truncate`: the conversation is cut before its first break (the message where the
//!   conversation moved on without a call's result, or the first message with an error), and
//!   kept if it is still a conversation of its kind: a fine-tuning example must still end with
//!   an assistant message, a batch request must still have a message;
//! - `answer`: the calls without results get the synthetic error results the message formats
//!   use (repair's `not executed` text), inserted where the result belongs; where the shape
//!   can say which part a result without its call is (`gemini-tuning`), that part is removed
//!   first (elsewhere such a line is dropped).
//!
//! A preference line (`{"input": {"messages"}, "preferred_output", "non_preferred_output"}`)
//! is two conversations that share the prompt `input.messages`; each output is the single
//! assistant message one of them ends with. Both policies edit the shared prompt only:
//! `truncate` cuts `input.messages` before its first break (a break in an output cannot be cut
//! away: the outputs are what the example teaches), `answer` inserts the missing results into
//! it. The line is kept only if both conversations then check clean.
//!
//! A line the policy cannot make clean (the edit leaves errors, or there is nothing to cut or
//! answer) goes to the rejects stream as with `drop`; so do lines that cannot be read (not
//! JSON, not UTF-8, over the line limit, a torn last line) and a batch line whose `custom_id`
//! an earlier kept line has. An edited line is re-serialized (key order kept) and its original
//! is in the rejects stream (`"action": "modified"`). The output therefore checks clean, and
//! repairing it again changes nothing.

use super::{check_line, LineReport};
use crate::transcript::finding::{Finding, Kind, Severity};
use crate::transcript::formats::dataset::Dataset;
use crate::transcript::formats::edit;
use crate::transcript::lines::{is_blank, Block, LineSplitter};
use crate::transcript::repair::origins::Action as Rejected;
use crate::transcript::repair::rejects::{long_record_head, write_record, LongRecord};
use crate::transcript::repair::synth::ResultText;
use crate::transcript::repair::{Emit, RewriteStats};
use crate::transcript::Set;
use serde::Serialize;
use serde_json::Value;

/// What to do with a line whose conversation has errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Remove the line (kept in the rejects file).
    #[default]
    Drop,
    /// Cut the conversation before its first break.
    Truncate,
    /// Insert synthetic results for calls without one.
    Answer,
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "drop" => Ok(Policy::Drop),
            "truncate" => Ok(Policy::Truncate),
            "answer" => Ok(Policy::Answer),
            _ => Err(format!("unknown dataset policy `{s}` (expected drop, truncate or answer)")),
        }
    }
}

/// One line the repair changed, for `--dry-run` and reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Action {
    /// The line.
    pub line: u64,
    /// `remove` or `replace`.
    pub action: &'static str,
    /// The finding that decided it.
    pub reason: Kind,
    /// Its message index, when it is about one message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_index: Option<u64>,
    /// A replaced line: the policy that made its new conversation (`truncate` or `answer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
}

/// What a dataset repair did to the examples (lines) it changed: each line it changed is
/// counted once, under what was done to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Examples {
    /// Removed to the rejects file: under `drop`, where the policy could not make the line
    /// clean, and lines that cannot be read.
    pub dropped: u64,
    /// Cut before their first break (`truncate`).
    pub truncated: u64,
    /// Given results for their calls, stray results removed (`answer`).
    pub answered: u64,
}

impl Examples {
    /// The counts of `actions`.
    pub fn of(actions: &[Action]) -> Self {
        let mut e = Examples::default();
        for a in actions {
            match a.policy {
                _ if a.action == "remove" => e.dropped += 1,
                Some(Policy::Truncate) => e.truncated += 1,
                Some(Policy::Answer) => e.answered += 1,
                // (A replaced line always names the policy that made it.)
                Some(Policy::Drop) | None => e.dropped += 1,
            }
        }
        e
    }

    /// Whether it counts nothing.
    pub fn is_empty(&self) -> bool {
        *self == Examples::default()
    }

    /// Adds `other`'s counts.
    pub fn add(&mut self, other: Examples) {
        self.dropped += other.dropped;
        self.truncated += other.truncated;
        self.answered += other.answered;
    }
}

enum Decision {
    Keep(Option<String>),
    Remove(Kind, Option<u64>),
    Replace(Vec<u8>, Kind, Option<u64>, Option<String>),
}

/// The streaming dataset repair. Calling order: [`DatasetRepair::feed`] the whole input, then
/// [`DatasetRepair::finish`].
#[derive(Debug)]
pub struct DatasetRepair {
    dataset: Dataset,
    policy: Policy,
    max_line_bytes: usize,
    splitter: Option<LineSplitter>,
    next_line: u64,
    /// `custom_id`s of the lines kept so far (hashes).
    kept_ids: Set<u64>,
    /// An over-long line in progress: its bytes so far, while they are all blank (a blank line
    /// is copied, whatever its length), and whether its reject has been opened.
    long_blank: Vec<u8>,
    long: LongRecord,
    reject_buf: Vec<u8>,
    stats: RewriteStats,
    /// The lines changed, in order.
    pub actions: Vec<Action>,
}

impl DatasetRepair {
    /// A repair of a `dataset` file under `policy`.
    pub fn new(dataset: Dataset, policy: Policy, max_line_bytes: usize) -> Self {
        DatasetRepair {
            dataset,
            policy,
            max_line_bytes,
            splitter: Some(LineSplitter::new(max_line_bytes).keep_long()),
            next_line: 1,
            kept_ids: Set::default(),
            long_blank: Vec::new(),
            long: LongRecord::default(),
            reject_buf: Vec::new(),
            stats: RewriteStats::default(),
            actions: Vec::new(),
        }
    }

    /// Feeds the next chunk of the file.
    pub fn feed(&mut self, chunk: &[u8], out: &mut impl FnMut(Emit<'_>)) {
        let mut splitter = self.splitter.take().expect("not finished");
        splitter.feed(chunk, &mut |b| self.block(b, out));
        self.splitter = Some(splitter);
    }

    /// Ends the stream: a torn last line goes to the rejects.
    pub fn finish(mut self, out: &mut impl FnMut(Emit<'_>)) -> (RewriteStats, Vec<Action>) {
        let mut splitter = self.splitter.take().expect("not finished");
        if let Some(t) = splitter.finish() {
            match t.bytes {
                Some(bytes) if is_blank(bytes) => out(Emit::Out(bytes)),
                Some(bytes) => {
                    let bytes = bytes.to_vec();
                    self.remove(self.next_line, Kind::TornLine, None, &bytes, out);
                }
                None => self.close_long(Kind::TornLine, out),
            }
        }
        (self.stats, self.actions)
    }

    fn block(&mut self, b: Block<'_>, out: &mut impl FnMut(Emit<'_>)) {
        match b {
            Block::LongBytes(bytes) => self.long(bytes, out),
            Block::TooLong { .. } => {
                self.close_long(Kind::LineTooLong, out);
                self.next_line += 1;
            }
            Block::Lines { bytes, .. } => {
                if !self.long_blank.is_empty() {
                    // An over-long blank line ended: it stays as it was.
                    out(Emit::Out(&std::mem::take(&mut self.long_blank)));
                }
                self.lines(bytes, out);
            }
        }
    }

    fn lines(&mut self, bytes: &[u8], out: &mut impl FnMut(Emit<'_>)) {
        // Runs of lines kept as they are go out as one slice.
        let (mut start, mut run) = (0, 0);
        for nl in memchr::memchr_iter(b'\n', bytes) {
            let n = self.next_line;
            self.next_line += 1;
            let raw = &bytes[start..nl];
            let content = raw.strip_suffix(b"\r").unwrap_or(raw);
            let line_start = start;
            start = nl + 1;
            if is_blank(content) {
                continue;
            }
            let decision = self.decide(n, content);
            if let Decision::Keep(id) = decision {
                self.keep_id(id);
                continue;
            }
            if run < line_start {
                out(Emit::Out(&bytes[run..line_start]));
            }
            run = start;
            match decision {
                Decision::Keep(_) => {}
                Decision::Remove(kind, index) => self.remove(n, kind, index, content, out),
                Decision::Replace(new, kind, index, id) => {
                    self.keep_id(id);
                    write_record(&mut self.reject_buf, n, Rejected::Modified, Some(kind), content, self.max_line_bytes, out);
                    out(Emit::Out(&new));
                    out(Emit::Out(&bytes[line_start + content.len()..start]));
                    self.stats.modified += 1;
                    self.actions.push(Action { line: n, action: "replace", reason: kind, message_index: index, policy: Some(self.policy) });
                }
            }
        }
        if run < start {
            out(Emit::Out(&bytes[run..start]));
        }
    }

    fn keep_id(&mut self, id: Option<String>) {
        if let Some(id) = id {
            self.kept_ids.insert(xxhash_rust::xxh3::xxh3_64(id.as_bytes()));
        }
    }

    fn remove(&mut self, n: u64, kind: Kind, index: Option<u64>, content: &[u8], out: &mut impl FnMut(Emit<'_>)) {
        write_record(&mut self.reject_buf, n, Rejected::Removed, Some(kind), content, self.max_line_bytes, out);
        self.stats.removed += 1;
        self.actions.push(Action { line: n, action: "remove", reason: kind, message_index: index, policy: None });
    }

    /// What to do with line `n`.
    fn decide(&mut self, n: u64, content: &[u8]) -> Decision {
        if simdutf8::basic::from_utf8(content).is_err() {
            return Decision::Remove(Kind::InvalidUtf8, None);
        }
        let Ok(report) = check_line(self.dataset, n, content) else { return Decision::Remove(Kind::MalformedLine, None) };
        let id = report.custom_id.clone();
        if id.as_ref().is_some_and(|id| self.kept_ids.contains(&xxhash_rust::xxh3::xxh3_64(id.as_bytes()))) {
            return Decision::Remove(Kind::DuplicateCustomId, None);
        }
        let Some(first) = first_error(&report) else { return Decision::Keep(id) };
        let (kind, index) = (first.kind, first.message_index);
        let edited = match self.policy {
            Policy::Drop => None,
            Policy::Truncate => self.truncate(content, &report),
            Policy::Answer => self.answer(content, &report),
        };
        match edited {
            Some(new) if check_line(self.dataset, n, &new).is_ok_and(|r| first_error(&r).is_none()) => Decision::Replace(new, kind, index, id),
            _ => Decision::Remove(kind, index),
        }
    }

    fn truncate(&self, content: &[u8], report: &LineReport) -> Option<Vec<u8>> {
        let mut v: Value = serde_json::from_slice(content).ok()?;
        let preference = self.dataset.is_preference(&v);
        let messages = self.dataset.conversation_mut(&mut v)?;
        let mut cut = usize::MAX;
        for f in report.findings.iter().filter(|f| f.severity == Severity::Error) {
            let i = f.message_index? as usize;
            let at = match f.kind {
                // The conversation broke where it moved on without the result.
                Kind::UnansweredCall => (i + 1..messages.len()).find(|&j| !self.dataset.is_result(&messages[j])).unwrap_or(messages.len()),
                // The last message is not the one to learn: cut it (and what follows).
                _ => i,
            };
            cut = cut.min(at);
        }
        if cut == 0 || cut >= messages.len() {
            return None;
        }
        messages.truncate(cut);
        // (A preference prompt is followed by the outputs: the check after the edit decides.)
        if self.dataset.fine_tuning() && !preference && !self.dataset.is_assistant(messages.last()?) {
            return None;
        }
        Some(edit::to_line(&v))
    }

    fn answer(&self, content: &[u8], report: &LineReport) -> Option<Vec<u8>> {
        // Results without their call go first, where the shape can say which part each is;
        // the calls left without results are then found in the line that remains.
        let strays: Vec<(usize, &str)> = report
            .findings
            .iter()
            .filter(|f| matches!(f.kind, Kind::OrphanResult | Kind::DuplicateResult))
            .filter_map(|f| Some((f.message_index? as usize, f.call_id.as_deref()?)))
            .collect();
        let dropped;
        let (content, report) = if strays.is_empty() {
            (content, report)
        } else {
            let mut v: Value = serde_json::from_slice(content).ok()?;
            self.dataset.drop_results(self.dataset.conversation_mut(&mut v)?, &strays)?;
            let line = edit::to_line(&v);
            let again = check_line(self.dataset, 0, &line).ok()?;
            dropped = (line, again);
            if first_error(&dropped.1).is_none() {
                return Some(dropped.0);
            }
            (&dropped.0[..], &dropped.1)
        };
        let calls: Vec<&Finding> =
            report.findings.iter().filter(|f| matches!(f.kind, Kind::UnansweredCall | Kind::OrphanCall) && f.call_id.is_some()).collect();
        if calls.is_empty() {
            return None;
        }
        let mut v: Value = serde_json::from_slice(content).ok()?;
        let d = self.dataset;
        let messages = d.conversation_mut(&mut v)?;
        // Each call's results go after its message and the results that follow it; inserting
        // from the last position keeps the earlier positions valid.
        let mut inserts: Vec<(usize, Value)> = Vec::new();
        for f in calls {
            let i = f.message_index? as usize;
            let id = f.call_id.clone()?;
            let mut at = i + 1;
            while at < messages.len() && d.is_result(&messages[at]) {
                at += 1;
            }
            // (A call in a preference output is past the prompt: not answered here.)
            let result = d.synthetic_result(messages.get(i)?, &id, f.tool.as_deref().unwrap_or(""), ResultText::NotExecuted.text())?;
            inserts.push((at, result));
        }
        // Stable: results for one position keep the order of their calls.
        inserts.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        let mut k = 0;
        while k < inserts.len() {
            let at = inserts[k].0;
            let mut group: Vec<Value> = Vec::new();
            while k < inserts.len() && inserts[k].0 == at {
                group.push(inserts[k].1.clone());
                k += 1;
            }
            group.reverse();
            d.insert_results(messages, at, group)?;
        }
        Some(edit::to_line(&v))
    }

    fn long(&mut self, bytes: &[u8], out: &mut impl FnMut(Emit<'_>)) {
        if !self.long.open && is_blank(bytes) && self.long_blank.len() < self.max_line_bytes.saturating_mul(2) {
            self.long_blank.extend_from_slice(bytes);
            return;
        }
        if !self.long.open {
            self.long.start(&long_record_head(self.next_line, Rejected::Removed, Some(Kind::LineTooLong)), out);
            let blank = std::mem::take(&mut self.long_blank);
            self.long.bytes(&blank, out);
        }
        self.long.bytes(bytes, out);
    }

    fn close_long(&mut self, kind: Kind, out: &mut impl FnMut(Emit<'_>)) {
        if !self.long.close(out) {
            if !self.long_blank.is_empty() {
                out(Emit::Out(&std::mem::take(&mut self.long_blank)));
            }
            return;
        }
        self.stats.removed += 1;
        self.actions.push(Action { line: self.next_line, action: "remove", reason: kind, message_index: None, policy: None });
    }
}

fn first_error(r: &LineReport) -> Option<&Finding> {
    r.findings.iter().find(|f| f.severity == Severity::Error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(d: Dataset, policy: Policy, input: &str) -> (String, String) {
        let (mut out, mut rej) = (Vec::new(), Vec::new());
        let mut r = DatasetRepair::new(d, policy, 1 << 20);
        let mut emit = |e: Emit<'_>| match e {
            Emit::Out(b) => out.extend_from_slice(b),
            Emit::Reject(b) => rej.extend_from_slice(b),
        };
        for c in input.as_bytes().chunks(7) {
            r.feed(c, &mut emit);
        }
        r.finish(&mut emit);
        (String::from_utf8(out).unwrap(), String::from_utf8(rej).unwrap())
    }

    const ISSUE: &str = r#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"assistant","content":"done"}]}"#;
    const CLEAN: &str = r#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x"}]}"#;

    #[test]
    fn policies() {
        let input = format!("{CLEAN}\n{ISSUE}\nnot json\n{CLEAN}\n");
        let (out, rej) = run(Dataset::OpenAi, Policy::Drop, &input);
        assert_eq!(out, format!("{CLEAN}\n{CLEAN}\n"));
        assert_eq!(rej.lines().count(), 2);
        assert!(rej.starts_with(r#"{"line":2,"action":"removed","reason":"unanswered_call","text":"#));
        let (out, _) = run(Dataset::OpenAi, Policy::Truncate, &input);
        let cut = r#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]}]}"#;
        assert_eq!(out, format!("{CLEAN}\n{cut}\n{CLEAN}\n"));
        let (out, rej) = run(Dataset::OpenAi, Policy::Answer, &input);
        let answered = out.lines().nth(1).unwrap();
        assert!(answered.contains(r#"{"role":"tool","tool_call_id":"c2","content":"Tool call was not executed"#), "{answered}");
        assert!(rej.contains(r#""action":"modified""#));
        for policy in [Policy::Drop, Policy::Truncate, Policy::Answer] {
            let (once, _) = run(Dataset::OpenAi, policy, &input);
            let (twice, rej) = run(Dataset::OpenAi, policy, &once);
            assert_eq!((twice.as_str(), rej.as_str()), (once.as_str(), ""), "{policy:?} is idempotent");
        }
    }

    #[test]
    fn examples_count_each_changed_line_under_what_was_done() {
        let input = format!("{CLEAN}\n{ISSUE}\n{ISSUE}\nnot json\n");
        for (policy, want) in [
            (Policy::Drop, Examples { dropped: 3, truncated: 0, answered: 0 }),
            (Policy::Truncate, Examples { dropped: 1, truncated: 2, answered: 0 }),
            (Policy::Answer, Examples { dropped: 1, truncated: 0, answered: 2 }),
        ] {
            let mut r = DatasetRepair::new(Dataset::OpenAi, policy, 1 << 20);
            r.feed(input.as_bytes(), &mut |_| {});
            let (_, actions) = r.finish(&mut |_| {});
            assert_eq!(Examples::of(&actions), want, "{policy:?}");
        }
    }

    #[test]
    fn preference_lines_are_repaired_in_their_prompt() {
        let call = r#"{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}"#;
        let outputs = r#""preferred_output":[{"role":"assistant","content":"a"}],"non_preferred_output":[{"role":"assistant","content":"b"}]"#;
        // A call without its result before the outputs: answered in the prompt.
        let line = format!(r#"{{"input":{{"messages":[{{"role":"user","content":"q"}},{call}]}},{outputs}}}"#);
        let (out, rej) = run(Dataset::OpenAi, Policy::Answer, &format!("{line}\n"));
        let v: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["input"]["messages"][2]["role"], "tool", "{out}");
        assert_eq!(v["input"]["messages"][2]["tool_call_id"], "c");
        assert_eq!(v["preferred_output"][0]["content"], "a");
        assert!(rej.contains(r#""line":1,"action":"modified","reason":"unanswered_call""#), "{rej}");
        // A role the format does not have in the prompt: cut before it, the outputs kept.
        let line = format!(
            r#"{{"input":{{"messages":[{{"role":"user","content":"q"}},{{"role":"assistant","content":"r"}},{{"role":"user","content":"q2"}},{{"role":"bot","content":"?"}}]}},{outputs}}}"#
        );
        let (out, _) = run(Dataset::OpenAi, Policy::Truncate, &format!("{line}\n"));
        let v: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["input"]["messages"].as_array().map(Vec::len), Some(3), "{out}");
        assert_eq!(v["non_preferred_output"][0]["content"], "b");
        // A break in an output is not cut away: the line goes.
        let line = r#"{"input":{"messages":[{"role":"user","content":"q"}]},"preferred_output":[{"role":"assistant","content":""}],"non_preferred_output":[{"role":"assistant","content":"b"}]}"#;
        for policy in [Policy::Truncate, Policy::Answer] {
            let (out, rej) = run(Dataset::OpenAi, policy, &format!("{line}\n"));
            assert_eq!((out.as_str(), rej.lines().count()), ("", 1), "{policy:?}");
        }
    }

    #[test]
    fn duplicate_custom_ids_keep_the_first_kept_line() {
        let ok = |id: &str| format!(r#"{{"custom_id":"{id}","params":{{"messages":[{{"role":"user","content":"q"}}]}}}}"#);
        let bad = r#"{"custom_id":"a","params":{"messages":[{"role":"robot","content":"q"}]}}"#;
        let input = format!("{bad}\n{}\n{}\n{}\n", ok("a"), ok("b"), ok("a"));
        let (out, rej) = run(Dataset::AnthropicBatch, Policy::Drop, &input);
        assert_eq!(out, format!("{}\n{}\n", ok("a"), ok("b")));
        assert!(rej.contains(r#""line":4,"action":"removed","reason":"duplicate_custom_id""#));
    }

    #[test]
    fn anthropic_results_go_first_in_the_next_user_message() {
        let line = r#"{"custom_id":"x","params":{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":"go on"}]}}"#;
        let (out, _) = run(Dataset::AnthropicBatch, Policy::Answer, &format!("{line}\n"));
        let v: Value = serde_json::from_str(out.trim()).unwrap();
        let next = &v["params"]["messages"][2]["content"];
        assert_eq!(next[0]["type"], "tool_result");
        assert_eq!(next[1]["text"], "go on");
    }

    #[test]
    fn gemini_responses_go_in_the_turn_after_the_calls() {
        let d = Dataset::GeminiTuning;
        let q = r#"{"role":"user","parts":[{"text":"q"}]}"#;
        let calls = r#"{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}},{"functionCall":{"id":"i","name":"g","args":{}}}]}"#;
        let ok = r#"{"role":"model","parts":[{"text":"ok"}]}"#;
        let answer = |line: String| {
            let (out, rej) = run(d, Policy::Answer, &format!("{line}\n"));
            assert!(rej.contains(r#""action":"modified""#), "{rej}");
            serde_json::from_str::<Value>(out.trim()).unwrap()["contents"].clone()
        };
        // No response at all: a user turn of its own, the explicit id repeated.
        let c = answer(format!(r#"{{"contents":[{q},{calls},{ok}]}}"#));
        assert_eq!(c[2]["role"], "user");
        let response = |name: &str| c[2]["parts"].as_array().unwrap().iter().map(|p| &p["functionResponse"]).find(|r| r["name"] == name).cloned().unwrap();
        assert_eq!(response("f"), serde_json::json!({"name": "f", "response": {"error": ResultText::NotExecuted.text()}}));
        assert_eq!(response("g")["id"], "i");
        assert_eq!(c[3], serde_json::from_str::<Value>(ok).unwrap());
        // One of two answered: the other joins it.
        let partial = r#"{"role":"user","parts":[{"functionResponse":{"id":"i","name":"g","response":{}}}]}"#;
        let c = answer(format!(r#"{{"contents":[{q},{calls},{partial},{ok}]}}"#));
        assert_eq!((c.as_array().unwrap().len(), c[2]["parts"].as_array().unwrap().len()), (4, 2));
        assert_eq!(c[2]["parts"][1]["functionResponse"]["name"], "f");
        // A prompt right after the calls: the responses go first in it.
        let c = answer(format!(r#"{{"contents":[{q},{calls},{q},{ok}]}}"#));
        assert_eq!(c[2]["parts"][2]["text"], "q");
        // A response without its call, or a second one, is removed under `answer`.
        let orphan = format!(
            r#"{{"contents":[{q},{ok},{{"role":"user","parts":[{{"functionResponse":{{"id":"i","name":"g","response":{{}}}}}},{{"text":"more"}}]}},{ok}]}}"#
        );
        let c = answer(orphan.clone());
        assert_eq!(c[2], serde_json::json!({"role": "user", "parts": [{"text": "more"}]}));
        let twice = r#"{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"n":1}}},{"functionResponse":{"id":"i","name":"g","response":{}}},{"functionResponse":{"name":"f","response":{"n":2}}}]}"#;
        let c = answer(format!(r#"{{"contents":[{q},{calls},{twice},{ok}]}}"#));
        assert_eq!(c[2]["parts"].as_array().map(Vec::len), Some(2));
        assert_eq!(c[2]["parts"][0]["functionResponse"]["response"]["n"], 1);
        // A turn of orphan responses only goes whole; the model turns it separated are then
        // consecutive, and the line goes to the rejects. `truncate` cuts before it.
        let alone = format!(r#"{{"contents":[{q},{ok},{partial},{ok}]}}"#);
        let (out, rej) = run(d, Policy::Answer, &format!("{alone}\n"));
        assert_eq!((out.as_str(), rej.lines().count()), ("", 1));
        let (out, _) = run(d, Policy::Truncate, &format!("{alone}\n"));
        assert_eq!(
            out,
            format!("{}\n", serde_json::json!({"contents": [serde_json::from_str::<Value>(q).unwrap(), serde_json::from_str::<Value>(ok).unwrap()]}))
        );
        for policy in [Policy::Drop, Policy::Answer, Policy::Truncate] {
            let input = format!(r#"{{"contents":[{q},{calls},{ok}]}}"#) + "\n" + &orphan + "\n";
            let (once, _) = run(d, policy, &input);
            let (twice, rej) = run(d, policy, &once);
            assert_eq!((twice.as_str(), rej.as_str()), (once.as_str(), ""), "{policy:?} is idempotent");
        }
    }

    #[test]
    fn unreadable_and_torn_lines_go_to_the_rejects() {
        let (out, rej) = run(Dataset::OpenAi, Policy::Answer, &format!("{CLEAN}\r\n\n{{\"messages\": [}}\n{CLEAN}\n{{\"torn"));
        assert_eq!(out, format!("{CLEAN}\r\n\n{CLEAN}\n"));
        assert_eq!(rej.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["line"].as_u64().unwrap()).collect::<Vec<_>>(), [3, 5]);
    }
}
