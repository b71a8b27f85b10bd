//! Planning a repair: a pipeline stage (`stages::repair_plan`) placed after `validate` that turns each finding into
//! edits of the file, in the file's own format. Pure: entries and the findings the stages
//! before it made of them in; the [`Plan`] out, taken with [`Planner::into_plan`] once the
//! stream is finished (`repair_run::plan_pipeline` is the repair's preset list, which the `repair`
//! verb and the daemon's repair stage both run through `repair::repair_file`).
//!
//! | finding | edit |
//! |---|---|
//! | `unanswered_call` | insert a synthetic error result after the call's exchange (the last line of its message and of the results it got): [`ResultText::NotExecuted`], or [`ResultText::InvalidPeer`] for the other calls of a turn with an invalid call |
//! | `orphan_call` | [`OrphanPolicy::Answer`]: insert [`ResultText::Interrupted`]; `Drop`: remove the call; `Keep`: nothing |
//! | `orphan_result`, `duplicate_result` | remove those results (the first result of a call stays) |
//! | `consecutive_assistant` | Claude Code: the second turn joins the first (it gets the first's `message.id`; not repaired when the first has none); OpenAI/Anthropic: the messages merge. Unless results are inserted for the first turn's calls: they separate the turns. |
//! | `empty_assistant_turn` | remove the turn's lines |
//! | `image_too_large`, `empty_image` | the image becomes a text placeholder ([`Mend::Images`]; over 2000 px when the request has more than 20 images, found at the end) |
//! | `unsigned_thinking` | remove the unsigned thinking block ([`Mend::DropUnsignedThinking`]; a line left empty goes) |
//! | `thinking_not_first`, `result_not_first` | move the thinking (or `tool_result`) blocks before the others of the line ([`Mend::ThinkingFirst`], [`Mend::ResultsFirst`]) |
//! | `empty_text` (where it is an error: no format makes it one today) | remove the blank text block ([`Mend::DropBlankText`]); in Claude Code files it is a warning, and the agent drops the block itself |
//! | `request_too_large` | not repaired: named, with the largest lines of the request |
//! | framing findings | remove the line (kept in the rejects file) |
//!
//! Removing a user line can leave two assistant turns side by side, a join can run on into a
//! later line with the joined id, a removed line may have decided the format: the plan says
//! when its edits may leave findings it did not see ([`Plan::recheck`]), so that the output is
//! checked again ([`super::rounds`]).

use super::synth::ResultText;
use crate::transcript::finding::{Kind, Output};
pub use crate::transcript::formats::mend::Mend;
use crate::transcript::formats::{Consecutive, Format};
use crate::transcript::model::{Args, Entry, Node, Parsed, Role, MAIN_THREAD};
use crate::transcript::pairing::api::{IMAGE_MAX_BYTES, IMAGE_MAX_PX, MANY_IMAGES, MANY_IMAGE_MAX_PX};
use crate::transcript::pairing::branches::{HashKeyed, HORIZON};
use crate::transcript::{Map, Set};
use serde::Serialize;

/// What to do with calls still pending at the end of a transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrphanPolicy {
    /// Insert an "interrupted, did not complete" error result.
    #[default]
    Answer,
    /// Remove the calls (and a message left empty).
    Drop,
    /// Leave them: the file stays not fully repaired.
    Keep,
}

impl std::str::FromStr for OrphanPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "answer" => Ok(OrphanPolicy::Answer),
            "drop" => Ok(OrphanPolicy::Drop),
            "keep" => Ok(OrphanPolicy::Keep),
            _ => Err(format!("unknown orphan policy `{s}` (expected answer, drop or keep)")),
        }
    }
}

/// One edit of the file. Lines are 1-based physical lines of the input.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Edit {
    /// Remove the line; it is kept in the rejects file.
    Remove {
        /// The line.
        line: u64,
        /// The finding it repairs.
        reason: Kind,
    },
    /// Insert a synthetic error result for a call after line `after`.
    Insert {
        /// The line it follows.
        after: u64,
        /// The call it answers.
        call_id: String,
        /// The call's tool.
        tool: String,
        /// Codex item type of the call.
        #[serde(skip_serializing_if = "Option::is_none")]
        item: Option<String>,
        /// Which text.
        text: ResultText,
        /// The finding it repairs.
        reason: Kind,
    },
    /// Remove the results for `call_id` from the line (all but the first one if `keep_first`).
    DropResults {
        /// The line.
        line: u64,
        /// The call.
        call_id: String,
        /// Keep the first result for the call in this line.
        keep_first: bool,
        /// The finding it repairs.
        reason: Kind,
    },
    /// Remove the call `call_id` from the line.
    DropCall {
        /// The line.
        line: u64,
        /// The call.
        call_id: String,
        /// The finding it repairs.
        reason: Kind,
    },
    /// Claude Code: give the line the `message.id` of line `like`, joining that turn.
    JoinTurn {
        /// The line.
        line: u64,
        /// A line of the turn to join.
        like: u64,
        /// The finding it repairs.
        reason: Kind,
    },
    /// OpenAI chat, Anthropic: merge the line's message into the assistant message at `into`.
    MergeInto {
        /// The line.
        line: u64,
        /// The message it merges into.
        into: u64,
        /// The finding it repairs.
        reason: Kind,
    },
    /// Claude Code: hang the line under line `under` (its `parentUuid` set to that line's
    /// `uuid`): the parent it names is missing, and the agent's chain walk would stop there.
    Bridge {
        /// The line.
        line: u64,
        /// The line it hangs under: the nearest earlier line of its side that has a uuid.
        under: u64,
        /// The finding it repairs.
        reason: Kind,
    },
    /// Mend blocks of the line's message that the provider's API rejects ([`Mend`]): only its
    /// content array changes.
    Mend {
        /// The line.
        line: u64,
        /// What is mended.
        #[serde(flatten)]
        how: Mend,
        /// The finding it repairs.
        reason: Kind,
    },
    /// The salvage round ([`super::salvage`]): the line kept in another shape instead of
    /// removed or emptied. Never handed to a rewriter.
    Salvage {
        /// The line.
        line: u64,
        /// How.
        how: How,
        /// The other line it concerns: the last line joined, or the call's line a result moves
        /// after.
        #[serde(skip_serializing_if = "Option::is_none")]
        with: Option<u64>,
        /// The finding it repairs.
        reason: Kind,
    },
}

