//! `transcriptd show PREFIX`: one session, found by a short id prefix: its meta and a summary
//! (turns, tool calls, compactions, findings by kind), its full history, or one line by uuid.

use super::args::{OutputArgs, ReadArgs};
use super::output::{human_bytes, plural};
use super::render;
use super::roots_or_default;
use super::safe::{self, Safe};
use super::{Exit, OutputFormat};
use crate::batch_check::check_input;
use crate::sessions::history::{full_history, HistoryItem};
use crate::sessions::index::UuidIndex;
use crate::sessions::info::{self, read_head, subagents_of, UpdatedFrom};
use crate::sessions::{find_by_prefix, load_meta, Layout, Meta, Session, Timestamp};
use crate::sources::batch::Input;
use crate::sources::READ_CHUNK;
use crate::transcript::{Format, Kind, Options, Severity, Stats};
use anyhow::Context;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::PathBuf;

/// Arguments of `transcriptd show`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The session id, or enough of its start to name one session (letters, digits, `-`, `_`).
    pub prefix: String,
    /// Where to look (repeatable). Default: ~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions, ~/.qwen/projects, ~/.gemini/tmp and ~/.copilot/session-state.
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<PathBuf>,
    /// Print the full history (every conversation line, compactions marked) instead of the
    /// summary.
    #[arg(long, conflicts_with = "uuid")]
    pub history: bool,
    /// Print the one line with this uuid instead of the summary.
    #[arg(long, value_name = "UUID")]
    pub uuid: Option<String>,
    /// How the transcript is read.
    #[command(flatten)]
    pub read: ReadArgs,
    /// How results are written (-o json: the summary as one object; --history as the records
    /// of `transcriptd history`; --uuid as the line as written).
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let roots = roots_or_default(&args.roots)?;
    let session = find_by_prefix(&roots, &args.prefix)?;
    // A sidecar found beside the transcript must load; not found, unparseable and too new are
    // distinct errors.
    let meta = session.meta.as_deref().map(load_meta).transpose()?;
    let mut out = args.out.stdout();
    let output = args.out.format();
    let exit = if let Some(uuid) = &args.uuid {
        print_uuid(&mut out, &session, uuid, output)?
    } else if args.history {
        print_history(&mut out, &session, &args.read, output)?
    } else {
        print_summary(&mut out, &session, meta, &args.read, output)?
    };
    out.flush()?;
    Ok(exit)
}

/// Counts of findings of one kind.
#[derive(Debug, Default, Serialize)]
struct KindCount {
    errors: u64,
    warnings: u64,
}

/// The summary of a session, as printed with `--output json`.
#[derive(Debug, Serialize)]
struct Summary {
    id: String,
    layout: Layout,
    format: Option<Format>,
    path: PathBuf,
    updated: Timestamp,
    updated_from: UpdatedFrom,
    lines: u64,
    size: u64,
    subagents: Vec<PathBuf>,
    meta: Option<Meta>,
    turns: u64,
    messages: u64,
    tool_calls: u64,
    tool_results: u64,
    compactions: u64,
    errors: u64,
    warnings: u64,
    findings: BTreeMap<Kind, KindCount>,
}

fn print_summary(out: &mut impl Write, session: &Session, meta: Option<Meta>, read: &ReadArgs, output: OutputFormat) -> anyhow::Result<Exit> {
    let row = info::row(session)?;
    let opts = Options { format: read.format, max_line_bytes: read.max_line_bytes, strict: false, jobs: read.jobs() };
    let report = check_input(&Input::File(session.transcript.clone()), &opts, &mut Vec::with_capacity(READ_CHUNK));
    if let Some(e) = report.error {
        anyhow::bail!(e);
    }
    let mut findings: BTreeMap<Kind, KindCount> = BTreeMap::new();
    for f in &report.findings {
        let c = findings.entry(f.kind).or_default();
        match f.severity {
            Severity::Error => c.errors += 1,
            Severity::Warning => c.warnings += 1,
        }
    }
    let Stats { turns, messages, calls, results, compactions, .. } = report.stats;
    let s = Summary {
        id: row.id,
        layout: row.layout,
        format: report.format.or(row.format),
        path: row.path,
        updated: row.updated,
        updated_from: row.updated_from,
        lines: row.lines,
        size: row.size,
        subagents: subagents_of(session),
        meta,
        turns,
        messages,
        tool_calls: calls,
        tool_results: results,
        compactions,
        errors: findings.values().map(|c| c.errors).sum(),
        warnings: findings.values().map(|c| c.warnings).sum(),
        findings,
    };
    match output {
        OutputFormat::Json => {
            serde_json::to_writer(&mut *out, &s).context("writing output")?;
            out.write_all(b"\n")?;
        }
        OutputFormat::Text => write_summary(out, &s)?,
    }
    Ok(if s.errors > 0 { Exit::Findings } else { Exit::Clean })
}

