//! What a report knows about one transcript besides its findings: whether it is a session or a
//! subagent's transcript, the `transcriptd show` command that opens its session, and the
//! session's date.
//!
//! Ids and roots follow the session layouts of [`crate::sessions`] (names only, nothing opened):
//! `<dir>/<id>.jsonl` (Claude Code, flat), `rollout-<timestamp>-<id>.jsonl` (Codex),
//! `<workspace>/<timestamp>-<id>/transcript.jsonl` (session directories), and subagents under
//! `<session>/subagents/` or, in old Claude Code versions, `agent-*.jsonl` beside the session.
//!
//! The date is the session's **first timestamp**: the top-level `timestamp` of the first line
//! among the first [`HEAD_LINES`] lines (within the first [`HEAD_BYTES`], which `check` keeps
//! as it reads them) that has one (Claude Code and
//! Codex write one on nearly every line), in UTC. A transcript without one (chat logs) is dated
//! by its name when the name holds a date (Codex rollouts, `<timestamp>-<id>` session
//! directories; local time, as the agents write it), else it is undated.

use crate::sessions::id::{file_id, rollout_id, session_dir_id, split_timestamped, validate_prefix};
use crate::sessions::tail::timestamp_of_line;
use crate::sessions::Timestamp;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Bytes read from the start of a transcript to find its first timestamp.
pub const HEAD_BYTES: usize = 64 << 10;

/// Lines looked at for the first timestamp.
pub const HEAD_LINES: usize = 64;

/// Where a session's date came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DatedBy {
    /// The first `timestamp` in the transcript.
    Transcript,
    /// The file or directory name (Codex rollouts, session directories).
    Name,
    /// No date found.
    Undated,
}

/// A session's date: days since 1970-01-01 (UTC), and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionDate {
    /// Days since the epoch, when known.
    pub day: Option<i64>,
    /// Its source.
    pub by: DatedBy,
}

/// Whether `path` is a subagent's transcript rather than a session's: it lies in a
/// `subagents/` directory, or is an old-style Claude Code `agent-*.jsonl`.
pub fn is_subagent(path: &Path) -> bool {
    let in_subagents = path.parent().and_then(Path::file_name).is_some_and(|n| n == "subagents");
    let old_style = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("agent-") && n.ends_with(".jsonl"));
    in_subagents || old_style
}

/// The session id and the root to look it up under, from the path alone; `None` when the path
/// has no session name. A subagent's transcript names its session (`show` lists it there).
fn session_of(path: &Path) -> Option<(String, PathBuf)> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".jsonl")?;
    let dir = path.parent().unwrap_or(Path::new(""));
    if dir.file_name().is_some_and(|n| n == "subagents") {
        let session = dir.parent()?;
        let session_name = session.file_name()?.to_str()?;
        let above = session.parent().unwrap_or(Path::new(""));
        let id = if session.join("transcript.jsonl").is_file() { session_dir_id(session_name) } else { session_name };
        return Some((id.to_owned(), above.to_path_buf()));
    }
    // Copilot CLI: `<uuid>/events.jsonl`, found under the directory above it.
    if name == "events.jsonl" && dir.file_name().and_then(|n| n.to_str()).is_some_and(crate::sessions::id::is_uuid) {
        return Some((dir.file_name()?.to_str()?.to_owned(), dir.parent().unwrap_or(Path::new("")).to_path_buf()));
    }
    if name == "transcript.jsonl" {
        let session_name = dir.file_name()?.to_str()?;
        return Some((session_dir_id(session_name).to_owned(), dir.parent().unwrap_or(Path::new("")).to_path_buf()));
    }
    Some((rollout_id(stem).unwrap_or_else(|| file_id(stem)).to_owned(), dir.to_path_buf()))
}

/// The command that opens the session of `path`: `transcriptd show ID --root DIR`, the root
/// made absolute and quoted for a POSIX shell. `None` when the id has characters `show` refuses
/// (it compares ids made of letters, digits, `-` and `_` only) or the root is not UTF-8.
pub fn show_command(path: &Path) -> Option<String> {
    let (id, root) = session_of(path)?;
    validate_prefix(&id).ok()?;
    let root = if root.as_os_str().is_empty() { PathBuf::from(".") } else { root };
    let root = std::path::absolute(&root).unwrap_or(root);
    Some(format!("transcriptd show {id} --root {}", shell_quote(root.to_str()?)))
}

