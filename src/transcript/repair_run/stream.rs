//! Repair in one pass: the check pipeline and the rewriter run over the same bytes, the
//! rewriter a little behind.
//!
//! A line is final once no later line can bring an edit for it: the planner knows how far back
//! its future edits can reach ([`Planner::watermark`]: the first line of the oldest turn it still
//! tracks). The rewriter is fed every whole line below that mark as soon as the checker has read
//! past it; the caller keeps the bytes from the mark on and hands them in again with the next
//! chunk. Read once, written once: the two-pass repair ([`Rewriter::new`] over a finished
//! [`Plan`]) reads every byte twice.
//!
//! When the pass cannot go on (the held bytes grow past [`HOLD_LIMIT`], an edit arrives for a
//! line already written, an over-long line must be removed), [`Step::Abandon`] says so: the
//! caller drops what was written, finishes the plan from where [`StreamRepair::abandon`] leaves
//! it and runs the two-pass repair. *Invariant* (property-tested): for any chunking, the output and the
//! rejects are byte for byte those of the two-pass repair.

use crate::transcript::finding::Kind;
use crate::transcript::formats::Format;
use crate::transcript::repair::plan::{Edit, OrphanPolicy, Plan, Planner};
use crate::transcript::repair::rejects::Emit;
use crate::transcript::repair::rewrite::{RewriteLog, Rewriter};
use crate::transcript::{Options, Pipeline, StrictStop};

/// Bytes the one-pass repair may hold back (the lines from the watermark on) before it gives up.
pub const HOLD_LIMIT: usize = 32 << 20;

/// Why the one-pass repair stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Abandon {
    /// More than [`HOLD_LIMIT`] bytes would have to be held.
    TooFarBack,
    /// An edit for a line already written (`line`).
    LateEdit(u64),
    /// An over-long line is removed: the two-pass repair streams it into the rejects.
    LongLine,
}

/// What a step of the one-pass repair did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Fed; this many bytes at the front of the held bytes are done with.
    Consumed(usize),
    /// The pass cannot go on: see [`StreamRepair`].
    Abandon(Abandon),
}

/// Where planning stood when the one-pass repair gave up: finish it, then repair in two passes.
pub enum Rest {
    /// Still reading: feed the plan pipeline the rest of the stream (draining its events),
    /// then take its plan ([`super::finish_plan`]).
    Planning(Box<Pipeline>),
    /// The whole stream was read: the plan.
    Planned(Plan),
}

/// The one-pass repair of one stream. Per chunk: [`StreamRepair::read`] it, then
/// [`StreamRepair::write`] what became final; at the end [`StreamRepair::end`], then
/// [`StreamRepair::finish`]. Until [`StreamRepair::edited`] turns true, everything written is
/// the input unchanged (a caller may copy it from the input instead).
pub struct StreamRepair {
    /// The plan pipeline (`validate`, then the planner) until the stream ends.
    checker: Option<Pipeline>,
    plan: Option<Plan>,
    rewriter: Rewriter,
    /// Edits of the planner already handed to the rewriter.
    taken: usize,
    format_set: bool,
    hold_limit: usize,
    /// The errors the stream checks with, as far as it has been read.
    errors: super::ErrorTally,
}

impl StreamRepair {
    /// A repair at the start of a stream (the lenient policy: repair needs every line read).
    pub fn new(opts: &Options, policy: OrphanPolicy) -> Self {
        let opts = Options { strict: false, ..opts.clone() };
        let rewriter = Rewriter::empty(opts.format.unwrap_or(Format::ClaudeCode), opts.max_line_bytes);
        let mut planner = Planner::new(policy);
        planner.record_parents(true);
        let checker = Some(super::plan_pipeline_with(&opts, planner));
        StreamRepair { checker, plan: None, rewriter, taken: 0, format_set: false, hold_limit: HOLD_LIMIT, errors: super::ErrorTally::default() }
    }

    /// Gives up when more than `bytes` would have to be held (default [`HOLD_LIMIT`]).
    pub fn with_hold_limit(mut self, bytes: usize) -> Self {
        self.hold_limit = bytes;
        self
    }

