//! Claude Code's chain walk: which lines of a session it sends when it resumes.
//!
//! Claude Code (modelled on 2.1.332, its loader read from the bundle and every rule below
//! checked against the real agent with `tests/integration/peers/agent_oracle.py`) does not send
//! the file's lines in order. It loads every line that has a `uuid` into a map and then:
//!
//! 1. **Chooses a leaf.** First the file's last line in its map (of the main conversation,
//!    not a `file_snapshot`), climbed up its parents to the first `user` or `assistant` line —
//!    the timestamps do not matter ([`last_line_leaf`]). Only when that climb fails (a missing
//!    parent, a cycle) or `file_snapshot` lines end the file: a *terminal* line is one that no line names as its parent; from each,
//!    it climbs through non-message lines (progress, attachments, system records) to the first
//!    `user` or `assistant` line, which is a leaf when no message line hangs under it. Of the
//!    leaves that are messages of the main conversation (not `isSidechain`), the one with the
//!    newest `timestamp` wins (the first in the file on a tie). A rewind appends a prompt under
//!    an earlier line, so the abandoned branch is not sent. The map holds the lines of the
//!    loader's five types only (user, assistant, attachment, system, progress).
//! 2. **Walks the `parentUuid` chain** from the leaf back to a line whose parent is null (the
//!    first line, or a `compact_boundary`). A parent that is not in the map — a line that could
//!    not be read, or one that was never written — is **bridged** to the line of the same side
//!    (main or sidechain) not yet on the chain with the newest timestamp at or before the
//!    child's, if that is at most [`BRIDGE_MS`] older; otherwise the walk **stops there** and
//!    every line before it is silently left out of the resumed conversation. A cycle stops the
//!    walk too.
//! 3. **Recovers parallel calls** (`RRr`). Claude Code writes an API message with several
//!    blocks as one line per block, each under the one before, and each call's result under
//!    its own call, so the chain through the newest result passes only some of them. For each
//!    assistant message on the chain (same `message.id`), in chain order, every line of it not
//!    on the chain comes back, with the results that hang under a line of it (by parent; a
//!    result whose parent does not hold its calls also by `sourceToolAssistantUUID` and by call
//!    id). They are placed after the message's first line on the chain, merged by file order
//!    among the chain's lines up to the message's last one and the result, meta, attachment
//!    and system lines right after it: a break inside a message puts the line the chain
//!    reached first, and its earlier siblings after it.
//! 4. **Drops unresolved calls** (`Vce`): an assistant line none of whose calls has a result
//!    among the lines sent, but in the last assistant message when no user line but results
//!    follows it (whose open calls the agent answers as interrupted).
//! 5. **Drops whitespace-only and orphaned-thinking lines** (`Ger`, `Ker`, until nothing
//!    changes): a line of thinking blocks and then blank texts is dropped unless a line of its
//!    message has content (a block not thinking nor a blank text); then a line of only
//!    `thinking` / `redacted_thinking` blocks is dropped unless a line of its message that is
//!    still sent has another block.
//!
//! The sent lines go in that order (`Walk::order`). What is not modelled: the loader's
//! checkpoint leaf (`leafUuid` records), its storage-backend paths, the trailing runs of meta
//! and attachment lines the recovery also brings back, the `staysIfReplyIsCut` and
//! `resumedFromIncompleteThinking` exceptions of the thinking filter; lines without a
//! `timestamp` take no part in bridging (as in the agent, where they parse as NaN).
//!
//! Pure: lines in, a verdict per line out.

use crate::transcript::finding::{Finding, Kind};
use crate::transcript::model::id_hash;
use crate::transcript::pairing::branches::HashKeyed;
use serde_json::Value;

/// How much older than the orphaned line the line a missing parent is bridged to may be
/// (`eTr` in Claude Code 2.1.332's bundle: 5,000 ms).
pub const BRIDGE_MS: i64 = 5_000;

/// What the chain walk needs of one line (ids as [`id_hash`]es: a session's lines since its
/// last compaction are held at once).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// `uuid`; a line without one is not in the map (and so is never sent).
    pub uuid: Option<u64>,
    /// `parentUuid` (`None` for null or absent).
    pub parent: Option<u64>,
    /// `timestamp`, in milliseconds since the epoch, when it parses.
    pub time: Option<i64>,
    /// `isSidechain`.
    pub sidechain: bool,
    /// A `user` or `assistant` line, or a `system` `local_command` one (sent as user text).
    pub message: bool,
    /// A `user` line.
    pub user: bool,
    /// An `assistant` line.
    pub assistant: bool,
    /// An assistant line's `message.id`.
    pub message_id: Option<u64>,
    /// The ids of its `tool_use` blocks.
    pub calls: Vec<u64>,
    /// The `tool_use_id`s of its `tool_result` blocks.
    pub results: Vec<u64>,
    /// A user line's `sourceToolAssistantUUID`: the assistant line whose call it answers.
    pub source: Option<u64>,
    /// A `compact_boundary` record: the resumed conversation starts after the last one.
    pub boundary: bool,
    /// A `system` `file_snapshot` line (`fH` in Claude Code 2.1.332's bundle): never the
    /// loader's last line, and never the line a missing parent is bridged to.
    pub file_snapshot: bool,
    /// A line the agent's parallel-call recovery passes over after the lines of an assistant
    /// message (`WMe` in Claude Code 2.1.332's bundle, but for the message's own lines): a
    /// user line that is `isMeta` or holds a `tool_result` block, an `attachment`, a `system`
    /// line but a compact boundary.
    pub follows: bool,
    /// An assistant line whose content is blocks, at least one, all `thinking` or
    /// `redacted_thinking`.
    pub thinking_only: bool,
    /// An assistant line whose content has a block that is neither.
    pub said: bool,
    /// An assistant line with a block the agent counts as content (`sRe`): not thinking, and
    /// not a text that is blank, "(no content)" or "[Empty text removed]".
    pub real: bool,
    /// An assistant line of thinking blocks followed by such texts only, at least one (`KJe`,
    /// a whitespace-only message): the agent drops it unless a line of its message is `real`.
    pub blank: bool,
}

/// Whether a block type is a thinking block (`qce` in Claude Code 2.1.332's bundle).
fn is_thinking(ty: Option<&str>) -> bool {
    matches!(ty, Some("thinking" | "redacted_thinking"))
}

/// Whether a text block's text says nothing to the agent (`sRe`'s test: blank once trimmed, or
/// its own placeholders for an empty message).
fn blank_text(text: Option<&str>) -> bool {
    text.is_none_or(|t| matches!(t.trim(), "" | "(no content)" | "[Empty text removed]"))
}

/// A content block, as the walk sees it.
#[derive(Clone, Copy, PartialEq)]
enum Block {
    /// `tool_use`, with the hash of its id.
    Use(Option<u64>),
    /// `tool_result`, with the hash of the id of the call it answers.
    Result(Option<u64>),
    Thinking,
    /// `text`: whether it says nothing ([`blank_text`]).
    Text {
        blank: bool,
    },
    Other,
}

/// The fields of a line the three readers take out of it, each its own way.
#[derive(Default)]
struct Fields<'a> {
    ty: Option<&'a str>,
    subtype: Option<&'a str>,
    uuid: Option<u64>,
    parent: Option<u64>,
    time: Option<i64>,
    sidechain: bool,
    meta: bool,
    source: Option<u64>,
    message_id: Option<u64>,
    blocks: Vec<Block>,
}

