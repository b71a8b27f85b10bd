//! `transcriptd context`: what the model sees when the session resumes, read backwards from the
//! end of the file and stopped at the compaction that bounds it.

use super::input::FileArgs;
use super::output::human_bytes;
use super::rebuilt::{scan, write_as};
use super::{Exit, OutputFormat};
use crate::sources::batch::Input;
use crate::sources::reverse::{self, FileSource};
use crate::transcript::context::agent::Settings;
use crate::transcript::context::resume::{Cut, Skipped};
use anyhow::Context as _;
use std::io::{Read, Write};

/// Arguments of `transcriptd context`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The transcript (stdin is read whole, then scanned the same way).
    #[command(flatten)]
    pub input: FileArgs,
    /// Print the original lines verbatim instead of canonical messages (Codex: the head
    /// session_meta line, then the lines from the cut to the end).
    #[arg(long)]
    pub raw: bool,
    /// The model the session is resumed with, where the agent's resume depends on it (Codex:
    /// how long a tool output it sends may be); by default the model of the session's last turn.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let FileArgs { file, read, out: out_args } = &args.input;
    let input = args.input.input();
    let name = input.display();
    let text = match (args.raw, out_args.format_or(OutputFormat::Json)) {
        (true, OutputFormat::Text) => anyhow::bail!("--raw prints the lines as written: -o text does not apply"),
        (_, f) => f == OutputFormat::Text,
    };
    let scanned = if input == Input::Stdin {
        let mut buf = Vec::new();
        std::io::stdin().lock().read_to_end(&mut buf).context("reading stdin")?;
        scan(&mut &buf[..], read.format, read.max_line_bytes, reverse::FIRST_PAGE)
    } else {
        let f = crate::sources::regular::open_file(file).with_context(|| format!("{name}: cannot open"))?;
        scan(&mut FileSource::new(f)?, read.format, read.max_line_bytes, reverse::FIRST_PAGE)
    }
    .with_context(|| format!("{name}: read failed"))?;
    let mut out = out_args.stdout();
    write_as(&scanned.context, args.raw, text, &Settings { model: args.model.clone() }, &mut out).with_context(|| name.clone())?;
    out.flush()?;
    let mut skipped: Vec<&Skipped> = scanned.context.skipped.iter().collect();
    skipped.sort_by_key(|s| s.offset);
    let paint = super::style::stderr();
    if !out_args.quiet {
        for s in &skipped {
            let line = scanned.line_of(s);
            let message = match line {
                Some(_) => s.message.clone(),
                None => format!("{} ({})", s.message, scanned.locate(s)),
            };
            eprintln!("{}", paint.at(&name, line.unwrap_or(0), "error", s.kind.as_str(), &message));
        }
        if let Some(l) = &scanned.context.lost {
            let n = l.lines.len();
            let message = format!(
                "the line at byte {} names a parent that is not in the file and cannot be bridged: Claude Code resumes from it, and the {n} message line{} before it (from byte {}) {} not sent (`transcriptd check` names the lines)",
                l.at,
                if n == 1 { "" } else { "s" },
                l.lines[0],
                if n == 1 { "is" } else { "are" }
            );
            eprintln!("{}", paint.at(&name, 0, "error", "lost_on_resume", &message));
        }
        if scanned.context.head_missing {
            eprintln!("{}", paint.note(&name, 1, "warning", "the rollout's first line is not a session_meta; the context starts without it"));
        }
    }
    if out_args.summary() {
        let cut = match scanned.context.cut {
            Cut::Whole => "no compaction bounds it: the whole file".to_owned(),
            Cut::Bounded { offset } => format!("cut at byte {offset}"),
        };
        eprintln!(
            "context of {name}: {} line{} ({cut}); read {} of {}",
            scanned.context.lines.len(),
            if scanned.context.lines.len() == 1 { "" } else { "s" },
            human_bytes(scanned.stats.bytes_read),
            human_bytes(scanned.len),
        );
    }
    Ok(if skipped.is_empty() && !scanned.context.head_missing && scanned.context.lost.is_none() { Exit::Clean } else { Exit::Findings })
}
