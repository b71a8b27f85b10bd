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
/// `uuid` its own (empty: none, like a line it follows that has none, so that both are read in
/// the same conversation thread).
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
            if !uuid.is_empty() {
                m.insert("uuid".into(), json!(uuid));
            }
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

/// Why an edit cannot be made to a line: the line is not shaped the way the edit needs (the
/// checker read it one way, the edit finds something else). The line is then left as it is and
/// the finding reported as not repaired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unable(pub &'static str);

/// A line after an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edited {
    /// The edited line.
    Line(Vec<u8>),
    /// Nothing would be left of the message: the line goes.
    Gone,
}

type Span = std::ops::Range<usize>;

/// The span of the value at `path` (object keys from the top level), as the adapters read it:
/// of duplicate keys the last counts, and a path through a value that is not an object leads
/// nowhere.
fn value_span(line: &[u8], path: &[&[u8]]) -> Option<Span> {
    fn walk(s: &mut Scanner<'_>, path: &[&[u8]], found: &mut Option<Span>) -> scan::Result<()> {
        s.object(|s, k| {
            if *k.key() != *path[0] {
                return s.skip();
            }
            if path.len() == 1 {
                let start = s.value_start();
                s.skip()?;
                *found = Some(start..s.position());
            } else {
                let mut inner = None;
                if s.peek() == Some(scan::Kind::Object) {
                    walk(s, &path[1..], &mut inner)?;
                } else {
                    s.skip()?;
                }
                *found = inner;
            }
            Ok(())
        })
    }
    let mut s = Scanner::new(line);
    let mut found = None;
    walk(&mut s, path, &mut found).ok()?;
    s.end().ok()?;
    found
}

/// The spans of the elements of the array at `span` (absolute), or `None` if it is no array.
fn elements(line: &[u8], span: &Span) -> Option<Vec<Span>> {
    let mut s = Scanner::new(&line[span.clone()]);
    if s.peek() != Some(scan::Kind::Array) {
        return None;
    }
    let mut v = Vec::new();
    s.array(|s| {
        let start = s.value_start();
        s.skip()?;
        v.push(span.start + start..span.start + s.position());
        Ok(())
    })
    .ok()?;
    Some(v)
}

/// A top-level member: its decoded key, its span (key through value) and its value's span.
struct Member {
    key: Vec<u8>,
    span: Span,
    value: Span,
}

/// The top-level members of a line that is one JSON object.
fn members_spans(line: &[u8]) -> Option<Vec<Member>> {
    let mut s = Scanner::new(line);
    let mut v = Vec::new();
    s.object(|s, k| {
        // The raw key lies in the line, just after its opening quote.
        let key_start = k.raw().as_ptr() as usize - line.as_ptr() as usize - 1;
        let start = s.value_start();
        s.skip()?;
        v.push(Member { key: k.key().into_owned(), span: key_start..s.position(), value: start..s.position() });
        Ok(())
    })
    .ok()?;
    s.end().ok()?;
    Some(v)
}

/// The string fields of a content block the adapters read (`type`, `id`, `tool_use_id`; of
/// duplicates the last, and a value that is not a string is absent).
#[derive(Default)]
struct BlockFields {
    ty: Option<Vec<u8>>,
    id: Option<String>,
    tool_use_id: Option<String>,
}

fn block_fields(elem: &[u8]) -> Option<BlockFields> {
    let mut f = BlockFields::default();
    let mut s = Scanner::new(elem);
    if s.peek() != Some(scan::Kind::Object) {
        return None;
    }
    s.object(|s, k| {
        match &*k.key() {
            b"type" => f.ty = s.opt_string()?.map(|t| t.key().into_owned()),
            b"id" => f.id = s.opt_string()?.map(|t| t.decode().into_owned()),
            b"tool_use_id" => f.tool_use_id = s.opt_string()?.map(|t| t.decode().into_owned()),
            _ => s.skip()?,
        }
        Ok(())
    })
    .ok()?;
    Some(f)
}

