//! The `http` sink: the records as newline-delimited JSON, POSTed in batches to a collector
//! (Vector's `http_server` source, Fluent Bit's `http` input, anything that takes JSON lines).
//!
//! **Nothing lost, nothing sent twice.** The records go first to a spool in the state
//! directory (`http-<hash of the url>/spool-<generation>.jsonl`), written like the file sink:
//! appended, synced before each checkpoint, and cut back to the checkpointed length after a
//! crash. A sender task delivers the spool **only up to what a stored checkpoint covers**, in
//! batches (`max_records`, `max_bytes`, `max_delay`); a batch that fails (no connection, a
//! timeout, a status other than 2xx) is sent again, the same bytes, with exponential backoff
//! (`retry_initial` doubling up to `retry_max`), for as long as it takes. After each
//! acknowledged batch the sender stores how far it delivered (`delivered.json`, atomically), and
//! a spool generation fully delivered is deleted. So a collector down for minutes loses nothing
//! (the spool holds it, up to `queue_bytes`; beyond that the daemon stops reading until it
//! drains), a daemon killed and restarted sends what follows the last checkpoint once (it never
//! left before that checkpoint), and a collector that comes back receives every batch once —
//! except a batch whose acknowledgement was lost (the collector, or the daemon, died between
//! taking the batch and the daemon storing its acknowledgement), which is sent again with the
//! same `X-Transcriptd-Batch` header (`<generation>:<offset>` of its first byte): a receiver that
//! keeps the last id it took per generation drops it.

use super::outputs::Position;
use super::{Batch, Sink};
use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The settings of an `http` sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Where to POST (`http://host:port/path`).
    pub url: String,
    /// Records per POST at most.
    pub max_records: usize,
    /// Bytes per POST at most (a longer record goes alone).
    pub max_bytes: u64,
    /// How long a batch that is not full waits for more records.
    pub max_delay: Duration,
    /// The first wait before a failed batch is sent again; doubled each time.
    pub retry_initial: Duration,
    /// The longest wait between two tries.
    pub retry_max: Duration,
    /// Undelivered bytes (covered by a checkpoint) the spool may hold before reading pauses.
    pub queue_bytes: u64,
    /// Time for one request: connect, send, answer.
    pub timeout: Duration,
}

/// An `http://` URL, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Host name or address.
    pub host: String,
    /// Port (80 when not given).
    pub port: u16,
    /// Path and query (`/` when not given).
    pub path: String,
}

impl Target {
    /// Parses `http://host[:port][/path]`. Only plain HTTP: put a local collector (or a TLS
    /// proxy) in front of remote ones.
    pub fn parse(url: &str) -> Result<Target, String> {
        let rest = url.strip_prefix("http://").ok_or_else(|| format!("{url}: only http:// URLs are supported"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(format!("{url}: expected http://host[:port]/path"));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => (h, p.parse::<u16>().map_err(|_| format!("{url}: bad port `{p}`"))?),
            _ => (authority, 80),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(format!("{url}: no host"));
        }
        Ok(Target { host: host.to_owned(), port, path: path.to_owned() })
    }
}

/// How far the sender delivered: a spool generation and an offset in it; and the end of the
/// batch in flight, stored before it is sent, so that after a crash it is sent again with the
/// same bytes (and id), never as part of a larger batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
struct Delivered {
    gen: u64,
    offset: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    in_flight: Option<u64>,
}

/// What writer and sender share.
#[derive(Debug)]
struct Shared {
    dir: PathBuf,
    /// The spool the sender may deliver up to: (generation, length), as the last stored
    /// checkpoint covers it.
    sendable: watch::Sender<(u64, u64)>,
    /// Bytes made sendable since start, and bytes delivered since start (the queue is the
    /// difference).
    sendable_total: AtomicU64,
    delivered_total: AtomicU64,
    delivered: watch::Sender<u64>,
}

/// The `http` sink. See the module docs.
#[derive(Debug)]
pub struct HttpSink {
    settings: Settings,
    shared: Arc<Shared>,
    gen: u64,
    out: BufWriter<File>,
    /// Length of the current generation at the last checkpoint (what became sendable).
    published: u64,
    /// Stops the sender when the sink is dropped.
    _stop: tokio_util::sync::DropGuard,
}

/// Size past which the spool moves to a new generation at a checkpoint.
const SEGMENT_BYTES: u64 = 8 << 20;

fn spool_path(dir: &Path, gen: u64) -> PathBuf {
    dir.join(format!("spool-{gen:020}.jsonl"))
}

fn generations(dir: &Path) -> std::io::Result<Vec<u64>> {
    let mut gens: Vec<u64> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("spool-")?.strip_suffix(".jsonl")?.parse().ok())
        .collect();
    gens.sort_unstable();
    Ok(gens)
}

