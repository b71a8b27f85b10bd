//! `transcriptd repair`: make transcripts resumable again, losing nothing.
//!
//! Per file: one pass that checks, plans and rewrites into a temporary file beside the
//! destination (the core's [`StreamRepair`]; a clean prefix is not written until the first edit,
//! then copied by the kernel; when that pass gives up, the plan is finished and the file
//! rewritten in a second pass), append what was removed or changed to `<name>.rejects.jsonl`,
//! then rename the new file into place. When the plan says its edits may have created new findings, the
//! output is checked and planned again (at most [`MAX_ROUNDS`] rewrites; [`Rounds`] keeps the
//! report, the dry run and the rejects in the input's own line numbers). `--dry-run` runs the
//! same rounds into a scratch directory and prints every edit they make.

use super::output::human_bytes;
use super::{Exit, OutputFormat};
use crate::sinks::atomic::{self, AtomicFile, Spool};
use crate::sources::batch::{self, Input};
use crate::transcript::stages::repair::{
    Emit, OrphanPolicy, Plan, Planner, Rest, RewriteLog, RewriteStats, Rewriter, RoundEdit, Rounds, Step, StreamRepair, Unrepaired,
};
use crate::transcript::{Checker, Format, Options};
use anyhow::Context;
use rayon::prelude::*;
use serde::Serialize;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

pub use crate::transcript::stages::repair::MAX_ROUNDS;

/// Arguments of `transcriptd repair`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("dest").required(true).args(["out", "in_place", "dry_run"])))]
pub struct Args {
    /// Files or directories (searched recursively for *.jsonl).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Write repaired files under DIR, mirroring the input tree (clean files are copied).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace the files themselves, keeping the original as <name><suffix>.
    #[arg(long)]
    pub in_place: bool,
    /// Suffix of the backup --in-place keeps.
    #[arg(long, default_value = ".orig")]
    pub backup_suffix: String,
    /// With --in-place, keep no backup (the rejects file still keeps every removed line).
    #[arg(long, requires = "in_place")]
    pub no_backup: bool,
    /// Print the plan, one JSON action per line, and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// What to do with calls still pending at the end: answer them with an "interrupted" error
    /// result, drop them, or keep them (the file then stays not fully repaired).
    #[arg(long, default_value = "answer", value_parser = clap::value_parser!(OrphanPolicy))]
    pub orphans: OrphanPolicy,
    /// Skip files modified more recently than this: they may still be written.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub min_idle: Duration,
    /// Repair files even if they were modified within --min-idle.
    #[arg(long)]
    pub force: bool,
    /// Process only the files whose path hashes to shard I of N (e.g. 0/4), for Kubernetes
    /// Indexed Jobs: N pods cover every file exactly once.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    pub shard: Option<(u64, u64)>,
    /// The transcript format; detected per file when not given.
    #[arg(long)]
    pub format: Option<Format>,
    /// Lines longer than this are removed as line_too_long.
    #[arg(long, default_value = "64MiB", value_parser = super::parse_size)]
    pub max_line_bytes: usize,
    /// Worker threads (default: every core).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// A readable summary, or one JSON report per file.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// No summary on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let (i, n) = s.split_once('/').ok_or("expected I/N, such as 0/4")?;
    let (i, n): (u64, u64) = (i.trim().parse().map_err(|_| "I must be a number")?, n.trim().parse().map_err(|_| "N must be a number")?);
    if n == 0 || i >= n {
        return Err(format!("shard {i}/{n}: need 0 <= I < N"));
    }
    Ok((i, n))
}

/// Whether `rel` (a path relative to the root it was found under) belongs to shard `i` of `n`.
pub fn in_shard(rel: &Path, (i, n): (u64, u64)) -> bool {
    xxhash_rust::xxh3::xxh3_64(rel.to_string_lossy().as_bytes()) % n == i
}

