//! Gemini CLI sessions (`@google/gemini-cli`): `~/.gemini/tmp/<project>/chats/session-<ts>-<id>.jsonl`
//! (subagents: `chats/<parent id>/<id>.jsonl`).
//!
//! The file is an **upsert log** (`ChatRecordingService` of 0.61.0): a metadata line
//! (`{sessionId, projectHash, startTime, lastUpdated, kind}`), then records appended as the
//! conversation changes, each one JSON object:
//!
//! - a message record `{id, timestamp, type, content, ...}` (`type` `user`, `gemini`, `info`,
//!   `error`, `warning`): a record appended again under an `id` already seen **replaces** it and
//!   keeps its place (the loader's `Map.set`), so the last version wins;
//! - `{"$set": {...}}`: metadata updates; a `$set` with `messages` replaces the whole
//!   conversation by that list (written on every resume, `updateMessagesFromHistory`);
//! - `{"$rewindTo": id}`: the message `id` and every one after it are gone (all of them when the
//!   id is not known).
//!
//! A `gemini` record holds the model's text (`content`: a string or parts), its `thoughts`, its
//! `tokens` and `model`, and its calls in `toolCalls[]`, each `{id, name, args, result, status}`:
//! the call and its result live in one entry (the result, a list of `functionResponse` parts,
//! is written with the call once the tool ran; a killed tool leaves no entry at all). Since
//! 0.5x the response is also recorded as a `user` record of its own whose content is the
//! `functionResponse` parts, and `convertSessionToClientHistory` sends both on resume: the
//! Gemini API then sees two response parts for one call, and refuses ("Please ensure that the
//! number of function response parts is equal to the number of function call parts of the
//! function call turn.", google-gemini/gemini-cli#29365). Nothing on disk compacts.
//!
//! Pairing, read line by line: a `gemini` record declares its calls; the ones whose entry has a
//! result are answered in the record itself (the validator takes a later version's results for
//! the calls an earlier one left open: [`Format::upserts`](super::Format::upserts)); a `user`
//! record of `functionResponse` parts is a tool message whose results must answer an open
//! call; a user prompt moves the conversation on. A `$set` of `messages` or a `$rewindTo` starts
//! over, as a compaction does, carrying the calls the snapshot leaves open.
//!
//! Repair appends, never rewrites (the agent's own loader lets the last version win): a call
//! without a result gets its record appended again with an error result in its entry, and a
//! response sent twice gets its `user` record appended again without it
//! ([`answer_call`], [`drop_responses`]).

use super::edit::{self, CallRef, Edited, Unable};
use crate::transcript::model::{Args, Call, Entry, Message, Parsed, Role, ToolResult, Usage};
use crate::transcript::scan::{self, object_line, Kind, RawStr, Scanner};
use serde_json::{json, Map, Value};

/// The message record types Gemini CLI writes.
pub const TYPES: &[&str] = &["user", "gemini", "info", "error", "warning"];

/// What Gemini CLI sends after a history whose last turn holds function responses, before the
/// new prompt (`INTERRUPTED_RESPONSE_PLACEHOLDER`, `closeUnansweredToolResponseTurn`).
pub const INTERRUPTED: &str = "[The previous response was interrupted before it completed.]";

/// The thought signature Gemini CLI gives the first call of a model turn whose thoughts it
/// strips (`SYNTHETIC_THOUGHT_SIGNATURE`).
pub const SYNTHETIC_SIGNATURE: &str = "skip_thought_signature_validator";

/// Whether the loader ignores a user message of this (trimmed) text (`isIgnoredUserContent`):
/// empty, a slash or `?` command, or the context Gemini CLI adds itself.
pub fn ignored_user_text(trimmed: &str) -> bool {
    trimmed.is_empty()
        || trimmed.starts_with('/')
        || trimmed.starts_with('?')
        || trimmed.starts_with("<session_context>")
        || trimmed.starts_with("<hook_context>")
}

/// The start of `partListUnionToString`'s text (verbose), as far as [`ignored_user_text`] reads
/// it (the loader's test for a user message it leaves out, and whether there is any): after the
/// leading whitespace, [`Lead::ENOUGH`] bytes, more than its longest prefix (`<session_context>`)
/// has. A part that text shows in brackets (`[Function Call: …]`) is `[`: nothing after a
/// bracket can change the test.
#[derive(Default)]
struct Lead {
    text: String,
    /// Where the text after the leading whitespace starts, once there is some.
    from: Option<usize>,
}

impl Lead {
    const ENOUGH: usize = 32;

    fn full(&self) -> bool {
        self.from.is_some_and(|f| self.text.len() - f >= Self::ENOUGH)
    }

    fn push(&mut self, s: &str) {
        for c in s.chars() {
            if self.full() {
                return;
            }
            if self.from.is_none() && !c.is_whitespace() {
                self.from = Some(self.text.len());
            }
            self.text.push(c);
        }
    }

    /// A string's start, decoded window by window (a long text is not decoded whole).
    fn push_raw(&mut self, t: RawStr<'_>) {
        let mut rest = t;
        while !self.full() && !rest.raw().is_empty() {
            let head = rest.prefix(256);
            self.push(&head.decode());
            rest = rest.after(head.raw().len());
        }
    }

    /// The text without its leading and trailing whitespace (the loader's `trim()`).
    fn trimmed(&self) -> &str {
        self.text.trim()
    }

    fn is_empty(&self) -> bool {
        self.text.is_empty()
    }
}

/// What one part holds, for pairing.
#[derive(Default)]
struct Parts<'a> {
    /// `functionCall` parts: id (when it has one) and name.
    calls: Vec<(Option<RawStr<'a>>, Option<RawStr<'a>>, Args)>,
    /// `functionResponse` ids.
    responses: Vec<RawStr<'a>>,
    /// The start of the text `partListUnionToString` makes of them (verbose).
    text: Lead,
    /// A part that is sent as something (not an empty text).
    some: bool,
    /// A `thought` part.
    thought: bool,
}

/// One `toolCalls[]` entry.
struct ToolCall<'a> {
    id: Option<RawStr<'a>>,
    name: Option<RawStr<'a>>,
    args: Args,
    /// The ids its `result` answers (`None`: no result).
    answers: Option<Vec<std::borrow::Cow<'a, str>>>,
}