fn load_delivered(dir: &Path) -> anyhow::Result<Delivered> {
    match std::fs::read(dir.join("delivered.json")) {
        Ok(b) => serde_json::from_slice(&b).with_context(|| format!("{}: unreadable", dir.join("delivered.json").display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Delivered::default()),
        Err(e) => Err(e).with_context(|| format!("reading {}", dir.join("delivered.json").display())),
    }
}

fn store_delivered(dir: &Path, d: Delivered) -> std::io::Result<()> {
    super::atomic::write_file(&dir.join("delivered.json"), &serde_json::to_vec(&d).expect("serializes"), None)
}

fn open_append(path: &Path) -> std::io::Result<BufWriter<File>> {
    Ok(BufWriter::with_capacity(256 << 10, OpenOptions::new().create(true).append(true).open(path)?))
}

/// Per spool directory: the sender that owns it (a reload starts a new sink only once the old
/// sender has stopped, so no batch is in flight twice).
fn owner(dir: &Path) -> Arc<tokio::sync::Mutex<()>> {
    static OWNERS: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> = std::sync::OnceLock::new();
    let mut m = OWNERS.get_or_init(Default::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    m.entry(dir.to_path_buf()).or_default().clone()
}

impl HttpSink {
    /// The sink for `settings`, spooling under `state_dir`; its sender starts on the current
    /// tokio runtime and delivers once [`Sink::recover`] has run.
    pub fn open(settings: Settings, state_dir: &Path) -> anyhow::Result<Self> {
        let target = Target::parse(&settings.url).map_err(anyhow::Error::msg)?;
        let dir = state_dir.join(format!("http-{:016x}", xxhash_rust::xxh3::xxh3_64(settings.url.as_bytes())));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let delivered = load_delivered(&dir)?;
        let gen = generations(&dir)?.last().copied().unwrap_or(delivered.gen.max(1));
        let out = open_append(&spool_path(&dir, gen)).with_context(|| format!("opening the spool in {}", dir.display()))?;
        let (sendable, _) = watch::channel((0, 0));
        let (delivered_tx, _) = watch::channel(0);
        let shared = Arc::new(Shared { dir, sendable, sendable_total: AtomicU64::new(0), delivered_total: AtomicU64::new(0), delivered: delivered_tx });
        let stop = tokio_util::sync::CancellationToken::new();
        tokio::spawn(sender(shared.clone(), settings.clone(), target, stop.clone()));
        Ok(HttpSink { settings, shared, gen, out, published: 0, _stop: stop.drop_guard() })
    }

    fn len(&self) -> std::io::Result<u64> {
        Ok(self.out.get_ref().metadata()?.len())
    }

    /// Makes the spool up to its current length sendable.
    fn publish(&mut self) -> std::io::Result<()> {
        let len = self.len()?;
        let grown = len.saturating_sub(self.published);
        self.published = len;
        self.shared.sendable_total.fetch_add(grown, Ordering::SeqCst);
        self.shared.sendable.send_replace((self.gen, len));
        Ok(())
    }

    /// Bytes covered by a checkpoint and not delivered yet.
    fn queued(&self) -> u64 {
        self.shared.sendable_total.load(Ordering::SeqCst).saturating_sub(self.shared.delivered_total.load(Ordering::SeqCst))
    }
}

#[async_trait::async_trait]
impl Sink for HttpSink {
    fn key(&self) -> String {
        format!("http:{}", self.settings.url)
    }

    async fn recover(&mut self, at: Option<Position>) -> anyhow::Result<()> {
        let dir = self.shared.dir.clone();
        let delivered = load_delivered(&dir)?;
        let gens = generations(&dir)?;
        let id = |g: u64| std::fs::metadata(spool_path(&dir, g)).ok().map(|m| (m.dev(), m.ino()));
        // The generation the checkpoint names, and the length it had: what follows was never
        // sent (only what a stored checkpoint covers is), and will be written again.
        let (keep, len) = match at.and_then(|p| gens.iter().rev().find(|g| id(**g) == Some((p.dev, p.ino))).map(|g| (*g, p.len))) {
            Some(named) => named,
            // No checkpoint names the spool (it is new, or the checkpoint is gone and every
            // source is read again): nothing undelivered is kept.
            None => (delivered.gen.max(1), if gens.contains(&delivered.gen) { delivered.offset } else { 0 }),
        };
        for g in gens.iter().filter(|g| **g > keep) {
            std::fs::remove_file(spool_path(&dir, *g)).with_context(|| format!("removing spool generation {g} in {}", dir.display()))?;
        }
        self.out.flush()?;
        self.gen = keep;
        self.out = open_append(&spool_path(&dir, keep))?;
        if self.len()? > len {
            tracing::info!(url = %self.settings.url, from = self.len()?, to = len, "http spool cut back to the last checkpoint; the records after it are spooled again");
            self.out.get_ref().set_len(len)?;
        }
        // Everything kept is covered by the checkpoint: deliverable. Count what is undelivered.
        let mut queued = 0;
        for g in generations(&dir)? {
            let l = std::fs::metadata(spool_path(&dir, g))?.len();
            queued += match g.cmp(&delivered.gen) {
                std::cmp::Ordering::Less => 0,
                std::cmp::Ordering::Equal => l.saturating_sub(delivered.offset),
                std::cmp::Ordering::Greater => l,
            };
        }
        self.shared.sendable_total.store(queued, Ordering::SeqCst);
        self.shared.delivered_total.store(0, Ordering::SeqCst);
        self.published = self.len()?;
        self.shared.sendable.send_replace((self.gen, self.published));
        Ok(())
    }

    async fn write(&mut self, batch: &Batch) -> anyhow::Result<()> {
        // A full queue: wait for the collector (reading pauses; nothing is dropped).
        let mut rx = self.shared.delivered.subscribe();
        let mut warned = false;
        while self.queued() > self.settings.queue_bytes {
            if !std::mem::replace(&mut warned, true) {
                tracing::warn!(url = %self.settings.url, queued = self.queued(), "http sink queue is full; reading pauses until the collector takes more");
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), rx.changed()).await;
        }
        self.out.write_all(&batch.lines).context("writing the http spool")
    }

    async fn flush(&mut self) -> anyhow::Result<()> {
        self.out.flush().context("writing the http spool")?;
        self.out.get_ref().sync_data().context("syncing the http spool")
    }

    fn position(&self) -> Option<Position> {
        let m = self.out.get_ref().metadata().ok()?;
        Some(Position { dev: m.dev(), ino: m.ino(), len: m.len(), exclusive: true, tail_hash: None })
    }

    async fn checkpointed(&mut self) -> anyhow::Result<bool> {
        self.publish()?;
        if self.published < SEGMENT_BYTES {
            return Ok(false);
        }
        // A new generation; the sender deletes the old one once it is delivered and the next
        // checkpoint names the new one.
        self.gen += 1;
        self.out = open_append(&spool_path(&self.shared.dir, self.gen))?;
        self.published = 0;
        Ok(true)
    }
}

/// Delivers the spool. See the module docs.
async fn sender(shared: Arc<Shared>, s: Settings, target: Target, stop: tokio_util::sync::CancellationToken) {
    let lock = owner(&shared.dir);
    let _owner = tokio::select! {
        g = lock.lock_owned() => g,
        _ = stop.cancelled() => return,
    };
    let mut sendable = shared.sendable.subscribe();
    let mut at = match load_delivered(&shared.dir) {
        Ok(d) => d,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "http sink: cannot read how far it delivered; not delivering");
            return;
        }
    };
    let mut waiting_since: Option<tokio::time::Instant> = None;
    loop {
        let (sgen, slen) = *sendable.borrow_and_update();
        if sgen == 0 {
            // Not recovered yet.
            tokio::select! { _ = sendable.changed() => continue, _ = stop.cancelled() => return }
        }
        if at.gen < sgen {
            // Past the end of an older generation: on to the next one.
            let path = spool_path(&shared.dir, at.gen);
            let len = std::fs::metadata(&path).map_or(0, |m| m.len());
            if at.offset >= len {
                let next = generations(&shared.dir).ok().and_then(|g| g.into_iter().find(|g| *g > at.gen)).unwrap_or(sgen);
                at = Delivered { gen: next, offset: 0, in_flight: None };
                if let Err(e) = store_delivered(&shared.dir, at) {
                    tracing::warn!(error = %e, "http sink: cannot store how far it delivered; will retry");
                    tokio::time::sleep(s.retry_initial).await;
                    continue;
                }
                let _ = std::fs::remove_file(&path);
                continue;
            }
        } else if at.gen > sgen {
            // The spool was cut back behind what was delivered (cannot happen: only checkpointed
            // bytes are sent); wait for it to catch up.
            tokio::select! { _ = sendable.changed() => continue, _ = stop.cancelled() => return }
        }
        let limit = if at.gen == sgen { slen } else { std::fs::metadata(spool_path(&shared.dir, at.gen)).map_or(0, |m| m.len()) };
        if at.offset >= limit {
            waiting_since = None;
            tokio::select! { _ = sendable.changed() => continue, _ = stop.cancelled() => return }
        }
        // A batch in flight when the last sender stopped goes again as it was.
        let (limit, exact) = match at.in_flight {
            Some(end) if end > at.offset && end <= limit => (end, true),
            _ => (limit, false),
        };
        let body = match read_batch(&spool_path(&shared.dir, at.gen), at.offset, limit, &s) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "http sink: cannot read the spool; will retry");
                tokio::select! { _ = tokio::time::sleep(s.retry_max) => continue, _ = stop.cancelled() => return }
            }
        };
        let Some((body, full)) = body else {
            tokio::select! { _ = sendable.changed() => continue, _ = stop.cancelled() => return }
        };
        // A batch that is not full waits up to max_delay for more.
        if !full && !exact && at.gen == sgen {
            let since = *waiting_since.get_or_insert_with(tokio::time::Instant::now);
            let until = since + s.max_delay;
            if tokio::time::Instant::now() < until {
                tokio::select! {
                    _ = sendable.changed() => continue,
                    _ = tokio::time::sleep_until(until) => {}
                    _ = stop.cancelled() => return,
                }
            }
        }
        waiting_since = None;
        let id = format!("{}:{}", at.gen, at.offset);
        let n = body.len() as u64;
        if at.in_flight != Some(at.offset + n) {
            at.in_flight = Some(at.offset + n);
            if let Err(e) = store_delivered(&shared.dir, at) {
                tracing::warn!(error = %e, "http sink: cannot store the batch in flight; will retry");
                tokio::select! { _ = tokio::time::sleep(s.retry_initial) => continue, _ = stop.cancelled() => return }
            }
        }
        let mut delay = s.retry_initial;
        let mut tries = 0u32;
        loop {
            let r = tokio::select! {
                r = post(&target, &id, body.clone(), s.timeout) => r,
                _ = stop.cancelled() => return,
            };
            match r {
                Ok(()) => break,
                Err(e) => {
                    tries += 1;
                    if tries == 1 || tries.is_power_of_two() {
                        tracing::warn!(url = %s.url, batch = %id, tries, error = %format!("{e:#}"), "http sink: batch not accepted; sent again after {delay:?}");
                    }
                    tokio::select! { _ = tokio::time::sleep(delay) => {}, _ = stop.cancelled() => return }
                    delay = (delay * 2).min(s.retry_max);
                }
            }
        }
        at.offset += n;
        at.in_flight = None;
        loop {
            match store_delivered(&shared.dir, at) {
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "http sink: cannot store how far it delivered; will retry");
                    tokio::select! { _ = tokio::time::sleep(s.retry_initial) => {}, _ = stop.cancelled() => return }
                }
            }
        }
        shared.delivered_total.fetch_add(n, Ordering::SeqCst);
        shared.delivered.send_modify(|d| *d += n);
    }
}

