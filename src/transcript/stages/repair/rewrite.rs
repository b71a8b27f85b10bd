//! Applying a plan: the second pass over the file.
//!
//! The rewriter is fed the same bytes again, in chunks, and emits the repaired transcript and
//! the rejects stream. Runs of lines the plan does not touch are handed on as one slice of the
//! input, unchanged; only edited lines (and, in a Claude Code file after a removal, lines whose
//! parent must be re-pointed) are looked at one by one. Over-long lines are streamed into the
//! rejects stream without being held.
//!
//! Rejects are JSON lines: `{"line", "action": "removed"|"modified"|"merged", "reason", "text"}`,
//! with `"base64"` instead of `"text"` for bytes that are not UTF-8, for text whose escapes would
//! make it longer than base64 (control bytes), and for over-long lines. A modified line's
//! original is kept there too: nothing the repair changes is lost. A record of a long line is
//! emitted in pieces of 64 KiB of the line, so it needs no memory of its size.

use super::plan::{Edit, Plan};
use super::synth::{self, CallRef};
use super::{Map, Set};
use crate::transcript::finding::Kind;
use crate::transcript::formats::Format;
use crate::transcript::lines::{is_blank, Block, LineSplitter};
use crate::transcript::model::id_hash;
use crate::transcript::scan;
use base64::Engine;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::io::Write;

/// Bytes of a removed line a rejects record takes at a time past this size: the record goes out
/// in pieces.
const REJECT_PIECE: usize = 64 << 10;

/// Appends `data` in standard base64 (padded) to `out`.
fn push_base64(out: &mut Vec<u8>, data: &[u8]) {
    let start = out.len();
    out.resize(start + base64::encoded_len(data.len(), true).expect("a line's length fits"), 0);
    let n = base64::engine::general_purpose::STANDARD.encode_slice(data, &mut out[start..]).expect("sized to fit");
    out.truncate(start + n);
}

/// What the rewriter produces.
#[derive(Debug, PartialEq, Eq)]
pub enum Emit<'a> {
    /// Bytes of the repaired transcript.
    Out(&'a [u8]),
    /// Bytes of the rejects stream (whole JSON lines, or pieces of one: the record of a long
    /// line goes out in pieces).
    Reject(&'a [u8]),
}

/// Counters of what the rewrite did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RewriteStats {
    /// Lines removed.
    pub removed: u64,
    /// Lines changed in place (blocks removed, parent re-pointed, message id joined, merged).
    pub modified: u64,
    /// Lines inserted.
    pub inserted: u64,
}

#[derive(Debug)]
struct Held {
    line: u64,
    bytes: Vec<u8>,
    original: Vec<u8>,
    term: &'static [u8],
    merged: bool,
}

/// Applies a [`Plan`] to a stream. Calling order: [`Rewriter::feed`] the whole input, then
/// [`Rewriter::finish`].
#[derive(Debug)]
pub struct Rewriter {
    format: Format,
    edits: Map<u64, Vec<Edit>>,
    inserts: Map<u64, Vec<Edit>>,
    interesting: Vec<u64>,
    cursor: usize,
    like_lines: Set<u64>,
    merge_targets: Set<u64>,
    splitter: Option<LineSplitter>,
    next_line: u64,
    /// Claude Code: the parent each removed line's children move to, by the hash of the
    /// removed line's uuid ([`id_hash`]).
    repoint: Map<u64, Option<String>>,
    next_repoint: Option<(Option<String>, String)>,
    /// Claude Code lines not fed yet whose parent the checker already read: (line, hash of its
    /// parent), in line order. A line in it needs no look at its bytes to know it does not hang
    /// under a removed line.
    parents: VecDeque<(u64, Option<u64>)>,
    message_ids: Map<u64, String>,
    held: Option<Held>,
    long_open: bool,
    long_rest: Vec<u8>,
    /// The reject line being written (kept to reuse its allocation).
    reject_buf: Vec<u8>,
    stats: RewriteStats,
}

