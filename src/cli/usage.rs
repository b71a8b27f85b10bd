//! `transcriptd usage`: token usage and its cost by model, read from transcripts with the same
//! pipeline and counting as `check` and the daemon's `transcriptd_tokens_total`, so an archive
//! can be costed without running the daemon.

use super::args::{OutputArgs, ReadArgs};
use super::output::plural;
use super::safe::{self, Safe};
use super::{Exit, OutputFormat};
use crate::batch_check::check_all;
use crate::prices::{Cost, Pricer};
use crate::sources::batch;
use crate::transcript::model::Usage;
use crate::transcript::{Format, Options};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `transcriptd usage`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files, directories (searched recursively for *.jsonl) or `-` for stdin. Default: the
    /// standard locations, ~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions, ~/.qwen/projects, ~/.gemini/tmp and ~/.copilot/session-state.
    pub paths: Vec<PathBuf>,
    /// Totals per file and model instead of per model over every file.
    #[arg(long)]
    pub per_file: bool,
    /// Price tokens with this table (LiteLLM's `model_prices_and_context_window.json` shape)
    /// instead of the one built in.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// How transcripts are read.
    #[command(flatten)]
    pub read: ReadArgs,
    /// How results are written (-o json: one JSON object per line).
    #[command(flatten)]
    pub out: OutputArgs,
}

/// One line of `usage --output json`: the tokens of one model (in one file, with `--per-file`).
/// The names are the Anthropic API's `usage` fields.
#[derive(Debug, Serialize)]
pub struct UsageRecord<'a> {
    /// The transcript, with `--per-file`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<&'a str>,
    /// Its format, with `--per-file`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
    /// The model (`unknown` when the transcript does not name it).
    pub model: &'a str,
    /// Input tokens not read from or written to the prompt cache.
    pub input_tokens: u64,
    /// Output tokens (reasoning included).
    pub output_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_creation_input_tokens: u64,
    /// The part of them written with a one-hour lifetime (priced higher).
    pub cache_creation_1h_input_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_input_tokens: u64,
    /// The sum of the four.
    pub total_tokens: u64,
    /// The cost in US dollars; null when the price table has no price for the model.
    pub cost_usd: Option<f64>,
    /// The price table's name for the price used (null: none).
    pub priced_as: Option<String>,
}

impl<'a> UsageRecord<'a> {
    fn new(file: Option<&'a str>, format: Option<Format>, model: &'a str, u: &Usage, cost: Cost) -> Self {
        UsageRecord {
            file,
            format,
            model,
            input_tokens: u.input,
            output_tokens: u.output,
            cache_creation_input_tokens: u.cache_creation,
            cache_creation_1h_input_tokens: u.cache_creation_1h,
            cache_read_input_tokens: u.cache_read,
            total_tokens: u.total(),
            cost_usd: cost.usd,
            priced_as: cost.priced_as,
        }
    }
}

/// A cost as the text table shows it: dollars to the hundredth of a cent, `unknown` without a
/// price.
pub fn dollars(usd: Option<f64>) -> String {
    usd.map_or_else(|| "unknown".to_owned(), |c| format!("{c:.4}"))
}

