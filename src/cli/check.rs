//! `transcriptd check`: validate transcripts and report findings.

use super::args::FindingArgs;
use super::output::{human_bytes, plural, FindingRecord};
use super::style::Paint;
use super::{Exit, OutputFormat};
use crate::sources::batch::{self, Input};
use crate::transcript::stages::validate::Validate;
use crate::transcript::{checker, Event, Finding, FindingFilter, Format, Kind, Options, Pipeline, Severity, Stats, StrictStop};
use anyhow::Context;
use rayon::prelude::*;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

/// Arguments of `transcriptd check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files, directories (searched recursively for *.jsonl) or `-` for stdin. Default: the
    /// standard locations, ~/.claude/projects and ~/.codex/sessions.
    pub paths: Vec<PathBuf>,
    /// Stop at the first line that cannot be read and exit 2, naming file and line.
    #[arg(long)]
    pub strict: bool,
    /// How transcripts are read, which findings, how results are written.
    #[command(flatten)]
    pub common: FindingArgs,
}

/// What checking one input produced.
#[derive(Debug)]
pub struct FileReport {
    /// The input.
    pub input: Input,
    /// Its format, when detected.
    pub format: Option<Format>,
    /// Findings, sorted by line, demotions applied.
    pub findings: Vec<Finding>,
    /// Counters.
    pub stats: Stats,
    /// Why the file could not be checked (IO error, or the strict policy stopped).
    pub error: Option<String>,
    /// The line the strict policy stopped at, when it did (`error` says so too).
    pub stop: Option<StrictStop>,
}

/// Size of each read of a file that one thread checks.
pub const READ_CHUNK: usize = 1 << 20;

/// Files over this size are parsed by several threads when `--jobs` allows.
const PARALLEL_MIN: u64 = 4 << 20;

/// Size of each read when several threads parse one file: each parses what it read while it is
/// still in its core's cache (256 KiB measured fastest here; see BENCHMARKS.md).
const PARALLEL_CHUNK: usize = 256 << 10;

/// Checks one input.
pub fn check_input(input: &Input, opts: &Options, buf: &mut Vec<u8>) -> FileReport {
    check_input_with_head(input, opts, buf, &mut Vec::new(), 0)
}

/// [`check_input`], also keeping the first `head_max` bytes it reads in `head` (what `report`
/// dates a session by), so that they need no second read.
pub fn check_input_with_head(input: &Input, opts: &Options, buf: &mut Vec<u8>, head: &mut Vec<u8>, head_max: usize) -> FileReport {
    let mut keep_head = |chunk: &[u8]| {
        if head.len() < head_max {
            head.extend_from_slice(&chunk[..chunk.len().min(head_max - head.len())]);
        }
    };
    // `check` is the preset stage list `[validate]` behind the parse front.
    let mut c = Pipeline::transcript(opts.clone(), vec![Box::new(Validate::new(Duration::MAX))], Duration::MAX);
    let mut stop: Option<StrictStop> = None;
    // A large file is read and parsed by `jobs` threads in turn, this one among them.
    let large = input.path().and_then(|p| std::fs::metadata(p).ok()).is_some_and(|m| m.len() > PARALLEL_MIN);
    let read = if opts.jobs > 1 && large {
        batch::with_reader(input, |r| {
            let mut error = None;
            let fill = |buf: &mut [u8]| {
                let n = batch::read_some(r, buf).unwrap_or_else(|e| {
                    error = Some(e);
                    0
                });
                keep_head(&buf[..n]);
                n
            };
            let c = c.checker_mut().expect("a transcript pipeline");
            stop = checker::feed_parallel(c, opts.jobs, PARALLEL_CHUNK, fill).err();
            error.map_or(Ok(()), Err)
        })
    } else {
        batch::read_chunks(input, buf, |chunk| {
            keep_head(chunk);
            match c.feed(chunk) {
                Ok(()) => true,
                Err(s) => {
                    stop = Some(s);
                    false
                }
            }
        })
        .map(drop)
    };
    let report = |format, findings, stats, error, stop| FileReport { input: input.clone(), format, findings, stats, error, stop };
    if let Err(e) = read {
        return report(c.format(), Vec::new(), c.stats().cloned().unwrap_or_default(), Some(format!("{}: {e}", input.display())), None);
    }
    if let Some(s) = stop {
        return report(c.format(), Vec::new(), c.stats().cloned().unwrap_or_default(), Some(format!("{}:{s}", input.display())), Some(s));
    }
    match c.finish() {
        Ok((events, stats, format)) => {
            let outputs = events.into_iter().filter_map(|e| if let Event::Output(o) = e { Some(o) } else { None });
            report(format, checker::collect(outputs), stats, None, None)
        }
        Err(s) => report(None, Vec::new(), Stats::default(), Some(format!("{}:{s}", input.display())), Some(s)),
    }
}

