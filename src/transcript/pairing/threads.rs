//! Conversation threads of a Claude Code file: the file is a forest, not one conversation.
//!
//! Claude Code 1.0.x writes each `Task` subagent's records into the *main* session file: a
//! subagent's thread starts with a record `isSidechain: true, parentUuid: null` (its prompt), its
//! records sit between the parent's `tool_use` lines and their `tool_result`s, and the parent's
//! results arrive later, each chained by `parentUuid` to the previous line of the main thread.
//! Parallel subagents interleave. Claude Code 2.x writes subagents to files of their own
//! (`<session>/subagents/agent-*.jsonl`, or `agent-*.jsonl` beside the session), every line of
//! which is `isSidechain: true`. Pairing calls with results, and judging turns, only makes sense
//! within one thread: interleaving threads is never a finding.
//!
//! The thread of a line:
//! - a line that is not `isSidechain` belongs to the main thread ([`MAIN_THREAD`]), whatever its
//!   `parentUuid` says (a `compact_boundary`'s null parent continues the main thread; a first
//!   line whose parent is outside the file, in a slice or behind `summary` records, too);
//! - a sidechain line whose `parentUuid` is null starts a thread of its own, named by the hash
//!   of its uuid;
//! - any other sidechain line belongs to its parent's thread; a parent this tracker does not
//!   know (outside the file, a main-thread line, or beyond the horizon) names the thread by its
//!   own hash, so siblings under it share one and a root beyond the horizon keeps its name.
//!
//! A line without a uuid belongs to the main thread. Other formats have one thread.
//!
//! *Invariant:* memory is bounded: only sidechain lines are remembered, the last [`HORIZON`] of
//! them (one map entry each, 64-bit hashes), so a 2.x main file costs nothing here and a
//! subagent file at most a few MiB.

use super::branches::{HashKeyed, HORIZON};
use crate::transcript::model::{Node, MAIN_THREAD};
use std::collections::VecDeque;

/// Assigns lines to threads, fed in file order. See the module docs.
#[derive(Debug)]
pub struct Threads {
    of: HashKeyed<u64>,
    order: VecDeque<u64>,
    horizon: usize,
}

impl Default for Threads {
    fn default() -> Self {
        Threads { of: HashKeyed::default(), order: VecDeque::new(), horizon: HORIZON }
    }
}

/// A thread name that is not the main thread's.
fn side(hash: u64) -> u64 {
    if hash == MAIN_THREAD {
        1
    } else {
        hash
    }
}

impl Threads {
    /// The thread of the next line, whose tree position is `node`.
    pub fn assign(&mut self, node: Option<Node>) -> u64 {
        let Some(n) = node.filter(|n| n.sidechain) else { return MAIN_THREAD };
        let thread = match n.parent {
            None => side(n.id),
            Some(p) => self.of.get(&p).copied().unwrap_or_else(|| side(p)),
        };
        if self.of.insert(n.id, thread).is_none() {
            self.order.push_back(n.id);
            if self.order.len() > self.horizon {
                let old = self.order.pop_front().expect("non-empty");
                self.of.remove(&old);
            }
        }
        thread
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side_line(id: u64, parent: Option<u64>) -> Option<Node> {
        Some(Node { id, parent, sidechain: true })
    }

    #[test]
    fn main_lines_are_one_thread_whatever_their_parent() {
        let mut t = Threads::default();
        assert_eq!(t.assign(Some(Node { id: 1, parent: None, sidechain: false })), MAIN_THREAD);
        assert_eq!(t.assign(Some(Node { id: 2, parent: Some(99), sidechain: false })), MAIN_THREAD);
        assert_eq!(t.assign(None), MAIN_THREAD);
        assert!(t.of.is_empty(), "main lines are not remembered");
    }

    #[test]
    fn sidechains_follow_their_roots_and_interleave() {
        let mut t = Threads::default();
        let a = t.assign(side_line(10, None));
        let b = t.assign(side_line(20, None));
        assert_ne!(a, b);
        assert_ne!(a, MAIN_THREAD);
        assert_eq!(t.assign(side_line(11, Some(10))), a);
        assert_eq!(t.assign(side_line(21, Some(20))), b);
        assert_eq!(t.assign(side_line(12, Some(11))), a);
        // A parent outside the file: siblings under it share a thread.
        let c = t.assign(side_line(30, Some(777)));
        assert_eq!(t.assign(side_line(31, Some(777))), c);
        assert_eq!(t.assign(side_line(32, Some(30))), c);
        assert_ne!(c, a);
    }

    #[test]
    fn memory_is_bounded_and_a_far_root_keeps_its_name() {
        let mut t = Threads { horizon: 8, ..Threads::default() };
        let root = t.assign(side_line(1000, None));
        for i in 1..100 {
            t.assign(side_line(2000 + i, Some(2000 + i - 1)));
        }
        assert!(t.of.len() <= 8);
        // The root was forgotten, but a late child of it still lands in its thread.
        assert_eq!(t.assign(side_line(1001, Some(1000))), root);
    }
}
