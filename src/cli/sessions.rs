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
}

/// Arguments of `transcriptd sessions list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Directories to search (or transcript files). Default: the standard locations,
    /// ~/.claude/projects, ~/.codex/sessions and ~/.pi/agent/sessions.
    pub roots: Vec<PathBuf>,
    /// How results are written (-o json: one JSON object per session).
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    match args.command {
        SessionsCommand::List(a) => list(a),
    }
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
