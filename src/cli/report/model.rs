//! The report's fold: [`Acc`] folds what checking each file gave (the same [`FileReport`]s as
//! `check`) into aggregates, and [`Acc::finish`] turns them into the [`Report`] (its schema in
//! [`super::schema`]) that both the HTML page and `--output json` are made from, so the two
//! cannot disagree.
//!
//! *Invariant:* memory does not grow with the number of files, only with what the aggregates
//! are keyed by: kinds × formats, days, tool names and models (each capped at [`MAX_KEYS`]
//! distinct names, the rest counted under [`OTHER`]), and top-[`TOP`] lists. Folding is
//! associative and every list is ordered by a total key (its number, then the path), so the
//! result does not depend on how the files were split between threads.

use super::schema::{
    Bucket, CallsWithoutResults, Compactions, DatedCounts, EffectRow, FormatRow, Granularity, KindCount, KindRow, ModelTokens, OtherTools, OverTime, Period,
    PeriodTokens, PlanRow, PlanSummary, Problem, Report, SessionRow, SeverityCounts, SkippedRow, TokenUsage, Tokens, ToolRow, Totals, Worst,
};
use super::session::{day_string, DatedBy, SessionDate};
use crate::batch_check::FileReport;
use crate::config::tools::ToolRegistry;
use crate::prices::{Cost, Pricer};
use crate::repair::{Report as RepairReport, Status as RepairStatus};
use crate::sources::batch::Skipped;
use crate::transcript::model::Usage;
use crate::transcript::{Format, Kind, Severity};
use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

/// Rows kept in each "worst sessions" list and in the other top lists.
pub const TOP: usize = 20;

/// Tools shown by name in the table of calls left without results.
pub const TOP_TOOLS: usize = 30;

/// Distinct tool names and model names kept; more are counted under [`OTHER`] (a transcript is
/// untrusted input: a file with a million tool names must not make the report grow).
pub const MAX_KEYS: usize = 1000;

/// The name more tools or models than [`MAX_KEYS`] are counted under.
pub const OTHER: &str = "(other)";

/// Periods a time chart shows at most; older ones are summed into the first.
pub const MAX_PERIODS: usize = 120;

/// Models given a colour of their own in the token chart; the rest are summed as [`OTHER`].
pub const CHART_MODELS: usize = 8;

/// The format name of a file whose format could not be detected (and of a missing transcript).
pub const UNDETECTED: &str = "undetected";

/// Adds `v` under `key` in a map that holds at most [`MAX_KEYS`] keys.
fn add_capped<V: Default>(map: &mut HashMap<String, V>, key: &str, add: impl FnOnce(&mut V)) {
    if let Some(v) = map.get_mut(key) {
        return add(v);
    }
    let key = if map.len() >= MAX_KEYS { OTHER } else { key };
    add(map.entry(key.to_owned()).or_default());
}

/// Merges one capped map into another.
fn merge_capped<V: Default>(into: &mut HashMap<String, V>, from: HashMap<String, V>, merge: impl Fn(&mut V, V)) {
    let mut from: Vec<(String, V)> = from.into_iter().collect();
    // Which keys win the last places must not depend on hash order.
    from.sort_by(|a, b| a.0.cmp(&b.0));
    for (k, v) in from {
        add_capped(into, &k, |slot| merge(slot, v));
    }
}

/// A list of the [`TOP`] rows with the largest number, ties broken by path.
#[derive(Debug, Clone)]
struct Top<T> {
    rows: Vec<(u64, String, T)>,
}

impl<T> Default for Top<T> {
    fn default() -> Self {
        Top { rows: Vec::new() }
    }
}

impl<T> Top<T> {
    /// Whether a row with `n` for `path` would be kept.
    fn wants(&self, n: u64, path: &str) -> bool {
        n > 0 && (self.rows.len() < TOP || self.rows.last().is_some_and(|(m, p, _)| (Reverse(n), path) < (Reverse(*m), p.as_str())))
    }

