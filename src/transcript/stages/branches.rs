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
//! hash-map entries each, 64-bit hashes, no strings), so a rewind to a point further back than
//! that is not recognised (its prompt is read as an ordinary one). Check's memory stays flat in
//! the size of the file.

use crate::transcript::model::Node;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The keys are already 64-bit hashes of uuids: hashing them again would only cost time.
#[derive(Default)]
struct Identity(u64);

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

type Map = HashMap<u64, u64, BuildHasherDefault<Identity>>;

/// Upper bound on the parent walk, against cycles in corrupted files.
const MAX_WALK: usize = 1 << 20;

/// Lines with a uuid the tree remembers: rewinds to within this many lines are recognised.
pub const HORIZON: usize = 1 << 16;

/// The tree, fed in file order.
#[derive(Debug, Default)]
pub struct Branches {
    parent: Map,
    conversation_child: Map,
    /// Lines recorded, oldest first, to forget beyond the horizon.
    order: std::collections::VecDeque<u64>,
}

impl Branches {
    /// Records a line. Returns the root of the branch it abandons, when the line is a prompt
    /// that rewinds to a parent that already has a conversation child.
    pub fn record(&mut self, node: Node, conversation: bool, prompt: bool) -> Option<u64> {
        let parent = node.parent?;
        if self.parent.insert(node.id, parent).is_none() {
            self.order.push_back(node.id);
            if self.order.len() > HORIZON {
                let old = self.order.pop_front().expect("non-empty");
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
            // The new branch is now the parent's conversation child.
            self.conversation_child.insert(parent, node.id);
        })
    }

    /// Whether `node` is `root` or lies under it.
    pub fn is_under(&self, node: u64, root: u64) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn n(id: u64, parent: Option<u64>) -> Node {
        Node { id, parent }
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
        assert!(b.parent.len() <= HORIZON && b.conversation_child.len() <= HORIZON);
        // Recent history is still known: a rewind within the horizon is recognised.
        let last = 3 * HORIZON as u64 - 1;
        assert_eq!(b.record(n(last + 1, Some(last - 10)), true, true), Some(last - 9));
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
