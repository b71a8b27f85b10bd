//! What the model sees when a session resumes: the format-specific compaction cuts behind one
//! stage fed by a reverse-paged reader.
//!
//! The reader hands over lines newest first; this stage detects the format from them (or takes
//! it as given), routes them to the Claude Code [`CompactionCut`] or the Codex
//! [`ModelContextScan`], and says when the reading can stop. The chat formats have no
//! compaction: their context is the whole file. Lines that cannot be read are kept for the raw
//! output (which prints lines verbatim) and reported as [`Skipped`]; over-long and torn lines are
//! not part of any context and are reported too.
//!
//! Calling order: [`ContextScan::push`] every item of a [`ReverseSplitter`] until it returns
//! [`Progress::Complete`] or the start of the stream is reached; then, if
//! [`ContextScan::needs_head`], read the stream's first line (a Codex rollout's canonical
//! `session_meta`) and pass it to [`ContextScan::finish`].
//!
//! [`ReverseSplitter`]: crate::transcript::reverse::ReverseSplitter

use super::chain::{self, Node};
use super::compaction::{CompactionCut, Preserved};
use super::model_context::{ModelContextScan, RolloutItem};
use crate::transcript::checker::{read_line, Outcome};
use crate::transcript::finding::Kind;
use crate::transcript::formats::claude_code::ClaudeFields;
use crate::transcript::formats::codex::ItemKind;
use crate::transcript::formats::{copilot, gemini, pi, qwen, Detector, Format};
use crate::transcript::progress::Progress;
use crate::transcript::reverse::{LineBytes, Page, RevItem, SourceLine};

/// A line left out of the context, or kept only verbatim, because it cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Stream offset of the line.
    pub offset: u64,
    /// Its physical position from the end of the stream (1 = the last line).
    pub from_end: u64,
    /// What is wrong with it: `malformed_line`, `invalid_utf8`, `line_too_long` or `torn_line`.
    pub kind: Kind,
    /// Details.
    pub message: String,
}

/// Where the context starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Nothing bounds it: the context is the whole file.
    Whole,
    /// A compaction bounds it. Claude Code: the context is what follows the boundary line at
    /// `offset`. Codex: the context starts with the item at `offset`, after the head
    /// `session_meta`.
    Bounded {
        /// Offset of the boundary line (Claude Code) or of the first item kept (Codex).
        offset: u64,
    },
}

/// The result of a [`ContextScan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// The format, when it could be detected.
    pub format: Option<Format>,
    /// Where the context starts.
    pub cut: Cut,
    /// The lines of the context, oldest first, as the raw output prints them (a Codex
    /// `session_meta` first after a bounded cutoff).
    pub lines: Vec<SourceLine>,
    /// Claude Code: what each line of `lines` is to the canonical records, read once during
    /// the scan (same length as `lines`); empty for the other formats.
    pub claude_fields: Vec<ClaudeFields>,
    /// Lines that could not be read, newest first.
    pub skipped: Vec<Skipped>,
    /// Codex: the cut is bounded but the rollout's first line is not the `session_meta` that
    /// should come first, so the context starts without it.
    pub head_missing: bool,
    /// Claude Code: where the chain walk stopped at a missing parent, and the message lines
    /// before it that the agent therefore does not send ([`chain`]).
    pub lost: Option<Lost>,
}

/// Claude Code: history the agent leaves out on resume because a parent is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    /// Offset of the line whose parent is missing (the resumed conversation starts there).
    pub at: u64,
    /// Offsets of the message lines before it that are not sent, oldest first.
    pub lines: Vec<u64>,
}

