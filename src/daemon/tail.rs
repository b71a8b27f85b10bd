//! One watched file: its identity, how far it has been read, and the pipeline state (the same
//! pure [`Checker`] the batch verbs use, or the event-log stage).
//!
//! Identity is device + inode plus a hash of the first bytes. A path that now names another
//! inode was rotated or recreated; a file that shrank, or whose first bytes changed, was
//! truncated or rewritten in place and is read again from the start. The pipeline state of a
//! quiet file is dropped from memory and rebuilt from the file (replayed without emitting) when
//! it grows again, so that thousands of idle files cost little.

use super::envelope::{now, Change, Record};
use crate::telemetry as t;
use crate::transcript::finding::Output;
use crate::transcript::model::{Entry, Parsed};
use crate::transcript::stages::events::EventLog;
use crate::transcript::{Checker, Finding, Format, Observer, Options, Stats};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How many leading bytes identify a file's content.
pub const HEAD_LEN: u64 = 1024;

/// Records compaction lines as the checker reads them.
#[derive(Debug, Default)]
pub struct Tap {
    compactions: Vec<u64>,
}

impl Observer for Tap {
    fn line(&mut self, number: u64, parsed: &Parsed<'_>) {
        if matches!(parsed.entry, Entry::Compaction { .. }) {
            self.compactions.push(number);
        }
    }
}

/// The per-file pipeline.
#[derive(Debug)]
pub enum Pipeline {
    /// A transcript.
    Transcript(Box<Checker<Tap>>),
    /// An event log.
    Events(Box<EventLog>),
}

impl Pipeline {
    fn feed(&mut self, chunk: &[u8]) {
        match self {
            // The lenient policy never stops.
            Pipeline::Transcript(c) => {
                let _ = c.feed(chunk);
            }
            Pipeline::Events(e) => e.feed(chunk),
        }
    }

    fn committed(&self) -> u64 {
        match self {
            Pipeline::Transcript(c) => c.splitter().committed_offset(),
            Pipeline::Events(e) => e.committed_offset(),
        }
    }

    /// What the stream would end with now.
    pub fn tail(&self) -> Vec<Finding> {
        match self {
            Pipeline::Transcript(c) => c.tail(),
            Pipeline::Events(e) => e.tail(),
        }
    }

    fn format(&self) -> Option<Format> {
        match self {
            Pipeline::Transcript(c) => c.format(),
            Pipeline::Events(_) => None,
        }
    }

    fn pending(&self) -> usize {
        match self {
            Pipeline::Transcript(c) => c.pending().len(),
            Pipeline::Events(e) => e.pending(),
        }
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
    /// The path is gone.
    Gone,
    /// The path names another file now.
    Replaced,
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
    max_line: usize,
    id: Option<(u64, u64)>,
    head: Option<(u64, u64)>,
    offset: u64,
    pipeline: Option<Pipeline>,
    committed: u64,
    file: Option<File>,
    /// When it last grew (or was picked up).
    pub last_growth: Instant,
    /// Tail findings reported for the file as it stands.
    pub tail: Vec<Finding>,
    /// Whether the tail was evaluated since the last growth.
    pub tail_done: bool,
    /// Size at the last poll.
    pub size: u64,
    /// Modification time at the last poll (seconds since the epoch).
    pub mtime: i64,
    /// Size at which a repaired copy was last written.
    pub repaired_size: Option<u64>,
    /// Whether errors were reported since the last repair.
    pub has_errors: bool,
    seen: Stats,
    events_seen: BTreeMap<String, u64>,
    pending_seen: usize,
}

impl Tailed {
    /// A file to read from the start (`skip_to`: replay silently up to this offset first, as for
    /// `read_from = "end"` or a checkpoint).
    pub fn new(path: PathBuf, source: usize, rel: PathBuf, kind: Kind, max_line: usize, skip_to: u64) -> Self {
        Tailed {
            path,
            source,
            rel,
            kind,
            max_line,
            id: None,
            head: None,
            offset: 0,
            pipeline: None,
            committed: skip_to,
            file: None,
            last_growth: Instant::now(),
            tail: Vec::new(),
            tail_done: false,
            size: 0,
            mtime: 0,
            repaired_size: None,
            has_errors: false,
            seen: Stats::default(),
            events_seen: BTreeMap::new(),
            pending_seen: 0,
        }
    }

