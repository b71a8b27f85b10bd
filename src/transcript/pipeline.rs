//! The pipeline: a parse front (line framing, format detection, the format's adapter) followed
//! by stages, **in the order given** — the order of the daemon's `[[stages]]`, or a verb's
//! preset list.
//!
//! A [`Stage`] is a pure state machine: it is handed each input in stream order (a parsed
//! entry, an event-log line, or a line the front could not read) together with the [`Event`]s
//! the stages before it made of that input, and adds its own. So a stage sees only what earlier
//! stages produced (the repair trigger placed before `validate` sees framing errors only), and a
//! line's records come out in stage order. Time is an input, as in quinn: the shell reports
//! growth with [`Pipeline::grew`], sleeps until [`Pipeline::poll_deadline`] and calls
//! [`Pipeline::handle_timeout`] with the current time; what a stage says about the stream *as
//! it stands* (a torn last line, an empty open turn, calls left open) comes out then, as
//! [`Event::Tail`], once per quiet period. Inputs from outside the stream (`pending.json`) are
//! passed in [`Inputs`] by the shell, which reads them.
//!
//! Calling order: [`Pipeline::feed`] any number of times (draining [`Pipeline::drain`] as you
//! go), with `grew` / `poll_deadline` / `handle_timeout` for a live file; then
//! [`Pipeline::finish`] once for a complete one.

use super::checker::{Checker, Observer, Options, Stats, StrictStop};
use super::finding::{Finding, Kind, Output};
use super::formats::Format;
use super::lines::{Framed, Numbered};
use super::model::Parsed;
use std::any::Any;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::time::Duration;

/// One input, as the stages see it.
#[derive(Debug, Clone, Copy)]
pub enum Input<'l, 'a> {
    /// A readable transcript line and its meaning.
    Entry {
        /// The 1-based line number.
        number: u64,
        /// What the adapter made of it.
        parsed: &'l Parsed<'a>,
        /// Its conversation thread, as a stage before this one assigned it ([`Stage::thread`]:
        /// `validate` follows Claude Code's sidechains); [`MAIN_THREAD`](super::model::MAIN_THREAD)
        /// until one does.
        thread: u64,
    },
    /// A complete line of an event log (the front framed it; the event-log stage reads it).
    Event {
        /// The 1-based line number.
        number: u64,
        /// The line, without its newline.
        bytes: &'a [u8],
    },
    /// A line the front could not read: its finding is already in the events.
    Fault,
    /// A dataset line's finding (a conversation per line, checked whole while it was read):
    /// the validation stage's to report.
    Dataset(&'l Output),
}

/// What stages produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A finding, or the demotion of an earlier one, as `check` reports them.
    Output(Output),
    /// A compaction boundary at this line.
    Compaction {
        /// The line.
        line: u64,
    },
    /// A finding about the stream as it stands, reported at a deadline; it stops holding when
    /// the stream grows (the shell retracts it then).
    Tail(Finding),
    /// The stream had error findings (from the stages before the repair trigger) and has been
    /// idle for its `min_idle`: the shell repairs it.
    RepairDue,
}

impl Event {
    /// The finding this event reports, if it reports one.
    pub fn finding(&self) -> Option<&Finding> {
        match self {
            Event::Output(Output::Finding(f)) | Event::Tail(f) => Some(f),
            _ => None,
        }
    }
}

/// What the shell reads from outside the stream for the stages, at a deadline.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// Call ids a host lists as paused in `pending.json` beside the file (seed 003): not
    /// orphans.
    pub paused: HashSet<String>,
}

