//! The lines and edits repair writes: synthetic tool results in each format, block removal,
//! message merging, and the small byte-level edits of Claude Code's uuid tree.
//!
//! Synthetic results copy their envelope (session id, cwd, version, timestamp, ...) from the line
//! they follow, so that the agent that resumes the file sees a result shaped like its own. New
//! uuids are derived from the input, not drawn at random: repairing the same file twice gives the
//! same bytes.

use crate::transcript::formats::Format;
use crate::transcript::scan::{self, Scanner};
use serde_json::{json, Map, Value};

/// Seed 002 `not_executed`: the result of a call that never ran.
pub const NOT_EXECUTED: &str = "Tool call was not executed: the transcript has no result for it. (Result inserted by transcriptd repair.)";
/// Seed 002 `TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER`: every other call of a turn with an invalid
/// call gets this; none of the turn's calls ran.
pub const NOT_EXECUTED_DUE_TO_INVALID_PEER: &str =
    "Tool call was not executed because another tool call in the same turn was invalid; none of the turn's calls ran. (Result inserted by transcriptd repair.)";
/// The result of a call that was interrupted (a kill, a crash) and never completed.
pub const INTERRUPTED: &str = "Tool call was interrupted and did not complete; its effects, if any, are unknown. (Result inserted by transcriptd repair.)";

/// Which synthetic text a result gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultText {
    /// [`NOT_EXECUTED`].
    NotExecuted,
    /// [`NOT_EXECUTED_DUE_TO_INVALID_PEER`].
    InvalidPeer,
    /// [`INTERRUPTED`].
    Interrupted,
}

impl ResultText {
    /// The text.
    pub fn text(self) -> &'static str {
        match self {
            ResultText::NotExecuted => NOT_EXECUTED,
            ResultText::InvalidPeer => NOT_EXECUTED_DUE_TO_INVALID_PEER,
            ResultText::Interrupted => INTERRUPTED,
        }
    }
}

/// Envelope fields a synthetic Claude Code line copies from the line it follows.
const CLAUDE_ENVELOPE: &[&str] = &["isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch", "agentId", "slug"];

/// A uuid derived from `seed` bytes (version-4 layout, deterministic).
pub fn derived_uuid(seed: &[u8]) -> String {
    let a = xxhash_rust::xxh3::xxh3_128(seed);
    let b = a.to_be_bytes();
    format!(
        "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-4{:01x}{:02x}-{:01x}{:01x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
        b[0],
        b[1],
        b[2],
        b[3],
        b[4],
        b[5],
        b[6] & 0x0f,
        b[7],
        8 | (b[8] & 0x03),
        b[8] >> 4,
        b[9],
        b[10],
        b[11],
        b[12],
        b[13],
        b[14],
        b[15]
    )
}

