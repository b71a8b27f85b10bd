//! The daemon's output records: one JSON object per line, with a `type`.
//!
//! | type | when | fields besides `type`, `time`, `file` |
//! |---|---|---|
//! | `finding` | a finding, as soon as its line is read | `format`, `line`, `kind`, `severity`, `call_id`, `tool`, `message` (those of `check --output json`) |
//! | `finding_demoted` | a rewind put an earlier error on an abandoned branch | `line`, `kind`, `call_id`, `reason` |
//! | `finding_retracted` | a file grew after its tail findings (torn line, orphan calls) were reported | `line`, `kind`, `call_id`, `reason` |
//! | `file_opened` | a file is picked up | `format`, `offset` |
//! | `file_closed` | a file was deleted or rotated away | `reason` |
//! | `file_truncated` | a file shrank or was rewritten; it is read again from the start | |
//! | `compaction` | a compaction boundary | `format`, `line` |
//! | `repaired` | the repair stage wrote a repaired copy | `output`, `inserted`, `removed`, `modified` |
//! | `repair_planned` | the repair stage (mode `plan`) planned edits | `edits` |
//!
//! Folding the `finding` records with their demotions and retractions gives exactly what
//! `transcriptd check --output json` reports on the file as it is.

use crate::transcript::{Finding, FindingFilter, Format, Kind};
use serde::Serialize;

/// One output record.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// A finding.
    Finding {
        /// When it was emitted.
        time: String,
        /// The file.
        file: String,
        /// Its format.
        #[serde(skip_serializing_if = "Option::is_none")]
        format: Option<Format>,
        /// The finding.
        #[serde(flatten)]
        finding: Finding,
    },
    /// An earlier error became a warning.
    FindingDemoted {
        /// When.
        time: String,
        /// The file.
        file: String,
        /// Which finding, and why.
        #[serde(flatten)]
        change: Change,
    },
    /// A tail finding reported earlier no longer holds: the file grew.
    FindingRetracted {
        /// When.
        time: String,
        /// The file.
        file: String,
        /// Which finding, and why.
        #[serde(flatten)]
        change: Change,
    },
    /// A file was picked up.
    FileOpened {
        /// When.
        time: String,
        /// The file.
        file: String,
        /// Its format, when known.
        #[serde(skip_serializing_if = "Option::is_none")]
        format: Option<Format>,
        /// Where reading starts.
        offset: u64,
    },
    /// A file went away.
    FileClosed {
        /// When.
        time: String,
        /// The file.
        file: String,
        /// `deleted` or `rotated`.
        reason: String,
    },
    /// A file shrank or was rewritten in place.
    FileTruncated {
        /// When.
        time: String,
        /// The file.
        file: String,
    },
    /// A compaction boundary.
    Compaction {
        /// When.
        time: String,
        /// The file.
        file: String,
        /// Its format.
        #[serde(skip_serializing_if = "Option::is_none")]
        format: Option<Format>,
        /// The boundary's line.
        line: u64,
    },
    /// A repaired copy was written.
    Repaired {
        /// When.
        time: String,
        /// The file.
        file: String,
        /// The copy.
        output: String,
        /// Lines inserted.
        inserted: u64,
        /// Lines removed.
        removed: u64,
        /// Lines changed.
        modified: u64,
    },
    /// A repair was planned (mode `plan`).
    RepairPlanned {
        /// When.
        time: String,
        /// The file.
        file: String,
        /// Number of edits.
        edits: usize,
    },
}

/// A finding reported earlier, and what changed about it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// The finding's line.
    pub line: u64,
    /// Its kind.
    pub kind: Kind,
    /// Its call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Why.
    pub reason: String,
}

/// Now, as RFC 3339 with milliseconds.
pub fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

impl Record {
    /// Whether a sink with `filter` writes it: findings it keeps, corrections (demotions,
    /// retractions) of the kinds it keeps, and every record that is no finding.
    pub fn passes(&self, filter: &FindingFilter) -> bool {
        match self {
            Record::Finding { finding, .. } => filter.keeps_finding(finding),
            Record::FindingDemoted { change, .. } | Record::FindingRetracted { change, .. } => filter.keeps_kind(change.kind),
            _ => true,
        }
    }

    /// The record as one JSON line.
    pub fn to_line(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).expect("records serialize");
        v.push(b'\n');
        v
    }
}
