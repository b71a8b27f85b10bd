//! The `anthropic-batch` shape: a request's `params.messages`, Messages API messages.

use super::tools::read_tools;
use super::{args_info, content_state, message_array, with_conversation, Conversation, Msg, PairingStyle, Record};
use crate::transcript::formats::blocks::read_content;
use crate::transcript::model::Role;
use crate::transcript::scan::{self, Kind, Scanner};
use std::borrow::Cow;

/// `{"custom_id", "params": {"messages", "system"?, "tools"?}}`.
pub(super) fn anthropic_batch_line<'a>(s: &mut Scanner<'a>) -> scan::Result<Record<'a>> {
    let mut rec = Record::default();
    let (mut conv, mut tools) = (None, None);
    let mut bad_shape = false;
    s.object(|s, k| {
        match &*k.key() {
            b"custom_id" => rec.custom_id = s.opt_string()?,
            b"params" => {
                s.opt_object(|s, k| {
                    match &*k.key() {
                        b"messages" => conv = anthropic_messages(s, &mut bad_shape)?,
                        b"tools" => read_tools(s, &mut tools)?,
                        _ => s.skip()?,
                    }
                    Ok(())
                })?;
            }
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok(with_conversation(rec, conv, tools, bad_shape))
}

/// Messages API messages: `role` `user` or `assistant`, content a string or blocks.
fn anthropic_messages<'a>(s: &mut Scanner<'a>, bad_shape: &mut bool) -> scan::Result<Option<Conversation<'a>>> {
    message_array(s, PairingStyle::Anthropic, bad_shape, |s, c| {
        let (mut role, mut raw_content, mut weight_bad) = (None, None, false);
        s.object(|s, k| {
            match &*k.key() {
                b"role" => role = s.opt_string()?,
                b"content" => raw_content = Some(s.raw_value()?),
                b"weight" => weight_bad = true,
                _ => s.skip()?,
            }
            Ok(())
        })?;
        let _ = weight_bad;
        let role_name = role.map(|r| r.decode());
        let mut msg = Msg::new(role_name.clone());
        let (parts, present) = match raw_content {
            Some(raw) => {
                let mut sub = Scanner::new(raw);
                let null = sub.peek() == Some(Kind::Null);
                (read_content(&mut sub)?, !null)
            }
            None => (Default::default(), false),
        };
        msg.content = content_state(present, &parts);
        let role = match role_name.as_deref() {
            Some("user") => Some(Role::User),
            Some("assistant") => Some(Role::Assistant),
            _ => None,
        };
        if let Some(role) = role {
            let m = parts.into_message(role);
            if !m.calls.is_empty() {
                let inputs = raw_content.map(tool_use_inputs).unwrap_or_default();
                for call in &m.calls {
                    msg.args.push(inputs.iter().find(|(id, _)| *id == call.id).map(|(_, raw)| args_info(raw).1).unwrap_or_default());
                }
            }
            msg.set(m);
        }
        c.messages.push(msg);
        Ok(())
    })
}

/// The `input` of each `tool_use` block of Anthropic content, by id.
fn tool_use_inputs(raw: &[u8]) -> Vec<(Cow<'_, str>, &[u8])> {
    let mut out = Vec::new();
    let mut s = Scanner::new(raw);
    let _ = s.opt_array(|s| {
        let (mut ty, mut id, mut input) = (None, None, None);
        s.opt_object(|s, k| {
            match &*k.key() {
                b"type" => ty = s.opt_string()?,
                b"id" => id = s.opt_string()?,
                b"input" => input = Some(s.raw_value()?),
                _ => s.skip()?,
            }
            Ok(())
        })?;
        if let (true, Some(id), Some(input)) = (ty.is_some_and(|t| t.is("tool_use")), id, input) {
            out.push((id.decode(), input));
        }
        Ok(())
    });
    out
}