impl Edit {
    /// The finding the edit repairs.
    pub fn reason(&self) -> Kind {
        match self {
            Edit::Remove { reason, .. }
            | Edit::Insert { reason, .. }
            | Edit::DropResults { reason, .. }
            | Edit::DropCall { reason, .. }
            | Edit::JoinTurn { reason, .. }
            | Edit::MergeInto { reason, .. }
            | Edit::Bridge { reason, .. }
            | Edit::Mend { reason, .. }
            | Edit::Salvage { reason, .. } => *reason,
        }
    }

    /// The line the edit acts on (for an insertion, the line it follows).
    pub fn line(&self) -> u64 {
        match self {
            Edit::Remove { line, .. }
            | Edit::DropResults { line, .. }
            | Edit::DropCall { line, .. }
            | Edit::JoinTurn { line, .. }
            | Edit::MergeInto { line, .. }
            | Edit::Bridge { line, .. }
            | Edit::Mend { line, .. }
            | Edit::Salvage { line, .. } => *line,
            Edit::Insert { after, .. } => *after,
        }
    }
}

/// How the salvage round ([`super::salvage`]) kept a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum How {
    /// NUL padding dropped.
    StripNul,
    /// A complete record glued behind a torn fragment (or behind another complete record)
    /// kept as a line of its own.
    SplitGlued,
    /// Lines split by raw newlines inside a string joined into one record (`with`: the last
    /// line joined).
    JoinSplit,
    /// A complete last line given its newline.
    EndLine,
    /// A result moved to right after its call's line (`with`).
    MoveAfter,
}

/// A finding the plan leaves as it is, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unrepaired {
    /// Its line.
    pub line: u64,
    /// Its kind.
    pub kind: Kind,
    /// Its call, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Why it is left.
    pub why: String,
}

/// The edits for one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The file's format.
    pub format: Option<Format>,
    /// Edits, sorted by line (insertions after the other edits of their line).
    pub edits: Vec<Edit>,
    /// Error findings left as they are.
    pub unrepaired: Vec<Unrepaired>,
    /// Whether the edits may leave new findings (a removed user line between two assistant
    /// turns): the output must be checked again.
    pub recheck: bool,
    /// Claude Code: lines that named a parent not seen before them (where the agent's chain walk
    /// may stop on resume: [`crate::transcript::context::chain`]).
    pub dangling_parents: u64,
}

impl Plan {
    /// Whether the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }
}

#[derive(Debug)]
struct Turn {
    /// Its conversation thread.
    thread: u64,
    first_line: u64,
    key: Option<u64>,
    /// Its lines (a Claude Code turn split over a few lines; one line elsewhere).
    lines: smallvec::SmallVec<[u64; 4]>,
    exchange_end: u64,
    invalid_call: bool,
    /// Its lines are removed (an empty turn).
    removed: bool,
    /// Claude: the line of the turn this turn joins (a consecutive turn merged by id).
    join: Option<u64>,
    /// Claude: its turn key in the repaired file (the key of the turn it joins, if it does).
    out_key: Option<u64>,
    /// Chat formats: the line this message merges into.
    merge_into: Option<u64>,
    /// Its thread's current turn (kept while it is, calls pending or not).
    current: bool,
}

#[derive(Debug)]
struct PendingCall {
    turn: u64,
    /// The thread of its turn: only a result in that thread answers it.
    thread: u64,
    args_ok: bool,
    tool: String,
    item: Option<String>,
}

/// The calls waiting for a result, by id, with how many each turn and each thread has: a turn
/// without one is let go (unless current) without a walk over every pending call.
#[derive(Debug, Default)]
struct Calls {
    by_id: Map<String, PendingCall>,
    per_turn: Map<u64, u32>,
    per_thread: Map<u64, u32>,
    /// Turns whose last pending call went since the last prune.
    emptied: Vec<u64>,
}

