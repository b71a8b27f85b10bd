//! `transcriptd run`: the daemon. Tails transcript and event files, runs each through the
//! configured stages (the same pure state machines as the batch verbs), and sends the results
//! to the sinks.
//!
//! One event loop owns every file's state: filesystem events (inotify via `notify`, or polling)
//! and timers (grace periods, repairs, checkpoints, rescans, retries) wake it; it applies what
//! is new, writes the records to the sinks, flushes them, and checkpoints. A single owner keeps
//! the order of each file's records, needs no locks, and lets 10,000 idle files cost nothing
//! but their entry in a map. The loop reads no watched file itself but in two rare cases (the
//! rest of a file that left its path with more than [`fetch::MAX_REST`] unread, `Tailed::read`;
//! the identity check of a file seen under a new name before its fetch found it gone,
//! `Tailed::same_file_at`): each look at a file (stat, open, identity checks, the read of what
//! is new, at most 1 MiB) is a [`fetch`] on tokio's blocking pool, each walk of a directory or
//! look at a path an event names a [`scan`], and the loop applies their answers as one more
//! kind of event, so a file whose reads hang holds up only itself and the loop always answers
//! events, signals and `/health` (see [`health`]). A large backlog is read and parsed ahead on
//! reader threads ([`crate::sources::backlog`], both cores), and the loop takes the parsed
//! reads from their streams, applying at most [`FILE_BUDGET`] bytes of them per step in file
//! order.
//!
//! [`start`] builds everything that can fail (sinks, checkpoint, watches: [`build`]) without
//! reading; [`Started::run`] runs until the shutdown future completes. The shell (`cli/run.rs`)
//! uses the split to refuse a reload whose configuration cannot start and keep the running one.

pub mod build;
pub mod checkpoint;
pub mod fds;
pub mod fetch;
pub mod files;
pub mod health;
pub mod http;
pub mod identity;
pub mod lock;
pub mod open;
pub mod scan;
pub mod tail;
pub mod tap;
pub mod watch;

use crate::config::{ReadFrom, RepairMode, RepairRequest, Resolved, SourceKind};
use crate::sinks::record::{now, Record};
use crate::sinks::{Batch, Count, Gauges};
use crate::telemetry;
use anyhow::Context;
use health::Health;
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tail::{Kind, Polled, Tailed};
use tokio_stream::StreamExt;
use tracing::{debug, info, warn};

use build::{compile, repair_record, Sinks, Source, StageSettings};

/// Bytes one file reads at most per poll, so that files share a step.
pub const FILE_BUDGET: u64 = 8 << 20;

/// A file that could not be read, waiting to be tried again.
#[derive(Debug)]
struct Retry {
    at: Instant,
    delay: Duration,
    /// For want of resources (descriptors, memory) or an IO error: the daemon is unhealthy.
    resource: bool,
    error: String,
}

/// The daemon's state.
struct Daemon {
    cfg: Resolved,
    stages: StageSettings,
    sources: Vec<Source>,
    files: files::Files,
    /// Which path each tracked inode is read under.
    by_id: HashMap<(u64, u64), PathBuf>,
    /// Paths not read (not regular files, links), with what they were, so that each is warned
    /// about once.
    skipped: HashMap<PathBuf, (u64, u64)>,
    /// Files with more to read than a step's budget allowed (and files found at startup).
    backlog: VecDeque<PathBuf>,
    queued: HashSet<PathBuf>,
    /// Files whose last read failed.
    retry: HashMap<PathBuf, Retry>,
    /// Streams of the backlogs read ahead, by reader, and the file each reader reads.
    readers: tokio_stream::StreamMap<u64, tokio_stream::wrappers::ReceiverStream<crate::sources::backlog::Item>>,
    reader_path: HashMap<u64, PathBuf>,
    /// Fetches under way on the blocking pool (see [`fetch`]), and when each started, by
    /// number.
    fetches: tokio::task::JoinSet<(PathBuf, u64, std::io::Result<fetch::Outcome>)>,
    under_way: std::collections::BTreeMap<u64, UnderWay>,
    /// Scans under way on the blocking pool (see [`scan`]), and whether one is a rescan.
    scans: tokio::task::JoinSet<scan::Scanned>,
    rescanning: bool,
    /// Reads of `pending.json` under way, by directory, and the files whose deadline waits for
    /// each.
    paused_reads: tokio::task::JoinSet<(PathBuf, HashSet<String>)>,
    paused_waiting: HashMap<PathBuf, Vec<PathBuf>>,
    /// Files the running step opened (a step that takes up thousands of files at once closes
    /// them again beyond half of `max_open`).
    opened_in_step: usize,
    /// Files open at once (`max_open_files`, within the descriptor budget).
    max_open: usize,
    sinks: Sinks,
    /// Repairs running on the blocking pool, and their files.
    repairs: tokio::task::JoinSet<(PathBuf, crate::repair::Report)>,
    repairing: HashSet<PathBuf>,
    /// Repairs made due in the running step, for the `repaired_files` sink.
    due: Vec<crate::sinks::repaired::Due>,
    /// Records and counters of the running step, for the sinks.
    outbox: Vec<Record>,
    counts: Vec<Count>,
    /// The bytes read this step, for the sinks that keep them.
    bytes: Vec<crate::sinks::Bytes>,
    gauges: Option<Gauges>,
    watch: watch::Watch,
    buf: Vec<u8>,
    dirty: bool,
    last_checkpoint: Instant,
    last_rescan: Instant,
    /// How long the last checkpoint took to build and store (see [`Daemon::checkpoint_every`]).
    checkpoint_cost: Duration,
    /// When quiet files were last looked for, to give their memory back.
    last_evict_sweep: Instant,
    checkpoint_failing: bool,
    health: Arc<Health>,
    /// Those who watch: `/tap` clients get each step's records after the sinks, `/stats`
    /// readers a snapshot of the files (see [`tap`]).
    tap: Arc<tap::Tap>,
    /// The state directory's lock, held while the daemon runs.
    _lock: lock::StateLock,
}

