//! Canonical records: transcript lines turned into what the model sees (`context`) or what a
//! person or an export reads (`history`), one JSON object per line.
//!
//! - **Claude Code**: only `user` and `assistant` records with a `message` are conversation
//!   (`progress`, `summary`, `file-history-snapshot`, `queue-operation` and `system` records are
//!   not). Each becomes `{"role", "content"}`: persistence-only fields (`uuid`, `parentUuid`,
//!   `timestamp`, `usage`, `requestId`, ...) are dropped, as `SessionReader::load_messages` (docs/requirements.md) drops
//!   them. Claude Code writes one API message as several `assistant` lines sharing
//!   `message.id`, one content block each, with the `user` lines carrying tool results possibly
//!   in between; the API saw *one* assistant message, so the lines are merged into the first
//!   one, in order, and the results that arrived between them follow it. A string content that
//!   gets merged becomes a `text` block. In `history` a `compact_boundary` record becomes the
//!   marker `{"type": "compact_boundary", "line": N, "metadata": {...}}` in place.
//! - **Codex**: `context` prints the rollout items the scan kept as `{"type", "payload"}` (the
//!   seed's `RolloutItem`, `timestamp` dropped); `history` prints the conversation, the
//!   `response_item` payloads (legacy-layout items as they are), and a `compacted` item as the
//!   marker `{"type": "compact_boundary", "line": N, "replacement_items": K,
//!   "window_number": W}`.
//! - **Pi**: each entry is the message Pi sends for it (`convertToLlm`: the `message` of a
//!   `message` entry as it is, a bash execution, custom message or summary as a user text); in
//!   `context` a compaction is its summary message, in `history` the marker
//!   `{"type": "compact_boundary", "line": N, "tokens_before": T}`.
//! - **Gemini CLI**: each message record is the contents `convertSessionToClientHistory` makes
//!   of it (`{"role": "user"|"model", "parts"}`: a model turn, and the user turn of the
//!   responses its `toolCalls` hold); `context` reads the records in force at the end of the
//!   upsert log, `history` every version as written.
//! - **OpenAI chat, Anthropic**: every line already is an API message and is printed as it is.
//!
//! In `history` every record also names its first `line`. Content is spliced through as it
//! appears in the file (validated, never re-encoded), so the output costs one scan of the input.
//! Lines that are not JSON objects produce nothing here; callers report them.
//!
//! Calling order: [`Canonical::push`] lines oldest first, then [`Canonical::finish`] once.

use super::formats::claude_code::ClaudeFields;
use super::formats::{codex, copilot, gemini, pi, qwen, Format};
use super::model::{Entry, Role};
use super::scan::{self, Kind, Scanner};
use std::borrow::Cow;
use std::ops::Range;

/// What the records are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// What the model sees on resume: no line numbers, no markers.
    Context,
    /// The whole history for people and exports: line numbers and compaction markers.
    History,
}

/// Message content as it appears in the file.
#[derive(Debug)]
enum Content<'a> {
    /// One JSON value, as written (a string or an array), borrowed from the line when it can.
    Value(Cow<'a, [u8]>),
    /// Array elements, joined with commas (after a merge).
    Elements(Vec<u8>),
}

impl Content<'_> {
    /// The content as array elements: an array's own, or a string as one `text` block.
    fn into_elements(self) -> Vec<u8> {
        match self {
            Content::Elements(e) => e,
            Content::Value(v) => elements(&v),
        }
    }
}

/// The elements of `value` joined with commas: those of an array, a string as a `text` block,
/// anything else as one element.
fn elements(value: &[u8]) -> Vec<u8> {
    let mut s = Scanner::new(value);
    match s.peek() {
        Some(Kind::Array) => {
            let mut out = Vec::with_capacity(value.len());
            let walked = s.array(|s| {
                let v = s.raw_value()?;
                if !out.is_empty() {
                    out.push(b',');
                }
                out.extend_from_slice(v);
                Ok(())
            });
            if walked.is_ok() {
                out
            } else {
                value.to_vec()
            }
        }
        Some(Kind::String) => [&b"{\"type\":\"text\",\"text\":"[..], value, b"}"].concat(),
        _ => value.to_vec(),
    }
}

/// A message held back because a later line may still add to it (Claude Code).
#[derive(Debug)]
struct Held<'a> {
    line: Option<u64>,
    role: &'static str,
    content: Content<'a>,
    /// A record of a sidechain thread (a subagent), not of the main conversation.
    side: bool,
}