    /// Whether any edit has been planned so far (until then the output is the input).
    pub fn edited(&self) -> bool {
        self.taken > 0
    }

    /// Reads the next chunk of the stream (check and plan).
    pub fn read(&mut self, fresh: &[u8]) -> Result<Option<Abandon>, StrictStop> {
        let c = self.checker.as_mut().expect("read after end");
        c.feed(fresh)?;
        // The plan is taken at the end: the findings have done their work, but for the count
        // of errors the repaired output is held to.
        self.errors.add(c.drain());
        if !self.format_set {
            if let Some(f) = c.checker().and_then(|c| c.settled_format()) {
                self.rewriter.set_format(f);
                self.format_set = true;
            }
        }
        let planner = c.stage_mut::<Planner>().expect("a plan pipeline has a planner");
        self.rewriter.add_parents(planner.take_parents());
        if self.format_set && self.rewriter.format().upserts() {
            // An upsert log's edits wait for the end ([`StreamRepair::write`] holds every line):
            // a later version of a record may take one back.
            return Ok(None);
        }
        Ok(take(&mut self.rewriter, &mut self.taken, planner.edits()))
    }

    /// Writes the whole lines at the front of `held` (what earlier steps did not consume, then
    /// what was read since) that are final.
    pub fn write(&mut self, held: &[u8], out: &mut impl FnMut(Emit<'_>)) -> Step {
        // Until the format is known nothing is final: the format decides the edits.
        let done = match &self.checker {
            // An upsert log's lines are final at the end of the stream.
            Some(_) if self.format_set && self.rewriter.format().upserts() => 0,
            Some(c) if self.format_set => {
                let next = c.checker().map_or(0, |c| c.next_line());
                let stop = next.min(c.stage::<Planner>().map_or(0, Planner::watermark));
                self.rewriter.feed_until(held, stop, out)
            }
            _ => 0,
        };
        if held.len() - done > self.hold_limit {
            return Step::Abandon(Abandon::TooFarBack);
        }
        Step::Consumed(done)
    }

    /// Reads and writes one chunk: `held` is what earlier steps did not consume followed by the
    /// `fresh` bytes just read.
    pub fn feed(&mut self, held: &[u8], fresh: usize, out: &mut impl FnMut(Emit<'_>)) -> Result<Step, StrictStop> {
        if let Some(a) = self.read(&held[held.len() - fresh..])? {
            return Ok(Step::Abandon(a));
        }
        Ok(self.write(held, out))
    }

    /// The stream has ended: the plan is complete (the end brings a torn line, orphan calls).
    pub fn end(&mut self) -> Result<Option<Abandon>, StrictStop> {
        let (planner, format, dangling) = super::finish_planner(self.checker.take().expect("ended once"), &mut self.errors)?;
        let late = take(&mut self.rewriter, &mut self.taken, planner.edits());
        let mut plan = planner.into_plan(format);
        plan.dangling_parents = dangling;
        self.rewriter.set_format(plan.format.unwrap_or(Format::ClaudeCode));
        self.plan = Some(plan);
        Ok(late)
    }

    /// Writes what is left (`held`, after [`StreamRepair::end`]): the plan and what the rewrite
    /// did.
    pub fn finish(self, held: &[u8], out: &mut impl FnMut(Emit<'_>)) -> (Plan, RewriteLog) {
        let mut rewriter = self.rewriter;
        rewriter.feed(held, out);
        (self.plan.expect("finish after end"), rewriter.finish(out))
    }

    /// The errors of the stream as far as it has been read (all of it after
    /// [`StreamRepair::end`]), taken: what [`StreamRepair::abandon`] leaves to its caller to
    /// go on with.
    pub fn take_errors(&mut self) -> super::ErrorTally {
        std::mem::take(&mut self.errors)
    }

    /// Where planning stands, to finish it after the pass gave up.
    pub fn abandon(self) -> Rest {
        match (self.checker, self.plan) {
            (Some(mut c), _) => {
                if let Some(planner) = c.stage_mut::<Planner>() {
                    planner.record_parents(false);
                }
                Rest::Planning(Box::new(c))
            }
            (None, Some(p)) => Rest::Planned(p),
            (None, None) => unreachable!("a plan is made when the checker finishes"),
        }
    }
}

/// Hands the planner's new edits (`edits[*taken..]`) to the rewriter; says why not when it
/// cannot take them.
fn take(rewriter: &mut Rewriter, taken: &mut usize, edits: &[Edit]) -> Option<Abandon> {
    let new = &edits[*taken..];
    if let Some(e) = new.iter().find(|e| !rewriter.accepts(e)) {
        return Some(Abandon::LateEdit(e.line()));
    }
    if new.iter().any(|e| matches!(e, Edit::Remove { reason: Kind::LineTooLong, .. })) {
        return Some(Abandon::LongLine);
    }
    rewriter.add(new);
    *taken = edits.len();
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::repair_run::{plan_bytes, repair_bytes};

    const CLAUDE: &str = concat!(
        r#"{"type":"user","uuid":"u1","parentUuid":null,"message":{"role":"user","content":"go"}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a1","parentUuid":"u1","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}}"#,
        "\n",
        "not json\n",
        r#"{"type":"user","uuid":"u2","parentUuid":"a1","message":{"role":"user","content":"and?"}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a2","parentUuid":"u2","message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"done"}]}}"#,
        "\n",
    );

    /// Feeds `input` in `chunk`-byte pieces; returns the output and the step that gave up.
    fn run(mut stream: StreamRepair, input: &[u8], chunk: usize) -> (Vec<u8>, Option<(Abandon, StreamRepair, usize)>) {
        let mut out = Vec::new();
        let mut emit = |e: Emit<'_>| {
            if let Emit::Out(b) = e {
                out.extend_from_slice(b)
            }
        };
        let (mut held, mut fed) = (Vec::new(), 0);
        for piece in input.chunks(chunk) {
            held.extend_from_slice(piece);
            fed += piece.len();
            match stream.feed(&held, piece.len(), &mut emit).unwrap() {
                Step::Consumed(n) => drop(held.drain(..n)),
                Step::Abandon(a) => return (out, Some((a, stream, fed))),
            }
        }
        if let Some(a) = stream.end().unwrap() {
            return (out, Some((a, stream, fed)));
        }
        stream.finish(&held, &mut emit);
        (out, None)
    }

    #[test]
    fn one_pass_writes_lines_as_they_become_final() {
        let opts = Options::default();
        let two = repair_bytes(CLAUDE.as_bytes(), &opts, OrphanPolicy::Answer, 1).unwrap();
        for chunk in 1..40 {
            let (out, gave_up) = run(StreamRepair::new(&opts, OrphanPolicy::Answer), CLAUDE.as_bytes(), chunk);
            assert!(gave_up.is_none());
            assert_eq!(String::from_utf8(out).unwrap(), String::from_utf8(two.output.clone()).unwrap(), "chunks of {chunk}");
        }
    }

    #[test]
    fn gives_up_when_too_much_is_held_and_the_plan_still_completes() {
        let opts = Options::default();
        let stream = StreamRepair::new(&opts, OrphanPolicy::Answer).with_hold_limit(64);
        let (_, gave_up) = run(stream, CLAUDE.as_bytes(), 100);
        let (why, stream, fed) = gave_up.expect("gave up");
        assert_eq!(why, Abandon::TooFarBack);
        let Rest::Planning(mut c) = stream.abandon() else { panic!("still planning") };
        c.feed(&CLAUDE.as_bytes()[fed..]).unwrap();
        assert_eq!(
            crate::transcript::repair_run::finish_plan(*c, &mut Default::default()).unwrap(),
            plan_bytes(CLAUDE.as_bytes(), &opts, OrphanPolicy::Answer).unwrap()
        );
    }

    #[test]
    fn gives_up_on_an_over_long_line_to_remove() {
        let opts = Options { max_line_bytes: 40, ..Options::default() };
        let (_, gave_up) = run(StreamRepair::new(&opts, OrphanPolicy::Answer), CLAUDE.as_bytes(), 4096);
        assert_eq!(gave_up.map(|g| g.0), Some(Abandon::LongLine));
    }
}
