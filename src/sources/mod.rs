//! Sources: where transcript bytes come from. `batch` reads whole files forward for the verbs;
//! `reverse` reads a file backwards in pages from its end, for the compaction cuts; `regular`
//! opens a path only if it is a regular file, never blocking (every reader goes through it);
//! `holders` finds the processes that hold a file open for writing; `pending` reads the
//! `pending.json` a host leaves beside its transcripts.

pub mod batch;
pub mod holders;
pub mod pending;
pub mod regular;
pub mod reverse;
