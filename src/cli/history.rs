//! `transcriptd history`: the full on-disk conversation for people and exports (`SessionReader::load_full_history`,
//! docs/requirements.md), every compaction surfaced in place as a marker. Unlike `context`, it
//! reads the whole file forward; never feed its output to a model as the resume seed.

use super::input::{read_forward, FileArgs};
use super::{Exit, OutputFormat};
use crate::sources::batch::Input;
use crate::transcript::canonical::{Canonical, Mode};
use crate::transcript::checker::Outcome;
use crate::transcript::forward::Forward;
use crate::transcript::model::Entry;
use crate::transcript::{Finding, Format};
use anyhow::Context as _;
use std::io::Write;

/// Arguments of `transcriptd history`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The transcript.
    #[command(flatten)]
    pub input: FileArgs,
    /// Print the conversation and compaction lines verbatim instead of canonical records.
    #[arg(long)]
    pub raw: bool,
}

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

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let input = args.input.input();
    let FileArgs { read, out: out_args, .. } = &args.input;
    let render = match (args.raw, out_args.format_or(OutputFormat::Json)) {
        (true, OutputFormat::Text) => anyhow::bail!("--raw prints the lines as written: -o text does not apply"),
        (true, _) => Render::Raw,
        (false, OutputFormat::Json) => Render::Canonical,
        (false, OutputFormat::Text) => Render::Text,
    };
    let mut out = out_args.stdout();
    let faults = history(&input, read.format, read.max_line_bytes, render, &mut out)?;
    out.flush()?;
    if !out_args.quiet {
        let (name, paint) = (input.display(), super::style::stderr());
        for f in &faults {
            eprintln!("{}", paint.at(&name, f.line, f.severity.as_str(), f.kind.as_str(), &f.says()));
        }
    }
    Ok(if faults.is_empty() { Exit::Clean } else { Exit::Findings })
}