/// A pure pipeline stage. See the module docs for the calling order. A stage is `Any`, so that
/// a shell that built a preset list can take its own stage back ([`Pipeline::stage`],
/// [`Finished::take`]).
pub trait Stage: Any + Send + fmt::Debug {
    /// The stage's name, as in the configuration (`validate`, `orphans`, ...).
    fn name(&self) -> &'static str;
    /// The format is known (before the first [`Input::Entry`]).
    fn format(&mut self, _format: Format) {}
    /// Format detection looked at line `number`: the format may still change with it (an edit
    /// up to this line may change what the file is detected as).
    fn detecting(&mut self, _number: u64) {}
    /// The conversation thread this stage assigned the last [`Input::Entry`] it was handed, if
    /// it assigns threads: the stages after it see it in the input.
    fn thread(&self) -> Option<u64> {
        None
    }
    /// The next input, in stream order; `events` holds what the stages before this one made of
    /// it: add yours after them.
    fn input(&mut self, input: &Input<'_, '_>, events: &mut Vec<Event>);
    /// The stream grew at `now` (a duration since the shell's epoch): what was reported about
    /// its tail no longer holds, and quiet periods start again.
    fn grew(&mut self, _now: Duration) {}
    /// When [`Stage::handle_timeout`] is wanted next; `None`: nothing to wait for.
    fn poll_deadline(&self) -> Option<Duration> {
        None
    }
    /// The clock reached `now`: a stage whose deadline passed adds what is due.
    fn handle_timeout(&mut self, _now: Duration, _inputs: &Inputs, _events: &mut Vec<Event>) {}
    /// Whether the stage owes work for the inputs so far: something it will still make due
    /// (a repair after errors, once the stream is idle). A shell that drops the state (an
    /// eviction, a restart) keeps this beside the file's progress and hands it back to
    /// [`Stage::replayed`] once a replay has rebuilt the state.
    fn owes(&self) -> bool {
        false
    }
    /// The inputs so far were a replay of lines reported before (after a restart, or to rebuild
    /// an evicted file's state): forget what they would make due, except what the stage still
    /// owed when its state was dropped (`owed`: its [`Stage::owes`] then).
    fn replayed(&mut self, _owed: bool) {}
    /// The stream is complete: add what its end makes final.
    fn finish(&mut self, _events: &mut Vec<Event>) {}
    /// Calls (or tool events) waiting for their result, for a gauge; `None` if the stage does
    /// not track them.
    fn pending(&self) -> Option<usize> {
        None
    }
    /// Counters by name the stage keeps (event types of an event log).
    fn counts(&self) -> Option<&BTreeMap<String, u64>> {
        None
    }
}

/// The stages behind the front, in order, and the events they produced not drained yet.
#[derive(Debug, Default)]
pub struct Stages {
    list: Vec<Box<dyn Stage>>,
    events: Vec<Event>,
    scratch: Vec<Event>,
}

impl Stages {
    fn run(&mut self, input: &Input<'_, '_>, seed: Option<Event>) {
        let mut ev = std::mem::take(&mut self.scratch);
        ev.extend(seed);
        let mut input = *input;
        for s in &mut self.list {
            s.input(&input, &mut ev);
            if let (Input::Entry { thread, .. }, Some(t)) = (&mut input, s.thread()) {
                *thread = t;
            }
        }
        self.events.append(&mut ev);
        self.scratch = ev;
    }

    fn each(&mut self, seed: Option<Event>, mut f: impl FnMut(&mut dyn Stage, &mut Vec<Event>)) {
        let mut ev = std::mem::take(&mut self.scratch);
        ev.extend(seed);
        for s in &mut self.list {
            f(s.as_mut(), &mut ev);
        }
        self.events.append(&mut ev);
        self.scratch = ev;
    }
}

/// Findings of the front itself: lines that cannot be read.
fn is_framing(kind: Kind) -> bool {
    matches!(kind, Kind::MalformedLine | Kind::InvalidUtf8 | Kind::LineTooLong | Kind::TornLine)
}

impl Observer for Stages {
    fn format(&mut self, format: Format) {
        for s in &mut self.list {
            s.format(format);
        }
    }

