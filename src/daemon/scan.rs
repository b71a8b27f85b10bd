//! The IO of discovery, run on tokio's blocking pool like a poll's ([`super::fetch`]): the
//! walks of watched directories (the periodic rescan, a directory or root that appeared) and
//! the `lstat` of the paths filesystem events name that no watched file is read under. A
//! directory on a stuck filesystem holds a thread, not the loop. The loop describes a scan
//! ([`Job`]) and takes up what it found ([`Scanned`]); one rescan of the roots is under way at
//! most, so a stuck one is not started again and again.

use super::open;
use std::collections::HashSet;
use std::fs::Metadata;
use std::path::PathBuf;

/// What to look at.
#[derive(Debug, Default)]
pub struct Job {
    /// Directories to walk (not through links), each with the watched root it is under.
    pub walk: Vec<(PathBuf, PathBuf)>,
    /// Paths to look at (from events), below the roots `roots`.
    pub paths: Vec<PathBuf>,
    /// The watched roots.
    pub roots: Vec<PathBuf>,
    /// For a rescan: the paths of the files read (a walk passes over them; those gone are
    /// named) and the paths skipped (those gone are named).
    pub known: Option<(HashSet<PathBuf>, Vec<PathBuf>)>,
    /// Whether this is the scan at startup (`read_from` applies).
    pub startup: bool,
}

/// A path found.
#[derive(Debug)]
pub struct Entry {
    /// The path.
    pub path: PathBuf,
    /// Its `lstat`.
    pub meta: Metadata,
    /// Found by a walk (not named by an event).
    pub walked: bool,
    /// A symbolic link to a directory.
    pub link_to_dir: bool,
    /// A directory between its root and it is a symbolic link.
    pub linked: bool,
}

/// What a scan found.
#[derive(Debug, Default)]
pub struct Scanned {
    /// Whether it was the scan at startup.
    pub startup: bool,
    /// Whether it was a rescan of the roots.
    pub rescan: bool,
    /// Paths found: every non-directory a walk met (but the files read), and the paths named
    /// that exist (directories too).
    pub entries: Vec<Entry>,
    /// Files read whose path is gone (a rescan's).
    pub gone: Vec<PathBuf>,
    /// Skipped paths that are gone (a rescan's).
    pub gone_skipped: Vec<PathBuf>,
}

/// Does the IO of a scan (on the blocking pool).
pub fn scan(job: Job) -> Scanned {
    let mut out = Scanned { startup: job.startup, rescan: job.known.is_some(), ..Scanned::default() };
    let known = job.known.as_ref().map(|(files, _)| files);
    for (dir, root) in &job.walk {
        let walk = walkdir::WalkDir::new(dir).follow_links(false).max_open(4);
        for e in walk.into_iter().filter_map(Result::ok) {
            if e.file_type().is_dir() || known.is_some_and(|k| k.contains(e.path())) {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(e.path()) else { continue };
            let link_to_dir = e.file_type().is_symlink() && e.depth() > 0 && std::fs::metadata(e.path()).is_ok_and(|m| m.is_dir());
            let linked = !link_to_dir && open::linked_dir_between(root, e.path());
            out.entries.push(Entry { path: e.path().to_path_buf(), meta, walked: true, link_to_dir, linked });
        }
    }
    for p in job.paths {
        let Ok(meta) = std::fs::symlink_metadata(&p) else { continue };
        let link_to_dir = meta.file_type().is_symlink() && std::fs::metadata(&p).is_ok_and(|m| m.is_dir());
        let root = job.roots.iter().find(|r| p.starts_with(r));
        let linked = !meta.is_dir() && !link_to_dir && root.is_some_and(|r| open::linked_dir_between(r, &p));
        out.entries.push(Entry { path: p, meta, walked: false, link_to_dir, linked });
    }
    if let Some((files, skipped)) = &job.known {
        out.gone = files.iter().filter(|p| std::fs::symlink_metadata(p).is_err()).cloned().collect();
        out.gone_skipped = skipped.iter().filter(|p| std::fs::symlink_metadata(p).is_err()).cloned().collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rescan_finds_new_paths_and_gone_ones() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().to_path_buf();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/new.jsonl"), "{}\n").unwrap();
        std::fs::write(root.join("read.jsonl"), "{}\n").unwrap();
        std::os::unix::fs::symlink(root.join("sub"), root.join("via")).unwrap();
        let known: HashSet<PathBuf> = [root.join("read.jsonl"), root.join("gone.jsonl")].into();
        let job = Job {
            walk: vec![(root.clone(), root.clone())],
            paths: vec![root.join("sub"), root.join("nothing.jsonl")],
            roots: vec![root.clone()],
            known: Some((known, vec![root.join("skipped.jsonl")])),
            startup: true,
        };
        let s = scan(job);
        assert!(s.startup && s.rescan);
        let walked: Vec<_> = s.entries.iter().filter(|e| e.walked).map(|e| (e.path.strip_prefix(&root).unwrap().to_owned(), e.link_to_dir)).collect();
        assert_eq!(walked.len(), 2, "{walked:?}");
        assert!(walked.contains(&(PathBuf::from("sub/new.jsonl"), false)));
        assert!(walked.contains(&(PathBuf::from("via"), true)));
        let named: Vec<_> = s.entries.iter().filter(|e| !e.walked).map(|e| (e.path.clone(), e.meta.is_dir())).collect();
        assert_eq!(named, vec![(root.join("sub"), true)]);
        assert_eq!(s.gone, vec![root.join("gone.jsonl")]);
        assert_eq!(s.gone_skipped, vec![root.join("skipped.jsonl")]);
    }
}
