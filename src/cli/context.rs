//! `transcriptd context`: what the model sees when the session resumes, read backwards from the
//! end of the file and stopped at the compaction that bounds it.

use super::input::FileArgs;
use super::output::human_bytes;
use super::{Exit, OutputFormat};
use crate::sources::batch::Input;
use crate::sources::reverse::{self, FileSource, PageSource, ReadStats};
use crate::transcript::canonical::{Canonical, Mode};
use crate::transcript::formats::claude_code::ClaudeFields;
use crate::transcript::context::agent;
use crate::transcript::context::resume::{Context, ContextScan, Cut, Skipped};
use crate::transcript::reverse::ReverseSplitter;
use crate::transcript::Format;
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
}

/// A finished backward scan of one source.
#[derive(Debug)]
pub struct Scanned {
    /// The context.
    pub context: Context,
    /// What reading it cost.
    pub stats: ReadStats,
    /// Physical lines of the source, when the read reached its start.
    pub total_lines: Option<u64>,
    /// Length of the source.
    pub len: u64,
}

impl Scanned {
    /// The line number of a skipped line, when the read reached the start of the file.
    pub fn line_of(&self, s: &Skipped) -> Option<u64> {
        match self.total_lines {
            Some(total) if s.from_end > 0 => Some(total + 1 - s.from_end),
            _ => None,
        }
    }

    /// Where a skipped line is when its number is not known (the read stopped before the start
    /// of the file): its byte offset, and how far from the end it is.
    pub fn locate(&self, s: &Skipped) -> String {
        if s.from_end > 0 {
            format!("at byte {}, line {} from the end", s.offset, s.from_end)
        } else {
            format!("at byte {}", s.offset)
        }
    }
}

/// Scans `source` backwards until the context is bounded (or the start is reached), with pages
/// from `first_page` bytes up.
pub fn scan(source: &mut impl PageSource, format: Option<Format>, max_line_bytes: usize, first_page: usize) -> std::io::Result<Scanned> {
    let len = source.len();
    let mut splitter = ReverseSplitter::new(len, max_line_bytes);
    let mut scan = ContextScan::new(format);
    let mut stats = reverse::read_backwards(source, &mut splitter, first_page, |item, page| scan.push(item, Some(page)))?;
    let head = if scan.needs_head() { reverse::read_head_line(source, max_line_bytes, &mut stats)? } else { None };
    let context = scan.finish(head.as_deref());
    Ok(Scanned { context, stats, total_lines: splitter.total_lines(), len })
}

/// Writes the context: canonical records, or the lines verbatim with `raw`.
pub fn write(context: &Context, raw: bool, out: &mut impl Write) -> anyhow::Result<()> {
    write_as(context, raw, false, out)
}

/// Writes the context: canonical records (as text for people with `text`), or the lines
/// verbatim with `raw`.
pub fn write_as(context: &Context, raw: bool, text: bool, out: &mut impl Write) -> anyhow::Result<()> {
    if raw {
        for l in &context.lines {
            out.write_all(&l.bytes)?;
            out.write_all(b"\n")?;
        }
        return Ok(());
    }
    let Some(format) = context.format else {
        // Nothing readable (an empty file, or only lines reported as unreadable): no records.
        let unreadable = |offset: u64| context.skipped.iter().any(|s| s.offset == offset);
        if context.lines.iter().all(|l| unreadable(l.offset)) {
            return Ok(());
        }
        anyhow::bail!("the format could not be detected from the lines read; give it with --format, or use --raw");
    };
    let mut c = Canonical::new(format, Mode::Context);
    // The records of the file, whole (a record comes in pieces and ends with its newline: JSON
    // has none inside), then what the agent does to them on resume.
    let mut records: Vec<Vec<u8>> = Vec::new();
    let mut record = Vec::new();
    let mut collect = |r: &[u8]| {
        record.extend_from_slice(r);
        if record.ends_with(b"\n") {
            records.push(std::mem::take(&mut record));
        }
    };
    let mut pending = Vec::new();
    if context.claude_fields.len() == context.lines.len() && format == Format::ClaudeCode {
        // The scan read each line once already: its fields say where the content is. A
        // local_command line is a user text: in place, or in the new turn after the last message.
        let last_message = context.claude_fields.iter().rposition(ClaudeFields::is_message);
        for (i, (l, f)) in context.lines.iter().zip(&context.claude_fields).enumerate() {
            match (f, agent::local_command(&l.bytes)) {
                (ClaudeFields::Other { sidechain }, Some(text)) if last_message.is_some_and(|m| i < m) => {
                    c.push(None, &agent::local_command_line(&text, *sidechain), &mut collect);
                }
                (ClaudeFields::Other { .. }, Some(text)) => pending.push(text),
                _ => c.push_claude(None, &l.bytes, f, &mut collect),
            }
        }
    } else {
        for l in &context.lines {
            c.push(None, &l.bytes, &mut collect);
        }
    }
    c.finish(&mut collect);
    let mut result = Ok(());
    for r in agent::rebuild(format, records, pending) {
        result = if text { super::render::canonical(out, &r, format) } else { out.write_all(&r) };
        if result.is_err() {
            break;
        }
    }
    result.context("writing output")
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
    write_as(&scanned.context, args.raw, text, &mut out).with_context(|| name.clone())?;
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
