//! Colour, and the one way a location is written: `path:line: severity: kind: message`, as
//! compilers and ripgrep write it (a finding about the whole file has no line).
//!
//! `--color auto` (the default) colours a stream only when it is a terminal, `NO_COLOR` is not
//! set (to anything but the empty string; <https://no-color.org>) and `TERM` is not `dumb`;
//! `--color always` and `--color never` decide alone. The choice is made once, in `main`, and
//! read by whoever writes ([`stdout`], [`stderr`]); the logs follow [`stderr`] too.

use std::io::IsTerminal;
use std::sync::OnceLock;

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour on a terminal, unless NO_COLOR is set or TERM is dumb.
    #[default]
    Auto,
    /// Always colour (also into a pipe or a file, and whatever NO_COLOR says).
    Always,
    /// Never colour.
    Never,
}

impl ColorChoice {
    /// Whether a stream that is (or is not) a terminal gets colour, with the environment given
    /// by `var` (`NO_COLOR`, `TERM`).
    pub fn decide(self, terminal: bool, var: impl Fn(&str) -> Option<String>) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => terminal && var("NO_COLOR").is_none_or(|v| v.is_empty()) && var("TERM").is_none_or(|t| t != "dumb"),
        }
    }
}

static CHOICE: OnceLock<ColorChoice> = OnceLock::new();

/// Records the `--color` choice (the first call wins).
pub fn init(choice: ColorChoice) {
    let _ = CHOICE.set(choice);
}

fn env(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

/// How to paint standard output.
pub fn stdout() -> Paint {
    Paint { on: CHOICE.get().copied().unwrap_or_default().decide(std::io::stdout().is_terminal(), env) }
}

/// How to paint standard error (messages and logs).
pub fn stderr() -> Paint {
    Paint { on: CHOICE.get().copied().unwrap_or_default().decide(std::io::stderr().is_terminal(), env) }
}

/// Paints words when colour is on; leaves them as they are otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paint {
    /// Whether colour is on.
    pub on: bool,
}

impl Paint {
    /// No colour.
    pub const PLAIN: Paint = Paint { on: false };

    fn wrap(self, code: &str, text: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// A severity word: `error` red, `warning` yellow, anything else (`note`) cyan; bold.
    pub fn severity(self, severity: &str) -> String {
        let code = match severity {
            "error" => "1;31",
            "warning" => "1;33",
            _ => "1;36",
        };
        self.wrap(code, severity)
    }

    /// A location (`path:line:`), bold; controls in it escaped ([`super::safe`]).
    pub fn location(self, text: &str) -> String {
        self.wrap("1", &super::safe::line(text))
    }

    /// `path:line: severity: kind: message` — the line left out when it is 0 (the whole file).
    pub fn at(self, path: &str, line: u64, severity: &str, kind: &str, message: &str) -> String {
        self.note(path, line, severity, &format!("{kind}: {message}"))
    }

    /// `path:line: severity: message`, for what is no finding (and so has no kind); the line left
    /// out when it is 0. Path and message come from transcripts and file names: their controls
    /// are escaped ([`super::safe::line`]) before colour is added.
    pub fn note(self, path: &str, line: u64, severity: &str, message: &str) -> String {
        let place = if line == 0 { format!("{path}:") } else { format!("{path}:{line}:") };
        format!("{} {}: {}", self.location(&place), self.severity(severity), super::safe::line(message))
    }
}

/// Prints `transcriptd: error: MESSAGE` on stderr (what makes a verb exit 2); controls in the
/// message escaped, lines after the first indented ([`super::safe::message`]).
pub fn error(message: impl std::fmt::Display) {
    eprintln!("transcriptd: {}: {}", stderr().severity("error"), super::safe::message(&message.to_string()));
}

/// Prints `transcriptd: warning: MESSAGE` on stderr, as [`error`] does.
pub fn warning(message: impl std::fmt::Display) {
    eprintln!("transcriptd: {}: {}", stderr().severity("warning"), super::safe::message(&message.to_string()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_follows_the_terminal_and_no_color() {
        let none = |_: &str| None;
        assert!(ColorChoice::Auto.decide(true, none));
        assert!(!ColorChoice::Auto.decide(false, none));
        assert!(!ColorChoice::Auto.decide(true, |v: &str| (v == "NO_COLOR").then(|| "1".to_owned())));
        // An empty NO_COLOR does not count (no-color.org).
        assert!(ColorChoice::Auto.decide(true, |v: &str| (v == "NO_COLOR").then(String::new)));
        assert!(!ColorChoice::Auto.decide(true, |v: &str| (v == "TERM").then(|| "dumb".to_owned())));
        assert!(ColorChoice::Always.decide(false, |_: &str| Some("1".to_owned())));
        assert!(!ColorChoice::Never.decide(true, none));
    }

    #[test]
    fn locations_have_one_shape() {
        let p = Paint::PLAIN;
        assert_eq!(p.at("a.jsonl", 3, "error", "orphan_call", "x"), "a.jsonl:3: error: orphan_call: x");
        assert_eq!(p.at("a.jsonl", 0, "error", "missing_transcript", "x"), "a.jsonl: error: missing_transcript: x");
        assert_eq!(Paint { on: true }.severity("error"), "\x1b[1;31merror\x1b[0m");
    }
}
