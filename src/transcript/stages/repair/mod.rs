//! Repair: turn a transcript the checker rejects into one the agent can resume and the API
//! accepts, touching as few bytes as possible and losing none.
//!
//! Two passes over the file, both pure: [`plan::Planner`] watches the check pipeline and turns
//! findings into [`plan::Edit`]s; [`rewrite::Rewriter`] streams the file again and applies them,
//! copying every untouched line byte for byte and sending every removed or modified line to the
//! rejects stream. [`synth`] builds the lines and line edits themselves.
//!
//! *Invariants* (property-tested over generated corpora and the real fixtures):
//! `check(repair(x))` has no error findings; `repair(repair(x)) == repair(x)`; untouched lines
//! are byte-identical and keep their order; every removed line is in the rejects output.

pub mod plan;
pub mod rewrite;
pub mod synth;

pub use plan::{Edit, OrphanPolicy, Plan, Planner, Unrepaired};
pub use rewrite::{Emit, RewriteStats, Rewriter};

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