    fn push(&mut self, n: u64, path: String, row: T) {
        if !self.wants(n, &path) {
            return;
        }
        let at = self.rows.partition_point(|(m, p, _)| (Reverse(*m), p.as_str()) < (Reverse(n), path.as_str()));
        self.rows.insert(at, (n, path, row));
        self.rows.truncate(TOP);
    }

    fn merge(&mut self, other: Top<T>) {
        for (n, p, r) in other.rows {
            self.push(n, p, r);
        }
    }

    fn into_rows(self) -> Vec<T> {
        self.rows.into_iter().map(|(_, _, r)| r).collect()
    }
}

/// The first [`TOP`] items by path (the rest counted).
#[derive(Debug, Clone)]
struct FirstByPath<T> {
    items: Vec<(String, T)>,
    count: u64,
}

impl<T> Default for FirstByPath<T> {
    fn default() -> Self {
        FirstByPath { items: Vec::new(), count: 0 }
    }
}

impl<T> FirstByPath<T> {
    fn push(&mut self, path: String, item: T) {
        self.count += 1;
        let at = self.items.partition_point(|(p, _)| *p < path);
        if at < TOP {
            self.items.insert(at, (path, item));
            self.items.truncate(TOP);
        }
    }

    fn merge(&mut self, other: FirstByPath<T>) {
        let count = self.count + other.count;
        for (p, i) in other.items {
            self.push(p, i);
        }
        self.count = count;
    }
}

/// Counts kept per day (and for undated sessions).
#[derive(Debug, Clone, Default)]
struct Day {
    sessions: u64,
    files: u64,
    errors: u64,
    warnings: u64,
    tokens: HashMap<String, Tokens>,
}

impl Day {
    fn merge(&mut self, o: Day) {
        self.sessions += o.sessions;
        self.files += o.files;
        self.errors += o.errors;
        self.warnings += o.warnings;
        merge_capped(&mut self.tokens, o.tokens, |a, b| a.add(&b));
    }
}

/// Per-format counts.
#[derive(Debug, Clone, Copy, Default)]
struct FormatCounts {
    files: u64,
    lines: u64,
    bytes: u64,
    errors: u64,
    warnings: u64,
}

/// The plan totals being folded.
#[derive(Debug, Clone, Default)]
struct PlanAcc {
    files: u64,
    clean: u64,
    repaired: u64,
    partial: u64,
    failed: u64,
    edits: u64,
    inserted: u64,
    removed: u64,
    modified: u64,
    unrepairable: BTreeMap<Kind, u64>,
    top: Top<PlanRow>,
    failures: FirstByPath<String>,
}

/// One checked file and what the report adds to it.
#[derive(Debug)]
pub struct Facts<'a> {
    /// What `check` found.
    pub report: &'a FileReport,
    /// The session's date.
    pub date: SessionDate,
    /// Whether it is a subagent's transcript.
    pub subagent: bool,
    /// Its path (`None` for stdin).
    pub path: Option<&'a std::path::Path>,
    /// What `repair` would do, with `--plan` and findings to repair.
    pub plan: Option<RepairReport>,
}

