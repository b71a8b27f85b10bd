//! The batch check driver the verbs share (`check`, `show`, `usage`, `report`): each input read
//! through the check pipeline (the preset stage list `[validate]` behind the parse front), one
//! file per thread of a pool, a large file parsed by several threads in turn.

use crate::sources::batch::{self, Input};
use crate::transcript::context::chain::Session;
use crate::transcript::{checker, Event, Finding, Format, Options, Stats, StrictStop};
use rayon::prelude::*;

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
    // `check` is its preset stage list behind the parse front.
    let mut c = crate::transcript::check::pipeline(opts.clone());
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
            let mut findings = checker::collect(outputs);
            // The chat reader knows which API a file is for only once it is read.
            if let Some(f @ (Format::OpenAiChat | Format::Anthropic)) = format {
                findings.iter_mut().for_each(|g| crate::transcript::verdict::tell(f, g));
            }
            if let Some(f) = lost_on_resume(input, format, &stats, &findings) {
                let at = findings.partition_point(|g| g.line <= f.line);
                findings.insert(at, f);
            }
            report(format, findings, stats, None, None)
        }
        Err(s) => report(None, Vec::new(), Stats::default(), Some(format!("{}:{s}", input.display())), Some(s)),
    }
}

/// Claude Code: what resuming the file silently leaves out after a parent that is missing
/// (`context::chain`). Only a file where a line could not be read or named a parent not seen
/// before it can lose anything that way: those are read a second time, in file order, to walk
/// the chain as the agent does; every other file costs nothing more.
fn lost_on_resume(input: &Input, format: Option<Format>, stats: &Stats, findings: &[Finding]) -> Option<Finding> {
    if format != Some(Format::ClaudeCode) || (stats.dangling_parents == 0 && stats.bad_lines == 0 && !findings.iter().any(|f| f.kind.is_framing())) {
        return None;
    }
    input.path()?;
    let mut session = Session::default();
    let mut buf = Vec::new();
    batch::read_chunks(input, &mut buf, |chunk| {
        session.feed(chunk);
        true
    })
    .ok()?;
    session.end();
    session.lost()
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
