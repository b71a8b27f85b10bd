//! Conversation-per-line datasets: one whole conversation per line, as fine-tuning files, batch
//! request files and chat datasets hold them.
//!
//! | dataset | a line | messages |
//! |---|---|---|
//! | `openai-dataset` | `{"messages": [...], "tools"?, "parallel_tool_calls"?}` (OpenAI chat fine-tuning, Hugging Face chat datasets); the preference shape `{"input": {"messages"}, "preferred_output", "non_preferred_output"}` | Chat Completions messages; `arguments` may be an object |
//! | `openai-batch` | `{"custom_id", "method", "url", "body"}` | `body.messages` (Chat Completions) or `body.input` items (Responses) |
//! | `anthropic-batch` | `{"custom_id", "params": {"messages", "system"?, "tools"?}}` | Messages API messages |
//! | `sharegpt` | `{"conversations": [{"from", "value"}], "tools"?, "system"?}` | `from`: `system`, `human`, `gpt`, `function_call`, `observation` |
//!
//! This module only reads: a line becomes a [`Record`] whose messages are the canonical
//! [`Message`]s of the turn model plus what the dataset rules need (the role as written,
//! whether content is there, the raw call arguments). The rules live in
//! [`dataset`](crate::transcript::dataset). Reading is lenient like every
//! adapter: a field of an unexpected shape is "absent"; only a line that is not JSON fails.

use super::blocks::{args_of_string, read_content};
use super::codex;
use crate::transcript::model::{Args, Call, Entry, Message, Role, ToolResult};
use crate::transcript::scan::{self, Kind, RawStr, Remembered, Scanner};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::Rc;

/// The dataset shapes. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dataset {
    /// OpenAI chat fine-tuning files and Hugging Face chat datasets of the same shape.
    OpenAi,
    /// OpenAI Batch API input files.
    OpenAiBatch,
    /// Anthropic Message Batches requests.
    AnthropicBatch,
    /// ShareGPT-style `conversations` datasets.
    ShareGpt,
}

impl Dataset {
    /// Every dataset shape.
    pub const ALL: [Dataset; 4] = [Dataset::OpenAi, Dataset::OpenAiBatch, Dataset::AnthropicBatch, Dataset::ShareGpt];

    /// Its public name (`--format`).
    pub fn as_str(self) -> &'static str {
        match self {
            Dataset::OpenAi => "openai-dataset",
            Dataset::OpenAiBatch => "openai-batch",
            Dataset::AnthropicBatch => "anthropic-batch",
            Dataset::ShareGpt => "sharegpt",
        }
    }

    /// Whether each conversation is a training example, which must end with the assistant
    /// message the model learns (a call in that last message is the target, not an orphan).
    pub fn fine_tuning(self) -> bool {
        matches!(self, Dataset::OpenAi | Dataset::ShareGpt)
    }

    /// Whether lines carry a `custom_id` that must be unique in the file.
    pub fn batch(self) -> bool {
        matches!(self, Dataset::OpenAiBatch | Dataset::AnthropicBatch)
    }
}

/// The dataset shape one line suggests, if any.
pub fn classify(obj: &serde_json::Map<String, serde_json::Value>) -> Option<Dataset> {
    if obj.contains_key("custom_id") {
        if obj.get("body").is_some_and(|b| b.is_object()) {
            return Some(Dataset::OpenAiBatch);
        }
        if obj.get("params").is_some_and(|b| b.is_object()) {
            return Some(Dataset::AnthropicBatch);
        }
    }
    if obj.get("messages").is_some_and(|m| m.is_array()) && !obj.contains_key("role") {
        return Some(Dataset::OpenAi);
    }
    if obj.get("input").and_then(|i| i.get("messages")).is_some_and(|m| m.is_array()) && obj.contains_key("preferred_output") {
        return Some(Dataset::OpenAi);
    }
    if obj.get("conversations").is_some_and(|m| m.is_array()) {
        return Some(Dataset::ShareGpt);
    }
    None
}

