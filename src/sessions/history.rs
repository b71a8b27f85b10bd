//! The full history of a transcript, for people (`SessionReader::load_full_history`, docs/requirements.md): every
//! conversation line in file order, with each compaction shown as a marker instead of cutting
//! the history before it, because a user looking at a session expects the whole conversation.
//!
//! What counts as conversation is the core's decision ([`Format::parse`]): Claude Code `user` and
//! `assistant` records, Codex `response_item`s, every chat message. Lines that cannot be read
//! are not history (they are `check` findings).
//!
//! This is the readable view `show --history` prints for people; the JSON export (`show
//! --history -o json`, `transcriptd history`) is the core's canonical history
//! (`transcript::canonical`).

use super::lines::for_each_line;
use crate::transcript::formats::Format;
use crate::transcript::model::{Entry, Role};
use std::io;
use std::path::Path;

/// One item of the full history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryItem<'a> {
    /// A conversation line.
    Entry {
        /// Its 1-based line number.
        line: u64,
        /// Who speaks.
        role: Role,
        /// The line as written.
        record: &'a [u8],
    },
    /// A compaction: the model saw only a summary of what comes before.
    CompactBoundary {
        /// Its 1-based line number.
        line: u64,
    },
}

/// What one line of `format` is in the history, if anything. Pure.
pub fn classify(number: u64, line: &[u8], format: Format) -> Option<HistoryItem<'_>> {
    simdutf8::basic::from_utf8(line).ok()?;
    match format.parse(line).ok()?.entry {
        Entry::Message(m) => Some(HistoryItem::Entry { line: number, role: m.role, record: line }),
        Entry::Compaction { .. } => Some(HistoryItem::CompactBoundary { line: number }),
        Entry::Other | Entry::Unknown => None,
    }
}

/// Calls `f` with every history item of the transcript at `path`, in file order.
pub fn full_history(path: &Path, format: Format, mut f: impl FnMut(HistoryItem<'_>) -> io::Result<()>) -> io::Result<()> {
    for_each_line(path, |l| match classify(l.number, l.bytes, format) {
        Some(item) => f(item),
        None => Ok(()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversation_and_compactions_in_order() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.jsonl");
        let lines = [
            r#"{"type":"summary","summary":"x","leafUuid":"l"}"#,
            r#"{"type":"user","uuid":"a","parentUuid":null,"message":{"role":"user","content":"hi"}}"#,
            r#"{"type":"progress","uuid":"p","data":{}}"#,
            r#"{"type":"system","subtype":"compact_boundary","uuid":"b","parentUuid":null}"#,
            r#"{"type":"assistant","uuid":"c","parentUuid":"b","message":{"id":"m","role":"assistant","content":[{"type":"text","text":"yo"}]}}"#,
            "not json",
        ];
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        let mut got = Vec::new();
        full_history(&p, Format::ClaudeCode, |item| {
            got.push(match item {
                HistoryItem::Entry { line, role, .. } => format!("{line}:{}", role.as_str()),
                HistoryItem::CompactBoundary { line } => format!("{line}:compaction"),
            });
            Ok(())
        })
        .unwrap();
        assert_eq!(got, ["2:user", "4:compaction", "5:assistant"]);
    }

    #[test]
    fn codex_event_messages_are_not_history() {
        let item = br#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#;
        let event = br#"{"timestamp":"t","type":"event_msg","payload":{"type":"user_message","message":"hi"}}"#;
        assert!(matches!(classify(1, item, Format::Codex), Some(HistoryItem::Entry { role: Role::User, .. })));
        assert_eq!(classify(2, event, Format::Codex), None);
        assert_eq!(classify(3, b"\xff", Format::Codex), None);
    }
}