/// One file to repair.
#[derive(Debug, Clone)]
pub struct Job {
    /// The transcript.
    pub input: PathBuf,
    /// Where the repaired file goes (the input itself with --in-place).
    pub output: PathBuf,
    /// The path relative to the root it was found under (for shards and reports).
    pub rel: PathBuf,
}

/// How a file ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Nothing to repair.
    Clean,
    /// Repaired completely.
    Repaired,
    /// Some findings could not be repaired (see `unrepaired`).
    Partial,
    /// Planned only (--dry-run).
    Planned,
    /// Skipped: modified within --min-idle.
    Skipped,
    /// An IO error.
    Failed,
}

/// The report of one file.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The input.
    pub file: String,
    /// Where the result went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// How it ended.
    pub status: Status,
    /// Its format.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
    /// Edits planned, over every round.
    pub edits: usize,
    /// Rewrites made (a later one when the edits of the one before left new findings).
    pub rounds: usize,
    /// What the rewrite did (all rounds).
    pub lines: RewriteStats,
    /// Findings left.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unrepaired: Vec<Unrepaired>,
    /// Why it was skipped or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The edits of every round, for --dry-run.
    #[serde(skip)]
    pub plan: Vec<RoundEdit>,
    /// Lines whose `parentUuid` is re-pointed, for --dry-run.
    #[serde(skip)]
    pub reparented: Vec<u64>,
}

impl Report {
    fn new(job: &Job, status: Status) -> Self {
        Report {
            file: job.input.display().to_string(),
            output: None,
            status,
            format: None,
            edits: 0,
            rounds: 0,
            lines: RewriteStats::default(),
            unrepaired: Vec::new(),
            message: None,
            plan: Vec::new(),
            reparented: Vec::new(),
        }
    }
}

/// Settings shared by every file.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Check options (format, line limit).
    pub check: Options,
    /// Orphan policy.
    pub orphans: OrphanPolicy,
    /// Plan only.
    pub dry_run: bool,
    /// Replace the input.
    pub in_place: bool,
    /// Backup suffix for --in-place, if a backup is kept.
    pub backup: Option<String>,
    /// Live-file guard.
    pub min_idle: Duration,
    /// Ignore the guard.
    pub force: bool,
}

/// Plans the repair of a file: a check pass watched by the planner.
pub fn plan_file(path: &Path, s: &Settings, buf: &mut Vec<u8>) -> anyhow::Result<Plan> {
    let mut c = Checker::observed(s.check.clone(), Planner::new(s.orphans));
    batch::read_chunks(&Input::File(path.to_path_buf()), buf, |chunk| c.feed(chunk).is_ok()).with_context(|| format!("reading {}", path.display()))?;
    let done = c.finish().map_err(|e| anyhow::anyhow!("{}:{e}", path.display()))?;
    Ok(done.observer.into_plan(done.format))
}

/// Rewrites `src` with `plan` into `dest`; rejects are added to `rejects` (none are written
/// without it).
fn rewrite_file(
    src: &Path,
    plan: &Plan,
    s: &Settings,
    dest: &mut AtomicFile,
    mut rejects: Option<&mut Spool>,
    buf: &mut Vec<u8>,
) -> anyhow::Result<RewriteLog> {
    let mut rw = Rewriter::new(plan, s.check.max_line_bytes);
    if rejects.is_none() {
        rw = rw.without_rejects();
    }
    let mut failed: Option<std::io::Error> = None;
    let mut emit = |e: Emit<'_>| match e {
        Emit::Out(b) => {
            if failed.is_none() {
                if let Err(err) = dest.write_all(b) {
                    failed = Some(err);
                }
            }
        }
        Emit::Reject(b) => {
            if let Some(r) = rejects.as_mut() {
                r.push(b)
            }
        }
    };
    batch::read_chunks(&Input::File(src.to_path_buf()), buf, |chunk| {
        rw.feed(chunk, &mut emit);
        true
    })
    .with_context(|| format!("reading {}", src.display()))?;
    let log = rw.finish(&mut emit);
    if let Some(e) = failed {
        return Err(e).with_context(|| format!("writing {}", dest.path().display()));
    }
    dest.flush()?;
    Ok(log)
}

