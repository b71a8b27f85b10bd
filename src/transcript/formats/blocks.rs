//! Message content as the Messages and Chat Completions APIs shape it: a string, or an array of
//! typed parts (`text`, `thinking`, `tool_use`, `tool_result`, `image`, ...). Shared by the Claude
//! Code, Anthropic and OpenAI chat adapters.

use super::image;
use crate::transcript::model::{ApiFacts, Args, Call, Message, Role, ToolResult};
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
    /// What the API's own rules need (see [`ApiFacts`]).
    api: ApiFacts,
    /// Index of the next part.
    index: u16,
    /// A part that is not a `tool_result` was read.
    non_result: bool,
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
        m.api = self.api;
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
    let start = s.value_start();
    match s.peek() {
        Some(Kind::String) => {
            let t = s.string()?;
            parts.has_content = !t.is_blank();
            parts.other = true;
            parts.api.string = true;
            if t.is_blank() {
                parts.api.empty_text = Some((0, !t.raw().is_empty()));
            } else {
                parts.api.other = true;
            }
        }
        Some(Kind::Array) => s.array(|s| read_part(s, &mut parts))?,
        _ => s.skip()?,
    }
    parts.api.bytes = s.position().saturating_sub(start) as u64;
    Ok(parts)
}

/// An image's `source`: the base64 `data` when it is given inline.
#[derive(Default)]
struct Source<'a> {
    base64: bool,
    data: Option<&'a [u8]>,
}

fn read_source<'a>(s: &mut Scanner<'a>) -> scan::Result<Source<'a>> {
    let mut src = Source::default();
    s.opt_object(|s, k| {
        match &*k.key() {
            b"type" => src.base64 = s.opt_string()?.is_some_and(|t| t.is("base64")),
            b"data" => src.data = s.opt_string()?.map(|d| d.raw()),
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok(src)
}

/// Records an image of part `index` in `api`.
fn image_facts(api: &mut ApiFacts, index: u16, src: &Source<'_>) {
    api.images = api.images.saturating_add(1);
    let Some(data) = src.data.filter(|_| src.base64) else { return };
    if data.is_empty() {
        api.empty_image.get_or_insert(index);
        return;
    }
    // The API's 5 MB is of the base64 data as sent (Claude Code's own check before it sends a
    // request measures `source.data.length`: TRUTH.md, "The API's rules").
    let n = data.len() as u64;
    if api.image_bytes.is_none_or(|(_, m)| n > m) {
        api.image_bytes = Some((index, n));
    }
    if let Some((w, h)) = image::dimensions(data) {
        if api.image_px.is_none_or(|(_, mw, mh)| w.max(h) > mw.max(mh)) {
            api.image_px = Some((index, w, h));
        }
    }
}

/// The images inside a `tool_result`'s `content` (an array of blocks), recorded as part `index`.
fn read_nested<'a>(s: &mut Scanner<'a>, api: &mut ApiFacts, index: u16) -> scan::Result<()> {
    s.opt_array(|s| {
        let (mut is_image, mut src) = (false, Source::default());
        s.opt_object(|s, k| {
            match &*k.key() {
                b"type" => is_image = s.opt_string()?.is_some_and(|t| t.is("image")),
                b"source" => src = read_source(s)?,
                _ => s.skip()?,
            }
            Ok(())
        })?;
        if is_image {
            image_facts(api, index, &src);
        }
        Ok(())
    })?;
    Ok(())
}

fn read_part<'a>(s: &mut Scanner<'a>, parts: &mut Parts<'a>) -> scan::Result<()> {
    let (mut ty, mut id, mut tool_use_id, mut name) = (None, None, None, None);
    let (mut text, mut thinking, mut input) = (None, false, None);
    let (mut signed, mut src) = (false, Source::default());
    let index = parts.index;
    parts.index = parts.index.saturating_add(1);
    let mut nested = ApiFacts::default();
    let is_object = s.opt_object(|s, k| {
        match &*k.key() {
            b"type" => ty = s.opt_string()?,
            b"id" => id = s.opt_string()?,
            b"tool_use_id" => tool_use_id = s.opt_string()?,
            b"name" => name = s.opt_string()?,
            b"text" => text = s.opt_string()?.map(|t| (t.raw().is_empty(), t.is_blank())),
            b"thinking" => thinking = s.opt_string()?.is_some_and(|t| !t.is_blank()),
            b"signature" => signed = s.opt_string()?.is_some_and(|t| !t.raw().is_empty()),
            b"input" => input = s.shape()?,
            b"source" => src = read_source(s)?,
            b"content" => read_nested(s, &mut nested, index)?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    let ty = ty.map(|t| t.key());
    let api = &mut parts.api;
    let is_thinking = matches!(ty.as_deref(), Some(b"thinking" | b"redacted_thinking"));
    let blank_text = is_object && ty.as_deref() == Some(b"text") && text.is_none_or(|(_, blank)| blank);
    if is_thinking {
        api.thinking = true;
        if api.other {
            api.thinking_after.get_or_insert(index);
        }
    } else if !blank_text {
        api.other = true;
    }
    if ty.as_deref() == Some(b"tool_result") {
        if parts.non_result {
            api.result_after.get_or_insert(index);
        }
    } else {
        parts.non_result = true;
    }
    if nested.images > 0 {
        api.images = api.images.saturating_add(nested.images);
        if api.empty_image.is_none() {
            api.empty_image = nested.empty_image;
        }
        if let Some((i, n)) = nested.image_bytes.filter(|&(_, n)| api.image_bytes.is_none_or(|(_, m)| n > m)) {
            api.image_bytes = Some((i, n));
        }
        if let Some((i, w, h)) = nested.image_px.filter(|&(_, w, h)| api.image_px.is_none_or(|(_, mw, mh)| w.max(h) > mw.max(mh))) {
            api.image_px = Some((i, w, h));
        }
    }
    match ty.as_deref() {
        _ if !is_object => {
            parts.has_content = true;
            parts.other = true;
        }
        Some(b"text") => {
            let blank = text.is_none_or(|(_, blank)| blank);
            parts.has_content |= !blank;
            parts.other = true;
            if blank {
                parts.api.empty_text.get_or_insert((index, !text.is_none_or(|(empty, _)| empty)));
            }
        }
        Some(b"thinking") => {
            parts.has_content |= thinking;
            if !signed {
                parts.api.unsigned_thinking.get_or_insert(index);
            }
        }
        Some(b"image") => {
            parts.has_content = true;
            parts.other = true;
            image_facts(&mut parts.api, index, &src);
        }
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