impl Fields<'_> {
    /// The node: one set of rules for the three readers.
    fn node(self) -> Node {
        let ty = self.ty;
        let system = ty == Some("system");
        let local = system && self.subtype == Some("local_command");
        let boundary = system && self.subtype == Some("compact_boundary");
        let message = matches!(ty, Some("user" | "assistant")) || local;
        let user = ty == Some("user");
        let assistant = ty == Some("assistant");
        let blocks = &self.blocks;
        let thinking = blocks.iter().filter(|b| **b == Block::Thinking).count();
        let calls = if message { blocks.iter().filter_map(|b| if let Block::Use(id) = b { *id } else { None }).collect() } else { Vec::new() };
        let results: Vec<u64> = if message { blocks.iter().filter_map(|b| if let Block::Result(id) = b { *id } else { None }).collect() } else { Vec::new() };
        let has_result = blocks.iter().any(|b| matches!(b, Block::Result(_)));
        // `KJe`: thinking blocks, then texts that say nothing, at least one.
        let blank = {
            let mut texts = false;
            let mut ok = true;
            for b in blocks {
                match b {
                    Block::Thinking if !texts => {}
                    Block::Text { blank: true } => texts = true,
                    _ => {
                        ok = false;
                        break;
                    }
                }
            }
            ok && texts
        };
        Node {
            // The loader's map holds the lines of its five transcript types only (`C3` in
            // Claude Code 2.1.332's bundle: user, assistant, attachment, system, progress):
            // a line of another type that has a `uuid` (a record of a later version, a
            // `summary`, a `queue-operation`) is not in it, so a line under it has a missing
            // parent (measured: context case 0004, and the same file with that line's type
            // each of the others).
            uuid: self.uuid.filter(|_| matches!(ty, Some("user" | "assistant" | "attachment" | "system" | "progress"))),
            parent: self.parent,
            time: self.time,
            sidechain: self.sidechain,
            message,
            user,
            assistant,
            message_id: if assistant { self.message_id } else { None },
            calls,
            results,
            source: if user { self.source } else { None },
            boundary,
            file_snapshot: system && self.subtype == Some("file_snapshot"),
            follows: (user && (self.meta || has_result)) || ty == Some("attachment") || (system && !boundary),
            thinking_only: assistant && !blocks.is_empty() && thinking == blocks.len(),
            said: assistant && thinking < blocks.len(),
            real: assistant && blocks.iter().any(|b| !matches!(b, Block::Thinking | Block::Text { blank: true })),
            blank: assistant && blank,
        }
    }
}

fn parse_time(t: Option<&str>) -> Option<i64> {
    t.and_then(crate::transcript::timestamp::Timestamp::parse_rfc3339).map(|t| t.unix_millis())
}

impl Node {
    /// Reads a line; `None` when it is not a JSON object.
    pub fn read(line: &[u8]) -> Option<Node> {
        Self::read_scan(line).or_else(|| Self::read_fields(line)).or_else(|| Self::read_value(line))
    }

    /// The fastest path, with check's own scanner (the whole line validated, only the fields
    /// the walk needs decoded): `None` for anything it does not take as it comes — a key given
    /// twice, a field of another type, an escaped or non-ASCII key or needed string, a line
    /// that is not valid JSON — which the serde paths then decide, so that it never differs
    /// from them (a property test below holds it to that).
    fn read_scan(line: &[u8]) -> Option<Node> {
        use crate::transcript::scan::{object_line, Invalid, Kind as J, RawStr, Scanner};
        /// An id or a word the walk reads: plain ASCII only (anything else goes the slow way).
        fn plain(s: RawStr<'_>) -> Result<&[u8], Invalid> {
            if s.is_escaped() || !s.raw().is_ascii() {
                return Err(Invalid { at: 0 });
            }
            Ok(s.raw())
        }
        fn opt_plain<'a>(sc: &mut Scanner<'a>) -> Result<Option<&'a [u8]>, Invalid> {
            match sc.peek() {
                Some(J::String) => plain(sc.string()?).map(Some),
                Some(J::Null) => sc.skip().map(|_| None),
                _ => Err(Invalid { at: sc.position() }),
            }
        }
        fn opt_bool(sc: &mut Scanner<'_>) -> Result<Option<bool>, Invalid> {
            match sc.peek() {
                Some(J::Bool) => sc.boolean().map(Some),
                Some(J::Null) => sc.skip().map(|_| None),
                _ => Err(Invalid { at: sc.position() }),
            }
        }
        fn once(seen: &mut u32, bit: u32) -> Result<(), Invalid> {
            if *seen & bit != 0 {
                return Err(Invalid { at: 0 });
            }
            *seen |= bit;
            Ok(())
        }
        /// A needed string field, given once.
        fn field<'a>(sc: &mut Scanner<'a>, seen: &mut u32, bit: u32, into: &mut Option<&'a [u8]>) -> Result<(), Invalid> {
            once(seen, bit)?;
            *into = opt_plain(sc)?;
            Ok(())
        }
        let hash = |b: &[u8]| xxhash_rust::xxh3::xxh3_64(b);
        let (mut ty, mut subtype, mut uuid, mut parent, mut time, mut side, mut meta, mut source) = (None, None, None, None, None, None, None, None);
        let (mut message_id, mut blocks): (Option<&[u8]>, Vec<Block>) = (None, Vec::new());
        let mut seen = 0u32;
        object_line(line, |sc, key| {
            let key = plain(key)?;
            match key {
                b"type" => field(sc, &mut seen, 1, &mut ty)?,
                b"subtype" => field(sc, &mut seen, 2, &mut subtype)?,
                b"uuid" => field(sc, &mut seen, 4, &mut uuid)?,
                b"parentUuid" => field(sc, &mut seen, 8, &mut parent)?,
                b"timestamp" => field(sc, &mut seen, 16, &mut time)?,
                b"sourceToolAssistantUUID" => field(sc, &mut seen, 128, &mut source)?,
                b"isSidechain" => {
                    once(&mut seen, 32)?;
                    side = opt_bool(sc)?;
                }
                b"isMeta" => {
                    once(&mut seen, 256)?;
                    meta = opt_bool(sc)?;
                }
                b"message" => {
                    once(&mut seen, 64)?;
                    match sc.peek() {
                        Some(J::Null) => return sc.skip(),
                        Some(J::Object) => {}
                        _ => return Err(Invalid { at: sc.position() }),
                    }
                    let mut mseen = 0u32;
                    sc.object(|sc, key| match plain(key)? {
                        b"id" => field(sc, &mut mseen, 1, &mut message_id),
                        b"content" => {
                            once(&mut mseen, 2)?;
                            if sc.peek() != Some(J::Array) {
                                return sc.skip();
                            }
                            sc.array(|sc| {
                                if sc.peek() != Some(J::Object) {
                                    return Err(Invalid { at: sc.position() });
                                }
                                let (mut bseen, mut bty, mut id, mut use_id, mut text_blank) = (0u32, None, None, None, true);
                                sc.object(|sc, key| match plain(key)? {
                                    b"type" => field(sc, &mut bseen, 1, &mut bty),
                                    b"id" => field(sc, &mut bseen, 2, &mut id),
                                    b"tool_use_id" => field(sc, &mut bseen, 4, &mut use_id),
                                    b"text" => {
                                        once(&mut bseen, 8)?;
                                        match sc.peek() {
                                            Some(J::String) => {
                                                let s = sc.string()?;
                                                let raw = s.raw();
                                                let placeholder = |p: &[u8]| raw.windows(p.len()).any(|w| w == p);
                                                text_blank = s.is_blank()
                                                    || ((placeholder(b"(no content)") || placeholder(b"[Empty text removed]"))
                                                        && blank_text(Some(&s.decode())));
                                                Ok(())
                                            }
                                            Some(J::Null) => sc.skip(),
                                            _ => Err(Invalid { at: sc.position() }),
                                        }
                                    }
                                    _ => sc.skip(),
                                })?;
                                blocks.push(match bty {
                                    Some(b"tool_use") => Block::Use(id.map(hash)),
                                    Some(b"tool_result") => Block::Result(use_id.map(hash)),
                                    Some(b"thinking" | b"redacted_thinking") => Block::Thinking,
                                    Some(b"text") => Block::Text { blank: text_blank },
                                    _ => Block::Other,
                                });
                                Ok(())
                            })
                        }
                        _ => sc.skip(),
                    })?;
                }
                _ => sc.skip()?,
            }
            Ok(())
        })
        .ok()?;
        // ASCII checked above: the bytes are a str.
        fn word(b: Option<&[u8]>) -> Option<&str> {
            b.and_then(|b| std::str::from_utf8(b).ok())
        }
        Some(
            Fields {
                ty: word(ty),
                subtype: word(subtype),
                uuid: uuid.map(hash),
                parent: parent.map(hash),
                time: parse_time(word(time)),
                sidechain: side.unwrap_or(false),
                meta: meta.unwrap_or(false),
                source: source.map(hash),
                message_id: message_id.map(hash),
                blocks,
            }
            .node(),
        )
    }

    /// The fast path: only the fields the walk needs, the rest skipped unbuilt. `None` for what
    /// it cannot take (a key given twice, a field of another type): [`Node::read_value`] decides.
    fn read_fields(line: &[u8]) -> Option<Node> {
        use serde::Deserialize;
        use std::borrow::Cow;
        #[derive(Deserialize)]
        struct RawBlock<'a> {
            #[serde(rename = "type", borrow)]
            ty: Option<Cow<'a, str>>,
            #[serde(borrow)]
            id: Option<Cow<'a, str>>,
            #[serde(borrow)]
            tool_use_id: Option<Cow<'a, str>>,
            #[serde(borrow)]
            text: Option<Cow<'a, str>>,
        }
        #[derive(Deserialize)]
        struct Message<'a> {
            #[serde(borrow)]
            id: Option<Cow<'a, str>>,
            #[serde(borrow)]
            content: Option<&'a serde_json::value::RawValue>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Line<'a> {
            #[serde(rename = "type", borrow)]
            ty: Option<Cow<'a, str>>,
            #[serde(borrow)]
            subtype: Option<Cow<'a, str>>,
            #[serde(borrow)]
            uuid: Option<Cow<'a, str>>,
            #[serde(borrow)]
            parent_uuid: Option<Cow<'a, str>>,
            #[serde(borrow)]
            timestamp: Option<Cow<'a, str>>,
            is_sidechain: Option<bool>,
            is_meta: Option<bool>,
            #[serde(rename = "sourceToolAssistantUUID", borrow)]
            source: Option<Cow<'a, str>>,
            #[serde(borrow)]
            message: Option<Message<'a>>,
        }
        let l: Line<'_> = serde_json::from_slice(line).ok()?;
        let raw: Vec<RawBlock<'_>> = match l.message.as_ref().and_then(|m| m.content) {
            Some(raw) if raw.get().starts_with('[') => serde_json::from_str(raw.get()).ok()?,
            _ => Vec::new(),
        };
        let blocks = raw
            .iter()
            .map(|b| match b.ty.as_deref() {
                Some("tool_use") => Block::Use(b.id.as_deref().map(id_hash)),
                Some("tool_result") => Block::Result(b.tool_use_id.as_deref().map(id_hash)),
                t if is_thinking(t) => Block::Thinking,
                Some("text") => Block::Text { blank: blank_text(b.text.as_deref()) },
                _ => Block::Other,
            })
            .collect();
        Some(
            Fields {
                ty: l.ty.as_deref(),
                subtype: l.subtype.as_deref(),
                uuid: l.uuid.as_deref().map(id_hash),
                parent: l.parent_uuid.as_deref().map(id_hash),
                time: parse_time(l.timestamp.as_deref()),
                sidechain: l.is_sidechain.unwrap_or(false),
                meta: l.is_meta.unwrap_or(false),
                source: l.source.as_deref().map(id_hash),
                message_id: l.message.as_ref().and_then(|m| m.id.as_deref()).map(id_hash),
                blocks,
            }
            .node(),
        )
    }

    /// The slow path, for every JSON object: the whole line as a value (a key given twice: the
    /// last counts, as in the agent's `JSON.parse`).
    fn read_value(line: &[u8]) -> Option<Node> {
        let v: Value = serde_json::from_slice(line).ok()?;
        let o = v.as_object()?;
        let s = |k: &str| o.get(k).and_then(Value::as_str).map(id_hash);
        let msg = o.get("message");
        let content = msg.and_then(|m| m.get("content")).and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        let str_of = |b: &Value, k: &str| b.get(k).and_then(Value::as_str).map(id_hash);
        let blocks = content
            .iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("tool_use") => Block::Use(str_of(b, "id")),
                Some("tool_result") => Block::Result(str_of(b, "tool_use_id")),
                t if is_thinking(t) => Block::Thinking,
                Some("text") => Block::Text { blank: blank_text(b.get("text").and_then(Value::as_str)) },
                _ => Block::Other,
            })
            .collect();
        Some(
            Fields {
                ty: o.get("type").and_then(Value::as_str),
                subtype: o.get("subtype").and_then(Value::as_str),
                uuid: s("uuid"),
                parent: s("parentUuid"),
                time: parse_time(o.get("timestamp").and_then(Value::as_str)),
                sidechain: o.get("isSidechain").and_then(Value::as_bool).unwrap_or(false),
                meta: o.get("isMeta").and_then(Value::as_bool).unwrap_or(false),
                source: s("sourceToolAssistantUUID"),
                message_id: msg.and_then(|m| m.get("id")).and_then(Value::as_str).map(id_hash),
                blocks,
            }
            .node(),
        )
    }
}

