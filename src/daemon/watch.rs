//! Noticing files: filesystem events (inotify through `notify`), or polling where there are none.
//!
//! Events only say "look at this path"; the daemon then stats and reads it. Three rules keep
//! events from being missed:
//! - **A new directory is watched before it is searched.** `notify` reports a created directory
//!   before it adds its own watch, so a file created in between would make no event; the daemon
//!   adds the watch itself ([`Watch::add_dir`]) and only then lists the directory.
//! - **A root is watched by identity.** Each root's device and inode are remembered; a root that
//!   was deleted and created again (or replaced) is watched again ([`Watch::ensure_roots`]).
//! - **A root's nearest existing ancestor is watched too** (not recursively), so that the root
//!   appearing — created, recreated, moved in — is an event, not something the next rescan finds.
//!
//! Missed events (an overflowing queue, a filesystem without events) are caught by the periodic
//! rescan, which also re-checks every root.

use crate::config::WatchMode;
use notify::{RecursiveMode, Watcher};
use std::collections::{BTreeSet, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tracing::{debug, warn};

/// Something to look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// This path changed (written, renamed, removed).
    Path(PathBuf),
    /// This path was created (a directory created is searched for files).
    Created(PathBuf),
    /// Events were lost: look at everything.
    Rescan,
}

/// The roots no other root contains, sorted.
pub fn outermost(roots: &[PathBuf]) -> Vec<PathBuf> {
    let set: BTreeSet<&PathBuf> = roots.iter().collect();
    set.iter().filter(|r| !set.iter().any(|o| o != *r && r.starts_with(o))).map(|r| (*r).clone()).collect()
}

/// The running watcher, and what it covers.
pub struct Watch {
    inner: Box<dyn Watcher + Send>,
    events: bool,
    roots: Vec<PathBuf>,
    /// Roots watched, with the device and inode they had then.
    watched: HashMap<PathBuf, (u64, u64)>,
    /// Ancestors watched (not recursively) so that a root appearing is an event.
    anchors: BTreeSet<PathBuf>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").field("roots", &self.roots).field("watched", &self.watched).field("anchors", &self.anchors).finish()
    }
}

impl Watch {
    /// The roots (none inside another).
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Whether `p` is in a root's tree.
    pub fn under_root(&self, p: &Path) -> bool {
        self.roots.iter().any(|r| p.starts_with(r))
    }

    /// Whether `p` is a root or one of its ancestors: a change there may create or remove a root.
    pub fn shapes_a_root(&self, p: &Path) -> bool {
        self.roots.iter().any(|r| r.starts_with(p))
    }

    /// Watches each root as it is now: a root that appeared, or names another directory than
    /// when it was watched, is (re)watched; one that is gone is forgotten. Anchors follow.
    /// Returns the roots (re)watched now: they must be searched, as their files made no event.
    pub fn ensure_roots(&mut self) -> Vec<PathBuf> {
        let mut fresh = Vec::new();
        for root in self.roots.clone() {
            let now = std::fs::metadata(&root).ok().filter(|m| m.is_dir()).map(|m| (m.dev(), m.ino()));
            let before = self.watched.get(&root).copied();
            if now == before {
                continue;
            }
            if before.is_some() {
                // Gone or replaced: the old watches died with the old directory.
                let _ = self.inner.unwatch(&root);
                self.watched.remove(&root);
            }
            if let Some(id) = now {
                match self.inner.watch(&root, RecursiveMode::Recursive) {
                    Ok(()) => {
                        // Links are not followed below a root, and `notify` then leaves out a
                        // root that is itself a link (its directories are watched, not it):
                        // watch it by name (inotify follows the name). New directories in it are
                        // watched by `add_dir`.
                        if self.events && std::fs::symlink_metadata(&root).is_ok_and(|m| m.file_type().is_symlink()) {
                            let _ = self.inner.watch(&root, RecursiveMode::NonRecursive);
                        }
                        self.watched.insert(root.clone(), id);
                        fresh.push(root);
                    }
                    Err(e) => warn!(dir = %root.display(), error = %e, "cannot watch directory; the periodic rescan still covers it"),
                }
            }
        }
        self.anchor();
        fresh
    }