#[derive(Debug)]
enum Route {
    /// The format is not known yet: lines wait here, newest first.
    Undecided(Vec<SourceLine>),
    Claude(CompactionCut<(SourceLine, ClaudeFields)>),
    Codex(ModelContextScan),
    /// No compaction in this format: every line is context (newest first).
    Whole(Vec<SourceLine>),
    /// Pi: the whole file (newest first), for the walk from its last entry to the root.
    Pi(Vec<SourceLine>),
    /// Qwen Code: the whole file (newest first), for the walk from its last record to the root.
    Qwen(Vec<SourceLine>),
    /// Gemini CLI: the whole file (newest first), for its loader's last-write-wins reading.
    Gemini(Vec<SourceLine>),
    /// Copilot: the whole file (newest first); the context starts at its last successful
    /// compaction.
    Copilot(Vec<SourceLine>),
}

/// Routes a reverse-paged stream to the compaction cut of its format. See the module docs.
#[derive(Debug)]
pub struct ContextScan {
    detector: Detector,
    route: Route,
    skipped: Vec<Skipped>,
    complete: bool,
}

impl ContextScan {
    /// A scan for a stream of `format`, or of a format to detect from its lines.
    pub fn new(format: Option<Format>) -> Self {
        let mut scan = ContextScan { detector: Detector::new(), route: Route::Undecided(Vec::new()), skipped: Vec::new(), complete: false };
        if let Some(f) = format {
            scan.detector = Detector::fixed(f);
            scan.route = Self::route_for(f);
        }
        scan
    }

    fn route_for(format: Format) -> Route {
        match format {
            Format::ClaudeCode => Route::Claude(CompactionCut::new()),
            Format::Codex => Route::Codex(ModelContextScan::new()),
            Format::Pi => Route::Pi(Vec::new()),
            Format::Qwen => Route::Qwen(Vec::new()),
            Format::Gemini => Route::Gemini(Vec::new()),
            Format::Copilot => Route::Copilot(Vec::new()),
            Format::OpenAiChat | Format::Anthropic | Format::Dataset(_) => Route::Whole(Vec::new()),
        }
    }

    /// Feeds the next older item of the stream. `page`, the page the splitter was fed when it
    /// handed the item out, lets a kept line share the page's bytes instead of copying them.
    pub fn push(&mut self, item: RevItem<'_>, page: Option<&Page>) -> Progress {
        if self.complete {
            return Progress::Complete;
        }
        let (offset, from_end) = (item.offset(), item.from_end());
        let bytes = match item {
            RevItem::Line { bytes, .. } => bytes,
            RevItem::TooLong { len, .. } => {
                self.skip(offset, from_end, Kind::LineTooLong, format!("line of {len} bytes is over the line limit; left out"));
                return Progress::NeedMore;
            }
            RevItem::Torn { len, .. } => {
                let message = format!("last line ({len} bytes) has no newline: an interrupted write, not part of the context");
                self.skip(offset, from_end, Kind::TornLine, message);
                return Progress::NeedMore;
            }
        };
        let line = SourceLine { offset, bytes: page.map_or_else(|| LineBytes::copy(bytes), |p| p.keep(offset, bytes)) };
        let p = match &mut self.route {
            Route::Undecided(waiting) => {
                if let Outcome::Fault(f) = read_line(0, bytes, usize::MAX, None) {
                    waiting.push(line);
                    self.skip(offset, from_end, f.kind, f.message);
                    return Progress::NeedMore;
                }
                waiting.push(line);
                self.detector.observe(bytes);
                match self.detector.format() {
                    Some(f) => self.decide(f),
                    None => Progress::NeedMore,
                }
            }
            _ => self.route(line, from_end, true),
        };
        self.complete = p.is_complete();
        p
    }

    /// The format is known: the lines that waited go to its cut, newest first. Their faults
    /// were reported while they waited.
    fn decide(&mut self, format: Format) -> Progress {
        let Route::Undecided(waiting) = std::mem::replace(&mut self.route, Self::route_for(format)) else {
            return Progress::NeedMore;
        };
        for line in waiting {
            if self.route(line, 0, false).is_complete() {
                return Progress::Complete;
            }
        }
        Progress::NeedMore
    }

