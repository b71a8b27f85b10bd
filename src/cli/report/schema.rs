//! The report's public JSON schema: the [`Report`] that `--output json` prints and the HTML
//! page is made from, and its rows. Plain data: [`super::model::Acc`] builds it.

use crate::transcript::Kind;
use serde::Serialize;
use std::collections::BTreeMap;

/// Token counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    /// Input tokens not read from the cache.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the prompt cache.
    pub cache_creation: u64,
}

impl Tokens {
    // Counts come from transcripts (`1e85` reads as `u64::MAX`): sums saturate, never wrap.
    pub(super) fn add(&mut self, o: &Tokens) {
        self.input = self.input.saturating_add(o.input);
        self.output = self.output.saturating_add(o.output);
        self.cache_read = self.cache_read.saturating_add(o.cache_read);
        self.cache_creation = self.cache_creation.saturating_add(o.cache_creation);
    }

    /// All four counts (saturating).
    pub fn total(&self) -> u64 {
        self.input.saturating_add(self.output).saturating_add(self.cache_read).saturating_add(self.cache_creation)
    }
}

/// What a report says about one session or transcript in its top lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionRow {
    /// The transcript.
    pub file: String,
    /// Its format.
    pub format: String,
    /// The session's date (`YYYY-MM-DD`), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// Lines read.
    pub lines: u64,
    /// Error findings.
    pub errors: u64,
    /// Warning findings.
    pub warnings: u64,
    /// Calls left without results (`orphan_call` and `unanswered_call` findings).
    pub calls_without_results: u64,
    /// Compactions.
    pub compactions: u64,
    /// The command that opens it: `transcriptd show ID --root DIR` for its session, or
    /// `transcriptd history FILE` when `show` cannot name it (absent for stdin).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open: Option<String>,
}

/// What `repair` would do to one file (`--plan`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanRow {
    /// The transcript.
    pub file: String,
    /// `repaired`, `partial` (some findings left) or `failed`.
    pub status: String,
    /// Edits planned.
    pub edits: u64,
    /// Lines inserted.
    pub inserted: u64,
    /// Lines removed.
    pub removed: u64,
    /// Lines modified.
    pub modified: u64,
    /// Findings left unrepaired.
    pub unrepairable: u64,
    /// Why it failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The report: what the page shows and `--output json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The version of transcriptd that made it.
    pub transcriptd: &'static str,
    /// When it was made (RFC 3339, UTC).
    pub generated: String,
    /// The paths given.
    pub paths: Vec<String>,
    /// Totals.
    pub totals: Totals,
    /// Per format.
    pub formats: Vec<FormatRow>,
    /// Findings by severity.
    pub severity: SeverityCounts,
    /// Findings by kind (most first), each by severity and by format.
    pub kinds: Vec<KindRow>,
    /// Findings and sessions by session date.
    pub over_time: OverTime,
    /// The worst sessions.
    pub worst: Worst,
    /// Compactions per session.
    pub compactions: Compactions,
    /// Tool calls left without results, by tool and side effect.
    pub calls_without_results: CallsWithoutResults,
    /// Token usage by model, and by model over time.
    pub tokens: TokenUsage,
    /// What `repair` would do (`--plan`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanSummary>,
    /// Files that could not be checked (the first [`TOP`](super::model::TOP) by path).
    pub could_not_be_checked: Vec<Problem>,
    /// Meta sidecars whose transcript is missing (the first [`TOP`](super::model::TOP) by path).
    pub missing_transcripts: Vec<Problem>,
    /// Paths the walk skipped (the first [`TOP`](super::model::TOP) by path).
    pub skipped: Vec<SkippedRow>,
}

/// Totals.
#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    /// Transcript files checked.
    pub files: u64,
    /// Of which sessions (not subagents' transcripts).
    pub sessions: u64,
    /// Of which subagents' transcripts.
    pub subagent_transcripts: u64,
    /// Lines read.
    pub lines: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Conversation messages.
    pub messages: u64,
    /// Tool calls.
    pub tool_calls: u64,
    /// Tool results.
    pub tool_results: u64,
    /// Compactions.
    pub compactions: u64,
    /// Findings.
    pub findings: u64,
    /// Error findings.
    pub errors: u64,
    /// Warning findings.
    pub warnings: u64,
    /// Files with at least one error.
    pub files_with_errors: u64,
    /// Files that could not be checked (IO errors).
    pub could_not_be_checked: u64,
    /// Meta sidecars whose transcript is missing.
    pub missing_transcripts: u64,
    /// Paths the walk skipped.
    pub skipped_paths: u64,
}