    /// Restores identity from a checkpoint.
    pub fn restore(&mut self, dev: u64, ino: u64, head_hash: u64, head_len: u64, tail: Vec<Finding>) {
        self.id = Some((dev, ino));
        self.head = (head_len > 0).then_some((head_hash, head_len));
        self.tail_done = !tail.is_empty();
        self.tail = tail;
    }

    /// Device and inode.
    pub fn id(&self) -> Option<(u64, u64)> {
        self.id
    }

    /// Hash and length of the first bytes.
    pub fn head(&self) -> Option<(u64, u64)> {
        self.head
    }

    /// Offset of the first line not fully read.
    pub fn committed(&self) -> u64 {
        self.pipeline.as_ref().map_or(self.committed, Pipeline::committed)
    }

    /// Bytes written and not read yet.
    pub fn lag(&self) -> u64 {
        self.size.saturating_sub(self.offset.max(self.committed))
    }

    /// Whether a file handle is open.
    pub fn is_open(&self) -> bool {
        self.file.is_some()
    }

    /// Whether the pipeline state is in memory.
    pub fn is_loaded(&self) -> bool {
        self.pipeline.is_some()
    }

    /// The detected format.
    pub fn format(&self) -> Option<Format> {
        self.pipeline.as_ref().and_then(Pipeline::format).or(match self.kind {
            Kind::Transcript(f) => f,
            Kind::Events => None,
        })
    }

    /// Calls waiting for their result at the tail (as of the last read).
    pub fn pending(&self) -> usize {
        self.pending_seen
    }

    /// Closes the handle (it is reopened at the offset when needed).
    pub fn close(&mut self) {
        self.file = None;
    }

    /// Drops the pipeline state and the handle; the file's progress is kept.
    pub fn evict(&mut self) {
        if let Some(p) = self.pipeline.take() {
            self.committed = p.committed();
        }
        self.offset = self.committed;
        self.file = None;
    }

    fn new_pipeline(&self) -> Pipeline {
        match self.kind {
            Kind::Transcript(format) => {
                Pipeline::Transcript(Box::new(Checker::observed(Options { format, max_line_bytes: self.max_line, strict: false, jobs: 1 }, Tap::default())))
            }
            Kind::Events => Pipeline::Events(Box::new(EventLog::new(self.max_line))),
        }
    }

    fn open(&mut self) -> io::Result<&mut File> {
        if self.file.is_none() {
            self.file = Some(File::open(&self.path)?);
        }
        Ok(self.file.as_mut().expect("just opened"))
    }

    /// Starts over from the first byte (truncation, rewrite).
    fn reset(&mut self) {
        self.pipeline = None;
        self.offset = 0;
        self.committed = 0;
        self.head = None;
        self.tail.clear();
        self.tail_done = false;
        self.file = None;
        self.seen = Stats::default();
        self.events_seen.clear();
    }

    /// Makes sure the pipeline is in memory: builds it by replaying the file up to the committed
    /// offset without emitting anything.
    fn load(&mut self, buf: &mut Vec<u8>) -> io::Result<()> {
        if self.pipeline.is_some() {
            return Ok(());
        }
        let mut p = self.new_pipeline();
        let upto = self.committed;
        let f = self.open()?;
        f.seek(SeekFrom::Start(0))?;
        let mut left = upto;
        buf.resize(super::READ_CHUNK, 0);
        while left > 0 {
            let want = (left as usize).min(buf.len());
            let n = f.read(&mut buf[..want])?;
            if n == 0 {
                break;
            }
            p.feed(&buf[..n]);
            left -= n as u64;
        }
        // What replay produced was emitted before; only its counters matter.
        if let Pipeline::Transcript(c) = &mut p {
            c.drain().for_each(drop);
            self.seen = c.stats().clone();
        }
        if let Pipeline::Events(e) = &mut p {
            e.drain_findings();
            self.events_seen = e.counts().clone();
        }
        self.offset = upto - left;
        self.pipeline = Some(p);
        Ok(())
    }

