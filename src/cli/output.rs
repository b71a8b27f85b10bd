//! Writing results: the JSON record of a finding (the public contract shared by `check
//! --output json` and the daemon's stdout sink) and broken-pipe handling.

use super::args::OutputArgs;
use super::OutputFormat;
use crate::sources::batch::{SkipReason, Skipped};
use crate::transcript::{Finding, Format};
use serde::Serialize;
use std::io::{self, Write};

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

/// A path skipped by the walk as one JSON line: `file`, `skipped` (`dangling_symlink`,
/// `symlink_loop`, `not_regular`, `unreadable`), `severity` (`error` when it makes the verb exit
/// 2, else `warning`) and `message`. No finding record has a `skipped` key.
#[derive(Debug, Serialize)]
pub struct SkipRecord<'a> {
    /// The path.
    pub file: String,
    /// Why it was skipped.
    pub skipped: SkipReason,
    /// `error` or `warning`.
    pub severity: &'static str,
    /// What went wrong.
    pub message: &'a str,
}

impl<'a> SkipRecord<'a> {
    /// The record of `s`.
    pub fn new(s: &'a Skipped) -> Self {
        SkipRecord { file: s.path.display().to_string(), skipped: s.reason, severity: if s.error { "error" } else { "warning" }, message: &s.message }
    }
}

/// Reports the paths a walk skipped: a line on stderr each and, with `--output json`, a
/// [`SkipRecord`] on `out`. Returns how many are errors (the verb exits 2 at its end). With
/// `--quiet` only the errors are printed.
pub fn report_skipped(out: &mut impl Write, args: &OutputArgs, skipped: &[Skipped]) -> anyhow::Result<usize> {
    for s in skipped {
        let record = SkipRecord::new(s);
        if s.error {
            super::style::error(format_args!("{}: {}", super::safe::Safe(&record.file), s.message));
        } else if !args.quiet {
            super::style::warning(format_args!("{}: {}", super::safe::Safe(&record.file), s.message));
        }
        if args.format() == OutputFormat::Json {
            serde_json::to_writer(&mut *out, &record)?;
            out.write_all(b"\n")?;
        }
    }
    Ok(skipped.iter().filter(|s| s.error).count())
}

/// Warns about directories given that hold no `*.jsonl` file: nothing was read from them.
pub fn warn_empty_dirs(args: &OutputArgs, dirs: &[std::path::PathBuf]) {
    if args.quiet {
        return;
    }
    for d in dirs {
        super::style::warning(format_args!("{}: no *.jsonl file in this directory or below it: nothing was read from it", super::safe::Safe(d.display())));
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