/// Where the walk stopped short of the start: the line whose parent could be neither found nor
/// bridged, and the message lines before it that the resumed conversation therefore lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Break {
    /// Index (into the walk's input) of the line whose parent is missing.
    pub at: usize,
    /// The parent it names ([`id_hash`]).
    pub parent: u64,
    /// Main-conversation message lines before `at` that are not sent, oldest first.
    pub lost: Vec<usize>,
}

/// The verdict of a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walk {
    /// Per input line: whether the agent sends it.
    pub sent: Vec<bool>,
    /// The lines it sends, in the order it sends them (indices into the walk's input; lines
    /// that are not messages included).
    pub order: Vec<usize>,
    /// Where a missing parent cut the history, if one did.
    pub broken: Option<Break>,
    /// Lines whose missing parent was bridged (index of the line, and of the line it was bridged to).
    pub bridged: Vec<(usize, usize)>,
}

/// Walks `nodes` (a session's lines, in file order; `None` for a line that could not be read)
/// as Claude Code does on resume. See the module docs. `side` is the `isSidechain` of the
/// conversation resumed: `false` for a session, `true` for a subagent's own file (every line
/// of it is a sidechain; Claude Code picks its leaf among them).
pub fn walk(nodes: &[Option<Node>], side: bool) -> Walk {
    let n = nodes.len();
    let sent = vec![false; n];
    let node = |i: usize| nodes[i].as_ref();
    // The map: a uuid names the last line that has it (a later line overwrites), in the order
    // of its first appearance. (Sets of lines are vectors of flags, sets of ids are keyed by
    // the ids' own hashes: a session of a million lines is walked in well under a second.)
    let mut by_uuid: HashKeyed<usize> = HashKeyed::default();
    let mut order: Vec<u64> = Vec::new();
    for (i, nd) in nodes.iter().enumerate() {
        if let Some(u) = nd.as_ref().and_then(|x| x.uuid) {
            if by_uuid.insert(u, i).is_none() {
                order.push(u);
            }
        }
    }
    let entries: Vec<usize> = order.iter().map(|u| by_uuid[u]).collect();
    // 1. The leaf.
    let parents: Ids = entries.iter().filter_map(|&i| node(i)?.parent).collect();
    let message_parents: Ids = entries.iter().filter_map(|&i| node(i).filter(|x| x.message)?.parent).collect();
    let mut leaves = vec![false; n];
    // The climb of each terminal line, stamped with the terminal's number (a cycle ends it).
    let mut climbed = vec![usize::MAX; n];
    for (k, &t) in entries.iter().filter(|&&i| node(i).and_then(|x| x.uuid).is_some_and(|u| !parents.contains(&u))).enumerate() {
        let mut at = Some(t);
        while let Some(i) = at {
            if climbed[i] == k {
                break;
            }
            climbed[i] = k;
            let Some(x) = node(i) else { break };
            if x.message {
                if x.uuid.is_some_and(|u| !message_parents.contains(&u)) {
                    leaves[i] = true;
                }
                break;
            }
            at = x.parent.and_then(|p| by_uuid.get(&p).copied());
        }
    }
    drop(climbed);
    let last = last_line_leaf(nodes, &|u| by_uuid.get(&u).copied(), side);
    let newest = |pick: &dyn Fn(&Node) -> bool| -> Option<usize> {
        let mut best: Option<(usize, i64)> = None;
        for &i in &entries {
            let Some(x) = node(i).filter(|x| pick(x)) else { continue };
            let t = x.time.unwrap_or(i64::MIN);
            if best.is_none_or(|(_, b)| t > b || b == i64::MIN) {
                best = Some((i, t));
            }
        }
        best.map(|(i, _)| i)
    };
    let leaf = if last.is_some() {
        last
    } else if !leaves.contains(&true) {
        newest(&|x| x.sidechain == side)
    } else {
        newest(&|x| x.message && x.sidechain == side && x.uuid.is_some_and(|u| leaves[by_uuid[&u]]))
    };
    let Some(leaf) = leaf else { return Walk { sent, order: Vec::new(), broken: None, bridged: Vec::new() } };
    // 2. The chain.
    let mut on = vec![false; n];
    let mut on_list = Vec::new();
    let mut bridged = Vec::new();
    let mut broken = None;
    let mut by_time: [Option<ByTime>; 2] = [None, None];
    let mut at = Some(leaf);
    while let Some(i) = at {
        if on[i] {
            break;
        }
        on[i] = true;
        on_list.push(i);
        let x = node(i).expect("entries are read lines");
        let Some(p) = x.parent else { break };
        at = match by_uuid.get(&p).copied().filter(|&j| !on[j]) {
            Some(j) => Some(j),
            None => {
                let index = by_time[usize::from(x.sidechain)].get_or_insert_with(|| ByTime::new(nodes, &entries, x.sidechain));
                let to = index.bridge(&on, x);
                match to {
                    Some(j) => bridged.push((i, j)),
                    None if !by_uuid.contains_key(&p) => broken = Some((i, p)),
                    None => {}
                }
                to
            }
        };
    }
    finish(nodes, &entries, &|u| by_uuid.get(&u).copied(), on_list, side, broken, bridged)
}