    /// Hands one line to the cut of the decided format; `report` says whether a line that
    /// cannot be read is still to be reported.
    fn route(&mut self, line: SourceLine, from_end: u64, report: bool) -> Progress {
        let format = self.detector.format();
        let fault = |bytes: &[u8]| match read_line(0, bytes, usize::MAX, format) {
            Outcome::Fault(f) => Some(f),
            _ => None,
        };
        let offset = line.offset;
        let (progress, unreadable) = match &mut self.route {
            Route::Claude(cut) => {
                // One parse serves both the cut (is it the boundary?) and the canonical records.
                let read = simdutf8::basic::from_utf8(&line.bytes).ok().and_then(|_| ClaudeFields::read(&line.bytes).ok());
                let unread = read.is_none();
                let fields = read.unwrap_or(ClaudeFields::Other { sidechain: false });
                if cut.wants_older() {
                    // Before the boundary, for the messages it preserves: not context otherwise,
                    // so an unreadable line here is not reported.
                    let uuid = Node::read(&line.bytes).and_then(|n| n.uuid);
                    (cut.push_older((line, fields), uuid), None)
                } else {
                    let f = if unread { fault(&line.bytes) } else { None };
                    let boundary = fields.is_boundary();
                    let preserved = if boundary && !cut.is_bounded() { Preserved::of(&line.bytes) } else { None };
                    let mut progress = cut.push((line, fields), boundary);
                    if let Some(p) = preserved {
                        cut.want(p, |(l, _)| Node::read(&l.bytes).and_then(|n| n.uuid));
                        if cut.wants_older() {
                            progress = Progress::NeedMore;
                        }
                    }
                    (progress, f)
                }
            }
            Route::Codex(scan) => {
                let kind = ItemKind::of(&line.bytes);
                let f = if kind == ItemKind::Unreadable { fault(&line.bytes) } else { None };
                (scan.push(RolloutItem { offset, bytes: line.bytes, kind }), f)
            }
            Route::Whole(lines) | Route::Pi(lines) | Route::Qwen(lines) | Route::Gemini(lines) | Route::Copilot(lines) => {
                let f = fault(&line.bytes);
                lines.push(line);
                (Progress::NeedMore, f)
            }
            Route::Undecided(_) => unreachable!("route is only called once the format is known"),
        };
        if let (Some(f), true) = (unreadable, report) {
            self.skip(offset, from_end, f.kind, f.message);
        }
        progress
    }

    fn skip(&mut self, offset: u64, from_end: u64, kind: Kind, message: String) {
        self.skipped.push(Skipped { offset, from_end, kind, message });
    }

    /// The format decided so far.
    pub fn format(&self) -> Option<Format> {
        self.detector.format()
    }

    /// Whether [`ContextScan::finish`] wants the stream's first line: a Codex rollout cut
    /// before its start puts the head `session_meta` first.
    pub fn needs_head(&self) -> bool {
        matches!(&self.route, Route::Codex(s) if s.is_bounded())
    }

