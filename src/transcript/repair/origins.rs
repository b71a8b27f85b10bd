//! Line origins: what became of each input line a rewrite changed ([`Change`]) and where each
//! output line comes from ([`Origins`]). A repair that needs a second round maps the second
//! round's lines back to the input with them.

use super::plan::Edit;
use crate::transcript::finding::Kind;
use serde::Serialize;

/// What became of an input line that is not in the output as it was. Ordered by how far the
/// line is from the output: over several rounds, the furthest counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// An edited version of the line is in the output.
    Modified,
    /// Its message was merged into an earlier line's.
    Merged,
    /// It is not in the output.
    Removed,
}

impl Action {
    /// The name in the rejects file.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Modified => "modified",
            Action::Merged => "merged",
            Action::Removed => "removed",
        }
    }
}

/// An input line the rewrite took out of the output or changed (its original went to the
/// rejects).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// The line.
    pub line: u64,
    /// What became of it.
    pub action: Action,
    /// The finding that decided it (none for a line only re-pointed to a new parent).
    pub reason: Option<Kind>,
    /// Claude Code: its `parentUuid` was re-pointed (its parent was removed, or a line was
    /// inserted before it).
    pub parent: bool,
}

/// An edit of the plan that the rewrite could not make, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// The edit.
    pub edit: Edit,
    /// Why.
    pub why: &'static str,
}

/// Where a line of the output comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// The input line, as it was.
    Same(u64),
    /// The input line, edited.
    Modified(u64),
    /// A line the repair wrote, after the input line.
    Inserted {
        /// The input line it follows.
        after: u64,
    },
}

impl Source {
    fn offset(self, by: u64) -> Source {
        match self {
            Source::Same(n) => Source::Same(n + by),
            other => other,
        }
    }
}

/// `len` output lines from `out` on, from one source: for [`Source::Same`], consecutive input
/// lines from the one it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    out: u64,
    len: u64,
    src: Source,
}

/// Where each output line of a rewrite comes from: runs, one per untouched stretch and one per
/// edited or inserted line, so its size follows the edits, not the file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origins {
    runs: Vec<Run>,
    lines: u64,
}

impl Origins {
    /// Adds `count` output lines from `src` (consecutive input lines for [`Source::Same`]).
    pub(crate) fn push(&mut self, src: Source, count: u64) {
        if count == 0 {
            return;
        }
        if let (Some(last), Source::Same(n)) = (self.runs.last_mut(), src) {
            if let Source::Same(m) = last.src {
                if m + last.len == n && last.out + last.len == self.lines + 1 {
                    last.len += count;
                    self.lines += count;
                    return;
                }
            }
        }
        self.runs.push(Run { out: self.lines + 1, len: count, src });
        self.lines += count;
    }

    /// Lines in the output.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Where output line `line` (1-based) comes from.
    pub fn of(&self, line: u64) -> Option<Source> {
        let i = self.runs.partition_point(|r| r.out <= line).checked_sub(1)?;
        let r = self.runs[i];
        (line < r.out + r.len).then(|| r.src.offset(line - r.out))
    }

    /// The input line a line of the output stands for: its own, or for an inserted line the
    /// one it follows.
    pub fn input_line(&self, line: u64) -> Option<u64> {
        self.of(line).map(|s| match s {
            Source::Same(n) | Source::Modified(n) => n,
            Source::Inserted { after } => after,
        })
    }

    /// The origins of a rewrite of this rewrite's output (`next` maps that rewrite's output to
    /// this one's), in terms of this one's input.
    pub fn then(&self, next: &Origins) -> Origins {
        let mut o = Origins::default();
        for r in &next.runs {
            match r.src {
                Source::Same(first) => {
                    let (mut at, end) = (first, first + r.len);
                    while at < end {
                        let Some(i) = self.runs.partition_point(|p| p.out <= at).checked_sub(1) else { break };
                        let p = self.runs[i];
                        let Some(take) = (p.out + p.len).min(end).checked_sub(at).filter(|&t| t > 0) else { break };
                        o.push(p.src.offset(at - p.out), take);
                        at += take;
                    }
                }
                Source::Modified(j) => o.push(
                    match self.of(j) {
                        Some(Source::Same(n) | Source::Modified(n)) => Source::Modified(n),
                        Some(ins @ Source::Inserted { .. }) => ins,
                        None => Source::Inserted { after: j },
                    },
                    1,
                ),
                Source::Inserted { after } => o.push(Source::Inserted { after: self.input_line(after).unwrap_or(after) }, 1),
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origins(parts: &[(Source, u64)]) -> Origins {
        let mut o = Origins::default();
        for &(s, n) in parts {
            o.push(s, n);
        }
        o
    }

    #[test]
    fn origins_map_output_lines_back_through_rounds() {
        // Round 1 over five lines: 2 removed, a result inserted after 3, 4 edited.
        let first = origins(&[(Source::Same(1), 1), (Source::Same(3), 1), (Source::Inserted { after: 3 }, 1), (Source::Modified(4), 1), (Source::Same(5), 1)]);
        assert_eq!(first.lines(), 5);
        let got: Vec<_> = (1..=5).map(|l| first.of(l).unwrap()).collect();
        assert_eq!(got, [Source::Same(1), Source::Same(3), Source::Inserted { after: 3 }, Source::Modified(4), Source::Same(5)]);
        assert_eq!(first.of(6), None);
        // Round 2 over that output: its line 1 removed, 2..4 kept, 5 edited.
        let second = origins(&[(Source::Same(2), 3), (Source::Modified(5), 1)]);
        let both = first.then(&second);
        let got: Vec<_> = (1..=4).map(|l| both.of(l).unwrap()).collect();
        assert_eq!(got, [Source::Same(3), Source::Inserted { after: 3 }, Source::Modified(4), Source::Modified(5)]);
        assert_eq!(both.input_line(2), Some(3), "an inserted line stands for the line it follows");
        // Consecutive lines merge into one run: the map grows with the edits, not the file.
        let plain = origins(&[(Source::Same(1), 1000), (Source::Same(1001), 5)]);
        assert_eq!(plain.runs.len(), 1);
    }
}
