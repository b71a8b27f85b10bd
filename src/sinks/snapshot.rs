//! The `snapshot` sink: every byte the daemon reads from a file goes into the snapshot store
//! ([`crate::snapshots`]), so that a session its agent deleted, emptied or cut short can be put
//! back byte for byte (`transcriptd restore`).
//!
//! It asks the shell for the bytes ([`crate::config::SinkNeeds::bytes`]) and keeps no
//! position: the store is idempotent by offset (bytes it holds are compared and skipped), so
//! what the daemon reads again after a crash is stored once. [`Sink::flush`] syncs the store,
//! so a checkpoint never covers bytes it has not made durable. A full disk pauses it (and so
//! the reading) until there is space; nothing is lost.

use super::{Batch, Bytes, Sink};
use crate::snapshots::{Retention, RetentionDone, Writer, WriterStats};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often the retention policy is applied (and the store measured).
pub const RETENTION_EVERY: Duration = Duration::from_secs(3600);

/// The sink.
pub struct SnapshotSink {
    dir: PathBuf,
    writer: Writer,
    /// What the metrics were last told.
    told: WriterStats,
    /// The retention pass running on the blocking pool (it reads every manifest and walks
    /// every object: never on the daemon's loop).
    pass: Option<tokio::task::JoinHandle<io::Result<RetentionDone>>>,
}

impl SnapshotSink {
    /// Opens (making) the store at `dir`.
    pub fn open(dir: &Path, retention: Retention) -> io::Result<Self> {
        Ok(SnapshotSink { dir: dir.to_path_buf(), writer: Writer::open(dir, retention)?, told: WriterStats::default(), pass: None })
    }

    /// Takes back a retention pass that has ended, and begins one when it is due (after a
    /// sync that succeeded: see [`Writer::begin_retention`]).
    async fn retention(&mut self) {
        if self.pass.as_ref().is_some_and(tokio::task::JoinHandle::is_finished) {
            let done = match self.pass.take().expect("finished").await {
                Ok(r) => r,
                Err(e) => Err(io::Error::other(format!("the retention pass stopped: {e}"))),
            };
            if let Err(e) = self.writer.end_retention(done) {
                // Nothing is lost: the pass removes only what it must, and is tried again.
                tracing::warn!(store = %self.dir.display(), error = %e, "the snapshot store's retention pass failed; it is tried again at the next");
            }
        }
        if self.pass.is_none() && self.writer.retention_due() {
            match self.writer.begin_retention() {
                Ok(pass) => self.pass = Some(tokio::task::spawn_blocking(move || pass.run(std::time::SystemTime::now()))),
                Err(e) => tracing::warn!(store = %self.dir.display(), error = %e, "the snapshot store's retention pass could not begin"),
            }
        }
    }

    /// Runs `op` on the writer until it does not fail for want of space (paused meanwhile,
    /// with a growing delay up to 5 s); any other error is returned.
    async fn waiting<T>(&mut self, mut op: impl FnMut(&mut Writer) -> io::Result<T>) -> anyhow::Result<T> {
        let mut delay = Duration::from_millis(100);
        let mut paused = false;
        let r = loop {
            match op(&mut self.writer) {
                Err(e) if super::outputs::is_out_of_space(&e) => {
                    if !paused {
                        paused = true;
                        tracing::warn!(store = %self.dir.display(), error = %e, "the snapshot store's disk is full: reading pauses until there is space (nothing is lost)");
                        super::pause(&self.key(), Some(format!("{}: {e}", self.dir.display())));
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
                r => break r,
            }
        };
        if paused {
            super::pause(&self.key(), None);
        }
        r.map_err(|e| anyhow::anyhow!("the snapshot store {}: {e}", self.dir.display()))
    }

    fn tell_metrics(&mut self) {
        use crate::telemetry::{SNAPSHOT_BYTES, SNAPSHOT_DEDUPLICATED, SNAPSHOT_RETIRED, SNAPSHOT_STORE_BYTES, SNAPSHOT_STREAMS};
        let now = self.writer.stats();
        metrics::counter!(SNAPSHOT_BYTES).increment(now.kept - self.told.kept);
        metrics::counter!(SNAPSHOT_DEDUPLICATED).increment(now.deduplicated - self.told.deduplicated);
        metrics::gauge!(SNAPSHOT_STORE_BYTES).set(now.store_bytes as f64);
        metrics::gauge!(SNAPSHOT_STREAMS).set(now.streams as f64);
        metrics::counter!(SNAPSHOT_RETIRED, "reason" => "age").increment(now.retired_by_age - self.told.retired_by_age);
        metrics::counter!(SNAPSHOT_RETIRED, "reason" => "size").increment(now.retired_by_size - self.told.retired_by_size);
        if now.over && !self.told.over {
            tracing::warn!(store = %self.dir.display(), bytes = now.store_bytes, "the snapshot store is larger than its max_bytes: what it holds was all written in the last ten minutes");
        }
        self.told = now;
    }
}

#[async_trait::async_trait]
impl Sink for SnapshotSink {
    fn key(&self) -> String {
        format!("snapshot:{}", self.dir.display())
    }

    async fn recover(&mut self, _at: Option<super::Position>) -> anyhow::Result<()> {
        // Nothing to cut back: each stream is cut to its last durable extent when it is next
        // written, and what follows the checkpoint is compared when it is read again.
        Ok(())
    }

    async fn write(&mut self, batch: &Batch) -> anyhow::Result<()> {
        for b in &batch.bytes {
            match b {
                Bytes::Read { path, id, at, bytes } => self.waiting(|w| w.append(path, *id, *at, bytes)).await?,
                Bytes::Left { path, id, how } => self.waiting(|w| w.left(path, *id, how)).await?,
            }
        }
        Ok(())
    }

    async fn flush(&mut self) -> anyhow::Result<()> {
        self.waiting(Writer::sync).await?;
        self.retention().await;
        self.tell_metrics();
        Ok(())
    }
}