    fn detecting(&mut self, number: u64) {
        for s in &mut self.list {
            s.detecting(number);
        }
    }

    fn line(&mut self, number: u64, parsed: &Parsed<'_>) {
        self.run(&Input::Entry { number, parsed, thread: parsed.thread }, None);
    }

    fn output(&mut self, output: &Output) {
        match output {
            Output::Finding(f) if is_framing(f.kind) => self.run(&Input::Fault, Some(Event::Output(output.clone()))),
            _ => self.run(&Input::Dataset(output), None),
        }
    }
}

/// How the front reads lines.
#[derive(Debug)]
enum Front {
    /// Transcripts: the check pipeline's framing, detection and adapters (its own validation
    /// off: validation is a stage).
    Transcript(Box<Checker<Stages>>),
    /// Event logs: strict framing; the lines go to the stages raw.
    Events { lines: Numbered, stages: Stages, max: usize },
}

/// A pipeline over one stream. See the module docs.
#[derive(Debug)]
pub struct Pipeline {
    front: Front,
    /// Quiet time after which the front reports a torn last line.
    quiet: Duration,
    last_growth: Duration,
    tail_done: bool,
}

impl Pipeline {
    /// A transcript pipeline: the front reads as `opts` say, then `stages` in order. A torn
    /// last line is reported once the stream has been quiet for `quiet`.
    pub fn transcript(opts: Options, stages: Vec<Box<dyn Stage>>, quiet: Duration) -> Self {
        let stages = Stages { list: stages, ..Stages::default() };
        let checker = Checker::observed(opts, stages).without_validation();
        Pipeline { front: Front::Transcript(Box::new(checker)), quiet, last_growth: Duration::ZERO, tail_done: false }
    }

    /// An event-log pipeline: strict framing, then `stages` (the event-log stage first).
    pub fn events(max_line_bytes: usize, stages: Vec<Box<dyn Stage>>, quiet: Duration) -> Self {
        let stages = Stages { list: stages, ..Stages::default() };
        let front = Front::Events { lines: Numbered::new(max_line_bytes), stages, max: max_line_bytes };
        Pipeline { front, quiet, last_growth: Duration::ZERO, tail_done: false }
    }