/// Turns lines into canonical records. See the module docs.
#[derive(Debug)]
pub struct Canonical<'a> {
    format: Format,
    mode: Mode,
    /// Claude Code: the open assistant message (first) and the user messages after it.
    held: Vec<Held<'a>>,
    /// Hash of the open assistant message's `message.id`.
    open: Option<u64>,
    /// Claude Code: the `isSidechain` of the main conversation, taken from the first message
    /// (in a subagent's own file every line is a sidechain, and that is its conversation).
    main_side: Option<bool>,
    /// History: sidechain records that arrived while a main message was held; they follow it.
    side: Vec<Held<'a>>,
}

impl<'a> Canonical<'a> {
    /// Records of `mode` for a transcript of `format`.
    pub fn new(format: Format, mode: Mode) -> Self {
        Canonical { format, mode, held: Vec::new(), open: None, main_side: None, side: Vec::new() }
    }

    /// Adds the next line (`line` is its number, when known); `out` receives the bytes of the
    /// records in order, each record ending in `\n`.
    pub fn push(&mut self, line: Option<u64>, bytes: &[u8], out: &mut impl FnMut(&[u8])) {
        if simdutf8::basic::from_utf8(bytes).is_err() {
            return;
        }
        match self.format {
            Format::ClaudeCode => {
                // The line does not outlive this call: what is held back is copied.
                match ClaudeFields::read(bytes) {
                    Ok(ClaudeFields::Message { role, id, content, sidechain }) => {
                        if let Some(c) = bytes.get(content) {
                            self.message(line, role, id, Cow::Owned(c.to_vec()), sidechain, out);
                        }
                    }
                    Ok(ClaudeFields::Boundary { metadata, .. }) => self.marker(line, bytes, metadata, out),
                    Ok(ClaudeFields::Other { .. }) | Err(_) => {}
                }
            }
            Format::Codex => self.codex(line, bytes, out),
            Format::Pi => self.pi(line, bytes, out),
            Format::Qwen => self.qwen(line, bytes, out),
            Format::Gemini => self.gemini(line, bytes, out),
            Format::Copilot => self.copilot(line, bytes, out),
            Format::OpenAiChat | Format::Anthropic | Format::Dataset(_) => {
                if scan::object_line(bytes, |s, _| s.skip()).is_ok() {
                    self.write_object(line, bytes, out);
                }
            }
        }
    }

    /// Writes what is still held back.
    pub fn finish(mut self, out: &mut impl FnMut(&[u8])) {
        self.flush(out);
    }

    /// Adds the next Claude Code line with the fields already read from it; what is held back
    /// borrows from the line.
    pub fn push_claude(&mut self, line: Option<u64>, bytes: &'a [u8], fields: &ClaudeFields, out: &mut impl FnMut(&[u8])) {
        let (role, id, content, sidechain) = match fields {
            ClaudeFields::Boundary { metadata, .. } => return self.marker(line, bytes, metadata.clone(), out),
            ClaudeFields::Other { .. } => return,
            ClaudeFields::Message { role, id, content, sidechain } => (*role, *id, content.clone(), *sidechain),
        };
        if let Some(content) = bytes.get(content) {
            self.message(line, role, id, Cow::Borrowed(content), sidechain, out);
        }
    }

    /// A `compact_boundary` line: in `history`, a marker in place.
    fn marker(&mut self, line: Option<u64>, bytes: &[u8], metadata: Option<Range<usize>>, out: &mut impl FnMut(&[u8])) {
        if self.mode != Mode::History {
            return;
        }
        self.flush(out);
        out(format!("{{\"type\":\"compact_boundary\",\"line\":{}", line.unwrap_or(0)).as_bytes());
        if let Some(m) = metadata.and_then(|m| bytes.get(m)) {
            out(b",\"metadata\":");
            out(m);
        }
        out(b"}\n");
    }

