//! The HTML page: one self-contained file (styles inline, charts as inline SVG, no script, no
//! network), templated with maud, which escapes every value put into text or attributes.
//!
//! A Content-Security-Policy in the page forbids scripts and every fetch, so even markup that
//! got through could neither run nor call out. The DOM stays small whatever the archive's size:
//! tables are top-N lists and charts are aggregates (at most [`super::model::MAX_PERIODS`]
//! periods, [`super::model::TOP_TOOLS`] tools).

use super::model::UNDETECTED;
use super::schema::{Report, SessionRow};
use super::svg::{self, number, Row, Series};
use crate::cli::output::human_bytes;
use maud::{html, Markup, PreEscaped, DOCTYPE};

const CSS: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;color:#1d2330;background:#f6f7f9;margin:0}
main{max-width:1400px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:24px;margin:8px 0 2px}h2{font-size:19px;margin:32px 0 8px;border-bottom:1px solid #d5d9e0;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}p{margin:6px 0}.meta,.note{color:#5b6475;font-size:13px}
nav a{margin-right:12px;color:#1565c0;text-decoration:none;font-size:13px}
code{font:12px/1.4 ui-monospace,'DejaVu Sans Mono',monospace;background:#eceff3;padding:1px 4px;border-radius:3px;overflow-wrap:anywhere}
code.path,code.cmd .arg{white-space:nowrap}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(180px,1fr));gap:10px}
.card{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:8px 12px}
.card .label{display:block;color:#5b6475;font-size:12px;font-weight:600;text-transform:uppercase;letter-spacing:.04em}
.card b{display:block;font-size:22px;font-weight:600}.card .detail{color:#5b6475;font-size:12px}
.card.bad b{color:#c62828}
table{border-collapse:collapse;background:#fff;font-size:13px;margin:6px 0}table.wide{width:100%}.scroll{overflow-x:auto}
tr.cmd td{border-top:0;padding-bottom:6px}tr.opened td{border-bottom:0}
th,td{border:1px solid #dde1e7;padding:3px 8px;text-align:left;vertical-align:top}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}td.nw{white-space:nowrap}
.chart{display:block;background:#fff;border:1px solid #dde1e7;border-radius:6px;margin:6px 0;max-width:100%;height:auto}
.chart text{font:12px system-ui,sans-serif;fill:#1d2330}.chart text.value{fill:#5b6475}
.chart line.axis{stroke:#8a93a3}.chart line.grid{stroke:#e3e6eb}
.legend{font-size:12px;color:#5b6475}.swatch{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px;border-radius:2px}
";

/// Colours of error and warning findings.
const ERROR: &str = "#c62828";
const WARNING: &str = "#f9a825";

/// Colours of the models in the token chart (the last one: the rest).
const MODEL_COLORS: [&str; 9] = ["#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457", "#6d4c41", "#546e7a", "#9e9e9e"];

/// The page.
pub fn render(r: &Report) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="generator" content={ "transcriptd " (r.transcriptd) };
                title { "Transcript audit — transcriptd report" }
                style { (PreEscaped(CSS)) }
            }
            body {
                main {
                    h1 { "Transcript audit" }
                    p.meta {
                        "Generated " (r.generated) " by transcriptd " (r.transcriptd) " from "
                        @for (i, p) in r.paths.iter().enumerate() { @if i > 0 { ", " } code { (p) } }
                        "."
                    }
                    nav {
                        a href="#totals" { "Totals" } a href="#findings" { "Findings" } a href="#time" { "Over time" }
                        a href="#worst" { "Worst sessions" } a href="#compactions" { "Compactions" }
                        a href="#calls" { "Calls without results" } a href="#tokens" { "Tokens" }
                        @if r.plan.is_some() { a href="#plan" { "Repair plan" } }
                    }
                    (totals(r))
                    (findings(r))
                    (over_time(r))
                    (worst(r))
                    (compactions(r))
                    (calls(r))
                    (tokens(r))
                    (plan(r))
                    (problems(r))
                    p.note { "Made with " code { "transcriptd report" } " from the findings of " code { "transcriptd check" } " (" code { "transcriptd report PATH... --output json" } " prints the same numbers)." }
                }
            }
        }
    }
    .into_string()
}

/// How many characters of a path a table shows (the rest elided from its middle, the whole
/// path in the title): one line of the transcript column beside the numbers at 1,100 px.
const PATH_CHARS: usize = 64;

/// A path in a table cell: on one line, its middle elided past [`PATH_CHARS`], whole in the
/// title.
fn path(p: &str) -> Markup {
    html! { code.path title=(p) { (svg::shorten_middle(p, PATH_CHARS)) } }
}

/// A command to copy: its words each kept on one line (a path breaks at no `/` or `-`), the
/// line broken only between them; its text is the command, spaces and all.
fn command(c: &str) -> Markup {
    html! { code.cmd { @for (i, w) in c.split(' ').enumerate() { @if i > 0 { " " } span.arg { (w) } } } }
}

/// A card: what it counts, the number, and a detail line (may be empty).
fn card(label: &str, value: String, detail: &str, bad: bool) -> Markup {
    html! { div.card.bad[bad] { span.label { (label) } b { (value) } @if !detail.is_empty() { span.detail { (detail) } } } }
}

fn totals(r: &Report) -> Markup {
    let t = &r.totals;
    html! {
        section #totals {
            h2 { "Totals" }
            div.cards {
                (card("transcript files", number(t.files), &format!("{} sessions, {} subagent transcripts", number(t.sessions), number(t.subagent_transcripts)), false))
                (card("lines", number(t.lines), "", false))
                (card("size", human_bytes(t.bytes), &format!("{} bytes", number(t.bytes)), false))
                (card("formats", number(r.formats.len() as u64), &r.formats.iter().map(|f| format!("{} {}", f.format, number(f.files))).collect::<Vec<_>>().join(", "), false))
                (card("errors", number(t.errors), &format!("in {} files", number(t.files_with_errors)), t.errors > 0))
                (card("warnings", number(t.warnings), "", false))
                (card("tool calls", number(t.tool_calls), &format!("{} results", number(t.tool_results)), false))
                (card("compactions", number(t.compactions), "", false))
                @if t.could_not_be_checked > 0 { (card("not checked", number(t.could_not_be_checked), "files could not be checked", true)) }
                @if t.missing_transcripts > 0 { (card("missing transcripts", number(t.missing_transcripts), "meta sidecar left", true)) }
                @if t.skipped_paths > 0 { (card("skipped", number(t.skipped_paths), "paths skipped", false)) }
            }
        }
    }
}

fn severity_series() -> [Series<'static>; 2] {
    [Series { name: "error", color: ERROR }, Series { name: "warning", color: WARNING }]
}

fn findings(r: &Report) -> Markup {
    let sev = severity_series();
    let by_severity = vec![Row::new("error", vec![r.severity.error, 0]), Row::new("warning", vec![0, r.severity.warning])];
    let kinds: Vec<Row> = r.kinds.iter().map(|k| Row::new(k.kind.to_string(), vec![k.error, k.warning])).collect();
    let formats: Vec<&str> = r.formats.iter().map(|f| f.format).chain(r.kinds.iter().flat_map(|k| k.by_format.keys().copied())).fold(Vec::new(), |mut v, f| {
        if !v.contains(&f) {
            v.push(f);
        }
        v
    });
    html! {
        section #findings {
            h2 { "Findings" }
            h3 { "By severity" }
            (svg::bars("severity", "Findings by severity", &sev, &by_severity))
            h3 { "By kind" }
            @if kinds.is_empty() { p { "No findings." } } @else { (svg::bars("kinds", "Findings by kind", &sev, &kinds)) }
            @if !r.kinds.is_empty() {
                h3 { "By kind and format" }
                table {
                    tr { th { "kind" } @for f in &formats { th.n { (f) } } th.n { "total" } }
                    @for k in &r.kinds {
                        tr {
                            td { code { (k.kind) } }
                            @for f in &formats {
                                @let n = k.by_format.get(f).copied().unwrap_or(0);
                                @if n > 0 { td.n data-chart="kind-format" data-key=(k.kind) data-series=(f) data-value=(n) { (number(n)) } } @else { td.n {} }
                            }
                            td.n { (number(k.total)) }
                        }
                    }
                }
            }
            h3 { "By format" }
            table {
                tr { th { "format" } th.n { "files" } th.n { "lines" } th.n { "bytes" } th.n { "errors" } th.n { "warnings" } }
                @for f in &r.formats {
                    tr { td { (f.format) } td.n { (number(f.files)) } td.n { (number(f.lines)) } td.n { (human_bytes(f.bytes)) } td.n { (number(f.errors)) } td.n { (number(f.warnings)) } }
                }
            }
            @if r.formats.iter().any(|f| f.format == UNDETECTED) {
                p.note { "Files whose format could not be detected (and missing transcripts) are counted as " code { (UNDETECTED) } "." }
            }
        }
    }
}

fn over_time(r: &Report) -> Markup {
    let t = &r.over_time;
    let sev = severity_series();
    let periods: Vec<Row> = t.periods.iter().map(|p| Row::new(p.period.clone(), vec![p.errors, p.warnings])).collect();
    let sessions: Vec<Row> = t.periods.iter().map(|p| Row::new(p.period.clone(), vec![p.sessions])).collect();
    let granularity = match t.granularity {
        super::schema::Granularity::Day => "day",
        super::schema::Granularity::Month => "month",
        super::schema::Granularity::Year => "year",
    };
    html! {
        section #time {
            h2 { "Findings over time" }
            p.note {
                "By session date, one column per " (granularity) ": the date of the session's first "
                code { "timestamp" } " (UTC) for " (number(t.dated_by.transcript)) " files, the date in the file or directory name for "
                (number(t.dated_by.name)) ", none for " (number(t.dated_by.undated)) "."
            }
            @if periods.is_empty() { p { "No dated sessions." } } @else {
                (svg::columns("over-time", "Findings by session date", &sev, &periods))
                h3 { "Sessions started" }
                (svg::columns("sessions-over-time", "Sessions by date", &[Series { name: "sessions", color: "#1565c0" }], &sessions))
            }
            @if t.undated.files > 0 || t.undated.errors + t.undated.warnings > 0 {
                p { "Undated: " (number(t.undated.files)) " files with " (number(t.undated.errors)) " errors and " (number(t.undated.warnings)) " warnings." }
            }
        }
    }
}

/// A table of sessions: a row of figures each, and under it the command that opens it, on a
/// row of its own as wide as the table (broken only between arguments).
fn session_table(rows: &[SessionRow]) -> Markup {
    html! {
        div.scroll { table.wide.sessions {
            tr { th { "transcript" } th { "format" } th { "date" } th.n { "errors" } th.n { "warnings" } th.n { "calls without results" } th.n { "compactions" } }
            @for s in rows {
                tr.session.opened[s.open.is_some()] {
                    td { (path(&s.file)) }
                    td.nw { (s.format) }
                    td.nw { (s.date.as_deref().unwrap_or("")) }
                    td.n { (number(s.errors)) } td.n { (number(s.warnings)) } td.n { (number(s.calls_without_results)) } td.n { (number(s.compactions)) }
                }
                @if let Some(c) = &s.open { tr.cmd { td colspan="7" { span.note { "open it with " } (command(c)) } } }
            }
        } }
    }
}

fn worst(r: &Report) -> Markup {
    html! {
        section #worst {
            h2 { "Worst sessions" }
            h3 { "Most errors" }
            @if r.worst.by_errors.is_empty() { p { "No session has an error." } } @else { (session_table(&r.worst.by_errors)) }
            h3 { "Largest backlog of calls without results" }
            @if r.worst.by_calls_without_results.is_empty() { p { "No call was left without a result." } } @else { (session_table(&r.worst.by_calls_without_results)) }
        }
    }
}

fn compactions(r: &Report) -> Markup {
    let c = &r.compactions;
    let rows: Vec<Row> =
        c.histogram.iter().map(|b| Row { key: b.bucket.to_owned(), label: format!("{} compactions", b.bucket), values: vec![b.files] }).collect();
    html! {
        section #compactions {
            h2 { "Compactions per session" }
            p { (number(c.total)) " compactions; " (number(c.sessions_with_compactions)) " of " (number(r.totals.files)) " transcripts have at least one." }
            (svg::bars("compactions", "Transcripts by number of compactions", &[Series { name: "files", color: "#00838f" }], &rows))
            @if !c.top.is_empty() { h3 { "Most compacted" } (session_table(&c.top)) }
        }
    }
}

fn calls(r: &Report) -> Markup {
    let c = &r.calls_without_results;
    let series = [Series { name: "orphan_call", color: "#6a1b9a" }, Series { name: "unanswered_call", color: "#ce93d8" }];
    let effects: Vec<Row> = c.by_side_effect.iter().map(|e| Row::new(e.side_effect, vec![e.orphan_call, e.unanswered_call])).collect();
    let tools: Vec<Row> = c
        .by_tool
        .iter()
        .map(|t| Row { key: t.tool.clone(), label: format!("{} ({})", t.tool, t.side_effect), values: vec![t.orphan_call, t.unanswered_call] })
        .collect();
    html! {
        section #calls {
            h2 { "Tool calls left without results" }
            p.note {
                code { "orphan_call" } ": still without a result at the end of the transcript; " code { "unanswered_call" }
                ": the conversation moved on without it. Side effects come from the tool registry (" code { "config/tools.toml" } ")."
            }
            @if c.total == 0 { p { "None." } } @else {
                h3 { "By side effect" }
                (svg::bars("calls-by-side-effect", "Calls without results by side effect", &series, &effects))
                h3 { "By tool" }
                (svg::bars("calls-by-tool", "Calls without results by tool", &series, &tools))
                @if c.other_tools.tools > 0 {
                    p.note { "And " (number(c.other_tools.tools)) " more tools: " (number(c.other_tools.orphan_call)) " orphan calls, " (number(c.other_tools.unanswered_call)) " unanswered." }
                }
            }
        }
    }
}

