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
//! **One pairing.** The pairing rules (`validate_canonical`, docs/requirements.md) (the [`Validator`]: calls with their results, turns,
//! threads, rewinds) are the costliest state of a stream, and two stages read them: `validate`
//! reports their findings, `orphans` reads the calls they leave pending. They are not run once
//! per stage: the runner ([`Stages`]) keeps one [`Pairing`] per stream, made only when a stage
//! of the list declares it reads it ([`Stage::reads_pairing`]), feeds it each entry before handing the
//! entry to the stages, ends it before the stages' `finish`, and hands it (read-only) to every
//! stage call. This changes nothing a stage reports: the pairing's state after a line depends
//! on the lines alone, never on the stages around it, so each stage reads exactly what its own
//! validator would hold, where it stands in the list (`tests/integration/pipeline.rs`
//! `one_pairing`: either order, each alone, the same events, each line paired once).
//!
//! Calling order: [`Pipeline::feed`] any number of times (draining [`Pipeline::drain`] as you
//! go), with `grew` / `poll_deadline` / `handle_timeout` for a live file; then
//! [`Pipeline::finish`] once for a complete one.

use super::checker::{Checker, Observer, Options, Stats, StrictStop};
use super::finding::{Finding, Kind, Output};
use super::formats::Format;
use super::lines::{Framed, Numbered};
use super::model::Parsed;
use super::pairing::validator::Validator;
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
    /// Call ids a host lists as paused in `pending.json` beside the file (`Harness\Transcript`, docs/requirements.md): not
    /// orphans.
    pub paused: HashSet<String>,
}

/// What the shell saw happen to the file behind a stream: the stream is over, and what it held
/// may be gone with it ([`Stage::left`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Left {
    /// The file was deleted (unlinked, not renamed to a name a source reads).
    Deleted,
    /// The content read so far is no longer there: the file was truncated, or rewritten in
    /// place; `size` is what it holds now.
    Rewritten {
        /// Its size now, in bytes.
        size: u64,
    },
}

/// A file that left ([`Left`]), with what had been read of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gone {
    /// What happened.
    pub how: Left,
    /// Bytes read of it (complete lines).
    pub bytes: u64,
    /// Lines read of it.
    pub lines: u64,
    /// Conversation entries among them.
    pub messages: u64,
}

/// A pure pipeline stage. See the module docs for the calling order. A stage is `Any`, so that
/// a shell that built a preset list can take its own stage back ([`Pipeline::stage`],
/// [`Finished::take`]).
///
/// Each call is handed the stream's [`Pairing`]: the one pairing state machine of the list,
/// kept by the runner for the stages that ask for it ([`Stage::reads_pairing`]); the other stages
/// ignore it.
pub trait Stage: Any + Send + fmt::Debug {
    /// The stage's name, as in the configuration (`validate`, `orphans`, ...).
    fn name(&self) -> &'static str;
    /// Whether the stage reads the stream's [`Pairing`]: the runner pairs the lines (once,
    /// however many stages read it) only when a stage of the list does.
    fn reads_pairing(&self) -> bool {
        false
    }
    /// The format is known (before the first [`Input::Entry`]).
    fn format(&mut self, _format: Format) {}
    /// Format detection looked at line `number`: the format may still change with it (an edit
    /// up to this line may change what the file is detected as).
    fn detecting(&mut self, _number: u64) {}
    /// The conversation thread this stage assigned the last [`Input::Entry`] it was handed, if
    /// it assigns threads: the stages after it see it in the input.
    fn thread(&self, _pairing: &Pairing) -> Option<u64> {
        None
    }
    /// The next input, in stream order; `events` holds what the stages before this one made of
    /// it: add yours after them.
    fn input(&mut self, input: &Input<'_, '_>, pairing: &Pairing, events: &mut Vec<Event>);
    /// The stream grew at `now` (a duration since the shell's epoch): what was reported about
    /// its tail no longer holds, and quiet periods start again.
    fn grew(&mut self, _now: Duration) {}
    /// When [`Stage::handle_timeout`] is wanted next; `None`: nothing to wait for.
    fn poll_deadline(&self, _pairing: &Pairing) -> Option<Duration> {
        None
    }
    /// The clock reached `now`: a stage whose deadline passed adds what is due.
    fn handle_timeout(&mut self, _now: Duration, _inputs: &Inputs, _pairing: &Pairing, _events: &mut Vec<Event>) {}
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
    /// After [`Stage::replayed`]: the replay ended where the stream stood when its tail was
    /// last looked at, and the stream has not grown since, so what was said about the tail then
    /// still holds. `done`: whether the quiet period had passed then; `reported`: the tail
    /// findings reported then. A stage marks them reported, so that nothing of it is due again
    /// until the stream grows (a restart, a reload or an eviction changes nothing about a file).
    fn tail_stands(&mut self, _done: bool, _reported: &[Finding]) {}
    /// The shell saw the file behind the stream leave ([`Gone`]): deleted, or rewritten so that
    /// what was read is no longer there. The stream ends here (a rewritten file is read again
    /// as a new stream). Told to every stage, whether or not its state is in memory: a stage
    /// that the shell rebuilt for this call has seen no input.
    fn left(&mut self, _gone: &Gone, _pairing: &Pairing, _events: &mut Vec<Event>) {}
    /// The stream is complete: add what its end makes final. The pairing's
    /// [`Pairing::found`] holds what the end of the stream adds to it.
    fn finish(&mut self, _pairing: &Pairing, _events: &mut Vec<Event>) {}
    /// Calls (or tool events) waiting for their result, for a gauge; `None` if the stage does
    /// not track them.
    fn pending(&self, _pairing: &Pairing) -> Option<usize> {
        None
    }
    /// Counters by name the stage keeps (event types of an event log).
    fn counts(&self) -> Option<&BTreeMap<String, u64>> {
        None
    }
}