impl Rewriter {
    /// A rewriter for `plan`; `max_line_bytes` must be the limit the plan was made with.
    pub fn new(plan: &Plan, max_line_bytes: usize) -> Self {
        let mut rw = Rewriter::empty(plan.format.unwrap_or(Format::ClaudeCode), max_line_bytes);
        rw.add(&plan.edits);
        rw
    }

    /// A rewriter with no edits yet: [`Rewriter::add`] them as they are planned, each before
    /// the line it concerns is fed ([`Rewriter::feed_until`]).
    pub fn empty(format: Format, max_line_bytes: usize) -> Self {
        Rewriter {
            format,
            edits: Map::default(),
            inserts: Map::default(),
            interesting: Vec::new(),
            cursor: 0,
            like_lines: Set::default(),
            merge_targets: Set::default(),
            splitter: Some(LineSplitter::new(max_line_bytes).keep_long()),
            next_line: 1,
            repoint: Map::default(),
            next_repoint: None,
            parents: VecDeque::new(),
            message_ids: Map::default(),
            held: None,
            long_open: false,
            long_rest: Vec::new(),
            reject_buf: Vec::new(),
            stats: RewriteStats::default(),
        }
    }

    /// Sets the file's format (before any line with an edit is fed).
    pub fn set_format(&mut self, format: Format) {
        self.format = format;
    }

    /// Tells the rewriter the parents of Claude Code lines not fed yet (the checker's
    /// [`Node::parent`](crate::transcript::model::Node) of each: the hash of its `parentUuid`,
    /// or of `logicalParentUuid` when that is null), in line order. Optional: a line without
    /// one is looked at to find its parent.
    pub fn add_parents(&mut self, parents: impl IntoIterator<Item = (u64, Option<u64>)>) {
        self.parents.extend(parents);
    }

