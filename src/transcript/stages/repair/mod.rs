//! Repair: turn a transcript the checker rejects into one the agent can resume and the API
//! accepts, touching as few bytes as possible and losing none.
//!
//! All pure: [`plan::Planner`] watches the check pipeline and turns findings into
//! [`plan::Edit`]s; [`rewrite::Rewriter`] applies them to a byte stream, copying every untouched
//! line byte for byte and sending every removed or modified line to the rejects stream;
//! [`stream::StreamRepair`] runs both in one pass (the rewriter a few lines behind the planner),
//! and gives up to the two-pass form (plan the whole file, then rewrite it) when it must.
//! [`synth`] builds the lines and line edits themselves.
//!
//! *Invariants* (property-tested over generated corpora and the real fixtures):
//! `check(repair(x))` has no error findings; `repair(repair(x)) == repair(x)`; untouched lines
//! are byte-identical and keep their order; every removed line is in the rejects output.

use super::{Map, Set};

pub mod plan;
pub mod rewrite;
pub mod stream;
pub mod synth;

pub use plan::{Edit, OrphanPolicy, Plan, Planner, Unrepaired};
pub use rewrite::{Emit, RewriteStats, Rewriter};
pub use stream::{Abandon, Rest, Step, StreamRepair};

use crate::transcript::{Checker, Options, StrictStop};

/// A repair done in memory: the output, the rejects stream and the plans of each round.
#[derive(Debug, Clone)]
pub struct Repaired {
    /// The repaired transcript.
    pub output: Vec<u8>,
    /// The rejects stream (JSON lines).
    pub rejects: Vec<u8>,
    /// The plan of each round (the first is the plan for the input).
    pub plans: Vec<Plan>,
    /// What the rewrites did, summed over the rounds.
    pub stats: RewriteStats,
}

/// Plans the repair of an in-memory transcript.
pub fn plan_bytes(input: &[u8], opts: &Options, policy: OrphanPolicy) -> Result<Plan, StrictStop> {
    let mut c = Checker::observed(Options { strict: false, ..opts.clone() }, Planner::new(policy));
    c.feed(input)?;
    let done = c.finish()?;
    Ok(done.observer.into_plan(done.format))
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
            let (plan, _) = stream.finish(&held, &mut emit);
            return Ok(OnePass { output: out, rejects, plan, abandoned: None });
        }
    }
    let plan = match stream.abandon() {
        Rest::Planning(mut c) => {
            c.feed(&input[fed..])?;
            let done = c.finish()?;
            done.observer.into_plan(done.format)
        }
        Rest::Planned(plan) => plan,
    };
    let two = repair_bytes(input, opts, policy, 1)?;
    Ok(OnePass { output: two.output, rejects: two.rejects, plan, abandoned })
}

/// Repairs an in-memory transcript, re-planning the output while the plan asks for it (at most
/// `rounds` times). The file verb does the same over files, streaming.
pub fn repair_bytes(input: &[u8], opts: &Options, policy: OrphanPolicy, rounds: usize) -> Result<Repaired, StrictStop> {
    let mut current = input.to_vec();
    let mut rejects = Vec::new();
    let mut plans = Vec::new();
    let mut stats = RewriteStats::default();
    for _ in 0..rounds.max(1) {
        let plan = plan_bytes(&current, opts, policy)?;
        if plan.is_empty() {
            plans.push(plan);
            break;
        }
        let mut out = Vec::with_capacity(current.len());
        let mut rw = Rewriter::new(&plan, opts.max_line_bytes);
        let mut emit = |e: Emit<'_>| match e {
            Emit::Out(b) => out.extend_from_slice(b),
            Emit::Reject(b) => rejects.extend_from_slice(b),
        };
        rw.feed(&current, &mut emit);
        let s = rw.finish(&mut emit);
        stats.removed += s.removed;
        stats.modified += s.modified;
        stats.inserted += s.inserted;
        let again = plan.recheck;
        plans.push(plan);
        current = out;
        if !again {
            break;
        }
    }
    Ok(Repaired { output: current, rejects, plans, stats })
}
