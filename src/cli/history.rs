//! `transcriptd history`: the full on-disk conversation for people and exports (`SessionReader::load_full_history`,
//! docs/requirements.md), every compaction surfaced in place as a marker. Unlike `context`, it
//! reads the whole file forward; never feed its output to a model as the resume seed.

use super::conversation::{history, Render};
use super::input::FileArgs;
use super::{Exit, OutputFormat};
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
