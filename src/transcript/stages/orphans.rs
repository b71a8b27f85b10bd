//! Orphan detection (`SessionReader::scan_orphan_tool_calls`, docs/requirements.md): the calls of the last assistant turn
//! that have no result, and what to do about each.
//!
//! A process killed while a tool ran leaves the call in the transcript and no result. Resume
//! must decide per call whether to run it again, give up on it or skip it, and that depends on
//! what the tool does: reading a file again is harmless, running a shell command or a deploy
//! twice may not be. This stage finds the calls; [`Handling::suggest`] proposes what to do from
//! the tool's [`SideEffect`] (from the tool registry, `config/tools.toml`); a person decides.
//!
//! "The last assistant turn" follows each format's turn rules, the ones `check` uses: the stage
//! reads the pairing [`Validator`] of the stream — the pipeline's [`Pairing`], which the runner
//! feeds every line once and shares with `validate` when both are in the list — and the calls
//! still pending at the end are exactly the calls of the last turn without a result (Claude
//! Code and the chat formats: since the last assistant message, its split lines included;
//! Codex: since the last user prompt; a compaction starts afresh with the calls its replacement
//! history leaves open; a rewind drops the abandoned branch's calls). Earlier unanswered calls
//! are `check`'s `unanswered_call`, not orphans.
//!
//! A host that pauses for a person persists its pending calls beside the transcript (`Harness\Transcript`, docs/requirements.md;
//! `pending.json`): those calls are [`Handling::Paused`], not orphans.
//!
//! Live files: while an agent runs, the call at the tail is normal. In the daemon it becomes an
//! orphan only after a grace period in which the file did not grow. Time is an input: the shell
//! reports growth ([`Stage::grew`]), asks [`Stage::poll_deadline`] when to look again, sleeps
//! until then and calls [`Stage::handle_timeout`] with the current time; a test passes a fake
//! clock. Times are durations since any epoch the shell chooses.
//!
//! Calling order: the stage runs in a stage list ([`crate::transcript::pipeline::Stages`], or a
//! [`crate::transcript::Pipeline`]): the lines in stream order (and `grew` after each batch,
//! for live files); then either `finish` once for a complete file, or `poll_deadline` /
//! `handle_timeout` for as long as the file is watched.

use crate::transcript::finding::{Finding, Output};
use crate::transcript::pairing::validator::{orphan, Validator};
use crate::transcript::pipeline::{Event, Input, Inputs, Pairing, Stage};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

/// What running a tool does to the world, as the tool registry says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SideEffect {
    /// Nothing outside the conversation (plans, todo lists).
    None,
    /// Reads files or the web; running it again is harmless.
    Read,
    /// Changes local files.
    Write,
    /// Acts outside: shell commands, MCP servers, subagents, anything whose effects are unknown
    /// beyond the machine.
    External,
    /// Not in the registry.
    Unknown,
}

impl SideEffect {
    /// The name used in output and in the registry.
    pub fn as_str(self) -> &'static str {
        match self {
            SideEffect::None => "none",
            SideEffect::Read => "read",
            SideEffect::Write => "write",
            SideEffect::External => "external",
            SideEffect::Unknown => "unknown",
        }
    }
}

/// How orphans are to be handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Suggest per call from its side effect.
    #[default]
    Suggest,
    /// Mark every orphan `skip`.
    Skip,
}

/// What to do about a call without a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Handling {
    /// Run it again: it has no side effect or only reads.
    Redo,
    /// Do not run it again; tell the model it was interrupted. A person decides whether its
    /// effect happened.
    Abort,
    /// Leave it out.
    Skip,
    /// Not an orphan: the host paused on it and listed it in `pending.json`.
    Paused,
}

impl Handling {
    /// The handling suggested for a call with `effect` under `policy`.
    pub fn suggest(effect: SideEffect, policy: Policy) -> Handling {
        match (policy, effect) {
            (Policy::Skip, _) => Handling::Skip,
            (Policy::Suggest, SideEffect::None | SideEffect::Read) => Handling::Redo,
            (Policy::Suggest, SideEffect::Write | SideEffect::External | SideEffect::Unknown) => Handling::Abort,
        }
    }

