//! What a listing shows about each session, and the order it shows them in.
//!
//! Most recently active first (`SessionReader::list_sessions_sorted_by_updated_at`, docs/requirements.md): by the meta
//! sidecar's `updated_at`; for sessions without one (Claude Code, Codex), by the last timestamp
//! in the transcript, read from its tail ([`super::tail`]), or else the file's modification
//! time. Ties are broken by the transcript's modification time (newest first), then by id. A
//! session whose meta cannot be read is left out: it is being created or is corrupt.
//!
//! Subagent transcripts are not sessions of their own: they are counted in their session's row.
//! Claude Code keeps them in `<session-id>/subagents/`, or (older versions) as `agent-*.jsonl`
//! beside the session, which only the `sessionId` on their first lines ties to it; an old-style
//! subagent whose session is not in the same directory keeps a row of its own, so no
//! transcript disappears from the listing.

use super::layout::{Layout, Session};
use super::lines::top_level_string;
use super::meta::load_meta;
use super::tail::{last_timestamp, last_timestamp_in};
use super::timestamp::Timestamp;
use super::Error;
use crate::sources::batch::{read_chunks, Input};
use crate::transcript::formats::{Detector, Format};
use rayon::prelude::*;
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// Where a row's `updated` time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UpdatedFrom {
    /// The meta sidecar's `updated_at`.
    Meta,
    /// The last timestamp in the transcript.
    Transcript,
    /// The transcript's modification time.
    Mtime,
}

/// One row of `sessions list`.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Session id.
    pub id: String,
    /// Detected transcript format; absent when the first lines do not tell.
    pub format: Option<Format>,
    /// How the session is kept.
    pub layout: Layout,
    /// The transcript.
    pub path: PathBuf,
    /// When the session was last active.
    pub updated: Timestamp,
    /// Where `updated` comes from.
    pub updated_from: UpdatedFrom,
    /// Newline-terminated lines (as `wc -l` counts them).
    pub lines: u64,
    /// Transcript size in bytes.
    pub size: u64,
    /// Subagent transcripts.
    pub subagents: usize,
    /// The meta sidecar, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<PathBuf>,
    /// The transcript's modification time (the first tie-breaker).
    #[serde(skip)]
    pub mtime: Timestamp,
    /// For an old-style `agent-*.jsonl` subagent: the `sessionId` it belongs to.
    #[serde(skip)]
    pub parent: Option<String>,
}

/// Listing order: `updated` newest first, then transcript mtime newest first, then id, then
/// path (two roots may hold one id). Pure.
pub fn order(a: &Row, b: &Row) -> Ordering {
    b.updated.cmp(&a.updated).then(b.mtime.cmp(&a.mtime)).then_with(|| a.id.cmp(&b.id)).then_with(|| a.path.cmp(&b.path))
}

/// Bytes from the start of a file used to detect its format and find its `sessionId`.
pub const HEAD_BYTES: usize = 1 << 20;

/// The format of a transcript from its first bytes: the complete lines among them are shown to
/// the core's [`Detector`]. Pure.
pub fn detect_format(head: &[u8]) -> Option<Format> {
    let mut d = Detector::new();
    for line in crate::transcript::lines::lines(1, 0, head) {
        if !d.wants_more() {
            break;
        }
        d.observe(line.bytes);
    }
    d.format()
}

/// The top-level `sessionId` on the first complete lines of `head` that have one (how an
/// old-style Claude Code subagent file names its session). Pure.
pub fn session_id_in(head: &[u8]) -> Option<String> {
    crate::transcript::lines::lines(1, 0, head).take(16).find_map(|line| top_level_string(line.bytes, "sessionId")).map(|s| s.into_owned())
}

/// What one read of a transcript gives: its line count and first bytes. `buf` is the read
/// buffer, reused across files (zeroing a fresh one per file costs more than reading a small
/// transcript).
fn read_transcript(path: &Path, buf: &mut Vec<u8>) -> Result<(u64, Vec<u8>), Error> {
    let mut lines = 0u64;
    let mut head = Vec::new();
    read_chunks(&Input::File(path.to_path_buf()), buf, |chunk| {
        lines += memchr::memchr_iter(b'\n', chunk).count() as u64;
        if head.len() < HEAD_BYTES {
            head.extend_from_slice(&chunk[..chunk.len().min(HEAD_BYTES - head.len())]);
        }
        true
    })
    .map_err(|e| Error::io(path, e))?;
    Ok((lines, head))
}

