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
pub fn history(input: &Input, format: Option<Format>, max_line_bytes: usize, render: Render, out: &mut impl Write) -> anyhow::Result<Vec<Finding>> {
    let mut forward = Forward::new(format, max_line_bytes);
    let mut canonical: Option<Canonical> = None;
    let mut faults = Vec::new();
    let mut written = Ok(());
    let mut emit = |r: &[u8], written: &mut std::io::Result<()>| {
        if written.is_ok() {
            *written = out.write_all(r);
        }
    };
    let mut on_line = |o: Outcome<'_>, bytes: &[u8], format: Option<Format>| match o {
        Outcome::Fault(f) => faults.push(f),
        Outcome::Undetected(_) | Outcome::Dataset(..) => {}
        Outcome::Parsed(n, p) => {
            if render == Render::Text {
                let mut text = Vec::new();
                let rendered = match (&p.entry, format) {
                    (Entry::Message(m), Some(f)) => super::render::entry(&mut text, n, m.role, bytes, f),
                    (Entry::Compaction { .. }, _) => super::render::compaction(&mut text, n),
                    _ => Ok(()),
                };
                match rendered {
                    Ok(()) => emit(&text, &mut written),
                    Err(e) if written.is_ok() => written = Err(e),
                    Err(_) => {}
                }
                return;
            }
            if render == Render::Raw {
                if matches!(p.entry, Entry::Message(_) | Entry::Compaction { .. }) {
                    emit(bytes, &mut written);
                    emit(b"\n", &mut written);
                }
                return;
            }
            let Some(format) = format else { return };
            let c = canonical.get_or_insert_with(|| Canonical::new(format, Mode::History));
            c.push(Some(n), bytes, &mut |r| emit(r, &mut written));
        }
    };
    read_forward(input, &mut forward, &mut on_line)?;
    if let Some(c) = canonical {
        c.finish(&mut |r| emit(r, &mut written));
    }
    written.context("writing output")?;
    Ok(faults)
}
