//! Pi sessions (`@mariozechner/pi-coding-agent`; OpenClaw and Oh-My-Pi write the same format):
//! `~/.pi/agent/sessions/--<cwd>--/<ts>_<uuid>.jsonl`.
//!
//! The first line is a `session` header (`{type, version, id, timestamp, cwd}`), then tree
//! entries `{type, id, parentId, timestamp, ...}`: `message` (an `AgentMessage` under
//! `message`), `compaction` (`summary`, `firstKeptEntryId`, `tokensBefore`), `branch_summary`,
//! `custom_message`, and entries that are never sent (`model_change`,
//! `thinking_level_change`, `custom`, `label`, `session_info`). Every entry hangs under the
//! entry that was the leaf when it was written; Pi's active branch, the one it resumes, is the
//! path from the file's last entry to the root (`SessionManager._buildIndex` takes the last
//! entry as the leaf). Version 1 files have no `id`/`parentId` (a linear list, which Pi migrates
//! and rewrites on load); version 3 renamed the `hookMessage` role to `custom`.
//!
//! What Pi sends (`buildSessionContext`, `convertToLlm`, then pi-ai's `transformMessages`):
//! `user`, `assistant` and `toolResult` messages as they are; `bashExecution` (unless
//! `excludeFromContext`), `custom`, a `custom_message` entry and a non-empty `branch_summary`
//! as user messages; an assistant message whose `stopReason` is `error` or `aborted` never.
//! A call is an assistant `{type: "toolCall", id, name, arguments}` block; its result is a
//! `{role: "toolResult", toolCallId}` message entry of its own.

use super::edit::{self, CallRef, Edited, TreeKeys};
use crate::transcript::model::{id_hash, Args, Call, Entry, Message, Node, Parsed, Role, ToolResult, Usage};
use crate::transcript::scan::{self, object_line, Kind, RawStr, Scanner};
use serde_json::{json, Map, Value};

/// Pi's tree members.
pub const TREE: TreeKeys = TreeKeys { id: "id", parent: "parentId" };

/// Entry types Pi writes that are never sent to the model.
pub const KNOWN_OTHER_TYPES: &[&str] = &["session", "model_change", "thinking_level_change", "custom", "label", "session_info"];

/// Every entry type Pi writes (detection looks for these).
pub const TYPES: &[&str] =
    &["session", "message", "compaction", "branch_summary", "custom_message", "model_change", "thinking_level_change", "custom", "label", "session_info"];

/// The fields of `message` we read.
#[derive(Default)]
struct Msg<'a> {
    role: Option<RawStr<'a>>,
    content: Content<'a>,
    tool_call_id: Option<RawStr<'a>>,
    model: Option<RawStr<'a>>,
    usage: Option<Usage>,
    /// `stopReason` is `error` or `aborted`.
    failed: bool,
    /// `excludeFromContext: true` (a `!!` bash execution).
    excluded: bool,
}

/// What a content value holds.
#[derive(Default)]
struct Content<'a> {
    calls: smallvec::SmallVec<[Call<'a>; 1]>,
    has_content: bool,
}