/// Parses one line (valid UTF-8, not blank). `Err` means the line is not a JSON object.
pub fn parse(line: &[u8]) -> scan::Result<Parsed<'_>> {
    let (mut id, mut ty, mut model) = (None, None, None);
    let mut content = Parts::default();
    let mut content_string: Option<bool> = None;
    let mut tool_calls: Vec<ToolCall<'_>> = Vec::new();
    let mut thoughts = false;
    let mut usage = None;
    let (mut set, mut rewind) = (false, false);
    // A `$set` of `messages`: the calls it leaves open, `None` inside when it has no model turn.
    let mut snapshot: Option<Option<Vec<Call<'static>>>> = None;
    object_line(line, |s, k| {
        match &*k.key() {
            b"id" => id = s.opt_string()?,
            b"type" => ty = s.opt_string()?,
            b"model" => model = s.opt_string()?,
            b"content" => match s.peek() {
                Some(Kind::String) => {
                    let t = s.string()?;
                    content_string = Some(!t.raw().is_empty());
                    content.text.push_raw(t);
                    content.some |= !t.raw().is_empty();
                }
                Some(Kind::Array) => s.array(|s| read_part(s, &mut content))?,
                Some(Kind::Object) => read_part(s, &mut content)?,
                _ => s.skip()?,
            },
            b"toolCalls" => {
                s.opt_array(|s| {
                    if let Some(tc) = read_tool_call(s)? {
                        tool_calls.push(tc);
                    }
                    Ok(())
                })?;
            }
            b"thoughts" => {
                s.opt_array(|s| {
                    thoughts = true;
                    s.skip()
                })?;
            }
            b"tokens" => usage = read_tokens(s)?,
            b"$set" => {
                // The last `$set`, and in it the last `messages`, is the one the loader reads.
                snapshot = None;
                set = s.opt_object(|s, k| {
                    if !k.is("messages") {
                        return s.skip();
                    }
                    snapshot = None;
                    if s.peek() == Some(Kind::Array) {
                        snapshot = Some(snapshot_open_calls(s)?);
                    } else {
                        s.skip()?;
                    }
                    Ok(())
                })?;
            }
            b"$rewindTo" => rewind = s.opt_string()?.is_some(),
            _ => s.skip()?,
        }
        Ok(())
    })?;
    let _ = content_string;
    // The loader's order: a rewind, a message record (a string `id`), a `$set`, metadata.
    if rewind {
        return Ok(Parsed::of(Entry::Compaction { carried: Vec::new(), keeps: None, summary_follows: false }));
    }
    let Some(id) = id else {
        if let (true, Some(open)) = (set, snapshot) {
            // A snapshot with a model turn replaces a conversation (a resume writes one); one of
            // user messages only (the first lines of every file: the agent's own context) starts
            // nothing over.
            return Ok(Parsed::of(match open {
                Some(carried) => Entry::Compaction { carried, keeps: None, summary_follows: false },
                None => Entry::Other,
            }));
        }
        return Ok(Parsed::of(Entry::Other));
    };
    let ty = ty.map(|t| t.key()).unwrap_or_default();
    let entry = match &*ty {
        b"user" if !content.responses.is_empty() => {
            let mut m = Message::new(Role::Tool);
            m.has_content = true;
            // Versions of one record are one: a later one replaces its results.
            m.turn = Some(id.hash());
            m.results = content.responses.iter().map(|r| ToolResult { id: r.decode() }).collect();
            Entry::Message(m)
        }
        // A record with no parts at all (how a repair takes a record's last response out): a
        // tool message of no results, so that it replaces the version before.
        b"user" if !content.some && content.text.is_empty() => {
            let mut m = Message::new(Role::Tool);
            m.turn = Some(id.hash());
            Entry::Message(m)
        }
        b"user" if ignored_user_text(content.text.trimmed()) => Entry::Other,
        b"user" => {
            let mut m = Message::new(Role::User);
            m.has_content = true;
            m.prompt = true;
            Entry::Message(m)
        }
        b"gemini" => gemini_entry(id, &content, tool_calls, thoughts),
        b"info" | b"error" | b"warning" => Entry::Other,
        _ => Entry::Unknown,
    };
    // A record appended again repeats its usage: one key per record.
    let usage = usage.filter(|_| &*ty == b"gemini").map(|u: Usage| Usage { key: id.hash(), ..u });
    Ok(Parsed { usage, model: model.filter(|_| &*ty == b"gemini").map(|m| m.decode()), ..Parsed::of(entry) })
}

/// A `gemini` record as the model turn (and the response turn) `convertSessionToClientHistory`
/// makes of it: calls from its content when the content has `functionCall` parts, else from
/// `toolCalls`; the results of `toolCalls` answer them in the record itself.
fn gemini_entry<'a>(id: RawStr<'a>, content: &Parts<'a>, tool_calls: Vec<ToolCall<'a>>, thoughts: bool) -> Entry<'a> {
    let _ = id;
    let mut m = Message::new(Role::Assistant);
    // Versions of one record are one turn.
    m.turn = Some(id.hash());
    let mut answered: Vec<std::borrow::Cow<'a, str>> = Vec::new();
    for tc in &tool_calls {
        if let Some(a) = &tc.answers {
            answered.extend(a.iter().cloned());
        }
    }
    let declared: Vec<Call<'a>> = if !content.calls.is_empty() {
        content
            .calls
            .iter()
            .filter_map(|(id, name, args)| {
                Some(Call { id: id.as_ref()?.decode(), name: name.map(|n| n.decode()).unwrap_or_default(), args: *args, item: None })
            })
            .collect()
    } else {
        tool_calls
            .iter()
            .filter_map(|tc| Some(Call { id: tc.id.as_ref()?.decode(), name: tc.name.map(|n| n.decode()).unwrap_or_default(), args: tc.args, item: None }))
            .collect()
    };
    // Thoughts go as parts only when the content has neither calls nor thoughts of its own.
    let thought_parts = thoughts && content.calls.is_empty() && !content.thought;
    let sends = content.some || !declared.is_empty() || thought_parts || !tool_calls.is_empty();
    if !sends {
        // `modelParts` is empty: the record is not sent.
        return Entry::Other;
    }
    m.has_content = true;
    m.results = answered.iter().map(|a| ToolResult { id: a.clone() }).collect();
    m.calls = declared.into_iter().collect();
    Entry::Message(m)
}

fn args_of(kind: Option<Kind>) -> Args {
    match kind {
        Some(Kind::Object) | None => Args::Object,
        Some(_) => Args::NotObject,
    }
}

fn read_part<'a>(s: &mut Scanner<'a>, p: &mut Parts<'a>) -> scan::Result<()> {
    if s.peek() == Some(Kind::String) {
        // `ensurePartArray` makes a string element a text part.
        let t = s.string()?;
        p.some |= !t.raw().is_empty();
        p.text.push_raw(t);
        return Ok(());
    }
    let (mut text, mut thought, mut call, mut response, mut other) = (None, false, None, None, false);
    let is_object = s.opt_object(|s, k| {
        match &*k.key() {
            b"text" => text = s.opt_string()?,
            b"thought" => {
                thought = !matches!(s.peek(), Some(Kind::Null));
                s.skip()?;
            }
            b"functionCall" => {
                let (mut id, mut name, mut args) = (None, None, None);
                if s.opt_object(|s, k| {
                    match &*k.key() {
                        b"id" => id = s.opt_string()?,
                        b"name" => name = s.opt_string()?,
                        b"args" => args = s.shape()?,
                        _ => s.skip()?,
                    }
                    Ok(())
                })? {
                    call = Some((id, name, args_of(args)));
                }
            }
            b"functionResponse" => {
                let mut id = None;
                if s.opt_object(|s, k| {
                    if k.is("id") {
                        id = s.opt_string()?;
                    } else {
                        s.skip()?;
                    }
                    Ok(())
                })? {
                    response = Some(id);
                }
            }
            b"thoughtSignature" => s.skip()?,
            _ => {
                other = true;
                s.skip()?
            }
        }
        Ok(())
    })?;
    if !is_object {
        return Ok(());
    }
    if thought {
        p.thought = true;
        p.some = true;
        p.text.push("[");
    } else if let Some((id, name, args)) = call {
        p.some = true;
        p.text.push("[");
        p.calls.push((id, name, args));
    } else if let Some(id) = response {
        p.some = true;
        p.text.push("[");
        if let Some(id) = id {
            p.responses.push(id);
        }
    } else if let Some(t) = text {
        p.some |= !t.raw().is_empty() || other;
        p.text.push_raw(t);
    } else if other {
        p.some = true;
        p.text.push("[");
    }
    Ok(())
}

