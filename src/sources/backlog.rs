//! Reading a backlog ahead of the daemon's loop: a file with much unread (a cold start, a file
//! that grew while the daemon was away) is read and parsed on reader threads, as `check --jobs
//! 2` parses one file, and its parsed reads come to the loop through a bounded channel exposed
//! as a stream ([`ReceiverStream`]). The loop only pairs them (validation and the other stages,
//! which need the lines in file order) and hands the records to the sinks.
//!
//! [`start`] takes the file's line framing out of its checker ([`Cutter`]) and starts
//! [`JOBS`] threads. Each takes a free buffer, reads the next [`CHUNK`] bytes with `pread` and
//! cuts them into lines (one thread at a time, under the lock that holds the framing and the
//! offset), then parses them while they are in its core's cache and sends them, numbered, down
//! the channel; the last message, [`Item::End`], brings the framing back. The loop receives the
//! reads in whatever order the threads finished them; [`Backlog::accept`] and
//! [`Backlog::next_in_order`] put them back in file order.
//!
//! **Memory is flat and a slow sink slows the reads:** there are [`BUFFERS`] buffers per
//! reader and a read needs one; a buffer comes back only when the loop has applied its read
//! ([`Backlog::give_back`]). A loop held up by its sinks (the http sink's bounded queue) stops
//! taking reads, so the threads wait for a buffer instead of reading on. At most
//! [`MAX_READERS`] files are read ahead at once; others are read on the loop, in budgeted steps.
//!
//! Dropping the [`Backlog`] stops its threads (at their next read); the reads cut but not
//! applied are dropped with it, and the checker's framing stands at the last line applied
//! ([`crate::transcript::checker::Checker::cutter`]), so the file is read again from there.

use crate::transcript::checker::{Cutter, ParsedChunk};
use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use tokio_stream::wrappers::ReceiverStream;

/// Bytes per read. Four times `check`'s parallel reads: each read is one message to the loop
/// and one step of it (its sinks, timers, metrics), and with reads of 256 KiB those steps cost
/// the catch-up a tenth of its CPU (`benches/daemon.py coldstart`: 0.73–0.77× `check --jobs 2`
/// against 0.83–0.89× with 1 MiB; BENCHMARKS.md).
pub const CHUNK: usize = 1 << 20;

/// Threads that read and parse one backlog.
pub const JOBS: usize = 2;

/// Buffers per backlog: reads in flight (being read or parsed, in the channel, or waiting for
/// their turn). Memory per backlog is `BUFFERS * CHUNK`.
pub const BUFFERS: usize = JOBS * 4;

/// Backlogs read ahead at once, over all files.
pub const MAX_READERS: usize = 2;

/// What comes down a backlog's stream.
#[derive(Debug)]
pub enum Item {
    /// The read numbered `seq`, at file offset `at`, parsed.
    Read {
        /// Its number.
        seq: u64,
        /// Where it was read.
        at: u64,
        /// Its bytes and parsed lines.
        chunk: ParsedChunk,
    },
    /// Reading ended after `seq` reads (at the end of the file, at the end asked for, or on a
    /// read error): the framing comes back.
    End {
        /// Reads before it.
        seq: u64,
        /// The framing, after the last read.
        cutter: Cutter,
        /// Why it ended early.
        error: Option<io::Error>,
    },
}

impl Item {
    fn seq(&self) -> u64 {
        match self {
            Item::Read { seq, .. } | Item::End { seq, .. } => *seq,
        }
    }
}

/// Backlogs being read ahead now.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The file, the offset and the framing, taken by one thread at a time.
struct Source {
    file: File,
    at: u64,
    end: Option<u64>,
    cutter: Option<Cutter>,
    seq: u64,
}

struct Pool {
    spare: Vec<Vec<u8>>,
    made: usize,
}

struct Shared {
    source: Mutex<Source>,
    pool: Mutex<Pool>,
    returned: Condvar,
    stop: AtomicBool,
    /// A thread panicked: no `End` will come.
    broken: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A backlog being read ahead: the loop's end of it (its stream is taken out, to be polled
/// beside the loop's other events).
#[derive(Debug)]
pub struct Backlog {
    id: u64,
    shared: Arc<Shared>,
    waiting: BTreeMap<u64, Item>,
    next: u64,
    /// Its stream, until the loop takes it.
    stream: Option<ReceiverStream<Item>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("stop", &self.stop).finish_non_exhaustive()
    }
}

