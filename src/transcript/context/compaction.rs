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
//! A boundary that *preserves* messages (Claude Code 2.1.x's partial compaction:
//! `compactMetadata.preservedMessages` lists their uuids, `preservedSegment` names the first
//! and the last) is different: the agent keeps those messages, which lie before the boundary in
//! the file, and relinks them under the summary ([`Preserved`]). Told so with
//! [`CompactionCut::want`], the cut reads on past the boundary until it holds every line they
//! need ([`CompactionCut::push_older`]), or the start of the file.
//!
//! Calling order: [`CompactionCut::push`] lines newest first until it returns
//! [`Progress::Complete`] or the start of the file is reached, then [`CompactionCut::finish`].

use crate::transcript::model::id_hash;
use crate::transcript::progress::Progress;
use crate::transcript::reverse::SourceLine;
use serde_json::Value;
use std::collections::HashSet;

/// What a `compact_boundary` keeps of the messages before it (its `compactMetadata`), as Claude
/// Code 2.1.332 reads it (`wRr` in its bundle): the list when there is one, else the segment,
/// walked from its last message up the parents to its first. Ids as [`id_hash`]es.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preserved {
    /// `preservedMessages`.
    List {
        /// `anchorUuid`: the line they hang under (the summary).
        anchor: u64,
        /// `uuids`, in order.
        uuids: Vec<u64>,
    },
    /// `preservedSegment`, when there is no list.
    Segment {
        /// `anchorUuid`.
        anchor: u64,
        /// `headUuid`: the first message kept.
        head: u64,
        /// `tailUuid`: the last.
        tail: u64,
    },
}

impl Preserved {
    /// Reads a boundary line's `compactMetadata`; `None` when it preserves nothing.
    pub fn of(boundary: &[u8]) -> Option<Preserved> {
        let v: Value = serde_json::from_slice(boundary).ok()?;
        let meta = v.get("compactMetadata")?;
        let id = |v: Option<&Value>| v.and_then(Value::as_str).map(id_hash);
        if let Some(m) = meta.get("preservedMessages").filter(|m| m.is_object()) {
            let uuids: Vec<u64> = m.get("uuids")?.as_array()?.iter().map(|u| u.as_str().map(id_hash)).collect::<Option<_>>()?;
            return (!uuids.is_empty()).then_some(Preserved::List { anchor: id(m.get("anchorUuid"))?, uuids });
        }
        let s = meta.get("preservedSegment")?;
        Some(Preserved::Segment { anchor: id(s.get("anchorUuid"))?, head: id(s.get("headUuid"))?, tail: id(s.get("tailUuid"))? })
    }

    /// The uuid the cut must have seen before it can stop (the list's all, the segment's first).
    fn needs(&self) -> HashSet<u64> {
        match self {
            Preserved::List { uuids, .. } => uuids.iter().copied().collect(),
            Preserved::Segment { head, .. } => HashSet::from([*head]),
        }
    }

    /// The line the preserved messages hang under.
    pub fn anchor(&self) -> u64 {
        match self {
            Preserved::List { anchor, .. } | Preserved::Segment { anchor, .. } => *anchor,
        }
    }
}

/// The lines after the last compaction, and where that compaction was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut<L = SourceLine> {
    /// The last `compact_boundary` line, or `None` when the file has none (then `lines` is the
    /// whole file).
    pub boundary: Option<L>,
    /// The lines after the boundary, oldest first; the boundary itself is not among them.
    pub lines: Vec<L>,
    /// When the boundary preserves messages: what it says, and the lines read before it (oldest
    /// first) until every line it needs was seen.
    pub preserved: Option<(Preserved, Vec<L>)>,
}

/// Keeps lines, newest first, until the last compaction. See the module docs. A line is a
/// [`SourceLine`], or whatever the caller keeps with it (what it read from the line).
#[derive(Debug)]
pub struct CompactionCut<L = SourceLine> {
    newest_first: Vec<L>,
    boundary: Option<L>,
    /// [`CompactionCut::want`]: what the boundary preserves, the uuids still to see, and the
    /// older lines read so far (newest first).
    preserved: Option<(Preserved, HashSet<u64>, Vec<L>)>,
}