fn is_result_block(elem: &[u8], call_id: &str) -> bool {
    block_fields(elem).is_some_and(|f| f.ty.as_deref() == Some(b"tool_result") && f.tool_use_id.as_deref() == Some(call_id))
}

fn is_call_block(elem: &[u8], call_id: &str) -> bool {
    block_fields(elem).is_some_and(|f| f.ty.as_deref() == Some(b"tool_use") && f.id.as_deref() == Some(call_id))
}

/// An array made of the kept elements, byte for byte.
fn array_of(line: &[u8], elems: &[Span], keep: &[bool]) -> Vec<u8> {
    let mut out = vec![b'['];
    for (e, _) in elems.iter().zip(keep).filter(|(_, k)| **k) {
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(&line[e.clone()]);
    }
    out.push(b']');
    out
}

/// `line` with `span` replaced by `with`.
fn splice(line: &[u8], span: &Span, with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len() + with.len());
    out.extend_from_slice(&line[..span.start]);
    out.extend_from_slice(with);
    out.extend_from_slice(&line[span.end..]);
    out
}

/// The top-level `role` of a chat line.
fn chat_role(line: &[u8]) -> Option<String> {
    let span = value_span(line, &[b"role"])?;
    let mut s = Scanner::new(&line[span]);
    s.opt_string().ok().flatten().map(|r| r.decode().into_owned())
}

/// Where a line's message content is: `message.content` (Claude Code) or `content`.
fn content_path(format: Format) -> &'static [&'static [u8]] {
    match format {
        Format::ClaudeCode => &[b"message", b"content"],
        Format::Codex | Format::OpenAiChat | Format::Anthropic | Format::Dataset(_) => &[b"content"],
    }
}

/// Removes the results for `call_id` from a line (all of them, or all but the first), editing
/// only the content array: every other byte of the line stays as it was.
pub fn drop_results(format: Format, line: &[u8], call_id: &str, keep_first: bool) -> Result<Edited, Unable> {
    let whole_line = match format {
        Format::Codex => true,
        Format::OpenAiChat | Format::Anthropic => chat_role(line).as_deref() == Some("tool"),
        Format::ClaudeCode => false,
        // Datasets are repaired line by line by the dataset repair, never by plan edits.
        Format::Dataset(_) => return Err(Unable("a dataset line is repaired by the dataset repair")),
    };
    if whole_line {
        // The line is one result (a Codex `*_output` item, an OpenAI tool message).
        return if keep_first { Err(Unable("the line holds a single result")) } else { Ok(Edited::Gone) };
    }
    let span = value_span(line, content_path(format)).ok_or(Unable("the message has no content"))?;
    let elems = elements(line, &span).ok_or(Unable("the message content is not an array"))?;
    let mut seen = false;
    let keep: Vec<bool> = elems
        .iter()
        .map(|e| {
            if !is_result_block(&line[e.clone()], call_id) {
                return true;
            }
            let k = keep_first && !seen;
            seen = true;
            k
        })
        .collect();
    if keep.iter().all(|k| *k) {
        return Err(Unable("the line has no result to remove for the call"));
    }
    if !keep.iter().any(|k| *k) {
        return Ok(Edited::Gone);
    }
    Ok(Edited::Line(splice(line, &span, &array_of(line, &elems, &keep))))
}

