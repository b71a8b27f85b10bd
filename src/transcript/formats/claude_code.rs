//! Claude Code session and subagent files (`~/.claude/projects/<cwd>/<session>.jsonl`).
//!
//! Every line is a record with a `type`. Only `user` and `assistant` records are conversation;
//! `progress` (which may embed a whole subagent message under `data`), `summary`,
//! `file-history-snapshot`, `queue-operation`, most `system` records and others are not. One API
//! message is written as several consecutive `assistant` lines sharing `message.id`, one content
//! block per line, and the `user` lines carrying its tool results may arrive between them. A
//! `system` record with `subtype: "compact_boundary"` starts a new segment. Lines form a tree
//! through `uuid`/`parentUuid`; a rewind leaves an abandoned branch in the file.

use super::blocks::{read_content, Parts};
use super::edit::{self, CallRef, Edited};
use crate::transcript::model::{Entry, Node, Parsed, Role, Usage};
use crate::transcript::scan::{self, object_line, RawStr, Scanner};
use serde_json::{json, Map, Value};
use std::ops::Range;

/// Record types Claude Code writes that are not conversation.
pub const KNOWN_OTHER_TYPES: &[&str] =
    &["summary", "progress", "file-history-snapshot", "queue-operation", "custom-title", "agent-name", "tag", "attachment", "last-prompt", "pr-link"];

/// The parts of a `message` object we read.
#[derive(Default)]
struct Msg<'a> {
    id: Option<RawStr<'a>>,
    model: Option<RawStr<'a>>,
    parts: Parts<'a>,
    usage: Option<Usage>,
}

/// Parses one line (valid UTF-8, not blank). `Err` means the line is not a JSON object.
pub fn parse(line: &[u8]) -> scan::Result<Parsed<'_>> {
    let (mut ty, mut subtype, mut uuid, mut parent, mut logical_parent) = (None, None, None, None, None);
    let (mut compact_summary, mut sidechain) = (false, false);
    let mut msg: Option<Msg<'_>> = None;
    let mut retracts = Vec::new();
    object_line(line, |s, k| {
        match &*k.key() {
            b"type" => ty = s.opt_string()?,
            b"subtype" => subtype = s.opt_string()?,
            b"uuid" => uuid = s.opt_string()?,
            b"parentUuid" => parent = s.opt_string()?,
            b"logicalParentUuid" => logical_parent = s.opt_string()?,
            b"isCompactSummary" => compact_summary = s.opt_true()?,
            b"isSidechain" => sidechain = s.opt_true()?,
            b"message" => msg = read_message(s)?,
            // A retry's answer names the answer it replaces; a refusal fallback's record, the
            // answers it took back.
            b"supersedesUuids" | b"retractedMessageUuids" => {
                s.opt_array(|s| {
                    if let Some(u) = s.opt_string()? {
                        retracts.push(u.hash());
                    }
                    Ok(())
                })?;
            }
            _ => s.skip()?,
        }
        Ok(())
    })?;
    let node = uuid.map(|u| Node { id: u.hash(), parent: parent.or(logical_parent).map(|p| p.hash()), sidechain });
    let mut of = |entry| Parsed { node, retracts: std::mem::take(&mut retracts), ..Parsed::of(entry) };
    let ty = ty.map(|t| t.key()).unwrap_or_default();
    let role = match &*ty {
        b"user" => Role::User,
        b"assistant" => Role::Assistant,
        b"system" if subtype.is_some_and(|s| s.is("compact_boundary")) => {
            return Ok(of(Entry::Compaction { carried: Vec::new(), keeps: None, summary_follows: true }))
        }
        // Claude Code's own `system` records (local commands, hook summaries, API errors, turn
        // durations) are never sent to the model.
        b"system" => return Ok(of(Entry::Other)),
        t if KNOWN_OTHER_TYPES.iter().any(|k| k.as_bytes() == t) => return Ok(of(Entry::Other)),
        _ => return Ok(of(Entry::Unknown)),
    };
    // A user/assistant record without a message object carries nothing the API sees.
    let Some(msg) = msg else { return Ok(of(Entry::Other)) };
    let mut m = msg.parts.into_message(role);
    if compact_summary {
        m.prompt = false;
    }
    if role == Role::User {
        return Ok(of(Entry::Message(m)));
    }
    m.turn = msg.id.map(|i| i.hash());
    let key = m.turn.unwrap_or(0);
    let usage = msg.usage.map(|u| Usage { key, ..u });
    Ok(Parsed { usage, model: msg.model.map(|m| m.decode()), ..of(Entry::Message(m)) })
}