/// The next batch of the spool at `from`: whole lines up to `limit`, at most `max_records` of
/// them and `max_bytes` (a longer first line alone). `None` when no whole line is there; the
/// flag says whether the batch is full (it reached a limit).
fn read_batch(path: &Path, from: u64, limit: u64, s: &Settings) -> std::io::Result<Option<(Bytes, bool)>> {
    let f = File::open(path)?;
    let want = (limit - from).min(s.max_bytes.max(1));
    let mut buf = vec![0u8; want as usize];
    let mut got = 0;
    while got < buf.len() {
        match f.read_at(&mut buf[got..], from + got as u64)? {
            0 => break,
            n => got += n,
        }
    }
    buf.truncate(got);
    let mut end = 0;
    let mut records = 0;
    for (i, b) in buf.iter().enumerate() {
        if *b == b'\n' {
            end = i + 1;
            records += 1;
            if records >= s.max_records {
                break;
            }
        }
    }
    if end == 0 {
        if got as u64 == limit - from {
            return Ok(None);
        }
        // One record longer than max_bytes: it goes alone.
        let mut line = Vec::new();
        let mut at = from;
        let mut chunk = vec![0u8; 64 << 10];
        loop {
            let n = f.read_at(&mut chunk, at)?;
            if n == 0 || at >= limit {
                return Ok(None);
            }
            if let Some(i) = memchr::memchr(b'\n', &chunk[..n]) {
                line.extend_from_slice(&chunk[..=i]);
                return Ok(Some((Bytes::from(line), true)));
            }
            line.extend_from_slice(&chunk[..n]);
            at += n as u64;
        }
    }
    // Stopped short of the limit: a batch limit was reached.
    let full = (end as u64) < limit - from;
    buf.truncate(end);
    Ok(Some((Bytes::from(buf), full)))
}