impl Calls {
    fn get(&self, id: &str) -> Option<&PendingCall> {
        self.by_id.get(id)
    }

    fn count(&mut self, call: &PendingCall) {
        *self.per_turn.entry(call.turn).or_default() += 1;
        *self.per_thread.entry(call.thread).or_default() += 1;
    }

    fn uncount(&mut self, call: &PendingCall) {
        if let Some(n) = self.per_turn.get_mut(&call.turn) {
            *n -= 1;
            if *n == 0 {
                self.per_turn.remove(&call.turn);
                self.emptied.push(call.turn);
            }
        }
        if let Some(n) = self.per_thread.get_mut(&call.thread) {
            *n -= 1;
            if *n == 0 {
                self.per_thread.remove(&call.thread);
            }
        }
    }

    fn remove(&mut self, id: &str) -> Option<PendingCall> {
        let call = self.by_id.remove(id)?;
        self.uncount(&call);
        Some(call)
    }

    /// Adds a call; one with the same id already pending is replaced.
    fn insert(&mut self, id: String, call: PendingCall) {
        self.count(&call);
        if let Some(old) = self.by_id.insert(id, call) {
            self.uncount(&old);
        }
    }

    /// Adds a call unless one with its id is pending.
    fn insert_new(&mut self, id: &str, call: PendingCall) {
        if !self.by_id.contains_key(id) {
            self.count(&call);
            self.by_id.insert(id.to_owned(), call);
        }
    }

    /// Lets go of every call of `thread`.
    fn forget_thread(&mut self, thread: u64) {
        if self.per_thread.remove(&thread).is_none() {
            return;
        }
        let per_turn = &mut self.per_turn;
        self.by_id.retain(|_, c| {
            if c.thread != thread {
                return true;
            }
            per_turn.remove(&c.turn);
            false
        });
    }

    fn has_turn(&self, turn: u64) -> bool {
        self.per_turn.contains_key(&turn)
    }

    fn has_thread(&self, thread: u64) -> bool {
        self.per_thread.contains_key(&thread)
    }
}

/// What the planner knows of one conversation thread (Claude Code; one thread elsewhere).
#[derive(Debug, Default)]
struct Lane {
    /// Its current assistant turn.
    current: Option<u64>,
    /// Role of its last conversation line that stays in the output.
    prev_kept: Option<Role>,
    /// Where each call answered in its current turn got its first result.
    answered_at: Map<String, u64>,
    /// The last line seen in it.
    last: u64,
}

/// The conversation threads the planner knows: the main thread inline (every thread of the
/// formats that have only one), Claude Code sidechain threads by name.
#[derive(Debug, Default)]
struct Lanes {
    main: Lane,
    side: HashKeyed<Lane>,
}

impl Lanes {
    /// The lane of `thread`, made if it is new.
    fn lane(&mut self, thread: u64) -> &mut Lane {
        if thread == MAIN_THREAD {
            &mut self.main
        } else {
            self.side.entry(thread).or_default()
        }
    }

    /// The lane of `thread`, if it is known.
    fn lane_ref(&self, thread: u64) -> Option<&Lane> {
        if thread == MAIN_THREAD {
            Some(&self.main)
        } else {
            self.side.get(&thread)
        }
    }
}

/// The planner: a [`Stage`] after `validate` (see [`super::plan_pipeline`]); take the [`Plan`]
/// with [`Planner::into_plan`] once the pipeline is finished. Every edit acts within the thread
/// of the finding it repairs: what one thread did never edits another.
#[derive(Debug, Default)]
pub struct Planner {
    format: Option<Format>,
    policy: OrphanPolicy,
    seq: u64,
    turns: Map<u64, Turn>,
    /// How many of `turns` each thread has (none: no entry), so that a compaction of a thread
    /// with none does not look through every other thread's.
    turns_of: Map<u64, usize>,
    calls: Calls,
    /// The threads.
    lanes: Lanes,
    /// Idle sidechain threads are let go from this line on.
    next_sweep: u64,
    /// The validator's horizon: a thread idle for twice as many lines is let go.
    horizon: u64,
    /// The turn each thread's next assistant turn joins (Claude Code) or merges into (chat
    /// formats), by thread: kept apart from the lanes so that the watermark needs no walk over
    /// every thread.
    join_next: HashKeyed<u64>,
    merge_next: HashKeyed<u64>,
    /// Results planned away from the line being read, by call id.
    dropped_here: Set<String>,
    /// The key of the turn `join_next` names, by thread.
    join_key_next: HashKeyed<u64>,
    /// A `consecutive_assistant` finding about this line, not decided yet: results inserted
    /// for the earlier turn's calls (whose findings follow it) separate the turns; only
    /// without them are the turns joined or merged.
    consecutive_at: Option<u64>,
    /// Whether a result was inserted since `consecutive_at` was set.
    separated: bool,
    /// The line of the last `empty_assistant_turn` finding (its turn is removed).
    empty_at: Option<u64>,
    /// The last line format detection looked at: an edit up to it may change what the output
    /// is detected as.
    pub(crate) detected_through: u64,
    /// Turns that stopped being current since the last prune (whether they are still needed
    /// is decided then).
    left: Vec<u64>,
    /// Claude Code: (line, tree node) of the lines read, while recording.
    parents: Option<Vec<(u64, Node)>>,
    /// The stream has ended: the findings now are those about the request as a whole.
    ended: bool,
    /// Images in the main conversation since its last compaction (as the API rules count them).
    images: u64,
    /// The main conversation's lines with the most content since its last compaction: (bytes,
    /// line), largest first.
    largest: Vec<(u64, u64)>,
    plan: Plan,
}