    /// A conversation message: written, held back, or merged into the open assistant message.
    /// A record of another thread than the main conversation's (a subagent's sidechain in the
    /// main file) is no part of the context; `history` writes it marked `"sidechain": true`,
    /// unmerged, after the open assistant message it ran under.
    fn message(&mut self, line: Option<u64>, role: Role, id: Option<u64>, content: Cow<'a, [u8]>, sidechain: bool, out: &mut impl FnMut(&[u8])) {
        let role = role.as_str();
        let side = sidechain != *self.main_side.get_or_insert(sidechain);
        if side && self.mode != Mode::History {
            return;
        }
        if side || role == "user" {
            // Held while an assistant message is open: a result may still follow it.
            let held = Held { line, role, content: Content::Value(content), side };
            match (self.open.is_some(), side) {
                (true, true) => self.side.push(held),
                (true, false) => self.held.push(held),
                (false, _) => write_held(self.mode, &held, out),
            }
            return;
        }
        if let (Some(id), Some(open)) = (id, self.open) {
            if id == open {
                // Another block of the open API message: merge it into the message.
                let first = &mut self.held[0];
                let mut merged = std::mem::replace(&mut first.content, Content::Elements(Vec::new())).into_elements();
                let more = elements(&content);
                if !merged.is_empty() && !more.is_empty() {
                    merged.push(b',');
                }
                merged.extend_from_slice(&more);
                first.content = Content::Elements(merged);
                return;
            }
        }
        self.flush(out);
        match id {
            Some(id) => {
                self.held.push(Held { line, role, content: Content::Value(content), side: false });
                self.open = Some(id);
            }
            // A message without an id cannot be continued: it goes out as it is.
            None => write_held(self.mode, &Held { line, role, content: Content::Value(content), side: false }, out),
        }
    }

    fn codex(&mut self, line: Option<u64>, bytes: &[u8], out: &mut impl FnMut(&[u8])) {
        let Ok((ty, payload)) = codex::read_envelope(bytes) else { return };
        let ty = ty.map(|t| t.decode()).unwrap_or_default();
        match (self.mode, ty.as_ref(), payload) {
            (Mode::Context, t, Some(p)) if !t.is_empty() => {
                let ty = serde_json::to_string(t).unwrap_or_default();
                out(&[b"{\"type\":", ty.as_bytes(), b",\"payload\":", p, b"}\n"].concat());
            }
            // Not an envelope (the legacy layout): the item as it is.
            (Mode::Context, _, _) => self.write_object(None, bytes, out),
            (Mode::History, "response_item", Some(p)) => self.write_object(line, p, out),
            (Mode::History, "compacted", p) => {
                let (items, window) = p.map(codex::compaction_facts).unwrap_or((None, None));
                let mut rec = format!("{{\"type\":\"compact_boundary\",\"line\":{}", line.unwrap_or(0));
                if let Some(n) = items {
                    rec.push_str(&format!(",\"replacement_items\":{n}"));
                }
                if let Some(w) = window {
                    rec.push_str(&format!(",\"window_number\":{w}"));
                }
                rec.push_str("}\n");
                out(rec.as_bytes());
            }
            (Mode::History, _, _) => {
                // The legacy layout writes response items as lines of their own.
                let legacy = !codex::is_envelope_type(&ty) && matches!(codex::parse(bytes).map(|p| p.entry), Ok(Entry::Message(_)));
                if legacy {
                    self.write_object(line, bytes, out);
                }
            }
        }
    }

    /// Writes a JSON object record, with `"line"` first in `history`.
    /// A Pi entry: the message Pi sends for it ([`pi::record`]); in `history` a compaction is
    /// the marker `{"type": "compact_boundary", "line": N, "tokens_before": T}` in place.
    fn pi(&mut self, line: Option<u64>, bytes: &[u8], out: &mut impl FnMut(&[u8])) {
        if self.mode == Mode::History && pi::Fields::read(bytes).is_ok_and(|f| f.ty == "compaction") {
            let tokens = crate::transcript::formats::edit::members(bytes, &["tokensBefore"]).get("tokensBefore").and_then(serde_json::Value::as_u64);
            let mut rec = format!("{{\"type\":\"compact_boundary\",\"line\":{}", line.unwrap_or(0));
            if let Some(t) = tokens {
                rec.push_str(&format!(",\"tokens_before\":{t}"));
            }
            rec.push_str("}\n");
            return out(rec.as_bytes());
        }
        if let Some(r) = pi::record_bytes(bytes) {
            self.write_object(line, &r, out);
        }
    }