fn read_tool_call<'a>(s: &mut Scanner<'a>) -> scan::Result<Option<ToolCall<'a>>> {
    let mut tc = ToolCall { id: None, name: None, args: Args::Object, answers: None };
    let is_object = s.opt_object(|s, k| {
        match &*k.key() {
            b"id" => tc.id = s.opt_string()?,
            b"name" => tc.name = s.opt_string()?,
            b"args" => tc.args = args_of(s.shape()?),
            b"result" => tc.answers = read_result(s)?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    if !is_object {
        return Ok(None);
    }
    // A string result answers the entry's own id.
    if let (Some(a), Some(id)) = (tc.answers.as_mut(), tc.id.as_ref()) {
        if a.first().is_some_and(|x| x.is_empty()) {
            a[0] = id.decode();
        }
    }
    Ok(Some(tc))
}

/// The ids a `result` answers: an array of parts, its `functionResponse` ids; a string, the
/// entry's own id (an empty placeholder here); an object, its `functionResponse` id. `None` for
/// a result that is absent, null, false or empty (`if (toolCall.result)`).
fn read_result<'a>(s: &mut Scanner<'a>) -> scan::Result<Option<Vec<std::borrow::Cow<'a, str>>>> {
    match s.peek() {
        Some(Kind::String) => {
            let t = s.string()?;
            Ok((!t.raw().is_empty()).then(|| vec![std::borrow::Cow::Borrowed("")]))
        }
        Some(Kind::Array) => {
            let mut p = Parts::default();
            s.array(|s| read_part(s, &mut p))?;
            Ok(Some(p.responses.iter().map(|r| r.decode()).collect()))
        }
        Some(Kind::Object) => {
            let mut p = Parts::default();
            read_part(s, &mut p)?;
            Ok(Some(p.responses.iter().map(|r| r.decode()).collect()))
        }
        _ => {
            s.skip()?;
            Ok(None)
        }
    }
}

