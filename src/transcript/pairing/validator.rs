//! Canonical validation: the pairing rules of `rig_core::transcript::validate_canonical` (docs/requirements.md), per format.
//!
//! Every call must be answered once, by a result that follows it, before the conversation moves
//! on; a result must answer a pending call; an assistant turn must not follow another assistant
//! turn with no user turn between them, nor be empty. System messages reset the consecutive-turn
//! check but keep pending calls; a repeated call id is one pending id.
//!
//! What "moves on" means depends on the format:
//! - Claude Code, Anthropic, OpenAI chat: the next assistant turn. Claude Code lines sharing
//!   `message.id` are one turn, and results may arrive between them.
//! - Codex: the next user turn (consecutive assistant items are normal there, so the
//!   consecutive-turn check is off).
//!
//! A compaction starts a new segment: calls pending at it can no longer be answered (a result
//! after it for a call before it is an `orphan_result`, the shape of anthropics/claude-code#8484);
//! Codex carries over the calls its replacement history leaves open. In Claude Code files,
//! findings that lie only on a branch abandoned by a rewind are warnings: resume never sends them.
//!
//! Claude Code files are forests of conversation threads (the main chain, and each subagent's
//! sidechain, see [`super::threads`]): every rule above holds *within* a thread. A result
//! answers only a call of its own thread, a thread moves on only at its own next assistant
//! turn, and lines of other threads between a call and its result are not a finding. The other
//! formats have one thread.
//!
//! Calling order: [`Validator::push`] every parsed line in file order, then
//! [`Validator::finish`] once at the end of the stream.

use super::api::ApiRules;
use super::branches::{Branches, HashKeyed, Line, HORIZON};
use super::threads::Threads;
use crate::transcript::finding::{Finding, Kind, Output, Severity};
use crate::transcript::formats::Format;
use crate::transcript::model::{Args, Call, Entry, Message, Parsed, Role, MAIN_THREAD};
use crate::transcript::verdict::tell;
use crate::transcript::{Map, Set};
use smallvec::SmallVec;

/// What resume does with a call left open in a Claude Code file whose chain is cut.
const UNREACHED: &str = "on resume Claude Code answers it as interrupted if its chain walk reaches it; a line of this file names a parent that is not in it, and where the walk bridges that past the call, the call is left out";

/// A call waiting for its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Line of the call.
    pub line: u64,
    node: Option<u64>,
    /// The thread of the call: only a result in the same thread answers it.
    pub thread: u64,
}

/// The assistant turn in progress.
#[derive(Debug)]
struct Turn {
    /// Hash of the turn key (Claude `message.id`).
    key: Option<u64>,
    line: u64,
    /// The Claude Code tree node of its first line.
    node: Option<u64>,
    /// The node of its latest line: a turn whose latest line lies on an abandoned branch is
    /// abandoned (its message may have begun on another branch); `None` once a line without
    /// one is part of it.
    last: Option<u64>,
    has_content: bool,
}

/// Why a branch of the uuid tree left the conversation (see [`Branches`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// A prompt under an occupied parent: the user rewound.
    Rewind,
    /// An answer of another API message under the same parent, or one that names it in
    /// `supersedesUuids`: a retry took its place.
    Replaced,
    /// Named by a `model_refusal_fallback` record's `retractedMessageUuids`.
    Retracted,
}

impl Cause {
    fn why(self, line: u64) -> String {
        match self {
            Cause::Rewind => format!("on a branch abandoned by the rewind at line {line}, which resume never sends"),
            Cause::Replaced => format!("in an answer replaced by the retry at line {line}, which resume never sends"),
            Cause::Retracted => format!("in an answer taken back at line {line} (the model refused), which resume never sends"),
        }
    }
}

/// What the turn rules know of one conversation thread.
#[derive(Debug, Default)]
struct Lane {
    /// The assistant turns since the thread's last user (or system) line, by the tree node of
    /// their latest line, so that a rewind or a retry that takes one back takes it out of the
    /// count too (at most [`Lane::REMEMBERED`]).
    answers: SmallVec<[u64; 2]>,
    /// An assistant turn since that line that nothing can take back (no node; or beyond the
    /// turns remembered).
    answers_kept: bool,
    /// Whether the last of `answers` is the current turn's.
    answer_tracked: bool,
    turn: Option<Turn>,
    /// Calls answered since the thread's last assistant turn began.
    answered: Set<String>,
    /// The last line seen in the thread.
    last: u64,
}

impl Lane {
    /// Assistant turns in a row remembered by node: one more is a finding anyway.
    const REMEMBERED: usize = 4;

    /// Whether the turns remembered name `node` (what a branch that leaves may take back).
    fn names(&self, node: u64) -> bool {
        self.answers.contains(&node) || self.turn.as_ref().is_some_and(|t| t.last == Some(node))
    }

    /// A branch took the lines `under` it out of the conversation: the turns on it no longer
    /// count, the next answer follows what came before them.
    fn abandon(&mut self, mut under: impl FnMut(u64) -> bool) {
        if self.answer_tracked && self.answers.last().is_some_and(|&n| under(n)) {
            self.answer_tracked = false;
        }
        self.answers.retain(|n| !under(*n));
        if self.turn.as_ref().and_then(|turn| turn.last).is_some_and(&mut under) {
            self.turn = None;
        }
    }