    /// The name used in output.
    pub fn as_str(self) -> &'static str {
        match self {
            Handling::Redo => "redo",
            Handling::Abort => "abort",
            Handling::Skip => "skip",
            Handling::Paused => "paused",
        }
    }
}

/// A call of the last assistant turn that has no result.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct OpenCall {
    /// Line of the call (for a call carried over by a Codex compaction, the compaction's line).
    pub line: u64,
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
}

/// An open call with its side effect and suggested handling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Orphan {
    /// Call id.
    pub call_id: String,
    /// Tool name.
    pub tool: String,
    /// Line of the call.
    pub line: u64,
    /// What the tool does.
    pub side_effect: SideEffect,
    /// What to do about it.
    pub handling: Handling,
}

/// Classifies open calls: side effect from `effect_of` (the registry), handling from `policy`,
/// except that calls listed in `paused` (from `pending.json`) are [`Handling::Paused`].
pub fn classify(calls: &[OpenCall], effect_of: impl Fn(&str) -> SideEffect, paused: &HashSet<String>, policy: Policy) -> Vec<Orphan> {
    calls
        .iter()
        .map(|c| {
            let side_effect = effect_of(&c.name);
            let handling = if paused.contains(&c.id) { Handling::Paused } else { Handling::suggest(side_effect, policy) };
            Orphan { call_id: c.id.clone(), tool: c.name.clone(), line: c.line, side_effect, handling }
        })
        .collect()
}

/// The `orphans` stage: finds the calls of the last assistant turn without a result (see the
/// module docs) in the stream's [`Pairing`] — the runner pairs the lines once, for this stage
/// and `validate` alike. On a live stream, calls at the tail become `orphan_call` (as
/// [`Event::Tail`]) once the stream has not grown for the grace period, except calls the
/// shell's [`Inputs::paused`] lists (`pending.json`); each is reported once per quiet period
/// (growth withdraws them: the shell retracts what it reported). At the end of a complete
/// stream, the calls not reported yet are `orphan_call` outputs.
#[derive(Debug)]
pub struct Orphans {
    grace: Duration,
    last_growth: Option<Duration>,
    /// Calls reported since the last growth.
    declared: BTreeSet<String>,
}

impl Orphans {
    /// The stage, with the grace period of live streams.
    pub fn new(grace: Duration) -> Self {
        Orphans { grace, last_growth: None, declared: BTreeSet::new() }
    }

    /// The findings for open calls not declared yet, declaring them: `orphan_call` as `check`
    /// words it, in line order.
    fn declare(&mut self, v: &Validator, skip: &HashSet<String>) -> Vec<Finding> {
        let mut out = Vec::new();
        for p in v.pending() {
            if self.declared.insert(p.id.clone()) && !skip.contains(&p.id) {
                out.push(v.with_resume(orphan(p)));
            }
        }
        out
    }
}

