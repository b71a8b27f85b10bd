//! The repair drivers: the preset plan pipeline (`validate`, then the planner) and the runs of
//! the repair machines ([`crate::transcript::repair`]) over an in-memory stream: [`plan_bytes`],
//! [`rewrite_bytes`], [`repair_bytes`] (rounds), [`repair_bytes_streaming`]; and
//! [`stream::StreamRepair`], which runs planner and rewriter in one pass (the rewriter a few
//! lines behind the planner) and gives up to the two-pass form (plan the whole file, then
//! rewrite it) when it must. They sit above both the machines and the stages, so that neither
//! reaches the other through the pipeline.

pub mod stream;

pub use stream::{Abandon, Rest, Step, StreamRepair};

use crate::transcript::formats::Format;
use crate::transcript::pipeline::{Pipeline, Stage};
use crate::transcript::repair::{salvage, Emit, OrphanPolicy, Plan, Planner, RewriteLog, RewriteStats, Rewriter, RoundEdit, Rounds, Unrepaired};
use crate::transcript::stages::{loss::Loss, validate::Validate};
use crate::transcript::{Event, Kind, Options, Output, StrictStop};

/// The repair's preset stage list, as a pipeline: `validate`, then the planner (`policy` for
/// calls left open at the end). Feed it the stream (draining its events as you go: the plan is
/// taken at the end), then [`finish_plan`].
pub fn plan_pipeline(opts: &Options, policy: OrphanPolicy) -> Pipeline {
    plan_pipeline_with(opts, Planner::new(policy))
}

/// [`plan_pipeline`] with a planner made by the caller.
pub fn plan_pipeline_with(opts: &Options, planner: Planner) -> Pipeline {
    // A plan is made of a complete stream: no quiet period ever passes.
    // `loss` before the planner: what it finds, the planner reports unrepaired.
    let stages: Vec<Box<dyn Stage>> = vec![Box::new(Validate::new(std::time::Duration::MAX)), Box::new(Loss::new(std::time::Duration::MAX)), Box::new(planner)];
    Pipeline::transcript(opts.clone(), stages, std::time::Duration::MAX)
}

/// Ends a [`plan_pipeline`]: the planner, its last edits planned (in planning order, not yet
/// sorted), and the format the stream was read as in the end; the events of the end go to
/// `errors`.
pub fn finish_planner(p: Pipeline, errors: &mut ErrorTally) -> Result<(Planner, Option<Format>, u64), StrictStop> {
    let mut done = p.finish_stages()?;
    errors.add(std::mem::take(&mut done.events));
    let planner = done.take::<Planner>().expect("a plan pipeline has a planner");
    Ok((*planner, done.format, done.stats.dangling_parents))
}

/// Ends a [`plan_pipeline`]: its plan (the events of the end go to `errors`).
pub fn finish_plan(p: Pipeline, errors: &mut ErrorTally) -> Result<Plan, StrictStop> {
    let (planner, format, dangling) = finish_planner(p, errors)?;
    let mut plan = planner.into_plan(format);
    plan.dangling_parents = dangling;
    Ok(plan)
}

/// The error findings of a stream as `check` ends with them (demotions applied), counted by
/// kind: what a plan pipeline's events say, without keeping the findings themselves (a line,
/// a kind and a call id per error), so that the pass that plans a repair also says how the
/// stream checks.
#[derive(Debug, Default, Clone)]
pub struct ErrorTally {
    errors: Vec<(u64, Kind, Option<String>)>,
}

impl ErrorTally {
    /// Takes a pipeline's events (what is not a finding is let go).
    pub fn add(&mut self, events: impl IntoIterator<Item = Event>) {
        for e in events {
            if let Event::Output(o) = e {
                self.apply(o);
            }
        }
    }

    /// One output, as [`crate::transcript::finding::apply`] applies it to the findings: a
    /// demotion lowers the latest error of its line, kind and call id.
    pub fn apply(&mut self, out: Output) {
        match out {
            Output::Finding(f) if f.wants_repair() => self.errors.push((f.line, f.kind, f.call_id)),
            Output::Finding(_) => {}
            Output::Demoted { line, kind, call_id, .. } => {
                if let Some(i) = self.errors.iter().rposition(|e| e.0 == line && e.1 == kind && e.2 == call_id) {
                    self.errors.remove(i);
                }
            }
        }
    }

    /// The errors by kind.
    pub fn kinds(&self) -> std::collections::BTreeMap<Kind, usize> {
        let mut kinds = std::collections::BTreeMap::new();
        for e in &self.errors {
            *kinds.entry(e.1).or_default() += 1;
        }
        kinds
    }
}

/// A repair done in memory: the output, the rejects stream, the plans of each round and the
/// verdict.
#[derive(Debug, Clone)]
pub struct Repaired {
    /// The repaired transcript.
    pub output: Vec<u8>,
    /// The rejects stream (JSON lines), in input lines.
    pub rejects: Vec<u8>,
    /// The plan of each round as it was made (the first is the plan for the input; a last one
    /// with no edits is the check of the output).
    pub plans: Vec<Plan>,
    /// What the rewrites did, summed over the rounds.
    pub stats: RewriteStats,
    /// Every edit of every round, in input lines.
    pub edits: Vec<RoundEdit>,
    /// Findings left, with why, in input lines.
    pub unrepaired: Vec<Unrepaired>,
    /// Whether the repair is complete (nothing left, the last plan closed).
    pub complete: bool,
}

