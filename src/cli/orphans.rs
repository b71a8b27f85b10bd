//! `transcriptd orphans`: the calls of each transcript's last assistant turn that have no
//! result, with what each tool does and a suggested handling.

use super::args::FindingArgs;
use super::output::plural;
use super::style::Paint;
use super::{Exit, OutputFormat};
use crate::config::tools::ToolRegistry;
use crate::sources::batch::{self, Input};
use crate::transcript::checker::Observer as _;
use crate::transcript::checker::Outcome;
use crate::transcript::forward::Forward;
use crate::transcript::pipeline::{Event, Inputs, Stages};
use crate::transcript::stages::orphans::{classify, Handling, OpenCall, Orphan, Orphans, Policy};
use crate::transcript::{Format, Kind, Severity};
use anyhow::Context as _;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Arguments of `transcriptd orphans`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files, directories (searched recursively for *.jsonl) or `-` for stdin. Default: the
    /// standard locations, ~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions, ~/.qwen/projects, ~/.gemini/tmp and ~/.copilot/session-state.
    pub paths: Vec<PathBuf>,
    /// Tool registry: a TOML file with a [tools] table of tool name or glob = "none" | "read" |
    /// "write" | "external"; default: the built-in copy of config/tools.toml.
    #[arg(long, value_name = "FILE")]
    pub registry: Option<PathBuf>,
    /// `suggest`: redo calls that only read, abort the others; `skip`: mark every orphan skip.
    #[arg(long, value_enum, default_value_t = PolicyArg::Suggest)]
    pub policy: PolicyArg,
    /// Treat files as live: a call at the tail of a file modified less than this long ago is
    /// still running, not an orphan (e.g. 30s). Default 0: files are complete.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub grace: Duration,
    /// How transcripts are read, which findings, how results are written.
    #[command(flatten)]
    pub common: FindingArgs,
}

/// `--policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PolicyArg {
    /// Redo calls that only read; abort the others (a person decides).
    Suggest,
    /// Mark every orphan skip.
    Skip,
}

/// One line of `--output json`.
#[derive(Debug, Serialize)]
struct Record<'a> {
    file: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<Format>,
    /// Always `orphan_call` (what `--kind` selects on).
    kind: Kind,
    /// `error` for an orphan, `warning` for a paused call.
    severity: Severity,
    #[serde(flatten)]
    orphan: &'a Orphan,
}

/// The severity of a reported call: an orphan is an error (exit 1); a paused call, listed in
/// `pending.json`, and a call still in flight are warnings.
fn severity_of(o: &Orphan) -> Severity {
    if o.handling == Handling::Paused {
        Severity::Warning
    } else {
        Severity::Error
    }
}

/// The open calls of one transcript.
#[derive(Debug)]
pub struct Scanned {
    /// Its format, when detected.
    pub format: Option<Format>,
    /// Calls of the last assistant turn without a result, declared orphans.
    pub orphans: Vec<OpenCall>,
    /// Calls at the tail of a live file still within the grace period.
    pub in_flight: Vec<OpenCall>,
}