impl<L> Default for CompactionCut<L> {
    fn default() -> Self {
        CompactionCut { newest_first: Vec::new(), boundary: None, preserved: None }
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

    /// The boundary just pushed preserves messages: the cut reads on ([`CompactionCut::push_older`])
    /// for those of them not among the lines after the boundary (`uuid` reads a line's).
    pub fn want(&mut self, preserved: Preserved, uuid: impl Fn(&L) -> Option<u64>) {
        let mut needs = preserved.needs();
        for l in &self.newest_first {
            if let Some(u) = uuid(l) {
                needs.remove(&u);
            }
        }
        self.preserved = Some((preserved, needs, Vec::new()));
    }

    /// Whether the cut is reading on past its boundary for the lines it preserves.
    pub fn wants_older(&self) -> bool {
        self.preserved.as_ref().is_some_and(|(_, needs, _)| !needs.is_empty())
    }

    /// Adds the next line older than the boundary, with its `uuid` hash; [`Progress::Complete`]
    /// once every line the boundary needs was seen.
    pub fn push_older(&mut self, line: L, uuid: Option<u64>) -> Progress {
        let Some((_, needs, older)) = self.preserved.as_mut().filter(|(_, needs, _)| !needs.is_empty()) else { return Progress::Complete };
        if let Some(u) = uuid {
            needs.remove(&u);
        }
        older.push(line);
        if needs.is_empty() {
            Progress::Complete
        } else {
            Progress::NeedMore
        }
    }

    /// The lines after the boundary (or all of them), oldest first.
    pub fn finish(self) -> Cut<L> {
        let mut lines = self.newest_first;
        lines.reverse();
        let preserved = self.preserved.map(|(p, _, mut older)| {
            older.reverse();
            (p, older)
        });
        Cut { boundary: self.boundary, lines, preserved }
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
    fn a_boundary_that_preserves_messages_reads_on_until_it_has_them() {
        let boundary = br#"{"type":"system","subtype":"compact_boundary","uuid":"b","parentUuid":null,"compactMetadata":{"preservedSegment":{"headUuid":"m1","anchorUuid":"s","tailUuid":"m2"},"preservedMessages":{"anchorUuid":"s","uuids":["m1","m2"]}}}"#;
        let p = Preserved::of(boundary).expect("it preserves two messages");
        assert_eq!(p, Preserved::List { anchor: id_hash("s"), uuids: vec![id_hash("m1"), id_hash("m2")] });
        let segment = br#"{"compactMetadata":{"preservedSegment":{"headUuid":"m1","anchorUuid":"s","tailUuid":"m2"}}}"#;
        assert_eq!(Preserved::of(segment), Some(Preserved::Segment { anchor: id_hash("s"), head: id_hash("m1"), tail: id_hash("m2") }));
        assert_eq!(Preserved::of(br#"{"compactMetadata":{"trigger":"auto"}}"#), None, "a plain boundary preserves nothing");
        let mut c: CompactionCut = CompactionCut::new();
        let l = |o: u64| SourceLine::new(o, format!("line at {o}").as_bytes());
        assert_eq!(c.push(l(40), false), Progress::NeedMore);
        assert_eq!(c.push(l(30), true), Progress::Complete);
        c.want(p, |_| None);
        assert!(c.wants_older());
        assert_eq!(c.push_older(l(20), Some(id_hash("m2"))), Progress::NeedMore);
        assert_eq!(c.push_older(l(15), Some(id_hash("x"))), Progress::NeedMore);
        assert_eq!(c.push_older(l(10), Some(id_hash("m1"))), Progress::Complete, "both seen");
        assert!(!c.wants_older());
        let cut = c.finish();
        assert_eq!(cut.lines.iter().map(|l| l.offset).collect::<Vec<_>>(), vec![40]);
        let (_, older) = cut.preserved.expect("preserved");
        assert_eq!(older.iter().map(|l| l.offset).collect::<Vec<_>>(), vec![10, 15, 20], "oldest first");
    }

    #[test]
    fn a_preserved_message_after_the_boundary_is_not_looked_for_before_it() {
        let mut c: CompactionCut<(SourceLine, u64)> = CompactionCut::new();
        assert_eq!(c.push((SourceLine::new(40, b"m2"), id_hash("m2")), false), Progress::NeedMore);
        assert_eq!(c.push((SourceLine::new(30, b"b"), 0), true), Progress::Complete);
        c.want(Preserved::List { anchor: id_hash("s"), uuids: vec![id_hash("m2")] }, |(_, u)| Some(*u));
        assert!(!c.wants_older(), "m2 follows the boundary: nothing older is read");
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
