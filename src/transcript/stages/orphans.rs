//! Orphan detection (seed 004 `scan_orphan_tool_calls`): the calls of the last assistant turn
//! that have no result, and what to do about each.
//!
//! A process killed while a tool ran leaves the call in the transcript and no result. Resume
//! must decide per call whether to run it again, give up on it or skip it, and that depends on
//! what the tool does: reading a file again is harmless, running a shell command or a deploy
//! twice may not be. This stage finds the calls; [`Handling::suggest`] proposes what to do from
//! the tool's [`SideEffect`] (from the tool registry, `config/tools.toml`); a person decides.
//!
//! "The last assistant turn" follows each format's turn rules, the ones `check` uses: the stage
//! runs the pairing [`Validator`], and the calls still pending at the end are exactly the calls
//! of the last turn without a result (Claude Code and the chat formats: since the last assistant
//! message, its split lines included; Codex: since the last user prompt; a compaction starts
//! afresh with the calls its replacement history leaves open; a rewind drops the abandoned
//! branch's calls). Earlier unanswered calls are `check`'s `unanswered_call`, not orphans.
//!
//! A host that pauses for a person persists its pending calls beside the transcript (seed 003
//! `pending.json`): those calls are [`Handling::Paused`], not orphans.
//!
//! Live files: while an agent runs, the call at the tail is normal. In the daemon it becomes an
//! orphan only after a grace period in which the file did not grow. Time is an input: the shell
//! reports growth with [`OrphanScan::grew`], asks [`OrphanScan::poll_deadline`] when to look
//! again, sleeps until then and calls [`OrphanScan::handle_timeout`] with the current time; a
//! test passes a fake clock. Times are durations since any epoch the shell chooses.
//!
//! Calling order: [`OrphanScan::push`] every parsed line in stream order (and `grew` after each
//! batch, for live files); then either [`OrphanScan::finish`] once for a complete file, or
//! `poll_deadline` / `handle_timeout` for as long as the file is watched.

use super::validate::{orphan, Validator};
use crate::transcript::finding::{Finding, Output};
use crate::transcript::formats::Format;
use crate::transcript::model::Parsed;
use crate::transcript::pipeline::{Event, Input, Inputs, Stage};
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

/// Finds the calls of the last assistant turn without a result. See the module docs.
#[derive(Debug)]
pub struct OrphanScan {
    validator: Validator,
    grace: Duration,
    last_growth: Option<Duration>,
    declared: BTreeSet<String>,
}

impl OrphanScan {
    /// A scan of a stream of `format`; on a live file a call at the tail becomes an orphan after
    /// `grace` without growth.
    pub fn new(format: Format, grace: Duration) -> Self {
        OrphanScan { validator: Validator::new(format), grace, last_growth: None, declared: BTreeSet::new() }
    }

    /// Feeds the next parsed line, in stream order.
    pub fn push(&mut self, line: u64, parsed: &Parsed<'_>) {
        // The validator's findings are `check`'s business; this stage wants its pending set.
        self.validator.push(line, parsed, &mut |_| {});
    }

    /// The stream grew at `now`: the grace period of the calls at the tail starts again.
    pub fn grew(&mut self, now: Duration) {
        self.last_growth = Some(now);
    }

    /// The calls of the last assistant turn still without a result, in line order.
    pub fn open_calls(&self) -> Vec<OpenCall> {
        self.validator.pending().into_iter().map(|p| OpenCall { line: p.line, id: p.id.clone(), name: p.name.clone() }).collect()
    }

    /// When open calls not yet declared become orphans if the stream does not grow: the last
    /// growth plus the grace period. `None` when there is nothing to wait for.
    pub fn poll_deadline(&self) -> Option<Duration> {
        let waiting = self.validator.pending_beyond(&self.declared);
        waiting.then(|| self.last_growth.unwrap_or_default() + self.grace)
    }

    /// The clock reached `now`: once the deadline has passed, the open calls not declared
    /// before become orphans and are returned (each call once).
    pub fn handle_timeout(&mut self, now: Duration) -> Vec<OpenCall> {
        match self.poll_deadline() {
            Some(deadline) if now >= deadline => {
                let fresh: Vec<OpenCall> = self.open_calls().into_iter().filter(|c| !self.declared.contains(&c.id)).collect();
                self.declared.extend(fresh.iter().map(|c| c.id.clone()));
                fresh
            }
            _ => Vec::new(),
        }
    }

    /// The stream is complete (a batch read): every open call is an orphan.
    pub fn finish(self) -> Vec<OpenCall> {
        self.open_calls()
    }

