//! A cache of the names in large session directories.
//!
//! Listing a directory of 200,000 entries costs the kernel more than 100 ms on ext4 (it hashes
//! every name to walk its tree), so a flat directory of 100,000 sessions cannot answer a prefix
//! lookup quickly by reading it each time. After a directory of at least [`MIN_ENTRIES`] names is
//! read once, its names are kept in the user's cache directory, keyed by its path, and reused
//! while the directory is the same directory (device, inode) with the same modification time to
//! the nanosecond — which every entry created, removed or renamed in it changes. A directory
//! with symbolic links in it is never cached (a link's target can change without touching the
//! directory). A cache that cannot be read or written is ignored: it only ever saves time.

use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Directories with fewer entries are read each time.
pub const MIN_ENTRIES: usize = 10_000;

/// What a cached entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
}

/// The user's cache directory: `$XDG_CACHE_HOME`, or `~/.cache`.
pub fn cache_base() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
}

/// Where the names of `dir` are cached below `base`: `transcriptd/names/<hash of the path>`.
fn cache_path(base: &Path, dir: &Path) -> PathBuf {
    let key = xxhash_rust::xxh3::xxh3_64(dir.as_os_str().as_encoded_bytes());
    base.join("transcriptd/names").join(format!("{key:016x}"))
}

/// The stamp a cache must match: device, inode, modification time in nanoseconds.
fn stamp(dir: &Path) -> io::Result<String> {
    let m = std::fs::metadata(dir)?;
    Ok(format!("{} {} {} {}", m.dev(), m.ino(), m.mtime(), m.mtime_nsec()))
}

/// The cached names of `dir`, if a cache below `base` holds the directory as it is now. With a
/// `filter`, only directories and the names containing it are returned (a lookup by prefix needs
/// no other), plus the names that make a directory a session directory.
pub fn cached(base: &Path, dir: &Path, filter: Option<&str>) -> Option<Vec<(String, Kind)>> {
    let bytes = std::fs::read(cache_path(base, dir)).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    let (header, body) = text.split_once('\n')?;
    let (path, rest) = header.split_once('\t')?;
    if Path::new(path) != dir || rest != stamp(dir).ok()? {
        return None;
    }
    let keep = |kind: &str, name: &str| match filter {
        None => true,
        Some(f) => kind == "d" || name.contains(f) || name == "transcript.jsonl" || name == ".meta.json",
    };
    let mut names = Vec::new();
    for l in body.lines() {
        let (kind, name) = l.split_once(' ')?;
        if keep(kind, name) {
            names.push((name.to_owned(), if kind == "d" { Kind::Dir } else { Kind::File }));
        }
    }
    Some(names)
}

/// Keeps the names of `dir`, read with the directory's stamp taken *before* it was read (so
/// that a change while reading makes the cache stale, never wrong).
pub fn store(base: &Path, dir: &Path, stamp_before: &str, names: &[(String, Kind)]) {
    let path = cache_path(base, dir);
    let write = || -> io::Result<()> {
        std::fs::create_dir_all(path.parent().expect("a parent"))?;
        let mut f = crate::sinks::atomic::AtomicFile::create(&path, None)?;
        writeln!(f, "{}\t{stamp_before}", dir.display())?;
        for (name, kind) in names {
            // Names with a newline cannot be stored line by line: no cache then.
            if name.contains('\n') {
                return Ok(());
            }
            writeln!(f, "{} {name}", if *kind == Kind::Dir { 'd' } else { 'f' })?;
        }
        f.commit()
    };
    if let Err(e) = write() {
        tracing::debug!(cache = %path.display(), error = %e, "cannot keep the directory's names; lookups read the directory");
    }
}

/// The stamp of `dir` now, to pass to [`store`] after reading it.
pub fn stamp_now(dir: &Path) -> Option<String> {
    stamp(dir).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reused_while_the_directory_is_unchanged() {
        let base = tempfile::tempdir().unwrap();
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.jsonl"), "").unwrap();
        let st = stamp_now(d.path()).unwrap();
        store(base.path(), d.path(), &st, &[("a.jsonl".into(), Kind::File), ("sub".into(), Kind::Dir)]);
        assert_eq!(cached(base.path(), d.path(), None).unwrap(), vec![("a.jsonl".to_owned(), Kind::File), ("sub".to_owned(), Kind::Dir)]);
        assert_eq!(cached(base.path(), d.path(), Some("zz")).unwrap(), vec![("sub".to_owned(), Kind::Dir)]);
        // Any entry created changes the directory's modification time: the cache is stale.
        std::thread::sleep(std::time::Duration::from_millis(5));
        std::fs::write(d.path().join("b.jsonl"), "").unwrap();
        assert_eq!(cached(base.path(), d.path(), None), None);
        // A stamp taken before a change makes the cache stale, never wrong.
        let st = stamp_now(d.path()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        std::fs::write(d.path().join("c.jsonl"), "").unwrap();
        store(base.path(), d.path(), &st, &[("a.jsonl".into(), Kind::File)]);
        assert_eq!(cached(base.path(), d.path(), None), None);
    }
}
