//! The uuid tree of a Claude Code session, and the branches it abandons.
//!
//! Every Claude Code line names its parent, and resume sends the chain of ancestors of the
//! last line: a line that is not on it stays in the file but never reaches the model again.
//! Two things leave such dead branches:
//!
//! - a **rewind**: the user rewinds (Esc Esc) to an earlier point, and Claude Code appends a new
//!   user prompt whose `parentUuid` names a line that already has a conversation child;
//! - a **replaced answer**: an assistant message arrives under a parent whose conversation child
//!   is an assistant line of *another* API message: a retry of that answer (a model refusal
//!   retried on the fallback model, a stream that failed and was asked again) which takes its
//!   place. The earlier answer's lines stay in the file. (Claude Code also names them, in the
//!   retry's `supersedesUuids` and a `model_refusal_fallback` record's `retractedMessageUuids`:
//!   the validator abandons those by name, wherever their parent is.)
//!
//! Not every line with two children is either: a `tool_use` line's children are normally the
//! next line of the same message (same `message.id`) and its own `tool_result`, so only a
//! *prompt*, or an *assistant line of another message* arriving where an assistant line already
//! hangs, counts.
//!
//! *Invariant:* memory is bounded: the tree keeps the last [`HORIZON`] lines with a uuid (a
//! hash-map entry each, and a place in their parent's list of the lines under it; 64-bit
//! hashes, no strings), so a rewind to a point further back than
//! that is not recognised (its prompt is read as an ordinary one). Check's memory stays flat in
//! the size of the file.

use crate::transcript::model::Node;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The keys are already 64-bit hashes of uuids: hashing them again would only cost time.
#[derive(Default)]
pub(crate) struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// What the tree knows of one uuid. One entry holds both the line's parent and its
/// conversation child, so the common step (a line under the line just before it) finds its
/// parent's entry in cache instead of probing a second table.
#[derive(Debug, Clone, Copy)]
struct Info {
    /// Its parent, when the line itself was recorded (a uuid known only as a parent is not).
    parent: Option<u64>,
    /// Its first conversation child (or the latest branch that replaced it).
    child: Option<u64>,
    /// The hash of its API message's id when the line is an assistant line that has one; 0
    /// otherwise.
    answer: u64,
}

impl Info {
    const UNKNOWN: Info = Info { parent: None, child: None, answer: 0 };
}

/// What a line is to the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// Not conversation (progress, snapshots, Claude Code's own system records).
    Other,
    /// Conversation that starts no branch: a tool result, an assistant line without a message
    /// id.
    Conversation,
    /// A user prompt: under an occupied parent, a rewind.
    Prompt,
    /// An assistant line, with the hash of its API message's id (not 0): under a parent whose
    /// conversation child is an assistant line of another message, it replaces that answer.
    Answer(u64),
}

impl Line {
    /// What a parsed line is to the tree.
    pub fn of(entry: &crate::transcript::model::Entry<'_>) -> Line {
        use crate::transcript::model::{Entry, Role};
        match entry {
            Entry::Message(m) if m.prompt => Line::Prompt,
            Entry::Message(m) if m.role == Role::Assistant => match m.turn {
                Some(key) if key != 0 => Line::Answer(key),
                _ => Line::Conversation,
            },
            Entry::Message(_) => Line::Conversation,
            _ => Line::Other,
        }
    }
}

type Map = HashMap<u64, Info, BuildHasherDefault<Identity>>;

/// A map keyed by uuid hashes (see [`Identity`]).
pub(crate) type HashKeyed<V> = HashMap<u64, V, BuildHasherDefault<Identity>>;

/// Upper bound on the parent walk, against cycles in corrupted files.
const MAX_WALK: usize = 1 << 20;

/// Lines with a uuid the tree remembers: rewinds to within this many lines are recognised.
pub const HORIZON: usize = 1 << 16;

