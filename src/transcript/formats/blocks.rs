//! Message content as the Messages and Chat Completions APIs shape it: a string, or an array of
//! typed parts (`text`, `thinking`, `tool_use`, `tool_result`, `image`, ...). Shared by the Claude
//! Code, Anthropic and OpenAI chat adapters.

use crate::transcript::model::{Args, Call, Message, Role, ToolResult};
use crate::transcript::scan::{self, Kind, Scanner};

/// What message content holds, before the role is known (Claude Code writes `type` after
/// `message`).
#[derive(Debug, Default)]
pub struct Parts<'a> {
    calls: smallvec::SmallVec<[Call<'a>; 1]>,
    results: smallvec::SmallVec<[ToolResult<'a>; 1]>,
    has_content: bool,
    /// A part that is neither a call nor a result (text, image, ...).
    other: bool,
}

impl<'a> Parts<'a> {
    /// Whether nothing in the content is worth reading: blank text, no parts, or only blank
    /// parts.
    pub fn is_blank(&self) -> bool {
        !self.has_content
    }

    /// The message these parts make for `role`: `tool_use` parts are calls of an assistant,
    /// `tool_result` parts are results in a user message. A user message is a prompt when it
    /// has a part that is not a tool result and no tool result.
    pub fn into_message(self, role: Role) -> Message<'a> {
        let mut m = Message::new(role);
        m.has_content = self.has_content;
        match role {
            Role::Assistant => m.calls = self.calls,
            Role::User => {
                m.prompt = self.other && self.results.is_empty();
                m.results = self.results;
            }
            _ => {}
        }
        m
    }
}

/// Reads message `content` (the scanner is at its value): a string, an array of parts, or
/// anything else (ignored). Server tools (`server_tool_use`, `web_search_tool_result`, MCP
/// connector blocks) are paired inside the assistant message and need no result.
pub fn read_content<'a>(s: &mut Scanner<'a>) -> scan::Result<Parts<'a>> {
    let mut parts = Parts::default();
    match s.peek() {
        Some(Kind::String) => {
            parts.has_content = !s.string()?.is_blank();
            parts.other = true;
        }
        Some(Kind::Array) => s.array(|s| read_part(s, &mut parts))?,
        _ => s.skip()?,
    }
    Ok(parts)
}

fn read_part<'a>(s: &mut Scanner<'a>, parts: &mut Parts<'a>) -> scan::Result<()> {
    let (mut ty, mut id, mut tool_use_id, mut name) = (None, None, None, None);
    let (mut text, mut thinking, mut input) = (false, false, None);
    let is_object = s.opt_object(|s, k| {
        match &*k.key() {
            b"type" => ty = s.opt_string()?,
            b"id" => id = s.opt_string()?,
            b"tool_use_id" => tool_use_id = s.opt_string()?,
            b"name" => name = s.opt_string()?,
            b"text" => text = s.opt_string()?.is_some_and(|t| !t.is_blank()),
            b"thinking" => thinking = s.opt_string()?.is_some_and(|t| !t.is_blank()),
            b"input" => input = s.shape()?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    let ty = ty.map(|t| t.key());
    match ty.as_deref() {
        _ if !is_object => {
            parts.has_content = true;
            parts.other = true;
        }
        Some(b"text") => {
            parts.has_content |= text;
            parts.other = true;
        }
        Some(b"thinking") => parts.has_content |= thinking,
        Some(b"tool_use") => {
            parts.has_content = true;
            if let Some(id) = id {
                let name = name.map(|n| n.decode()).unwrap_or_default();
                parts.calls.push(Call { id: id.decode(), name, args: args_of_value(input), item: None });
            }
        }
        Some(b"tool_result") => {
            parts.has_content = true;
            if let Some(id) = tool_use_id {
                parts.results.push(ToolResult { id: id.decode() });
            }
        }
        _ => {
            parts.has_content = true;
            parts.other = true;
        }
    }
    Ok(())
}

/// Shape of call arguments given as a JSON value (Anthropic `input`). A missing input is
/// treated as `{}` by the API.
pub fn args_of_value(kind: Option<Kind>) -> Args {
    match kind {
        Some(Kind::Object) | None => Args::Object,
        Some(_) => Args::NotObject,
    }
}

/// Shape of call arguments given as a JSON-encoded string (OpenAI and Codex `arguments`).
pub fn args_of_string(s: Option<&str>) -> Args {
    let Some(s) = s.filter(|s| !s.trim().is_empty()) else { return Args::Object };
    let mut sc = Scanner::new(s.as_bytes());
    let kind = sc.peek();
    match sc.skip().and_then(|_| sc.end()) {
        Ok(()) if kind == Some(Kind::Object) => Args::Object,
        Ok(()) => Args::NotObject,
        Err(_) => Args::Unparseable,
    }
}