/// `tokens` as `recordMessageTokens` writes it: `input` (the prompt, cached tokens included),
/// `output`, `cached`, `thoughts`, `tool`, `total`.
fn read_tokens(s: &mut Scanner<'_>) -> scan::Result<Option<Usage>> {
    let (mut input, mut output, mut cached, mut thoughts) = (0u64, 0u64, 0u64, 0u64);
    let is_object = s.opt_object(|s, k| {
        match &*k.key() {
            b"input" => input = s.opt_count()?,
            b"output" => output = s.opt_count()?,
            b"cached" => cached = s.opt_count()?,
            b"thoughts" => thoughts = s.opt_count()?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok(is_object.then(|| Usage { input: input.saturating_sub(cached), output: output.saturating_add(thoughts), cache_read: cached, ..Usage::default() }))
}

/// The calls a `$set` of `messages` (the scanner at the array) leaves without a response in the
/// history [`client_history`] makes of it, in order (a response takes back every open call of
/// its id); `None` when that history has no model turn. Read with the scanner as
/// [`message_contents`] reads a record (the property test below holds the two equal): every
/// `functionCall` part with a string `id` opens a call, every `functionResponse` part with one
/// answers it, in the order of the parts the records become.
fn snapshot_open_calls<'a>(s: &mut Scanner<'a>) -> scan::Result<Option<Vec<Call<'static>>>> {
    let mut open: Vec<(String, String)> = Vec::new();
    let mut model = false;
    s.array(|s| {
        if s.peek() != Some(Kind::Object) {
            return s.skip();
        }
        let mut m = SnapRecord::default();
        s.object(|s, k| {
            match &*k.key() {
                b"type" => m.ty = s.opt_string()?.map(|t| t.key().into_owned()),
                b"content" => m.content = snap_content(s)?,
                b"toolCalls" => {
                    m.tool_calls.clear();
                    s.opt_array(|s| {
                        let tc = snap_tool_call(s)?;
                        m.tool_calls.push(tc);
                        Ok(())
                    })?;
                }
                b"thoughts" => {
                    m.thoughts = 0;
                    s.opt_array(|s| {
                        m.thoughts += 1;
                        s.skip()
                    })?;
                }
                _ => s.skip()?,
            }
            Ok(())
        })?;
        let content = m.content.unwrap_or_default();
        let mut apply = |parts: &[SnapPart]| {
            for p in parts {
                if let Some((id, name)) = &p.call_id {
                    open.push((id.clone(), name.clone()));
                }
                if let Some(id) = &p.response_id {
                    open.retain(|(c, _)| c != id);
                }
            }
        };
        match m.ty.as_deref() {
            Some(b"user") if !ignored_user_text(content.text.trimmed()) => apply(&content.parts),
            Some(b"gemini") => {
                let parts: &[SnapPart] = if content.truthy { &content.parts } else { &[] };
                let in_content = parts.iter().any(|p| p.call_truthy || p.thought_truthy);
                let calls: Vec<SnapPart> = if in_content {
                    Vec::new()
                } else {
                    m.tool_calls.iter().map(|tc| SnapPart { call_id: tc.id.clone().map(|id| (id, tc.name.clone())), ..SnapPart::default() }).collect()
                };
                if parts.is_empty() && (in_content || m.thoughts == 0) && calls.is_empty() {
                    return Ok(());
                }
                model = true;
                apply(parts);
                apply(&calls);
                for tc in &m.tool_calls {
                    apply(&tc.responses);
                }
            }
            _ => {}
        }
        Ok(())
    })?;
    Ok(model.then(|| open.into_iter().map(|(id, name)| Call { id: id.into(), name: name.into(), args: Args::Object, item: None }).collect()))
}

/// One message record of a snapshot, as far as [`snapshot_open_calls`] needs it.
#[derive(Default)]
struct SnapRecord {
    ty: Option<Vec<u8>>,
    content: Option<SnapContent>,
    tool_calls: Vec<SnapToolCall>,
    thoughts: usize,
}

/// A record's `content`: its parts (`ensurePartArray`), whether it is truthy (not `null`,
/// `false` or `""`), and `partListUnionToString` of it for [`ignored_user_text`] (a part that
/// string shows in brackets is `[`: only the start and emptiness matter).
#[derive(Default)]
struct SnapContent {
    parts: Vec<SnapPart>,
    truthy: bool,
    text: Lead,
}

#[derive(Default, Clone)]
struct SnapPart {
    /// A `functionCall` object's string `id`, with its `name` (`""` if none).
    call_id: Option<(String, String)>,
    /// A `functionCall` that is truthy; a `thought` that is.
    call_truthy: bool,
    thought_truthy: bool,
    /// A `functionResponse` object's string `id`.
    response_id: Option<String>,
}

struct SnapToolCall {
    id: Option<String>,
    name: String,
    /// The response parts its `result` becomes (when truthy).
    responses: Vec<SnapPart>,
}

/// Whether the next value is truthy as `message_contents` judges (not `null`, `false`, `""`),
/// consuming it.
fn snap_truthy(s: &mut Scanner<'_>) -> scan::Result<bool> {
    Ok(match s.peek() {
        Some(Kind::Null) => s.skip().map(|_| false)?,
        Some(Kind::Bool) => s.boolean()?,
        Some(Kind::String) => !s.string()?.raw().is_empty(),
        _ => s.skip().map(|_| true)?,
    })
}

fn snap_content(s: &mut Scanner<'_>) -> scan::Result<Option<SnapContent>> {
    let mut c = SnapContent::default();
    match s.peek() {
        Some(Kind::String) => {
            let t = s.string()?;
            c.truthy = !t.raw().is_empty();
            c.text.push_raw(t);
            c.parts.push(SnapPart::default());
        }
        Some(Kind::Array) => {
            c.truthy = true;
            s.array(|s| {
                let p = snap_part(s, &mut c.text)?;
                c.parts.push(p);
                Ok(())
            })?;
        }
        Some(Kind::Object) => {
            c.truthy = true;
            let p = snap_part(s, &mut c.text)?;
            c.parts.push(p);
        }
        _ => {
            c.truthy = snap_truthy(s)?;
            c.parts.push(SnapPart::default());
        }
    }
    Ok(Some(c))
}

/// One part (any value: only an object is more than a part), adding its
/// `partListUnionToString` to `text`.
fn snap_part(s: &mut Scanner<'_>, text: &mut Lead) -> scan::Result<SnapPart> {
    let mut p = SnapPart::default();
    match s.peek() {
        Some(Kind::String) => text.push_raw(s.string()?),
        Some(Kind::Array) => s.array(|s| snap_part(s, text).map(|_| ()))?,
        Some(Kind::Object) => {
            let (mut bracketed, mut part_text) = (false, None::<RawStr<'_>>);
            s.object(|s, k| {
                match &*k.key() {
                    b"functionCall" => {
                        bracketed = true;
                        p.call_id = None;
                        if s.peek() == Some(Kind::Object) {
                            p.call_truthy = true;
                            let (mut id, mut name) = (None, String::new());
                            s.object(|s, k| {
                                match &*k.key() {
                                    b"id" => id = s.opt_string()?.map(|i| i.decode().into_owned()),
                                    b"name" => name = s.opt_string()?.map(|n| n.decode().into_owned()).unwrap_or_default(),
                                    _ => s.skip()?,
                                }
                                Ok(())
                            })?;
                            p.call_id = id.map(|id| (id, name));
                        } else {
                            p.call_truthy = snap_truthy(s)?;
                        }
                    }
                    b"functionResponse" => {
                        bracketed = true;
                        p.response_id = None;
                        s.opt_object(|s, k| {
                            if k.is("id") {
                                p.response_id = s.opt_string()?.map(|i| i.decode().into_owned());
                            } else {
                                s.skip()?;
                            }
                            Ok(())
                        })?;
                    }
                    b"thought" => {
                        bracketed = true;
                        p.thought_truthy = snap_truthy(s)?;
                    }
                    b"text" => part_text = s.opt_string()?,
                    b"videoMetadata" | b"codeExecutionResult" | b"executableCode" | b"fileData" | b"inlineData" => {
                        bracketed = true;
                        s.skip()?;
                    }
                    _ => s.skip()?,
                }
                Ok(())
            })?;
            if bracketed {
                text.push("[");
            } else if let Some(t) = part_text {
                text.push_raw(t);
            }
        }
        _ => s.skip()?,
    }
    Ok(p)
}

fn snap_tool_call(s: &mut Scanner<'_>) -> scan::Result<SnapToolCall> {
    let mut tc = SnapToolCall { id: None, name: String::new(), responses: Vec::new() };
    // The result's kind and parts, resolved once the entry's `id` is known.
    let mut result: Option<(bool, Vec<SnapPart>)> = None;
    s.opt_object(|s, k| {
        match &*k.key() {
            b"id" => tc.id = s.opt_string()?.map(|i| i.decode().into_owned()),
            b"name" => tc.name = s.opt_string()?.map(|n| n.decode().into_owned()).unwrap_or_default(),
            b"result" => {
                let mut ignored = Lead::default();
                result = match s.peek() {
                    Some(Kind::String) => (!s.string()?.raw().is_empty()).then(|| (true, Vec::new())),
                    Some(Kind::Array) => {
                        let mut parts = Vec::new();
                        s.array(|s| {
                            parts.push(snap_part(s, &mut ignored)?);
                            Ok(())
                        })?;
                        Some((false, parts))
                    }
                    Some(Kind::Object) => Some((false, vec![snap_part(s, &mut ignored)?])),
                    _ => snap_truthy(s)?.then(|| (false, Vec::new())),
                };
            }
            _ => s.skip()?,
        }
        Ok(())
    })?;
    tc.responses = match result {
        // A string result is a response to the entry's own id.
        Some((true, _)) => vec![SnapPart { response_id: tc.id.clone(), ..SnapPart::default() }],
        Some((false, parts)) => parts,
        None => Vec::new(),
    };
    Ok(tc)
}

// Writing: what a repair appends.

/// The record of `line` (a `gemini` record whose `toolCalls` entry `call_id` has no result)
/// with that entry given an error result, as Gemini CLI records a tool that failed
/// (`status: "error"`, a `functionResponse` whose `response` is `{error}`): appended, it replaces
/// the record where it stands.
pub fn answer_call(line: &[u8], call_id: &str, text: &str) -> Result<Vec<u8>, Unable> {
    let mut v = edit::object(line).ok_or(Unable("the line is not a JSON object"))?;
    let calls = v.get_mut("toolCalls").and_then(Value::as_array_mut).ok_or(Unable("the record has no toolCalls"))?;
    let tc = calls
        .iter_mut()
        .filter_map(Value::as_object_mut)
        .find(|tc| tc.get("id").and_then(Value::as_str) == Some(call_id))
        .ok_or(Unable("the record has no such call"))?;
    let name = tc.get("name").cloned().unwrap_or(Value::Null);
    tc.insert("result".into(), json!([{"functionResponse": {"id": call_id, "name": name, "response": {"error": text}}}]));
    tc.insert("status".into(), json!("error"));
    Ok(edit::to_line(&Value::Object(v)))
}

/// The record of `line` (a `gemini` record) without the call `call_id`: its `toolCalls` entry
/// and its `functionCall` part in `content`, where it has them. Appended, it replaces the record
/// where it stands; a record left with nothing to send is not sent.
pub fn drop_call_record(line: &[u8], call_id: &str) -> Result<Vec<u8>, Unable> {
    let mut v = edit::object(line).ok_or(Unable("the line is not a JSON object"))?;
    let mut found = false;
    if let Some(calls) = v.get_mut("toolCalls").and_then(Value::as_array_mut) {
        let before = calls.len();
        calls.retain(|tc| tc.get("id").and_then(Value::as_str) != Some(call_id));
        found |= calls.len() < before;
    }
    if let Some(parts) = v.get_mut("content").and_then(Value::as_array_mut) {
        let before = parts.len();
        parts.retain(|p| p.get("functionCall").and_then(|f| f.get("id")).and_then(Value::as_str) != Some(call_id));
        found |= parts.len() < before;
    }
    if !found {
        return Err(Unable("the record has no such call"));
    }
    Ok(edit::to_line(&Value::Object(v)))
}

/// The record of `line` (a `user` record of `functionResponse` parts) without the responses to
/// `call_id`: appended, it replaces the record where it stands; a record left with no parts is
/// one the loader ignores (an empty user message).
pub fn drop_responses(line: &[u8], call_id: &str) -> Result<Vec<u8>, Unable> {
    let mut v = edit::object(line).ok_or(Unable("the line is not a JSON object"))?;
    let content = v.get_mut("content").and_then(Value::as_array_mut).ok_or(Unable("the record's content is not a list of parts"))?;
    let before = content.len();
    content.retain(|p| p.get("functionResponse").and_then(|r| r.get("id")).and_then(Value::as_str) != Some(call_id));
    if content.len() == before {
        return Err(Unable("the record has no response to this call"));
    }
    Ok(edit::to_line(&Value::Object(v)))
}

/// A synthetic result as a record of its own: a `user` record of one `functionResponse` part
/// (what Gemini CLI records for a tool's response), with the id `id`. The repair appends
/// corrected records instead ([`answer_call`]); this is the shape for a caller that inserts.
pub fn synthetic_result_in(env: &Map<String, Value>, call: &CallRef, text: &str, id: &str) -> Vec<u8> {
    let mut m = Map::new();
    m.insert("id".into(), json!(if id.is_empty() { format!("{}_response", call.id) } else { id.to_owned() }));
    if let Some(ts) = env.get("timestamp") {
        m.insert("timestamp".into(), ts.clone());
    }
    m.insert("type".into(), json!("user"));
    m.insert("content".into(), json!([{"functionResponse": {"id": call.id, "name": call.tool, "response": {"error": text}}}]));
    edit::to_line(&Value::Object(m))
}

/// What a synthetic result copies from the line it follows: its `timestamp`.
pub fn envelope(follows: &[u8]) -> Map<String, Value> {
    edit::members(follows, &["timestamp"])
}

/// Removes results from a line in place: Gemini records are corrected by appending
/// ([`drop_responses`]), never edited where they stand.
pub fn drop_results() -> Result<Edited, Unable> {
    Err(Unable("a Gemini CLI record is corrected by appending it again, not edited in place"))
}

/// Removes a call from a line in place: not done (see [`drop_results`]).
pub fn drop_call() -> Result<Edited, Unable> {
    Err(Unable("a Gemini CLI record is corrected by appending it again, not edited in place"))
}

/// The id of a message record (`None` for the other records).
pub fn record_id(line: &[u8]) -> Option<String> {
    let mut id = None;
    let mut other = false;
    object_line(line, |s, k| {
        match &*k.key() {
            b"id" => id = s.opt_string()?.map(|i| i.decode().into_owned()),
            b"$rewindTo" => {
                other = true;
                s.skip()?
            }
            _ => s.skip()?,
        }
        Ok(())
    })
    .ok()?;
    id.filter(|_| !other)
}

// Reading for `context`: the loader, then the history it sends.

/// The message records in force at the end of the file (`loadConversationRecord`), in the
/// loader's order: each id at the place it first took, with its last version; a `$set` of
/// `messages` replaces them all; `$rewindTo` removes its id and what follows (everything, for an
/// id not there). `lines` are the file's lines oldest first; each record comes with the index of
/// the line its version was read from. Nothing when the file has no metadata (`sessionId` and
/// `projectHash`): Gemini CLI cannot resume it.
pub fn resolve(lines: &[&[u8]]) -> Vec<(usize, Map<String, Value>)> {
    let mut order: Vec<String> = Vec::new();
    let mut by_id: std::collections::HashMap<String, (usize, Map<String, Value>)> = std::collections::HashMap::new();
    let mut has_meta = (false, false);
    let put = |order: &mut Vec<String>, by_id: &mut std::collections::HashMap<String, (usize, Map<String, Value>)>, i: usize, m: Map<String, Value>| {
        let Some(id) = m.get("id").and_then(Value::as_str).map(str::to_owned) else { return };
        if by_id.insert(id.clone(), (i, m)).is_none() {
            order.push(id);
        }
    };
    for (i, l) in lines.iter().enumerate() {
        let Ok(Value::Object(v)) = serde_json::from_slice::<Value>(l) else { continue };
        if let Some(to) = v.get("$rewindTo").and_then(Value::as_str) {
            match order.iter().position(|id| id == to) {
                Some(at) => {
                    for id in order.drain(at..) {
                        by_id.remove(&id);
                    }
                }
                None => {
                    order.clear();
                    by_id.clear();
                }
            }
        } else if v.get("id").is_some_and(Value::is_string) {
            put(&mut order, &mut by_id, i, v);
        } else if let Some(Value::Object(set)) = v.get("$set") {
            if let Some(Value::Array(ms)) = set.get("messages") {
                order.clear();
                by_id.clear();
                for m in ms {
                    if let Value::Object(m) = m {
                        put(&mut order, &mut by_id, i, m.clone());
                    }
                }
            }
            has_meta.0 |= set.get("sessionId").is_some_and(Value::is_string);
            has_meta.1 |= set.get("projectHash").is_some_and(Value::is_string);
        } else if v.get("sessionId").is_some_and(Value::is_string) && v.get("projectHash").is_some_and(Value::is_string) {
            has_meta = (true, true);
            if let Some(Value::Array(ms)) = v.get("messages") {
                for m in ms {
                    if let Value::Object(m) = m {
                        put(&mut order, &mut by_id, i, m.clone());
                    }
                }
            }
        }
    }
    if !(has_meta.0 && has_meta.1) {
        return Vec::new();
    }
    order.into_iter().filter_map(|id| by_id.remove(&id)).collect()
}

/// `ensurePartArray`: a string is one text part, a list keeps its parts (a string element a
/// text part), anything else is one part.
fn part_array(content: &Value) -> Vec<Value> {
    match content {
        Value::Array(a) => a.iter().map(|p| if let Value::String(s) = p { json!({"text": s}) } else { p.clone() }).collect(),
        Value::String(s) => vec![json!({"text": s})],
        other => vec![other.clone()],
    }
}

/// `partListUnionToString` with `verbose`.
fn part_string(content: &Value) -> String {
    match content {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(part_string).collect(),
        Value::Object(p) => {
            let name = |k: &str| p.get(k).and_then(|f| f.get("name")).and_then(Value::as_str).unwrap_or("undefined").to_owned();
            if p.contains_key("videoMetadata") {
                "[Video Metadata]".into()
            } else if let Some(t) = p.get("thought") {
                format!("[Thought: {}]", t)
            } else if p.contains_key("codeExecutionResult") {
                "[Code Execution Result]".into()
            } else if p.contains_key("executableCode") {
                "[Executable Code]".into()
            } else if p.contains_key("fileData") {
                "[File Data]".into()
            } else if p.contains_key("functionCall") {
                format!("[Function Call: {}]", name("functionCall"))
            } else if p.contains_key("functionResponse") {
                format!("[Function Response: {}]", name("functionResponse"))
            } else if p.contains_key("inlineData") {
                "[Media]".into()
            } else {
                p.get("text").and_then(Value::as_str).unwrap_or("").to_owned()
            }
        }
        _ => String::new(),
    }
}

/// A content record of the history: `{role, parts}`.
pub fn content(role: &str, parts: Vec<Value>) -> Value {
    json!({"role": role, "parts": parts})
}

fn parts_of(c: &Value) -> &[Value] {
    c.get("parts").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The contents one message record is in the history Gemini CLI resumes with
/// (`convertSessionToClientHistory`): a user message as its parts (none when the loader
/// ignores it); a `gemini` message as a model turn (its thoughts as thought parts, its content,
/// its calls as `functionCall` parts; or its content alone when that holds calls or thoughts)
/// followed by a user turn of the responses its `toolCalls` hold; nothing for the others.
pub fn message_contents(msg: &Map<String, Value>) -> Vec<Value> {
    let ty = msg.get("type").and_then(Value::as_str).unwrap_or("");
    let content = msg.get("content").unwrap_or(&Value::Null);
    match ty {
        "user" => {
            if ignored_user_text(part_string(content).trim()) {
                return Vec::new();
            }
            vec![self::content("user", part_array(content))]
        }
        "gemini" => {
            let truthy = |v: &Value| !matches!(v, Value::Null | Value::Bool(false)) && v.as_str() != Some("");
            let content_parts = if truthy(content) { part_array(content) } else { Vec::new() };
            let mut model = Vec::new();
            let in_content = content_parts.iter().any(|p| p.get("functionCall").is_some_and(truthy) || p.get("thought").is_some_and(truthy));
            let tool_calls: &[Value] = msg.get("toolCalls").and_then(Value::as_array).map_or(&[], Vec::as_slice);
            if in_content {
                model.extend(content_parts);
            } else {
                for t in msg.get("thoughts").and_then(Value::as_array).into_iter().flatten() {
                    let desc = t.get("description").map(js_string).unwrap_or_else(|| "undefined".into());
                    let text = match t.get("subject").filter(|s| truthy(s)) {
                        Some(s) => format!("**{}** {desc}", js_string(s)),
                        None => desc,
                    };
                    model.push(json!({"text": text, "thought": true}));
                }
                model.extend(content_parts);
                for tc in tool_calls {
                    let mut fc = Map::new();
                    for k in ["id", "name", "args"] {
                        if let Some(v) = tc.get(k) {
                            fc.insert(k.into(), v.clone());
                        }
                    }
                    model.push(json!({"functionCall": fc}));
                }
            }
            if model.is_empty() {
                return Vec::new();
            }
            let mut out = vec![self::content("model", model)];
            let mut responses = Vec::new();
            for tc in tool_calls {
                let Some(result) = tc.get("result").filter(|r| truthy(r)) else { continue };
                match result {
                    Value::String(s) => responses.push(json!({"functionResponse": {"id": tc.get("id"), "name": tc.get("name"), "response": {"output": s}}})),
                    Value::Array(_) => responses.extend(part_array(result)),
                    other => responses.push(other.clone()),
                }
            }
            if !responses.is_empty() {
                out.push(self::content("user", responses));
            }
            out
        }
        _ => Vec::new(),
    }
}

fn js_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// The history of the message records, in order ([`message_contents`] of each).
pub fn client_history<'v>(messages: impl Iterator<Item = &'v Map<String, Value>>) -> Vec<Value> {
    messages.flat_map(message_contents).collect()
}

/// `isValidContent`: a model turn may have no parts; otherwise every part must be a non-empty
/// object, and a text part alone must not be empty.
fn valid_content(c: &Value) -> bool {
    let parts = c.get("parts").and_then(Value::as_array);
    if c.get("role").and_then(Value::as_str) == Some("model") && parts.is_none_or(Vec::is_empty) {
        return true;
    }
    let Some(parts) = parts.filter(|p| !p.is_empty()) else { return false };
    parts.iter().all(|p| {
        let Some(o) = p.as_object().filter(|o| !o.is_empty()) else { return false };
        let only_text = o.keys().all(|k| k == "text" || k == "thought" || k == "callIndex");
        let thought = o.get("thought").is_some_and(|t| !matches!(t, Value::Null | Value::Bool(false)));
        !(o.get("text").and_then(Value::as_str) == Some("") && !thought && only_text)
    })
}

/// What Gemini CLI 0.61.0 sends on resume before the new prompt, from the history of the
/// records ([`client_history`]), for a Gemini 2 or later model:
/// `closeUnansweredToolResponseTurn` (a history that ends with function responses gets the
/// model turn [`INTERRUPTED`]), `extractCuratedHistory` (a run of model turns with an invalid one
/// is not sent), `stripThoughts` (thought parts are not sent, the first call of a turn that
/// had them gets [`SYNTHETIC_SIGNATURE`], a turn left empty goes), `coalesceConsecutiveRoles`
/// (turns of one role in a row are one), `ensureActiveLoopHasThoughtSignatures` (with the new
/// prompt joined to a history that ends with a user turn, the first call of each model turn
/// from the last user turn of text without responses on gets [`SYNTHETIC_SIGNATURE`]), and
/// `stripToolCallIdPrefixes` (a call or response id
/// `<name>__<id>` is sent as `<id>`, and an empty text beside other keys is dropped, an empty
/// text part alone too).
pub fn transform(history: Vec<Value>) -> Vec<Value> {
    let mut history = history;
    if history.last().is_some_and(|c| c.get("role").and_then(Value::as_str) == Some("user") && parts_of(c).iter().any(|p| p.get("functionResponse").is_some()))
    {
        history.push(content("model", vec![json!({"text": INTERRUPTED})]));
    }
    // extractCuratedHistory.
    let mut curated = Vec::with_capacity(history.len());
    let mut i = 0;
    while i < history.len() {
        if history[i].get("role").and_then(Value::as_str) == Some("user") {
            curated.push(history[i].clone());
            i += 1;
            continue;
        }
        let start = i;
        let mut valid = true;
        while i < history.len() && history[i].get("role").and_then(Value::as_str) != Some("user") {
            valid &= valid_content(&history[i]);
            i += 1;
        }
        if valid {
            curated.extend_from_slice(&history[start..i]);
        }
    }
    // stripThoughts.
    let stripped: Vec<Value> = curated
        .into_iter()
        .filter_map(|c| {
            let parts = parts_of(&c);
            let is_thought = |p: &Value| p.get("thought").is_some_and(|t| !matches!(t, Value::Null | Value::Bool(false)) && t.as_str() != Some(""));
            if !parts.iter().any(is_thought) {
                return Some(c);
            }
            let model = c.get("role").and_then(Value::as_str) == Some("model");
            let mut patched = false;
            let kept: Vec<Value> = parts
                .iter()
                .filter(|p| !is_thought(p))
                .map(|p| {
                    if model && !patched && p.get("functionCall").is_some() {
                        patched = true;
                        if p.get("thoughtSignature").is_none() {
                            let mut p = p.clone();
                            p["thoughtSignature"] = json!(SYNTHETIC_SIGNATURE);
                            return p;
                        }
                    }
                    p.clone()
                })
                .collect();
            (!kept.is_empty()).then(|| {
                let mut c = c.clone();
                c["parts"] = Value::Array(kept);
                c
            })
        })
        .collect();
    // coalesceConsecutiveRoles.
    let mut out: Vec<Value> = Vec::with_capacity(stripped.len());
    for c in stripped {
        match out.last_mut() {
            Some(last) if last.get("role").is_some() && last.get("role") == c.get("role") => {
                let more = parts_of(&c).to_vec();
                if let Some(Value::Array(p)) = last.get_mut("parts") {
                    p.extend(more);
                }
            }
            _ => out.push(c),
        }
    }
    // ensureActiveLoopHasThoughtSignatures, on the request with the new prompt: the prompt
    // joins a history that ends with a user turn. The loop starts at the last user turn with
    // text and no function response; in it, the first call of each model turn gets the
    // synthetic signature if it has none.
    let joins = out.last().is_some_and(|c| c.get("role").and_then(Value::as_str) == Some("user"));
    if joins {
        let starts = |i: usize, c: &Value| {
            let parts = parts_of(c);
            let text = i + 1 == out.len() || parts.iter().any(|p| p.get("text").and_then(Value::as_str).is_some_and(|t| !t.is_empty()));
            c.get("role").and_then(Value::as_str) == Some("user") && text && !parts.iter().any(|p| p.get("functionResponse").is_some())
        };
        if let Some(start) = (0..out.len()).rev().find(|&i| starts(i, &out[i])) {
            for c in &mut out[start..] {
                if c.get("role").and_then(Value::as_str) != Some("model") {
                    continue;
                }
                let Some(Value::Array(parts)) = c.get_mut("parts") else { continue };
                if let Some(p) = parts.iter_mut().find(|p| p.get("functionCall").is_some()) {
                    if p.get("thoughtSignature").is_none() {
                        p["thoughtSignature"] = json!(SYNTHETIC_SIGNATURE);
                    }
                }
            }
        }
    }
    // stripToolCallIdPrefixes.
    for c in &mut out {
        let Some(Value::Array(parts)) = c.get_mut("parts") else { continue };
        for p in parts.iter_mut() {
            for (key, keep) in [("functionCall", &["name", "args", "id"][..]), ("functionResponse", &["name", "response", "id"][..])] {
                let Some(f) = p.get(key) else { continue };
                let name = f.get("name").and_then(Value::as_str).map(str::trim).filter(|n| !n.is_empty()).unwrap_or("generic_tool").to_owned();
                let prefix = format!("{name}__");
                if let Some(id) = f.get("id").and_then(Value::as_str).filter(|id| id.starts_with(&prefix)) {
                    let id = id[prefix.len()..].to_owned();
                    let mut g = Map::new();
                    for k in keep {
                        match *k {
                            "id" => {
                                g.insert("id".into(), json!(id));
                            }
                            k => {
                                if let Some(v) = f.get(k) {
                                    g.insert(k.into(), v.clone());
                                }
                            }
                        }
                    }
                    p[key] = Value::Object(g);
                }
            }
            if let Some(o) = p.as_object_mut() {
                let others = o.keys().any(|k| k != "text" && k != "thought" && k != "callIndex");
                if others && o.get("text").and_then(Value::as_str) == Some("") {
                    o.remove("text");
                }
            }
        }
        parts.retain(|p| {
            let others = p.as_object().is_some_and(|o| o.keys().any(|k| k != "text" && k != "thought" && k != "callIndex"));
            p.get("text").and_then(Value::as_str) != Some("") || others
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calls a `$set` of `messages` leaves without a response: a snapshot starts the
    /// conversation over with them open.
    fn snapshot_open_calls_reference(line: &[u8]) -> Option<Vec<Call<'static>>> {
        let Ok(Value::Object(v)) = serde_json::from_slice::<Value>(line) else { return None };
        let Some(Value::Array(messages)) = v.get("$set").and_then(|s| s.get("messages")) else { return None };
        let contents = client_history(messages.iter().filter_map(Value::as_object));
        if !contents.iter().any(|c| c.get("role").and_then(Value::as_str) == Some("model")) {
            return None;
        }
        let mut open: Vec<(String, String)> = Vec::new();
        for c in &contents {
            for p in parts_of(c) {
                if let Some(fc) = p.get("functionCall") {
                    if let Some(id) = fc.get("id").and_then(Value::as_str) {
                        open.push((id.to_owned(), fc.get("name").and_then(Value::as_str).unwrap_or("").to_owned()));
                    }
                }
                if let Some(id) = p.get("functionResponse").and_then(|r| r.get("id")).and_then(Value::as_str) {
                    open.retain(|(c, _)| c != id);
                }
            }
        }
        Some(open.into_iter().map(|(id, name)| Call { id: id.into(), name: name.into(), args: Args::Object, item: None }).collect())
    }
    use crate::transcript::model::id_hash;

    fn entry(line: &str) -> Entry<'_> {
        parse(line.as_bytes()).unwrap().entry
    }

    const CALL: &str = r#"{"id":"g1","timestamp":"t","type":"gemini","content":"I will run it.","thoughts":[],"tokens":{"input":100,"output":10,"cached":40,"thoughts":2,"tool":0,"total":112},"model":"gemini-2.5-flash","toolCalls":[{"id":"run_shell_command__c1","name":"run_shell_command","args":{"command":"ls"},"result":[{"functionResponse":{"id":"run_shell_command__c1","name":"run_shell_command","response":{"output":"done"}}}],"status":"success"},{"id":"c2","name":"read_file","args":{}}]}"#;

    #[test]
    fn a_record_answers_its_own_calls() {
        let Entry::Message(m) = entry(CALL) else { panic!() };
        assert_eq!(m.role, Role::Assistant);
        assert_eq!(m.results.iter().map(|r| r.id.as_ref()).collect::<Vec<_>>(), ["run_shell_command__c1"]);
        assert_eq!(m.calls.iter().map(|c| c.id.as_ref()).collect::<Vec<_>>(), ["run_shell_command__c1", "c2"]);
        assert_eq!(m.turn, Some(id_hash("g1")));
        let p = parse(CALL.as_bytes()).unwrap();
        let u = p.usage.unwrap();
        assert_eq!((u.input, u.output, u.cache_read, u.key), (60, 12, 40, id_hash("g1")));
        assert_eq!(p.model.as_deref(), Some("gemini-2.5-flash"));
    }

    #[test]
    fn user_records() {
        let Entry::Message(m) = entry(r#"{"id":"u","type":"user","content":[{"functionResponse":{"id":"c1","name":"x","response":{}}}]}"#) else { panic!() };
        assert_eq!((m.role, m.prompt, m.results[0].id.as_ref()), (Role::Tool, false, "c1"));
        let Entry::Message(m) = entry(r#"{"id":"u","type":"user","content":[{"text":"Run it."}]}"#) else { panic!() };
        assert!(m.prompt);
        assert_eq!(entry(r#"{"id":"u","type":"user","content":[{"text":"<session_context>\nx"}]}"#), Entry::Other);
        assert_eq!(entry(r#"{"id":"u","type":"user","content":"  /compress"}"#), Entry::Other);
        let Entry::Message(m) = entry(r#"{"id":"u","type":"user","content":[]}"#) else { panic!() };
        assert_eq!((m.role, m.results.len(), m.prompt), (Role::Tool, 0, false), "an emptied record replaces its results");
        assert_eq!(entry(r#"{"id":"g","type":"gemini","content":"","thoughts":[]}"#), Entry::Other, "nothing to send");
        assert_eq!(entry(r#"{"sessionId":"s","projectHash":"h","startTime":"t","kind":"main"}"#), Entry::Other);
        assert_eq!(entry(r#"{"$set":{"lastUpdated":"t"}}"#), Entry::Other);
        assert!(matches!(entry(r#"{"$rewindTo":"u"}"#), Entry::Compaction { .. }));
        let Entry::Compaction { carried, .. } =
            entry(r#"{"$set":{"messages":[{"id":"g","type":"gemini","content":"","toolCalls":[{"id":"c9","name":"n","args":{}}]}]}}"#)
        else {
            panic!()
        };
        assert_eq!(carried[0].id, "c9");
    }

    /// Values in the shapes of a snapshot's records, and the odd ones around them.
    fn snapshot_line() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let id = || prop_oneof![Just(json!("a")), Just(json!("b")), Just(json!("c")), Just(json!(7))];
        let scalar = || {
            prop_oneof![
                Just(json!("")),
                Just(json!(" ")),
                Just(json!("hi")),
                Just(json!(" /cmd")),
                Just(json!("?")),
                Just(json!("<session_context>x")),
                Just(json!("<hook_context>")),
                Just(Value::Null),
                Just(json!(true)),
                Just(json!(false)),
                Just(json!(0)),
            ]
        };
        let call = prop_oneof![
            (proptest::option::of(id()), proptest::option::of(Just(json!("n")))).prop_map(|(id, name)| {
                let mut m = Map::new();
                id.map(|i| m.insert("id".into(), i));
                name.map(|n| m.insert("name".into(), n));
                Value::Object(m)
            }),
            scalar(),
        ];
        let response = prop_oneof![id().prop_map(|i| json!({"id": i, "response": {}})), Just(json!({})), scalar()];
        let object_part = (
            proptest::option::of(call),
            proptest::option::of(response),
            proptest::option::of(scalar()),
            proptest::option::of(scalar()),
            proptest::option::of(Just(json!({"mimeType": "image/png"}))),
        )
            .prop_map(|(c, r, thought, text, media)| {
                let mut m = Map::new();
                c.map(|v| m.insert("functionCall".into(), v));
                r.map(|v| m.insert("functionResponse".into(), v));
                thought.map(|v| m.insert("thought".into(), v));
                text.map(|v| m.insert("text".into(), v));
                media.map(|v| m.insert("inlineData".into(), v));
                Value::Object(m)
            });
        let part = prop_oneof![3 => object_part.clone(), 1 => scalar()];
        let parts = prop_oneof![
            proptest::collection::vec(part.clone(), 0..4).prop_map(Value::Array),
            part.clone(),
            proptest::collection::vec(proptest::collection::vec(part.clone(), 0..2).prop_map(Value::Array), 1..2).prop_map(Value::Array),
        ];
        let result = prop_oneof![parts.clone(), scalar()];
        let tool_call = prop_oneof![
            4 => (proptest::option::of(id()), proptest::option::of(result)).prop_map(|(id, result)| {
                let mut m = Map::new();
                id.map(|i| m.insert("id".into(), i));
                m.insert("name".into(), json!("run"));
                result.map(|r| m.insert("result".into(), r));
                Value::Object(m)
            }),
            1 => scalar(),
        ];
        let ty = prop_oneof![Just(json!("user")), Just(json!("gemini")), Just(json!("info")), Just(json!(3))];
        let record = (
            proptest::option::of(ty),
            proptest::option::of(prop_oneof![parts, scalar()]),
            proptest::option::of(prop_oneof![proptest::collection::vec(tool_call, 0..3).prop_map(Value::Array), scalar()]),
            proptest::option::of(prop_oneof![
                proptest::collection::vec(Just(json!({"subject": "s", "description": "d"})), 0..2).prop_map(Value::Array),
                scalar()
            ]),
        )
            .prop_map(|(ty, content, tool_calls, thoughts)| {
                let mut m = Map::new();
                m.insert("id".into(), json!("r"));
                ty.map(|v| m.insert("type".into(), v));
                content.map(|v| m.insert("content".into(), v));
                tool_calls.map(|v| m.insert("toolCalls".into(), v));
                thoughts.map(|v| m.insert("thoughts".into(), v));
                Value::Object(m)
            });
        // A user record whose text before a call or a response decides whether it is sent.
        let prefixed = (prop_oneof![Just(""), Just(" /x"), Just("\n<session_context>"), Just(" ? "), Just(" hi")], object_part.clone())
            .prop_map(|(text, part)| json!({"id": "u", "type": "user", "content": [text, part]}));
        proptest::collection::vec(prop_oneof![8 => record, 2 => prefixed, 1 => scalar()], 0..6)
            .prop_map(|records| json!({"$set": {"messages": records, "lastUpdated": "t"}}).to_string())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]
        /// The scanner's reading of a snapshot is the history `client_history` makes of it.
        #[test]
        fn a_snapshot_leaves_open_what_its_history_does(line in snapshot_line()) {
            let ids = |c: &[Call<'_>]| c.iter().map(|c| (c.id.to_string(), c.name.to_string())).collect::<Vec<_>>();
            let expected = snapshot_open_calls_reference(line.as_bytes()).map(|c| ids(&c));
            let got = match parse(line.as_bytes()).unwrap().entry {
                Entry::Compaction { carried, .. } => Some(ids(&carried)),
                Entry::Other => None,
                e => panic!("{e:?}"),
            };
            proptest::prop_assert_eq!(got, expected, "{}", line);
        }
    }

    #[test]
    fn the_last_messages_of_the_last_set_count() {
        let open = |l: &str| match parse(l.as_bytes()).unwrap().entry {
            Entry::Compaction { carried, .. } => Some(carried.iter().map(|c| c.id.to_string()).collect::<Vec<_>>()),
            _ => None,
        };
        let model = r#"[{"id":"g","type":"gemini","content":"","toolCalls":[{"id":"c9","name":"n"}]}]"#;
        assert_eq!(open(&format!(r#"{{"$set":{{"messages":{model},"messages":[]}}}}"#)), None);
        assert_eq!(open(&format!(r#"{{"$set":{{"messages":[],"messages":{model},"lastUpdated":"t"}}}}"#)), Some(vec!["c9".into()]));
        assert_eq!(open(&format!(r#"{{"$set":{{"messages":{model}}},"$set":{{"lastUpdated":"t"}}}}"#)), None);
        assert_eq!(open(&format!(r#"{{"$set":{{"messages":{model},"messages":7}}}}"#)), None);
        assert_eq!(
            open(r#"{"$set":{"messages":[{"type":"gemini","toolCalls":[{"id":"c1","result":"x","id":"c2"}]}]}}"#),
            Some(vec![]),
            "the call and its string result take the entry's last id"
        );
    }

    #[test]
    fn a_long_text_is_read_as_far_as_the_loader_looks() {
        let user = |content: &str| matches!(parse(format!(r#"{{"id":"u","type":"user","content":{content}}}"#).as_bytes()).unwrap().entry, Entry::Message(_));
        let blank = "\\n".repeat(400);
        assert!(!user(&format!(r#""{blank}<session_context>{}""#, "x".repeat(5000))), "after 800 escaped bytes of blank");
        assert!(user(&format!(r#""{blank}\u00e9{}""#, "x".repeat(5000))));
        assert!(!user(&format!(r#"[" \t", "{blank}", "/compress {}"]"#, "y".repeat(300))));
        assert!(user(r#"[" ", {"inlineData":{}}, "/compress"]"#), "a bracket first");
        assert!(!user(&format!(r#""{}""#, " ".repeat(3000))));
        // A surrogate pair across the first window's end is decoded whole.
        let pair = format!(r#""{}\ud83d\ude00 /x""#, " ".repeat(253));
        assert!(user(&pair));
        let raw = crate::transcript::scan::Scanner::new(pair.as_bytes()).string().unwrap();
        assert_eq!(raw.prefix(256).decode(), format!("{}\u{1f600}", " ".repeat(253)));
        assert_eq!(raw.after(raw.prefix(256).raw().len()).decode(), " /x");
        let multi = crate::transcript::scan::Scanner::new("\"ééé\"".as_bytes()).string().unwrap();
        assert_eq!(multi.prefix(1).decode(), "é", "a character whole");
    }

    #[test]
    fn corrections() {
        let fixed = answer_call(CALL.as_bytes(), "c2", "not run").unwrap();
        let Entry::Message(m) = parse(&fixed).unwrap().entry else { panic!() };
        assert_eq!((m.calls.len(), m.results.len()), (2, 2));
        let user = br#"{"id":"u","type":"user","content":[{"functionResponse":{"id":"c1","name":"x","response":{}}}]}"#;
        let dropped = drop_responses(user, "c1").unwrap();
        assert_eq!(dropped, br#"{"id":"u","type":"user","content":[]}"#.to_vec());
        assert!(matches!(parse(&dropped).unwrap().entry, Entry::Message(m) if m.results.is_empty()));
        assert!(drop_responses(user, "zz").is_err());
        let without = drop_call_record(CALL.as_bytes(), "c2").unwrap();
        let Entry::Message(m) = parse(&without).unwrap().entry else { panic!() };
        assert_eq!(m.calls.len(), 1);
        assert_eq!(record_id(user).as_deref(), Some("u"));
    }

    #[test]
    fn resume_sends_a_response_twice() {
        let lines: Vec<&[u8]> = vec![
            br#"{"sessionId":"s","projectHash":"h"}"#,
            br#"{"id":"u1","type":"user","content":[{"text":"Run it."}]}"#,
            br#"{"id":"g1","type":"gemini","content":"ok"}"#,
            CALL.as_bytes(),
            br#"{"id":"u2","type":"user","content":[{"functionResponse":{"id":"run_shell_command__c1","name":"run_shell_command","response":{"output":"done"}}}]}"#,
        ];
        let records = resolve(&lines);
        assert_eq!(records.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [1, 3, 4], "the last version, at the first place");
        let h = transform(client_history(records.iter().map(|(_, m)| m)));
        assert_eq!(h.len(), 4, "{h:?}");
        assert_eq!(h[1]["parts"][1]["functionCall"]["id"], "c1");
        assert_eq!(parts_of(&h[2]).len(), 2, "two responses for one call: {h:?}");
        assert_eq!(h[3]["parts"][0]["text"], INTERRUPTED, "the history ends with responses");
        let mut rewound = lines.clone();
        rewound.push(br#"{"$rewindTo":"g1"}"#);
        assert_eq!(resolve(&rewound).len(), 1);
        assert!(resolve(&lines[1..]).is_empty(), "no metadata");
    }
}
