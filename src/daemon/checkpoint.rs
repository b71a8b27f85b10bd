//! Checkpoints: how far each file has been read and reported, and how far each sink had
//! written, in one versioned JSON file in the state directory.
//!
//! Written atomically (temporary file, fsync, rename, fsync of the directory) and only after
//! every sink has flushed the outputs of the lines it covers. After a crash, the daemon replays
//! each file up to its offset without emitting (to rebuild the pairing state), cuts the file
//! sinks back to their checkpointed length, and goes on: nothing is lost, nothing doubled.
//!
//! The daemon writes one every `checkpoint_interval` while there is progress to record, or
//! every ten times as long as the last one took when that is longer: with 100,000 files the
//! file is ~22 MB, and written every second it took most of a cold start (issue 29). A longer
//! interval loses nothing after a crash; more is read again and cut back.

use crate::sinks::outputs::Position;
use crate::transcript::Finding;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The checkpoint format this build writes and reads.
pub const VERSION: u32 = 1;

/// Name of the checkpoint file in the state directory.
pub const FILE_NAME: &str = "checkpoints.json";

/// One file's progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCheckpoint {
    /// The path.
    pub path: PathBuf,
    /// Device of the file.
    pub dev: u64,
    /// Inode of the file.
    pub ino: u64,
    /// Hash of the first `head_len` bytes: tells a file rewritten in place.
    pub head_hash: u64,
    /// How many bytes the hash covers.
    pub head_len: u64,
    /// Where the fingerprint's bytes end: the read offset when it was taken (tells a file
    /// rewritten in place that grew back past it).
    #[serde(default)]
    pub fp_end: u64,
    /// How many bytes before `fp_end` the fingerprint covers (0: none).
    #[serde(default)]
    pub fp_len: u64,
    /// Their hash.
    #[serde(default)]
    pub fp_hash: u64,
    /// Offset of the first line not fully read (outputs of every line before it were flushed).
    pub offset: u64,
    /// Tail findings reported for the file as it stood (retracted if it grows).
    #[serde(default)]
    pub tail: Vec<Finding>,
    /// Whether the tail was evaluated since the file last grew (if not, it is after the
    /// restart; checkpoints before this field: when `tail` is not empty).
    #[serde(default)]
    pub tail_done: bool,
    /// Where the file had been read to when its tail was looked at, if it has not grown since:
    /// the bytes up to there (a torn line's, beyond `offset`) are what the tail findings are
    /// about, and are replayed without being taken for growth (checkpoints before this field:
    /// `fp_end`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail_end: Option<u64>,
    /// Calls waiting for their result at its tail as last read (for the gauge: a file not read
    /// again after a restart still has them; checkpoints before this field: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pending: u64,
    /// Whether its `file_opened` was reported (checkpoints before this field: yes).
    #[serde(default = "yes")]
    pub announced: bool,
    /// The stages that owed work for the lines read (a repair made due by errors, once the
    /// file is idle): given back to them after the restart's replay (checkpoints before this
    /// field: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owed: Vec<String>,
}

fn yes() -> bool {
    true
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The whole checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Format version.
    pub version: u32,
    /// Files.
    pub files: Vec<FileCheckpoint>,
    /// Where each sink stood, by its key (`stdout`, `file:PATH`, `http:URL`): what it had made
    /// durable or had acknowledged when the checkpoint was taken.
    #[serde(default)]
    pub sinks: std::collections::BTreeMap<String, Position>,
    /// Where stdout stood (checkpoints before `sinks`; read, not written).
    #[serde(default, skip_serializing)]
    pub stdout: Option<Position>,
    /// Where the file sink stood (checkpoints before `sinks`; read, not written).
    #[serde(default, skip_serializing)]
    pub file_sink: Option<Position>,
}

