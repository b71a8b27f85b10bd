//! What a running daemon shows those who watch it: its output records, live (`/tap`, as
//! Server-Sent Events), and a snapshot of its files (`/stats`, for `transcriptd top`).
//!
//! One [`Tap`] is made by the shell and shared by the daemon's loop (which publishes each
//! step's batch after the sinks took it) and the HTTP listener (which subscribes clients). It
//! outlives configuration reloads, as the listener does.
//!
//! *Invariant*: the tap never slows the pipeline and never takes part in checkpoints. Each
//! client has a bounded queue; [`Tap::publish`] only ever pushes without waiting, and counts
//! the records a full queue cannot take; the client is told that count (a `missed` event) at
//! the place of the gap, before the next record it gets. With no client connected (and no
//! `/stats` reader in the last [`STATS_KEEP`]) a step costs one atomic load.

use crate::sinks::record::Record;
use crate::sinks::Batch;
use crate::transcript::{FindingFilter, Kind, Severity};
use bytes::Bytes;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the daemon keeps making `/stats` snapshots after the last request.
pub const STATS_KEEP: Duration = Duration::from_secs(10);

/// How often at most the daemon makes a `/stats` snapshot.
pub const STATS_EVERY: Duration = Duration::from_millis(250);

/// Which records a tap client gets: the finding filter of the stdout sink (`kind`,
/// `severity`: findings it keeps, corrections of the kinds it keeps, every other record),
/// record `type`s, and a glob on the file.
#[derive(Debug, Clone, Default)]
pub struct TapFilter {
    /// Findings kept (as the stdout sink's `kinds` and `severity`).
    pub findings: FindingFilter,
    /// Record types kept (none listed: every type).
    pub types: Vec<String>,
    /// Files kept (none: every file).
    pub file: Option<globset::GlobMatcher>,
}

impl TapFilter {
    /// Parses a query string: `kind=orphan_call&kind=…` (or comma-separated),
    /// `severity=error|warning`, `type=finding,…`, `file=GLOB` (percent-encoded).
    pub fn parse(query: &str) -> Result<TapFilter, String> {
        let mut f = TapFilter::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = percent_decode(v)?;
            match k {
                "kind" => {
                    for s in v.split(',').filter(|s| !s.is_empty()) {
                        f.findings.kinds.push(s.parse::<Kind>().map_err(|e| format!("kind: {e}"))?);
                    }
                }
                "severity" => {
                    f.findings.severity = Some(match v.as_str() {
                        "error" => Severity::Error,
                        "warning" => Severity::Warning,
                        other => return Err(format!("severity: {other:?} is neither error nor warning")),
                    })
                }
                "type" => {
                    for s in v.split(',').filter(|s| !s.is_empty()) {
                        if !crate::sinks::record::TYPES.contains(&s) {
                            return Err(format!("type: {s:?} is no record type ({})", crate::sinks::record::TYPES.join(", ")));
                        }
                        f.types.push(s.to_owned());
                    }
                }
                "file" => {
                    let g = globset::GlobBuilder::new(&v).literal_separator(false).build().map_err(|e| format!("file: {e}"))?;
                    f.file = Some(g.compile_matcher());
                }
                other => return Err(format!("unknown parameter {other:?} (kind, severity, type, file)")),
            }
        }
        Ok(f)
    }

    /// Whether a client with this filter gets `r`. Unlike the stdout sink's, a finding filter
    /// (`kind`, `severity`) without `type` keeps findings and their corrections alone: who
    /// taps for `orphan_call` wants those, not every file opened.
    pub fn keeps(&self, r: &Record) -> bool {
        let ty = type_of(r);
        let typed = if self.types.is_empty() {
            self.findings.keeps_all() || matches!(ty, "finding" | "finding_demoted" | "finding_retracted")
        } else {
            self.types.iter().any(|t| t == ty)
        };
        typed && r.passes(&self.findings) && self.file.as_ref().is_none_or(|g| g.is_match(file_of(r)))
    }
}

fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
                out.push(hex.ok_or_else(|| format!("bad percent-encoding in {s:?}"))?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} is not UTF-8"))
}

/// A record's `type`.
pub fn type_of(r: &Record) -> &'static str {
    match r {
        Record::Finding { .. } => "finding",
        Record::FindingDemoted { .. } => "finding_demoted",
        Record::FindingRetracted { .. } => "finding_retracted",
        Record::FileOpened { .. } => "file_opened",
        Record::FileClosed { .. } => "file_closed",
        Record::FileTruncated { .. } => "file_truncated",
        Record::Compaction { .. } => "compaction",
        Record::Repaired { .. } => "repaired",
        Record::RepairPlanned { .. } => "repair_planned",
    }
}