/// Removes the temporary files a stopped write left in the state directory and its
/// directories (the http spools', the repair journals'): the lock is held, so none is being
/// written ([`crate::sinks::atomic::sweep`]).
fn sweep_state_dir(state_dir: &Path) {
    let mut dirs = vec![state_dir.to_path_buf()];
    if let Ok(rd) = std::fs::read_dir(state_dir) {
        dirs.extend(rd.filter_map(Result::ok).filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()));
    }
    for d in dirs {
        if let Err(e) = crate::sinks::atomic::sweep(&d, None, true) {
            debug!(dir = %d.display(), error = %e, "cannot look for stale temporary files");
        }
    }
}

/// A daemon built and ready to run.
pub struct Started {
    d: Daemon,
    rx: tokio::sync::mpsc::UnboundedReceiver<watch::Change>,
}

/// Builds the daemon: the metrics recorder installed, sinks opened and recovered to the
/// checkpoint, files restored from it, roots watched. Reads no file yet. Its records also go
/// to `tap`'s clients.
pub async fn start(cfg: Resolved, health: Arc<Health>, tap: Arc<tap::Tap>) -> anyhow::Result<Started> {
    // Counters count from the first byte read.
    telemetry::install();
    let stages = StageSettings::from(&cfg)?;
    let sources = compile(&cfg)?;
    let state_dir = &cfg.config.daemon.state_dir;
    std::fs::create_dir_all(state_dir).with_context(|| format!("creating state directory {}", state_dir.display()))?;
    // One daemon per state directory; then what a crash of the last one left is taken away.
    let lock = lock::acquire(state_dir)?;
    sweep_state_dir(state_dir);
    let cp = checkpoint::load(state_dir)?;
    let sinks = Sinks::open(&cfg, &cp, &stages.registry).await?;
    let budget = fds::budget(fds::limit(), cfg.config.daemon.max_open_files, cfg.metrics.as_ref().map_or(0, |m| m.max_connections + m.tap_clients));
    if budget.files < cfg.config.daemon.max_open_files {
        warn!(
            max_open_files = cfg.config.daemon.max_open_files,
            using = budget.files,
            nofile = fds::limit(),
            "max_open_files does not fit the descriptor limit; fewer files are kept open (raise LimitNOFILE / ulimit -n)"
        );
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<watch::Change>();
    let roots: Vec<PathBuf> = sources.iter().flat_map(|s| s.roots.clone()).collect();
    let watch = watch::start(&roots, cfg.config.daemon.watch, cfg.config.daemon.poll_interval, tx)?;
    let mut d = Daemon {
        stages,
        sources,
        files: files::Files::default(),
        by_id: HashMap::new(),
        skipped: HashMap::new(),
        backlog: VecDeque::new(),
        queued: HashSet::new(),
        retry: HashMap::new(),
        readers: tokio_stream::StreamMap::new(),
        reader_path: HashMap::new(),
        fetches: tokio::task::JoinSet::new(),
        under_way: std::collections::BTreeMap::new(),
        scans: tokio::task::JoinSet::new(),
        rescanning: false,
        paused_reads: tokio::task::JoinSet::new(),
        paused_waiting: HashMap::new(),
        opened_in_step: 0,
        max_open: budget.files.max(1),
        sinks,
        repairs: tokio::task::JoinSet::new(),
        repairing: HashSet::new(),
        due: Vec::new(),
        outbox: Vec::new(),
        counts: Vec::new(),
        bytes: Vec::new(),
        gauges: None,
        watch,
        buf: Vec::with_capacity(crate::sources::READ_CHUNK),
        dirty: false,
        last_checkpoint: Instant::now(),
        last_rescan: Instant::now(),
        last_evict_sweep: Instant::now(),
        checkpoint_cost: Duration::ZERO,
        checkpoint_failing: false,
        health,
        tap,
        cfg,
        _lock: lock,
    };
    d.restore(&cp);
    d.watch.ensure_roots();
    Ok(Started { d, rx })
}

/// Builds and runs the daemon until `shutdown` completes. Returns after the final checkpoint.
pub async fn run(cfg: Resolved, shutdown: impl std::future::Future<Output = ()>, health: Arc<Health>) -> anyhow::Result<()> {
    start(cfg, health, tap::Tap::new()).await?.run(shutdown).await
}

impl Started {
    /// Runs until `shutdown` completes: reads what is there, then follows events and timers.
    /// Returns after the final checkpoint.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
        let Started { mut d, mut rx } = self;
        d.health.busy();
        // A checkpoint before anything is read: records written after it and not covered by a
        // later checkpoint are cut off after a crash, and written again.
        d.checkpoint().await?;
        // Files known from the checkpoint may have grown while the daemon was down; files found
        // now are read from their start (or end). All of it over as many steps as it takes.
        let restored: Vec<PathBuf> = d.files.keys().cloned().collect();
        for p in restored {
            d.enqueue(&p);
        }
        d.rescan(true);
        let mut ready = false;
        let wake = d.sinks.wake.clone();
        tokio::pin!(shutdown);
        loop {
            if !ready && d.backlog.is_empty() && d.reader_path.is_empty() && d.fetches.is_empty() && d.scans.is_empty() {
                ready = true;
                d.health.set_started();
                info!(files = d.files.len(), roots = ?d.watch.roots(), "watching");
            }
            d.health.idle();
            d.files.settle();
            let deadline = d.next_deadline();
            // Files waiting for a free fetch slot are fetched at once: the timer wheel rounds a
            // deadline of "now" up to its next millisecond tick, which cost every step of a
            // large read a sleep.
            let backlog = !d.backlog.is_empty() && fetch_slot(&d.under_way);
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                change = rx.recv() => {
                    d.health.busy();
                    d.new_step();
                    let Some(change) = change else { break };
                    let mut changes = vec![change];
                    while let Ok(c) = rx.try_recv() {
                        changes.push(c);
                    }
                    d.on_changes(changes);
                }
                Some(done) = d.repairs.join_next(), if !d.repairs.is_empty() => {
                    d.health.busy();
                    d.new_step();
                    d.repaired(done);
                }
                Some(done) = d.fetches.join_next(), if !d.fetches.is_empty() => {
                    d.health.busy();
                    d.new_step();
                    d.fetched(done)?;
                    // Those back meanwhile too, in the same step (one write to the sinks, one
                    // round of timers).
                    while let Some(done) = d.fetches.try_join_next() {
                        d.fetched(done)?;
                    }
                }
                Some(done) = d.paused_reads.join_next(), if !d.paused_reads.is_empty() => {
                    d.health.busy();
                    d.new_step();
                    d.paused_read(done);
                }
                Some(done) = d.scans.join_next(), if !d.scans.is_empty() => {
                    d.health.busy();
                    d.new_step();
                    d.scanned(done)?;
                }
                Some((id, item)) = d.readers.next(), if !d.readers.is_empty() => {
                    d.health.busy();
                    d.new_step();
                    d.read_ahead(id, item)?;
                }
                () = wake.notified() => {
                    d.health.busy();
                    d.new_step();
                    let records = d.sinks.take_records();
                    d.emit(records);
                }
                () = d.tap.stats_asked() => {
                    d.health.busy();
                    d.new_step();
                }
                () = tokio::task::yield_now(), if backlog => {
                    d.health.busy();
                    d.new_step();
                }
                _ = tokio::time::sleep_until(deadline.into()), if !backlog => {
                    d.health.busy();
                    d.new_step();
                }
            }
            d.timers()?;
            d.deliver().await?;
            if d.dirty && d.last_checkpoint + d.checkpoint_every() <= Instant::now() {
                d.checkpoint().await?;
            }
        }
        d.health.busy();
        info!("shutting down: flushing sinks and writing checkpoints");
        // Repairs under way finish (their output is written atomically either way) and report.
        while let Some(done) = d.repairs.join_next().await {
            d.repaired(done);
        }
        d.sinks.settle().await?;
        let records = d.sinks.take_records();
        d.emit(records);
        d.deliver().await?;
        let r = d.checkpoint().await;
        d.health.idle();
        r
    }
}

