//! `transcriptd history`: the full on-disk conversation for people and exports (seed 004
//! `load_full_history`), every compaction surfaced in place as a marker. Unlike `context`, it
//! reads the whole file forward; never feed its output to a model as the resume seed.

use super::input::{read_forward, FileArgs};
use super::Exit;
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

/// Reads `input` and writes its history to `out`; returns the lines that could not be read.
pub fn history(input: &Input, format: Option<Format>, max_line_bytes: usize, raw: bool, out: &mut impl Write) -> anyhow::Result<Vec<Finding>> {
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
            if raw {
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
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(256 << 10, stdout.lock());
    let faults = history(&input, args.input.format, args.input.max_line_bytes, args.raw, &mut out)?;
    out.flush()?;
    let name = input.display();
    for f in &faults {
        eprintln!("{name}:{}: {}: {}: {}", f.line, f.severity.as_str(), f.kind, f.message);
    }
    Ok(if faults.is_empty() { Exit::Clean } else { Exit::Findings })
}