    /// Reads what is new, turning it into records.
    pub fn poll(&mut self, buf: &mut Vec<u8>, out: &mut Vec<Record>, compactions: bool) -> io::Result<Polled> {
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Polled::Gone),
            Err(e) => return Err(e),
        };
        let id = (meta.dev(), meta.ino());
        if self.id.is_some_and(|old| old != id) {
            // Rotated or recreated: first read what was appended to the old inode before.
            if self.file.is_some() && self.pipeline.is_some() {
                let _ = self.read_to_end(buf, out, compactions);
            }
            return Ok(Polled::Replaced);
        }
        self.id = Some(id);
        self.mtime = meta.mtime();
        let size = meta.len();
        let mut rewritten = size < self.offset.max(self.committed);
        if !rewritten {
            if let Some((hash, len)) = self.head {
                if size >= len && self.size != size {
                    rewritten = head_hash(&self.path, len)? != hash;
                }
            }
        }
        if rewritten {
            out.push(Record::FileTruncated { time: now(), file: self.path.display().to_string() });
            for f in std::mem::take(&mut self.tail) {
                out.push(retracted(&self.path, &f, "the file was truncated or rewritten"));
            }
            self.reset();
        }
        self.size = size;
        if size == self.offset && self.pipeline.is_some() {
            return Ok(Polled::Ok);
        }
        if self.head.is_none() && size > 0 {
            let len = size.min(HEAD_LEN);
            self.head = Some((head_hash(&self.path, len)?, len));
        }
        self.read_to_end(buf, out, compactions)?;
        Ok(Polled::Ok)
    }

    fn read_to_end(&mut self, buf: &mut Vec<u8>, out: &mut Vec<Record>, compactions: bool) -> io::Result<()> {
        self.load(buf)?;
        let start = self.offset;
        let f = self.open()?;
        f.seek(SeekFrom::Start(start))?;
        buf.resize(super::READ_CHUNK, 0);
        let mut read = 0u64;
        let f = self.file.as_mut().expect("opened");
        let p = self.pipeline.as_mut().expect("loaded");
        loop {
            let n = match f.read(buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            p.feed(&buf[..n]);
            read += n as u64;
        }
        self.offset = start + read;
        if read > 0 {
            self.last_growth = Instant::now();
            metrics::counter!(t::BYTES_READ).increment(read);
            if self.tail_done {
                for f in std::mem::take(&mut self.tail) {
                    out.push(retracted(&self.path, &f, "the file grew"));
                }
                self.tail_done = false;
            }
        }
        self.collect(out, compactions);
        Ok(())
    }

    /// Turns the pipeline's outputs into records and its counters into metrics.
    fn collect(&mut self, out: &mut Vec<Record>, compactions: bool) {
        let file = self.path.display().to_string();
        let format = self.format();
        let Some(p) = self.pipeline.as_mut() else { return };
        self.pending_seen = p.pending();
        match p {
            Pipeline::Transcript(c) => {
                let outputs: Vec<Output> = c.drain().collect();
                for o in outputs {
                    match o {
                        Output::Finding(f) => {
                            count_finding(&f);
                            self.has_errors |= f.severity == crate::transcript::Severity::Error;
                            out.push(Record::Finding { time: now(), file: file.clone(), format, finding: f });
                        }
                        Output::Demoted { line, kind, call_id, reason } => {
                            out.push(Record::FindingDemoted { time: now(), file: file.clone(), change: Change { line, kind, call_id, reason } })
                        }
                    }
                }
                for line in c.observer_mut().compactions.drain(..) {
                    if compactions {
                        out.push(Record::Compaction { time: now(), file: file.clone(), format, line });
                    }
                }
                let s = c.stats().clone();
                report_stats(&self.seen, &s, format);
                self.seen = s;
            }
            Pipeline::Events(e) => {
                for f in e.drain_findings() {
                    count_finding(&f);
                    out.push(Record::Finding { time: now(), file: file.clone(), format: None, finding: f });
                }
                for (ty, n) in e.counts() {
                    let before = self.events_seen.get(ty).copied().unwrap_or(0);
                    if *n > before {
                        metrics::counter!(t::EVENTS, "type" => ty.clone()).increment(n - before);
                    }
                }
                self.events_seen = e.counts().clone();
            }
        }
    }

    /// The findings the file would end with now (torn line, empty turn, pending calls), minus
    /// calls a `pending.json` beside it lists as paused; `orphans` false leaves calls out.
    pub fn tail_findings(&self, orphans: bool) -> Vec<Finding> {
        let Some(p) = self.pipeline.as_ref() else { return self.tail.clone() };
        let paused = paused_calls(&self.path);
        p.tail()
            .into_iter()
            .filter(|f| f.kind != crate::transcript::Kind::OrphanCall || (orphans && !f.call_id.as_ref().is_some_and(|c| paused.contains(c))))
            .collect()
    }
}

