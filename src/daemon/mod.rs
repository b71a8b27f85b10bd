//! `transcriptd run`: the daemon. Tails transcript and event files, runs each through the
//! configured stages (the same pure state machines as the batch verbs), and sends the results
//! to the sinks.
//!
//! One event loop owns every file's state: filesystem events (inotify via `notify`, or polling)
//! and timers (grace periods, repairs, checkpoints, rescans) wake it; it reads what is new,
//! writes the records to the sinks, flushes them, and checkpoints. A single owner keeps the
//! order of each file's records, needs no locks, and lets 10,000 idle files cost nothing but
//! their entry in a map. Shutdown is a future passed in ([`run`]): tests and signal handlers
//! use the same path.

pub mod checkpoint;
pub mod envelope;
pub mod tail;
pub mod watch;

use crate::config::{ReadFrom, Resolved, SinkConfig, SourceKind, StageConfig};
use crate::sinks::outputs::{FileSink, StdoutSink};
use crate::telemetry as t;
use crate::transcript::stages::repair::OrphanPolicy;
use crate::transcript::FindingFilter;
use anyhow::Context;
use envelope::{now, Record};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tail::{Kind, Polled, Tailed};
use tracing::{info, warn};

/// Bytes read per `read` call.
pub const READ_CHUNK: usize = 1 << 20;

/// How long the state of a file that vanished from its path is kept, in case it was renamed to
/// another watched path.
pub const DETACHED_FOR: Duration = Duration::from_secs(1);

/// The stage settings the loop needs, from the configured stage list.
#[derive(Debug)]
struct Stages {
    compaction: bool,
    orphans: bool,
    validate: bool,
    grace: Duration,
    repair: Option<(crate::config::RepairMode, Duration, OrphanPolicy)>,
    /// Side effects of tools, for `orphan_tool_calls_total`.
    registry: crate::config::tools::ToolRegistry,
}

impl Stages {
    fn from(r: &Resolved) -> anyhow::Result<Self> {
        let mut s = Stages {
            compaction: false,
            orphans: false,
            validate: false,
            grace: Duration::from_secs(600),
            repair: None,
            registry: crate::config::tools::ToolRegistry::builtin(),
        };
        for st in &r.config.stages {
            match st {
                StageConfig::Parse => {}
                StageConfig::Compaction => s.compaction = true,
                StageConfig::Orphans { grace, registry } => {
                    s.orphans = true;
                    s.grace = *grace;
                    if let Some(path) = registry {
                        s.registry = crate::config::tools::ToolRegistry::load(path)?;
                    }
                }
                StageConfig::Validate => s.validate = true,
                StageConfig::Repair { mode, min_idle, .. } => s.repair = Some((*mode, *min_idle, r.repair_orphans)),
            }
        }
        Ok(s)
    }
}

/// The record sinks.
struct Sinks {
    /// The stdout sink, and which findings it passes.
    stdout: Option<(StdoutSink, FindingFilter)>,
    file: Option<FileSink>,
    repaired_dir: Option<PathBuf>,
}

impl Sinks {
    fn write(&mut self, records: &[Record]) -> anyhow::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        for r in records {
            let line = r.to_line();
            if let Some((s, filter)) = self.stdout.as_mut() {
                if r.passes(filter) {
                    s.write(&line).context("writing stdout")?;
                }
            }
            if let Some(f) = self.file.as_mut() {
                f.write(&line).context("writing the file sink")?;
            }
        }
        if let Some((s, _)) = self.stdout.as_mut() {
            s.flush().context("writing stdout")?;
        }
        Ok(())
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        if let Some((s, _)) = self.stdout.as_mut() {
            s.flush().context("writing stdout")?;
        }
        if let Some(f) = self.file.as_mut() {
            f.flush().context("flushing the file sink")?;
        }
        Ok(())
    }
}

/// A source, compiled.
struct Source {
    kind: SourceKind,
    format: Option<crate::transcript::Format>,
    read_from: ReadFrom,
    include: globset::GlobSet,
    exclude: globset::GlobSet,
    roots: Vec<PathBuf>,
}

impl Source {
    fn matches(&self, p: &Path) -> bool {
        self.include.is_match(p) && !self.exclude.is_match(p)
    }