/// A record's `file`.
pub fn file_of(r: &Record) -> &str {
    match r {
        Record::Finding { file, .. }
        | Record::FindingDemoted { file, .. }
        | Record::FindingRetracted { file, .. }
        | Record::FileOpened { file, .. }
        | Record::FileClosed { file, .. }
        | Record::FileTruncated { file, .. }
        | Record::Compaction { file, .. }
        | Record::Repaired { file, .. }
        | Record::RepairPlanned { file, .. } => file,
    }
}

/// What a client's queue holds, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A record, as its JSON line (with the newline).
    Record(Bytes),
    /// This many records were dropped here: the queue was full.
    Missed(u64),
}

impl Item {
    /// The item as a Server-Sent Event: a record is a `data:` line of the default event type,
    /// a gap an event of type `missed` with `{"missed":N}`.
    pub fn write_sse(&self, out: &mut Vec<u8>) {
        match self {
            Item::Record(line) => {
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(line.strip_suffix(b"\n").unwrap_or(line));
                out.extend_from_slice(b"\n\n");
            }
            Item::Missed(n) => out.extend_from_slice(format!("event: missed\ndata: {{\"missed\":{n}}}\n\n").as_bytes()),
        }
    }
}

#[derive(Debug, Default)]
struct Queue {
    items: VecDeque<Item>,
    /// Records in `items` (gaps aside).
    records: usize,
    /// Records dropped since the last one queued.
    missed: u64,
    /// When the client last took its queue.
    last_take: Option<Instant>,
    /// Whether its last take found nothing: it waits for records (and is not stuck writing).
    parked: bool,
}

/// One tap client.
#[derive(Debug)]
pub struct Client {
    id: u64,
    filter: TapFilter,
    capacity: usize,
    queue: Mutex<Queue>,
    ready: tokio::sync::Notify,
}

impl Client {
    fn push(&self, r: &Record, line: &Bytes) {
        if !self.filter.keeps(r) {
            return;
        }
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.records >= self.capacity {
            q.missed += 1;
            return;
        }
        let missed = std::mem::take(&mut q.missed);
        if missed > 0 {
            q.items.push_back(Item::Missed(missed));
        }
        q.items.push_back(Item::Record(line.clone()));
        q.records += 1;
    }

    /// Takes what waits: the records queued, and the gap after them if records were dropped
    /// since.
    pub fn take(&self) -> Vec<Item> {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.last_take = Some(Instant::now());
        q.records = 0;
        let mut items: Vec<Item> = q.items.drain(..).collect();
        let missed = std::mem::take(&mut q.missed);
        if missed > 0 {
            items.push(Item::Missed(missed));
        }
        q.parked = items.is_empty();
        items
    }

    /// Waits until something may wait in the queue.
    pub async fn ready(&self) {
        self.ready.notified().await;
    }

    /// Whether the client has taken nothing for longer than `timeout` while something waited
    /// for it: records in its queue, or the last ones it took, still unsent (its connection
    /// did not ask for more: the peer stopped reading).
    pub fn stalled(&self, timeout: Duration) -> bool {
        let q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        (!q.parked || !q.items.is_empty() || q.missed > 0) && q.last_take.is_none_or(|t| t.elapsed() > timeout)
    }
}

/// A client's subscription: dropping it (the connection ended) unsubscribes.
#[derive(Debug)]
pub struct Subscription {
    tap: Arc<Tap>,
    /// The client.
    pub client: Arc<Client>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.tap.unsubscribe(self.client.id);
    }
}

/// One file in a `/stats` snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct FileStats {
    /// The path.
    pub path: String,
    /// Its format (`unknown` until a line shows it).
    pub format: String,
    /// Its size when last looked at.
    pub size: u64,
    /// Bytes read and handed to the sinks.
    pub offset: u64,
    /// Bytes written and not read yet.
    pub lag: u64,
    /// Whether a handle is open.
    pub open: bool,
    /// Tool calls waiting for their result.
    pub pending: u64,
    /// Findings emitted for it since `/stats` was first asked (while it is asked).
    pub findings: u64,
}

/// The `/stats` answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Stats {
    /// Milliseconds since the Unix epoch when it was made (0: none yet).
    pub time_ms: u64,
    /// Every tracked file.
    pub files: Vec<FileStats>,
}

#[derive(Debug, Default)]
struct StatsState {
    /// When `/stats` was last asked.
    asked: Option<Instant>,
    /// When the last snapshot was made.
    made: Option<Instant>,
    snapshot: Arc<Stats>,
    /// Findings by file, counted while `/stats` is asked.
    findings: HashMap<String, u64>,
}