/// One format.
#[derive(Debug, Clone, Serialize)]
pub struct FormatRow {
    /// Its name (`undetected` when not known).
    pub format: &'static str,
    /// Files.
    pub files: u64,
    /// Lines.
    pub lines: u64,
    /// Bytes.
    pub bytes: u64,
    /// Error findings.
    pub errors: u64,
    /// Warning findings.
    pub warnings: u64,
}

/// Findings by severity.
#[derive(Debug, Clone, Serialize)]
pub struct SeverityCounts {
    /// Errors.
    pub error: u64,
    /// Warnings.
    pub warning: u64,
}

/// One finding kind.
#[derive(Debug, Clone, Serialize)]
pub struct KindRow {
    /// The kind.
    pub kind: Kind,
    /// All of its findings.
    pub total: u64,
    /// Of severity error.
    pub error: u64,
    /// Of severity warning.
    pub warning: u64,
    /// By format.
    pub by_format: BTreeMap<&'static str, u64>,
}

/// How long one period of the time charts is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    /// A day (archives spanning up to 92 days).
    Day,
    /// A month (up to 8 years).
    Month,
    /// A year.
    Year,
}

/// Where session dates came from.
#[derive(Debug, Clone, Serialize)]
pub struct DatedCounts {
    /// Files dated by their first timestamp.
    pub transcript: u64,
    /// Files dated by their name.
    pub name: u64,
    /// Files without a date.
    pub undated: u64,
}

/// Counts of one period.
#[derive(Debug, Clone, Serialize)]
pub struct Period {
    /// `YYYY-MM-DD`, `YYYY-MM` or `YYYY` (`before …` for older periods summed).
    pub period: String,
    /// Sessions that started in it.
    pub sessions: u64,
    /// Transcript files (sessions and subagents) that started in it.
    pub files: u64,
    /// Error findings in them.
    pub errors: u64,
    /// Warning findings in them.
    pub warnings: u64,
}

/// Findings over time.
#[derive(Debug, Clone, Serialize)]
pub struct OverTime {
    /// Where the dates came from.
    pub dated_by: DatedCounts,
    /// The length of a period.
    pub granularity: Granularity,
    /// Every period from the first session to the last.
    pub periods: Vec<Period>,
    /// The sessions without a date (and missing transcripts).
    pub undated: Period,
}

/// The worst sessions.
#[derive(Debug, Clone, Serialize)]
pub struct Worst {
    /// Most error findings.
    pub by_errors: Vec<SessionRow>,
    /// Most calls left without results.
    pub by_calls_without_results: Vec<SessionRow>,
}

/// One bucket of a histogram.
#[derive(Debug, Clone, Serialize)]
pub struct Bucket {
    /// Its label.
    pub bucket: &'static str,
    /// Files in it.
    pub files: u64,
}

/// Compactions per session.
#[derive(Debug, Clone, Serialize)]
pub struct Compactions {
    /// All of them.
    pub total: u64,
    /// Files with at least one.
    pub sessions_with_compactions: u64,
    /// Files by number of compactions.
    pub histogram: Vec<Bucket>,
    /// The files with the most.
    pub top: Vec<SessionRow>,
}

/// Calls left without results by side effect.
#[derive(Debug, Clone, Serialize)]
pub struct EffectRow {
    /// `external`, `write`, `unknown`, `read` or `none` (the tool registry).
    pub side_effect: &'static str,
    /// `orphan_call` findings.
    pub orphan_call: u64,
    /// `unanswered_call` findings.
    pub unanswered_call: u64,
}

/// Calls left without results by tool.
#[derive(Debug, Clone, Serialize)]
pub struct ToolRow {
    /// The tool.
    pub tool: String,
    /// What it does, from the tool registry.
    pub side_effect: &'static str,
    /// `orphan_call` findings.
    pub orphan_call: u64,
    /// `unanswered_call` findings.
    pub unanswered_call: u64,
}

