//! The two OpenAI shapes: `openai-dataset` (Chat Completions messages, the preference shape)
//! and `openai-batch` (a request `body` of Chat Completions messages or Responses input items).

use super::tools::read_tools;
use super::{args_info, content_of, content_state, message_array, with_conversation, ArgKeys, Content, Conversation, Msg, PairingStyle, Record};
use crate::transcript::formats::codex;
use crate::transcript::model::{Args, Call, Entry, Message, Role, ToolResult};
use crate::transcript::scan::{self, Kind, RawStr, Scanner};
use smallvec::SmallVec;
use std::borrow::Cow;

/// `{"messages", "tools"?, "functions"?}` or the preference shape.
pub(super) fn openai_line<'a>(s: &mut Scanner<'a>) -> scan::Result<Record<'a>> {
    let mut rec = Record::default();
    let mut conv: Option<Conversation<'a>> = None;
    let mut tools = None;
    let (mut input, mut preferred, mut non_preferred) = (None, None, None);
    let mut bad_shape = false;
    s.object(|s, k| {
        match &*k.key() {
            b"messages" => conv = chat_messages(s, &mut bad_shape)?,
            b"tools" | b"functions" => read_tools(s, &mut tools)?,
            b"input" => {
                s.opt_object(|s, k| {
                    match &*k.key() {
                        b"messages" => input = chat_messages(s, &mut bad_shape)?,
                        b"tools" | b"functions" => read_tools(s, &mut tools)?,
                        _ => s.skip()?,
                    }
                    Ok(())
                })?;
            }
            b"preferred_output" => preferred = chat_messages(s, &mut bad_shape)?,
            b"non_preferred_output" => non_preferred = chat_messages(s, &mut bad_shape)?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    if bad_shape {
        rec.problem = Some("a message that is not an object");
        return Ok(rec);
    }
    match (conv, input) {
        (Some(mut c), _) => {
            c.tools = tools;
            rec.conversations.push(c);
        }
        (None, Some(input)) => {
            let shared = input.messages.len();
            for (part, out) in [("preferred_output", preferred), ("non_preferred_output", non_preferred)] {
                let Some(out) = out.filter(|o| !o.messages.is_empty()) else {
                    rec.problem = Some("a preference line without both `preferred_output` and `non_preferred_output`");
                    return Ok(rec);
                };
                let mut c = input.clone();
                c.messages.extend(out.messages);
                c.tools = tools.clone();
                c.shared = shared;
                c.part = Some(part);
                rec.conversations.push(c);
            }
        }
        (None, None) => {}
    }
    Ok(rec)
}

/// `{"custom_id", "method", "url", "body": {...}}`.
pub(super) fn openai_batch_line<'a>(s: &mut Scanner<'a>) -> scan::Result<Record<'a>> {
    let mut rec = Record::default();
    let mut url: Option<RawStr<'a>> = None;
    let (mut messages, mut input, mut tools) = (None, None, None);
    let mut bad_shape = false;
    s.object(|s, k| {
        match &*k.key() {
            b"custom_id" => rec.custom_id = s.opt_string()?,
            b"url" => url = s.opt_string()?,
            b"body" => {
                s.opt_object(|s, k| {
                    match &*k.key() {
                        b"messages" => messages = chat_messages(s, &mut bad_shape)?,
                        b"input" => input = responses_input(s, &mut bad_shape)?,
                        b"tools" | b"functions" => read_tools(s, &mut tools)?,
                        _ => s.skip()?,
                    }
                    Ok(())
                })?;
            }
            _ => s.skip()?,
        }
        Ok(())
    })?;
    let url = url.map(|u| u.decode());
    let path = url.as_deref().map(|u| u.split('?').next().unwrap_or(u));
    let conv = match path {
        Some(p) if p.ends_with("/chat/completions") => messages,
        Some(p) if p.ends_with("/responses") => input,
        Some(_) => {
            rec.not_chat = true;
            return Ok(rec);
        }
        None => messages.or(input),
    };
    Ok(with_conversation(rec, conv, tools, bad_shape))
}

/// Chat Completions messages.
fn chat_messages<'a>(s: &mut Scanner<'a>, bad_shape: &mut bool) -> scan::Result<Option<Conversation<'a>>> {
    // Escaped arguments are decoded here, into one buffer a thread keeps (up to 1 MiB).
    let mut scratch = SCRATCH.take();
    let read = chat_message_array(s, bad_shape, &mut scratch);
    if scratch.capacity() <= 1 << 20 {
        SCRATCH.set(scratch);
    }
    read
}