    /// Feeds the next chunk. With the strict policy, returns the first unreadable line.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), StrictStop> {
        match &mut self.front {
            Front::Transcript(c) => {
                let r = c.feed(chunk);
                // The stages saw every output through the observer.
                c.drain().for_each(drop);
                r
            }
            Front::Events { lines, stages, max } => {
                let max = *max;
                lines.feed(chunk, &mut |f| match f {
                    Framed::TooLong { number, len } => {
                        let f = Finding::new(number, Kind::LineTooLong, format!("event line of {len} bytes is over the limit of {max}"));
                        stages.run(&Input::Fault, Some(Event::Output(Output::Finding(f))));
                    }
                    Framed::Line(l) => match crate::transcript::checker::read_line(l.number, l.bytes, max, None) {
                        crate::transcript::checker::Outcome::Fault(f) => stages.run(&Input::Fault, Some(Event::Output(Output::Finding(f)))),
                        _ => stages.run(&Input::Event { number: l.number, bytes: l.bytes }, None),
                    },
                });
                Ok(())
            }
        }
    }

    /// The check pipeline of a transcript front (where it stands: the next line, the settled
    /// format).
    pub fn checker(&self) -> Option<&Checker<Stages>> {
        match &self.front {
            Front::Transcript(c) => Some(c),
            Front::Events { .. } => None,
        }
    }

    /// The first stage of type `S` in the list (a shell that built the list reads its own
    /// stage's progress).
    pub fn stage<S: Stage>(&self) -> Option<&S> {
        self.stages().list.iter().find_map(|s| (s.as_ref() as &dyn Any).downcast_ref::<S>())
    }

    /// The first stage of type `S` in the list, to change.
    pub fn stage_mut<S: Stage>(&mut self) -> Option<&mut S> {
        self.stages_mut().list.iter_mut().find_map(|s| (s.as_mut() as &mut dyn Any).downcast_mut::<S>())
    }

    /// The check pipeline of a transcript front, to feed on several threads
    /// ([`crate::transcript::checker::feed_parallel`]).
    pub fn checker_mut(&mut self) -> Option<&mut Checker<Stages>> {
        match &mut self.front {
            Front::Transcript(c) => Some(c),
            Front::Events { .. } => None,
        }
    }

    fn stages(&self) -> &Stages {
        match &self.front {
            Front::Transcript(c) => c.observer(),
            Front::Events { stages, .. } => stages,
        }
    }

    fn stages_mut(&mut self) -> &mut Stages {
        match &mut self.front {
            Front::Transcript(c) => c.observer_mut(),
            Front::Events { stages, .. } => stages,
        }
    }

    /// Events produced since the last call, in order.
    pub fn drain(&mut self) -> std::vec::Drain<'_, Event> {
        self.stages_mut().events.drain(..)
    }

    /// Offset of the first line not fully read.
    pub fn committed_offset(&self) -> u64 {
        match &self.front {
            Front::Transcript(c) => c.splitter().committed_offset(),
            Front::Events { lines, .. } => lines.splitter().committed_offset(),
        }
    }

    /// The detected (or given) format of a transcript.
    pub fn format(&self) -> Option<Format> {
        match &self.front {
            Front::Transcript(c) => c.format(),
            Front::Events { .. } => None,
        }
    }

    /// A transcript's counters (lines, calls, tokens).
    pub fn stats(&self) -> Option<&Stats> {
        match &self.front {
            Front::Transcript(c) => Some(c.stats()),
            Front::Events { .. } => None,
        }
    }

    /// Calls waiting for their result, as the first stage that tracks them counts.
    pub fn pending(&self) -> usize {
        self.stages().list.iter().find_map(|s| s.pending()).unwrap_or(0)
    }

    /// Counters by name, as the first stage that keeps them counts.
    pub fn counts(&self) -> Option<&BTreeMap<String, u64>> {
        self.stages().list.iter().find_map(|s| s.counts())
    }

    /// The stream grew at `now`.
    pub fn grew(&mut self, now: Duration) {
        self.last_growth = now;
        self.tail_done = false;
        for s in &mut self.stages_mut().list {
            s.grew(now);
        }
    }

    /// The names of the stages that owe work for the inputs so far ([`Stage::owes`]): what a
    /// shell keeps when it drops the state, for [`Pipeline::replayed`].
    pub fn owed(&self) -> Vec<&'static str> {
        self.stages().list.iter().filter(|s| s.owes()).map(|s| s.name()).collect()
    }

    /// The inputs so far replayed lines reported before: their events are dropped, and the
    /// stages forget what those lines would make due, except the work of the stages named in
    /// `owed` (what [`Pipeline::owed`] said when the state was dropped).
    pub fn replayed<S: AsRef<str>>(&mut self, owed: &[S]) {
        let st = self.stages_mut();
        st.events.clear();
        for s in &mut st.list {
            let name = s.name();
            s.replayed(owed.iter().any(|o| o.as_ref() == name));
        }
    }

    /// Whether the front's quiet period passed since the last growth (its tail was reported).
    pub fn tail_done(&self) -> bool {
        self.tail_done
    }

    /// When [`Pipeline::handle_timeout`] is wanted next; `None`: nothing to wait for.
    pub fn poll_deadline(&self) -> Option<Duration> {
        let own = (!self.tail_done).then(|| self.last_growth.saturating_add(self.quiet));
        self.stages().list.iter().filter_map(|s| s.poll_deadline()).chain(own).min()
    }

    /// The clock reached `now`: the front's tail (a torn last line) once its quiet period has
    /// passed, then each stage's due events, in stage order.
    pub fn handle_timeout(&mut self, now: Duration, inputs: &Inputs) {
        let mut torn = None;
        if !self.tail_done && now >= self.last_growth.saturating_add(self.quiet) {
            self.tail_done = true;
            torn = self.torn();
        }
        self.stages_mut().each(torn.map(Event::Tail), |s, ev| s.handle_timeout(now, inputs, ev));
    }

    /// A last line without its newline, as the stream stands.
    fn torn(&self) -> Option<Finding> {
        match &self.front {
            Front::Transcript(c) => c.tail().into_iter().find(|f| f.kind == Kind::TornLine),
            Front::Events { lines, .. } => {
                let (sp, next) = (lines.splitter(), lines.next_line());
                (sp.pending_bytes() > 0 && !sp.pending_is_blank()).then(|| Finding::new(next, Kind::TornLine, format!("event line {next} has no newline")))
            }
        }
    }

    /// Ends a complete stream: the remaining events, the counters and the format.
    pub fn finish(self) -> Result<(Vec<Event>, Stats, Option<Format>), StrictStop> {
        let done = self.finish_stages()?;
        Ok((done.events, done.stats, done.format))
    }

    /// Ends a complete stream and gives the stages back with what it produced: a shell that
    /// built a preset list takes its stage's result ([`Finished::take`]).
    pub fn finish_stages(self) -> Result<Finished, StrictStop> {
        match self.front {
            Front::Transcript(c) => {
                let done = c.finish()?;
                let mut st = done.observer;
                st.each(None, |s, ev| s.finish(ev));
                Ok(Finished { events: st.events, stats: done.stats, format: done.format, stages: st.list })
            }
            Front::Events { mut lines, mut stages, .. } => {
                if let Some((n, _)) = lines.finish() {
                    let f = Finding::new(n, Kind::TornLine, format!("event line {n} has no newline"));
                    stages.run(&Input::Fault, Some(Event::Output(Output::Finding(f))));
                }
                stages.each(None, |s, ev| s.finish(ev));
                Ok(Finished { events: stages.events, stats: Stats::default(), format: None, stages: stages.list })
            }
        }
    }
}

