//! Discovery: which sessions live under a set of roots, read from directory listings alone.
//!
//! One walk serves both the full listing ([`discover`]) and the id-prefix lookup
//! ([`find_by_prefix`]). It reads names, never file contents, and the lookup prunes what cannot
//! match, so that a lookup over 100,000 sessions reads only the directories that hold them:
//!
//! - A directory holding `transcript.jsonl` or `.meta.json` is a session directory: one session,
//!   nothing below it is walked.
//! - In any other directory, `<id>.jsonl` is a session: `rollout-<timestamp>-<id>.jsonl` is a
//!   Codex rollout, `<id>.jsonl` with `<id>.meta.json` beside it is the flat sidecar layout, any
//!   other is a plain file (Claude Code). `<id>.meta.json` without `<id>.jsonl` is lost data.
//! - A directory named like a sibling `<id>.jsonl` (Claude Code's `<session-id>/subagents/…`) is
//!   that session's companion: never walked for sessions.
//! - `<uuid>/events.jsonl` is a Copilot CLI session, its id the directory's name.
//! - Lookup only: a directory named `<timestamp>-<id>` whose id does not start with the prefix is
//!   not opened. Such a name is taken to be a session directory, never a workspace of them; this
//!   is what keeps a lookup over 100,000 session directories from opening each one.
//!
//! Directories are read in parallel, each by one task: the time goes into the kernel's reading
//! of large directories.
//!
//! Symbolic links are followed (`~/.claude/projects` is sometimes one), and each directory is
//! walked once, by whichever path reaches it first, so that a link loop cannot hang a walk nor a
//! second link list a session twice. A directory that vanishes
//! while it is walked (a session deleted meanwhile) is skipped; any other error is returned,
//! naming the path.

use super::id::{file_id, rollout_id, session_dir_id, split_timestamped, validate_prefix};
use super::names;
use super::Error;
use crate::sources::batch::{transcript_of_meta, MissingTranscript};
use serde::Serialize;
use std::cell::OnceCell;
use std::collections::HashSet;
use std::fs;
use std::hash::{BuildHasherDefault, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// How a session is kept on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// `<dir>/<id>.jsonl` without a sidecar: Claude Code projects (and any loose transcript).
    File,
    /// `<dir>/rollout-<timestamp>-<id>.jsonl`: Codex.
    Rollout,
    /// `<dir>/<id>.jsonl` with `<dir>/<id>.meta.json`: the flat layout.
    Sidecar,
    /// `<dir>/<timestamp>-<id>/transcript.jsonl` with `.meta.json`: session directories.
    Directory,
}

impl Layout {
    /// Its name in output.
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::File => "file",
            Layout::Rollout => "rollout",
            Layout::Sidecar => "sidecar",
            Layout::Directory => "directory",
        }
    }
}

/// A session found on disk: its transcript exists (or did when its directory was read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The id, read from the file or directory name.
    pub id: String,
    /// How it is kept.
    pub layout: Layout,
    /// The transcript file.
    pub transcript: PathBuf,
    /// The meta sidecar, when there is one.
    pub meta: Option<PathBuf>,
    /// A directory that may hold its subagents' transcripts under `subagents/`: the
    /// `<id>/` directory beside a Claude Code session, or the session directory itself.
    pub companion: Option<PathBuf>,
}

/// A meta sidecar whose transcript is missing: the session's data is lost, never an empty
/// session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    /// The id the session had.
    pub id: String,
    /// The sidecar and where its transcript should be.
    pub missing: MissingTranscript,
}

impl Lost {
    /// The data-loss error for it.
    pub fn error(&self) -> Error {
        Error::MissingTranscript { meta: self.missing.meta.clone(), transcript: self.missing.transcript.clone() }
    }
}

/// What a walk found, each list sorted by id, then path.
#[derive(Debug, Default)]
pub struct Discovery {
    /// Sessions whose transcript exists.
    pub sessions: Vec<Session>,
    /// Sidecars whose transcript is missing.
    pub lost: Vec<Lost>,
    /// Directories below the roots that could not be read (by path): the walk went on
    /// without them, as `check` goes on past a path it cannot read.
    pub unreadable: Vec<Error>,
}

/// Every session under `roots` (directories, or transcript files named directly).
pub fn discover(roots: &[PathBuf]) -> Result<Discovery, Error> {
    walk(roots, None)
}

