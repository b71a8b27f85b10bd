//! What the agent itself does to the history when it resumes a session: [`rebuild`] turns the
//! canonical context records (what the file holds, as [`Canonical`] prints them) into the
//! history the agent sends, as the real agents were measured to send it (TRUTH.md, "Every
//! difference observed"; the oracle `tests/integration/peers/agent_oracle.py`).
//!
//! - **Claude Code** (modelled on 2.1.332): last, it makes every call and result pair up as
//!   the API wants ([`ensure_pairing`]: a second call with one id and results without their
//!   call are not sent, a call without a result in the middle of the history gets an error
//!   result); whitespace-only `text` blocks of assistant messages
//!   are dropped; a `tool_use` named `Task` is sent as `Agent` (the tool's current name); the
//!   calls of the last assistant message that have no `tool_result` get the agent's interrupted
//!   result (`is_error`, [`CLAUDE_INTERRUPTED`]) in a user message after it; and a history that
//!   then ends with a user message gets the assistant turn "No response requested." the agent
//!   closes it with before the new prompt. Consecutive user messages are sent as one message,
//!   and a text that ends one of them and is followed by a text of the next gets a newline at
//!   its end (even when it ends with one). A `system` `local_command` line (a slash command and its
//!   output) is a user text: in place, or, after the last message, in the new turn after "No
//!   response requested." ([`local_command`]).
//! - **Codex** (0.171.0, `normalize.rs` of its context manager): over the model-visible history
//!   (the last `replacement_history`, then the response items after its `compacted` item), a
//!   call without an output is answered with the output `"aborted"` right after the call, an
//!   output whose call is not in the history is not sent, and `ghost_snapshot` items are not
//!   sent. A tool output of a response item is cut in its middle to the budget of the model
//!   Codex resumes with ([`CodexTruncation`]; the model is a setting, not in the file:
//!   [`Settings::model`], by default the model of the session's last turn).
//! - **Pi** (pi-ai's `transformMessages`, second pass): an assistant message whose
//!   `stopReason` is `error` or `aborted` is not sent; calls still open when the next
//!   assistant or user message comes (on resume, the new prompt) get the error result
//!   `"No result provided"` there; a result whose call is not sent is sent all the same.
//!
//! - **Gemini CLI** (0.61.0, `GeminiChat`): a history that ends with function responses gets
//!   the model turn "[The previous response was interrupted before it completed.]"; a run of
//!   model turns holding an invalid one is not sent; thought parts are not sent (the first call
//!   of a turn that had them gets the synthetic thought signature); turns of one role in a row
//!   are one; a call or response id `<name>__<id>` is sent as `<id>`.
//!
//! Records the rules do not change are passed on byte for byte; a changed record is re-encoded
//! (key order kept). Nothing here reads a file.
//!
//! [`Canonical`]: crate::transcript::canonical::Canonical

use crate::transcript::formats::Format;
use serde_json::{json, Map, Value};
use std::collections::HashSet;

/// The result Claude Code 2.1.332 sends for a call the session ended before it was answered.
pub const CLAUDE_INTERRUPTED: &str = "[Tool call interrupted: the session ended before this call's result was recorded, so its outcome is unknown. Check whether it took effect before relying on it or running it again.]";

/// The text Claude Code sends in place of a first message that held only results whose call
/// the history does not have.
pub const CLAUDE_ORPHANED: &str = "[Orphaned tool result removed due to conversation resume]";

/// The result Claude Code sends for a call in the middle of the history that has none.
pub const CLAUDE_MISSING: &str = "[Tool result missing due to internal error]";

/// What Claude Code sends as a user message left with no content.
pub const CLAUDE_NO_CONTENT: &str = "(no content)";

/// The assistant text Claude Code closes a history that ends with a user message with.
pub const CLAUDE_NO_RESPONSE: &str = "No response requested.";

/// The output Codex sends for a call without one.
pub const CODEX_ABORTED: &str = "aborted";

/// What the agent's resume depends on that the file does not say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// The model the session is resumed with (Codex: it sets how long a tool output may be);
    /// `None`: the model of the session's last turn.
    pub model: Option<String>,
}

/// How Codex 0.171.0 cuts a tool output it takes into its history (its context manager's
/// `process_item`: the model's truncation policy with a 20% allowance, the middle of the text
/// replaced by a marker, the start and the end kept on UTF-8 boundaries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodexTruncation {
    /// At most this many approximate tokens (4 bytes each); the marker counts tokens.
    Tokens(usize),
    /// At most this many bytes; the marker counts the characters taken out.
    Bytes(usize),
}

/// The slugs of the models Codex 0.171.0 ships metadata for (its bundled `models.json`); each
/// has the truncation policy `tokens`, 10,000. A model is matched by the longest of these
/// that begins its name (a `namespace/` before it is taken off once); any other model gets
/// Codex's fallback metadata: `bytes`, 10,000.
const CODEX_MODELS: [&str; 14] = [
    "codex-auto-review",
    "gpt-5.5",
    "gpt-5.6-luna",
    "gpt-5.6-sol",
    "gpt-5.6-terra",
    "gpt-6-astra",
    "gpt-6-luna",
    "gpt-6-sol",
    "gpt-6.1-sol",
    "gpt-6.1-terra",
    "gpt-6.2-astra",
    "gpt-6.2-sol",
    "gpt-daybreak-blue-latest",
    "gpt-daybreak-red-latest",
];