/// The command that opens the transcript `path`: `transcriptd show` for its session when
/// [`show_command`] can name it, else `transcriptd history PATH` (the path made absolute and
/// quoted). `None` for a path that is not UTF-8.
pub fn open_command(path: &Path) -> Option<String> {
    show_command(path).or_else(|| {
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        Some(format!("transcriptd history {}", shell_quote(abs.to_str()?)))
    })
}

/// `s` as one word of a POSIX shell command: as it is when it holds only characters no shell
/// treats specially, else in single quotes (a `'` inside becomes `'\''`).
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-./+:@%,=".contains(&b)) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The first timestamp among the complete lines of `head`, as days since the epoch. Pure.
pub fn first_day_in(head: &[u8]) -> Option<i64> {
    crate::transcript::lines::lines(1, 0, head).take(HEAD_LINES).find_map(|l| timestamp_of_line(l.bytes)).map(day_of)
}

/// The day a point in time falls on (UTC).
pub fn day_of(t: Timestamp) -> i64 {
    t.unix_secs().div_euclid(86_400)
}

/// `YYYY-MM-DD` of a day.
pub fn day_string(day: i64) -> String {
    let s = Timestamp::from_unix(day.saturating_mul(86_400), 0).to_rfc3339();
    s.get(..10).unwrap_or(&s).to_owned()
}

/// The date a name holds: `YYYY-MM-DD…` or `YYYYMMDD…` at its start, or Unix seconds (10
/// digits). Pure.
pub fn day_in_name(stamp: &str) -> Option<i64> {
    let b = stamp.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r.clone()).filter(|d| d.iter().all(u8::is_ascii_digit)).map(|_| &stamp[r]);
    let date = if b.get(4) == Some(&b'-') && b.get(7) == Some(&b'-') {
        Some(format!("{}-{}-{}", digits(0..4)?, digits(5..7)?, digits(8..10)?))
    } else if b.len() >= 8 && b.iter().take(8).all(u8::is_ascii_digit) && !(b.len() == 10 && b.iter().all(u8::is_ascii_digit)) {
        Some(format!("{}-{}-{}", &stamp[0..4], &stamp[4..6], &stamp[6..8]))
    } else {
        None
    };
    if let Some(d) = date {
        return Timestamp::parse_rfc3339(&format!("{d}T00:00:00Z")).map(day_of);
    }
    let secs: i64 = stamp.parse().ok().filter(|_| b.len() == 10)?;
    Some(secs.div_euclid(86_400))
}

/// The date in the name of the session `path` belongs to (see the module docs).
fn day_from_name(path: &Path) -> Option<i64> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".jsonl")?;
    if let Some(rest) = stem.strip_prefix("rollout-") {
        return day_in_name(rest);
    }
    let mut dir = path.parent()?;
    if dir.file_name().is_some_and(|n| n == "subagents") {
        dir = dir.parent()?;
    }
    let (stamp, _) = split_timestamped(dir.file_name()?.to_str()?)?;
    day_in_name(stamp)
}

