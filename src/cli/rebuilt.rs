//! The request the agent rebuilds from a transcript on resume, read backwards from the end of
//! the file: what `context` prints and `explain` counts positions in.

use crate::sources::reverse::{self, PageSource, ReadStats};
use crate::transcript::canonical::{Canonical, Mode};
use crate::transcript::context::agent;
use crate::transcript::context::resume::{Context, ContextScan, Skipped};
use crate::transcript::formats::claude_code::ClaudeFields;
use crate::transcript::reverse::ReverseSplitter;
use crate::transcript::Format;
use anyhow::Context as _;
use std::io::Write;

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
    write_as(context, raw, false, &agent::Settings::default(), out)
}

/// Writes the context: canonical records (as text for people with `text`), or the lines
/// verbatim with `raw`; `settings`: what the agent's resume depends on that the file does not say.
pub fn write_as(context: &Context, raw: bool, text: bool, settings: &agent::Settings, out: &mut impl Write) -> anyhow::Result<()> {
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
    let mut tail = agent::ClaudeTail::default();
    let pending = &mut tail.pending;
    if context.claude_fields.len() == context.lines.len() && format == Format::ClaudeCode {
        // Read back from the last line only as far as the rule needs.
        tail.local_command = agent::ends_with_local_command(context.lines.iter().rev().filter_map(|l| serde_json::from_slice(&l.bytes).ok()));
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
    for r in agent::rebuild(format, records, tail, settings) {
        result = if text { super::render::canonical(out, &r, format) } else { out.write_all(&r) };
        if result.is_err() {
            break;
        }
    }
    result.context("writing output")
}