/// The format the first complete lines of `head` show (at most [`super::DETECT_LINES`] of
/// them), for shells that must choose a path before reading a file: `repair` and `stats`.
pub fn detect_head(head: &[u8]) -> Option<super::Format> {
    let mut d = super::Detector::new();
    let whole = memchr::memrchr(b'\n', head).map_or(0, |nl| nl + 1);
    for line in head[..whole].split(|&b| b == b'\n') {
        if !d.wants_more() {
            break;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if !crate::transcript::lines::is_blank(line) && simdutf8::basic::from_utf8(line).is_ok() {
            d.observe(line);
        }
    }
    d.format()
}

/// How a conversation's messages pair calls with results, which decides the rules that apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairingStyle {
    /// Chat Completions (and ShareGPT, read as such): `tool_calls` answered by `tool` messages.
    Chat,
    /// Messages API: `tool_use` blocks answered by `tool_result` blocks in the next user message.
    Anthropic,
    /// Responses API input items: the Codex rules (a turn may hold many items in a row).
    Responses,
}

/// Whether a message's content is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content {
    /// Missing or `null`.
    Absent,
    /// Present but blank (whitespace, an empty array, text parts that are all blank).
    Blank,
    /// Something to read.
    Present,
}

/// The top-level keys of a call's arguments object (as hashes), for the declared schema's
/// required properties. Empty when the arguments are not an object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArgKeys(pub SmallVec<[u64; 4]>);

impl ArgKeys {
    /// Whether the arguments have the property `key`.
    pub fn has(&self, key: &str) -> bool {
        self.0.contains(&xxhash_rust::xxh3::xxh3_64(key.as_bytes()))
    }

    fn of_names<'k>(names: impl IntoIterator<Item = &'k str>) -> Self {
        ArgKeys(names.into_iter().map(|k| xxhash_rust::xxh3::xxh3_64(k.as_bytes())).collect())
    }
}

/// The shape and keys of arguments given as one JSON value (`raw`), read in one pass. Blank
/// text counts as `{}` (as the APIs take it); text that is not JSON is `Unparseable`.
fn args_info(raw: &[u8]) -> (Args, ArgKeys) {
    if crate::transcript::lines::is_blank(raw) {
        return (Args::Object, ArgKeys::default());
    }
    let mut s = Scanner::new(raw);
    let mut keys = ArgKeys::default();
    let object = s.peek() == Some(Kind::Object);
    let read = if object {
        s.object(|s, k| {
            keys.0.push(xxhash_rust::xxh3::xxh3_64(&k.key()));
            s.skip()
        })
    } else {
        s.skip()
    };
    match read.and_then(|_| s.end()) {
        Ok(()) if object => (Args::Object, keys),
        Ok(()) => (Args::NotObject, ArgKeys::default()),
        Err(_) => (Args::Unparseable, ArgKeys::default()),
    }
}

/// One message of a conversation.
#[derive(Debug, Clone)]
pub struct Msg<'a> {
    /// The role as written (`role`, or `from` in ShareGPT; the item `type` for Responses items
    /// that are not messages).
    pub role: Option<Cow<'a, str>>,
    /// Its meaning in the turn model; `None` for a role the format does not have.
    pub message: Option<Message<'a>>,
    /// Whether content is there (calls aside).
    pub content: Content,
    /// An assistant `weight` other than 0 or 1.
    pub bad_weight: bool,
    /// The argument keys of each call, in the order of its calls.
    pub args: SmallVec<[ArgKeys; 1]>,
    /// The item is of a type that is neither a message nor a call nor a result (Responses
    /// `reasoning`, `web_search_call`, ...): not checked.
    pub passive: bool,
}

impl<'a> Msg<'a> {
    /// Its meaning in the turn model; `None` for a role the format does not have.
    pub fn message(&self) -> Option<&Message<'a>> {
        self.message.as_ref()
    }

    fn set(&mut self, m: Message<'a>) {
        self.message = Some(m);
    }

    fn new(role: Option<Cow<'a, str>>) -> Self {
        Msg { role, message: None, content: Content::Absent, bad_weight: false, args: SmallVec::new(), passive: false }
    }
}

/// A tool a conversation declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tool<'a> {
    /// Its name.
    pub name: Cow<'a, str>,
    /// The properties its schema requires.
    pub required: SmallVec<[Cow<'a, str>; 4]>,
    /// Their hashes, as [`ArgKeys`] holds keys (a declaration is read once per thread and
    /// checked against every call to it).
    required_keys: ArgKeys,
}

