//! The daemon's configuration: TOML in, validated typed data out.
//!
//! Parse (serde, unknown keys are errors), then validate (values that parse but make no sense),
//! then build (the daemon turns it into sources, stages and sinks). Errors name the key and the
//! line. Stages and sinks are closed sets of typed configs (`type = "..."`), so a typo is an
//! error at load time, never a silently ignored section. Every field's doc comment is its
//! reference documentation; `config/transcriptd.toml` shows them all, commented.

pub mod tools;

use crate::transcript::repair::OrphanPolicy;
use crate::transcript::{Format, Kind, Severity};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Daemon-wide settings.
    #[serde(default)]
    pub daemon: DaemonConfig,
    /// Where transcripts and event logs are read from.
    #[serde(default)]
    pub sources: Vec<SourceConfig>,
    /// What each file goes through, in order.
    #[serde(default = "default_stages")]
    pub stages: Vec<StageConfig>,
    /// Where outputs go.
    #[serde(default = "default_sinks")]
    pub sinks: Vec<SinkConfig>,
}

/// Daemon-wide settings.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonConfig {
    /// Directory for checkpoints (created if missing).
    #[serde(default = "default_state_dir")]
    pub state_dir: PathBuf,
    /// Most files kept open at once; idle files are closed and reopened at their offset.
    #[serde(default = "default_max_open_files")]
    pub max_open_files: usize,
    /// How long SIGTERM waits for the pipeline to drain before exiting anyway.
    #[serde(default = "default_shutdown_timeout", with = "humantime_serde")]
    pub shutdown_timeout: Duration,
    /// How often checkpoints are written while data flows.
    #[serde(default = "default_checkpoint_interval", with = "humantime_serde")]
    pub checkpoint_interval: Duration,
    /// How files are noticed: `auto` (filesystem events, polling if they are unavailable),
    /// `events`, or `poll` (for network filesystems without events).
    #[serde(default)]
    pub watch: WatchMode,
    /// Interval of the polling watcher, and of the periodic rescan that catches what events
    /// missed.
    #[serde(default = "default_poll_interval", with = "humantime_serde")]
    pub poll_interval: Duration,
    /// A file idle this long has its pairing state dropped from memory (it is rebuilt from the
    /// file if the file grows again). Keeps 10,000 watched files cheap.
    #[serde(default = "default_evict_after", with = "humantime_serde")]
    pub evict_after: Duration,
    /// Lines longer than this are `line_too_long` (bytes, with units: "64MiB").
    #[serde(default = "default_max_line_bytes")]
    pub max_line_bytes: Parsed<ByteSize>,
    /// `/health` reports the daemon stuck when one step of its loop (a read, a sink write, a
    /// checkpoint) runs longer than this.
    #[serde(default = "default_stall_timeout", with = "humantime_serde")]
    pub stall_timeout: Duration,
}

/// How files are noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WatchMode {
    /// Events, falling back to polling when the platform has none.
    #[default]
    Auto,
    /// Filesystem events only.
    Events,
    /// Polling only.
    Poll,
}

/// One source.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// A name for logs.
    #[serde(default)]
    pub name: Option<String>,
    /// `transcripts` (agent conversations) or `events` (strict JSONL event logs, `Harness\Transcript`'s `JsonlEvents`: docs/requirements.md).
    #[serde(default)]
    pub kind: SourceKind,
    /// Glob patterns of files to read (`~` is the home directory; `**` crosses directories).
    pub include: Vec<String>,
    /// Glob patterns of files to leave alone.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// `auto` to detect per file, or one of `claude-code`, `codex`, `openai-chat`, `anthropic`.
    #[serde(default = "default_format")]
    pub format: Parsed<Option<Format>>,
    /// Where to start in files found at startup with no checkpoint: `beginning` or `end`.
    /// Files created later are always read from the beginning.
    #[serde(default)]
    pub read_from: ReadFrom,
}

/// Kinds of sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// Agent transcripts: the full stage pipeline.
    #[default]
    Transcripts,
    /// Event logs: strict framing, events counted by type, tool calls without completion
    /// counted as pending.
    Events,
}

/// Where to start reading a file first seen at startup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadFrom {
    /// From the first byte.
    #[default]
    Beginning,
    /// From the current end (only new lines are read).
    End,
}

/// A stage of the pipeline.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum StageConfig {
    /// Line framing and format adapters (always first).
    Parse,
    /// Compaction boundaries: reported as events and counted.
    Compaction,
    /// Calls pending at the tail become `orphan_call` after `grace` with no growth, unless a
    /// `pending.json` beside the file lists them.
    Orphans {
        /// Quiet time before a pending call at the tail is an orphan.
        #[serde(default = "default_grace", with = "humantime_serde")]
        grace: Duration,
        /// Tool registry (side effects per tool); the shipped one when absent.
        #[serde(default)]
        registry: Option<PathBuf>,
    },
    /// The canonical rules: every finding `check` reports.
    Validate,
    /// Writes a repaired copy of a file with error findings through the `repaired_files` sink,
    /// once it has been idle for `min_idle`. Never writes the live file.
    Repair {
        /// `copy`: write the repaired copy; `plan`: only report the plan as events.
        #[serde(default)]
        mode: RepairMode,
        /// Quiet time before a file is repaired.
        #[serde(default = "default_min_idle", with = "humantime_serde")]
        min_idle: Duration,
        /// What to do with calls pending at the end: `answer`, `drop` or `keep`.
        #[serde(default = "default_orphans")]
        orphans: Parsed<OrphanPolicy>,
    },
}

impl StageConfig {
    /// The stage, built: `None` for `parse`, which is the pipeline's front. `quiet` is the quiet
    /// time after which the `validate` stage reports the tail of a live file.
    pub fn build(&self, quiet: Duration) -> Option<Box<dyn crate::transcript::Stage>> {
        use crate::transcript::stages;
        match self {
            StageConfig::Parse => None,
            StageConfig::Compaction => Some(Box::new(stages::compactions::Compactions)),
            StageConfig::Orphans { grace, .. } => Some(Box::new(stages::orphans::Orphans::new(*grace))),
            StageConfig::Validate => Some(Box::new(stages::validate::Validate::new(quiet))),
            StageConfig::Repair { min_idle, .. } => Some(Box::new(stages::repair_trigger::RepairTrigger::new(*min_idle))),
        }
    }

    /// What the stage needs of the shell that runs it (see [`Needs`]).
    ///
    /// # Panics
    ///
    /// On a setting that did not read ([`Parsed::get`]), which validation refuses.
    pub fn needs(&self) -> Needs {
        match self {
            StageConfig::Parse | StageConfig::Compaction | StageConfig::Validate => Needs::default(),
            StageConfig::Orphans { registry, .. } => Needs { paused_calls: true, registry: registry.clone(), quiet: self.quiet(), ..Needs::default() },
            StageConfig::Repair { mode, orphans, .. } => Needs { repair: Some(RepairRequest { mode: *mode, orphans: *orphans.get() }), ..Needs::default() },
        }
    }