/// Starts reading `file` ahead from `at` (up to `end`, or to its end) with `cutter`, the
/// framing of the stream at `at`. `None` (and the cutter back) when [`MAX_READERS`] backlogs
/// are read already.
pub fn start(file: File, at: u64, end: Option<u64>, cutter: Cutter) -> Result<Backlog, Cutter> {
    if ACTIVE.fetch_add(1, Ordering::AcqRel) >= MAX_READERS {
        ACTIVE.fetch_sub(1, Ordering::AcqRel);
        return Err(cutter);
    }
    let shared = Arc::new(Shared {
        source: Mutex::new(Source { file, at, end, cutter: Some(cutter), seq: 0 }),
        pool: Mutex::new(Pool { spare: Vec::new(), made: 0 }),
        returned: Condvar::new(),
        stop: AtomicBool::new(false),
        broken: AtomicBool::new(false),
    });
    // Every read holds a buffer until it is applied, and `End` comes once: sends never wait.
    let (tx, rx) = tokio::sync::mpsc::channel(BUFFERS + 1);
    for i in 0..JOBS {
        let (s, tx) = (shared.clone(), tx.clone());
        let spawned = std::thread::Builder::new().name(format!("backlog-{i}")).spawn(move || work(&s, &tx));
        if let Err(e) = spawned {
            // The threads started so far do the work.
            if i == 0 {
                tracing::warn!(error = %e, "cannot start a reader thread; reading on the loop");
                ACTIVE.fetch_sub(1, Ordering::AcqRel);
                let cutter = lock(&shared.source).cutter.take().expect("no thread took it");
                return Err(cutter);
            }
            break;
        }
    }
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    Ok(Backlog { id, shared, waiting: BTreeMap::new(), next: 0, stream: Some(ReceiverStream::new(rx)) })
}

impl Backlog {
    /// Which reader this is (stale items of a reader dropped since are told apart by it).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The stream of parsed reads, for the loop to poll (once).
    pub fn take_stream(&mut self) -> Option<ReceiverStream<Item>> {
        self.stream.take()
    }

    /// Takes an item from the stream (in any order).
    pub fn accept(&mut self, item: Item) {
        self.waiting.insert(item.seq(), item);
    }

    /// The next item in file order, if it has come.
    pub fn next_in_order(&mut self) -> Option<Item> {
        let item = self.waiting.remove(&self.next)?;
        self.next += 1;
        Some(item)
    }

    /// A read's buffer, applied: free for the next read.
    pub fn give_back(&self, buf: Vec<u8>) {
        lock(&self.shared.pool).spare.push(buf);
        self.shared.returned.notify_one();
    }

    /// Whether a reader thread panicked (no `End` will come: the caller drops the backlog and
    /// reads on its own).
    pub fn broken(&self) -> bool {
        self.shared.broken.load(Ordering::Relaxed)
    }
}

impl Drop for Backlog {
    fn drop(&mut self) {
        let s = &self.shared;
        s.stop.store(true, Ordering::Relaxed);
        // Taken under the lock the threads wait with, so that none misses it.
        drop(lock(&s.pool));
        s.returned.notify_all();
        ACTIVE.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Wakes the others and marks the backlog broken if a reader thread panics.
struct PanicGuard<'s>(&'s Shared);

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.broken.store(true, Ordering::Relaxed);
            self.0.stop.store(true, Ordering::Relaxed);
            self.0.returned.notify_all();
        }
    }
}

/// One reader thread: take a buffer, read and cut the next chunk, parse it, send it; until the
/// end, an error, or the loop drops the backlog.
fn work(s: &Shared, tx: &tokio::sync::mpsc::Sender<Item>) {
    let _guard = PanicGuard(s);
    loop {
        let Some(mut buf) = buffer(s) else { return };
        let mut guard = lock(&s.source);
        let src = &mut *guard;
        let Some(cutter) = src.cutter.as_mut() else { return };
        let want = src.end.map_or(CHUNK as u64, |e| e.saturating_sub(src.at).min(CHUNK as u64)) as usize;
        let read = loop {
            if want == 0 {
                break Ok(0);
            }
            match src.file.read_at(&mut buf[..want], src.at) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => break r,
            }
        };
        let n = match read {
            Ok(n) if n > 0 => n,
            r => {
                let seq = src.seq;
                let cutter = src.cutter.take().expect("taken above");
                // The channel has room for it (see `start`); the loop may have gone.
                let _ = tx.try_send(Item::End { seq, cutter, error: r.err() });
                return;
            }
        };
        let cut = cutter.cut(buf, n);
        let (seq, at) = (src.seq, src.at);
        src.seq += 1;
        src.at += n as u64;
        drop(guard);
        let chunk = cut.parse();
        if tx.try_send(Item::Read { seq, at, chunk }).is_err() {
            // The loop dropped the stream.
            return;
        }
    }
}

/// A free buffer, waiting for the loop to give one back if all are in use; `None` once the
/// backlog is dropped.
fn buffer(s: &Shared) -> Option<Vec<u8>> {
    let mut p = lock(&s.pool);
    loop {
        if s.stop.load(Ordering::Relaxed) {
            return None;
        }
        if let Some(b) = p.spare.pop() {
            return Some(b);
        }
        if p.made < BUFFERS {
            p.made += 1;
            return Some(vec![0u8; CHUNK]);
        }
        p = s.returned.wait(p).unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}
