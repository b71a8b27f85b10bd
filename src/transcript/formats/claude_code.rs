//! Claude Code session and subagent files (`~/.claude/projects/<cwd>/<session>.jsonl`).
//!
//! Every line is a record with a `type`. Only `user` and `assistant` records are conversation;
//! `progress` (which may embed a whole subagent message under `data`), `summary`,
//! `file-history-snapshot`, `queue-operation`, most `system` records and others are not. One API
//! message is written as several consecutive `assistant` lines sharing `message.id`, one content
//! block per line, and the `user` lines carrying its tool results may arrive between them. A
//! `system` record with `subtype: "compact_boundary"` starts a new segment. Lines form a tree
//! through `uuid`/`parentUuid`; a rewind leaves an abandoned branch in the file.

use super::blocks::{add_parts, Content};
use crate::transcript::json::{Count, Flag, Obj, Str};
use crate::transcript::model::{id_hash, Entry, Message, Node, Parsed, Role, Usage};
use serde::Deserialize;

/// Record types Claude Code writes that are not conversation.
pub const KNOWN_OTHER_TYPES: &[&str] = &[
    "summary",
    "progress",
    "file-history-snapshot",
    "queue-operation",
    "custom-title",
    "agent-name",
    "tag",
    "attachment",
    "last-prompt",
    "pr-link",
];

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", default, borrow)]
    ty: Str<'a>,
    #[serde(default, borrow)]
    subtype: Str<'a>,
    #[serde(default, borrow)]
    message: Obj<Msg<'a>>,
    #[serde(default, borrow)]
    uuid: Str<'a>,
    #[serde(rename = "parentUuid", default, borrow)]
    parent_uuid: Str<'a>,
    #[serde(rename = "logicalParentUuid", default, borrow)]
    logical_parent_uuid: Str<'a>,
    #[serde(rename = "isCompactSummary", default)]
    compact_summary: Flag,
}

#[derive(Deserialize)]
struct Msg<'a> {
    #[serde(default, borrow)]
    id: Str<'a>,
    #[serde(default, borrow)]
    model: Str<'a>,
    #[serde(default, borrow)]
    content: Content<'a>,
    #[serde(default)]
    usage: Obj<ApiUsage>,
}

/// Messages API `usage`, as Claude Code logs it.
#[derive(Deserialize, Default)]
pub struct ApiUsage {
    #[serde(default)]
    input_tokens: Count,
    #[serde(default)]
    output_tokens: Count,
    #[serde(default)]
    cache_read_input_tokens: Count,
    #[serde(default)]
    cache_creation_input_tokens: Count,
}

impl ApiUsage {
    /// In the canonical form.
    pub fn canonical(&self, key: u64) -> Usage {
        Usage {
            key,
            input: self.input_tokens.0,
            output: self.output_tokens.0,
            cache_read: self.cache_read_input_tokens.0,
            cache_creation: self.cache_creation_input_tokens.0,
        }
    }
}

/// Parses one line (valid UTF-8, not blank). `Err` means the line is not a JSON object.
pub fn parse(line: &[u8]) -> Result<Parsed<'_>, serde_json::Error> {
    let l: Line<'_> = serde_json::from_slice(line)?;
    let node = l.uuid.0.as_deref().map(|u| Node {
        id: id_hash(u),
        parent: l.parent_uuid.get().or(l.logical_parent_uuid.get()).map(id_hash),
    });
    let ty = l.ty.get().unwrap_or("");
    let role = match ty {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "system" if l.subtype.is("compact_boundary") => {
            return Ok(Parsed { entry: Entry::Compaction { carried: Vec::new() }, node, usage: None, model: None })
        }
        // Claude Code's own `system` records (local commands, hook summaries, API errors, turn
        // durations) are never sent to the model.
        "system" => return Ok(Parsed { entry: Entry::Other, node, usage: None, model: None }),
        t if KNOWN_OTHER_TYPES.contains(&t) => return Ok(Parsed { entry: Entry::Other, node, usage: None, model: None }),
        _ => return Ok(Parsed { entry: Entry::Unknown, node, usage: None, model: None }),
    };
    let Some(msg) = l.message.0 else {
        // A user/assistant record without a message object carries nothing the API sees.
        return Ok(Parsed { entry: Entry::Other, node, usage: None, model: None });
    };
    let mut m = Message::new(role);
    if role == Role::Assistant {
        m.turn = msg.id.0;
    }
    add_parts(&mut m, msg.content, role == Role::User);
    if l.compact_summary.0 {
        m.prompt = false;
    }
    let key = m.turn.as_deref().map_or(0, id_hash);
    let usage = if role == Role::Assistant { msg.usage.0.map(|u| u.canonical(key)) } else { None };
    Ok(Parsed { entry: Entry::Message(m), node, usage, model: msg.model.0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::model::Args;

    fn msg(line: &str) -> Message<'_> {
        match parse(line.as_bytes()).unwrap().entry {
            Entry::Message(m) => m,
            e => panic!("not a message: {e:?}"),
        }
    }

    #[test]
    fn assistant_line_with_call() {
        let m = msg(r#"{"message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},"type":"assistant","uuid":"u1","parentUuid":null}"#);
        assert_eq!(m.turn.as_deref(), Some("msg_1"));
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
        let p = parse(br#"{"type":"progress","data":{"message":{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"x","input":{}}]}}}}"#).unwrap();
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
        assert_eq!(p.node, Some(Node { id: id_hash("b"), parent: Some(id_hash("a")) }));
    }
}
