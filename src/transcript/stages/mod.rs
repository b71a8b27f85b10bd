//! Pipeline stages: each file here implements [`Stage`](super::pipeline::Stage) and is built by
//! one arm of `StageConfig` (or a verb's preset list). The state machines they drive live
//! beside the pipeline: the pairing rules in [`super::pairing`], the repair machines in [`super::repair`],
//! the datasets' rules in [`super::dataset`].

pub mod compactions;
pub mod events;
pub mod loss;
pub mod orphans;
pub mod repair_plan;
pub mod repair_trigger;
pub mod validate;
