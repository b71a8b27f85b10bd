//! One API message per line: OpenAI Chat Completions (`openai-chat`) and Anthropic Messages
//! (`anthropic`).
//!
//! OpenAI: `{"role": "assistant", "content": ..., "tool_calls": [{"id", "function": {"name",
//! "arguments"}}]}` answered by `{"role": "tool", "tool_call_id": ...}` messages. Anthropic:
//! `tool_use` blocks in assistant content answered by `tool_result` blocks in the next user
//! message. Both shapes are read by one parser, so a line means the same whichever of the two the
//! file was detected as; the flavour only names the format and shapes repairs.

use super::blocks::{args_of_string, read_content, Parts};
use super::edit::{self, CallRef, Edited};
use crate::transcript::model::{Call, Entry, Parsed, Role, ToolResult};
use crate::transcript::scan::{self, object_line, RawStr, Scanner};
use serde_json::{json, Value};

/// Parses one line (valid UTF-8, not blank). `Err` means the line is not a JSON object.
pub fn parse(line: &[u8]) -> scan::Result<Parsed<'_>> {
    let (mut role, mut tool_call_id) = (None, None);
    let mut parts = Parts::default();
    let mut calls = Vec::new();
    object_line(line, |s, k| {
        match &*k.key() {
            b"role" => role = s.opt_string()?,
            b"content" => parts = read_content(s)?,
            b"tool_calls" => {
                s.opt_array(|s| read_tool_call(s).map(|c| calls.extend(c)))?;
            }
            b"tool_call_id" => tool_call_id = s.opt_string()?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    let role = match role.map(|r| r.decode()).as_deref() {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("system") => Role::System,
        Some("developer") => Role::Developer,
        Some("tool") => Role::Tool,
        _ => return Ok(Parsed::of(Entry::Unknown)),
    };
    let mut m = parts.into_message(role);
    if role == Role::Assistant && !calls.is_empty() {
        m.has_content = true;
        m.calls.extend(calls);
    }
    if role == Role::Tool {
        m.has_content = true;
        if let Some(id) = tool_call_id {
            m.results.push(ToolResult { id: id.decode() });
        }
    }
    Ok(Parsed::of(Entry::Message(m)))
}

/// One entry of `tool_calls`: `{"id", "function": {"name", "arguments"}}`.
fn read_tool_call<'a>(s: &mut Scanner<'a>) -> scan::Result<Option<Call<'a>>> {
    let (mut id, mut name, mut arguments): (Option<RawStr<'a>>, _, _) = (None, None, None);
    s.opt_object(|s, k| {
        match &*k.key() {
            b"id" => id = s.opt_string()?,
            b"function" => {
                s.opt_object(|s, k| {
                    match &*k.key() {
                        b"name" => name = s.opt_string()?,
                        b"arguments" => arguments = s.opt_string()?,
                        _ => s.skip()?,
                    }
                    Ok(())
                })?;
            }
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok(id.map(|id| Call {
        id: id.decode(),
        name: name.map(|n| n.decode()).unwrap_or_default(),
        args: args_of_string(arguments.map(|a| a.decode()).as_deref()),
        item: None,
    }))
}

/// What a line says about which of the two flavours a file is, if anything.
pub fn flavour_evidence(line: &serde_json::Value) -> Option<super::Format> {
    use super::Format;
    let obj = line.as_object()?;
    if obj.contains_key("tool_calls") || obj.contains_key("tool_call_id") {
        return Some(Format::OpenAiChat);
    }
    if let Some("tool" | "system" | "developer" | "function") = obj.get("role").and_then(|r| r.as_str()) {
        return Some(Format::OpenAiChat);
    }
    let parts = obj.get("content")?.as_array()?;
    for p in parts {
        match p.get("type").and_then(|t| t.as_str()) {
            Some("tool_use" | "tool_result" | "thinking" | "redacted_thinking" | "server_tool_use") => return Some(Format::Anthropic),
            Some("image_url" | "input_audio" | "refusal") => return Some(Format::OpenAiChat),
            _ => {}
        }
    }
    None
}

// Writing.

/// A synthetic error result for `call`: an OpenAI `tool` message.
pub fn openai_result(call: &CallRef, text: &str) -> Vec<u8> {
    edit::to_line(&json!({"role": "tool", "tool_call_id": call.id, "content": text}))
}

/// A synthetic error result for `call`: an Anthropic `user` message with a `tool_result` block.
pub fn anthropic_result(call: &CallRef, text: &str) -> Vec<u8> {
    edit::to_line(&json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": text, "is_error": true}]}))
}

/// Removes the results for `call_id` from a line: an OpenAI `tool` message is one result (the
/// line goes), elsewhere the `tool_result` blocks of `content`.
pub fn drop_results(line: &[u8], call_id: &str, keep_first: bool) -> Result<Edited, edit::Unable> {
    if role(line).as_deref() == Some("tool") {
        return if keep_first { Err(edit::Unable("the line holds a single result")) } else { Ok(Edited::Gone) };
    }
    edit::drop_result_blocks(line, &[b"content"], call_id, keep_first)
}

/// Whether the line is an OpenAI `tool` message (one result, the whole line).
pub fn is_tool_line(line: &[u8]) -> bool {
    role(line).as_deref() == Some("tool")
}

/// Removes the call `call_id` (a `tool_use` block of `content`, an entry of `tool_calls`).
pub fn drop_call(line: &[u8], call_id: &str) -> Result<Edited, edit::Unable> {
    edit::drop_call_blocks(edit::CallLayout::TopLevel, line, call_id)
}

/// The top-level `role` of a chat line.
pub fn role(line: &[u8]) -> Option<String> {
    let span = edit::value_span(line, &[b"role"])?;
    let mut s = Scanner::new(&line[span]);
    s.opt_string().ok().flatten().map(|r| r.decode().into_owned())
}

/// Merges the assistant message `next` into `into`: content and calls of both, in order, as one
/// message. OpenAI (`openai`) content stays a string when both were text.
pub fn merge_messages(openai: bool, into: &[u8], next: &[u8]) -> Result<Vec<u8>, edit::Unable> {
    let mut a = edit::object(into).ok_or(edit::Unable("the message to merge into is not a JSON object serde can read"))?;
    let b = edit::object(next).ok_or(edit::Unable("the message is not a JSON object serde can read"))?;
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
    let merged = if openai && all_text {
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
    Ok(edit::to_line(&Value::Object(a)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::model::Args;

    #[test]
    fn openai_calls_and_tool_messages() {
        let p =
            parse(br#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"[1]"}}]}"#).unwrap();
        let Entry::Message(m) = p.entry else { panic!() };
        assert_eq!((m.calls[0].id.as_ref(), m.calls[0].args), ("c1", Args::NotObject));
        let Entry::Message(m) = parse(br#"{"role":"tool","tool_call_id":"c1","content":"x"}"#).unwrap().entry else { panic!() };
        assert_eq!(m.results[0].id, "c1");
    }

    #[test]
    fn anthropic_blocks() {
        let Entry::Message(m) =
            parse(br#"{"role":"assistant","content":[{"type":"text","text":"  "},{"type":"tool_use","id":"t1","name":"get","input":{}}]}"#).unwrap().entry
        else {
            panic!()
        };
        assert_eq!(m.calls[0].id, "t1");
        let Entry::Message(m) = parse(br#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"}]}"#).unwrap().entry else {
            panic!()
        };
        assert_eq!(m.results[0].id, "t1");
        assert!(!m.prompt);
        let Entry::Message(m) = parse(br#"{"role":"assistant","content":[{"type":"text","text":" \n"}]}"#).unwrap().entry else { panic!() };
        assert!(!m.has_content);
    }
}
