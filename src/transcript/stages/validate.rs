//! Canonical validation: the pairing rules of seed 002, per format.
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
//! Calling order: [`Validator::push`] every parsed line in file order, then
//! [`Validator::finish`] once at the end of the stream.

use super::branches::Branches;
use super::{Map, Set};
use crate::transcript::finding::{Finding, Kind, Output, Severity};
use crate::transcript::formats::Format;
use crate::transcript::model::{Args, Call, Entry, Message, Parsed, Role};

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
}

/// The assistant turn in progress.
#[derive(Debug)]
struct Turn {
    /// Hash of the turn key (Claude `message.id`).
    key: Option<u64>,
    line: u64,
    has_content: bool,
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
    answered: Set<String>,
    assistant_since_user: bool,
    turn: Option<Turn>,
    branches: Option<Branches>,
    emitted: Vec<Emitted>,
}

impl Validator {
    /// A validator for a file of `format`.
    pub fn new(format: Format) -> Self {
        Validator {
            format,
            pending: Map::default(),
            answered: Set::default(),
            assistant_since_user: false,
            turn: None,
            branches: (format == Format::ClaudeCode).then(Branches::default),
            emitted: Vec::new(),
        }
    }

    /// Calls still waiting for a result, in line order.
    pub fn pending(&self) -> Vec<&Pending> {
        let mut v: Vec<&Pending> = self.pending.values().collect();
        v.sort_by(|a, b| (a.line, &a.id).cmp(&(b.line, &b.id)));
        v
    }

    /// Feeds one parsed line.
    pub fn push(&mut self, line: u64, parsed: &Parsed<'_>, out: &mut impl FnMut(Output)) {
        let node = parsed.node.map(|n| n.id);
        if let (Some(b), Some(n)) = (self.branches.as_mut(), parsed.node) {
            let (conversation, prompt) = match &parsed.entry {
                Entry::Message(m) => (true, m.prompt),
                _ => (false, false),
            };
            if let Some(root) = b.record(n, conversation, prompt) {
                self.abandon(root, line, out);
            }
        }
        match &parsed.entry {
            Entry::Message(m) => match m.role {
                Role::Assistant => self.assistant(line, m, node, out),
                Role::User | Role::Tool => {
                    self.results(line, m, node, out);
                    self.assistant_since_user = false;
                    if self.format == Format::Codex && m.prompt {
                        self.moved_on(line, out);
                    }
                }
                Role::System | Role::Developer => self.assistant_since_user = false,
            },
            Entry::Compaction { carried } => self.compaction(line, carried, out),
            Entry::Other | Entry::Unknown => {}
        }
    }

    /// Ends the stream: closes the last turn and reports calls still pending as orphans.
    pub fn finish(mut self, out: &mut impl FnMut(Output)) {
        self.close_turn(out);
        let pending: Vec<Pending> = self.pending().into_iter().cloned().collect();
        for p in pending {
            let f = orphan(&p);
            self.emit(f, p.node, out);
        }
    }

    /// What [`Validator::finish`] would report if the stream ended now, without ending it: the
    /// open turn if it is empty, then calls still pending as `orphan_call`. The daemon reports
    /// these once a file has been quiet for the grace period.
    pub fn tail(&self) -> Vec<Finding> {
        let mut v = Vec::new();
        if let Some(t) = self.turn.as_ref().filter(|t| !t.has_content) {
            v.push(Finding::new(t.line, Kind::EmptyAssistantTurn, "assistant turn whose parts are all blank; it must not enter the history"));
        }
        for p in self.pending() {
            v.push(orphan(p));
        }
        v
    }

    fn assistant(&mut self, line: u64, m: &Message<'_>, node: Option<u64>, out: &mut impl FnMut(Output)) {
        let key = m.turn;
        let same_turn = key.is_some() && self.turn.as_ref().is_some_and(|t| t.key == key);
        if !same_turn {
            self.close_turn(out);
            if self.format != Format::Codex {
                if self.assistant_since_user {
                    let f = Finding::new(line, Kind::ConsecutiveAssistant, "assistant turn follows another assistant turn with no user turn between them");
                    self.emit(f, node, out);
                }
                self.moved_on(line, out);
            }
            self.turn = Some(Turn { key, line, has_content: false });
        }
        if let Some(t) = self.turn.as_mut() {
            t.has_content |= m.has_content;
        }
        for c in &m.calls {
            self.call(line, c, node, out);
        }
        self.assistant_since_user = true;
        if m.turn.is_none() {
            self.close_turn(out);
        }
    }

