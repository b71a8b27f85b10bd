//! One watched file: its identity, how far it has been read, and the pipeline state (the same
//! pure [`Checker`] the batch verbs use, or the event-log stage).
//!
//! **Identity** is device + inode, a hash of the first KiB, and a fingerprint: a hash of the
//! KiB just before the read offset (as log shippers do). A path that now names another inode
//! was rotated or recreated. A file that shrank below what was read, whose first bytes changed,
//! or whose bytes before the offset changed, was truncated or rewritten in place — even when
//! it grew back past the old offset before the daemon looked — and is read again from the
//! start. The checks run whenever the size or the modification time moved, and after a
//! restart, against the checkpoint.
//!
//! **Reading** is split in two: the IO — `lstat`, the open (through
//! [`super::open::open_regular`]: regular files only, no link, no blocking), the identity
//! checks and the `pread` of what is new, at most [`fetch::MAX_READ`] bytes — runs off the
//! loop, on the blocking pool ([`super::fetch`]); the loop only describes it
//! ([`Tailed::begin_poll`]) and applies what came back ([`Tailed::finish_poll`]: the bytes fed
//! to the pipeline, the records). A file has one fetch under way at most. A backlog —
//! [`READ_AHEAD_MIN`] bytes or more unread, once the format is settled — is read ahead on
//! reader threads ([`crate::sources::backlog`]): they read, cut and parse it on both cores and
//! hand the parsed reads to the loop through a bounded stream ([`Tailed::take_stream`]); the
//! loop applies them in file order ([`Tailed::take_read`]), so the stages see exactly what an
//! inline read would have given them. While a file is read ahead its deadlines wait (its tail
//! is not its tail yet), and a truncation, a rewrite, an eviction or the file leaving its path
//! drops the read-ahead: the file is read again from the last line applied. The pipeline
//! state of a quiet file is dropped from memory and rebuilt from the file when it grows again:
//! the file is replayed up to the committed offset without emitting anything, fetched or read
//! ahead too. A restart does the same from the checkpoint.
//!
//! **Tail findings** (a torn last line, orphan calls, empty turns: [`Event::Tail`]) are about
//! the file as it stands: they are kept (`tail`, and in the checkpoint), with where the file had
//! been read to when they were looked at, and retracted when it grows, is rewritten or goes.
//! A rebuild of the state — after an eviction, a reload, a restart — replays up to there (past
//! the torn line, which is not growth then) and tells the stages that the tail stands
//! ([`Pipeline::tail_stands`]): nothing is retracted or reported again that still holds.

use super::fetch::{self, Outcome};
use super::identity::{note_head, note_read, Fingerprint, FP_LEN, HEAD_LEN};
use crate::sinks::record::{now, Change, Record};
use crate::sinks::{Bytes, Count};
use crate::sources::backlog::{self, Backlog, Item};
use crate::transcript::finding::Output;
use crate::transcript::pipeline::{Gone, Left};
use crate::transcript::stages::events::EventLog;
use crate::transcript::{Event, Finding, Format, Inputs, Options, Pipeline, Stats};
use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Unread bytes from which a transcript is read ahead on reader threads
/// ([`crate::sources::backlog`]) rather than on the loop.
pub const READ_AHEAD_MIN: u64 = 4 << 20;

/// What a file's pipeline is built from: the configured stages, in order.
#[derive(Debug)]
pub struct Spec {
    /// The configured stages (`parse` first).
    pub stages: Vec<crate::config::StageConfig>,
    /// Quiet time after which the tail of a file (torn line, empty turn) is reported.
    pub quiet: std::time::Duration,
    /// Line limit.
    pub max_line: usize,
    /// Whether a stage reads the calls a host paused beside a transcript (`pending.json`) when
    /// its deadline comes ([`crate::config::Needs::paused_calls`]).
    pub paused_calls: bool,
    /// Whether a sink keeps the bytes read ([`crate::config::SinkNeeds::bytes`]): each file
    /// hands them on in [`Tailed::bytes`].
    pub keep_bytes: bool,
}

impl Spec {
    /// A fresh pipeline for a file of `kind`.
    pub fn build(&self, kind: Kind) -> Pipeline {
        match kind {
            Kind::Transcript(format) => Pipeline::transcript(
                Options { format, max_line_bytes: self.max_line, strict: false, jobs: 1 },
                self.stages.iter().filter_map(|s| s.build(self.quiet)).collect(),
                self.quiet,
            ),
            Kind::Events => Pipeline::events(self.max_line, vec![Box::new(EventLog::new())], self.quiet),
        }
    }
}

/// The daemon's clock for the core's stages: durations since an epoch a year before the
/// daemon started (so that a file found already quiet can have grown "before" the start).
const CLOCK_OFFSET: Duration = Duration::from_secs(365 * 24 * 3600);

fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// `at` on the stages' clock.
pub fn clock(at: Instant) -> Duration {
    let e = epoch();
    if at >= e {
        CLOCK_OFFSET + (at - e)
    } else {
        CLOCK_OFFSET.saturating_sub(e - at)
    }
}

