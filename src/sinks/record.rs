//! The daemon's output records, what its sinks are given: one JSON object per line, with a
//! `type`.
//!
//! | type | when | fields besides `type`, `time`, `file` |
//! |---|---|---|
//! | `finding` | a finding, as soon as its line is read | `format`, `line`, `kind`, `severity`, `call_id`, `tool`, `message` (those of `check --output json`) |
//! | `finding_demoted` | a rewind put an earlier error on an abandoned branch | `line`, `kind`, `call_id`, `reason` |
//! | `finding_retracted` | a file grew after its tail findings (torn line, orphan calls) were reported | `line`, `kind`, `call_id`, `reason` |
//! | `file_opened` | a file is picked up (before its other records) | `format` (`unknown` until a line shows it, `events` for an event log), `offset` |
//! | `file_closed` | a file was deleted, rotated away or renamed | `reason` (`deleted`, `rotated`, `renamed`), `to` (the new name, when renamed) |
//! | `file_truncated` | a file shrank or was rewritten; it is read again from the start | |
//! | `compaction` | a compaction boundary | `format`, `line` |
//! | `repaired` | the repair stage wrote a repaired copy | `output`, `inserted`, `removed`, `modified` |
//! | `repair_planned` | the repair stage (mode `plan`) planned edits | `edits` |
//!
//! Folding the `finding` records with their demotions and retractions gives exactly what
//! `transcriptd check --output json` reports on the file as it is, where `file_truncated` and
//! `file_closed` end what was said about a file (its retractions come before them) and a
//! rename (`file_closed` with `to`) carries it over to the new name.

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
        /// Its format: `unknown` until a line shows it, `events` for an event log.
        format: String,
        /// Where reading starts.
        offset: u64,
    },
    /// A file went away.
    FileClosed {
        /// When.
        time: String,
        /// The file.
        file: String,
        /// `deleted`, `rotated` (moved to a name no source reads) or `renamed`.
        reason: String,
        /// The new name, when renamed.
        #[serde(skip_serializing_if = "Option::is_none")]
        to: Option<String>,
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

/// Every record `type`.
pub const TYPES: &[&str] =
    &["finding", "finding_demoted", "finding_retracted", "file_opened", "file_closed", "file_truncated", "compaction", "repaired", "repair_planned"];

/// Whether `line` (without its newline) is an output record: a JSON object with one of
/// [`TYPES`], a `time` and a `file`. Used to prove that what follows a checkpoint in a stdout
/// file was written by the daemon before it is cut back.
pub fn is_record_line(line: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(rename = "type")]
        ty: String,
        #[allow(dead_code)]
        time: String,
        #[allow(dead_code)]
        file: String,
    }
    line.starts_with(b"{\"type\":\"") && serde_json::from_slice::<Head>(line).is_ok_and(|h| TYPES.contains(&h.ty.as_str()))
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
        let mut v = Vec::new();
        self.write_line(&mut v);
        v
    }

    /// Appends the record as one JSON line to `out`.
    pub fn write_line(&self, out: &mut Vec<u8>) {
        serde_json::to_writer(&mut *out, self).expect("records serialize");
        out.push(b'\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_lines_are_recognised() {
        let r = Record::FileClosed { time: now(), file: "/a.jsonl".into(), reason: "renamed".into(), to: Some("/b.jsonl".into()) };
        let line = r.to_line();
        assert!(is_record_line(&line[..line.len() - 1]));
        assert!(String::from_utf8(line).unwrap().contains("\"to\":\"/b.jsonl\""));
        assert!(!is_record_line(b"a line from another program"));
        assert!(!is_record_line(b"{\"type\":\"other\",\"time\":\"t\",\"file\":\"f\"}"));
        assert!(!is_record_line(b"2026-01-01T00:00:00Z INFO transcriptd: watching"));
    }
}
