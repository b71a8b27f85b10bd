//! What the model sees on resume, rebuilt by reading a transcript newest line first and stopping
//! at the last compaction: [`resume`] drives the per-format cuts ([`compaction`] for Claude
//! Code's boundaries, [`model_context`] for Codex's replacement history). These are reverse-read
//! machines, not pipeline stages. [`agent`] then does to the records what the agent itself does
//! to the history when it resumes (answers open calls, closes the turn, drops what it never sends).

pub mod agent;
pub mod chain;
pub mod compaction;
pub mod model_context;
pub mod resume;