/// The tree, fed in file order.
#[derive(Debug)]
pub struct Branches {
    nodes: Map,
    /// The recorded lines under each uuid (the lines whose parent it is), so that what lies
    /// under a branch's root is found without walking up from every line asked about.
    kids: HashKeyed<SmallVec<[u64; 2]>>,
    /// Lines recorded, oldest first, to forget beyond the horizon.
    order: std::collections::VecDeque<u64>,
    horizon: usize,
    /// Lines whose parent the tree had not seen (a line that was never written, could not be
    /// read, or is beyond the horizon): where Claude Code's chain walk may lose history on
    /// resume, which a second look decides (`context::chain`).
    dangling: u64,
}

impl Default for Branches {
    fn default() -> Self {
        Branches { nodes: Map::default(), kids: HashKeyed::default(), order: Default::default(), horizon: HORIZON, dangling: 0 }
    }
}

impl Branches {
    /// Records a line. Returns the root of the branch it abandons: the parent's earlier
    /// conversation child, when the line is a prompt (a rewind) or an answer that replaces an
    /// answer of another message there.
    pub fn record(&mut self, node: Node, line: Line) -> Option<u64> {
        let Some(parent) = node.parent else {
            // A root (the first line, a compaction boundary): known, so that a line under it
            // is not taken for one under a missing parent. Roots are few; a file of nothing but
            // roots stops adding them at the horizon's size.
            if self.nodes.len() < 2 * self.horizon {
                self.nodes.entry(node.id).or_insert(Info::UNKNOWN);
            }
            return None;
        };
        if !self.nodes.contains_key(&parent) {
            self.dangling += 1;
        }
        let own = self.nodes.entry(node.id).or_insert(Info::UNKNOWN);
        let first = own.parent.is_none();
        let before = own.parent.replace(parent);
        if let Line::Answer(key) = line {
            own.answer = key;
        }
        if before != Some(parent) {
            if let Some(old) = before {
                self.unkid(old, node.id);
            }
            self.kids.entry(parent).or_default().push(node.id);
        }
        if first {
            self.order.push_back(node.id);
            if self.order.len() > self.horizon {
                let old = self.order.pop_front().expect("non-empty");
                if let Some(p) = self.nodes.remove(&old).and_then(|i| i.parent) {
                    self.unkid(p, old);
                }
            }
        }
        if line == Line::Other {
            return None;
        }
        let at = self.nodes.entry(parent).or_insert(Info::UNKNOWN);
        let child = match at.child {
            None => {
                at.child = Some(node.id);
                return None;
            }
            Some(child) if child == node.id => return None,
            Some(child) => child,
        };
        let replaces = match line {
            Line::Prompt => true,
            Line::Answer(key) => {
                let theirs = self.nodes.get(&child).map_or(0, |i| i.answer);
                theirs != 0 && theirs != key
            }
            Line::Conversation | Line::Other => false,
        };
        if !replaces {
            return None;
        }
        // The new branch is now the parent's conversation child.
        if let Some(at) = self.nodes.get_mut(&parent) {
            at.child = Some(node.id);
        }
        Some(child)
    }

    /// How many lines named a parent the tree had not seen.
    pub fn dangling(&self) -> u64 {
        self.dangling
    }

    fn unkid(&mut self, parent: u64, kid: u64) {
        if let Some(kids) = self.kids.get_mut(&parent) {
            if let Some(i) = kids.iter().position(|&k| k == kid) {
                kids.swap_remove(i);
            }
            if kids.is_empty() {
                self.kids.remove(&parent);
            }
        }
    }

    /// The lines [`Branches::is_under`] `root` (`root` among them), found from the root down:
    /// in proportion to the branch, not to the lines asked about nor to their depth. `None`
    /// once more than `most` are found.
    pub(crate) fn subtree(&self, root: u64, most: usize) -> Option<HashKeyed<()>> {
        let mut found: HashKeyed<()> = HashKeyed::default();
        found.insert(root, ());
        let mut todo = vec![root];
        while let Some(at) = todo.pop() {
            for &kid in self.kids.get(&at).map_or(&[][..], |k| k.as_slice()) {
                if found.insert(kid, ()).is_none() {
                    if found.len() > most {
                        return None;
                    }
                    todo.push(kid);
                }
            }
        }
        Some(found)
    }

    /// The parent of a recorded line.
    pub fn parent(&self, node: u64) -> Option<u64> {
        self.nodes.get(&node).and_then(|i| i.parent)
    }

