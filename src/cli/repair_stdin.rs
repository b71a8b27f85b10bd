//! `transcriptd repair - --rejects FILE`: standard input repaired onto standard output.
//!
//! The stream is first copied to a private scratch directory, then repaired there exactly as
//! `repair --out` repairs a file (one code path: the same edits, rounds and dataset policies),
//! so that a stream is repaired like a file. Nothing is lost: every line removed or changed is
//! added to the `--rejects` file (atomically, after its old records) *before* the repaired
//! stream is written to standard output. The report goes to standard error, since standard
//! output is the transcript.

use super::repair::{self, Args};
use super::{Exit, OutputFormat};
use crate::repair::{rejects_path, repair_file_with, Job, Settings, Status};
use crate::sinks::atomic::{Keep, Spool};
use anyhow::Context;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Repairs standard input (`args.paths` is `-`).
pub fn run(args: &Args) -> anyhow::Result<Exit> {
    let started = Instant::now();
    if args.paths.len() > 1 {
        anyhow::bail!("`-` (standard input) is repaired on its own: give it as the only path");
    }
    if args.out.is_some() || args.in_place {
        anyhow::bail!("`repair -` writes the repaired stream to standard output: --out and --in-place do not apply to it");
    }
    if args.shard.is_some() {
        anyhow::bail!("--shard splits files between runs; `-` is one stream");
    }
    let rejects = match (&args.rejects, args.dry_run) {
        (Some(r), _) => Some(r.clone()),
        (None, true) => None,
        (None, false) => anyhow::bail!("`repair -` needs --rejects FILE: every line it removes or changes is kept there"),
    };
    let scratch = tempfile::Builder::new().prefix("transcriptd-repair-stdin.").tempdir().context("creating a scratch directory for standard input")?;
    let input = scratch.path().join("stdin.jsonl");
    let mut copy = std::fs::OpenOptions::new().write(true).create_new(true).open(&input).with_context(|| format!("creating {}", input.display()))?;
    std::io::copy(&mut std::io::stdin().lock(), &mut copy).context("reading standard input")?;
    drop(copy);
    let job = Job { input: input.clone(), output: scratch.path().join("out").join("stdin.jsonl"), rel: PathBuf::from("stdin.jsonl"), walked: None };
    // A stream is a snapshot: nobody writes the scratch copy.
    let settings = Settings { dry_run: args.dry_run, ..Settings::copy(args.read.format, args.read.max_line_bytes, args.orphans) };
    let mut report = crate::sources::batch::with_buffer(|buf| repair_file_with(&job, &settings, args.dataset_policy, buf));
    let hide = |s: &str| s.replace(&input.display().to_string(), "-").replace(&job.output.display().to_string(), "-");
    report.file = "-".to_owned();
    report.output = None;
    report.message = report.message.as_deref().map(hide);
    report.notes = report.notes.iter().map(|n| hide(n)).collect();
    if report.status == Status::Failed {
        anyhow::bail!("-: {}", report.message.as_deref().unwrap_or("the repair failed"));
    }
    let out_args = &args.out_args;
    if args.dry_run {
        let mut out = out_args.stdout();
        repair::write_report(&mut out, &report, OutputFormat::Json, true, out_args.paint())?;
        out.flush()?;
    } else {
        // What was removed is safe on disk before the repaired stream goes out.
        let rejects = rejects.expect("checked above");
        let written = rejects_path(&job.output);
        if written.exists() {
            let mut spool = Spool::new(&rejects, Spool::LIMIT);
            let mut f = std::fs::File::open(&written).with_context(|| format!("reading {}", written.display()))?;
            let mut buf = vec![0u8; crate::sources::READ_CHUNK];
            loop {
                let n = f.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                spool.push(&buf[..n]);
            }
            spool.replace_into(&rejects, Keep::mode(0o600)).with_context(|| format!("writing {}", rejects.display()))?;
        }
        copy_to_stdout(&job.output)?;
    }
    if !out_args.quiet {
        // Standard output is the transcript: the report goes to standard error.
        let mut err = std::io::stderr().lock();
        if out_args.format() == OutputFormat::Json && !args.dry_run {
            serde_json::to_writer(&mut err, &report)?;
            err.write_all(b"\n")?;
        } else if !args.dry_run {
            repair::write_report(&mut err, &report, OutputFormat::Text, false, super::style::stderr())?;
        }
    }
    if out_args.summary() {
        let bytes = std::fs::metadata(&input).map_or(0, |m| m.len());
        eprintln!("{}", repair::summary(std::slice::from_ref(&report), bytes, started.elapsed(), args.dry_run, Duration::ZERO, None));
    }
    Ok(if matches!(report.status, Status::Partial | Status::Skipped) { Exit::Findings } else { Exit::Clean })
}

/// Writes the repaired file to standard output (a closed pipe is the reader's choice, not an
/// error: the caller maps it).
fn copy_to_stdout(path: &Path) -> anyhow::Result<()> {
    let mut f = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    std::io::copy(&mut f, &mut out).context("writing standard output")?;
    out.flush().context("writing standard output")?;
    Ok(())
}