/// The aggregates being folded. See the module docs.
#[derive(Debug, Default)]
pub struct Acc {
    files: u64,
    subagents: u64,
    lines: u64,
    bytes: u64,
    messages: u64,
    calls: u64,
    results: u64,
    compactions: u64,
    errors: u64,
    warnings: u64,
    files_with_errors: u64,
    formats: BTreeMap<&'static str, FormatCounts>,
    kinds: BTreeMap<(Kind, &'static str), [u64; 2]>,
    days: BTreeMap<i64, Day>,
    undated: Day,
    dated_by: [u64; 3],
    compaction_histogram: [u64; 6],
    tools: HashMap<String, [u64; 2]>,
    models: HashMap<String, Tokens>,
    /// By model, as `models` (capped alike): all tokens and the long-context ones, priced at
    /// the end.
    priced: HashMap<String, (Usage, Usage)>,
    worst_errors: Top<SessionRow>,
    worst_backlog: Top<SessionRow>,
    most_compactions: Top<SessionRow>,
    failed: FirstByPath<String>,
    missing: FirstByPath<String>,
    plan: Option<PlanAcc>,
}

/// The labels of the compactions-per-session histogram.
pub const COMPACTION_BUCKETS: [&str; 6] = ["0", "1", "2", "3-5", "6-10", "over 10"];

fn compaction_bucket(n: u64) -> usize {
    match n {
        0..=2 => n as usize,
        3..=5 => 3,
        6..=10 => 4,
        _ => 5,
    }
}

fn format_name(f: Option<Format>) -> &'static str {
    f.map_or(UNDETECTED, Format::as_str)
}

impl Acc {
    /// An empty fold; `plan` when `--plan` was given.
    pub fn new(plan: bool) -> Self {
        Acc { plan: plan.then(PlanAcc::default), ..Acc::default() }
    }

    /// Adds one file.
    pub fn add(&mut self, f: Facts<'_>) {
        let r = f.report;
        let path = r.input.display();
        let format = format_name(r.format);
        let s = &r.stats;
        self.files += 1;
        self.subagents += u64::from(f.subagent);
        self.lines += s.non_blank_lines();
        self.bytes += s.bytes;
        self.messages += s.messages;
        self.calls += s.calls;
        self.results += s.results;
        self.compactions += s.compactions;
        if let Some(e) = &r.error {
            self.failed.push(path.clone(), e.clone());
        }
        let (mut errors, mut warnings, mut backlog) = (0u64, 0u64, 0u64);
        for finding in &r.findings {
            let slot = self.kinds.entry((finding.kind, format)).or_default();
            match finding.severity {
                Severity::Error => {
                    errors += 1;
                    slot[0] += 1;
                }
                Severity::Warning => {
                    warnings += 1;
                    slot[1] += 1;
                }
            }
            let which = match finding.kind {
                Kind::OrphanCall => 0,
                Kind::UnansweredCall => 1,
                _ => continue,
            };
            backlog += 1;
            add_capped(&mut self.tools, finding.tool.as_deref().unwrap_or("(unknown tool)"), |c| c[which] += 1);
        }
        self.errors += errors;
        self.warnings += warnings;
        self.files_with_errors += u64::from(errors > 0);
        let fc = self.formats.entry(format).or_default();
        fc.files += 1;
        fc.lines += s.non_blank_lines();
        fc.bytes += s.bytes;
        fc.errors += errors;
        fc.warnings += warnings;
        self.dated_by[f.date.by as usize] += 1;
        let day = match f.date.day {
            Some(d) => self.days.entry(d).or_default(),
            None => &mut self.undated,
        };
        day.files += 1;
        day.sessions += u64::from(!f.subagent);
        day.errors += errors;
        day.warnings += warnings;
        for (model, u) in &s.tokens {
            let t = Tokens { input: u.input, output: u.output, cache_read: u.cache_read, cache_creation: u.cache_creation };
            add_capped(&mut day.tokens, model, |slot| slot.add(&t));
            add_capped(&mut self.models, model, |slot| slot.add(&t));
            let long = s.long_context.get(model).copied().unwrap_or_default();
            add_capped(&mut self.priced, model, |(a, l)| {
                a.add(u);
                l.add(&long);
            });
        }
        self.compaction_histogram[compaction_bucket(s.compactions)] += 1;
        let wanted =
            [(&self.worst_errors, errors), (&self.worst_backlog, backlog), (&self.most_compactions, s.compactions)].iter().any(|(t, n)| t.wants(*n, &path));
        if wanted {
            let row = SessionRow {
                file: path.clone(),
                format: format.to_owned(),
                date: f.date.day.map(day_string),
                lines: s.non_blank_lines(),
                errors,
                warnings,
                calls_without_results: backlog,
                compactions: s.compactions,
                open: f.path.and_then(super::session::open_command),
            };
            self.worst_errors.push(errors, path.clone(), row.clone());
            self.worst_backlog.push(backlog, path.clone(), row.clone());
            self.most_compactions.push(s.compactions, path.clone(), row);
        }
        if let Some(p) = &mut self.plan {
            match f.plan {
                Some(rep) => p.add(path, rep),
                None => {
                    // Nothing to repair: `repair` would copy it as it is.
                    p.files += 1;
                    p.clean += 1;
                }
            }
        }
    }