/// A finished pipeline ([`Pipeline::finish_stages`]).
#[derive(Debug)]
pub struct Finished {
    /// The events not drained yet.
    pub events: Vec<Event>,
    /// A transcript's counters.
    pub stats: Stats,
    /// The detected (or given) format, as it stands at the end.
    pub format: Option<Format>,
    /// The stages, in order.
    pub stages: Vec<Box<dyn Stage>>,
}

impl Finished {
    /// Takes the first stage of type `S` out of the list.
    pub fn take<S: Stage>(&mut self) -> Option<Box<S>> {
        let i = self.stages.iter().position(|s| (s.as_ref() as &dyn Any).is::<S>())?;
        (self.stages.remove(i) as Box<dyn Any>).downcast::<S>().ok()
    }
}

/// A quiet period: due once after each growth. Shared by the stages whose tail waits for the
/// stream to be quiet.
#[derive(Debug, Clone, Copy)]
pub struct Quiet {
    /// How long.
    pub period: Duration,
    last_growth: Duration,
    done: bool,
}

impl Quiet {
    /// A quiet period of `period`, due `period` after the start.
    pub fn new(period: Duration) -> Self {
        Quiet { period, last_growth: Duration::ZERO, done: false }
    }

    /// The stream grew at `now`.
    pub fn grew(&mut self, now: Duration) {
        self.last_growth = now;
        self.done = false;
    }

    /// When it is due, if it is not done.
    pub fn deadline(&self) -> Option<Duration> {
        (!self.done).then(|| self.last_growth.saturating_add(self.period))
    }

    /// Whether it is due at `now`; marks it done if so.
    pub fn take(&mut self, now: Duration) -> bool {
        let due = self.deadline().is_some_and(|d| now >= d);
        self.done |= due;
        due
    }
}