fn write_summary(out: &mut impl Write, s: &Summary) -> io::Result<()> {
    let from = match s.updated_from {
        UpdatedFrom::Meta => "meta updated_at",
        UpdatedFrom::Transcript => "last timestamp in the transcript",
        UpdatedFrom::Mtime => "transcript modification time",
    };
    writeln!(out, "id           {}", Safe(&s.id))?;
    writeln!(out, "path         {}", Safe(s.path.display()))?;
    writeln!(out, "layout       {}", s.layout.as_str())?;
    writeln!(out, "format       {}", s.format.map_or("unknown", |f| f.as_str()))?;
    writeln!(out, "updated      {} ({from})", s.updated)?;
    writeln!(out, "size         {} in {} lines", human_bytes(s.size), s.lines)?;
    writeln!(out, "subagents    {}", s.subagents.len())?;
    for p in &s.subagents {
        writeln!(out, "  {}", Safe(p.display()))?;
    }
    match &s.meta {
        None => writeln!(out, "meta         none")?,
        Some(m) => {
            writeln!(out, "meta")?;
            let pretty = serde_json::to_string_pretty(m).map_err(io::Error::other)?;
            for l in pretty.lines() {
                writeln!(out, "  {}", Safe(l))?;
            }
        }
    }
    writeln!(out, "turns        {}", s.turns)?;
    writeln!(out, "messages     {}", s.messages)?;
    writeln!(out, "tool calls   {} ({} result{})", s.tool_calls, s.tool_results, plural(s.tool_results))?;
    writeln!(out, "compactions  {}", s.compactions)?;
    writeln!(out, "findings     {} error{}, {} warning{}", s.errors, plural(s.errors), s.warnings, plural(s.warnings))?;
    for (kind, c) in &s.findings {
        let mut parts = Vec::new();
        if c.errors > 0 {
            parts.push(format!("{} error{}", c.errors, plural(c.errors)));
        }
        if c.warnings > 0 {
            parts.push(format!("{} warning{}", c.warnings, plural(c.warnings)));
        }
        writeln!(out, "  {:<24} {}", kind.as_str(), parts.join(", "))?;
    }
    Ok(())
}

fn print_history(out: &mut impl Write, session: &Session, read: &ReadArgs, output: OutputFormat) -> anyhow::Result<Exit> {
    if output == OutputFormat::Json {
        // The same records as `transcriptd history`: one history, one shape.
        let input = crate::sources::batch::Input::File(session.transcript.clone());
        let faults = super::conversation::history(&input, read.format, read.max_line_bytes, super::conversation::Render::Canonical, out)?;
        return Ok(if faults.is_empty() { Exit::Clean } else { Exit::Findings });
    }
    let head = read_head(&session.transcript).with_context(|| session.transcript.display().to_string())?;
    let format = match read.format {
        Some(f) => f,
        None => info::detect_format(&head)
            .with_context(|| format!("{}: cannot tell the transcript's format from its first lines (give --format)", session.transcript.display()))?,
    };
    // For people: each conversation line rendered as text, compactions marked in place.
    full_history(&session.transcript, format, |item| match item {
        HistoryItem::Entry { line, role, record } => render::entry(out, line, role, record, format),
        HistoryItem::CompactBoundary { line } => render::compaction(out, line),
    })?;
    Ok(Exit::Clean)
}

fn print_uuid(out: &mut impl Write, session: &Session, uuid: &str, output: OutputFormat) -> anyhow::Result<Exit> {
    let index = UuidIndex::build(&session.transcript)?;
    let (span, bytes) = index.entry(uuid)?;
    match output {
        OutputFormat::Json => {
            out.write_all(&bytes)?;
            out.write_all(b"\n")?;
        }
        OutputFormat::Text => {
            writeln!(out, "{}:{}", Safe(session.transcript.display()), span.line)?;
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(v) => writeln!(out, "{}", safe::text(&serde_json::to_string_pretty(&v)?))?,
                Err(_) => writeln!(out, "{}", Safe(String::from_utf8_lossy(&bytes)))?,
            }
        }
    }
    Ok(Exit::Clean)
}