    /// Whether an assistant turn came since the last user line.
    fn assistant_since_user(&self) -> bool {
        self.answers_kept || !self.answers.is_empty()
    }

    /// A user (or system) line: the assistant turns before it are answered.
    fn user_turn(&mut self) {
        self.answers.clear();
        self.answers_kept = false;
        self.answer_tracked = false;
    }

    /// An assistant turn begins at the line of `node`.
    fn assistant_turn(&mut self, node: Option<u64>) {
        self.answer_tracked = match node {
            Some(n) if self.answers.len() < Self::REMEMBERED => {
                self.answers.push(n);
                true
            }
            _ => {
                self.answers_kept = true;
                false
            }
        };
    }

    /// The current assistant turn goes on at the line of `node`: its latest line stands for it
    /// (after a user line, amid its message, it counts again).
    fn turn_goes_on(&mut self, node: Option<u64>) {
        if !self.assistant_since_user() {
            return self.assistant_turn(node);
        }
        match (self.answer_tracked, self.answers.last_mut(), node) {
            (true, Some(last), Some(n)) => *last = n,
            (true, Some(_), None) => {
                // No node to stand for it: it can no longer be taken back.
                self.answers.pop();
                self.answers_kept = true;
                self.answer_tracked = false;
            }
            _ => {}
        }
    }
}

/// An error finding already emitted, remembered so that a later rewind can demote it.
#[derive(Debug)]
struct Emitted {
    line: u64,
    kind: Kind,
    call_id: Option<String>,
    node: u64,
    demoted: bool,
}

/// The pairing state machine. See the module docs.
#[derive(Debug)]
pub struct Validator {
    format: Format,
    pending: Map<String, Pending>,
    /// The ids of `pending` by thread (kept, empty, while the thread's lane is), so that what
    /// one thread does costs in proportion to its own calls, however many other threads leave
    /// open.
    by_thread: HashKeyed<Set<String>>,
    /// The ids of `pending` by the tree node of their line (Claude Code), and the findings of
    /// `emitted` not yet demoted (their indexes) and the threads whose turns name a node (some
    /// may no longer), by node: what a branch that leaves takes with it is found from the
    /// branch, not by asking every call, finding and thread of the file.
    pending_at: HashKeyed<Set<String>>,
    emitted_at: HashKeyed<SmallVec<[usize; 1]>>,
    lanes_at: HashKeyed<SmallVec<[u64; 1]>>,
    /// The main thread (every thread of the formats that have only one).
    main: Lane,
    /// Claude Code sidechain threads, by name.
    side: HashKeyed<Lane>,
    threads: Option<Threads>,
    /// The thread of the line being read.
    thread: u64,
    /// Idle sidechain threads are let go from this line on.
    next_sweep: u64,
    /// How long a sidechain thread may be idle before it is let go, in lines.
    horizon: u64,
    branches: Option<Branches>,
    emitted: Vec<Emitted>,
    /// The provider API's own rules on the main conversation (boxed: most formats have none).
    api: Option<Box<ApiRules>>,
    /// Pi ([`Format::compaction_keeps_entries`]): the last results of the main thread, each
    /// with its call's node: a compaction that keeps the result and not its call leaves it
    /// alone in the context.
    kept_results: Option<std::collections::VecDeque<KeptResult>>,
    /// Upsert logs ([`Format::upserts`], Gemini CLI): what later versions of a record may take
    /// back (`None` for the other formats).
    upsert: Option<Box<Upsert>>,
}

/// What the validator remembers of an upsert log's records: a later version of a record
/// replaces it where it stands, so what an earlier version was found to break may be mended.
#[derive(Debug, Default)]
struct Upsert {
    /// `unanswered_call` findings by call id, with their lines (a record appended again with
    /// the call still open is found unanswered again): a later version of the call's record
    /// that holds its result answers them all.
    unanswered: Map<String, Vec<u64>>,
    /// Tool messages by record (their turn key): the results they held, and the
    /// `duplicate_result` and `orphan_result` findings about them, each with its line, call id
    /// and kind.
    results: Map<u64, (Vec<String>, Vec<Taken>)>,
    /// The calls each model record (its turn key) declared in its latest version: one a later
    /// version no longer has is gone.
    calls: Map<u64, Vec<String>>,
}

/// A result finding a later version of its record may take back: its line, call id and kind.
type Taken = (u64, String, Kind);

/// A result a Pi compaction may keep without its call.
#[derive(Debug)]
struct KeptResult {
    line: u64,
    node: u64,
    call: u64,
    id: String,
}

/// How many results a Pi compaction looks back at (the entries it keeps are the last turns).
const KEPT_RESULTS: usize = 4096;