    /// The quiet period the stage asks for ([`Needs::quiet`]); this part of its needs reads no
    /// setting, so it holds of a configuration not validated yet.
    pub fn quiet(&self) -> Option<Duration> {
        match self {
            StageConfig::Orphans { grace, .. } => Some(*grace),
            StageConfig::Parse | StageConfig::Compaction | StageConfig::Validate | StageConfig::Repair { .. } => None,
        }
    }
}

/// What a stage needs of the shell beyond its file's lines: inputs the shell reads for it, and
/// work the shell does when it asks. The shell serves these without knowing which stage asked:
/// a new stage that reads a shell input says so here, and the daemon matches on no stage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    /// The calls a host paused beside the file (`pending.json`), read when the file's deadline
    /// comes and handed in as [`crate::transcript::Inputs::paused`].
    pub paused_calls: bool,
    /// A tool registry (side effects per tool) in place of the shipped one; the metrics of
    /// orphan calls use it too.
    pub registry: Option<PathBuf>,
    /// Repairs: what the shell does with a file the stage reports due
    /// ([`crate::transcript::Event::RepairDue`]).
    pub repair: Option<RepairRequest>,
    /// The quiet time after which the tail of a live file is reported (a torn last line, an
    /// empty open turn, a pending call): one for every stage of the list.
    pub quiet: Option<Duration>,
}

impl Needs {
    /// What either needs (for each setting that both give, `self`'s).
    pub fn and(self, other: Needs) -> Needs {
        Needs {
            paused_calls: self.paused_calls || other.paused_calls,
            registry: self.registry.or(other.registry),
            repair: self.repair.or(other.repair),
            quiet: self.quiet.or(other.quiet),
        }
    }
}

/// How the shell repairs a file a stage reports due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepairRequest {
    /// A repaired copy, or only the plan.
    pub mode: RepairMode,
    /// What becomes of calls pending at the end.
    pub orphans: OrphanPolicy,
}

/// What the repair stage does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RepairMode {
    /// Write repaired copies.
    #[default]
    Copy,
    /// Report plans only.
    Plan,
}

/// A sink.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum SinkConfig {
    /// One JSON object per output on standard output.
    Stdout {
        /// Only findings of this severity (`error` or `warning`); corrections of earlier
        /// findings (`finding_demoted`, `finding_retracted`) of the kinds kept always pass, and
        /// so do records that are no finding (`file_opened`, `compaction`, ...).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        severity: Option<Severity>,
        /// Only findings of these kinds (names of the kinds table in docs/findings.md); none: every kind.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        kinds: Vec<Kind>,
    },
    /// JSON lines appended to a file, rotated by size.
    File {
        /// The file.
        path: PathBuf,
        /// Rotate when the file grows past this ("100MiB").
        #[serde(default = "default_rotate_bytes")]
        max_bytes: Parsed<ByteSize>,
        /// Rotated files kept (`path.1` newest ... `path.N`).
        #[serde(default = "default_keep")]
        keep: usize,
    },
    /// Repaired copies of transcripts, written atomically with the original's permissions.
    RepairedFiles {
        /// Directory; a file's copy keeps its path below the source root.
        dir: PathBuf,
    },
    /// Prometheus exporter serving `/metrics` and `/health`.
    Prometheus {
        /// Listen address; loopback by default (another address is logged as a warning).
        #[serde(default = "default_metrics_addr")]
        address: Parsed<SocketAddr>,
        /// Connections served at once; one more closes the oldest. Lowered to fit the
        /// descriptor limit.
        #[serde(default = "default_max_connections")]
        max_connections: usize,
        /// A connection must send its request and take its answer within this.
        #[serde(default = "default_request_timeout", with = "humantime_serde")]
        request_timeout: Duration,
        /// `/tap` clients at once (beyond: 503); each also holds a descriptor.
        #[serde(default = "default_tap_clients")]
        tap_clients: usize,
        /// Records a `/tap` client's queue holds; what a slow client cannot take is dropped
        /// and counted (it gets a `missed` event).
        #[serde(default = "default_tap_buffer")]
        tap_buffer: usize,
        /// A file whose first line is a bearer token. When set, `/metrics`, `/stats` and `/tap`
        /// answer 401 to a request without `Authorization: Bearer <token>` (`/health` stays open
        /// for probes); `tap` and `top` take `--token-file`. For hosts shared with other users:
        /// `/stats` and `/tap` name every watched path, tool and call id. Read at start and on
        /// each reload.
        #[serde(default)]
        token_file: Option<PathBuf>,
    },
    /// The records as newline-delimited JSON, POSTed in batches to a collector (Vector's
    /// `http_server` source, Fluent Bit's `http` input). Spooled in the state directory and
    /// delivered once a checkpoint covers them: nothing lost while the collector is down,
    /// nothing sent twice after a restart.
    Http {
        /// Where to POST: `http://host:port/path` (plain HTTP).
        url: String,
        /// Records per POST at most.
        #[serde(default = "default_http_max_records")]
        max_records: usize,
        /// Bytes per POST at most ("1MiB"); a longer record goes alone.
        #[serde(default = "default_http_max_bytes")]
        max_bytes: Parsed<ByteSize>,
        /// How long a batch that is not full waits for more records.
        #[serde(default = "default_http_max_delay", with = "humantime_serde")]
        max_delay: Duration,
        /// First wait before a failed batch is sent again (doubled on each failure).
        #[serde(default = "default_http_retry_initial", with = "humantime_serde")]
        retry_initial: Duration,
        /// Longest wait between two tries of a batch (it is tried until it is accepted).
        #[serde(default = "default_http_retry_max", with = "humantime_serde")]
        retry_max: Duration,
        /// Undelivered bytes the spool may hold before reading pauses ("256MiB").
        #[serde(default = "default_http_queue_bytes")]
        queue_bytes: Parsed<ByteSize>,
        /// Time for one request (connect, send, answer).
        #[serde(default = "default_http_timeout", with = "humantime_serde")]
        timeout: Duration,
    },
}

fn default_http_max_records() -> usize {
    1000
}
fn default_http_max_bytes() -> Parsed<ByteSize> {
    Parsed::new("1MiB")
}
fn default_http_max_delay() -> Duration {
    Duration::from_secs(1)
}
fn default_http_retry_initial() -> Duration {
    Duration::from_millis(100)
}
fn default_http_retry_max() -> Duration {
    Duration::from_secs(30)
}
fn default_http_queue_bytes() -> Parsed<ByteSize> {
    Parsed::new("256MiB")
}
fn default_http_timeout() -> Duration {
    Duration::from_secs(10)
}

/// What sinks are built with besides their own settings.
pub struct SinkContext<'a> {
    /// The daemon's state directory.
    pub state_dir: &'a Path,
    /// The tool registry (side effects, for the metrics of orphan calls).
    pub registry: &'a tools::ToolRegistry,
    /// What runs a due repair, for a sink that writes them ([`SinkNeeds::repairs_into`]: the
    /// daemon hands in the repair driver; sinks do not know how to repair).
    pub repairer: Option<crate::sinks::repaired::Repairer>,
    /// Notified by a sink that has records of its own waiting ([`crate::sinks::Sink::take_records`]).
    pub wake: std::sync::Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for SinkContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkContext").field("state_dir", &self.state_dir).field("repairer", &self.repairer.is_some()).finish_non_exhaustive()
    }
}

