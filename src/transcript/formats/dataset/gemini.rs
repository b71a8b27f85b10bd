//! The `gemini-tuning` shape: Vertex AI supervised tuning examples for Gemini,
//! `{"systemInstruction"?, "contents": [{"role", "parts"}], "tools"?}`.
//!
//! A content's `role` is `user` or `model` (the API's "Please use a valid role: user, model");
//! its `parts` hold `text`, media (`inlineData`, `fileData`), `functionCall {id?, name, args}`
//! and `functionResponse {id?, name, response}`, among others. Proto JSON: every field may also
//! be written in snake case (`system_instruction`, `function_call`, ...), as the tuning docs'
//! own examples do.
//!
//! Pairing is the Gemini API's: the function calls of a model turn are answered by the
//! function responses of the content right after it, a user turn, as many responses as calls
//! ("the number of function response parts is equal to the number of function call parts of
//! the function call turn"). A response names its call by `id` when it has one, else by
//! `name`, in order (the first call of that name not answered yet). Calls without an `id` get
//! `call@<content>.<part>`; a response that answers no call of the turn before gets
//! `response@<content>.<part>`, which no call has (an orphan response); a second response to
//! an answered call names that call (a duplicate).

use super::tools::read_gemini_tools;
use super::{args_info, message_array, with_conversation, ArgKeys, Content, Conversation, Msg, PairingStyle, Record};
use crate::transcript::model::{Args, Call, Message, Role, ToolResult};
use crate::transcript::scan::{self, Kind, RawStr, Scanner};
use std::borrow::Cow;

/// `{"systemInstruction"?, "contents", "tools"?}`.
pub(super) fn gemini_line<'a>(s: &mut Scanner<'a>) -> scan::Result<Record<'a>> {
    let rec = Record::default();
    let (mut conv, mut tools) = (None, None);
    let mut bad_shape = false;
    s.object(|s, k| {
        match &*k.key() {
            b"contents" => conv = gemini_contents(s, &mut bad_shape)?,
            b"tools" => read_gemini_tools(s, &mut tools)?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok(with_conversation(rec, conv, tools, bad_shape))
}

/// A call of the model turn before, waiting for its response.
struct Open {
    id: String,
    name: String,
    answered: bool,
}

/// One part, as far as pairing and content go.
#[derive(Default)]
struct Part<'a> {
    text: Option<RawStr<'a>>,
    /// A media, code or other data field: content, whatever its value.
    data: bool,
    call: Option<FnCall<'a>>,
    response: Option<(Option<RawStr<'a>>, Option<RawStr<'a>>)>,
}

/// A `functionCall` part: its `id`, `name` and raw `args`.
#[derive(Clone, Copy)]
struct FnCall<'a> {
    id: Option<RawStr<'a>>,
    name: Option<RawStr<'a>>,
    args: Option<&'a [u8]>,
}