/// A time on the stages' clock as an [`Instant`].
pub fn instant(at: Duration) -> Instant {
    let e = epoch();
    if at >= CLOCK_OFFSET {
        e + (at - CLOCK_OFFSET)
    } else {
        e.checked_sub(CLOCK_OFFSET - at).unwrap_or(e)
    }
}

/// What a source file is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A transcript, with its format if fixed.
    Transcript(Option<Format>),
    /// An event log.
    Events,
}

/// What happened when a file was polled.
#[derive(Debug, PartialEq, Eq)]
pub enum Polled {
    /// Read up to date (maybe nothing new).
    Ok,
    /// Not read to its end yet (a fetch reads at most [`fetch::MAX_READ`] bytes), or to be
    /// read again from the start: poll again.
    More,
    /// The path is gone (with another name of its directory that holds the inode, and whether
    /// that is this very file).
    Gone(Option<(PathBuf, bool)>),
    /// The path names another file now (or something that is not a regular file); the same.
    Replaced(Option<(PathBuf, bool)>),
}

/// One watched file.
#[derive(Debug)]
pub struct Tailed {
    /// The path.
    pub path: PathBuf,
    /// Index of its source.
    pub source: usize,
    /// Path below the source's root (for repaired copies).
    pub rel: PathBuf,
    kind: Kind,
    spec: Arc<Spec>,
    id: Option<(u64, u64)>,
    head: Option<(u64, u64)>,
    /// The first bytes read, while fewer than [`HEAD_LEN`].
    head_buf: Vec<u8>,
    fp: Option<Fingerprint>,
    /// While reads ahead are applied: the last bytes before `offset` (at most [`FP_LEN`]), for
    /// the next fingerprint (a fetch brings its own, [`fetch::Data::tail`]). Empty otherwise:
    /// 10,000 quiet files keep no bytes.
    ring: Vec<u8>,
    offset: u64,
    pipeline: Option<Pipeline>,
    /// Whether the pipeline is being rebuilt up to `committed` (nothing is emitted).
    replaying: bool,
    committed: u64,
    /// Where reporting started (0, a checkpoint, or the end with `read_from = "end"`).
    start: u64,
    /// The open handle (shared with a fetch under way).
    file: Option<Arc<File>>,
    /// Whether a fetch ([`fetch`]) is under way, and its number: only its outcome is applied.
    fetching: bool,
    fetch_gen: u64,
    /// Polled while a fetch was under way: polled again when it is back.
    again: bool,
    /// Its deadline came and the calls paused beside it (`pending.json`) are being read off
    /// the loop: its deadline waits for them.
    timing_out: bool,
    /// What the open handle still had when the path was found gone (for [`Tailed::read_rest`]).
    rest: Option<fetch::Rest>,
    /// Whether `file_opened` was emitted.
    pub announced: bool,
    /// When it last grew (or was picked up).
    pub last_growth: Instant,
    /// Found quiet (not modified for the grace period) and not read to its end yet: reading it
    /// is not growth, unless it is modified meanwhile.
    catching_up: Option<std::time::Duration>,
    /// Modification time at the last poll.
    modified: Option<std::time::SystemTime>,
    /// Tail findings reported for the file as it stands.
    pub tail: Vec<Finding>,
    /// Whether the tail was evaluated since the last growth.
    pub tail_done: bool,
    /// Where the file was read to when its tail was last looked at (`tail_done`, or findings
    /// in `tail`), if it has not grown since: what `tail` says is about the file up to there (a
    /// torn line is beyond `committed`). A rebuild of the state (a restart, a reload, an
    /// eviction) replays up to there without emitting, and the tail stands; only bytes beyond
    /// it are growth.
    tail_end: Option<u64>,
    /// Size at the last poll.
    pub size: u64,
    /// Modification time at the last poll (seconds, nanoseconds).
    mtime: (i64, i64),
    /// Modification time at the last poll (seconds since the epoch).
    pub mtime_s: i64,
    /// Size at which a repaired copy was last written.
    pub repaired_size: Option<u64>,
    /// Whether the repair stage found the file due for repair.
    pub repair_due: bool,
    /// The stages that owed work when the pipeline state was dropped (an eviction, a restart:
    /// from the checkpoint), handed back to them once a replay has rebuilt it.
    owed: Vec<String>,
    seen: Stats,
    events_seen: BTreeMap<String, u64>,
    pending_seen: usize,
    /// Counters since the daemon last took them (for the metrics sink).
    pub counts: Vec<Count>,
    /// The bytes read since the daemon last took them, when a sink keeps them
    /// ([`Spec::keep_bytes`]).
    pub bytes: Vec<Bytes>,
    /// The backlog being read ahead, if it is (boxed: 10,000 idle files pay a pointer each).
    ahead: Option<Box<Backlog>>,
}

