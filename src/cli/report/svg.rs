//! Charts as inline SVG, templated with maud (every label and title is escaped by the template
//! engine: tool and model names come from transcripts).
//!
//! Each drawn value is a `rect` with `data-chart` (the chart), `data-key` (the row or period),
//! `data-series` (the stacked series) and `data-value` (the number), and a `title` that a
//! browser shows on hover: tests read the numbers back from the DOM. Values of zero are not
//! drawn; any other value is drawn at least [`MIN_SEGMENT`] px thick, so that one error beside
//! 600 warnings is seen (the room it takes comes out of the longest segment of its bar, so a
//! bar's length stays its total's). A column chart's value axis has round ticks (0, then a
//! step of 1, 2 or 5 times a power of ten) and the columns are drawn to that scale. Layout is
//! computed here; the page's stylesheet only colours text.

use maud::{html, Markup};

/// One stacked series: its name (the `data-series` attribute and the legend) and colour.
#[derive(Debug, Clone, Copy)]
pub struct Series<'a> {
    /// Name.
    pub name: &'a str,
    /// Fill colour (CSS).
    pub color: &'a str,
}

/// One row of a bar chart, or one period of a column chart: a value per series.
#[derive(Debug, Clone)]
pub struct Row {
    /// The `data-key` attribute.
    pub key: String,
    /// What is shown (the key when empty).
    pub label: String,
    /// One value per series.
    pub values: Vec<u64>,
}

impl Row {
    /// A row whose label is its key.
    pub fn new(key: impl Into<String>, values: Vec<u64>) -> Self {
        Row { key: key.into(), label: String::new(), values }
    }

    fn label(&self) -> &str {
        if self.label.is_empty() {
            &self.key
        } else {
            &self.label
        }
    }
}

/// Width of every chart, in CSS pixels.
const WIDTH: f64 = 760.0;

