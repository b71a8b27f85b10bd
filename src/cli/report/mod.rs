//! `transcriptd report PATH... --html FILE`: an audit of an archive as one self-contained HTML
//! page (and `--output json`, the same numbers as JSON).
//!
//! Built from the findings `check` makes: every file goes through [`batch_check::check_input`] on
//! `check`'s thread pool ([`batch_check::check_fold`]), and each [`batch_check::FileReport`] is folded into
//! [`model::Acc`] as soon as it is made, so memory holds aggregates and top-N lists, never the
//! findings of the whole archive. Besides the findings, a file's first [`session::HEAD_BYTES`]
//! are kept as `check` reads them (its first timestamp: the session's date). With `--plan`, each file
//! that has findings is also repaired the way `repair --out` repairs it, into a scratch
//! directory that is emptied after each file, and what the repair did is counted.
//!
//! - [`session`]: session or subagent, the `show` command, the session date.
//! - [`model`]: the fold; [`schema`]: the [`schema::Report`] both outputs are made from.
//! - [`svg`]: the charts; [`page`]: the page.

pub mod model;
pub mod page;
pub mod schema;
pub mod session;
pub mod svg;

use super::args::{FindingArgs, OutputArgs};
use super::output::{human_bytes, plural};
use super::safe::Safe;
use super::{Exit, OutputFormat};
use crate::batch_check::{self, FileReport};
use crate::config::tools::ToolRegistry;
use crate::repair::{self, Job, Settings};
use crate::sessions::Timestamp;
use crate::sources::batch::{self, Input};
use crate::transcript::repair::OrphanPolicy;
use crate::transcript::{FindingFilter, Options};
use anyhow::Context;
use model::{Acc, Facts, Meta};
use schema::Report;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Arguments of `transcriptd report`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files, directories (searched recursively for *.jsonl) or `-` for stdin, as for `check`.
    /// Default: the standard locations, ~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions, ~/.qwen/projects, ~/.gemini/tmp and ~/.copilot/session-state.
    pub paths: Vec<PathBuf>,
    /// Write the report to FILE as one self-contained HTML page (no script, nothing fetched).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Also say what `repair` would do: each file with findings is repaired into a scratch
    /// directory (as `repair --out` would, nothing is changed) and the lines it would insert,
    /// remove and modify, and the findings it would leave, are counted.
    #[arg(long)]
    pub plan: bool,
    /// With --plan: what repair does with calls pending at the end (as `repair --orphans`).
    #[arg(long, default_value = "answer", value_parser = clap::value_parser!(OrphanPolicy))]
    pub orphans: OrphanPolicy,
    /// Price tokens with this table (LiteLLM's `model_prices_and_context_window.json` shape)
    /// instead of the one built in, as `usage --prices`.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Tool registry for the side effects of calls without results (as `orphans --registry`);
    /// default: the built-in config/tools.toml.
    #[arg(long, value_name = "FILE")]
    pub registry: Option<PathBuf>,
    /// How transcripts are read, which findings, how results are written.
    #[command(flatten)]
    pub common: FindingArgs,
}

fn policy_name(p: OrphanPolicy) -> &'static str {
    match p {
        OrphanPolicy::Answer => "answer",
        OrphanPolicy::Drop => "drop",
        OrphanPolicy::Keep => "keep",
    }
}

/// When the report was made: now, or `SOURCE_DATE_EPOCH` (seconds) for reproducible pages.
fn generated() -> String {
    let secs = std::env::var("SOURCE_DATE_EPOCH").ok().and_then(|s| s.parse::<i64>().ok());
    let t = match secs {
        Some(s) => Timestamp::from_unix(s, 0),
        None => {
            let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
            Timestamp::from_unix(d.as_secs() as i64, d.subsec_nanos())
        }
    };
    t.to_rfc3339()
}

/// A scratch directory for `--plan`: each file is repaired into it, then removed.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> anyhow::Result<Self> {
        Ok(Scratch { dir: tempfile::Builder::new().prefix("transcriptd-report-plan.").tempdir().context("creating a scratch directory for --plan")? })
    }

    /// What `repair --out` makes of `path`, repaired into the scratch directory and removed.
    fn plan(&self, path: &Path, settings: &Settings, buf: &mut Vec<u8>) -> repair::Report {
        // One name per file: several threads repair files at once.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let output = self.dir.path().join(format!("{n}.jsonl"));
        let job = Job { input: path.to_path_buf(), output: output.clone(), rel: PathBuf::from(path.file_name().unwrap_or_default()), walked: None };
        let report = repair::repair_file(&job, settings, buf);
        for p in [output.clone(), repair::rejects_path(&output)] {
            let _ = std::fs::remove_file(p);
        }
        report
    }
}