    /// The findings for open calls not declared yet, declaring them: `orphan_call` as `check`
    /// words it, in line order.
    fn declare(&mut self, skip: &HashSet<String>) -> Vec<Finding> {
        let mut out = Vec::new();
        for p in self.validator.pending() {
            if self.declared.contains(&p.id) {
                continue;
            }
            if !skip.contains(&p.id) {
                out.push(orphan(p));
            }
        }
        self.declared.extend(self.validator.pending().into_iter().map(|p| p.id.clone()));
        out
    }
}

/// The `orphans` stage: [`OrphanScan`] in a pipeline. On a live stream, calls at the tail become
/// `orphan_call` (as [`Event::Tail`]) once the stream has not grown for the grace period, except
/// calls the shell's [`Inputs::paused`] lists (`pending.json`); each is reported once per quiet
/// period (growth withdraws them: the shell retracts what it reported). At the end of a
/// complete stream, the calls not reported yet are `orphan_call` outputs.
#[derive(Debug)]
pub struct Orphans {
    scan: Option<OrphanScan>,
    grace: Duration,
    last_growth: Option<Duration>,
}

impl Orphans {
    /// The stage, with the grace period of live streams.
    pub fn new(grace: Duration) -> Self {
        Orphans { scan: None, grace, last_growth: None }
    }
}

impl Stage for Orphans {
    fn name(&self) -> &'static str {
        "orphans"
    }

    fn format(&mut self, format: Format) {
        if self.scan.is_none() {
            let mut scan = OrphanScan::new(format, self.grace);
            scan.last_growth = self.last_growth;
            self.scan = Some(scan);
        }
    }

    fn input(&mut self, input: &Input<'_, '_>, _events: &mut Vec<Event>) {
        if let (Input::Entry { number, parsed, .. }, Some(scan)) = (input, self.scan.as_mut()) {
            scan.push(*number, parsed);
        }
    }

    fn grew(&mut self, now: Duration) {
        self.last_growth = Some(now);
        if let Some(scan) = self.scan.as_mut() {
            scan.grew(now);
            // What was declared was about the tail as it stood; the shell withdraws it.
            scan.declared.clear();
        }
    }

    fn poll_deadline(&self) -> Option<Duration> {
        self.scan.as_ref().and_then(OrphanScan::poll_deadline)
    }

    fn handle_timeout(&mut self, now: Duration, inputs: &Inputs, events: &mut Vec<Event>) {
        let Some(scan) = self.scan.as_mut() else { return };
        if scan.poll_deadline().is_some_and(|d| now >= d) {
            events.extend(scan.declare(&inputs.paused).into_iter().map(Event::Tail));
        }
    }

    fn finish(&mut self, events: &mut Vec<Event>) {
        if let Some(scan) = self.scan.as_mut() {
            events.extend(scan.declare(&HashSet::new()).into_iter().map(|f| Event::Output(Output::Finding(f))));
        }
    }

    fn pending(&self) -> Option<usize> {
        self.scan.as_ref().map(|s| s.validator.pending_count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::formats::Format;

    fn feed(scan: &mut OrphanScan, lines: &[&str]) {
        for (i, l) in lines.iter().enumerate() {
            let p = Format::ClaudeCode.parse(l.as_bytes()).unwrap();
            scan.push(i as u64 + 1, &p);
        }
    }

    const CALL: &str =
        r#"{"type":"assistant","uuid":"a1","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}}"#;
    const RESULT: &str =
        r#"{"type":"user","uuid":"u2","parentUuid":"a1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}"#;

    #[test]
    fn a_tail_call_becomes_an_orphan_after_the_grace_period_without_growth() {
        let secs = Duration::from_secs;
        let mut s = OrphanScan::new(Format::ClaudeCode, secs(30));
        feed(&mut s, &[CALL]);
        s.grew(secs(100));
        assert_eq!(s.poll_deadline(), Some(secs(130)));
        assert!(s.handle_timeout(secs(129)).is_empty(), "still within the grace period");
        // The file grew (a progress line, no result): the wait starts again.
        s.grew(secs(120));
        assert!(s.handle_timeout(secs(130)).is_empty());
        let orphans = s.handle_timeout(secs(150));
        assert_eq!(orphans.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), vec!["t1"]);
        assert_eq!(s.poll_deadline(), None, "declared once");
        assert!(s.handle_timeout(secs(1000)).is_empty());
    }

    #[test]
    fn a_result_in_time_means_no_orphan() {
        let mut s = OrphanScan::new(Format::ClaudeCode, Duration::from_secs(5));
        feed(&mut s, &[CALL, RESULT]);
        s.grew(Duration::from_secs(1));
        assert_eq!(s.poll_deadline(), None);
        assert!(s.handle_timeout(Duration::from_secs(100)).is_empty());
        assert!(s.finish().is_empty());
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