/// Plans the repair of an in-memory transcript.
pub fn plan_bytes(input: &[u8], opts: &Options, policy: OrphanPolicy) -> Result<Plan, StrictStop> {
    let mut p = plan_pipeline(&Options { strict: false, ..opts.clone() }, policy);
    p.feed(input)?;
    p.drain().for_each(drop);
    finish_plan(p, &mut ErrorTally::default())
}

/// Rewrites `input` with `plan` (two-pass form): the output, the rejects (when asked for) and
/// the log.
pub fn rewrite_bytes(input: &[u8], plan: &Plan, max_line_bytes: usize, rejects: bool) -> (Vec<u8>, Vec<u8>, RewriteLog) {
    let (mut out, mut rej) = (Vec::with_capacity(input.len()), Vec::new());
    let mut emit = |e: Emit<'_>| match e {
        Emit::Out(b) => out.extend_from_slice(b),
        Emit::Reject(b) => rej.extend_from_slice(b),
    };
    let mut rw = Rewriter::new(plan, max_line_bytes);
    if !rejects {
        rw = rw.without_rejects();
    }
    rw.feed(input, &mut emit);
    let log = rw.finish(&mut emit);
    (out, rej, log)
}

/// One round of the one-pass repair, in memory.
#[derive(Debug, Clone)]
pub struct OnePass {
    /// The repaired transcript.
    pub output: Vec<u8>,
    /// The rejects stream.
    pub rejects: Vec<u8>,
    /// The plan.
    pub plan: Plan,
    /// What the rewrite did.
    pub log: RewriteLog,
    /// Why the pass gave up, if it did: then output and rejects are the two-pass repair's, as
    /// the file verb falls back to it.
    pub abandoned: Option<Abandon>,
}

/// One round of the one-pass repair over `input` fed in chunks of `chunk` bytes (as the file
/// verb reads it).
pub fn repair_bytes_streaming(input: &[u8], opts: &Options, policy: OrphanPolicy, chunk: usize) -> Result<OnePass, StrictStop> {
    let (mut out, mut rejects) = (Vec::new(), Vec::new());
    let mut emit = |e: Emit<'_>| match e {
        Emit::Out(b) => out.extend_from_slice(b),
        Emit::Reject(b) => rejects.extend_from_slice(b),
    };
    let mut stream = StreamRepair::new(opts, policy);
    let mut held = Vec::new();
    let (mut abandoned, mut fed) = (None, 0);
    for piece in input.chunks(chunk.max(1)) {
        held.extend_from_slice(piece);
        fed += piece.len();
        match stream.feed(&held, piece.len(), &mut emit)? {
            Step::Consumed(n) => drop(held.drain(..n)),
            Step::Abandon(a) => {
                abandoned = Some(a);
                break;
            }
        }
    }
    if abandoned.is_none() {
        abandoned = stream.end()?;
        if abandoned.is_none() {
            let (plan, log) = stream.finish(&held, &mut emit);
            return Ok(OnePass { output: out, rejects, plan, log, abandoned: None });
        }
    }
    let plan = match stream.abandon() {
        Rest::Planning(mut p) => {
            p.feed(&input[fed..])?;
            p.drain().for_each(drop);
            finish_plan(*p, &mut ErrorTally::default())?
        }
        Rest::Planned(plan) => plan,
    };
    let (output, rejects, log) = rewrite_bytes(input, &plan, opts.max_line_bytes, true);
    Ok(OnePass { output, rejects, plan, log, abandoned })
}

/// Repairs an in-memory transcript, checking and planning the output again while the plan asks
/// for it, with at most `rounds` rewrites. The file verb does the same over files, streaming.
pub fn repair_bytes(input: &[u8], opts: &Options, policy: OrphanPolicy, rounds: usize) -> Result<Repaired, StrictStop> {
    let mut r = Rounds::with_max(rounds);
    let mut current = input.to_vec();
    let mut rejects = Vec::new();
    let mut plans = Vec::new();
    let mut plan = plan_bytes(input, opts, policy)?;
    let mut done = plan.is_empty();
    if let Some(s) = salvage::salvage(input, &plan, opts.max_line_bytes) {
        // The salvage round comes first, and takes no rewrite from the others.
        r = Rounds::with_max(rounds + 1);
        r.record(&s.plan, s.log);
        rejects = s.rejects;
        plans.push(s.plan);
        current = s.output;
        plan = plan_bytes(&current, opts, policy)?;
        done = r.verified(&plan);
        if done {
            plans.push(plan.clone());
        }
    } else if done {
        r.verified(&plan);
        plans.push(plan.clone());
    }
    if !done {
        loop {
            let first = r.rounds() == 0;
            let (out, rej, log) = rewrite_bytes(&current, &plan, opts.max_line_bytes, first);
            if first {
                rejects = rej;
            }
            r.record(&plan, log);
            plans.push(plan);
            current = out;
            if !r.wants_another() {
                break;
            }
            plan = plan_bytes(&current, opts, policy)?;
            if r.verified(&plan) {
                plans.push(plan);
                break;
            }
        }
    }
    if let Some(mut w) = r.rejects_writer(opts.max_line_bytes) {
        rejects.clear();
        let mut emit = |e: Emit<'_>| {
            if let Emit::Reject(b) = e {
                rejects.extend_from_slice(b)
            }
        };
        w.feed(input, &mut emit);
        w.finish(&mut emit);
    }
    Ok(Repaired { output: current, rejects, plans, stats: r.stats(), edits: r.edits().to_vec(), unrepaired: r.unrepaired().to_vec(), complete: r.complete() })
}