/// The clock reached `now` for `t`: its records; whether the checkpoint must say so.
fn timed_out(t: &mut Tailed, now: Instant, paused: HashSet<String>, records: &mut Vec<Record>) -> bool {
    let mark = records.len();
    let was_done = t.tail_done;
    let owed = t.owed();
    t.handle_timeout(now, paused, records);
    t.announce(records, mark);
    // A repair made due settles what the checkpoint says the file owed.
    records.len() > mark || t.tail_done != was_done || t.owed() != owed
}

/// A fetch under way.
#[derive(Debug)]
struct UnderWay {
    started: Instant,
    path: PathBuf,
    /// Whether its hanging was logged.
    warned: bool,
}

/// Whether another fetch may start: fewer than [`fetch::MAX_FETCHES`] under way that are not
/// slow yet, and fewer than [`fds::MAX_STUCK`] in all.
fn fetch_slot(under_way: &std::collections::BTreeMap<u64, UnderWay>) -> bool {
    let now = Instant::now();
    under_way.len() < fds::MAX_STUCK && under_way.values().filter(|u| now.duration_since(u.started) < fetch::SLOW).count() < fetch::MAX_FETCHES
}

/// Whether an error reading a file is the daemon's trouble (descriptors, memory, IO), not the
/// file's (permissions).
fn is_resource_error(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::ENOBUFS | libc::EIO))
}

/// Where a file that left its path went.
enum Moved<'p> {
    /// What its fetch found: another name of its directory with its inode, and whether that is
    /// this very file.
    Found(Option<(PathBuf, bool)>),
    /// Its inode was seen under this name.
    To(&'p Path),
}

impl Daemon {
    fn restore(&mut self, cp: &checkpoint::Checkpoint) {
        for f in &cp.files {
            let Some(si) = self.watched_source(&f.path) else { continue };
            let src = &self.sources[si];
            let kind = if src.kind == SourceKind::Events { Kind::Events } else { Kind::Transcript(src.format) };
            let mut t = Tailed::new(f.path.clone(), si, src.rel(&f.path), kind, self.stages.spec.clone(), f.offset);
            t.restore(f);
            self.by_id.insert((f.dev, f.ino), f.path.clone());
            self.files.insert(f.path.clone(), t);
        }
    }

    fn new_step(&mut self) {
        self.opened_in_step = 0;
    }

    fn watched_source(&self, p: &Path) -> Option<usize> {
        self.sources.iter().position(|s| s.matches(p))
    }

    fn enqueue(&mut self, p: &Path) {
        if self.queued.insert(p.to_path_buf()) {
            self.backlog.push_back(p.to_path_buf());
        }
    }

    /// Warns once about a path that is not read.
    fn skip(&mut self, p: &Path, m: &std::fs::Metadata, why: &dyn std::fmt::Display) {
        let id = open::id(m);
        if self.skipped.get(p) != Some(&id) {
            warn!(file = %p.display(), "skipped: {why}");
            self.skipped.insert(p.to_path_buf(), id);
        }
    }

