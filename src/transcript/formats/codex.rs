//! OpenAI Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-<ts>-<id>.jsonl`).
//!
//! Current layout: `{timestamp, type, payload}` lines of type `session_meta`, `response_item`,
//! `compacted`, `turn_context` and `event_msg`. Only `response_item`s are conversation: the
//! `event_msg` user and agent messages duplicate them for the UI. Calls (`function_call`,
//! `custom_tool_call`, `local_shell_call`, `tool_search_call`, and any future `*_call` with a
//! `call_id`) pair by `call_id` with their `*_call_output`; `web_search_call` has neither. A
//! `compacted` line replaces all earlier history with its `replacement_history`.
//!
//! The older layout has no envelope: a first line with the session's `id` and `instructions`,
//! then the response items themselves, with `{"record_type": "state"}` lines between.

use super::blocks::args_of_string;
use crate::transcript::model::{Args, Call, Entry, Message, Parsed, Role, ToolResult, Usage};
use crate::transcript::scan::{self, object_line, RawStr, Scanner};

/// Top-level record types of the current layout that are not conversation.
const ENVELOPE_OTHER: &[&str] = &["session_meta", "turn_context", "event_msg"];

/// One rollout line, or one item inside `payload` / `replacement_history`: the fields we read.
#[derive(Debug, Default)]
pub struct Item<'a> {
    /// Record or item type.
    pub ty: Option<RawStr<'a>>,
    /// Message role.
    pub role: Option<RawStr<'a>>,
    /// Call id of calls and outputs.
    pub call_id: Option<RawStr<'a>>,
    /// Tool name of a call.
    pub name: Option<RawStr<'a>>,
    /// JSON-encoded arguments of a `function_call` (may not parse).
    pub arguments: Option<RawStr<'a>>,
    /// Whether message content has a non-blank part.
    pub has_content: bool,
    /// `compacted`: the history that replaces everything before.
    pub replacement_history: Vec<Item<'a>>,
    /// The envelope's payload.
    pub payload: Option<Box<Item<'a>>>,
    /// `token_count`: last usage, and the running total (Codex repeats unchanged events).
    pub usage: Option<(Usage, u64)>,
    /// `turn_context`: the model in use.
    pub model: Option<RawStr<'a>>,
    /// Legacy layout: a state line or the session meta line.
    pub legacy_meta: bool,
}

/// Reads an item object (the scanner is at its value; anything else reads as an empty item).
pub fn read_item<'a>(s: &mut Scanner<'a>) -> scan::Result<Item<'a>> {
    let mut it = Item::default();
    s.opt_object(|s, k| item_field(s, k, &mut it))?;
    Ok(it)
}

fn item_field<'a>(s: &mut Scanner<'a>, k: RawStr<'a>, it: &mut Item<'a>) -> scan::Result<()> {
    match &*k.key() {
        b"type" => it.ty = s.opt_string()?,
        b"role" => it.role = s.opt_string()?,
        b"call_id" => it.call_id = s.opt_string()?,
        b"name" => it.name = s.opt_string()?,
        b"arguments" => it.arguments = s.opt_string()?,
        b"content" => it.has_content = read_parts(s)?,
        b"replacement_history" => {
            s.opt_array(|s| read_item(s).map(|i| it.replacement_history.push(i)))?;
        }
        b"payload" => it.payload = Some(Box::new(read_item(s)?)),
        b"info" => it.usage = read_info(s)?,
        b"model" => it.model = s.opt_string()?,
        b"record_type" | b"instructions" => {
            s.skip()?;
            it.legacy_meta = true;
        }
        _ => s.skip()?,
    }
    Ok(())
}

/// Message content parts: non-blank when a text part has text or a part is not text.
fn read_parts(s: &mut Scanner<'_>) -> scan::Result<bool> {
    let mut any = false;
    s.opt_array(|s| {
        let (mut ty, mut text) = (None, false);
        let is_object = s.opt_object(|s, k| {
            match &*k.key() {
                b"type" => ty = s.opt_string()?,
                b"text" => text = s.opt_string()?.is_some_and(|t| !t.is_blank()),
                _ => s.skip()?,
            }
            Ok(())
        })?;
        let is_text = ty.is_some_and(|t| t.is("input_text") || t.is("output_text") || t.is("text"));
        any |= !is_object || !is_text || text;
        Ok(())
    })?;
    Ok(any)
}

