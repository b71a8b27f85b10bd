//! Sinks: where transcriptd writes. [`append`] holds the one way it appends to a JSONL file.

pub mod append;

pub use append::Appender;