impl Validator {
    /// A validator for a file of `format`.
    pub fn new(format: Format) -> Self {
        let claude = format.uuid_tree();
        Validator {
            format,
            pending: Map::default(),
            by_thread: HashKeyed::default(),
            pending_at: HashKeyed::default(),
            emitted_at: HashKeyed::default(),
            lanes_at: HashKeyed::default(),
            main: Lane::default(),
            side: HashKeyed::default(),
            threads: claude.then(Threads::default),
            thread: MAIN_THREAD,
            next_sweep: HORIZON as u64,
            horizon: HORIZON as u64,
            branches: claude.then(Branches::default),
            emitted: Vec::new(),
            api: ApiRules::new(format).map(Box::new),
            kept_results: format.compaction_keeps_entries().then(std::collections::VecDeque::new),
            upsert: format.upserts().then(Box::default),
        }
    }

    /// The format it pairs.
    pub fn format(&self) -> Format {
        self.format
    }

    /// `f` with what resuming the file does about it ([`tell`]). Not for a file read as OpenAI
    /// chat: the chat reader takes a file for OpenAI's until a line says it is Anthropic's, and
    /// the two APIs answer with different errors; `check` says it once the file is read.
    ///
    /// A Claude Code file with a line whose parent is not in it: its chain walk may not reach a
    /// call left open (the walk bridges the missing parent to another line, past the call), and
    /// a call it does not reach is left out, not answered. Such a call stays an error.
    pub fn with_resume(&self, mut f: Finding) -> Finding {
        if self.format != Format::OpenAiChat {
            tell(self.format, &mut f);
        }
        if f.mended && self.format == Format::ClaudeCode && self.dangling_parents() > 0 && matches!(f.kind, Kind::OrphanCall | Kind::UnansweredCall) {
            f.severity = Severity::Error;
            f.mended = false;
            f.on_resume = Some(UNREACHED.into());
        }
        f
    }

    /// Claude Code: how many lines named a parent not seen before them (see
    /// [`Branches::dangling`]); 0 for the other formats.
    pub fn dangling_parents(&self) -> u64 {
        self.branches.as_ref().map_or(0, Branches::dangling)
    }

    /// Calls still waiting for a result, in line order.
    pub fn pending(&self) -> Vec<&Pending> {
        let mut v: Vec<&Pending> = self.pending.values().collect();
        v.sort_by(|a, b| (a.line, &a.id).cmp(&(b.line, &b.id)));
        v
    }

    /// The calls of thread `t` still waiting for a result, in line order (only they are sorted:
    /// other threads may hold many).
    fn pending_in(&self, t: u64) -> Vec<Pending> {
        let Some(ids) = self.by_thread.get(&t) else { return Vec::new() };
        let mut v: Vec<Pending> = ids.iter().filter_map(|id| self.pending.get(id)).cloned().collect();
        v.sort_by(|a, b| (a.line, &a.id).cmp(&(b.line, &b.id)));
        v
    }

    /// Adds a pending call (replacing one with its id, whatever its thread).
    fn insert_pending(&mut self, p: Pending) {
        let (id, thread, node) = (p.id.clone(), p.thread, p.node);
        if let Some(old) = self.pending.insert(id.clone(), p) {
            self.unindex(&old);
        }
        if let Some(n) = node {
            self.pending_at.entry(n).or_default().insert(id.clone());
        }
        self.by_thread.entry(thread).or_default().insert(id);
    }

    /// Takes the pending call `id` out.
    fn remove_pending(&mut self, id: &str) -> Option<Pending> {
        let p = self.pending.remove(id)?;
        self.unindex(&p);
        Some(p)
    }

    fn unindex(&mut self, p: &Pending) {
        if let Some(ids) = self.by_thread.get_mut(&p.thread) {
            ids.remove(&p.id);
        }
        if let Some(n) = p.node {
            // A set: a line with 100,000 calls answered one by one is not 100,000 scans of its
            // list (the order of a node's ids is never read: `abandon` sorts what it takes).
            if let Some(ids) = self.pending_at.get_mut(&n) {
                ids.remove(&p.id);
                if ids.is_empty() {
                    self.pending_at.remove(&n);
                }
            }
        }
    }

    /// How many calls wait for a result.
    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// Whether some pending call is not in `declared`.
    pub fn pending_beyond(&self, declared: &std::collections::BTreeSet<String>) -> bool {
        self.pending.keys().any(|id| !declared.contains(id))
    }

    /// Whether any call is waiting for a result.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The thread of the last line pushed ([`MAIN_THREAD`] outside Claude Code sidechains).
    pub fn thread(&self) -> u64 {
        self.thread
    }

    fn lane(&mut self, thread: u64) -> &mut Lane {
        if thread == MAIN_THREAD {
            &mut self.main
        } else {
            self.side.entry(thread).or_default()
        }
    }