    /// Whether `node` is `root` or lies under it.
    pub fn is_under(&self, node: u64, root: u64) -> bool {
        let mut at = node;
        for _ in 0..MAX_WALK {
            if at == root {
                return true;
            }
            match self.nodes.get(&at).and_then(|i| i.parent) {
                Some(p) => at = p,
                None => return false,
            }
        }
        false
    }

    /// [`Branches::is_under`] asked of many nodes against one `root`: `seen` (empty at the first
    /// question about a root, kept for the next ones) remembers the answer for every line walked,
    /// so that each line of the tree is walked once however many nodes are asked about.
    pub(crate) fn is_under_seen(&self, node: u64, root: u64, seen: &mut HashKeyed<bool>) -> bool {
        let mut path = Vec::new();
        let mut at = node;
        let answer = loop {
            if at == root {
                break true;
            }
            // A line already walked, for another node or on this walk (a cycle that does not
            // pass the root: the walk would go round it until it gave up).
            if let Some(&known) = seen.get(&at) {
                break known;
            }
            seen.insert(at, false);
            path.push(at);
            match self.nodes.get(&at).and_then(|i| i.parent) {
                Some(p) => at = p,
                None => break false,
            }
        };
        if answer {
            for n in path {
                seen.insert(n, true);
            }
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(id: u64, parent: Option<u64>) -> Node {
        Node { id, parent, sidechain: false }
    }

    #[test]
    fn rewind_abandons_the_earlier_child() {
        let mut b = Branches::default();
        assert_eq!(b.record(n(1, None), Line::Prompt), None);
        assert_eq!(b.record(n(2, Some(1)), Line::Answer(7)), None);
        assert_eq!(b.record(n(3, Some(2)), Line::Prompt), None);
        assert_eq!(b.record(n(4, Some(3)), Line::Answer(8)), None);
        // A second prompt under 2: the branch rooted at 3 is abandoned.
        assert_eq!(b.record(n(5, Some(2)), Line::Prompt), Some(3));
        assert!(b.is_under(4, 3));
        assert!(!b.is_under(5, 3));
        assert!(!b.is_under(2, 3));
    }

    #[test]
    fn memory_is_bounded_by_the_horizon() {
        let mut b = Branches::default();
        for i in 1..(3 * HORIZON as u64) {
            b.record(n(i, Some(i - 1)), Line::Conversation);
        }
        // The horizon's lines, plus the root's parent, known only as a parent.
        assert!(b.nodes.len() <= HORIZON + 1);
        assert!(b.kids.len() <= HORIZON + 1, "the lines under each uuid are let go with the lines");
        // Recent history is still known: a rewind within the horizon is recognised.
        let last = 3 * HORIZON as u64 - 1;
        assert_eq!(b.record(n(last + 1, Some(last - 10)), Line::Prompt), Some(last - 9));
    }

    /// The tree as it was first written: two tables, parent by line and conversation child by
    /// parent (and a third, each answer's message), with none of the one-table tree's care for
    /// lookups. The one-table tree must answer exactly as it does.
    #[derive(Default)]
    struct TwoTables {
        parent: std::collections::HashMap<u64, u64>,
        conversation_child: std::collections::HashMap<u64, u64>,
        answer: std::collections::HashMap<u64, u64>,
        order: std::collections::VecDeque<u64>,
    }

    impl TwoTables {
        fn record(&mut self, node: Node, line: Line, horizon: usize) -> Option<u64> {
            let parent = node.parent?;
            if let Line::Answer(key) = line {
                self.answer.insert(node.id, key);
            }
            if self.parent.insert(node.id, parent).is_none() {
                self.order.push_back(node.id);
                if self.order.len() > horizon {
                    let old = self.order.pop_front().unwrap();
                    self.parent.remove(&old);
                    self.conversation_child.remove(&old);
                    self.answer.remove(&old);
                }
            }
            if line == Line::Other {
                return None;
            }
            match self.conversation_child.get(&parent) {
                Some(&child) if child != node.id => match line {
                    Line::Prompt => Some(child),
                    Line::Answer(key) => self.answer.get(&child).filter(|&&a| a != key).map(|_| child),
                    _ => None,
                },
                Some(_) => None,
                None => {
                    self.conversation_child.insert(parent, node.id);
                    None
                }
            }
            .inspect(|_| {
                self.conversation_child.insert(parent, node.id);
            })
        }

        fn is_under(&self, node: u64, root: u64) -> bool {
            let mut at = node;
            for _ in 0..MAX_WALK {
                if at == root {
                    return true;
                }
                match self.parent.get(&at) {
                    Some(&p) => at = p,
                    None => return false,
                }
            }
            false
        }
    }

    proptest::proptest! {
        #[test]
        fn one_table_answers_as_two_did(steps in proptest::collection::vec((1u64..24, proptest::num::u64::ANY, proptest::bool::ANY, 0u8..4, 1u64..4), 0..200), horizon in 1usize..12) {
            let mut new = Branches { horizon, ..Branches::default() };
            let mut old = TwoTables::default();
            // Parents below their lines: repeated ids and roots, but no cycles (a walk round a
            // cycle is cut at a million steps, too slow to try here thousands of times). Few
            // message ids, so that answers of one message and of another both meet.
            let kinds = |k: u8, key: u64| match k {
                0 => Line::Other,
                1 => Line::Conversation,
                2 => Line::Prompt,
                _ => Line::Answer(key),
            };
            let steps = steps.into_iter().map(|(id, p, root, k, key)| (id, (!root).then_some(p % id), kinds(k, key)));
            for (id, parent, line) in steps {
                let node = n(id, parent);
                proptest::prop_assert_eq!(new.record(node, line), old.record(node, line, horizon));
                for a in 0..24 {
                    proptest::prop_assert_eq!(new.is_under(id, a), old.is_under(id, a));
                    proptest::prop_assert_eq!(new.is_under(a, id), old.is_under(a, id));
                }
                // Remembering the walks for one root, or finding the branch from its root down,
                // answers as walking up from each node does.
                for root in 0..24 {
                    let mut seen = HashKeyed::default();
                    let branch = new.subtree(root, usize::MAX).unwrap();
                    for a in (0..24).chain(0..24) {
                        proptest::prop_assert_eq!(new.is_under_seen(a, root, &mut seen), new.is_under(a, root));
                        proptest::prop_assert_eq!(branch.contains_key(&a), new.is_under(a, root));
                    }
                    proptest::prop_assert!(branch.keys().all(|&a| new.is_under(a, root)));
                }
            }
        }
    }

    #[test]
    fn tool_result_beside_next_block_is_not_a_rewind() {
        let mut b = Branches::default();
        b.record(n(1, None), Line::Prompt);
        b.record(n(2, Some(1)), Line::Answer(7)); // tool_use line
        b.record(n(3, Some(2)), Line::Answer(7)); // next line of the same message
        assert_eq!(b.record(n(4, Some(2)), Line::Conversation), None); // its tool_result
                                                                       // The result first, then the next block: neither replaces the other.
        b.record(n(5, Some(4)), Line::Answer(9));
        assert_eq!(b.record(n(6, Some(5)), Line::Conversation), None);
        assert_eq!(b.record(n(7, Some(5)), Line::Answer(9)), None);
    }

    #[test]
    fn an_answer_of_another_message_replaces_the_answer_there() {
        let mut b = Branches::default();
        b.record(n(1, None), Line::Prompt);
        b.record(n(2, Some(1)), Line::Answer(7)); // the refused answer, two lines
        b.record(n(3, Some(2)), Line::Answer(7));
        // The retry, another API message under the same prompt: 2 and what hangs under it go.
        assert_eq!(b.record(n(4, Some(1)), Line::Answer(8)), Some(2));
        assert!(b.is_under(3, 2));
        assert!(!b.is_under(4, 2));
        assert_eq!(b.parent(4), Some(1));
        // A line of the retry's own message beside it is not a replacement, nor is an answer
        // under a line whose child is not an answer (or has no message id).
        assert_eq!(b.record(n(5, Some(1)), Line::Answer(8)), None);
        b.record(n(10, Some(4)), Line::Conversation);
        assert_eq!(b.record(n(11, Some(4)), Line::Answer(9)), None);
    }
}