fn read_part<'a>(s: &mut Scanner<'a>) -> scan::Result<Part<'a>> {
    let mut p = Part::default();
    s.opt_object(|s, k| {
        match &*k.key() {
            b"text" => p.text = s.opt_string()?,
            b"functionCall" | b"function_call" => {
                let (mut id, mut name, mut args) = (None, None, None);
                s.opt_object(|s, k| {
                    match &*k.key() {
                        b"id" => id = s.opt_string()?,
                        b"name" => name = s.opt_string()?,
                        b"args" => args = Some(s.raw_value()?),
                        _ => s.skip()?,
                    }
                    Ok(())
                })?;
                p.call = Some(FnCall { id, name, args });
            }
            b"functionResponse" | b"function_response" => {
                let (mut id, mut name) = (None, None);
                s.opt_object(|s, k| {
                    match &*k.key() {
                        b"id" => id = s.opt_string()?,
                        b"name" => name = s.opt_string()?,
                        _ => s.skip()?,
                    }
                    Ok(())
                })?;
                p.response = Some((id, name));
            }
            b"inlineData"
            | b"inline_data"
            | b"fileData"
            | b"file_data"
            | b"executableCode"
            | b"executable_code"
            | b"codeExecutionResult"
            | b"code_execution_result" => {
                p.data = s.peek() != Some(Kind::Null);
                s.skip()?;
            }
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok(p)
}

/// Gemini contents: `{"role", "parts"}`. See the module docs for the pairing.
fn gemini_contents<'a>(s: &mut Scanner<'a>, bad_shape: &mut bool) -> scan::Result<Option<Conversation<'a>>> {
    // The calls of the content just before, if it was a model turn.
    let mut open: Vec<Open> = Vec::new();
    message_array(s, PairingStyle::Anthropic, bad_shape, |s, c| {
        let index = c.messages.len();
        let (mut role, mut parts, mut has_parts) = (None, Vec::new(), false);
        s.object(|s, k| {
            match &*k.key() {
                b"role" => role = s.opt_string()?,
                b"parts" => {
                    has_parts = s.opt_array(|s| {
                        parts.push(read_part(s)?);
                        Ok(())
                    })?;
                }
                _ => s.skip()?,
            }
            Ok(())
        })?;
        let role_name = role.map(|r| r.decode());
        let mut msg = Msg::new(role_name.clone());
        // No parts, or an empty list, is no content (the API rejects both); text that is all
        // blank is blank.
        let present = parts.iter().any(|p| p.data || p.call.is_some() || p.response.is_some() || p.text.is_some_and(|t| !t.is_blank()));
        msg.content = match (has_parts && !parts.is_empty(), present) {
            (false, _) => Content::Absent,
            (true, true) => Content::Present,
            (true, false) => Content::Blank,
        };
        let before = std::mem::take(&mut open);
        let mut m = match role_name.as_deref() {
            Some("model") => {
                let mut m = Message::new(Role::Assistant);
                for (k, FnCall { id, name, args }) in parts.iter().filter_map(|p| p.call).enumerate() {
                    let name = name.map(|n| n.decode()).unwrap_or(Cow::Borrowed(""));
                    let id = id.map(|i| i.decode().into_owned()).unwrap_or_else(|| format!("call@{index}.{k}"));
                    let (shape, keys) = match args {
                        Some(raw) if raw != b"null" => args_info(raw),
                        _ => (Args::Object, ArgKeys::default()),
                    };
                    open.push(Open { id: id.clone(), name: name.clone().into_owned(), answered: false });
                    m.calls.push(Call { id: id.into(), name, args: shape, item: None });
                    msg.args.push(keys);
                }
                m
            }
            Some("user") => {
                let mut m = Message::new(Role::User);
                let mut before = before;
                for (k, (id, name)) in parts.iter().filter_map(|p| p.response).enumerate() {
                    let name = name.map(|n| n.decode());
                    let answers = match id {
                        Some(id) => Some(id.decode().into_owned()),
                        None => {
                            let same = |o: &Open| name.as_deref() == Some(o.name.as_str());
                            // The first call of that name not answered yet; else an answered one
                            // (a duplicate response).
                            let at = before.iter().position(|o| same(o) && !o.answered).or_else(|| before.iter().position(same));
                            at.map(|at| before[at].id.clone())
                        }
                    };
                    if let Some(o) = answers.as_ref().and_then(|a| before.iter_mut().find(|o| o.id == *a)) {
                        o.answered = true;
                    }
                    m.results.push(ToolResult { id: answers.unwrap_or_else(|| format!("response@{index}.{k}")).into() });
                }
                // A user turn of text only starts a new exchange; one with responses answers.
                m.prompt = m.results.is_empty();
                m
            }
            _ => {
                c.messages.push(msg);
                return Ok(());
            }
        };
        m.has_content = present;
        msg.set(m);
        c.messages.push(msg);
        Ok(())
    })
}