/// Folds one checked file: its date, its session, and (with `--plan`) its repair. Only the
/// findings `filter` keeps are counted (the plan repairs every file that has some).
fn fold(acc: &mut Acc, mut r: FileReport, head: &[u8], plan: Option<(&Scratch, &Settings)>, filter: &FindingFilter, buf: &mut Vec<u8>) {
    let path = r.input.path().map(Path::to_path_buf);
    let repair = match (plan, &path) {
        (Some((scratch, settings)), Some(p)) if !r.findings.is_empty() || r.error.is_some() => Some(scratch.plan(p, settings, buf)),
        _ => None,
    };
    r.findings.retain(|f| filter.keeps_finding(f));
    acc.add(Facts {
        report: &r,
        date: session::session_date(head, path.as_deref()),
        subagent: path.as_deref().is_some_and(session::is_subagent),
        path: path.as_deref(),
        plan: repair,
    });
}

/// Builds the report of `paths` (what [`run`] writes), and the number of paths that could not
/// be read.
pub fn build(args: &Args, paths: &[PathBuf]) -> anyhow::Result<(Report, usize)> {
    let mut pricer = crate::prices::Pricer::new(crate::prices::load(args.prices.as_deref())?);
    let registry = match &args.registry {
        Some(p) => ToolRegistry::load(p)?,
        None => ToolRegistry::builtin(),
    };
    let found = batch::expand(paths);
    super::output::report_skipped(&mut std::io::sink(), &OutputArgs { quiet: args.common.out.quiet, ..OutputArgs::default() }, &found.skipped)?;
    super::output::warn_empty_dirs(&args.common.out, &found.empty_dirs);
    let filter = args.common.filter.filter();
    if args.plan && found.inputs.contains(&Input::Stdin) {
        anyhow::bail!("--plan repairs files, not stdin");
    }
    let jobs = args.common.read.jobs();
    let opts = Options { format: args.common.read.format, max_line_bytes: args.common.read.max_line_bytes, strict: false, jobs };
    let scratch = args.plan.then(Scratch::new).transpose()?;
    // The input is only read (`--out`): a copy of a snapshot, whatever writes to it.
    let settings = Settings::copy(opts.format, opts.max_line_bytes, args.orphans);
    let plan = scratch.as_ref().map(|s| (s, &settings));
    let progress = (found.inputs.len() > 1 && std::io::stderr().is_terminal() && args.common.out.summary()).then(|| {
        let bar = indicatif::ProgressBar::new(found.inputs.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} reporting [{bar:40}] {pos}/{len} files {elapsed_precise} eta {eta}")
                .expect("template")
                .progress_chars("=> "),
        );
        bar
    });
    let mut acc = batch_check::check_fold(
        &found.inputs,
        &opts,
        jobs,
        session::HEAD_BYTES,
        || Acc::new(args.plan),
        |acc, r, head, buf| {
            fold(acc, r, head, plan, &filter, buf);
            if let Some(p) = &progress {
                p.inc(1);
            }
        },
        Acc::merge,
    );
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    for m in &found.missing {
        acc.add_missing(m.transcript.display().to_string(), m.meta.display().to_string());
    }
    let meta = Meta { generated: generated(), paths: paths.iter().map(|p| p.display().to_string()).collect(), orphans: policy_name(args.orphans) };
    let report = acc.finish(meta, &found.skipped, &registry, &mut pricer);
    Ok((report, found.errors()))
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let started = Instant::now();
    let paths = if args.paths.is_empty() { super::default_roots() } else { args.paths.clone() };
    if paths.is_empty() {
        anyhow::bail!("no paths given, and none of ~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions, ~/.qwen/projects, ~/.gemini/tmp and ~/.copilot/session-state exists");
    }
    let (report, unreadable) = build(&args, &paths)?;
    if let Some(dest) = &args.html {
        let page = page::render(&report);
        crate::sinks::atomic::write_file(dest, page.as_bytes(), Some(page_mode(dest))).with_context(|| format!("writing {}", dest.display()))?;
    }
    let mut out = args.common.out.stdout();
    match args.common.out.format() {
        OutputFormat::Json => {
            serde_json::to_writer(&mut out, &report).context("writing output")?;
            out.write_all(b"\n")?;
        }
        OutputFormat::Text => write_summary(&mut out, &report)?,
    }
    out.flush()?;
    let t = &report.totals;
    if args.common.out.summary() {
        eprintln!(
            "reported {} file{} ({} lines, {}) in {:.2}s: {} error{}, {} warning{}{}",
            t.files,
            plural(t.files),
            t.lines,
            human_bytes(t.bytes),
            started.elapsed().as_secs_f64(),
            t.errors,
            plural(t.errors),
            t.warnings,
            plural(t.warnings),
            args.html.as_ref().map(|h| format!("; page written to {}", Safe(h.display()))).unwrap_or_default(),
        );
    }
    let failed = t.could_not_be_checked as usize + unreadable;
    if failed > 0 {
        anyhow::bail!("{failed} input{} could not be checked (the report counts the rest)", plural(failed as u64));
    }
    Ok(Exit::Clean)
}

