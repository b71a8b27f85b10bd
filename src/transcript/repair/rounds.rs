//! A repair over several rounds, told in the input's own terms.
//!
//! Some edits leave findings that only exist once they are made (a removed user line leaves two
//! assistant turns side by side): the plan says so ([`Plan::recheck`]) and the output is
//! checked and planned again, up to [`MAX_ROUNDS`] rewrites. Each later round works on the
//! previous round's output, whose line numbers are not the input's; [`Rounds`] keeps where every
//! output line comes from ([`Origins`]) and what became of every input line ([`Change`]), so that
//! the report, the dry run and the rejects name input lines only, with the input's own bytes.
//!
//! The verdict is honest: a repair is complete only when the last plan made leaves nothing
//! (the output checked again has nothing to repair, or the plan said its edits leave nothing
//! new), no edit failed, and nothing was left unrepaired. Otherwise [`Rounds::unrepaired`] lists
//! each finding left, with why.

use super::origins::{Action, Change, Origins};
use super::plan::{Edit, Plan, Unrepaired};
use super::rejects::RejectWriter;
use super::rewrite::{RewriteLog, RewriteStats};
use crate::transcript::Map;

/// Rewrites per file at most (the first one included) before giving up on a cascade of
/// findings.
pub const MAX_ROUNDS: usize = 3;

/// An edit of some round, with its lines in input terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundEdit {
    /// The round (1 for edits of the input itself).
    pub round: usize,
    /// The edit; a line that only existed in an earlier round's output (an inserted result) is
    /// named by the input line it follows.
    pub edit: Edit,
    /// Whether the edit acts on a line the repair inserted in an earlier round.
    pub on_inserted: bool,
}

/// What a repair over several rounds did. Calling order: [`Rounds::record`] each round's plan
/// and rewrite; [`Rounds::wants_another`] says whether to plan the output again; then
/// [`Rounds::verified`] with that plan, or [`Rounds::finish`] when no more rounds are made.
#[derive(Debug, Default)]
pub struct Rounds {
    /// Where the lines of the latest output come from (`None`: nothing was rewritten yet).
    origins: Option<Origins>,
    /// What became of each input line not in the output as it was.
    fates: Map<u64, Change>,
    /// Whether a round after the first changed input lines (then the rejects are written again
    /// from the input, one record per line with its final action).
    later_changes: bool,
    edits: Vec<RoundEdit>,
    unrepaired: Vec<Unrepaired>,
    stats: RewriteStats,
    rounds: usize,
    max: usize,
    /// Whether the last plan may have left findings that only a new look would show.
    open: bool,
}

impl Rounds {
    /// Nothing done yet; at most [`MAX_ROUNDS`] rewrites.
    pub fn new() -> Self {
        Rounds::with_max(MAX_ROUNDS)
    }

    /// Nothing done yet; at most `max` rewrites (at least one).
    pub fn with_max(max: usize) -> Self {
        Rounds { max: max.max(1), ..Rounds::default() }
    }

    /// The input line that line `line` of the latest output stands for.
    fn input_line(&self, line: u64) -> u64 {
        match &self.origins {
            Some(o) => o.input_line(line).unwrap_or(line),
            None => line,
        }
    }

    fn translate(&self, e: &Edit) -> Edit {
        let mut e = e.clone();
        match &mut e {
            Edit::Remove { line, .. } | Edit::DropResults { line, .. } | Edit::DropCall { line, .. } | Edit::Mend { line, .. } => {
                *line = self.input_line(*line)
            }
            Edit::Insert { after, .. } => *after = self.input_line(*after),
            Edit::JoinTurn { line, like, .. } => {
                *line = self.input_line(*line);
                *like = self.input_line(*like);
            }
            Edit::MergeInto { line, into, .. } => {
                *line = self.input_line(*line);
                *into = self.input_line(*into);
            }
            Edit::Bridge { line, under, .. } => {
                *line = self.input_line(*line);
                *under = self.input_line(*under);
            }
            Edit::Salvage { line, with, .. } => {
                *line = self.input_line(*line);
                *with = with.map(|w| self.input_line(w));
            }
        }
        e
    }

    fn left(&mut self, u: &Unrepaired) {
        let u = Unrepaired { line: self.input_line(u.line), ..u.clone() };
        if !self.unrepaired.contains(&u) {
            self.unrepaired.push(u);
        }
    }