fn read_message<'a>(s: &mut Scanner<'a>) -> scan::Result<Option<Msg<'a>>> {
    let mut m = Msg::default();
    let is_object = s.opt_object(|s, k| {
        match &*k.key() {
            b"id" => m.id = s.opt_string()?,
            b"model" => m.model = s.opt_string()?,
            b"content" => m.parts = read_content(s)?,
            b"usage" => m.usage = read_usage(s)?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok(is_object.then_some(m))
}

fn read_usage(s: &mut Scanner<'_>) -> scan::Result<Option<Usage>> {
    let mut u = Usage::default();
    let is_object = s.opt_object(|s, k| {
        match &*k.key() {
            b"input_tokens" => u.input = s.opt_count()?,
            b"output_tokens" => u.output = s.opt_count()?,
            b"cache_read_input_tokens" => u.cache_read = s.opt_count()?,
            b"cache_creation_input_tokens" => u.cache_creation = s.opt_count()?,
            b"cache_creation" => {
                s.opt_object(|s, k| {
                    match &*k.key() {
                        b"ephemeral_1h_input_tokens" => u.cache_creation_1h = s.opt_count()?,
                        _ => s.skip()?,
                    }
                    Ok(())
                })?;
            }
            _ => s.skip()?,
        }
        Ok(())
    })?;
    // The one-hour part is part of the whole: a line that says more is read as all one-hour.
    u.cache_creation_1h = u.cache_creation_1h.min(u.cache_creation);
    Ok(is_object.then_some(u))
}

// Canonical fields.

/// What a Claude Code line is to the canonical records, as byte ranges into the line: a stage
/// that has read the line once (the context scan, deciding where the boundary is) hands this
/// over with the line, and the records need no second parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaudeFields {
    /// A `system` record with `subtype: "compact_boundary"`.
    Boundary {
        /// Where its `compactMetadata` value is.
        metadata: Option<Range<usize>>,
        /// `isSidechain`.
        sidechain: bool,
    },
    /// A `user` or `assistant` record whose `message` has `content` (not null).
    Message {
        /// `user` or `assistant`.
        role: Role,
        /// Hash of `message.id`: lines that share it are one API message.
        id: Option<u64>,
        /// Where the `content` value is.
        content: Range<usize>,
        /// `isSidechain`: a subagent's record (Claude Code 1.0.x writes them into the main file).
        sidechain: bool,
    },
    /// Not conversation: `progress`, `summary`, snapshots, other `system` records, unknown types.
    Other {
        /// `isSidechain`.
        sidechain: bool,
    },
}

impl ClaudeFields {
    /// Reads a line (valid UTF-8); `Err` when it is not a JSON object.
    pub fn read(line: &[u8]) -> scan::Result<Self> {
        let (mut ty, mut subtype, mut id, mut content, mut metadata) = (None, None, None, None, None);
        let mut sidechain = false;
        let span = |v: &[u8]| {
            let start = v.as_ptr() as usize - line.as_ptr() as usize;
            start..start + v.len()
        };
        object_line(line, |s, k| {
            match &*k.key() {
                b"type" => ty = s.opt_string()?,
                b"subtype" => subtype = s.opt_string()?,
                b"compactMetadata" => metadata = Some(span(s.raw_value()?)),
                b"isSidechain" => sidechain = s.opt_true()?,
                b"message" => {
                    s.opt_object(|s, k| {
                        match &*k.key() {
                            b"id" => id = s.opt_string()?,
                            b"content" => content = Some(s.raw_value()?).filter(|v| *v != b"null").map(span),
                            _ => s.skip()?,
                        }
                        Ok(())
                    })?;
                }
                _ => s.skip()?,
            }
            Ok(())
        })?;
        let role = match ty.map(|t| t.key()).as_deref() {
            Some(b"user") => Role::User,
            Some(b"assistant") => Role::Assistant,
            Some(b"system") if subtype.is_some_and(|s| s.is("compact_boundary")) => return Ok(ClaudeFields::Boundary { metadata, sidechain }),
            _ => return Ok(ClaudeFields::Other { sidechain }),
        };
        Ok(match content {
            Some(content) => ClaudeFields::Message { role, id: id.map(|i| i.hash()), content, sidechain },
            None => ClaudeFields::Other { sidechain },
        })
    }

    /// Whether the line is a `compact_boundary`.
    pub fn is_boundary(&self) -> bool {
        matches!(self, ClaudeFields::Boundary { .. })
    }

    /// Whether the line is a conversation message.
    pub fn is_message(&self) -> bool {
        matches!(self, ClaudeFields::Message { .. })
    }

    /// `isSidechain` of the line.
    pub fn sidechain(&self) -> bool {
        match self {
            ClaudeFields::Boundary { sidechain, .. } | ClaudeFields::Message { sidechain, .. } | ClaudeFields::Other { sidechain } => *sidechain,
        }
    }
}

// Writing.

/// Envelope fields a synthetic line copies from the line it follows.
pub const ENVELOPE: &[&str] = &["isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch", "agentId", "slug"];

/// A synthetic error result for `call`: a `user` line with a `tool_result` block, its envelope
/// (session id, cwd, version, timestamp, ...) copied from the line it `follows`, hanging under
/// `parent`, with `uuid` its own (empty: none, like a line it follows that has none, so that
/// both are read in the same conversation thread).
pub fn synthetic_result(follows: &[u8], call: &CallRef, text: &str, parent: Option<&str>, uuid: &str) -> Vec<u8> {
    synthetic_result_in(&envelope(follows), call, text, parent, uuid)
}

/// What a synthetic result copies from the line it follows (its envelope and timestamp), read
/// once for every result inserted after that line.
pub fn envelope(follows: &[u8]) -> Map<String, Value> {
    edit::members(follows, &[ENVELOPE, &["timestamp"]].concat())
}

/// [`synthetic_result`] with the envelope already read ([`envelope`]).
pub fn synthetic_result_in(env: &Map<String, Value>, call: &CallRef, text: &str, parent: Option<&str>, uuid: &str) -> Vec<u8> {
    let mut m = Map::new();
    m.insert("parentUuid".into(), parent.map_or(Value::Null, |p| Value::String(p.to_owned())));
    for k in ENVELOPE {
        if let Some(v) = env.get(*k) {
            m.insert((*k).into(), v.clone());
        }
    }
    m.insert("type".into(), json!("user"));
    m.insert("message".into(), json!({"role": "user", "content": [{"tool_use_id": call.id, "type": "tool_result", "content": text, "is_error": true}]}));
    if !uuid.is_empty() {
        m.insert("uuid".into(), json!(uuid));
    }
    if let Some(ts) = env.get("timestamp") {
        m.insert("timestamp".into(), ts.clone());
    }
    m.insert("toolUseResult".into(), json!(format!("Error: {text}")));
    edit::to_line(&Value::Object(m))
}

/// Removes the results for `call_id` (`tool_result` blocks of `message.content`).
pub fn drop_results(line: &[u8], call_id: &str, keep_first: bool) -> Result<Edited, edit::Unable> {
    edit::drop_result_blocks(line, &[b"message", b"content"], call_id, keep_first)
}

/// Removes the call `call_id` (a `tool_use` block of `message.content`).
pub fn drop_call(line: &[u8], call_id: &str) -> Result<Edited, edit::Unable> {
    edit::drop_call_blocks(edit::CallLayout::InMessage, line, call_id)
}

/// Claude Code's tree members.
pub const TREE: edit::TreeKeys = edit::TreeKeys { id: "uuid", parent: "parentUuid" };

/// Top-level `uuid` and `parentUuid` of a Claude Code line (raw strings; `None` for null or
/// absent).
pub fn claude_ids(line: &[u8]) -> (Option<String>, Option<String>) {
    edit::tree_ids(TREE, line)
}

/// Byte range of the top-level `parentUuid` value and the parent it names ([`edit::parent_span`]).
/// Walks the whole line: repair calls it only for lines it edits or that may hang under a
/// removed line.
pub fn parent_span(line: &[u8]) -> Option<(std::ops::Range<usize>, Option<std::borrow::Cow<'_, str>>)> {
    edit::parent_span(TREE, line)
}

/// Replaces the top-level `parentUuid` of a Claude Code line with `parent` (a uuid or null).
pub fn set_parent(line: &[u8], parent: Option<&str>) -> Option<Vec<u8>> {
    edit::set_parent(TREE, line, parent)
}

/// `message.id` of a Claude Code line, as the adapter reads it (the last `message`, if an
/// object; in it the last `id`, if a string).
pub fn message_id(line: &[u8]) -> Option<String> {
    let span = edit::value_span(line, &[b"message", b"id"])?;
    let mut s = Scanner::new(&line[span]);
    s.opt_string().ok().flatten().map(|id| id.decode().into_owned())
}

/// Gives a Claude Code line the message id `id` (so that it joins that message's turn): the
/// value of its `message.id` is replaced, whatever it was, or an `id` is added to the message.
pub fn set_message_id(line: &[u8], id: &str) -> Result<Vec<u8>, edit::Unable> {
    let value = serde_json::to_string(id).expect("string");
    if let Some(span) = edit::value_span(line, &[b"message", b"id"]) {
        return Ok(edit::splice(line, &span, value.as_bytes()));
    }
    let message = edit::value_span(line, &[b"message"]).ok_or(edit::Unable("the line has no message"))?;
    if line.get(message.start) != Some(&b'{') {
        return Err(edit::Unable("the message is not an object"));
    }
    let empty = Scanner::new(&line[message.start + 1..message.end - 1]).peek().is_none();
    let mut member = format!("\"id\":{value}");
    if !empty {
        member.push(',');
    }
    let at = message.start + 1;
    Ok(edit::splice(line, &(at..at), member.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::model::{id_hash, Args, Message};

    fn msg(line: &str) -> Message<'_> {
        match parse(line.as_bytes()).unwrap().entry {
            Entry::Message(m) => m,
            e => panic!("not a message: {e:?}"),
        }
    }

    #[test]
    fn assistant_line_with_call() {
        let m = msg(
            r#"{"message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},"type":"assistant","uuid":"u1","parentUuid":null}"#,
        );
        assert_eq!(m.turn, Some(id_hash("msg_1")));
        assert_eq!(m.calls.len(), 1);
        assert_eq!(m.calls[0].id, "toolu_1");
        assert_eq!(m.calls[0].args, Args::Object);
        assert!(m.has_content);
    }

    #[test]
    fn tool_result_line_is_not_a_prompt() {
        let m = msg(r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"ok"}]}}"#);
        assert_eq!(m.results[0].id, "toolu_1");
        assert!(!m.prompt);
        let m = msg(r#"{"type":"user","message":{"role":"user","content":"hi"}}"#);
        assert!(m.prompt);
    }

    #[test]
    fn progress_with_embedded_message_is_not_conversation() {
        let p =
            parse(br#"{"type":"progress","data":{"message":{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"x","input":{}}]}}}}"#)
                .unwrap();
        assert_eq!(p.entry, Entry::Other);
    }

    #[test]
    fn unknown_type_and_odd_shapes_are_not_errors() {
        assert_eq!(parse(br#"{"type":"future-thing","message":7}"#).unwrap().entry, Entry::Unknown);
        let p = parse(br#"{"type":"assistant","message":"text"}"#).unwrap();
        assert_eq!(p.entry, Entry::Other);
        assert!(crate::transcript::formats::Format::ClaudeCode.parse(b"[1,2]").is_err());
    }

    #[test]
    fn compact_boundary() {
        let p = parse(br#"{"parentUuid":null,"logicalParentUuid":"a","type":"system","subtype":"compact_boundary","uuid":"b"}"#).unwrap();
        assert!(matches!(p.entry, Entry::Compaction { .. }));
        assert_eq!(p.node, Some(Node { id: id_hash("b"), parent: Some(id_hash("a")), sidechain: false }));
    }
}