fn tokens(r: &Report) -> Markup {
    let t = &r.tokens;
    let series: Vec<Series<'_>> =
        t.chart_models.iter().enumerate().map(|(i, m)| Series { name: m, color: MODEL_COLORS[i.min(MODEL_COLORS.len() - 1)] }).collect();
    let cells: std::collections::HashMap<(&str, &str), u64> = t.over_time.iter().map(|c| ((c.period.as_str(), c.model.as_str()), c.total)).collect();
    let periods: Vec<Row> = r
        .over_time
        .periods
        .iter()
        .map(|p| {
            let values = t.chart_models.iter().map(|m| cells.get(&(p.period.as_str(), m.as_str())).copied().unwrap_or(0)).collect();
            Row::new(p.period.clone(), values)
        })
        .collect();
    html! {
        section #tokens {
            h2 { "Token usage by model" }
            @if t.by_model.is_empty() { p { "No token usage in these transcripts." } } @else {
                table {
                    tr { th { "model" } th.n { "input" } th.n { "output" } th.n { "cache read" } th.n { "cache write" } th.n { "total" } th.n { "cost $" } }
                    @for m in &t.by_model {
                        tr { td { code { (m.model) } } td.n { (number(m.tokens.input)) } td.n { (number(m.tokens.output)) } td.n { (number(m.tokens.cache_read)) } td.n { (number(m.tokens.cache_creation)) } td.n { (number(m.total)) } td.n { (crate::cli::usage::dollars(m.cost_usd)) } }
                    }
                }
                p { "Cost: " (t.cost_usd.map_or_else(|| "unknown".to_owned(), |c| format!("${c:.4}"))) @if !t.unpriced_models.is_empty() { " (unknown for " (t.unpriced_models.join(", ")) ": no price in the table)" } ", at LiteLLM's prices built in or those of " code { "--prices" } "." }
                h3 { "Over time" }
                p.note { "All tokens (input, output, cache read and write) by session date." }
                @if periods.iter().any(|p| p.values.iter().any(|v| *v > 0)) { (svg::columns("tokens-over-time", "Tokens by model and session date", &series, &periods)) }
                @if t.undated.total() > 0 { p { "Undated sessions: " (number(t.undated.total())) " tokens." } }
            }
        }
    }
}

