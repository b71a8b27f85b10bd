//! Writing lines: the byte-level pieces every format's writer shares (spans of values, array
//! elements kept byte for byte, result and call blocks), and what an edit gives back.
//! Each format's own writing (its synthetic results, which blocks it removes where) lives in
//! its module beside its reading, chosen by the exhaustive matches of [`super::Format`].

use crate::transcript::scan::{self, Scanner};
use serde_json::{Map, Value};

/// Reads a line as a JSON object (lines that reach repair's edits are valid).
pub fn object(line: &[u8]) -> Option<Map<String, Value>> {
    match serde_json::from_slice::<Value>(line).ok()? {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

/// The members named in `keys` of a line's top-level object, parsed; the others are skipped
/// without being decoded. Empty when the line is not a JSON object. (The last of duplicate keys
/// wins, as in [`object`].)
pub fn members(line: &[u8], keys: &[&str]) -> Map<String, Value> {
    let mut found = Map::new();
    let walk = scan::object_line(line, |s, k| {
        let key = k.key();
        let Some(want) = keys.iter().find(|want| want.as_bytes() == &*key) else { return s.skip() };
        let raw = s.raw_value()?;
        let value = serde_json::from_slice(raw).map_err(|_| scan::Invalid { at: s.position() })?;
        found.insert((*want).to_owned(), value);
        Ok(())
    });
    if walk.is_err() {
        return Map::new();
    }
    found
}

/// Serializes an edited line (compact, key order kept).
pub fn to_line(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("a Value always serializes")
}

/// What a synthetic result needs to know about its call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRef {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub tool: String,
    /// Codex item type of the call (`function_call`, `custom_tool_call`, ...).
    pub item: Option<String>,
}

/// Why an edit cannot be made to a line: the line is not shaped the way the edit needs (the
/// checker read it one way, the edit finds something else). The line is then left as it is and
/// the finding reported as not repaired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unable(pub &'static str);

/// A line after an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edited {
    /// The edited line.
    Line(Vec<u8>),
    /// Nothing would be left of the message: the line goes.
    Gone,
}

/// A byte range of a line.
pub type Span = std::ops::Range<usize>;

/// The span of the value at `path` (object keys from the top level), as the adapters read it:
/// of duplicate keys the last counts, and a path through a value that is not an object leads
/// nowhere.
pub fn value_span(line: &[u8], path: &[&[u8]]) -> Option<Span> {
    fn walk(s: &mut Scanner<'_>, path: &[&[u8]], found: &mut Option<Span>) -> scan::Result<()> {
        s.object(|s, k| {
            if *k.key() != *path[0] {
                return s.skip();
            }
            if path.len() == 1 {
                let start = s.value_start();
                s.skip()?;
                *found = Some(start..s.position());
            } else {
                let mut inner = None;
                if s.peek() == Some(scan::Kind::Object) {
                    walk(s, &path[1..], &mut inner)?;
                } else {
                    s.skip()?;
                }
                *found = inner;
            }
            Ok(())
        })
    }
    let mut s = Scanner::new(line);
    let mut found = None;
    walk(&mut s, path, &mut found).ok()?;
    s.end().ok()?;
    found
}

/// The spans of the elements of the array at `span` (absolute), or `None` if it is no array.
pub fn elements(line: &[u8], span: &Span) -> Option<Vec<Span>> {
    let mut s = Scanner::new(&line[span.clone()]);
    if s.peek() != Some(scan::Kind::Array) {
        return None;
    }
    let mut v = Vec::new();
    s.array(|s| {
        let start = s.value_start();
        s.skip()?;
        v.push(span.start + start..span.start + s.position());
        Ok(())
    })
    .ok()?;
    Some(v)
}

/// A top-level member: its decoded key, its span (key through value) and its value's span.
pub struct Member {
    /// Its decoded key.
    pub key: Vec<u8>,
    /// Key through value.
    pub span: Span,
    /// The value.
    pub value: Span,
}

/// The top-level members of a line that is one JSON object.
pub fn members_spans(line: &[u8]) -> Option<Vec<Member>> {
    let mut s = Scanner::new(line);
    let mut v = Vec::new();
    s.object(|s, k| {
        // The raw key lies in the line, just after its opening quote.
        let key_start = k.raw().as_ptr() as usize - line.as_ptr() as usize - 1;
        let start = s.value_start();
        s.skip()?;
        v.push(Member { key: k.key().into_owned(), span: key_start..s.position(), value: start..s.position() });
        Ok(())
    })
    .ok()?;
    s.end().ok()?;
    Some(v)
}

/// The string fields of a content block the adapters read (`type`, `id`, `tool_use_id`; of
/// duplicates the last, and a value that is not a string is absent).
#[derive(Default)]
pub struct BlockFields {
    /// `type`.
    pub ty: Option<Vec<u8>>,
    /// `id`.
    pub id: Option<String>,
    /// `tool_use_id`.
    pub tool_use_id: Option<String>,
}