impl SinkConfig {
    /// The sink, built (a closed enum in front, an open trait behind it).
    pub fn build(&self, ctx: &SinkContext<'_>) -> anyhow::Result<Option<Box<dyn crate::sinks::Sink>>> {
        use crate::sinks::{outputs, prometheus};
        use anyhow::Context as _;
        Ok(match self {
            SinkConfig::Stdout { severity, kinds } => {
                let filter = crate::transcript::FindingFilter { severity: *severity, kinds: kinds.clone() };
                Some(Box::new(outputs::StdoutSink::new().filtered(filter)))
            }
            SinkConfig::File { path, max_bytes, keep } => {
                let max = max_bytes.read().map_err(|m| anyhow::anyhow!("max_bytes: {m}"))?.bytes() as u64;
                Some(Box::new(outputs::FileSink::open(path, max, *keep).with_context(|| format!("opening {}", path.display()))?))
            }
            SinkConfig::RepairedFiles { dir } => {
                let repairer = ctx.repairer.clone().context("the repaired_files sink needs the daemon's repair driver")?;
                Some(Box::new(crate::sinks::repaired::RepairedFiles::open(dir, ctx.state_dir, repairer, ctx.wake.clone())?))
            }
            SinkConfig::Prometheus { .. } => {
                let registry = ctx.registry.clone();
                Some(Box::new(prometheus::PrometheusSink::new(Box::new(move |tool| registry.side_effect(tool)))))
            }
            SinkConfig::Http { .. } => Some(Box::new(crate::sinks::http::HttpSink::open(self.http_settings().map_err(anyhow::Error::msg)?, ctx.state_dir)?)),
        })
    }

    /// The `http` sink's settings, resolved (the URL checked, sizes read).
    pub fn http_settings(&self) -> Result<crate::sinks::http::Settings, String> {
        let SinkConfig::Http { url, max_records, max_bytes, max_delay, retry_initial, retry_max, queue_bytes, timeout } = self else {
            return Err("not an http sink".into());
        };
        self.http_problem().map_or(Ok(()), Err)?;
        let size = |key: &str, v: &Parsed<ByteSize>| v.read().map(|n| n.bytes() as u64).map_err(|m| format!("{key}: {m}"));
        Ok(crate::sinks::http::Settings {
            url: url.clone(),
            max_records: *max_records,
            max_bytes: size("max_bytes", max_bytes)?.max(1),
            max_delay: *max_delay,
            retry_initial: *retry_initial,
            retry_max: *retry_max,
            queue_bytes: size("queue_bytes", queue_bytes)?,
            timeout: *timeout,
        })
    }

    /// What is wrong with the `http` sink's settings besides its sizes (which name their keys
    /// of their own): its URL, batch size and times.
    fn http_problem(&self) -> Option<String> {
        let SinkConfig::Http { url, max_records, retry_initial, retry_max, timeout, .. } = self else { return None };
        if let Err(m) = crate::sinks::http::Target::parse(url) {
            return Some(m);
        }
        if *max_records == 0 {
            return Some("max_records: must be at least 1".into());
        }
        if timeout.is_zero() || retry_initial.is_zero() || retry_max < retry_initial {
            return Some("timeout and retry_initial must be more than 0, retry_max at least retry_initial".into());
        }
        None
    }
}

/// A setting written as a string (a size, an address, a name) and read once, when the file is:
/// the text as written, and its value or why it has none. Text that does not read is a problem
/// of validation ([`Config::resolve`]) that names the key and its line, not an error of the
/// TOML: the rest of its element is still read and checked with the others. The TOML surface
/// is the string.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed<T> {
    text: String,
    value: Result<T, String>,
}

/// How a [`Parsed`] setting reads its text.
pub trait Setting: Sized {
    /// The value `text` means, or what is wrong with it.
    fn read(text: &str) -> Result<Self, String>;
}

impl<T: Setting> Parsed<T> {
    /// `text`, read.
    pub fn new(text: impl Into<String>) -> Self {
        let text = text.into();
        let value = T::read(&text);
        Parsed { text, value }
    }
}

impl<T> Parsed<T> {
    /// The text as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The value, or what is wrong with the text.
    pub fn read(&self) -> Result<&T, &str> {
        self.value.as_ref().map_err(String::as_str)
    }

    /// The value, in a validated configuration.
    ///
    /// # Panics
    ///
    /// When the text did not read: validation refuses such a configuration.
    pub fn get(&self) -> &T {
        match &self.value {
            Ok(v) => v,
            Err(m) => panic!("a setting of an unvalidated configuration: {m}"),
        }
    }
}

impl<'de, T: Setting> Deserialize<'de> for Parsed<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Parsed::new)
    }
}

impl<T> Serialize for Parsed<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.text.serialize(s)
    }
}

impl Setting for OrphanPolicy {
    fn read(text: &str) -> Result<Self, String> {
        text.parse()
    }
}

/// A format setting: `auto` (`None`: detected per file) or a format's name.
impl Setting for Option<Format> {
    fn read(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(None),
            f => f.parse().map(Some),
        }
    }
}

impl Setting for SocketAddr {
    fn read(text: &str) -> Result<Self, String> {
        text.parse().map_err(|e| format!("{text}: {e}"))
    }
}

/// A number of bytes, written with an optional unit ("64MiB", see [`parse_size`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(usize);

impl ByteSize {
    /// The number of bytes.
    pub fn bytes(self) -> usize {
        self.0
    }
}

impl Setting for ByteSize {
    fn read(text: &str) -> Result<Self, String> {
        parse_size(text).map(ByteSize)
    }
}

/// Reads a configuration file.
fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| ConfigError::Io { path: path.display().to_string(), message: e.to_string() })
}

/// A TOML error, with the line it points at.
fn parse_error(e: &toml::de::Error, text: &str, path: &str) -> ConfigError {
    let line = e.span().map_or(1, |s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    ConfigError::Parse { path: path.to_owned(), line, message: e.message().trim().to_owned() }
}

impl SinkConfig {
    /// The `type` it is written with.
    pub fn type_name(&self) -> &'static str {
        match self {
            SinkConfig::Stdout { .. } => "stdout",
            SinkConfig::File { .. } => "file",
            SinkConfig::RepairedFiles { .. } => "repaired_files",
            SinkConfig::Prometheus { .. } => "prometheus",
            SinkConfig::Http { .. } => "http",
        }
    }

    /// A stdout sink that passes every record.
    pub fn stdout() -> Self {
        SinkConfig::Stdout { severity: None, kinds: Vec::new() }
    }

    /// What the sink needs of the shell that runs it (see [`SinkNeeds`]).
    pub fn needs(&self) -> SinkNeeds {
        match self {
            SinkConfig::File { path, .. } => {
                SinkNeeds { dirs: path.parent().filter(|d| !d.as_os_str().is_empty()).map(Path::to_path_buf).into_iter().collect(), appends_to: Some(path.clone()), ..SinkNeeds::default() }
            }
            SinkConfig::RepairedFiles { dir } => SinkNeeds { repairs_into: Some(dir.clone()), dirs: vec![dir.clone()], ..SinkNeeds::default() },
            SinkConfig::Stdout { .. } | SinkConfig::Prometheus { .. } | SinkConfig::Http { .. } => SinkNeeds::default(),
        }
    }
}

