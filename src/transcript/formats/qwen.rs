//! Qwen Code sessions (`@qwen-code/qwen-code`, a Gemini CLI fork):
//! `~/.qwen/projects/<sanitized cwd>/chats/<sessionId>.jsonl` (`$QWEN_RUNTIME_DIR`, else
//! `$QWEN_HOME`, else `~/.qwen`; `Storage.getRuntimeBaseDir`, `getProjectDir`).
//!
//! Every line is a `ChatRecord` (`chatRecordingService.ts` `createBaseRecord`): `{uuid,
//! parentUuid, sessionId, timestamp, type, provenance, cwd, version, gitBranch, ...}`, `type`
//! one of `user`, `assistant`, `tool_result`, `system`, each record hanging under the one
//! written before it (a tree like Claude Code's). A conversation record holds a Gemini
//! `Content` in `message` (`{role: "user" | "model", parts}`): a call is a
//! `{functionCall: {id, name, args}}` part of an assistant record, its result a
//! `{functionResponse: {id, name, response}}` part of a `tool_result` record. An assistant
//! record has `model` and `usageMetadata` (Gemini's: `promptTokenCount` with
//! `cachedContentTokenCount` in it, `candidatesTokenCount`, `thoughtsTokenCount`). A `system`
//! record has a `subtype`; `chat_compression` holds `systemPayload.compressedHistory`, the
//! `Content`s that replace everything before it on resume.
//!
//! What Qwen Code sends on resume (`SessionService.loadSession`, `prepareTranscriptRecords`,
//! `buildSessionHistoryFromConversation`, then `repairOrphanedToolUseTurns` and the OpenAI
//! converter's `cleanOrphanedToolCalls`): the chain from the last conversation record to the
//! root by `parentUuid`, the history replaced by the last compression's `compressedHistory`
//! on it, each record's `message` (a `realtime_message` record's never); a call left without
//! a result gets an error result ([`ORPHAN_REASON`]); a result whose call is not in the turn
//! before it is not sent.

use super::edit::{self, CallRef, Edited, TreeKeys};
use crate::transcript::model::{id_hash, Args, Call, Entry, Message, Node, Parsed, Role, ToolResult, Usage};
use crate::transcript::scan::{self, object_line, Kind, RawStr, Scanner};
use serde_json::{json, Map, Value};

/// Qwen Code's tree members.
pub const TREE: TreeKeys = TreeKeys { id: "uuid", parent: "parentUuid" };

/// The record types Qwen Code writes (`RECORD_TYPES`); a record of another type is skipped.
pub const TYPES: &[&str] = &["user", "assistant", "tool_result", "system"];

/// `system` subtypes that are not part of the conversation tree (`ARTIFACT_RECORD_SUBTYPES`,
/// `NON_CONVERSATION_RECORD_SUBTYPES`): never a leaf, never on the chain.
pub const NOT_CONVERSATION: &[&str] = &[
    "session_artifact_event",
    "session_artifact_snapshot",
    "session_sources_snapshot",
    "managed_session_header_v1",
    "managed_session_event_v1",
    "managed_session_commit_v1",
];

/// The error the agent answers a call with when its result is missing on resume
/// (`ORPHAN_TOOL_USE_REPAIR_REASON`).
pub const ORPHAN_REASON: &str =
    "Tool execution result was not recorded \u{2014} likely interrupted by network failure, abort, or process exit. Treat as failure and retry if needed.";