/// The one session under `roots` whose id starts with `prefix` (`TranscriptReader::find_by_prefix`, docs/requirements.md).
///
/// A session whose id equals the prefix is chosen even when longer ids also start with it, so
/// that every id can be named. Errors: [`Error::InvalidPrefix`] for characters no id has,
/// [`Error::NotFound`], [`Error::Ambiguous`] (with every candidate), and
/// [`Error::MissingTranscript`] when the match is a sidecar whose transcript is gone.
pub fn find_by_prefix(roots: &[PathBuf], prefix: &str) -> Result<Session, Error> {
    validate_prefix(prefix).map_err(|problem| Error::InvalidPrefix { prefix: prefix.to_owned(), problem })?;
    let mut found = walk(roots, Some(prefix))?;
    if found.sessions.is_empty() && found.lost.is_empty() && !found.unreadable.is_empty() {
        // The session may be in a directory that could not be read: say that, not "no match".
        return Err(found.unreadable.swap_remove(0));
    }
    let mut all: Vec<(&str, Result<&Session, &Lost>)> =
        found.sessions.iter().map(|s| (s.id.as_str(), Ok(s))).chain(found.lost.iter().map(|l| (l.id.as_str(), Err(l)))).collect();
    let exact: Vec<_> = all.iter().filter(|(id, _)| *id == prefix).cloned().collect();
    if exact.len() == 1 {
        all = exact;
    }
    match all.as_slice() {
        [] => Err(Error::NotFound { prefix: prefix.to_owned(), roots: roots.to_vec() }),
        [(_, Ok(s))] => Ok((*s).clone()),
        [(_, Err(l))] => Err(l.error()),
        many => {
            let mut candidates: Vec<(String, PathBuf)> =
                many.iter().map(|(id, f)| (id.to_string(), f.map_or_else(|l| l.missing.transcript.clone(), |s| s.transcript.clone()))).collect();
            candidates.sort();
            Err(Error::Ambiguous { prefix: prefix.to_owned(), candidates })
        }
    }
}

/// A set of names from one directory listing. Sets of 100,000 names are built per lookup, so
/// the hash is a one-shot xxh3 instead of SipHash (file names on the user's own disk are not
/// chosen to collide).
type NameSet<'a> = HashSet<&'a str, BuildHasherDefault<NameHasher>>;

/// See [`NameSet`].
#[derive(Default)]
struct NameHasher(u64);

impl Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = self.0.rotate_left(5) ^ xxhash_rust::xxh3::xxh3_64(bytes);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A directory still to read, with its canonical path (each is walked once).
struct Pending {
    path: PathBuf,
    canonical: PathBuf,
}

/// The walk behind [`discover`] (`prefix: None`) and [`find_by_prefix`]. Directories are read
/// in parallel: the time goes into the kernel's reading of large directories, one at a time.
fn walk(roots: &[PathBuf], prefix: Option<&str>) -> Result<Discovery, Error> {
    let mut out = Discovery::default();
    let mut dirs = Vec::new();
    for root in roots {
        let meta = fs::metadata(root).map_err(|e| Error::io(root, e))?;
        if meta.is_dir() {
            let canonical = fs::canonicalize(root).map_err(|e| Error::io(root, e))?;
            dirs.push(Pending { path: root.clone(), canonical });
        } else {
            file_root(root, prefix, &mut out);
        }
    }
    let shared = Walk { prefix, out: Mutex::new(out), visited: Mutex::new(HashSet::new()), unreadable: Mutex::new(Vec::new()) };
    rayon::scope(|s| {
        for dir in dirs {
            let shared = &shared;
            s.spawn(move |s| shared.visit(s, dir));
        }
    });
    let mut out = shared.out.into_inner().unwrap_or_else(PoisonError::into_inner);
    out.unreadable = shared.unreadable.into_inner().unwrap_or_else(PoisonError::into_inner);
    out.unreadable.sort_by_key(|e| e.to_string());
    let key = |id: &str, path: &Path| (id.to_owned(), path.to_path_buf());
    out.sessions.sort_by_key(|s| key(&s.id, &s.transcript));
    out.sessions.dedup_by(|a, b| a.transcript == b.transcript);
    out.lost.sort_by_key(|l| key(&l.id, &l.missing.meta));
    out.lost.dedup_by(|a, b| a.missing.meta == b.missing.meta);
    Ok(out)
}

/// What the tasks of one walk share.
struct Walk<'p> {
    prefix: Option<&'p str>,
    out: Mutex<Discovery>,
    /// Canonical paths of the directories walked so far.
    visited: Mutex<HashSet<PathBuf>>,
    /// The directories that could not be read; the walk goes on without them.
    unreadable: Mutex<Vec<Error>>,
}

