//! The agents' own indexes of their sessions, against the files on disk (issue 32.4):
//!
//! - **Codex** keeps a state database, `<codex home>/state_<N>.sqlite` (SQLite in WAL mode, in
//!   use while Codex runs; 0.171.0 has `state_5.sqlite`), whose `threads` table names each
//!   thread's `rollout_path` (and whether it is `archived`). It is read read-only (`mode=ro`:
//!   what the WAL holds is seen, nothing is written, a writer is waited for at most 2 s).
//!   A row whose rollout is gone makes `codex resume` fail for a thread its picker lists; a
//!   rollout under `sessions/` or `archived_sessions/` that no row names is a session the
//!   picker does not show.
//! - **Claude Code** 2.1.332 keeps no index of its sessions in print mode (after a real
//!   session, `~/.claude.json` has no `projects` entry and `~/.claude/sessions/` is empty); an
//!   interactive run records `projects.<dir>.lastSessionId` in `~/.claude.json`: one that names
//!   a transcript that is gone is reported.

use std::path::{Path, PathBuf};

/// What an index says that the disk does not hold, or the other way round.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Problem {
    /// The index names a session whose file is gone.
    IndexedSessionGone {
        /// The index (the database or settings file).
        index: PathBuf,
        /// The session's id.
        id: String,
        /// The file it names.
        file: PathBuf,
    },
    /// A session file that the index does not name.
    SessionNotIndexed {
        /// The index.
        index: PathBuf,
        /// The file.
        file: PathBuf,
    },
}

/// What was read of one agent's index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Audit {
    /// The index read (none: the agent keeps none here).
    pub index: Option<PathBuf>,
    /// The sessions it names.
    pub indexed: usize,
    /// The session files found.
    pub files: usize,
    /// What disagrees.
    pub problems: Vec<Problem>,
}

/// Codex's state database in `home` (the highest `state_<N>.sqlite`), if there is one.
pub fn codex_state_db(home: &Path) -> Option<PathBuf> {
    let rd = std::fs::read_dir(home).ok()?;
    rd.filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n: u32 = name.strip_prefix("state_")?.strip_suffix(".sqlite")?.parse().ok()?;
            Some((n, e.path()))
        })
        .max()
        .map(|(_, p)| p)
}

/// Audits Codex's state database in `home` against its rollouts.
pub fn codex(home: &Path) -> anyhow::Result<Audit> {
    use anyhow::Context as _;
    let Some(db) = codex_state_db(home) else { return Ok(Audit::default()) };
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = rusqlite::Connection::open_with_flags(&db, flags).with_context(|| format!("opening {} read-only", db.display()))?;
    conn.busy_timeout(std::time::Duration::from_secs(2))?;
    let columns: Vec<String> = conn.prepare("SELECT name FROM pragma_table_info('threads')")?.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
    if !(columns.iter().any(|c| c == "id") && columns.iter().any(|c| c == "rollout_path")) {
        anyhow::bail!("{}: no threads(id, rollout_path) table: a schema this version does not know", db.display());
    }
    let rows: Vec<(String, String)> = conn
        .prepare("SELECT id, rollout_path FROM threads")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading {}", db.display()))?;
    let mut files = Vec::new();
    for sub in ["sessions", "archived_sessions"] {
        let root = home.join(sub);
        if root.is_dir() {
            for e in walkdir::WalkDir::new(&root).follow_links(false).into_iter().filter_map(Result::ok) {
                let n = e.file_name().to_string_lossy();
                if e.file_type().is_file() && n.starts_with("rollout-") && n.ends_with(".jsonl") {
                    files.push(e.into_path());
                }
            }
        }
    }
    files.sort();
    let indexed: std::collections::HashSet<PathBuf> = rows.iter().map(|(_, p)| PathBuf::from(p)).collect();
    let mut problems = Vec::new();
    for (id, p) in &rows {
        let file = PathBuf::from(p);
        if !file.is_file() {
            problems.push(Problem::IndexedSessionGone { index: db.clone(), id: id.clone(), file });
        }
    }
    for f in &files {
        if !indexed.contains(f) {
            problems.push(Problem::SessionNotIndexed { index: db.clone(), file: f.clone() });
        }
    }
    Ok(Audit { index: Some(db), indexed: rows.len(), files: files.len(), problems })
}