/// Bytes read at a time by the one-pass repair.
const READ: usize = 1 << 20;

/// What the first round of a file's repair produced.
struct FirstRound {
    plan: Plan,
    /// The output, when the plan has edits.
    out: Option<AtomicFile>,
    rejects: Spool,
    log: RewriteLog,
}

/// The output of the one-pass repair. Nothing is written until the first edit: up to then the
/// output is the input, and that prefix is copied from the input by the kernel when the first
/// edit comes (a clean file is never written at all).
struct LazyOut<'a> {
    input: &'a Path,
    dest: &'a Path,
    permissions: std::fs::Permissions,
    file: Option<AtomicFile>,
    same: u64,
    rejects: Spool,
    failed: Option<std::io::Error>,
}

impl LazyOut<'_> {
    fn open(&mut self) -> anyhow::Result<()> {
        if self.file.is_none() {
            let mut f = AtomicFile::create(self.dest, Some(self.permissions.clone()))
                .with_context(|| format!("creating a temporary file beside {}", self.dest.display()))?;
            f.copy_prefix(self.input, self.same).with_context(|| format!("writing {}", self.dest.display()))?;
            self.file = Some(f);
        }
        Ok(())
    }

    fn emit(&mut self, e: Emit<'_>) {
        match (e, &mut self.file) {
            (Emit::Out(b), None) => self.same += b.len() as u64,
            (Emit::Out(b), Some(f)) => {
                if self.failed.is_none() {
                    if let Err(err) = f.write_all(b) {
                        self.failed = Some(err);
                    }
                }
            }
            (Emit::Reject(b), _) => self.rejects.push(b),
        }
    }

    fn check(&mut self) -> anyhow::Result<()> {
        match self.failed.take() {
            Some(e) => Err(e).with_context(|| format!("writing {}", self.dest.display())),
            None => Ok(()),
        }
    }
}

/// The first round: in one pass (read once, written once) unless that pass gives up, then
/// planned to the end and rewritten in a second pass.
fn first_round(job: &Job, s: &Settings, permissions: std::fs::Permissions, buf: &mut Vec<u8>) -> anyhow::Result<FirstRound> {
    let path = &job.input;
    let strict = |e: crate::transcript::StrictStop| anyhow::anyhow!("{}:{e}", path.display());
    let mut stream = StreamRepair::new(&s.check, s.orphans);
    let mut file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut win = batch::Window::new(buf, READ);
    let rejects = Spool::new(&job.output, Spool::LIMIT);
    let mut out = LazyOut { input: path, dest: &job.output, permissions: permissions.clone(), file: None, same: 0, rejects, failed: None };
    let gave_up = loop {
        let n = win.fill(&mut file).with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break stream.end().map_err(strict)?;
        }
        if let Some(why) = stream.read(win.fresh(n)).map_err(strict)? {
            break Some(why);
        }
        if stream.edited() {
            out.open()?;
        }
        match stream.write(win.held(), &mut |e| out.emit(e)) {
            Step::Consumed(k) => win.consume(k),
            Step::Abandon(why) => break Some(why),
        }
        out.check()?;
    };
    let Some(why) = gave_up else {
        if stream.edited() {
            out.open()?;
        }
        let (plan, log) = stream.finish(win.held(), &mut |e| out.emit(e));
        out.check()?;
        if let Some(f) = out.file.as_mut() {
            f.flush().with_context(|| format!("writing {}", job.output.display()))?;
        }
        return Ok(FirstRound { plan, out: out.file, rejects: out.rejects, log });
    };
    tracing::debug!(file = %path.display(), ?why, "one-pass repair gave up: repairing in two passes");
    let plan = match stream.abandon() {
        Rest::Planned(plan) => plan,
        Rest::Planning(mut c) => {
            // The rest of the file, from where the one pass stopped reading.
            batch::read_to_end(&mut file, buf, |chunk| c.feed(chunk).is_ok()).with_context(|| format!("reading {}", path.display()))?;
            let done = c.finish().map_err(strict)?;
            done.observer.into_plan(done.format)
        }
    };
    if plan.is_empty() {
        return Ok(FirstRound { plan, out: None, rejects: out.rejects, log: RewriteLog::default() });
    }
    let mut dest = AtomicFile::create(&job.output, Some(permissions)).with_context(|| format!("creating a temporary file beside {}", job.output.display()))?;
    // What the abandoned pass put aside is written again by the second.
    let mut rejects = Spool::new(&job.output, Spool::LIMIT);
    let log = rewrite_file(path, &plan, s, &mut dest, Some(&mut rejects), buf)?;
    Ok(FirstRound { plan, out: Some(dest), rejects, log })
}