impl CodexTruncation {
    /// The budget of Codex 0.171.0 for a history resumed with `model`, its allowance included.
    pub fn for_model(model: &str) -> Self {
        let known = |m: &str| CODEX_MODELS.iter().any(|slug| m.starts_with(slug));
        let namespaced = model
            .split_once('/')
            .filter(|(ns, rest)| !ns.is_empty() && !rest.contains('/') && ns.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            .is_some_and(|(_, rest)| known(rest));
        // 10,000 with the 20% allowance for serialization.
        if known(model) || namespaced {
            CodexTruncation::Tokens(12_000)
        } else {
            CodexTruncation::Bytes(12_000)
        }
    }

    fn bytes(self) -> usize {
        match self {
            CodexTruncation::Tokens(t) => t.saturating_mul(4),
            CodexTruncation::Bytes(b) => b,
        }
    }

    /// `text` as Codex sends it: whole when it fits, else its start and end around
    /// `…N chars truncated…` (or `…N tokens truncated…`).
    pub fn cut(self, text: &str) -> Option<String> {
        let budget = self.bytes();
        if text.len() <= budget {
            return None;
        }
        let (head, tail) = (budget / 2, budget - budget / 2);
        let tail_from = text.len() - tail;
        let mut prefix_end = 0;
        let mut suffix_start = text.len();
        let mut removed = 0u64;
        for (i, ch) in text.char_indices() {
            let end = i + ch.len_utf8();
            if end <= head {
                prefix_end = end;
            } else if i >= tail_from {
                suffix_start = suffix_start.min(i);
            } else {
                removed += 1;
            }
        }
        let suffix_start = suffix_start.max(prefix_end);
        let marker = match self {
            CodexTruncation::Bytes(_) => format!("…{removed} chars truncated…"),
            CodexTruncation::Tokens(_) => format!("…{} tokens truncated…", (text.len() - budget).div_ceil(4)),
        };
        Some(format!("{}{marker}{}", &text[..prefix_end], &text[suffix_start..]))
    }

    /// A tool output's `output` as Codex sends it: a text is cut as [`Self::cut`]; a list of
    /// content items shares the budget among its texts in order (the first that does not fit is
    /// cut to what is left, later ones are left out and counted in a last text item; empty
    /// texts are not sent; images stay). `None` when it is sent as it is.
    fn output(self, output: &Value) -> Option<Value> {
        match output {
            Value::String(s) => self.cut(s).map(Value::String),
            Value::Array(items) => {
                fn text_of(v: &Value) -> Option<&str> {
                    (v.get("type").and_then(Value::as_str) == Some("input_text")).then(|| v.get("text").and_then(Value::as_str)).flatten()
                }
                let cost = |t: &str| match self {
                    CodexTruncation::Tokens(_) => t.len().div_ceil(4),
                    CodexTruncation::Bytes(_) => t.len(),
                };
                let mut left = match self {
                    CodexTruncation::Tokens(t) | CodexTruncation::Bytes(t) => t,
                };
                let (mut out, mut omitted, mut changed) = (Vec::with_capacity(items.len()), 0usize, false);
                for item in items {
                    let Some(text) = text_of(item) else {
                        out.push(item.clone());
                        continue;
                    };
                    if text.is_empty() {
                        changed = true;
                        continue;
                    }
                    if left == 0 {
                        omitted += 1;
                        changed = true;
                        continue;
                    }
                    let c = cost(text);
                    if c <= left {
                        out.push(item.clone());
                        left -= c;
                        continue;
                    }
                    let part = match self {
                        CodexTruncation::Tokens(_) => CodexTruncation::Tokens(left),
                        CodexTruncation::Bytes(_) => CodexTruncation::Bytes(left),
                    };
                    let snippet = part.cut(text).unwrap_or_else(|| text.to_owned());
                    let mut cut = item.clone();
                    cut["text"] = Value::String(snippet);
                    out.push(cut);
                    left = 0;
                    changed = true;
                }
                if omitted > 0 {
                    out.push(json!({"type": "input_text", "text": format!("[omitted {omitted} text items ...]")}));
                }
                changed.then_some(Value::Array(out))
            }
            _ => None,
        }
    }
}

/// One canonical record: the bytes as printed (ending in `\n`), and its value once a rule had to
/// read it.
struct Record {
    bytes: Vec<u8>,
    value: Option<Value>,
    changed: bool,
}

impl Record {
    fn new(bytes: Vec<u8>) -> Self {
        let value = serde_json::from_slice::<Value>(&bytes).ok();
        Record { bytes, value, changed: false }
    }

    fn made(value: Value) -> Self {
        Record { bytes: Vec::new(), value: Some(value), changed: true }
    }

    fn into_bytes(self) -> Vec<u8> {
        match (self.changed, self.value) {
            (true, Some(v)) => line_of(&v),
            _ => self.bytes,
        }
    }
}

/// What Claude Code's resume reads off the end of the file besides the records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaudeTail {
    /// The texts of the `local_command` lines after the last message (see [`local_command`]);
    /// the agent sends them in the new turn's user message, after its "No response
    /// requested.", each ending with a newline (the prompt follows them).
    pub pending: Vec<String>,
    /// The history ends with a local command's lines ([`ends_with_local_command`]): the agent
    /// does not close it with "No response requested.", and sends them in one user message
    /// with the new prompt.
    pub local_command: bool,
}