/// Parses one line (valid UTF-8, not blank). `Err` means the line is not a JSON object.
pub fn parse(line: &[u8]) -> scan::Result<Parsed<'_>> {
    let (mut ty, mut id, mut parent, mut summary, mut first_kept) = (None, None, None, None, None);
    let mut content = Content::default();
    let mut msg: Option<Msg<'_>> = None;
    object_line(line, |s, k| {
        match &*k.key() {
            b"type" => ty = s.opt_string()?,
            b"id" => id = s.opt_string()?,
            b"parentId" => parent = s.opt_string()?,
            b"summary" => summary = s.opt_string()?,
            b"firstKeptEntryId" => first_kept = s.opt_string()?,
            // A `custom_message` entry's own content.
            b"content" => content = read_content(s)?,
            b"message" => msg = read_message(s)?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    let ty = ty.map(|t| t.key()).unwrap_or_default();
    // The header has an `id` (the session's) but is not part of the tree.
    let node = id.filter(|_| &*ty != b"session").map(|i| Node { id: i.hash(), parent: parent.map(|p| p.hash()), sidechain: false });
    let of = |entry| Parsed { node, ..Parsed::of(entry) };
    let user = |has_content: bool| {
        let mut m = Message::new(Role::User);
        m.has_content = has_content;
        m.prompt = true;
        Entry::Message(m)
    };
    match &*ty {
        b"message" => {}
        b"compaction" => return Ok(of(Entry::Compaction { carried: Vec::new(), keeps: first_kept.map(|k| k.hash()), summary_follows: false })),
        // `buildSessionContext` sends a branch summary only when its summary is not empty.
        b"branch_summary" => return Ok(of(if summary.is_some_and(|s| !s.raw().is_empty()) { user(true) } else { Entry::Other })),
        b"custom_message" => return Ok(of(user(content.has_content))),
        t if KNOWN_OTHER_TYPES.iter().any(|k| k.as_bytes() == t) => return Ok(of(Entry::Other)),
        _ => return Ok(of(Entry::Unknown)),
    }
    let Some(msg) = msg else { return Ok(of(Entry::Other)) };
    let role = msg.role.map(|r| r.key()).unwrap_or_default();
    let entry = match &*role {
        b"user" | b"custom" | b"hookMessage" | b"branchSummary" | b"compactionSummary" => user(msg.content.has_content),
        b"bashExecution" if msg.excluded => Entry::Other,
        b"bashExecution" => user(true),
        b"toolResult" => {
            let mut m = Message::new(Role::Tool);
            m.has_content = true;
            if let Some(id) = msg.tool_call_id {
                m.results.push(ToolResult { id: id.decode() });
            }
            Entry::Message(m)
        }
        // pi-ai's `transformMessages` skips an errored or aborted answer entirely: its calls
        // are never sent, so a result for one of them answers nothing the API sees.
        b"assistant" if msg.failed => Entry::Other,
        b"assistant" => {
            let mut m = Message::new(Role::Assistant);
            m.has_content = msg.content.has_content;
            m.calls = msg.content.calls;
            Entry::Message(m)
        }
        _ => Entry::Unknown,
    };
    // Each assistant message reports its own usage once; an errored one was paid for too.
    let key = id.map_or_else(|| id_hash(&String::from_utf8_lossy(line)), |i| i.hash());
    let usage = msg.usage.map(|u| Usage { key, ..u });
    Ok(Parsed { usage, model: msg.model.map(|m| m.decode()), ..of(entry) })
}

fn read_message<'a>(s: &mut Scanner<'a>) -> scan::Result<Option<Msg<'a>>> {
    let mut m = Msg::default();
    let is_object = s.opt_object(|s, k| {
        match &*k.key() {
            b"role" => m.role = s.opt_string()?,
            b"content" => m.content = read_content(s)?,
            b"toolCallId" => m.tool_call_id = s.opt_string()?,
            b"model" => m.model = s.opt_string()?,
            b"usage" => m.usage = read_usage(s)?,
            b"stopReason" => m.failed = s.opt_string()?.is_some_and(|r| r.is("error") || r.is("aborted")),
            b"excludeFromContext" => m.excluded = s.opt_true()?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok(is_object.then_some(m))
}

/// pi-ai's `Usage`: `input` (not read from the cache), `output`, `cacheRead`, `cacheWrite`.
fn read_usage(s: &mut Scanner<'_>) -> scan::Result<Option<Usage>> {
    let mut u = Usage::default();
    let is_object = s.opt_object(|s, k| {
        match &*k.key() {
            b"input" => u.input = s.opt_count()?,
            b"output" => u.output = s.opt_count()?,
            b"cacheRead" => u.cache_read = s.opt_count()?,
            b"cacheWrite" => u.cache_creation = s.opt_count()?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok(is_object.then_some(u))
}

/// Message content: a string, or an array of `text`, `thinking`, `toolCall` and `image` blocks.
fn read_content<'a>(s: &mut Scanner<'a>) -> scan::Result<Content<'a>> {
    let mut c = Content::default();
    match s.peek() {
        Some(Kind::String) => c.has_content = !s.string()?.is_blank(),
        Some(Kind::Array) => s.array(|s| read_block(s, &mut c))?,
        _ => s.skip()?,
    }
    Ok(c)
}

fn read_block<'a>(s: &mut Scanner<'a>, c: &mut Content<'a>) -> scan::Result<()> {
    let (mut ty, mut id, mut name, mut args) = (None, None, None, None);
    let (mut text, mut thinking, mut signed) = (false, false, false);
    let is_object = s.opt_object(|s, k| {
        match &*k.key() {
            b"type" => ty = s.opt_string()?,
            b"id" => id = s.opt_string()?,
            b"name" => name = s.opt_string()?,
            b"arguments" => args = s.shape()?,
            b"text" => text = s.opt_string()?.is_some_and(|t| !t.is_blank()),
            b"thinking" => thinking = s.opt_string()?.is_some_and(|t| !t.is_blank()),
            b"thinkingSignature" => signed = s.opt_string()?.is_some_and(|t| !t.raw().is_empty()),
            _ => s.skip()?,
        }
        Ok(())
    })?;
    if !is_object {
        c.has_content = true;
        return Ok(());
    }
    match ty.map(|t| t.key()).as_deref() {
        Some(b"text") => c.has_content |= text,
        // transformMessages keeps a signed thinking block for the same model even when empty.
        Some(b"thinking") => c.has_content |= thinking || signed,
        Some(b"toolCall") => {
            c.has_content = true;
            if let Some(id) = id {
                let args = match args {
                    Some(Kind::Object) | None => Args::Object,
                    Some(_) => Args::NotObject,
                };
                c.calls.push(Call { id: id.decode(), name: name.map(|n| n.decode()).unwrap_or_default(), args, item: None });
            }
        }
        _ => c.has_content = true,
    }
    Ok(())
}

// Writing.

/// What a synthetic result copies from the entry it follows: the entry's `timestamp` and its
/// message's (Unix milliseconds), so that the inserted entry sorts with it.
pub fn envelope(follows: &[u8]) -> Map<String, Value> {
    let mut env = edit::members(follows, &["timestamp"]);
    if let Some(span) = edit::value_span(follows, &[b"message", b"timestamp"]) {
        if let Ok(v @ Value::Number(_)) = serde_json::from_slice::<Value>(&follows[span]) {
            env.insert("messageTimestamp".into(), v);
        }
    }
    env
}

/// A synthetic error result for `call`: a `message` entry holding a `toolResult` message, as
/// Pi's own agent writes one for a tool that failed (`isError: true`), hanging under `parent`
/// with `id` its own (empty: none, in a version 1 file without ids).
pub fn synthetic_result_in(env: &Map<String, Value>, call: &CallRef, text: &str, parent: Option<&str>, id: &str) -> Vec<u8> {
    let mut m = Map::new();
    m.insert("type".into(), json!("message"));
    if !id.is_empty() {
        m.insert("id".into(), json!(id));
        m.insert("parentId".into(), parent.map_or(Value::Null, |p| json!(p)));
    }
    if let Some(ts) = env.get("timestamp") {
        m.insert("timestamp".into(), ts.clone());
    }
    let mut msg = Map::new();
    msg.insert("role".into(), json!("toolResult"));
    msg.insert("toolCallId".into(), json!(call.id));
    msg.insert("toolName".into(), json!(call.tool));
    msg.insert("content".into(), json!([{"type": "text", "text": text}]));
    msg.insert("isError".into(), json!(true));
    if let Some(ts) = env.get("messageTimestamp") {
        msg.insert("timestamp".into(), ts.clone());
    }
    m.insert("message".into(), Value::Object(msg));
    edit::to_line(&Value::Object(m))
}

/// Removes a result: a `toolResult` message is its entry.
pub fn drop_results(keep_first: bool) -> Result<Edited, edit::Unable> {
    if keep_first {
        Err(edit::Unable("the entry holds a single result"))
    } else {
        Ok(Edited::Gone)
    }
}

/// Removes the call `call_id` (a `toolCall` block of `message.content`), editing only that
/// array; the entry goes when nothing else is left in it.
pub fn drop_call(line: &[u8], call_id: &str) -> Result<Edited, edit::Unable> {
    let span = edit::value_span(line, &[b"message", b"content"]).ok_or(edit::Unable("the message has no content"))?;
    let elems = edit::elements(line, &span).ok_or(edit::Unable("the message content is not an array"))?;
    let keep: Vec<bool> = elems.iter().map(|e| !is_call_block(&line[e.clone()], call_id)).collect();
    if keep.iter().all(|k| *k) {
        return Err(edit::Unable("the line has no such call"));
    }
    if !keep.iter().any(|k| *k) {
        return Ok(Edited::Gone);
    }
    Ok(Edited::Line(edit::splice(line, &span, &edit::array_of(line, &elems, &keep))))
}

fn is_call_block(elem: &[u8], call_id: &str) -> bool {
    edit::block_fields(elem).is_some_and(|f| f.ty.as_deref() == Some(b"toolCall") && f.id.as_deref() == Some(call_id))
}

/// What a Pi line is to the resume model and the canonical records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields {
    /// `type`.
    pub ty: String,
    /// `id` (the header's is the session's).
    pub id: Option<String>,
    /// `parentId`.
    pub parent: Option<String>,
    /// A compaction's `firstKeptEntryId`.
    pub first_kept: Option<String>,
    /// A version 1 compaction's `firstKeptEntryIndex` (an index among the file's entries,
    /// the header included).
    pub first_kept_index: Option<usize>,
    /// The `id` is a string (what Pi asks of a header).
    pub header_id: bool,
}

impl Fields {
    /// Reads a line; `Err` when it is not a JSON object.
    pub fn read(line: &[u8]) -> scan::Result<Self> {
        let mut f = Fields { ty: String::new(), id: None, parent: None, first_kept: None, first_kept_index: None, header_id: false };
        object_line(line, |s, k| {
            match &*k.key() {
                b"type" => f.ty = s.opt_string()?.map(|t| t.decode().into_owned()).unwrap_or_default(),
                b"id" => {
                    f.id = s.opt_string()?.map(|t| t.decode().into_owned());
                    f.header_id = f.id.is_some();
                }
                b"firstKeptEntryIndex" => f.first_kept_index = usize::try_from(s.opt_count()?).ok(),
                b"parentId" => f.parent = s.opt_string()?.map(|t| t.decode().into_owned()),
                b"firstKeptEntryId" => f.first_kept = s.opt_string()?.map(|t| t.decode().into_owned()),
                _ => s.skip()?,
            }
            Ok(())
        })?;
        Ok(f)
    }
}

/// The text before a compaction's summary in the user message Pi sends for it
/// (`COMPACTION_SUMMARY_PREFIX`, `messages.ts`).
pub const COMPACTION_PREFIX: &str = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
/// The text after it.
pub const COMPACTION_SUFFIX: &str = "\n</summary>";
/// The text before a branch summary (`BRANCH_SUMMARY_PREFIX`).
pub const BRANCH_PREFIX: &str = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n";
/// The text after it.
pub const BRANCH_SUFFIX: &str = "</summary>";
/// The result pi-ai's `transformMessages` sends for a call that has none when the next
/// assistant or user message comes (on resume, the new prompt).
pub const NO_RESULT: &str = "No result provided";

fn user_text(text: String) -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": text}]})
}

/// `bashExecutionToText` of `messages.ts`.
fn bash_text(m: &Map<String, Value>) -> String {
    let s = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("");
    let mut text = format!("Ran `{}`\n", s("command"));
    let output = s("output");
    if output.is_empty() {
        text.push_str("(no output)");
    } else {
        text.push_str(&format!("```\n{output}\n```"));
    }
    let code = m.get("exitCode").and_then(Value::as_i64);
    if m.get("cancelled").and_then(Value::as_bool) == Some(true) {
        text.push_str("\n\n(command cancelled)");
    } else if let Some(c) = code.filter(|c| *c != 0) {
        text.push_str(&format!("\n\nCommand exited with code {c}"));
    }
    if m.get("truncated").and_then(Value::as_bool) == Some(true) && !s("fullOutputPath").is_empty() {
        text.push_str(&format!("\n\n[Output truncated. Full output: {}]", s("fullOutputPath")));
    }
    text
}

/// Content as an array (`convertToLlm` turns a string content of a custom message into one
/// text block).
fn as_blocks(content: Option<&Value>) -> Value {
    match content {
        Some(Value::String(t)) => json!([{"type": "text", "text": t}]),
        Some(v) => v.clone(),
        None => json!([]),
    }
}

/// What one entry is among the messages Pi sends (`buildSessionContext`'s `appendMessage`, then
/// `convertToLlm`): the `message` of a `message` entry as it is (user, assistant, toolResult),
/// or the user message Pi makes of a bash execution, a custom message or a summary; `None` for
/// an entry that sends nothing. A compaction is its summary message (Pi sends it first).
pub fn record(line: &[u8]) -> Option<Value> {
    let Value::Object(v) = serde_json::from_slice::<Value>(line).ok()? else { return None };
    let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    match v.get("type").and_then(Value::as_str)? {
        "message" => {
            let Value::Object(m) = v.get("message")? else { return None };
            match m.get("role").and_then(Value::as_str)? {
                "user" | "assistant" | "toolResult" => Some(Value::Object(m.clone())),
                "bashExecution" if m.get("excludeFromContext").and_then(Value::as_bool) == Some(true) => None,
                "bashExecution" => Some(user_text(bash_text(m))),
                "custom" | "hookMessage" => Some(json!({"role": "user", "content": as_blocks(m.get("content"))})),
                "branchSummary" => Some(user_text(format!("{BRANCH_PREFIX}{}{BRANCH_SUFFIX}", m.get("summary").and_then(Value::as_str).unwrap_or("")))),
                "compactionSummary" => {
                    Some(user_text(format!("{COMPACTION_PREFIX}{}{COMPACTION_SUFFIX}", m.get("summary").and_then(Value::as_str).unwrap_or(""))))
                }
                _ => None,
            }
        }
        "custom_message" => Some(json!({"role": "user", "content": as_blocks(v.get("content"))})),
        "branch_summary" if !text("summary").is_empty() => Some(user_text(format!("{BRANCH_PREFIX}{}{BRANCH_SUFFIX}", text("summary")))),
        "compaction" => Some(user_text(format!("{COMPACTION_PREFIX}{}{COMPACTION_SUFFIX}", text("summary")))),
        _ => None,
    }
}

/// [`record`] as bytes: the `message` of a user, assistant or tool result entry as written
/// (spliced, never re-encoded: a number keeps its digits), the others as Pi builds them.
pub fn record_bytes(line: &[u8]) -> Option<std::borrow::Cow<'_, [u8]>> {
    let (mut ty, mut role) = (None, None);
    let _ = object_line(line, |s, k| {
        match &*k.key() {
            b"type" => ty = s.opt_string()?,
            b"message" => {
                s.opt_object(|s, k| {
                    match &*k.key() {
                        b"role" => role = s.opt_string()?,
                        _ => s.skip()?,
                    }
                    Ok(())
                })?;
            }
            _ => s.skip()?,
        }
        Ok(())
    });
    let as_is = ty.is_some_and(|t| t.is("message")) && role.is_some_and(|r| r.is("user") || r.is("assistant") || r.is("toolResult"));
    if as_is {
        if let Some(span) = edit::value_span(line, &[b"message"]) {
            return Some(std::borrow::Cow::Borrowed(&line[span]));
        }
    }
    record(line).map(|v| std::borrow::Cow::Owned(edit::to_line(&v)))
}

