//! Text from transcripts (and file names) shown on a terminal: every control character is
//! written as a visible escape, so a transcript cannot drive the terminal that shows it (set
//! the window title with OSC 0, write the clipboard with OSC 52, clear the screen, move the
//! cursor back with CR) or forge an output line with a newline in a file name.
//!
//! One visible form everywhere (docs/commands/README.md): `\n`, `\r`, `\t` for those three, `\x1b`
//! (two lowercase hex digits) for the other C0 controls and DEL, and `\u{9b}` for the C1
//! controls U+0080–U+009F — the form `tracing` uses for its own escapes. Every text writer
//! passes what it did not write itself through [`line`] (or [`Safe`]), before colour is added;
//! multi-line bodies (`show --history`, `history -o text`) through [`text`], which keeps line
//! breaks and tabs. JSON output is left as it is: JSON escapes C0 controls itself.

use std::borrow::Cow;
use std::fmt::{self, Write};

fn is_control(c: char) -> bool {
    c.is_control()
}

fn escape_into(out: &mut impl Write, c: char) -> fmt::Result {
    match c {
        '\n' => out.write_str("\\n"),
        '\r' => out.write_str("\\r"),
        '\t' => out.write_str("\\t"),
        c if (c as u32) < 0x80 => write!(out, "\\x{:02x}", c as u32),
        c => write!(out, "\\u{{{:x}}}", c as u32),
    }
}

/// Whether `s` may hold a control character: a C0 control or DEL byte, or the first byte of a
/// C1 control's encoding (`0xc2 0x80`–`0xc2 0x9f`), judged byte by byte.
fn may_have_control(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter().enumerate().any(|(i, &c)| c < 0x20 || c == 0x7f || (c == 0xc2 && b.get(i + 1).is_some_and(|&d| d < 0xa0)))
}

fn escaped(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !may_have_control(s) || !s.chars().any(|c| is_control(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_control(c) && !keep(c) {
            let _ = escape_into(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` on one line: every C0 and C1 control (and DEL) as a visible escape.
pub fn line(s: &str) -> Cow<'_, str> {
    escaped(s, |_| false)
}

/// `s` as a multi-line body: like [`line`], but line breaks and tabs are kept.
pub fn text(s: &str) -> Cow<'_, str> {
    escaped(s, |c| c == '\n' || c == '\t')
}

/// A message for stderr (`transcriptd: error: …`): like [`text`] without tabs, each line after
/// the first indented by two spaces, so no line of it can pass for a line of its own.
pub fn message(s: &str) -> Cow<'_, str> {
    let s = escaped(s, |c| c == '\n');
    if !s.contains('\n') {
        return s;
    }
    let mut out = String::with_capacity(s.len() + 8);
    for (i, l) in s.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
            if !l.starts_with("  ") {
                out.push_str("  ");
            }
        }
        out.push_str(l);
    }
    Cow::Owned(out)
}

/// Writes a value's `Display` with [`line`]'s escapes, without an intermediate string.
pub struct Safe<T>(pub T);

struct Escaping<'a, 'b>(&'a mut fmt::Formatter<'b>);

impl Write for Escaping<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.write_str(&line(s))
    }
}

impl<T: fmt::Display> fmt::Display for Safe<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(Escaping(f), "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_visible() {
        assert_eq!(line("a\x1b]0;t\x07b"), "a\\x1b]0;t\\x07b");
        assert_eq!(line("x\r\ny\t\x7f"), "x\\r\\ny\\t\\x7f");
        assert_eq!(line("\u{9b}2J\u{85}é"), "\\u{9b}2J\\u{85}é");
        assert_eq!(text("a\nb\tc\rd"), "a\nb\tc\\rd");
        assert_eq!(message("x\ny\n  z"), "x\n  y\n  z");
        assert_eq!(Safe("p\nq").to_string(), "p\\nq");
        assert!(matches!(line("plain ✓"), Cow::Borrowed(_)));
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            let s = format!("a{c}b");
            assert_eq!(may_have_control(&s) && s.chars().any(is_control), c.is_control(), "{c:?}");
        }
    }
}
