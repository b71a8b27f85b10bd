//! Sinks: where results go. `atomic` for files written whole (repaired transcripts, checkpoints)
//! and appended whole lines (rejects).

pub mod atomic;
pub mod outputs;