    /// Feeds one parsed line.
    pub fn push(&mut self, line: u64, parsed: &Parsed<'_>, out: &mut impl FnMut(Output)) {
        let node = parsed.node.map(|n| n.id);
        let t = match self.threads.as_mut() {
            Some(th) => th.assign(parsed.node),
            None => MAIN_THREAD,
        };
        self.thread = t;
        if line >= self.next_sweep {
            self.next_sweep = line + self.horizon / 4;
            self.sweep(line, out);
        }
        if let (Some(b), Some(n)) = (self.branches.as_mut(), parsed.node) {
            let kind = Line::of(&parsed.entry);
            let mut gone: SmallVec<[(u64, Cause); 1]> = SmallVec::new();
            if let Some(root) = b.record(n, kind) {
                gone.push((root, if kind == Line::Prompt { Cause::Rewind } else { Cause::Replaced }));
            }
            // Lines named as taken back (only those the tree knows: a line beyond the horizon,
            // or a root, is too far back to matter to what is judged now).
            let answer = matches!(&parsed.entry, Entry::Message(m) if m.role == Role::Assistant);
            let named = if answer { Cause::Replaced } else { Cause::Retracted };
            for &r in &parsed.retracts {
                if r != n.id && b.parent(r).is_some() && !gone.iter().any(|g| g.0 == r) {
                    gone.push((r, named));
                }
            }
            for (root, cause) in gone {
                self.abandon(root, line, cause, out);
            }
        }
        match &parsed.entry {
            Entry::Message(m) => {
                self.lane(t).last = line;
                match m.role {
                    Role::Assistant => self.assistant(line, t, m, node, out),
                    Role::User | Role::Tool => {
                        self.results(line, t, m, node, out);
                        self.lane(t).user_turn();
                        if self.format.prompt_ends_turn() && m.prompt {
                            self.moved_on(line, t, out);
                        }
                    }
                    Role::System | Role::Developer => self.lane(t).user_turn(),
                }
                if t == MAIN_THREAD {
                    if let Some(api) = self.api.as_mut() {
                        let mut found: SmallVec<[Finding; 1]> = SmallVec::new();
                        api.message(line, m, &mut |f| found.push(f));
                        for f in found {
                            self.emit(f, node, out);
                        }
                    }
                }
            }
            Entry::Compaction { carried, keeps, .. } => {
                if t == MAIN_THREAD {
                    if let Some(api) = self.api.as_mut() {
                        api.compaction();
                    }
                }
                self.compaction(line, t, carried, *keeps, out)
            }
            Entry::Other | Entry::Unknown => {}
        }
    }

    /// Lets go of sidechain threads idle for more than [`HORIZON`] lines with no call pending,
    /// as if their stream had ended (their open turn is closed): memory stays flat however many
    /// subagents a file holds.
    fn sweep(&mut self, line: u64, out: &mut impl FnMut(Output)) {
        let horizon = self.horizon;
        let busy = |t: &u64| self.by_thread.get(t).is_some_and(|ids| !ids.is_empty());
        let mut idle: Vec<(u64, u64)> = self.side.iter().filter(|(t, l)| l.last + horizon < line && !busy(t)).map(|(t, l)| (l.last, *t)).collect();
        idle.sort_unstable();
        for (_, t) in idle {
            self.close_turn(t, out);
            self.side.remove(&t);
            self.by_thread.remove(&t);
        }
        // Forget the nodes turns no longer name.
        let (main, side) = (&self.main, &self.side);
        self.lanes_at.retain(|n, threads| {
            threads.retain(|t| {
                let lane = if *t == MAIN_THREAD { Some(main) } else { side.get(t) };
                lane.is_some_and(|l| l.names(*n))
            });
            !threads.is_empty()
        });
    }

    /// Ends the stream: closes the last turn and reports calls still pending as orphans.
    pub fn finish(mut self, out: &mut impl FnMut(Output)) {
        self.end(out);
    }

    /// [`Validator::finish`] without giving the validator up: the calls still pending stay
    /// readable ([`Validator::pending`]) for the stages that read them after the end. Once.
    pub fn end(&mut self, out: &mut impl FnMut(Output)) {
        self.close_turn(MAIN_THREAD, out);
        let mut side: Vec<(u64, u64)> = self.side.iter().map(|(t, l)| (l.last, *t)).collect();
        side.sort_unstable();
        for (_, t) in side {
            self.close_turn(t, out);
        }
        let pending: Vec<Pending> = self.pending().into_iter().cloned().collect();
        for p in pending {
            let f = orphan(&p);
            self.emit(f, p.node, out);
        }
        if let Some(api) = self.api.as_ref() {
            api.end(&mut |f| out(Output::Finding(f)));
        }
    }

    /// Lets go of the capacity of empty tables (calls pending, answered in a thread): a stream
    /// that is idle with every call answered keeps no buckets for them.
    pub fn shrink(&mut self) {
        fn release<T: Default>(t: &mut T, empty: impl Fn(&T) -> bool) {
            if empty(t) {
                *t = T::default();
            }
        }
        release(&mut self.pending, |m| m.is_empty());
        self.by_thread.retain(|_, ids| !ids.is_empty());
        release(&mut self.by_thread, |m| m.is_empty());
        release(&mut self.main.answered, |s| s.is_empty());
        for lane in self.side.values_mut() {
            release(&mut lane.answered, |s| s.is_empty());
        }
        release(&mut self.emitted, |v| v.is_empty());
        release(&mut self.emitted_at, |m| m.is_empty());
        release(&mut self.pending_at, |m| m.is_empty());
        release(&mut self.lanes_at, |m| m.is_empty());
    }