/// Steps 3 and 4 of the walk, from the chain (`chain`, leaf first; `broken`, where it stopped
/// at a missing parent; `bridged`, its bridges): the parallel calls recovered, in the agent's
/// order, then what its filters leave out.
fn finish(
    nodes: &[Option<Node>],
    entries: &[usize],
    lookup: &dyn Fn(u64) -> Option<usize>,
    mut chain: Vec<usize>,
    side: bool,
    broken: Option<(usize, u64)>,
    bridged: Vec<(usize, usize)>,
) -> Walk {
    let n = nodes.len();
    let node = |i: usize| nodes[i].as_ref().expect("entries are read lines");
    chain.reverse();
    let mut order = recover(nodes, entries, lookup, &chain);
    let mut sent = vec![false; n];
    for &i in &order {
        sent[i] = true;
    }
    let broken = broken.map(|(at, parent)| Break {
        at,
        parent,
        lost: (0..at).filter(|&i| !sent[i] && nodes[i].as_ref().is_some_and(|x| x.message && x.sidechain == side)).collect(),
    });
    // Unresolved calls (`Vce`): an assistant line none of whose calls has a result among the
    // lines sent is not sent (a call the session abandoned, which Claude Code 2.0.77 leaves on
    // a side branch; one whose result a break left out), but in the last assistant message,
    // whose open calls get the agent's interrupted result.
    let answered: Ids = order.iter().map(|&i| node(i)).filter(|x| x.user).flat_map(|x| x.results.iter().copied()).collect();
    // The last assistant message, unless a user line that is no result follows it (measured
    // with 2.1.332: the unanswered call of the last assistant message is dropped when the
    // "[Request interrupted by user for tool use]" text follows it, `short.orphan-tool-use.jsonl`,
    // and answered as interrupted when only results of its other calls do, context case 0006).
    let p = order.iter().rposition(|&i| node(i).assistant);
    let last = p.filter(|&p| !order[p + 1..].iter().any(|&i| node(i).user && node(i).results.is_empty())).map(|p| node(order[p]).message_id);
    order.retain(|&i| {
        let x = node(i);
        let keep = !x.assistant || x.calls.iter().any(|c| answered.contains(c)) || x.calls.is_empty() || (x.message_id.is_some() && Some(x.message_id) == last);
        sent[i] = keep;
        keep
    });
    // 4. Orphaned thinking and whitespace-only messages (`zq`: `Ker` and `Ger` until nothing
    // changes). A line of thinking blocks then texts that say nothing is dropped unless a sent
    // line of its API message has content; a line of only thinking blocks is dropped unless a
    // sent line of its message, once those are gone, has a block that is not thinking.
    let real: Ids = order.iter().map(|&i| node(i)).filter(|x| x.real).filter_map(|x| x.message_id).collect();
    for &i in &order {
        let x = node(i);
        if x.blank && !x.message_id.is_some_and(|m| real.contains(&m)) {
            sent[i] = false;
        }
    }
    let said: Ids = order.iter().filter(|&&i| sent[i]).map(|&i| node(i)).filter(|x| x.said).filter_map(|x| x.message_id).collect();
    for &i in &order {
        let x = node(i);
        if x.thinking_only && !x.message_id.is_some_and(|m| said.contains(&m)) {
            sent[i] = false;
        }
    }
    order.retain(|&i| sent[i]);
    Walk { sent, order, broken, bridged }
}

