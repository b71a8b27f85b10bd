//! Charts as inline SVG, templated with maud (every label and title is escaped by the template
//! engine: tool and model names come from transcripts).
//!
//! Each drawn value is a `rect` with `data-chart` (the chart), `data-key` (the row or period),
//! `data-series` (the stacked series) and `data-value` (the number), and a `title` that a
//! browser shows on hover: tests read the numbers back from the DOM. Values of zero are not
//! drawn. Layout is computed here; the page's stylesheet only colours text.

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

/// At most `max` characters of `s`, its end kept: `…` and the last `max - 1` (a path's file
/// name is what tells paths apart).
pub fn shorten_start(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_owned();
    }
    let skip = n - (max - 1);
    let at = s.char_indices().nth(skip).map_or(s.len(), |(i, _)| i);
    format!("…{}", &s[at..])
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
            rect x=(px(s.x)) y=(px(s.y)) width=(px(s.w.max(1.0))) height=(px(s.h.max(1.0))) fill=(s.series.color)
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
    for (i, r) in rows.iter().enumerate() {
        let y = 3.0 + STEP * i as f64;
        let mut x = LABEL;
        for (s, &v) in series.iter().zip(&r.values) {
            if v == 0 {
                continue;
            }
            let w = plot * v as f64 / max;
            segments.push(Segment { x, y, w, h: BAR, series: s, key: &r.key, value: v, title: format!("{}: {} {}", r.label(), number(v), s.name) });
            x += w;
        }
    }
    html! {
        svg.chart xmlns="http://www.w3.org/2000/svg" width=(WIDTH) height=(height) viewBox={ "0 0 " (WIDTH) " " (height) } role="img" aria-label=(title) {
            @for (i, r) in rows.iter().enumerate() {
                @let y = 3.0 + STEP * i as f64 + BAR - 3.0;
                text.label x=(LABEL - 6.0) y=(px(y)) text-anchor="end" { title { (r.label()) } (shorten(r.label(), 36)) }
                @let total: u64 = r.values.iter().sum();
                text.value x=(px(LABEL + 6.0 + plot * total as f64 / max)) y=(px(y)) { (number(total)) }
            }
            (rects(chart, &segments))
        }
        (legend(series))
    }
}

/// Stacked columns, one per period, with a value axis on the left. Labels are thinned out so
/// that they do not overlap.
pub fn columns(chart: &str, title: &str, series: &[Series<'_>], periods: &[Row]) -> Markup {
    const LEFT: f64 = 80.0;
    const TOP: f64 = 12.0;
    const PLOT: f64 = 200.0;
    const BOTTOM: f64 = 36.0;
    let height = TOP + PLOT + BOTTOM;
    let plot_w = WIDTH - LEFT - 10.0;
    let n = periods.len().max(1);
    let step = plot_w / n as f64;
    let bar = (step * 0.8).max(1.0);
    let max = periods.iter().map(|r| r.values.iter().sum::<u64>()).max().unwrap_or(0).max(1);
    let scale = PLOT / max as f64;
    let longest = periods.iter().map(|p| p.label().chars().count()).max().unwrap_or(4) as f64;
    let every = ((longest * 7.0 + 8.0) / step).ceil().max(1.0) as usize;
    let mut segments = Vec::new();
    for (i, p) in periods.iter().enumerate() {
        let x = LEFT + step * i as f64 + (step - bar) / 2.0;
        let mut y = TOP + PLOT;
        for (s, &v) in series.iter().zip(&p.values) {
            if v == 0 {
                continue;
            }
            let h = v as f64 * scale;
            y -= h;
            segments.push(Segment { x, y, w: bar, h, series: s, key: &p.key, value: v, title: format!("{}: {} {}", p.label(), number(v), s.name) });
        }
    }
    html! {
        svg.chart xmlns="http://www.w3.org/2000/svg" width=(WIDTH) height=(height) viewBox={ "0 0 " (WIDTH) " " (height) } role="img" aria-label=(title) {
            line.axis x1=(LEFT) y1=(TOP + PLOT) x2=(WIDTH - 10.0) y2=(TOP + PLOT) {}
            line.grid x1=(LEFT) y1=(TOP) x2=(WIDTH - 10.0) y2=(TOP) {}
            line.grid x1=(LEFT) y1=(TOP + PLOT / 2.0) x2=(WIDTH - 10.0) y2=(TOP + PLOT / 2.0) {}
            text.value x=(LEFT - 6.0) y=(TOP + 4.0) text-anchor="end" { (number(max)) }
            text.value x=(LEFT - 6.0) y=(TOP + PLOT / 2.0 + 4.0) text-anchor="end" { (number(max / 2)) }
            text.value x=(LEFT - 6.0) y=(TOP + PLOT + 4.0) text-anchor="end" { "0" }
            @for (i, p) in periods.iter().enumerate() {
                @if i % every == 0 {
                    text.label x=(px(LEFT + step * (i as f64 + 0.5))) y=(TOP + PLOT + 16.0) text-anchor="middle" { (p.label()) }
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
        assert_eq!(shorten_start("/a/b/c.jsonl", 8), "…c.jsonl");
        assert_eq!(shorten_start("/a/b/c.jsonl", 12), "/a/b/c.jsonl");
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