impl Tailed {
    /// A file to read from the start (`skip_to`: replay silently up to this offset first, as for
    /// `read_from = "end"` or a checkpoint). Boxed: the daemon's table of files then holds a
    /// pointer per bucket, so its spare buckets (a hash table is up to half empty) cost 8 bytes
    /// each rather than a whole file's state.
    pub fn new(path: PathBuf, source: usize, rel: PathBuf, kind: Kind, spec: Arc<Spec>, skip_to: u64) -> Box<Self> {
        Box::new(Tailed {
            path,
            source,
            rel,
            kind,
            spec,
            id: None,
            head: None,
            head_buf: Vec::new(),
            fp: None,
            ring: Vec::new(),
            offset: 0,
            pipeline: None,
            replaying: false,
            committed: skip_to,
            start: skip_to,
            file: None,
            fetching: false,
            fetch_gen: 0,
            again: false,
            timing_out: false,
            rest: None,
            announced: false,
            last_growth: Instant::now(),
            catching_up: None,
            modified: None,
            tail: Vec::new(),
            tail_done: false,
            tail_end: None,
            size: 0,
            mtime: (0, 0),
            mtime_s: 0,
            repaired_size: None,
            repair_due: false,
            owed: Vec::new(),
            seen: Stats::default(),
            events_seen: BTreeMap::new(),
            pending_seen: 0,
            counts: Vec::new(),
            bytes: Vec::new(),
            ahead: None,
        })
    }

    /// The file was found quiet (unmodified for `grace`): its tail is due at once, and reading
    /// what it holds does not count as growth.
    pub fn found_quiet(&mut self, grace: std::time::Duration) {
        self.last_growth = Instant::now().checked_sub(grace).unwrap_or_else(Instant::now);
        self.catching_up = Some(grace);
    }

    /// Restores identity from a checkpoint.
    pub fn restore(&mut self, cp: &super::checkpoint::FileCheckpoint) {
        self.id = Some((cp.dev, cp.ino));
        self.head = (cp.head_len > 0).then_some((cp.head_hash, cp.head_len));
        self.fp = (cp.fp_len > 0).then_some(Fingerprint { end: cp.fp_end, len: cp.fp_len, hash: cp.fp_hash });
        self.tail_done = cp.tail_done || !cp.tail.is_empty();
        self.tail = cp.tail.clone();
        // Checkpoints before `tail_end`: the fingerprint's end, the read offset when it was
        // taken (a torn line's bytes were read then).
        self.tail_end = self.tail_done.then(|| cp.tail_end.unwrap_or(cp.fp_end).max(cp.offset));
        self.announced = cp.announced;
        self.owed = cp.owed.clone();
        self.pending_seen = cp.pending as usize;
    }

    /// Where the file was read to when its tail was last looked at, if it has not grown since
    /// (for the checkpoint).
    pub fn tail_end(&self) -> Option<u64> {
        self.tail_end
    }

    /// Where a replay that rebuilds the state ends: the committed offset, or beyond it where
    /// the tail was looked at (a torn line, read and reported before).
    fn replay_end(&self) -> u64 {
        self.committed.max(self.tail_end.unwrap_or(0))
    }

    /// Device and inode.
    pub fn id(&self) -> Option<(u64, u64)> {
        self.id
    }

    /// Hash and length of the first bytes.
    pub fn head(&self) -> Option<(u64, u64)> {
        self.head
    }

