//! The uuid tree of a Claude Code session, and the rewinds it records.
//!
//! Every Claude Code line names its parent. When the user rewinds (Esc Esc) to an earlier point,
//! Claude Code appends a new user prompt whose `parentUuid` names a line that already has a
//! conversation child: the earlier child and everything under it become an abandoned branch that
//! stays in the file but is never sent to the model again. Not every line with two children is a
//! rewind: a `tool_use` line's children are normally the next line of the same message and its own
//! `tool_result`, so only a *prompt* arriving at an occupied parent counts.
//!
//! *Invariant:* memory is bounded: the tree keeps the last [`HORIZON`] lines with a uuid (two
//! one hash-map entry each, 64-bit hashes, no strings), so a rewind to a point further back than
//! that is not recognised (its prompt is read as an ordinary one). Check's memory stays flat in
//! the size of the file.

use crate::transcript::model::Node;
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
    /// Its first conversation child (or the latest rewind's prompt).
    child: Option<u64>,
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
    /// Lines recorded, oldest first, to forget beyond the horizon.
    order: std::collections::VecDeque<u64>,
    horizon: usize,
}

impl Default for Branches {
    fn default() -> Self {
        Branches { nodes: Map::default(), order: Default::default(), horizon: HORIZON }
    }
}

impl Branches {
    /// Records a line. Returns the root of the branch it abandons, when the line is a prompt
    /// that rewinds to a parent that already has a conversation child.
    pub fn record(&mut self, node: Node, conversation: bool, prompt: bool) -> Option<u64> {
        let parent = node.parent?;
        let own = self.nodes.entry(node.id).or_insert(Info { parent: None, child: None });
        let first = own.parent.is_none();
        own.parent = Some(parent);
        if first {
            self.order.push_back(node.id);
            if self.order.len() > self.horizon {
                let old = self.order.pop_front().expect("non-empty");
                self.nodes.remove(&old);
            }
        }
        if !conversation {
            return None;
        }
        let at = self.nodes.entry(parent).or_insert(Info { parent: None, child: None });
        match at.child {
            Some(child) if child != node.id => {
                let abandoned = prompt.then_some(child);
                if abandoned.is_some() {
                    // The new branch is now the parent's conversation child.
                    at.child = Some(node.id);
                }
                abandoned
            }
            Some(_) => None,
            None => {
                at.child = Some(node.id);
                None
            }
        }
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
        assert_eq!(b.record(n(1, None), true, true), None);
        assert_eq!(b.record(n(2, Some(1)), true, false), None);
        assert_eq!(b.record(n(3, Some(2)), true, true), None);
        assert_eq!(b.record(n(4, Some(3)), true, false), None);
        // A second prompt under 2: the branch rooted at 3 is abandoned.
        assert_eq!(b.record(n(5, Some(2)), true, true), Some(3));
        assert!(b.is_under(4, 3));
        assert!(!b.is_under(5, 3));
        assert!(!b.is_under(2, 3));
    }

    #[test]
    fn memory_is_bounded_by_the_horizon() {
        let mut b = Branches::default();
        for i in 1..(3 * HORIZON as u64) {
            b.record(n(i, Some(i - 1)), true, false);
        }
        // The horizon's lines, plus the root's parent, known only as a parent.
        assert!(b.nodes.len() <= HORIZON + 1);
        // Recent history is still known: a rewind within the horizon is recognised.
        let last = 3 * HORIZON as u64 - 1;
        assert_eq!(b.record(n(last + 1, Some(last - 10)), true, true), Some(last - 9));
    }

    /// The tree as it was first written: two tables, parent by line and conversation child by
    /// parent. The one-table tree must answer exactly as it did.
    #[derive(Default)]
    struct TwoTables {
        parent: std::collections::HashMap<u64, u64>,
        conversation_child: std::collections::HashMap<u64, u64>,
        order: std::collections::VecDeque<u64>,
    }

    impl TwoTables {
        fn record(&mut self, node: Node, conversation: bool, prompt: bool, horizon: usize) -> Option<u64> {
            let parent = node.parent?;
            if self.parent.insert(node.id, parent).is_none() {
                self.order.push_back(node.id);
                if self.order.len() > horizon {
                    let old = self.order.pop_front().unwrap();
                    self.parent.remove(&old);
                    self.conversation_child.remove(&old);
                }
            }
            if !conversation {
                return None;
            }
            match self.conversation_child.get(&parent) {
                Some(&child) if child != node.id => prompt.then_some(child),
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
        fn one_table_answers_as_two_did(steps in proptest::collection::vec((1u64..24, proptest::num::u64::ANY, proptest::bool::ANY, proptest::bool::ANY, proptest::bool::ANY), 0..200), horizon in 1usize..12) {
            let mut new = Branches { horizon, ..Branches::default() };
            let mut old = TwoTables::default();
            // Parents below their lines: repeated ids and roots, but no cycles (a walk round a
            // cycle is cut at a million steps, too slow to try here thousands of times).
            let steps = steps.into_iter().map(|(id, p, root, c, pr)| (id, (!root).then_some(p % id), c, pr));
            for (id, parent, conversation, prompt) in steps {
                let node = n(id, parent);
                proptest::prop_assert_eq!(new.record(node, conversation, prompt), old.record(node, conversation, prompt, horizon));
                for a in 0..24 {
                    proptest::prop_assert_eq!(new.is_under(id, a), old.is_under(id, a));
                    proptest::prop_assert_eq!(new.is_under(a, id), old.is_under(a, id));
                }
            }
        }
    }

    #[test]
    fn tool_result_beside_next_block_is_not_a_rewind() {
        let mut b = Branches::default();
        b.record(n(1, None), true, true);
        b.record(n(2, Some(1)), true, false); // tool_use line
        b.record(n(3, Some(2)), true, false); // next line of the same message
        assert_eq!(b.record(n(4, Some(2)), true, false), None); // its tool_result
    }
}