    /// Records a round: the plan made over the latest output (or the input) and what its
    /// rewrite did.
    pub fn record(&mut self, plan: &Plan, log: RewriteLog) {
        if self.rounds > 0 {
            // A plan of the latest output sees every finding still there: what earlier rounds
            // left is now either repaired or named again by it.
            self.unrepaired.clear();
        }
        self.rounds += 1;
        let round = self.rounds;
        for e in &plan.edits {
            let edit = self.translate(e);
            let on_inserted = !matches!(e, Edit::Insert { .. })
                && matches!(self.origins.as_ref().and_then(|o| o.of(e.line())), Some(super::origins::Source::Inserted { .. }));
            self.edits.push(RoundEdit { round, edit, on_inserted });
        }
        for u in &plan.unrepaired {
            self.left(u);
        }
        for f in &log.failed {
            let e = &f.edit;
            let call_id = match e {
                Edit::Insert { call_id, .. } | Edit::DropResults { call_id, .. } | Edit::DropCall { call_id, .. } => Some(call_id.clone()),
                _ => None,
            };
            let why = format!("the {} edit could not be made: {}", edit_name(e), f.why);
            self.left(&Unrepaired { line: e.line(), kind: e.reason(), call_id, why });
        }
        for c in &log.changes {
            let line = match self.origins.as_ref().map(|o| o.of(c.line)) {
                // A line the repair wrote in an earlier round: not the user's, no record.
                Some(Some(super::origins::Source::Inserted { .. })) => continue,
                Some(Some(super::origins::Source::Same(n) | super::origins::Source::Modified(n))) => n,
                _ => c.line,
            };
            if self.rounds > 1 {
                self.later_changes = true;
            }
            let fate = self.fates.entry(line).or_insert(Change { line, ..*c });
            if c.action > fate.action {
                fate.action = c.action;
                fate.reason = c.reason;
            }
            fate.reason = fate.reason.or(c.reason);
            fate.parent |= c.parent;
        }
        self.stats += log.stats;
        self.open = plan.recheck || log.needs_recheck();
        self.origins = Some(match self.origins.take() {
            Some(o) => o.then(&log.origins),
            None => log.origins,
        });
    }

    /// How many rounds were recorded.
    pub fn rounds(&self) -> usize {
        self.rounds
    }

    /// Whether the latest output must be checked and planned again: the last plan said its
    /// edits may leave new findings.
    pub fn wants_another(&self) -> bool {
        self.open
    }

    /// Whether another rewrite may still be made.
    pub fn may_rewrite(&self) -> bool {
        self.rounds < self.max
    }

    /// The plan of the latest output, made when [`Rounds::wants_another`] said so: when it is
    /// empty, the output is verified and the repair ends; otherwise, if no rewrite may be made
    /// any more, everything it would still do is left unrepaired. Returns whether the repair
    /// has ended.
    pub fn verified(&mut self, plan: &Plan) -> bool {
        if self.rounds > 0 && (plan.is_empty() || !self.may_rewrite()) {
            // The plan of the latest output names every finding still there (see `record`).
            self.unrepaired.clear();
        }
        if plan.is_empty() {
            for u in &plan.unrepaired {
                self.left(u);
            }
            self.open = false;
            return true;
        }
        if self.may_rewrite() {
            return false;
        }
        for u in &plan.unrepaired {
            self.left(u);
        }
        let why = format!("still to repair after {} rounds of repair", self.rounds);
        for e in &plan.edits {
            let call_id = match e {
                Edit::Insert { call_id, .. } | Edit::DropResults { call_id, .. } | Edit::DropCall { call_id, .. } => Some(call_id.clone()),
                _ => None,
            };
            self.left(&Unrepaired { line: e.line(), kind: e.reason(), call_id, why: why.clone() });
        }
        self.open = false;
        true
    }

    /// Findings left as they are, with why, in input lines.
    pub fn unrepaired(&self) -> &[Unrepaired] {
        &self.unrepaired
    }

    /// Whether the repair is complete: nothing left, and no plan left open.
    pub fn complete(&self) -> bool {
        self.unrepaired.is_empty() && !self.open
    }

    /// Every edit of every round, in input lines.
    pub fn edits(&self) -> &[RoundEdit] {
        &self.edits
    }

    /// What the rewrites did, summed.
    pub fn stats(&self) -> RewriteStats {
        self.stats
    }

    /// What became of each changed input line, in line order.
    pub fn changes(&self) -> Vec<Change> {
        let mut v: Vec<Change> = self.fates.values().copied().collect();
        v.sort_by_key(|c| c.line);
        v
    }

    /// Lines whose `parentUuid` a rewrite re-pointed without an edit of the plan asking for it
    /// (their parent was removed, or a result was inserted before them), in input lines.
    pub fn reparented(&self) -> Vec<u64> {
        self.changes().into_iter().filter(|c| c.parent && c.action == Action::Modified).map(|c| c.line).collect()
    }

    /// When a round after the first changed lines, the first round's rejects are not the whole
    /// story: the rejects are then written again from the input by this writer, one record per
    /// line with its final action. `None`: the first round's rejects stand.
    pub fn rejects_writer(&self, max_line_bytes: usize) -> Option<RejectWriter> {
        self.later_changes.then(|| RejectWriter::new(self.changes(), max_line_bytes))
    }
}

/// The action name of an edit (as `--dry-run` prints it).
pub fn edit_name(e: &Edit) -> &'static str {
    match e {
        Edit::Remove { .. } => "remove",
        Edit::Insert { .. } => "insert",
        Edit::DropResults { .. } => "drop_results",
        Edit::DropCall { .. } => "drop_call",
        Edit::JoinTurn { .. } => "join_turn",
        Edit::MergeInto { .. } => "merge_into",
        Edit::Bridge { .. } => "bridge",
        Edit::Mend { .. } => "mend",
        Edit::Salvage { .. } => "salvage",
    }
}
