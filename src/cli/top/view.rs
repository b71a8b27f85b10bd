//! The layout of `top`'s screen, drawn with ratatui into any backend: the terminal, or a
//! test buffer. It fits 80×24: a title line, the daemon's figures beside the findings by
//! kind, tokens by model, the busiest files, and a line of keys.

use super::model::{SortBy, View};
use crate::cli::output::human_bytes;
use crate::cli::safe;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};
use ratatui::Frame;

/// What the screen needs besides the view.
#[derive(Debug, Clone, Default)]
pub struct Screen {
    /// The daemon's address.
    pub addr: String,
    /// The sort key.
    pub sort: SortBy,
    /// The filter applied.
    pub filter: String,
    /// The filter being typed (after `/`), if it is.
    pub typing: Option<String>,
    /// The last error reaching the daemon, if the last reading failed.
    pub error: Option<String>,
}

fn num(v: f64) -> String {
    if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Draws `view` on `frame`.
pub fn draw(frame: &mut Frame, view: &View, screen: &Screen) {
    let area = frame.area();
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Length(1), Constraint::Length(8), Constraint::Length(4), Constraint::Min(3), Constraint::Length(1)])
        .split(area);
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let title = match &screen.error {
        Some(e) => format!("transcriptd top - {} - {}", screen.addr, safe::line(e)),
        None => format!("transcriptd top - {}", screen.addr),
    };
    frame.render_widget(Paragraph::new(Line::styled(title, bold)), rows[0]);

    let top = Layout::default().direction(Direction::Horizontal).constraints([Constraint::Percentage(45), Constraint::Percentage(55)]).split(rows[1]);
    let daemon = vec![
        Line::from(format!("files watched {:>8}  open {:>5}", view.files_watched, view.open_files)),
        Line::from(format!("lag       {:>12}  {:>5}s", human_bytes(view.lag_bytes), view.oldest_unread_seconds)),
        Line::from(format!("lines/s   {:>12}", num(view.lines_per_s))),
        Line::from(format!("lines     {:>12}", view.lines_total)),
        Line::from(format!("pending calls {:>8}", view.pending_calls)),
        Line::from(format!("orphan calls  {:>8}", view.orphan_calls)),
    ];
    frame.render_widget(Paragraph::new(daemon).block(Block::default().borders(Borders::ALL).title("daemon")), top[0]);
    let kinds: Vec<Row> = view.findings.iter().map(|(k, r, n)| Row::new(vec![safe::line(k).into_owned(), num(*r), n.to_string()])).collect();
    let kinds = Table::new(kinds, [Constraint::Min(14), Constraint::Length(8), Constraint::Length(8)])
        .header(Row::new(vec!["kind", "/s", "total"]).style(bold))
        .block(Block::default().borders(Borders::ALL).title("findings"));
    frame.render_widget(kinds, top[1]);

    let mid = Layout::default().direction(Direction::Horizontal).constraints([Constraint::Percentage(45), Constraint::Percentage(55)]).split(rows[2]);
    let comp = vec![Line::from(format!("total {:>8}", view.compactions)), Line::from(format!("/min  {:>8}", num(view.compactions_per_min)))];
    frame.render_widget(Paragraph::new(comp).block(Block::default().borders(Borders::ALL).title("compactions")), mid[0]);
    let tokens: Vec<Row> = view.tokens_per_min.iter().map(|(m, r, c)| Row::new(vec![safe::line(m).into_owned(), num(*r), format!("{c:.2}")])).collect();
    let tokens = Table::new(tokens, [Constraint::Min(14), Constraint::Length(10), Constraint::Length(9)])
        .header(Row::new(vec!["model", "tokens/min", "$/h"]).style(bold))
        .block(Block::default().borders(Borders::ALL).title(format!("by model (${:.2} since start)", view.cost_total)));
    frame.render_widget(tokens, mid[1]);

    draw_files(frame, rows[3], view, screen);

    let keys = match &screen.typing {
        Some(t) => format!("filter: {t}_   (Enter apply, Esc clear)"),
        None => format!(
            "q quit  s sort ({})  / filter{}",
            screen.sort.name(),
            if screen.filter.is_empty() { String::new() } else { format!(" ({})", safe::line(&screen.filter)) }
        ),
    };
    frame.render_widget(Paragraph::new(Line::styled(keys, Style::default().add_modifier(Modifier::REVERSED))), rows[4]);
}

