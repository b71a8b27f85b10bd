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
use crate::transcript::json::{Arr, Count, Obj, Str, Text};
use crate::transcript::model::{Args, Call, Entry, Message, Parsed, Role, ToolResult, Usage};
use serde::Deserialize;

/// Top-level record types of the current layout that are not conversation.
const ENVELOPE_OTHER: &[&str] = &["session_meta", "turn_context", "event_msg"];

/// One rollout line, or one item inside `payload` / `replacement_history` (same fields).
#[derive(Deserialize, Default)]
pub struct Item<'a> {
    /// Record or item type.
    #[serde(rename = "type", default, borrow)]
    pub ty: Str<'a>,
    /// Message role.
    #[serde(default, borrow)]
    pub role: Str<'a>,
    /// Call id of calls and outputs.
    #[serde(default, borrow)]
    pub call_id: Str<'a>,
    /// Tool name of a call.
    #[serde(default, borrow)]
    pub name: Str<'a>,
    /// JSON-encoded arguments of a `function_call` (may not parse).
    #[serde(default, borrow)]
    pub arguments: Str<'a>,
    /// Message content parts.
    #[serde(default, borrow)]
    pub content: Arr<Obj<TextPart<'a>>>,
    /// `compacted`: the history that replaces everything before.
    #[serde(default, borrow)]
    pub replacement_history: Arr<Obj<Box<Item<'a>>>>,
    /// The envelope's payload.
    #[serde(default, borrow)]
    pub payload: Obj<Box<Item<'a>>>,
    /// `event_msg` `token_count`: token usage.
    #[serde(default)]
    pub info: Obj<TokenInfo>,
    /// `turn_context`: the model in use.
    #[serde(default, borrow)]
    pub model: Str<'a>,
    /// Legacy layout: state lines.
    #[serde(default, borrow)]
    pub record_type: Str<'a>,
    /// Legacy layout: the session meta line.
    #[serde(default, borrow)]
    pub instructions: Str<'a>,
}

/// A content part of a message item.
#[derive(Deserialize, Default)]
pub struct TextPart<'a> {
    #[serde(rename = "type", default, borrow)]
    ty: Str<'a>,
    #[serde(default)]
    text: Text,
}

/// `token_count` info.
#[derive(Deserialize, Default)]
pub struct TokenInfo {
    #[serde(default)]
    total_token_usage: Obj<TokenUsage>,
    #[serde(default)]
    last_token_usage: Obj<TokenUsage>,
}

/// Codex token usage. `input_tokens` includes the cached ones; `output_tokens` includes
/// reasoning.
#[derive(Deserialize, Default, Clone, Copy)]
pub struct TokenUsage {
    #[serde(default)]
    input_tokens: Count,
    #[serde(default)]
    cached_input_tokens: Count,
    #[serde(default)]
    output_tokens: Count,
    #[serde(default)]
    total_tokens: Count,
}

impl TokenUsage {
    fn canonical(&self, key: u64) -> Usage {
        Usage {
            key,
            input: self.input_tokens.0.saturating_sub(self.cached_input_tokens.0),
            output: self.output_tokens.0,
            cache_read: self.cached_input_tokens.0,
            cache_creation: 0,
        }
    }
}

/// Parses one line (valid UTF-8, not blank). `Err` means the line is not a JSON object.
pub fn parse(line: &[u8]) -> Result<Parsed<'_>, serde_json::Error> {
    let item: Item<'_> = serde_json::from_slice(line)?;
    Ok(interpret(item))
}