/// One row: the file (with `--per-file`), its format, the model, its tokens and the part of
/// them from long-context requests.
type Row = (Option<String>, Option<Format>, String, Usage, Usage);

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let paths = if args.paths.is_empty() { super::default_roots() } else { args.paths.clone() };
    if paths.is_empty() {
        anyhow::bail!("no paths given, and none of ~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions, ~/.qwen/projects, ~/.gemini/tmp and ~/.copilot/session-state exists");
    }
    let found = batch::expand(&paths);
    let inputs = found.inputs;
    let jobs = args.read.jobs();
    let opts = Options { format: args.read.format, max_line_bytes: args.read.max_line_bytes, strict: false, jobs };
    // The table first: a bad --prices file fails before any transcript is read.
    let mut pricer = Pricer::new(crate::prices::load(args.prices.as_deref())?);
    let reports = check_all(&inputs, &opts, jobs);
    let mut failed = 0u64;
    let mut records: Vec<Row> = Vec::new();
    let mut totals: BTreeMap<String, (Usage, Usage)> = BTreeMap::new();
    for r in &reports {
        if let Some(e) = &r.error {
            failed += 1;
            super::style::error(e);
            continue;
        }
        for (model, u) in &r.stats.tokens {
            let long = r.stats.long_context.get(model).copied().unwrap_or_default();
            if args.per_file {
                records.push((Some(r.input.display().to_string()), r.format, model.clone(), *u, long));
            }
            let t = totals.entry(model.clone()).or_default();
            t.0.add(u);
            t.1.add(&long);
        }
    }
    if !args.per_file {
        records = totals.into_iter().map(|(m, (u, long))| (None, None, m, u, long)).collect();
    }
    let mut out = args.out.stdout();
    let unreadable = super::output::report_skipped(&mut out, &args.out, &found.skipped)?;
    super::output::warn_empty_dirs(&args.out, &found.empty_dirs);
    match args.out.format() {
        OutputFormat::Json => {
            for (file, format, model, u, long) in &records {
                let cost = pricer.cost(model, u, long);
                serde_json::to_writer(&mut out, &UsageRecord::new(file.as_deref(), *format, model, u, cost))?;
                out.write_all(b"\n")?;
            }
        }
        OutputFormat::Text => {
            // The model column fits the longest name (Bedrock's run long), so columns line up.
            // Names and file names come from transcripts: their controls escaped.
            let w = records.iter().map(|(_, _, m, _, _)| safe::line(m).chars().count()).max().unwrap_or(0).max(32);
            writeln!(out, "{:<w$} {:>14} {:>14} {:>16} {:>16} {:>16} {:>12}", "model", "input", "output", "cache write", "cache read", "total", "cost $")?;
            let mut sum = Usage::default();
            let mut sum_cost = 0.0;
            let mut unpriced: Vec<&str> = Vec::new();
            for (file, _, model, u, long) in &records {
                if let Some(f) = file {
                    writeln!(out, "{}", Safe(f))?;
                }
                let cost = pricer.cost(model, u, long);
                sum.add(u);
                match cost.usd {
                    Some(c) => sum_cost += c,
                    None if !unpriced.contains(&model.as_str()) => unpriced.push(model),
                    None => {}
                }
                let r = UsageRecord::new(None, None, model, u, cost);
                writeln!(
                    out,
                    "{:<w$} {:>14} {:>14} {:>16} {:>16} {:>16} {:>12}",
                    safe::line(model),
                    r.input_tokens,
                    r.output_tokens,
                    r.cache_creation_input_tokens,
                    r.cache_read_input_tokens,
                    r.total_tokens,
                    dollars(r.cost_usd)
                )?;
            }
            if records.len() > 1 {
                // The total of the costs known; the models without a price are named below.
                let total_cost = if unpriced.len() == records.len() { None } else { Some(sum_cost) };
                writeln!(
                    out,
                    "{:<w$} {:>14} {:>14} {:>16} {:>16} {:>16} {:>12}",
                    "total",
                    sum.input,
                    sum.output,
                    sum.cache_creation,
                    sum.cache_read,
                    sum.total(),
                    dollars(total_cost)
                )?;
            }
            if !unpriced.is_empty() {
                let names: Vec<String> = unpriced.iter().map(|m| safe::line(m).into_owned()).collect();
                let n = unpriced.len();
                let total = if records.len() > 1 { ", not in the total" } else { "" };
                writeln!(out, "cost unknown for {n} model{} without a price in the table{total}: {}", plural(n as u64), names.join(", "))?;
            }
        }
    }
    out.flush()?;
    if failed > 0 || unreadable > 0 {
        let n = failed + unreadable as u64;
        anyhow::bail!("{n} input{} could not be read", plural(n));
    }
    Ok(Exit::Clean)
}
