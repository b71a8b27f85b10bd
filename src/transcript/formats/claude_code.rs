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
use crate::transcript::model::{Entry, Node, Parsed, Role, Usage};
use crate::transcript::scan::{self, object_line, RawStr, Scanner};

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
            _ => s.skip()?,
        }
        Ok(())
    })?;
    let node = uuid.map(|u| Node { id: u.hash(), parent: parent.or(logical_parent).map(|p| p.hash()), sidechain });
    let of = |entry| Parsed { node, ..Parsed::of(entry) };
    let ty = ty.map(|t| t.key()).unwrap_or_default();
    let role = match &*ty {
        b"user" => Role::User,
        b"assistant" => Role::Assistant,
        b"system" if subtype.is_some_and(|s| s.is("compact_boundary")) => return Ok(of(Entry::Compaction { carried: Vec::new() })),
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
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok(is_object.then_some(u))
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
