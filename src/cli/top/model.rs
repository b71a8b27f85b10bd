//! What `top` shows, computed from two readings of a daemon (its `/metrics` text and its
//! `/stats` snapshot) without a terminal: totals, rates between the readings, the files sorted
//! and filtered. Pure: the readings and their times go in, a [`View`] comes out.

use crate::daemon::tap::{FileStats, Stats};
use std::collections::BTreeMap;

/// The samples of a Prometheus text exposition: `name` and sorted labels, and the value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

impl Metrics {
    /// Parses the text format (comments and malformed lines skipped).
    pub fn parse(text: &str) -> Metrics {
        let mut samples = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (series, value) = match line.rfind('}') {
                Some(close) => (&line[..=close], line[close + 1..].trim()),
                None => match line.split_once(char::is_whitespace) {
                    Some((s, v)) => (s, v.trim()),
                    None => continue,
                },
            };
            let Ok(value) = value.split_whitespace().next().unwrap_or("").parse::<f64>() else { continue };
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => (n, parse_labels(rest.trim_end_matches('}'))),
                None => (series, BTreeMap::new()),
            };
            samples.push((name.to_owned(), labels, value));
        }
        Metrics { samples }
    }

    /// The sum of every sample of `name`.
    pub fn sum(&self, name: &str) -> f64 {
        self.samples.iter().filter(|(n, _, _)| n == name).map(|(_, _, v)| v).sum()
    }

    /// The samples of `name` summed by the value of `label`.
    pub fn by(&self, name: &str, label: &str) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for (n, l, v) in &self.samples {
            if n == name {
                *out.entry(l.get(label).cloned().unwrap_or_default()).or_insert(0.0) += v;
            }
        }
        out
    }
}

fn parse_labels(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s;
    while let Some(eq) = rest.find('=') {
        let key = rest[..eq].trim().trim_start_matches(',').trim().to_owned();
        let after = &rest[eq + 1..];
        let Some(body) = after.strip_prefix('"') else { break };
        let mut value = String::new();
        let mut chars = body.char_indices();
        let mut end = body.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        out.insert(key, value);
        rest = &body[end.min(body.len())..];
    }
    out
}

/// One reading of the daemon.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// Seconds since an arbitrary start (the reader's monotonic clock).
    pub at: f64,
    /// `/metrics`.
    pub metrics: Metrics,
    /// `/stats`.
    pub stats: Stats,
}

/// How the files are sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortBy {
    /// Bytes read per second, most first.
    #[default]
    Rate,
    /// Bytes not read yet, most first.
    Lag,
    /// Findings, most first.
    Findings,
    /// Pending calls, most first.
    Pending,
    /// Path.
    Name,
}

impl SortBy {
    /// The next key (the `s` key).
    pub fn next(self) -> SortBy {
        match self {
            SortBy::Rate => SortBy::Lag,
            SortBy::Lag => SortBy::Findings,
            SortBy::Findings => SortBy::Pending,
            SortBy::Pending => SortBy::Name,
            SortBy::Name => SortBy::Rate,
        }
    }

    /// Its name on screen.
    pub fn name(self) -> &'static str {
        match self {
            SortBy::Rate => "bytes/s",
            SortBy::Lag => "lag",
            SortBy::Findings => "findings",
            SortBy::Pending => "pending",
            SortBy::Name => "name",
        }
    }
}

/// One file on screen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileRow {
    /// Its path without the directory every file shares.
    pub name: String,
    /// Its format.
    pub format: String,
    /// Bytes read per second between the readings.
    pub rate: f64,
    /// Bytes not read yet.
    pub lag: u64,
    /// Calls waiting for their result.
    pub pending: u64,
    /// Findings since `top` started looking.
    pub findings: u64,
    /// Whether a handle is open.
    pub open: bool,
}

/// What the screen shows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct View {
    /// Files tracked, and open.
    pub files_watched: u64,
    /// Files with an open handle.
    pub open_files: u64,
    /// Bytes written and not read yet.
    pub lag_bytes: u64,
    /// Age of the oldest unread bytes.
    pub oldest_unread_seconds: u64,
    /// Lines read per second, and in all.
    pub lines_per_s: f64,
    /// Lines read since the daemon started.
    pub lines_total: u64,
    /// Findings per second by kind, with each kind's total; most frequent first.
    pub findings: Vec<(String, f64, u64)>,
    /// Tool calls waiting for their result.
    pub pending_calls: u64,
    /// Orphan calls since the daemon started.
    pub orphan_calls: u64,
    /// Compactions since the daemon started, and per minute.
    pub compactions: u64,
    /// Compactions per minute.
    pub compactions_per_min: f64,
    /// Tokens per minute by model, most first, with what they cost per hour (US dollars; 0
    /// for a model the built-in prices do not have).
    pub tokens_per_min: Vec<(String, f64, f64)>,
    /// What the tokens read since the daemon started cost, in US dollars.
    pub cost_total: f64,
    /// The files, sorted and filtered.
    pub files: Vec<FileRow>,
    /// Files left out by the filter.
    pub hidden: usize,
}