/// How many of the largest lines a `request_too_large` finding names.
const LARGEST_NAMED: usize = 3;

impl Planner {
    /// A planner with an orphan policy.
    pub fn new(policy: OrphanPolicy) -> Self {
        Planner { policy, horizon: HORIZON as u64, ..Planner::default() }
    }

    /// The plan, edits sorted and deduplicated (a removed line gets no other edit).
    pub fn into_plan(mut self, format: Option<Format>) -> Plan {
        self.plan.format = format.or(self.format);
        if self.plan.edits.iter().any(|e| e.line() <= self.detected_through) {
            // The lines that decided the format change: the output is checked again, detected
            // afresh, as `check` will read it.
            self.plan.recheck = true;
        }
        let removed: Set<u64> = self.plan.edits.iter().filter(|e| matches!(e, Edit::Remove { .. })).map(Edit::line).collect();
        let mut seen_remove = Set::default();
        self.plan.edits.retain(|e| match e {
            Edit::Remove { line, .. } => seen_remove.insert(*line),
            Edit::Insert { .. } => true,
            other => !removed.contains(&other.line()),
        });
        self.plan.edits.sort_by_key(|e| (e.line(), matches!(e, Edit::Insert { .. })));
        // The same edit planned twice (two findings of one kind on one line) is one edit: the
        // first of each is kept, looked up in a set of its line's edits (a line can have as many
        // edits as calls).
        let mut group: Set<Edit> = Set::default();
        let mut line = None;
        self.plan.edits.retain(|e| {
            if line != Some(e.line()) {
                line = Some(e.line());
                group.clear();
            }
            group.insert(e.clone())
        });
        self.plan
    }

    /// Keeps the tree node (uuid and parent) of every Claude Code line read from now on, for
    /// [`Planner::take_parents`] (the one-pass repair hands them to its rewriter); `false` stops
    /// and forgets them.
    pub fn record_parents(&mut self, on: bool) {
        self.parents = on.then(Vec::new);
    }