/// POSTs one batch; `Ok` on a 2xx answer.
async fn post(target: &Target, id: &str, body: Bytes, timeout: Duration) -> anyhow::Result<()> {
    let exchange = async {
        let stream = tokio::net::TcpStream::connect((target.host.as_str(), target.port)).await.context("connecting")?;
        let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.context("handshake")?;
        let conn = tokio::spawn(conn);
        let host = if target.port == 80 { target.host.clone() } else { format!("{}:{}", target.host, target.port) };
        let req = hyper::Request::post(target.path.as_str())
            .header(hyper::header::HOST, host)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header("x-transcriptd-batch", id)
            .body(Full::new(body))
            .context("building the request")?;
        let resp = send.send_request(req).await.context("sending")?;
        let status = resp.status();
        // Only the head of an answer is read: a collector (or anything on its port) answering
        // with a body of gigabytes must not make the daemon hold it. What was read says why a
        // batch was refused; the connection is closed after every batch anyway.
        let head = read_head(resp.into_body(), ANSWER_READ_LIMIT).await;
        conn.abort();
        anyhow::ensure!(status.is_success(), "answered {status}{}", answer_excerpt(&head));
        Ok(())
    };
    tokio::time::timeout(timeout, exchange).await.map_err(|_| anyhow::anyhow!("no answer within {timeout:?}"))?
}