fn rate(now: f64, before: f64, dt: f64) -> f64 {
    if dt <= 0.0 {
        0.0
    } else {
        ((now - before) / dt).max(0.0)
    }
}

/// The directory every path shares (ending with `/`), or nothing.
fn common_dir(paths: &[&str]) -> usize {
    let Some(first) = paths.first() else { return 0 };
    let mut len = first.rfind('/').map_or(0, |i| i + 1);
    for p in &paths[1..] {
        while len > 0 && !(p.len() >= len && p.as_bytes()[..len] == first.as_bytes()[..len]) {
            len = first[..len - 1].rfind('/').map_or(0, |i| i + 1);
        }
    }
    len
}

/// The view of `now`, with rates since `before` (none: the first reading, rates 0), the
/// files sorted by `sort` and kept when their path contains `filter`.
pub fn view(before: Option<&Reading>, now: &Reading, sort: SortBy, filter: &str) -> View {
    let m = &now.metrics;
    let dt = before.map_or(0.0, |b| now.at - b.at);
    let prev = |f: &dyn Fn(&Metrics) -> f64| before.map_or_else(|| f(m), |b| f(&b.metrics));
    let t = crate::telemetry::LINES_READ;
    // Per label value of a counter: (value, its total now, its rate per second since `before`).
    let rates_by = |name: &str, label: &str| -> Vec<(String, f64, f64)> {
        let before_by = before.map(|b| b.metrics.by(name, label));
        m.by(name, label)
            .into_iter()
            .map(|(k, v)| {
                let b = before_by.as_ref().map_or(v, |p| p.get(&k).copied().unwrap_or(0.0));
                let r = rate(v, b, dt);
                (k, v, r)
            })
            .collect()
    };
    let mut findings: Vec<(String, f64, u64)> = rates_by(crate::telemetry::FINDINGS, "kind").into_iter().map(|(k, v, r)| (k, r, v as u64)).collect();
    findings.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)));
    let cost: BTreeMap<String, f64> = rates_by(crate::telemetry::COST, "model").into_iter().map(|(k, _, r)| (k, r * 3600.0 / 1e6)).collect();
    let mut tokens: Vec<(String, f64, f64)> =
        rates_by(crate::telemetry::TOKENS, "model").into_iter().map(|(k, _, r)| (k.clone(), r * 60.0, cost.get(&k).copied().unwrap_or(0.0))).collect();
    tokens.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let compactions = m.sum(crate::telemetry::COMPACTIONS);

    let paths: Vec<&str> = now.stats.files.iter().map(|f| f.path.as_str()).collect();
    let cut = common_dir(&paths);
    let before_files: BTreeMap<&str, &FileStats> = before.map(|b| b.stats.files.iter().map(|f| (f.path.as_str(), f)).collect()).unwrap_or_default();
    let mut files: Vec<FileRow> = Vec::new();
    let mut hidden = 0;
    for f in &now.stats.files {
        if !filter.is_empty() && !f.path.contains(filter) {
            hidden += 1;
            continue;
        }
        let b = before_files.get(f.path.as_str()).map_or(f.offset, |b| b.offset);
        files.push(FileRow {
            name: f.path[cut..].to_owned(),
            format: f.format.clone(),
            rate: if f.offset >= b { rate(f.offset as f64, b as f64, dt) } else { 0.0 },
            lag: f.lag,
            pending: f.pending,
            findings: f.findings,
            open: f.open,
        });
    }
    files.sort_by(|a, b| {
        let key = match sort {
            SortBy::Rate => b.rate.total_cmp(&a.rate),
            SortBy::Lag => b.lag.cmp(&a.lag),
            SortBy::Findings => b.findings.cmp(&a.findings),
            SortBy::Pending => b.pending.cmp(&a.pending),
            SortBy::Name => std::cmp::Ordering::Equal,
        };
        key.then_with(|| a.name.cmp(&b.name))
    });
    View {
        files_watched: m.sum(crate::telemetry::FILES_WATCHED) as u64,
        open_files: m.sum(crate::telemetry::OPEN_FILES) as u64,
        lag_bytes: m.sum(crate::telemetry::SOURCE_LAG_BYTES) as u64,
        oldest_unread_seconds: m.sum(crate::telemetry::OLDEST_UNREAD_SECONDS) as u64,
        lines_per_s: rate(m.sum(t), prev(&|x: &Metrics| x.sum(t)), dt),
        lines_total: m.sum(t) as u64,
        findings,
        pending_calls: m.sum(crate::telemetry::PENDING_TOOL_CALLS) as u64,
        orphan_calls: m.sum(crate::telemetry::ORPHAN_TOOL_CALLS) as u64,
        compactions: compactions as u64,
        compactions_per_min: rate(compactions, prev(&|x: &Metrics| x.sum(crate::telemetry::COMPACTIONS)), dt) * 60.0,
        tokens_per_min: tokens,
        cost_total: m.sum(crate::telemetry::COST) / 1e6,
        files,
        hidden,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP transcriptd_lines_read_total Lines read.
# TYPE transcriptd_lines_read_total counter
transcriptd_lines_read_total{format="claude-code"} 100
transcriptd_lines_read_total{format="codex"} 50
transcriptd_findings_total{kind="orphan_call",severity="error"} 3
transcriptd_findings_total{kind="orphan_call",severity="warning"} 2
transcriptd_findings_total{kind="malformed_line",severity="error"} 10
transcriptd_tokens_total{model="claude-x",type="input"} 1000
transcriptd_tokens_total{model="claude-x",type="output"} 200
transcriptd_tokens_total{model="a \"quoted\", model",type="output"} 5
transcriptd_files_watched 4
transcriptd_compactions_total{format="claude-code"} 1
"#;

    fn file(path: &str, offset: u64, lag: u64) -> FileStats {
        FileStats { path: path.into(), format: "claude-code".into(), size: offset + lag, offset, lag, open: true, pending: 0, findings: offset / 10 }
    }

    #[test]
    fn prometheus_text_parses() {
        let m = Metrics::parse(TEXT);
        assert_eq!(m.sum("transcriptd_lines_read_total"), 150.0);
        assert_eq!(m.by("transcriptd_findings_total", "kind").get("orphan_call"), Some(&5.0));
        assert_eq!(m.by("transcriptd_tokens_total", "model").get("a \"quoted\", model"), Some(&5.0));
        assert_eq!(m.sum("transcriptd_files_watched"), 4.0);
        assert_eq!(m.sum("nothing"), 0.0);
    }

    #[test]
    fn rates_between_two_readings_sorted_and_filtered() {
        let a = Reading {
            at: 10.0,
            metrics: Metrics::parse(TEXT),
            stats: Stats { time_ms: 1, files: vec![file("/r/p/a.jsonl", 0, 0), file("/r/q/b.jsonl", 100, 0)] },
        };
        let text2 = TEXT.replace("} 100", "} 300").replace("kind=\"malformed_line\",severity=\"error\"} 10", "kind=\"malformed_line\",severity=\"error\"} 30");
        let b = Reading {
            at: 12.0,
            metrics: Metrics::parse(&text2),
            stats: Stats { time_ms: 2, files: vec![file("/r/p/a.jsonl", 1000, 50), file("/r/q/b.jsonl", 100, 7)] },
        };
        let v = view(Some(&a), &b, SortBy::Rate, "");
        assert_eq!(v.lines_per_s, 100.0);
        assert_eq!(v.lines_total, 350);
        assert_eq!(v.findings[0], ("malformed_line".into(), 10.0, 30));
        assert_eq!(v.findings[1], ("orphan_call".into(), 0.0, 5));
        assert_eq!(v.files_watched, 4);
        assert_eq!(v.files.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["p/a.jsonl", "q/b.jsonl"]);
        assert_eq!(v.files[0].rate, 500.0);
        let by_lag = view(Some(&a), &b, SortBy::Lag, "");
        assert_eq!(by_lag.files[0].lag, 50);
        let by_name = view(Some(&a), &b, SortBy::Name, "b.json");
        assert_eq!((by_name.files.len(), by_name.hidden), (1, 1));
        // The first reading: totals, no rates.
        let first = view(None, &a, SortBy::Rate, "");
        assert_eq!((first.lines_per_s, first.lines_total), (0.0, 150));
        assert_eq!(SortBy::Name.next(), SortBy::Rate);
    }
}