    /// Watches each root's nearest existing ancestor (its parent when it exists).
    fn anchor(&mut self) {
        if !self.events {
            return;
        }
        let want: BTreeSet<PathBuf> = self.roots.iter().filter_map(|r| r.ancestors().skip(1).find(|a| a.is_dir()).map(Path::to_path_buf)).collect();
        for gone in self.anchors.difference(&want).cloned().collect::<Vec<_>>() {
            let _ = self.inner.unwatch(&gone);
            self.anchors.remove(&gone);
        }
        for a in want {
            if self.anchors.contains(&a) {
                continue;
            }
            match self.inner.watch(&a, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    self.anchors.insert(a);
                }
                Err(e) => debug!(dir = %a.display(), error = %e, "cannot watch a root's parent; the periodic rescan finds the root"),
            }
        }
    }

    /// A directory appeared below a root: watch it (and what is below it) now, before it is
    /// searched, so that whatever is created in it from now on makes an event.
    pub fn add_dir(&mut self, dir: &Path) {
        if !self.events || !self.under_root(dir) {
            return;
        }
        if let Err(e) = self.inner.watch(dir, RecursiveMode::Recursive) {
            debug!(dir = %dir.display(), error = %e, "cannot watch a new directory");
        }
    }
}

/// Starts watching `roots`, sending changes to `tx`. Nothing is watched until
/// [`Watch::ensure_roots`].
pub fn start(roots: &[PathBuf], mode: WatchMode, interval: Duration, tx: UnboundedSender<Change>) -> anyhow::Result<Watch> {
    let handler = move |res: notify::Result<notify::Event>| match res {
        Ok(ev) => {
            use notify::event::{AccessKind, AccessMode, EventKind};
            if ev.need_rescan() {
                let _ = tx.send(Change::Rescan);
            }
            // Reads and opens (ours included) are not changes; only creation, writes, renames,
            // removals and writers closing the file are.
            let make: fn(PathBuf) -> Change = match ev.kind {
                EventKind::Create(_) => Change::Created,
                EventKind::Modify(_) | EventKind::Remove(_) | EventKind::Any | EventKind::Other => Change::Path,
                EventKind::Access(AccessKind::Close(AccessMode::Write)) => Change::Path,
                EventKind::Access(_) => return,
            };
            for p in ev.paths {
                let _ = tx.send(make(p));
            }
        }
        Err(e) => {
            warn!(error = %e, "watch error; rescanning");
            let _ = tx.send(Change::Rescan);
        }
    };
    let poll = |h| -> anyhow::Result<Box<dyn Watcher + Send>> {
        // Links are not followed (see `open.rs`).
        Ok(Box::new(notify::PollWatcher::new(h, notify::Config::default().with_poll_interval(interval).with_follow_symlinks(false))?))
    };
    let events_config = notify::Config::default().with_follow_symlinks(false);
    let (inner, events): (Box<dyn Watcher + Send>, bool) = match mode {
        WatchMode::Poll => (poll(handler)?, false),
        WatchMode::Events => (Box::new(notify::RecommendedWatcher::new(handler, events_config)?), true),
        WatchMode::Auto => {
            let h2 = handler.clone();
            match notify::RecommendedWatcher::new(handler, events_config) {
                Ok(w) => (Box::new(w), true),
                Err(e) => {
                    warn!(error = %e, "filesystem events unavailable; polling instead");
                    (poll(h2)?, false)
                }
            }
        }
    };
    Ok(Watch { inner, events, roots: outermost(roots), watched: HashMap::new(), anchors: BTreeSet::new() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::literal_root;

    #[test]
    fn roots_of_patterns() {
        assert_eq!(literal_root("/home/u/.claude/projects/**/*.jsonl"), PathBuf::from("/home/u/.claude/projects"));
        assert_eq!(literal_root("/var/log/agent-*.jsonl"), PathBuf::from("/var/log"));
        assert_eq!(literal_root("/a/b/c.jsonl"), PathBuf::from("/a/b/c.jsonl"));
    }

    #[test]
    fn outermost_roots() {
        let r = |v: &[&str]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert_eq!(outermost(&r(&["/a/b", "/a", "/c", "/a/bb", "/c"])), r(&["/a", "/c"]));
        assert_eq!(outermost(&r(&["/a/b", "/a/bc"])), r(&["/a/b", "/a/bc"]));
    }
}