impl Stage for Orphans {
    fn name(&self) -> &'static str {
        "orphans"
    }

    fn reads_pairing(&self) -> bool {
        true
    }

    fn input(&mut self, _input: &Input<'_, '_>, _pairing: &Pairing, _events: &mut Vec<Event>) {
        // The pairing took the line; the calls it leaves pending are read at a deadline.
    }

    fn grew(&mut self, now: Duration) {
        self.last_growth = Some(now);
        // What was declared was about the tail as it stood; the shell withdraws it.
        self.declared.clear();
    }

    /// When open calls not yet declared become orphans if the stream does not grow: the last
    /// growth plus the grace period. `None` when there is nothing to wait for.
    fn poll_deadline(&self, pairing: &Pairing) -> Option<Duration> {
        let waiting = pairing.validator()?.pending_beyond(&self.declared);
        waiting.then(|| self.last_growth.unwrap_or_default() + self.grace)
    }

    fn tail_stands(&mut self, _done: bool, reported: &[Finding]) {
        // The calls reported still hold. Those not reported (paused then, or not due yet) are
        // looked at again at the next deadline: `pending.json` may have changed meanwhile.
        self.declared = reported.iter().filter(|f| f.kind == crate::transcript::Kind::OrphanCall).filter_map(|f| f.call_id.clone()).collect();
    }

    fn handle_timeout(&mut self, now: Duration, inputs: &Inputs, pairing: &Pairing, events: &mut Vec<Event>) {
        if self.poll_deadline(pairing).is_some_and(|d| now >= d) {
            let v = pairing.validator().expect("a deadline means a pairing");
            events.extend(self.declare(v, &inputs.paused).into_iter().map(Event::Tail));
        }
    }

    fn finish(&mut self, pairing: &Pairing, events: &mut Vec<Event>) {
        if let Some(v) = pairing.validator() {
            events.extend(self.declare(v, &HashSet::new()).into_iter().map(|f| Event::Output(Output::Finding(f))));
        }
    }

    fn pending(&self, pairing: &Pairing) -> Option<usize> {
        pairing.validator().map(Validator::pending_count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::formats::Format;

    use crate::transcript::checker::Observer;
    use crate::transcript::pipeline::Stages;

    fn scan(grace: Duration) -> Stages {
        let mut s = Stages::new(vec![Box::new(Orphans::new(grace))]);
        s.format(Format::ClaudeCode);
        s
    }

    fn feed(scan: &mut Stages, lines: &[&str]) {
        for (i, l) in lines.iter().enumerate() {
            let p = Format::ClaudeCode.parse(l.as_bytes()).unwrap();
            scan.line(i as u64 + 1, &p);
        }
    }

    /// The orphans a deadline at `now` declares.
    fn due(s: &mut Stages, now: Duration) -> Vec<String> {
        s.handle_timeout(now, &Inputs::default());
        s.drain().filter_map(|e| e.finding().and_then(|f| f.call_id.clone())).collect()
    }

    const CALL: &str =
        r#"{"type":"assistant","uuid":"a1","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}}"#;
    const RESULT: &str =
        r#"{"type":"user","uuid":"u2","parentUuid":"a1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}"#;

    #[test]
    fn a_tail_call_becomes_an_orphan_after_the_grace_period_without_growth() {
        let secs = Duration::from_secs;
        let mut s = scan(secs(30));
        feed(&mut s, &[CALL]);
        s.grew(secs(100));
        assert_eq!(s.poll_deadline(), Some(secs(130)));
        assert!(due(&mut s, secs(129)).is_empty(), "still within the grace period");
        // The file grew (a progress line, no result): the wait starts again.
        s.grew(secs(120));
        assert!(due(&mut s, secs(130)).is_empty());
        assert_eq!(due(&mut s, secs(150)), vec!["t1"]);
        assert_eq!(s.poll_deadline(), None, "declared once");
        assert!(due(&mut s, secs(1000)).is_empty());
        s.finish();
        assert_eq!(s.drain().count(), 0, "declared before the end");
    }

    #[test]
    fn a_result_in_time_means_no_orphan() {
        let mut s = scan(Duration::from_secs(5));
        feed(&mut s, &[CALL, RESULT]);
        s.grew(Duration::from_secs(1));
        assert_eq!(s.poll_deadline(), None);
        assert!(due(&mut s, Duration::from_secs(100)).is_empty());
        s.finish();
        assert_eq!(s.drain().count(), 0);
    }

    #[test]
    fn handling_follows_side_effect_policy_and_pause() {
        assert_eq!(Handling::suggest(SideEffect::Read, Policy::Suggest), Handling::Redo);
        assert_eq!(Handling::suggest(SideEffect::None, Policy::Suggest), Handling::Redo);
        assert_eq!(Handling::suggest(SideEffect::Write, Policy::Suggest), Handling::Abort);
        assert_eq!(Handling::suggest(SideEffect::Unknown, Policy::Suggest), Handling::Abort);
        assert_eq!(Handling::suggest(SideEffect::External, Policy::Skip), Handling::Skip);
        let calls = [OpenCall { line: 3, id: "a".into(), name: "Read".into() }, OpenCall { line: 3, id: "b".into(), name: "Bash".into() }];
        let paused: HashSet<String> = ["b".to_owned()].into();
        let effect = |n: &str| if n == "Read" { SideEffect::Read } else { SideEffect::External };
        let got = classify(&calls, effect, &paused, Policy::Suggest);
        assert_eq!(got.iter().map(|o| o.handling).collect::<Vec<_>>(), vec![Handling::Redo, Handling::Paused]);
    }
}
