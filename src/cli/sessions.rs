//! `transcriptd sessions list`: the sessions on disk, most recently active first.

use super::args::OutputArgs;
use super::output::{human_bytes, plural};
use super::safe::{self, Safe};
use super::{Exit, OutputFormat};
use crate::sessions::info::{self, Row};
use crate::sessions::{discover, Error};
use anyhow::Context;
use clap::Subcommand;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `transcriptd sessions`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do with sessions.
    #[command(subcommand)]
    pub command: SessionsCommand,
}

/// The `sessions` subcommands.
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// List sessions, most recently active first.
    #[command(after_long_help = super::help::SESSIONS)]
    List(ListArgs),
    /// Compare the agents' own indexes of their sessions with the files: Codex's state
    /// database (rows whose rollout is gone, rollouts no row names) and Claude Code's
    /// `.claude.json` (a last session that is gone). Read-only.
    #[command(after_long_help = super::help::SESSIONS_AUDIT)]
    Audit(AuditArgs),
}

/// Arguments of `transcriptd sessions audit`.
#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// Codex's home (default: $CODEX_HOME, or ~/.codex).
    #[arg(long, value_name = "DIR")]
    pub codex_home: Option<PathBuf>,
    /// Claude Code's configuration directory (default: $CLAUDE_CONFIG_DIR, or ~/.claude; its
    /// `.claude.json` is in it when $CLAUDE_CONFIG_DIR names it, else ~/.claude.json).
    #[arg(long, value_name = "DIR")]
    pub claude_config: Option<PathBuf>,
    /// How results are written (-o json: one JSON object per problem).
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Arguments of `transcriptd sessions list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Directories to search (or transcript files). Default: the standard locations,
    /// ~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions, ~/.qwen/projects, ~/.gemini/tmp and ~/.copilot/session-state.
    pub roots: Vec<PathBuf>,
    /// How results are written (-o json: one JSON object per session).
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    match args.command {
        SessionsCommand::List(a) => list(a),
        SessionsCommand::Audit(a) => audit(a),
    }
}

fn audit(args: AuditArgs) -> anyhow::Result<Exit> {
    use crate::sessions::stores::{self, Problem};
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let env_dir = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let codex_home = args.codex_home.clone().or_else(|| env_dir("CODEX_HOME")).unwrap_or_else(|| home.join(".codex"));
    let (claude_dir, claude_json) = match (&args.claude_config, env_dir("CLAUDE_CONFIG_DIR")) {
        (Some(d), _) => (d.clone(), d.join(".claude.json")),
        (None, Some(d)) => (d.clone(), d.join(".claude.json")),
        (None, None) => (home.join(".claude"), home.join(".claude.json")),
    };
    let audits = [("codex", stores::codex(&codex_home)?), ("claude-code", stores::claude(&claude_json, &claude_dir)?)];
    let mut out = args.out.stdout();
    let paint = args.out.paint();
    let mut problems = 0u64;
    for (agent, a) in &audits {
        for p in &a.problems {
            problems += 1;
            match args.out.format() {
                OutputFormat::Json => {
                    let mut v = serde_json::to_value(p)?;
                    v["agent"] = (*agent).into();
                    serde_json::to_writer(&mut out, &v)?;
                    out.write_all(b"\n")?;
                }
                OutputFormat::Text => {
                    let line = match p {
                        Problem::IndexedSessionGone { index, id, file } => {
                            let what = match *agent {
                                "codex" => format!("thread {id} names {}, which is gone: `codex resume {id}` fails", file.display()),
                                _ => format!("the last session {id} names {}, which is gone", file.display()),
                            };
                            paint.at(&index.display().to_string(), 0, "warning", "indexed_session_gone", &what)
                        }
                        Problem::SessionNotIndexed { index, file } => paint.at(
                            &file.display().to_string(),
                            0,
                            "warning",
                            "session_not_indexed",
                            &format!("{} does not name it: the resume picker does not list it", index.display()),
                        ),
                    };
                    writeln!(out, "{line}")?;
                }
            }
        }
    }
    out.flush()?;
    if args.out.summary() {
        let read: Vec<String> = audits
            .iter()
            .filter_map(|(agent, a)| a.index.as_ref().map(|i| format!("{agent}: {} ({} sessions named, {} files)", i.display(), a.indexed, a.files)))
            .collect();
        if read.is_empty() {
            eprintln!("no agent index found ({} and {} hold none)", codex_home.display(), claude_json.display());
        } else {
            eprintln!("audited {}; {problems} problem{}", read.join("; "), plural(problems));
        }
    }
    Ok(if problems == 0 { Exit::Clean } else { Exit::Findings })
}

fn list(args: ListArgs) -> anyhow::Result<Exit> {
    let roots = super::roots_or_default(&args.roots)?;
    let found = discover(&roots)?;
    let (rows, left_out) = info::rows(&found.sessions);

    // A directory that cannot be read is said, and the others are listed (exit 2 at the end).
    let mut unreadable = found.unreadable.len() as u64;
    for e in &found.unreadable {
        super::style::error(e);
    }
    for (session, e) in &left_out {
        match e {
            Error::Io { path, .. } if *path == session.transcript => {
                unreadable += 1;
                super::style::error(e);
            }
            // `SessionReader::list_sessions_sorted_by_updated_at`: a session whose meta cannot be read is being created or is corrupt.
            _ => tracing::debug!(session = %session.id, "left out: {e}"),
        }
    }
    let mut out = args.out.stdout();
    match args.out.format() {
        OutputFormat::Json => {
            for r in &rows {
                serde_json::to_writer(&mut out, r).context("writing output")?;
                out.write_all(b"\n")?;
            }
        }
        OutputFormat::Text => write_table(&mut out, &rows)?,
    }
    out.flush()?;
    if !args.out.quiet {
        let paint = super::style::stderr();
        for lost in &found.lost {
            let m = &lost.missing;
            let what = format!("meta sidecar {} exists but its transcript is missing: the session's data is gone", m.meta.display());
            eprintln!("{}", paint.at(&m.transcript.display().to_string(), 0, "error", "missing_transcript", &what));
        }
    }
    if unreadable > 0 {
        anyhow::bail!("{unreadable} path{} could not be read", plural(unreadable));
    }
    Ok(if found.lost.is_empty() { Exit::Clean } else { Exit::Findings })
}

fn write_table(out: &mut impl Write, rows: &[Row]) -> std::io::Result<()> {
    // Ids and paths are file names: their controls escaped (`safe`).
    let id_width = rows.iter().map(|r| safe::line(&r.id).chars().count()).max().unwrap_or(0).max(2);
    writeln!(out, "{:<24}  {:<11}  {:>8}  {:>10}  {:>9}  {:<id_width$}  PATH", "UPDATED", "FORMAT", "LINES", "SIZE", "SUBAGENTS", "ID")?;
    for r in rows {
        let format = r.format.map_or("-", |f| f.as_str());
        writeln!(
            out,
            "{:<24}  {:<11}  {:>8}  {:>10}  {:>9}  {:<id_width$}  {}",
            r.updated.to_rfc3339(),
            format,
            r.lines,
            human_bytes(r.size),
            r.subagents,
            safe::line(&r.id),
            Safe(r.path.display())
        )?;
    }
    Ok(())
}