/// What a sink needs of the shell beyond the records it is given, as [`Needs`] is for a
/// stage: the shell serves it without knowing which sink asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SinkNeeds {
    /// The sink writes the repairs the stages request, into this directory: the shell hands it
    /// the repair driver ([`SinkContext::repairer`]) and makes the plans of repair mode `plan`
    /// against the same directory.
    pub repairs_into: Option<PathBuf>,
    /// Directories that must exist before it opens (made when the daemon starts, and by the
    /// check of a reloaded configuration).
    pub dirs: Vec<PathBuf>,
    /// A file it appends to, which must open for appending before the daemon starts.
    pub appends_to: Option<PathBuf>,
}

fn default_state_dir() -> PathBuf {
    PathBuf::from("/var/lib/transcriptd")
}
fn default_max_open_files() -> usize {
    1024
}
fn default_shutdown_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_checkpoint_interval() -> Duration {
    Duration::from_secs(1)
}
fn default_poll_interval() -> Duration {
    Duration::from_secs(2)
}
fn default_evict_after() -> Duration {
    Duration::from_secs(15 * 60)
}
fn default_max_line_bytes() -> Parsed<ByteSize> {
    Parsed::new("64MiB")
}
fn default_format() -> Parsed<Option<Format>> {
    Parsed::new("auto")
}
fn default_grace() -> Duration {
    Duration::from_secs(600)
}
fn default_min_idle() -> Duration {
    Duration::from_secs(60)
}
fn default_orphans() -> Parsed<OrphanPolicy> {
    Parsed::new("answer")
}
fn default_rotate_bytes() -> Parsed<ByteSize> {
    Parsed::new("100MiB")
}
fn default_keep() -> usize {
    5
}
fn default_stall_timeout() -> Duration {
    Duration::from_secs(30)
}
fn default_max_connections() -> usize {
    64
}
fn default_tap_clients() -> usize {
    4
}
fn default_tap_buffer() -> usize {
    4096
}
fn default_request_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_metrics_addr() -> Parsed<SocketAddr> {
    Parsed::new("127.0.0.1:9464")
}
fn default_stages() -> Vec<StageConfig> {
    vec![StageConfig::Parse, StageConfig::Compaction, StageConfig::Orphans { grace: default_grace(), registry: None }, StageConfig::Validate]
}
fn default_sinks() -> Vec<SinkConfig> {
    vec![SinkConfig::stdout()]
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            state_dir: default_state_dir(),
            max_open_files: default_max_open_files(),
            shutdown_timeout: default_shutdown_timeout(),
            checkpoint_interval: default_checkpoint_interval(),
            watch: WatchMode::Auto,
            poll_interval: default_poll_interval(),
            evict_after: default_evict_after(),
            max_line_bytes: default_max_line_bytes(),
            stall_timeout: default_stall_timeout(),
        }
    }
}

/// A configuration error: what, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// TOML syntax, an unknown key, or a value of the wrong type.
    #[error("{path}:{line}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// 1-based line.
        line: usize,
        /// What is wrong (naming the key).
        message: String,
    },
    /// A value that parses but cannot be used.
    #[error("{path}:{}`{key}`: {message}", line.map_or_else(|| " ".to_owned(), |l| format!("{l}: ")))]
    Invalid {
        /// The file.
        path: String,
        /// 1-based line of the key (of its table when the key is absent), when known.
        line: Option<usize>,
        /// The key, as a dotted path (`sources[0].format`).
        key: String,
        /// Why.
        message: String,
    },
}

impl ConfigError {
    /// The file, the line (when there is one) and the message without them: what
    /// `validate-config` prints as `path:line: error: message`.
    pub fn parts(&self) -> (&str, Option<usize>, String) {
        match self {
            ConfigError::Io { path, message } => (path, None, message.clone()),
            ConfigError::Parse { path, line, message } => (path, Some(*line), message.clone()),
            ConfigError::Invalid { path, line, key, message } => (path, *line, format!("`{key}`: {message}")),
        }
    }
}

/// Every error of a configuration file, in the order of their lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl std::fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        ConfigErrors(vec![e])
    }
}

/// The configuration, validated and resolved: what the daemon is built from.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The configuration as written.
    pub config: Config,
    /// Prometheus listen address, if the sink is configured.
    pub metrics_addr: Option<SocketAddr>,
    /// The Prometheus sink's settings, if it is configured.
    pub metrics: Option<MetricsSettings>,
}

/// The Prometheus sink, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsSettings {
    /// Listen address.
    pub addr: SocketAddr,
    /// Connections at once.
    pub max_connections: usize,
    /// Time a connection has for its request and answer (a `/tap` client: to take what
    /// waits for it).
    pub request_timeout: Duration,
    /// `/tap` clients at once.
    pub tap_clients: usize,
    /// Records a `/tap` client's queue holds.
    pub tap_buffer: usize,
    /// The file holding the bearer token every path but `/health` asks for.
    pub token_file: Option<PathBuf>,
}

/// Where a problem is: a section (`daemon`, `sources`, `stages`, `sinks`), the element of an
/// array section, and a key in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The section.
    pub section: &'static str,
    /// The element, in an array section.
    pub index: Option<usize>,
    /// The key inside it.
    pub key: Option<&'static str>,
}

impl Place {
    fn section(section: &'static str) -> Self {
        Place { section, index: None, key: None }
    }

    fn element(section: &'static str, index: usize) -> Self {
        Place { section, index: Some(index), key: None }
    }

    fn key(section: &'static str, index: Option<usize>, key: &'static str) -> Self {
        Place { section, index, key: Some(key) }
    }

    /// As a dotted path: `sources[0].format`.
    pub fn dotted(&self) -> String {
        let mut s = self.section.to_owned();
        if let Some(i) = self.index {
            s.push_str(&format!("[{i}]"));
        }
        if let Some(k) = self.key {
            s.push('.');
            s.push_str(k);
        }
        s
    }
}

impl Config {
    /// Parses TOML text. `path` only names the file in errors.
    pub fn parse(text: &str, path: &str) -> Result<Config, ConfigError> {
        toml::from_str::<Config>(text).map_err(|e| parse_error(&e, text, path))
    }

