//! Noticing files: filesystem events (inotify through `notify`), or polling where there are none.
//!
//! Events only say "look at this path"; the daemon then stats and reads it. Missed events (an
//! overflowing queue, a filesystem without events) are caught by a periodic rescan, and a
//! directory that did not exist at startup is watched as soon as a rescan finds it.

use crate::config::WatchMode;
use notify::{RecursiveMode, Watcher};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tracing::warn;

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

/// The directory a glob pattern is rooted at: its components before the first one with a glob
/// character.
pub fn literal_root(pattern: &str) -> PathBuf {
    crate::config::literal_root(pattern)
}

/// The running watcher, and which roots it covers.
pub struct Watch {
    inner: Box<dyn Watcher + Send>,
    watched: HashSet<PathBuf>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").field("watched", &self.watched).finish()
    }
}

impl Watch {
    /// Watches `root` recursively if it exists and is not watched yet.
    pub fn ensure(&mut self, root: &Path) {
        if self.watched.contains(root) || !root.is_dir() {
            return;
        }
        match self.inner.watch(root, RecursiveMode::Recursive) {
            Ok(()) => {
                self.watched.insert(root.to_path_buf());
            }
            Err(e) => warn!(dir = %root.display(), error = %e, "cannot watch directory; the periodic rescan still covers it"),
        }
    }
}

/// Starts watching `roots`, sending changes to `tx`.
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
    let poll =
        |h| -> anyhow::Result<Box<dyn Watcher + Send>> { Ok(Box::new(notify::PollWatcher::new(h, notify::Config::default().with_poll_interval(interval))?)) };
    let inner: Box<dyn Watcher + Send> = match mode {
        WatchMode::Poll => poll(handler)?,
        WatchMode::Events => Box::new(notify::recommended_watcher(handler)?),
        WatchMode::Auto => {
            let h2 = handler.clone();
            match notify::recommended_watcher(handler) {
                Ok(w) => Box::new(w),
                Err(e) => {
                    warn!(error = %e, "filesystem events unavailable; polling instead");
                    poll(h2)?
                }
            }
        }
    };
    let mut w = Watch { inner, watched: HashSet::new() };
    for r in roots {
        w.ensure(r);
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_of_patterns() {
        assert_eq!(literal_root("/home/u/.claude/projects/**/*.jsonl"), PathBuf::from("/home/u/.claude/projects"));
        assert_eq!(literal_root("/var/log/agent-*.jsonl"), PathBuf::from("/var/log"));
        assert_eq!(literal_root("/a/b/c.jsonl"), PathBuf::from("/a/b/c.jsonl"));
    }
}
