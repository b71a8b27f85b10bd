//! The `sharegpt` shape: `conversations` of `{"from", "value"}` messages.

use super::tools::read_tools;
use super::{message_array, with_conversation, ArgKeys, Content, Conversation, Msg, PairingStyle, Record};
use crate::transcript::formats::blocks::args_of_string;
use crate::transcript::model::{Args, Call, Message, Role, ToolResult};
use crate::transcript::scan::{self, Scanner};

/// `{"conversations": [{"from", "value"}], "tools"?}`.
pub(super) fn sharegpt_line<'a>(s: &mut Scanner<'a>) -> scan::Result<Record<'a>> {
    let rec = Record::default();
    let (mut conv, mut tools) = (None, None);
    let mut bad_shape = false;
    s.object(|s, k| {
        match &*k.key() {
            b"conversations" => conv = sharegpt_messages(s, &mut bad_shape)?,
            b"tools" => read_tools(s, &mut tools)?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok(with_conversation(rec, conv, tools, bad_shape))
}

/// ShareGPT messages: `{"from", "value"}`. A `function_call` message is an assistant turn
/// whose value is a JSON call (`{"name", "arguments"}`, or a list of them); an `observation`
/// answers the calls of the `function_call` before it. Calls have no ids: they get
/// `call@<message>.<k>`.
fn sharegpt_messages<'a>(s: &mut Scanner<'a>, bad_shape: &mut bool) -> scan::Result<Option<Conversation<'a>>> {
    let mut open: Vec<String> = Vec::new();
    message_array(s, PairingStyle::Chat, bad_shape, |s, c| {
        let index = c.messages.len();
        let (mut from, mut value) = (None, None);
        s.object(|s, k| {
            match &*k.key() {
                b"from" | b"role" => from = s.opt_string()?,
                b"value" | b"content" => value = s.opt_string()?,
                _ => s.skip()?,
            }
            Ok(())
        })?;
        let from_name = from.map(|f| f.decode());
        let mut msg = Msg::new(from_name.clone());
        msg.content = match value {
            None => Content::Absent,
            Some(v) if v.is_blank() => Content::Blank,
            Some(_) => Content::Present,
        };
        let text = value.is_some_and(|v| !v.is_blank());
        let mut m = match from_name.as_deref() {
            Some("system") => Message::new(Role::System),
            Some("human" | "user") => {
                let mut m = Message::new(Role::User);
                m.prompt = true;
                m
            }
            Some("gpt" | "assistant" | "model") => Message::new(Role::Assistant),
            Some("function_call") => {
                let mut m = Message::new(Role::Assistant);
                open.clear();
                let calls = value.map(|v| sharegpt_calls(&v.decode())).unwrap_or_default();
                for (k, (name, args, keys)) in calls.into_iter().enumerate() {
                    let id = format!("call@{index}.{k}");
                    open.push(id.clone());
                    m.calls.push(Call { id: id.into(), name: name.into(), args, item: None });
                    msg.args.push(ArgKeys::of_names(keys.iter().map(String::as_str)));
                }
                m
            }
            Some("observation" | "tool") => {
                let mut m = Message::new(Role::Tool);
                if open.is_empty() {
                    m.results.push(ToolResult { id: format!("observation@{index}").into() });
                }
                for id in open.drain(..) {
                    m.results.push(ToolResult { id: id.into() });
                }
                m
            }
            _ => {
                c.messages.push(msg);
                return Ok(());
            }
        };
        m.has_content = text || !m.calls.is_empty() || m.role == Role::Tool;
        msg.set(m);
        c.messages.push(msg);
        Ok(())
    })
}

/// The calls a ShareGPT `function_call` value holds: `(name, arguments shape, argument keys)`.
/// A value that is not JSON is one call with unparseable arguments.
pub fn sharegpt_calls(value: &str) -> Vec<(String, Args, Vec<String>)> {
    use serde_json::Value;
    let one = |v: &Value| {
        let name = v.get("name").and_then(|n| n.as_str()).unwrap_or("").to_owned();
        let parsed;
        let object = match v.get("arguments") {
            Some(Value::String(s)) => {
                parsed = serde_json::from_str::<Value>(s).ok();
                parsed.as_ref()
            }
            other => other,
        };
        let args = match v.get("arguments") {
            None | Some(Value::Null) => Args::Object,
            Some(Value::String(s)) => args_of_string(Some(s)),
            Some(Value::Object(_)) => Args::Object,
            Some(_) => Args::NotObject,
        };
        let keys = object.and_then(Value::as_object).map(|o| o.keys().cloned().collect()).unwrap_or_default();
        (name, args, keys)
    };
    match serde_json::from_str::<Value>(value) {
        Ok(Value::Array(a)) => a.iter().map(one).collect(),
        Ok(v @ Value::Object(_)) => vec![one(&v)],
        _ => vec![(String::new(), Args::Unparseable, Vec::new())],
    }
}