/// The string fields of a content block (`None`: not an object, or not readable).
pub fn block_fields(elem: &[u8]) -> Option<BlockFields> {
    let mut f = BlockFields::default();
    let mut s = Scanner::new(elem);
    if s.peek() != Some(scan::Kind::Object) {
        return None;
    }
    s.object(|s, k| {
        match &*k.key() {
            b"type" => f.ty = s.opt_string()?.map(|t| t.key().into_owned()),
            b"id" => f.id = s.opt_string()?.map(|t| t.decode().into_owned()),
            b"tool_use_id" => f.tool_use_id = s.opt_string()?.map(|t| t.decode().into_owned()),
            _ => s.skip()?,
        }
        Ok(())
    })
    .ok()?;
    Some(f)
}

/// Whether a content block is a `tool_result` for `call_id`.
pub fn is_result_block(elem: &[u8], call_id: &str) -> bool {
    block_fields(elem).is_some_and(|f| f.ty.as_deref() == Some(b"tool_result") && f.tool_use_id.as_deref() == Some(call_id))
}

/// Whether a content block is a `tool_use` with id `call_id`.
pub fn is_call_block(elem: &[u8], call_id: &str) -> bool {
    block_fields(elem).is_some_and(|f| f.ty.as_deref() == Some(b"tool_use") && f.id.as_deref() == Some(call_id))
}

/// An array made of the kept elements, byte for byte.
pub fn array_of(line: &[u8], elems: &[Span], keep: &[bool]) -> Vec<u8> {
    let mut out = vec![b'['];
    for (e, _) in elems.iter().zip(keep).filter(|(_, k)| **k) {
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(&line[e.clone()]);
    }
    out.push(b']');
    out
}

/// `line` with `span` replaced by `with`.
pub fn splice(line: &[u8], span: &Span, with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len() + with.len());
    out.extend_from_slice(&line[..span.start]);
    out.extend_from_slice(with);
    out.extend_from_slice(&line[span.end..]);
    out
}

/// Removes the result blocks (`tool_result`) for `call_id` from the array at `content` (a path
/// of object keys from the top level): all of them, or all but the first. Only that array is
/// edited; every other byte of the line stays as it was.
pub fn drop_result_blocks(line: &[u8], content: &[&[u8]], call_id: &str, keep_first: bool) -> Result<Edited, Unable> {
    let span = value_span(line, content).ok_or(Unable("the message has no content"))?;
    let elems = elements(line, &span).ok_or(Unable("the message content is not an array"))?;
    let mut seen = false;
    let keep: Vec<bool> = elems
        .iter()
        .map(|e| {
            if !is_result_block(&line[e.clone()], call_id) {
                return true;
            }
            let k = keep_first && !seen;
            seen = true;
            k
        })
        .collect();
    if keep.iter().all(|k| *k) {
        return Err(Unable("the line has no result to remove for the call"));
    }
    if !keep.iter().any(|k| *k) {
        return Ok(Edited::Gone);
    }
    Ok(Edited::Line(splice(line, &span, &array_of(line, &elems, &keep))))
}

/// [`drop_result_blocks`] for several calls at once, in one walk of the array: `drops` gives
/// each call id with whether its first result stays. `None` unless every call has a result
/// block there to remove or keep (then the caller removes them one call at a time, each
/// reporting what it could not do). The bytes are those the calls' removals one after the other
/// give: each rebuilds the array from its kept elements, byte for byte.
pub fn drop_result_blocks_many(line: &[u8], content: &[&[u8]], drops: &[(&str, bool)]) -> Option<Edited> {
    let span = value_span(line, content)?;
    let elems = elements(line, &span)?;
    let want: std::collections::HashMap<&str, bool> = drops.iter().copied().collect();
    if want.len() != drops.len() {
        return None;
    }
    let (mut seen, mut removed) = (std::collections::HashSet::new(), std::collections::HashSet::new());
    let keep: Vec<bool> = elems
        .iter()
        .map(|e| {
            let Some(f) = block_fields(&line[e.clone()]) else { return true };
            if f.ty.as_deref() != Some(b"tool_result") {
                return true;
            }
            let Some((&id, &keep_first)) = f.tool_use_id.as_deref().and_then(|id| want.get_key_value(id)) else { return true };
            let kept = keep_first && seen.insert(id);
            if !kept {
                removed.insert(id);
            }
            kept
        })
        .collect();
    // Every call loses a block, as each removal on its own must.
    if removed.len() != want.len() {
        return None;
    }
    if !keep.iter().any(|k| *k) {
        return Some(Edited::Gone);
    }
    Some(Edited::Line(splice(line, &span, &array_of(line, &elems, &keep))))
}

/// Where a message's calls sit in a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallLayout {
    /// `tool_use` blocks in `message.content` (Claude Code).
    InMessage,
    /// `tool_use` blocks in `content` and entries of `tool_calls` (OpenAI chat, Anthropic).
    TopLevel,
}