    /// Reads and parses a file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = read(path)?;
        Config::parse(&text, &path.display().to_string())
    }

    /// What the stages need of the shell, together ([`StageConfig::needs`]).
    pub fn needs(&self) -> Needs {
        self.stages.iter().map(StageConfig::needs).fold(Needs::default(), Needs::and)
    }

    /// The quiet time after which the tail of a live file is reported (a torn last line, an
    /// empty open turn): the one a stage asks for (the `orphans` stage's grace period), or the
    /// default grace without one.
    pub fn quiet(&self) -> Duration {
        self.stages.iter().find_map(StageConfig::quiet).unwrap_or_else(default_grace)
    }

    /// Reads, parses and validates a file, with every error it has (see [`Config::check_text`]);
    /// with `env`, the machine too ([`Resolved::environment_problems`]).
    pub fn load_checked(path: &Path, env: bool) -> Result<Resolved, ConfigErrors> {
        let text = read(path)?;
        Config::check_text_with(&text, &path.display().to_string(), env)
    }

    /// Parses and validates TOML text, collecting every error rather than stopping at the
    /// first: each section and each element of `sources`, `stages` and `sinks` is read on its
    /// own, so that one bad element does not hide the next, and values that parse but cannot
    /// work are named with the line of their key. A syntax error stops there (nothing after it
    /// can be trusted).
    pub fn check_text(text: &str, path: &str) -> Result<Resolved, ConfigErrors> {
        Config::check_text_with(text, path, false)
    }

    /// [`Config::check_text`], and with `env` also what `run` would need of this machine (see
    /// [`Resolved::environment_problems`]), each problem named with its key's line.
    pub fn check_text_with(text: &str, path: &str, env: bool) -> Result<Resolved, ConfigErrors> {
        use toml::de::{DeTable, DeValue, ValueDeserializer};
        let doc = DeTable::parse(text).map_err(|e| parse_error(&e, text, path))?;
        let line_of = |pos: usize| text[..pos.min(text.len())].matches('\n').count() + 1;
        let mut errors = Vec::new();
        let mut config = Config { daemon: DaemonConfig::default(), sources: Vec::new(), stages: default_stages(), sinks: default_sinks() };
        // Where each element that parsed came from: (its index in the file, its value).
        let mut origin: std::collections::BTreeMap<&'static str, Vec<(usize, &toml::Spanned<DeValue<'_>>)>> = Default::default();
        let mut sections: std::collections::BTreeMap<&'static str, &toml::Spanned<DeValue<'_>>> = Default::default();
        fn element<T: serde::de::DeserializeOwned>(v: &toml::Spanned<DeValue<'_>>) -> Result<T, toml::de::Error> {
            T::deserialize(ValueDeserializer::from(v.clone()))
        }
        for (k, v) in doc.get_ref().iter() {
            let key = k.get_ref().as_ref();
            let section: &'static str = match key {
                "daemon" => "daemon",
                "sources" => "sources",
                "stages" => "stages",
                "sinks" => "sinks",
                other => {
                    errors.push(ConfigError::Parse {
                        path: path.to_owned(),
                        line: line_of(k.span().start),
                        message: format!("unknown field `{other}`, expected one of `daemon`, `sources`, `stages`, `sinks`"),
                    });
                    continue;
                }
            };
            sections.insert(section, v);
            let fail = |e: toml::de::Error, at: &toml::Spanned<DeValue<'_>>, what: String| ConfigError::Parse {
                path: path.to_owned(),
                line: line_of(e.span().unwrap_or(at.span()).start),
                message: format!("`{what}`: {}", e.message().trim()),
            };
            if section == "daemon" {
                match element::<DaemonConfig>(v) {
                    Ok(d) => config.daemon = d,
                    Err(e) => errors.push(fail(e, v, "daemon".into())),
                }
                continue;
            }
            let Some(items) = v.get_ref().as_array() else {
                errors.push(ConfigError::Parse {
                    path: path.to_owned(),
                    line: line_of(v.span().start),
                    message: format!("`{section}` must be an array of tables (`[[{section}]]`)"),
                });
                continue;
            };
            let kept = origin.entry(section).or_default();
            match section {
                "sources" => config.sources.clear(),
                "stages" => config.stages.clear(),
                _ => config.sinks.clear(),
            }
            for (i, item) in items.iter().enumerate() {
                let what = format!("{section}[{i}]");
                let parsed = match section {
                    "sources" => element::<SourceConfig>(item).map(|x| config.sources.push(x)),
                    "stages" => element::<StageConfig>(item).map(|x| config.stages.push(x)),
                    _ => element::<SinkConfig>(item).map(|x| config.sinks.push(x)),
                };
                match parsed {
                    Ok(()) => kept.push((i, item)),
                    Err(e) => errors.push(fail(e, item, what)),
                }
            }
        }
        // The line of a place: its key's value, else its element, else its section.
        let locate = |p: &Place| -> (String, Option<usize>) {
            let elements = origin.get(p.section);
            let (index, value) = match (p.index, elements) {
                (Some(i), Some(e)) => match e.get(i) {
                    Some((orig, v)) => (Some(*orig), Some(*v)),
                    None => (Some(i), None),
                },
                (i, _) => (i, sections.get(p.section).copied()),
            };
            let dotted = Place { index, ..p.clone() }.dotted();
            let span = value.map(|v| {
                p.key
                    .and_then(|k| v.get_ref().as_table().and_then(|t| t.iter().find(|(name, _)| name.get_ref() == k)).map(|(_, x)| x.span()))
                    .unwrap_or(v.span())
            });
            (dotted, span.map(|s| line_of(s.start)))
        };
        let (resolved, mut problems) = config.resolve();
        if let (Some(r), true) = (&resolved, env) {
            problems.extend(r.environment_problems());
        }
        for (place, message) in problems {
            let (key, line) = locate(&place);
            errors.push(ConfigError::Invalid { path: path.to_owned(), line, key, message });
        }
        match resolved {
            Some(r) if errors.is_empty() => Ok(r),
            _ => {
                errors.sort_by_key(|e| e.parts().1.unwrap_or(0));
                Err(ConfigErrors(errors))
            }
        }
    }

    /// Checks the values and resolves sizes, formats and addresses (the first problem is the
    /// error; [`Config::check_text`] reports them all, with their lines).
    pub fn validate(self, path: &str) -> Result<Resolved, ConfigError> {
        let (resolved, problems) = self.resolve();
        match (resolved, problems.into_iter().next()) {
            (Some(r), None) => Ok(r),
            (_, Some((place, message))) => Err(ConfigError::Invalid { path: path.to_owned(), line: None, key: place.dotted(), message }),
            (None, None) => unreachable!("resolve gives a result or a problem"),
        }
    }

    /// Every value that parses but cannot work, with where it is; the resolved configuration
    /// when there is none.
    pub fn resolve(self) -> (Option<Resolved>, Vec<(Place, String)>) {
        let mut problems: Vec<(Place, String)> = Vec::new();
        let mut bad = |place: Place, message: String| problems.push((place, message));
        if self.sources.is_empty() {
            bad(Place::section("sources"), "at least one source is needed".into());
        }
        if let Err(m) = self.daemon.max_line_bytes.read() {
            bad(Place::key("daemon", None, "max_line_bytes"), m.to_owned());
        }
        if self.daemon.max_open_files == 0 {
            bad(Place::key("daemon", None, "max_open_files"), "must be at least 1".into());
        }
        if self.daemon.stall_timeout.is_zero() {
            bad(Place::key("daemon", None, "stall_timeout"), "must be more than 0".into());
        }
        let mut names: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for (i, s) in self.sources.iter().enumerate() {
            if let Some(n) = &s.name {
                match names.get(n.as_str()) {
                    Some(j) => bad(
                        Place::key("sources", Some(i), "name"),
                        format!("`{n}` names sources[{j}] too: source names must be unique (logs tell sources apart by them)"),
                    ),
                    None => {
                        names.insert(n, i);
                    }
                }
            }
            if s.include.is_empty() {
                bad(Place::key("sources", Some(i), "include"), "at least one pattern is needed".into());
            }
            for (key, pats) in [("include", &s.include), ("exclude", &s.exclude)] {
                for g in pats {
                    if let Err(e) = globset::Glob::new(&expand_home(g)) {
                        bad(Place::key("sources", Some(i), key), format!("`{g}`: {e}"));
                    }
                }
            }
            if let Err(m) = s.format.read() {
                bad(Place::key("sources", Some(i), "format"), m.to_owned());
            }
        }
        if !matches!(self.stages.first(), Some(StageConfig::Parse)) {
            bad(Place::element("stages", 0), "the first stage must be `parse`".into());
        }
        let mut seen = std::collections::HashMap::new();
        for (i, st) in self.stages.iter().enumerate() {
            if let Some(j) = seen.insert(std::mem::discriminant(st), i) {
                bad(Place::element("stages", i), format!("stages[{j}] is the same stage: each stage may appear once"));
            }
            if let StageConfig::Repair { orphans, mode, .. } = st {
                if let Err(m) = orphans.read() {
                    bad(Place::key("stages", Some(i), "orphans"), m.to_owned());
                }
                if *mode == RepairMode::Copy && !self.sinks.iter().any(|s| matches!(s, SinkConfig::RepairedFiles { .. })) {
                    bad(Place::element("stages", i), "repair mode `copy` needs a `repaired_files` sink".into());
                }
            }
            if let StageConfig::Orphans { registry: Some(r), .. } = st {
                if let Err(e) = tools::ToolRegistry::load(r) {
                    bad(Place::key("stages", Some(i), "registry"), e.to_string());
                }
            }
        }
        let mut metrics = None;
        let mut sinks_seen: std::collections::HashMap<&'static str, usize> = std::collections::HashMap::new();
        for (i, s) in self.sinks.iter().enumerate() {
            if let Some(j) = sinks_seen.insert(s.type_name(), i) {
                bad(Place::element("sinks", i), format!("a second `{}` sink (sinks[{j}] is one): each sink may appear once", s.type_name()));
            }
            match s {
                SinkConfig::Prometheus { address, max_connections, request_timeout, tap_clients, tap_buffer, token_file } => {
                    if *max_connections == 0 {
                        bad(Place::key("sinks", Some(i), "max_connections"), "must be at least 1".into());
                    }
                    if *tap_buffer == 0 {
                        bad(Place::key("sinks", Some(i), "tap_buffer"), "must be at least 1".into());
                    }
                    if request_timeout.is_zero() {
                        bad(Place::key("sinks", Some(i), "request_timeout"), "must be more than 0".into());
                    }
                    match address.read() {
                        Ok(addr) => {
                            metrics = Some(MetricsSettings {
                                addr: *addr,
                                max_connections: *max_connections,
                                request_timeout: *request_timeout,
                                tap_clients: *tap_clients,
                                tap_buffer: *tap_buffer,
                                token_file: token_file.clone(),
                            })
                        }
                        Err(m) => bad(Place::key("sinks", Some(i), "address"), m.to_owned()),
                    }
                }
                SinkConfig::File { max_bytes, keep, .. } => {
                    if let Err(m) = max_bytes.read() {
                        bad(Place::key("sinks", Some(i), "max_bytes"), m.to_owned());
                    }
                    if *keep == 0 {
                        bad(Place::key("sinks", Some(i), "keep"), "must be at least 1".into());
                    }
                }
                SinkConfig::Http { max_bytes, queue_bytes, .. } => {
                    if let Some(m) = s.http_problem() {
                        bad(Place::element("sinks", i), m);
                    }
                    for (key, size) in [("max_bytes", max_bytes), ("queue_bytes", queue_bytes)] {
                        if let Err(m) = size.read() {
                            bad(Place::key("sinks", Some(i), key), m.to_owned());
                        }
                    }
                }
                SinkConfig::Stdout { .. } | SinkConfig::RepairedFiles { .. } => {}
            }
        }
        if !problems.is_empty() {
            return (None, problems);
        }
        let mut config = self;
        config.make_absolute();
        if let Some(t) = metrics.as_mut().and_then(|m| m.token_file.as_mut()) {
            *t = std::path::absolute(&*t).unwrap_or_else(|_| t.clone());
        }
        (Some(Resolved { config, metrics_addr: metrics.as_ref().map(|m| m.addr), metrics }), problems)
    }

    /// Every path the daemon keeps made absolute against the current directory, as it is at
    /// start (the state directory, the sources' patterns, the file sink, the repaired files'
    /// directory, a tool registry): a relative pattern would otherwise give the files found by
    /// walking its root relative names and the files named by inotify absolute ones, two
    /// entries for one file (whose appends were then never read), and relative names in the
    /// checkpoint. A pattern that starts with a glob (`**/*.rejects.jsonl`) matches anywhere and
    /// is left as it is.
    fn make_absolute(&mut self) {
        let Ok(cwd) = std::env::current_dir() else { return };
        let abs = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = std::path::absolute(&*p).unwrap_or_else(|_| cwd.join(&*p));
            }
        };
        abs(&mut self.daemon.state_dir);
        for st in &mut self.stages {
            if let StageConfig::Orphans { registry: Some(r), .. } = st {
                abs(r);
            }
        }
        for s in &mut self.sinks {
            match s {
                SinkConfig::File { path, .. } => abs(path),
                SinkConfig::RepairedFiles { dir } => abs(dir),
                SinkConfig::Prometheus { token_file: Some(t), .. } => abs(t),
                SinkConfig::Stdout { .. } | SinkConfig::Prometheus { .. } | SinkConfig::Http { .. } => {}
            }
        }
        let mut escaped = String::new();
        for c in cwd.to_string_lossy().chars() {
            if "*?[]{}\\".contains(c) {
                escaped.push('\\');
            }
            escaped.push(c);
        }
        // `include` patterns name where files are (their root is watched): always under the
        // current directory when relative. An `exclude` pattern that starts with a glob matches
        // anywhere.
        let pattern = |p: &mut String, rooted: bool| {
            if p.starts_with('/') || p.starts_with("~/") || p == "~" {
                return;
            }
            let explicit = p.starts_with("./") || p == ".";
            let mut rest = p.as_str();
            while let Some(r) = rest.strip_prefix("./") {
                rest = r.trim_start_matches('/');
            }
            if rest == "." {
                rest = "";
            }
            if !rooted && !explicit && rest.split('/').next().unwrap_or("").contains(['*', '?', '[', '{']) {
                return;
            }
            *p = if rest.is_empty() { escaped.clone() } else { format!("{}/{rest}", escaped.trim_end_matches('/')) };
        };
        for src in &mut self.sources {
            src.include.iter_mut().for_each(|p| pattern(p, true));
            src.exclude.iter_mut().for_each(|p| pattern(p, false));
        }
    }

    /// The configuration of `transcriptd run` without a file: watch `dirs` for `*.jsonl`,
    /// report on stdout, serve metrics on `metrics_addr` if given.
    pub fn for_watch(dirs: &[PathBuf], metrics_addr: Option<&str>, state_dir: Option<&Path>) -> Config {
        let mut sinks = vec![SinkConfig::stdout()];
        if let Some(a) = metrics_addr {
            sinks.push(SinkConfig::Prometheus {
                address: Parsed::new(a),
                max_connections: default_max_connections(),
                request_timeout: default_request_timeout(),
                tap_clients: default_tap_clients(),
                tap_buffer: default_tap_buffer(),
                token_file: None,
            });
        }
        Config {
            daemon: DaemonConfig { state_dir: state_dir.map_or_else(default_user_state_dir, Path::to_path_buf), ..DaemonConfig::default() },
            sources: vec![SourceConfig {
                name: Some("watch".into()),
                kind: SourceKind::Transcripts,
                include: dirs.iter().map(|d| format!("{}/**/*.jsonl", d.display())).collect(),
                exclude: vec!["**/*.rejects.jsonl".into()],
                format: default_format(),
                read_from: ReadFrom::Beginning,
            }],
            stages: default_stages(),
            sinks,
        }
    }
}