fn read_info(s: &mut Scanner<'_>) -> scan::Result<Option<(Usage, u64)>> {
    let (mut total, mut last) = (None, None);
    s.opt_object(|s, k| {
        match &*k.key() {
            b"total_token_usage" => total = read_usage(s)?,
            b"last_token_usage" => last = read_usage(s)?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    // Codex repeats the event with unchanged totals: the running total is the dedupe key.
    let key = total.map_or(0, |(_, t)| t);
    Ok(last.or(total).map(|(u, _)| (Usage { key, ..u }, key)))
}

/// Codex token usage: `input_tokens` includes the cached ones, `output_tokens` includes
/// reasoning. Returns the canonical usage and `total_tokens`.
fn read_usage(s: &mut Scanner<'_>) -> scan::Result<Option<(Usage, u64)>> {
    let (mut input, mut cached, mut output, mut total) = (0, 0, 0, 0);
    let is_object = s.opt_object(|s, k| {
        match &*k.key() {
            b"input_tokens" => input = s.opt_count()?,
            b"cached_input_tokens" => cached = s.opt_count()?,
            b"output_tokens" => output = s.opt_count()?,
            b"total_tokens" => total = s.opt_count()?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    let u = Usage { key: 0, input: input.saturating_sub(cached), output, cache_read: cached, cache_creation: 0 };
    Ok(is_object.then_some((u, total)))
}

/// Parses one line (valid UTF-8, not blank). `Err` means the line is not a JSON object.
pub fn parse(line: &[u8]) -> scan::Result<Parsed<'_>> {
    let mut it = Item::default();
    object_line(line, |s, k| item_field(s, k, &mut it))?;
    Ok(interpret(it))
}

fn interpret(item: Item<'_>) -> Parsed<'_> {
    let ty = item.ty.map(|t| t.decode());
    match ty.as_deref() {
        Some("response_item") => match item.payload {
            Some(p) => Parsed::of(response_item(*p)),
            None => Parsed::of(Entry::Other),
        },
        Some("compacted") => {
            let history = item.payload.map(|p| p.replacement_history).unwrap_or_default();
            Parsed::of(Entry::Compaction { carried: pending_calls(history) })
        }
        Some("event_msg") => {
            let usage = item.payload.filter(|p| p.ty.is_some_and(|t| t.is("token_count"))).and_then(|p| p.usage).map(|(u, _)| u);
            Parsed { usage, ..Parsed::of(Entry::Other) }
        }
        Some("turn_context") => {
            let model = item.payload.and_then(|p| p.model).map(|m| m.decode());
            Parsed { model, ..Parsed::of(Entry::Other) }
        }
        Some(t) if ENVELOPE_OTHER.contains(&t) => Parsed::of(Entry::Other),
        // The legacy layout: the line is the item.
        Some(_) => Parsed::of(response_item(item)),
        None if item.legacy_meta => Parsed::of(Entry::Other),
        None => Parsed::of(Entry::Unknown),
    }
}

/// The meaning of one response item.
pub fn response_item(p: Item<'_>) -> Entry<'_> {
    let ty = p.ty.map(|t| t.decode()).unwrap_or_default();
    match &*ty {
        "message" => {
            let role = match p.role.map(|r| r.decode()).as_deref() {
                Some("user") => Role::User,
                Some("assistant") => Role::Assistant,
                Some("system") => Role::System,
                Some("developer") => Role::Developer,
                _ => return Entry::Unknown,
            };
            let mut m = Message::new(role);
            m.prompt = role == Role::User;
            m.has_content = p.has_content;
            Entry::Message(m)
        }
        t if t.ends_with("_call_output") => {
            let mut m = Message::new(Role::Tool);
            m.has_content = true;
            if let Some(id) = p.call_id {
                m.results.push(ToolResult { id: id.decode() });
            }
            Entry::Message(m)
        }
        t if t.ends_with("_call") => {
            let mut m = Message::new(Role::Assistant);
            m.has_content = true;
            if let Some(id) = p.call_id {
                let args = match t {
                    "function_call" => args_of_string(p.arguments.map(|a| a.decode()).as_deref()),
                    _ => Args::Object,
                };
                let name = p.name.map(|n| n.decode()).unwrap_or_else(|| t.trim_end_matches("_call").to_owned().into());
                m.calls.push(Call { id: id.decode(), name, args, item: Some(ty.clone()) });
            }
            Entry::Message(m)
        }
        // Model output that pairs with nothing: reasoning (often encrypted), compaction markers.
        "reasoning" | "compaction" | "compaction_summary" => {
            let mut m = Message::new(Role::Assistant);
            m.has_content = true;
            Entry::Message(m)
        }
        _ => Entry::Unknown,
    }
}

/// Calls in a replacement history that the history itself does not answer.
fn pending_calls(items: Vec<Item<'_>>) -> Vec<Call<'_>> {
    let mut calls: Vec<Call<'_>> = Vec::new();
    for it in items {
        if let Entry::Message(m) = response_item(it) {
            for r in &m.results {
                calls.retain(|c| c.id != r.id);
            }
            calls.extend(m.calls);
        }
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(line: &str) -> Entry<'_> {
        parse(line.as_bytes()).unwrap().entry
    }

    #[test]
    fn envelope_items() {
        let Entry::Message(m) = entry(
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"c1"}}"#,
        ) else {
            panic!()
        };
        assert_eq!((m.calls[0].id.as_ref(), m.calls[0].args), ("c1", Args::Object));
        let Entry::Message(m) =
            entry(r#"{"type":"response_item","payload":{"type":"function_call","name":"x","arguments":"[REDACTED len=3]","call_id":"c1"}}"#)
        else {
            panic!()
        };
        assert_eq!(m.calls[0].args, Args::Unparseable);
        let Entry::Message(m) =
            entry(r#"{"type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"c2","output":[{"type":"output_text","text":"Done!"}]}}"#)
        else {
            panic!()
        };
        assert_eq!(m.results[0].id, "c2");
        let Entry::Message(m) = entry(r#"{"type":"response_item","payload":{"type":"web_search_call","status":"completed"}}"#) else { panic!() };
        assert!(m.calls.is_empty());
        assert_eq!(entry(r#"{"type":"event_msg","payload":{"type":"user_message","message":"hi"}}"#), Entry::Other);
        assert_eq!(entry(r#"{"type":"future_synthetic_record","payload":{}}"#), Entry::Unknown);
    }

    #[test]
    fn legacy_layout() {
        assert_eq!(entry(r#"{"id":"x","timestamp":"t","instructions":null}"#), Entry::Other);
        assert_eq!(entry(r#"{"record_type":"state"}"#), Entry::Other);
        let Entry::Message(m) = entry(r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}"#) else { panic!() };
        assert!(m.prompt && m.has_content);
    }

    #[test]
    fn compacted_carries_unanswered_calls() {
        let Entry::Compaction { carried } = entry(
            r#"{"type":"compacted","payload":{"message":"","replacement_history":[{"type":"function_call","call_id":"a","name":"n","arguments":"{}"},{"type":"function_call","call_id":"b","name":"n","arguments":"{}"},{"type":"function_call_output","call_id":"a","output":""}]}}"#,
        ) else {
            panic!()
        };
        assert_eq!(carried.iter().map(|c| c.id.as_ref()).collect::<Vec<_>>(), vec!["b"]);
    }

    #[test]
    fn token_count_usage() {
        let p = parse(br#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":3,"total_tokens":13},"last_token_usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":3,"total_tokens":13}}}}"#).unwrap();
        assert_eq!(p.usage, Some(Usage { key: 13, input: 6, output: 3, cache_read: 4, cache_creation: 0 }));
    }
}