    /// Adds a meta sidecar whose transcript is missing: `check`'s `missing_transcript` error.
    pub fn add_missing(&mut self, transcript: String, meta: String) {
        self.errors += 1;
        self.kinds.entry((Kind::MissingTranscript, UNDETECTED)).or_default()[0] += 1;
        self.undated.errors += 1;
        self.missing.push(transcript, meta);
    }

    /// Merges another fold into this one.
    pub fn merge(mut self, o: Acc) -> Acc {
        self.files += o.files;
        self.subagents += o.subagents;
        self.lines += o.lines;
        self.bytes += o.bytes;
        self.messages += o.messages;
        self.calls += o.calls;
        self.results += o.results;
        self.compactions += o.compactions;
        self.errors += o.errors;
        self.warnings += o.warnings;
        self.files_with_errors += o.files_with_errors;
        for (k, v) in o.formats {
            let f = self.formats.entry(k).or_default();
            f.files += v.files;
            f.lines += v.lines;
            f.bytes += v.bytes;
            f.errors += v.errors;
            f.warnings += v.warnings;
        }
        for (k, v) in o.kinds {
            let s = self.kinds.entry(k).or_default();
            s[0] += v[0];
            s[1] += v[1];
        }
        for (d, v) in o.days {
            self.days.entry(d).or_default().merge(v);
        }
        self.undated.merge(o.undated);
        for i in 0..3 {
            self.dated_by[i] += o.dated_by[i];
        }
        for i in 0..COMPACTION_BUCKETS.len() {
            self.compaction_histogram[i] += o.compaction_histogram[i];
        }
        merge_capped(&mut self.tools, o.tools, |a, b| {
            a[0] += b[0];
            a[1] += b[1];
        });
        merge_capped(&mut self.models, o.models, |a, b| a.add(&b));
        merge_capped(&mut self.priced, o.priced, |(a, l), (b, m)| {
            a.add(&b);
            l.add(&m);
        });
        self.worst_errors.merge(o.worst_errors);
        self.worst_backlog.merge(o.worst_backlog);
        self.most_compactions.merge(o.most_compactions);
        self.failed.merge(o.failed);
        self.missing.merge(o.missing);
        self.plan = match (self.plan, o.plan) {
            (Some(a), Some(b)) => Some(a.merge(b)),
            (a, b) => a.or(b),
        };
        self
    }