/// Removes the call `call_id` from a line (a `tool_use` block, an OpenAI `tool_calls` entry;
/// a Codex call is its line), editing only the arrays that hold it.
pub fn drop_call(format: Format, line: &[u8], call_id: &str) -> Result<Edited, Unable> {
    if format == Format::Codex {
        return Ok(Edited::Gone);
    }
    let chat = format != Format::ClaudeCode;
    let members = members_spans(line).ok_or(Unable("the line is not a JSON object"))?;
    let content_key: &[u8] = if chat { b"content" } else { b"message" };
    let last_content = members.iter().rposition(|m| m.key == content_key);
    let mut removed = false;
    let (mut calls_left, mut content_left) = (false, false);
    let mut kept: Vec<Vec<u8>> = Vec::new();
    // A member with its value replaced.
    let with_value = |m: &Member, value: &[u8]| [&line[m.span.start..m.value.start], value].concat();
    for (i, m) in members.iter().enumerate() {
        if chat && m.key == b"tool_calls" {
            // The adapter reads every `tool_calls` member (their entries add up).
            if let Some(elems) = elements(line, &m.value) {
                let keep: Vec<bool> = elems.iter().map(|e| block_fields(&line[e.clone()]).and_then(|f| f.id).as_deref() != Some(call_id)).collect();
                removed |= keep.iter().any(|k| !k);
                if keep.iter().any(|k| *k) {
                    calls_left = true;
                    kept.push(with_value(m, &array_of(line, &elems, &keep)));
                }
                continue;
            }
        }
        if Some(i) != last_content {
            kept.push(line[m.span.clone()].to_vec());
            continue;
        }
        // The content: `content` itself, or Claude Code's `message.content`.
        let content = if chat { Some(m.value.clone()) } else { value_span(line, &[b"message", b"content"]) };
        let Some(content) = content else {
            kept.push(line[m.span.clone()].to_vec());
            continue;
        };
        match elements(line, &content) {
            Some(elems) => {
                let keep: Vec<bool> = elems.iter().map(|e| !is_call_block(&line[e.clone()], call_id)).collect();
                removed |= keep.iter().any(|k| !k);
                content_left = keep.iter().any(|k| *k);
                // The content lies inside the member (Claude Code: inside `message`).
                let array = array_of(line, &elems, &keep);
                kept.push([&line[m.span.start..content.start], &array, &line[content.end..m.span.end]].concat());
            }
            None => {
                let mut s = Scanner::new(&line[content.clone()]);
                content_left = match s.peek() {
                    Some(scan::Kind::String) => s.string().is_ok_and(|t| !t.is_blank()),
                    Some(scan::Kind::Null) | None => false,
                    Some(_) => true,
                };
                kept.push(line[m.span.clone()].to_vec());
            }
        }
    }
    if !removed {
        return Err(Unable("the line has no such call"));
    }
    if !calls_left && !content_left {
        return Ok(Edited::Gone);
    }
    let mut out = vec![b'{'];
    for (i, m) in kept.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(m);
    }
    out.push(b'}');
    Ok(Edited::Line(out))
}