    /// The nodes recorded since the last call: (line, [`Node`]), in line order.
    pub fn take_parents(&mut self) -> Vec<(u64, Node)> {
        self.parents.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The edits planned so far, in planning order (not yet sorted nor deduplicated).
    pub fn edits(&self) -> &[Edit] {
        &self.plan.edits
    }

    /// The first line a later edit may still touch: every line before it is final. The oldest
    /// turn still tracked (a current turn, or one with calls waiting) bounds how far back an
    /// inserted result, a removed turn or a join may reach; a turn waiting to be joined or
    /// merged into is tracked too.
    pub fn watermark(&self) -> u64 {
        let turns = self.turns.values().flat_map(|t| [Some(t.first_line), t.join, t.merge_into]).flatten();
        turns.chain(self.join_next.values().copied()).chain(self.merge_next.values().copied()).min().unwrap_or(u64::MAX)
    }

    fn lane(&mut self, thread: u64) -> &mut Lane {
        self.lanes.lane(thread)
    }

    /// Keeps the turns that can still be edited: those with calls pending and each thread's
    /// current turn. Only a turn that stopped being current or lost its last pending call since
    /// the last prune can have become one to let go: those are looked at, not every turn.
    fn prune_turns(&mut self) {
        let emptied = std::mem::take(&mut self.calls.emptied);
        for seq in emptied.iter().chain(self.left.iter()) {
            if self.turns.get(seq).is_some_and(|t| !t.current) && !self.calls.has_turn(*seq) {
                if let Some(t) = self.turns.remove(seq) {
                    if let Some(n) = self.turns_of.get_mut(&t.thread) {
                        *n -= 1;
                        if *n == 0 {
                            self.turns_of.remove(&t.thread);
                        }
                    }
                }
            }
        }
        self.left.clear();
        self.calls.emptied = emptied;
        self.calls.emptied.clear();
    }

    /// Makes `seq` (or no turn) the current turn of `thread`.
    fn set_current(&mut self, thread: u64, seq: Option<u64>) {
        let old = std::mem::replace(&mut self.lane(thread).current, seq);
        if let Some(t) = old.and_then(|o| self.turns.get_mut(&o)) {
            t.current = false;
            self.left.extend(old);
        }
        if let Some(t) = seq.and_then(|s| self.turns.get_mut(&s)) {
            t.current = true;
        }
    }

    /// Lets go of sidechain threads idle for twice as long as the validator keeps them (so
    /// every finding about one arrives while it is known), with no call pending.
    fn sweep(&mut self, line: u64) {
        let horizon = self.horizon.max(1);
        let calls = &self.calls;
        let idle: Vec<u64> = self.lanes.side.iter().filter(|(t, l)| l.last + 2 * horizon < line && !calls.has_thread(**t)).map(|(t, _)| *t).collect();
        for t in &idle {
            self.set_current(*t, None);
            self.lanes.side.remove(t);
            self.join_next.remove(t);
            self.join_key_next.remove(t);
            self.merge_next.remove(t);
        }
        if !idle.is_empty() {
            self.prune_turns();
        }
    }

    /// The observer needs the format to choose between joining and merging.
    pub fn set_format(&mut self, format: Format) {
        self.format = Some(format);
    }

    fn edit(&mut self, e: Edit) {
        self.plan.edits.push(e);
    }

    fn unrepaired(&mut self, line: u64, kind: Kind, call_id: Option<&str>, why: &str) {
        self.plan.unrepaired.push(Unrepaired { line, kind, call_id: call_id.map(str::to_owned), why: why.to_owned() });
    }

    fn answer(&mut self, kind: Kind, line: u64, call_id: &str, text: Option<ResultText>) {
        let Some(call) = self.calls.remove(call_id) else {
            return self.unrepaired(line, kind, Some(call_id), "the call's turn was not seen");
        };
        let Some(turn) = self.turns.get(&call.turn) else {
            return self.unrepaired(line, kind, Some(call_id), "the call's turn was not seen");
        };
        let text = text.unwrap_or(if turn.invalid_call && call.args_ok { ResultText::InvalidPeer } else { ResultText::NotExecuted });
        // An upsert log's call is answered in its own record (the line of its latest version,
        // the finding's): the rewriter appends that record again with the result.
        let after = if self.format.is_some_and(Format::upserts) { line } else { turn.exchange_end };
        let e = Edit::Insert { after, call_id: call_id.to_owned(), tool: call.tool, item: call.item, text, reason: kind };
        self.edit(e);
        self.separated = true;
    }

    fn finding(&mut self, f: &crate::transcript::Finding) {
        let id = f.call_id.as_deref().unwrap_or("");
        match f.kind {
            k if k.is_framing() => self.edit(Edit::Remove { line: f.line, reason: k }),
            k if k.is_api_rule() => self.api_rule(f),
            Kind::UnansweredCall => self.answer(f.kind, f.line, id, None),
            Kind::OrphanCall => match self.policy {
                OrphanPolicy::Answer => self.answer(f.kind, f.line, id, Some(ResultText::Interrupted)),
                OrphanPolicy::Drop => {
                    self.calls.remove(id);
                    self.plan.recheck = true;
                    self.edit(Edit::DropCall { line: f.line, call_id: id.to_owned(), reason: f.kind });
                }
                OrphanPolicy::Keep => self.unrepaired(f.line, f.kind, Some(id), "kept (--orphans keep)"),
            },
            Kind::OrphanResult | Kind::DuplicateResult => {
                // The line's own results are recorded after its findings: a duplicate of a
                // call no earlier line answered has its first result in this very line.
                let keep_first = f.kind == Kind::DuplicateResult && self.lane(f.thread).answered_at.get(id).is_none_or(|&l| l == f.line);
                self.dropped_here.insert(id.to_owned());
                self.edit(Edit::DropResults { line: f.line, call_id: id.to_owned(), keep_first, reason: f.kind });
            }
            Kind::ConsecutiveAssistant => {
                // Decided when the line itself arrives, after the findings that come with it.
                self.consecutive_at = Some(f.line);
                self.separated = false;
            }
            Kind::EmptyAssistantTurn => {
                self.plan.recheck = true;
                self.empty_at = Some(f.line);
                let current = self.lane(f.thread).current;
                let turn = current.and_then(|c| self.turns.get_mut(&c)).filter(|t| t.first_line == f.line);
                let lines = match turn {
                    Some(t) => {
                        t.removed = true;
                        t.lines.clone()
                    }
                    None => smallvec::smallvec![f.line],
                };
                for line in lines {
                    self.edit(Edit::Remove { line, reason: f.kind });
                }
            }
            // A call id used twice: a result inserted or dropped for one of the calls may leave
            // the other open, or answer it, where the plan cannot tell (the two may even sit in
            // different threads): the output is checked again.
            Kind::DuplicateCallId => self.plan.recheck = true,
            // What the lines said is not in the file: nothing to edit it back from.
            Kind::ContentWiped => self.unrepaired(f.line, f.kind, None, "what the lines said is gone from the file (restore it from a backup)"),
            // The history is in the file, but no summary of it was written: none can be made
            // here, and without the boundary the agent would send all of it again, maybe more
            // than its context window (not measured).
            Kind::CompactionUnsummarized => self.unrepaired(
                f.line,
                f.kind,
                None,
                "no summary of the history before the compaction was written, and none can be made here (the lines are still in the file)",
            ),
            // Missing transcripts are not lines; argument warnings and what a file's going
            // says need no edit; the chain walk's loss is bridged after the other edits; the
            // datasets' rules are the dataset repair's. Every kind is named: a new one is
            // decided here.
            Kind::MissingTranscript
            | Kind::InvalidArguments
            | Kind::NestedTooDeep
            | Kind::UnknownFormat
            | Kind::LostOnResume
            | Kind::TranscriptDeleted
            | Kind::TranscriptRewritten
            | Kind::NotAConversation
            | Kind::UnknownRole
            | Kind::MisplacedSystem
            | Kind::LastMessageNotAssistant
            | Kind::EmptyContent
            | Kind::UndeclaredTool
            | Kind::MissingRequiredArgument
            | Kind::InvalidWeight
            | Kind::DuplicateCustomId => {}
            // Decided by the guards above.
            Kind::MalformedLine | Kind::InvalidUtf8 | Kind::LineTooLong | Kind::TornLine | Kind::RefusedRecord => {}
            Kind::EmptyText
            | Kind::UnsignedThinking
            | Kind::ThinkingNotFirst
            | Kind::ResultNotFirst
            | Kind::ImageTooLarge
            | Kind::EmptyImage
            | Kind::RequestTooLarge => {}
        }
    }

    /// A block the provider's API rejects (`pairing::api`): mended in its line, but for a
    /// request too large as a whole, which repair does not cut.
    fn api_rule(&mut self, f: &crate::transcript::Finding) {
        let how = match f.kind {
            // The request's own findings come at the end: an image over 2000 px of a request
            // with more than 20 images.
            Kind::ImageTooLarge | Kind::EmptyImage => {
                let max_px = if self.ended && self.images > MANY_IMAGES { MANY_IMAGE_MAX_PX } else { IMAGE_MAX_PX };
                Mend::Images { max_px, max_base64: IMAGE_MAX_BYTES }
            }
            Kind::UnsignedThinking => Mend::DropUnsignedThinking,
            Kind::ThinkingNotFirst => Mend::ThinkingFirst,
            Kind::ResultNotFirst => Mend::ResultsFirst,
            Kind::EmptyText => Mend::DropBlankText,
            Kind::RequestTooLarge => return self.too_large(f.line),
            other => unreachable!("{other} is not an API rule"),
        };
        // A mended line may be left without blocks and go, which can put two turns side by
        // side; a placeholder makes the request smaller: the output is checked again.
        self.plan.recheck = true;
        self.edit(Edit::Mend { line: f.line, how, reason: f.kind });
    }

    /// A request over the API's size limit: left, and the largest lines named beside it (each
    /// an unrepaired finding of its own line, so that it is reported in the input's lines).
    fn too_large(&mut self, line: u64) {
        self.unrepaired(
            line,
            Kind::RequestTooLarge,
            None,
            "not repaired: the history since the last compaction goes over the API's 32 MB limit here, and repair does not cut the conversation (the largest lines of the request are named beside this; their blocks can be shortened or the session compacted)",
        );
        for (bytes, at) in self.largest.clone() {
            if at != line {
                let why =
                    format!("not repaired: one of the largest lines of the request over the API's 32 MB limit ({:.1} MB of content)", bytes as f64 / 1048576.0);
                self.unrepaired(at, Kind::RequestTooLarge, None, &why);
            }
        }
    }

    /// Counts a main conversation message for the request's own rules.
    fn request(&mut self, line: u64, m: &crate::transcript::model::Message<'_>) {
        self.images += u64::from(m.api.images);
        let bytes = m.api.bytes;
        if self.largest.len() < LARGEST_NAMED || self.largest.last().is_some_and(|&(b, _)| bytes > b) {
            self.largest.push((bytes, line));
            self.largest.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            self.largest.truncate(LARGEST_NAMED);
        }
    }

    /// Repairs a `consecutive_assistant` finding about `line` (of `thread`), unless results
    /// inserted for the earlier turn's calls separate the two turns.
    fn consecutive(&mut self, line: u64, thread: u64) {
        if std::mem::take(&mut self.separated) {
            return;
        }
        let current = self.lane(thread).current;
        let Some(prev) = current.and_then(|c| self.turns.get(&c)) else {
            return self.unrepaired(line, Kind::ConsecutiveAssistant, None, "no earlier assistant turn was seen");
        };
        if prev.removed {
            // The earlier turn goes (it is empty): what this turn follows is known once it is
            // gone, in the next round.
            self.plan.recheck = true;
            return;
        }
        let (join, merge) = (prev.join.unwrap_or(prev.first_line), prev.merge_into.unwrap_or(prev.first_line));
        match self.format.map(Format::consecutive_repair) {
            Some(Consecutive::Join) if prev.key.is_none() => {
                self.unrepaired(line, Kind::ConsecutiveAssistant, None, "the earlier assistant turn has no message.id to join")
            }
            Some(Consecutive::Join) => {
                let key = prev.out_key;
                self.join_next.insert(thread, join);
                match key {
                    Some(k) => drop(self.join_key_next.insert(thread, k)),
                    None => drop(self.join_key_next.remove(&thread)),
                }
            }
            Some(Consecutive::Merge) => drop(self.merge_next.insert(thread, merge)),
            Some(Consecutive::NotRepaired) | None => self.unrepaired(line, Kind::ConsecutiveAssistant, None, "not repairable in this format"),
        }
    }

    fn assistant_line(&mut self, line: u64, thread: u64, m: &crate::transcript::model::Message<'_>) {
        let current = self.lane(thread).current;
        let same = m.turn.is_some() && current.and_then(|c| self.turns.get(&c)).is_some_and(|t| t.key == m.turn);
        if !same {
            if let Some(cur) = current.and_then(|c| self.turns.get(&c)) {
                if m.turn.is_some() && cur.out_key == m.turn && cur.key != m.turn {
                    // The turn before took this line's message id by a join: in the repaired
                    // file this line continues that turn, which the plan did not see.
                    self.plan.recheck = true;
                }
            }
            self.seq += 1;
            let join = self.join_next.remove(&thread);
            let out_key = if join.is_some() { self.join_key_next.remove(&thread) } else { m.turn };
            let merge_into = self.merge_next.remove(&thread);
            self.set_current(thread, None);
            if let Some(into) = merge_into {
                self.edit(Edit::MergeInto { line, into, reason: Kind::ConsecutiveAssistant });
            }
            // Turns are kept while calls of theirs are pending, or while they are current.
            self.prune_turns();
            *self.turns_of.entry(thread).or_default() += 1;
            self.turns.insert(
                self.seq,
                Turn {
                    thread,
                    first_line: line,
                    key: m.turn,
                    lines: smallvec::SmallVec::new(),
                    exchange_end: line,
                    invalid_call: false,
                    removed: self.empty_at == Some(line),
                    join,
                    out_key,
                    merge_into,
                    current: false,
                },
            );
            self.set_current(thread, Some(self.seq));
            // A new turn moves the conversation on, unless it joins the one before (then the
            // repaired file has no new turn here: what that turn answered stays answered).
            if !self.format.is_some_and(Format::prompt_ends_turn) && join.is_none() {
                self.lane(thread).answered_at.clear();
            }
        }
        let seq = self.lane(thread).current.expect("a current turn");
        let turn = self.turns.get_mut(&seq).expect("current turn is kept");
        turn.lines.push(line);
        turn.exchange_end = line;
        let join = turn.join;
        let answered = self.lanes.lane_ref(thread).map(|l| &l.answered_at);
        for c in &m.calls {
            if join.is_some() && answered.is_some_and(|a| a.contains_key(c.id.as_ref())) {
                // Joined to the turn before, this call repeats one that turn had answered:
                // the checker will read it as a repeated call, not as the call the plan answers.
                self.plan.recheck = true;
            }
            turn.invalid_call |= c.args != Args::Object;
            let call = PendingCall { turn: seq, thread, args_ok: c.args == Args::Object, tool: c.name.to_string(), item: c.item.as_deref().map(str::to_owned) };
            self.calls.insert_new(c.id.as_ref(), call);
        }
        if let Some(like) = join {
            self.edit(Edit::JoinTurn { line, like, reason: Kind::ConsecutiveAssistant });
        }
        self.lane(thread).prev_kept = Some(Role::Assistant);
    }

    fn result_line(&mut self, line: u64, thread: u64, m: &crate::transcript::model::Message<'_>) {
        for r in &m.results {
            if self.calls.get(r.id.as_ref()).is_none_or(|c| c.thread != thread) {
                continue;
            }
            let call = self.calls.remove(r.id.as_ref()).expect("just found");
            if let Some(t) = self.turns.get_mut(&call.turn) {
                t.exchange_end = line;
            }
            self.lane(thread).answered_at.insert(r.id.to_string(), line);
        }
        // A line whose every result is planned away, and nothing else, disappears.
        let gone = !m.results.is_empty() && !m.prompt && m.results.iter().all(|r| self.dropped_here.contains(r.id.as_ref()));
        let codex_prompt = self.format.is_some_and(Format::prompt_ends_turn) && m.prompt;
        if gone {
            if self.lane(thread).prev_kept == Some(Role::Assistant) {
                self.plan.recheck = true;
            }
        } else {
            self.lane(thread).prev_kept = Some(m.role);
        }
        if codex_prompt {
            self.lane(thread).answered_at.clear();
        }
    }
}

impl Planner {
    /// A readable line, in `thread`, after the findings about it.
    pub(crate) fn line(&mut self, number: u64, parsed: &Parsed<'_>, thread: u64) {
        if let (Some(parents), Some(node)) = (self.parents.as_mut(), parsed.node) {
            parents.push((number, node));
        }
        if self.consecutive_at.take() == Some(number) {
            self.consecutive(number, thread);
        }
        if number >= self.next_sweep {
            self.next_sweep = number + self.horizon.max(4) / 4;
            self.sweep(number);
        }
        if matches!(parsed.entry, Entry::Compaction { .. }) && thread == MAIN_THREAD {
            // The request starts again after it (as the API rules count it).
            self.images = 0;
            self.largest.clear();
        }
        match &parsed.entry {
            Entry::Message(m) => {
                if thread == MAIN_THREAD {
                    self.request(number, m);
                }
                self.lane(thread).last = number;
                match m.role {
                    Role::Assistant => self.assistant_line(number, thread, m),
                    Role::User | Role::Tool => self.result_line(number, thread, m),
                    Role::System | Role::Developer => self.lane(thread).prev_kept = Some(m.role),
                }
            }
            // Pi: the entries from `firstKeptEntryId` on stay in the context, with their turns
            // and calls: the plan goes on as if there were no compaction (what the compaction
            // took out, the validator judges).
            Entry::Compaction { keeps: Some(_), .. } => {}
            Entry::Compaction { carried, keeps: None, .. } => {
                // The thread starts afresh; other threads go on.
                self.calls.forget_thread(thread);
                if self.turns_of.remove(&thread).is_some() {
                    self.turns.retain(|_, t| t.thread != thread);
                }
                let lane = self.lane(thread);
                lane.current = None;
                lane.answered_at.clear();
                lane.prev_kept = None;
                if !carried.is_empty() {
                    // Calls the replacement history leaves open belong to the compaction line.
                    self.seq += 1;
                    let t = Turn {
                        thread,
                        first_line: number,
                        key: None,
                        lines: smallvec::SmallVec::new(),
                        exchange_end: number,
                        invalid_call: false,
                        removed: false,
                        join: None,
                        out_key: None,
                        merge_into: None,
                        current: false,
                    };
                    *self.turns_of.entry(thread).or_default() += 1;
                    self.turns.insert(self.seq, t);
                    for c in carried {
                        let call = PendingCall { turn: self.seq, thread, args_ok: true, tool: c.name.to_string(), item: c.item.as_deref().map(str::to_owned) };
                        self.calls.insert(c.id.to_string(), call);
                    }
                }
            }
            Entry::Other | Entry::Unknown => {}
        }
        self.dropped_here.clear();
    }