    /// Walks the roots for matching files (`startup` applies `read_from`), off the loop
    /// ([`scan`]), and looks at known files that vanished without an event; re-watches roots
    /// that were recreated. One rescan at a time: while one is under way (a stuck directory),
    /// none is started.
    fn rescan(&mut self, startup: bool) {
        self.last_rescan = Instant::now();
        self.watch.ensure_roots();
        if self.rescanning {
            return;
        }
        self.rescanning = true;
        let roots = self.watch.roots().to_vec();
        let known = (self.files.keys().cloned().collect(), self.skipped.keys().cloned().collect());
        self.start_scan(scan::Job { walk: roots.iter().map(|r| (r.clone(), r.clone())).collect(), known: Some(known), startup, ..scan::Job::default() });
    }

    /// Takes up the files below `dir` (not through links), once a scan has walked it.
    fn search(&mut self, dir: &Path) {
        let Some(root) = self.watch.roots().iter().find(|r| dir.starts_with(r)).cloned() else { return };
        self.start_scan(scan::Job { walk: vec![(dir.to_path_buf(), root)], ..scan::Job::default() });
    }

    /// Takes up `paths` (named by events), once a scan has looked at them.
    fn look_at(&mut self, paths: Vec<PathBuf>) {
        if !paths.is_empty() {
            self.start_scan(scan::Job { paths, ..scan::Job::default() });
        }
    }