/// Reads a line as a JSON object (lines that reach repair's edits are valid).
pub fn object(line: &[u8]) -> Option<Map<String, Value>> {
    match serde_json::from_slice::<Value>(line).ok()? {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

/// The members named in `keys` of a line's top-level object, parsed; the others are skipped
/// without being decoded. Empty when the line is not a JSON object. (The last of duplicate keys
/// wins, as in [`object`].)
fn members(line: &[u8], keys: &[&str]) -> Map<String, Value> {
    let mut found = Map::new();
    let walk = scan::object_line(line, |s, k| {
        let key = k.key();
        let Some(want) = keys.iter().find(|want| want.as_bytes() == &*key) else { return s.skip() };
        let raw = s.raw_value()?;
        let value = serde_json::from_slice(raw).map_err(|_| scan::Invalid { at: s.position() })?;
        found.insert((*want).to_owned(), value);
        Ok(())
    });
    if walk.is_err() {
        return Map::new();
    }
    found
}

/// Serializes an edited line (compact, key order kept).
pub fn to_line(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("a Value always serializes")
}

/// What a synthetic result needs to know about its call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRef {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub tool: String,
    /// Codex item type of the call (`function_call`, `custom_tool_call`, ...).
    pub item: Option<String>,
}

/// A synthetic error result for `call`, in `format`, to be written after the line `follows`
/// (whose envelope it copies). For Claude Code, `parent` is the uuid the new line hangs under and
/// `uuid` its own.
pub fn synthetic_result(format: Format, follows: &[u8], call: &CallRef, text: ResultText, parent: Option<&str>, uuid: &str) -> Vec<u8> {
    let env = match format {
        Format::ClaudeCode => members(follows, &[CLAUDE_ENVELOPE, &["timestamp"]].concat()),
        Format::Codex => members(follows, &["timestamp", "payload"]),
        Format::OpenAiChat | Format::Anthropic | Format::Dataset(_) => Map::new(),
    };
    let text = text.text();
    let v = match format {
        Format::ClaudeCode => {
            let mut m = Map::new();
            m.insert("parentUuid".into(), parent.map_or(Value::Null, |p| Value::String(p.to_owned())));
            for k in CLAUDE_ENVELOPE {
                if let Some(v) = env.get(*k) {
                    m.insert((*k).into(), v.clone());
                }
            }
            m.insert("type".into(), json!("user"));
            m.insert(
                "message".into(),
                json!({"role": "user", "content": [{"tool_use_id": call.id, "type": "tool_result", "content": text, "is_error": true}]}),
            );
            m.insert("uuid".into(), json!(uuid));
            if let Some(ts) = env.get("timestamp") {
                m.insert("timestamp".into(), ts.clone());
            }
            m.insert("toolUseResult".into(), json!(format!("Error: {text}")));
            Value::Object(m)
        }
        Format::Codex => {
            let item_type = match call.item.as_deref() {
                Some("local_shell_call") | None => "function_call_output".to_owned(),
                Some(t) => format!("{t}_output"),
            };
            let item = json!({"type": item_type, "call_id": call.id, "output": text});
            if env.contains_key("payload") {
                let mut m = Map::new();
                if let Some(ts) = env.get("timestamp") {
                    m.insert("timestamp".into(), ts.clone());
                }
                m.insert("type".into(), json!("response_item"));
                m.insert("payload".into(), item);
                Value::Object(m)
            } else {
                item
            }
        }
        Format::OpenAiChat => json!({"role": "tool", "tool_call_id": call.id, "content": text}),
        Format::Anthropic => json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": text, "is_error": true}]}),
        // Inside a dataset's conversation, a result is a message of the format's own shape.
        Format::Dataset(_) => json!({"role": "tool", "tool_call_id": call.id, "content": text}),
    };
    to_line(&v)
}

/// The content array of a line's message: `message.content` (Claude Code) or `content`.
fn content_mut(format: Format, m: &mut Map<String, Value>) -> Option<&mut Vec<Value>> {
    let holder = match format {
        Format::ClaudeCode => m.get_mut("message")?.as_object_mut()?,
        _ => m,
    };
    holder.get_mut("content")?.as_array_mut()
}

/// Removes `tool_result` blocks for `call_id` from a line: all of them, or all but the first.
/// Returns the edited line, or `None` when nothing would be left of it.
pub fn drop_results(format: Format, line: &[u8], call_id: &str, keep_first: bool) -> Option<Vec<u8>> {
    let mut m = object(line)?;
    let parts = content_mut(format, &mut m)?;
    let mut seen = false;
    parts.retain(|p| {
        let hit = p.get("type").and_then(Value::as_str) == Some("tool_result") && p.get("tool_use_id").and_then(Value::as_str) == Some(call_id);
        if !hit {
            return true;
        }
        let keep = keep_first && !seen;
        seen = true;
        keep
    });
    if parts.is_empty() {
        return None;
    }
    Some(to_line(&Value::Object(m)))
}

/// Removes the call `call_id` from a line (a `tool_use` block, or an OpenAI `tool_calls`
/// entry). Returns the edited line, or `None` when the message would be left empty.
pub fn drop_call(format: Format, line: &[u8], call_id: &str) -> Option<Vec<u8>> {
    let mut m = object(line)?;
    if format == Format::OpenAiChat {
        let calls = m.get_mut("tool_calls")?.as_array_mut()?;
        calls.retain(|c| c.get("id").and_then(Value::as_str) != Some(call_id));
        let no_calls = calls.is_empty();
        if no_calls {
            m.remove("tool_calls");
        }
        let has_text = match m.get("content") {
            Some(Value::String(s)) => !s.trim().is_empty(),
            Some(Value::Array(a)) => !a.is_empty(),
            _ => false,
        };
        return (!no_calls || has_text).then(|| to_line(&Value::Object(m)));
    }
    let parts = content_mut(format, &mut m)?;
    parts.retain(|p| !(p.get("type").and_then(Value::as_str) == Some("tool_use") && p.get("id").and_then(Value::as_str) == Some(call_id)));
    if parts.is_empty() {
        return None;
    }
    Some(to_line(&Value::Object(m)))
}

/// Merges the assistant message `next` into `into` (OpenAI chat, Anthropic): content and calls
/// of both, in order, as one message.
pub fn merge_messages(format: Format, into: &[u8], next: &[u8]) -> Option<Vec<u8>> {
    let mut a = object(into)?;
    let b = object(next)?;
    let parts = |v: Option<&Value>| -> Vec<Value> {
        match v {
            Some(Value::String(s)) if !s.is_empty() => vec![json!({"type": "text", "text": s})],
            Some(Value::Array(p)) => p.clone(),
            _ => Vec::new(),
        }
    };
    let mut content = parts(a.get("content"));
    content.extend(parts(b.get("content")));
    let all_text = content.iter().all(|p| p.get("type").and_then(Value::as_str) == Some("text"));
    let merged = if format == Format::OpenAiChat && all_text {
        // OpenAI content stays a string when both were text.
        let texts: Vec<&str> = content.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect();
        if texts.is_empty() {
            Value::Null
        } else {
            Value::String(texts.join("\n\n"))
        }
    } else {
        Value::Array(content)
    };
    a.insert("content".into(), merged);
    if let Some(Value::Array(calls)) = b.get("tool_calls") {
        let mut all = match a.remove("tool_calls") {
            Some(Value::Array(c)) => c,
            _ => Vec::new(),
        };
        all.extend(calls.iter().cloned());
        a.insert("tool_calls".into(), Value::Array(all));
    }
    Some(to_line(&Value::Object(a)))
}

/// Top-level `uuid` and `parentUuid` of a Claude Code line (raw strings; `None` for null or
/// absent).
pub fn claude_ids(line: &[u8]) -> (Option<String>, Option<String>) {
    let (mut uuid, mut parent) = (None, None);
    let _ = scan::object_line(line, |s, k| {
        match &*k.key() {
            b"uuid" => uuid = s.opt_string()?.map(|r| r.decode().into_owned()),
            b"parentUuid" => parent = s.opt_string()?.map(|r| r.decode().into_owned()),
            _ => s.skip()?,
        }
        Ok(())
    });
    (uuid, parent)
}

/// Byte range of the top-level `parentUuid` value (the whole JSON value: a string with its
/// quotes, or `null`) and the parent it names. Of duplicate keys the last counts, as for every
/// JSON reader (and the checker's tree). Walks the whole line: repair calls it only for lines
/// it edits or that may hang under a removed line.
pub fn parent_span(line: &[u8]) -> Option<(std::ops::Range<usize>, Option<std::borrow::Cow<'_, str>>)> {
    let mut s = Scanner::new(line);
    let mut found = None;
    // A line that is not valid JSON ends the walk: what was found before counts.
    let _ = s.object(|s, k| {
        if &*k.key() != b"parentUuid" {
            return s.skip();
        }
        let start = s.value_start();
        let value = s.opt_string()?;
        found = Some((start..s.position(), value.map(|v| v.decode())));
        Ok(())
    });
    found
}

/// Replaces the top-level `parentUuid` of a Claude Code line with `parent` (a uuid or null).
pub fn set_parent(line: &[u8], parent: Option<&str>) -> Option<Vec<u8>> {
    let (span, _) = parent_span(line)?;
    let value = parent.map_or_else(|| "null".to_owned(), |p| serde_json::to_string(p).expect("string"));
    let mut out = Vec::with_capacity(line.len() + value.len());
    out.extend_from_slice(&line[..span.start]);
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(&line[span.end..]);
    Some(out)
}

/// `message.id` of a Claude Code line, with the byte range of its value.
pub fn message_id_span(line: &[u8]) -> Option<(std::ops::Range<usize>, String)> {
    let mut found = None;
    let _ = scan::object_line(line, |s, k| {
        if &*k.key() == b"message" {
            s.opt_object(|s, k| {
                if &*k.key() == b"id" {
                    let start = s.value_start();
                    let id = s.opt_string()?;
                    if let Some(id) = id {
                        found = Some((start..s.position(), id.decode().into_owned()));
                    }
                } else {
                    s.skip()?;
                }
                Ok(())
            })?;
        } else {
            s.skip()?;
        }
        Ok(())
    });
    found
}

/// Gives a Claude Code line the message id `id` (so that it joins that message's turn).
pub fn set_message_id(line: &[u8], id: &str) -> Option<Vec<u8>> {
    let (span, _) = message_id_span(line)?;
    let value = serde_json::to_string(id).expect("string");
    let mut out = Vec::with_capacity(line.len() + value.len());
    out.extend_from_slice(&line[..span.start]);
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(&line[span.end..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> CallRef {
        CallRef { id: id.into(), tool: "Bash".into(), item: None }
    }

    /// [`members`] reads what [`object`] would, on every line of the real fixtures and on edge
    /// cases (duplicate and escaped keys, lines that are not objects).
    #[test]
    fn members_agree_with_the_whole_object() {
        let keys = [CLAUDE_ENVELOPE, &["timestamp", "payload", "message"]].concat();
        let agree = |line: &[u8]| {
            let whole = object(line).unwrap_or_default();
            let expected: Map<String, Value> = whole.into_iter().filter(|(k, _)| keys.contains(&k.as_str())).collect();
            assert_eq!(members(line, &keys), expected, "{}", String::from_utf8_lossy(line));
        };
        let mut lines = 0;
        for e in walkdir::WalkDir::new(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/real")) {
            let path = e.unwrap().into_path();
            if path.extension().is_some_and(|x| x == "jsonl") {
                for line in std::fs::read(&path).unwrap().split(|&b| b == b'\n') {
                    agree(line);
                    lines += 1;
                }
            }
        }
        assert!(lines > 1000, "the real fixtures were read ({lines} lines)");
        for line in [
            &br#"{"cwd":"/a","cwd":"/b","timestamp":1.5e3}"#[..],
            br#"{"c\u0077d":"/esc","sessionId":{"nested":[1,2,{"x":null}]}}"#,
            br#"{"cwd":"/a","broken":}"#,
            br#"["cwd","/a"]"#,
            b"not json",
            b"",
        ] {
            agree(line);
        }
    }

    #[test]
    fn claude_result_copies_envelope() {
        let follows = br#"{"parentUuid":"p","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s","version":"2.1","gitBranch":"main","type":"assistant","message":{"id":"m"},"uuid":"a","timestamp":"2026-01-01T00:00:00Z"}"#;
        let line = synthetic_result(Format::ClaudeCode, follows, &call("t1"), ResultText::Interrupted, Some("a"), "n1");
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["parentUuid"], "a");
        assert_eq!(v["sessionId"], "s");
        assert_eq!(v["uuid"], "n1");
        assert_eq!(v["message"]["content"][0]["tool_use_id"], "t1");
        assert_eq!(v["message"]["content"][0]["is_error"], true);
        assert_eq!(v["timestamp"], "2026-01-01T00:00:00Z");
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys[0], "parentUuid");
    }

    #[test]
    fn codex_result_matches_layout_and_call_type() {
        let env = br#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call"}}"#;
        let c = CallRef { id: "c".into(), tool: "apply_patch".into(), item: Some("custom_tool_call".into()) };
        let v: Value = serde_json::from_slice(&synthetic_result(Format::Codex, env, &c, ResultText::NotExecuted, None, "")).unwrap();
        assert_eq!(v["payload"]["type"], "custom_tool_call_output");
        assert_eq!(v["timestamp"], "t");
        let legacy = br#"{"type":"function_call","call_id":"c"}"#;
        let v: Value = serde_json::from_slice(&synthetic_result(Format::Codex, legacy, &call("c"), ResultText::NotExecuted, None, "")).unwrap();
        assert_eq!(v["type"], "function_call_output");
    }

    #[test]
    fn parent_edits_touch_only_the_value() {
        let line = br#"{"parentUuid":"old","type":"user","message":{"parentUuid":"nested"},"uuid":"u"}"#;
        assert_eq!(parent_span(line).unwrap().1.as_deref(), Some("old"));
        let edited = set_parent(line, Some("new")).unwrap();
        assert_eq!(edited, br#"{"parentUuid":"new","type":"user","message":{"parentUuid":"nested"},"uuid":"u"}"#.to_vec());
        assert_eq!(set_parent(line, None).unwrap(), br#"{"parentUuid":null,"type":"user","message":{"parentUuid":"nested"},"uuid":"u"}"#.to_vec());
        let null_parent = br#"{"parentUuid":null,"uuid":"u"}"#;
        assert_eq!(parent_span(null_parent).unwrap().1, None);
        assert_eq!(claude_ids(line), (Some("u".into()), Some("old".into())));
    }

    #[test]
    fn message_id_edit() {
        let line = br#"{"message":{"role":"assistant","id":"msg_2","content":[]},"type":"assistant"}"#;
        assert_eq!(set_message_id(line, "msg_1").unwrap(), br#"{"message":{"role":"assistant","id":"msg_1","content":[]},"type":"assistant"}"#.to_vec());
    }

    #[test]
    fn block_removal() {
        let line = br#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"},{"type":"tool_result","tool_use_id":"a"},{"type":"tool_result","tool_use_id":"b"}]}}"#;
        let kept = drop_results(Format::ClaudeCode, line, "a", true).unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&kept).unwrap()["message"]["content"].as_array().unwrap().len(), 2);
        let only = br#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}}"#;
        assert_eq!(drop_results(Format::ClaudeCode, only, "a", false), None);
        let oa = br#"{"role":"assistant","content":"x","tool_calls":[{"id":"c1"},{"id":"c2"}]}"#;
        let v: Value = serde_json::from_slice(&drop_call(Format::OpenAiChat, oa, "c1").unwrap()).unwrap();
        assert_eq!(v["tool_calls"].as_array().unwrap().len(), 1);
        assert_eq!(drop_call(Format::OpenAiChat, br#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1"}]}"#, "c1"), None);
    }

    #[test]
    fn merging_messages() {
        let m =
            merge_messages(Format::OpenAiChat, br#"{"role":"assistant","content":"a"}"#, br#"{"role":"assistant","content":"b","tool_calls":[{"id":"c"}]}"#)
                .unwrap();
        let v: Value = serde_json::from_slice(&m).unwrap();
        assert_eq!(v["content"], "a\n\nb");
        assert_eq!(v["tool_calls"][0]["id"], "c");
        let m =
            merge_messages(Format::Anthropic, br#"{"role":"assistant","content":"a"}"#, br#"{"role":"assistant","content":[{"type":"tool_use","id":"t"}]}"#)
                .unwrap();
        let v: Value = serde_json::from_slice(&m).unwrap();
        assert_eq!(v["content"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn uuids_are_deterministic_and_well_formed() {
        let a = derived_uuid(b"x");
        assert_eq!(a, derived_uuid(b"x"));
        assert_ne!(a, derived_uuid(b"y"));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }
}