    /// What [`Validator::finish`] would report if the stream ended now, without ending it: the
    /// open turns that are empty, then calls still pending as `orphan_call`. The daemon reports
    /// these once a file has been quiet for the grace period.
    pub fn tail(&self) -> Vec<Finding> {
        let mut v = Vec::new();
        let mut side: Vec<(u64, u64)> = self.side.iter().map(|(t, l)| (l.last, *t)).collect();
        side.sort_unstable();
        let lanes = std::iter::once((MAIN_THREAD, &self.main)).chain(side.iter().map(|(_, t)| (*t, &self.side[t])));
        for (t, lane) in lanes {
            if let Some(turn) = lane.turn.as_ref().filter(|t| !t.has_content) {
                v.push(empty_turn(turn.line, t));
            }
        }
        for p in self.pending() {
            v.push(orphan(p));
        }
        if let Some(api) = self.api.as_ref() {
            api.end(&mut |f| v.push(f));
        }
        v
    }

    fn assistant(&mut self, line: u64, t: u64, m: &Message<'_>, node: Option<u64>, out: &mut impl FnMut(Output)) {
        if let (Some(_), Some(n)) = (&self.branches, node) {
            // Every node a turn of the thread remembers is one of its assistant lines.
            let threads = self.lanes_at.entry(n).or_default();
            if !threads.contains(&t) {
                threads.push(t);
            }
        }
        let key = m.turn;
        let same_turn = key.is_some() && self.lane(t).turn.as_ref().is_some_and(|turn| turn.key == key);
        if !same_turn {
            self.close_turn(t, out);
            if !self.format.prompt_ends_turn() {
                if self.lane(t).assistant_since_user() {
                    self.emit(consecutive_assistant(line).in_thread(t), node, out);
                }
                self.moved_on(line, t, out);
            }
            self.lane(t).turn = Some(Turn { key, line, node, last: node, has_content: false });
        }
        let lane = self.lane(t);
        if let Some(turn) = lane.turn.as_mut() {
            turn.has_content |= m.has_content;
            // A line with no node leaves the turn where no branch can take it back, for good.
            turn.last = turn.last.and(node);
        }
        if same_turn {
            lane.turn_goes_on(node);
        } else {
            lane.assistant_turn(node);
        }
        for c in &m.calls {
            self.call(line, t, c, node, out);
        }
        if let (Some(u), Some(k)) = (self.upsert.as_mut(), m.turn) {
            // A call an earlier version of the record declared and this one does not is gone.
            let now: Vec<String> = m.calls.iter().map(|c| c.id.to_string()).collect();
            let gone: Vec<String> = u.calls.insert(k, now.clone()).unwrap_or_default().into_iter().filter(|id| !now.contains(id)).collect();
            for id in gone {
                for at in self.upsert.as_mut().and_then(|u| u.unanswered.remove(&id)).unwrap_or_default() {
                    let reason = format!("taken out by a later version of its record at line {line}, which replaces it in place");
                    out(Output::Demoted { line: at, kind: Kind::UnansweredCall, call_id: Some(id.clone()), reason });
                }
                if self.pending.get(&id).is_some_and(|p| p.thread == t) {
                    self.remove_pending(&id);
                }
            }
        }
        if self.upsert.is_some() {
            // A version of the record that holds results for its calls (Gemini CLI's
            // `toolCalls[].result`): they are answered, once, whatever the versions before said;
            // a call found unanswered in an earlier version no longer is.
            for r in &m.results {
                let t_pending = self.pending.get(r.id.as_ref()).is_some_and(|p| p.thread == t);
                if t_pending {
                    self.remove_pending(r.id.as_ref());
                }
                self.lane(t).answered.insert(r.id.to_string());
                for at in self.upsert.as_mut().and_then(|u| u.unanswered.remove(r.id.as_ref())).unwrap_or_default() {
                    let reason = format!("answered by a later version of its record at line {line}, which replaces it in place");
                    out(Output::Demoted { line: at, kind: Kind::UnansweredCall, call_id: Some(r.id.to_string()), reason });
                }
            }
        }
        if m.turn.is_none() {
            self.close_turn(t, out);
        }
    }

    fn call(&mut self, line: u64, t: u64, c: &Call<'_>, node: Option<u64>, out: &mut impl FnMut(Output)) {
        if let Some(f) = invalid_arguments(line, c) {
            self.emit(f.in_thread(t), node, out);
        }
        if self.upsert.is_some() && (self.pending.contains_key(c.id.as_ref()) || self.lane(t).answered.contains(c.id.as_ref())) {
            // The record appended again with the call: still open, the call is its latest
            // line's; answered, it stays answered (its results follow in the same record).
            if self.pending.contains_key(c.id.as_ref()) {
                let p = Pending { id: c.id.to_string(), name: c.name.to_string(), line, node, thread: t };
                self.insert_pending(p);
            }
            return;
        }
        if self.pending.contains_key(c.id.as_ref()) || self.lane(t).answered.contains(c.id.as_ref()) {
            self.emit(duplicate_call_id(line, c).in_thread(t), node, out);
            return;
        }
        let p = Pending { id: c.id.to_string(), name: c.name.to_string(), line, node, thread: t };
        self.insert_pending(p);
    }