/// The tools not listed by name.
#[derive(Debug, Clone, Serialize)]
pub struct OtherTools {
    /// How many.
    pub tools: u64,
    /// Their `orphan_call` findings.
    pub orphan_call: u64,
    /// Their `unanswered_call` findings.
    pub unanswered_call: u64,
}

/// Tool calls left without results.
#[derive(Debug, Clone, Serialize)]
pub struct CallsWithoutResults {
    /// All of them.
    pub total: u64,
    /// Distinct tools.
    pub tools: u64,
    /// By side effect.
    pub by_side_effect: Vec<EffectRow>,
    /// The [`TOP_TOOLS`](super::model::TOP_TOOLS) tools with the most.
    pub by_tool: Vec<ToolRow>,
    /// The other tools.
    pub other_tools: OtherTools,
}

/// A model's tokens.
#[derive(Debug, Clone, Serialize)]
pub struct ModelTokens {
    /// The model.
    pub model: String,
    /// All four counts.
    pub total: u64,
    /// The counts.
    #[serde(flatten)]
    pub tokens: Tokens,
    /// Their cost in US dollars; null when the price table has no price for the model (and
    /// for `(other)`, many models summed).
    pub cost_usd: Option<f64>,
    /// The price table's entry used.
    pub priced_as: Option<String>,
}

/// A model's tokens in one period.
#[derive(Debug, Clone, Serialize)]
pub struct PeriodTokens {
    /// The period.
    pub period: String,
    /// The model (or `(other)`: the models past the chart's [`CHART_MODELS`](super::model::CHART_MODELS)).
    pub model: String,
    /// All four counts.
    pub total: u64,
    /// The counts.
    #[serde(flatten)]
    pub tokens: Tokens,
}

/// Token usage.
#[derive(Debug, Clone, Serialize)]
pub struct TokenUsage {
    /// All models.
    pub total: Tokens,
    /// The cost of the models priced, in US dollars (null: none is).
    pub cost_usd: Option<f64>,
    /// The models whose cost is unknown (no price), not in `cost_usd`.
    pub unpriced_models: Vec<String>,
    /// By model, most first.
    pub by_model: Vec<ModelTokens>,
    /// The models the time chart shows.
    pub chart_models: Vec<String>,
    /// By period and model.
    pub over_time: Vec<PeriodTokens>,
    /// Used by undated sessions.
    pub undated: Tokens,
}

/// A finding kind and a count.
#[derive(Debug, Clone, Serialize)]
pub struct KindCount {
    /// The kind.
    pub kind: Kind,
    /// How many.
    pub count: u64,
}

/// What `repair` would do (`--plan`).
#[derive(Debug, Clone, Serialize)]
pub struct PlanSummary {
    /// The orphan policy (`answer`, `drop`, `keep`).
    pub orphans: &'static str,
    /// Files with findings, planned.
    pub files: u64,
    /// Files with nothing to repair.
    pub clean: u64,
    /// Files repaired completely.
    pub repaired: u64,
    /// Files repaired with findings left.
    pub partial: u64,
    /// Files the repair failed on.
    pub failed: u64,
    /// Edits.
    pub edits: u64,
    /// Lines inserted.
    pub inserted: u64,
    /// Lines removed.
    pub removed: u64,
    /// Lines modified.
    pub modified: u64,
    /// Findings left unrepaired, by kind.
    pub unrepairable: Vec<KindCount>,
    /// The files most changed.
    pub files_most_changed: Vec<PlanRow>,
}

/// A file and what went wrong.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// The file.
    pub file: String,
    /// What went wrong.
    pub message: String,
}

/// A path the walk skipped.
#[derive(Debug, Clone, Serialize)]
pub struct SkippedRow {
    /// The path.
    pub file: String,
    /// Why (`dangling_symlink`, `symlink_loop`, `not_regular`, `unreadable`).
    pub skipped: &'static str,
    /// `error` or `warning`.
    pub severity: &'static str,
    /// What went wrong.
    pub message: String,
}