impl<'a> Tool<'a> {
    fn new(name: Cow<'a, str>, required: SmallVec<[Cow<'a, str>; 4]>) -> Self {
        let required_keys = ArgKeys::of_names(required.iter().map(|r| r.as_ref()));
        Tool { name, required, required_keys }
    }

    /// The required properties that arguments with `keys` lack (all of them without keys).
    pub fn missing<'t>(&'t self, keys: Option<&'t ArgKeys>) -> impl Iterator<Item = &'t str> + 't {
        self.required.iter().zip(&self.required_keys.0).filter(move |(_, h)| !keys.is_some_and(|k| k.0.contains(h))).map(|(r, _)| r.as_ref())
    }
}

/// One conversation of a line.
#[derive(Debug, Clone)]
pub struct Conversation<'a> {
    /// Its messages in order.
    pub messages: Vec<Msg<'a>>,
    /// The tools the line declares, when it declares any.
    pub tools: Option<Tools>,
    /// How calls pair.
    pub pairing: PairingStyle,
    /// Messages before this index belong to a shared prompt (preference lines: `input`), whose
    /// findings the second conversation of the line does not repeat.
    pub shared: usize,
    /// What the message indices of this conversation's own part point into, for people
    /// (`"preferred_output"`), when not the line's one message array.
    pub part: Option<&'static str>,
}

impl Conversation<'_> {
    fn new(pairing: PairingStyle) -> Self {
        Conversation { messages: Vec::new(), tools: None, pairing, shared: 0, part: None }
    }
}

/// What one line of a dataset holds.
#[derive(Debug, Clone, Default)]
pub struct Record<'a> {
    /// Batch lines: the request id.
    pub custom_id: Option<RawStr<'a>>,
    /// The conversations: one, or two for a preference line (prompt plus each output).
    pub conversations: SmallVec<[Conversation<'a>; 1]>,
    /// Why the line holds no conversation of its format, when it does not.
    pub problem: Option<&'static str>,
    /// A batch request to an endpoint that takes no conversation (embeddings, ...): nothing to
    /// check but its `custom_id`.
    pub not_chat: bool,
}

/// Reads one line (valid UTF-8, not blank) of a dataset. `Err` means it is not a JSON object.
pub fn read(dataset: Dataset, line: &[u8]) -> scan::Result<Record<'_>> {
    let mut s = Scanner::new(line);
    let mut rec = match dataset {
        Dataset::OpenAi => openai_line(&mut s)?,
        Dataset::OpenAiBatch => openai_batch_line(&mut s)?,
        Dataset::AnthropicBatch => anthropic_batch_line(&mut s)?,
        Dataset::ShareGpt => sharegpt_line(&mut s)?,
    };
    s.end()?;
    if rec.problem.is_none() && !rec.not_chat {
        if rec.conversations.is_empty() {
            rec.problem = Some(match dataset {
                Dataset::OpenAi => "no `messages` array",
                Dataset::OpenAiBatch => "no `body.messages` or `body.input`",
                Dataset::AnthropicBatch => "no `params.messages` array",
                Dataset::ShareGpt => "no `conversations` array",
            });
        } else if rec.conversations.iter().any(|c| c.messages.is_empty()) {
            rec.problem = Some("an empty conversation");
        }
    }
    if dataset.batch() && rec.custom_id.is_none() && rec.problem.is_none() {
        rec.problem = Some("no `custom_id` string");
    }
    Ok(rec)
}

/// `{"messages", "tools"?, "functions"?}` or the preference shape.
fn openai_line<'a>(s: &mut Scanner<'a>) -> scan::Result<Record<'a>> {
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
fn openai_batch_line<'a>(s: &mut Scanner<'a>) -> scan::Result<Record<'a>> {
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

/// `{"custom_id", "params": {"messages", "system"?, "tools"?}}`.
fn anthropic_batch_line<'a>(s: &mut Scanner<'a>) -> scan::Result<Record<'a>> {
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

/// `{"conversations": [{"from", "value"}], "tools"?}`.
fn sharegpt_line<'a>(s: &mut Scanner<'a>) -> scan::Result<Record<'a>> {
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

/// The record of a line with one conversation (when it has one) and the tools it declares.
fn with_conversation<'a>(mut rec: Record<'a>, conv: Option<Conversation<'a>>, tools: Option<Tools>, bad_shape: bool) -> Record<'a> {
    if bad_shape {
        rec.problem = Some("a message that is not an object");
    } else if let Some(mut c) = conv {
        c.tools = tools;
        rec.conversations.push(c);
    }
    rec
}

