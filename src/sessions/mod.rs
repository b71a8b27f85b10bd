//! Sessions: finding the transcripts agent hosts keep on disk, their meta sidecars, and one
//! session by a short id prefix.
//!
//! This is a shell module (it reads directories and files); the core in
//! [`crate::transcript`] still does all reading of transcript *content* for findings and stats.
//! The `sessions list` and `show` verbs use it, and so will the daemon, which is why the parts
//! are separate: [`layout`] walks directories, [`meta`] loads sidecars, [`info`] reads what a
//! listing shows, [`tail`] reads the last timestamp, [`index`] finds a line by uuid,
//! [`history`] walks the conversation, [`lines`] frames lines with the core's splitter,
//! [`project`] finds one working directory's sessions for every agent (`doctor`).
//!
//! Layouts understood (see [`layout`]):
//!
//! - Claude Code: `~/.claude/projects/<encoded cwd>/<session-id>.jsonl`, subagents in
//!   `<session-id>/subagents/agent-*.jsonl` or, in older versions, `agent-*.jsonl` beside it.
//! - Codex: `~/.codex/sessions/YYYY/MM/DD/rollout-<timestamp>-<id>.jsonl`.
//! - Session directories: `<workspace>/<timestamp>-<id>/transcript.jsonl` + `.meta.json`.
//! - Flat: `<dir>/<agent-id>.jsonl` + `<agent-id>.meta.json`.
//!
//! *Invariant (data-loss guard):* a meta sidecar whose transcript is missing is never turned
//! into an empty session: discovery reports it as lost, lookup fails with
//! [`Error::MissingTranscript`].

pub mod history;
pub mod id;
pub mod index;
pub mod info;
pub mod layout;
pub mod lines;
pub mod meta;
pub mod names;
pub mod project;
pub mod stores;
pub mod tail;
pub use crate::transcript::timestamp;

pub use id::{validate_prefix, PrefixError};
pub use layout::{discover, find_by_prefix, Discovery, Layout, Lost, Session};
pub use meta::{load_meta, parse_meta, Meta, SUPPORTED_SCHEMA_VERSION};
pub use timestamp::Timestamp;

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

/// What can go wrong finding or loading a session. Every variant names the path or prefix it is
/// about.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The prefix has characters no session id has (or is empty or too long).
    #[error("invalid session id prefix {prefix:?}: {problem}")]
    InvalidPrefix {
        /// The prefix as given.
        prefix: String,
        /// What is wrong with it.
        problem: PrefixError,
    },
    /// No session id starts with the prefix.
    #[error("no session id starts with `{prefix}` under {}", join_paths(roots))]
    NotFound {
        /// The prefix.
        prefix: String,
        /// Where it was looked for.
        roots: Vec<PathBuf>,
    },
    /// Several session ids start with the prefix (and none equals it).
    #[error("session id prefix `{prefix}` is ambiguous: {} sessions match; type more of the id:{}", candidates.len(), list_candidates(candidates))]
    Ambiguous {
        /// The prefix.
        prefix: String,
        /// Id and transcript path of each match, sorted by id.
        candidates: Vec<(String, PathBuf)>,
    },
    /// A meta sidecar that should exist does not.
    #[error("{}: meta sidecar not found", path.display())]
    MetaNotFound {
        /// Where it was expected.
        path: PathBuf,
    },
    /// A meta sidecar that cannot be parsed.
    #[error("{}: meta sidecar cannot be parsed: {message}", path.display())]
    MetaParse {
        /// The sidecar.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A meta sidecar written by a newer schema than this build reads.
    #[error("{}: meta sidecar has schema_version {found}, newer than this build supports ({supported}); upgrade transcriptd to read it", path.display())]
    UnsupportedSchema {
        /// The sidecar.
        path: PathBuf,
        /// Its version.
        found: u64,
        /// The newest version this build reads.
        supported: u64,
    },
    /// The data-loss guard: a meta sidecar whose transcript is missing.
    #[error("missing_transcript: meta sidecar {} exists but its transcript {} is missing: the session's data is gone", meta.display(), transcript.display())]
    MissingTranscript {
        /// The sidecar.
        meta: PathBuf,
        /// Where the transcript should be.
        transcript: PathBuf,
    },
    /// No line of the transcript has the uuid.
    #[error("{}: no line has uuid `{uuid}`", path.display())]
    UuidNotFound {
        /// The transcript.
        path: PathBuf,
        /// The uuid asked for.
        uuid: String,
    },
    /// Reading a file or directory failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// What was being read.
        path: PathBuf,
        /// Why it failed.
        source: io::Error,
    },
}

impl Error {
    /// An IO error on `path`.
    pub fn io(path: &Path, source: io::Error) -> Self {
        Error::Io { path: path.to_path_buf(), source }
    }
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

fn list_candidates(candidates: &[(String, PathBuf)]) -> String {
    let mut s = String::new();
    for (id, path) in candidates {
        let _ = write!(s, "\n  {id}  {}", path.display());
    }
    s
}