/// Checks every input, `jobs` at a time, in path order.
pub fn check_all(inputs: &[Input], opts: &Options, jobs: usize) -> Vec<FileReport> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs).build().expect("thread pool");
    let opts = Options { jobs, ..opts.clone() };
    pool.install(|| inputs.par_iter().with_max_len(1).map(|input| batch::with_buffer(|buf| check_input(input, &opts, buf))).collect())
}

/// Checks every input, `jobs` at a time, and folds each report into the accumulator of the
/// thread that made it as soon as it is made, so that memory holds one report and one
/// accumulator per thread, never one per file. Reports arrive in no particular order and the
/// threads' accumulators are merged at the end: `fold` and `merge` must not care. `fold` also
/// gets the first `head_max` bytes of the input and the thread's read buffer to reuse; it must
/// not run work on the pool (it holds its thread's accumulator).
pub fn check_fold<A: Send>(
    inputs: &[Input],
    opts: &Options,
    jobs: usize,
    head_max: usize,
    init: impl Fn() -> A + Sync + Send,
    fold: impl Fn(&mut A, FileReport, &[u8], &mut Vec<u8>) + Sync + Send,
    merge: impl Fn(A, A) -> A,
) -> A {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs).build().expect("thread pool");
    let opts = Options { jobs, ..opts.clone() };
    // One accumulator per worker thread: a rayon `fold` would make one per split, and splits go
    // down to single files here (`with_max_len(1)`, for balance), each then merged.
    let slots: Vec<std::sync::Mutex<Option<A>>> = (0..jobs).map(|_| std::sync::Mutex::new(None)).collect();
    pool.install(|| {
        inputs.par_iter().with_max_len(1).for_each(|input| {
            batch::with_buffer(|buf| {
                let mut head = Vec::new();
                let report = check_input_with_head(input, &opts, buf, &mut head, head_max);
                let slot = &slots[rayon::current_thread_index().unwrap_or(0) % slots.len()];
                let mut acc = slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                fold(acc.get_or_insert_with(&init), report, &head, buf);
            })
        })
    });
    slots.into_iter().filter_map(|s| s.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner)).fold(init(), merge)
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let started = Instant::now();
    let paths = if args.paths.is_empty() { super::default_roots() } else { args.paths.clone() };
    if paths.is_empty() {
        anyhow::bail!("no paths given, and neither ~/.claude/projects nor ~/.codex/sessions exists");
    }
    let found = batch::expand(&paths);
    let (inputs, missing) = (&found.inputs, &found.missing);
    let jobs = args.common.read.jobs();
    let opts = Options { format: args.common.read.format, max_line_bytes: args.common.read.max_line_bytes, strict: args.strict, jobs };
    let reports = check_all(inputs, &opts, jobs);
    let filter = args.common.filter.filter();
    let format = args.common.out.format();
    let paint = args.common.out.paint();

    let mut out = args.common.out.stdout();
    let unreadable = super::output::report_skipped(&mut out, &args.common.out, &found.skipped)?;
    super::output::warn_empty_dirs(&args.common.out, &found.empty_dirs);
    let mut count = Counts::default();
    for m in missing {
        let f = Finding::file(
            Kind::MissingTranscript,
            format!("meta sidecar {} exists but its transcript is missing: the session's data is gone", m.meta.display()),
        );
        if count.add(&filter, &f) {
            count.bad_files += 1;
            write_finding(&mut out, format, paint, &m.transcript.display().to_string(), None, &f)?;
        }
    }
    let mut failed = 0u64;
    for r in &reports {
        if let Some(e) = &r.error {
            failed += 1;
            out.flush()?;
            match &r.stop {
                Some(s) => eprintln!(
                    "{}",
                    super::style::stderr().at(
                        &r.input.display(),
                        s.line,
                        "error",
                        s.kind.as_str(),
                        &format!("{} (--strict stops at the first line that cannot be read)", s.message)
                    )
                ),
                None => super::style::error(e),
            }
            continue;
        }
        let name = r.input.display();
        let mut file_errors = false;
        for f in &r.findings {
            if count.add(&filter, f) {
                file_errors |= f.severity == Severity::Error;
                write_finding(&mut out, format, paint, &name, r.format, f)?;
            }
        }
        count.bad_files += u64::from(file_errors);
    }
    out.flush()?;
    if args.common.out.summary() {
        // Every physical line that is not blank: read ones and those that could not be read.
        let lines: u64 = reports.iter().map(|r| r.stats.non_blank_lines()).sum();
        let bytes: u64 = reports.iter().map(|r| r.stats.bytes).sum();
        let secs = started.elapsed().as_secs_f64();
        let Counts { errors, warnings, bad_files, hidden } = count;
        eprintln!(
            "checked {} file{} ({} line{}, {}) in {secs:.2}s: {errors} error{}, {warnings} warning{} in {bad_files} file{}{}{}",
            reports.len(),
            plural(reports.len() as u64),
            lines,
            plural(lines),
            human_bytes(bytes),
            plural(errors),
            plural(warnings),
            plural(bad_files),
            if hidden > 0 { format!(" ({hidden} more not shown: --severity/--kind)") } else { String::new() },
            if failed > 0 { format!("; {failed} could not be checked") } else { String::new() },
        );
        if !found.skipped.is_empty() {
            eprintln!("skipped {} path{} ({unreadable} could not be read)", found.skipped.len(), plural(found.skipped.len() as u64));
        }
    }
    if failed > 0 || unreadable > 0 {
        let n = failed + unreadable as u64;
        anyhow::bail!("{n} input{} could not be checked", plural(n));
    }
    Ok(if count.errors > 0 { Exit::Findings } else { Exit::Clean })
}