    fn call(&mut self, line: u64, c: &Call<'_>, node: Option<u64>, out: &mut impl FnMut(Output)) {
        let what = match c.args {
            Args::Object => None,
            Args::NotObject => Some("are JSON but not an object"),
            Args::Unparseable => Some("are not valid JSON"),
        };
        if let Some(what) = what {
            let f =
                Finding::new(line, Kind::InvalidArguments, format!("arguments of the call to {} {what}", tool_name(&c.name))).with_call(&c.id, Some(&c.name));
            self.emit(f, node, out);
        }
        if self.pending.contains_key(c.id.as_ref()) || self.answered.contains(c.id.as_ref()) {
            let f =
                Finding::new(line, Kind::DuplicateCallId, "a second call with this id; it is treated as the same pending call").with_call(&c.id, Some(&c.name));
            self.emit(f, node, out);
            return;
        }
        let p = Pending { id: c.id.to_string(), name: c.name.to_string(), line, node };
        self.pending.insert(p.id.clone(), p);
    }

    fn results(&mut self, line: u64, m: &Message<'_>, node: Option<u64>, out: &mut impl FnMut(Output)) {
        for r in &m.results {
            if let Some(p) = self.pending.remove(r.id.as_ref()) {
                self.answered.insert(p.id);
            } else if self.answered.contains(r.id.as_ref()) {
                let f = Finding::new(line, Kind::DuplicateResult, "a second result for a call that already has one").with_call(&r.id, None);
                self.emit(f, node, out);
            } else {
                let f = Finding::new(line, Kind::OrphanResult, "result for a call that is not pending in this part of the conversation").with_call(&r.id, None);
                self.emit(f, node, out);
            }
        }
    }

    /// The conversation moved on at `line`: calls still pending there are unanswered. The
    /// dataset stage calls it at a user prompt in a chat conversation (results must come
    /// before one).
    pub fn moved_on(&mut self, line: u64, out: &mut impl FnMut(Output)) {
        let pending: Vec<Pending> = self.pending().into_iter().cloned().collect();
        for p in pending {
            let f = Finding::new(
                p.line,
                Kind::UnansweredCall,
                format!("call to {} has no result, and the conversation moved on at line {line}", tool_name(&p.name)),
            )
            .with_call(&p.id, Some(&p.name));
            self.emit(f, p.node, out);
        }
        self.pending.clear();
        self.answered.clear();
    }

    fn compaction(&mut self, line: u64, carried: &[Call<'_>], out: &mut impl FnMut(Output)) {
        self.close_turn(out);
        let pending: Vec<Pending> = self.pending().into_iter().cloned().collect();
        for p in pending.into_iter().filter(|p| !carried.iter().any(|c| c.id == p.id)) {
            let mut f = Finding::new(
                p.line,
                Kind::UnansweredCall,
                format!("call to {} was still pending when the history was compacted at line {line}", tool_name(&p.name)),
            )
            .with_call(&p.id, Some(&p.name));
            // The call itself is no longer sent; a result after the boundary is the error.
            f.severity = Severity::Warning;
            self.emit(f, p.node, out);
        }
        self.pending.clear();
        self.answered.clear();
        self.assistant_since_user = false;
        for c in carried {
            self.pending.insert(c.id.to_string(), Pending { id: c.id.to_string(), name: c.name.to_string(), line, node: None });
        }
    }

    /// A rewind at `line` abandoned the branch rooted at `root`.
    fn abandon(&mut self, root: u64, line: u64, out: &mut impl FnMut(Output)) {
        let Some(b) = self.branches.as_ref() else { return };
        let why = format!("on a branch abandoned by the rewind at line {line}, which resume never sends");
        let mut gone: Vec<Pending> = self.pending.values().filter(|p| p.node.is_some_and(|n| b.is_under(n, root))).cloned().collect();
        gone.sort_by_key(|p| p.line);
        for e in self.emitted.iter_mut().filter(|e| !e.demoted) {
            if b.is_under(e.node, root) {
                e.demoted = true;
                out(Output::Demoted { line: e.line, kind: e.kind, call_id: e.call_id.clone(), reason: why.clone() });
            }
        }
        for p in gone {
            self.pending.remove(&p.id);
            let mut f = Finding::new(p.line, Kind::UnansweredCall, format!("call to {} has no result", tool_name(&p.name))).with_call(&p.id, Some(&p.name));
            f.demote(&why);
            out(Output::Finding(f));
        }
    }

    fn close_turn(&mut self, out: &mut impl FnMut(Output)) {
        if let Some(t) = self.turn.take() {
            if !t.has_content {
                out(Output::Finding(Finding::new(t.line, Kind::EmptyAssistantTurn, "assistant turn whose parts are all blank; it must not enter the history")));
            }
        }
    }

    fn emit(&mut self, f: Finding, node: Option<u64>, out: &mut impl FnMut(Output)) {
        if let (Some(_), Some(node), Severity::Error) = (&self.branches, node, f.severity) {
            self.emitted.push(Emitted { line: f.line, kind: f.kind, call_id: f.call_id.clone(), node, demoted: false });
        }
        out(Output::Finding(f));
    }
}

fn orphan(p: &Pending) -> Finding {
    Finding::new(p.line, Kind::OrphanCall, format!("call to {} has no result at the end of the transcript", tool_name(&p.name))).with_call(&p.id, Some(&p.name))
}

fn tool_name(name: &str) -> String {
    if name.is_empty() {
        "a tool".to_owned()
    } else {
        format!("`{name}`")
    }
}