thread_local! {
    static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

fn chat_message_array<'a>(s: &mut Scanner<'a>, bad_shape: &mut bool, scratch: &mut Vec<u8>) -> scan::Result<Option<Conversation<'a>>> {
    // Legacy `function_call`s have no id: each is answered by the next `function` message.
    let mut legacy: Option<String> = None;
    message_array(s, PairingStyle::Chat, bad_shape, |s, c| {
        let index = c.messages.len();
        let (mut role, mut parts, mut null, mut seen) = (None, None, true, false);
        let (mut calls, mut keys): (SmallVec<[Call<'a>; 1]>, SmallVec<[ArgKeys; 1]>) = Default::default();
        let (mut tool_call_id, mut weight_bad, mut function_call) = (None, false, None);
        s.object(|s, k| {
            match &*k.key() {
                b"role" => role = s.opt_string()?,
                b"content" => {
                    seen = true;
                    let (p, n) = content_of(s)?;
                    parts = Some(p);
                    null = n;
                }
                b"tool_calls" => {
                    s.opt_array(|s| {
                        if let Some((call, k)) = read_tool_call(s, scratch)? {
                            calls.push(call);
                            keys.push(k);
                        }
                        Ok(())
                    })?;
                }
                b"function_call" => function_call = read_function(s, scratch)?,
                b"tool_call_id" => tool_call_id = s.opt_string()?,
                b"weight" => weight_bad = !matches!(s.raw_value()?, b"0" | b"1" | b"0.0" | b"1.0" | b"null"),
                _ => s.skip()?,
            }
            Ok(())
        })?;
        // (Roles are matched as written; only one the format does not have is decoded.)
        let raw_role = role;
        let key = raw_role.map(|r| r.key());
        let (role, name) = match key.as_deref() {
            Some(b"user") => (Some(Role::User), "user"),
            Some(b"assistant") => (Some(Role::Assistant), "assistant"),
            Some(b"system") => (Some(Role::System), "system"),
            Some(b"developer") => (Some(Role::Developer), "developer"),
            Some(b"tool") => (Some(Role::Tool), "tool"),
            Some(b"function") => (Some(Role::Tool), "function"),
            _ => (None, ""),
        };
        let role_name = if role.is_some() { Some(Cow::Borrowed(name)) } else { raw_role.map(|r| r.decode()) };
        let mut msg = Msg::new(role_name.clone());
        let parts = parts.unwrap_or_default();
        msg.content = content_state(seen && !null, &parts);
        msg.bad_weight = weight_bad && role == Some(Role::Assistant);
        if let Some(role) = role {
            let mut m = parts.into_message(role);
            match role {
                Role::Assistant => {
                    if let Some((name, (args, k))) = function_call {
                        let id = format!("function_call@{index}");
                        legacy = Some(id.clone());
                        calls.push(Call { id: id.into(), name: name.decode(), args, item: None });
                        keys.push(k);
                    }
                    // (Moved whole: the content's own calls, if any, come first.)
                    if m.calls.is_empty() {
                        m.calls = calls;
                    } else {
                        m.calls.extend(calls);
                    }
                    msg.args = keys;
                    m.has_content |= !m.calls.is_empty();
                }
                Role::Tool => {
                    m.has_content = true;
                    match (tool_call_id, role_name.as_deref()) {
                        (Some(id), _) => m.results.push(ToolResult { id: id.decode() }),
                        (None, Some("function")) => {
                            let id = legacy.take().unwrap_or_else(|| format!("function_result@{index}"));
                            m.results.push(ToolResult { id: id.into() });
                        }
                        (None, _) => m.results.push(ToolResult { id: format!("missing tool_call_id@{index}").into() }),
                    }
                }
                _ => {}
            }
            msg.set(m);
        }
        c.messages.push(msg);
        Ok(())
    })
}
/// One `tool_calls` entry: `{"id", "type", "function": {"name", "arguments"}}`; `arguments` may
/// be a string (OpenAI) or an object (Hugging Face datasets).
fn read_tool_call<'a>(s: &mut Scanner<'a>, scratch: &mut Vec<u8>) -> scan::Result<Option<(Call<'a>, ArgKeys)>> {
    let (mut id, mut function): (Option<RawStr<'a>>, _) = (None, None);
    s.opt_object(|s, k| {
        match &*k.key() {
            b"id" => id = s.opt_string()?,
            b"function" => function = read_function(s, scratch)?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    let (name, (args, keys)) = match function {
        Some((name, args)) => (name.decode(), args),
        None => (Cow::Borrowed(""), (Args::Object, ArgKeys::default())),
    };
    // A call without an id cannot be answered; the API rejects it, so it still counts as a
    // call (with an id no result can name).
    let id = id.map(|i| i.decode()).unwrap_or_else(|| Cow::Owned(format!("(no id: {name})")));
    Ok(Some((Call { id, name, args, item: None }, keys)))
}

/// `{"name", "arguments"}`: the name, and the shape and keys of the arguments (a missing
/// `arguments` is `{}`). Escaped text is decoded into `scratch`.
fn read_function<'a>(s: &mut Scanner<'a>, scratch: &mut Vec<u8>) -> scan::Result<Option<(RawStr<'a>, (Args, ArgKeys))>> {
    let (mut name, mut args) = (None, (Args::Object, ArgKeys::default()));
    let is_object = s.opt_object(|s, k| {
        match &*k.key() {
            b"name" => name = s.opt_string()?,
            b"arguments" => {
                args = match s.peek() {
                    Some(Kind::String) => {
                        let text = s.string()?;
                        if text.is_escaped() {
                            scratch.clear();
                            scan::unescape_into(text.raw(), scratch);
                            args_info(scratch)
                        } else {
                            args_info(text.raw())
                        }
                    }
                    Some(Kind::Null) | None => {
                        s.skip()?;
                        (Args::Object, ArgKeys::default())
                    }
                    Some(_) => args_info(s.raw_value()?),
                }
            }
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok(is_object.then(|| (name.unwrap_or_else(empty_raw), args)))
}

fn empty_raw<'a>() -> RawStr<'a> {
    let mut s = Scanner::new(b"\"\"");
    s.string().expect("an empty string literal")
}

/// Responses API `input`: a string (one user message) or an array of items.
fn responses_input<'a>(s: &mut Scanner<'a>, bad_shape: &mut bool) -> scan::Result<Option<Conversation<'a>>> {
    if s.peek() == Some(Kind::String) {
        let text = s.string()?;
        let mut c = Conversation::new(PairingStyle::Responses);
        let mut msg = Msg::new(Some(Cow::Borrowed("user")));
        let mut m = Message::new(Role::User);
        m.prompt = true;
        m.has_content = !text.is_blank();
        msg.content = if text.is_blank() { Content::Blank } else { Content::Present };
        msg.set(m);
        c.messages.push(msg);
        return Ok(Some(c));
    }
    message_array(s, PairingStyle::Responses, bad_shape, |s, c| {
        let mut it = codex::Item::default();
        let (mut parts, mut seen, mut null, mut raw_args) = (None, false, true, None);
        s.object(|s, k| {
            match &*k.key() {
                b"type" => it.ty = s.opt_string()?,
                b"role" => it.role = s.opt_string()?,
                b"call_id" => it.call_id = s.opt_string()?,
                b"name" => it.name = s.opt_string()?,
                b"arguments" => {
                    it.arguments = s.opt_string()?;
                    raw_args = it.arguments.map(|a| args_info(a.decode().as_bytes()).1);
                }
                b"content" => {
                    seen = true;
                    let (p, n) = content_of(s)?;
                    parts = Some(p);
                    null = n;
                }
                _ => s.skip()?,
            }
            Ok(())
        })?;
        let parts = parts.unwrap_or_default();
        if it.ty.is_none() && it.role.is_some() {
            it.ty = Some(message_raw());
        }
        let ty = it.ty.map(|t| t.decode());
        let is_message = ty.as_deref() == Some("message");
        let role = if is_message { it.role.map(|r| r.decode()) } else { ty.clone() };
        let mut msg = Msg::new(role);
        msg.content = content_state(seen && !null, &parts);
        it.has_content = !parts.is_blank();
        match codex::response_item(it) {
            Entry::Message(m) => {
                if !m.calls.is_empty() {
                    msg.args.push(raw_args.unwrap_or_default());
                }
                if !is_message {
                    msg.content = Content::Present;
                }
                msg.set(m);
            }
            // A message with a role the API does not have.
            _ if is_message => {}
            _ => msg.passive = true,
        }
        c.messages.push(msg);
        Ok(())
    })
}

fn message_raw<'a>() -> RawStr<'a> {
    let mut s = Scanner::new(b"\"message\"");
    s.string().expect("a string literal")
}
