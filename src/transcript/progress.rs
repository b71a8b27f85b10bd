//! The named outcome of feeding a stage one more item.
//!
//! Stages that can stop early (the compaction cuts read a file backwards and are done once they
//! reach the boundary) say so with [`Progress`] rather than a bare `bool`, so a caller cannot
//! mistake "stop" for "error" or ignore it by accident.

/// Whether a stage wants more input.
#[must_use = "a stage that is Complete must not be fed more; stop reading and call finish"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Feed the next item (for a reverse scan: the next older one).
    NeedMore,
    /// The stage has what it needs; stop reading and call its `finish`.
    Complete,
}

impl Progress {
    /// Whether the stage is done.
    pub fn is_complete(self) -> bool {
        self == Progress::Complete
    }
}
