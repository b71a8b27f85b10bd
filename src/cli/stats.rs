//! `transcriptd stats`: statistics of datasets, as the OpenAI cookbook's data-preparation
//! notebook reports them (see [`crate::transcript::dataset::stats`]).
//!
//! Each file is read once in blocks of lines; the lines of a block are counted on every job in
//! parallel (token counting is the cost) and folded in line order, so memory stays flat but for
//! a few numbers per conversation.

use super::args::{OutputArgs, ReadArgs};
use super::output::plural;
use super::{Exit, OutputFormat};
use crate::sources::batch;
use crate::transcript::dataset::stats::{line_stats, Distribution, Encoding, LineStats, Report, Tokenizer, Totals, DEFAULT_MAX_TOKENS};
use crate::transcript::formats::dataset::detect_head;
use crate::transcript::lines::{self, Block, LineSplitter};
use crate::transcript::Format;
use anyhow::Context;
use rayon::prelude::*;
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `transcriptd stats`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Dataset files (or directories, searched for *.jsonl), or `-` for stdin.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Tokenizer: cl100k (the notebook's) or o200k.
    #[arg(long, default_value = "cl100k", value_parser = clap::value_parser!(Encoding), value_name = "ENCODING")]
    pub encoding: Encoding,
    /// Do not count tokens (counting is most of the time).
    #[arg(long)]
    pub no_tokens: bool,
    /// Token limit per conversation: longer ones are listed and billed only up to it.
    #[arg(long, default_value_t = DEFAULT_MAX_TOKENS, value_name = "N")]
    pub max_tokens: u64,
    /// Epochs to bill for (default: the notebook's default for the number of examples).
    #[arg(long, value_name = "N")]
    pub epochs: Option<u64>,
    /// Also print each conversation's line, messages and tokens.
    #[arg(long)]
    pub per_conversation: bool,
    /// How datasets are read (--jobs: the lines of a file are counted on every job).
    #[command(flatten)]
    pub read: ReadArgs,
    /// How results are written (-o json: one JSON object per file, and per conversation).
    #[command(flatten)]
    pub out: OutputArgs,
}

/// One conversation's figures (`--per-conversation`).
#[derive(Debug, Serialize)]
struct ConversationRecord<'a> {
    file: &'a str,
    line: u64,
    messages: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    assistant_tokens: Option<u64>,
}

/// A file's statistics as one JSON object.
#[derive(Debug, Serialize)]
struct FileRecord<'a> {
    file: &'a str,
    format: Format,
    #[serde(flatten)]
    report: &'a Report,
}

/// Lines counted per parallel batch.
const BATCH: usize = 4 << 20;

/// One file being counted.
struct Counting<'a> {
    args: &'a Args,
    name: String,
    pool: &'a rayon::ThreadPool,
    tokenizer: Option<&'a Tokenizer>,
    format: Option<Format>,
    head: Vec<u8>,
    splitter: LineSplitter,
    /// Complete lines not counted yet.
    pending: Vec<u8>,
    /// Over-long lines among them: the offset in `pending` of the newline standing for each,
    /// and its length.
    too_long: Vec<(usize, u64)>,
    next: u64,
    totals: Totals,
    error: Option<anyhow::Error>,
}

