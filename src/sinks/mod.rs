//! Sinks: where transcriptd writes. `atomic` for files written whole (repaired transcripts,
//! checkpoints) and appended whole lines (rejects); [`append`] the one way to append to a JSONL
//! file; `outputs` the daemon's stdout and file sinks.

pub mod append;
pub mod atomic;
pub mod outputs;

pub use append::Appender;