/// The lines Pi sends on resume, by index into `lines` (the file's lines, oldest first, `None`
/// for one Pi's loader skips: not JSON), in the order it sends them
/// (`SessionManager.setSessionFile` then `buildSessionContext`), and the index of the
/// compaction that bounds them. Nothing when the first readable line is not a `session` header
/// with a string `id`: Pi then starts a new session in the file.
pub fn resume_order(lines: &[Option<Fields>]) -> (Vec<usize>, Option<usize>) {
    let parsed: Vec<usize> = lines.iter().enumerate().filter_map(|(i, f)| f.as_ref().map(|_| i)).collect();
    let mut entries = lines.iter().enumerate().filter_map(|(i, f)| f.as_ref().map(|f| (i, f)));
    match entries.next() {
        Some((_, h)) if h.ty == "session" && h.header_id => {}
        _ => return (Vec::new(), None),
    }
    let tree: Vec<(usize, &Fields)> = entries.filter(|(_, f)| f.ty != "session").collect();
    let Some(&(leaf, _)) = tree.last() else { return (Vec::new(), None) };
    // Version 1: no ids, a linear list (Pi migrates it to a chain, each entry under the one
    // before, and `firstKeptEntryIndex` to the id of that entry).
    let linear = tree.iter().all(|(_, f)| f.id.is_none());
    let path: Vec<usize> = if linear {
        tree.iter().map(|(i, _)| *i).collect()
    } else {
        let by_id: std::collections::HashMap<&str, usize> = tree.iter().filter_map(|(i, f)| f.id.as_deref().map(|id| (id, *i))).collect();
        let mut path = vec![leaf];
        let mut seen = std::collections::HashSet::from([leaf]);
        let mut at = leaf;
        while let Some(next) = lines[at].as_ref().and_then(|f| f.parent.as_deref()).and_then(|p| by_id.get(p)) {
            if !seen.insert(*next) {
                break;
            }
            path.push(*next);
            at = *next;
        }
        path.reverse();
        path
    };
    let Some(c) = path.iter().rposition(|&i| lines[i].as_ref().is_some_and(|f| f.ty == "compaction")) else { return (path, None) };
    let comp = lines[path[c]].as_ref().expect("on the path");
    let first = if linear {
        comp.first_kept_index.and_then(|k| parsed.get(k)).and_then(|&line| path[..c].iter().position(|&i| i == line))
    } else {
        comp.first_kept.as_deref().and_then(|id| path[..c].iter().position(|&i| lines[i].as_ref().and_then(|f| f.id.as_deref()) == Some(id)))
    };
    let mut order = vec![path[c]];
    if let Some(first) = first {
        order.extend_from_slice(&path[first..c]);
    }
    order.extend_from_slice(&path[c + 1..]);
    (order, Some(path[c]))
}