impl Resolved {
    /// The line limit, in bytes.
    pub fn max_line_bytes(&self) -> usize {
        self.config.daemon.max_line_bytes.get().bytes()
    }

    /// What `run` needs of this machine that the file alone cannot tell (`validate-config
    /// --check-env`, as `vector validate` checks its environment): the state directory (and a
    /// `repaired_files` directory) exists and is writable or can be created, the `file` sink's
    /// directory is writable, the metrics address can be bound, and the root of every source's
    /// `include` pattern exists. Nothing is created or left behind.
    pub fn environment_problems(&self) -> Vec<(Place, String)> {
        let mut out = Vec::new();
        if let Err(m) = creatable(&self.config.daemon.state_dir) {
            out.push((Place::key("daemon", None, "state_dir"), m));
        }
        for (i, s) in self.config.sinks.iter().enumerate() {
            match s {
                SinkConfig::Prometheus { .. } => {
                    if let Some(addr) = self.metrics_addr {
                        if let Err(e) = std::net::TcpListener::bind(addr) {
                            out.push((Place::key("sinks", Some(i), "address"), format!("{addr} cannot be bound: {e}")));
                        }
                    }
                }
                SinkConfig::RepairedFiles { dir } => {
                    if let Err(m) = creatable(dir) {
                        out.push((Place::key("sinks", Some(i), "dir"), m));
                    }
                }
                SinkConfig::File { path, .. } => {
                    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
                    if let Err(m) = writable(dir) {
                        out.push((Place::key("sinks", Some(i), "path"), m));
                    }
                }
                SinkConfig::Stdout { .. } | SinkConfig::Http { .. } => {}
            }
        }
        for (i, s) in self.config.sources.iter().enumerate() {
            for p in &s.include {
                let root = literal_root(&expand_home(p));
                if !root.exists() {
                    out.push((
                        Place::key("sources", Some(i), "include"),
                        format!("{} (the root of `{p}`) does not exist: nothing is read from it until it is created", root.display()),
                    ));
                }
            }
        }
        out
    }
}