fn plan(r: &Report) -> Markup {
    let Some(p) = &r.plan else { return html! {} };
    html! {
        section #plan {
            h2 { "What repair would do" }
            p.note { "As " code { "transcriptd repair --orphans " (p.orphans) } " would do it, written to a scratch directory and thrown away: nothing was changed." }
            div.cards {
                (card("repaired", number(p.repaired), "files", false))
                (card("partly repaired", number(p.partial), "files with findings left", p.partial > 0))
                (card("nothing to repair", number(p.clean), "files", false))
                @if p.failed > 0 { (card("repair failed", number(p.failed), "files", true)) }
                (card("inserted", number(p.inserted), "lines", false))
                (card("removed", number(p.removed), "lines, kept in the rejects file", false))
                (card("modified", number(p.modified), "lines", false))
            }
            (svg::bars("plan", "Lines repair would change", &[Series { name: "lines", color: "#2e7d32" }], &[
                Row::new("inserted", vec![p.inserted]), Row::new("removed", vec![p.removed]), Row::new("modified", vec![p.modified])
            ]))
            @if !p.unrepairable.is_empty() {
                h3 { "Left unrepaired" }
                table { tr { th { "kind" } th.n { "findings" } } @for k in &p.unrepairable { tr { td { code { (k.kind) } } td.n { (number(k.count)) } } } }
            }
            @if !p.files_most_changed.is_empty() {
                h3 { "Files most changed" }
                div.scroll { table.wide {
                    tr { th { "transcript" } th { "status" } th.n { "inserted" } th.n { "removed" } th.n { "modified" } th.n { "unrepaired" } }
                    @for f in &p.files_most_changed {
                        tr { td { (path(&f.file)) @if let Some(m) = &f.message { br; span.note { (m) } } } td { (f.status) } td.n { (number(f.inserted)) } td.n { (number(f.removed)) } td.n { (number(f.modified)) } td.n { (number(f.unrepairable)) } }
                    }
                } }
            }
        }
    }
}

fn problems(r: &Report) -> Markup {
    if r.could_not_be_checked.is_empty() && r.missing_transcripts.is_empty() && r.skipped.is_empty() {
        return html! {};
    }
    html! {
        section #problems {
            h2 { "Paths with problems" }
            @if !r.could_not_be_checked.is_empty() {
                h3 { "Could not be checked" }
                ul { @for p in &r.could_not_be_checked { li { (path(&p.file)) ": " (p.message) } } }
            }
            @if !r.missing_transcripts.is_empty() {
                h3 { "Missing transcripts" }
                ul { @for p in &r.missing_transcripts { li { (path(&p.file)) ": " (p.message) } } }
            }
            @if !r.skipped.is_empty() {
                h3 { "Skipped" }
                ul { @for s in &r.skipped { li { (path(&s.file)) " (" (s.skipped) ", " (s.severity) "): " (s.message) } } }
            }
        }
    }
}