/// What a `parts` array holds.
#[derive(Default)]
struct Parts<'a> {
    calls: smallvec::SmallVec<[Call<'a>; 1]>,
    results: smallvec::SmallVec<[ToolResult<'a>; 1]>,
    has_content: bool,
    /// A part that is not a `functionResponse`.
    other: bool,
}

/// Parses one line (valid UTF-8, not blank). `Err` means the line is not a JSON object.
pub fn parse(line: &[u8]) -> scan::Result<Parsed<'_>> {
    let (mut ty, mut subtype, mut uuid, mut parent, mut model) = (None, None, None, None, None);
    let (mut parts, mut has_message, mut usage) = (None, false, None);
    let mut compressed: Option<Vec<(bool, Parts<'_>)>> = None;
    object_line(line, |s, k| {
        match &*k.key() {
            b"type" => ty = s.opt_string()?,
            b"subtype" => subtype = s.opt_string()?,
            b"uuid" => uuid = s.opt_string()?,
            b"parentUuid" => parent = s.opt_string()?,
            b"model" => model = s.opt_string()?,
            b"usageMetadata" => usage = read_usage(s)?,
            b"message" => {
                let mut p = None;
                has_message = s.opt_object(|s, k| {
                    match &*k.key() {
                        b"parts" => p = Some(read_parts(s)?),
                        _ => s.skip()?,
                    }
                    Ok(())
                })?;
                parts = p;
            }
            b"systemPayload" => {
                s.opt_object(|s, k| {
                    match &*k.key() {
                        b"compressedHistory" => compressed = read_history(s)?,
                        _ => s.skip()?,
                    }
                    Ok(())
                })?;
            }
            _ => s.skip()?,
        }
        Ok(())
    })?;
    let ty = ty.map(|t| t.key()).unwrap_or_default();
    let sub = subtype.map(|t| t.key());
    let not_tree = &*ty == b"system" && sub.as_deref().is_some_and(|s| NOT_CONVERSATION.iter().any(|n| n.as_bytes() == s));
    let node = uuid.filter(|u| !u.raw().is_empty() && !not_tree).map(|u| Node { id: u.hash(), parent: parent.map(|p| p.hash()), sidechain: false });
    let of = |entry| Parsed { node, ..Parsed::of(entry) };
    // A realtime (voice) record is shown, never sent.
    let realtime = sub.as_deref() == Some(b"realtime_message");
    let parts = parts.unwrap_or_default();
    let entry = match &*ty {
        b"system" => {
            return Ok(of(match (sub.as_deref(), compressed) {
                (Some(b"chat_compression"), Some(history)) => Entry::Compaction { carried: open_calls(history), keeps: None, summary_follows: false },
                _ => Entry::Other,
            }))
        }
        b"user" | b"assistant" | b"tool_result" if !has_message || realtime => Entry::Other,
        b"assistant" => {
            let mut m = Message::new(Role::Assistant);
            m.has_content = parts.has_content;
            m.calls = parts.calls;
            Entry::Message(m)
        }
        b"user" | b"tool_result" => {
            // A `tool_result` record, or a user record holding only results, answers calls;
            // anything else the user says starts a turn.
            let only_results = !parts.results.is_empty() && !parts.other;
            let mut m = Message::new(if &*ty == b"tool_result" || only_results { Role::Tool } else { Role::User });
            m.has_content = parts.has_content;
            m.prompt = m.role == Role::User;
            m.results = parts.results;
            Entry::Message(m)
        }
        _ => Entry::Unknown,
    };
    let key = uuid.map_or_else(|| id_hash(&String::from_utf8_lossy(line)), |u| u.hash());
    let usage = usage.filter(|_| &*ty == b"assistant").map(|u| Usage { key, ..u });
    Ok(Parsed { usage, model: model.filter(|_| &*ty == b"assistant").map(|m| m.decode()), ..of(entry) })
}

/// Gemini's `usageMetadata`: `promptTokenCount` counts the cached tokens
/// (`cachedContentTokenCount`) too; `candidatesTokenCount` is the output (Qwen's OpenAI
/// converter puts `completion_tokens`, reasoning included, there).
fn read_usage(s: &mut Scanner<'_>) -> scan::Result<Option<Usage>> {
    let (mut prompt, mut cached, mut out) = (0, 0, 0);
    let is_object = s.opt_object(|s, k| {
        match &*k.key() {
            b"promptTokenCount" => prompt = s.opt_count()?,
            b"cachedContentTokenCount" => cached = s.opt_count()?,
            b"candidatesTokenCount" => out = s.opt_count()?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok(is_object.then(|| Usage { input: prompt.saturating_sub(cached), output: out, cache_read: cached, ..Usage::default() }))
}

/// A `parts` array (anything else reads as no parts).
fn read_parts<'a>(s: &mut Scanner<'a>) -> scan::Result<Parts<'a>> {
    let mut p = Parts::default();
    if s.peek() == Some(Kind::Array) {
        s.array(|s| read_part(s, &mut p))?;
    } else {
        s.skip()?;
    }
    Ok(p)
}

fn read_part<'a>(s: &mut Scanner<'a>, p: &mut Parts<'a>) -> scan::Result<()> {
    let mut fields = 0;
    let is_object = s.opt_object(|s, k| {
        fields += 1;
        match &*k.key() {
            b"text" => {
                let t = s.opt_string()?;
                p.has_content |= t.is_some_and(|t| !t.is_blank());
                p.other = true;
            }
            b"functionCall" => {
                p.has_content = true;
                p.other = true;
                let (mut id, mut name, mut args) = (None, None, None);
                s.opt_object(|s, k| {
                    match &*k.key() {
                        b"id" => id = s.opt_string()?,
                        b"name" => name = s.opt_string()?,
                        b"args" => args = s.shape()?,
                        _ => s.skip()?,
                    }
                    Ok(())
                })?;
                if let Some(id) = id.filter(|i| !i.raw().is_empty()) {
                    let args = match args {
                        Some(Kind::Object) | None => Args::Object,
                        Some(_) => Args::NotObject,
                    };
                    p.calls.push(Call { id: id.decode(), name: name.map(|n| n.decode()).unwrap_or_default(), args, item: None });
                }
            }
            b"functionResponse" => {
                p.has_content = true;
                let mut id = None;
                s.opt_object(|s, k| {
                    match &*k.key() {
                        b"id" => id = s.opt_string()?,
                        _ => s.skip()?,
                    }
                    Ok(())
                })?;
                if let Some(id) = id.filter(|i| !i.raw().is_empty()) {
                    p.results.push(ToolResult { id: id.decode() });
                }
            }
            // `thought`, `thoughtSignature` go with a text; media and code parts are content.
            b"thought" | b"thoughtSignature" => s.skip()?,
            _ => {
                p.has_content = true;
                p.other = true;
                s.skip()?
            }
        }
        Ok(())
    })?;
    if !is_object || fields == 0 {
        p.other = true;
    }
    Ok(())
}

/// A `compressedHistory` array of `Content`s: each one's role is `model` and its parts.
fn read_history<'a>(s: &mut Scanner<'a>) -> scan::Result<Option<Vec<(bool, Parts<'a>)>>> {
    if s.peek() != Some(Kind::Array) {
        s.skip()?;
        return Ok(None);
    }
    let mut out = Vec::new();
    s.array(|s| {
        let (mut model, mut parts) = (false, Parts::default());
        s.opt_object(|s, k| {
            match &*k.key() {
                b"role" => model = s.opt_string()?.is_some_and(|r| r.is("model")),
                b"parts" => parts = read_parts(s)?,
                _ => s.skip()?,
            }
            Ok(())
        })?;
        out.push((model, parts));
        Ok(())
    })?;
    Ok(Some(out))
}

