//! What `/health` answers: whether the daemon is doing its job right now.
//!
//! Unhealthy (503, with the reasons in the body) while:
//! - it is **starting**: the files already there are not read yet;
//! - the loop is **stuck**: one step of it (a read, a sink write, a checkpoint) has run for
//!   longer than `daemon.stall_timeout` — a sink that does not take records (a stdout pipe
//!   nobody reads), a read that blocks;
//! - **checkpoints fail**: the last checkpoint write failed (it is retried every
//!   `checkpoint_interval` until one succeeds);
//! - a **sink is paused**: its output takes no records (the file sink's disk is full); the loop
//!   waits for it, so reading pauses, and goes on once it takes them (nothing is lost);
//! - **reading fails** for want of resources: some file could not be opened or read because
//!   descriptors or memory ran out, or with an IO error (the file is retried until it can be
//!   read: no line is lost). A file the daemon may not read (permissions) is logged, not
//!   unhealthy.
//!
//! The loop reports into a shared [`Health`]; the HTTP server reads it from its own thread, so
//! `/health` answers even when the loop cannot. It outlives configuration reloads.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The daemon's health, shared between the loop and the HTTP server.
#[derive(Debug)]
pub struct Health {
    epoch: Instant,
    started: AtomicBool,
    /// Milliseconds since `epoch` at which the running step began, plus one; 0 when idle.
    busy_since: AtomicU64,
    stall_after_ms: AtomicU64,
    checkpoint_error: Mutex<Option<String>>,
    read_error: Mutex<Option<(usize, String)>>,
}

impl Health {
    /// A daemon that has not started, declared stuck after `stall_after` in one step.
    pub fn new(stall_after: Duration) -> Self {
        Health {
            epoch: Instant::now(),
            started: AtomicBool::new(false),
            busy_since: AtomicU64::new(0),
            stall_after_ms: AtomicU64::new(stall_after.as_millis() as u64),
            checkpoint_error: Mutex::new(None),
            read_error: Mutex::new(None),
        }
    }

    /// A reloaded configuration's stall timeout.
    pub fn set_stall_after(&self, d: Duration) {
        self.stall_after_ms.store(d.as_millis() as u64, Ordering::Relaxed);
    }

    /// The files found at startup are read.
    pub fn set_started(&self) {
        self.started.store(true, Ordering::Relaxed);
    }

    /// Whether startup reading is done.
    pub fn is_started(&self) -> bool {
        self.started.load(Ordering::Relaxed)
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    /// A step of the loop begins (it was woken).
    pub fn busy(&self) {
        self.busy_since.store(self.now_ms(), Ordering::Relaxed);
    }

    /// The step is over; the loop waits for the next wake-up.
    pub fn idle(&self) {
        self.busy_since.store(0, Ordering::Relaxed);
    }

    /// The outcome of a checkpoint write.
    pub fn checkpoint(&self, result: Result<(), String>) {
        *self.checkpoint_error.lock().unwrap_or_else(|e| e.into_inner()) = result.err();
    }

    /// How many files wait for a retry after failing to be read for want of resources, and
    /// one of the errors.
    pub fn reading(&self, failing: usize, example: Option<String>) {
        *self.read_error.lock().unwrap_or_else(|e| e.into_inner()) = (failing > 0).then(|| (failing, example.unwrap_or_default()));
    }

    /// `Ok` when healthy, else the reasons, one per line.
    pub fn status(&self) -> Result<(), String> {
        let mut reasons = Vec::new();
        if !self.is_started() {
            reasons.push("starting: reading the files already there".to_owned());
        }
        let since = self.busy_since.load(Ordering::Relaxed);
        let stall = self.stall_after_ms.load(Ordering::Relaxed);
        let paused = crate::sinks::paused();
        for (sink, why) in &paused {
            reasons.push(format!("sink paused: {sink}: its output takes no records ({why}); reading waits and resumes once it does, nothing is lost"));
        }
        // A step waiting for a paused sink is not stuck: that is said above.
        if since > 0 && paused.is_empty() {
            let busy = self.now_ms().saturating_sub(since);
            if busy > stall {
                reasons.push(format!("stuck: one step of the loop has run for {:.1}s (stall_timeout {:.1}s)", busy as f64 / 1e3, stall as f64 / 1e3));
            }
        }
        if let Some(e) = self.checkpoint_error.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            reasons.push(format!("checkpoint writes fail: {e}"));
        }
        if let Some((n, e)) = self.read_error.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            reasons.push(format!("reading fails: {n} file(s) wait to be retried: {e}"));
        }
        if reasons.is_empty() {
            Ok(())
        } else {
            Err(reasons.join("\n") + "\n")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons() {
        let h = Health::new(Duration::from_millis(20));
        assert!(h.status().unwrap_err().contains("starting"));
        h.set_started();
        assert_eq!(h.status(), Ok(()));
        h.busy();
        assert_eq!(h.status(), Ok(()));
        std::thread::sleep(Duration::from_millis(40));
        assert!(h.status().unwrap_err().contains("stuck"));
        h.idle();
        h.checkpoint(Err("disk full".into()));
        h.reading(2, Some("too many open files".into()));
        let e = h.status().unwrap_err();
        assert!(e.contains("checkpoint writes fail: disk full") && e.contains("2 file(s)"), "{e}");
        h.checkpoint(Ok(()));
        h.reading(0, None);
        assert_eq!(h.status(), Ok(()));
    }
}
