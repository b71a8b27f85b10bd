//! The arguments every verb shares, defined once and flattened into each verb's own (so that a
//! flag means the same everywhere, and `--help` and the man page say so):
//!
//! - [`OutputArgs`], every verb: `-o/--output`, `-q/--quiet`, `--no-summary`.
//! - [`ReadArgs`], every verb that reads transcripts: `--format`, `--max-line-bytes`, `-j/--jobs`.
//! - [`FilterArgs`], every verb that reports findings: `--severity`, `--errors`, `--kind`.
//! - On the top level, and so on every verb: `--color` and `--log-format`.

use super::OutputFormat;
use crate::transcript::{FindingFilter, Format, Kind, Severity};
use std::io::Write;

/// How results are written.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Output")]
pub struct OutputArgs {
    /// Results as readable text, or as JSON (one object per line). Default: text (JSON for
    /// context and history, whose records are JSON).
    #[arg(long, short = 'o', value_enum, value_name = "FORMAT")]
    pub output: Option<OutputFormat>,
    /// Print nothing, neither results nor summary: answer by the exit status alone (as grep -q
    /// and rg -q do). Errors that make the verb exit 2 are still printed on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// No summary on stderr (the results are still printed).
    #[arg(long)]
    pub no_summary: bool,
}

impl OutputArgs {
    /// The output format, `default` when none was given.
    pub fn format_or(&self, default: OutputFormat) -> OutputFormat {
        self.output.unwrap_or(default)
    }

    /// The output format of verbs whose default is text.
    pub fn format(&self) -> OutputFormat {
        self.format_or(OutputFormat::Text)
    }

    /// Whether the summary (and other notes for people) goes to stderr.
    pub fn summary(&self) -> bool {
        !self.quiet && !self.no_summary
    }

    /// Standard output, buffered; a sink with `--quiet`.
    pub fn stdout(&self) -> Box<dyn Write> {
        if self.quiet {
            Box::new(std::io::sink())
        } else {
            Box::new(std::io::BufWriter::with_capacity(64 << 10, std::io::stdout()))
        }
    }

    /// How to paint what goes to standard output.
    pub fn paint(&self) -> super::style::Paint {
        super::style::stdout()
    }
}

/// How transcripts are read.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Reading")]
pub struct ReadArgs {
    /// The format: claude-code, codex, pi, qwen, gemini, copilot, openai-chat, anthropic, or a dataset's (openai-dataset,
    /// openai-batch, anthropic-batch, sharegpt, gemini-tuning). Detected per file from its first
    /// lines when not given.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<Format>,
    /// Lines longer than this are line_too_long findings, skipped unread (with units: 64MiB,
    /// 1M, 500k).
    #[arg(long, default_value = "64MiB", value_parser = crate::config::parse_size, value_name = "BYTES")]
    pub max_line_bytes: usize,
    /// Worker threads (default: every core). Verbs that read one file in order (context,
    /// history) use one.
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
}

impl Default for ReadArgs {
    fn default() -> Self {
        ReadArgs { format: None, max_line_bytes: crate::transcript::lines::DEFAULT_MAX_LINE_BYTES, jobs: None }
    }
}

impl ReadArgs {
    /// The number of worker threads.
    pub fn jobs(&self) -> usize {
        super::jobs(self.jobs)
    }
}

/// The arguments of the verbs that report findings (`check`, `orphans`, `report`): how
/// transcripts are read, which findings, and how results are written.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FindingArgs {
    /// How transcripts are read.
    #[command(flatten)]
    pub read: ReadArgs,
    /// Which findings are reported (orphans: an orphan is an error, a paused or in-flight call
    /// a warning, all of kind orphan_call).
    #[command(flatten)]
    pub filter: FilterArgs,
    /// How results are written.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// `--severity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SeverityArg {
    /// Errors only.
    Error,
    /// Warnings only.
    Warning,
}

/// Which findings are reported.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Filter")]
pub struct FilterArgs {
    /// Only findings of this severity (the exit status then answers for them alone).
    #[arg(long, value_enum, value_name = "SEVERITY")]
    pub severity: Option<SeverityArg>,
    /// Only errors: the same as --severity error.
    #[arg(long, conflicts_with = "severity")]
    pub errors: bool,
    /// Only findings of this kind (repeatable; a name of the kinds table in docs/findings.md, such as
    /// orphan_call).
    #[arg(long = "kind", value_name = "KIND", value_parser = parse_kind)]
    pub kinds: Vec<Kind>,
}

fn parse_kind(s: &str) -> Result<Kind, String> {
    s.parse()
}

impl FilterArgs {
    /// The filter the flags describe.
    pub fn filter(&self) -> FindingFilter {
        let severity = match (self.errors, self.severity) {
            (true, _) | (false, Some(SeverityArg::Error)) => Some(Severity::Error),
            (false, Some(SeverityArg::Warning)) => Some(Severity::Warning),
            (false, None) => None,
        };
        FindingFilter { severity, kinds: self.kinds.clone() }
    }
}
