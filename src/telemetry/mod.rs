//! Telemetry in one place: metric names, their help texts, and the Prometheus recorder.
//!
//! The core never touches metrics; the daemon's `prometheus` sink counts what the core produced
//! under the names here, and [`install`] sets up the recorder that serves them. Names carry the `transcriptd_` prefix; no label holds a file or session
//! (cardinality stays bounded by formats, kinds, models and tools).

use metrics::{describe_counter, describe_gauge, Unit};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

/// Lines read, by format.
pub const LINES_READ: &str = "transcriptd_lines_read_total";
/// Bytes read.
pub const BYTES_READ: &str = "transcriptd_bytes_read_total";
/// Findings, by kind and severity.
pub const FINDINGS: &str = "transcriptd_findings_total";
/// Tool calls, by format.
pub const TOOL_CALLS: &str = "transcriptd_tool_calls_total";
/// Tool results, by format.
pub const TOOL_RESULTS: &str = "transcriptd_tool_results_total";
/// Calls waiting for their result now.
pub const PENDING_TOOL_CALLS: &str = "transcriptd_pending_tool_calls";
/// Orphan calls (pending past the grace period), by side effect.
pub const ORPHAN_TOOL_CALLS: &str = "transcriptd_orphan_tool_calls_total";
/// Compactions, by format.
pub const COMPACTIONS: &str = "transcriptd_compactions_total";
/// Repair edits, by action.
pub const REPAIRS: &str = "transcriptd_repairs_total";
/// Tokens, by model and type (input, output, cache_read, cache_creation).
pub const TOKENS: &str = "transcriptd_tokens_total";
/// What the tokens read cost, by model, in millionths of a US dollar.
pub const COST: &str = "transcriptd_cost_microdollars_total";
/// Files being watched.
pub const FILES_WATCHED: &str = "transcriptd_files_watched";
/// Files open now.
pub const OPEN_FILES: &str = "transcriptd_open_files";
/// Checkpoint writes, by result (ok, error).
pub const CHECKPOINT_WRITES: &str = "transcriptd_checkpoint_writes_total";
/// Bytes written to watched files but not read yet.
pub const SOURCE_LAG_BYTES: &str = "transcriptd_source_lag_bytes";
/// Age of the oldest unread write.
pub const OLDEST_UNREAD_SECONDS: &str = "transcriptd_oldest_unread_seconds";
/// Events of event sources, by type.
pub const EVENTS: &str = "transcriptd_events_total";
/// Sinks paused (1) because their output takes no records (a full disk), by sink type.
pub const SINK_PAUSED: &str = "transcriptd_sink_paused";
/// Build information (value 1; labels version).
pub const BUILD_INFO: &str = "transcriptd_build_info";
/// Transcript bytes the snapshot store took.
pub const SNAPSHOT_BYTES: &str = "transcriptd_snapshot_bytes_total";
/// Bytes of chunks the snapshot store already held (stored once).
pub const SNAPSHOT_DEDUPLICATED: &str = "transcriptd_snapshot_deduplicated_bytes_total";
/// The snapshot store's size on disk.
pub const SNAPSHOT_STORE_BYTES: &str = "transcriptd_snapshot_store_bytes";
/// Streams (incarnations of transcripts) in the snapshot store.
pub const SNAPSHOT_STREAMS: &str = "transcriptd_snapshot_streams";
/// Streams the retention policy removed, by reason (`age`, `size`).
pub const SNAPSHOT_RETIRED: &str = "transcriptd_snapshot_retired_streams_total";

/// Every metric name the exporter serves (the Grafana dashboard test checks against it).
pub const ALL: &[&str] = &[
    LINES_READ,
    BYTES_READ,
    FINDINGS,
    TOOL_CALLS,
    TOOL_RESULTS,
    PENDING_TOOL_CALLS,
    ORPHAN_TOOL_CALLS,
    COMPACTIONS,
    REPAIRS,
    TOKENS,
    COST,
    FILES_WATCHED,
    OPEN_FILES,
    CHECKPOINT_WRITES,
    SOURCE_LAG_BYTES,
    OLDEST_UNREAD_SECONDS,
    EVENTS,
    SINK_PAUSED,
    BUILD_INFO,
    SNAPSHOT_BYTES,
    SNAPSHOT_DEDUPLICATED,
    SNAPSHOT_STORE_BYTES,
    SNAPSHOT_STREAMS,
    SNAPSHOT_RETIRED,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the Prometheus recorder (once per process) and describes every metric. Returns the
/// handle that renders the exposition text.
pub fn install() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let handle = PrometheusBuilder::new().install_recorder().expect("no other metrics recorder is installed");
            describe();
            metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
            metrics::gauge!(SINK_PAUSED, "sink" => "file").set(0.0);
            handle
        })
        .clone()
}