    fn rel(&self, p: &Path) -> PathBuf {
        self.roots.iter().find_map(|r| p.strip_prefix(r).ok()).map_or_else(|| PathBuf::from(p.file_name().unwrap_or_default()), Path::to_path_buf)
    }
}

fn compile(r: &Resolved) -> anyhow::Result<Vec<Source>> {
    let mut out = Vec::new();
    for (i, s) in r.config.sources.iter().enumerate() {
        let set = |pats: &[String]| -> anyhow::Result<globset::GlobSet> {
            let mut b = globset::GlobSetBuilder::new();
            for p in pats {
                b.add(globset::GlobBuilder::new(&crate::config::expand_home(p)).literal_separator(true).build()?);
            }
            Ok(b.build()?)
        };
        let mut roots: Vec<PathBuf> = s.include.iter().map(|p| watch::literal_root(&crate::config::expand_home(p))).collect();
        roots.sort();
        roots.dedup();
        out.push(Source {
            kind: s.kind,
            format: r.formats[i],
            read_from: s.read_from,
            include: set(&s.include).with_context(|| format!("sources[{i}].include"))?,
            exclude: set(&s.exclude).with_context(|| format!("sources[{i}].exclude"))?,
            roots,
        });
    }
    Ok(out)
}

/// The daemon's state.
struct Daemon {
    cfg: Resolved,
    stages: Stages,
    sources: Vec<Source>,
    files: HashMap<PathBuf, Tailed>,
    /// States of files whose path is gone or names another file now, by device and inode, in
    /// case the file shows up again under a watched name (a rename); with when and why they
    /// were detached. Their handles are closed at once; they are forgotten after
    /// [`DETACHED_FOR`].
    detached: HashMap<(u64, u64), (Tailed, Instant, &'static str)>,
    sinks: Sinks,
    watch: watch::Watch,
    buf: Vec<u8>,
    dirty: bool,
    last_checkpoint: Instant,
    last_rescan: Instant,
}

/// Runs the daemon until `shutdown` completes. Returns after the final checkpoint.
pub async fn run(cfg: Resolved, shutdown: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
    let stages = Stages::from(&cfg)?;
    let sources = compile(&cfg)?;
    std::fs::create_dir_all(&cfg.config.daemon.state_dir).with_context(|| format!("creating state directory {}", cfg.config.daemon.state_dir.display()))?;
    let cp = checkpoint::load(&cfg.config.daemon.state_dir)?;
    let mut sinks = Sinks { stdout: None, file: None, repaired_dir: None };
    for s in &cfg.config.sinks {
        match s {
            SinkConfig::Stdout { severity, kinds } => {
                let mut out = StdoutSink::default();
                out.recover(cp.stdout).context("recovering stdout")?;
                sinks.stdout = Some((out, FindingFilter { severity: *severity, kinds: kinds.clone() }));
            }
            SinkConfig::File { path, max_bytes, keep } => {
                let max = crate::config::parse_size(max_bytes).map_err(anyhow::Error::msg)? as u64;
                let mut f = FileSink::open(path, max, *keep).with_context(|| format!("opening {}", path.display()))?;
                f.recover(cp.file_sink).context("recovering the file sink")?;
                sinks.file = Some(f);
            }
            SinkConfig::RepairedFiles { dir } => sinks.repaired_dir = Some(dir.clone()),
            SinkConfig::Prometheus { .. } => {}
        }
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<watch::Change>();
    let mut roots: Vec<PathBuf> = sources.iter().flat_map(|s| s.roots.clone()).collect();
    roots.sort();
    roots.dedup();
    let watcher = watch::start(&roots, cfg.config.daemon.watch, cfg.config.daemon.poll_interval, tx)?;
    let mut d = Daemon {
        stages,
        sources,
        files: HashMap::new(),
        detached: HashMap::new(),
        sinks,
        watch: watcher,
        buf: Vec::with_capacity(READ_CHUNK),
        dirty: false,
        last_checkpoint: Instant::now(),
        last_rescan: Instant::now(),
        cfg,
    };
    d.restore(&cp);
    // A checkpoint before anything is read: records written after it and not covered by a
    // later checkpoint are cut off after a crash, and written again.
    d.checkpoint()?;
    d.rescan(true)?;
    // Files known from the checkpoint may have grown while the daemon was down.
    let restored: Vec<PathBuf> = d.files.keys().cloned().collect();
    let mut records = Vec::new();
    for p in restored {
        d.poll_path(&p, &mut records)?;
    }
    d.emit(records)?;
    // `/health` answers once the daemon watches its roots and has read what was there.
    let metrics_task = match d.cfg.metrics_addr {
        Some(addr) => Some(serve_metrics(addr).await?),
        None => None,
    };
    info!(files = d.files.len(), roots = ?roots, "watching");
    tokio::pin!(shutdown);
    loop {
        let deadline = d.next_deadline();
        tokio::select! {
            _ = &mut shutdown => break,
            change = rx.recv() => {
                let Some(change) = change else { break };
                let mut changes = vec![change];
                while let Ok(c) = rx.try_recv() {
                    changes.push(c);
                }
                d.on_changes(changes)?;
            }
            _ = tokio::time::sleep_until(deadline.into()) => {}
        }
        d.timers()?;
    }
    info!("shutting down: flushing sinks and writing checkpoints");
    d.checkpoint()?;
    if let Some(m) = metrics_task {
        m.abort();
    }
    Ok(())
}

impl Daemon {
    fn restore(&mut self, cp: &checkpoint::Checkpoint) {
        for f in &cp.files {
            let Some(si) = self.sources.iter().position(|s| s.matches(&f.path)) else { continue };
            let src = &self.sources[si];
            let kind = if src.kind == SourceKind::Events { Kind::Events } else { Kind::Transcript(src.format) };
            let mut t = Tailed::new(f.path.clone(), si, src.rel(&f.path), kind, self.cfg.max_line_bytes, f.offset);
            t.restore(f.dev, f.ino, f.head_hash, f.head_len, f.tail.clone());
            self.files.insert(f.path.clone(), t);
        }
    }

    /// Walks the roots for matching files. `startup` applies `read_from`.
    fn rescan(&mut self, startup: bool) -> anyhow::Result<()> {
        self.last_rescan = Instant::now();
        let roots: Vec<PathBuf> = self.sources.iter().flat_map(|s| s.roots.clone()).collect();
        let mut found = Vec::new();
        for root in roots {
            self.watch.ensure(&root);
            for e in walkdir::WalkDir::new(&root).follow_links(true).into_iter().filter_map(Result::ok) {
                if e.file_type().is_file() && !self.files.contains_key(e.path()) {
                    found.push(e.into_path());
                }
            }
        }
        let mut records = Vec::new();
        for p in found {
            self.discover(&p, startup, &mut records)?;
        }
        // Files that vanished without an event (polling, missed events).
        let known: Vec<PathBuf> = self.files.keys().cloned().collect();
        for p in known {
            if !p.exists() {
                self.poll_path(&p, &mut records)?;
            }
        }
        self.emit(records)
    }

    /// Takes up a new path, if a source wants it.
    fn discover(&mut self, p: &Path, startup: bool, records: &mut Vec<Record>) -> anyhow::Result<()> {
        let Some(si) = self.sources.iter().position(|s| s.matches(p)) else { return Ok(()) };
        let Ok(meta) = std::fs::metadata(p) else { return Ok(()) };
        use std::os::unix::fs::MetadataExt;
        let id = (meta.dev(), meta.ino());
        // A watched file renamed to this path: the same file goes on where it was.
        let renamed = self.detached.remove(&id).map(|(t, _, _)| t).or_else(|| {
            let old = self.files.iter().find(|(path, t)| t.id() == Some(id) && !path.exists()).map(|(path, _)| path.clone())?;
            self.files.remove(&old)
        });
        let src = &self.sources[si];
        let t = if let Some(mut moved) = renamed {
            info!(from = %moved.path.display(), to = %p.display(), "file renamed");
            records.push(Record::FileClosed { time: now(), file: moved.path.display().to_string(), reason: "renamed".into() });
            moved.path = p.to_path_buf();
            moved.rel = src.rel(p);
            moved.close();
            moved
        } else {
            let kind = if src.kind == SourceKind::Events { Kind::Events } else { Kind::Transcript(src.format) };
            let skip = if startup && src.read_from == ReadFrom::End { meta.len() } else { 0 };
            let mut t = Tailed::new(p.to_path_buf(), si, src.rel(p), kind, self.cfg.max_line_bytes, skip);
            // A file already quiet when found has nothing to wait for.
            if meta.modified().ok().and_then(|m| m.elapsed().ok()).is_some_and(|age| age >= self.stages.grace) {
                t.last_growth = Instant::now() - self.stages.grace;
            }
            t
        };
        let opened = records.len();
        records.push(Record::FileOpened { time: now(), file: p.display().to_string(), format: t.format(), offset: t.committed() });
        let grew_before = t.last_growth;
        self.files.insert(p.to_path_buf(), t);
        self.poll_path(p, records)?;
        // The format, as soon as the lines read at once tell it (the record still comes first).
        if let (Some(Record::FileOpened { format: f @ None, .. }), Some(t)) = (records.get_mut(opened), self.files.get(p)) {
            *f = t.format();
        }
        // Reading an old file at startup is not growth: its grace has passed already.
        if let Some(t) = self.files.get_mut(p) {
            if grew_before + self.stages.grace <= Instant::now() {
                t.last_growth = grew_before;
            }
        }
        Ok(())
    }

    fn poll_path(&mut self, p: &Path, records: &mut Vec<Record>) -> anyhow::Result<()> {
        let Some(t) = self.files.get_mut(p) else { return Ok(()) };
        self.dirty = true;
        match t.poll(&mut self.buf, records, self.stages.compaction) {
            Ok(Polled::Ok) => {}
            Ok(Polled::Gone) => self.detach(p, "deleted", records),
            Ok(Polled::Replaced) => {
                self.detach(p, "rotated", records);
                // The path now names a new file: read it from the start.
                self.discover(p, false, records)?;
            }
            Err(e) => warn!(file = %p.display(), error = %e, "cannot read file"),
        }
        Ok(())
    }

    /// The file left its path: its handle is closed now; its state waits a moment in case it
    /// shows up under another watched name.
    fn detach(&mut self, p: &Path, reason: &'static str, records: &mut Vec<Record>) {
        let Some(mut t) = self.files.remove(p) else { return };
        t.close();
        match t.id() {
            Some(id) => {
                self.detached.insert(id, (t, Instant::now(), reason));
            }
            None => records.push(Record::FileClosed { time: now(), file: p.display().to_string(), reason: reason.into() }),
        }
    }

    /// Forgets detached files nobody renamed: they were deleted or rotated away.
    fn expire_detached(&mut self, records: &mut Vec<Record>) {
        let now_i = Instant::now();
        let gone: Vec<(u64, u64)> = self.detached.iter().filter(|(_, (_, at, _))| *at + DETACHED_FOR <= now_i).map(|(id, _)| *id).collect();
        for id in gone {
            let (t, _, reason) = self.detached.remove(&id).expect("present");
            records.push(Record::FileClosed { time: now(), file: t.path.display().to_string(), reason: reason.into() });
            for f in &t.tail {
                records.push(tail::retracted(&t.path, f, &format!("the file was {reason}")));
            }
            self.dirty = true;
        }
    }

    fn on_changes(&mut self, changes: Vec<watch::Change>) -> anyhow::Result<()> {
        let mut records = Vec::new();
        let mut seen = HashSet::new();
        for c in changes {
            match c {
                watch::Change::Path(p) | watch::Change::Created(p) if self.files.contains_key(&p) => {
                    if seen.insert(p.clone()) {
                        self.poll_path(&p, &mut records)?;
                    }
                }
                watch::Change::Path(p) | watch::Change::Created(p) => {
                    if !seen.insert(p.clone()) {
                        continue;
                    }
                    if p.is_dir() {
                        // A new directory: files may have been created in it before its watch.
                        for e in walkdir::WalkDir::new(&p).into_iter().filter_map(Result::ok).filter(|e| e.file_type().is_file()) {
                            if !self.files.contains_key(e.path()) {
                                self.discover(e.path(), false, &mut records)?;
                            }
                        }
                    } else {
                        self.discover(&p, false, &mut records)?;
                    }
                }
                watch::Change::Rescan => self.rescan(false)?,
            }
        }
        self.emit(records)
    }

    fn emit(&mut self, records: Vec<Record>) -> anyhow::Result<()> {
        self.sinks.write(&records)
    }

    /// When the loop must wake up next.
    fn next_deadline(&self) -> Instant {
        let now = Instant::now();
        let mut next = self.last_rescan + self.rescan_interval();
        if self.dirty {
            next = next.min(self.last_checkpoint + self.cfg.config.daemon.checkpoint_interval);
        }
        for (_, at, _) in self.detached.values() {
            next = next.min(*at + DETACHED_FOR);
        }
        for t in self.files.values() {
            if !t.tail_done && t.is_loaded() {
                next = next.min(t.last_growth + self.stages.grace);
            }
            if let Some((_, min_idle, _)) = self.stages.repair {
                if t.has_errors && t.repaired_size != Some(t.size) {
                    next = next.min(t.last_growth + min_idle);
                }
            }
        }
        next.max(now + Duration::from_millis(5))
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
        let grace = self.stages.grace;
        let tail_stage = self.stages.orphans || self.stages.validate;
        for t in self.files.values_mut() {
            if !t.tail_done && t.is_loaded() && t.last_growth + grace <= now {
                t.tail_done = true;
                if !tail_stage {
                    continue;
                }
                let findings = t.tail_findings(self.stages.orphans);
                for f in &findings {
                    tail::count_finding(f);
                    if f.kind == crate::transcript::Kind::OrphanCall {
                        let effect = self.stages.registry.side_effect(f.tool.as_deref().unwrap_or(""));
                        metrics::counter!(t::ORPHAN_TOOL_CALLS, "side_effect" => effect.as_str()).increment(1);
                    }
                    t.has_errors |= f.severity == crate::transcript::Severity::Error;
                    records.push(Record::Finding { time: envelope::now(), file: t.path.display().to_string(), format: t.format(), finding: f.clone() });
                }
                t.tail = findings;
                self.dirty = true;
            }
        }
        if let Some((mode, min_idle, policy)) = self.stages.repair {
            let due: Vec<PathBuf> = self
                .files
                .values()
                .filter(|t| t.has_errors && t.repaired_size != Some(t.size) && t.last_growth + min_idle <= now)
                .map(|t| t.path.clone())
                .collect();
            for p in due {
                self.repair(&p, mode, policy, &mut records);
            }
        }
        // Quiet files give their memory back; handles beyond the limit are closed.
        let evict_after = self.cfg.config.daemon.evict_after;
        for t in self.files.values_mut() {
            if t.is_loaded() && t.tail_done && t.last_growth + evict_after <= now {
                t.evict();
            }
        }
        self.limit_open_files();
        self.expire_detached(&mut records);
        self.emit(records)?;
        if self.last_rescan + self.rescan_interval() <= now {
            if self.cfg.config.daemon.watch == crate::config::WatchMode::Poll {
                let paths: Vec<PathBuf> = self.files.keys().cloned().collect();
                let mut records = Vec::new();
                for p in paths {
                    self.poll_path(&p, &mut records)?;
                }
                self.emit(records)?;
            }
            self.rescan(false)?;
        }
        if self.dirty && self.last_checkpoint + self.cfg.config.daemon.checkpoint_interval <= now {
            self.checkpoint()?;
        }
        self.gauges();
        Ok(())
    }

    fn repair(&mut self, p: &Path, mode: crate::config::RepairMode, policy: OrphanPolicy, records: &mut Vec<Record>) {
        let Some(t) = self.files.get_mut(p) else { return };
        t.repaired_size = Some(t.size);
        t.has_errors = false;
        let settings = crate::repair::Settings {
            check: crate::transcript::Options { format: t.format(), max_line_bytes: self.cfg.max_line_bytes, strict: false, jobs: 1 },
            orphans: policy,
            dry_run: mode == crate::config::RepairMode::Plan,
            in_place: false,
            backup: None,
            min_idle: Duration::ZERO,
            force: true,
        };
        let Some(dir) = self.sinks.repaired_dir.clone().or_else(|| (mode == crate::config::RepairMode::Plan).then(std::env::temp_dir)) else { return };
        let job = crate::repair::Job { input: p.to_path_buf(), output: dir.join(&t.rel), rel: t.rel.clone() };
        let report = crate::repair::repair_file(&job, &settings, &mut self.buf);
        use crate::repair::Status;
        match report.status {
            Status::Planned => records.push(Record::RepairPlanned { time: now(), file: report.file, edits: report.edits }),
            Status::Repaired | Status::Partial => {
                for (action, n) in [("insert", report.lines.inserted), ("remove", report.lines.removed), ("modify", report.lines.modified)] {
                    if n > 0 {
                        metrics::counter!(t::REPAIRS, "action" => action).increment(n);
                    }
                }
                records.push(Record::Repaired {
                    time: now(),
                    file: report.file,
                    output: report.output.unwrap_or_default(),
                    inserted: report.lines.inserted,
                    removed: report.lines.removed,
                    modified: report.lines.modified,
                });
            }
            Status::Failed => warn!(file = %p.display(), error = report.message.as_deref().unwrap_or(""), "repair failed"),
            Status::Clean | Status::Skipped => {}
        }
    }

    fn limit_open_files(&mut self) {
        let max = self.cfg.config.daemon.max_open_files;
        let open = self.files.values().filter(|t| t.is_open()).count();
        if open <= max {
            return;
        }
        let mut by_age: Vec<(Instant, PathBuf)> = self.files.values().filter(|t| t.is_open()).map(|t| (t.last_growth, t.path.clone())).collect();
        by_age.sort();
        for (_, p) in by_age.into_iter().take(open - max) {
            if let Some(t) = self.files.get_mut(&p) {
                t.close();
            }
        }
    }

    fn gauges(&self) {
        let now_s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let mut lag = 0u64;
        let mut oldest = 0i64;
        let mut open = 0;
        let mut pending = 0;
        for t in self.files.values() {
            let l = t.lag();
            lag += l;
            if l > 0 {
                oldest = oldest.max(now_s - t.mtime);
            }
            open += usize::from(t.is_open());
            pending += t.pending();
        }
        metrics::gauge!(t::FILES_WATCHED).set(self.files.len() as f64);
        metrics::gauge!(t::OPEN_FILES).set(open as f64);
        metrics::gauge!(t::SOURCE_LAG_BYTES).set(lag as f64);
        metrics::gauge!(t::OLDEST_UNREAD_SECONDS).set(oldest.max(0) as f64);
        metrics::gauge!(t::PENDING_TOOL_CALLS).set(pending as f64);
    }

    /// Flushes every sink, then writes the checkpoint: it never covers outputs a sink has not
    /// accepted.
    fn checkpoint(&mut self) -> anyhow::Result<()> {
        self.sinks.flush()?;
        let cp = checkpoint::Checkpoint {
            version: checkpoint::VERSION,
            files: self
                .files
                .values()
                .filter_map(|t| {
                    let (dev, ino) = t.id()?;
                    let (head_hash, head_len) = t.head().unwrap_or((0, 0));
                    Some(checkpoint::FileCheckpoint { path: t.path.clone(), dev, ino, head_hash, head_len, offset: t.committed(), tail: t.tail.clone() })
                })
                .collect(),
            stdout: self.sinks.stdout.as_ref().and_then(|(s, _)| s.position()),
            file_sink: self.sinks.file.as_ref().and_then(FileSink::position),
        };
        match checkpoint::store(&self.cfg.config.daemon.state_dir, &cp) {
            Ok(()) => {
                metrics::counter!(t::CHECKPOINT_WRITES, "result" => "ok").increment(1);
                self.dirty = false;
                self.last_checkpoint = Instant::now();
                if let Some(f) = self.sinks.file.as_mut() {
                    if f.rotate_if_full().context("rotating the file sink")? {
                        // The checkpoint named the file rotated away; name the new one.
                        self.dirty = true;
                    }
                }
                Ok(())
            }
            Err(e) => {
                metrics::counter!(t::CHECKPOINT_WRITES, "result" => "error").increment(1);
                warn!(error = %e, "cannot write checkpoint; will retry");
                self.last_checkpoint = Instant::now();
                Ok(())
            }
        }
    }
}

/// Serves `/metrics` and `/health` on `addr`.
async fn serve_metrics(addr: std::net::SocketAddr) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let handle = t::install();
    let app = axum::Router::new()
        .route("/metrics", axum::routing::get(move || std::future::ready(handle.render())))
        .route("/health", axum::routing::get(|| std::future::ready("ok\n")));
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("listening on {addr}"))?;
    info!(%addr, "serving /metrics and /health");
    Ok(tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            warn!(error = %e, "metrics server stopped");
        }
    }))
}