    /// The context. `head` is the stream's first line when [`ContextScan::needs_head`] (ignored
    /// otherwise); a head that is not a `session_meta` is left out (see
    /// [`Context::head_missing`]).
    pub fn finish(mut self, head: Option<&[u8]>) -> Context {
        let format = self.detector.format();
        let mut claude_fields = Vec::new();
        let mut head_missing = false;
        let mut lost = None;
        let (cut, lines) = match std::mem::replace(&mut self.route, Route::Whole(Vec::new())) {
            Route::Undecided(mut lines) | Route::Whole(mut lines) => {
                lines.reverse();
                (Cut::Whole, lines)
            }
            Route::Claude(c) => {
                let mut c = c.finish();
                let relink = preserved_relink(&mut c);
                // The main conversation's `isSidechain`: the boundary's, or the oldest message's
                // (in a subagent's own file every line is a sidechain). Records of other threads,
                // subagents that Claude Code 1.0.x wrote into the main file, are not context.
                let main = c.boundary.as_ref().map(|(_, f)| f.sidechain()).or_else(|| c.lines.iter().find(|(_, f)| f.is_message()).map(|(_, f)| f.sidechain()));
                // The agent sends the chain of the newest leaf, not every line (see `chain`): the
                // boundary is the chain's root. Only message lines are judged by the walk; the
                // others are not sent as messages anyway (a local_command line is placed by
                // `write`).
                // A subagent's own file (every line a sidechain) is not resumed by
                // `claude --resume`: its lines are kept as they are.
                // The message lines go in the order the agent sends them (its parallel-call
                // recovery puts lines of a message after the one on the chain); the others keep
                // their places.
                let mut order: Option<Vec<usize>> = None;
                let sent: Vec<bool> = if main == Some(true) {
                    vec![true; c.lines.len()]
                } else {
                    let mut nodes: Vec<Option<Node>> = c.boundary.iter().chain(&c.lines).map(|(l, _)| Node::read(&l.bytes)).collect();
                    if let Some(r) = &relink {
                        r.apply(&mut nodes);
                    }
                    let skip = usize::from(c.boundary.is_some());
                    let walk = chain::walk(&nodes, false);
                    let offset = |i: usize| if i < skip { c.boundary.as_ref().map_or(0, |(b, _)| b.offset) } else { c.lines[i - skip].0.offset };
                    lost = walk
                        .broken
                        .as_ref()
                        .filter(|b| !b.lost.is_empty())
                        .map(|b| Lost { at: offset(b.at), lines: b.lost.iter().map(|&i| offset(i)).collect() });
                    order = Some(walk.order.iter().filter(|&&i| i >= skip && nodes[i].as_ref().is_some_and(|n| n.message)).map(|&i| i - skip).collect());
                    (0..c.lines.len()).map(|i| walk.sent[i + skip] || !nodes[i + skip].as_ref().is_some_and(|n| n.message)).collect()
                };
                let cut = c.boundary.map_or(Cut::Whole, |(b, _)| Cut::Bounded { offset: b.offset });
                let keep: Vec<bool> = c.lines.iter().zip(&sent).map(|((_, f), sent)| *sent && main.is_none_or(|m| f.sidechain() == m)).collect();
                let mut at: Vec<usize> = (0..c.lines.len()).filter(|&i| keep[i]).collect();
                if let Some(order) = order {
                    // The kept message lines' places, filled in the walk's order.
                    let mut ordered = vec![false; keep.len()];
                    for &i in &order {
                        ordered[i] = true;
                    }
                    let slots = at.iter().filter(|&&i| ordered[i]).count();
                    let fill: Vec<usize> = order.into_iter().filter(|&i| keep[i]).collect();
                    if slots == fill.len() {
                        let mut fill = fill.into_iter();
                        for a in at.iter_mut().filter(|a| ordered[**a]) {
                            *a = fill.next().expect("as many as the slots");
                        }
                    }
                }
                let mut source: Vec<Option<(SourceLine, ClaudeFields)>> = c.lines.into_iter().map(Some).collect();
                let (lines, fields) = at.into_iter().filter_map(|i| source[i].take()).unzip();
                claude_fields = fields;
                (cut, lines)
            }
            Route::Pi(mut lines) => {
                lines.reverse();
                // Pi's loader skips a line that is not JSON; the walk is over the others.
                let fields: Vec<Option<pi::Fields>> =
                    lines.iter().map(|l| simdutf8::basic::from_utf8(&l.bytes).ok().and_then(|_| pi::Fields::read(&l.bytes).ok())).collect();
                let (order, compaction) = pi::resume_order(&fields);
                let cut = compaction.map_or(Cut::Whole, |c| Cut::Bounded { offset: lines[c].offset });
                let mut lines: Vec<Option<SourceLine>> = lines.into_iter().map(Some).collect();
                (cut, order.into_iter().filter_map(|i| lines[i].take()).collect())
            }
            Route::Qwen(mut lines) => {
                lines.reverse();
                // Qwen Code's reader skips a line that is not a JSON object.
                let fields: Vec<Option<qwen::Fields>> =
                    lines.iter().map(|l| simdutf8::basic::from_utf8(&l.bytes).ok().and_then(|_| qwen::Fields::read(&l.bytes).ok())).collect();
                let (order, compaction) = qwen::resume_order(&fields);
                let cut = compaction.map_or(Cut::Whole, |c| Cut::Bounded { offset: lines[c].offset });
                let mut lines: Vec<Option<SourceLine>> = lines.into_iter().map(Some).collect();
                (cut, order.into_iter().filter_map(|i| lines[i].take()).collect())
            }
            Route::Gemini(mut lines) => {
                lines.reverse();
                // The records in force, each with the offset of the line its version came from:
                // a record of a `$set` of messages is that element of the list.
                let texts: Vec<&[u8]> = lines.iter().map(|l| if simdutf8::basic::from_utf8(&l.bytes).is_ok() { &l.bytes[..] } else { &b""[..] }).collect();
                let records = gemini::resolve(&texts);
                let out = records
                    .into_iter()
                    .map(|(i, m)| SourceLine {
                        offset: lines[i].offset,
                        bytes: LineBytes::copy(&serde_json::to_vec(&serde_json::Value::Object(m)).unwrap_or_default()),
                    })
                    .collect();
                (Cut::Whole, out)
            }
            Route::Copilot(mut lines) => {
                lines.reverse();
                match lines.iter().rposition(|l| simdutf8::basic::from_utf8(&l.bytes).is_ok() && copilot::is_compaction(&l.bytes)) {
                    Some(c) => {
                        // Its summary is sent after the user messages before it (`copilot::summary_text`).
                        let prompts: Vec<String> =
                            lines[..c].iter().filter(|l| simdutf8::basic::from_utf8(&l.bytes).is_ok()).filter_map(|l| copilot::prompt(&l.bytes)).collect();
                        let mut kept = lines.split_off(c);
                        if let Some(b) = copilot::summarised(&kept[0].bytes, &prompts) {
                            kept[0].bytes = LineBytes::copy(&b);
                        }
                        (Cut::Bounded { offset: kept[0].offset }, kept)
                    }
                    None => (Cut::Whole, lines),
                }
            }
            Route::Codex(scan) => {
                let bounded = scan.is_bounded();
                let meta = head.map(|h| RolloutItem::read(0, h)).filter(|i| i.kind == ItemKind::SessionMeta);
                head_missing = bounded && meta.is_none();
                let items = scan.finish(meta);
                let first_kept = items.iter().find(|i| !(bounded && i.offset == 0 && i.kind == ItemKind::SessionMeta));
                let cut = match (bounded, first_kept) {
                    (true, Some(i)) => Cut::Bounded { offset: i.offset },
                    _ => Cut::Whole,
                };
                (cut, items.into_iter().map(|i| SourceLine { offset: i.offset, bytes: i.bytes }).collect())
            }
        };
        Context { format, cut, lines, claude_fields, skipped: self.skipped, head_missing, lost }
    }
}