/// The agent's parallel-call recovery (`RRr` in Claude Code 2.1.332's bundle), over `chain`
/// (root first): for each assistant message on the chain, in chain order, every line of it
/// that is not on the chain yet, and the results that hang under a line of it (by
/// `parentUuid`; a result whose parent does not hold its calls also by
/// `sourceToolAssistantUUID` and by call id) come back. They are placed after the message's
/// first line on the chain: among the chain's lines up to the last one of the message (and the
/// results, meta, attachment and system lines right after it) by their order in the file, the
/// rest after them. Not modelled: the trailing runs of meta, attachment and system lines under
/// those lines that it brings back too (they hold no conversation but a meta user line's).
fn recover(nodes: &[Option<Node>], entries: &[usize], lookup: &dyn Fn(u64) -> Option<usize>, chain: &[usize]) -> Vec<usize> {
    let n = nodes.len();
    let node = |i: usize| nodes[i].as_ref().expect("entries are read lines");
    if !chain.iter().any(|&i| node(i).assistant) {
        return chain.to_vec();
    }
    // The file order (the map's: a uuid's first line).
    let mut rank = vec![usize::MAX; n];
    for (r, &i) in entries.iter().enumerate() {
        rank[i] = r;
    }
    // The lines of each API message, and the result lines.
    let mut by_message: HashKeyed<Vec<usize>> = HashKeyed::default();
    let mut messages: Vec<u64> = Vec::new();
    let mut result_lines = Vec::new();
    for &i in entries {
        let x = node(i);
        match x.message_id {
            Some(m) => by_message
                .entry(m)
                .or_insert_with(|| {
                    messages.push(m);
                    Vec::new()
                })
                .push(i),
            None if x.user && !x.results.is_empty() => result_lines.push(i),
            None => {}
        }
    }
    // The results that hang under each line.
    let mut under: HashKeyed<Vec<usize>> = HashKeyed::default();
    let mut linked: std::collections::HashSet<(u64, usize)> = std::collections::HashSet::new();
    let mut link = |under: &mut HashKeyed<Vec<usize>>, parent: u64, r: usize| {
        if linked.insert((parent, r)) {
            under.entry(parent).or_default().push(r);
        }
    };
    let mut elsewhere = Vec::new();
    for &r in &result_lines {
        let x = node(r);
        if let Some(p) = x.parent {
            link(&mut under, p, r);
        }
        let held = x.parent.and_then(lookup).map(node).filter(|p| p.assistant).map_or(&[][..], |p| &p.calls[..]);
        if x.results.iter().all(|c| held.contains(c)) {
            continue;
        }
        elsewhere.push(r);
    }
    // Each call id's line, when only one message has it.
    let mut caller: HashKeyed<Option<usize>> = HashKeyed::default();
    if !elsewhere.is_empty() {
        for m in &messages {
            for &i in &by_message[m] {
                for &c in &node(i).calls {
                    let v = match caller.get(&c) {
                        None => Some(i),
                        Some(Some(j)) if node(*j).message_id == node(i).message_id => Some(i),
                        Some(_) => None,
                    };
                    caller.insert(c, v);
                }
            }
        }
    }
    for &r in &elsewhere {
        let x = node(r);
        if let Some(s) = x.source.filter(|&s| Some(s) != x.parent) {
            if lookup(s).is_some_and(|j| node(j).sidechain == x.sidechain) {
                link(&mut under, s, r);
            }
        }
        for c in &x.results {
            if let Some(&Some(j)) = caller.get(c) {
                let u = node(j).uuid.expect("entries have a uuid");
                if Some(u) != x.parent && node(j).sidechain == x.sidechain {
                    link(&mut under, u, r);
                }
            }
        }
    }
    let chain_results: Ids = chain.iter().map(|&i| node(i)).filter(|x| x.user).flat_map(|x| x.results.iter().copied()).collect();
    let mut pos = vec![usize::MAX; n];
    for (k, &i) in chain.iter().enumerate() {
        pos[i] = k;
    }
    let mut seen = vec![false; n];
    for &i in chain {
        seen[i] = true;
    }
    // Where a result recovered by call id goes: after the message's lines.
    let mut placed: std::collections::HashMap<usize, f64> = std::collections::HashMap::new();
    let at = |placed: &std::collections::HashMap<usize, f64>, i: usize| placed.get(&i).copied().unwrap_or(rank[i] as f64);
    let by_place =
        |placed: &std::collections::HashMap<usize, f64>, a: &usize, b: &usize| at(placed, *a).total_cmp(&at(placed, *b)).then(rank[*a].cmp(&rank[*b]));
    let mut done: Ids = Ids::default();
    let mut groups: Vec<(usize, usize, Vec<usize>)> = Vec::new();
    for &xt in chain {
        let Some(m) = node(xt).message_id.filter(|_| node(xt).assistant) else { continue };
        if !done.insert(m) {
            continue;
        }
        let own = [xt];
        let en: &[usize] = by_message.get(&m).map_or(&own[..], Vec::as_slice);
        let sibling = |u: Option<u64>| u.is_some_and(|u| en.iter().any(|&j| node(j).uuid == Some(u)));
        let mut dn: Vec<usize> = en.iter().copied().filter(|&j| !seen[j]).collect();
        let (mut ln, mut hn) = (Vec::new(), Vec::new());
        let mut taken = std::collections::HashSet::new();
        for &un in en {
            let Some(u) = node(un).uuid else { continue };
            for &r in under.get(&u).into_iter().flatten() {
                if seen[r] || !taken.insert(r) {
                    continue;
                }
                if sibling(node(r).parent) {
                    ln.push(r);
                } else {
                    hn.push(r);
                }
            }
        }
        if !hn.is_empty() {
            let mut have = chain_results.clone();
            for &l in &ln {
                have.extend(node(l).results.iter().copied());
            }
            hn.sort_by(|a, b| by_place(&placed, a, b));
            let last = en.iter().map(|&j| rank[j]).max().unwrap_or(0) as f64;
            for r in hn {
                let ids = &node(r).results;
                if !ids.iter().any(|c| !have.contains(c) && matches!(caller.get(c), Some(&Some(j)) if sibling(node(j).uuid))) {
                    continue;
                }
                have.extend(ids.iter().copied());
                placed.insert(r, (rank[r] as f64).max(last + 0.5));
                ln.push(r);
            }
        }
        dn.extend(ln);
        for &d in &dn {
            seen[d] = true;
        }
        let start = pos[xt];
        let mut end = start + 1;
        for &un in en {
            if pos[un] != usize::MAX && pos[un] >= end {
                end = pos[un] + 1;
            }
        }
        while end < chain.len() && (node(chain[end]).follows || (node(chain[end]).assistant && node(chain[end]).message_id == Some(m))) {
            end += 1;
        }
        if dn.is_empty() {
            continue;
        }
        dn.sort_by(|a, b| by_place(&placed, a, b));
        groups.push((start, end, dn));
    }
    if groups.is_empty() {
        return chain.to_vec();
    }
    groups.sort_by_key(|g| g.0);
    let mut merged: Vec<(usize, usize, Vec<usize>)> = Vec::new();
    for g in groups {
        match merged.last_mut() {
            Some(last) if g.0 < last.1 => {
                last.1 = last.1.max(g.1);
                last.2.extend(g.2);
                last.2.sort_by(|a, b| by_place(&placed, a, b));
            }
            _ => merged.push(g),
        }
    }
    let mut out = Vec::with_capacity(n);
    let mut from = 0;
    for (start, end, recovered) in merged {
        out.extend_from_slice(&chain[from..=start]);
        let mut k = 0;
        for &c in &chain[start + 1..end] {
            while k < recovered.len() && at(&placed, recovered[k]) < rank[c] as f64 {
                out.push(recovered[k]);
                k += 1;
            }
            out.push(c);
        }
        out.extend_from_slice(&recovered[k..]);
        from = end;
    }
    out.extend_from_slice(&chain[from..]);
    out
}

/// A set of ids ([`id_hash`]es, used as their own hash).
type Ids = std::collections::HashSet<u64, std::hash::BuildHasherDefault<crate::transcript::pairing::branches::Identity>>;

/// The leaf Claude Code 2.1.332's loader takes first: from the last line of the file that is in
/// its map, of the conversation's side and not a `file_snapshot` (its `uo`), up the parents to
/// the first message line (`user`, `assistant`, or a `local_command` one) — whatever the timestamps say, and whether or not a
/// message hangs under it (measured: a later branch with an older timestamp is the one sent,
/// reached through a `progress` line too). `None` when the climb meets a missing parent or a
/// cycle, or `file_snapshot` lines come after that last line: the loader then takes the newest
/// of the leaves ([`walk`]'s step 1).
fn last_line_leaf(nodes: &[Option<Node>], lookup: &dyn Fn(u64) -> Option<usize>, side: bool) -> Option<usize> {
    let mut snapshot_after = false;
    let mut last = None;
    for (i, x) in nodes.iter().enumerate().rev() {
        let Some(x) = x.as_ref().filter(|x| x.uuid.is_some()) else { continue };
        if x.file_snapshot {
            snapshot_after = true;
        } else if x.sidechain == side {
            last = Some(i);
            break;
        }
    }
    if snapshot_after {
        return None;
    }
    let mut at = lookup(nodes[last?].as_ref()?.uuid?);
    let mut seen = 0usize;
    while let Some(i) = at {
        let x = nodes[i].as_ref()?;
        // A `local_command` line is loaded as a user message (measured: the `/model` lines
        // that end `spotter/short.jsonl` are sent).
        if x.message {
            return Some(i);
        }
        seen += 1;
        if seen > nodes.len() {
            return None;
        }
        at = lookup(x.parent?);
    }
    None
}

/// The lines of one side that have a timestamp, oldest first (on a tie, in the walk's order of
/// entries), for finding the line a missing parent is bridged to without a pass over them all.
struct ByTime {
    /// (time, rank among the entries, line)
    lines: Vec<(i64, usize, usize)>,
}

impl ByTime {
    fn new(nodes: &[Option<Node>], entries: &[usize], side: bool) -> ByTime {
        let mut lines: Vec<(i64, usize, usize)> = entries
            .iter()
            .enumerate()
            .filter_map(|(rank, &i)| {
                let x = nodes[i].as_ref()?;
                (x.sidechain == side && !x.file_snapshot).then_some((x.time?, rank, i))
            })
            .collect();
        lines.sort_unstable();
        ByTime { lines }
    }