/// Reads `input` forward and finds the open calls of its last assistant turn: the preset
/// stage list `[orphans]` over a batch read. With a `grace` period and the file's modification
/// time, a call at the tail of a recently modified file is still in flight: the stage is told the
/// file grew at its modification time and the clock is now, as the daemon tells it.
pub fn scan(input: &Input, format: Option<Format>, max_line_bytes: usize, grace: Duration) -> anyhow::Result<Scanned> {
    let mut forward = Forward::new(format, max_line_bytes);
    let mut stages = Stages::new(vec![Box::new(Orphans::new(grace))]);
    let mut told = false;
    let mut on_line = |o: Outcome<'_>, _: &[u8], format: Option<Format>| {
        if let (Outcome::Parsed(number, parsed), Some(f)) = (o, format) {
            if !std::mem::replace(&mut told, true) {
                stages.format(f);
            }
            stages.line(number, &parsed);
        }
    };
    super::input::read_forward(input, &mut forward, &mut on_line)?;
    let format = forward.format();
    let calls = |events: std::vec::Drain<'_, Event>| -> Vec<OpenCall> {
        events
            .filter_map(|e| e.finding().map(|f| OpenCall { line: f.line, id: f.call_id.clone().unwrap_or_default(), name: f.tool.clone().unwrap_or_default() }))
            .collect()
    };
    let modified = input.path().and_then(|p| std::fs::metadata(p).ok()).and_then(|m| m.modified().ok());
    let since_epoch = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let mut orphans = Vec::new();
    if let Some(mtime) = modified.filter(|_| !grace.is_zero()) {
        // The file's last growth is its modification time; the clock says how long ago.
        stages.grew(since_epoch(mtime));
        stages.handle_timeout(since_epoch(SystemTime::now()), &Inputs::default());
        orphans = calls(stages.drain());
    }
    // What the deadline did not declare: orphans of a complete file, or calls in flight.
    stages.finish();
    let rest = calls(stages.drain());
    Ok(if grace.is_zero() || modified.is_none() {
        Scanned { format, orphans: rest, in_flight: Vec::new() }
    } else {
        Scanned { format, orphans, in_flight: rest }
    })
}

use crate::sources::pending::paused_calls;

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let registry = match &args.registry {
        Some(p) => ToolRegistry::load(p)?,
        None => ToolRegistry::builtin(),
    };
    let policy = match args.policy {
        PolicyArg::Suggest => Policy::Suggest,
        PolicyArg::Skip => Policy::Skip,
    };
    let paths = if args.paths.is_empty() { super::default_roots() } else { args.paths.clone() };
    if paths.is_empty() {
        anyhow::bail!("no paths given, and none of ~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions, ~/.qwen/projects, ~/.gemini/tmp and ~/.copilot/session-state exists");
    }
    let found = batch::expand(&paths);
    let inputs = &found.inputs;
    let filter = args.common.filter.filter();
    let (format, paint, err_paint) = (args.common.out.format(), args.common.out.paint(), super::style::stderr());
    let mut out = args.common.out.stdout();
    let unreadable = super::output::report_skipped(&mut out, &args.common.out, &found.skipped)? as u64;
    super::output::warn_empty_dirs(&args.common.out, &found.empty_dirs);
    // Files are scanned on every job; what they hold is reported in path order.
    let pool = rayon::ThreadPoolBuilder::new().num_threads(args.common.read.jobs()).build().context("starting worker threads")?;
    let scans: Vec<anyhow::Result<Scanned>> = pool
        .install(|| inputs.par_iter().with_max_len(1).map(|input| scan(input, args.common.read.format, args.common.read.max_line_bytes, args.grace)).collect());
    let mut paused_by_dir: BTreeMap<PathBuf, HashSet<String>> = BTreeMap::new();
    let (mut failed, mut orphans, mut paused, mut in_flight, mut hidden) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut by_handling: BTreeMap<&'static str, u64> = BTreeMap::new();
    // The files with an orphan shown, for the command the summary names.
    let mut orphan_files: Vec<crate::sources::batch::Input> = Vec::new();
    for (input, scanned) in inputs.iter().zip(scans) {
        let name = input.display();
        let scanned = scanned.and_then(|s| {
            let dir = input.path().and_then(Path::parent).map(Path::to_path_buf);
            let listed = match dir {
                Some(d) => match paused_by_dir.get(&d) {
                    Some(l) => l.clone(),
                    None => {
                        let l = paused_calls(&d)?;
                        paused_by_dir.insert(d, l.clone());
                        l
                    }
                },
                None => HashSet::new(),
            };
            Ok((s, listed))
        });
        let (scanned, listed) = match scanned {
            Ok(s) => s,
            Err(e) => {
                failed += 1;
                out.flush()?;
                super::style::error(crate::error::chain(&e));
                continue;
            }
        };
        let orphans_before = orphans;
        for o in classify(&scanned.orphans, |t| registry.side_effect(t), &listed, policy) {
            if !filter.keeps(Kind::OrphanCall, severity_of(&o)) {
                hidden += 1;
                continue;
            }
            if o.handling == Handling::Paused {
                paused += 1;
            } else {
                orphans += 1;
                *by_handling.entry(o.handling.as_str()).or_default() += 1;
            }
            write_orphan(&mut out, format, paint, &name, scanned.format, &o)?;
        }
        if orphans > orphans_before {
            orphan_files.push(input.clone());
        }
        for c in &scanned.in_flight {
            if !filter.keeps(Kind::OrphanCall, Severity::Warning) {
                hidden += 1;
                continue;
            }
            in_flight += 1;
            if !args.common.out.quiet {
                out.flush()?;
                let what = format!("call to `{}` [{}] is still within the {} grace period", c.name, c.id, humantime::format_duration(args.grace));
                eprintln!("{}", err_paint.at(&name, c.line, "warning", Kind::OrphanCall.as_str(), &what));
            }
        }
    }
    out.flush()?;
    if args.common.out.summary() {
        let handlings: Vec<String> = by_handling.iter().map(|(h, n)| format!("{n} {h}")).collect();
        let detail = if handlings.is_empty() { String::new() } else { format!(" ({})", handlings.join(", ")) };
        eprintln!(
            "scanned {} file{}: {orphans} orphan{}{detail}, {paused} paused, {in_flight} in flight{}{}{}",
            inputs.len(),
            plural(inputs.len() as u64),
            plural(orphans),
            if hidden > 0 { format!(" ({hidden} more not shown: --severity/--kind)") } else { String::new() },
            if failed + unreadable > 0 { format!("; {} could not be scanned", failed + unreadable) } else { String::new() },
            next_command(&orphan_files, &paths, orphans),
        );
    }
    if failed + unreadable > 0 {
        let n = failed + unreadable;
        anyhow::bail!("{n} input{} could not be scanned", plural(n));
    }
    Ok(if orphans > 0 { Exit::Findings } else { Exit::Clean })
}