    /// The report.
    pub fn finish(self, meta: Meta, skipped: &[Skipped], registry: &ToolRegistry, pricer: &mut Pricer) -> Report {
        let totals = Totals {
            files: self.files,
            sessions: self.files - self.subagents,
            subagent_transcripts: self.subagents,
            lines: self.lines,
            bytes: self.bytes,
            messages: self.messages,
            tool_calls: self.calls,
            tool_results: self.results,
            compactions: self.compactions,
            findings: self.errors + self.warnings,
            errors: self.errors,
            warnings: self.warnings,
            files_with_errors: self.files_with_errors,
            could_not_be_checked: self.failed.count,
            missing_transcripts: self.missing.count,
            skipped_paths: skipped.len() as u64,
        };
        let formats = self
            .formats
            .iter()
            .map(|(name, c)| FormatRow { format: name, files: c.files, lines: c.lines, bytes: c.bytes, errors: c.errors, warnings: c.warnings })
            .collect();
        let kinds = kind_rows(&self.kinds);
        let over_time = over_time(&self.days, &self.undated, self.dated_by);
        let mut tokens = tokens(&self.models, &self.days, &self.undated, &over_time);
        price(&mut tokens, &self.priced, pricer);
        let unanswered = unanswered(&self.tools, registry);
        let compactions = Compactions {
            total: self.compactions,
            sessions_with_compactions: self.compaction_histogram[1..].iter().sum(),
            histogram: COMPACTION_BUCKETS.iter().zip(self.compaction_histogram).map(|(b, n)| Bucket { bucket: b, files: n }).collect(),
            top: self.most_compactions.into_rows(),
        };
        Report {
            transcriptd: env!("CARGO_PKG_VERSION"),
            generated: meta.generated,
            paths: meta.paths,
            totals,
            formats,
            severity: SeverityCounts { error: self.errors, warning: self.warnings },
            kinds,
            over_time,
            worst: Worst { by_errors: self.worst_errors.into_rows(), by_calls_without_results: self.worst_backlog.into_rows() },
            compactions,
            calls_without_results: unanswered,
            tokens,
            plan: self.plan.map(|p| p.finish(meta.orphans)),
            could_not_be_checked: self.failed.items.into_iter().map(|(file, message)| Problem { file, message }).collect(),
            missing_transcripts: self
                .missing
                .items
                .into_iter()
                .map(|(file, meta)| Problem { file, message: format!("meta sidecar {meta} exists but its transcript is missing") })
                .collect(),
            skipped: skipped
                .iter()
                .take(TOP)
                .map(|s| SkippedRow {
                    file: s.path.display().to_string(),
                    skipped: s.reason.as_str(),
                    severity: if s.error { "error" } else { "warning" },
                    message: s.message.clone(),
                })
                .collect(),
        }
    }
}

impl PlanAcc {
    fn add(&mut self, path: String, r: RepairReport) {
        self.files += 1;
        let status = match r.status {
            RepairStatus::Clean => {
                self.clean += 1;
                "clean"
            }
            RepairStatus::Repaired | RepairStatus::Planned => {
                self.repaired += 1;
                "repaired"
            }
            RepairStatus::Partial => {
                self.partial += 1;
                "partial"
            }
            RepairStatus::Skipped | RepairStatus::Failed => {
                self.failed += 1;
                self.failures.push(path.clone(), r.message.clone().unwrap_or_default());
                "failed"
            }
        };
        let l = r.lines;
        self.edits += r.edits as u64;
        self.inserted += l.inserted;
        self.removed += l.removed;
        self.modified += l.modified;
        for u in &r.unrepaired {
            *self.unrepairable.entry(u.kind).or_default() += 1;
        }
        let row = PlanRow {
            file: path.clone(),
            status: status.to_owned(),
            edits: r.edits as u64,
            inserted: l.inserted,
            removed: l.removed,
            modified: l.modified,
            unrepairable: r.unrepaired.len() as u64,
            message: r.message,
        };
        self.top.push(l.inserted + l.removed + l.modified + row.unrepairable + u64::from(status == "failed"), path, row);
    }

    fn merge(mut self, o: PlanAcc) -> PlanAcc {
        self.files += o.files;
        self.clean += o.clean;
        self.repaired += o.repaired;
        self.partial += o.partial;
        self.failed += o.failed;
        self.edits += o.edits;
        self.inserted += o.inserted;
        self.removed += o.removed;
        self.modified += o.modified;
        for (k, v) in o.unrepairable {
            *self.unrepairable.entry(k).or_default() += v;
        }
        self.top.merge(o.top);
        self.failures.merge(o.failures);
        self
    }