/// How Claude Code 2.1.332 relinks the messages a boundary preserves (`kRr` in its bundle): the
/// first hangs under the anchor (the summary), each next one under the one before, a line that
/// hung under the anchor hangs under the last of them, and a message whose parent was a line
/// before the boundary that is not kept hangs there too.
#[derive(Debug)]
pub struct Relink {
    anchor: u64,
    uuids: Vec<u64>,
    /// The uuids of the lines before the boundary that are not preserved, of those the cut read
    /// (it reads back only as far as the preserved ones: a message whose parent is a line older
    /// than them is not relinked, where the agent would hang it under the last one).
    dropped: std::collections::HashSet<u64>,
}

impl Relink {
    /// Relinks the walk's nodes (of the boundary and the cut's lines) as the agent does.
    pub fn apply(&self, nodes: &mut [Option<Node>]) {
        let Some(&last) = self.uuids.last() else { return };
        let place: std::collections::HashMap<u64, usize> = self.uuids.iter().enumerate().map(|(i, &u)| (u, i)).collect();
        for n in nodes.iter_mut().flatten() {
            let Some(u) = n.uuid else { continue };
            if let Some(&i) = place.get(&u) {
                n.parent = Some(if i == 0 { self.anchor } else { self.uuids[i - 1] });
            } else if n.parent == Some(self.anchor) || ((n.user || n.assistant) && n.parent.is_some_and(|p| self.dropped.contains(&p))) {
                n.parent = Some(last);
            }
        }
    }
}