impl Walk<'_> {
    /// Reads `dir` and spawns a task for each subdirectory worth walking.
    fn visit<'s>(&'s self, s: &rayon::Scope<'s>, dir: Pending) {
        if !lock(&self.visited).insert(dir.canonical.clone()) {
            return;
        }
        let mut found = Discovery::default();
        let mut subdirs = Vec::new();
        if let Err(e) = read_dir(&dir, self.prefix, &mut found, &mut subdirs) {
            lock(&self.unreadable).push(e);
            return;
        }
        if !found.sessions.is_empty() || !found.lost.is_empty() {
            let mut out = lock(&self.out);
            out.sessions.append(&mut found.sessions);
            out.lost.append(&mut found.lost);
        }
        for d in subdirs {
            s.spawn(move |s| self.visit(s, d));
        }
    }
}

/// Locks a mutex; a panic elsewhere does not make the data unusable here (it is re-raised by
/// `rayon::scope` anyway).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn matches(prefix: Option<&str>, id: &str) -> bool {
    prefix.is_none_or(|p| id.starts_with(p))
}

/// A root that names a file: the session it is, if it is a transcript or a sidecar.
fn file_root(path: &Path, prefix: Option<&str>, out: &mut Discovery) {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else { return };
    let dir = path.parent().unwrap_or(Path::new(""));
    classify_file(dir, &name, &|n| dir.join(n).is_file(), &|n| dir.join(n).is_dir(), prefix, out);
}

/// One file of a directory that is not a session directory.
fn classify_file(dir: &Path, name: &str, has_file: &dyn Fn(&str) -> bool, has_dir: &dyn Fn(&str) -> bool, prefix: Option<&str>, out: &mut Discovery) {
    // Copilot CLI: `<id>/events.jsonl`, the session's id its directory's name (a UUID).
    if let Some(id) = (name == "events.jsonl").then(|| dir.file_name().and_then(|d| d.to_str())).flatten().filter(|d| super::id::is_uuid(d)) {
        if matches(prefix, id) {
            out.sessions.push(Session { id: id.to_owned(), layout: Layout::File, transcript: dir.join(name), meta: None, companion: None });
        }
        return;
    }
    // Whatever the layout, an id that starts with the prefix is part of the name: most names of
    // a lookup end here.
    if prefix.is_some_and(|p| !name.contains(p)) {
        return;
    }
    if let Some(stem) = name.strip_suffix(".meta.json").filter(|s| !s.is_empty()) {
        if matches(prefix, stem) && !has_file(&format!("{stem}.jsonl")) {
            let meta = dir.join(name);
            if let Some(transcript) = transcript_of_meta(&meta) {
                out.lost.push(Lost { id: stem.to_owned(), missing: MissingTranscript { meta, transcript } });
            }
        }
        return;
    }
    let Some(stem) = name.strip_suffix(".jsonl").filter(|s| !s.is_empty()) else { return };
    if crate::sources::batch::is_no_transcript(name) {
        return; // a rejects file or a backup beside a transcript: not a session
    }
    let sidecar = format!("{stem}.meta.json");
    let (layout, id) = match rollout_id(stem) {
        // Cheap name tests first: lookup asks `has_file` only for names that match.
        Some(id) if !matches(prefix, id) && !matches(prefix, stem) => return,
        None if !matches(prefix, file_id(stem)) && !matches(prefix, stem) => return,
        _ if has_file(&sidecar) => (Layout::Sidecar, stem),
        Some(id) => (Layout::Rollout, id),
        None => (Layout::File, file_id(stem)),
    };
    if !matches(prefix, id) {
        return;
    }
    out.sessions.push(Session {
        id: id.to_owned(),
        layout,
        transcript: dir.join(name),
        meta: (layout == Layout::Sidecar).then(|| dir.join(&sidecar)),
        companion: has_dir(stem).then(|| dir.join(stem)),
    });
}