/// An array of objects, each read by `one`; `None` when the value is not an array. A member
/// that is not an object sets `bad_shape`.
fn message_array<'a>(
    s: &mut Scanner<'a>,
    pairing: PairingStyle,
    bad_shape: &mut bool,
    mut one: impl FnMut(&mut Scanner<'a>, &mut Conversation<'a>) -> scan::Result<()>,
) -> scan::Result<Option<Conversation<'a>>> {
    let mut c = Conversation::new(pairing);
    c.messages.reserve(16);
    let is_array = s.opt_array(|s| {
        if s.peek() == Some(Kind::Object) {
            one(s, &mut c)
        } else {
            *bad_shape = true;
            s.skip()
        }
    })?;
    Ok(is_array.then_some(c))
}

/// Reads `content` (string, parts or null); the flag says it was `null`.
fn content_of<'a>(s: &mut Scanner<'a>) -> scan::Result<(super::blocks::Parts<'a>, bool)> {
    let null = matches!(s.peek(), Some(Kind::Null) | None);
    Ok((read_content(s)?, null))
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

fn content_state(present: bool, parts: &super::blocks::Parts<'_>) -> Content {
    if !present {
        Content::Absent
    } else if parts.is_blank() {
        Content::Blank
    } else {
        Content::Present
    }
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

/// The tools a line declares. Each is shared with the lines that declare it with the same bytes.
pub type Tools = Vec<Rc<Tool<'static>>>;

/// How many tool declarations each thread remembers.
const KNOWN_TOOLS: usize = 16;

/// Tool declarations read before on this thread, by their bytes: the lines of a dataset
/// repeat the same few declarations (in one list or in varying subsets), and a declaration
/// seen before is compared, not read again (see [`Scanner::skip_repeat`]). At most
/// [`KNOWN_TOOLS`], replaced in turn: memory stays flat.
#[derive(Default)]
struct KnownTools {
    known: Vec<(Remembered, Option<Rc<Tool<'static>>>)>,
    next: usize,
}

thread_local! {
    static KNOWN: RefCell<KnownTools> = RefCell::default();
}

/// `tools` (or legacy `functions`): OpenAI `{"type": "function", "function": {"name",
/// "parameters"}}`, Responses and legacy `{"name", "parameters"}`, Anthropic `{"name",
/// "input_schema"}`; ShareGPT may hold the list as a JSON string. Lists add up.
fn read_tools(s: &mut Scanner<'_>, tools: &mut Option<Tools>) -> scan::Result<()> {
    let list = if s.peek() == Some(Kind::String) { tools_of_string(&s.string()?.decode()) } else { tools_array(s)? };
    match (tools.as_mut(), list) {
        (Some(tools), Some(list)) => tools.extend(list),
        (None, list) => *tools = list,
        (_, None) => {}
    }
    Ok(())
}

/// A list of tools given as JSON text (ShareGPT); `None` when it is not JSON.
fn tools_of_string(text: &str) -> Option<Tools> {
    let v = serde_json::from_str::<serde_json::Value>(text).ok()?;
    let mut list = Vec::new();
    for t in v.as_array().into_iter().flatten() {
        let f = t.get("function").unwrap_or(t);
        let Some(name) = f.get("name").and_then(|n| n.as_str()) else { continue };
        let schema = f.get("parameters").or_else(|| f.get("input_schema"));
        let required = schema.and_then(|p| p.get("required")).and_then(|r| r.as_array());
        let required = required.into_iter().flatten().filter_map(|r| r.as_str()).map(|r| Cow::Owned(r.to_owned())).collect();
        list.push(Rc::new(Tool::new(Cow::Owned(name.to_owned()), required)));
    }
    Some(list)
}

/// A `tools` array; `None` when the value is not one.
fn tools_array(s: &mut Scanner<'_>) -> scan::Result<Option<Tools>> {
    KNOWN.with_borrow_mut(|k| {
        let mut list = Vec::new();
        let is_array = s.opt_array(|s| {
            if let Some((_, tool)) = k.known.iter().find(|(seen, _)| s.skip_repeat(seen)) {
                list.extend(tool.clone());
                return Ok(());
            }
            let at = k.next;
            k.next = (k.next + 1) % KNOWN_TOOLS;
            if at == k.known.len() {
                k.known.push(Default::default());
            }
            let slot = &mut k.known[at];
            // (A declaration that cannot be read fails the line; the slot then still holds
            // what it held.)
            let tool = s.remember(&mut slot.0, read_tool)?.map(Rc::new);
            slot.1 = tool.clone();
            list.extend(tool);
            Ok(())
        })?;
        Ok(is_array.then_some(list))
    })
}

/// One declaration of a `tools` array; `None` without a name.
fn read_tool(s: &mut Scanner<'_>) -> scan::Result<Option<Tool<'static>>> {
    let (mut name, mut required) = (None, SmallVec::new());
    s.opt_object(|s, k| {
        match &*k.key() {
            b"name" => name = s.opt_string()?,
            b"parameters" | b"input_schema" => read_required(s, &mut required)?,
            b"function" => {
                s.opt_object(|s, k| {
                    match &*k.key() {
                        b"name" => name = s.opt_string()?,
                        b"parameters" => read_required(s, &mut required)?,
                        _ => s.skip()?,
                    }
                    Ok(())
                })?;
            }
            _ => s.skip()?,
        }
        Ok(())
    })?;
    let required = required.into_iter().map(|r: Cow<'_, str>| Cow::Owned(r.into_owned())).collect();
    Ok(name.map(|name| Tool::new(Cow::Owned(name.decode().into_owned()), required)))
}

fn read_required<'a>(s: &mut Scanner<'a>, required: &mut SmallVec<[Cow<'a, str>; 4]>) -> scan::Result<()> {
    s.opt_object(|s, k| {
        if &*k.key() == b"required" {
            s.opt_array(|s| {
                if let Some(r) = s.opt_string()? {
                    required.push(r.decode());
                }
                Ok(())
            })?;
        } else {
            s.skip()?;
        }
        Ok(())
    })?;
    Ok(())
}

/// Writing: where each shape keeps a line's conversation and how it marks its messages, for the
/// dataset repair, which edits a line as JSON. Every match names every shape, so that a new
/// shape does not compile until it says how it is written.
impl Dataset {
    /// Whether an `openai-dataset` line is of the preference shape (read as the reader reads it:
    /// a `messages` array makes it a plain conversation).
    pub fn is_preference(self, v: &serde_json::Value) -> bool {
        match self {
            Dataset::OpenAi => !v.get("messages").is_some_and(serde_json::Value::is_array),
            Dataset::OpenAiBatch | Dataset::AnthropicBatch | Dataset::ShareGpt => false,
        }
    }

    /// The line's conversation array, to edit: a preference line's shared prompt,
    /// `input.messages`, whose indices are those of each of its two conversations.
    pub fn conversation_mut(self, v: &mut serde_json::Value) -> Option<&mut Vec<serde_json::Value>> {
        let holder = match self {
            Dataset::OpenAi if self.is_preference(v) => v.get_mut("input")?.get_mut("messages")?,
            Dataset::OpenAi => v.get_mut("messages")?,
            Dataset::OpenAiBatch => {
                let body = v.get_mut("body")?;
                if body.get("messages").is_some() {
                    body.get_mut("messages")?
                } else {
                    body.get_mut("input")?
                }
            }
            Dataset::AnthropicBatch => v.get_mut("params")?.get_mut("messages")?,
            Dataset::ShareGpt => v.get_mut("conversations")?,
        };
        holder.as_array_mut()
    }

    /// Whether a message carries tool results (and nothing that starts a new turn).
    pub fn is_result(self, m: &serde_json::Value) -> bool {
        use serde_json::Value;
        match self {
            Dataset::AnthropicBatch => {
                json_role(m) == Some("user")
                    && m.get("content").and_then(Value::as_array).is_some_and(|a| a.iter().all(|b| b.get("type").and_then(Value::as_str) == Some("tool_result")))
            }
            Dataset::ShareGpt => matches!(json_role(m), Some("observation" | "tool")),
            Dataset::OpenAi | Dataset::OpenAiBatch => {
                matches!(json_role(m), Some("tool" | "function")) || m.get("type").and_then(Value::as_str).is_some_and(|t| t.ends_with("_output"))
            }
        }
    }

    /// Whether a message is the assistant's.
    pub fn is_assistant(self, m: &serde_json::Value) -> bool {
        match self {
            Dataset::ShareGpt => matches!(json_role(m), Some("gpt" | "assistant" | "model" | "function_call")),
            Dataset::OpenAi | Dataset::OpenAiBatch | Dataset::AnthropicBatch => json_role(m) == Some("assistant"),
        }
    }
}

/// A message's role as written (`role`, or ShareGPT's `from`).
fn json_role(m: &serde_json::Value) -> Option<&str> {
    m.get("role").or_else(|| m.get("from")).and_then(serde_json::Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(d: Dataset, line: &str) -> Record<'_> {
        read(d, line.as_bytes()).unwrap()
    }

    #[test]
    fn classifies_each_shape() {
        let c = |l: &str| classify(serde_json::from_str::<serde_json::Value>(l).unwrap().as_object().unwrap());
        assert_eq!(c(r#"{"messages":[]}"#), Some(Dataset::OpenAi));
        assert_eq!(c(r#"{"input":{"messages":[]},"preferred_output":[],"non_preferred_output":[]}"#), Some(Dataset::OpenAi));
        assert_eq!(c(r#"{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}}"#), Some(Dataset::OpenAiBatch));
        assert_eq!(c(r#"{"custom_id":"a","params":{"messages":[]}}"#), Some(Dataset::AnthropicBatch));
        assert_eq!(c(r#"{"conversations":[]}"#), Some(Dataset::ShareGpt));
        assert_eq!(c(r#"{"role":"user","content":"x"}"#), None);
    }

    #[test]
    fn openai_messages_calls_and_object_arguments() {
        let r = one(
            Dataset::OpenAi,
            r#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{"a":1}}}]},{"role":"tool","tool_call_id":"c1","content":"r"},{"role":"assistant","content":" "}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","required":["a","b"]}}}]}"#,
        );
        let c = &r.conversations[0];
        assert_eq!(c.messages.len(), 4);
        let call = &c.messages[1].message().unwrap().calls[0];
        assert_eq!((call.id.as_ref(), call.name.as_ref(), call.args), ("c1", "f", Args::Object));
        assert!(c.messages[1].args[0].has("a") && !c.messages[1].args[0].has("b"));
        assert_eq!(c.messages[2].message().unwrap().results[0].id, "c1");
        assert_eq!(c.messages[3].content, Content::Blank);
        assert_eq!(c.tools.as_ref().unwrap()[0].required.as_slice(), ["a", "b"]);
    }

    #[test]
    fn shapes_without_a_conversation() {
        assert!(one(Dataset::OpenAi, r#"{"prompt":"x","completion":"y"}"#).problem.is_some());
        assert!(one(Dataset::OpenAi, r#"{"messages":[1]}"#).problem.is_some());
        assert!(one(Dataset::OpenAi, r#"{"messages":[]}"#).problem.is_some());
        assert!(one(Dataset::OpenAiBatch, r#"{"url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"x"}]}}"#).problem.is_some());
        assert!(one(Dataset::OpenAiBatch, r#"{"custom_id":"e","url":"/v1/embeddings","body":{"input":"x"}}"#).not_chat);
        assert!(read(Dataset::OpenAi, b"[1]").is_err());
    }

    #[test]
    fn responses_items_and_sharegpt_calls() {
        let r = one(
            Dataset::OpenAiBatch,
            r#"{"custom_id":"r","url":"/v1/responses","body":{"input":[{"role":"user","content":"x"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"item_reference","id":"x"}]}}"#,
        );
        let c = &r.conversations[0];
        assert_eq!(c.pairing, PairingStyle::Responses);
        assert!(c.messages[0].message().unwrap().prompt);
        assert_eq!(c.messages[1].message().unwrap().calls[0].id, "c");
        assert!(c.messages[2].passive);
        let r = one(
            Dataset::ShareGpt,
            r#"{"conversations":[{"from":"human","value":"x"},{"from":"function_call","value":"{\"name\":\"f\",\"arguments\":{}}"},{"from":"observation","value":"r"},{"from":"gpt","value":"ok"}]}"#,
        );
        let c = &r.conversations[0];
        assert_eq!(c.messages[1].message().unwrap().calls[0].id, "call@1.0");
        assert_eq!(c.messages[2].message().unwrap().results[0].id, "call@1.0");
    }
}