/// Size of the read buffer of [`rows`].
const READ_BUF: usize = 256 << 10;

/// The row of one session, without its old-style subagents (see [`rows`]). A meta sidecar that
/// cannot be loaded is an error, as is a transcript that cannot be read.
pub fn row(s: &Session) -> Result<Row, Error> {
    row_with(s, &mut Vec::with_capacity(READ_BUF))
}

/// [`row`] with a read buffer to reuse.
fn row_with(s: &Session, buf: &mut Vec<u8>) -> Result<Row, Error> {
    let meta = s.meta.as_deref().map(load_meta).transpose()?;
    let fs_meta = std::fs::metadata(&s.transcript).map_err(|e| Error::io(&s.transcript, e))?;
    let mtime = fs_meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(Timestamp::from_unix(0, 0), |d| Timestamp::from_unix(d.as_secs() as i64, d.subsec_nanos()));
    let (lines, head) = read_transcript(&s.transcript, buf)?;
    let (updated, updated_from) = match meta.as_ref().and_then(|m| m.updated()) {
        Some(t) => (t, UpdatedFrom::Meta),
        None => match last_updated(&s.transcript, &head).map_err(|e| Error::io(&s.transcript, e))? {
            Some(t) => (t, UpdatedFrom::Transcript),
            None => (mtime, UpdatedFrom::Mtime),
        },
    };
    let old_style_subagent = s.layout == Layout::File && s.id.starts_with("agent-");
    Ok(Row {
        id: s.id.clone(),
        format: detect_format(&head),
        layout: s.layout,
        path: s.transcript.clone(),
        updated,
        updated_from,
        lines,
        size: fs_meta.len(),
        subagents: s.companion.as_deref().map_or(0, count_subagents),
        meta: s.meta.clone(),
        mtime,
        parent: if old_style_subagent { session_id_in(&head) } else { None },
    })
}

/// The last timestamp of a transcript whose first bytes are `head`: searched in `head` when it
/// holds the whole file (most transcripts are small), else in the file's tail.
fn last_updated(path: &Path, head: &[u8]) -> std::io::Result<Option<Timestamp>> {
    if head.len() < HEAD_BYTES {
        return last_timestamp_in(&mut { head });
    }
    last_timestamp(path)
}