    /// The fingerprint at the read offset.
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        self.fp
    }

    /// Offset of the first line not fully read (every line before it was reported).
    pub fn committed(&self) -> u64 {
        match &self.pipeline {
            Some(p) if !self.replaying => p.committed_offset(),
            _ => self.committed,
        }
    }

    /// The stages that owe work for what was read ([`Pipeline::owed`]), for the checkpoint.
    pub fn owed(&self) -> Vec<String> {
        match &self.pipeline {
            Some(p) if !self.replaying => p.owed().into_iter().map(str::to_owned).collect(),
            _ => self.owed.clone(),
        }
    }

    /// Bytes written and not read yet.
    pub fn lag(&self) -> u64 {
        self.size.saturating_sub(self.offset.max(self.replay_end()))
    }

    /// Whether a file handle is open.
    pub fn is_open(&self) -> bool {
        self.file.is_some()
    }

    /// Whether the pipeline state is in memory (and rebuilt).
    pub fn is_loaded(&self) -> bool {
        self.pipeline.is_some() && !self.replaying
    }

    /// The detected format.
    pub fn format(&self) -> Option<Format> {
        self.pipeline.as_ref().and_then(Pipeline::format).or(match self.kind {
            Kind::Transcript(f) => f,
            Kind::Events => None,
        })
    }

    /// The format's name for records: `unknown` until a line shows it, `events` for an event log.
    pub fn format_name(&self) -> &'static str {
        match (self.format(), self.kind) {
            (Some(f), _) => f.as_str(),
            (None, Kind::Events) => "events",
            (None, Kind::Transcript(_)) => "unknown",
        }
    }

    /// Calls waiting for their result at the tail (as of the last read).
    pub fn pending(&self) -> usize {
        self.pending_seen
    }

    /// Closes the handle (it is reopened when needed).
    pub fn close(&mut self) {
        self.file = None;
    }

    /// Drops the pipeline state and the handle; the file's progress is kept.
    pub fn evict(&mut self) {
        self.stop_read_ahead();
        self.owed = self.owed();
        if let Some(p) = self.pipeline.take() {
            if !self.replaying {
                self.committed = p.committed_offset();
            }
        }
        self.replaying = false;
        self.offset = self.committed;
        self.ring = Vec::new();
        self.file = None;
    }

    /// Emits `file_opened` at `mark` (before the file's other records of this poll) once the
    /// file has a record to report or a complete line read.
    pub fn announce(&mut self, out: &mut Vec<Record>, mark: usize) {
        if self.announced || (out.len() <= mark && self.committed() <= self.start) {
            return;
        }
        self.announced = true;
        out.insert(mark, Record::FileOpened { time: now(), file: self.path.display().to_string(), format: self.format_name().to_owned(), offset: self.start });
    }

    /// Starts over from the first byte (truncation, rewrite). The handle stays: same inode.
    fn reset(&mut self) {
        self.ahead = None;
        self.pipeline = None;
        self.replaying = false;
        self.owed.clear();
        self.offset = 0;
        self.committed = 0;
        self.start = 0;
        self.head = None;
        self.head_buf.clear();
        self.fp = None;
        self.ring.clear();
        self.tail.clear();
        self.tail_done = false;
        self.tail_end = None;
        self.seen = Stats::default();
        self.events_seen.clear();
    }

    /// What identifies the content read so far, for a fetch to check.
    fn check(&self) -> fetch::Check {
        fetch::Check { end: self.offset.max(self.replay_end()).max(self.fp.map_or(0, |fp| fp.end)), head: self.head, fp: self.fp }
    }

    /// Whether `path` holds this very file: the same inode, and the content read from it (a
    /// rename keeps both; an unrelated file on a reused inode has neither).
    pub fn same_file_at(&self, path: &Path) -> io::Result<bool> {
        let Some(id) = self.id else { return Ok(false) };
        fetch::same_file_at(path, id, &self.check())
    }

    /// Whether a fetch is under way.
    pub fn fetching(&self) -> bool {
        self.fetching
    }

    /// Whether the file was polled while a fetch was under way (and forgets it).
    pub fn take_again(&mut self) -> bool {
        std::mem::take(&mut self.again)
    }

    /// Forgets the IO under way for the file's old path (it moved to another): the fetch's
    /// outcome, when it comes, is not applied, and the paused calls are read again if needed.
    pub fn cancel_io(&mut self) {
        self.fetching = false;
        self.again = false;
        self.rest = None;
        self.timing_out = false;
    }

    /// Starts a poll: the IO it needs, for [`fetch::fetch`] to do off the loop, and the
    /// fetch's number for [`Tailed::finish_poll`]. `None` while a fetch is under way (the file
    /// is polled again once it is back).
    pub fn begin_poll(&mut self) -> Option<(u64, fetch::Request)> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        if self.fetching {
            self.again = true;
            return None;
        }
        self.rest = None;
        if self.ahead.as_ref().is_some_and(|b| b.broken()) {
            tracing::warn!(file = %self.path.display(), "a reader thread failed; reading on the loop");
            self.stop_read_ahead();
        }
        if self.replaying && self.pipeline.is_some() && self.offset >= self.replay_end() {
            self.finish_replay();
        }
        // Read ahead: the reader threads are on it; the fetch only checks the file.
        let read = self.ahead.is_none().then(|| {
            // A file whose state is not in memory is rebuilt from its start.
            let (at, replay) = if self.pipeline.is_some() { (self.offset, self.replaying) } else { (0, self.replay_end() > 0) };
            // Nothing new: a file whose state is not in memory is not rebuilt for nothing,
            // unless its tail is still to be evaluated (restored from a checkpoint taken
            // before that). A torn line read before is not new.
            let beyond = (!self.replaying && (self.pipeline.is_some() || self.tail_done)).then(|| self.offset.max(self.replay_end()));
            fetch::Plan { at, until: replay.then_some(self.replay_end()), beyond }
        });
        let rest_from = self.is_loaded().then(|| match (&self.ahead, &self.pipeline) {
            (Some(_), Some(p)) => p.committed_offset(),
            _ => self.offset,
        });
        let req = fetch::Request {
            path: self.path.clone(),
            file: self.file.clone(),
            id: self.id,
            last: self.id.map(|_| (self.size, self.mtime)),
            check: self.check(),
            read,
            rest_from,
        };
        self.fetching = true;
        self.fetch_gen = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some((self.fetch_gen, req))
    }

    /// Applies what fetch `gen` found: the file's identity checked, what it read turned into
    /// records. Returns how the poll went and the bytes read (with where the file went, if it
    /// left its path); `None` if the fetch is not the one under way for this file (cancelled).
    pub fn finish_poll(&mut self, gen: u64, outcome: io::Result<Outcome>, out: &mut Vec<Record>) -> Option<io::Result<(Polled, u64)>> {
        if !self.fetching || gen != self.fetch_gen {
            return None;
        }
        self.fetching = false;
        let found = match outcome {
            Err(e) => return Some(Err(e)),
            Ok(Outcome::Gone(left)) => {
                self.rest = left.rest;
                return Some(Ok((Polled::Gone(left.moved), 0)));
            }
            Ok(Outcome::Replaced(left)) => {
                self.rest = left.rest;
                return Some(Ok((Polled::Replaced(left.moved), 0)));
            }
            Ok(Outcome::Found(f)) => f,
        };
        self.file = Some(found.file);
        self.id = Some(found.id);
        if found.rewritten {
            // Retractions first: after `file_truncated` nothing said about the file holds.
            for f in std::mem::take(&mut self.tail) {
                out.push(retracted(&self.path, &f, "the file was truncated or rewritten"));
            }
            if self.announced {
                out.push(Record::FileTruncated { time: now(), file: self.path.display().to_string() });
            }
            self.left(Left::Rewritten { size: found.size }, out);
            self.reset();
        }
        self.size = found.size;
        self.mtime = found.mtime;
        self.mtime_s = found.mtime.0;
        self.modified = found.modified;
        if found.rewritten {
            // Read again from the start, by the next poll.
            return Some(Ok((Polled::More, 0)));
        }
        match found.data {
            Some(data) if self.ahead.is_none() => Some(Ok(self.apply(data, out))),
            _ => Some(Ok((Polled::Ok, 0))),
        }
    }

    /// Feeds the bytes a fetch read to the pipeline (replayed bytes are not reported).
    fn apply(&mut self, data: fetch::Data, out: &mut Vec<Record>) -> (Polled, u64) {
        self.load();
        if data.at != self.offset {
            // Not what follows (nothing should move the offset while a fetch is under way):
            // read again.
            debug_assert!(false, "fetched at {} for a file read up to {}", data.at, self.offset);
            return (Polled::More, 0);
        }
        let fresh = self.feed(&data.bytes);
        let n = data.bytes.len() as u64;
        if n > 0 {
            self.fp = Some(Fingerprint { end: self.offset, len: data.tail.len() as u64, hash: xxhash_rust::xxh3::xxh3_64(&data.tail) });
        }
        if self.replaying && self.offset >= self.replay_end() {
            self.finish_replay();
        }
        let ahead = self.start_read_ahead();
        self.after_read(fresh, out);
        if ahead {
            (Polled::Ok, n)
        } else if data.end {
            // Read to its end: from now on, what is read is growth.
            self.catching_up = None;
            (Polled::Ok, n)
        } else {
            (Polled::More, n)
        }
    }

    /// Builds the pipeline if its state is not in memory: the file is replayed up to the
    /// committed offset first.
    fn load(&mut self) {
        if self.pipeline.is_none() {
            let mut p = self.spec.build(self.kind);
            p.grew(clock(self.last_growth));
            self.pipeline = Some(p);
            self.offset = 0;
            self.ring.clear();
            self.replaying = self.replay_end() > 0;
        }
    }

    /// Feeds `bytes`, read at the offset, to the pipeline; returns how many were new (not
    /// replayed). (The fingerprint after them is the caller's.)
    fn feed(&mut self, bytes: &[u8]) -> u64 {
        self.keep(bytes);
        note_head(&mut self.head_buf, self.head, self.offset, bytes);
        // The lenient policy never stops.
        let _ = self.pipeline.as_mut().expect("loaded").feed(bytes);
        self.offset += bytes.len() as u64;
        self.settle_head();
        if self.replaying {
            0
        } else {
            bytes.len() as u64
        }
    }

    /// Hands `bytes`, read at the offset, to the sinks that keep them (unless replayed).
    fn keep(&mut self, bytes: &[u8]) {
        if let (true, false, Some(id)) = (self.spec.keep_bytes, self.replaying, self.id) {
            if !bytes.is_empty() {
                self.bytes.push(Bytes::Read { path: self.path.clone(), id, at: self.offset, bytes: bytes.to_vec() });
            }
        }
    }

    /// Reads what the open handle (the inode that left the path) still has after the offset:
    /// lines written just before a rotation or deletion are still the file's. What the fetch
    /// that found the path gone read is used; only beyond [`fetch::MAX_REST`] bytes is more
    /// read here, on the loop.
    pub fn read_rest(&mut self, buf: &mut Vec<u8>, out: &mut Vec<Record>) -> u64 {
        let rest = self.rest.take();
        self.stop_read_ahead();
        if self.file.is_none() || !self.is_loaded() {
            return 0;
        }
        let mut n = 0;
        if let Some(r) = rest {
            let end = r.at + r.bytes.len() as u64;
            if (r.at..=end).contains(&self.offset) {
                let fresh = self.feed(&r.bytes[(self.offset - r.at) as usize..]);
                self.after_read(fresh, out);
                n += fresh;
                if r.complete {
                    return n;
                }
            }
        }
        n + self.read(buf, out).unwrap_or(0)
    }

    /// Reads the rest of the file through its handle, on the loop (a file that left its path
    /// with more than [`fetch::MAX_REST`] bytes unread); returns the bytes read.
    fn read(&mut self, buf: &mut Vec<u8>, out: &mut Vec<Record>) -> io::Result<u64> {
        self.load();
        buf.resize(crate::sources::READ_CHUNK, 0);
        let f = self.file.clone().expect("opened");
        let mut fresh = 0;
        let r = loop {
            match f.read_at(buf, self.offset) {
                Ok(0) => break Ok(()),
                Ok(n) => fresh += self.feed(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        self.ring = Vec::new();
        self.after_read(fresh, out);
        r.map(|()| fresh)
    }

    /// Whether the unread part is a backlog to read ahead, and where the read-ahead ends
    /// (`Some(None)`: at the end of the file; a replay ends where [`Tailed::replay_end`] says).
    fn read_ahead_end(&self) -> Option<Option<u64>> {
        let end = self.replaying.then(|| self.replay_end());
        (end.unwrap_or(self.size).saturating_sub(self.offset) >= READ_AHEAD_MIN).then_some(end)
    }

    /// Starts reading the backlog ahead on reader threads, if it is one, the format is settled,
    /// and a reader is free; whether it is read ahead now.
    fn start_read_ahead(&mut self) -> bool {
        if self.ahead.is_some() {
            return true;
        }
        let Some(f) = self.file.clone() else { return false };
        let Some(end) = self.read_ahead_end() else { return false };
        let Some(c) = self.pipeline.as_mut().and_then(Pipeline::checker_mut) else { return false };
        let Some(cutter) = c.cutter() else { return false };
        // The reader's own descriptor (the loop may close the file's meanwhile); one of the
        // reserve's (`fds::RESERVED`), taken under the gate as a file open is.
        let own = {
            let _gate = super::fds::gate();
            f.try_clone()
        };
        let started = match own {
            Ok(own) => backlog::start(own, self.offset, end, cutter),
            Err(_) => Err(cutter),
        };
        match started {
            Ok(b) => {
                self.ahead = Some(Box::new(b));
                true
            }
            Err(cutter) => {
                c.restore_cutter(cutter);
                false
            }
        }
    }

    /// Stops reading ahead: the reads not applied yet are dropped, and the file is read again
    /// from the last line applied (where the checker's framing stands).
    fn stop_read_ahead(&mut self) {
        if self.ahead.take().is_some() {
            if let Some(p) = &self.pipeline {
                self.offset = p.committed_offset();
            }
            self.ring.clear();
        }
    }

    /// The reader that reads the file ahead, if one does.
    pub fn reading_ahead(&self) -> Option<u64> {
        self.ahead.as_ref().map(|b| b.id())
    }

    /// A new read-ahead's stream and its reader's id, for the loop to poll.
    pub fn take_stream(&mut self) -> Option<(u64, tokio_stream::wrappers::ReceiverStream<Item>)> {
        let b = self.ahead.as_mut()?;
        Some((b.id(), b.take_stream()?))
    }

    /// An item from the stream of reader `id`: the reads that are now in file order are
    /// applied to the pipeline, their records added to `out`. Returns the bytes applied and
    /// whether the read-ahead ended (the loop polls the file then, for what is left); `None`
    /// if the file is not read ahead by that reader (any more).
    pub fn take_read(&mut self, id: u64, item: Item, out: &mut Vec<Record>) -> Option<(u64, bool)> {
        let b = self.ahead.as_mut().filter(|b| b.id() == id)?;
        b.accept(item);
        let (mut read, mut fresh, mut ended) = (0u64, 0u64, false);
        while let Some(item) = self.ahead.as_mut().and_then(|b| b.next_in_order()) {
            match item {
                Item::Read { at, chunk, .. } => {
                    debug_assert_eq!(at, self.offset, "reads are applied in file order");
                    let n = chunk.bytes().len() as u64;
                    self.keep(chunk.bytes());
                    let c = self.pipeline.as_mut().and_then(Pipeline::checker_mut).expect("only a transcript is read ahead");
                    note_read(&mut self.head_buf, self.head, &mut self.ring, self.offset, chunk.bytes());
                    let buf = c.apply_parsed(chunk);
                    // The stages saw every output through the observer.
                    c.drain().for_each(drop);
                    self.ahead.as_ref().expect("read ahead").give_back(buf);
                    self.offset += n;
                    read += n;
                    if !self.replaying {
                        fresh += n;
                    }
                }
                Item::End { cutter, error, .. } => {
                    let c = self.pipeline.as_mut().and_then(Pipeline::checker_mut).expect("only a transcript is read ahead");
                    c.restore_cutter(cutter);
                    self.ahead = None;
                    if let Some(e) = error {
                        // Read again on the loop, which retries.
                        tracing::debug!(file = %self.path.display(), error = %e, "read-ahead stopped");
                    }
                    ended = true;
                }
            }
        }
        self.settle_head();
        let want = (FP_LEN as u64).min(self.offset) as usize;
        if read > 0 && self.ring.len() >= want {
            self.fp = Some(Fingerprint { end: self.offset, len: want as u64, hash: xxhash_rust::xxh3::xxh3_64(&self.ring[self.ring.len() - want..]) });
        }
        if ended {
            self.ring = Vec::new();
            if self.replaying && self.offset >= self.replay_end() {
                self.finish_replay();
            }
        }
        self.after_read(fresh, out);
        Some((read, ended))
    }

    /// After `fresh` new bytes were read: growth (unless a quiet file is caught up with), the
    /// tail findings retracted, the records.
    fn after_read(&mut self, fresh: u64, out: &mut Vec<Record>) {
        if fresh > 0 {
            let age = self.modified.and_then(|m| m.elapsed().ok());
            match self.catching_up {
                // Modified while it was being caught up with: it grew then.
                Some(grace) if age.is_some_and(|a| a < grace) => {
                    self.last_growth = Instant::now().checked_sub(age.unwrap_or_default()).unwrap_or_else(Instant::now)
                }
                Some(_) => {}
                None => self.last_growth = Instant::now(),
            }
            self.counts.push(Count::BytesRead(fresh));
            self.tail_end = None;
            if self.tail_done || !self.tail.is_empty() {
                for f in std::mem::take(&mut self.tail) {
                    out.push(retracted(&self.path, &f, "the file grew"));
                }
                self.tail_done = false;
            }
            if let Some(p) = self.pipeline.as_mut() {
                p.grew(clock(self.last_growth));
            }
        }
        if !self.replaying {
            self.collect(out);
        }
    }

    /// Hashes the first bytes once more of them were read.
    fn settle_head(&mut self) {
        if self.head.is_none_or(|(_, len)| len < self.head_buf.len() as u64) && !self.head_buf.is_empty() {
            self.head = Some((xxhash_rust::xxh3::xxh3_64(&self.head_buf), self.head_buf.len() as u64));
            if self.head_buf.len() as u64 >= HEAD_LEN {
                self.head_buf = Vec::new();
            }
        }
    }

    /// The pipeline is rebuilt up to the committed offset (or where the tail was looked at):
    /// what replay produced was reported before; only its counters matter. What was reported
    /// about the tail still holds (the file did not grow): it is not due again.
    fn finish_replay(&mut self) {
        self.replaying = false;
        if let Some(p) = self.pipeline.as_mut() {
            p.replayed(&std::mem::take(&mut self.owed));
            if self.tail_end.is_some() {
                p.tail_stands(self.tail_done, &self.tail);
            }
            self.seen = p.stats().cloned().unwrap_or_default();
            self.events_seen = p.counts().cloned().unwrap_or_default();
        }
    }

    /// The stages' deadline for this file, if its state is in memory.
    pub fn deadline(&self) -> Option<Instant> {
        self.pipeline.as_ref().filter(|_| !self.replaying && self.ahead.is_none() && !self.timing_out).and_then(Pipeline::poll_deadline).map(instant)
    }

    /// Whether its stages read the calls a host paused beside it (`pending.json`) when its
    /// deadline comes.
    pub fn reads_paused(&self) -> bool {
        matches!(self.kind, Kind::Transcript(_)) && self.spec.paused_calls
    }

    /// Its deadline came, and the paused calls are being read: the deadline waits for them
    /// ([`Tailed::handle_timeout`]).
    pub fn hold_for_paused(&mut self) {
        self.timing_out = true;
    }

    /// Whether its deadline waits for the paused calls.
    pub fn timing_out(&self) -> bool {
        self.timing_out
    }

    /// The clock reached `now` (`paused`: the calls paused beside it, read off the loop when
    /// [`Tailed::reads_paused`]): what the stages have due (the tail findings of a quiet file,
    /// a repair) becomes records; tail findings are kept, to be retracted when the file grows.
    pub fn handle_timeout(&mut self, now: Instant, paused: std::collections::HashSet<String>, out: &mut Vec<Record>) {
        self.timing_out = false;
        let Some(p) = self.pipeline.as_mut().filter(|_| !self.replaying && self.ahead.is_none()) else { return };
        let inputs = Inputs { paused };
        p.handle_timeout(clock(now), &inputs);
        self.collect(out);
        if self.pipeline.as_ref().is_some_and(Pipeline::tail_done) {
            self.tail_done = true;
        }
        if self.tail_done || !self.tail.is_empty() {
            self.tail_end = Some(self.offset);
        }
    }

    /// The file left its path deleted, or was rewritten under the reader ([`Left`]): the stages
    /// are told, with what had been read of it, and what they make of it is added to `out`.
    /// A file whose pipeline is not in memory (evicted, replaying) is told through a fresh one:
    /// its stages have seen none of the stream, the shell's count is what was read.
    pub fn left(&mut self, how: Left, out: &mut Vec<Record>) {
        if let (true, Some(id)) = (self.spec.keep_bytes, self.id) {
            let how = match how {
                Left::Deleted => "deleted",
                Left::Rewritten { size } if size < self.offset => "truncated",
                Left::Rewritten { .. } => "rewritten",
            };
            self.bytes.push(Bytes::Left { path: self.path.clone(), id, how });
        }
        let bytes = self.committed();
        if bytes == 0 {
            return;
        }
        let gone = Gone { how, bytes, lines: self.seen.lines, messages: self.seen.messages };
        match self.pipeline.as_mut().filter(|_| !self.replaying) {
            Some(p) => {
                p.left(&gone);
                self.collect(out);
            }
            None => {
                let mut p = self.spec.build(self.kind);
                p.left(&gone);
                let events: Vec<Event> = p.drain().collect();
                self.records(events, out);
            }
        }
    }

    /// Turns the pipeline's events into records and its counters into metrics.
    fn collect(&mut self, out: &mut Vec<Record>) {
        let Some(p) = self.pipeline.as_mut() else { return };
        self.pending_seen = p.pending();
        let events: Vec<Event> = p.drain().collect();
        self.records(events, out);
        let format = self.format();
        let Some(p) = self.pipeline.as_mut() else { return };
        if let Some(s) = p.stats() {
            stats_counts(&self.seen, s, format, &mut self.counts);
            self.seen = s.clone();
        }
        if let Some(counts) = p.counts() {
            for (ty, n) in counts {
                let before = self.events_seen.get(ty).copied().unwrap_or(0);
                if *n > before {
                    self.counts.push(Count::Events(ty.clone(), n - before));
                }
            }
            self.events_seen = counts.clone();
        }
        // What this step needed beyond the file's state (scratch, drained buffers, empty
        // tables) is let go: a file that goes idle now keeps its state only.
        p.shrink();
    }

    /// The records of a pipeline's events, in order.
    fn records(&mut self, events: Vec<Event>, out: &mut Vec<Record>) {
        let file = self.path.display().to_string();
        let format = self.format();
        for e in events {
            match e {
                Event::Output(Output::Finding(f)) => {
                    out.push(Record::Finding { time: now(), file: file.clone(), format, finding: f });
                }
                Event::Output(Output::Demoted { line, kind, call_id, reason }) => {
                    out.push(Record::FindingDemoted { time: now(), file: file.clone(), change: Change { line, kind, call_id, reason } })
                }
                Event::Compaction { line } => out.push(Record::Compaction { time: now(), file: file.clone(), format, line }),
                Event::Tail(f) => {
                    self.tail.push(f.clone());
                    out.push(Record::Finding { time: now(), file: file.clone(), format, finding: f });
                }
                Event::RepairDue => self.repair_due = true,
            }
        }
    }
}

/// Call ids a host persisted as paused beside the transcript (`Harness\Transcript`, docs/requirements.md): `pending.json`. One
/// reading for the daemon and the `orphans` verb ([`crate::sources::pending`]); the daemon
/// cannot stop on a bad file, so it warns and takes it as listing nothing.
pub fn paused_calls(transcript: &Path) -> std::collections::HashSet<String> {
    let Some(dir) = transcript.parent() else { return Default::default() };
    crate::sources::pending::paused_calls(dir).unwrap_or_else(|e| {
        tracing::warn!(error = %format!("{e:#}"), "pending.json ignored");
        Default::default()
    })
}

/// The record that withdraws a tail finding.
pub fn retracted(path: &Path, f: &Finding, reason: &str) -> Record {
    let change = Change { line: f.line, kind: f.kind, call_id: f.call_id.clone(), reason: reason.to_owned() };
    Record::FindingRetracted { time: now(), file: path.display().to_string(), change }
}

/// What grew between two readings of a transcript's counters.
/// The built-in price of `model`, looked up once per model name (a lookup that misses scans
/// the whole table).
fn price_of(model: &str) -> Option<crate::transcript::pricing::Price> {
    static CACHE: std::sync::Mutex<BTreeMap<String, Option<crate::transcript::pricing::Price>>> = std::sync::Mutex::new(BTreeMap::new());
    let mut c = CACHE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(p) = c.get(model) {
        return *p;
    }
    let p = crate::prices::builtin().lookup(model).map(|(_, p)| *p);
    // Model names come from the files: a file of made-up names cannot grow this without bound.
    if c.len() >= 4096 {
        c.clear();
    }
    c.insert(model.to_owned(), p);
    p
}

fn stats_counts(before: &Stats, after: &Stats, format: Option<Format>, out: &mut Vec<Count>) {
    let fmt = format.map_or("unknown", Format::as_str);
    let d = |a: u64, b: u64| a.saturating_sub(b);
    // Every line read counts, those that fail to parse too (issue 30: top's lines/s left them out).
    let (a, b) = (after.non_blank_lines(), before.non_blank_lines());
    if a > b {
        out.push(Count::Lines(fmt, d(a, b)));
    }
    if after.calls > before.calls {
        out.push(Count::ToolCalls(fmt, d(after.calls, before.calls)));
    }
    if after.results > before.results {
        out.push(Count::ToolResults(fmt, d(after.results, before.results)));
    }
    if after.compactions > before.compactions {
        out.push(Count::Compactions(fmt, d(after.compactions, before.compactions)));
    }
    for (model, u) in &after.tokens {
        let b = before.tokens.get(model).copied().unwrap_or_default();
        // The cost of everything read so far, rounded once: the deltas of a file add up to it.
        if let Some(price) = price_of(model) {
            let long = |s: &Stats| s.long_context.get(model).copied().unwrap_or_default();
            let micros = |all: &crate::transcript::model::Usage, long: &crate::transcript::model::Usage| {
                (crate::transcript::pricing::cost(&price, all, long) * 1e6).round() as u64
            };
            let (now, then) = (micros(u, &long(after)), micros(&b, &long(before)));
            if now > then {
                out.push(Count::CostMicros(model.clone(), now - then));
            }
        }
        for (ty, a, bb) in [
            ("input", u.input, b.input),
            ("output", u.output, b.output),
            ("cache_read", u.cache_read, b.cache_read),
            ("cache_creation", u.cache_creation, b.cache_creation),
        ] {
            if a > bb {
                out.push(Count::Tokens(model.clone(), ty, a - bb));
            }
        }
    }
}
