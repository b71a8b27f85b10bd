//! `transcriptd top`: a full-screen view of a running daemon, read from its listener every
//! `--interval`: `/metrics` (the figures, and rates between two readings) and `/stats` (each
//! file's offset, lag and pending calls). [`model`] computes what is shown, [`view`] lays it
//! out (both without a terminal); this module owns the terminal (crossterm: raw mode, the
//! alternate screen, restored on every exit) and the keys.

pub mod model;
pub mod view;

use super::client;
use super::Exit;
use anyhow::Context;
use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use crossterm::terminal;
use model::{Metrics, Reading};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Arguments of `transcriptd top`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The daemon's listener (the prometheus sink's address).
    #[arg(long, value_name = "ADDR", default_value = client::DEFAULT_ADDR)]
    pub addr: String,
    /// A file whose first line is the bearer token the listener asks for (the prometheus
    /// sink's `token_file`).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// Time between two readings (rates are over it).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = humantime::parse_duration)]
    pub interval: Duration,
}

/// What a key does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing.
    None,
    /// Quit.
    Quit,
    /// Draw again (the screen changed: sort, filter).
    Redraw,
}

/// Applies a key to the screen's state (pure: the tests drive it).
pub fn on_key(screen: &mut view::Screen, code: KeyCode, mods: KeyModifiers) -> Action {
    if mods.contains(KeyModifiers::CONTROL) && code == KeyCode::Char('c') {
        return Action::Quit;
    }
    if let Some(t) = &mut screen.typing {
        match code {
            KeyCode::Enter => screen.filter = screen.typing.take().unwrap_or_default(),
            KeyCode::Esc => {
                screen.typing = None;
                screen.filter.clear();
            }
            KeyCode::Backspace => {
                t.pop();
            }
            KeyCode::Char(c) => t.push(c),
            _ => return Action::None,
        }
        return Action::Redraw;
    }
    match code {
        KeyCode::Char('q') | KeyCode::Esc => Action::Quit,
        KeyCode::Char('s') => {
            screen.sort = screen.sort.next();
            Action::Redraw
        }
        KeyCode::Char('/') => {
            screen.typing = Some(String::new());
            Action::Redraw
        }
        _ => Action::None,
    }
}

/// Puts the terminal back as it was, however `top` ends.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = crossterm::execute!(std::io::stdout(), terminal::LeaveAlternateScreen, crossterm::cursor::Show);
        let _ = terminal::disable_raw_mode();
    }
}

async fn read(addr: &str, token: Option<&str>, at: Instant, start: Instant) -> anyhow::Result<Reading> {
    let timeout = Duration::from_secs(3);
    let metrics = client::get_text(addr, "/metrics", token, timeout).await?;
    let stats = client::get_text(addr, "/stats", token, timeout).await?;
    Ok(Reading {
        at: (at - start).as_secs_f64(),
        metrics: Metrics::parse(&metrics),
        stats: serde_json::from_str(&stats).context("/stats is not what top reads")?,
    })
}

/// Runs `transcriptd top` until `q`.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    if !std::io::stdout().is_terminal() {
        anyhow::bail!("top needs a terminal; for a pipe, `transcriptd tap` gives the records and /metrics the figures");
    }
    let token = client::read_token(args.token_file.as_deref())?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
    let start = Instant::now();
    // A first reading before the screen changes: a daemon that is not there is said plainly.
    let mut now = rt.block_on(read(&args.addr, token.as_deref(), Instant::now(), start))?;
    let mut before: Option<Reading> = None;
    let mut screen = view::Screen { addr: client::authority(&args.addr).to_owned(), ..view::Screen::default() };
    terminal::enable_raw_mode().context("raw mode")?;
    let _restore = Restore;
    crossterm::execute!(std::io::stdout(), terminal::EnterAlternateScreen, crossterm::cursor::Hide)?;
    let mut term = ratatui::Terminal::new(ratatui::backend::CrosstermBackend::new(std::io::stdout()))?;
    let mut next = Instant::now() + args.interval;
    loop {
        let v = model::view(before.as_ref(), &now, screen.sort, &screen.filter);
        term.draw(|f| view::draw(f, &v, &screen))?;
        // Keys until the next reading.
        loop {
            let wait = next.saturating_duration_since(Instant::now());
            if wait.is_zero() {
                break;
            }
            if event::poll(wait)? {
                match event::read()? {
                    Event::Key(k) if k.kind != KeyEventKind::Release => match on_key(&mut screen, k.code, k.modifiers) {
                        Action::Quit => return Ok(Exit::Clean),
                        Action::Redraw => break,
                        Action::None => {}
                    },
                    Event::Resize(..) => break,
                    _ => {}
                }
            }
        }
        if Instant::now() >= next {
            next = Instant::now() + args.interval;
            match rt.block_on(read(&args.addr, token.as_deref(), Instant::now(), start)) {
                Ok(r) => {
                    screen.error = None;
                    before = Some(std::mem::replace(&mut now, r));
                }
                Err(e) => screen.error = Some(format!("{e:#}").chars().take(60).collect()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::model::SortBy;
    use super::*;

    #[test]
    fn keys_sort_filter_and_quit() {
        let mut s = view::Screen::default();
        let none = KeyModifiers::NONE;
        assert_eq!(on_key(&mut s, KeyCode::Char('s'), none), Action::Redraw);
        assert_eq!(s.sort, SortBy::Lag);
        on_key(&mut s, KeyCode::Char('/'), none);
        for c in "b.jsonX".chars() {
            on_key(&mut s, KeyCode::Char(c), none);
        }
        on_key(&mut s, KeyCode::Backspace, none);
        assert_eq!(on_key(&mut s, KeyCode::Char('q'), none), Action::Redraw, "q is typed into the filter");
        on_key(&mut s, KeyCode::Backspace, none);
        on_key(&mut s, KeyCode::Enter, none);
        assert_eq!((s.filter.as_str(), s.typing.is_none()), ("b.json", true));
        assert_eq!(on_key(&mut s, KeyCode::Char('q'), none), Action::Quit);
        assert_eq!(on_key(&mut s, KeyCode::Char('c'), KeyModifiers::CONTROL), Action::Quit);
    }
}