/// What pi-ai's `transformMessages` does to the messages before any provider sees them (its
/// second pass; the first only changes a message for another model than the one that wrote
/// it): an assistant message whose `stopReason` is `error` or `aborted` is not sent, and the
/// calls of the last assistant message that have no result when the next assistant or user
/// message comes get a `"No result provided"` error result there. On resume the new prompt
/// comes next, so calls still open at the end get one too. A result whose call is not sent is
/// sent all the same.
pub fn transform(records: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::with_capacity(records.len());
    let mut pending: Vec<(String, String)> = Vec::new();
    let mut answered: std::collections::HashSet<String> = std::collections::HashSet::new();
    let flush = |out: &mut Vec<Value>, pending: &mut Vec<(String, String)>, answered: &mut std::collections::HashSet<String>| {
        for (id, name) in pending.drain(..) {
            if !answered.contains(&id) {
                out.push(json!({"role": "toolResult", "toolCallId": id, "toolName": name, "content": [{"type": "text", "text": NO_RESULT}], "isError": true}));
            }
        }
        answered.clear();
    };
    for r in records {
        match r.get("role").and_then(Value::as_str) {
            Some("assistant") => {
                flush(&mut out, &mut pending, &mut answered);
                if matches!(r.get("stopReason").and_then(Value::as_str), Some("error" | "aborted")) {
                    continue;
                }
                let calls: Vec<(String, String)> = r
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("toolCall"))
                    .map(|b| (b.get("id").and_then(Value::as_str).unwrap_or("").to_owned(), b.get("name").and_then(Value::as_str).unwrap_or("").to_owned()))
                    .collect();
                if !calls.is_empty() {
                    pending = calls;
                    answered.clear();
                }
                out.push(r);
            }
            Some("toolResult") => {
                if let Some(id) = r.get("toolCallId").and_then(Value::as_str) {
                    answered.insert(id.to_owned());
                }
                out.push(r);
            }
            Some("user") => {
                flush(&mut out, &mut pending, &mut answered);
                out.push(r);
            }
            _ => out.push(r),
        }
    }
    flush(&mut out, &mut pending, &mut answered);
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

    #[test]
    fn call_and_result() {
        let m = msg(
            r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"t","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls"}}],"model":"m","usage":{"input":3,"output":4,"cacheRead":5,"cacheWrite":6},"stopReason":"toolUse"}}"#,
        );
        assert_eq!(m.calls[0].id, "c1");
        assert_eq!(m.calls[0].args, Args::Object);
        let m = msg(
            r#"{"type":"message","id":"r1","parentId":"a1","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[],"isError":false}}"#,
        );
        assert_eq!((m.role, m.results[0].id.as_ref(), m.prompt), (Role::Tool, "c1", false));
        let p = parse(br#"{"type":"message","id":"a1","parentId":null,"message":{"role":"assistant","content":[],"model":"m","usage":{"input":3,"output":4,"cacheRead":5,"cacheWrite":6}}}"#).unwrap();
        let u = p.usage.unwrap();
        assert_eq!((u.input, u.output, u.cache_read, u.cache_creation, u.key), (3, 4, 5, 6, id_hash("a1")));
        assert_eq!(p.node, Some(Node { id: id_hash("a1"), parent: None, sidechain: false }));
    }

    #[test]
    fn what_pi_never_sends() {
        let aborted = parse(br#"{"type":"message","id":"a","parentId":"u","message":{"role":"assistant","content":[{"type":"toolCall","id":"c","name":"x","arguments":{}}],"stopReason":"aborted","usage":{"input":1}}}"#).unwrap();
        assert_eq!(aborted.entry, Entry::Other);
        assert!(aborted.usage.is_some(), "an aborted answer was paid for");
        let header = parse(br#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/w"}"#).unwrap();
        assert_eq!((header.entry, header.node), (Entry::Other, None));
        assert_eq!(
            parse(br#"{"type":"message","id":"b","parentId":"a","message":{"role":"bashExecution","excludeFromContext":true}}"#).unwrap().entry,
            Entry::Other
        );
        assert_eq!(parse(br#"{"type":"branch_summary","id":"b","parentId":"a","summary":""}"#).unwrap().entry, Entry::Other);
        assert_eq!(parse(br#"{"type":"future","id":"b","parentId":"a"}"#).unwrap().entry, Entry::Unknown);
        assert!(matches!(
            parse(br#"{"type":"compaction","id":"k","parentId":"a","summary":"s","firstKeptEntryId":"u"}"#).unwrap().entry,
            Entry::Compaction { .. }
        ));
    }

    #[test]
    fn synthetic_result_reads_back_and_drop_call() {
        let env = envelope(
            br#"{"type":"message","id":"a","parentId":"u","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"assistant","timestamp":1767225600000}}"#,
        );
        let call = CallRef { id: "c1".into(), tool: "bash".into(), item: None };
        let line = synthetic_result_in(&env, &call, "not run", Some("a"), "n1");
        let m = msg(std::str::from_utf8(&line).unwrap());
        assert_eq!(m.results[0].id, "c1");
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            (v["parentId"].as_str(), v["message"]["timestamp"].as_u64(), v["message"]["isError"].as_bool()),
            (Some("a"), Some(1767225600000), Some(true))
        );
        let two = br#"{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"toolCall","id":"c1","name":"n","arguments":{}}]}}"#;
        assert_eq!(
            drop_call(two, "c1"),
            Ok(Edited::Line(br#"{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"text","text":"x"}]}}"#.to_vec()))
        );
        assert!(drop_call(two, "zz").is_err());
    }
}