    /// The stream has ended: what comes now is about the request as a whole.
    pub(crate) fn end(&mut self) {
        self.ended = true;
    }

    /// The findings (and demotions) the stages before made, in order.
    pub(crate) fn outputs<'a>(&mut self, outputs: impl IntoIterator<Item = &'a Output>) {
        for o in outputs {
            if let Output::Demoted { line, kind, call_id, .. } = o {
                if self.format.is_some_and(Format::upserts) {
                    // An upsert log's later version of a record mended what the finding was
                    // about: its edit is not made.
                    self.plan.edits.retain(|e| {
                        let (id, at) = match e {
                            Edit::Insert { call_id, reason, .. } if reason == kind => (call_id, None),
                            Edit::DropResults { call_id, line, reason, .. } if reason == kind => (call_id, Some(*line)),
                            _ => return true,
                        };
                        !(call_id.as_deref() == Some(id.as_str()) && at.is_none_or(|a| a == *line))
                    });
                }
            }
            if let Output::Finding(f) = o {
                // An error, a break the agent mends on resume (a warning: the file is mended all the
                // same), or a warning of a kind repair mends.
                if f.wants_repair() || matches!(f.kind, Kind::EmptyAssistantTurn | Kind::DuplicateCallId) {
                    self.finding(f);
                } else if f.kind == Kind::UnansweredCall {
                    // The checker let the call go (its branch was abandoned, or compacted away):
                    // so does the plan, and a later call with its id is a call of its own.
                    let id = f.call_id.as_deref().unwrap_or("");
                    if self.calls.get(id).is_some_and(|c| c.thread == f.thread) {
                        self.calls.remove(id);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::pipeline::Stage;
    use crate::transcript::Options;

    /// A file with a subagent thread every few lines: the planner keeps the recent threads only.
    #[test]
    fn idle_sidechain_threads_are_let_go() {
        let horizon = 64;
        let planner = Planner { horizon, ..Planner::new(OrphanPolicy::Answer) };
        let stages: Vec<Box<dyn Stage>> = vec![Box::new(crate::transcript::stages::validate::Validate::new(std::time::Duration::MAX)), Box::new(planner)];
        let mut c =
            crate::transcript::Pipeline::transcript(Options { format: Some(Format::ClaudeCode), ..Options::default() }, stages, std::time::Duration::MAX);
        let mut most = 0;
        for t in 0..(3 * horizon) {
            let lines = format!(
                concat!(
                    "{{\"type\":\"user\",\"isSidechain\":true,\"parentUuid\":null,\"uuid\":\"s{t}\",\"message\":{{\"role\":\"user\",\"content\":\"go\"}}}}\n",
                    "{{\"type\":\"assistant\",\"isSidechain\":true,\"parentUuid\":\"s{t}\",\"uuid\":\"a{t}\",\"message\":{{\"id\":\"m{t}\",\"role\":\"assistant\",\"content\":\"done\"}}}}\n"
                ),
                t = t
            );
            c.feed(lines.as_bytes()).unwrap();
            c.drain().for_each(drop);
            most = most.max(c.stage::<Planner>().unwrap().lanes.side.len());
        }
        assert!(most as u64 <= (2 * horizon + horizon / 4) / 2 + 2, "{most} sidechain threads kept");
        assert!(crate::transcript::repair_run::finish_plan(c, &mut Default::default()).unwrap().is_empty());
    }
}