impl Counting<'_> {
    /// Takes the next chunk of the file. Returns whether to go on.
    fn chunk(&mut self, chunk: &[u8], out: &mut dyn Write) -> bool {
        if self.format.is_none() {
            self.head.extend_from_slice(chunk);
            self.format = detect_head(&self.head);
            if self.format.is_none() && self.head.len() < HEAD {
                return true;
            }
            if !self.decided() {
                return false;
            }
            let head = std::mem::take(&mut self.head);
            return self.split(&head, out);
        }
        self.split(chunk, out)
    }

    /// Whether the format is a dataset's (else the error says why not).
    fn decided(&mut self) -> bool {
        match self.format {
            Some(f) if f.dataset().is_some() => true,
            Some(f) => {
                self.error = Some(anyhow::anyhow!("{}: a {f} transcript, not a dataset: `stats` reads one conversation per line", self.name));
                false
            }
            None => {
                self.error = Some(anyhow::anyhow!("{}: not a dataset (no line of its head shows a format)", self.name));
                false
            }
        }
    }

    fn split(&mut self, chunk: &[u8], out: &mut dyn Write) -> bool {
        let (pending, too_long) = (&mut self.pending, &mut self.too_long);
        self.splitter.feed(chunk, &mut |b| match b {
            Block::Lines { bytes, .. } => pending.extend_from_slice(bytes),
            // An over-long line is skipped, reported as unreadable; it keeps its line number.
            Block::TooLong { len, .. } => {
                too_long.push((pending.len(), len));
                pending.push(b'\n');
            }
            Block::LongBytes(_) => {}
        });
        if self.pending.len() >= BATCH {
            return self.count(out);
        }
        true
    }

    /// Ends the file.
    fn finish(&mut self, out: &mut dyn Write) {
        if self.error.is_some() {
            return;
        }
        if self.format.is_none() {
            if !self.decided() {
                return;
            }
            let head = std::mem::take(&mut self.head);
            self.split(&head, out);
        }
        if let Some(torn) = self.splitter.finish().and_then(|t| t.bytes.map(<[u8]>::to_vec)) {
            self.pending.extend_from_slice(&torn);
            self.pending.push(b'\n');
        }
        self.count(out);
    }

    /// Counts the pending lines: in parallel, folded in order.
    fn count(&mut self, out: &mut dyn Write) -> bool {
        let Some(d) = self.format.and_then(Format::dataset) else { return false };
        let bytes = std::mem::take(&mut self.pending);
        let first = self.next;
        let mut it = lines::lines(self.next, 0, &bytes);
        let max = self.args.read.max_line_bytes;
        let too_long =
            |len: u64| LineStats { unreadable: Some(format!("line of {len} bytes is over the limit of {max} (--max-line-bytes)")), ..LineStats::default() };
        // A line over the limit is not read (as `check` reads none): the splitter dropped those
        // that crossed a chunk, the others are cut here.
        let ls: Vec<(u64, &[u8], Option<u64>)> = it
            .by_ref()
            .map(|l| {
                let over = l.bytes.len() > l.limit(max);
                (l.number, l.bytes, over.then(|| (l.bytes.len() + (max - l.limit(max))) as u64))
            })
            .collect();
        self.next = it.next_number();
        let tokenizer = self.tokenizer;
        let stats: Vec<LineStats> =
            self.pool.install(|| ls.par_iter().map(|(_, b, over)| over.map_or_else(|| line_stats(d, b, tokenizer), too_long)).collect());
        let mut stats: Vec<(u64, LineStats)> = ls.iter().map(|(n, ..)| *n).zip(stats).collect();
        // Lines the splitter dropped, numbered by the newlines before theirs.
        let (mut at, mut newlines) = (0, 0u64);
        for (off, len) in std::mem::take(&mut self.too_long) {
            newlines += memchr::memchr_iter(b'\n', &bytes[at..off]).count() as u64;
            at = off;
            stats.push((first + newlines, too_long(len)));
        }
        stats.sort_by_key(|(n, _)| *n);
        for (n, s) in stats {
            if let Some(why) = &s.unreadable {
                self.unreadable(n, why, out);
            }
            if self.args.per_conversation && s.conversation {
                if let Err(e) = self.conversation(n, &s, out) {
                    self.error = Some(e);
                    return false;
                }
            }
            self.totals.add(n, s);
        }
        true
    }

    /// Says on stderr, as `check` would, that a line could not be read and is not counted.
    fn unreadable(&self, line: u64, why: &str, out: &mut dyn Write) {
        if self.args.out.quiet {
            return;
        }
        // What is on stdout so far goes first, so that the two streams interleave in order.
        let _ = out.flush();
        let kind = if why.starts_with("line of ") { "line_too_long" } else { "malformed_line" };
        let message = super::style::stderr().at(&self.name, line, "error", kind, &format!("{why}: not counted"));
        eprintln!("{message}");
    }

    fn conversation(&self, line: u64, s: &LineStats, out: &mut dyn Write) -> anyhow::Result<()> {
        let rec = ConversationRecord { file: &self.name, line, messages: s.roles.len(), tokens: s.tokens, assistant_tokens: s.assistant_tokens };
        match self.args.out.format() {
            OutputFormat::Json => {
                serde_json::to_writer(&mut *out, &rec)?;
                out.write_all(b"\n")?;
            }
            OutputFormat::Text => {
                let tokens = rec.tokens.map(|t| format!(", {t} tokens")).unwrap_or_default();
                writeln!(out, "{}:{line}: {} messages{tokens}", super::safe::Safe(&self.name), rec.messages)?;
            }
        }
        Ok(())
    }
}