/// Whether files can be made in `dir`: a directory is tried with an unnamed temporary file
/// (nothing is left behind).
fn writable(dir: &Path) -> Result<(), String> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => Err(format!("{} is not a directory", dir.display())),
        Ok(_) => tempfile::tempfile_in(dir).map(drop).map_err(|e| format!("{} is not writable: {e}", dir.display())),
        Err(e) => Err(format!("{}: {e}", dir.display())),
    }
}

/// Whether `dir` is a writable directory, or can be created: its nearest existing ancestor is
/// a writable directory.
fn creatable(dir: &Path) -> Result<(), String> {
    if dir.exists() {
        return writable(dir);
    }
    let mut up = dir.parent();
    while let Some(p) = up {
        let p = if p.as_os_str().is_empty() { Path::new(".") } else { p };
        if p.exists() {
            return writable(p).map_err(|m| format!("{} cannot be created: {m}", dir.display()));
        }
        up = p.parent();
    }
    Err(format!("{} cannot be created", dir.display()))
}

/// `$XDG_STATE_HOME/transcriptd` or `~/.local/state/transcriptd`: where a user's daemon keeps
/// its checkpoints when no state directory is given.
pub fn default_user_state_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("transcriptd");
    }
    std::env::var_os("HOME").map_or_else(|| PathBuf::from(".transcriptd"), |h| PathBuf::from(h).join(".local/state/transcriptd"))
}

/// The directory a glob pattern's files are under: its leading components without glob
/// characters (what the daemon watches for the pattern).
pub fn literal_root(pattern: &str) -> PathBuf {
    let mut root = PathBuf::new();
    for c in Path::new(pattern).components() {
        let s = c.as_os_str().to_string_lossy();
        if s.contains(['*', '?', '[', '{']) {
            break;
        }
        root.push(c);
    }
    root
}

/// Replaces a leading `~` with the home directory.
pub fn expand_home(pattern: &str) -> String {
    match (pattern.strip_prefix("~/"), std::env::var("HOME")) {
        (Some(rest), Ok(home)) => format!("{home}/{rest}"),
        _ => pattern.to_owned(),
    }
}