/// `name` in `width` columns: a name too long loses its start (directories) behind an
/// ellipsis, so that what tells sessions apart, the file stem at its end, stays in view.
pub fn fit_left(name: &str, width: usize) -> String {
    let n = name.chars().count();
    if n <= width {
        return name.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let keep: String = name.chars().skip(n - (width - 1)).collect();
    format!("…{keep}")
}

/// Widths of the files table's columns after the first (read, lag, pending, findings).
const FILE_COLUMNS: [u16; 4] = [12, 10, 7, 8];

fn draw_files(frame: &mut Frame, area: Rect, view: &View, screen: &Screen) {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    // The name column: what the borders, the other columns and the spaces between leave.
    let width = usize::from(area.width.saturating_sub(2 + FILE_COLUMNS.iter().sum::<u16>() + FILE_COLUMNS.len() as u16)).max(20);
    let rows: Vec<Row> = view
        .files
        .iter()
        .map(|f| {
            Row::new(vec![
                fit_left(&safe::line(&f.name), width),
                format!("{}/s", human_bytes(f.rate as u64)),
                human_bytes(f.lag),
                f.pending.to_string(),
                f.findings.to_string(),
            ])
        })
        .collect();
    let hidden = if view.hidden > 0 { format!(", {} hidden", view.hidden) } else { String::new() };
    let title = format!("files by {} ({} shown{hidden})", screen.sort.name(), view.files.len());
    let table = Table::new(
        rows,
        [
            Constraint::Min(20),
            Constraint::Length(FILE_COLUMNS[0]),
            Constraint::Length(FILE_COLUMNS[1]),
            Constraint::Length(FILE_COLUMNS[2]),
            Constraint::Length(FILE_COLUMNS[3]),
        ],
    )
    .header(Row::new(vec!["file", "read", "lag", "pending", "findings"]).style(bold))
    .block(Block::default().borders(Borders::ALL).title(title));
    frame.render_widget(table, area);
}

#[cfg(test)]
mod tests {
    use super::super::model::FileRow;
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    /// The screen as text, one line per row.
    pub fn render(view: &View, screen: &Screen, w: u16, h: u16) -> String {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| draw(f, view, screen)).unwrap();
        let buf = t.backend().buffer().clone();
        (0..h).map(|y| (0..w).map(|x| buf[(x, y)].symbol().to_owned()).collect::<String>().trim_end().to_owned()).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn fits_80_by_24() {
        let view = View {
            files_watched: 3,
            open_files: 2,
            lag_bytes: 2048,
            lines_per_s: 1234.5,
            lines_total: 99_999,
            findings: vec![("orphan_call".into(), 1.5, 12), ("malformed_line".into(), 0.0, 3)],
            pending_calls: 4,
            orphan_calls: 12,
            compactions: 2,
            tokens_per_min: vec![("claude-sonnet-4".into(), 1200.0, 0.36)],
            cost_total: 1.5,
            files: (0..20)
                .map(|i| FileRow {
                    name: format!("project/session-{i}.jsonl"),
                    format: "claude-code".into(),
                    rate: 100.0 * i as f64,
                    lag: i,
                    pending: 0,
                    findings: i,
                    open: true,
                })
                .collect(),
            ..View::default()
        };
        let text = render(&view, &Screen { addr: "127.0.0.1:9464".into(), ..Screen::default() }, 80, 24);
        assert_eq!(text.lines().count(), 24);
        for want in ["files watched        3", "orphan_call", "1234", "claude-sonnet-4", "project/session-0.jsonl", "q quit  s sort (bytes/s)"] {
            assert!(text.contains(want), "{want:?} in\n{text}");
        }
        assert!(text.lines().all(|l| l.chars().count() <= 80));
        // Names too long for the column keep their end, the session id (issue 30).
        let long = View {
            files: (0..2)
                .map(|i| FileRow { name: format!("-home-someone-work-a-long-project-name/0197f3a2-session-{i}.jsonl"), ..FileRow::default() })
                .collect(),
            ..View::default()
        };
        let text = render(&long, &Screen::default(), 80, 24);
        for i in 0..2 {
            let row = text.lines().find(|l| l.contains(&format!("/0197f3a2-session-{i}.jsonl"))).unwrap_or_else(|| panic!("session {i}:\n{text}"));
            assert!(row.starts_with("│…"), "{row}");
        }
    }

    #[test]
    fn names_are_cut_from_the_left() {
        assert_eq!(fit_left("abc", 3), "abc");
        assert_eq!(fit_left("dir/abcdef", 5), "…cdef");
        assert_eq!(fit_left("dir/é", 2), "…é");
    }
}
