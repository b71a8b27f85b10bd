//! Meta sidecars: the small JSON files some hosts keep beside a transcript (`<id>.meta.json` in
//! the flat layout, `.meta.json` in a session directory).
//!
//! Other programs write these files, so unknown fields are kept (and shown), never refused. What
//! is refused is a `schema_version` newer than this build reads: its fields may mean something
//! else now, and guessing would show wrong data. A file from before `schema_version` existed has
//! none and loads as version 0. Not found and unparseable are distinct errors, because they mean
//! different things to a caller: "no meta" is normal for some layouts, a corrupt one is not.

use super::timestamp::Timestamp;
use super::Error;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The newest `schema_version` this build understands.
pub const SUPPORTED_SCHEMA_VERSION: u64 = 1;

/// A parsed meta sidecar.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// Version of the sidecar's schema; absent in files from before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<u64>,
    /// The session's id, as the host recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The agent's id (flat layout), as the host recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// When the session was created (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// When the session was last active (RFC 3339): the listing order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// Every other field, kept as written.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

impl Meta {
    /// `updated_at` as a point in time (validated by [`parse_meta`]).
    pub fn updated(&self) -> Option<Timestamp> {
        self.updated_at.as_deref().and_then(Timestamp::parse_rfc3339)
    }
}

/// What is wrong with a sidecar's bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetaProblem {
    /// Not JSON, not an object, or a known field of the wrong type.
    #[error("{0}")]
    Invalid(String),
    /// Written by a newer schema than this build reads.
    #[error("schema_version {found} is newer than this build supports ({SUPPORTED_SCHEMA_VERSION}); upgrade transcriptd to read it")]
    TooNew {
        /// The version in the file.
        found: u64,
    },
}

/// Parses a sidecar's bytes. Pure.
pub fn parse_meta(bytes: &[u8]) -> Result<Meta, MetaProblem> {
    /// The version alone, read first: a newer schema may have changed the other fields' types,
    /// and that must be reported as "too new", not as a confusing type error.
    #[derive(Deserialize)]
    struct Version {
        #[serde(default)]
        schema_version: Option<serde_json::Value>,
    }
    let v: Version = serde_json::from_slice(bytes).map_err(|e| MetaProblem::Invalid(crate::transcript::finding::json_error_in_words(&e)))?;
    if let Some(found) = v.schema_version.as_ref().and_then(serde_json::Value::as_u64) {
        if found > SUPPORTED_SCHEMA_VERSION {
            return Err(MetaProblem::TooNew { found });
        }
    }
    let meta: Meta = serde_json::from_slice(bytes).map_err(|e| MetaProblem::Invalid(crate::transcript::finding::json_error_in_words(&e)))?;
    for (field, value) in [("created_at", &meta.created_at), ("updated_at", &meta.updated_at)] {
        if let Some(s) = value {
            if Timestamp::parse_rfc3339(s).is_none() {
                return Err(MetaProblem::Invalid(format!("`{field}` is not an RFC 3339 timestamp: {s:?}")));
            }
        }
    }
    Ok(meta)
}

/// Loads the sidecar at `path`: [`Error::MetaNotFound`] when there is no such file,
/// [`Error::MetaParse`] when it cannot be parsed, [`Error::UnsupportedSchema`] when it is too
/// new, [`Error::Io`] when it cannot be read.
pub fn load_meta(path: &Path) -> Result<Meta, Error> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Error::MetaNotFound { path: path.to_path_buf() }),
        Err(e) => return Err(Error::io(path, e)),
    };
    parse_meta(&bytes).map_err(|p| match p {
        MetaProblem::Invalid(message) => Error::MetaParse { path: path.to_path_buf(), message },
        MetaProblem::TooNew { found } => Error::UnsupportedSchema { path: path.to_path_buf(), found, supported: SUPPORTED_SCHEMA_VERSION },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_from_before_schema_version_load() {
        let m = parse_meta(br#"{"session_id":"s1","updated_at":"2026-01-01T00:00:00Z","title":"x"}"#).unwrap();
        assert_eq!(m.schema_version, None);
        assert_eq!(m.session_id.as_deref(), Some("s1"));
        assert_eq!(m.updated(), Timestamp::parse_rfc3339("2026-01-01T00:00:00Z"));
        assert_eq!(m.other["title"], "x");
        assert_eq!(parse_meta(b"{}").unwrap().updated(), None);
    }

    #[test]
    fn current_schema_loads_and_keeps_unknown_fields() {
        let m = parse_meta(br#"{"schema_version":1,"agent_id":"a","status":"done","turns":3}"#).unwrap();
        assert_eq!(m.schema_version, Some(1));
        assert_eq!(m.other.len(), 2);
        let back = serde_json::to_value(&m).unwrap();
        assert_eq!(back["status"], "done");
        assert_eq!(back["schema_version"], 1);
    }

    #[test]
    fn newer_schema_is_refused_before_its_fields_are_read() {
        assert_eq!(parse_meta(br#"{"schema_version":2}"#), Err(MetaProblem::TooNew { found: 2 }));
        // Version 2 may have changed `updated_at` into a number: still "too new".
        assert_eq!(parse_meta(br#"{"schema_version":7,"updated_at":12}"#), Err(MetaProblem::TooNew { found: 7 }));
        assert!(MetaProblem::TooNew { found: 7 }.to_string().contains("newer than this build supports (1)"));
    }

    #[test]
    fn unparseable_is_invalid() {
        for bad in [&b"{"[..], b"[]", b"not json", br#"{"schema_version":"1"}"#, br#"{"updated_at":5}"#, br#"{"updated_at":"soon"}"#, b""] {
            assert!(matches!(parse_meta(bad), Err(MetaProblem::Invalid(_))), "{}", String::from_utf8_lossy(bad));
        }
    }
}
