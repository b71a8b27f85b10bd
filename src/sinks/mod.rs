//! Sinks: where transcriptd writes. `atomic` for files written whole (repaired transcripts,
//! checkpoints) and appended whole lines (rejects); [`append`] the one way to append to a JSONL
//! file; and the daemon's sinks behind the [`Sink`] trait: `outputs` (stdout and a size-rotated
//! file), [`prometheus`] (the metrics of what the pipeline produced), [`http`] (batches of JSON
//! lines POSTed to a collector), [`repaired`] (the repaired copies the repair stage makes due,
//! journaled so that a crash loses none). [`record`] is what they are given.
//!
//! A closed config enum in front (`config::SinkConfig::build`), an open trait behind it: a sink
//! is one file here and one arm there.

pub mod append;
pub mod atomic;
pub mod http;
pub mod outputs;
pub mod prometheus;
pub mod record;
pub mod repaired;
pub mod snapshot;

pub use append::Appender;
pub use outputs::Position;
use record::Record;

/// Sinks waiting for their output to take records again (a full disk), by key, with why.
static PAUSED: std::sync::Mutex<std::collections::BTreeMap<String, String>> = std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Says that the sink `key` (`file:PATH`) waits (`why`) or goes on (`None`): the daemon's
/// `/health` reports it, and `transcriptd_sink_paused{sink}` (the sink's type) is 1 meanwhile.
pub fn pause(key: &str, why: Option<String>) {
    let mut m = PAUSED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let sink = key.split(':').next().unwrap_or(key).to_owned();
    match why {
        Some(w) => {
            m.insert(key.to_owned(), w);
        }
        None => {
            m.remove(key);
        }
    }
    let any = m.keys().any(|k| k.split(':').next() == Some(sink.as_str()));
    metrics::gauge!(crate::telemetry::SINK_PAUSED, "sink" => sink).set(if any { 1.0 } else { 0.0 });
}

/// The sinks paused now, and why.
pub fn paused() -> Vec<(String, String)> {
    PAUSED.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// A counter the pipeline produced beside its records (what the metrics sink counts; record
/// sinks ignore them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Count {
    /// Bytes read from sources.
    BytesRead(u64),
    /// Complete lines read, by format.
    Lines(&'static str, u64),
    /// Tool calls, by format.
    ToolCalls(&'static str, u64),
    /// Tool results, by format.
    ToolResults(&'static str, u64),
    /// Compactions, by format.
    Compactions(&'static str, u64),
    /// Tokens by model and type (`input`, `output`, `cache_read`, `cache_creation`).
    Tokens(String, &'static str, u64),
    /// What those tokens cost by model, in millionths of a US dollar (the built-in price
    /// table; a model it does not price costs nothing here).
    CostMicros(String, u64),
    /// Events of an event log, by type.
    Events(String, u64),
}

/// The state of the sources at the end of a step (what gauges show).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gauges {
    /// Files tracked.
    pub files_watched: u64,
    /// Handles open.
    pub open_files: u64,
    /// Bytes written to sources and not read yet.
    pub lag_bytes: u64,
    /// Age in seconds of the oldest file with unread bytes.
    pub oldest_unread_seconds: u64,
    /// Tool calls waiting for their result.
    pub pending_calls: u64,
}

/// What one step of the daemon gives its sinks, in order.
#[derive(Debug, Default)]
pub struct Batch {
    /// Output records.
    pub records: Vec<Record>,
    /// The same records as JSON lines (serialized once for every record sink).
    pub lines: Vec<u8>,
    /// Counters.
    pub counts: Vec<Count>,
    /// Gauges, when the step measured them.
    pub gauges: Option<Gauges>,
    /// Repairs the repair stage made due in the step (the `repaired_files` sink's; other sinks
    /// ignore them).
    pub repairs: Vec<repaired::Due>,
    /// The bytes read from the files, in order, when a sink asks for them
    /// ([`crate::config::SinkNeeds::bytes`]: the `snapshot` sink's; other sinks ignore them).
    pub bytes: Vec<Bytes>,
}

/// What a sink that keeps the files' bytes is told, in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bytes {
    /// Bytes read from the file at `path` (device and inode `id`), at offset `at`: each byte
    /// the daemon reads once (a replay that rebuilds a file's state is not read again; after
    /// a crash, what follows the checkpoint is).
    Read {
        /// The file's path.
        path: std::path::PathBuf,
        /// Its device and inode.
        id: (u64, u64),
        /// The offset of the first byte.
        at: u64,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// The file left: `deleted`, or its bytes changed (`truncated`, `rewritten`); what is read
    /// of the path next is another file.
    Left {
        /// The file's path.
        path: std::path::PathBuf,
        /// Its device and inode.
        id: (u64, u64),
        /// How.
        how: &'static str,
    },
}

impl Batch {
    /// A batch of `records` and `counts`.
    pub fn new(records: Vec<Record>, counts: Vec<Count>, gauges: Option<Gauges>) -> Self {
        let mut lines = Vec::new();
        for r in &records {
            r.write_line(&mut lines);
        }
        Batch { records, lines, counts, gauges, repairs: Vec::new(), bytes: Vec::new() }
    }

    /// Whether there is nothing in it.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty() && self.counts.is_empty() && self.gauges.is_none() && self.repairs.is_empty() && self.bytes.is_empty()
    }
}

/// A sink of the daemon. Calling order: [`Sink::recover`] once at start (with the position the
/// last checkpoint recorded for [`Sink::key`]); then [`Sink::write`] any number of times;
/// [`Sink::flush`] before each checkpoint, which records [`Sink::position`] (what the sink has
/// made durable or had acknowledged: the checkpoint never covers more) and is followed by
/// [`Sink::checkpointed`].
#[async_trait::async_trait]
pub trait Sink: Send {
    /// Names the sink across restarts: its entry in the checkpoint.
    fn key(&self) -> String;
    /// After a crash: back to `at`, the position of the last checkpoint (`None`: the
    /// checkpoint has none), so that what is written again after it appears once.
    async fn recover(&mut self, at: Option<Position>) -> anyhow::Result<()>;
    /// Takes a step's batch.
    async fn write(&mut self, batch: &Batch) -> anyhow::Result<()>;
    /// Makes what was written durable, or hands it on.
    async fn flush(&mut self) -> anyhow::Result<()>;
    /// Where the sink durably stands, for the checkpoint; `None`: nothing to record.
    fn position(&self) -> Option<Position> {
        None
    }
    /// A checkpoint covering everything flushed was stored: the sink may act on it (rotate its
    /// file, deliver what it covers). Returns whether its position moved (the next checkpoint
    /// should record it).
    async fn checkpointed(&mut self) -> anyhow::Result<bool> {
        Ok(false)
    }
    /// Records of work the sink ran on its own that has ended since the last call (a repair
    /// written): the daemon sends them to every sink in its next step. A sink that has some
    /// notifies the daemon's wake-up (`SinkContext::wake`).
    fn take_records(&mut self) -> Vec<Record> {
        Vec::new()
    }
    /// Waits for the work the sink runs on its own to end (at shutdown; its records are then
    /// in [`Sink::take_records`]).
    async fn settle(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
}
