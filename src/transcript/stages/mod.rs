//! Pipeline stages: pure state machines fed entries (or, for the compaction cuts, lines newest
//! first).

pub mod branches;
pub mod compaction;
pub mod context;
pub mod events;
pub mod model_context;
pub mod orphans;
pub mod repair;
pub mod validate;
