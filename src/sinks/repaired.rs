//! The `repaired_files` sink: the repaired copies the repair stage makes due, written under
//! `dir` (the source's relative path kept) by the repair driver (`repair::repair_file`, handed in
//! as a [`Repairer`]: sinks do not know how to repair), with its guarantees unchanged — one
//! snapshot descriptor, the idle and identity guards, an atomic write with the original's
//! owner and mode, the rejects file.
//!
//! **Nothing lost, nothing written twice differently.** A repair made due ([`Due`], in a step's
//! [`Batch::repairs`]) is first appended to a journal in the state directory
//! (`repaired-<hash of dir>/journal.jsonl`) and synced, and only then started on the blocking
//! pool, beside tailing. When it is done its record (`repaired`) is handed to the daemon
//! ([`Sink::take_records`]), which sends it to every sink in its next step, and a `done` line is
//! appended to the journal in the same step: the checkpoint that covers the record covers the
//! `done` line, or neither. The sink's position in the checkpoint is the journal's length. After
//! a crash ([`Sink::recover`]) every due repair of the journal whose `done` line the checkpoint
//! does not cover is run again: a repair killed half way, or done but whose record the
//! checkpoint did not cover (a record sink cut back to the checkpoint lost it), is written again
//! — the same bytes for the same input, since repair is deterministic — and reported once (on an
//! exclusive stdout; at least once otherwise). A due line written after the last checkpoint is
//! run too: the request was made, and its record is not in any sink. The journal is rewritten
//! at start with the repairs still due only.

use super::outputs::Position;
use super::record::Record;
use super::{Batch, Sink};
use crate::transcript::repair::OrphanPolicy;
use crate::transcript::Format;
use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A repair the repair stage made due.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Due {
    /// Its number in the journal (the sink gives it).
    #[serde(default)]
    pub seq: u64,
    /// The transcript.
    pub file: PathBuf,
    /// Its path below its source's root: the copy's path below `dir`.
    pub rel: PathBuf,
    /// Its format, when known.
    pub format: Option<Format>,
    /// The repair stage's orphan policy.
    pub orphans: OrphanPolicy,
    /// The line limit.
    pub max_line_bytes: usize,
}

/// Runs a due repair into the directory given, and gives its record (none: nothing to report,
/// or it failed — the repairer says why in the log). Called on the blocking pool.
pub type Repairer = Arc<dyn Fn(&Due, &Path) -> Option<Record> + Send + Sync>;

/// One line of the journal.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Entry {
    /// A repair made due.
    Due(Due),
    /// The repair with this number is done, and its record was handed on.
    Done(u64),
}

/// A repair that ended: its record, or `None` if the repairer panicked (then it stays due).
type Ended = (Due, Option<Option<Record>>);

/// The `repaired_files` sink. See the module docs.
pub struct RepairedFiles {
    dir: PathBuf,
    journal_path: PathBuf,
    journal: File,
    /// Journal lines not written yet (`done` lines, written at the next flush).
    buf: Vec<u8>,
    /// The journal's length after the last flush.
    flushed: u64,
    next_seq: u64,
    repairer: Repairer,
    wake: Arc<tokio::sync::Notify>,
    /// Repairs running on the blocking pool; each sends its end on `ended` (sent before the
    /// wake-up, so a woken daemon finds it), then wakes the daemon.
    running: usize,
    ended_tx: tokio::sync::mpsc::UnboundedSender<Ended>,
    ended: tokio::sync::mpsc::UnboundedReceiver<Ended>,
    /// Files with a repair running, and the repairs of them waiting for it, in order.
    busy: HashMap<PathBuf, VecDeque<Due>>,
    /// Records of repairs done, not taken yet.
    done: Vec<Record>,
}

impl std::fmt::Debug for RepairedFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RepairedFiles").field("dir", &self.dir).field("journal", &self.journal_path).field("running", &self.running).finish()
    }
}