    /// A Qwen Code record: the `Content`s it adds to what Qwen Code sends ([`qwen::records`]);
    /// in `history` a compression is the marker `{"type": "compact_boundary", "line": N}` in
    /// place (its `compressedHistory` is not what was said there).
    fn qwen(&mut self, line: Option<u64>, bytes: &[u8], out: &mut impl FnMut(&[u8])) {
        if self.mode == Mode::History && qwen::Fields::read(bytes).is_ok_and(|f| f.compression) {
            return out(format!("{{\"type\":\"compact_boundary\",\"line\":{}}}\n", line.unwrap_or(0)).as_bytes());
        }
        let mut found: Vec<Vec<u8>> = Vec::new();
        qwen::records(bytes, &mut |r| found.push(r.to_vec()));
        for r in found {
            self.write_object(line, &r, out);
        }
    }

    /// A Gemini CLI message record: the contents it is in the history
    /// ([`gemini::message_contents`]). `context` is handed the records in force (the loader's
    /// reading); `history` reads every line, so a record appended again appears at each version.
    fn gemini(&mut self, line: Option<u64>, bytes: &[u8], out: &mut impl FnMut(&[u8])) {
        let Ok(serde_json::Value::Object(m)) = serde_json::from_slice::<serde_json::Value>(bytes) else { return };
        for c in gemini::message_contents(&m) {
            self.write_object(line, &crate::transcript::formats::edit::to_line(&c), out);
        }
    }

    /// A Copilot event: the message Copilot sends for it ([`copilot::record`]); in `history` a
    /// successful compaction is the marker `{"type": "compact_boundary", "line": N,
    /// "tokens_removed": T}` in place.
    fn copilot(&mut self, line: Option<u64>, bytes: &[u8], out: &mut impl FnMut(&[u8])) {
        if self.mode == Mode::History && copilot::is_compaction(bytes) {
            let data = crate::transcript::formats::edit::members(bytes, &["data"]);
            let tokens = data.get("data").and_then(|d| d.get("tokensRemoved")).and_then(serde_json::Value::as_u64);
            let mut rec = format!("{{\"type\":\"compact_boundary\",\"line\":{}", line.unwrap_or(0));
            if let Some(t) = tokens {
                rec.push_str(&format!(",\"tokens_removed\":{t}"));
            }
            rec.push_str("}\n");
            return out(rec.as_bytes());
        }
        if self.mode == Mode::Context {
            if let Some(marker) = copilot::resume_marker(bytes) {
                return out(marker);
            }
        }
        if let Some(r) = copilot::record(bytes) {
            self.write_object(line, &crate::transcript::formats::edit::to_line(&r), out);
        }
    }

    fn write_object(&self, line: Option<u64>, object: &[u8], out: &mut impl FnMut(&[u8])) {
        match (self.mode, line) {
            (Mode::History, Some(n)) => {
                let body = object.trim_ascii_start().strip_prefix(b"{").unwrap_or(object).trim_ascii_start();
                let sep: &[u8] = if body.starts_with(b"}") { b"" } else { b"," };
                out(&[format!("{{\"line\":{n}").as_bytes(), sep, body, b"\n"].concat());
            }
            _ => {
                out(object);
                out(b"\n");
            }
        }
    }

    fn flush(&mut self, out: &mut impl FnMut(&[u8])) {
        let mut held = std::mem::take(&mut self.held).into_iter();
        // The open assistant message, then the subagent records that ran under it, then the
        // results that arrived for it.
        if let Some(first) = held.next() {
            write_held(self.mode, &first, out);
        }
        for h in std::mem::take(&mut self.side) {
            write_held(self.mode, &h, out);
        }
        for h in held {
            write_held(self.mode, &h, out);
        }
        self.open = None;
    }
}