/// Bytes of a file's head looked at to detect its format.
const HEAD: usize = 4 << 20;

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let found = batch::expand(&args.paths);
    let inputs = found.inputs;
    let jobs = args.read.jobs();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs).build().context("starting worker threads")?;
    let tokenizer = (!args.no_tokens).then(|| Tokenizer::new(args.encoding));
    let mut out = args.out.stdout();
    let unreadable = super::output::report_skipped(&mut out, &args.out, &found.skipped)?;
    super::output::warn_empty_dirs(&args.out, &found.empty_dirs);
    let mut failed = 0u64;
    let mut unreadable_lines = 0u64;
    for input in &inputs {
        let mut c = Counting {
            args: &args,
            name: input.display(),
            pool: &pool,
            tokenizer: tokenizer.as_ref(),
            format: args.read.format,
            head: Vec::new(),
            splitter: LineSplitter::new(args.read.max_line_bytes),
            pending: Vec::new(),
            too_long: Vec::new(),
            next: 1,
            totals: Totals::new(args.max_tokens),
            error: None,
        };
        if c.format.is_some() && !c.decided() {
            failed += 1;
            super::style::error(crate::error::chain(&c.error.take().expect("an error")));
            continue;
        }
        let mut buf = Vec::new();
        let read = batch::read_chunks(input, &mut buf, |chunk| c.chunk(chunk, &mut out));
        if let Err(e) = read {
            c.error.get_or_insert(anyhow::Error::new(e).context(format!("reading {}", c.name)));
        }
        c.finish(&mut out);
        if let Some(e) = c.error.take() {
            failed += 1;
            out.flush()?;
            super::style::error(crate::error::chain(&e));
            continue;
        }
        let format = c.format.expect("decided");
        let report = c.totals.report(tokenizer.as_ref().map(|t| t.encoding), args.epochs);
        unreadable_lines += report.unreadable_lines;
        match args.out.format() {
            OutputFormat::Json => {
                serde_json::to_writer(&mut out, &FileRecord { file: &c.name, format, report: &report })?;
                out.write_all(b"\n")?;
            }
            OutputFormat::Text => write_text(&mut out, &c.name, format, &report)?,
        }
    }
    out.flush()?;
    if failed > 0 || unreadable > 0 {
        let n = failed + unreadable as u64;
        anyhow::bail!("{n} input{} could not be read as a dataset", plural(n));
    }
    if unreadable_lines > 0 {
        // As `check` exits 1 for a malformed line: the figures leave those lines out.
        if args.out.summary() {
            let n = unreadable_lines;
            eprintln!(
                "stats: {n} line{} could not be read and {} not counted (see above; `transcriptd check` says more)",
                plural(n),
                if n == 1 { "is" } else { "are" }
            );
        }
        return Ok(Exit::Findings);
    }
    Ok(Exit::Clean)
}

fn dist(d: &Option<Distribution>) -> String {
    d.as_ref()
        .map_or("-".to_owned(), |d| format!("min {} / max {}, mean {:.1} / median {:.1}, p5 {:.1} / p95 {:.1}", d.min, d.max, d.mean, d.median, d.p5, d.p95))
}

fn counts(m: &std::collections::BTreeMap<String, u64>) -> String {
    let mut v: Vec<(&String, &u64)> = m.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    v.iter().map(|(k, n)| format!("{} {n}", super::safe::Safe(k))).collect::<Vec<_>>().join(", ")
}

fn write_text(out: &mut impl Write, name: &str, format: Format, r: &Report) -> anyhow::Result<()> {
    // Rows of label, number and what follows: labels padded and numbers right-aligned to the
    // widest of this report (a distribution's row has no number: it starts where numbers do).
    let mut rows: Vec<(String, String, String)> = Vec::new();
    let mut row = |label: &str, number: String, rest: String| rows.push((label.to_owned(), number, rest));
    row("conversations", r.conversations.to_string(), format!(" in {} line{}", r.lines, plural(r.lines)));
    row("messages", r.messages.to_string(), if r.messages > 0 { format!(": {}", counts(&r.messages_per_role)) } else { String::new() });
    row("tool calls", r.tool_calls.to_string(), if r.tool_calls > 0 { format!(": {}", counts(&r.tool_calls_per_tool)) } else { String::new() });
    row("missing system", r.missing_system.to_string(), String::new());
    row("missing user", r.missing_user.to_string(), String::new());
    row(
        "unreadable lines",
        r.unreadable_lines.to_string(),
        if r.unreadable_lines > 0 { " (not counted; see the messages on stderr)".to_owned() } else { String::new() },
    );
    row("messages per conv.", String::new(), dist(&r.messages_per_conversation));
    if let Some(t) = &r.tokens {
        let enc = serde_json::to_value(t.encoding)?.as_str().unwrap_or("").to_owned();
        row(&format!("tokens ({enc})"), t.total.to_string(), " in all".to_owned());
        row("tokens per conv.", String::new(), dist(&t.per_conversation));
        row("assistant tokens", String::new(), dist(&t.assistant_per_conversation));
        let lines = t.over_limit_lines.iter().take(10).map(u64::to_string).collect::<Vec<_>>().join(", ");
        let more = if t.over_limit_lines.len() > 10 { ", ..." } else { "" };
        row(
            &format!("over {} tokens", t.max_tokens),
            t.over_limit.to_string(),
            if t.over_limit > 0 { format!(" (lines {lines}{more}): truncated in training") } else { String::new() },
        );
        row("billed", format!("~{}", t.billed_per_epoch), format!(" tokens per epoch x {} epochs = ~{} tokens", t.epochs, t.billed));
    }
    writeln!(out, "{} ({format})", super::safe::Safe(name))?;
    let label = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let number = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0);
    for (l, n, rest) in rows {
        if n.is_empty() {
            writeln!(out, "  {l:<label$}  {}", rest.trim_start())?;
        } else {
            writeln!(out, "  {l:<label$}  {n:>number$}{rest}")?;
        }
    }
    Ok(())
}