/// Merges the assistant message `next` into `into` (OpenAI chat, Anthropic): content and calls
/// of both, in order, as one message.
pub fn merge_messages(format: Format, into: &[u8], next: &[u8]) -> Result<Vec<u8>, Unable> {
    let mut a = object(into).ok_or(Unable("the message to merge into is not a JSON object serde can read"))?;
    let b = object(next).ok_or(Unable("the message is not a JSON object serde can read"))?;
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
    Ok(to_line(&Value::Object(a)))
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

/// `message.id` of a Claude Code line, as the adapter reads it (the last `message`, if an
/// object; in it the last `id`, if a string).
pub fn message_id(line: &[u8]) -> Option<String> {
    let span = value_span(line, &[b"message", b"id"])?;
    let mut s = Scanner::new(&line[span]);
    s.opt_string().ok().flatten().map(|id| id.decode().into_owned())
}

/// Gives a Claude Code line the message id `id` (so that it joins that message's turn): the
/// value of its `message.id` is replaced, whatever it was, or an `id` is added to the message.
pub fn set_message_id(line: &[u8], id: &str) -> Result<Vec<u8>, Unable> {
    let value = serde_json::to_string(id).expect("string");
    if let Some(span) = value_span(line, &[b"message", b"id"]) {
        return Ok(splice(line, &span, value.as_bytes()));
    }
    let message = value_span(line, &[b"message"]).ok_or(Unable("the line has no message"))?;
    if line.get(message.start) != Some(&b'{') {
        return Err(Unable("the message is not an object"));
    }
    let empty = Scanner::new(&line[message.start + 1..message.end - 1]).peek().is_none();
    let mut member = format!("\"id\":{value}");
    if !empty {
        member.push(',');
    }
    let at = message.start + 1;
    Ok(splice(line, &(at..at), member.as_bytes()))
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
        // Whatever the id was (a number, null), or none at all: the adapter reads the new one.
        let odd = br#"{"message":{"id":7,"role":"assistant"},"type":"assistant"}"#;
        assert_eq!(set_message_id(odd, "m").unwrap(), br#"{"message":{"id":"m","role":"assistant"},"type":"assistant"}"#.to_vec());
        let none = br#"{"message":{"role":"assistant"},"type":"assistant"}"#;
        assert_eq!(set_message_id(none, "m").unwrap(), br#"{"message":{"id":"m","role":"assistant"},"type":"assistant"}"#.to_vec());
        assert_eq!(set_message_id(br#"{"message":{}}"#, "m").unwrap(), br#"{"message":{"id":"m"}}"#.to_vec());
        // Of duplicate keys the last counts, as for the adapter.
        let dup = br#"{"message":{"id":"a"},"message":{"id":"b","id":5}}"#;
        assert_eq!(message_id(dup), None);
        assert_eq!(set_message_id(dup, "m").unwrap(), br#"{"message":{"id":"a"},"message":{"id":"b","id":"m"}}"#.to_vec());
        assert_eq!(message_id(br#"{"message":{"id":"a"},"message":{"id":"b"}}"#).as_deref(), Some("b"));
        assert!(set_message_id(br#"{"message":"text"}"#, "m").is_err());
    }

    #[test]
    fn block_removal() {
        let line = br#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}, {"type":"tool_result","tool_use_id":"a"},{"type":"tool_result","tool_use_id":"b","n":1.50}]},"x":1e400}"#;
        // Only the content array changes; every other byte stays (a number serde would rewrite
        // included).
        let Ok(Edited::Line(kept)) = drop_results(Format::ClaudeCode, line, "a", true) else { panic!() };
        assert_eq!(
            kept,
            br#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"},{"type":"tool_result","tool_use_id":"b","n":1.50}]},"x":1e400}"#.to_vec()
        );
        let only = br#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}}"#;
        assert_eq!(drop_results(Format::ClaudeCode, only, "a", false), Ok(Edited::Gone));
        assert!(drop_results(Format::ClaudeCode, only, "zz", false).is_err(), "nothing to drop is not a silent success");
        // An OpenAI tool message is one result; a Codex output item is its line.
        assert_eq!(
            drop_results(Format::OpenAiChat, br#"{"role":"tool","tool_call_id":"c","content":[{"type":"text","text":"x"}]}"#, "c", false),
            Ok(Edited::Gone)
        );
        assert!(drop_results(Format::Codex, br#"{"type":"function_call_output","call_id":"c"}"#, "c", true).is_err());
        let oa = br#"{"role":"assistant","content":"x","tool_calls":[{"id":"c1"},{"id":"c2"}]}"#;
        let Ok(Edited::Line(b)) = drop_call(Format::OpenAiChat, oa, "c1") else { panic!() };
        assert_eq!(b, br#"{"role":"assistant","content":"x","tool_calls":[{"id":"c2"}]}"#.to_vec());
        assert_eq!(drop_call(Format::OpenAiChat, br#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1"}]}"#, "c1"), Ok(Edited::Gone));
        let Ok(Edited::Line(b)) = drop_call(Format::OpenAiChat, br#"{"role":"assistant","content":"x","tool_calls":[{"id":"c1"}]}"#, "c1") else { panic!() };
        assert_eq!(b, br#"{"role":"assistant","content":"x"}"#.to_vec(), "an empty tool_calls goes");
        let claude = br#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"t"},{"type":"tool_use","id":"c1","input":{}}]},"uuid":"u"}"#;
        let Ok(Edited::Line(b)) = drop_call(Format::ClaudeCode, claude, "c1") else { panic!() };
        assert_eq!(b, br#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"t"}]},"uuid":"u"}"#.to_vec());
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