/// The calls of a compressed history that no later content of it answers: results after the
/// compression may answer them.
fn open_calls(history: Vec<(bool, Parts<'_>)>) -> Vec<Call<'_>> {
    let mut open: Vec<Call<'_>> = Vec::new();
    for (_, p) in history {
        open.retain(|c| !p.results.iter().any(|r| r.id == c.id));
        open.extend(p.calls);
    }
    open
}

// Writing.

/// What a synthetic result copies from the record it follows: the record fields every
/// `ChatRecord` has (`sessionId`, whose value Qwen Code requires to be one per file, `cwd`,
/// `version`, `gitBranch`, `timestamp`).
pub fn envelope(follows: &[u8]) -> Map<String, Value> {
    edit::members(follows, &["sessionId", "timestamp", "cwd", "version", "gitBranch"])
}

/// A synthetic error result for `call`: a `tool_result` record whose `functionResponse` says
/// `{error: text}` (what Qwen Code writes for a tool that failed, and sends for a call it
/// finds without a result), hanging under `parent` with `uuid` its own.
pub fn synthetic_result_in(env: &Map<String, Value>, call: &CallRef, text: &str, parent: Option<&str>, uuid: &str) -> Vec<u8> {
    let mut m = Map::new();
    m.insert("uuid".into(), json!(uuid));
    m.insert("parentUuid".into(), parent.map_or(Value::Null, |p| json!(p)));
    for k in ["sessionId", "timestamp"] {
        if let Some(v) = env.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    m.insert("type".into(), json!("tool_result"));
    m.insert("provenance".into(), json!("tool_result"));
    for k in ["cwd", "version", "gitBranch"] {
        if let Some(v) = env.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    let response = json!({"functionResponse": {"id": call.id, "name": call.tool, "response": {"error": text}}});
    m.insert("message".into(), json!({"role": "user", "parts": [response]}));
    edit::to_line(&Value::Object(m))
}

/// Which part a `parts` element is, and the id of its call or result.
fn part_id(elem: &[u8]) -> Option<(&'static str, String)> {
    let mut found = None;
    let mut s = Scanner::new(elem);
    s.object(|s, k| {
        let which = match &*k.key() {
            b"functionCall" => "call",
            b"functionResponse" => "result",
            _ => return s.skip(),
        };
        let mut id = None;
        s.opt_object(|s, k| {
            match &*k.key() {
                b"id" => id = s.opt_string()?.map(|i| i.decode().into_owned()),
                _ => s.skip()?,
            }
            Ok(())
        })?;
        if let Some(id) = id {
            found = Some((which, id));
        }
        Ok(())
    })
    .ok()?;
    found
}

/// Removes parts of `message.parts`: those `remove` names (it sees each part's kind and id and
/// whether one was removed before); the record goes when no part is left.
fn drop_parts(line: &[u8], mut remove: impl FnMut(Option<(&'static str, String)>) -> bool) -> Result<Edited, edit::Unable> {
    let span = edit::value_span(line, &[b"message", b"parts"]).ok_or(edit::Unable("the message has no parts"))?;
    let elems = edit::elements(line, &span).ok_or(edit::Unable("the message parts are not an array"))?;
    let keep: Vec<bool> = elems.iter().map(|e| !remove(part_id(&line[e.clone()]))).collect();
    if keep.iter().all(|k| *k) {
        return Err(edit::Unable("the line has no such part"));
    }
    if !keep.iter().any(|k| *k) {
        return Ok(Edited::Gone);
    }
    Ok(Edited::Line(edit::splice(line, &span, &edit::array_of(line, &elems, &keep))))
}

/// Removes the results for `call_id` (its `functionResponse` parts; all, or all but the first).
pub fn drop_results(line: &[u8], call_id: &str, keep_first: bool) -> Result<Edited, edit::Unable> {
    let mut seen = false;
    drop_parts(line, |p| {
        if p.as_ref().is_none_or(|(w, id)| *w != "result" || id != call_id) {
            return false;
        }
        let keep = keep_first && !seen;
        seen = true;
        !keep
    })
    .map_err(|e| if e.0 == "the line has no such part" { edit::Unable("the line has no result to remove for the call") } else { e })
}

/// Removes the call `call_id` (its `functionCall` part); the record goes when nothing else is
/// left in it.
pub fn drop_call(line: &[u8], call_id: &str) -> Result<Edited, edit::Unable> {
    drop_parts(line, |p| p.as_ref().is_some_and(|(w, id)| *w == "call" && id == call_id)).map_err(|e| {
        if e.0 == "the line has no such part" {
            edit::Unable("the line has no such call")
        } else {
            e
        }
    })
}

// Resume.

/// What a record is to Qwen Code's loader and to the resume walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields {
    /// `type`.
    pub ty: String,
    /// `subtype`.
    pub subtype: Option<String>,
    /// `uuid`.
    pub uuid: Option<String>,
    /// `parentUuid`.
    pub parent: Option<String>,
    /// `parentUuid` is a string or null (what the loader asks).
    pub parent_ok: bool,
    /// `sessionId`.
    pub session: Option<String>,
    /// A `chat_compression` record's `systemPayload.compressedHistory` is an array.
    pub compression: bool,
}

impl Fields {
    /// Reads a line; `Err` when it is not a JSON object.
    pub fn read(line: &[u8]) -> scan::Result<Self> {
        let mut f = Fields { ty: String::new(), subtype: None, uuid: None, parent: None, parent_ok: false, session: None, compression: false };
        let owned = |t: Option<RawStr<'_>>| t.map(|t| t.decode().into_owned());
        object_line(line, |s, k| {
            match &*k.key() {
                b"type" => f.ty = owned(s.opt_string()?).unwrap_or_default(),
                b"subtype" => f.subtype = owned(s.opt_string()?),
                b"uuid" => f.uuid = owned(s.opt_string()?),
                b"parentUuid" => {
                    f.parent_ok = matches!(s.peek(), Some(Kind::String | Kind::Null));
                    f.parent = owned(s.opt_string()?);
                }
                b"sessionId" => f.session = owned(s.opt_string()?),
                b"systemPayload" => {
                    s.opt_object(|s, k| {
                        match &*k.key() {
                            b"compressedHistory" => {
                                f.compression = s.peek() == Some(Kind::Array);
                                s.skip()?
                            }
                            _ => s.skip()?,
                        }
                        Ok(())
                    })?;
                }
                _ => s.skip()?,
            }
            Ok(())
        })?;
        f.compression &= f.ty == "system" && f.subtype.as_deref() == Some("chat_compression");
        Ok(f)
    }

    /// The loader keeps the record (`validateTranscriptRecord`: a non-empty `uuid` and
    /// `sessionId`, a `parentUuid` that is a string or null, a known type).
    fn valid(&self) -> bool {
        self.uuid.as_deref().is_some_and(|u| !u.is_empty())
            && self.parent_ok
            && self.session.as_deref().is_some_and(|s| !s.is_empty())
            && TYPES.contains(&self.ty.as_str())
    }

    fn conversation(&self) -> bool {
        !(self.ty == "system" && self.subtype.as_deref().is_some_and(|s| NOT_CONVERSATION.contains(&s)))
    }
}

/// The lines Qwen Code sends on resume, by index into `lines` (the file's lines, oldest
/// first, `None` for one its reader skips), in its order, and the index of the compression
/// that bounds them: the chain from the last conversation record by `parentUuid` (a uuid
/// written twice is its first record's, with the later ones as its fragments), cut at the
/// last `chat_compression` on it that has a `compressedHistory`. Nothing when the file holds
/// records of several sessions (the loader refuses it).
pub fn resume_order(lines: &[Option<Fields>]) -> (Vec<usize>, Option<usize>) {
    use std::collections::{HashMap, HashSet};
    let records: Vec<(usize, &Fields)> = lines.iter().enumerate().filter_map(|(i, f)| f.as_ref().filter(|f| f.valid()).map(|f| (i, f))).collect();
    let sessions: HashSet<&str> = records.iter().filter_map(|(_, f)| f.session.as_deref()).collect();
    if sessions.len() > 1 {
        return (Vec::new(), None);
    }
    let conv: Vec<(usize, &Fields)> = records.into_iter().filter(|(_, f)| f.conversation()).collect();
    let Some(&(_, leaf)) = conv.last() else { return (Vec::new(), None) };
    let mut fragments: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, f) in &conv {
        fragments.entry(f.uuid.as_deref().unwrap_or("")).or_default().push(*i);
    }
    let first = |u: &str| fragments.get(u).and_then(|v| v.first()).and_then(|&i| lines[i].as_ref());
    let mut chain: Vec<&str> = Vec::new();
    let mut seen = HashSet::new();
    let mut at = leaf.uuid.as_deref();
    while let Some(u) = at {
        if !seen.insert(u) {
            break;
        }
        let Some(rec) = first(u) else { break };
        chain.push(u);
        at = rec.parent.as_deref().filter(|p| !p.is_empty());
        if at.is_some_and(|p| first(p).is_none()) {
            break;
        }
    }
    chain.reverse();
    let path: Vec<usize> = chain.iter().flat_map(|u| fragments[u].iter().copied()).collect();
    let Some(c) = path.iter().rposition(|&i| lines[i].as_ref().is_some_and(|f| f.compression)) else { return (path, None) };
    (path[c..].to_vec(), Some(path[c]))
}

/// What one record is among the `Content`s Qwen Code sends: its `message` (spliced as written)
/// for a user, assistant or tool result record (a realtime one's never), a compression's
/// `compressedHistory` in its place, nothing for the other records.
pub fn records(line: &[u8], out: &mut impl FnMut(&[u8])) {
    let (mut ty, mut subtype) = (None, None);
    let walk = object_line(line, |s, k| {
        match &*k.key() {
            b"type" => ty = s.opt_string()?,
            b"subtype" => subtype = s.opt_string()?,
            _ => s.skip()?,
        }
        Ok(())
    });
    if walk.is_err() {
        return;
    }
    let (ty, sub) = (ty.map(|t| t.decode()).unwrap_or_default(), subtype.map(|t| t.decode()));
    match (ty.as_ref(), sub.as_deref()) {
        ("system", Some("chat_compression")) => {
            let Some(span) = edit::value_span(line, &[b"systemPayload", b"compressedHistory"]) else { return };
            for e in edit::elements(line, &span).unwrap_or_default() {
                out(&line[e]);
            }
        }
        ("user" | "assistant" | "tool_result", s) if s != Some("realtime_message") => {
            if let Some(span) = edit::value_span(line, &[b"message"]).filter(|s| line[s.start] == b'{') {
                out(&line[span]);
            }
        }
        _ => {}
    }
}

fn parts_of(v: &Value) -> &[Value] {
    v.get("parts").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn call_of(p: &Value) -> Option<(&str, &str)> {
    let c = p.get("functionCall")?;
    let id = c.get("id").and_then(Value::as_str).filter(|i| !i.is_empty())?;
    Some((id, c.get("name").and_then(Value::as_str).unwrap_or("unknown")))
}

fn response_id(p: &Value) -> Option<&str> {
    p.get("functionResponse")?.get("id").and_then(Value::as_str).filter(|i| !i.is_empty())
}

fn role(v: &Value) -> Option<&str> {
    v.get("role").and_then(Value::as_str)
}

/// A JSON value as JavaScript tests it (`!value` is false).
fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|n| n != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(_) | Value::Object(_)) => true,
    }
}

/// `isValidContent`: parts, none without keys, and no text part that is `""` (unless a
/// thought, signed, or a call).
fn valid_content(v: &Value) -> bool {
    let parts = parts_of(v);
    !parts.is_empty()
        && parts.iter().all(|p| {
            // `Object.keys(part).length === 0`.
            let empty = match p {
                Value::Object(o) => o.is_empty(),
                Value::String(s) => s.is_empty(),
                Value::Array(a) => a.is_empty(),
                Value::Null | Value::Bool(_) | Value::Number(_) => true,
            };
            let blank = p.get("text").and_then(Value::as_str) == Some("")
                && !truthy(p.get("thought"))
                && !truthy(p.get("thoughtSignature"))
                && p.get("functionCall").is_none();
            !empty && !blank
        })
}

/// The model's fail-fast placeholder answer (`isDegradedPlaceholderTurn`): text or thought
/// parts only, their text (thoughts left out) saying `(request timeout)`.
fn degraded(v: &Value) -> bool {
    let parts = parts_of(v);
    !parts.is_empty()
        && parts.iter().all(|p| p.get("functionCall").is_none() && (truthy(p.get("thought")) || p.get("text").is_some()))
        && parts.iter().filter(|p| !truthy(p.get("thought"))).filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<String>().trim()
            == "(request timeout)"
}

/// `extractCuratedHistory`, the history a request carries: a user `Content` right after another
/// joins it (their parts one list); a run of model `Content`s is kept only when every one of
/// them is valid ([`valid_content`]), its placeholder answers left out.
fn curate(history: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(history.len());
    let mut run: Vec<Value> = Vec::new();
    let end_run = |out: &mut Vec<Value>, run: &mut Vec<Value>| {
        if run.iter().all(valid_content) {
            out.extend(run.drain(..).filter(|v| !degraded(v)));
        }
        run.clear();
    };
    for v in history {
        if role(&v) == Some("user") {
            end_run(&mut out, &mut run);
            match out.last_mut().filter(|l| role(l) == Some("user")) {
                Some(last) => {
                    let mut parts = parts_of(last).to_vec();
                    parts.extend(parts_of(&v).iter().cloned());
                    last["parts"] = Value::Array(parts);
                }
                None => out.push(v),
            }
        } else {
            run.push(v);
        }
    }
    end_run(&mut out, &mut run);
    out
}

/// What Qwen Code does to the history before it sends it on resume:
/// `repairOrphanedToolUseTurns` (each model turn's calls answered in the user turn right after
/// it: a result found in a later user turn is moved there, a duplicate removed, a missing one
/// made, `{error: ORPHAN_REASON}`, before the turn's other parts; user turns left empty go),
/// then the history a request carries ([`curate`]: consecutive user turns joined, invalid model
/// turns left out), then what the OpenAI converter's `cleanOrphanedToolCalls` drops: a result
/// whose call is not in the model turn before it (and a user turn left with nothing).
pub fn transform(mut history: Vec<Value>) -> Vec<Value> {
    let mut i = 0;
    while i < history.len() {
        if role(&history[i]) != Some("model") {
            i += 1;
            continue;
        }
        let expected: Vec<(String, String)> = {
            let mut v: Vec<(String, String)> = Vec::new();
            for (id, name) in parts_of(&history[i]).iter().filter_map(call_of) {
                if let Some(e) = v.iter_mut().find(|(i, _)| i == id) {
                    e.1 = name.to_owned();
                } else {
                    v.push((id.to_owned(), name.to_owned()));
                }
            }
            v
        };
        if expected.is_empty() {
            i += 1;
            continue;
        }
        let adjacent = i + 1;
        let mut end = adjacent;
        // (turn, part) of each result for an expected id, in order.
        let mut found: Vec<(usize, usize, String)> = Vec::new();
        while end < history.len() && role(&history[end]) == Some("user") {
            for (p, part) in parts_of(&history[end]).iter().enumerate() {
                if let Some(id) = response_id(part) {
                    found.push((end, p, id.to_owned()));
                }
            }
            end += 1;
        }
        let (mut synth, mut hoisted, mut removals) = (Vec::new(), Vec::new(), Vec::new());
        for (id, name) in &expected {
            let mut locs = found.iter().filter(|(_, _, r)| r == id);
            match locs.next() {
                None => synth.push(json!({"functionResponse": {"id": id, "name": name, "response": {"error": ORPHAN_REASON}}})),
                Some(&(t, p, _)) => {
                    if t != adjacent {
                        hoisted.push(parts_of(&history[t])[p].clone());
                        removals.push((t, p));
                    }
                    removals.extend(locs.map(|&(t, p, _)| (t, p)));
                }
            }
        }
        if synth.is_empty() && removals.is_empty() {
            i += 1;
            continue;
        }
        removals.sort_unstable_by(|a, b| b.cmp(a));
        for (t, p) in removals {
            if let Some(parts) = history[t].get_mut("parts").and_then(Value::as_array_mut) {
                parts.remove(p);
            }
        }
        for j in (adjacent + 1..end).rev() {
            if parts_of(&history[j]).is_empty() {
                history.remove(j);
            }
        }
        let inject: Vec<Value> = synth.into_iter().chain(hoisted).collect();
        if !inject.is_empty() {
            match history.get_mut(adjacent).filter(|v| role(v) == Some("user")) {
                Some(next) => {
                    let mut parts = parts_of(next).to_vec();
                    let at = parts.iter().position(|p| p.get("functionResponse").is_none()).unwrap_or(parts.len());
                    parts.splice(at..at, inject);
                    next["parts"] = Value::Array(parts);
                }
                None => history.insert(adjacent, json!({"role": "user", "parts": inject})),
            }
        }
        i += 1;
    }
    let history = curate(history);
    // The converter: a result is sent only right after the model turn that made its call.
    let mut out: Vec<Value> = Vec::with_capacity(history.len());
    let mut calls: Vec<String> = Vec::new();
    for mut v in history {
        match role(&v) {
            Some("model") => {
                calls = parts_of(&v).iter().filter_map(call_of).map(|(id, _)| id.to_owned()).collect();
                out.push(v);
            }
            _ => {
                let had = parts_of(&v).len();
                if let Some(parts) = v.get_mut("parts").and_then(Value::as_array_mut) {
                    parts.retain(|p| response_id(p).is_none_or(|id| calls.iter().any(|c| c == id)));
                }
                if parts_of(&v).iter().any(|p| p.get("functionResponse").is_none()) {
                    calls.clear();
                }
                if had == 0 || !parts_of(&v).is_empty() {
                    out.push(v);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(line: &str) -> Message<'_> {
        match parse(line.as_bytes()).unwrap().entry {
            Entry::Message(m) => m,
            e => panic!("not a message: {e:?}"),
        }
    }

    const BASE: &str = r#""sessionId":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w","version":"0.24.4","gitBranch":"main""#;

    #[test]
    fn call_result_usage_and_compression() {
        let a = format!(
            r#"{{"uuid":"a","parentUuid":"u",{BASE},"type":"assistant","model":"qwen3","message":{{"role":"model","parts":[{{"text":"x"}},{{"functionCall":{{"id":"c1","name":"run_shell_command","args":{{"command":"ls"}}}}}}]}},"usageMetadata":{{"promptTokenCount":10,"candidatesTokenCount":4,"cachedContentTokenCount":3,"totalTokenCount":14}}}}"#
        );
        let p = parse(a.as_bytes()).unwrap();
        let u = p.usage.unwrap();
        assert_eq!((u.input, u.output, u.cache_read, u.key), (7, 4, 3, id_hash("a")));
        assert_eq!(p.model.as_deref(), Some("qwen3"));
        assert_eq!(p.node, Some(Node { id: id_hash("a"), parent: Some(id_hash("u")), sidechain: false }));
        let m = msg(&a);
        assert_eq!((m.role, m.calls[0].id.as_ref(), m.calls[0].args), (Role::Assistant, "c1", Args::Object));
        let r = format!(
            r#"{{"uuid":"r","parentUuid":"a",{BASE},"type":"tool_result","message":{{"role":"user","parts":[{{"functionResponse":{{"id":"c1","name":"n","response":{{"output":"ok"}}}}}}]}}}}"#
        );
        let m = msg(&r);
        assert_eq!((m.role, m.results[0].id.as_ref(), m.prompt), (Role::Tool, "c1", false));
        let u = format!(r#"{{"uuid":"u","parentUuid":null,{BASE},"type":"user","message":{{"role":"user","parts":[{{"text":"hi"}}]}}}}"#);
        assert!(msg(&u).prompt);
        let c = format!(
            r#"{{"uuid":"k","parentUuid":"r",{BASE},"type":"system","subtype":"chat_compression","systemPayload":{{"info":{{}},"compressedHistory":[{{"role":"user","parts":[{{"text":"sum"}}]}},{{"role":"model","parts":[{{"functionCall":{{"id":"c9","name":"n","args":{{}}}}}}]}}]}}}}"#
        );
        match parse(c.as_bytes()).unwrap().entry {
            Entry::Compaction { carried, keeps: None, .. } => assert_eq!(carried.iter().map(|c| c.id.as_ref()).collect::<Vec<_>>(), ["c9"]),
            e => panic!("{e:?}"),
        }
        let t = format!(r#"{{"uuid":"t","parentUuid":"r",{BASE},"type":"system","subtype":"ui_telemetry","systemPayload":{{}}}}"#);
        assert_eq!(parse(t.as_bytes()).unwrap().entry, Entry::Other);
        let v = format!(
            r#"{{"uuid":"v","parentUuid":"r",{BASE},"type":"user","subtype":"realtime_message","message":{{"role":"user","parts":[{{"text":"hi"}}]}}}}"#
        );
        assert_eq!(parse(v.as_bytes()).unwrap().entry, Entry::Other);
    }

    #[test]
    fn synthetic_result_reads_back_and_drops() {
        let a = format!(
            r#"{{"uuid":"a","parentUuid":"u",{BASE},"type":"assistant","message":{{"role":"model","parts":[{{"text":"x"}},{{"functionCall":{{"id":"c1","name":"n","args":{{}}}}}}]}}}}"#
        );
        let env = envelope(a.as_bytes());
        let call = CallRef { id: "c1".into(), tool: "n".into(), item: None };
        let line = synthetic_result_in(&env, &call, "not run", Some("a"), "n1");
        let m = msg(std::str::from_utf8(&line).unwrap());
        assert_eq!((m.role, m.results[0].id.as_ref()), (Role::Tool, "c1"));
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!((v["parentUuid"].as_str(), v["sessionId"].as_str(), v["uuid"].as_str()), (Some("a"), Some("s"), Some("n1")));
        assert_eq!(v["message"]["parts"][0]["functionResponse"]["response"]["error"], "not run");
        let Ok(Edited::Line(l)) = drop_call(a.as_bytes(), "c1") else { panic!() };
        assert!(msg(std::str::from_utf8(&l).unwrap()).calls.is_empty());
        assert!(drop_call(a.as_bytes(), "zz").is_err());
        assert_eq!(drop_results(&line, "c1", false), Ok(Edited::Gone));
        assert!(drop_results(&line, "c1", true).is_err());
    }

    #[test]
    fn transform_answers_open_calls_and_drops_orphans() {
        let h = vec![
            json!({"role":"user","parts":[{"text":"go"}]}),
            json!({"role":"model","parts":[{"functionCall":{"id":"c1","name":"n","args":{}}},{"functionCall":{"id":"c2","name":"m","args":{}}}]}),
            json!({"role":"user","parts":[{"functionResponse":{"id":"c1","name":"n","response":{}}}]}),
            json!({"role":"user","parts":[{"functionResponse":{"id":"zz","name":"n","response":{}}}]}),
        ];
        let out = transform(h);
        assert_eq!(out.len(), 3, "{out:?}");
        let ids: Vec<&str> = parts_of(&out[2]).iter().filter_map(response_id).collect();
        assert_eq!(ids, ["c1", "c2"]);
        assert_eq!(out[2]["parts"][1]["functionResponse"]["response"]["error"], ORPHAN_REASON);
    }

    #[test]
    fn curated_history_joins_user_turns_and_leaves_out_invalid_model_runs() {
        let h = vec![
            json!({"role":"user","parts":[{"text":"a"}]}),
            json!({"role":"user","parts":[{"text":"b"}]}),
            json!({"role":"model","parts":[{"text":"kept"}]}),
            json!({"role":"model","parts":[{"text":"(request timeout)"}]}),
            json!({"role":"user","parts":[{"text":"c"}]}),
            json!({"role":"model","parts":[{"text":"x"}]}),
            json!({"role":"model","parts":[{"text":""}]}),
            json!({"role":"user","parts":[{"text":"d"}]}),
        ];
        let out = curate(h);
        assert_eq!(
            out,
            [
                json!({"role":"user","parts":[{"text":"a"},{"text":"b"}]}),
                json!({"role":"model","parts":[{"text":"kept"}]}),
                json!({"role":"user","parts":[{"text":"c"},{"text":"d"}]}),
            ]
        );
        assert!(valid_content(&json!({"parts":[{"text":"","thought":true}]})));
        assert!(!valid_content(&json!({"parts":[{}]})) && !valid_content(&json!({"parts":[]})));
    }
}