fn read_journal(path: &Path) -> anyhow::Result<Vec<u8>> {
    match std::fs::read(path) {
        Ok(b) => Ok(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// The journal's lines, up to the last complete one (a line torn by a crash is not one).
fn entries(bytes: &[u8]) -> impl Iterator<Item = (u64, Entry)> + '_ {
    let mut at = 0u64;
    bytes.split_inclusive(|&b| b == b'\n').filter(|l| l.ends_with(b"\n")).filter_map(move |l| {
        at += l.len() as u64;
        Some((at, serde_json::from_slice::<Entry>(l).ok()?))
    })
}

impl RepairedFiles {
    /// The sink writing under `dir`, its journal under `state_dir`; `wake` is notified when a
    /// repair is done (its record is waiting in [`Sink::take_records`]).
    pub fn open(dir: &Path, state_dir: &Path, repairer: Repairer, wake: Arc<tokio::sync::Notify>) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let jdir = state_dir.join(format!("repaired-{:016x}", xxhash_rust::xxh3::xxh3_64(dir.as_os_str().as_encoded_bytes())));
        std::fs::create_dir_all(&jdir).with_context(|| format!("creating {}", jdir.display()))?;
        let journal_path = jdir.join("journal.jsonl");
        let journal = OpenOptions::new().create(true).append(true).open(&journal_path).with_context(|| format!("opening {}", journal_path.display()))?;
        let flushed = journal.metadata()?.len();
        let (ended_tx, ended) = tokio::sync::mpsc::unbounded_channel();
        Ok(RepairedFiles {
            dir: dir.to_path_buf(),
            journal_path,
            journal,
            buf: Vec::new(),
            flushed,
            next_seq: 1,
            repairer,
            wake,
            running: 0,
            ended_tx,
            ended,
            busy: HashMap::new(),
            done: Vec::new(),
        })
    }

    fn line(e: &Entry) -> Vec<u8> {
        let mut l = serde_json::to_vec(e).expect("a journal entry serializes");
        l.push(b'\n');
        l
    }

    /// Starts `due` now, or after the repair of its file that is running.
    fn start(&mut self, due: Due) {
        if let Some(waiting) = self.busy.get_mut(&due.file) {
            waiting.push_back(due);
            return;
        }
        self.busy.insert(due.file.clone(), VecDeque::new());
        tracing::info!(file = %due.file.display(), "repair started");
        let (repairer, dir, wake, tx) = (self.repairer.clone(), self.dir.clone(), self.wake.clone(), self.ended_tx.clone());
        self.running += 1;
        tokio::task::spawn_blocking(move || {
            let record = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| repairer(&due, &dir))).ok();
            // The receiver lives as long as the sink; a sink dropped meanwhile runs it again
            // after its next start (the journal still holds it).
            let _ = tx.send((due, record));
            wake.notify_one();
        });
    }

    /// Takes the repairs that are done: their records, and their `done` lines for the journal.
    fn reap(&mut self) {
        while let Ok(ended) = self.ended.try_recv() {
            self.finished(ended);
        }
    }

    /// A repair task ended: its `done` line and record, and the next repair of its file.
    fn finished(&mut self, (due, record): Ended) {
        self.running -= 1;
        match record {
            Some(record) => {
                self.buf.extend_from_slice(&Self::line(&Entry::Done(due.seq)));
                self.done.extend(record);
            }
            // It stays due: it is tried again after a restart.
            None => tracing::warn!(file = %due.file.display(), "a repair task panicked"),
        }
        let mut waiting = self.busy.remove(&due.file).unwrap_or_default();
        if let Some(next) = waiting.pop_front() {
            self.start(next);
            if let Some(q) = self.busy.get_mut(&due.file) {
                q.extend(waiting);
            }
        }
    }
}

#[async_trait::async_trait]
impl Sink for RepairedFiles {
    fn key(&self) -> String {
        format!("repaired_files:{}", self.dir.display())
    }

    async fn recover(&mut self, at: Option<Position>) -> anyhow::Result<()> {
        let bytes = read_journal(&self.journal_path)?;
        let meta = self.journal.metadata()?;
        // `done` lines count only as far as the checkpoint covers the journal: a record after
        // it was cut off the record sinks with them. A checkpoint naming another journal (taken
        // before the journal was last rewritten) covers no `done` line of this one.
        let covered = at.filter(|p| p.dev == meta.dev() && p.ino == meta.ino()).map_or(0, |p| p.len);
        let mut due: Vec<Due> = Vec::new();
        let mut done = std::collections::HashSet::new();
        for (end, e) in entries(&bytes) {
            match e {
                Entry::Due(d) => due.push(d),
                Entry::Done(seq) if end <= covered => drop(done.insert(seq)),
                Entry::Done(_) => {}
            }
        }
        due.retain(|d| !done.contains(&d.seq));
        // The journal afresh: the repairs still due, renumbered.
        let mut fresh = Vec::new();
        for (i, d) in due.iter_mut().enumerate() {
            d.seq = i as u64 + 1;
            fresh.extend_from_slice(&Self::line(&Entry::Due(d.clone())));
        }
        super::atomic::write_file(&self.journal_path, &fresh, None).with_context(|| format!("writing {}", self.journal_path.display()))?;
        self.journal = OpenOptions::new().append(true).open(&self.journal_path).with_context(|| format!("opening {}", self.journal_path.display()))?;
        self.flushed = fresh.len() as u64;
        self.next_seq = due.len() as u64 + 1;
        if !due.is_empty() {
            tracing::info!(repairs = due.len(), "repairs due before the restart run again");
        }
        for d in due {
            self.start(d);
        }
        Ok(())
    }

    async fn write(&mut self, batch: &Batch) -> anyhow::Result<()> {
        if batch.repairs.is_empty() {
            return Ok(());
        }
        // Durable before it starts: a repaired copy is never written for a request the journal
        // does not hold.
        let mut lines = std::mem::take(&mut self.buf);
        let mut started = Vec::new();
        for d in &batch.repairs {
            let d = Due { seq: self.next_seq, ..d.clone() };
            self.next_seq += 1;
            lines.extend_from_slice(&Self::line(&Entry::Due(d.clone())));
            started.push(d);
        }
        self.journal.write_all(&lines).with_context(|| format!("writing {}", self.journal_path.display()))?;
        self.journal.sync_data().with_context(|| format!("syncing {}", self.journal_path.display()))?;
        self.flushed = self.journal.metadata()?.len();
        for d in started {
            self.start(d);
        }
        Ok(())
    }

    async fn flush(&mut self) -> anyhow::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let lines = std::mem::take(&mut self.buf);
        self.journal.write_all(&lines).with_context(|| format!("writing {}", self.journal_path.display()))?;
        self.journal.sync_data().with_context(|| format!("syncing {}", self.journal_path.display()))?;
        self.flushed = self.journal.metadata()?.len();
        Ok(())
    }

    fn position(&self) -> Option<Position> {
        let m = self.journal.metadata().ok()?;
        Some(Position { dev: m.dev(), ino: m.ino(), len: self.flushed, exclusive: true, tail_hash: None })
    }

    fn take_records(&mut self) -> Vec<Record> {
        self.reap();
        std::mem::take(&mut self.done)
    }

    async fn settle(&mut self) -> anyhow::Result<()> {
        while self.running > 0 {
            let Some(ended) = self.ended.recv().await else { break };
            self.finished(ended);
        }
        Ok(())
    }
}