/// The date of the session whose transcript is `path` and starts with `head` (its first
/// [`HEAD_BYTES`], as `check` read them; see the module docs).
pub fn session_date(head: &[u8], path: Option<&Path>) -> SessionDate {
    match (first_day_in(head), path.and_then(day_from_name)) {
        (Some(day), _) => SessionDate { day: Some(day), by: DatedBy::Transcript },
        (None, Some(day)) => SessionDate { day: Some(day), by: DatedBy::Name },
        (None, None) => SessionDate { day: None, by: DatedBy::Undated },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_and_subagents() {
        assert!(is_subagent(Path::new("/p/258c/subagents/agent-a1.jsonl")));
        assert!(is_subagent(Path::new("/p/-tmp-private/agent-36541525.jsonl")));
        assert!(!is_subagent(Path::new("/p/-tmp-private/4c2d.jsonl")));
        assert!(!is_subagent(Path::new("rollout-2026-02-23T12-47-42-019c8a53.jsonl")));
    }

    #[test]
    fn show_commands_name_the_session_and_its_root() {
        let c = show_command(Path::new("/p/proj/258c7280-ae70-4798-800f-63464d01a85d.jsonl")).unwrap();
        assert_eq!(c, "transcriptd show 258c7280-ae70-4798-800f-63464d01a85d --root /p/proj");
        let c = show_command(Path::new("/p/proj/258c7280/subagents/agent-a881341.jsonl")).unwrap();
        assert_eq!(c, "transcriptd show 258c7280 --root /p/proj");
        let c = show_command(Path::new("/c/2026/02/23/rollout-2026-02-23T12-47-42-019c8a53-a0dd-7130-bcd7-95445d84846a.jsonl")).unwrap();
        assert_eq!(c, "transcriptd show 019c8a53-a0dd-7130-bcd7-95445d84846a --root /c/2026/02/23");
        let c = show_command(Path::new("/w/20260101T120000Z-abc123/transcript.jsonl")).unwrap();
        assert_eq!(c, "transcriptd show abc123 --root /w");
        // An id `show` refuses gets no command; a root with spaces or quotes is quoted.
        assert_eq!(show_command(Path::new("/p/short.orphan-tool-use.jsonl")), None);
        let c = show_command(Path::new("/p/it's $(rm -rf ~)/s1.jsonl")).unwrap();
        assert_eq!(c, r"transcriptd show s1 --root '/p/it'\''s $(rm -rf ~)'");
        assert_eq!(open_command(Path::new("/p/short.orphan-tool-use.jsonl")).unwrap(), "transcriptd history /p/short.orphan-tool-use.jsonl");
        assert_eq!(open_command(Path::new("/p/s1.jsonl")).unwrap(), "transcriptd show s1 --root /p");
        let c = show_command(Path::new("/h/.copilot/session-state/72015cae-bdb4-446c-a192-b49eed6e93c5/events.jsonl")).unwrap();
        assert_eq!(c, "transcriptd show 72015cae-bdb4-446c-a192-b49eed6e93c5 --root /h/.copilot/session-state");
    }

    #[test]
    fn quoting_survives_a_shell() {
        for s in ["plain/path", "a b", "it's", "$(x) `y` \"z\" \\ ; & | < > * ? ~ #", "new\nline", ""] {
            let out = std::process::Command::new("sh").arg("-c").arg(format!("printf %s {}", shell_quote(s))).output().unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), s);
        }
    }

    #[test]
    fn dates_from_lines_and_names() {
        let head = b"{\"type\":\"summary\"}\n{\"timestamp\":\"2026-02-23T23:30:00-02:00\"}\n{\"timestamp\":\"2020-01-01T00:00:00Z\"}\n";
        assert_eq!(first_day_in(head).map(day_string).as_deref(), Some("2026-02-24"));
        // Only complete lines count.
        assert_eq!(first_day_in(b"{\"timestamp\":\"2026-02-23T00:00:00Z\"}"), None);
        assert_eq!(day_in_name("2026-02-23T12-47-42-019c8a53").map(day_string).as_deref(), Some("2026-02-23"));
        assert_eq!(day_in_name("20260101T120000Z").map(day_string).as_deref(), Some("2026-01-01"));
        assert_eq!(day_in_name("1767225600").map(day_string).as_deref(), Some("2026-01-01"));
        assert_eq!(day_in_name("2026-13-01"), None);
        assert_eq!(day_in_name("abc"), None);
        assert_eq!(day_from_name(Path::new("/c/rollout-2026-02-23T12-47-42-x.jsonl")).map(day_string).as_deref(), Some("2026-02-23"));
        assert_eq!(day_from_name(Path::new("/w/20260101T120000Z-abc/subagents/a.jsonl")).map(day_string).as_deref(), Some("2026-01-01"));
        assert_eq!(day_from_name(Path::new("/p/4c2d.jsonl")), None);
        assert_eq!(day_string(0), "1970-01-01");
        let rollout = Path::new("/c/rollout-2026-02-23T12-47-42-x.jsonl");
        assert_eq!(session_date(head, Some(rollout)).by, DatedBy::Transcript);
        assert_eq!(session_date(b"{}\n", Some(rollout)), SessionDate { day: day_in_name("2026-02-23"), by: DatedBy::Name });
        assert_eq!(session_date(b"{}\n", None), SessionDate { day: None, by: DatedBy::Undated });
    }
}