/// Audits Claude Code's `.claude.json` (`claude_json`) `projects.<dir>.lastSessionId` against
/// the transcripts under `config` (`~/.claude`).
pub fn claude(claude_json: &Path, config: &Path) -> anyhow::Result<Audit> {
    use anyhow::Context as _;
    let bytes = match std::fs::read(claude_json) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Audit::default()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", claude_json.display())),
    };
    let v: serde_json::Value = serde_json::from_slice(&bytes).with_context(|| format!("{}: not JSON", claude_json.display()))?;
    let mut audit = Audit { index: Some(claude_json.to_path_buf()), ..Audit::default() };
    let Some(projects) = v.get("projects").and_then(|p| p.as_object()) else { return Ok(audit) };
    for (dir, p) in projects {
        let Some(id) = p.get("lastSessionId").and_then(|s| s.as_str()).filter(|s| crate::sessions::id::is_uuid(s)) else { continue };
        audit.indexed += 1;
        let file = config.join("projects").join(super::project::claude_project_name(dir)).join(format!("{id}.jsonl"));
        if file.is_file() {
            audit.files += 1;
        } else {
            audit.problems.push(Problem::IndexedSessionGone { index: claude_json.to_path_buf(), id: id.to_owned(), file });
        }
    }
    Ok(audit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state_db(home: &Path, rows: &[(&str, &Path)]) {
        let c = rusqlite::Connection::open(home.join("state_5.sqlite")).unwrap();
        c.execute_batch(
            "PRAGMA journal_mode=WAL; CREATE TABLE threads (id TEXT PRIMARY KEY, rollout_path TEXT NOT NULL, archived INTEGER NOT NULL DEFAULT 0);",
        )
        .unwrap();
        for (id, p) in rows {
            c.execute("INSERT INTO threads (id, rollout_path) VALUES (?1, ?2)", (id, p.to_str().unwrap())).unwrap();
        }
    }

    #[test]
    fn codex_rows_without_rollouts_and_rollouts_without_rows() {
        let home = tempfile::tempdir().unwrap();
        let day = home.path().join("sessions/2026/12/03");
        std::fs::create_dir_all(&day).unwrap();
        let (a, b, c) =
            (day.join("rollout-2026-12-03T00-00-00-a.jsonl"), day.join("rollout-2026-12-03T00-00-01-b.jsonl"), day.join("rollout-2026-12-03T00-00-02-c.jsonl"));
        std::fs::write(&a, "{}\n").unwrap();
        std::fs::write(&c, "{}\n").unwrap();
        state_db(home.path(), &[("a", &a), ("b", &b)]);
        let audit = codex(home.path()).unwrap();
        let db = home.path().join("state_5.sqlite");
        assert_eq!((audit.indexed, audit.files), (2, 2));
        assert_eq!(
            audit.problems,
            vec![Problem::IndexedSessionGone { index: db.clone(), id: "b".into(), file: b }, Problem::SessionNotIndexed { index: db, file: c }]
        );
        // No database: nothing to say.
        assert_eq!(codex(&home.path().join("sessions")).unwrap(), Audit::default());
    }

    #[test]
    fn claude_last_session_ids_whose_transcript_is_gone() {
        let d = tempfile::tempdir().unwrap();
        let (here, gone) = ("0c6e3f4e-5a1b-4c2d-9e8f-7a6b5c4d3e2f", "1c6e3f4e-5a1b-4c2d-9e8f-7a6b5c4d3e2f");
        let proj = d.path().join(".claude/projects").join(crate::sessions::project::claude_project_name("/w/app"));
        std::fs::create_dir_all(&proj).unwrap();
        std::fs::write(proj.join(format!("{here}.jsonl")), "{}\n").unwrap();
        let cj = d.path().join(".claude.json");
        std::fs::write(&cj, serde_json::json!({"projects": {"/w/app": {"lastSessionId": here}, "/w/old": {"lastSessionId": gone}, "/w/none": {}}}).to_string())
            .unwrap();
        let audit = claude(&cj, &d.path().join(".claude")).unwrap();
        assert_eq!((audit.indexed, audit.files), (2, 1));
        assert_eq!(audit.problems.len(), 1);
        assert!(matches!(&audit.problems[0], Problem::IndexedSessionGone { id, .. } if id == gone));
    }
}
