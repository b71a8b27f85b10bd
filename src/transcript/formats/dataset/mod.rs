//! Conversation-per-line datasets: one whole conversation per line, as fine-tuning files, batch
//! request files and chat datasets hold them.
//!
//! | dataset | a line | messages |
//! |---|---|---|
//! | `openai-dataset` | `{"messages": [...], "tools"?, "parallel_tool_calls"?}` (OpenAI chat fine-tuning, Hugging Face chat datasets); the preference shape `{"input": {"messages"}, "preferred_output", "non_preferred_output"}` | Chat Completions messages; `arguments` may be an object |
//! | `openai-batch` | `{"custom_id", "method", "url", "body"}` | `body.messages` (Chat Completions) or `body.input` items (Responses) |
//! | `anthropic-batch` | `{"custom_id", "params": {"messages", "system"?, "tools"?}}` | Messages API messages |
//! | `sharegpt` | `{"conversations": [{"from", "value"}], "tools"?, "system"?}` | `from`: `system`, `human`, `gpt`, `function_call`, `observation` |
//! | `gemini-tuning` | `{"systemInstruction"?, "contents", "tools"?}` (Vertex AI supervised tuning) | `contents`: `{"role": "user" \| "model", "parts"}`; `functionCall` and `functionResponse` parts |
//!
//! Reading: a line becomes a [`Record`] whose messages are the canonical [`Message`]s of the
//! turn model plus what the dataset rules need (the role as written, whether content is there,
//! the raw call arguments); one file per shape (`openai`, `anthropic`, `sharegpt`, `gemini`) and the tool
//! declarations they share (`tools`). Reading is lenient like every adapter: a field of an
//! unexpected shape is "absent"; only a line that is not JSON fails. As JSON values (`value`):
//! where each shape keeps its conversation and how it shapes a result, for the dataset repair
//! and the dataset stats. The
//! rules live in [`dataset`](crate::transcript::dataset). Every match over [`Dataset`] names
//! every shape: a new shape does not compile until reading and writing say how it is done.

use super::blocks::read_content;
use crate::transcript::model::{Args, Message};
use crate::transcript::scan::{self, Kind, RawStr, Scanner};
use smallvec::SmallVec;
use std::borrow::Cow;

mod anthropic;
mod gemini;
mod openai;
mod sharegpt;
mod tools;
mod value;

pub use sharegpt::sharegpt_calls;
pub use tools::Tools;

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
    /// Vertex AI supervised tuning datasets for Gemini (`contents`).
    GeminiTuning,
}

impl Dataset {
    /// Every dataset shape.
    pub const ALL: [Dataset; 5] = [Dataset::OpenAi, Dataset::OpenAiBatch, Dataset::AnthropicBatch, Dataset::ShareGpt, Dataset::GeminiTuning];

    /// Its public name (`--format`).
    pub fn as_str(self) -> &'static str {
        match self {
            Dataset::OpenAi => "openai-dataset",
            Dataset::OpenAiBatch => "openai-batch",
            Dataset::AnthropicBatch => "anthropic-batch",
            Dataset::ShareGpt => "sharegpt",
            Dataset::GeminiTuning => "gemini-tuning",
        }
    }

    /// Whether each conversation is a training example, which must end with the assistant
    /// message the model learns (a call in that last message is the target, not an orphan).
    pub fn fine_tuning(self) -> bool {
        match self {
            Dataset::OpenAi | Dataset::ShareGpt | Dataset::GeminiTuning => true,
            Dataset::OpenAiBatch | Dataset::AnthropicBatch => false,
        }
    }

    /// Whether lines carry a `custom_id` that must be unique in the file.
    pub fn batch(self) -> bool {
        match self {
            Dataset::OpenAiBatch | Dataset::AnthropicBatch => true,
            Dataset::OpenAi | Dataset::ShareGpt | Dataset::GeminiTuning => false,
        }
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
    if obj.get("contents").is_some_and(|m| m.is_array()) {
        return Some(Dataset::GeminiTuning);
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
        Dataset::OpenAi => openai::openai_line(&mut s)?,
        Dataset::OpenAiBatch => openai::openai_batch_line(&mut s)?,
        Dataset::AnthropicBatch => anthropic::anthropic_batch_line(&mut s)?,
        Dataset::ShareGpt => sharegpt::sharegpt_line(&mut s)?,
        Dataset::GeminiTuning => gemini::gemini_line(&mut s)?,
    };
    s.end()?;
    if rec.problem.is_none() && !rec.not_chat {
        if rec.conversations.is_empty() {
            rec.problem = Some(match dataset {
                Dataset::OpenAi => "no `messages` array",
                Dataset::OpenAiBatch => "no `body.messages` or `body.input`",
                Dataset::AnthropicBatch => "no `params.messages` array",
                Dataset::ShareGpt => "no `conversations` array",
                Dataset::GeminiTuning => "no `contents` array",
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

fn content_state(present: bool, parts: &super::blocks::Parts<'_>) -> Content {
    if !present {
        Content::Absent
    } else if parts.is_blank() {
        Content::Blank
    } else {
        Content::Present
    }
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
        assert_eq!(c(r#"{"contents":[],"systemInstruction":{"parts":[]}}"#), Some(Dataset::GeminiTuning));
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
    fn gemini_calls_pair_with_the_next_turn_by_name_then_order_or_by_id() {
        let r = one(
            Dataset::GeminiTuning,
            r#"{"system_instruction":{"parts":[{"text":"s"}]},"contents":[{"role":"user","parts":[{"text":"q"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{"a":1}}},{"function_call":{"name":"g"}},{"functionCall":{"id":"x","name":"f","args":"no"}}]},{"role":"user","parts":[{"functionResponse":{"name":"g","response":{}}},{"functionResponse":{"name":"f","response":{}}},{"functionResponse":{"id":"x","name":"f","response":{}}},{"functionResponse":{"name":"h","response":{}}}]},{"role":"model","parts":[{"text":" "}]},{"role":"user","parts":[]},{"role":"assistant","parts":[{"text":"x"}]}],"tools":[{"googleSearch":{}},{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT","required":["a"]}}]}]}"#,
        );
        let c = &r.conversations[0];
        assert_eq!(c.messages.len(), 6);
        let calls: Vec<(&str, &str, Args)> = c.messages[1].message().unwrap().calls.iter().map(|c| (c.id.as_ref(), c.name.as_ref(), c.args)).collect();
        assert_eq!(calls, [("call@1.0", "f", Args::Object), ("call@1.1", "g", Args::Object), ("x", "f", Args::NotObject)]);
        assert!(c.messages[1].args[0].has("a"));
        let results: Vec<&str> = c.messages[2].message().unwrap().results.iter().map(|r| r.id.as_ref()).collect();
        assert_eq!(results, ["call@1.1", "call@1.0", "x", "response@2.3"]);
        assert!(!c.messages[2].message().unwrap().prompt && c.messages[0].message().unwrap().prompt);
        assert_eq!((c.messages[3].content, c.messages[4].content), (Content::Blank, Content::Absent));
        assert!(c.messages[5].message().is_none());
        assert_eq!(c.tools.as_ref().map(|t| t.iter().map(|t| t.name.to_string()).collect::<Vec<_>>()), Some(vec!["f".to_owned()]));
        assert!(one(Dataset::GeminiTuning, r#"{"messages":[]}"#).problem.is_some());
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