fn describe() {
    describe_counter!(LINES_READ, Unit::Count, "Transcript lines read, by format.");
    describe_counter!(BYTES_READ, Unit::Bytes, "Bytes read from watched files.");
    describe_counter!(FINDINGS, Unit::Count, "Findings reported, by kind and severity.");
    describe_counter!(TOOL_CALLS, Unit::Count, "Tool calls seen, by format.");
    describe_counter!(TOOL_RESULTS, Unit::Count, "Tool results seen, by format.");
    describe_gauge!(PENDING_TOOL_CALLS, Unit::Count, "Tool calls waiting for their result.");
    describe_counter!(ORPHAN_TOOL_CALLS, Unit::Count, "Calls still without a result after the grace period, by side effect of the tool.");
    describe_counter!(COMPACTIONS, Unit::Count, "Compactions seen, by format.");
    describe_counter!(REPAIRS, Unit::Count, "Repair edits written, by action.");
    describe_counter!(TOKENS, Unit::Count, "Tokens reported by the agents, by model and type.");
    describe_counter!(
        COST,
        Unit::Count,
        "What the tokens read cost, by model, in millionths of a US dollar (LiteLLM's prices built into the binary; a model they do not price is not counted)."
    );
    describe_gauge!(FILES_WATCHED, Unit::Count, "Files being watched.");
    describe_gauge!(OPEN_FILES, Unit::Count, "Watched files open now.");
    describe_counter!(CHECKPOINT_WRITES, Unit::Count, "Checkpoint writes, by result.");
    describe_gauge!(SOURCE_LAG_BYTES, Unit::Bytes, "Bytes written to watched files and not read yet.");
    describe_gauge!(OLDEST_UNREAD_SECONDS, Unit::Seconds, "Age of the oldest write not read yet.");
    describe_counter!(EVENTS, Unit::Count, "Events read from event sources, by type.");
    describe_gauge!(
        SINK_PAUSED,
        Unit::Count,
        "1 while a sink waits for its output to take records (a full disk; reading pauses, nothing is lost), by sink type."
    );
    describe_gauge!(BUILD_INFO, "Build information; the value is always 1.");
    describe_counter!(SNAPSHOT_BYTES, Unit::Bytes, "Transcript bytes the snapshot store took.");
    describe_counter!(SNAPSHOT_DEDUPLICATED, Unit::Bytes, "Bytes of chunks the snapshot store already held, stored once (copies and forks).");
    describe_gauge!(SNAPSHOT_STORE_BYTES, Unit::Bytes, "The snapshot store's size on disk (measured hourly, and what was written since).");
    describe_gauge!(SNAPSHOT_STREAMS, Unit::Count, "Streams in the snapshot store (each incarnation of each transcript).");
    describe_counter!(SNAPSHOT_RETIRED, Unit::Count, "Streams the snapshot store's retention policy removed, by reason (age, size).");
}

/// Sets up logging on stderr: human-readable or JSON lines, filtered by `TRANSCRIPTD_LOG`, with
/// ANSI colour codes only when `ansi` (the caller decides: a terminal, and no `NO_COLOR`). In
/// text, each field's value is written through `escape` (the CLI's: controls as visible
/// escapes — a path or transcript text in a log line cannot drive the terminal, nor start a
/// line of its own); JSON escapes them itself.
pub fn init_tracing(json: bool, ansi: bool, escape: fn(&str) -> std::borrow::Cow<'_, str>) {
    use tracing_subscriber::field::MakeExt;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("TRANSCRIPTD_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    // A log that cannot be written is dropped: with internal error logging on, the subscriber
    // reports the failure with `eprintln!`, which panics when stderr is a closed pipe (a
    // daemon whose log reader went away exited 101 at its next log line).
    let b = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).log_internal_errors(false);
    let _ = if json {
        b.json().try_init()
    } else {
        let fields = tracing_subscriber::fmt::format::debug_fn(move |w, field, value| {
            let value = format!("{value:?}");
            match field.name() {
                "message" => write!(w, "{}", escape(&value)),
                name => write!(w, "{name}={}", escape(&value)),
            }
        })
        .delimited(" ");
        b.fmt_fields(fields).try_init()
    };
}