/// Writes a held message as one record, in pieces (the content is not copied again).
fn write_held(mode: Mode, h: &Held<'_>, out: &mut impl FnMut(&[u8])) {
    match (mode, h.line) {
        (Mode::History, Some(n)) if h.side => out(format!("{{\"line\":{n},\"sidechain\":true,\"role\":\"{}\",\"content\":", h.role).as_bytes()),
        (Mode::History, Some(n)) => out(format!("{{\"line\":{n},\"role\":\"{}\",\"content\":", h.role).as_bytes()),
        _ => out(format!("{{\"role\":\"{}\",\"content\":", h.role).as_bytes()),
    }
    match &h.content {
        Content::Value(v) => out(v),
        Content::Elements(e) => {
            out(b"[");
            out(e);
            out(b"]");
        }
    }
    out(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(format: Format, mode: Mode, lines: &[&str]) -> String {
        let mut c = Canonical::new(format, mode);
        let mut out = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            c.push(Some(i as u64 + 1), l.as_bytes(), &mut |r| out.extend_from_slice(r));
        }
        c.finish(&mut |r| out.extend_from_slice(r));
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn claude_split_lines_merge_and_results_follow() {
        let lines = [
            r#"{"type":"user","uuid":"u1","message":{"role":"user","content":"do it"},"timestamp":"t"}"#,
            r#"{"message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"ok"}],"usage":{}},"type":"assistant","uuid":"a1"}"#,
            r#"{"message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},"type":"assistant","uuid":"a2"}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]},"uuid":"u2"}"#,
            r#"{"type":"progress","data":{"message":{"type":"assistant"}},"uuid":"p1"}"#,
            r#"{"message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t2","name":"Read","input":{}}]},"type":"assistant","uuid":"a3"}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"y"}]},"uuid":"u3"}"#,
            r#"{"message":{"id":"m2","role":"assistant","content":"done"},"type":"assistant","uuid":"a4"}"#,
        ];
        let want = [
            r#"{"role":"user","content":"do it"}"#,
            r#"{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"t1","name":"Bash","input":{}},{"type":"tool_use","id":"t2","name":"Read","input":{}}]}"#,
            r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]}"#,
            r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"y"}]}"#,
            r#"{"role":"assistant","content":"done"}"#,
        ];
        assert_eq!(run(Format::ClaudeCode, Mode::Context, &lines), want.join("\n") + "\n");
        let history = run(Format::ClaudeCode, Mode::History, &lines);
        assert!(history.starts_with(r#"{"line":1,"role":"user","content":"do it"}"#), "{history}");
        assert!(history.contains(r#"{"line":2,"role":"assistant","content":[{"type":"text","text":"ok"},"#), "{history}");
    }

    #[test]
    fn claude_string_content_merges_as_a_text_block() {
        let lines = [
            r#"{"type":"assistant","message":{"id":"m","content":"a"}}"#,
            r#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"b"}]}}"#,
        ];
        assert_eq!(
            run(Format::ClaudeCode, Mode::Context, &lines),
            "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}\n"
        );
    }

    #[test]
    fn history_marks_compactions_in_place() {
        let lines = [
            r#"{"type":"user","message":{"role":"user","content":"a"}}"#,
            r#"{"type":"system","subtype":"compact_boundary","content":"Conversation compacted","compactMetadata":{"trigger":"auto","preTokens":5}}"#,
            r#"{"type":"user","isCompactSummary":true,"message":{"role":"user","content":"summary"}}"#,
            "not json",
        ];
        let want = "{\"line\":1,\"role\":\"user\",\"content\":\"a\"}\n{\"type\":\"compact_boundary\",\"line\":2,\"metadata\":{\"trigger\":\"auto\",\"preTokens\":5}}\n{\"line\":3,\"role\":\"user\",\"content\":\"summary\"}\n";
        assert_eq!(run(Format::ClaudeCode, Mode::History, &lines), want);
    }

    #[test]
    fn codex_items_and_history() {
        let lines = [
            r#"{"timestamp":"t","type":"session_meta","payload":{"id":"s"}}"#,
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[]}}"#,
            r#"{"timestamp":"t","type":"compacted","payload":{"message":"","replacement_history":[{"type":"message"},{"type":"compaction"}],"window_number":3}}"#,
            r#"{"timestamp":"t","type":"event_msg","payload":{"type":"token_count"}}"#,
            r#"{"type":"function_call","name":"shell","arguments":"{}","call_id":"c"}"#,
            r#"{"timestamp":"t","type":"response_item","payload":{}}"#,
        ];
        let ctx = run(Format::Codex, Mode::Context, &lines);
        assert!(ctx.starts_with("{\"type\":\"session_meta\",\"payload\":{\"id\":\"s\"}}\n"), "{ctx}");
        assert!(!ctx.contains("timestamp"), "{ctx}");
        let want = [
            r#"{"line":2,"type":"message","role":"user","content":[]}"#,
            r#"{"type":"compact_boundary","line":3,"replacement_items":2,"window_number":3}"#,
            r#"{"line":5,"type":"function_call","name":"shell","arguments":"{}","call_id":"c"}"#,
            r#"{"line":6}"#,
        ];
        assert_eq!(run(Format::Codex, Mode::History, &lines), want.join("\n") + "\n");
    }
}
