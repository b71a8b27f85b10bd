//! The repair machines: turn a transcript the checker rejects into one the agent can resume and
//! the API accepts, touching as few bytes as possible and losing none.
//!
//! All pure, and none drives a pipeline: [`plan::Planner`] turns findings into [`plan::Edit`]s
//! (its `Stage` impl is `stages::repair_plan`); [`rewrite::Rewriter`] applies them to a byte
//! stream, copying every untouched line byte for byte and sending every removed or modified line
//! to the rejects stream; [`synth`] builds the lines and line edits themselves;
//! [`rounds::Rounds`] carries a repair over several rounds (when the edits leave new findings)
//! and keeps it in the input's terms. The drivers that run them over a stream (`plan_bytes`,
//! `repair_bytes`, `StreamRepair`) are in `transcript::repair_run`, above both this module and
//! the stages.
//!
//! *Invariants* (property-tested over generated corpora, the real fixtures and mutations of
//! them, and fuzzed): for any input, no panic; if the repair says it is complete,
//! `check(repair(x))` has no error findings and `repair(repair(x)) == repair(x)`; otherwise
//! each finding left is reported with why. Every input line is either in the output byte for
//! byte and in order, or in the rejects under its own line number with its own bytes.

pub mod origins;
pub mod plan;
pub mod rejects;
pub mod rewrite;
pub mod rounds;
pub mod salvage;
pub mod synth;

pub use origins::{Action, Change, Failed, Origins, Source};
pub use plan::{Edit, OrphanPolicy, Plan, Planner, Unrepaired};
pub use rejects::{Emit, RejectWriter};
pub use rewrite::{RewriteLog, RewriteStats, Rewriter};
pub use rounds::{RoundEdit, Rounds, MAX_ROUNDS};