/// The findings reported, and those the filter left out.
#[derive(Debug, Default)]
struct Counts {
    errors: u64,
    warnings: u64,
    /// Files with an error finding reported.
    bad_files: u64,
    hidden: u64,
}

impl Counts {
    /// Counts `f`; whether the filter keeps it.
    fn add(&mut self, filter: &FindingFilter, f: &Finding) -> bool {
        if !filter.keeps_finding(f) {
            self.hidden += 1;
            return false;
        }
        match f.severity {
            Severity::Error => self.errors += 1,
            Severity::Warning => self.warnings += 1,
        }
        true
    }
}

/// Writes one finding: a JSON record, or `path:line: severity: kind: message [call_id]` (a
/// dataset finding's message starts with the message it is about: `message 2: ...`).
pub fn write_finding(out: &mut impl Write, format: OutputFormat, paint: Paint, file: &str, fmt: Option<Format>, f: &Finding) -> anyhow::Result<()> {
    match format {
        OutputFormat::Json => {
            serde_json::to_writer(&mut *out, &FindingRecord::new(file, fmt, f)).context("writing output")?;
            out.write_all(b"\n")?;
        }
        OutputFormat::Text => {
            let call = f.call_id.as_deref().map(|c| format!(" [{c}]")).unwrap_or_default();
            let at = f.message_index.map(|m| format!("message {m}: ")).unwrap_or_default();
            writeln!(out, "{}", paint.at(file, f.line, f.severity.as_str(), f.kind.as_str(), &format!("{at}{}{call}", f.message)))?;
        }
    }
    Ok(())
}
