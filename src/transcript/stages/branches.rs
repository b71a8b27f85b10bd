//! The uuid tree of a Claude Code session, and the rewinds it records.
//!
//! Every Claude Code line names its parent. When the user rewinds (Esc Esc) to an earlier point,
//! Claude Code appends a new user prompt whose `parentUuid` names a line that already has a
//! conversation child: the earlier child and everything under it become an abandoned branch that
//! stays in the file but is never sent to the model again. Not every line with two children is a
//! rewind: a `tool_use` line's children are normally the next line of the same message and its own
//! `tool_result`, so only a *prompt* arriving at an occupied parent counts.
//!
//! *Invariant:* memory is two hash-map entries per line with a uuid (64-bit hashes, no strings).

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

/// The tree, fed in file order.
#[derive(Debug, Default)]
pub struct Branches {
    parent: Map,
    conversation_child: Map,
}

impl Branches {
    /// Records a line. Returns the root of the branch it abandons, when the line is a prompt
    /// that rewinds to a parent that already has a conversation child.
    pub fn record(&mut self, node: Node, conversation: bool, prompt: bool) -> Option<u64> {
        let Some(parent) = node.parent else {
            return None;
        };
        self.parent.insert(node.id, parent);
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
    fn tool_result_beside_next_block_is_not_a_rewind() {
        let mut b = Branches::default();
        b.record(n(1, None), true, true);
        b.record(n(2, Some(1)), true, false); // tool_use line
        b.record(n(3, Some(2)), true, false); // next line of the same message
        assert_eq!(b.record(n(4, Some(2)), true, false), None); // its tool_result
    }
}
