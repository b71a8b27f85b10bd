//! What repair writes, in repair's terms: the texts of synthetic results ([`ResultText`]) and
//! the uuids of new lines. The lines and edits themselves are each format's own, written in
//! its module under `formats/` beside its reading ([`Format::synthetic_result`],
//! [`Format::drop_results`], [`Format::drop_call`], [`Format::merge_messages`], the Claude Code
//! tree edits in `formats::claude_code`); this module hands repair's texts to them.
//!
//! Synthetic results copy their envelope (session id, cwd, version, timestamp, ...) from the line
//! they follow, so that the agent that resumes the file sees a result shaped like its own. New
//! uuids are derived from the input, not drawn at random: repairing the same file twice gives the
//! same bytes.

use crate::transcript::formats::edit::{CallRef, Edited, Unable};
use crate::transcript::formats::Format;

/// `rig_core::transcript::not_executed` (docs/requirements.md): the result of a call that never ran.
pub const NOT_EXECUTED: &str = "Tool call was not executed: the transcript has no result for it. (Result inserted by transcriptd repair.)";
/// `rig_core::transcript::TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER`: every other call of a turn with an invalid
/// call gets this; none of the turn's calls ran.
pub const NOT_EXECUTED_DUE_TO_INVALID_PEER: &str =
    "Tool call was not executed because another tool call in the same turn was invalid; none of the turn's calls ran. (Result inserted by transcriptd repair.)";
/// The result of a call that was interrupted (a kill, a crash) and never completed.
pub const INTERRUPTED: &str = "Tool call was interrupted and did not complete; its effects, if any, are unknown. (Result inserted by transcriptd repair.)";

/// Which synthetic text a result gets. It serializes as the text itself: a plan (`repair
/// --dry-run`) says what will be inserted, not a name for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

impl serde::Serialize for ResultText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.text())
    }
}

/// A uuid derived from `seed` bytes (version-4 layout, deterministic).
pub fn derived_uuid(seed: &[u8]) -> String {
    uuid_of(xxhash_rust::xxh3::xxh3_128(seed))
}

fn uuid_of(a: u128) -> String {
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

/// The uuid [`derived_uuid`] gives for `follows` followed by each call id, with `follows`
/// hashed once however many results are inserted after it.
#[derive(Clone)]
pub struct UuidSeed(xxhash_rust::xxh3::Xxh3Default);

impl UuidSeed {
    /// The seed of the results inserted after the line `follows`.
    pub fn new(follows: &[u8]) -> Self {
        let mut h = xxhash_rust::xxh3::Xxh3Default::new();
        h.update(follows);
        UuidSeed(h)
    }

    /// `derived_uuid(follows + call_id)`.
    pub fn uuid(&self, call_id: &str) -> String {
        let mut h = self.0.clone();
        h.update(call_id.as_bytes());
        uuid_of(h.digest128())
    }
}

/// A synthetic error result for `call`, in `format`, to be written after the line `follows`
/// (whose envelope it copies). For Claude Code, `parent` is the uuid the new line hangs under and
/// `uuid` its own (empty: none, like a line it follows that has none, so that both are read in
/// the same conversation thread).
pub fn synthetic_result(format: Format, follows: &[u8], call: &CallRef, text: ResultText, parent: Option<&str>, uuid: &str) -> Vec<u8> {
    format.synthetic_result(follows, call, text.text(), parent, uuid)
}

/// Removes the results for `call_id` from a line (all of them, or all but the first), editing
/// only the content array: every other byte of the line stays as it was.
pub fn drop_results(format: Format, line: &[u8], call_id: &str, keep_first: bool) -> Result<Edited, Unable> {
    format.drop_results(line, call_id, keep_first)
}

/// Removes the call `call_id` from a line (a `tool_use` block, an OpenAI `tool_calls` entry;
/// a Codex call is its line), editing only the arrays that hold it.
pub fn drop_call(format: Format, line: &[u8], call_id: &str) -> Result<Edited, Unable> {
    format.drop_call(line, call_id)
}

/// Merges the assistant message `next` into `into` (OpenAI chat, Anthropic): content and calls
/// of both, in order, as one message.
pub fn merge_messages(format: Format, into: &[u8], next: &[u8]) -> Result<Vec<u8>, Unable> {
    format.merge_messages(into, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::formats::claude_code::ENVELOPE as CLAUDE_ENVELOPE;
    use crate::transcript::formats::claude_code::{claude_ids, message_id, parent_span, set_message_id, set_parent};
    use crate::transcript::formats::edit::{members, object};
    use serde_json::{Map, Value};

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
        // A tool search is answered the way Codex answers one left open: no tools found.
        let c = CallRef { id: "s".into(), tool: "tool_search".into(), item: Some("tool_search_call".into()) };
        let v: Value = serde_json::from_slice(&synthetic_result(Format::Codex, env, &c, ResultText::NotExecuted, None, "")).unwrap();
        assert_eq!(v["payload"], serde_json::json!({"type": "tool_search_output", "call_id": "s", "status": "completed", "execution": "client", "tools": []}));
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
    fn a_seed_hashed_once_gives_the_uuids_of_the_whole_seed() {
        for len in [0usize, 1, 15, 16, 17, 128, 129, 240, 241, 255, 256, 1023, 1024, 1025, 5000] {
            let follows: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let seed = UuidSeed::new(&follows);
            for id in ["", "t", "toolu_01ABCDEFGHIJKLMNOPQRSTUV"] {
                assert_eq!(seed.uuid(id), derived_uuid(&[&follows[..], id.as_bytes()].concat()), "{len} bytes, id {id:?}");
            }
        }
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