/// When the cut's boundary preserves messages the agent has (every one of them, in its map of
/// the lines before and after the boundary), puts their lines before the boundary among the
/// cut's lines, in their order, after the anchor (first when the anchor is not among them), and
/// says how the walk is to relink them. Otherwise (nothing
/// preserved, a message missing, a segment whose walk does not reach its first message) the cut
/// is left as it is: the agent does not relink then either.
pub fn preserved_relink(c: &mut super::compaction::Cut<(SourceLine, ClaudeFields)>) -> Option<Relink> {
    let (p, older) = c.preserved.take()?;
    let older_nodes: Vec<Option<Node>> = older.iter().map(|(l, _)| Node::read(&l.bytes)).collect();
    let after: Vec<Option<Node>> = c.lines.iter().map(|(l, _)| Node::read(&l.bytes)).collect();
    // The map: a uuid names the last line that has it.
    let mut map: std::collections::HashMap<u64, (bool, usize)> = std::collections::HashMap::new();
    for (i, n) in older_nodes.iter().enumerate() {
        if let Some(u) = n.as_ref().and_then(|n| n.uuid) {
            map.insert(u, (false, i));
        }
    }
    for (i, n) in after.iter().enumerate() {
        if let Some(u) = n.as_ref().and_then(|n| n.uuid) {
            map.insert(u, (true, i));
        }
    }
    let node = |(after_boundary, i): (bool, usize)| if after_boundary { after[i].as_ref() } else { older_nodes[i].as_ref() };
    let uuids = match &p {
        Preserved::List { uuids, .. } => uuids.clone(),
        Preserved::Segment { head, tail, .. } => {
            let mut walked = Vec::new();
            let mut seen = std::collections::HashSet::new();
            let mut at = map.get(tail).copied();
            loop {
                let n = node(at?)?;
                let u = n.uuid?;
                if !seen.insert(u) {
                    return None;
                }
                walked.push(u);
                if u == *head {
                    break;
                }
                at = map.get(&n.parent?).copied();
            }
            walked.reverse();
            walked
        }
    };
    if !uuids.iter().all(|u| map.contains_key(u)) {
        return None;
    }
    let kept: std::collections::HashSet<u64> = uuids.iter().copied().collect();
    let dropped = older_nodes.iter().filter_map(|n| n.as_ref()?.uuid).filter(|u| !kept.contains(u) && map.get(u).is_some_and(|(a, _)| !a)).collect();
    // The preserved lines before the boundary, in the list's order, after the anchor.
    let mut older: Vec<Option<(SourceLine, ClaudeFields)>> = older.into_iter().map(Some).collect();
    let pre: Vec<(SourceLine, ClaudeFields)> = uuids
        .iter()
        .filter_map(|u| match map.get(u) {
            Some(&(false, i)) => older[i].take(),
            _ => None,
        })
        .collect();
    let at = after.iter().position(|n| n.as_ref().and_then(|n| n.uuid) == Some(p.anchor())).map_or(0, |i| i + 1);
    c.lines.splice(at..at, pre);
    Some(Relink { anchor: p.anchor(), uuids, dropped })
}