    fn start_scan(&mut self, mut job: scan::Job) {
        job.roots = self.watch.roots().to_vec();
        let rescan = job.known.is_some();
        self.scans.spawn_blocking(move || {
            // A panic is as good as nothing found (and a rescan may start again).
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| scan::scan(job))).unwrap_or_else(|_| scan::Scanned { rescan, ..scan::Scanned::default() })
        });
    }

    /// A scan is back: what it found is taken up.
    fn scanned(&mut self, done: Result<scan::Scanned, tokio::task::JoinError>) -> anyhow::Result<()> {
        let s = match done {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "a scan task failed");
                return Ok(());
            }
        };
        if s.rescan {
            self.rescanning = false;
        }
        let mut records = Vec::new();
        for p in &s.gone {
            self.poll_path(p);
        }
        for p in &s.gone_skipped {
            self.skipped.remove(p);
        }
        for e in s.entries {
            if e.walked && self.files.contains_key(&e.path) {
                continue;
            }
            if e.link_to_dir {
                self.skip(&e.path, &e.meta, &"a symlinked directory; symlinks are not followed");
            } else if e.meta.is_dir() {
                if self.watch.under_root(&e.path) && !self.files.contains_key(&e.path) {
                    // Watched before it is searched: what is created in it from now on makes
                    // an event, what was created before is found.
                    self.watch.add_dir(&e.path);
                    self.search(&e.path);
                }
            } else {
                self.discover(&e.path, &e.meta, e.linked, s.startup, &mut records)?;
            }
        }
        self.emit(records);
        Ok(())
    }

    /// Takes up a new path (`meta`: its `lstat`; `linked`: a directory between its root and it
    /// is a symbolic link), if a source wants it and it is a regular file reached without
    /// links.
    fn discover(&mut self, p: &Path, meta: &std::fs::Metadata, linked: bool, startup: bool, records: &mut Vec<Record>) -> anyhow::Result<()> {
        if self.files.contains_key(p) {
            self.poll_path(p);
            return Ok(());
        }
        let Some(si) = self.watched_source(p) else { return Ok(()) };
        if meta.is_dir() {
            return Ok(());
        }
        let refused = open::check(meta).err().or_else(|| linked.then_some(open::Refused::LinkedDirectory));
        if let Some(why) = refused {
            self.skip(p, meta, &why);
            return Ok(());
        }
        self.skipped.remove(p);
        let id = open::id(meta);
        // The inode is tracked under another name: renamed here, a hard link, or a reused inode.
        if let Some(old) = self.by_id.get(&id).cloned().filter(|old| old != p) {
            if std::fs::symlink_metadata(&old).is_ok_and(|m| open::id(&m) == id) {
                self.skip(p, meta, &format_args!("a hard link to {}, which is read under that name", old.display()));
                return Ok(());
            }
            let mark = records.len();
            self.vanished(&old, Moved::To(p), records, mark)?;
            if self.files.contains_key(p) {
                return Ok(());
            }
        }
        let src = &self.sources[si];
        let kind = if src.kind == SourceKind::Events { Kind::Events } else { Kind::Transcript(src.format) };
        let skip = if startup && src.read_from == ReadFrom::End { meta.len() } else { 0 };
        let mut t = Tailed::new(p.to_path_buf(), si, src.rel(p), kind, self.stages.spec.clone(), skip);
        // A file already quiet when found has nothing to wait for: reading it (over as many
        // steps as it takes) is not growth.
        let quiet = self.stages.spec.quiet;
        if meta.modified().ok().and_then(|m| m.elapsed().ok()).is_some_and(|age| age >= quiet) {
            t.found_quiet(quiet);
        }
        self.files.insert(p.to_path_buf(), t);
        self.poll_path(p);
        Ok(())
    }

    /// Polls the file read as `p`: a fetch of what is new starts on the blocking pool (or the
    /// file waits for a slot; or, if a fetch is under way, it is polled again once that is
    /// back). Its outcome is applied by [`Daemon::fetched`].
    fn poll_path(&mut self, p: &Path) {
        let Some(t) = self.files.get_mut(p) else { return };
        if !t.fetching() && !fetch_slot(&self.under_way) {
            self.enqueue(p);
            return;
        }
        let Some((gen, req)) = t.begin_poll() else { return };
        self.under_way.insert(gen, UnderWay { started: Instant::now(), path: p.to_path_buf(), warned: false });
        let path = p.to_path_buf();
        self.fetches.spawn_blocking(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fetch::fetch(req)))
                .unwrap_or_else(|_| Err(std::io::Error::other("the fetch panicked")));
            (path, gen, outcome)
        });
    }

    /// A fetch is back: what it found is applied to its file (if the file still waits for
    /// it), the records and counters of what it read queued for the sinks.
    fn fetched(&mut self, done: Result<(PathBuf, u64, std::io::Result<fetch::Outcome>), tokio::task::JoinError>) -> anyhow::Result<()> {
        let (p, gen, outcome) = match done {
            Ok(d) => d,
            Err(e) => {
                // Cannot happen (the fetch catches its panics): its file stays waiting.
                warn!(error = %e, "a fetch task failed");
                return Ok(());
            }
        };
        if let Some(u) = self.under_way.remove(&gen).filter(|u| u.warned) {
            info!(file = %u.path.display(), after = ?u.started.elapsed(), "a hung read returned");
        }
        let Some(t) = self.files.get_mut(&p) else { return Ok(()) };
        let mut records = Vec::new();
        let was_open = t.is_open();
        let id_before = t.id();
        let Some(polled) = t.finish_poll(gen, outcome, &mut records) else { return Ok(()) };
        self.dirty = true;
        if !was_open && t.is_open() {
            self.opened_in_step += 1;
            if self.opened_in_step > self.max_open / 2 {
                // Reopened on its next event.
                t.close();
            }
        }
        let again = t.take_again();
        let id = t.id();
        if let Some((reader, stream)) = t.take_stream() {
            self.readers.insert(reader, stream);
            self.reader_path.insert(reader, p.clone());
        }
        match polled {
            Ok((state, _)) => {
                if let Some(id) = id {
                    if let Some(before) = id_before.filter(|b| *b != id) {
                        // The same file under another device number (a remount).
                        info!(file = %p.display(), from_dev = before.0, to_dev = id.0, "the file's device number changed (a remount?): same inode and content, read on where it was");
                        if self.by_id.get(&before) == Some(&p) {
                            self.by_id.remove(&before);
                        }
                    }
                    self.by_id.insert(id, p.clone());
                }
                if let Some(r) = self.retry.remove(&p) {
                    info!(file = %p.display(), after = %r.error, "file readable again");
                }
                match state {
                    Polled::Ok | Polled::More => {
                        if let Some(t) = self.files.get_mut(&p) {
                            t.announce(&mut records, 0);
                        }
                        if state == Polled::More || again {
                            // Behind the files already waiting for a slot.
                            self.enqueue(&p);
                        }
                    }
                    Polled::Gone(moved) | Polled::Replaced(moved) => self.vanished(&p, Moved::Found(moved), &mut records, 0)?,
                }
            }
            Err(e) => {
                // Never lost: tried again until it can be read.
                t.close();
                let resource = is_resource_error(&e);
                let first = !self.retry.contains_key(&p);
                let r = self.retry.entry(p.clone()).or_insert(Retry { at: Instant::now(), delay: Duration::from_millis(50), resource, error: String::new() });
                let changed = first || r.error != e.to_string();
                r.delay = (r.delay * 2).min(if resource { Duration::from_secs(2) } else { Duration::from_secs(30) });
                r.at = Instant::now() + r.delay;
                r.resource = resource;
                r.error = e.to_string();
                self.report_reading();
                if changed {
                    warn!(file = %p.display(), error = %e, "cannot read file; it is retried until it can be read");
                }
            }
        }
        self.emit(records);
        Ok(())
    }

    /// Reads of a backlog read ahead by `reader` (this one, and as many more as have come, up
    /// to [`FILE_BUDGET`] bytes: the rest of the step is for the other files): applied in file
    /// order. When the read-ahead ends, the file is polled for what is left.
    fn read_ahead(&mut self, reader: u64, item: crate::sources::backlog::Item) -> anyhow::Result<()> {
        let Some(p) = self.reader_path.get(&reader).cloned() else {
            // A read-ahead dropped (truncation, eviction, the file gone): its last reads.
            self.readers.remove(&reader);
            return Ok(());
        };
        let mut records = Vec::new();
        let (mut item, mut applied, mut ended) = (Some(item), 0u64, false);
        while let Some(it) = item.take() {
            let Some(t) = self.files.get_mut(&p) else { break };
            let mark = records.len();
            let Some((n, end)) = t.take_read(reader, it, &mut records) else { break };
            t.announce(&mut records, mark);
            self.dirty = true;
            applied += n;
            ended = end;
            if end || applied >= FILE_BUDGET {
                break;
            }
            item = self.readers.iter_mut().find(|(k, _)| *k == reader).and_then(|(_, s)| s.as_mut().try_recv().ok());
        }
        let reading = self.files.get(&p).is_some_and(|t| t.reading_ahead() == Some(reader));
        if !reading {
            self.reader_path.remove(&reader);
            self.readers.remove(&reader);
        }
        if ended {
            // What is left (grown meanwhile), fetched or read ahead again.
            self.poll_path(&p);
        }
        self.emit(records);
        Ok(())
    }

    /// Tells `/health` how many files wait for a retry for want of resources.
    fn report_reading(&self) {
        let failing: Vec<&Retry> = self.retry.values().filter(|r| r.resource).collect();
        self.health.reading(failing.len(), failing.first().map(|r| r.error.clone()));
    }

    /// The file read as `p` left that path (`hint`: where its inode showed up). A rename to
    /// another watched name (with the same content) keeps its state under the new name;
    /// otherwise it is closed: its tail findings are retracted and `file_closed` reported, all
    /// before anything about a new file at the same path.
    fn vanished(&mut self, p: &Path, moved: Moved<'_>, records: &mut Vec<Record>, mark: usize) -> anyhow::Result<()> {
        let Some(mut t) = self.files.remove(p) else { return Ok(()) };
        self.retry.remove(p);
        if self.queued.remove(p) {
            self.backlog.retain(|q| q != p);
        }
        if let Some(id) = t.id() {
            if self.by_id.get(&id).is_some_and(|q| q == p) {
                self.by_id.remove(&id);
            }
        }
        self.dirty = true;
        let target = match moved {
            Moved::Found(m) => m,
            // Seen under `q`: checked here, on the loop (rare: an event for the new name came
            // before the fetch of the old one found it gone).
            Moved::To(q) => Some((q.to_path_buf(), t.same_file_at(q).unwrap_or(false))),
        };
        let mut reason = "deleted";
        if let Some((q, same)) = target {
            match self.watched_source(&q) {
                Some(si) if si == t.source && !self.files.contains_key(&q) && same => {
                    info!(from = %p.display(), to = %q.display(), "file renamed");
                    t.announce(records, mark);
                    if t.announced {
                        records.push(Record::FileClosed {
                            time: now(),
                            file: p.display().to_string(),
                            reason: "renamed".into(),
                            to: Some(q.display().to_string()),
                        });
                    }
                    t.path = q.clone();
                    t.rel = self.sources[si].rel(&q);
                    // A fetch of the old path is not this file's any more.
                    t.cancel_io();
                    for r in self.reader_path.values_mut().filter(|r| r.as_path() == p) {
                        r.clone_from(&q);
                    }
                    if let Some(id) = t.id() {
                        self.by_id.insert(id, q.clone());
                    }
                    self.files.insert(q.clone(), t);
                    self.poll_path(&q);
                    return self.taken_over(p);
                }
                // Moved to a name no source reads: rotated away.
                None => reason = "rotated",
                // Another file on a reused inode, or a name another source reads: not this file.
                Some(_) => {}
            }
        }
        // What was written before it went is still this file's.
        t.read_rest(&mut self.buf, records);
        if reason == "deleted" {
            t.left(crate::transcript::pipeline::Left::Deleted, records);
        }
        self.counts.append(&mut std::mem::take(&mut t.counts));
        self.bytes.append(&mut t.bytes);
        t.announce(records, mark);
        if t.announced {
            for f in &t.tail {
                records.push(tail::retracted(&t.path, f, &format!("the file was {reason}")));
            }
            records.push(Record::FileClosed { time: now(), file: p.display().to_string(), reason: reason.into(), to: None });
        }
        self.taken_over(p)
    }

    /// The file read as `p` left it: whatever the path names now (a new file, made while the
    /// daemon looked away: no event will tell of it) is read from the start.
    fn taken_over(&mut self, p: &Path) -> anyhow::Result<()> {
        self.look_at(vec![p.to_path_buf()]);
        Ok(())
    }

    fn on_changes(&mut self, changes: Vec<watch::Change>) {
        let mut seen = HashSet::new();
        let mut unknown = Vec::new();
        for c in changes {
            let p = match c {
                watch::Change::Rescan => {
                    self.rescan(false);
                    continue;
                }
                watch::Change::Path(p) | watch::Change::Created(p) => p,
            };
            if !seen.insert(p.clone()) {
                continue;
            }
            if self.watch.shapes_a_root(&p) {
                // A root (or a directory above one) appeared, went or was replaced.
                for root in self.watch.ensure_roots() {
                    info!(root = %root.display(), "watching the root again");
                    self.search(&root);
                }
            }
            if !self.watch.under_root(&p) {
                continue;
            }
            if self.files.contains_key(&p) {
                self.poll_path(&p);
            } else {
                // A new file or directory (or nothing by now): looked at off the loop.
                unknown.push(p);
            }
        }
        self.look_at(unknown);
    }

    /// Queues records for the sinks (handed over at the end of the step).
    fn emit(&mut self, mut records: Vec<Record>) {
        self.outbox.append(&mut records);
    }

    /// Hands the step's records, counters and gauges to every sink, in order.
    async fn deliver(&mut self) -> anyhow::Result<()> {
        self.files.take_counts(&mut self.counts, &mut self.bytes);
        let mut batch = Batch::new(std::mem::take(&mut self.outbox), std::mem::take(&mut self.counts), self.gauges.take());
        batch.repairs = std::mem::take(&mut self.due);
        batch.bytes = std::mem::take(&mut self.bytes);
        if batch.is_empty() {
            return Ok(());
        }
        self.sinks.write(&batch).await?;
        self.tap.publish(&batch);
        Ok(())
    }

    /// When the loop must wake up next.
    fn next_deadline(&self) -> Instant {
        let now = Instant::now();
        let mut next = self.last_rescan + self.rescan_interval();
        if !self.backlog.is_empty() {
            if fetch_slot(&self.under_way) {
                return now;
            }
            // Every slot taken: the oldest fetch frees one when it turns slow (those that come
            // back wake the loop).
            if let Some(oldest) = self.under_way.values().map(|u| u.started).filter(|s| now.duration_since(*s) < fetch::SLOW).min() {
                next = next.min(oldest + fetch::SLOW);
            }
        }
        if self.dirty {
            next = next.min(self.last_checkpoint + self.checkpoint_every());
        }
        for r in self.retry.values() {
            next = next.min(r.at);
        }
        // A read that hangs is said when it has hung for the stall timeout.
        for u in self.under_way.values().filter(|u| !u.warned) {
            next = next.min(u.started + self.cfg.config.daemon.stall_timeout);
        }
        if let Some(d) = self.files.next_deadline() {
            next = next.min(d);
        }
        next.max(now + Duration::from_millis(5))
    }

    /// How often a checkpoint is written while there is progress to record: every
    /// `checkpoint_interval`, or ten times as long as the last one took when that is longer
    /// (with 100,000 files a checkpoint is ~22 MB: written every second, it took most of a cold
    /// start). What a crash can lose is unchanged: the sinks are cut back to the checkpoint and
    /// what follows it is read again, only more of it.
    fn checkpoint_every(&self) -> Duration {
        self.cfg.config.daemon.checkpoint_interval.max(self.checkpoint_cost * 10)
    }

    fn rescan_interval(&self) -> Duration {
        match self.cfg.config.daemon.watch {
            crate::config::WatchMode::Poll => self.cfg.config.daemon.poll_interval,
            _ => (self.cfg.config.daemon.poll_interval * 15).max(Duration::from_secs(30)),
        }
    }

    fn timers(&mut self) -> anyhow::Result<()> {
        let now = Instant::now();
        let mut records = Vec::new();
        // Read-aheads dropped (truncation, eviction, the file gone) whose stream said nothing
        // more: forgotten (their streams end on their own).
        let files = &self.files;
        self.reader_path.retain(|id, p| files.get(p).is_some_and(|t| t.reading_ahead() == Some(*id)));
        // Files waiting for a fetch slot, then files whose read failed.
        while fetch_slot(&self.under_way) {
            let Some(p) = self.backlog.pop_front() else { break };
            self.queued.remove(&p);
            self.poll_path(&p);
        }
        let due: Vec<PathBuf> = self.retry.iter().filter(|(_, r)| r.at <= now).map(|(p, _)| p.clone()).collect();
        for p in due {
            self.poll_path(&p);
        }
        // The stages' deadlines: tail findings of quiet files (torn lines, empty turns, orphan
        // calls), repairs due. Those whose stages read `pending.json` wait for it, read off the
        // loop once per directory.
        // Only the files whose deadline came are looked at ([`files::Files::due`]).
        self.files.settle();
        for p in self.files.due(now) {
            let Some(t) = self.files.get_mut(&p) else { continue };
            if t.deadline().is_none_or(|d| d > now) {
                continue;
            }
            if t.reads_paused() {
                t.hold_for_paused();
                let dir = t.path.parent().map(Path::to_path_buf).unwrap_or_default();
                let waiting = self.paused_waiting.entry(dir.clone()).or_default();
                if waiting.is_empty() {
                    let path = t.path.clone();
                    self.paused_reads.spawn_blocking(move || {
                        let paused = std::panic::catch_unwind(|| tail::paused_calls(&path)).unwrap_or_default();
                        (dir, paused)
                    });
                }
                waiting.push(t.path.clone());
                continue;
            }
            self.dirty |= timed_out(t, now, HashSet::new(), &mut records);
        }
        self.files.settle();
        let repair_due = self.files.take_repair_due();
        if let Some(request) = self.stages.repair {
            let due: Vec<PathBuf> = repair_due
                .into_iter()
                .filter(|p| self.files.get_mut(p).is_some_and(|t| std::mem::take(&mut t.repair_due) && t.repaired_size != Some(t.size)))
                .collect();
            for p in due {
                self.repair(&p, request);
            }
        }
        // A read that hangs (a hung filesystem) holds up its file only: said once, and counted
        // as unread (`oldest_unread_seconds`) until it returns.
        let hung_after = self.cfg.config.daemon.stall_timeout;
        for u in self.under_way.values_mut().filter(|u| !u.warned && u.started + hung_after <= now) {
            u.warned = true;
            warn!(file = %u.path.display(), hung_for = ?u.started.elapsed(), "a read of the file hangs (a hung filesystem?); the file waits for it, the others are read meanwhile");
        }
        // Quiet files give their memory back, once their stages have nothing due (an orphan
        // grace, a repair waiting for `min_idle`: the state that makes it due stays until
        // then); handles beyond the limit are closed.
        // Looked for at most every quarter of `evict_after` (a second at most): not after every
        // step, which made a cold start over 100,000 files quadratic.
        let evict_after = self.cfg.config.daemon.evict_after;
        if self.last_evict_sweep + (evict_after / 4).min(Duration::from_secs(1)) <= now {
            self.last_evict_sweep = now;
            let idle: Vec<PathBuf> = self
                .files
                .values()
                .filter(|t| t.is_loaded() && t.tail_done && t.last_growth + evict_after <= now && t.deadline().is_none() && !t.fetching() && !t.timing_out())
                .map(|t| t.path.clone())
                .collect();
            for p in idle {
                if let Some(t) = self.files.get_mut(&p) {
                    t.evict();
                }
            }
        }
        self.limit_open_files();
        self.emit(records);
        if self.last_rescan + self.rescan_interval() <= now {
            if self.cfg.config.daemon.watch == crate::config::WatchMode::Poll {
                let paths: Vec<PathBuf> = self.files.keys().cloned().collect();
                for p in paths {
                    self.poll_path(&p);
                }
            }
            self.rescan(false);
        }
        self.gauges();
        self.report_reading();
        Ok(())
    }

    /// The calls paused in `dir` (`pending.json`) were read: the files waiting for them have
    /// their deadline.
    fn paused_read(&mut self, done: Result<(PathBuf, HashSet<String>), tokio::task::JoinError>) {
        let (dir, paused) = match done {
            Ok(d) => d,
            Err(e) => {
                warn!(error = %e, "a read of pending.json failed");
                return;
            }
        };
        let now = Instant::now();
        let mut records = Vec::new();
        for p in self.paused_waiting.remove(&dir).unwrap_or_default() {
            if let Some(t) = self.files.get_mut(&p).filter(|t| t.timing_out()) {
                self.dirty |= timed_out(t, now, paused.clone(), &mut records);
            }
        }
        self.emit(records);
    }

    /// Makes a repair of `p` due. A copy (mode `copy`) goes to the `repaired_files` sink in
    /// this step's batch: it journals the request, runs it on the blocking pool beside tailing,
    /// and hands back its record (see `sinks::repaired`). A plan (mode `plan`, which writes no
    /// file) runs here on the blocking pool; its record comes when it is done
    /// ([`Daemon::repaired`]). One plan per file at a time.
    fn repair(&mut self, p: &Path, request: RepairRequest) {
        let Some(t) = self.files.get_mut(p) else { return };
        let policy = request.orphans;
        if request.mode == RepairMode::Copy {
            t.repaired_size = Some(t.size);
            let due = crate::sinks::repaired::Due {
                seq: 0,
                file: p.to_path_buf(),
                rel: t.rel.clone(),
                format: t.format(),
                orphans: policy,
                max_line_bytes: self.cfg.max_line_bytes(),
            };
            self.due.push(due);
            return;
        }
        if self.repairing.contains(p) {
            return;
        }
        t.repaired_size = Some(t.size);
        let settings = crate::repair::Settings { dry_run: true, ..crate::repair::Settings::copy(t.format(), self.cfg.max_line_bytes(), policy) };
        let dir = self.sinks.repaired_dir.clone().unwrap_or_else(std::env::temp_dir);
        let job = crate::repair::Job { input: p.to_path_buf(), output: dir.join(&t.rel), rel: t.rel.clone(), walked: None };
        self.repairing.insert(p.to_path_buf());
        info!(file = %p.display(), "repair started");
        let path = p.to_path_buf();
        self.repairs.spawn_blocking(move || {
            let report = crate::repair::repair_file(&job, &settings, &mut Vec::new());
            (path, report)
        });
    }

    /// A repair finished: its record.
    fn repaired(&mut self, done: Result<(PathBuf, crate::repair::Report), tokio::task::JoinError>) {
        let (p, report) = match done {
            Ok(r) => r,
            Err(e) => {
                warn!(error = %e, "a repair task failed");
                return;
            }
        };
        self.repairing.remove(&p);
        if let Some(record) = repair_record(&p, report) {
            self.emit(vec![record]);
        }
    }

    fn limit_open_files(&mut self) {
        let max = self.max_open;
        self.files.settle();
        let open = self.files.open_count();
        if open <= max {
            return;
        }
        let files = &self.files;
        let mut by_age: Vec<(Instant, PathBuf)> = files.open_paths().filter_map(|p| files.get(p)).map(|t| (t.last_growth, t.path.clone())).collect();
        by_age.sort();
        for (_, p) in by_age.into_iter().take(open - max) {
            if let Some(t) = self.files.get_mut(&p) {
                t.close();
            }
        }
    }

    fn gauges(&mut self) {
        let now_s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        self.files.settle();
        let (lag, pending, lagging_since) = self.files.sums();
        let mut oldest = lagging_since.map_or(0, |m| now_s - m);
        let open = self.files.open_count();
        // A read under way that hangs: what the file holds waits as long.
        if let Some(started) = self.under_way.values().map(|u| u.started).min() {
            oldest = oldest.max(started.elapsed().as_secs() as i64);
        }
        self.gauges = Some(Gauges {
            files_watched: self.files.len() as u64,
            open_files: open as u64,
            lag_bytes: lag,
            oldest_unread_seconds: oldest.max(0) as u64,
            pending_calls: pending as u64,
        });
        if self.tap.stats_due() {
            let files = self
                .files
                .values()
                .map(|t| tap::FileStats {
                    path: t.path.display().to_string(),
                    format: t.format_name().to_owned(),
                    size: t.size,
                    offset: t.committed(),
                    lag: t.lag(),
                    open: t.is_open(),
                    pending: t.pending() as u64,
                    findings: 0,
                })
                .collect();
            self.tap.set_stats(files);
        }
    }

    /// Flushes every sink, then writes the checkpoint: it records where each sink stands (what
    /// it made durable or had acknowledged) and never covers outputs a sink has not accepted.
    async fn checkpoint(&mut self) -> anyhow::Result<()> {
        self.sinks.flush().await?;
        let began = Instant::now();
        let cp = checkpoint::Checkpoint {
            version: checkpoint::VERSION,
            files: self
                .files
                .values()
                .filter_map(|t| {
                    let (dev, ino) = t.id()?;
                    let (head_hash, head_len) = t.head().unwrap_or((0, 0));
                    let fp = t.fingerprint().unwrap_or(identity::Fingerprint { end: 0, len: 0, hash: 0 });
                    Some(checkpoint::FileCheckpoint {
                        path: t.path.clone(),
                        dev,
                        ino,
                        head_hash,
                        head_len,
                        fp_end: fp.end,
                        fp_len: fp.len,
                        fp_hash: fp.hash,
                        offset: t.committed(),
                        tail: t.tail.clone(),
                        tail_done: t.tail_done,
                        tail_end: t.tail_end(),
                        pending: t.pending() as u64,
                        announced: t.announced,
                        owed: t.owed(),
                    })
                })
                .collect(),
            sinks: self.sinks.positions(),
            stdout: None,
            file_sink: None,
        };
        self.last_checkpoint = Instant::now();
        let stored = checkpoint::store(&self.cfg.config.daemon.state_dir, &cp);
        self.checkpoint_cost = began.elapsed();
        match stored {
            Ok(()) => {
                metrics::counter!(telemetry::CHECKPOINT_WRITES, "result" => "ok").increment(1);
                self.health.checkpoint(Ok(()));
                if std::mem::take(&mut self.checkpoint_failing) {
                    info!("checkpoints are written again");
                }
                self.dirty = false;
                if self.sinks.checkpointed().await? {
                    // The checkpoint named a sink's file rotated away; name the new one.
                    self.dirty = true;
                }
                Ok(())
            }
            Err(e) => {
                metrics::counter!(telemetry::CHECKPOINT_WRITES, "result" => "error").increment(1);
                self.health.checkpoint(Err(e.to_string()));
                if std::mem::replace(&mut self.checkpoint_failing, true) {
                    debug!(error = %e, "cannot write checkpoint; will retry");
                } else {
                    warn!(error = %e, "cannot write checkpoint; will retry");
                }
                Ok(())
            }
        }
    }
}