/// Parses a byte size: a number with an optional unit (`k`, `M`, `G`, `KiB`, `MiB`, `GiB`:
/// binary; `kB`, `MB`, `GB`: decimal).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: usize = num.parse().map_err(|_| format!("invalid size `{s}`"))?;
    let mult: usize = match unit.trim() {
        "" | "B" | "b" => 1,
        "k" | "K" | "KiB" | "kiB" => 1 << 10,
        "m" | "M" | "MiB" => 1 << 20,
        "g" | "G" | "GiB" => 1 << 30,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        u => return Err(format!("unknown size unit `{u}` in `{s}`")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("size `{s}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIPPED: &str = include_str!("../../config/transcriptd.toml");

    #[test]
    fn shipped_config_is_valid() {
        let c = Config::parse(SHIPPED, "config/transcriptd.toml").unwrap();
        c.validate("config/transcriptd.toml").unwrap();
    }

    #[test]
    fn unknown_keys_are_errors_naming_key_and_line() {
        let text = "[daemon]\nstate_dir = \"/tmp/x\"\nbogus = 1\n\n[[sources]]\ninclude = [\"/x/*.jsonl\"]\n";
        let e = Config::parse(text, "t.toml").unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("t.toml:3:"), "{msg}");
        assert!(msg.contains("bogus"), "{msg}");
    }

    #[test]
    fn stages_and_sinks_are_closed_sets() {
        let text = "[[sources]]\ninclude=[\"/x/*.jsonl\"]\n[[stages]]\ntype = \"parse\"\n[[stages]]\ntype = \"frobnicate\"\n";
        let e = Config::parse(text, "t.toml").unwrap_err().to_string();
        assert!(e.contains("t.toml:6") && e.contains("frobnicate"), "{e}");
        let text = "[[sources]]\ninclude=[\"/x/*.jsonl\"]\n[[sinks]]\ntype = \"prometheus\"\nadress = \"x\"\n";
        let e = Config::parse(text, "t.toml").unwrap_err().to_string();
        assert!(e.contains("adress"), "{e}");
    }

    #[test]
    fn values_are_validated() {
        let bad = |text: &str, key: &str| {
            let e = Config::parse(text, "t.toml").unwrap().validate("t.toml").unwrap_err().to_string();
            assert!(e.contains(key), "{e} should name {key}");
        };
        bad("[[sources]]\ninclude=[\"/x/*.jsonl\"]\nformat=\"cobol\"\n", "sources[0].format");
        bad("[[sources]]\ninclude=[]\n", "sources[0].include");
        bad("[[sources]]\ninclude=[\"/x\"]\n[[sinks]]\ntype=\"prometheus\"\naddress=\"nowhere\"\n", "sinks[0].address");
        bad("[[sources]]\ninclude=[\"/x\"]\n[[stages]]\ntype=\"validate\"\n", "stages[0]");
        bad("[[sources]]\ninclude=[\"/x\"]\n[[stages]]\ntype=\"parse\"\n[[stages]]\ntype=\"repair\"\n", "repaired_files");
        bad("[daemon]\nmax_line_bytes=\"lots\"\n[[sources]]\ninclude=[\"/x\"]\n", "daemon.max_line_bytes");
        bad("sources = []\n", "sources");
        bad("[[sources]]\ninclude=[\"/x\"]\n[[stages]]\ntype=\"parse\"\n[[stages]]\ntype=\"repair\"\nmode=\"plan\"\norphans=\"maybe\"\n", "stages[1].orphans");
        bad("[[sources]]\ninclude=[\"/x\"]\n[[sinks]]\ntype=\"http\"\nurl=\"https://x/\"\n", "sinks[0]");
        bad("[[sources]]\ninclude=[\"/x\"]\n[[sinks]]\ntype=\"http\"\nurl=\"http://x/\"\nmax_bytes=\"lots\"\n", "max_bytes");
    }

    #[test]
    fn stages_say_what_they_need_of_the_shell() {
        let text = "[[sources]]\ninclude=[\"/x\"]\n[[stages]]\ntype=\"parse\"\n[[stages]]\ntype=\"compaction\"\n[[stages]]\ntype=\"orphans\"\ngrace=\"5s\"\nregistry=\"/r/tools.toml\"\n[[stages]]\ntype=\"validate\"\n[[stages]]\ntype=\"repair\"\nmode=\"plan\"\norphans=\"drop\"\n";
        let c = Config::parse(text, "t.toml").unwrap();
        for pure in [0, 1, 3] {
            assert_eq!(c.stages[pure].needs(), Needs::default(), "{:?}", c.stages[pure]);
        }
        let orphans = Needs { paused_calls: true, registry: Some("/r/tools.toml".into()), repair: None, quiet: Some(Duration::from_secs(5)) };
        assert_eq!(c.stages[2].needs(), orphans);
        let repair = RepairRequest { mode: RepairMode::Plan, orphans: OrphanPolicy::Drop };
        assert_eq!(c.stages[4].needs(), Needs { repair: Some(repair), ..Needs::default() });
        assert_eq!(c.needs(), Needs { repair: Some(repair), ..orphans });
        assert_eq!(c.quiet(), Duration::from_secs(5));
        // Repair's defaults; no `orphans` stage: nothing paused is read, the default grace is the
        // quiet time.
        let c = Config::parse("[[sources]]\ninclude=[\"/x\"]\n[[stages]]\ntype=\"parse\"\n[[stages]]\ntype=\"repair\"\n", "t.toml").unwrap();
        assert_eq!(c.needs(), Needs { repair: Some(RepairRequest { mode: RepairMode::Copy, orphans: OrphanPolicy::Answer }), ..Needs::default() });
        assert_eq!(c.quiet(), default_grace());
        // The quiet period reads no setting: it holds before validation.
        let c = Config::parse("[[sources]]\ninclude=[\"/x\"]\n[[stages]]\ntype=\"parse\"\n[[stages]]\ntype=\"orphans\"\ngrace=\"7s\"\n[[stages]]\ntype=\"repair\"\nmode=\"plan\"\norphans=\"maybe\"\n", "t.toml").unwrap();
        assert_eq!(c.quiet(), Duration::from_secs(7));
        assert_eq!((c.stages[1].quiet(), c.stages[2].quiet()), (Some(Duration::from_secs(7)), None));
        // The shipped defaults: the orphans stage's.
        let c = Config::parse("[[sources]]\ninclude=[\"/x\"]\n", "t.toml").unwrap();
        assert_eq!(c.needs(), Needs { paused_calls: true, quiet: Some(default_grace()), ..Needs::default() });
    }

    #[test]
    fn sinks_say_what_they_need_of_the_shell() {
        let text = "[[sources]]\ninclude=[\"/x\"]\n[[sinks]]\ntype=\"stdout\"\n[[sinks]]\ntype=\"file\"\npath=\"/o/out.jsonl\"\n[[sinks]]\ntype=\"repaired_files\"\ndir=\"/o/repaired\"\n[[sinks]]\ntype=\"prometheus\"\n[[sinks]]\ntype=\"http\"\nurl=\"http://x/\"\n";
        let c = Config::parse(text, "t.toml").unwrap();
        let needs: Vec<SinkNeeds> = c.sinks.iter().map(SinkConfig::needs).collect();
        assert_eq!(needs[1], SinkNeeds { dirs: vec!["/o".into()], appends_to: Some("/o/out.jsonl".into()), repairs_into: None });
        assert_eq!(needs[2], SinkNeeds { dirs: vec!["/o/repaired".into()], appends_to: None, repairs_into: Some("/o/repaired".into()) });
        for plain in [0, 3, 4] {
            assert_eq!(needs[plain], SinkNeeds::default(), "{:?}", c.sinks[plain]);
        }
        // A file named without a directory needs none made.
        let c = Config::parse("[[sources]]\ninclude=[\"/x\"]\n[[sinks]]\ntype=\"file\"\npath=\"out.jsonl\"\n", "t.toml").unwrap();
        assert_eq!(c.sinks[0].needs(), SinkNeeds { appends_to: Some("out.jsonl".into()), ..SinkNeeds::default() });
    }
}
