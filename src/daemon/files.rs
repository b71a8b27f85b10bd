//! The watched files, with what the loop asks of all of them every step kept up to date from
//! the files a step touched, not by looking at every file (issue 29: with 100,000 files in one
//! directory, a cold start looked at all of them after each fetch and took ~800 s).
//!
//! Every mutable access ([`Files::get_mut`], [`Files::insert`], [`Files::values_mut`]) marks
//! the file touched; [`Files::settle`] (once a step, before the timers) brings the indexes up to
//! date for the touched files only:
//!
//! - the stages' deadlines, ordered ([`Files::next_deadline`], [`Files::due`]);
//! - which files hold a descriptor ([`Files::open_count`], [`Files::open_paths`]);
//! - the sums behind the gauges (lag, paused calls, the oldest unread modification time).
//!
//! A file's deadline, handle, lag and counters change only through those accesses (they are
//! functions of its [`Tailed`] state, not of the clock), so the indexes are exact. The counters
//! a file gathered are taken from the files touched since they were last taken
//! ([`Files::take_counts`]).

use super::tail::Tailed;
use crate::sinks::Count;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What the indexes hold for one file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Noted {
    deadline: Option<Instant>,
    open: bool,
    lag: u64,
    pending: usize,
    mtime_s: i64,
}

/// The watched files, by path.
#[derive(Debug, Default)]
pub struct Files {
    map: HashMap<PathBuf, Box<Tailed>>,
    /// Touched since the last [`Files::settle`].
    stale: HashSet<PathBuf>,
    /// Touched since the last [`Files::take_counts`].
    counting: HashSet<PathBuf>,
    noted: HashMap<PathBuf, Noted>,
    deadlines: BTreeSet<(Instant, PathBuf)>,
    open: HashSet<PathBuf>,
    lag: u64,
    pending: usize,
    /// Modification times (seconds) of the files with unread bytes, with how many have each.
    lagging: BTreeMap<i64, usize>,
    /// Files whose stages made a repair due (their `repair_due`), found by a settle.
    repair_due: BTreeSet<PathBuf>,
}

impl Files {
    /// How many.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Whether `p` is watched.
    pub fn contains_key(&self, p: &Path) -> bool {
        self.map.contains_key(p)
    }

    /// The file read as `p`.
    pub fn get(&self, p: &Path) -> Option<&Tailed> {
        self.map.get(p).map(|b| &**b)
    }

    /// The file read as `p`, to change (marked touched).
    pub fn get_mut(&mut self, p: &Path) -> Option<&mut Tailed> {
        let t = self.map.get_mut(p)?;
        if !self.stale.contains(p) {
            self.stale.insert(p.to_path_buf());
        }
        if !self.counting.contains(p) {
            self.counting.insert(p.to_path_buf());
        }
        Some(&mut **t)
    }

    /// Watches `t` as `p` (touched).
    pub fn insert(&mut self, p: PathBuf, t: Box<Tailed>) {
        self.stale.insert(p.clone());
        self.counting.insert(p.clone());
        self.map.insert(p, t);
    }

    /// Stops watching `p`: the file, out of every index.
    pub fn remove(&mut self, p: &Path) -> Option<Box<Tailed>> {
        let t = self.map.remove(p)?;
        self.stale.remove(p);
        self.counting.remove(p);
        self.note(p, Noted::default());
        self.noted.remove(p);
        Some(t)
    }

    /// The paths.
    pub fn keys(&self) -> impl Iterator<Item = &PathBuf> {
        self.map.keys()
    }

    /// The files.
    pub fn values(&self) -> impl Iterator<Item = &Tailed> {
        self.map.values().map(|b| &**b)
    }

    /// Every file, to change (all marked touched: O(files), for what must look at each).
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Tailed> {
        for p in self.map.keys() {
            self.stale.insert(p.clone());
            self.counting.insert(p.clone());
        }
        self.map.values_mut().map(|b| &mut **b)
    }

    /// Brings the indexes up to date for the files touched since the last call.
    pub fn settle(&mut self) {
        for p in std::mem::take(&mut self.stale) {
            let Some(t) = self.map.get(&p) else { continue };
            if t.repair_due {
                self.repair_due.insert(p.clone());
            }
            let n = Noted { deadline: t.deadline(), open: t.is_open(), lag: t.lag(), pending: t.pending(), mtime_s: t.mtime_s };
            self.note(&p, n);
        }
    }

    fn note(&mut self, p: &Path, n: Noted) {
        let old = self.noted.get(p).copied().unwrap_or_default();
        if old == n {
            return;
        }
        if old.deadline != n.deadline {
            if let Some(d) = old.deadline {
                self.deadlines.remove(&(d, p.to_path_buf()));
            }
            if let Some(d) = n.deadline {
                self.deadlines.insert((d, p.to_path_buf()));
            }
        }
        if old.open != n.open {
            if n.open {
                self.open.insert(p.to_path_buf());
            } else {
                self.open.remove(p);
            }
        }
        self.lag = self.lag - old.lag + n.lag;
        self.pending = self.pending - old.pending + n.pending;
        if old.lag > 0 {
            if let Some(c) = self.lagging.get_mut(&old.mtime_s) {
                *c -= 1;
                if *c == 0 {
                    self.lagging.remove(&old.mtime_s);
                }
            }
        }
        if n.lag > 0 {
            *self.lagging.entry(n.mtime_s).or_default() += 1;
        }
        self.noted.insert(p.to_path_buf(), n);
    }

    /// The earliest deadline of any file's stages (as of the last [`Files::settle`]).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(d, _)| *d)
    }

    /// The files whose deadline is `now` or earlier, earliest first (as of the last settle).
    pub fn due(&self, now: Instant) -> Vec<PathBuf> {
        self.deadlines.iter().take_while(|(d, _)| *d <= now).map(|(_, p)| p.clone()).collect()
    }

    /// How many files hold a descriptor (as of the last settle).
    pub fn open_count(&self) -> usize {
        self.open.len()
    }

    /// The files that hold a descriptor (as of the last settle).
    pub fn open_paths(&self) -> impl Iterator<Item = &PathBuf> {
        self.open.iter()
    }

    /// Unread bytes, paused calls and the oldest modification time (seconds) of a file with
    /// unread bytes, over all files (as of the last settle).
    pub fn sums(&self) -> (u64, usize, Option<i64>) {
        (self.lag, self.pending, self.lagging.first_key_value().map(|(m, _)| *m))
    }

    /// The files found with a repair due since the last call (by path).
    pub fn take_repair_due(&mut self) -> BTreeSet<PathBuf> {
        std::mem::take(&mut self.repair_due)
    }

    /// The counters gathered by the files touched since the last call.
    pub fn take_counts(&mut self, into: &mut Vec<Count>, bytes: &mut Vec<crate::sinks::Bytes>) {
        for p in std::mem::take(&mut self.counting) {
            if let Some(t) = self.map.get_mut(&p) {
                into.append(&mut std::mem::take(&mut t.counts));
                bytes.append(&mut t.bytes);
            }
        }
    }
}