/// How much of a collector's answer is read before the connection is closed.
const ANSWER_READ_LIMIT: usize = 4 << 10;

/// Reads frames of `body` until it ends, fails or `limit` bytes have come; returns at most `limit`.
async fn read_head(mut body: hyper::body::Incoming, limit: usize) -> Vec<u8> {
    let mut head = Vec::new();
    while head.len() < limit {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    head.extend_from_slice(&data[..data.len().min(limit - head.len())]);
                }
            }
            _ => break,
        }
    }
    head
}

/// `": <the answer's first line>"` for an error message, control characters shown escaped;
/// empty for an empty answer.
fn answer_excerpt(head: &[u8]) -> String {
    let text = String::from_utf8_lossy(head);
    let first = text.lines().next().unwrap_or("").trim();
    if first.is_empty() {
        return String::new();
    }
    let shown: String = first.chars().take(200).flat_map(char::escape_default).collect();
    format!(": {shown}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        assert_eq!(Target::parse("http://127.0.0.1:8686/ingest").unwrap(), Target { host: "127.0.0.1".into(), port: 8686, path: "/ingest".into() });
        assert_eq!(Target::parse("http://collector").unwrap(), Target { host: "collector".into(), port: 80, path: "/".into() });
        assert_eq!(Target::parse("http://[::1]:9880/app.log").unwrap(), Target { host: "::1".into(), port: 9880, path: "/app.log".into() });
        assert!(Target::parse("https://x/").is_err());
        assert!(Target::parse("http://:80/").is_err());
        assert!(Target::parse("http://h:port/").is_err());
    }

    #[test]
    fn batches_are_whole_lines_within_the_limits() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s");
        std::fs::write(&p, "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n{\"d\"").unwrap();
        let len = std::fs::metadata(&p).unwrap().len();
        let s = |records, bytes| Settings {
            url: String::new(),
            max_records: records,
            max_bytes: bytes,
            max_delay: Duration::ZERO,
            retry_initial: Duration::ZERO,
            retry_max: Duration::ZERO,
            queue_bytes: 0,
            timeout: Duration::ZERO,
        };
        let (b, full) = read_batch(&p, 0, len, &s(2, 1000)).unwrap().unwrap();
        assert_eq!((&b[..], full), (&b"{\"a\":1}\n{\"b\":2}\n"[..], true));
        let (b, full) = read_batch(&p, 16, len, &s(10, 1000)).unwrap().unwrap();
        assert_eq!((&b[..], full), (&b"{\"c\":3}\n"[..], true), "the torn tail is not sent");
        let (b, _) = read_batch(&p, 0, len, &s(10, 10)).unwrap().unwrap();
        assert_eq!(&b[..], b"{\"a\":1}\n");
        let (b, _) = read_batch(&p, 0, len, &s(10, 3)).unwrap().unwrap();
        assert_eq!(&b[..], b"{\"a\":1}\n", "a record over max_bytes goes alone");
        let (b, full) = read_batch(&p, 0, 24, &s(10, 1000)).unwrap().unwrap();
        assert_eq!((b.len(), full), (24, false));
        assert!(read_batch(&p, 24, len, &s(10, 1000)).unwrap().is_none());
    }
}