    fn results(&mut self, line: u64, t: u64, m: &Message<'_>, node: Option<u64>, out: &mut impl FnMut(Output)) {
        // An upsert log's record appended again: the results its earlier version held are not
        // new, and a second result it no longer holds is gone.
        let mut known: Vec<String> = Vec::new();
        let mut dups: Vec<Taken> = Vec::new();
        if let (Some(u), Some(k)) = (self.upsert.as_mut(), m.turn) {
            if let Some((ids, before)) = u.results.remove(&k) {
                known = ids;
                for (at, id, kind) in before {
                    if m.results.iter().any(|r| r.id == id.as_str()) {
                        dups.push((at, id, kind));
                    } else {
                        let reason = format!("taken out by a later version of its record at line {line}, which replaces it in place");
                        out(Output::Demoted { line: at, kind, call_id: Some(id), reason });
                    }
                }
            }
        }
        for r in &m.results {
            if known.iter().any(|k| k == r.id.as_ref()) {
                continue;
            }
            // (The table is changed as it always was, remove then insert back, so that the
            // order its calls are met in elsewhere stays the same.)
            match self.remove_pending(r.id.as_ref()) {
                Some(p) if p.thread == t => {
                    if let (Some(kept), Some(n), Some(c)) = (self.kept_results.as_mut(), node, p.node) {
                        if kept.len() == KEPT_RESULTS {
                            kept.pop_front();
                        }
                        kept.push_back(KeptResult { line, node: n, call: c, id: p.id.clone() });
                    }
                    self.lane(t).answered.insert(p.id);
                    continue;
                }
                // A call of another thread: still pending there.
                Some(p) => self.insert_pending(p),
                None => {}
            }
            let f = unmatched_result(line, &r.id, self.lane(t).answered.contains(r.id.as_ref()));
            if self.upsert.is_some() {
                dups.push((line, r.id.to_string(), f.kind));
            }
            self.emit(f.in_thread(t), node, out);
        }
        if let (Some(u), Some(k)) = (self.upsert.as_mut(), m.turn) {
            u.results.insert(k, (m.results.iter().map(|r| r.id.to_string()).collect(), dups));
        }
    }

    /// Thread `t` moved on at `line`: its calls still pending there are unanswered.
    pub fn moved_on(&mut self, line: u64, t: u64, out: &mut impl FnMut(Output)) {
        if self.pending.is_empty() {
            // (The common case: every call was answered. Nothing to collect or sort.)
            self.lane(t).answered.clear();
            return;
        }
        let pending: Vec<Pending> = self.pending_in(t);
        for p in pending {
            self.remove_pending(&p.id);
            if let Some(u) = self.upsert.as_mut() {
                u.unanswered.entry(p.id.clone()).or_default().push(p.line);
            }
            self.emit(unanswered_call(p.line, &p.id, &p.name, line).in_thread(t), p.node, out);
        }
        self.lane(t).answered.clear();
    }