    /// Adds edits. Each must concern lines not fed yet: see [`Rewriter::accepts`].
    pub fn add<'e>(&mut self, edits: impl IntoIterator<Item = &'e Edit>) {
        let from = self.interesting.len();
        for e in edits {
            self.interesting.push(e.line());
            match e {
                Edit::Insert { after, .. } => self.inserts.entry(*after).or_default().push(e.clone()),
                other => {
                    if let Edit::JoinTurn { like, .. } = other {
                        self.like_lines.insert(*like);
                        self.interesting.push(*like);
                    }
                    if let Edit::MergeInto { into, .. } = other {
                        self.merge_targets.insert(*into);
                        self.interesting.push(*into);
                    }
                    self.edits.entry(other.line()).or_default().push(other.clone());
                }
            }
        }
        if self.interesting.len() > from {
            // Lines already passed are never looked up again.
            let rest = &mut self.interesting[self.cursor..];
            rest.sort_unstable();
        }
    }

    /// Whether `edit` can still be applied: every line it reads or changes is yet to be fed.
    pub fn accepts(&self, edit: &Edit) -> bool {
        let first = match edit {
            Edit::JoinTurn { line, like, .. } => (*line).min(*like),
            Edit::MergeInto { line, into, .. } => (*line).min(*into),
            other => other.line(),
        };
        first >= self.next_line
    }

    /// Feeds the whole lines at the start of `bytes` numbered below `stop`, and returns how
    /// many bytes they take: the caller keeps the rest and feeds it again later (from its
    /// first byte) with more after it. Lines must not be longer than the limit. The streaming
    /// counterpart of [`Rewriter::feed`]; a stream may end with `feed` and
    /// [`Rewriter::finish`].
    pub fn feed_until(&mut self, bytes: &[u8], stop: u64, out: &mut impl FnMut(Emit<'_>)) -> usize {
        if stop <= self.next_line {
            return 0;
        }
        let whole = memchr::memrchr(b'\n', bytes).map_or(0, |nl| nl + 1);
        while self.interesting.get(self.cursor).is_some_and(|&l| l < self.next_line) {
            self.cursor += 1;
        }
        if !self.busy() {
            // Nothing to do in any of these lines: hand them on in one piece.
            let count = memchr::memchr_iter(b'\n', &bytes[..whole]).count() as u64;
            let end = self.next_line + count;
            if end <= stop && self.interesting.get(self.cursor).is_none_or(|&l| l >= end) {
                if whole > 0 {
                    out(Emit::Out(&bytes[..whole]));
                }
                self.next_line = end;
                self.forget_parents();
                return whole;
            }
        }
        // Line by line; runs of lines needing nothing still go out as one piece.
        let (mut start, mut run) = (0, 0);
        for nl in memchr::memchr_iter(b'\n', &bytes[..whole]) {
            let n = self.next_line;
            if n >= stop {
                break;
            }
            while self.interesting.get(self.cursor).is_some_and(|&l| l < n) {
                self.cursor += 1;
            }
            let raw = &bytes[start..nl];
            let (content, term): (&[u8], &'static [u8]) = match raw.strip_suffix(b"\r") {
                Some(c) => (c, b"\r\n"),
                None => (raw, b"\n"),
            };
            let plain = self.interesting.get(self.cursor) != Some(&n) && self.held.is_none() && self.next_repoint.is_none() && !self.repoints(n, content);
            if !plain {
                if run < start {
                    out(Emit::Out(&bytes[run..start]));
                }
                if is_blank(content) {
                    self.flush_held(out);
                    out(Emit::Out(&bytes[start..=nl]));
                } else {
                    self.line(n, content, term, out);
                }
                run = nl + 1;
            }
            self.next_line += 1;
            start = nl + 1;
        }
        if run < start {
            out(Emit::Out(&bytes[run..start]));
        }
        self.forget_parents();
        start
    }

    /// Drops the parents of lines already fed.
    fn forget_parents(&mut self) {
        while self.parents.front().is_some_and(|&(l, _)| l < self.next_line) {
            self.parents.pop_front();
        }
    }

    /// What was done so far.
    pub fn stats(&self) -> RewriteStats {
        self.stats
    }

    /// Feeds the next chunk of the original file.
    pub fn feed(&mut self, chunk: &[u8], out: &mut impl FnMut(Emit<'_>)) {
        let mut splitter = self.splitter.take().expect("not finished");
        splitter.feed(chunk, &mut |b| self.block(b, out));
        self.splitter = Some(splitter);
    }

    /// Ends the stream: handles a torn last line and flushes what is held.
    pub fn finish(mut self, out: &mut impl FnMut(Emit<'_>)) -> RewriteStats {
        let mut splitter = self.splitter.take().expect("not finished");
        let line = self.next_line;
        let removing = self.removes(line);
        match splitter.finish() {
            Some(t) if removing => match t.bytes {
                Some(bytes) => {
                    let bytes = bytes.to_vec();
                    self.reject(line, "removed", Some(Kind::TornLine), &bytes, out);
                    self.stats.removed += 1;
                }
                None => self.close_long(out),
            },
            Some(t) => {
                if let Some(bytes) = t.bytes {
                    let bytes = bytes.to_vec();
                    self.flush_held(out);
                    out(Emit::Out(&bytes));
                }
            }
            None => {}
        }
        self.flush_held(out);
        self.stats
    }

    fn removes(&self, line: u64) -> bool {
        self.edits.get(&line).is_some_and(|es| es.iter().any(|e| matches!(e, Edit::Remove { .. })))
    }

    /// Whether line `n` hangs under a removed line (Claude Code) and must be re-pointed. A line
    /// whose parent the checker read is looked at only when that parent was removed (or,
    /// rarely, when its `logicalParentUuid` was: then the look finds nothing to do).
    fn repoints(&mut self, n: u64, line: &[u8]) -> bool {
        self.forget_parents();
        if self.repoint.is_empty() || self.format != Format::ClaudeCode {
            return false;
        }
        if let Some(&(l, parent)) = self.parents.front() {
            if l == n && !parent.is_some_and(|p| self.repoint.contains_key(&p)) {
                return false;
            }
        }
        synth::parent_span(line).and_then(|(_, p)| p).is_some_and(|p| self.repoint.contains_key(&id_hash(&p)))
    }

    fn busy(&self) -> bool {
        self.held.is_some() || self.next_repoint.is_some() || !self.repoint.is_empty()
    }

    fn block(&mut self, b: Block<'_>, out: &mut impl FnMut(Emit<'_>)) {
        match b {
            Block::LongBytes(bytes) => {
                if self.removes(self.next_line) {
                    self.stream_long(bytes, out);
                } else {
                    out(Emit::Out(bytes));
                }
            }
            Block::TooLong { .. } => {
                self.close_long(out);
                self.next_line += 1;
            }
            Block::Lines { bytes, .. } => {
                self.feed_until(bytes, u64::MAX, out);
            }
        }
    }

    fn line(&mut self, n: u64, content: &[u8], term: &'static [u8], out: &mut impl FnMut(Emit<'_>)) {
        let mut edits = self.edits.remove(&n).unwrap_or_default();
        if let Some(first) = edits.iter().position(|e| matches!(e, Edit::Remove { .. })) {
            // A removed line gets no other edit (as in a finished plan).
            edits.swap(0, first);
            edits.truncate(1);
        }
        let merges_into_held = edits.iter().any(|e| matches!(e, Edit::MergeInto { into, .. } if self.held.as_ref().is_some_and(|h| h.line == *into)));
        if !merges_into_held {
            self.flush_held(out);
        }
        let claude = self.format == Format::ClaudeCode;
        let mut bytes: Cow<'_, [u8]> = Cow::Borrowed(content);
        let mut modified = None;
        let mut removed = None;
        if claude && (self.next_repoint.is_some() || !self.repoint.is_empty()) {
            if let Some(b) = self.repoint_parent(&bytes) {
                bytes = Cow::Owned(b);
                modified = Some(None);
            }
        }
        if self.like_lines.contains(&n) {
            if let Some((_, id)) = synth::message_id_span(content) {
                self.message_ids.insert(n, id);
            }
        }
        for e in &edits {
            match e {
                Edit::Remove { reason, .. } => removed = Some(*reason),
                Edit::DropResults { call_id, keep_first, reason, .. } => match synth::drop_results(self.format, &bytes, call_id, *keep_first) {
                    Some(b) => {
                        bytes = Cow::Owned(b);
                        modified = Some(Some(*reason));
                    }
                    None => removed = Some(*reason),
                },
                Edit::DropCall { call_id, reason, .. } => match synth::drop_call(self.format, &bytes, call_id) {
                    Some(b) => {
                        bytes = Cow::Owned(b);
                        modified = Some(Some(*reason));
                    }
                    None => removed = Some(*reason),
                },
                Edit::JoinTurn { like, reason, .. } => {
                    if let Some(b) = self.message_ids.get(like).and_then(|id| synth::set_message_id(&bytes, id)) {
                        bytes = Cow::Owned(b);
                        modified = Some(Some(*reason));
                    }
                }
                Edit::MergeInto { reason, .. } => {
                    if let Some(h) = self.held.as_mut().filter(|_| merges_into_held) {
                        if let Some(m) = synth::merge_messages(self.format, &h.bytes, &bytes) {
                            h.bytes = m;
                            h.merged = true;
                            let original = content.to_vec();
                            self.reject(n, "merged", Some(*reason), &original, out);
                            self.stats.removed += 1;
                            return;
                        }
                    }
                }
                Edit::Insert { .. } => {}
            }
        }
        // The uuid the next lines hang under if this line goes, and the one inserted lines
        // follow.
        let (mut own_uuid, mut own_parent) = (None, None);
        if claude && (removed.is_some() || self.inserts.contains_key(&n)) {
            let (uuid, parent) = synth::claude_ids(&bytes);
            own_uuid = uuid;
            own_parent = parent.map(|p| self.repoint.get(&id_hash(&p)).cloned().unwrap_or(Some(p))).unwrap_or(None);
        }
        if let Some(reason) = removed {
            self.reject(n, "removed", Some(reason), content, out);
            self.stats.removed += 1;
            if let (true, Some(u)) = (claude, own_uuid.as_ref()) {
                self.repoint.insert(id_hash(u), own_parent.clone());
            }
        } else {
            if let Some(reason) = modified {
                self.reject(n, "modified", reason, content, out);
                self.stats.modified += 1;
            }
            if self.merge_targets.contains(&n) {
                self.held = Some(Held { line: n, bytes: bytes.into_owned(), original: content.to_vec(), term, merged: false });
                return;
            }
            out(Emit::Out(&bytes));
            out(Emit::Out(term));
        }
        self.insert_after(n, &bytes, removed.is_some(), own_uuid, own_parent, term, out);
    }

    /// Writes the synthetic results planned after line `n`.
    #[allow(clippy::too_many_arguments)]
    fn insert_after(
        &mut self,
        n: u64,
        follows: &[u8],
        follows_removed: bool,
        own_uuid: Option<String>,
        own_parent: Option<String>,
        term: &'static [u8],
        out: &mut impl FnMut(Emit<'_>),
    ) {
        let Some(inserts) = self.inserts.remove(&n) else { return };
        // Inserted lines chain: the first hangs under the line it follows (or, if that line was
        // removed, under its parent), each next one under the previous.
        let mut parent = if follows_removed { own_parent } else { own_uuid.clone() };
        for e in inserts {
            let Edit::Insert { call_id, tool, item, text, .. } = e else { continue };
            let call = CallRef { id: call_id, tool, item };
            let mut seed = follows.to_vec();
            seed.extend_from_slice(call.id.as_bytes());
            let uuid = synth::derived_uuid(&seed);
            let line = synth::synthetic_result(self.format, follows, &call, text, parent.as_deref(), &uuid);
            out(Emit::Out(&line));
            out(Emit::Out(term));
            self.stats.inserted += 1;
            parent = Some(uuid);
        }
        if self.format == Format::ClaudeCode {
            if let (Some(last), Some(followed)) = (parent, own_uuid) {
                // The line that hung under the followed line now hangs under the last insert.
                self.next_repoint = Some((Some(followed), last));
            }
        }
    }

    /// The line with its parent re-pointed, when it must be: after an insertion (the first
    /// later line that hung under the followed line: lines of other conversation threads may
    /// come between), or under a removed line.
    fn repoint_parent(&mut self, line: &[u8]) -> Option<Vec<u8>> {
        let (_, parent) = synth::parent_span(line)?;
        let target = match self.next_repoint.take() {
            Some((expect, new)) if expect.as_deref() == parent.as_deref() => Some(Some(new)),
            next => {
                self.next_repoint = next;
                parent.as_deref().and_then(|p| self.repoint.get(&id_hash(p)).cloned())
            }
        }?;
        synth::set_parent(line, target.as_deref())
    }

    fn flush_held(&mut self, out: &mut impl FnMut(Emit<'_>)) {
        if let Some(h) = self.held.take() {
            if h.merged {
                self.reject(h.line, "modified", Some(Kind::ConsecutiveAssistant), &h.original, out);
                self.stats.modified += 1;
            }
            out(Emit::Out(&h.bytes));
            out(Emit::Out(h.term));
        }
    }

    fn reject(&mut self, line: u64, action: &str, reason: Option<Kind>, original: &[u8], out: &mut impl FnMut(Emit<'_>)) {
        reject_line(&mut self.reject_buf, line, action, reason, original, out);
    }

    /// Streams a removed over-long line into the rejects, base64-encoded as it arrives.
    fn stream_long(&mut self, bytes: &[u8], out: &mut impl FnMut(Emit<'_>)) {
        if !self.long_open {
            self.long_open = true;
            let head = format!("{{\"line\":{},\"action\":\"removed\",\"reason\":\"{}\",\"base64\":\"", self.next_line, Kind::LineTooLong.as_str());
            out(Emit::Reject(head.as_bytes()));
        }
        // Complete the group of three bytes left over from the last piece, then encode whole
        // groups straight from `bytes`, a piece at a time: nothing the size of the line is held.
        let mut bytes = bytes;
        if !self.long_rest.is_empty() {
            let k = (3 - self.long_rest.len()).min(bytes.len());
            self.long_rest.extend_from_slice(&bytes[..k]);
            bytes = &bytes[k..];
            if self.long_rest.len() < 3 {
                return;
            }
            let buf = &mut self.reject_buf;
            buf.clear();
            push_base64(buf, &self.long_rest);
            out(Emit::Reject(buf));
            self.long_rest.clear();
        }
        let whole = bytes.len() / 3 * 3;
        for piece in bytes[..whole].chunks(REJECT_PIECE / 3 * 3) {
            let buf = &mut self.reject_buf;
            buf.clear();
            push_base64(buf, piece);
            out(Emit::Reject(buf));
        }
        self.long_rest.extend_from_slice(&bytes[whole..]);
    }

    fn close_long(&mut self, out: &mut impl FnMut(Emit<'_>)) {
        if !self.long_open {
            return;
        }
        let buf = &mut self.reject_buf;
        buf.clear();
        push_base64(buf, &self.long_rest);
        buf.extend_from_slice(b"\"}\n");
        out(Emit::Reject(buf));
        self.long_rest.clear();
        self.long_open = false;
        self.stats.removed += 1;
    }
}

/// Writes one rejects line, `{"line", "action", "reason", "text" | "base64"}`, into `bytes` (a
/// buffer reused between lines) and hands it to `out`, in pieces for a long line. The dataset
/// repair writes the same lines.
pub fn reject_line(bytes: &mut Vec<u8>, line: u64, action: &str, reason: Option<Kind>, original: &[u8], out: &mut impl FnMut(Emit<'_>)) {
    // `{"line", "action", "reason", "text" | "base64"}`; action and reason are plain words.
    // Text when the line is UTF-8 and its escapes do not make it longer than base64 would
    // (a line of control bytes escapes to six bytes each); a long line goes out in pieces,
    // so the record never needs memory of its own size.
    bytes.clear();
    let write = "writing to a Vec cannot fail";
    write!(bytes, "{{\"line\":{line},\"action\":\"{action}\"").expect(write);
    if let Some(r) = reason {
        write!(bytes, ",\"reason\":\"{}\"", r.as_str()).expect(write);
    }
    // An over-long line is always base64: one that spans chunks is streamed before its end
    // is seen (`stream_long`), and the record must not depend on the chunking.
    let text = simdutf8::basic::from_utf8(original)
        .ok()
        .filter(|_| reason != Some(Kind::LineTooLong) && scan::json_string_len(original) <= original.len().div_ceil(3) * 4);
    match text {
        Some(text) if original.len() <= REJECT_PIECE => {
            bytes.extend_from_slice(b",\"text\":");
            scan::write_json_string(bytes, text);
        }
        Some(text) => {
            bytes.extend_from_slice(b",\"text\":\"");
            out(Emit::Reject(bytes));
            let mut rest = text;
            while !rest.is_empty() {
                let mut cut = rest.len().min(REJECT_PIECE);
                while !rest.is_char_boundary(cut) {
                    cut -= 1;
                }
                let (piece, after) = rest.split_at(cut);
                bytes.clear();
                scan::write_json_string(bytes, piece);
                out(Emit::Reject(&bytes[1..bytes.len() - 1]));
                rest = after;
            }
            bytes.clear();
            bytes.push(b'"');
        }
        None if original.len() <= REJECT_PIECE => {
            bytes.extend_from_slice(b",\"base64\":\"");
            push_base64(bytes, original);
            bytes.push(b'"');
        }
        None => {
            bytes.extend_from_slice(b",\"base64\":\"");
            out(Emit::Reject(bytes));
            // Whole groups of three bytes per piece: no padding until the end.
            for piece in original.chunks(REJECT_PIECE / 3 * 3) {
                bytes.clear();
                push_base64(bytes, piece);
                out(Emit::Reject(bytes));
            }
            bytes.clear();
            bytes.push(b'"');
        }
    }
    bytes.extend_from_slice(b"}\n");
    out(Emit::Reject(bytes));
    if bytes.capacity() > 1 << 20 {
        // Not kept for every later line.
        *bytes = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::stages::repair::{plan_bytes, OrphanPolicy};
    use crate::transcript::Options;
    use base64::Engine;

    /// The rejects of `input`, fed in chunks, and the size of the largest piece emitted.
    fn rejects_of(input: &[u8], max_line_bytes: usize, chunk: usize) -> (Vec<serde_json::Value>, usize) {
        let opts = Options { max_line_bytes, ..Options::default() };
        let plan = plan_bytes(input, &opts, OrphanPolicy::Answer).unwrap();
        let mut rw = Rewriter::new(&plan, max_line_bytes);
        let (mut largest, mut rejects) = (0, Vec::new());
        let mut emit = |e: Emit<'_>| {
            if let Emit::Reject(b) = e {
                largest = largest.max(b.len());
                rejects.extend_from_slice(b);
            }
        };
        for c in input.chunks(chunk) {
            rw.feed(c, &mut emit);
        }
        rw.finish(&mut emit);
        let records = rejects.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect();
        (records, largest)
    }

    fn content(v: &serde_json::Value) -> (&'static str, Vec<u8>) {
        match (v.get("text"), v.get("base64")) {
            (Some(t), _) => ("text", t.as_str().unwrap().as_bytes().to_vec()),
            (_, Some(b)) => ("base64", base64::engine::general_purpose::STANDARD.decode(b.as_str().unwrap()).unwrap()),
            _ => panic!("{v}"),
        }
    }

    #[test]
    fn long_removed_lines_go_out_in_pieces_in_the_compact_field() {
        let text: Vec<u8> = b"not json \"quoted\" \xc3\xa9 ".iter().copied().cycle().take(1 << 20).collect();
        let control = vec![1u8; 1 << 20];
        let long = vec![b'x'; 3 << 20];
        let mut input = b"{\"role\":\"user\",\"content\":\"hi\"}\n".to_vec();
        for line in [&text, &control, &long] {
            input.extend_from_slice(line);
            input.push(b'\n');
        }
        let (records, largest) = rejects_of(&input, 2 << 20, 100_000);
        assert!(largest <= 6 * REJECT_PIECE + 2, "a piece of {largest} bytes");
        // The same records whatever the chunking (an over-long line in one chunk, too).
        assert_eq!(rejects_of(&input, 2 << 20, input.len()).0, records);
        let got: Vec<(&str, Vec<u8>)> = records.iter().map(content).collect();
        assert_eq!(got, vec![("text", text), ("base64", control), ("base64", long)]);
        assert_eq!(records[2]["reason"], "line_too_long");
        // A short line keeps its one-record form: text unless its escapes outgrow base64.
        let (records, _) = rejects_of(b"{\"role\":\"user\",\"content\":\"hi\"}\nnot \"json\"\n\x01\x02\x03\x04\n", 1 << 20, 7);
        assert_eq!(records.iter().map(content).collect::<Vec<_>>(), vec![("text", b"not \"json\"".to_vec()), ("base64", vec![1, 2, 3, 4])]);
    }
}
