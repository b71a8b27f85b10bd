//! Applying a plan: the second pass over the file.
//!
//! The rewriter is fed the same bytes again, in chunks, and emits the repaired transcript and
//! the rejects stream. Runs of lines the plan does not touch are handed on as one slice of the
//! input, unchanged; only edited lines (and, in a Claude Code file after a removal, lines whose
//! parent must be re-pointed) are looked at one by one. Over-long lines are streamed into the
//! rejects stream without being held.
//!
//! Every edit checks itself: the edited line is read again by the format's adapter, and an
//! edit that does not have the effect it was planned for (the line is not shaped as the edit
//! needs) is not made; it is reported in [`RewriteLog::failed`], so that the finding it was
//! meant to repair is reported as not repaired instead of as repaired.
//!
//! What it removes or changes goes to the rejects stream ([`rejects`](super::rejects)), the
//! original bytes of each such line.
//!
//! The rewriter also says where each output line comes from ([`Origins`]) and what became of
//! each input line it changed ([`Change`]), in [`origins`](super::origins).

use super::origins::{Action, Change, Failed, Origins, Source};
use super::plan::{Edit, Mend, Plan};
use super::rejects::{long_record_head, write_record, Emit, LongRecord};
use super::synth;
use crate::transcript::finding::Kind;
use crate::transcript::formats::claude_code;
use crate::transcript::formats::edit::{CallRef, Edited, Unable};
use crate::transcript::formats::{gemini, Format};
use crate::transcript::lines::{is_blank, Block, LineSplitter, BOM};
use crate::transcript::model::{id_hash, Entry, Message, Node, Role};
use crate::transcript::pairing::branches::Line;
use crate::transcript::{Map, Set};
use serde::Serialize;
use std::borrow::Cow;
use std::collections::VecDeque;

/// Bytes the rewriter holds between an assistant message and the last message merged into it
/// (chat formats): past this, the message is written as it is and later merges into it fail.
pub const MERGE_HOLD_LIMIT: usize = 32 << 20;

/// Counters of what the rewrite did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RewriteStats {
    /// Lines removed.
    pub removed: u64,
    /// Lines changed in place (blocks removed, parent re-pointed, message id joined, merged).
    pub modified: u64,
    /// Lines inserted.
    pub inserted: u64,
}

impl std::ops::AddAssign for RewriteStats {
    fn add_assign(&mut self, o: Self) {
        self.removed += o.removed;
        self.modified += o.modified;
        self.inserted += o.inserted;
    }
}

/// What a rewrite did, besides writing its output and rejects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RewriteLog {
    /// Counters.
    pub stats: RewriteStats,
    /// Every input line taken out or changed, in the order the rejects name them.
    pub changes: Vec<Change>,
    /// Where each output line comes from.
    pub origins: Origins,
    /// Edits that could not be made.
    pub failed: Vec<Failed>,
    /// The rewrite did something whose effect on the findings the plan could not foresee
    /// (Claude Code: a prompt moved under its removed parent's parent may be a rewind there):
    /// the output must be checked again.
    pub recheck: bool,
    /// Claude Code: the first line moved from under a removed line the checker could not read
    /// (its uuid found in what could be read of it) to that line's parent. The line had no
    /// known ancestors and now has: it may now belong to another conversation thread (turns
    /// side by side, a call that the thread moved on from) or be abandoned by a later rewind,
    /// so the output is checked again.
    pub unread_repoint: Option<u64>,
}

impl RewriteLog {
    /// Whether the output must be checked again: the rewrite says so, or a line was moved
    /// under new ancestors.
    pub fn needs_recheck(&self) -> bool {
        self.recheck || self.unread_repoint.is_some()
    }
}

