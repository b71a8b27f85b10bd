//! The full on-disk conversation of a transcript written out, every compaction in place: as
//! canonical records, as the lines were written, or for people. What `history` prints and
//! `show --history` shows.

use super::input::read_forward;
use crate::sources::batch::Input;
use crate::transcript::canonical::{Canonical, Mode};
use crate::transcript::checker::Outcome;
use crate::transcript::forward::Forward;
use crate::transcript::model::Entry;
use crate::transcript::{Finding, Format};
use anyhow::Context as _;
use std::io::Write;

/// What [`history`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Render {
    /// Canonical records, one JSON object per line (the default).
    Canonical,
    /// The conversation and compaction lines verbatim (`--raw`).
    Raw,
    /// Readable lines for people (`-o text`), as `show --history` prints them.
    Text,
}

/// Reads `input` and writes its history to `out`; returns the lines that could not be read.
/// An upsert log (Gemini CLI) shows each record once, where it first stood, as its last version
/// left it (the line of that version with it), as Gemini CLI's loader reads it: its lines are
/// held until the end (`--raw` prints every version as written).
pub fn history(input: &Input, format: Option<Format>, max_line_bytes: usize, render: Render, out: &mut impl Write) -> anyhow::Result<Vec<Finding>> {
    let mut forward = Forward::new(format, max_line_bytes);
    let mut w = Writer { render, canonical: None, out, written: Ok(()) };
    let mut faults = Vec::new();
    let mut held: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut held_format = None;
    let mut on_line = |o: Outcome<'_>, bytes: &[u8], format: Option<Format>| match o {
        Outcome::Fault(f) => faults.push(f),
        Outcome::Undetected(_) | Outcome::Dataset(..) => {}
        Outcome::Parsed(n, p) => {
            if render != Render::Raw && format.is_some_and(Format::upserts) {
                held.push((n, bytes.to_vec()));
                held_format = format;
                return;
            }
            w.line(n, &p.entry, bytes, format);
        }
    };
    read_forward(input, &mut forward, &mut on_line)?;
    if let Some(f) = held_format {
        let id = |b: &[u8]| crate::transcript::formats::gemini::record_id(b);
        let mut last: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for (i, (_, b)) in held.iter().enumerate() {
            if let Some(id) = id(b) {
                last.insert(id, i);
            }
        }
        let mut shown = std::collections::HashSet::new();
        for (n, b) in &held {
            let (n, b) = match id(b) {
                Some(id) if !shown.insert(id.clone()) => continue,
                Some(id) => held.get(last[&id]).map_or((*n, b.as_slice()), |(n, b)| (*n, b.as_slice())),
                None => (*n, b.as_slice()),
            };
            // The line was read once already: it parses.
            if let Ok(p) = f.parse(b) {
                w.line(n, &p.entry, b, Some(f));
            }
        }
    }
    if let Some(c) = w.canonical.take() {
        c.finish(&mut |r| emit(&mut w.out, r, &mut w.written));
    }
    w.written.context("writing output")?;
    Ok(faults)
}

/// Writes lines of a history as [`Render`] says, keeping the first write error.
struct Writer<'o, 'c, W: Write> {
    render: Render,
    canonical: Option<Canonical<'c>>,
    out: &'o mut W,
    written: std::io::Result<()>,
}

fn emit(out: &mut impl Write, r: &[u8], written: &mut std::io::Result<()>) {
    if written.is_ok() {
        *written = out.write_all(r);
    }
}

impl<W: Write> Writer<'_, '_, W> {
    fn line(&mut self, n: u64, entry: &Entry<'_>, bytes: &[u8], format: Option<Format>) {
        match self.render {
            Render::Text => {
                let mut text = Vec::new();
                let rendered = match (entry, format) {
                    (Entry::Message(m), Some(f)) => super::render::entry(&mut text, n, m.role, bytes, f),
                    (Entry::Compaction { .. }, _) => super::render::compaction(&mut text, n),
                    _ => Ok(()),
                };
                match rendered {
                    Ok(()) => emit(self.out, &text, &mut self.written),
                    Err(e) if self.written.is_ok() => self.written = Err(e),
                    Err(_) => {}
                }
            }
            Render::Raw => {
                if matches!(entry, Entry::Message(_) | Entry::Compaction { .. }) {
                    emit(self.out, bytes, &mut self.written);
                    emit(self.out, b"\n", &mut self.written);
                }
            }
            Render::Canonical => {
                let Some(format) = format else { return };
                let c = self.canonical.get_or_insert_with(|| Canonical::new(format, Mode::History));
                let (out, written) = (&mut *self.out, &mut self.written);
                c.push(Some(n), bytes, &mut |r| emit(out, r, written));
            }
        }
    }
}