/// The text that ends a message: its string content, or its last block when that is a text.
fn last_text(v: &mut Value) -> Option<&mut String> {
    match v.get_mut("content") {
        Some(Value::String(s)) => Some(s),
        Some(Value::Array(a)) => match a.last_mut() {
            Some(b) if is_type(b, "text") => match b.get_mut("text") {
                Some(Value::String(s)) => Some(s),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// How Claude Code 2.1.332 tells the lines of a slash command from a user message (`Hmt` and
/// `vYn` in its bundle), by the start of the line's last text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Local {
    /// `<command-name>…`
    Record,
    /// A user text that starts with `/` (not `isMeta`).
    BareRecord,
    /// `<local-command-stdout>…`, `<local-command-stderr>…`
    Output,
    /// `<local-command-caveat>…`, in an `isMeta` line.
    Caveat,
}

fn local_class(v: &Value) -> Option<Local> {
    if v.get("type").and_then(Value::as_str) != Some("user") || v.get("promptSource").is_some_and(|p| !p.is_null()) {
        return None;
    }
    let meta = v.get("isMeta").and_then(Value::as_bool) == Some(true);
    let content = v.get("message").and_then(|m| m.get("content"));
    let last_text = match content {
        Some(Value::String(s)) => Some(s.as_str()),
        Some(Value::Array(a)) => a.iter().rev().find(|b| is_type(b, "text")).and_then(|b| b.get("text")).and_then(Value::as_str),
        _ => None,
    };
    let tagged = last_text.and_then(|t| {
        if t.starts_with("<command-name>") {
            Some(Local::Record)
        } else if t.starts_with("<local-command-stdout>") || t.starts_with("<local-command-stderr>") {
            Some(Local::Output)
        } else if t.starts_with("<local-command-caveat>") {
            meta.then_some(Local::Caveat)
        } else {
            None
        }
    });
    // `b_`: a string content, or the last block a text, that starts with `/` once trimmed.
    let bare = || match content {
        Some(Value::String(s)) => s.trim().starts_with('/'),
        Some(Value::Array(a)) => {
            a.last().is_some_and(|b| is_type(b, "text") && b.get("text").and_then(Value::as_str).is_some_and(|t| t.trim().starts_with('/')))
        }
        _ => false,
    };
    tagged.or_else(|| (!meta && bare()).then_some(Local::BareRecord))
}

/// Whether the last message line of a Claude Code history, given with the lines before it newest
/// first (the lines sent, in the order sent), ends a local command (`E6` in Claude Code
/// 2.1.332's bundle): going back over its outputs to its command line, that is preceded by the
/// caveat (`isMeta`; not older than a bare `/command` text), or every line passed is `isMeta`.
/// Such a history is not closed with "No response requested." (measured with the agent on a
/// caveat, command and output after the last answer, and after an interrupt; an output alone or
/// a meta text alone is closed).
pub fn ends_with_local_command(newest_first: impl IntoIterator<Item = Value>) -> bool {
    let ty = |v: &Value| v.get("type").and_then(Value::as_str).map(str::to_owned);
    let time = |v: &Value| v.get("timestamp").and_then(Value::as_str).and_then(crate::transcript::timestamp::Timestamp::parse_rfc3339).map(|t| t.unix_millis());
    // It goes over the loaded messages, passing system, progress and attachment lines; the
    // lines of other types are not loaded at all.
    let mut lines = newest_first.into_iter().filter(|v| matches!(ty(v).as_deref(), Some("user" | "assistant")));
    let Some(last) = lines.next() else { return false };
    if ty(&last).as_deref() != Some("user") || local_class(&last).is_none() {
        return false;
    }
    let (mut command, mut bare_at, mut all_meta) = (false, None::<Option<i64>>, true);
    for v in std::iter::once(last).chain(lines) {
        let class = local_class(&v);
        if class == Some(Local::Caveat) {
            // `Date.parse` of a missing or bad timestamp is NaN: no comparison holds.
            return match bare_at {
                None => true,
                Some(at) => matches!((time(&v), at), (Some(c), Some(b)) if c >= b),
            };
        }
        let Some(class) = class.filter(|_| !command) else { break };
        command = matches!(class, Local::Record | Local::BareRecord);
        if class == Local::BareRecord {
            bare_at = Some(time(&v));
        }
        all_meta &= v.get("isMeta").and_then(Value::as_bool) == Some(true);
    }
    all_meta
}

/// The history the agent of `format` sends on resume, from the canonical context `records`
/// (each a JSON object ending in `\n`, oldest first). Formats without a resume model are
/// returned as they are.
///
/// `tail` (Claude Code): what the end of the file says besides the records ([`ClaudeTail`]).
///
/// `settings`: what the resume depends on that the file does not say.
pub fn rebuild(format: Format, records: Vec<Vec<u8>>, tail: ClaudeTail, settings: &Settings) -> Vec<Vec<u8>> {
    match format {
        Format::ClaudeCode => finish(claude(records.into_iter().map(Record::new).collect(), tail)),
        Format::Codex => finish(codex(records.into_iter().map(Record::new).collect(), settings)),
        Format::Pi => pi(records),
        Format::Qwen => qwen(records),
        Format::Gemini => gemini(records),
        Format::Copilot => copilot(records),
        Format::OpenAiChat | Format::Anthropic | Format::Dataset(_) => records,
    }
}

/// Qwen Code: its repair of calls left without results and its OpenAI converter's drop of
/// results without calls ([`crate::transcript::formats::qwen::transform`]).
fn qwen(records: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    keeping_bytes(records, crate::transcript::formats::qwen::transform)
}

/// Pi: pi-ai's `transformMessages` ([`crate::transcript::formats::pi::transform`]).
fn pi(records: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    keeping_bytes(records, crate::transcript::formats::pi::transform)
}

/// Gemini CLI: what it does to the history before it sends it
/// ([`crate::transcript::formats::gemini::transform`]): every record is re-encoded (turns of one
/// role are joined).
fn gemini(records: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let values: Vec<Value> = records.iter().filter_map(|b| serde_json::from_slice::<Value>(b).ok()).collect();
    crate::transcript::formats::gemini::transform(values).iter().map(line_of).collect()
}

/// Copilot: a call without a recorded result gets the agent's interrupted result
/// ([`crate::transcript::formats::copilot::transform`]).
fn copilot(records: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    keeping_bytes(records, crate::transcript::formats::copilot::transform)
}

/// The records (those that are JSON) through an agent's `transform` of its history: a record it
/// leaves as it was keeps its bytes (the records it keeps come in their order); the ones it
/// makes or changes are encoded anew.
fn keeping_bytes(records: Vec<Vec<u8>>, transform: fn(Vec<Value>) -> Vec<Value>) -> Vec<Vec<u8>> {
    let originals: Vec<(Value, Vec<u8>)> = records.into_iter().filter_map(|b| serde_json::from_slice::<Value>(&b).ok().map(|v| (v, b))).collect();
    let out = transform(originals.iter().map(|(v, _)| v.clone()).collect());
    let mut next = 0;
    out.into_iter()
        .map(|v| {
            if let Some(i) = originals[next..].iter().position(|(o, _)| *o == v) {
                next += i + 1;
                return originals[next - 1].1.clone();
            }
            line_of(&v)
        })
        .collect()
}

/// A record as a line ([`crate::transcript::formats::edit::to_line`] with its newline).
fn line_of(v: &Value) -> Vec<u8> {
    let mut b = crate::transcript::formats::edit::to_line(v);
    b.push(b'\n');
    b
}

fn finish(records: Vec<Record>) -> Vec<Vec<u8>> {
    records.into_iter().map(Record::into_bytes).collect()
}

fn role(v: &Value) -> Option<&str> {
    v.get("role").and_then(Value::as_str)
}

fn blocks(v: &Value) -> &[Value] {
    v.get("content").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn is_type(b: &Value, ty: &str) -> bool {
    b.get("type").and_then(Value::as_str) == Some(ty)
}

fn claude(mut records: Vec<Record>, tail: ClaudeTail) -> Vec<Record> {
    let ClaudeTail { pending, local_command } = tail;
    for r in &mut records {
        let Some(v) = r.value.as_mut() else { continue };
        if role(v) != Some("assistant") {
            continue;
        }
        let Some(content) = v.get_mut("content").and_then(Value::as_array_mut) else { continue };
        let before = content.len();
        content.retain(|b| !(is_type(b, "text") && b.get("text").and_then(Value::as_str).is_some_and(|t| t.trim().is_empty())));
        r.changed |= content.len() != before;
        if let Some(reordered) = tool_uses_last(content) {
            *content = reordered;
            r.changed = true;
        }
        for b in content.iter_mut().filter(|b| is_type(b, "tool_use")) {
            if let Some(name) = b.get_mut("name").filter(|n| n.as_str() == Some("Task")) {
                *name = Value::String("Agent".to_owned());
                r.changed = true;
            }
        }
    }
    // Consecutive user messages are sent as one: a text that ends the earlier one and is
    // followed by a text of the next ends with a newline.
    for i in 1..records.len() {
        let next_starts_with_text = records[i].value.as_ref().filter(|v| role(v) == Some("user")).is_some_and(|v| match v.get("content") {
            Some(Value::String(_)) => true,
            Some(Value::Array(a)) => a.first().is_some_and(|b| is_type(b, "text")),
            _ => false,
        });
        let Some(prev) = records[i - 1].value.as_mut().filter(|v| role(v) == Some("user") && next_starts_with_text) else { continue };
        let text = last_text(prev);
        // Even when it ends with one already (measured: context case 0010, "already ends\n"
        // is sent as "already ends\n\n").
        if let Some(t) = text {
            t.push('\n');
            records[i - 1].changed = true;
        }
    }
    // The calls of the last assistant message that nothing answers.
    let messages: Vec<usize> =
        (0..records.len()).filter(|&i| records[i].value.as_ref().and_then(role).is_some_and(|r| r == "user" || r == "assistant")).collect();
    if let Some(&last_assistant) = messages.iter().rev().find(|&&i| records[i].value.as_ref().and_then(role) == Some("assistant")) {
        // A call whose id has a result anywhere in the history is not open (`Vce` counts the
        // results of the whole history): a second call with an earlier call's id is dropped
        // by the pairing pass instead.
        let answered: HashSet<&str> = records
            .iter()
            .filter_map(|r| r.value.as_ref())
            .filter(|v| role(v) == Some("user"))
            .flat_map(blocks)
            .filter(|b| is_type(b, "tool_result"))
            .filter_map(|b| b.get("tool_use_id").and_then(Value::as_str))
            .collect();
        let open: Vec<Value> = records[last_assistant]
            .value
            .as_ref()
            .map(blocks)
            .unwrap_or_default()
            .iter()
            .filter(|b| is_type(b, "tool_use"))
            .filter_map(|b| b.get("id").and_then(Value::as_str))
            .filter(|id| !answered.contains(id))
            .map(|id| json!({"type": "tool_result", "tool_use_id": id, "is_error": true, "content": CLAUDE_INTERRUPTED}))
            .collect();
        if !open.is_empty() {
            // After the results of its other calls (measured with 2.1.332: context case 0006,
            // a parallel call answered and one open, is sent with the open one's result last).
            let results_only = |r: &Record| {
                r.value.as_ref().is_some_and(|v| role(v) == Some("user") && !blocks(v).is_empty() && blocks(v).iter().all(|b| is_type(b, "tool_result")))
            };
            let at = (last_assistant + 1..records.len()).find(|&i| !results_only(&records[i])).unwrap_or(records.len());
            records.insert(at, Record::made(json!({"role": "user", "content": open})));
        }
    }
    let last = records.iter().rev().filter_map(|r| r.value.as_ref()).find_map(|v| role(v).filter(|r| *r == "user" || *r == "assistant"));
    if last == Some("user") && !local_command {
        records.push(Record::made(json!({"role": "assistant", "content": [{"type": "text", "text": CLAUDE_NO_RESPONSE}]})));
    } else if last == Some("user") && pending.is_empty() {
        // The new prompt follows in the same user message: the text that ends the history
        // gets its newline, as between any two user messages.
        if let Some(r) = records.iter_mut().rev().find(|r| r.value.as_ref().and_then(role).is_some_and(|x| x == "user" || x == "assistant")) {
            if let Some(t) = r.value.as_mut().and_then(last_text) {
                t.push('\n');
                r.changed = true;
            }
        }
    }
    if !pending.is_empty() {
        let texts: Vec<Value> = pending.into_iter().map(|t| json!({"type": "text", "text": if t.ends_with('\n') { t } else { t + "\n" }})).collect();
        records.push(Record::made(json!({"role": "user", "content": texts})));
    }
    ensure_pairing(records)
}

/// The blocks of an assistant message as Claude Code 2.1.332 sends the lines of one API message
/// it merges (`Ter` in its `mergeAssistantMessages`): when a block that is not a `tool_use`
/// comes after one, the `tool_use` blocks go last, each kind in its order, unless a thinking
/// block follows a thinking block with calls between them (then nothing moves). `None` when
/// nothing moves.
fn tool_uses_last(content: &[Value]) -> Option<Vec<Value>> {
    let (mut first_use, mut after_use, mut skip, mut prev_thinking, mut use_since) = (None, false, false, false, false);
    for (i, b) in content.iter().enumerate() {
        if is_type(b, "tool_use") {
            first_use.get_or_insert(i);
            use_since = true;
        } else {
            after_use |= first_use.is_some();
            let thinking = is_type(b, "thinking") || is_type(b, "redacted_thinking");
            skip |= thinking && prev_thinking && use_since;
            prev_thinking = thinking;
            use_since = false;
        }
    }
    if !after_use || skip {
        return None;
    }
    let (uses, rest): (Vec<&Value>, Vec<&Value>) = content.iter().partition(|b| is_type(b, "tool_use"));
    Some(rest.into_iter().chain(uses).cloned().collect())
}

/// What Claude Code 2.1.332 does to the messages it sends, last, so that every call has its
/// result in the next message (`ensureToolResultPairing` in its bundle; consecutive user
/// messages count as the one message they are sent as):
///
/// - a user message that does not follow an assistant message loses its `tool_result` blocks;
///   left empty, it is not sent, or, as the first message, says [`CLAUDE_ORPHANED`];
/// - an assistant message loses a `tool_use` whose id an earlier one has, `tool_result` blocks
///   (they belong to user messages), and server/MCP tool uses without their result in the same
///   message; a block removed between two thinking blocks leaves the text "[Tool use removed]",
///   and a message left empty says "[Tool use interrupted]";
/// - the user message after it loses results for calls the assistant message does not have,
///   and second results for one call; a call it does not answer gets [`CLAUDE_MISSING`] (an
///   error result) first; a message left empty says "(no content)"; with no user message after
///   it, the results missing are sent as one.
fn ensure_pairing(records: Vec<Record>) -> Vec<Record> {
    let text = |t: &str| json!({"type": "text", "text": t, "citations": []});
    let mut out: Vec<Record> = Vec::with_capacity(records.len());
    let mut calls_seen: HashSet<String> = HashSet::new();
    let mut last: Option<&'static str> = None;
    let mut sent_any = false;
    let mut records = records.into_iter().peekable();
    while let Some(mut r) = records.next() {
        let Some(v) = r.value.as_mut() else {
            out.push(r);
            continue;
        };
        match role(v) {
            Some("user") => {
                if last != Some("assistant") {
                    if let Some(content) = v.get_mut("content").and_then(Value::as_array_mut) {
                        let before = content.len();
                        content.retain(|b| !is_type(b, "tool_result"));
                        if content.len() != before {
                            r.changed = true;
                            if content.is_empty() {
                                if sent_any {
                                    continue;
                                }
                                content.push(json!({"type": "text", "text": CLAUDE_ORPHANED}));
                            }
                        }
                    }
                }
                out.push(r);
                last = Some("user");
                sent_any = true;
            }
            Some("assistant") => {
                let Some(content) = v.get_mut("content").and_then(Value::as_array_mut) else {
                    out.push(r);
                    last = Some("assistant");
                    sent_any = true;
                    continue;
                };
                let answered_here: HashSet<String> = content
                    .iter()
                    .filter(|b| !is_type(b, "tool_result"))
                    .filter_map(|b| b.get("tool_use_id").and_then(Value::as_str).map(str::to_owned))
                    .collect();
                let mut calls: Vec<String> = Vec::new();
                let old = std::mem::take(content);
                let mut kept = Vec::with_capacity(old.len());
                let mut changed = false;
                for (i, b) in old.iter().enumerate() {
                    let id = b.get("id").and_then(Value::as_str);
                    let drop = if is_type(b, "tool_use") {
                        match id {
                            Some(id) if !calls_seen.insert(id.to_owned()) => true,
                            Some(id) => {
                                calls.push(id.to_owned());
                                false
                            }
                            None => false,
                        }
                    } else if is_type(b, "server_tool_use") || is_type(b, "mcp_tool_use") {
                        id.is_none_or(|id| !answered_here.contains(id))
                    } else {
                        is_type(b, "tool_result")
                    };
                    if !drop {
                        kept.push(b.clone());
                        continue;
                    }
                    changed = true;
                    let thinking = |j: Option<&Value>| j.is_some_and(|x| is_type(x, "thinking") || is_type(x, "redacted_thinking"));
                    if thinking(i.checked_sub(1).and_then(|j| old.get(j))) && thinking(old.get(i + 1)) {
                        kept.push(text("[Tool use removed]"));
                    }
                }
                if kept.is_empty() {
                    kept.push(text("[Tool use interrupted]"));
                }
                *content = if changed { kept } else { old };
                r.changed |= changed;
                out.push(r);
                last = Some("assistant");
                sent_any = true;
                // The user message after it: the consecutive user records that follow.
                let mut group: Vec<Record> = Vec::new();
                while let Some(n) = records.next_if(|n| n.value.as_ref().and_then(role) == Some("user")) {
                    group.push(n);
                }
                let mut results: Vec<String> = Vec::new();
                for g in &group {
                    for b in g.value.as_ref().map(blocks).unwrap_or_default().iter().filter(|b| is_type(b, "tool_result")) {
                        results.extend(b.get("tool_use_id").and_then(Value::as_str).map(str::to_owned));
                    }
                }
                let twice = results.len() != results.iter().collect::<HashSet<_>>().len();
                let missing: Vec<&String> = calls.iter().filter(|c| !results.contains(c)).collect();
                let strays: HashSet<&String> = results.iter().filter(|r| !calls.contains(r)).collect();
                if missing.is_empty() && strays.is_empty() && !twice {
                    if !group.is_empty() {
                        last = Some("user");
                    }
                    out.extend(group);
                    continue;
                }
                let filled: Vec<Value> =
                    missing.iter().map(|id| json!({"type": "tool_result", "tool_use_id": id, "content": CLAUDE_MISSING, "is_error": true})).collect();
                if group.is_empty() {
                    if !filled.is_empty() {
                        out.push(Record::made(json!({"role": "user", "content": filled})));
                        last = Some("user");
                    }
                    continue;
                }
                let mut once: HashSet<String> = HashSet::new();
                let mut first = true;
                let mut any = false;
                for mut g in group {
                    let Some(gv) = g.value.as_mut() else { continue };
                    if let Some(Value::String(s)) = gv.get("content") {
                        let s = s.clone();
                        gv["content"] = json!([{"type": "text", "text": s}]);
                    }
                    let Some(content) = gv.get_mut("content").and_then(Value::as_array_mut) else { continue };
                    content.retain(|b| {
                        !is_type(b, "tool_result")
                            || b.get("tool_use_id").and_then(Value::as_str).is_none_or(|id| !strays.contains(&id.to_owned()) && once.insert(id.to_owned()))
                    });
                    if std::mem::take(&mut first) {
                        content.splice(0..0, filled.iter().cloned());
                    }
                    g.changed = true;
                    if !content.is_empty() {
                        any = true;
                        out.push(g);
                    }
                }
                if !any {
                    out.push(Record::made(json!({"role": "user", "content": CLAUDE_NO_CONTENT})));
                }
                last = Some("user");
            }
            _ => out.push(r),
        }
    }
    out
}

/// Claude Code: the text a `system` record with `subtype: "local_command"` (a slash command run
/// in the session and its output, written by 2.1.x) is sent as: its `content`, as a user text.
/// `None` for any other line.
pub fn local_command(line: &[u8]) -> Option<String> {
    const NEEDLE: &[u8] = b"local_command";
    if !line.windows(NEEDLE.len()).any(|w| w == NEEDLE) {
        return None;
    }
    let v: Value = serde_json::from_slice(line).ok()?;
    let is = |k: &str, want: &str| v.get(k).and_then(Value::as_str) == Some(want);
    if !(is("type", "system") && is("subtype", "local_command")) {
        return None;
    }
    v.get("content").and_then(Value::as_str).map(str::to_owned)
}

/// A `user` line that carries the text of a `local_command` line in the history, for the
/// canonical records (`sidechain`: the line's `isSidechain`).
pub fn local_command_line(text: &str, sidechain: bool) -> Vec<u8> {
    serde_json::to_vec(&json!({"type": "user", "isSidechain": sidechain, "message": {"role": "user", "content": [{"type": "text", "text": text}]}}))
        .unwrap_or_default()
}

/// Where a model-visible Codex item is: in the replacement history of the record at `.0`
/// (position `.1`), or the payload of the response item record at `.0`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    Replacement(usize, usize),
    Record(usize),
}

const CALLS: [&str; 4] = ["function_call", "custom_tool_call", "local_shell_call", "tool_search_call"];

/// The output type that answers a call of type `call` (a local shell call is answered by a
/// `function_call_output`).
fn output_of(call: &str) -> &'static str {
    match call {
        "custom_tool_call" => "custom_tool_call_output",
        "tool_search_call" => "tool_search_output",
        _ => "function_call_output",
    }
}

fn call_id(v: &Value) -> Option<&str> {
    v.get("call_id").and_then(Value::as_str)
}

/// The payload of a `response_item` record.
fn payload(r: &Record) -> Option<&Value> {
    r.value.as_ref().filter(|v| v.get("type").and_then(Value::as_str) == Some("response_item")).and_then(|v| v.get("payload"))
}

/// The `replacement_history` of a `compacted` record.
fn history_of(r: &Record) -> Option<&Vec<Value>> {
    r.value
        .as_ref()
        .filter(|v| v.get("type").and_then(Value::as_str) == Some("compacted"))
        .and_then(|v| v.get("payload")?.get("replacement_history")?.as_array())
}

/// The content item types of a tool output Codex 0.171.0 reads (`FunctionCallOutputContentItem`).
const CODEX_OUTPUT_ITEMS: [&str; 4] = ["input_text", "input_image", "input_audio", "encrypted_content"];

/// Whether Codex fails to load a tool output item: its `output` is a list holding something that
/// is not a content item it knows.
fn codex_unloadable(v: &Value) -> bool {
    let ty = v.get("type").and_then(Value::as_str).unwrap_or_default();
    if !matches!(ty, "function_call_output" | "custom_tool_call_output") {
        return false;
    }
    v.get("output")
        .and_then(Value::as_array)
        .is_some_and(|items| items.iter().any(|i| !i.get("type").and_then(Value::as_str).is_some_and(|t| CODEX_OUTPUT_ITEMS.contains(&t))))
}

/// The summary of a `compacted` record that has no `replacement_history` (rollouts written
/// before Codex kept one): its `message`.
fn legacy_compaction(r: &Record) -> Option<&str> {
    let p = r.value.as_ref().filter(|v| v.get("type").and_then(Value::as_str) == Some("compacted"))?.get("payload")?;
    (!p.get("replacement_history").is_some_and(Value::is_array)).then(|| p.get("message").and_then(Value::as_str).unwrap_or_default())
}

/// The history Codex builds for a compaction that kept none (`build_compacted_history`): the
/// items before the first user turn, the texts of the user turns as user messages (the newest
/// first within 20,000 tokens, the oldest of them cut to what is left), then the summary as a
/// user message ("(no summary available)" for an empty one).
fn compacted_history(items: &[(At, Value)], summary: &str) -> Vec<Value> {
    let user = |text: &str| json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]});
    let first = items.iter().position(|(_, v)| user_turn(v)).unwrap_or(items.len());
    let mut history: Vec<Value> = items[..first].iter().map(|(_, v)| v.clone()).collect();
    let texts: Vec<String> = items
        .iter()
        .filter(|(_, v)| user_turn(v))
        .map(|(_, v)| v.get("content").and_then(Value::as_array).into_iter().flatten().filter_map(|c| c.get("text").and_then(Value::as_str)).collect())
        .collect();
    let (mut kept, mut left) = (Vec::new(), 20_000usize);
    for t in texts.iter().rev() {
        if left == 0 {
            break;
        }
        let tokens = t.len().div_ceil(4);
        if tokens <= left {
            kept.push(t.clone());
            left -= tokens;
        } else {
            kept.push(CodexTruncation::Tokens(left).cut(t).unwrap_or_else(|| t.clone()));
            break;
        }
    }
    history.extend(kept.iter().rev().map(|t| user(t)));
    history.push(user(if summary.is_empty() { "(no summary available)" } else { summary }));
    history
}