    /// The line of `child`'s side not yet on the chain with the newest timestamp at or before
    /// `child`'s (the first among the entries on a tie), if it is at most [`BRIDGE_MS`] older.
    fn bridge(&self, on: &[bool], child: &Node) -> Option<usize> {
        let t = child.time?;
        let end = self.lines.partition_point(|&(ti, _, _)| ti <= t);
        // The newest time with a line off the chain, then the first such line of that time.
        let newest = self.lines[..end].iter().rev().find(|&&(_, _, i)| !on[i])?.0;
        if t - newest > BRIDGE_MS {
            return None;
        }
        let from = self.lines.partition_point(|&(ti, _, _)| ti < newest);
        self.lines[from..end].iter().find(|&&(ti, _, i)| ti == newest && !on[i]).map(|&(_, _, i)| i)
    }
}

/// A session's lines since its last compaction, fed in file order, to find what resuming it
/// silently loses ([`Session::lost`]): what `check` reports as `lost_on_resume`.
#[derive(Debug, Default)]
pub struct Session {
    nodes: Vec<Option<Node>>,
    lines: Vec<u64>,
    /// [`Session::feed`]: lines framed so far, and the start of the next one.
    framed: u64,
    partial: Vec<u8>,
}

impl Session {
    /// Feeds the next bytes of the file (any split): each line is [`Session::push`]ed once its
    /// newline arrives; [`Session::end`] takes a last line without one.
    pub fn feed(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        while let Some(i) = memchr::memchr(b'\n', rest) {
            self.framed += 1;
            if self.partial.is_empty() {
                self.push(self.framed, &rest[..i]);
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(&rest[..i]);
                self.push(self.framed, &line);
            }
            rest = &rest[i + 1..];
        }
        self.partial.extend_from_slice(rest);
    }