impl Checkpoint {
    /// Where the sink named `key` stood, also in a checkpoint written before `sinks`.
    pub fn sink(&self, key: &str) -> Option<Position> {
        self.sinks.get(key).copied().or(match key {
            "stdout" => self.stdout,
            k if k.starts_with("file:") => self.file_sink,
            _ => None,
        })
    }
}

/// Why a checkpoint could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// IO.
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    /// Not a checkpoint.
    #[error("{0}: not a checkpoint: {1}")]
    Parse(String, serde_json::Error),
    /// Written by a newer build.
    #[error("{0}: checkpoint version {1} is newer than this build supports ({VERSION}); refusing to guess")]
    TooNew(String, u32),
}

/// Reads the checkpoint in `state_dir`; none yet is an empty one.
pub fn load(state_dir: &Path) -> Result<Checkpoint, LoadError> {
    let path = state_dir.join(FILE_NAME);
    let name = path.display().to_string();
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Checkpoint { version: VERSION, ..Checkpoint::default() }),
        Err(e) => return Err(LoadError::Io(name, e)),
    };
    let cp: Checkpoint = serde_json::from_slice(&bytes).map_err(|e| LoadError::Parse(name.clone(), e))?;
    if cp.version > VERSION {
        return Err(LoadError::TooNew(name, cp.version));
    }
    Ok(cp)
}

/// Writes the checkpoint atomically.
pub fn store(state_dir: &Path, cp: &Checkpoint) -> std::io::Result<()> {
    std::fs::create_dir_all(state_dir)?;
    let bytes = serde_json::to_vec(cp).map_err(std::io::Error::other)?;
    let _gate = super::fds::gate();
    crate::sinks::atomic::write_file(&state_dir.join(FILE_NAME), &bytes, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_version_guard() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(load(d.path()).unwrap().files.len(), 0);
        let cp = Checkpoint {
            version: VERSION,
            files: vec![FileCheckpoint {
                path: "/x.jsonl".into(),
                dev: 1,
                ino: 2,
                head_hash: 3,
                head_len: 4,
                fp_end: 5,
                fp_len: 5,
                fp_hash: 6,
                offset: 5,
                tail: vec![],
                tail_done: true,
                tail_end: Some(5),
                pending: 2,
                announced: true,
                owed: vec!["repair".to_owned()],
            }],
            sinks: [("file:/o.jsonl".to_owned(), Position { dev: 1, ino: 9, len: 10, exclusive: true, tail_hash: Some(7) })].into(),
            stdout: None,
            file_sink: None,
        };
        store(d.path(), &cp).unwrap();
        assert_eq!(load(d.path()).unwrap(), cp);
        // Sink positions of a checkpoint written before `sinks` are found by key.
        std::fs::write(d.path().join(FILE_NAME), r#"{"version":1,"files":[],"stdout":{"dev":1,"ino":2,"len":3},"file_sink":{"dev":4,"ino":5,"len":6}}"#)
            .unwrap();
        let old = load(d.path()).unwrap();
        assert_eq!(old.sink("stdout").map(|p| p.len), Some(3));
        assert_eq!(old.sink("file:/var/log/f.jsonl").map(|p| p.len), Some(6));
        assert_eq!(old.sink("http:http://x/"), None);
        // A checkpoint written before fingerprints and `announced` still loads.
        std::fs::write(d.path().join(FILE_NAME), r#"{"version":1,"files":[{"path":"/x","dev":1,"ino":2,"head_hash":3,"head_len":4,"offset":5}]}"#).unwrap();
        let old = load(d.path()).unwrap();
        assert!(old.files[0].announced && old.files[0].fp_len == 0);
        std::fs::write(d.path().join(FILE_NAME), r#"{"version":99,"files":[]}"#).unwrap();
        assert!(matches!(load(d.path()), Err(LoadError::TooNew(_, 99))));
        std::fs::write(d.path().join(FILE_NAME), "garbage").unwrap();
        assert!(matches!(load(d.path()), Err(LoadError::Parse(..))));
    }
}