/// The pairing of one stream: the pairing rules (`validate_canonical`, docs/requirements.md) ([`Validator`]) run **once** over its
/// lines, for every stage of the list that reads them ([`Stage::reads_pairing`]: `validate` reports its
/// findings, `orphans` reads the calls it leaves pending). The runner feeds each entry to it
/// before handing the entry to the stages, and at the end of the stream ends it before the
/// stages' [`Stage::finish`]; the stages only read it. Its state after a line depends on the
/// lines alone, not on the stages around it, so one pairing serves every position in the
/// list: a stage reads what the pairing made of the current input ([`Pairing::found`]) where
/// it stands, and the pairing's state ([`Pairing::validator`]) between inputs.
#[derive(Debug, Default)]
pub struct Pairing {
    /// Whether a stage reads it (otherwise nothing is paired).
    wanted: bool,
    /// Made when the format is known.
    validator: Option<Box<Validator>>,
    /// What the pairing made of the current input (or of the end of the stream).
    found: Vec<Output>,
    /// Lines paired.
    lines: u64,
}

impl Pairing {
    /// A pairing for a stage list: it pairs only if a stage of `list` reads it.
    fn of(list: &[Box<dyn Stage>]) -> Self {
        Pairing { wanted: list.iter().any(|s| s.reads_pairing()), ..Pairing::default() }
    }

    /// The pairing state machine, once the format is known (and a stage reads it).
    pub fn validator(&self) -> Option<&Validator> {
        self.validator.as_deref()
    }

    /// The outputs of the pairing rules for the current input, in order: a readable line's, or
    /// at [`Stage::finish`] what [`Validator::finish`] reports at the end of the stream.
    pub fn found(&self) -> &[Output] {
        &self.found
    }

    /// How many lines were paired (each readable line once, however many stages read it).
    pub fn lines(&self) -> u64 {
        self.lines
    }

    fn format(&mut self, format: Format) {
        if self.wanted && self.validator.is_none() {
            self.validator = Some(Box::new(Validator::new(format)));
        }
    }

    /// Pairs the next input (a non-entry clears what was found).
    fn input(&mut self, input: &Input<'_, '_>) {
        self.found.clear();
        if let (Input::Entry { number, parsed, .. }, Some(v)) = (input, self.validator.as_mut()) {
            let found = &mut self.found;
            v.push(*number, parsed, &mut |o| found.push(o));
            self.lines += 1;
        }
    }

    /// The end of the stream: what it makes final (the pending calls stay readable).
    fn finish(&mut self) {
        self.found.clear();
        if let Some(v) = self.validator.as_mut() {
            let found = &mut self.found;
            v.end(&mut |o| found.push(o));
        }
    }

    fn shrink(&mut self) {
        self.found = Vec::new();
        if let Some(v) = self.validator.as_mut() {
            v.shrink();
        }
    }
}