/// `n` with thousands separators: `12,345`.
pub fn number(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// At most `max` characters of `s`, with `…` when cut.
pub fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// At most `max` characters of `s`, its middle cut out: its start and, longer, its end (a
/// path's file name is what tells paths apart), joined by `…`.
pub fn shorten_middle(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max || max < 3 {
        return s.to_owned();
    }
    let head = (max - 1) / 3;
    let tail = max - 1 - head;
    let start: String = s.chars().take(head).collect();
    let end: String = s.chars().skip(n - tail).collect();
    format!("{start}…{end}")
}

/// The thinnest a non-zero value is drawn, in CSS pixels.
pub const MIN_SEGMENT: f64 = 4.0;

/// The lengths at which the values of one bar or column are drawn: each in proportion to its
/// value (`per_unit` px each), none that is not zero thinner than [`MIN_SEGMENT`]. What the thin
/// ones gain is taken from the longest, so the bar's length stays its total's (or the sum of
/// the minimums, when that is longer).
fn lengths(values: &[u64], per_unit: f64) -> Vec<f64> {
    let raw: Vec<f64> = values.iter().map(|&v| v as f64 * per_unit).collect();
    let mut out: Vec<f64> = values.iter().zip(&raw).map(|(&v, &r)| if v == 0 { 0.0 } else { r.max(MIN_SEGMENT) }).collect();
    let drawn = values.iter().filter(|v| **v > 0).count() as f64;
    let total = raw.iter().sum::<f64>().max(drawn * MIN_SEGMENT);
    let excess = out.iter().sum::<f64>() - total;
    if excess > 0.0 {
        if let Some(longest) = (0..out.len()).max_by(|&a, &b| out[a].total_cmp(&out[b])) {
            out[longest] = (out[longest] - excess).max(MIN_SEGMENT);
        }
    }
    out
}

/// The ticks of a value axis from 0 to at least `max`: at most six intervals of a step of 1, 2
/// or 5 times a power of ten, the last tick the first multiple of the step at or above `max`.
/// Returns the step and the last tick.
pub fn nice_ticks(max: u64) -> (u64, u64) {
    let max = max.max(1);
    let mut mag: u64 = 1;
    loop {
        for lead in [1u64, 2, 5] {
            let step = lead.saturating_mul(mag);
            if step.saturating_mul(6) >= max {
                return (step, max.div_ceil(step).saturating_mul(step));
            }
        }
        mag = mag.saturating_mul(10);
    }
}

/// Rounds a coordinate to 0.1 px (smaller pages).
fn px(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// A drawn segment.
struct Segment<'a> {
    x: f64,
    y: f64,
    w: f64,
    h: f64,
    series: &'a Series<'a>,
    key: &'a str,
    value: u64,
    title: String,
}

fn rects(chart: &str, segments: &[Segment<'_>]) -> Markup {
    html! {
        @for s in segments {
            rect x=(px(s.x)) y=(px(s.y)) width=(px(s.w)) height=(px(s.h)) fill=(s.series.color)
                data-chart=(chart) data-key=(s.key) data-series=(s.series.name) data-value=(s.value) { title { (s.title) } }
        }
    }
}

/// The legend of a chart's series.
pub fn legend(series: &[Series<'_>]) -> Markup {
    html! {
        @if series.len() > 1 {
            p.legend {
                @for s in series {
                    span.swatch style={ "background:" (s.color) } {} (s.name) " "
                }
            }
        }
    }
}

/// Horizontal stacked bars, one row each, labelled on the left with their total on the right.
pub fn bars(chart: &str, title: &str, series: &[Series<'_>], rows: &[Row]) -> Markup {
    const LABEL: f64 = 250.0;
    const VALUE: f64 = 90.0;
    const STEP: f64 = 22.0;
    const BAR: f64 = 15.0;
    let plot = WIDTH - LABEL - VALUE;
    let max = rows.iter().map(|r| r.values.iter().sum::<u64>()).max().unwrap_or(0).max(1) as f64;
    let height = STEP * rows.len() as f64 + 6.0;
    let mut segments = Vec::new();
    let mut ends = Vec::with_capacity(rows.len());
    for (i, r) in rows.iter().enumerate() {
        let y = 3.0 + STEP * i as f64;
        let mut x = LABEL;
        for ((s, &v), w) in series.iter().zip(&r.values).zip(lengths(&r.values, plot / max)) {
            if v == 0 {
                continue;
            }
            segments.push(Segment { x, y, w, h: BAR, series: s, key: &r.key, value: v, title: format!("{}: {} {}", r.label(), number(v), s.name) });
            x += w;
        }
        ends.push(x);
    }
    html! {
        svg.chart.bars xmlns="http://www.w3.org/2000/svg" width=(WIDTH) height=(height) viewBox={ "0 0 " (WIDTH) " " (height) } role="img" aria-label=(title) {
            @for (i, r) in rows.iter().enumerate() {
                @let y = 3.0 + STEP * i as f64 + BAR - 3.0;
                text.label x=(LABEL - 6.0) y=(px(y)) text-anchor="end" { title { (r.label()) } (shorten(r.label(), 36)) }
                @let total: u64 = r.values.iter().sum();
                text.value x=(px(ends[i] + 6.0)) y=(px(y)) { (number(total)) }
            }
            (rects(chart, &segments))
        }
        (legend(series))
    }
}

/// Stacked columns, one per period, with a value axis on the left at round ticks, and each
/// column's total above it where every one fits. Period labels are thinned out so that they do not
/// overlap.
pub fn columns(chart: &str, title: &str, series: &[Series<'_>], periods: &[Row]) -> Markup {
    const TOP: f64 = 18.0;
    const PLOT: f64 = 200.0;
    const BOTTOM: f64 = 36.0;
    /// The width of a character of the chart's 12 px text, generously.
    const CHAR: f64 = 7.0;
    let height = TOP + PLOT + BOTTOM;
    let max = periods.iter().map(|r| r.values.iter().sum::<u64>()).max().unwrap_or(0);
    let (step, top) = nice_ticks(max);
    let ticks: Vec<u64> = (0..=top / step).map(|i| i * step).collect();
    let left = (number(top).chars().count() as f64 * CHAR + 14.0).max(40.0);
    let plot_w = WIDTH - left - 10.0;
    let n = periods.len().max(1);
    let step_x = plot_w / n as f64;
    let bar = (step_x * 0.8).max(1.0);
    let scale = PLOT / top as f64;
    let y_of = |v: u64| px(TOP + PLOT - v as f64 * scale);
    let longest = periods.iter().map(|p| p.label().chars().count()).max().unwrap_or(4) as f64;
    let every = ((longest * CHAR + 8.0) / step_x).ceil().max(1.0) as usize;
    // Each column's total above it, when every one fits (some but not others would read as
    // missing values).
    let totals = periods.iter().all(|p| number(p.values.iter().sum()).chars().count() as f64 * CHAR <= step_x - 2.0);
    let mut segments = Vec::new();
    let mut tops = Vec::with_capacity(periods.len());
    for (i, p) in periods.iter().enumerate() {
        let x = left + step_x * i as f64 + (step_x - bar) / 2.0;
        let mut y = TOP + PLOT;
        for ((s, &v), h) in series.iter().zip(&p.values).zip(lengths(&p.values, scale)) {
            if v == 0 {
                continue;
            }
            y -= h;
            segments.push(Segment { x, y, w: bar, h, series: s, key: &p.key, value: v, title: format!("{}: {} {}", p.label(), number(v), s.name) });
        }
        tops.push(y);
    }
    html! {
        svg.chart.columns xmlns="http://www.w3.org/2000/svg" width=(WIDTH) height=(height) viewBox={ "0 0 " (WIDTH) " " (height) } role="img" aria-label=(title) {
            @for &t in &ticks {
                @if t == 0 { line.axis x1=(px(left)) y1=(y_of(t)) x2=(WIDTH - 10.0) y2=(y_of(t)) {} } @else { line.grid x1=(px(left)) y1=(y_of(t)) x2=(WIDTH - 10.0) y2=(y_of(t)) {} }
                text.tick x=(px(left - 6.0)) y=(px(y_of(t) + 4.0)) text-anchor="end" { (number(t)) }
            }
            @for (i, p) in periods.iter().enumerate() {
                @if i % every == 0 {
                    text.label x=(px(left + step_x * (i as f64 + 0.5))) y=(TOP + PLOT + 16.0) text-anchor="middle" { (p.label()) }
                }
                @let total: u64 = p.values.iter().sum();
                @if totals && total > 0 {
                    text.value x=(px(left + step_x * (i as f64 + 0.5))) y=(px(tops[i] - 4.0)) text-anchor="middle" { (number(total)) }
                }
            }
            (rects(chart, &segments))
        }
        (legend(series))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_labels() {
        assert_eq!(number(0), "0");
        assert_eq!(number(999), "999");
        assert_eq!(number(1000), "1,000");
        assert_eq!(number(1234567), "1,234,567");
        assert_eq!(shorten("abcdef", 3), "abc…");
        assert_eq!(shorten("abc", 3), "abc");
        assert_eq!(shorten("ééé", 2), "éé…");
        assert_eq!(shorten_middle("/a/b/c.jsonl", 12), "/a/b/c.jsonl");
        assert_eq!(shorten_middle("abcdefghijklmnop", 10), "abc…klmnop");
        assert_eq!(shorten_middle("ééééééééé", 4), "é…éé");
        assert_eq!(shorten_middle("abcdefghijklmnop", 10).chars().count(), 10);
    }

    #[test]
    fn ticks_are_round_and_cover_the_maximum() {
        assert_eq!(nice_ticks(0), (1, 1));
        assert_eq!(nice_ticks(1), (1, 1));
        assert_eq!(nice_ticks(17), (5, 20));
        assert_eq!(nice_ticks(671), (200, 800));
        assert_eq!(nice_ticks(1000), (200, 1000));
        assert_eq!(nice_ticks(1001), (200, 1200));
        assert_eq!(nice_ticks(u64::MAX).1, u64::MAX);
        for max in (1..5000).chain([1 << 40, 987_654_321_012]) {
            let (step, top) = nice_ticks(max);
            let mut lead = step;
            while lead % 10 == 0 {
                lead /= 10;
            }
            assert!(matches!(lead, 1 | 2 | 5), "{max}: step {step}");
            assert!(top >= max && top - step < max && top % step == 0 && top / step <= 6, "{max}: {step} {top}");
        }
    }

    #[test]
    fn every_value_is_seen_and_a_bar_keeps_its_length() {
        // One error beside 655 warnings on a 420 px bar.
        let per_unit = 420.0 / 656.0;
        let l = lengths(&[1, 655, 0], per_unit);
        assert_eq!(l[0], MIN_SEGMENT);
        assert_eq!(l[2], 0.0);
        assert!((l.iter().sum::<f64>() - 656.0 * per_unit).abs() < 1e-9, "{l:?}");
        // Only small values: each at the minimum.
        assert_eq!(lengths(&[1, 2], 0.01), vec![MIN_SEGMENT, MIN_SEGMENT]);
        // Large enough values are drawn to scale.
        assert_eq!(lengths(&[10, 20], 1.0), vec![10.0, 20.0]);
    }

    #[test]
    fn every_value_is_a_rect_with_its_number_and_labels_are_escaped() {
        let s = [Series { name: "error", color: "#c00" }, Series { name: "warning", color: "#fa0" }];
        let rows = vec![Row::new("<script>alert(1)</script>", vec![3, 0]), Row::new("b&\"c'", vec![1, 2])];
        for svg in [bars("k", "t", &s, &rows).into_string(), columns("k", "t", &s, &rows).into_string()] {
            assert!(!svg.contains("<script"), "{svg}");
            assert!(svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
            assert!(svg.contains("data-key=\"b&amp;&quot;c'\""), "{svg}");
            assert_eq!(svg.matches("<rect ").count(), 3);
            assert!(svg.contains("data-series=\"warning\" data-value=\"2\""));
            assert!(!svg.contains("data-value=\"0\""));
        }
    }
}