/// The turns a `thread_rolled_back` event takes back (`num_turns`).
fn rolled_back(r: &Record) -> Option<usize> {
    let v = r.value.as_ref().filter(|v| v.get("type").and_then(Value::as_str) == Some("event_msg"))?.get("payload")?;
    (v.get("type").and_then(Value::as_str) == Some("thread_rolled_back")).then(|| v.get("num_turns").and_then(Value::as_u64).map_or(0, |n| n as usize))
}

/// Texts that open a user message Codex makes itself (instructions, environment, a shell
/// command the user ran, an aborted turn's note): such a message does not begin a user turn.
const CODEX_CONTEXTUAL: [&str; 7] = [
    "# AGENTS.md instructions",
    "<environment_context>",
    "<user_instructions>",
    "<skill>",
    "<user_shell_command>",
    "<turn_aborted>",
    "<subagent_notification>",
];

/// Whether an item begins a user turn for a rollback: a user message that Codex did not make.
fn user_turn(v: &Value) -> bool {
    if v.get("type").and_then(Value::as_str) != Some("message") || role(v) != Some("user") {
        return false;
    }
    let texts = v.get("content").and_then(Value::as_array).into_iter().flatten().filter_map(|c| c.get("text").and_then(Value::as_str));
    !texts.into_iter().any(|t| CODEX_CONTEXTUAL.iter().any(|m| t.trim_start().starts_with(m)))
}