    fn finish(self, orphans: &'static str) -> PlanSummary {
        PlanSummary {
            orphans,
            files: self.files,
            clean: self.clean,
            repaired: self.repaired,
            partial: self.partial,
            failed: self.failed,
            edits: self.edits,
            inserted: self.inserted,
            removed: self.removed,
            modified: self.modified,
            unrepairable: self.unrepairable.iter().map(|(k, n)| KindCount { kind: *k, count: *n }).collect(),
            files_most_changed: self.top.into_rows(),
        }
    }
}

fn kind_rows(kinds: &BTreeMap<(Kind, &'static str), [u64; 2]>) -> Vec<KindRow> {
    let mut rows: BTreeMap<Kind, KindRow> = BTreeMap::new();
    for ((kind, format), [e, w]) in kinds {
        let row = rows.entry(*kind).or_insert_with(|| KindRow { kind: *kind, total: 0, error: 0, warning: 0, by_format: BTreeMap::new() });
        row.total += e + w;
        row.error += e;
        row.warning += w;
        *row.by_format.entry(format).or_default() += e + w;
    }
    let mut rows: Vec<KindRow> = rows.into_values().collect();
    rows.sort_by_key(|r| (Reverse(r.total), r.kind));
    rows
}

/// The label of the period `day` falls in.
fn period_of(day: i64, granularity: Granularity) -> String {
    let d = day_string(day);
    match granularity {
        Granularity::Day => d,
        Granularity::Month => d[..7].to_owned(),
        Granularity::Year => d[..4].to_owned(),
    }
}

/// Every period from the first dated day to the last, at a granularity that keeps them few.
fn periods(first: i64, last: i64) -> (Granularity, Vec<String>) {
    let span = last - first + 1;
    let granularity = if span <= 92 {
        Granularity::Day
    } else if span <= 366 * 8 {
        Granularity::Month
    } else {
        Granularity::Year
    };
    let mut out: Vec<String> = Vec::new();
    let mut day = first;
    while day <= last {
        let p = period_of(day, granularity);
        if out.last() != Some(&p) {
            out.push(p);
        }
        day += 1;
    }
    (granularity, out)
}

fn over_time(days: &BTreeMap<i64, Day>, undated: &Day, dated_by: [u64; 3]) -> OverTime {
    let (granularity, labels) = match (days.keys().next(), days.keys().next_back()) {
        (Some(&first), Some(&last)) if last - first < 366 * 400 => periods(first, last),
        // Dates centuries apart (hostile timestamps): only the years that have sessions.
        _ => (Granularity::Year, {
            let mut v: Vec<String> = days.keys().map(|d| period_of(*d, Granularity::Year)).collect();
            v.dedup();
            v
        }),
    };
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut periods: Vec<Period> = labels
        .iter()
        .enumerate()
        .map(|(i, p)| {
            index.insert(p.as_str(), i);
            Period { period: p.clone(), sessions: 0, files: 0, errors: 0, warnings: 0 }
        })
        .collect();
    for (d, v) in days {
        let p = &mut periods[index[period_of(*d, granularity).as_str()]];
        p.sessions += v.sessions;
        p.files += v.files;
        p.errors += v.errors;
        p.warnings += v.warnings;
    }
    if periods.len() > MAX_PERIODS {
        let cut = periods.len() - (MAX_PERIODS - 1);
        let old: Vec<Period> = periods.drain(..cut).collect();
        let mut first = Period { period: format!("before {}", periods[0].period), sessions: 0, files: 0, errors: 0, warnings: 0 };
        for p in old {
            first.sessions += p.sessions;
            first.files += p.files;
            first.errors += p.errors;
            first.warnings += p.warnings;
        }
        periods.insert(0, first);
    }
    OverTime {
        dated_by: DatedCounts {
            transcript: dated_by[DatedBy::Transcript as usize],
            name: dated_by[DatedBy::Name as usize],
            undated: dated_by[DatedBy::Undated as usize],
        },
        granularity,
        periods,
        undated: Period { period: "undated".into(), sessions: undated.sessions, files: undated.files, errors: undated.errors, warnings: undated.warnings },
    }
}

/// Puts a cost on each model's tokens and their sum. The `(other)` row (models past the cap) has
/// no single price: its cost is unknown, as is a model's the table does not price.
fn price(t: &mut TokenUsage, priced: &HashMap<String, (Usage, Usage)>, pricer: &mut Pricer) {
    let mut sum = None;
    for m in &mut t.by_model {
        let cost = match priced.get(&m.model) {
            Some((all, long)) if m.model != OTHER => pricer.cost(&m.model, all, long),
            _ => Cost { usd: None, priced_as: None },
        };
        match cost.usd {
            Some(c) => sum = Some(sum.unwrap_or(0.0) + c),
            None => t.unpriced_models.push(m.model.clone()),
        }
        m.cost_usd = cost.usd;
        m.priced_as = cost.priced_as;
    }
    t.cost_usd = sum;
}

fn tokens(models: &HashMap<String, Tokens>, days: &BTreeMap<i64, Day>, undated: &Day, time: &OverTime) -> TokenUsage {
    let mut by_model: Vec<ModelTokens> =
        models.iter().map(|(m, t)| ModelTokens { model: m.clone(), total: t.total(), tokens: *t, cost_usd: None, priced_as: None }).collect();
    by_model.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.model.cmp(&b.model)));
    // The chart's models: the largest ones, the rest summed.
    let charted: Vec<&str> = by_model.iter().take(CHART_MODELS).map(|m| m.model.as_str()).collect();
    let label = |m: &str| if charted.contains(&m) { m.to_owned() } else { OTHER.to_owned() };
    let order: HashMap<&str, usize> = time.periods.iter().enumerate().map(|(i, p)| (p.period.as_str(), i)).collect();
    let first_period = time.periods.first().map(|p| p.period.clone());
    let mut cells: BTreeMap<(String, String), Tokens> = BTreeMap::new();
    for (d, day) in days {
        let mut period = period_of(*d, time.granularity);
        if !order.contains_key(period.as_str()) {
            // Summed into the first period ("before …").
            period = first_period.clone().unwrap_or(period);
        }
        for (m, t) in &day.tokens {
            cells.entry((period.clone(), label(m))).or_default().add(t);
        }
    }
    let mut over_time: Vec<PeriodTokens> =
        cells.into_iter().map(|((period, model), tokens)| PeriodTokens { period, model, total: tokens.total(), tokens }).collect();
    over_time.sort_by_key(|c| (order.get(c.period.as_str()).copied().unwrap_or(usize::MAX), c.model.clone()));
    let mut chart_models: Vec<String> = charted.iter().map(|m| m.to_string()).collect();
    if by_model.len() > CHART_MODELS {
        chart_models.push(OTHER.to_owned());
    }
    let mut total = Tokens::default();
    for m in &by_model {
        total.add(&m.tokens);
    }
    let mut undated_tokens = Tokens::default();
    for t in undated.tokens.values() {
        undated_tokens.add(t);
    }
    let undated = undated_tokens;
    TokenUsage { total, cost_usd: None, unpriced_models: Vec::new(), by_model, chart_models, over_time, undated }
}