/// Reads one directory: records its sessions and the subdirectories worth walking.
fn read_dir(dir: &Pending, prefix: Option<&str>, out: &mut Discovery, subdirs: &mut Vec<Pending>) -> Result<(), Error> {
    let base = names::cache_base();
    let entries = match base.as_deref().and_then(|b| names::cached(b, &dir.path, prefix)) {
        Some(cached) => cached.into_iter().map(|(n, k)| (n, k == names::Kind::Dir, false)).collect(),
        None => {
            let stamp = names::stamp_now(&dir.path);
            let entries = list_dir(dir)?;
            let links = entries.iter().any(|(_, _, link)| *link);
            if let (Some(b), Some(stamp), false) = (base.as_deref(), stamp, links) {
                if entries.len() >= names::MIN_ENTRIES {
                    let kinds: Vec<(String, names::Kind)> =
                        entries.iter().map(|(n, d, _)| (n.clone(), if *d { names::Kind::Dir } else { names::Kind::File })).collect();
                    names::store(b, &dir.path, &stamp, &kinds);
                }
            }
            entries
        }
    };
    let mut files: Vec<String> = Vec::new();
    let mut dirs: Vec<(String, bool)> = Vec::new();
    for (name, is_dir, link) in entries {
        if is_dir {
            dirs.push((name, link));
        } else {
            files.push(name);
        }
    }

    if files.iter().any(|f| f == "transcript.jsonl" || f == ".meta.json") {
        match session_directory(dir, &files, prefix) {
            Some(Ok(s)) => out.sessions.push(s),
            Some(Err(l)) => out.lost.push(l),
            None => {}
        }
        return Ok(()); // nothing below a session directory is another session
    }

    // A lookup asks about a few names (those that match, and one per subdirectory): scanning
    // the list is cheaper than hashing every name of a large directory. A listing asks about
    // every name, so it gets a set, built on first use.
    let few_questions = prefix.is_some() && (dirs.len() <= 16 || files.is_empty());
    let file_set = OnceCell::<NameSet<'_>>::new();
    let has_file = |n: &str| {
        if few_questions {
            files.iter().any(|f| f == n)
        } else {
            !files.is_empty() && file_set.get_or_init(|| files.iter().map(String::as_str).collect()).contains(n)
        }
    };
    let dir_set = OnceCell::<NameSet<'_>>::new();
    let has_dir = |n: &str| !dirs.is_empty() && dir_set.get_or_init(|| dirs.iter().map(|(d, _)| d.as_str()).collect()).contains(n);
    for name in &files {
        classify_file(&dir.path, name, &has_file, &has_dir, prefix, out);
    }

    for (name, link) in &dirs {
        if !files.is_empty() && has_file(&format!("{name}.jsonl")) {
            continue; // a session's companion directory
        }
        if let (Some(p), Some((_, id))) = (prefix, split_timestamped(name)) {
            if !id.starts_with(p) {
                continue; // a session directory that cannot match is not opened
            }
        }
        let path = dir.path.join(name);
        let canonical = if *link {
            let Ok(target) = fs::canonicalize(&path) else { continue };
            target
        } else {
            dir.canonical.join(name)
        };
        subdirs.push(Pending { path, canonical });
    }
    Ok(())
}

/// The entries of a directory that can hold sessions: (name, is a directory, is a link),
/// links resolved, dangling links and other file types left out.
fn list_dir(dir: &Pending) -> Result<Vec<(String, bool, bool)>, Error> {
    let entries = match fs::read_dir(&dir.path) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(&dir.path, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&dir.path, e)),
        };
        let ty = match entry.file_type() {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&entry.path(), e)),
        };
        let (ty, link) = if ty.is_symlink() {
            // A dangling link is no session.
            match fs::metadata(entry.path()) {
                Ok(m) => (m.file_type(), true),
                Err(_) => continue,
            }
        } else {
            (ty, false)
        };
        let (is_dir, is_file) = (ty.is_dir(), ty.is_file());
        if !is_dir && !is_file {
            if entry.file_name().to_string_lossy().ends_with(".jsonl") {
                let kind = crate::sources::regular::FileKind::of(ty);
                tracing::warn!(path = %entry.path().display(), "skipped: not a regular file ({}), never opened", kind.describe());
            }
            continue;
        }
        let Ok(name) = entry.file_name().into_string() else {
            tracing::warn!(path = %entry.path().display(), "skipped: the name is not UTF-8, and session ids are text");
            continue;
        };
        out.push((name, is_dir, link));
    }
    Ok(out)
}

/// The session a directory holding `transcript.jsonl` or `.meta.json` is, unless its id does
/// not match the prefix.
fn session_directory(dir: &Pending, files: &[String], prefix: Option<&str>) -> Option<Result<Session, Lost>> {
    let has_transcript = files.iter().any(|f| f == "transcript.jsonl");
    let has_meta = files.iter().any(|f| f == ".meta.json");
    let name = dir.path.file_name().or_else(|| dir.canonical.file_name()).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let id = session_dir_id(&name).to_owned();
    if !matches(prefix, &id) {
        return None;
    }
    let meta = dir.path.join(".meta.json");
    if !has_transcript {
        let transcript = transcript_of_meta(&meta).expect(".meta.json names its transcript");
        return Some(Err(Lost { id, missing: MissingTranscript { meta, transcript } }));
    }
    Some(Ok(Session {
        id,
        layout: Layout::Directory,
        transcript: dir.path.join("transcript.jsonl"),
        meta: has_meta.then_some(meta),
        companion: Some(dir.path.clone()),
    }))
}