/// Removes the call `call_id` from a line laid out as `layout` (a `tool_use` block, a
/// `tool_calls` entry), editing only the arrays that hold it.
pub fn drop_call_blocks(layout: CallLayout, line: &[u8], call_id: &str) -> Result<Edited, Unable> {
    let chat = layout == CallLayout::TopLevel;
    let members = members_spans(line).ok_or(Unable("the line is not a JSON object"))?;
    let content_key: &[u8] = if chat { b"content" } else { b"message" };
    let last_content = members.iter().rposition(|m| m.key == content_key);
    let mut removed = false;
    let (mut calls_left, mut content_left) = (false, false);
    let mut kept: Vec<Vec<u8>> = Vec::new();
    // A member with its value replaced.
    let with_value = |m: &Member, value: &[u8]| [&line[m.span.start..m.value.start], value].concat();
    for (i, m) in members.iter().enumerate() {
        if chat && m.key == b"tool_calls" {
            // The adapter reads every `tool_calls` member (their entries add up).
            if let Some(elems) = elements(line, &m.value) {
                let keep: Vec<bool> = elems.iter().map(|e| block_fields(&line[e.clone()]).and_then(|f| f.id).as_deref() != Some(call_id)).collect();
                removed |= keep.iter().any(|k| !k);
                if keep.iter().any(|k| *k) {
                    calls_left = true;
                    kept.push(with_value(m, &array_of(line, &elems, &keep)));
                }
                continue;
            }
        }
        if Some(i) != last_content {
            kept.push(line[m.span.clone()].to_vec());
            continue;
        }
        // The content: `content` itself, or Claude Code's `message.content`.
        let content = if chat { Some(m.value.clone()) } else { value_span(line, &[b"message", b"content"]) };
        let Some(content) = content else {
            kept.push(line[m.span.clone()].to_vec());
            continue;
        };
        match elements(line, &content) {
            Some(elems) => {
                let keep: Vec<bool> = elems.iter().map(|e| !is_call_block(&line[e.clone()], call_id)).collect();
                removed |= keep.iter().any(|k| !k);
                content_left = keep.iter().any(|k| *k);
                // The content lies inside the member (Claude Code: inside `message`).
                let array = array_of(line, &elems, &keep);
                kept.push([&line[m.span.start..content.start], &array, &line[content.end..m.span.end]].concat());
            }
            None => {
                let mut s = Scanner::new(&line[content.clone()]);
                content_left = match s.peek() {
                    Some(scan::Kind::String) => s.string().is_ok_and(|t| !t.is_blank()),
                    Some(scan::Kind::Null) | None => false,
                    Some(_) => true,
                };
                kept.push(line[m.span.clone()].to_vec());
            }
        }
    }
    if !removed {
        return Err(Unable("the line has no such call"));
    }
    if !calls_left && !content_left {
        return Ok(Edited::Gone);
    }
    let mut out = vec![b'{'];
    for (i, m) in kept.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(m);
    }
    out.push(b'}');
    Ok(Edited::Line(out))
}

/// The names of a tree format's own id and parent id members (Claude Code `uuid` and
/// `parentUuid`, Pi `id` and `parentId`): what the repair's tree edits read and write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeKeys {
    /// The line's own id.
    pub id: &'static str,
    /// The id of the line it hangs under (null at a root).
    pub parent: &'static str,
}

/// The top-level id and parent id of a line (raw strings decoded; `None` for null or absent).
pub fn tree_ids(keys: TreeKeys, line: &[u8]) -> (Option<String>, Option<String>) {
    let (mut id, mut parent) = (None, None);
    let _ = scan::object_line(line, |s, k| {
        let key = k.key();
        if &*key == keys.id.as_bytes() {
            id = s.opt_string()?.map(|r| r.decode().into_owned());
        } else if &*key == keys.parent.as_bytes() {
            parent = s.opt_string()?.map(|r| r.decode().into_owned());
        } else {
            s.skip()?;
        }
        Ok(())
    });
    (id, parent)
}

/// Byte range of the top-level parent id value (the whole JSON value: a string with its quotes,
/// or `null`) and the parent it names. Of duplicate keys the last counts, as for every JSON
/// reader (and the checker's tree). A line that is not valid JSON ends the walk: what was found
/// before counts.
pub fn parent_span(keys: TreeKeys, line: &[u8]) -> Option<(Span, Option<std::borrow::Cow<'_, str>>)> {
    let mut s = Scanner::new(line);
    let mut found = None;
    let _ = s.object(|s, k| {
        if *k.key() != *keys.parent.as_bytes() {
            return s.skip();
        }
        let start = s.value_start();
        let value = s.opt_string()?;
        found = Some((start..s.position(), value.map(|v| v.decode())));
        Ok(())
    });
    found
}

/// Replaces the top-level parent id of a line with `parent` (an id or null); `None` when the
/// line has no parent member.
pub fn set_parent(keys: TreeKeys, line: &[u8], parent: Option<&str>) -> Option<Vec<u8>> {
    let (span, _) = parent_span(keys, line)?;
    let value = parent.map_or_else(|| "null".to_owned(), |p| serde_json::to_string(p).expect("string"));
    Some(splice(line, &span, value.as_bytes()))
}