/// The stages behind the front, in order, the stream's [`Pairing`], and the events they
/// produced not drained yet. A shell that reads lines itself (the `orphans` verb) runs its
/// preset list through this, as the [`Pipeline`] does: feed it as an [`Observer`], then
/// [`Stages::grew`], [`Stages::handle_timeout`], [`Stages::finish`], draining
/// [`Stages::drain`].
#[derive(Debug, Default)]
pub struct Stages {
    list: Vec<Box<dyn Stage>>,
    pairing: Pairing,
    events: Vec<Event>,
    scratch: Vec<Event>,
}

impl Stages {
    /// The runner of `list`, in order.
    pub fn new(list: Vec<Box<dyn Stage>>) -> Self {
        Stages { pairing: Pairing::of(&list), list, ..Stages::default() }
    }

    fn run(&mut self, input: &Input<'_, '_>, seed: Option<Event>) {
        self.pairing.input(input);
        let mut ev = std::mem::take(&mut self.scratch);
        ev.extend(seed);
        let mut input = *input;
        for s in &mut self.list {
            s.input(&input, &self.pairing, &mut ev);
            if let (Input::Entry { thread, .. }, Some(t)) = (&mut input, s.thread(&self.pairing)) {
                *thread = t;
            }
        }
        self.events.append(&mut ev);
        self.scratch = ev;
    }

    fn each(&mut self, seed: Option<Event>, mut f: impl FnMut(&mut dyn Stage, &Pairing, &mut Vec<Event>)) {
        let mut ev = std::mem::take(&mut self.scratch);
        ev.extend(seed);
        for s in &mut self.list {
            f(s.as_mut(), &self.pairing, &mut ev);
        }
        self.events.append(&mut ev);
        self.scratch = ev;
    }

    /// The stream's pairing.
    pub fn pairing(&self) -> &Pairing {
        &self.pairing
    }

    /// The stream grew at `now`.
    pub fn grew(&mut self, now: Duration) {
        for s in &mut self.list {
            s.grew(now);
        }
    }

    /// When [`Stages::handle_timeout`] is wanted next; `None`: nothing to wait for.
    pub fn poll_deadline(&self) -> Option<Duration> {
        self.list.iter().filter_map(|s| s.poll_deadline(&self.pairing)).min()
    }

    /// The clock reached `now`: each stage's due events, in stage order.
    pub fn handle_timeout(&mut self, now: Duration, inputs: &Inputs) {
        self.timeout(now, inputs, None);
    }

    fn timeout(&mut self, now: Duration, inputs: &Inputs, seed: Option<Event>) {
        self.each(seed, |s, pairing, ev| s.handle_timeout(now, inputs, pairing, ev));
    }

    /// The file behind the stream left ([`Stage::left`]): each stage, in order.
    pub fn left(&mut self, gone: &Gone) {
        self.each(None, |s, pairing, ev| s.left(gone, pairing, ev));
    }

    /// Ends a complete stream: the pairing first, then each stage, in order.
    pub fn finish(&mut self) {
        self.pairing.finish();
        self.each(None, |s, pairing, ev| s.finish(pairing, ev));
    }

    /// Events produced since the last call, in order.
    pub fn drain(&mut self) -> std::vec::Drain<'_, Event> {
        self.events.drain(..)
    }

    /// Lets go of spare capacity (the scratch of the last input, empty tables): what an idle
    /// stream keeps is its state, not the high-water mark of its busiest step.
    pub fn shrink(&mut self) {
        self.scratch = Vec::new();
        if self.events.is_empty() {
            self.events = Vec::new();
        }
        self.pairing.shrink();
    }
}

/// Findings of the front itself: lines that cannot be read (`nested_too_deep` too: valid JSON,
/// but not read).
fn is_framing(kind: Kind) -> bool {
    matches!(kind, Kind::MalformedLine | Kind::InvalidUtf8 | Kind::LineTooLong | Kind::TornLine | Kind::RefusedRecord | Kind::NestedTooDeep)
}

impl Observer for Stages {
    fn format(&mut self, format: Format) {
        self.pairing.format(format);
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
    Events(Box<EventFront>),
}

/// The front of an event log (boxed: a watched file keeps its pipeline inline).
#[derive(Debug)]
struct EventFront {
    lines: Numbered,
    stages: Stages,
    max: usize,
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
        let checker = Checker::observed(opts, Stages::new(stages));
        Pipeline { front: Front::Transcript(Box::new(checker)), quiet, last_growth: Duration::ZERO, tail_done: false }
    }