/// Transcripts in `<companion>/subagents/`, sorted.
fn companion_subagents(companion: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(companion.join("subagents"))
        .map(|rd| rd.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl")).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn count_subagents(companion: &Path) -> usize {
    companion_subagents(companion).len()
}

/// The first [`HEAD_BYTES`] of a file.
pub fn read_head(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut head = Vec::new();
    crate::sources::regular::open_file(path)?.take(HEAD_BYTES as u64).read_to_end(&mut head)?;
    Ok(head)
}

/// Every subagent transcript of one session, sorted: those in its companion directory and, for
/// a Claude Code session, the old-style `agent-*.jsonl` beside it whose `sessionId` is its id.
/// (A listing finds the old-style ones with one read per agent file instead; see [`rows`].)
pub fn subagents_of(s: &Session) -> Vec<PathBuf> {
    let mut v = s.companion.as_deref().map(companion_subagents).unwrap_or_default();
    if s.layout == Layout::File {
        let dir = parent_dir(&s.transcript);
        let siblings = std::fs::read_dir(&dir).map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).collect::<Vec<_>>()).unwrap_or_default();
        for p in siblings {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if p != s.transcript
                && name.starts_with("agent-")
                && name.ends_with(".jsonl")
                && read_head(&p).ok().and_then(|h| session_id_in(&h)).as_deref() == Some(s.id.as_str())
            {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

/// The listing of `sessions`, in [`order`], read in parallel. Old-style subagents are folded
/// into their session's row. Returns the rows and the sessions left out, with why: a meta
/// sidecar that cannot be loaded (the seed's "silently excluded"; the caller decides whether to
/// say so), or a transcript that cannot be read.
pub fn rows(sessions: &[Session]) -> (Vec<Row>, Vec<(Session, Error)>) {
    let results: Vec<Result<Row, Error>> = sessions.par_iter().map_init(|| Vec::with_capacity(READ_BUF), |buf, s| row_with(s, buf)).collect();
    let mut rows = Vec::with_capacity(results.len());
    let mut left_out = Vec::new();
    for (s, r) in sessions.iter().zip(results) {
        match r {
            Ok(row) => rows.push(row),
            Err(e) => left_out.push((s.clone(), e)),
        }
    }
    let rows = fold_old_style_subagents(rows);
    (sort(rows), left_out)
}

/// Sorts rows in listing [`order`].
pub fn sort(mut rows: Vec<Row>) -> Vec<Row> {
    rows.sort_by(order);
    rows
}

/// Counts each `agent-*.jsonl` row whose `sessionId` names a session in the same directory as
/// that session's subagent, and drops its row.
fn fold_old_style_subagents(mut rows: Vec<Row>) -> Vec<Row> {
    let index: HashMap<(PathBuf, String), usize> =
        rows.iter().enumerate().filter(|(_, r)| r.layout == Layout::File).map(|(i, r)| ((parent_dir(&r.path), r.id.clone()), i)).collect();
    let mut folded = vec![false; rows.len()];
    for i in 0..rows.len() {
        let Some(parent) = rows[i].parent.clone() else { continue };
        if let Some(&p) = index.get(&(parent_dir(&rows[i].path), parent)) {
            if p != i {
                rows[p].subagents += 1;
                folded[i] = true;
            }
        }
    }
    rows.into_iter().zip(folded).filter(|(_, f)| !f).map(|(r, _)| r).collect()
}

fn parent_dir(p: &Path) -> PathBuf {
    p.parent().map(Path::to_path_buf).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, updated: i64, mtime: i64) -> Row {
        Row {
            id: id.to_owned(),
            format: None,
            layout: Layout::File,
            path: PathBuf::from(format!("/p/{id}.jsonl")),
            updated: Timestamp::from_unix(updated, 0),
            updated_from: UpdatedFrom::Meta,
            lines: 0,
            size: 0,
            subagents: 0,
            meta: None,
            mtime: Timestamp::from_unix(mtime, 0),
            parent: None,
        }
    }

    #[test]
    fn newest_first_then_mtime_then_id() {
        let rows = sort(vec![row("b", 10, 1), row("a", 10, 1), row("c", 10, 2), row("d", 11, 0), row("e", 9, 9)]);
        let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["d", "c", "a", "b", "e"]);
    }

    #[test]
    fn detects_format_and_session_id_from_the_head() {
        let head = b"{\"type\":\"file-history-snapshot\",\"messageId\":\"m\"}\n{\"type\":\"user\",\"sessionId\":\"s-1\",\"uuid\":\"u\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n{\"cut";
        assert_eq!(detect_format(head), Some(Format::ClaudeCode));
        assert_eq!(session_id_in(head), Some("s-1".to_owned()));
        assert_eq!(detect_format(b"{\"role\":\"user\",\"content\":\"x\"}\n"), Some(Format::OpenAiChat));
        assert_eq!(detect_format(b"{\"role\":\"user\""), None);
        assert_eq!(session_id_in(b"{\"role\":\"user\"}\n"), None);
    }

    #[test]
    fn old_style_subagents_fold_into_their_session_in_the_same_directory() {
        let mut agent = row("agent-1", 20, 0);
        agent.parent = Some("s".into());
        let mut stray = row("agent-2", 5, 0);
        stray.parent = Some("elsewhere".into());
        let rows = sort(fold_old_style_subagents(vec![row("s", 10, 0), agent, stray]));
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].id.as_str(), rows[0].subagents), ("s", 1));
        assert_eq!(rows[1].id, "agent-2");
    }
}
