//! One transcript line by its `uuid` (`SessionReader::load_transcript_indexed`, docs/requirements.md): Claude Code gives
//! every line a uuid, and other lines, tools and users refer to lines by it.
//!
//! The index keeps where each line is (number, offset, length), not the line itself, so that
//! it stays small for transcripts of hundreds of megabytes; a line is read back by offset when
//! asked for. If a uuid occurs on several lines (a copied file, a bad merge) the first is kept.

use super::lines::{for_each_line, top_level_string};
use super::Error;
use std::collections::HashMap;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Where a line is in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// 1-based physical line number.
    pub line: u64,
    /// Byte offset of its first byte.
    pub offset: u64,
    /// Its length, without the line terminator.
    pub len: usize,
}

/// uuid → line, for one transcript.
#[derive(Debug, Clone)]
pub struct UuidIndex {
    path: PathBuf,
    spans: HashMap<String, Span>,
}

impl UuidIndex {
    /// Indexes every complete line of `path` with a top-level string `uuid`, in one pass.
    pub fn build(path: &Path) -> io::Result<Self> {
        let mut spans = HashMap::new();
        for_each_line(path, |l| {
            if let Some(uuid) = top_level_string(l.bytes, "uuid") {
                spans.entry(uuid.into_owned()).or_insert(Span { line: l.number, offset: l.offset, len: l.bytes.len() });
            }
            Ok(())
        })?;
        Ok(UuidIndex { path: path.to_path_buf(), spans })
    }

    /// Where the line with `uuid` is.
    pub fn get(&self, uuid: &str) -> Option<Span> {
        self.spans.get(uuid).copied()
    }

    /// Number of uuids indexed.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether no line has a uuid.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The line with `uuid`, read back from the file: [`Error::UuidNotFound`] when no line has
    /// it.
    pub fn entry(&self, uuid: &str) -> Result<(Span, Vec<u8>), Error> {
        let span = self.get(uuid).ok_or_else(|| Error::UuidNotFound { path: self.path.clone(), uuid: uuid.to_owned() })?;
        let bytes = read_span(&self.path, span).map_err(|e| Error::io(&self.path, e))?;
        Ok((span, bytes))
    }
}

/// The bytes of `span` in `path`.
pub fn read_span(path: &Path, span: Span) -> io::Result<Vec<u8>> {
    let mut f = crate::sources::regular::open_file(path)?;
    f.seek(SeekFrom::Start(span.offset))?;
    let mut buf = vec![0u8; span.len];
    f.read_exact(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_lines_by_uuid_and_reads_them_back() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.jsonl");
        let body = "{\"type\":\"summary\"}\r\n{\"uuid\":\"u1\",\"n\":1}\n\n{\"uuid\":\"u2\",\"x\":{\"uuid\":\"inner\"}}\n{\"uuid\":\"u1\",\"n\":2}\n";
        std::fs::write(&p, body).unwrap();
        let idx = UuidIndex::build(&p).unwrap();
        assert_eq!(idx.len(), 2);
        assert_eq!(idx.get("inner"), None);
        let (span, bytes) = idx.entry("u2").unwrap();
        assert_eq!(span.line, 4);
        assert_eq!(bytes, br#"{"uuid":"u2","x":{"uuid":"inner"}}"#);
        // The first line with a uuid wins.
        assert_eq!(idx.entry("u1").unwrap().1, br#"{"uuid":"u1","n":1}"#);
        let err = idx.entry("nope").unwrap_err();
        assert!(matches!(err, Error::UuidNotFound { .. }));
        assert!(err.to_string().contains("t.jsonl") && err.to_string().contains("nope"), "{err}");
    }
}