fn unanswered(tools: &HashMap<String, [u64; 2]>, registry: &ToolRegistry) -> CallsWithoutResults {
    let mut by_tool: Vec<ToolRow> = tools
        .iter()
        .map(|(t, [o, u])| ToolRow {
            tool: t.clone(),
            side_effect: if t == OTHER { "unknown" } else { registry.side_effect(t).as_str() },
            orphan_call: *o,
            unanswered_call: *u,
        })
        .collect();
    by_tool.sort_by(|a, b| (b.orphan_call + b.unanswered_call).cmp(&(a.orphan_call + a.unanswered_call)).then_with(|| a.tool.cmp(&b.tool)));
    let mut effects: BTreeMap<&'static str, [u64; 2]> = BTreeMap::new();
    for r in &by_tool {
        let e = effects.entry(r.side_effect).or_default();
        e[0] += r.orphan_call;
        e[1] += r.unanswered_call;
    }
    let order = ["external", "write", "unknown", "read", "none"];
    let mut by_side_effect: Vec<EffectRow> = effects.into_iter().map(|(e, [o, u])| EffectRow { side_effect: e, orphan_call: o, unanswered_call: u }).collect();
    by_side_effect.sort_by_key(|r| order.iter().position(|o| *o == r.side_effect));
    let total = by_tool.iter().map(|r| r.orphan_call + r.unanswered_call).sum();
    let tools = by_tool.len() as u64;
    let other: Vec<ToolRow> = by_tool.split_off(by_tool.len().min(TOP_TOOLS));
    CallsWithoutResults {
        total,
        tools,
        by_side_effect,
        by_tool,
        other_tools: OtherTools {
            tools: other.len() as u64,
            orphan_call: other.iter().map(|r| r.orphan_call).sum(),
            unanswered_call: other.iter().map(|r| r.unanswered_call).sum(),
        },
    }
}