/// Call ids a host persisted as paused beside the transcript (seed 003): `pending.json`, an
/// array of objects with a `call_id`.
pub fn paused_calls(transcript: &Path) -> Vec<String> {
    let Some(dir) = transcript.parent() else { return Vec::new() };
    let Ok(bytes) = std::fs::read(dir.join("pending.json")) else { return Vec::new() };
    let Ok(serde_json::Value::Array(items)) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        tracing::warn!(dir = %dir.display(), "pending.json is not a JSON array; ignored");
        return Vec::new();
    };
    items.iter().filter_map(|i| i.get("call_id").and_then(|c| c.as_str()).map(str::to_owned)).collect()
}

fn head_hash(path: &Path, len: u64) -> io::Result<u64> {
    let mut f = File::open(path)?;
    let mut b = vec![0u8; len as usize];
    f.read_exact(&mut b)?;
    Ok(xxhash_rust::xxh3::xxh3_64(&b))
}

/// The record that withdraws a tail finding.
pub fn retracted(path: &Path, f: &Finding, reason: &str) -> Record {
    let change = Change { line: f.line, kind: f.kind, call_id: f.call_id.clone(), reason: reason.to_owned() };
    Record::FindingRetracted { time: now(), file: path.display().to_string(), change }
}

/// Counts a finding in the metrics.
pub fn count_finding(f: &Finding) {
    metrics::counter!(t::FINDINGS, "kind" => f.kind.as_str(), "severity" => f.severity.as_str()).increment(1);
}

fn report_stats(before: &Stats, after: &Stats, format: Option<Format>) {
    let fmt = format.map_or("unknown", Format::as_str);
    let d = |a: u64, b: u64| a.saturating_sub(b);
    if after.lines > before.lines {
        metrics::counter!(t::LINES_READ, "format" => fmt).increment(d(after.lines, before.lines));
    }
    if after.calls > before.calls {
        metrics::counter!(t::TOOL_CALLS, "format" => fmt).increment(d(after.calls, before.calls));
    }
    if after.results > before.results {
        metrics::counter!(t::TOOL_RESULTS, "format" => fmt).increment(d(after.results, before.results));
    }
    if after.compactions > before.compactions {
        metrics::counter!(t::COMPACTIONS, "format" => fmt).increment(d(after.compactions, before.compactions));
    }
    for (model, u) in &after.tokens {
        let b = before.tokens.get(model).copied().unwrap_or_default();
        for (ty, a, bb) in [
            ("input", u.input, b.input),
            ("output", u.output, b.output),
            ("cache_read", u.cache_read, b.cache_read),
            ("cache_creation", u.cache_creation, b.cache_creation),
        ] {
            if a > bb {
                metrics::counter!(t::TOKENS, "model" => model.clone(), "type" => ty).increment(a - bb);
            }
        }
    }
}