/// The fan-out of records to tap clients, and the `/stats` board. See the module doc.
#[derive(Debug, Default)]
pub struct Tap {
    /// Clients connected (read without the lock: the cost when nobody watches).
    active: AtomicUsize,
    /// Whether `/stats` was asked within [`STATS_KEEP`] (as a flag read without the lock).
    watching_stats: AtomicUsize,
    next_id: AtomicU64,
    clients: Mutex<Vec<Arc<Client>>>,
    stats: Mutex<StatsState>,
    /// Wakes the daemon's loop when `/stats` finds its snapshot old (an idle daemon makes
    /// none otherwise).
    stats_asked: tokio::sync::Notify,
}

impl Tap {
    /// A tap with no client.
    pub fn new() -> Arc<Tap> {
        Arc::new(Tap::default())
    }

    /// Clients connected.
    pub fn clients(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// Subscribes a client with `filter` and a queue of `capacity` records; `None` when
    /// `max_clients` are connected already.
    pub fn subscribe(self: &Arc<Self>, filter: TapFilter, capacity: usize, max_clients: usize) -> Option<Subscription> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if clients.len() >= max_clients {
            return None;
        }
        let client = Arc::new(Client {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            filter,
            capacity: capacity.max(1),
            queue: Mutex::new(Queue { last_take: Some(Instant::now()), parked: true, ..Queue::default() }),
            ready: tokio::sync::Notify::new(),
        });
        clients.push(client.clone());
        self.active.store(clients.len(), Ordering::Relaxed);
        Some(Subscription { tap: self.clone(), client })
    }

    fn unsubscribe(&self, id: u64) {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.retain(|c| c.id != id);
        self.active.store(clients.len(), Ordering::Relaxed);
    }

    /// Hands a step's records to every client (after the sinks took them). Never waits: a
    /// full queue counts what it cannot take.
    pub fn publish(&self, batch: &Batch) {
        if self.watching_stats.load(Ordering::Relaxed) != 0 {
            let mut s = self.stats.lock().unwrap_or_else(|e| e.into_inner());
            for r in &batch.records {
                if let Record::Finding { file, .. } = r {
                    *s.findings.entry(file.clone()).or_default() += 1;
                }
            }
        }
        if self.active.load(Ordering::Relaxed) == 0 || batch.records.is_empty() {
            return;
        }
        let clients: Vec<Arc<Client>> = self.clients.lock().unwrap_or_else(|e| e.into_inner()).clone();
        // The batch's lines, once, shared by every client's queue.
        let all = Bytes::copy_from_slice(&batch.lines);
        let mut at = 0;
        for r in &batch.records {
            let end = memchr::memchr(b'\n', &all[at..]).map_or(all.len(), |i| at + i + 1);
            let line = all.slice(at..end);
            at = end;
            for c in &clients {
                c.push(r, &line);
            }
        }
        for c in &clients {
            c.ready.notify_one();
        }
    }

    /// Whether the daemon should make a `/stats` snapshot now (someone asked within
    /// [`STATS_KEEP`], and the last one is older than [`STATS_EVERY`]).
    pub fn stats_due(&self) -> bool {
        if self.watching_stats.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let mut s = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        if s.asked.is_none_or(|a| a.elapsed() > STATS_KEEP) {
            self.watching_stats.store(0, Ordering::Relaxed);
            s.findings.clear();
            return false;
        }
        s.made.is_none_or(|m| m.elapsed() >= STATS_EVERY)
    }

    /// Stores a snapshot made by the daemon (its files' `findings` filled in here).
    pub fn set_stats(&self, mut files: Vec<FileStats>) {
        let mut s = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        for f in &mut files {
            f.findings = s.findings.get(&f.path).copied().unwrap_or(0);
        }
        let time_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        s.made = Some(Instant::now());
        s.snapshot = Arc::new(Stats { time_ms, files });
    }

    /// The last snapshot (for `/stats`), and a request for the next ones.
    pub fn stats(&self) -> Arc<Stats> {
        let mut s = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        s.asked = Some(Instant::now());
        self.watching_stats.store(1, Ordering::Relaxed);
        if s.made.is_none_or(|m| m.elapsed() >= STATS_EVERY) {
            self.stats_asked.notify_one();
        }
        s.snapshot.clone()
    }

