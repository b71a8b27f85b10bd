//! Message content as the Messages and Chat Completions APIs shape it: a string, or an array of
//! typed parts (`text`, `thinking`, `tool_use`, `tool_result`, `image`, ...). Shared by the Claude
//! Code, Anthropic and OpenAI chat adapters.

use crate::transcript::json::{Shape, Str, Text};
use crate::transcript::model::{Args, Call, Message, Role, ToolResult};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use smallvec::SmallVec;
use std::fmt;

/// One content part. Only the fields validation needs are read.
#[derive(Debug, Default, Deserialize)]
pub struct Part<'a> {
    /// Part type (`text`, `tool_use`, ...).
    #[serde(rename = "type", default, borrow)]
    pub ty: Str<'a>,
    /// Call id of a `tool_use`.
    #[serde(default, borrow)]
    pub id: Str<'a>,
    /// Call a `tool_result` answers.
    #[serde(default, borrow)]
    pub tool_use_id: Str<'a>,
    /// Tool name of a `tool_use`.
    #[serde(default, borrow)]
    pub name: Str<'a>,
    /// Text of a `text` part.
    #[serde(default)]
    pub text: Text,
    /// Text of a `thinking` part.
    #[serde(default)]
    pub thinking: Text,
    /// Arguments of a `tool_use`.
    #[serde(default)]
    pub input: Shape,
}

/// Message content: a string, an array of parts, or something else (ignored).
#[derive(Debug, Default)]
pub enum Content<'a> {
    /// Absent or of an unexpected shape.
    #[default]
    None,
    /// A plain string; `true` when it has a non-whitespace character.
    Text(bool),
    /// An array of parts.
    Parts(SmallVec<[Part<'a>; 2]>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Content<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("message content")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Content::Text(!v.trim().is_empty()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut parts = SmallVec::new();
                while let Some(p) = seq.next_element::<crate::transcript::json::Obj<Part<'a>>>()? {
                    // A part that is not an object is kept as an unknown part.
                    parts.push(p.0.unwrap_or_default());
                }
                Ok(Content::Parts(parts))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Content::None)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> { Ok(Content::None) }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> { Ok(Content::None) }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> { Ok(Content::None) }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> { Ok(Content::None) }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> { Ok(Content::None) }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// Shape of call arguments given as a JSON value (Anthropic `input`).
pub fn args_of_value(shape: Shape) -> Args {
    match shape {
        Shape::Object => Args::Object,
        // A missing input is treated as `{}` by the API.
        Shape::Missing => Args::Object,
        _ => Args::NotObject,
    }
}

/// Shape of call arguments given as a JSON-encoded string (OpenAI and Codex `arguments`).
pub fn args_of_string(s: Option<&str>) -> Args {
    match s {
        None => Args::Object,
        Some(s) if s.trim().is_empty() => Args::Object,
        Some(s) => match crate::transcript::json::json_text_shape(s) {
            Some(Shape::Object) => Args::Object,
            Some(_) => Args::NotObject,
            None => Args::Unparseable,
        },
    }
}

/// Adds the parts of `content` to `msg`: calls (`tool_use`), results (`tool_result`, only when
/// `results` is allowed for the role) and whether anything is non-blank.
///
/// A user message is a prompt when it has a part that is not a tool result and no tool result.
pub fn add_parts<'a>(msg: &mut Message<'a>, content: Content<'a>, results: bool) {
    let mut other = false;
    match content {
        Content::None => {}
        Content::Text(non_blank) => {
            msg.has_content |= non_blank;
            other = true;
        }
        Content::Parts(parts) => {
            for p in parts {
                match p.ty.get() {
                    Some("text") => {
                        msg.has_content |= p.text.non_blank();
                        other = true;
                    }
                    Some("thinking") => msg.has_content |= p.thinking.non_blank(),
                    Some("tool_use") if !results => {
                        msg.has_content = true;
                        if let Some(id) = p.id.0 {
                            msg.calls.push(Call { id, name: p.name.0.unwrap_or_default(), args: args_of_value(p.input) });
                        }
                    }
                    Some("tool_result") if results => {
                        msg.has_content = true;
                        if let Some(id) = p.tool_use_id.0 {
                            msg.results.push(ToolResult { id });
                        }
                    }
                    // Server tools (`server_tool_use`, `web_search_tool_result`, MCP connector
                    // blocks) are paired inside the assistant message and need no result; images,
                    // documents and unknown parts are content too.
                    _ => {
                        msg.has_content = true;
                        other = true;
                    }
                }
            }
        }
    }
    if msg.role == Role::User {
        msg.prompt = other && msg.results.is_empty();
    }
}