/// Where a rollback of `n` turns cuts the history (Codex's `drop_last_n_user_turns`): at the
/// `n`th user turn from the end, at the first when there are fewer; nowhere (the end) when
/// there is none or `n` is 0.
fn rollback_cut(items: &[(At, Value)], n: usize) -> usize {
    let turns: Vec<usize> = items.iter().enumerate().filter(|(_, (_, v))| user_turn(v)).map(|(i, _)| i).collect();
    match (n, turns.first()) {
        (0, _) | (_, None) => items.len(),
        (n, Some(&first)) if n >= turns.len() => first,
        (n, _) => turns[turns.len() - n],
    }
}

fn codex(mut records: Vec<Record>, settings: &Settings) -> Vec<Record> {
    // The model-visible history: the newest replacement history, then, in the file's order, the
    // response items after it, each `thread_rolled_back` taking back the last user turns.
    let start = records.iter().rposition(|r| history_of(r).is_some());
    let item = |records: &[Record], at: At| -> Option<Value> {
        match at {
            At::Replacement(s, k) => history_of(&records[s]).and_then(|h| h.get(k)).cloned(),
            At::Record(i) => payload(&records[i]).cloned(),
        }
    };
    let mut items: Vec<(At, Value)> = Vec::new();
    if let Some(s) = start {
        items.extend(history_of(&records[s]).into_iter().flatten().enumerate().map(|(k, v)| (At::Replacement(s, k), v.clone())));
    }
    // What leaves the history: a tool output of a shape Codex cannot load (a content item of a
    // type it does not have: the line fails to load, and its call is answered "aborted"), and
    // the turns a rollback takes back.
    let (mut gone, mut replacement_changed, mut holder) = (Vec::new(), false, start);
    for i in start.map_or(0, |s| s + 1)..records.len() {
        if let Some(summary) = legacy_compaction(&records[i]) {
            // A compaction without its replacement history: Codex builds one, and so the record
            // is printed holding it.
            let built = compacted_history(&items, summary);
            items = built.into_iter().enumerate().map(|(k, v)| (At::Replacement(i, k), v)).collect();
            (holder, replacement_changed) = (Some(i), true);
            continue;
        }
        if let Some(n) = rolled_back(&records[i]) {
            for (at, _) in items.drain(rollback_cut(&items, n)..) {
                match at {
                    At::Record(j) => gone.push(j),
                    At::Replacement(..) => replacement_changed = true,
                }
            }
            continue;
        }
        match item(&records, At::Record(i)) {
            Some(v) if codex_unloadable(&v) => gone.push(i),
            Some(v) => items.push((At::Record(i), v)),
            None => {}
        }
    }
    let ty = |v: &Value| v.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
    let outputs: HashSet<(String, String)> =
        items.iter().filter_map(|(_, v)| Some((ty(v), call_id(v)?.to_owned()))).filter(|(t, _)| t.ends_with("_output")).collect();
    let calls: HashSet<(String, String)> =
        items.iter().filter_map(|(_, v)| Some((ty(v), call_id(v)?.to_owned()))).filter(|(t, _)| CALLS.contains(&t.as_str())).collect();
    let has_call = |t: &str, id: &str| match t {
        "function_call_output" => calls.contains(&("function_call".into(), id.into())) || calls.contains(&("local_shell_call".into(), id.into())),
        "custom_tool_call_output" => calls.contains(&("custom_tool_call".into(), id.into())),
        _ => calls.contains(&("tool_search_call".into(), id.into())),
    };
    // What goes: ghost snapshots, and outputs without their call (a server-side tool search,
    // or one without a call id, stays).
    let dropped = |v: &Value| {
        let t = ty(v);
        if t == "ghost_snapshot" {
            return true;
        }
        if !t.ends_with("_output") || (t == "tool_search_output" && v.get("execution").and_then(Value::as_str) == Some("server")) {
            return false;
        }
        call_id(v).is_some_and(|id| !has_call(&t, id))
    };
    // What comes: an "aborted" output right after each call that has none.
    let aborted = |v: &Value| -> Option<Value> {
        let t = ty(v);
        let id = call_id(v)?;
        if !CALLS.contains(&t.as_str()) || outputs.contains(&(output_of(&t).to_owned(), id.to_owned())) {
            return None;
        }
        Some(match t.as_str() {
            "tool_search_call" => json!({"type": "tool_search_output", "call_id": id, "status": "completed", "execution": "client", "tools": []}),
            _ => json!({"type": output_of(&t), "call_id": id, "output": CODEX_ABORTED}),
        })
    };
    let mut replacement: Option<Vec<Value>> = None;
    let mut after: Vec<(usize, Value)> = Vec::new();
    for (at, v) in &items {
        let (drop, add) = (dropped(v), aborted(v));
        match *at {
            At::Replacement(..) => {
                let h = replacement.get_or_insert_with(Vec::new);
                if !drop {
                    h.push(v.clone());
                }
                h.extend(add.clone());
                replacement_changed |= drop || add.is_some();
            }
            At::Record(i) => {
                if drop {
                    gone.push(i);
                }
                if let Some(a) = add {
                    after.push((i, a));
                }
            }
        }
    }
    if let (Some(s), true) = (holder, replacement_changed) {
        let h = replacement.unwrap_or_default();
        if let Some(payload) = records[s].value.as_mut().and_then(|v| v.get_mut("payload")).and_then(Value::as_object_mut) {
            payload.insert("replacement_history".into(), Value::Array(h));
            records[s].changed = true;
        }
    }
    // Tool outputs cut to the budget of the model the session resumes with.
    let model = settings.model.clone().or_else(|| {
        records.iter().rev().find_map(|r| {
            let v = r.value.as_ref().filter(|v| v.get("type").and_then(Value::as_str) == Some("turn_context"))?;
            v.get("payload")?.get("model")?.as_str().map(str::to_owned)
        })
    });
    let truncation = CodexTruncation::for_model(model.as_deref().unwrap_or_default());
    for (at, v) in &items {
        let (At::Record(i), "function_call_output" | "custom_tool_call_output") = (*at, ty(v).as_str()) else {
            continue;
        };
        if let Some(cut) = v.get("output").and_then(|o| truncation.output(o)) {
            if let Some(slot) = records[i].value.as_mut().and_then(|r| r.get_mut("payload")).and_then(|p| p.get_mut("output")) {
                *slot = cut;
                records[i].changed = true;
            }
        }
    }
    let mut out = Vec::with_capacity(records.len() + after.len());
    let mut after = after.into_iter().peekable();
    for (i, r) in records.into_iter().enumerate() {
        if !gone.contains(&i) {
            out.push(r);
        }
        while let Some((_, a)) = after.next_if(|(j, _)| *j == i) {
            let mut m = Map::new();
            m.insert("type".into(), Value::String("response_item".into()));
            m.insert("payload".into(), a);
            out.push(Record::made(Value::Object(m)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(format: Format, lines: &[&str]) -> Vec<Value> {
        let records = lines.iter().map(|l| format!("{l}\n").into_bytes()).collect();
        rebuild(format, records, ClaudeTail::default(), &Settings::default()).iter().map(|b| serde_json::from_slice(b).unwrap()).collect()
    }

    #[test]
    fn claude_answers_the_open_call_and_closes_the_turn() {
        let got = run(
            Format::ClaudeCode,
            &[
                r#"{"role":"user","content":"go"}"#,
                r#"{"role":"assistant","content":[{"type":"text","text":"\n\n"},{"type":"text","text":"I will."},{"type":"tool_use","id":"t1","name":"Task","input":{}}]}"#,
            ],
        );
        assert_eq!(got.len(), 4);
        assert_eq!(got[1]["content"], json!([{"type":"text","text":"I will."},{"type":"tool_use","id":"t1","name":"Agent","input":{}}]));
        assert_eq!(got[2]["content"][0]["content"], CLAUDE_INTERRUPTED);
        assert_eq!(got[3]["content"][0]["text"], CLAUDE_NO_RESPONSE);
    }

    #[test]
    fn claude_sends_no_result_before_the_first_answer_and_no_second_call_with_one_id() {
        let got = run(
            Format::ClaudeCode,
            &[
                r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t0","content":"x"}]}"#,
                r#"{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}"#,
                r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}"#,
                r#"{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}},{"type":"text","text":"done"}]}"#,
                r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"again"}]}"#,
            ],
        );
        assert_eq!(got[0]["content"], json!([{"type":"text","text":CLAUDE_ORPHANED}]), "a first message of results only");
        assert_eq!(got[3]["content"], json!([{"type":"text","text":"done"}]), "the second call with id t1 is not sent");
        assert_eq!(got[4]["content"], CLAUDE_NO_CONTENT, "nor its result: the message left empty says so: {got:?}");
        let got = run(
            Format::ClaudeCode,
            &[
                r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t9","content":"y"},{"type":"text","text":"go on"}]}"#,
                r#"{"role":"assistant","content":[{"type":"text","text":"ok"}]}"#,
            ],
        );
        assert_eq!(got[0]["content"], json!([{"type":"text","text":"go on"}]), "the rest of the message is kept");
    }

    #[test]
    fn claude_answered_history_ending_with_the_assistant_is_unchanged() {
        let lines = [r#"{"role":"user","content":"go"}"#, r#"{"role":"assistant","content":[{"type":"text","text":"done"}]}"#];
        let records: Vec<Vec<u8>> = lines.iter().map(|l| format!("{l}\n").into_bytes()).collect();
        assert_eq!(rebuild(Format::ClaudeCode, records.clone(), ClaudeTail::default(), &Settings::default()), records);
    }

    #[test]
    fn local_command_lines_are_user_text() {
        let line = r#"{"type":"system","subtype":"local_command","content":"<local-command-stdout>ok</local-command-stdout>","level":"info"}"#;
        assert_eq!(local_command(line.as_bytes()).as_deref(), Some("<local-command-stdout>ok</local-command-stdout>"));
        assert_eq!(local_command(br#"{"type":"system","subtype":"compact_boundary","content":"local_command"}"#), None);
        let got = run(Format::ClaudeCode, &[r#"{"role":"user","content":"go"}"#]);
        assert_eq!(got.len(), 2, "no pending command: the turn is only closed");
        let records = vec![b"{\"role\":\"user\",\"content\":\"go\"}\n".to_vec()];
        let got = rebuild(
            Format::ClaudeCode,
            records,
            ClaudeTail { pending: vec!["<command-name>/model</command-name>".into()], ..ClaudeTail::default() },
            &Settings::default(),
        );
        let last: Value = serde_json::from_slice(got.last().unwrap()).unwrap();
        assert_eq!(last, json!({"role":"user","content":[{"type":"text","text":"<command-name>/model</command-name>\n"}]}));
        assert_eq!(got.len(), 3, "after the agent's No response requested.");
    }

    #[test]
    fn codex_normalizes_the_visible_history() {
        let got = run(
            Format::Codex,
            &[
                r#"{"type":"session_meta","payload":{"id":"x"}}"#,
                r#"{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}","call_id":"c1"}}"#,
                r#"{"type":"response_item","payload":{"type":"ghost_snapshot","ghost_commit":{}}}"#,
                r#"{"type":"response_item","payload":{"type":"function_call_output","call_id":"c9","output":"x"}}"#,
                r#"{"type":"event_msg","payload":{"type":"token_count"}}"#,
            ],
        );
        let types: Vec<&str> = got.iter().map(|v| v["payload"]["type"].as_str().unwrap_or("?")).collect();
        assert_eq!(types, ["?", "function_call", "function_call_output", "token_count"]);
        assert_eq!(got[2]["payload"], json!({"type":"function_call_output","call_id":"c1","output":"aborted"}));
    }

    #[test]
    fn codex_cuts_a_long_output_in_its_middle_to_its_models_budget() {
        // Codex 0.171.0 resumed with a model it has no metadata for: 12,000 bytes, the marker
        // counting characters (as measured: codemie's 15,630-character output sent as 6,000
        // bytes, the marker, 6,000 bytes).
        let bytes = CodexTruncation::for_model("gpt-5-codex");
        assert_eq!(bytes, CodexTruncation::Bytes(12_000));
        let long = "a".repeat(20_000);
        let cut = bytes.cut(&long).unwrap();
        assert_eq!(cut, format!("{}…8000 chars truncated…{}", "a".repeat(6_000), "a".repeat(6_000)));
        assert_eq!(bytes.cut(&"a".repeat(12_000)), None, "what fits is sent whole");
        // Cut on character boundaries: two-byte characters, 3,000 kept on each side.
        let wide = "é".repeat(10_000);
        assert_eq!(bytes.cut(&wide).unwrap(), format!("{}…4000 chars truncated…{}", "é".repeat(3_000), "é".repeat(3_000)));
        // A model it ships: 12,000 tokens of 4 bytes; the marker counts the tokens taken out.
        for m in ["gpt-5.5", "gpt-5.5-mini", "openai/gpt-6-sol"] {
            assert_eq!(CodexTruncation::for_model(m), CodexTruncation::Tokens(12_000), "{m}");
        }
        for m in ["gpt-5-codex", "", "a/b/gpt-5.5", "my-gpt-5.5"] {
            assert_eq!(CodexTruncation::for_model(m), CodexTruncation::Bytes(12_000), "{m}");
        }
        let tokens = CodexTruncation::Tokens(12_000);
        assert_eq!(tokens.cut(&"b".repeat(48_000)), None);
        assert_eq!(tokens.cut(&"b".repeat(48_005)).unwrap(), format!("{}…2 tokens truncated…{}", "b".repeat(24_000), "b".repeat(24_000)));
    }

    #[test]
    fn codex_shares_the_budget_among_an_outputs_texts() {
        let items = json!([
            {"type":"input_text","text":"x".repeat(8_000)},
            {"type":"input_text","text":""},
            {"type":"input_image","image_url":"data:image/png;base64,AA"},
            {"type":"input_text","text":"y".repeat(8_000)},
            {"type":"input_text","text":"z"},
        ]);
        let got = CodexTruncation::Bytes(12_000).output(&items).unwrap();
        let texts: Vec<String> = got
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["text"].as_str().map_or("<image>".into(), |t| t.chars().take(3).collect::<String>() + &t.len().to_string()))
            .collect();
        // The first fits (4,000 left), the empty one is not sent, the image stays, the second is
        // cut to 4,000 bytes and a marker, the last is left out and counted.
        assert_eq!(texts[0], "xxx8000");
        assert_eq!(texts[1], "<image>");
        assert!(texts[2].starts_with("yyy") && got[2]["text"].as_str().unwrap().contains("…4000 chars truncated…"), "{texts:?}");
        assert_eq!(got[3], json!({"type":"input_text","text":"[omitted 1 text items ...]"}));
        assert_eq!(CodexTruncation::Bytes(12_000).output(&json!([{"type":"input_text","text":"short"}])), None);
    }

    #[test]
    fn codex_resumes_with_the_sessions_model_unless_told_and_skips_an_output_it_cannot_load() {
        let lines = [
            r#"{"type":"session_meta","payload":{"id":"x"}}"#.to_owned(),
            r#"{"type":"turn_context","payload":{"model":"gpt-5.5"}}"#.to_owned(),
            r#"{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}","call_id":"c1"}}"#.to_owned(),
            json!({"type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"o".repeat(20_000)}}).to_string(),
            r#"{"type":"response_item","payload":{"type":"custom_tool_call","name":"apply_patch","input":"p","call_id":"c2"}}"#.to_owned(),
            r#"{"type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"c2","output":[{"type":"output_text","text":"Done!"}]}}"#
                .to_owned(),
        ];
        let records = || lines.iter().map(|l| format!("{l}\n").into_bytes()).collect::<Vec<_>>();
        let out = |settings: &Settings| -> Vec<Value> {
            rebuild(Format::Codex, records(), ClaudeTail::default(), settings).iter().map(|b| serde_json::from_slice(b).unwrap()).collect()
        };
        // The session's model is one Codex ships: 48,000 bytes fit, the output is sent whole.
        let got = out(&Settings::default());
        assert_eq!(got[3]["payload"]["output"].as_str().unwrap().len(), 20_000);
        // Resumed with another model, it is cut to 12,000 bytes.
        let got = out(&Settings { model: Some("gpt-5-codex".into()) });
        assert!(got[3]["payload"]["output"].as_str().unwrap().contains("…8000 chars truncated…"));
        // The output list of `output_text` items does not load: its call is answered "aborted".
        assert_eq!(got.len(), 6);
        assert_eq!(got[5]["payload"], json!({"type":"custom_tool_call_output","call_id":"c2","output":"aborted"}));
    }

    #[test]
    fn codex_takes_back_the_turns_a_rollback_names() {
        let msg = |role: &str, text: &str| {
            json!({"type":"response_item","payload":{"type":"message","role":role,"content":[{"type":"input_text","text":text}]}}).to_string()
        };
        let rollback = |n: u64| json!({"type":"event_msg","payload":{"type":"thread_rolled_back","num_turns":n}}).to_string();
        let compacted = json!({"type":"compacted","payload":{"message":"","replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"summary"}]}],"window_number":1}}).to_string();
        let texts = |lines: &[String]| -> Vec<String> {
            let records = lines.iter().map(|l| format!("{l}\n").into_bytes()).collect();
            rebuild(Format::Codex, records, ClaudeTail::default(), &Settings::default())
                .iter()
                .map(|b| serde_json::from_slice::<Value>(b).unwrap())
                .flat_map(|v| {
                    let items = match v["type"].as_str() {
                        Some("compacted") => v["payload"]["replacement_history"].as_array().cloned().unwrap_or_default(),
                        Some("response_item") => vec![v["payload"].clone()],
                        _ => vec![],
                    };
                    items.into_iter().map(|i| i["content"][0]["text"].as_str().unwrap_or("?").to_owned()).collect::<Vec<_>>()
                })
                .collect()
        };
        // One turn back: the last user turn and what followed it go; later turns stay.
        let lines = [compacted.clone(), msg("assistant", "a2"), msg("user", "t3"), msg("assistant", "a3"), rollback(1), msg("user", "t4")];
        assert_eq!(texts(&lines), ["summary", "a2", "t4"]);
        // More turns than there are: back to the first user message (the summary counts as one).
        let lines = [compacted.clone(), msg("assistant", "a2"), msg("user", "t3"), rollback(5), msg("user", "t4")];
        assert_eq!(texts(&lines), ["t4"]);
        // A message Codex makes itself is no turn; 0 turns is nothing.
        let lines = [msg("user", "t1"), msg("user", "<environment_context>cwd</environment_context>"), msg("assistant", "a1"), rollback(0), rollback(1)];
        assert_eq!(texts(&lines), Vec::<String>::new());
        let lines = [msg("user", "t1"), msg("assistant", "a1"), msg("user", "<environment_context>x</environment_context>"), rollback(1)];
        assert_eq!(texts(&lines), Vec::<String>::new(), "the environment message after the turn goes with it");
    }
}
