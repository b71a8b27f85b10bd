//! `transcriptd context`: what the model sees when the session resumes, read backwards from the
//! end of the file and stopped at the compaction that bounds it.

use super::input::FileArgs;
use super::output::human_bytes;
use super::Exit;
use crate::sources::batch::Input;
use crate::sources::reverse::{self, FileSource, PageSource, ReadStats};
use crate::transcript::canonical::{Canonical, Mode};
use crate::transcript::reverse::ReverseSplitter;
use crate::transcript::stages::context::{Context, ContextScan, Cut, Skipped};
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
    /// No summary on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
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
    /// Where a skipped line is, for people: its line number when known, else its offset.
    pub fn locate(&self, s: &Skipped) -> String {
        match self.total_lines {
            Some(total) if s.from_end > 0 => format!("line {}", total + 1 - s.from_end),
            _ if s.from_end > 0 => format!("byte {} (line {} from the end)", s.offset, s.from_end),
            _ => format!("byte {}", s.offset),
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
    let mut result = Ok(());
    let mut emit = |r: &[u8]| {
        if result.is_ok() {
            result = out.write_all(r);
        }
    };
    if context.claude_fields.len() == context.lines.len() && format == Format::ClaudeCode {
        // The scan read each line once already: its fields say where the content is.
        for (l, f) in context.lines.iter().zip(&context.claude_fields) {
            c.push_claude(None, &l.bytes, f, &mut emit);
        }
    } else {
        for l in &context.lines {
            c.push(None, &l.bytes, &mut emit);
        }
    }
    c.finish(&mut emit);
    result.context("writing output")
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let FileArgs { file, format, max_line_bytes } = &args.input;
    let name = args.input.input().display();
    let scanned = if args.input.input() == Input::Stdin {
        let mut buf = Vec::new();
        std::io::stdin().lock().read_to_end(&mut buf).context("reading stdin")?;
        scan(&mut &buf[..], *format, *max_line_bytes, reverse::FIRST_PAGE)
    } else {
        let f = crate::sources::regular::open_file(file).with_context(|| format!("{name}: cannot open"))?;
        scan(&mut FileSource::new(f)?, *format, *max_line_bytes, reverse::FIRST_PAGE)
    }
    .with_context(|| format!("{name}: read failed"))?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(256 << 10, stdout.lock());
    write(&scanned.context, args.raw, &mut out)?;
    out.flush()?;
    let mut skipped: Vec<&Skipped> = scanned.context.skipped.iter().collect();
    skipped.sort_by_key(|s| s.offset);
    for s in &skipped {
        eprintln!("{name}: {}: {}: {}", scanned.locate(s), s.kind, s.message);
    }
    if scanned.context.head_missing {
        eprintln!("{name}: warning: the rollout's first line is not a session_meta; the context starts without it");
    }
    if !args.quiet {
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
    Ok(if skipped.is_empty() && !scanned.context.head_missing { Exit::Clean } else { Exit::Findings })
}