    /// Completes when `/stats` wants a new snapshot (the daemon's loop then takes a step).
    pub async fn stats_asked(&self) {
        self.stats_asked.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::record::now;

    fn opened(file: &str) -> Record {
        Record::FileOpened { time: now(), file: file.into(), format: "unknown".into(), offset: 0 }
    }

    fn lines(items: &[Item]) -> Vec<String> {
        items
            .iter()
            .map(|i| match i {
                Item::Record(b) => String::from_utf8(b.to_vec()).unwrap(),
                Item::Missed(n) => format!("missed {n}"),
            })
            .collect()
    }

    #[test]
    fn a_full_queue_counts_what_it_drops_and_says_so_at_the_gap() {
        let tap = Tap::new();
        let sub = tap.subscribe(TapFilter::default(), 2, 4).unwrap();
        assert!(sub.client.take().is_empty());
        assert!(!sub.client.stalled(Duration::ZERO), "waiting for records is not stalling");
        let batch = Batch::new((0..5).map(|i| opened(&format!("/f{i}"))).collect(), vec![], None);
        tap.publish(&batch);
        let got = lines(&sub.client.take());
        assert_eq!(got.len(), 3);
        assert!(got[0].contains("/f0") && got[1].contains("/f1"), "{got:?}");
        assert_eq!(got[2], "missed 3");
        std::thread::sleep(Duration::from_millis(5));
        assert!(sub.client.stalled(Duration::from_millis(1)), "what it took is not sent yet: it did not come back");
        // Dropped while the queue is full, then a record: the gap comes before it.
        tap.publish(&batch);
        let got = lines(&sub.client.take());
        assert_eq!(got.len(), 3, "{got:?}");
        tap.publish(&Batch::new(vec![opened("/a"), opened("/b"), opened("/c")], vec![], None));
        tap.publish(&Batch::new(vec![opened("/d")], vec![], None));
        let got = lines(&sub.client.take());
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[2], "missed 2", "{got:?}");
        tap.publish(&Batch::new(vec![opened("/e")], vec![], None));
        let got = lines(&sub.client.take());
        assert!(got.len() == 1 && got[0].contains("/e"), "after the gap, the next record: {got:?}");
    }

    #[test]
    fn clients_are_capped_and_unsubscribe_when_dropped() {
        let tap = Tap::new();
        let a = tap.subscribe(TapFilter::default(), 10, 2).unwrap();
        let _b = tap.subscribe(TapFilter::default(), 10, 2).unwrap();
        assert!(tap.subscribe(TapFilter::default(), 10, 2).is_none());
        assert_eq!(tap.clients(), 2);
        drop(a);
        assert_eq!(tap.clients(), 1);
        assert!(tap.subscribe(TapFilter::default(), 10, 2).is_some());
    }

    #[test]
    fn filters_parse_and_select() {
        let f = TapFilter::parse("type=file_opened&kind=orphan_call&severity=error&file=%2Ftmp%2F*.jsonl").unwrap();
        assert_eq!(f.findings.kinds, vec![Kind::OrphanCall]);
        assert!(f.keeps(&opened("/tmp/a.jsonl")));
        assert!(!f.keeps(&opened("/var/a.jsonl")));
        assert!(!TapFilter::parse("kind=orphan_call").unwrap().keeps(&opened("/tmp/a.jsonl")), "a finding filter keeps findings alone");
        let t = TapFilter::parse("type=finding,compaction").unwrap();
        assert!(!t.keeps(&opened("/tmp/a.jsonl")));
        assert!(TapFilter::parse("kind=nope").is_err());
        assert!(TapFilter::parse("severity=info").is_err());
        assert!(TapFilter::parse("type=nope").is_err());
        assert!(TapFilter::parse("colour=red").is_err());
        assert!(TapFilter::parse("file=%zz").is_err());
        assert!(TapFilter::parse("").unwrap().keeps(&opened("/x")));
    }

    #[test]
    fn sse_framing() {
        let mut out = Vec::new();
        Item::Record(Bytes::from_static(b"{\"a\":1}\n")).write_sse(&mut out);
        Item::Missed(7).write_sse(&mut out);
        assert_eq!(String::from_utf8(out).unwrap(), "data: {\"a\":1}\n\nevent: missed\ndata: {\"missed\":7}\n\n");
    }

    #[test]
    fn nobody_watching_costs_no_work() {
        let tap = Tap::new();
        assert!(!tap.stats_due());
        tap.publish(&Batch::new(vec![opened("/a")], vec![], None));
        assert!(tap.stats.lock().unwrap().findings.is_empty());
        let _ = tap.stats();
        assert!(tap.stats_due());
        tap.set_stats(vec![]);
        assert!(!tap.stats_due(), "not again before STATS_EVERY");
    }
}
