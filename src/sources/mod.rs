//! Sources: where transcript bytes come from. `batch` reads whole files forward for the verbs;
//! `reverse` reads a file backwards in pages from its end, for the compaction cuts; `regular`
//! opens a path only if it is a regular file, never blocking (every reader goes through it);
//! `backlog` reads a large unread part of a tailed file ahead of the daemon's loop, on reader
//! threads; `holders` finds the processes that hold a file open for writing; `pending` reads the
//! `pending.json` a host leaves beside its transcripts.

/// Bytes asked for per `read` of a transcript, by the verbs' batch reads, the repair and the
/// daemon's tailer alike (the backlog's reader threads have their own [`backlog::CHUNK`]).
pub const READ_CHUNK: usize = 1 << 20;

pub mod backlog;
pub mod batch;
pub mod holders;
pub mod pending;
pub mod regular;
pub mod reverse;
