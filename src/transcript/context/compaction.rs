//! The Claude Code compaction cut (`SessionReader::load_transcript`, docs/requirements.md): resuming needs only what follows
//! the last `compact_boundary`.
//!
//! When Claude Code compacts a session it appends a `system` record with
//! `subtype: "compact_boundary"` (its `parentUuid` is null: the chain restarts there) and then a
//! user message with `isCompactSummary: true` that summarises everything before. The model is
//! never sent anything before the last boundary again, so a resume, or `transcriptd context`,
//! needs only the lines after it, summary first. Fed lines newest first by a reverse-paged reader,
//! this stage keeps them until it meets the boundary and then says [`Progress::Complete`], which
//! makes the read O(post-compaction) instead of O(file).
//!
//! Calling order: [`CompactionCut::push`] lines newest first until it returns
//! [`Progress::Complete`] or the start of the file is reached, then [`CompactionCut::finish`].

use crate::transcript::progress::Progress;
use crate::transcript::reverse::SourceLine;

/// The lines after the last compaction, and where that compaction was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut<L = SourceLine> {
    /// The last `compact_boundary` line, or `None` when the file has none (then `lines` is the
    /// whole file).
    pub boundary: Option<L>,
    /// The lines after the boundary, oldest first; the boundary itself is not among them.
    pub lines: Vec<L>,
}

/// Keeps lines, newest first, until the last compaction. See the module docs. A line is a
/// [`SourceLine`], or whatever the caller keeps with it (what it read from the line).
#[derive(Debug)]
pub struct CompactionCut<L = SourceLine> {
    newest_first: Vec<L>,
    boundary: Option<L>,
}

impl<L> Default for CompactionCut<L> {
    fn default() -> Self {
        CompactionCut { newest_first: Vec::new(), boundary: None }
    }
}

impl<L> CompactionCut<L> {
    /// A cut that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the next older line; `is_boundary` when it is a `compact_boundary` record. Returns
    /// [`Progress::Complete`] at the boundary: nothing older is needed.
    pub fn push(&mut self, line: L, is_boundary: bool) -> Progress {
        if self.boundary.is_some() {
            return Progress::Complete;
        }
        if is_boundary {
            self.boundary = Some(line);
            return Progress::Complete;
        }
        self.newest_first.push(line);
        Progress::NeedMore
    }

    /// Whether the boundary was found.
    pub fn is_bounded(&self) -> bool {
        self.boundary.is_some()
    }

    /// The lines after the boundary (or all of them), oldest first.
    pub fn finish(self) -> Cut<L> {
        let mut lines = self.newest_first;
        lines.reverse();
        Cut { boundary: self.boundary, lines }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_what_follows_the_newest_boundary() {
        let mut c: CompactionCut = CompactionCut::new();
        let l = |o: u64| SourceLine::new(o, format!("line at {o}").as_bytes());
        assert_eq!(c.push(l(30), false), Progress::NeedMore);
        assert_eq!(c.push(l(20), false), Progress::NeedMore);
        assert_eq!(c.push(l(10), true), Progress::Complete);
        assert_eq!(c.push(l(0), true), Progress::Complete, "an older boundary changes nothing");
        let cut = c.finish();
        assert_eq!(cut.boundary.map(|b| b.offset), Some(10));
        assert_eq!(cut.lines.iter().map(|l| l.offset).collect::<Vec<_>>(), vec![20, 30]);
    }

    #[test]
    fn without_a_boundary_everything_is_context() {
        let mut c: CompactionCut = CompactionCut::new();
        for o in [2u64, 1, 0] {
            assert_eq!(c.push(SourceLine::new(o, b"x"), false), Progress::NeedMore);
        }
        let cut = c.finish();
        assert!(cut.boundary.is_none());
        assert_eq!(cut.lines.len(), 3);
    }
}