/// What the summary says to run when there are orphans: the repair that answers each with an
/// "interrupted" result (`repair --orphans`), of the one file that has them or of the paths
/// given; nothing for standard input.
fn next_command(files: &[crate::sources::batch::Input], paths: &[PathBuf], orphans: u64) -> String {
    use crate::sources::batch::Input;
    let word = |p: &Path| crate::sessions::project::shell_word(&p.display().to_string());
    let target = match files {
        [] => return String::new(),
        [Input::File(p)] => word(p),
        _ if files.iter().all(|f| matches!(f, Input::File(_))) && paths.iter().all(|p| p.as_os_str() != "-") => {
            paths.iter().map(|p| word(p)).collect::<Vec<_>>().join(" ")
        }
        _ => return String::new(),
    };
    format!(
        "; to answer {}: quit the agent, then `transcriptd repair --in-place {}` (an \"interrupted\" result for each; check its side effect before running it again)",
        if orphans == 1 { "it" } else { "them" },
        super::safe::Safe(target)
    )
}

fn write_orphan(out: &mut impl Write, format: OutputFormat, paint: Paint, file: &str, fmt: Option<Format>, o: &Orphan) -> anyhow::Result<()> {
    let severity = severity_of(o);
    match format {
        OutputFormat::Json => {
            serde_json::to_writer(&mut *out, &Record { file, format: fmt, kind: Kind::OrphanCall, severity, orphan: o }).context("writing output")?;
            out.write_all(b"\n")?;
        }
        OutputFormat::Text => {
            let what = if o.handling == Handling::Paused {
                format!("call to `{}` [{}] is paused: listed in pending.json", o.tool, o.call_id)
            } else {
                format!("call to `{}` [{}] has no result; side effect {}: {}", o.tool, o.call_id, o.side_effect.as_str(), o.handling.as_str())
            };
            writeln!(out, "{}", paint.at(file, o.line, severity.as_str(), Kind::OrphanCall.as_str(), &what))?;
        }
    }
    Ok(())
}
