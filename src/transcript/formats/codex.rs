//! OpenAI Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-<ts>-<id>.jsonl`).
//!
//! Current layout: `{timestamp, type, payload}` lines of type `session_meta`, `response_item`,
//! `compacted`, `turn_context` and `event_msg`. Only `response_item`s are conversation: the
//! `event_msg` user and agent messages duplicate them for the UI. Calls (`function_call`,
//! `custom_tool_call`, `local_shell_call`, `tool_search_call`, and any future `*_call` with a
//! `call_id`) pair by `call_id` with their output: `*_call_output`, or `tool_search_output` for
//! a `tool_search_call` (any `*_output` with a `call_id` answers the call with that id, as
//! Codex's own history pairs them); `web_search_call` has neither, nor has a tool search the
//! model ran itself (`"execution": "server"`, no `call_id`). A
//! `compacted` line replaces all earlier history with its `replacement_history`.
//!
//! The older layout has no envelope: a first line with the session's `id` and `instructions`,
//! then the response items themselves, with `{"record_type": "state"}` lines between.

use super::blocks::args_of_string;
use super::edit::{self, CallRef, Edited};
use crate::transcript::model::{Args, Call, Entry, Message, Parsed, Role, ToolResult, Usage};
use crate::transcript::scan::{self, object_line, RawStr, Scanner};
use serde_json::{json, Map, Value};

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
    let u = Usage { key: 0, input: input.saturating_sub(cached), output, cache_read: cached, cache_creation: 0, cache_creation_1h: 0 };
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
            Parsed::of(Entry::Compaction { carried: pending_calls(history), keeps: None, summary_follows: false })
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
        // `*_call_output`, and `tool_search_output`, the answer to a `tool_search_call`.
        t if t.ends_with("_output") => {
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

// Writing.

/// A synthetic error result for `call`: its `*_output` item (a `local_shell_call` is answered by
/// a `function_call_output`), in the envelope of the current layout with the `timestamp` of the
/// line it `follows` when that line has one, as a bare item in the legacy layout. A
/// `tool_search_call` gets what Codex itself fills in for one left without its output: a
/// `tool_search_output` that found no tools (it has no text to carry `text`).
pub fn synthetic_result(follows: &[u8], call: &CallRef, text: &str) -> Vec<u8> {
    synthetic_result_in(&envelope(follows), call, text)
}

/// What a synthetic result copies from the line it follows (its layout and timestamp), read once
/// for every result inserted after that line.
pub fn envelope(follows: &[u8]) -> Map<String, Value> {
    edit::members(follows, &["timestamp", "payload"])
}

/// [`synthetic_result`] with the envelope already read ([`envelope`]).
pub fn synthetic_result_in(env: &Map<String, Value>, call: &CallRef, text: &str) -> Vec<u8> {
    let item = match call.item.as_deref() {
        Some("tool_search_call") => {
            json!({"type": "tool_search_output", "call_id": call.id, "status": "completed", "execution": "client", "tools": []})
        }
        other => {
            let item_type = match other {
                Some("local_shell_call") | None => "function_call_output".to_owned(),
                Some(t) => format!("{t}_output"),
            };
            json!({"type": item_type, "call_id": call.id, "output": text})
        }
    };
    let v = if env.contains_key("payload") {
        let mut m = Map::new();
        if let Some(ts) = env.get("timestamp") {
            m.insert("timestamp".into(), ts.clone());
        }
        m.insert("type".into(), json!("response_item"));
        m.insert("payload".into(), item);
        Value::Object(m)
    } else {
        item
    };
    edit::to_line(&v)
}

/// Removes results for a call: a Codex output item is its line, so the line goes (none is kept
/// first: a line holds one result).
pub fn drop_results(keep_first: bool) -> Result<Edited, edit::Unable> {
    if keep_first {
        Err(edit::Unable("the line holds a single result"))
    } else {
        Ok(Edited::Gone)
    }
}

/// Removes a call: a Codex call item is its line.
pub fn drop_call() -> Result<Edited, edit::Unable> {
    Ok(Edited::Gone)
}

// The envelope, as the canonical records read it.

/// The top-level `type` and `payload` of a Codex line.
pub fn read_envelope(line: &[u8]) -> scan::Result<(Option<scan::RawStr<'_>>, Option<&[u8]>)> {
    let (mut ty, mut payload) = (None, None);
    object_line(line, |s, k| {
        match &*k.key() {
            b"type" => ty = s.opt_string()?,
            b"payload" => payload = Some(s.raw_value()?),
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok((ty, payload))
}

/// Whether `ty` is a type of the current Codex envelope (not a legacy item line).
pub fn is_envelope_type(ty: &str) -> bool {
    matches!(
        ty,
        "session_meta"
            | "response_item"
            | "compacted"
            | "turn_context"
            | "event_msg"
            | "world_state"
            | "inter_agent_communication"
            | "inter_agent_communication_metadata"
    )
}

/// The number of `replacement_history` items and the `window_number` of a `compacted` payload.
pub fn compaction_facts(payload: &[u8]) -> (Option<usize>, Option<String>) {
    let (mut items, mut window) = (None, None);
    let mut s = Scanner::new(payload);
    let _ = s.opt_object(|s, k| {
        match &*k.key() {
            b"replacement_history" => {
                let mut n = 0;
                if s.opt_array(|s| s.skip().map(|_| n += 1))? {
                    items = Some(n);
                }
            }
            b"window_number" if s.peek() == Some(scan::Kind::Number) => window = Some(String::from_utf8_lossy(s.number()?).into_owned()),
            _ => s.skip()?,
        }
        Ok(())
    });
    (items, window)
}

// Rollout lines, as the compaction cut (`context::model_context`, `ModelContextScan`, docs/requirements.md) reads them.

/// What one rollout line means to the cutoff rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemKind {
    /// `session_meta`.
    SessionMeta,
    /// `response_item`; `proves_user_turn` for an `agent_message` item or an assistant message
    /// that carries an inter-agent message.
    ResponseItem {
        /// Whether it proves a user turn.
        proves_user_turn: bool,
    },
    /// `inter_agent_communication`: a user-turn proof.
    InterAgentCommunication,
    /// `compacted`, and whether the fields a bounded cutoff needs are present.
    Compacted {
        /// `replacement_history` is an array.
        replacement_history: bool,
        /// `window_number` is an unsigned integer.
        window_number: bool,
    },
    /// `turn_context`.
    TurnContext {
        /// Its `turn_id`, when present.
        turn_id: Option<String>,
    },
    /// `event_msg` `task_started` (or `turn_started`).
    TurnStarted {
        /// The turn.
        turn_id: String,
    },
    /// `event_msg` `task_complete` (or `turn_complete`).
    TurnComplete {
        /// The turn.
        turn_id: String,
    },
    /// `event_msg` `turn_aborted`.
    TurnAborted {
        /// The turn, when named.
        turn_id: Option<String>,
    },
    /// `event_msg` `item_completed`.
    ItemCompleted {
        /// The turn.
        turn_id: String,
        /// The item is a `UserMessage`: a user-turn proof.
        user_message: bool,
    },
    /// `event_msg` `user_message`: a user-turn proof.
    UserMessage,
    /// `event_msg` `thread_rolled_back`: disables the bounded cutoff.
    ThreadRolledBack,
    /// Anything else: other events, `world_state`, legacy-layout lines, unknown types. An event
    /// without the `turn_id` Codex requires of it is one too (Codex cannot read it either).
    Other,
    /// Not a JSON object (or not UTF-8); kept for the raw output, no effect on the rules.
    Unreadable,
}

impl ItemKind {
    /// Reads what a rollout line means. Never fails: a line that cannot be read is
    /// [`ItemKind::Unreadable`], a field of an unexpected shape is absent.
    pub fn of(line: &[u8]) -> ItemKind {
        if simdutf8::basic::from_utf8(line).is_err() {
            return ItemKind::Unreadable;
        }
        let mut ty = None;
        let mut payload = Payload::default();
        let read = object_line(line, |s, k| {
            match &*k.key() {
                b"type" => ty = s.opt_string()?,
                b"payload" => payload = read_payload(s)?,
                _ => s.skip()?,
            }
            Ok(())
        });
        if read.is_err() {
            return ItemKind::Unreadable;
        }
        let Some(ty) = ty else { return ItemKind::Other };
        match &*ty.key() {
            b"session_meta" => ItemKind::SessionMeta,
            b"response_item" => ItemKind::ResponseItem { proves_user_turn: payload.proves_user_turn() },
            b"inter_agent_communication" => ItemKind::InterAgentCommunication,
            b"compacted" => ItemKind::Compacted { replacement_history: payload.replacement_history, window_number: payload.window_number },
            b"turn_context" => ItemKind::TurnContext { turn_id: payload.turn_id },
            b"event_msg" => payload.event(),
            _ => ItemKind::Other,
        }
    }
}

/// The payload fields the rules read, from any payload shape.
#[derive(Default)]
struct Payload {
    ty: Option<String>,
    role: Option<String>,
    turn_id: Option<String>,
    replacement_history: bool,
    window_number: bool,
    /// `item.type` of an `item_completed` event.
    item_type: Option<String>,
    /// The text of the only content part, when the content is exactly one text part.
    only_text: Option<String>,
}

fn read_payload(s: &mut Scanner<'_>) -> scan::Result<Payload> {
    let mut p = Payload::default();
    let decode = |r: Option<RawStr<'_>>| r.map(|r| r.decode().into_owned());
    s.opt_object(|s, k| {
        match &*k.key() {
            b"type" => p.ty = decode(s.opt_string()?),
            b"role" => p.role = decode(s.opt_string()?),
            b"turn_id" => p.turn_id = decode(s.opt_string()?),
            b"replacement_history" => p.replacement_history = s.opt_array(|s| s.skip())?,
            // Codex reads it as an unsigned integer.
            b"window_number" if s.peek() == Some(scan::Kind::Number) => p.window_number = s.number()?.iter().all(u8::is_ascii_digit),
            b"item" => {
                s.opt_object(|s, k| {
                    match &*k.key() {
                        b"type" => p.item_type = decode(s.opt_string()?),
                        _ => s.skip()?,
                    }
                    Ok(())
                })?;
            }
            b"content" => p.only_text = read_only_text(s)?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok(p)
}

/// The text of message content made of exactly one `input_text` / `output_text` part.
fn read_only_text(s: &mut Scanner<'_>) -> scan::Result<Option<String>> {
    let mut parts = 0;
    let mut text = None;
    s.opt_array(|s| {
        parts += 1;
        let (mut ty, mut t) = (None, None);
        s.opt_object(|s, k| {
            match &*k.key() {
                b"type" => ty = s.opt_string()?,
                b"text" => t = s.opt_string()?,
                _ => s.skip()?,
            }
            Ok(())
        })?;
        if ty.is_some_and(|ty| ty.is("input_text") || ty.is("output_text")) {
            text = t.map(|t| t.decode().into_owned());
        }
        Ok(())
    })?;
    Ok(if parts == 1 { text } else { None })
}

impl Payload {
    fn is(&self, field: &Option<String>, value: &str) -> bool {
        field.as_deref() == Some(value)
    }

    fn proves_user_turn(&self) -> bool {
        match self.ty.as_deref() {
            Some("agent_message") => true,
            Some("message") => self.is(&self.role, "assistant") && self.only_text.as_deref().is_some_and(is_inter_agent_message),
            _ => false,
        }
    }

    fn event(self) -> ItemKind {
        let turn_id = self.turn_id;
        match (self.ty.as_deref(), turn_id) {
            (Some("task_started" | "turn_started"), Some(turn_id)) => ItemKind::TurnStarted { turn_id },
            (Some("task_complete" | "turn_complete"), Some(turn_id)) => ItemKind::TurnComplete { turn_id },
            (Some("turn_aborted"), turn_id) => ItemKind::TurnAborted { turn_id },
            (Some("item_completed"), Some(turn_id)) => ItemKind::ItemCompleted { turn_id, user_message: self.item_type.as_deref() == Some("UserMessage") },
            (Some("user_message"), _) => ItemKind::UserMessage,
            (Some("thread_rolled_back"), _) => ItemKind::ThreadRolledBack,
            _ => ItemKind::Other,
        }
    }
}

/// Whether message text is a serialized inter-agent message: a JSON object with the agent
/// paths `author` and `recipient`, a string `content` and a boolean `trigger_turn` (and, if
/// present, an array of agent paths `other_recipients`).
fn is_inter_agent_message(text: &str) -> bool {
    let Ok(serde_json::Value::Object(o)) = serde_json::from_str::<serde_json::Value>(text) else { return false };
    let path = |v: &serde_json::Value| v.as_str().is_some_and(|p| p.starts_with('/'));
    o.get("author").is_some_and(path)
        && o.get("recipient").is_some_and(path)
        && o.get("content").is_some_and(|c| c.is_string())
        && o.get("trigger_turn").is_some_and(|t| t.is_boolean())
        && o.get("other_recipients").is_none_or(|r| r.as_array().is_some_and(|a| a.iter().all(path)))
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
        let Entry::Compaction { carried, .. } = entry(
            r#"{"type":"compacted","payload":{"message":"","replacement_history":[{"type":"function_call","call_id":"a","name":"n","arguments":"{}"},{"type":"function_call","call_id":"b","name":"n","arguments":"{}"},{"type":"function_call_output","call_id":"a","output":""}]}}"#,
        ) else {
            panic!()
        };
        assert_eq!(carried.iter().map(|c| c.id.as_ref()).collect::<Vec<_>>(), vec!["b"]);
    }

    #[test]
    fn token_count_usage() {
        let p = parse(br#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":3,"total_tokens":13},"last_token_usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":3,"total_tokens":13}}}}"#).unwrap();
        assert_eq!(p.usage, Some(Usage { key: 13, input: 6, output: 3, cache_read: 4, cache_creation: 0, cache_creation_1h: 0 }));
    }
}