/// An assistant message held back because later messages merge into it (chat formats), with
/// what came after it until then.
#[derive(Debug)]
struct Held {
    line: u64,
    /// Its content as it stands (merged so far).
    bytes: Vec<u8>,
    /// The line as it was on disk, without its `\n`.
    raw: Vec<u8>,
    bom: bool,
    term: &'static [u8],
    /// The last line that merges into it.
    until: u64,
    merged: bool,
    /// Whether its rejects record was written.
    recorded: bool,
    /// Lines written after it while it is held, with where they come from.
    tail: Vec<(Vec<u8>, Source)>,
    tail_bytes: usize,
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
    /// Chat formats: the lines later lines merge into, with the last line that does.
    merge_targets: Map<u64, u64>,
    splitter: Option<LineSplitter>,
    /// Bytes handed in through [`Rewriter::feed_until`] (not through the splitter).
    fed_until: u64,
    /// Whether the splitter was fed.
    split: bool,
    max_line_bytes: usize,
    next_line: u64,
    /// Claude Code: the parent each removed line's children move to, by the hash of the
    /// removed line's uuid ([`id_hash`]).
    repoint: Map<u64, Option<String>>,
    /// Removed lines among those that the checker could not read (their uuid was found in
    /// what could be read of them).
    unread_removed: Set<u64>,
    next_repoint: Option<(Option<String>, String)>,
    /// Claude Code lines not fed yet whose tree node the checker already read: (line, node),
    /// in line order. A line in it needs no look at its bytes to know it does not hang under a
    /// removed line.
    parents: VecDeque<(u64, Node)>,
    /// The `message.id` of lines another line joins (`None`: it has none).
    message_ids: Map<u64, Option<String>>,
    /// The `uuid`s of the lines a [`Edit::Bridge`] hangs a line under, read as they pass.
    uuids: Map<u64, Option<String>>,
    held: Option<Held>,
    long: LongRecord,
    /// Whether to write rejects records (a later round's rejects are written from the input).
    write_rejects: bool,
    /// The reject line being written (kept to reuse its allocation).
    reject_buf: Vec<u8>,
    /// The line limit.
    max: usize,
    log: RewriteLog,
    /// Upsert logs ([`Format::upserts`]): the corrected records to append after the last line,
    /// with the line each corrects, in line order.
    appends: Vec<(u64, Vec<u8>)>,
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
            merge_targets: Map::default(),
            splitter: Some(LineSplitter::new(max_line_bytes).keep_long()),
            fed_until: 0,
            split: false,
            max_line_bytes,
            next_line: 1,
            repoint: Map::default(),
            unread_removed: Set::default(),
            next_repoint: None,
            parents: VecDeque::new(),
            message_ids: Map::default(),
            uuids: Map::default(),
            held: None,
            long: LongRecord::default(),
            write_rejects: true,
            reject_buf: Vec::new(),
            max: max_line_bytes,
            log: RewriteLog::default(),
            appends: Vec::new(),
        }
    }

    /// Writes no rejects records (only [`RewriteLog::changes`]).
    pub fn without_rejects(mut self) -> Self {
        self.write_rejects = false;
        self
    }

    /// The file's format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Sets the file's format (before any line with an edit is fed).
    pub fn set_format(&mut self, format: Format) {
        self.format = format;
    }

    /// Tells the rewriter the tree nodes of Claude Code lines not fed yet (the checker's
    /// [`Node`] of each: the hashes of its uuid and of its `parentUuid`, or of
    /// `logicalParentUuid` when that is null), in line order. Optional: a line without one is
    /// looked at to find them.
    pub fn add_parents(&mut self, parents: impl IntoIterator<Item = (u64, Node)>) {
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
                    if let Edit::JoinTurn { like: look, .. } | Edit::Bridge { under: look, .. } = other {
                        self.like_lines.insert(*look);
                        self.interesting.push(*look);
                    }
                    if let Edit::MergeInto { line, into, .. } = other {
                        let until = self.merge_targets.entry(*into).or_insert(*line);
                        *until = (*until).max(*line);
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
            Edit::Bridge { line, under, .. } => (*line).min(*under),
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
        // A byte-order mark before the first line is looked at line by line.
        let bom = self.next_line == 1 && bytes.starts_with(BOM);
        if !self.busy() && !bom {
            // Nothing to do in any of these lines: hand them on in one piece.
            let count = memchr::memchr_iter(b'\n', &bytes[..whole]).count() as u64;
            let end = self.next_line + count;
            if end <= stop && self.interesting.get(self.cursor).is_none_or(|&l| l >= end) {
                if whole > 0 {
                    out(Emit::Out(&bytes[..whole]));
                }
                self.log.origins.push(Source::Same(self.next_line), count);
                self.next_line = end;
                self.forget_parents();
                if !self.split {
                    self.fed_until += whole as u64;
                }
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
            let (no_cr, term): (&[u8], &'static [u8]) = match raw.strip_suffix(b"\r") {
                Some(c) => (c, b"\r\n"),
                None => (raw, b"\n"),
            };
            // The first line may start with a byte-order mark: not content, but kept.
            let content = if n == 1 { no_cr.strip_prefix(BOM).unwrap_or(no_cr) } else { no_cr };
            let bom = content.len() < no_cr.len();
            let plain =
                !bom && self.interesting.get(self.cursor) != Some(&n) && self.held.is_none() && self.next_repoint.is_none() && !self.repoints(n, content, true);
            if plain {
                self.log.origins.push(Source::Same(n), 1);
            } else {
                if run < start {
                    out(Emit::Out(&bytes[run..start]));
                }
                if is_blank(content) {
                    self.put(&[&bytes[start..=nl]], Source::Same(n), out);
                } else {
                    self.line(n, raw, content, bom, term, out);
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
        if !self.split {
            self.fed_until += start as u64;
        }
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
        self.log.stats
    }

    /// Feeds the next chunk of the original file.
    pub fn feed(&mut self, chunk: &[u8], out: &mut impl FnMut(Emit<'_>)) {
        if !self.split {
            // The stream goes on where `feed_until` left it: the splitter starts at that offset
            // (only the stream's first byte may start a byte-order mark).
            self.split = true;
            self.splitter = Some(LineSplitter::resume(self.max_line_bytes, self.fed_until).keep_long());
        }
        if !self.split {
            // The stream goes on where `feed_until` left it: the splitter starts at that offset
            // (only the stream's first byte may start a byte-order mark).
            self.split = true;
            self.splitter = Some(LineSplitter::resume(self.max_line_bytes, self.fed_until).keep_long());
        }
        let mut splitter = self.splitter.take().expect("not finished");
        splitter.feed(chunk, &mut |b| self.block(b, out));
        self.splitter = Some(splitter);
    }

    /// Ends the stream: handles a torn last line and flushes what is held.
    pub fn finish(mut self, out: &mut impl FnMut(Emit<'_>)) -> RewriteLog {
        let mut splitter = self.splitter.take().expect("not finished");
        let line = self.next_line;
        let removing = self.removes(line);
        if splitter.pending_bytes() > 0 && splitter.pending_is_blank() {
            // A last line of whitespace without a newline: not a torn line, kept as it is —
            // ended with one when records are appended after it, which would glue onto it.
            let bytes = splitter.pending().to_vec();
            self.put(&[&bytes], Source::Same(line), out);
            if !self.appends.is_empty() {
                out(Emit::Out(b"\n"));
            }
        }
        match splitter.finish() {
            Some(t) if removing => match t.bytes {
                Some(bytes) => {
                    let bytes = bytes.to_vec();
                    self.reject(line, Action::Removed, Some(Kind::TornLine), false, &bytes, out);
                    self.log.stats.removed += 1;
                }
                None => self.close_long(line, out),
            },
            Some(t) => {
                if let Some(bytes) = t.bytes {
                    let bytes = bytes.to_vec();
                    self.put(&[&bytes], Source::Same(line), out);
                    if !self.appends.is_empty() {
                        // What follows starts a line of its own.
                        out(Emit::Out(b"\n"));
                    }
                }
            }
            None => {}
        }
        self.flush_held(out);
        let last = self.next_line.saturating_sub(1).max(line.min(self.next_line));
        for (_, b) in std::mem::take(&mut self.appends) {
            self.put(&[&b, b"\n"], Source::Inserted { after: last }, out);
            self.log.stats.inserted += 1;
        }
        self.log
    }

    fn removes(&self, line: u64) -> bool {
        self.edits.get(&line).is_some_and(|es| es.iter().any(|e| matches!(e, Edit::Remove { .. })))
    }

    /// Whether line `n` hangs under a removed line (Claude Code) and must be re-pointed. A line
    /// whose parent the checker read is looked at only when that parent was removed (or,
    /// rarely, when its `logicalParentUuid` was: then the look finds nothing to do).
    ///
    /// A line the output keeps (`kept`) brings its uuid back: lines under it stay under it,
    /// although a removed line had that uuid too (a cut copy of a line, written before it).
    fn repoints(&mut self, n: u64, line: &[u8], kept: bool) -> bool {
        self.forget_parents();
        if self.repoint.is_empty() || !self.format.uuid_tree() {
            return false;
        }
        let hint = self.parents.front().filter(|&&(l, _)| l == n).map(|&(_, node)| node);
        let (id, moves) = match hint {
            Some(node) if !node.parent.is_some_and(|p| self.repoint.contains_key(&p)) => (Some(node.id), false),
            Some(node) => (Some(node.id), self.format.parent_span(line).and_then(|(_, p)| p).is_some_and(|p| self.repoint.contains_key(&id_hash(&p)))),
            None => {
                let (uuid, parent) = self.format.tree_ids(line);
                (uuid.map(|u| id_hash(&u)), parent.is_some_and(|p| self.repoint.contains_key(&id_hash(&p))))
            }
        };
        if kept && !moves {
            if let Some(id) = id {
                self.back(id);
            }
        }
        moves
    }

    /// A uuid a kept line has: no longer a removed line's.
    fn back(&mut self, id: u64) {
        if self.repoint.remove(&id).is_some() {
            self.unread_removed.remove(&id);
        }
    }

    fn busy(&self) -> bool {
        self.held.is_some() || self.next_repoint.is_some() || !self.repoint.is_empty()
    }

    fn block(&mut self, b: Block<'_>, out: &mut impl FnMut(Emit<'_>)) {
        match b {
            Block::LongBytes(bytes) => {
                let n = self.next_line;
                if self.removes(n) {
                    if !self.long.open {
                        let reason = self.edits.get(&n).and_then(|es| {
                            es.iter().find_map(|e| match e {
                                Edit::Remove { reason, .. } => Some(*reason),
                                _ => None,
                            })
                        });
                        if self.write_rejects {
                            self.long.start(&long_record_head(n, Action::Removed, reason), out);
                        } else {
                            self.long.open = true;
                        }
                    }
                    if self.write_rejects {
                        self.long.bytes(bytes, out);
                    }
                } else {
                    // Kept (no plan removes an over-long line it read; a blank one is kept).
                    self.flush_held(out);
                    out(Emit::Out(bytes));
                }
            }
            Block::TooLong { .. } => {
                let n = self.next_line;
                if self.long.open || self.removes(n) {
                    self.close_long(n, out);
                } else {
                    out(Emit::Out(b"\n"));
                    self.log.origins.push(Source::Same(n), 1);
                }
                self.next_line += 1;
            }
            Block::Lines { bytes, .. } => {
                self.feed_until(bytes, u64::MAX, out);
            }
        }
    }

    /// Ends the record of a removed over-long line.
    fn close_long(&mut self, n: u64, out: &mut impl FnMut(Emit<'_>)) {
        let reason = self.edits.remove(&n).and_then(|es| {
            es.into_iter().find_map(|e| match e {
                Edit::Remove { reason, .. } => Some(reason),
                _ => None,
            })
        });
        if self.write_rejects {
            self.long.close(out);
        } else {
            self.long.discard();
        }
        self.log.changes.push(Change { line: n, action: Action::Removed, reason, parent: false });
        self.log.stats.removed += 1;
    }

    /// Writes output bytes that stand for one output line from `src`, behind a held message
    /// if there is one.
    fn put(&mut self, parts: &[&[u8]], src: Source, out: &mut impl FnMut(Emit<'_>)) {
        if let Some(h) = self.held.as_mut() {
            let bytes = parts.concat();
            h.tail_bytes += bytes.len();
            h.tail.push((bytes, src));
            if h.tail_bytes > MERGE_HOLD_LIMIT {
                // Too much to hold: the message goes out as it stands; later merges fail.
                self.flush_held(out);
            }
            return;
        }
        for p in parts {
            out(Emit::Out(p));
        }
        self.log.origins.push(src, 1);
    }

    fn fail(&mut self, edit: &Edit, why: &'static str) {
        self.log.failed.push(Failed { edit: edit.clone(), why });
    }

    fn line(&mut self, n: u64, raw: &[u8], content: &[u8], bom: bool, term: &'static [u8], out: &mut impl FnMut(Emit<'_>)) {
        if self.held.as_ref().is_some_and(|h| n > h.until) {
            self.flush_held(out);
        }
        let mut edits = self.edits.remove(&n).unwrap_or_default();
        if let Some(first) = edits.iter().position(|e| matches!(e, Edit::Remove { .. })) {
            // A removed line gets no other edit (as in a finished plan).
            edits.swap(0, first);
            edits.truncate(1);
        }
        // The same edit twice (two findings of one kind on one line) is made once.
        if edits.len() > 1 {
            let mut seen: Set<Edit> = Set::default();
            edits.retain(|e| seen.insert(e.clone()));
        }
        if self.format.upserts() {
            return self.upsert_line(n, raw, content, edits, out);
        }
        let claude = self.format.uuid_tree();
        let mut bytes: Cow<'_, [u8]> = Cow::Borrowed(content);
        let mut modified: Option<Option<Kind>> = None;
        let mut parent = false;
        let mut removed = None;
        if claude && (self.next_repoint.is_some() || !self.repoint.is_empty()) {
            if let Some(b) = self.repoint_parent(n, &bytes) {
                bytes = Cow::Owned(b);
                parent = true;
            }
        }
        if self.like_lines.contains(&n) {
            self.message_ids.insert(n, claude_code::message_id(content));
            self.uuids.insert(n, self.format.tree_ids(content).0);
        }
        let mut merge = None;
        if edits.len() > 1 && edits.iter().all(|e| matches!(e, Edit::DropResults { .. })) {
            // Many results of one line removed (as many as the line has blocks): in one walk of
            // the line and one reading of it, when that gives what the removals one at a time
            // would; otherwise one at a time, below.
            if let Some(done) = self.drop_many(&bytes, &edits) {
                match done {
                    Edited::Line(b) => {
                        bytes = Cow::Owned(b);
                        modified = Some(edits.last().map(Edit::reason));
                    }
                    Edited::Gone => removed = edits.last().map(Edit::reason),
                }
                edits.clear();
            }
        }
        for e in &edits {
            let edited = match e {
                Edit::Remove { reason, .. } => {
                    removed = Some(*reason);
                    continue;
                }
                Edit::DropResults { call_id, keep_first, .. } => synth::drop_results(self.format, &bytes, call_id, *keep_first).and_then(|r| {
                    let want = usize::from(*keep_first);
                    self.checked(r, |m| m.results.iter().filter(|x| x.id == call_id.as_str()).count() == want)
                }),
                Edit::DropCall { call_id, .. } => synth::drop_call(self.format, &bytes, call_id)
                    .and_then(|r| self.checked(r, |m| m.role == Role::Assistant && !m.calls.iter().any(|c| c.id == call_id.as_str()))),
                Edit::JoinTurn { like, .. } => match self.message_ids.get(like).cloned().flatten() {
                    Some(id) => claude_code::set_message_id(&bytes, &id).and_then(|b| {
                        let key = Some(id_hash(&id));
                        self.checked(Edited::Line(b), |m| m.role == Role::Assistant && m.turn == key)
                    }),
                    None => Err(Unable("the turn to join has no message id")),
                },
                Edit::Bridge { under, .. } => match self.uuids.get(under).cloned().flatten() {
                    Some(uuid) => self.format.set_parent(&bytes, Some(&uuid)).map(Edited::Line).ok_or(Unable("the line has no parentUuid to set")),
                    None => Err(Unable("the line to hang it under has no uuid")),
                },
                Edit::Mend { how, .. } => self.format.mend_blocks(&bytes, how).and_then(|r| self.checked(r, |m| mended(how, m))),
                Edit::MergeInto { .. } => {
                    merge = Some(e.clone());
                    continue;
                }
                Edit::Insert { .. } | Edit::Salvage { .. } => continue,
            };
            match edited {
                // The line already was as the edit makes it (a join to the id it has).
                Ok(Edited::Line(b)) if b == *bytes => {}
                Ok(Edited::Line(b)) => {
                    bytes = Cow::Owned(b);
                    modified = Some(Some(e.reason()));
                    // A joined line takes the message id of the turn before: a line that read
                    // as a retry of another message (which abandons the answer it replaces, and
                    // demotes what lies only there) no longer does, and what it hid counts
                    // again (tests/data/repair/0038): the output is checked again.
                    self.log.recheck |= matches!(e, Edit::JoinTurn { .. });
                }
                Ok(Edited::Gone) => removed = Some(e.reason()),
                Err(Unable(why)) => self.fail(e, why),
            }
            if removed.is_some() {
                break;
            }
        }
        if let (Some(m), None) = (&merge, removed) {
            match self.merge(m, &bytes) {
                Ok(first) => {
                    if first {
                        let h = self.held.as_ref().expect("merged into it");
                        let (line, original) = (h.line, h.raw.clone());
                        self.reject(line, Action::Modified, Some(m.reason()), false, &original, out);
                        self.log.stats.modified += 1;
                    }
                    self.reject(n, Action::Merged, Some(m.reason()), parent, raw, out);
                    self.log.stats.removed += 1;
                    let follows = bytes.into_owned();
                    self.insert_after(n, &follows, true, None, None, term, out);
                    if self.held.as_ref().is_some_and(|h| h.until <= n) {
                        self.flush_held(out);
                    }
                    return;
                }
                Err(why) => self.fail(m, why),
            }
        }
        // The uuid the next lines hang under if this line goes, and the one inserted lines
        // follow.
        let (mut own_uuid, mut own_parent) = (None, None);
        if claude && (removed.is_some() || self.inserts.contains_key(&n)) {
            let (uuid, p) = self.format.tree_ids(&bytes);
            own_uuid = uuid;
            own_parent = p.map(|p| self.repoint.get(&id_hash(&p)).cloned().unwrap_or(Some(p))).unwrap_or(None);
        }
        if let Some(reason) = removed {
            self.reject(n, Action::Removed, Some(reason), false, raw, out);
            self.log.stats.removed += 1;
            if let (true, Some(u)) = (claude, own_uuid.as_ref()) {
                // A parent the agent refuses (the reason the line went) is not handed down.
                let own_parent = own_parent.clone().filter(|p| self.format.takes_parent(p));
                self.repoint.insert(id_hash(u), own_parent);
                if reason.is_framing() {
                    self.unread_removed.insert(id_hash(u));
                }
            }
        } else {
            if claude && !self.repoint.is_empty() {
                if let Some(u) = own_uuid.clone().or_else(|| self.format.tree_ids(&bytes).0) {
                    self.back(id_hash(&u));
                }
            }
            let changed = modified.is_some() || parent;
            if changed {
                self.reject(n, Action::Modified, modified.flatten(), parent, raw, out);
                self.log.stats.modified += 1;
            }
            let until = self.merge_targets.get(&n).copied().filter(|&u| u > n);
            if let Some(until) = until {
                self.flush_held(out);
                self.held = Some(Held {
                    line: n,
                    bytes: bytes.to_vec(),
                    raw: raw.to_vec(),
                    bom,
                    term,
                    until,
                    merged: false,
                    recorded: changed,
                    tail: Vec::new(),
                    tail_bytes: 0,
                });
            } else if changed {
                let prefix: &[u8] = if bom { BOM } else { b"" };
                self.put(&[prefix, &bytes, term], Source::Modified(n), out);
            } else {
                self.put(&[raw, b"\n"], Source::Same(n), out);
            }
        }
        self.insert_after(n, &bytes, removed.is_some(), own_uuid, own_parent, term, out);
    }

    /// A line of an upsert log (Gemini CLI): it stays as it is (unless removed), and what the
    /// edits change of its record is appended, as a corrected version of it, after the last
    /// line ([`Rewriter::finish`]): the agent's loader lets the last version of a record win,
    /// in the place the first took. A removed result is a version of the `user` record
    /// without it ([`gemini::drop_responses`]); a result inserted for a call (the plan puts it
    /// after the call's own line) is a version of the call's record with the result in its
    /// `toolCalls` entry ([`gemini::answer_call`]); a call removed, a version of its record
    /// without it ([`gemini::drop_call_record`]).
    fn upsert_line(&mut self, n: u64, raw: &[u8], content: &[u8], edits: Vec<Edit>, out: &mut impl FnMut(Emit<'_>)) {
        let mut removed = None;
        let mut fixed: Option<Vec<u8>> = None;
        for e in &edits {
            match e {
                Edit::Remove { reason, .. } => {
                    removed = Some(*reason);
                    break;
                }
                Edit::DropResults { call_id, .. } => match gemini::drop_responses(fixed.as_deref().unwrap_or(content), call_id) {
                    Ok(b) => fixed = Some(b),
                    Err(Unable(why)) => self.fail(e, why),
                },
                Edit::DropCall { call_id, .. } => match gemini::drop_call_record(fixed.as_deref().unwrap_or(content), call_id) {
                    Ok(b) => fixed = Some(b),
                    Err(Unable(why)) => self.fail(e, why),
                },
                Edit::Insert { .. } | Edit::Salvage { .. } => {}
                other => self.fail(other, "a Gemini CLI record is corrected by appending it again, not edited in place"),
            }
        }
        for e in self.inserts.remove(&n).unwrap_or_default() {
            let Edit::Insert { call_id, text, .. } = &e else { continue };
            if removed.is_some() {
                self.fail(&e, "the call's line is removed");
                continue;
            }
            match gemini::answer_call(fixed.as_deref().unwrap_or(content), call_id, text.text()) {
                Ok(b) => fixed = Some(b),
                Err(Unable(why)) => self.fail(&e, why),
            }
        }
        match removed {
            Some(reason) => {
                self.reject(n, Action::Removed, Some(reason), false, raw, out);
                self.log.stats.removed += 1;
            }
            None => self.put(&[raw, b"\n"], Source::Same(n), out),
        }
        if let (Some(b), None) = (fixed, removed) {
            self.appends.push((n, b));
        }
    }

    /// The line with every `DropResults` of `edits` made in one walk, when each would have been
    /// made one after the other (each call had results there, and the line read afterwards has
    /// the results each edit leaves); `None` otherwise.
    fn drop_many(&self, line: &[u8], edits: &[Edit]) -> Option<Edited> {
        let drops: Vec<(&str, bool)> = edits
            .iter()
            .filter_map(|e| match e {
                Edit::DropResults { call_id, keep_first, .. } => Some((call_id.as_str(), *keep_first)),
                _ => None,
            })
            .collect();
        match self.format.drop_results_many(line, &drops)? {
            Edited::Line(b) => self.reads_as_dropped(&b, &drops).then_some(Edited::Line(b)),
            // The last removal leaves nothing: the ones before it must each have done their
            // part (no reading of the line is left to check the last).
            Edited::Gone => {
                let before = &drops[..drops.len() - 1];
                match self.format.drop_results_many(line, before)? {
                    Edited::Line(b) if self.reads_as_dropped(&b, before) => Some(Edited::Gone),
                    _ => None,
                }
            }
        }
    }

    /// Whether `line` is within the limit and reads with the results each of `drops` leaves of
    /// its call (its first one, or none).
    fn reads_as_dropped(&self, line: &[u8], drops: &[(&str, bool)]) -> bool {
        if line.strip_suffix(b"\r").unwrap_or(line).len() > self.max {
            return false;
        }
        let Ok(Entry::Message(m)) = self.format.parse(line).map(|p| p.entry) else { return false };
        let mut left: Map<&str, usize> = Map::default();
        for r in &m.results {
            *left.entry(r.id.as_ref()).or_default() += 1;
        }
        drops.iter().all(|(id, keep_first)| left.get(id).copied().unwrap_or(0) == usize::from(*keep_first))
    }

    /// An edited line, if the adapter reads it as a message with the edit's effect (`ok`).
    fn checked(&self, e: Edited, ok: impl Fn(&Message<'_>) -> bool) -> Result<Edited, Unable> {
        let Edited::Line(b) = e else { return Ok(e) };
        if b.strip_suffix(b"\r").unwrap_or(&b).len() > self.max {
            // The line would grow over the limit: the output would have a finding the input
            // did not.
            return Err(Unable("the edited line would be over the line limit"));
        }
        let reads = matches!(self.format.parse(&b).map(|p| p.entry), Ok(Entry::Message(m)) if ok(&m));
        if reads {
            Ok(Edited::Line(b))
        } else {
            Err(Unable("the edited line does not read as intended"))
        }
    }

    /// Merges the message `bytes` into the held one (the edit `m`); returns whether the held
    /// message changes for the first time (its original is then due in the rejects).
    fn merge(&mut self, m: &Edit, bytes: &[u8]) -> Result<bool, &'static str> {
        let Edit::MergeInto { into, .. } = m else { unreachable!("a merge") };
        let format = self.format;
        let Some(h) = self.held.as_mut().filter(|h| h.line == *into) else {
            return Err("the message to merge into was written already (too much lay between them)");
        };
        let calls = |b: &[u8]| match format.parse(b).map(|p| p.entry) {
            Ok(Entry::Message(m)) if m.role == Role::Assistant => Some(m.calls.iter().map(|c| c.id.to_string()).collect::<Vec<_>>()),
            _ => None,
        };
        let (Some(mut want), Some(more)) = (calls(&h.bytes), calls(bytes)) else {
            return Err("the messages to merge are not both assistant messages");
        };
        want.extend(more);
        let merged = synth::merge_messages(format, &h.bytes, bytes).map_err(|Unable(why)| why)?;
        if calls(&merged).as_ref() != Some(&want) {
            return Err("the merged message does not read as both messages");
        }
        if merged.len() > self.max {
            return Err("the merged message would be over the line limit");
        }
        h.bytes = merged;
        h.merged = true;
        // The held message's original goes to the rejects with the first merge.
        Ok(!std::mem::replace(&mut h.recorded, true))
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
        // removed, under its parent), each next one under the previous. After a line that has no
        // uuid (the checker reads it in the main thread), the inserts have none either and hang
        // beside it, under its parent: they are read in the thread of the call they answer.
        let uuidless = own_uuid.is_none();
        let mut parent = if follows_removed || uuidless { own_parent } else { own_uuid.clone() };
        // The line followed is read and hashed once, however many results follow it.
        let env = self.format.result_envelope(follows);
        let seed = (!uuidless).then(|| synth::UuidSeed::new(follows));
        for e in inserts {
            let Edit::Insert { call_id, tool, item, text, .. } = e else { continue };
            let call = CallRef { id: call_id, tool, item };
            let uuid = seed.as_ref().map_or_else(String::new, |s| s.uuid(&call.id));
            let line = self.format.synthetic_result_in(&env, &call, text.text(), parent.as_deref(), &uuid);
            self.put(&[&line, term], Source::Inserted { after: n }, out);
            self.log.stats.inserted += 1;
            if !uuidless {
                parent = Some(uuid);
            }
        }
        if self.format.uuid_tree() {
            if let (Some(last), Some(followed)) = (parent, own_uuid) {
                // The line that hung under the followed line now hangs under the last insert.
                self.next_repoint = Some((Some(followed), last));
            }
        }
    }

    /// The line with its parent re-pointed, when it must be: after an insertion (the first
    /// later line that hung under the followed line: lines of other conversation threads may
    /// come between), or under a removed line.
    fn repoint_parent(&mut self, n: u64, line: &[u8]) -> Option<Vec<u8>> {
        let (_, parent) = self.format.parent_span(line)?;
        let target = match self.next_repoint.take() {
            // Under the inserted results that now sit between the line and its parent: the
            // tree keeps its shape.
            Some((expect, new)) if expect.as_deref() == parent.as_deref() => Some(Some(new)),
            next => {
                self.next_repoint = next;
                let hash = id_hash(parent.as_deref()?);
                let target = self.repoint.get(&hash).cloned()?;
                // Moved to its grandparent, a prompt (or an answer) may arrive where a
                // conversation line (an answer of another message) already hangs: a rewind (a
                // retry) the input did not have. A sidechain line takes the thread of its new
                // parent, which is not the removed line's when the checker met that parent only
                // after the removed line (lines out of order): its turns and calls are judged
                // with another thread's then.
                let (branches, sidechain) = match self.format.parse(line) {
                    Ok(p) => (matches!(Line::of(&p.entry), Line::Prompt | Line::Answer(_)), p.node.is_some_and(|n| n.sidechain)),
                    Err(_) => (false, false),
                };
                self.log.recheck |= branches || sidechain;
                // Under a line the checker could not read, the line had no known ancestors:
                // now it has, and a later rewind to one of them abandons it too.
                if self.unread_removed.contains(&hash) {
                    self.log.unread_repoint.get_or_insert(n);
                }
                Some(target)
            }
        }?;
        let moved = self.format.set_parent(line, target.as_deref())?;
        if moved.len() > self.max {
            // Over the limit with its new parent (a longer id): the line stays as it is, and
            // the output is checked again, so that what is left is reported.
            self.log.recheck = true;
            return None;
        }
        Some(moved)
    }

    fn flush_held(&mut self, out: &mut impl FnMut(Emit<'_>)) {
        let Some(h) = self.held.take() else { return };
        if h.recorded {
            let prefix: &[u8] = if h.bom { BOM } else { b"" };
            for p in [prefix, &h.bytes, h.term] {
                out(Emit::Out(p));
            }
            self.log.origins.push(Source::Modified(h.line), 1);
        } else {
            out(Emit::Out(&h.raw));
            out(Emit::Out(b"\n"));
            self.log.origins.push(Source::Same(h.line), 1);
        }
        for (bytes, src) in h.tail {
            out(Emit::Out(&bytes));
            self.log.origins.push(src, 1);
        }
    }

    fn reject(&mut self, line: u64, action: Action, reason: Option<Kind>, parent: bool, original: &[u8], out: &mut impl FnMut(Emit<'_>)) {
        self.log.changes.push(Change { line, action, reason, parent });
        if !self.write_rejects {
            return;
        }
        write_record(&mut self.reject_buf, line, action, reason, original, self.max, out);
    }
}

/// Whether a mended line reads as the mend promises: the API rule it mends holds for it.
fn mended(how: &Mend, m: &Message<'_>) -> bool {
    let a = &m.api;
    match *how {
        Mend::Images { max_px, max_base64 } => {
            a.empty_image.is_none() && a.image_bytes.is_none_or(|(_, n)| n <= max_base64) && a.image_px.is_none_or(|(_, w, h)| w.max(h) <= max_px)
        }
        Mend::DropUnsignedThinking => a.unsigned_thinking.is_none(),
        Mend::ThinkingFirst => a.thinking_after.is_none(),
        Mend::ResultsFirst => a.result_after.is_none(),
        Mend::DropBlankText => a.empty_text.is_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::repair::rejects::REJECT_PIECE;
    use crate::transcript::repair::OrphanPolicy;
    use crate::transcript::repair_run::plan_bytes;
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