/// What the report is about, besides the files.
#[derive(Debug, Clone)]
pub struct Meta {
    /// When it was made (RFC 3339).
    pub generated: String,
    /// The paths given.
    pub paths: Vec<String>,
    /// The orphan policy the plan used.
    pub orphans: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_lists_keep_the_largest_then_the_first_paths() {
        let mut a: Top<u64> = Top::default();
        let mut b: Top<u64> = Top::default();
        let mut all = Vec::new();
        for i in 0..200u64 {
            let n = (i * 7919) % 13;
            let p = format!("f{:03}", (i * 31) % 200);
            all.push((n, p.clone()));
            if i % 3 == 0 {
                a.push(n, p, n);
            } else {
                b.push(n, p, n);
            }
        }
        a.merge(b);
        all.retain(|(n, _)| *n > 0);
        all.sort_by(|x, y| (Reverse(x.0), &x.1).cmp(&(Reverse(y.0), &y.1)));
        all.truncate(TOP);
        assert_eq!(a.rows.iter().map(|(n, p, _)| (*n, p.clone())).collect::<Vec<_>>(), all);
    }

    #[test]
    fn capped_maps_count_the_rest_as_other() {
        let mut m: HashMap<String, u64> = HashMap::new();
        for i in 0..(MAX_KEYS + 50) {
            add_capped(&mut m, &format!("tool{i}"), |c| *c += 1);
        }
        add_capped(&mut m, "tool0", |c| *c += 1);
        assert_eq!(m.len(), MAX_KEYS + 1);
        assert_eq!(m[OTHER], 50);
        assert_eq!(m["tool0"], 2);
        assert_eq!(m.values().sum::<u64>(), (MAX_KEYS + 51) as u64);
    }

    #[test]
    fn periods_fit_the_span() {
        let day = |s: &str| super::super::session::day_in_name(s).unwrap();
        let (g, p) = periods(day("2026-02-27"), day("2026-03-02"));
        assert_eq!(g, Granularity::Day);
        assert_eq!(p, ["2026-02-27", "2026-02-28", "2026-03-01", "2026-03-02"]);
        let (g, p) = periods(day("2025-11-15"), day("2026-03-01"));
        assert_eq!(g, Granularity::Month);
        assert_eq!(p, ["2025-11", "2025-12", "2026-01", "2026-02", "2026-03"]);
        let (g, p) = periods(day("2010-01-01"), day("2026-03-01"));
        assert_eq!(g, Granularity::Year);
        assert_eq!(p.len(), 17);
    }
}
