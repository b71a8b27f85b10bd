//! File descriptors: the daemon's budget under `RLIMIT_NOFILE`.
//!
//! At start the soft limit is raised to the hard one (as Go and many servers do). What is left
//! after a fixed reserve (standard streams, inotify, the runtimes, checkpoint writes, sinks,
//! directory walks, repairs, the read-aheads' own descriptors, and those of fetches under way
//! for files the loop closed meanwhile: a fetch stuck on a hung filesystem keeps its file's
//! descriptor until it returns, [`MAX_STUCK`] at most) is shared between watched files (`daemon.max_open_files`, lowered
//! with a warning if it does not fit) and metrics connections (the prometheus sink's
//! `max_connections`, likewise), so that neither can starve the other: a connection flood
//! cannot take the descriptors files and checkpoints need.

/// Descriptors kept for everything that is neither a watched file nor a metrics connection.
pub const RESERVED: u64 = 48 + MAX_STUCK as u64;

/// Fetches under way at once, slow ones included: each holds a descriptor until it returns.
pub const MAX_STUCK: usize = 64;

static GATE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Held while the daemon opens a watched file or writes a checkpoint, and while the metrics
/// listener trades its reserve descriptor for a connection (or takes it back): when no
/// descriptor is left, the one the listener frees goes to the connection that reports it
/// (`/health`: 503), not to a file open racing for it.
pub fn gate() -> std::sync::MutexGuard<'static, ()> {
    GATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (at most 2^20); returns the soft limit.
pub fn raise_limit() -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        let want = lim.rlim_max.min(1 << 20);
        if want > lim.rlim_cur {
            let new = libc::rlimit { rlim_cur: want, rlim_max: lim.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &new) == 0 {
                lim.rlim_cur = want;
            }
        }
    }
    lim.rlim_cur
}

/// The soft `RLIMIT_NOFILE` now.
pub fn limit() -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit with a valid struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    lim.rlim_cur
}

/// How many descriptors files and connections may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Watched files open at once.
    pub files: usize,
    /// Metrics connections at once.
    pub connections: usize,
}

/// The budget under `limit` for the configured maxima: connections get at most a quarter of
/// what the reserve leaves, files the rest.
pub fn budget(limit: u64, max_open_files: usize, max_connections: usize) -> Budget {
    let avail = limit.saturating_sub(RESERVED).max(4);
    let connections = max_connections.min((avail / 4).max(1) as usize);
    let files = max_open_files.min((avail - connections as u64).max(1) as usize);
    Budget { files, connections }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_fit_the_limit() {
        assert_eq!(budget(8192, 1024, 64), Budget { files: 1024, connections: 64 });
        let b = budget(128, 1024, 64);
        assert_eq!(b, Budget { files: 12, connections: 4 });
        assert!(b.files as u64 + b.connections as u64 + RESERVED <= 128);
        assert_eq!(budget(16, 1024, 64), Budget { files: 3, connections: 1 });
        assert!(raise_limit() >= limit().min(1024));
    }
}