/// The mode of the page: the one of the file it replaces, else what a new file gets under the
/// process's umask (a page is made to be read by others; atomic writes start at 0600).
fn page_mode(dest: &Path) -> crate::sinks::atomic::Keep {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(m) = std::fs::metadata(dest) {
        return crate::sinks::atomic::Keep::mode(m.permissions().mode());
    }
    // Read without changing it (`umask(2)` can only set it).
    let umask = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Umask:").and_then(|v| u32::from_str_radix(v.trim(), 8).ok())))
        .unwrap_or(0o022);
    crate::sinks::atomic::Keep::mode(0o666 & !umask)
}

/// The text summary on stdout.
fn write_summary(out: &mut impl Write, r: &Report) -> std::io::Result<()> {
    let t = &r.totals;
    writeln!(out, "files        {} ({} sessions, {} subagent transcripts)", t.files, t.sessions, t.subagent_transcripts)?;
    writeln!(out, "lines        {} ({})", t.lines, human_bytes(t.bytes))?;
    let formats: Vec<String> = r.formats.iter().map(|f| format!("{} {}", f.format, f.files)).collect();
    writeln!(out, "formats      {}", formats.join(", "))?;
    let n = |count: u64, word: &str| format!("{count} {word}{}", plural(count));
    writeln!(out, "findings     {}, {} in {} with errors", n(t.errors, "error"), n(t.warnings, "warning"), n(t.files_with_errors, "file"))?;
    for k in &r.kinds {
        writeln!(out, "  {:<26} {:>8} ({}, {})", k.kind.as_str(), k.total, n(k.error, "error"), n(k.warning, "warning"))?;
    }
    writeln!(out, "compactions  {}", t.compactions)?;
    writeln!(out, "no results   {} ({})", n(r.calls_without_results.total, "call"), n(r.calls_without_results.tools, "tool"))?;
    for m in &r.tokens.by_model {
        writeln!(
            out,
            "tokens       {}: {} ({} in, {} out, {} cache read, {} cache write), {}",
            Safe(&m.model),
            m.total,
            m.tokens.input,
            m.tokens.output,
            m.tokens.cache_read,
            m.tokens.cache_creation,
            m.cost_usd.map_or_else(|| "cost unknown".to_owned(), |c| format!("${c:.4}"))
        )?;
    }
    if !r.tokens.by_model.is_empty() {
        let unknown = match r.tokens.unpriced_models.len() {
            0 => String::new(),
            n => format!(
                " (cost unknown for {n} model{}: {})",
                plural(n as u64),
                r.tokens.unpriced_models.iter().map(|m| Safe(m).to_string()).collect::<Vec<_>>().join(", ")
            ),
        };
        let cost = r.tokens.cost_usd.map_or_else(|| "unknown".to_owned(), |c| format!("${c:.4}"));
        writeln!(out, "cost         {cost}{unknown}")?;
    }
    if let Some(p) = &r.plan {
        writeln!(
            out,
            "repair plan  {} repaired, {} partly, {} clean, {} failed: {} lines inserted, {} removed, {} modified",
            p.repaired, p.partial, p.clean, p.failed, p.inserted, p.removed, p.modified
        )?;
    }
    for s in &r.worst.by_errors {
        writeln!(out, "worst        {}  {}{}", n(s.errors, "error"), Safe(&s.file), s.open.as_deref().map(|c| format!("  ({})", Safe(c))).unwrap_or_default())?;
    }
    Ok(())
}