/// `<dir>/<stem>.rejects.jsonl` beside `output`.
pub fn rejects_path(output: &Path) -> PathBuf {
    let name = output.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.strip_suffix(".jsonl").unwrap_or(&name);
    output.with_file_name(format!("{stem}.rejects.jsonl"))
}

fn backup_path(input: &Path, suffix: &str) -> PathBuf {
    let name = input.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let first = input.with_file_name(format!("{name}{suffix}"));
    if !first.exists() {
        return first;
    }
    // Never overwrite an earlier backup.
    (1..).map(|k| input.with_file_name(format!("{name}{suffix}.{k}"))).find(|p| !p.exists()).expect("a free name")
}

/// Repairs one file.
pub fn repair_file(job: &Job, s: &Settings, buf: &mut Vec<u8>) -> Report {
    match try_repair(job, s, buf) {
        Ok(r) => r,
        Err(e) => {
            let mut r = Report::new(job, Status::Failed);
            r.message = Some(format!("{e:#}"));
            r
        }
    }
}

fn try_repair(job: &Job, s: &Settings, buf: &mut Vec<u8>) -> anyhow::Result<Report> {
    let meta = std::fs::metadata(&job.input).with_context(|| format!("reading {}", job.input.display()))?;
    if !s.force {
        let age = meta.modified().ok().and_then(|m| SystemTime::now().duration_since(m).ok()).unwrap_or_default();
        if age < s.min_idle {
            let mut r = Report::new(job, Status::Skipped);
            r.message = Some(format!(
                "modified {}s ago, within --min-idle {}s: it may still be written (use --force to repair it anyway)",
                age.as_secs(),
                s.min_idle.as_secs()
            ));
            return Ok(r);
        }
    }
    // A dry run makes the same rounds into a scratch directory, and keeps nothing.
    let scratch = if s.dry_run { Some(tempfile::tempdir().context("creating a scratch directory for --dry-run")?) } else { None };
    let out_job = match &scratch {
        Some(dir) => Job { output: dir.path().join("dry-run.jsonl"), ..job.clone() },
        None => job.clone(),
    };
    if let Some(dir) = out_job.output.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let first = first_round(&out_job, s, meta.permissions(), buf)?;
    let plan = first.plan;
    let mut rounds = Rounds::new();
    let mut report = Report::new(job, Status::Clean);
    report.format = plan.format;
    let Some(mut out) = first.out.filter(|_| !plan.is_empty()) else {
        rounds.verified(&plan);
        report.unrepaired = rounds.unrepaired().to_vec();
        report.status = if report.unrepaired.is_empty() { Status::Clean } else { Status::Partial };
        if job.output != job.input && !s.dry_run {
            atomic::copy_file(&job.input, &job.output).with_context(|| format!("writing {}", job.output.display()))?;
            report.output = Some(job.output.display().to_string());
        }
        return Ok(report);
    };
    rounds.record(&plan, first.log);
    let mut rejects = first.rejects;
    while rounds.wants_another() {
        // The edits may have left new findings (two assistant turns side by side): check the
        // output again.
        let again = plan_file(out.path(), s, buf)?;
        if rounds.verified(&again) {
            break;
        }
        let mut next = AtomicFile::create(&out_job.output, Some(meta.permissions()))?;
        let log = rewrite_file(out.path(), &again, s, &mut next, None, buf)?;
        rounds.record(&again, log);
        out = next;
    }
    if let Some(mut w) = rounds.rejects_writer(s.check.max_line_bytes).filter(|_| !s.dry_run) {
        // Later rounds changed lines too: the rejects are written again from the input, one
        // record per line with what finally became of it.
        rejects = Spool::new(&job.output, Spool::LIMIT);
        let mut emit = |e: Emit<'_>| {
            if let Emit::Reject(b) = e {
                rejects.push(b)
            }
        };
        batch::read_chunks(&Input::File(job.input.clone()), buf, |chunk| {
            w.feed(chunk, &mut emit);
            true
        })
        .with_context(|| format!("reading {}", job.input.display()))?;
        w.finish(&mut emit);
    }
    report.edits = rounds.edits().len();
    report.rounds = rounds.rounds();
    report.lines = rounds.stats();
    report.unrepaired = rounds.unrepaired().to_vec();
    let complete = rounds.complete();
    if s.dry_run {
        report.plan = rounds.edits().to_vec();
        report.reparented = rounds.reparented();
        report.status = if complete { Status::Planned } else { Status::Partial };
        return Ok(report);
    }
    // What was removed is safe on disk before the new file takes the old one's place.
    let rejects_file = rejects_path(&job.output);
    rejects.append_to(&rejects_file, Some(&meta.permissions())).with_context(|| format!("writing {}", rejects_file.display()))?;
    if s.in_place {
        if let Some(suffix) = &s.backup {
            let backup = backup_path(&job.input, suffix);
            if std::fs::hard_link(&job.input, &backup).is_err() {
                atomic::copy_file(&job.input, &backup).with_context(|| format!("writing backup {}", backup.display()))?;
            }
        }
    }
    out.commit().with_context(|| format!("replacing {}", job.output.display()))?;
    report.output = Some(job.output.display().to_string());
    report.status = if complete { Status::Repaired } else { Status::Partial };
    Ok(report)
}