    /// The end of the file: a last line without its newline is a line too.
    pub fn end(&mut self) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.framed += 1;
            self.push(self.framed, &line);
        }
    }

    /// Adds line `line` (its number in the file), `bytes` without the newline. A line that
    /// cannot be read counts as a line without a uuid (the agent skips it).
    pub fn push(&mut self, line: u64, bytes: &[u8]) {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let node = Node::read(bytes);
        if node.as_ref().is_some_and(|n| n.boundary) {
            self.nodes.clear();
            self.lines.clear();
        }
        self.nodes.push(node);
        self.lines.push(line);
    }

    /// Where the walk stops at a missing parent with history before it, if it does.
    fn broken(&self) -> Option<Break> {
        // A subagent's own file (its lines are sidechains) is not what `claude --resume` resumes:
        // the agent walks it from the parent session, whose lines it names.
        if self.nodes.iter().flatten().find(|n| n.boundary || n.message).is_some_and(|n| n.sidechain) {
            return None;
        }
        walk(&self.nodes, false).broken.filter(|b| !b.lost.is_empty())
    }

    /// How to mend the break [`Session::lost`] reports: the line (its number) to hang under
    /// the nearest earlier line of its side that has a uuid (that line's number). What the
    /// missing line stood between is gone; the conversation on both sides of it is kept.
    pub fn bridge(&self) -> Option<(u64, u64)> {
        let b = self.broken()?;
        let side = self.nodes[b.at].as_ref()?.sidechain;
        let under = (0..b.at).rev().find(|&j| self.nodes[j].as_ref().is_some_and(|n| n.uuid.is_some() && n.sidechain == side))?;
        Some((self.lines[b.at], self.lines[under]))
    }

    /// The finding for the history that resume leaves out after a missing parent, if any.
    pub fn lost(&self) -> Option<Finding> {
        let b = self.broken()?;
        let (first, last) = (*b.lost.first()?, *b.lost.last()?);
        let n = b.lost.len();
        let (from, to, at) = (self.lines[first], self.lines[b.at], self.lines[last]);
        let span = if from == at { format!("line {from}") } else { format!("lines {from}–{at}") };
        Some(Finding::new(
            to,
            Kind::LostOnResume,
            format!(
                "this line's parentUuid names a line that is not in the file, and no line was written within {} s before it: Claude Code resumes the conversation from here, and the {n} message{} on {span} before it {} not sent (nothing says so)",
                BRIDGE_MS / 1000,
                if n == 1 { "" } else { "s" },
                if n == 1 { "is" } else { "are" },
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(uuid: &str, parent: Option<&str>, secs: i64, ty: &str) -> Option<Node> {
        Some(Node {
            uuid: Some(id_hash(uuid)),
            parent: parent.map(id_hash),
            time: Some(secs * 1000),
            sidechain: false,
            message: ty != "progress",
            user: ty == "user",
            assistant: ty == "assistant",
            message_id: (ty == "assistant").then(|| id_hash(&format!("msg-{uuid}"))),
            said: ty == "assistant",
            real: ty == "assistant",
            ..Node::default()
        })
    }

    fn sent(w: &Walk) -> Vec<usize> {
        (0..w.sent.len()).filter(|&i| w.sent[i]).collect()
    }

    #[test]
    fn a_rewound_branch_is_not_sent() {
        let nodes = [
            line("a", None, 0, "user"),
            line("b", Some("a"), 1, "assistant"),
            line("c", Some("b"), 2, "user"),
            line("d", Some("c"), 3, "assistant"),
            line("e", Some("b"), 10, "user"),
        ];
        let w = walk(&nodes, false);
        assert_eq!(sent(&w), [0, 1, 4]);
        assert_eq!(w.broken, None);
    }

    #[test]
    fn a_missing_parent_is_bridged_within_five_seconds_and_cuts_the_history_beyond() {
        let mut nodes =
            vec![line("a", None, 0, "user"), line("b", Some("a"), 1, "assistant"), None, line("d", Some("c"), 4, "user"), line("e", Some("d"), 5, "assistant")];
        let w = walk(&nodes, false);
        assert_eq!(sent(&w), [0, 1, 3, 4], "bridged to b, 3 s older");
        assert_eq!(w.bridged, [(3, 1)]);
        nodes[3] = line("d", Some("c"), 7, "user");
        let w = walk(&nodes, false);
        assert_eq!(sent(&w), [3, 4], "6 s: not bridged");
        assert_eq!(w.broken, Some(Break { at: 3, parent: id_hash("c"), lost: vec![0, 1] }));
    }

    #[test]
    fn the_parallel_calls_of_a_message_on_the_chain_are_sent_with_their_results() {
        let call = |uuid: &str, parent: &str, secs: i64, id: &str| {
            let mut n = line(uuid, Some(parent), secs, "assistant").unwrap();
            n.message_id = Some(id_hash("m1"));
            n.calls = vec![id_hash(id)];
            Some(n)
        };
        let c1 = call("c1", "a", 1, "t1");
        let c2 = call("c2", "c1", 1, "t2");
        let result = |uuid: &str, parent: &str, secs: i64, id: &str| {
            let mut n = line(uuid, Some(parent), secs, "user").unwrap();
            n.results = vec![id_hash(id)];
            n.follows = true;
            Some(n)
        };
        let nodes = [line("a", None, 0, "user"), c1, c2, result("r2", "c2", 2, "t2"), result("r1", "c1", 3, "t1"), line("z", Some("r1"), 4, "assistant")];
        let w = walk(&nodes, false);
        assert_eq!(sent(&w), [0, 1, 2, 3, 4, 5]);
        assert_eq!(w.order, [0, 1, 2, 3, 4, 5], "the sibling and its result by file order, before the result on the chain");
        // A break at the second call: the chain reaches it first, its earlier sibling comes back after it.
        let mut broken = nodes.clone();
        broken[2].as_mut().unwrap().parent = Some(id_hash("gone"));
        broken[5].as_mut().unwrap().parent = Some(id_hash("r2"));
        for n in broken.iter_mut().take(2).flatten() {
            n.time = Some(-60_000);
        }
        let w = walk(&broken, false);
        assert_eq!(w.order, [2, 1, 3, 4, 5], "c2 first, then c1 (recovered), then the results in file order");
        assert_eq!(w.broken.map(|b| b.lost), Some(vec![0]));
    }

    #[test]
    fn the_leaf_climbs_through_progress_lines_and_the_newest_wins() {
        let nodes =
            [line("a", None, 0, "user"), line("b", Some("a"), 1, "assistant"), line("p", Some("b"), 2, "progress"), line("x", Some("a"), 9, "assistant")];
        assert_eq!(sent(&walk(&nodes, false)), [0, 3], "the leaf is x (newer than b, reached from p)");
    }

    #[test]
    fn a_session_reports_the_lines_a_break_loses_since_the_last_compaction() {
        let mut s = Session::default();
        let l = |u: &str, p: Option<&str>, t: &str, ty: &str| {
            let p = p.map_or("null".to_owned(), |p| format!("\"{p}\""));
            format!(r#"{{"type":"{ty}","uuid":"{u}","parentUuid":{p},"timestamp":"2026-02-10T22:{t}.000Z","message":{{"role":"{ty}","content":"x"}}}}"#)
        };
        for (i, line) in [
            l("a", None, "00:00", "user"),
            l("b", Some("a"), "00:01", "assistant"),
            "{not json".to_owned(),
            l("d", Some("c"), "01:00", "user"),
            l("e", Some("d"), "01:01", "assistant"),
        ]
        .iter()
        .enumerate()
        {
            s.push(i as u64 + 1, line.as_bytes());
        }
        let f = s.lost().expect("the break at line 4 loses lines 1-2");
        assert_eq!(s.bridge(), Some((4, 2)), "line 4 hangs under line 2, the nearest with a uuid");
        assert_eq!((f.line, f.kind), (4, Kind::LostOnResume));
        assert!(f.message.contains("the 2 messages on lines 1–2"), "{}", f.message);
        s.push(6, br#"{"type":"system","subtype":"compact_boundary","uuid":"z","parentUuid":null,"timestamp":"2026-02-10T22:02:00.000Z"}"#);
        s.push(7, l("f", Some("z"), "02:01", "user").as_bytes());
        assert_eq!(s.lost(), None, "a compaction after the break: nothing before it is sent anyway");
    }

    #[test]
    fn the_fast_read_and_the_whole_value_agree() {
        for line in [
            &br#"{"type":"assistant","uuid":"u","parentUuid":"p","isSidechain":true,"timestamp":"2026-02-10T22:57:57.941Z","message":{"id":"m","content":[{"type":"tool_use","id":"t","input":{"a":[1,{"b":null}]}},{"type":"text","text":"x"}]}}"#[..],
            br#"{"type":"user","uuid":"u","parentUuid":null,"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"y"}]}]}}"#,
            br#"{"type":"user","uuid":"u","message":{"content":"a string"}}"#,
            br#"{"type":"system","subtype":"local_command","uuid":"s","parentUuid":"u","content":"<command-name>/x</command-name>"}"#,
            br#"{"type":"system","subtype":"compact_boundary","uuid":"b","parentUuid":null,"logicalParentUuid":"x"}"#,
            br#"{"type":"progress","uuid":"p","parentUuid":"u","data":{"type":"hook_progress"}}"#,
            br#"{"type":"user","uuid":"abc","parentUuid":"p"}"#,
        ] {
            assert_eq!(Node::read_fields(line), Node::read_value(line), "{}", String::from_utf8_lossy(line));
        }
        let twice = br#"{"type":"user","uuid":"a","uuid":"b"}"#;
        assert_eq!(Node::read_fields(twice), None, "a key given twice is not the fast path's");
        assert_eq!(Node::read(twice).and_then(|n| n.uuid), Some(id_hash("b")), "the last counts");
    }

    /// Lines built from the pieces the readers treat differently: the needed keys and others,
    /// given once or twice, escaped, and values of every type, strings plain, escaped,
    /// non-ASCII and not UTF-8; sometimes cut short.
    fn line_of(picks: &[(u8, u8, u8)], cut: Option<usize>) -> Vec<u8> {
        const KEYS: [&str; 12] =
            ["type", "subtype", "uuid", "parentUuid", "timestamp", "isSidechain", "message", "other", "uu\\u0069d", "\u{e9}t\u{e9}", "message", "message"];
        const WORDS: [&str; 8] = ["user", "assistant", "system", "local_command", "compact_boundary", "2026-02-10T22:57:57.941Z", "u1", "p1"];
        const BLOCK_TYPES: [&str; 6] = ["tool_use", "tool_result", "thinking", "redacted_thinking", "text", "tool\\u005fuse"];
        let value = |v: u8, w: u8| -> Vec<u8> {
            let word = WORDS[w as usize % WORDS.len()];
            match v % 12 {
                0..=3 => format!("\"{word}\"").into_bytes(),
                4 => format!("\"{word}\\n\"").into_bytes(),
                5 => "\"h\u{e9}\"".as_bytes().to_vec(),
                6 => b"\"bad\xff\"".to_vec(),
                7 => b"null".to_vec(),
                8 => b"true".to_vec(),
                9 => b"12.5e3".to_vec(),
                10 => b"[1,{\"a\":\"\xfe\"}]".to_vec(),
                _ => b"{\"k\":[]}".to_vec(),
            }
        };
        let block = |t: u8, v: u8| -> Vec<u8> {
            let ty = BLOCK_TYPES[t as usize % BLOCK_TYPES.len()];
            match v % 8 {
                0 | 6 => format!("{{\"type\":\"{ty}\",\"id\":\"c{v}\",\"input\":{{}}}}").into_bytes(),
                1 => format!("{{\"type\":\"{ty}\",\"tool_use_id\":\"c{v}\",\"content\":[{{\"type\":\"text\",\"text\":\"x\"}}]}}").into_bytes(),
                2 => format!("{{\"type\":\"{ty}\",\"id\":\"a\",\"id\":\"b\"}}").into_bytes(),
                3 => b"{\"type\":null,\"id\":7}".to_vec(),
                4 => b"\"text\"".to_vec(),
                7 => format!("{{\"type\":\"{ty}\",\"tool_use_id\":\"r{v}\",\"id\":\"c{v}\"}}").into_bytes(),
                _ => format!("{{\"type\":\"{ty}\"}}").into_bytes(),
            }
        };
        let mut out = b"{".to_vec();
        for (i, &(k, v, w)) in picks.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            // The first field is mostly the line's type.
            let key = if i == 0 && k < 14 { "type" } else { KEYS[k as usize % KEYS.len()] };
            out.extend_from_slice(format!("\"{key}\":").as_bytes());
            if key == "message" && v % 3 != 0 {
                let blocks: Vec<Vec<u8>> = (0..(w % 4)).map(|j| block(w.wrapping_add(j), v.wrapping_add(j))).collect();
                out.extend_from_slice(format!("{{\"id\":\"m{}\",\"content\":[", w % 3).as_bytes());
                out.extend_from_slice(&blocks.join(&b","[..]));
                out.extend_from_slice(b"]}");
            } else if key == "type" && v % 12 < 8 {
                // Mostly a type the walk knows, so that the message fields matter.
                out.extend_from_slice(format!("\"{}\"", WORDS[w as usize % 3]).as_bytes());
            } else {
                out.extend_from_slice(&value(v, w));
            }
        }
        out.push(b'}');
        if let Some(c) = cut {
            out.truncate(c % (out.len() + 1));
        }
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        /// The scanner's read never differs from the serde reads it stands in front of.
        #[test]
        fn the_scanner_read_agrees_with_serde(picks in proptest::collection::vec((0u8..20, 0u8..24, 0u8..16), 0..9), cut in proptest::option::weighted(0.1, 0usize..400)) {
            let line = line_of(&picks, cut);
            let slow = Node::read_fields(&line).or_else(|| Node::read_value(&line));
            proptest::prop_assert_eq!(Node::read(&line), slow, "{}", String::from_utf8_lossy(&line));
        }
    }

    #[test]
    fn the_scanner_reads_what_the_walk_needs() {
        let line = br#"{"type":"assistant","uuid":"u","parentUuid":"p","isSidechain":true,"timestamp":"2026-02-10T22:57:57.941Z","message":{"id":"m","content":[{"type":"thinking","thinking":"x"},{"type":"tool_use","id":"t","input":{"a":[1,{"b":null}]}}]}}"#;
        let n = Node::read_scan(line).expect("the fast path takes a plain line");
        assert_eq!(Some(n), Node::read_value(line));
        assert_eq!(Node::read_scan(br#"{"type":"user","uuid":"a","uuid":"b"}"#), None, "a key given twice goes the slow way");
        assert_eq!(Node::read_scan(br#"{"type":"user","uuid":"\u0061"}"#), None, "an escaped id goes the slow way");
    }

    mod reference {
        //! The walk as first written (a pass over every line per bridge, std's sets), kept as
        //! the meaning the faster one must keep.
        use super::super::*;
        use std::collections::{HashMap, HashSet};
        pub(super) fn walk_reference(nodes: &[Option<Node>], side: bool) -> Walk {
            let n = nodes.len();
            let sent = vec![false; n];
            let node = |i: usize| nodes[i].as_ref();
            // The map: a uuid names the last line that has it (a later line overwrites), in the order
            // of its first appearance.
            let mut by_uuid: HashMap<u64, usize> = HashMap::new();
            let mut order: Vec<u64> = Vec::new();
            for (i, nd) in nodes.iter().enumerate() {
                if let Some(u) = nd.as_ref().and_then(|x| x.uuid) {
                    if by_uuid.insert(u, i).is_none() {
                        order.push(u);
                    }
                }
            }
            let entries: Vec<usize> = order.iter().map(|u| by_uuid[u]).collect();
            // 1. The leaf.
            let parents: HashSet<u64> = entries.iter().filter_map(|&i| node(i)?.parent).collect();
            let message_parents: HashSet<u64> = entries.iter().filter_map(|&i| node(i).filter(|x| x.message)?.parent).collect();
            let mut leaves: HashSet<usize> = HashSet::new();
            for &t in entries.iter().filter(|&&i| node(i).and_then(|x| x.uuid).is_some_and(|u| !parents.contains(&u))) {
                let mut seen = HashSet::new();
                let mut at = Some(t);
                while let Some(i) = at {
                    if !seen.insert(i) {
                        break;
                    }
                    let Some(x) = node(i) else { break };
                    if x.message {
                        if x.uuid.is_some_and(|u| !message_parents.contains(&u)) {
                            leaves.insert(i);
                        }
                        break;
                    }
                    at = x.parent.and_then(|p| by_uuid.get(&p).copied());
                }
            }
            let newest = |pick: &dyn Fn(&Node) -> bool| -> Option<usize> {
                let mut best: Option<(usize, i64)> = None;
                for &i in &entries {
                    let Some(x) = node(i).filter(|x| pick(x)) else { continue };
                    let t = x.time.unwrap_or(i64::MIN);
                    if best.is_none_or(|(_, b)| t > b || b == i64::MIN) {
                        best = Some((i, t));
                    }
                }
                best.map(|(i, _)| i)
            };
            let leaf = if let Some(l) = last_line_leaf(nodes, &|u| by_uuid.get(&u).copied(), side) {
                Some(l)
            } else if leaves.is_empty() {
                newest(&|x| x.sidechain == side)
            } else {
                newest(&|x| x.message && x.sidechain == side && x.uuid.is_some_and(|u| leaves.contains(&by_uuid[&u])))
            };
            let Some(leaf) = leaf else { return Walk { sent, order: Vec::new(), broken: None, bridged: Vec::new() } };
            // 2. The chain.
            let mut on: HashSet<usize> = HashSet::new();
            let mut chain: Vec<usize> = Vec::new();
            let mut bridged = Vec::new();
            let mut broken = None;
            let mut at = Some(leaf);
            while let Some(i) = at {
                if !on.insert(i) {
                    break;
                }
                chain.push(i);
                let x = node(i).expect("entries are read lines");
                let Some(p) = x.parent else { break };
                at = match by_uuid.get(&p).copied().filter(|j| !on.contains(j)) {
                    Some(j) => Some(j),
                    None => {
                        let to = bridge_reference(nodes, &entries, &on, x);
                        match to {
                            Some(j) => bridged.push((i, j)),
                            None if !by_uuid.contains_key(&p) => broken = Some((i, p)),
                            None => {}
                        }
                        to
                    }
                };
            }
            // 3. and 4.: the recovery of parallel calls and the filters, as the walk has them.
            super::super::finish(nodes, &entries, &|u| by_uuid.get(&u).copied(), chain, side, broken, bridged)
        }

        fn bridge_reference(nodes: &[Option<Node>], entries: &[usize], on: &HashSet<usize>, child: &Node) -> Option<usize> {
            let t = child.time?;
            let mut best: Option<(usize, i64)> = None;
            for &i in entries {
                let Some(x) = nodes[i].as_ref() else { continue };
                let Some(ti) = x.time else { continue };
                if x.sidechain != child.sidechain || x.file_snapshot || on.contains(&i) || ti > t {
                    continue;
                }
                if best.is_none_or(|(_, b)| ti > b) {
                    best = Some((i, ti));
                }
            }
            best.filter(|&(_, b)| t - b <= BRIDGE_MS).map(|(i, _)| i)
        }
    }

    fn session_of(picks: &[(u8, u8, u8, u8)]) -> Vec<Option<Node>> {
        picks
            .iter()
            .enumerate()
            .map(|(i, &(a, b, c, d))| {
                if a % 11 == 0 {
                    return None; // an unreadable line
                }
                let id = |k: u8| u64::from(k % 16) + 1;
                Some(Node {
                    uuid: (a % 7 != 0).then(|| id(a)),
                    parent: (b % 5 != 0).then(|| id(b)),
                    // Seconds apart, with ties and lines without a time.
                    time: (c % 9 != 0).then(|| i64::from(c % 8) * 2_000 + i as i64 * 500),
                    sidechain: d % 7 == 0,
                    message: d % 4 != 0,
                    user: d % 4 == 1,
                    assistant: d % 4 >= 2,
                    follows: d % 4 == 0 || d % 5 == 2,
                    source: (c % 4 == 0).then(|| id(c)),
                    real: d % 6 != 5 && d % 3 == 0 && a % 2 == 0,
                    blank: d % 6 != 5 && d % 3 == 0 && a % 2 == 1,
                    message_id: (d % 3 == 0).then(|| 100 + u64::from(c % 3)),
                    calls: if d % 5 == 1 { vec![200 + u64::from(b % 4)] } else { Vec::new() },
                    results: if d % 5 == 2 { vec![200 + u64::from(a % 4)] } else { Vec::new() },
                    boundary: false,
                    file_snapshot: a % 13 == 7,
                    thinking_only: d % 6 == 5,
                    said: d % 6 != 5 && d % 3 == 0,
                })
            })
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        /// The walk agrees with the one first written on every session: the same lines sent, the
        /// same bridges, the same break.
        #[test]
        fn the_walk_agrees_with_its_reference(picks in proptest::collection::vec((0u8..64, 0u8..64, 0u8..64, 0u8..64), 0..40), side in proptest::bool::ANY) {
            let nodes = session_of(&picks);
            proptest::prop_assert_eq!(walk(&nodes, side), reference::walk_reference(&nodes, side));
        }
    }

    #[test]
    fn reads_a_claude_code_line() {
        let n = Node::read(br#"{"type":"assistant","uuid":"u","parentUuid":null,"timestamp":"2026-02-10T22:57:57.941Z","message":{"id":"m","content":[{"type":"tool_use","id":"t"}]}}"#).unwrap();
        assert_eq!((n.uuid, n.parent, n.message, n.message_id, n.calls), (Some(id_hash("u")), None, true, Some(id_hash("m")), vec![id_hash("t")]));
        assert_eq!(n.time, Some(1_770_764_277_941));
    }
}
