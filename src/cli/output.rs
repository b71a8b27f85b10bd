//! Writing results: the JSON record of a finding (the public contract shared by `check
//! --output json` and the daemon's stdout sink) and broken-pipe handling.

use crate::transcript::{Finding, Format};
use serde::Serialize;
use std::io;

/// A finding as one JSON line: `file`, `line`, `format`, `kind`, `severity`, `call_id` (when there
/// is one), `tool` (when known) and `message`.
#[derive(Debug, Serialize)]
pub struct FindingRecord<'a> {
    /// The transcript file.
    pub file: &'a str,
    /// Detected (or given) format; absent when it could not be detected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
    /// The finding.
    #[serde(flatten)]
    pub finding: &'a Finding,
}

impl<'a> FindingRecord<'a> {
    /// The record of `finding` in `file`.
    pub fn new(file: &'a str, format: Option<Format>, finding: &'a Finding) -> Self {
        FindingRecord { file, format, finding }
    }
}

/// Whether an error is (or wraps) a broken pipe: the reader of our stdout went away, as with
/// `transcriptd check | head`. That is not a failure.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<io::Error>().is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe))
}

/// Formats a byte count for people.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `"s"` unless `n` is 1: "1 error", "2 errors".
pub fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