fn interpret(item: Item<'_>) -> Parsed<'_> {
    match item.ty.get() {
        Some("response_item") => match item.payload.0 {
            Some(p) => Parsed::of(response_item(*p)),
            None => Parsed::of(Entry::Other),
        },
        Some("compacted") => {
            let history = item.payload.0.map(|p| p.replacement_history.0).unwrap_or_default();
            Parsed::of(Entry::Compaction { carried: pending_calls(history.into_iter().filter_map(|o| o.0.map(|b| *b))) })
        }
        Some("event_msg") => {
            let usage = item
                .payload
                .0
                .as_ref()
                .filter(|p| p.ty.is("token_count"))
                .and_then(|p| p.info.0.as_ref())
                .and_then(|i| {
                    // Codex repeats the event with unchanged totals: the running total is the key.
                    let key = i.total_token_usage.0.map_or(0, |t| t.total_tokens.0);
                    i.last_token_usage.0.or(i.total_token_usage.0).map(|u| u.canonical(key))
                });
            Parsed { entry: Entry::Other, node: None, usage, model: None }
        }
        Some("turn_context") => {
            let model = item.payload.0.and_then(|p| p.model.0);
            Parsed { entry: Entry::Other, node: None, usage: None, model }
        }
        Some(t) if ENVELOPE_OTHER.contains(&t) => Parsed::of(Entry::Other),
        // The legacy layout: the line is the item.
        Some(_) => Parsed::of(response_item(item)),
        None if item.record_type.0.is_some() || item.instructions.0.is_some() => Parsed::of(Entry::Other),
        None => Parsed::of(Entry::Unknown),
    }
}

/// The meaning of one response item.
pub fn response_item(p: Item<'_>) -> Entry<'_> {
    let ty = p.ty.get().unwrap_or("");
    match ty {
        "message" => {
            let role = match p.role.get() {
                Some("user") => Role::User,
                Some("assistant") => Role::Assistant,
                Some("system") => Role::System,
                Some("developer") => Role::Developer,
                _ => return Entry::Unknown,
            };
            let mut m = Message::new(role);
            m.prompt = role == Role::User;
            m.has_content = p.content.0.iter().any(|part| match part.0.as_ref() {
                Some(tp) if matches!(tp.ty.get(), Some("input_text" | "output_text" | "text")) => tp.text.non_blank(),
                _ => true,
            });
            Entry::Message(m)
        }
        t if t.ends_with("_call_output") => {
            let mut m = Message::new(Role::Tool);
            m.has_content = true;
            if let Some(id) = p.call_id.0 {
                m.results.push(ToolResult { id });
            }
            Entry::Message(m)
        }
        t if t.ends_with("_call") => {
            let mut m = Message::new(Role::Assistant);
            m.has_content = true;
            if let Some(id) = p.call_id.0 {
                let args = match t {
                    "function_call" => args_of_string(p.arguments.get()),
                    _ => Args::Object,
                };
                let name = p.name.0.unwrap_or_else(|| t.trim_end_matches("_call").to_owned().into());
                m.calls.push(Call { id, name, args });
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
fn pending_calls<'a>(items: impl Iterator<Item = Item<'a>>) -> Vec<Call<'a>> {
    let mut calls: Vec<Call<'a>> = Vec::new();
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
        let Entry::Message(m) = entry(r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"c1"}}"#) else { panic!() };
        assert_eq!((m.calls[0].id.as_ref(), m.calls[0].args), ("c1", Args::Object));
        let Entry::Message(m) = entry(r#"{"type":"response_item","payload":{"type":"function_call","name":"x","arguments":"[REDACTED len=3]","call_id":"c1"}}"#) else { panic!() };
        assert_eq!(m.calls[0].args, Args::Unparseable);
        let Entry::Message(m) = entry(r#"{"type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"c2","output":[{"type":"output_text","text":"Done!"}]}}"#) else { panic!() };
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
        let Entry::Compaction { carried } = entry(r#"{"type":"compacted","payload":{"message":"","replacement_history":[{"type":"function_call","call_id":"a","name":"n","arguments":"{}"},{"type":"function_call","call_id":"b","name":"n","arguments":"{}"},{"type":"function_call_output","call_id":"a","output":""}]}}"#) else { panic!() };
        assert_eq!(carried.iter().map(|c| c.id.as_ref()).collect::<Vec<_>>(), vec!["b"]);
    }

    #[test]
    fn token_count_usage() {
        let p = parse(br#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":3,"total_tokens":13},"last_token_usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":3,"total_tokens":13}}}}"#).unwrap();
        assert_eq!(p.usage, Some(Usage { key: 13, input: 6, output: 3, cache_read: 4, cache_creation: 0 }));
    }
}