    fn compaction(&mut self, line: u64, t: u64, carried: &[Call<'_>], keeps: Option<u64>, out: &mut impl FnMut(Output)) {
        self.close_turn(t, out);
        let pending: Vec<Pending> = self.pending_in(t);
        // Pi: the calls of the entries the compaction keeps (from `firstKeptEntryId` down to
        // it) are still in the context, and still wait for their result.
        let mut still: Vec<Pending> = Vec::new();
        let mut seen = HashKeyed::default();
        for p in &pending {
            let kept = match (keeps, p.node, self.branches.as_ref()) {
                (Some(k), Some(n), Some(b)) => b.is_under_seen(n, k, &mut seen),
                _ => false,
            };
            if kept {
                still.push(p.clone());
            } else {
                self.remove_pending(&p.id);
            }
        }
        // Pi: a result the compaction keeps whose call it does not keep is sent alone (the
        // API refuses it).
        if let (Some(k), Some(b), Some(results)) = (keeps, self.branches.as_ref(), self.kept_results.as_mut()) {
            let split: Vec<KeptResult> =
                std::mem::take(results).into_iter().filter(|r| b.is_under_seen(r.node, k, &mut seen) && !b.is_under_seen(r.call, k, &mut seen)).collect();
            for r in split {
                let f = Finding::new(
                    r.line,
                    Kind::OrphanResult,
                    format!("result kept by the compaction at line {line} without its call, which the compaction summarised (before its firstKeptEntryId)"),
                )
                .with_call(&r.id, None)
                .in_thread(t);
                self.emit(f, Some(r.node), out);
            }
        }
        let kept: Set<&str> = carried.iter().map(|c| c.id.as_ref()).chain(still.iter().map(|p| p.id.as_str())).collect();
        for p in pending.iter().filter(|p| !kept.contains(p.id.as_str())).cloned().collect::<Vec<_>>() {
            let mut f = Finding::new(
                p.line,
                Kind::UnansweredCall,
                format!("call to {} was still pending when the history was compacted at line {line}", tool_name(&p.name)),
            )
            .with_call(&p.id, Some(&p.name))
            .in_thread(t);
            // The call itself is no longer sent; a result after the boundary is the error.
            f.severity = Severity::Warning;
            self.emit(f, p.node, out);
        }
        let lane = self.lane(t);
        lane.answered.clear();
        lane.user_turn();
        for c in carried {
            self.insert_pending(Pending { id: c.id.to_string(), name: c.name.to_string(), line, node: None, thread: t });
        }
    }

    /// The branch rooted at `root` left the conversation at `line` (a rewind, a retry): its
    /// findings are demoted, its pending calls no longer wait, and its open turn is not judged.
    fn abandon(&mut self, root: u64, line: u64, cause: Cause, out: &mut impl FnMut(Output)) {
        let Some(b) = self.branches.as_ref() else { return };
        let why = cause.why(line);
        // The branch from its root down, when it is smaller than what asking each turn, call
        // and finding would cost (else they are asked, each line of the tree walked once).
        let most = 64 + self.side.len() + self.pending.len() + self.emitted_at.len();
        let branch = b.subtree(root, most);
        let mut seen = HashKeyed::default();
        let mut under = |n: u64| match &branch {
            Some(nodes) => nodes.contains_key(&n),
            None => b.is_under_seen(n, root, &mut seen),
        };
        let mut gone: Vec<Pending>;
        let mut demoted: Vec<usize>;
        match &branch {
            Some(nodes) => {
                let mut threads: SmallVec<[u64; 4]> = SmallVec::new();
                for n in nodes.keys() {
                    for t in self.lanes_at.get(n).into_iter().flatten() {
                        if !threads.contains(t) {
                            threads.push(*t);
                        }
                    }
                }
                for t in threads {
                    let lane = if t == MAIN_THREAD { Some(&mut self.main) } else { self.side.get_mut(&t) };
                    if let Some(lane) = lane {
                        lane.abandon(&mut under);
                    }
                }
                gone = nodes.keys().flat_map(|n| self.pending_at.get(n).into_iter().flatten()).map(|id| self.pending[id].clone()).collect();
                gone.sort_by(|a, b| (a.line, &a.id).cmp(&(b.line, &b.id)));
                if gone.windows(2).any(|w| w[0].line == w[1].line) {
                    // Calls of one line leave in the order the table holds them, as they always have.
                    gone = self.pending.values().filter(|p| p.node.is_some_and(&mut under)).cloned().collect();
                    gone.sort_by_key(|p| p.line);
                }
                demoted = nodes.keys().flat_map(|n| self.emitted_at.get(n).into_iter().flatten().copied()).collect();
            }
            None => {
                for lane in std::iter::once(&mut self.main).chain(self.side.values_mut()) {
                    lane.abandon(&mut under);
                }
                gone = self.pending.values().filter(|p| p.node.is_some_and(&mut under)).cloned().collect();
                gone.sort_by_key(|p| p.line);
                demoted = self.emitted_at.iter().filter(|(n, _)| under(**n)).flat_map(|(_, at)| at.iter().copied()).collect();
            }
        }
        // The findings in the order they were emitted.
        demoted.sort_unstable();
        for i in demoted {
            let e = &mut self.emitted[i];
            e.demoted = true;
            out(Output::Demoted { line: e.line, kind: e.kind, call_id: e.call_id.clone(), reason: why.clone() });
            self.emitted_at.remove(&e.node);
        }
        for p in gone {
            self.remove_pending(&p.id);
            let mut f = Finding::new(p.line, Kind::UnansweredCall, format!("call to {} has no result", tool_name(&p.name)))
                .with_call(&p.id, Some(&p.name))
                .in_thread(p.thread);
            f.demote(&why);
            out(Output::Finding(f));
        }
    }

    fn close_turn(&mut self, t: u64, out: &mut impl FnMut(Output)) {
        if let Some(turn) = self.lane(t).turn.take() {
            if !turn.has_content {
                // Remembered with its node: a later rewind or retry may take it back.
                self.emit(empty_turn(turn.line, t), turn.node, out);
            }
        }
    }

    fn emit(&mut self, f: Finding, node: Option<u64>, out: &mut impl FnMut(Output)) {
        if let (Some(_), Some(node), Severity::Error) = (&self.branches, node, f.severity) {
            self.emitted_at.entry(node).or_default().push(self.emitted.len());
            self.emitted.push(Emitted { line: f.line, kind: f.kind, call_id: f.call_id.clone(), node, demoted: false });
        }
        out(Output::Finding(f));
    }
}

fn empty_turn(line: u64, thread: u64) -> Finding {
    Finding::new(line, Kind::EmptyAssistantTurn, "assistant turn whose parts are all blank; it must not enter the history").in_thread(thread)
}

pub(crate) fn orphan(p: &Pending) -> Finding {
    orphan_call(p.line, &p.id, &p.name).in_thread(p.thread)
}

// The findings of the pairing rules, shared with the dataset stage's own pairing of one
// conversation (`dataset::pairing`), so that both say the same.

/// A call still pending at the end of the stream.
pub(crate) fn orphan_call(line: u64, id: &str, name: &str) -> Finding {
    Finding::new(line, Kind::OrphanCall, format!("call to {} has no result at the end of the transcript", tool_name(name))).with_call(id, Some(name))
}

/// An assistant turn right after another.
pub(crate) fn consecutive_assistant(line: u64) -> Finding {
    Finding::new(line, Kind::ConsecutiveAssistant, "assistant turn follows another assistant turn with no user turn between them")
}

/// A call whose arguments are not a JSON object, if `c` is one.
pub(crate) fn invalid_arguments(line: u64, c: &Call<'_>) -> Option<Finding> {
    let what = match c.args {
        Args::Object => return None,
        Args::NotObject => "are JSON but not an object",
        Args::Unparseable => "are not valid JSON",
    };
    Some(Finding::new(line, Kind::InvalidArguments, format!("arguments of the call to {} {what}", tool_name(&c.name))).with_call(&c.id, Some(&c.name)))
}

/// A second call with a pending or answered id.
pub(crate) fn duplicate_call_id(line: u64, c: &Call<'_>) -> Finding {
    Finding::new(line, Kind::DuplicateCallId, "a second call with this id; it is treated as the same pending call").with_call(&c.id, Some(&c.name))
}

/// A result that answers no pending call: a second one when the call was `answered`.
pub(crate) fn unmatched_result(line: u64, id: &str, answered: bool) -> Finding {
    if answered {
        Finding::new(line, Kind::DuplicateResult, "a second result for a call that already has one").with_call(id, None)
    } else {
        Finding::new(line, Kind::OrphanResult, "result for a call that is not pending in this part of the conversation").with_call(id, None)
    }
}

/// A call (at `call_line`) left without a result when the conversation moved on at `line`.
pub(crate) fn unanswered_call(call_line: u64, id: &str, name: &str, line: u64) -> Finding {
    Finding::new(call_line, Kind::UnansweredCall, format!("call to {} has no result, and the conversation moved on at line {line}", tool_name(name)))
        .with_call(id, Some(name))
}

fn tool_name(name: &str) -> String {
    if name.is_empty() {
        "a tool".to_owned()
    } else {
        format!("`{name}`")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::model::{Message, Node};

    fn line(id: u64, parent: Option<u64>, sidechain: bool, role: Role, content: bool) -> Parsed<'static> {
        let mut m = Message::new(role);
        m.has_content = content;
        m.prompt = role == Role::User;
        Parsed { node: Some(Node { id, parent, sidechain }), ..Parsed::of(Entry::Message(m)) }
    }

    /// Once every call is answered, `shrink` leaves the pending table without buckets; the
    /// pairing goes on as before.
    #[test]
    fn shrink_lets_go_of_empty_tables_only() {
        use crate::transcript::model::{Call, ToolResult};
        let mut a = Message::new(Role::Assistant);
        a.has_content = true;
        a.calls.push(Call { id: "c1".into(), name: "Bash".into(), args: Args::Object, item: None });
        let mut u = Message::new(Role::User);
        u.results.push(ToolResult { id: "c1".into() });
        let mut v = Validator::new(Format::OpenAiChat);
        let mut out = Vec::new();
        v.push(1, &Parsed::of(Entry::Message(a.clone())), &mut |o| out.push(o));
        v.shrink();
        assert_eq!(v.pending_count(), 1, "a pending call is kept");
        v.push(2, &Parsed::of(Entry::Message(u.clone())), &mut |o| out.push(o));
        assert!(v.pending.capacity() > 0);
        v.shrink();
        assert_eq!(v.pending.capacity(), 0);
        assert!(out.is_empty(), "{out:?}");
        // The answered call is still known to the turn: a second result for it is a duplicate.
        v.push(3, &Parsed::of(Entry::Message(u)), &mut |o| out.push(o));
        let kinds: Vec<Kind> = out.iter().filter_map(|o| if let Output::Finding(f) = o { Some(f.kind) } else { None }).collect();
        assert_eq!(kinds, [Kind::DuplicateResult]);
    }

    /// A file with a subagent every few lines (each a prompt and an answer) keeps the state of
    /// the recent ones only; a thread let go closes its turn as the end of the file would.
    #[test]
    fn idle_sidechain_threads_are_let_go() {
        let horizon = 64;
        let mut v = Validator { horizon, next_sweep: horizon, ..Validator::new(Format::ClaudeCode) };
        let mut out = Vec::new();
        let mut most = 0;
        let threads = 3 * horizon;
        for t in 0..threads {
            let root = 10 * t + 1_000_000;
            let n = 4 * t + 1;
            v.push(n, &line(root, None, true, Role::User, true), &mut |o| out.push(o));
            // The first subagent's answer is blank: an empty turn, reported when it is let go.
            v.push(n + 1, &line(root + 1, Some(root), true, Role::Assistant, t != 0), &mut |o| out.push(o));
            v.push(n + 2, &line(t + 1, Some(t), false, Role::User, true), &mut |o| out.push(o));
            v.push(n + 3, &line(t + 2, Some(t + 1), false, Role::Assistant, true), &mut |o| out.push(o));
            most = most.max(v.side.len());
        }
        assert!(most as u64 <= (horizon + horizon / 4) / 4 + 2, "{most} sidechain threads kept");
        assert!(v.side.len() < threads as usize);
        let empty: Vec<&Finding> = out
            .iter()
            .filter_map(|o| match o {
                Output::Finding(f) if f.kind == Kind::EmptyAssistantTurn => Some(f),
                _ => None,
            })
            .collect();
        assert_eq!(empty.iter().map(|f| f.line).collect::<Vec<_>>(), [2], "{out:?}");
        let mut rest = Vec::new();
        v.finish(&mut |o| rest.push(o));
        assert!(rest.is_empty(), "{rest:?}");
    }
}