/// Expands the paths into jobs: directories walked, outputs mirrored under `out`, shards
/// applied.
pub fn jobs(paths: &[PathBuf], out: Option<&Path>, shard: Option<(u64, u64)>) -> anyhow::Result<Vec<Job>> {
    let mut jobs = Vec::new();
    for root in paths {
        let (inputs, _) = batch::expand(std::slice::from_ref(root))?;
        for input in inputs {
            let Input::File(input) = input else { anyhow::bail!("repair reads files, not stdin") };
            let rel =
                if root.is_dir() { input.strip_prefix(root).unwrap_or(&input).to_path_buf() } else { PathBuf::from(input.file_name().unwrap_or_default()) };
            if shard.is_some_and(|s| !in_shard(&rel, s)) {
                continue;
            }
            let output = out.map_or_else(|| input.clone(), |o| o.join(&rel));
            if out.is_some() && output == input {
                anyhow::bail!("--out would overwrite {}: choose a directory outside the input", input.display());
            }
            jobs.push(Job { input, output, rel });
        }
    }
    Ok(jobs)
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let started = std::time::Instant::now();
    let jobs_n = super::jobs(args.jobs);
    let jobs = jobs(&args.paths, args.out.as_deref(), args.shard)?;
    let settings = Settings {
        check: Options { format: args.format, max_line_bytes: args.max_line_bytes, strict: false, jobs: 1 },
        orphans: args.orphans,
        dry_run: args.dry_run,
        in_place: args.in_place,
        backup: (!args.no_backup).then(|| args.backup_suffix.clone()),
        min_idle: args.min_idle,
        force: args.force,
    };
    let progress = (jobs.len() > 1 && std::io::stderr().is_terminal() && !args.quiet).then(|| {
        let bar = indicatif::ProgressBar::new(jobs.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} repairing [{bar:40}] {pos}/{len} files {elapsed_precise} eta {eta}")
                .expect("template")
                .progress_chars("=> "),
        );
        bar
    });
    let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs_n).build().context("starting worker threads")?;
    let reports: Vec<Report> = pool.install(|| {
        jobs.par_iter()
            .with_max_len(1)
            .map(|job| {
                let r = batch::with_buffer(|buf| repair_file(job, &settings, buf));
                if let Some(p) = &progress {
                    p.inc(1);
                }
                r
            })
            .collect()
    });
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for r in &reports {
        match (args.output, args.dry_run) {
            (_, true) => {
                for e in &r.plan {
                    let mut v = serde_json::to_value(&e.edit)?;
                    let o = v.as_object_mut().expect("edits are objects");
                    o.insert("round".into(), e.round.into());
                    if e.on_inserted {
                        o.insert("on_inserted".into(), true.into());
                    }
                    o.insert("file".into(), r.file.clone().into());
                    serde_json::to_writer(&mut out, &v)?;
                    out.write_all(b"\n")?;
                }
                for line in &r.reparented {
                    let v = serde_json::json!({"action": "set_parent", "line": line, "file": r.file});
                    serde_json::to_writer(&mut out, &v)?;
                    out.write_all(b"\n")?;
                }
                for u in &r.unrepaired {
                    let mut v = serde_json::to_value(u)?;
                    let o = v.as_object_mut().expect("object");
                    o.insert("action".into(), "unrepairable".into());
                    o.insert("file".into(), r.file.clone().into());
                    serde_json::to_writer(&mut out, &v)?;
                    out.write_all(b"\n")?;
                }
            }
            (OutputFormat::Json, false) => {
                serde_json::to_writer(&mut out, r)?;
                out.write_all(b"\n")?;
            }
            (OutputFormat::Text, false) => {
                let l = r.lines;
                match r.status {
                    Status::Clean => {}
                    Status::Repaired | Status::Partial => {
                        writeln!(
                            out,
                            "{}: {} ({} inserted, {} removed, {} modified)",
                            r.file,
                            if r.status == Status::Repaired { "repaired" } else { "partly repaired" },
                            l.inserted,
                            l.removed,
                            l.modified
                        )?;
                        for u in &r.unrepaired {
                            writeln!(out, "{}:{}: not repaired: {}: {}", r.file, u.line, u.kind, u.why)?;
                        }
                    }
                    Status::Skipped | Status::Failed | Status::Planned => {
                        writeln!(out, "{}: {:?}: {}", r.file, r.status, r.message.as_deref().unwrap_or("")).map(|_| ())?
                    }
                }
            }
        }
    }
    out.flush()?;
    let count = |s: Status| reports.iter().filter(|r| r.status == s).count();
    let failed = count(Status::Failed);
    for r in reports.iter().filter(|r| r.status == Status::Failed) {
        eprintln!("transcriptd: error: {}: {}", r.file, r.message.as_deref().unwrap_or(""));
    }
    if !args.quiet {
        let bytes: u64 = jobs.iter().filter_map(|j| std::fs::metadata(&j.input).ok()).map(|m| m.len()).sum();
        eprintln!(
            "{} {} file{} ({}) in {:.2}s: {} clean, {} repaired, {} partly repaired, {} skipped, {} failed{}",
            if args.dry_run { "planned" } else { "repaired" },
            reports.len(),
            if reports.len() == 1 { "" } else { "s" },
            human_bytes(bytes),
            started.elapsed().as_secs_f64(),
            count(Status::Clean),
            count(Status::Repaired) + count(Status::Planned),
            count(Status::Partial),
            count(Status::Skipped),
            failed,
            if let Some((i, n)) = args.shard { format!(" (shard {i}/{n})") } else { String::new() },
        );
    }
    if failed > 0 {
        anyhow::bail!("{failed} file{} could not be repaired", if failed == 1 { "" } else { "s" });
    }
    Ok(if count(Status::Partial) + count(Status::Skipped) > 0 { Exit::Findings } else { Exit::Clean })
}