    /// An event-log pipeline: strict framing, then `stages` (the event-log stage first).
    pub fn events(max_line_bytes: usize, stages: Vec<Box<dyn Stage>>, quiet: Duration) -> Self {
        let stages = Stages::new(stages);
        let front = Front::Events(Box::new(EventFront { lines: Numbered::new(max_line_bytes), stages, max: max_line_bytes }));
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
            Front::Events(e) => {
                let EventFront { lines, stages, max } = &mut **e;
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
            Front::Events(_) => None,
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
            Front::Events(_) => None,
        }
    }

    fn stages(&self) -> &Stages {
        match &self.front {
            Front::Transcript(c) => c.observer(),
            Front::Events(e) => &e.stages,
        }
    }

    fn stages_mut(&mut self) -> &mut Stages {
        match &mut self.front {
            Front::Transcript(c) => c.observer_mut(),
            Front::Events(e) => &mut e.stages,
        }
    }

    /// Events produced since the last call, in order.
    pub fn drain(&mut self) -> std::vec::Drain<'_, Event> {
        self.stages_mut().drain()
    }

    /// The stream's pairing ([`Pairing`]).
    pub fn pairing(&self) -> &Pairing {
        self.stages().pairing()
    }

    /// Lets go of spare capacity once the stream has been read up to date (see
    /// [`Stages::shrink`]); the state is kept. A shell calls it when a file goes idle.
    pub fn shrink(&mut self) {
        if let Front::Transcript(c) = &mut self.front {
            c.shrink();
        }
        self.stages_mut().shrink();
    }

    /// Offset of the first line not fully read.
    pub fn committed_offset(&self) -> u64 {
        match &self.front {
            Front::Transcript(c) => c.splitter().committed_offset(),
            Front::Events(e) => e.lines.splitter().committed_offset(),
        }
    }

    /// The detected (or given) format of a transcript.
    pub fn format(&self) -> Option<Format> {
        match &self.front {
            Front::Transcript(c) => c.format(),
            Front::Events(_) => None,
        }
    }

    /// A transcript's counters (lines, calls, tokens).
    pub fn stats(&self) -> Option<&Stats> {
        match &self.front {
            Front::Transcript(c) => Some(c.stats()),
            Front::Events(_) => None,
        }
    }

    /// Calls waiting for their result, as the first stage that tracks them counts.
    pub fn pending(&self) -> usize {
        let st = self.stages();
        st.list.iter().find_map(|s| s.pending(&st.pairing)).unwrap_or(0)
    }

    /// Counters by name, as the first stage that keeps them counts.
    pub fn counts(&self) -> Option<&BTreeMap<String, u64>> {
        self.stages().list.iter().find_map(|s| s.counts())
    }

    /// The stream grew at `now`.
    pub fn grew(&mut self, now: Duration) {
        self.last_growth = now;
        self.tail_done = false;
        self.stages_mut().grew(now);
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

    /// After [`Pipeline::replayed`], when the replay ended where the stream stood when its tail
    /// was last looked at and the stream has not grown since: what was reported about the tail
    /// then still holds (`done`: the quiet period had passed; `reported`: the tail findings
    /// reported then). Neither the front's torn line nor a stage's tail is due again until the
    /// stream grows ([`Stage::tail_stands`]).
    pub fn tail_stands(&mut self, done: bool, reported: &[Finding]) {
        self.tail_done = done;
        for s in &mut self.stages_mut().list {
            s.tail_stands(done, reported);
        }
    }

    /// The file behind the stream left ([`Stage::left`]); drain the stages' events after.
    pub fn left(&mut self, gone: &Gone) {
        self.stages_mut().left(gone);
    }

    /// Whether the front's quiet period passed since the last growth (its tail was reported).
    pub fn tail_done(&self) -> bool {
        self.tail_done
    }

    /// When [`Pipeline::handle_timeout`] is wanted next; `None`: nothing to wait for.
    pub fn poll_deadline(&self) -> Option<Duration> {
        let own = (!self.tail_done).then(|| self.last_growth.saturating_add(self.quiet));
        self.stages().poll_deadline().into_iter().chain(own).min()
    }

    /// The clock reached `now`: the front's tail (a torn last line) once its quiet period has
    /// passed, then each stage's due events, in stage order.
    pub fn handle_timeout(&mut self, now: Duration, inputs: &Inputs) {
        let mut torn = None;
        if !self.tail_done && now >= self.last_growth.saturating_add(self.quiet) {
            self.tail_done = true;
            torn = self.torn();
        }
        self.stages_mut().timeout(now, inputs, torn.map(Event::Tail));
    }

    /// A last line without its newline, as the stream stands.
    fn torn(&self) -> Option<Finding> {
        match &self.front {
            Front::Transcript(c) => c.torn(),
            Front::Events(e) => {
                let (sp, next) = (e.lines.splitter(), e.lines.next_line());
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
                let mut done = c.finish()?;
                let mut st = done.observer;
                st.finish();
                if let Some(v) = st.pairing.validator() {
                    done.stats.dangling_parents = v.dangling_parents();
                }
                Ok(Finished { events: st.events, stats: done.stats, format: done.format, stages: st.list })
            }
            Front::Events(e) => {
                let EventFront { mut lines, mut stages, .. } = *e;
                if let Some((n, _)) = lines.finish() {
                    let f = Finding::new(n, Kind::TornLine, format!("event line {n} has no newline"));
                    stages.run(&Input::Fault, Some(Event::Output(Output::Finding(f))));
                }
                stages.finish();
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

    /// It was taken before the state was rebuilt, and the stream has not grown since
    /// ([`Stage::tail_stands`]): done.
    pub fn stands(&mut self) {
        self.done = true;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::stages::{orphans::Orphans, validate::Validate};

    const GRACE: Duration = Duration::from_secs(30);
    /// A chat stream whose last call has no result and whose last line is torn.
    const STREAM: &[u8] = b"{\"role\":\"user\",\"content\":\"q\"}\n{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"function\":{\"name\":\"Read\",\"arguments\":\"{}\"}}]}\n{\"role\":\"assistant\",\"content\":\"half";

    fn pipeline() -> Pipeline {
        let stages: Vec<Box<dyn Stage>> = vec![Box::new(Orphans::new(GRACE)), Box::new(Validate::new(GRACE))];
        Pipeline::transcript(Options { format: Some(Format::OpenAiChat), ..Options::default() }, stages, GRACE)
    }

    /// The tail findings a deadline at `now` reports.
    fn tail_at(p: &mut Pipeline, now: Duration) -> Vec<Finding> {
        p.handle_timeout(now, &Inputs::default());
        p.drain().filter_map(|e| if let Event::Tail(f) = e { Some(f) } else { None }).collect()
    }

    /// A state rebuilt from the same bytes (a restart, a reload, an eviction) after its tail
    /// was reported: the tail stands, nothing is due again until the stream grows.
    #[test]
    fn a_rebuilt_state_whose_tail_stands_reports_nothing_again() {
        let secs = Duration::from_secs;
        let mut first = pipeline();
        first.feed(STREAM).unwrap();
        first.drain().for_each(drop);
        first.grew(secs(100));
        let reported = tail_at(&mut first, secs(130));
        let kinds: Vec<Kind> = reported.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, vec![Kind::TornLine, Kind::OrphanCall], "{reported:?}");
        assert_eq!(first.poll_deadline(), None);

        // Rebuilt as the daemon does: the clock at its start, the bytes replayed.
        let rebuilt = || {
            let mut p = pipeline();
            p.grew(secs(1000));
            p.feed(STREAM).unwrap();
            p.replayed::<&str>(&[]);
            p
        };
        // Without being told that the tail stands, the rebuilt state reports it again (the
        // bug of issue 30.3).
        assert_eq!(tail_at(&mut rebuilt(), secs(1030)).len(), 2);
        let mut p = rebuilt();
        p.tail_stands(true, &reported);
        assert_eq!(p.poll_deadline(), None, "nothing due");
        assert!(tail_at(&mut p, secs(5000)).is_empty());
        // Growth: the tail is looked at again (the shell retracted what it reported).
        p.grew(secs(6000));
        assert_eq!(tail_at(&mut p, secs(6030)).len(), 2);

        // A call not reported then (paused in `pending.json`) is looked at again.
        let mut p = rebuilt();
        p.tail_stands(true, &reported[..1]);
        assert_eq!(p.poll_deadline(), Some(secs(1030)));
        let again: Vec<Kind> = tail_at(&mut p, secs(1030)).iter().map(|f| f.kind).collect();
        assert_eq!(again, vec![Kind::OrphanCall]);
    }
}
