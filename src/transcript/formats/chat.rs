//! One API message per line: OpenAI Chat Completions (`openai-chat`) and Anthropic Messages
//! (`anthropic`).
//!
//! OpenAI: `{"role": "assistant", "content": ..., "tool_calls": [{"id", "function": {"name",
//! "arguments"}}]}` answered by `{"role": "tool", "tool_call_id": ...}` messages. Anthropic:
//! `tool_use` blocks in assistant content answered by `tool_result` blocks in the next user
//! message. Both shapes are read by one parser, so a line means the same whichever of the two the
//! file was detected as; the flavour only names the format and shapes repairs.

use super::blocks::{add_parts, args_of_string, Content};
use crate::transcript::json::{Arr, Obj, Str};
use crate::transcript::model::{Call, Entry, Message, Parsed, Role, ToolResult};
use serde::Deserialize;

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(default, borrow)]
    role: Str<'a>,
    #[serde(default, borrow)]
    content: Content<'a>,
    #[serde(default, borrow)]
    tool_calls: Arr<Obj<ToolCall<'a>>>,
    #[serde(default, borrow)]
    tool_call_id: Str<'a>,
}

#[derive(Deserialize)]
struct ToolCall<'a> {
    #[serde(default, borrow)]
    id: Str<'a>,
    #[serde(default, borrow)]
    function: Obj<Function<'a>>,
}

#[derive(Deserialize)]
struct Function<'a> {
    #[serde(default, borrow)]
    name: Str<'a>,
    #[serde(default, borrow)]
    arguments: Str<'a>,
}

/// Parses one line (valid UTF-8, not blank). `Err` means the line is not a JSON object.
pub fn parse(line: &[u8]) -> Result<Parsed<'_>, serde_json::Error> {
    let l: Line<'_> = serde_json::from_slice(line)?;
    let role = match l.role.get() {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("system") => Role::System,
        Some("developer") => Role::Developer,
        Some("tool") => Role::Tool,
        _ => return Ok(Parsed::of(Entry::Unknown)),
    };
    let mut m = Message::new(role);
    add_parts(&mut m, l.content, role == Role::User);
    if role == Role::Assistant {
        for tc in l.tool_calls.0.into_iter().filter_map(|t| t.0) {
            m.has_content = true;
            let f = tc.function.0;
            let (name, args) = match f {
                Some(f) => (f.name.0.unwrap_or_default(), args_of_string(f.arguments.get())),
                None => (Default::default(), args_of_string(None)),
            };
            if let Some(id) = tc.id.0 {
                m.calls.push(Call { id, name, args });
            }
        }
    }
    if role == Role::Tool {
        m.has_content = true;
        if let Some(id) = l.tool_call_id.0 {
            m.results.push(ToolResult { id });
        }
    }
    Ok(Parsed::of(Entry::Message(m)))
}

/// What a line says about which of the two flavours a file is, if anything.
pub fn flavour_evidence(line: &serde_json::Value) -> Option<super::Format> {
    use super::Format;
    let obj = line.as_object()?;
    if obj.contains_key("tool_calls") || obj.contains_key("tool_call_id") {
        return Some(Format::OpenAiChat);
    }
    match obj.get("role").and_then(|r| r.as_str()) {
        Some("tool" | "system" | "developer" | "function") => return Some(Format::OpenAiChat),
        _ => {}
    }
    let parts = obj.get("content")?.as_array()?;
    for p in parts {
        match p.get("type").and_then(|t| t.as_str()) {
            Some("tool_use" | "tool_result" | "thinking" | "redacted_thinking" | "server_tool_use") => {
                return Some(Format::Anthropic)
            }
            Some("image_url" | "input_audio" | "refusal") => return Some(Format::OpenAiChat),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::model::Args;

    #[test]
    fn openai_calls_and_tool_messages() {
        let p = parse(br#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"[1]"}}]}"#).unwrap();
        let Entry::Message(m) = p.entry else { panic!() };
        assert_eq!((m.calls[0].id.as_ref(), m.calls[0].args), ("c1", Args::NotObject));
        let Entry::Message(m) = parse(br#"{"role":"tool","tool_call_id":"c1","content":"x"}"#).unwrap().entry else { panic!() };
        assert_eq!(m.results[0].id, "c1");
    }

    #[test]
    fn anthropic_blocks() {
        let Entry::Message(m) = parse(br#"{"role":"assistant","content":[{"type":"text","text":"  "},{"type":"tool_use","id":"t1","name":"get","input":{}}]}"#).unwrap().entry else { panic!() };
        assert_eq!(m.calls[0].id, "t1");
        let Entry::Message(m) = parse(br#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"}]}"#).unwrap().entry else { panic!() };
        assert_eq!(m.results[0].id, "t1");
        assert!(!m.prompt);
        let Entry::Message(m) = parse(br#"{"role":"assistant","content":[{"type":"text","text":" \n"}]}"#).unwrap().entry else { panic!() };
        assert!(!m.has_content);
    }
}
