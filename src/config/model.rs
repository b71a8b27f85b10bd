//! The configuration as written: the model of the TOML file, its defaults and every field's
//! reference documentation (`config/transcriptd.toml` shows them all, commented), what each
//! stage and sink builds, and what each needs of the shell.

use super::setting::{ByteSize, Parsed};
use super::{default_user_state_dir, tools};
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
    /// What a transcript lost of itself: a run of wiped conversation lines (`content_wiped`),
    /// the file deleted or rewritten under the daemon (`transcript_deleted`,
    /// `transcript_rewritten`).
    Loss {
        /// The snapshot store that holds what was lost: the `snapshot` sink's directory, set
        /// when the configuration is resolved (not written in the file); the findings then say
        /// how to restore from it.
        #[serde(skip)]
        restore_from: Option<PathBuf>,
    },
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
            StageConfig::Loss { restore_from } => {
                Some(Box::new(stages::loss::Loss::new(quiet).restoring_from(restore_from.as_ref().map(|p| p.display().to_string()))))
            }
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
            StageConfig::Parse | StageConfig::Compaction | StageConfig::Validate | StageConfig::Loss { .. } => Needs::default(),
            StageConfig::Orphans { registry, .. } => Needs { paused_calls: true, registry: registry.clone(), quiet: self.quiet(), ..Needs::default() },
            StageConfig::Repair { mode, orphans, .. } => Needs { repair: Some(RepairRequest { mode: *mode, orphans: *orphans.get() }), ..Needs::default() },
        }
    }

    /// The quiet period the stage asks for ([`Needs::quiet`]); this part of its needs reads no
    /// setting, so it holds of a configuration not validated yet.
    pub fn quiet(&self) -> Option<Duration> {
        match self {
            StageConfig::Orphans { grace, .. } => Some(*grace),
            StageConfig::Parse | StageConfig::Compaction | StageConfig::Validate | StageConfig::Loss { .. } | StageConfig::Repair { .. } => None,
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
    /// Every byte read from the transcripts, kept in a snapshot store (docs/commands/restore.md) that
    /// a deletion, a truncation or a rewrite of a transcript cannot reach: `transcriptd
    /// restore` puts a session back from it. Synced before the checkpoint that covers it.
    Snapshot {
        /// The store's directory.
        dir: PathBuf,
        /// Streams not written for longer are removed ("90d"; none by default).
        #[serde(default, with = "humantime_serde")]
        max_age: Option<Duration>,
        /// The store's size at most ("20GiB"; no limit by default): the streams written last
        /// longest ago are removed first, never one written in the last ten minutes.
        #[serde(default)]
        max_bytes: Option<Parsed<ByteSize>>,
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
            SinkConfig::Snapshot { dir, max_age, max_bytes } => {
                let max_bytes = max_bytes.as_ref().map(|m| m.read().map(|b| b.bytes() as u64).map_err(|m| anyhow::anyhow!("max_bytes: {m}"))).transpose()?;
                let retention = crate::snapshots::Retention { max_age: *max_age, max_bytes, every: crate::sinks::snapshot::RETENTION_EVERY };
                Some(Box::new(
                    crate::sinks::snapshot::SnapshotSink::open(dir, retention).with_context(|| format!("opening the snapshot store {}", dir.display()))?,
                ))
            }
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
    pub(super) fn http_problem(&self) -> Option<String> {
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

impl SinkConfig {
    /// The `type` it is written with.
    pub fn type_name(&self) -> &'static str {
        match self {
            SinkConfig::Stdout { .. } => "stdout",
            SinkConfig::File { .. } => "file",
            SinkConfig::RepairedFiles { .. } => "repaired_files",
            SinkConfig::Prometheus { .. } => "prometheus",
            SinkConfig::Http { .. } => "http",
            SinkConfig::Snapshot { .. } => "snapshot",
        }
    }

    /// A stdout sink that passes every record.
    pub fn stdout() -> Self {
        SinkConfig::Stdout { severity: None, kinds: Vec::new() }
    }

    /// What the sink needs of the shell that runs it (see [`SinkNeeds`]).
    pub fn needs(&self) -> SinkNeeds {
        match self {
            SinkConfig::File { path, .. } => SinkNeeds {
                dirs: path.parent().filter(|d| !d.as_os_str().is_empty()).map(Path::to_path_buf).into_iter().collect(),
                appends_to: Some(path.clone()),
                ..SinkNeeds::default()
            },
            SinkConfig::RepairedFiles { dir } => SinkNeeds { repairs_into: Some(dir.clone()), dirs: vec![dir.clone()], ..SinkNeeds::default() },
            SinkConfig::Snapshot { dir, .. } => SinkNeeds { dirs: vec![dir.clone()], bytes: true, ..SinkNeeds::default() },
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
    /// It is handed every byte read from the files ([`crate::sinks::Batch::bytes`]).
    pub bytes: bool,
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
pub(super) fn default_grace() -> Duration {
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
pub(super) fn default_stages() -> Vec<StageConfig> {
    vec![
        StageConfig::Parse,
        StageConfig::Compaction,
        StageConfig::Orphans { grace: default_grace(), registry: None },
        StageConfig::Validate,
        StageConfig::Loss { restore_from: None },
    ]
}
pub(super) fn default_sinks() -> Vec<SinkConfig> {
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

impl Config {
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