/// The compaction stage: a `compaction` event for each compaction boundary.
#[derive(Debug, Default)]
pub struct Compactions;

impl Stage for Compactions {
    fn name(&self) -> &'static str {
        "compaction"
    }

    fn input(&mut self, input: &Input<'_, '_>, events: &mut Vec<Event>) {
        if let Input::Entry { number, parsed, .. } = input {
            if matches!(parsed.entry, crate::transcript::model::Entry::Compaction { .. }) {
                events.push(Event::Compaction { line: *number });
            }
        }
    }
}

/// The repair trigger: a stream that had error findings from the stages before it, and has
/// been idle for `min_idle`, is due for repair ([`Event::RepairDue`], once per batch of
/// errors). The repair itself is IO: the shell runs it.
#[derive(Debug)]
pub struct RepairTrigger {
    idle: Quiet,
    errors: bool,
}

impl RepairTrigger {
    /// A trigger after `min_idle` without growth.
    pub fn new(min_idle: Duration) -> Self {
        RepairTrigger { idle: Quiet::new(min_idle), errors: false }
    }

    fn see(&mut self, events: &[Event]) {
        self.errors |= events.iter().filter_map(Event::finding).any(|f| f.severity == crate::transcript::Severity::Error);
    }
}

impl Stage for RepairTrigger {
    fn name(&self) -> &'static str {
        "repair"
    }

    fn input(&mut self, _input: &Input<'_, '_>, events: &mut Vec<Event>) {
        self.see(events);
    }

    fn grew(&mut self, now: Duration) {
        self.idle.grew(now);
    }

    fn poll_deadline(&self) -> Option<Duration> {
        self.idle.deadline().filter(|_| self.errors)
    }

    fn handle_timeout(&mut self, now: Duration, _inputs: &Inputs, events: &mut Vec<Event>) {
        // Tail findings of the stages before this one, due at the same time, count too.
        self.see(events);
        if self.errors && self.idle.take(now) {
            self.errors = false;
            events.push(Event::RepairDue);
        }
    }

    fn owes(&self) -> bool {
        self.errors
    }

    fn replayed(&mut self, owed: bool) {
        // The errors of the replayed lines were made due before the state was dropped, unless
        // they were still owed then (the file not idle for `min_idle` yet).
        self.errors = owed;
    }

    fn finish(&mut self, events: &mut Vec<Event>) {
        self.see(events);
        if std::mem::take(&mut self.errors) {
            events.push(Event::RepairDue);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::finding::Kind;

    fn error() -> Event {
        Event::Output(Output::Finding(Finding::new(3, Kind::OrphanResult, "result without its call")))
    }

    /// What the repair trigger owes survives a replay only when the shell hands it back.
    #[test]
    fn the_repair_trigger_owes_a_repair_across_a_replay_only_when_told() {
        let secs = Duration::from_secs;
        for owed in [false, true] {
            let mut t = RepairTrigger::new(secs(5));
            let mut events = vec![error()];
            t.input(&Input::Fault, &mut events);
            t.grew(secs(10));
            assert!(t.owes(), "errors seen and not yet idle for min_idle: a repair is owed");
            assert_eq!(t.poll_deadline(), Some(secs(15)));
            // The state is dropped and rebuilt by a replay (which sees the same error again).
            let mut rebuilt = RepairTrigger::new(secs(5));
            rebuilt.input(&Input::Fault, &mut vec![error()]);
            rebuilt.grew(secs(10));
            rebuilt.replayed(owed);
            assert_eq!(rebuilt.owes(), owed);
            let mut due = Vec::new();
            rebuilt.handle_timeout(secs(15), &Inputs::default(), &mut due);
            assert_eq!(due.iter().filter(|e| matches!(e, Event::RepairDue)).count(), usize::from(owed));
            assert!(!rebuilt.owes(), "made due: owed no more");
        }
    }
}
