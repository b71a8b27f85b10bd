//! `transcriptd run` and `transcriptd validate-config`.
//!
//! `run` loads and validates the configuration, then runs the daemon until SIGTERM or SIGINT;
//! SIGHUP reloads the configuration file. A configuration that is invalid, or valid but unable
//! to start (a metrics port in use, a state directory that cannot be created), is refused with
//! the error logged, and the running one kept. The metrics listener and `/health` live here,
//! across reloads: a reload that keeps the address keeps the listener.

use super::args::{FilterArgs, OutputArgs};
use super::output::plural;
use super::{Exit, OutputFormat};
use crate::config::{Config, ConfigErrors, Resolved, SinkConfig};
use crate::daemon::health::Health;
use crate::daemon::http::{MetricsServer, ServerLimits};
use crate::daemon::tap::Tap;
use anyhow::Context;
use metrics_exporter_prometheus::PrometheusHandle;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};
use tracing::{error, info, warn};

/// Arguments of `transcriptd run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Configuration file (see config/transcriptd.toml).
    #[arg(long, short = 'c', conflicts_with_all = ["watch", "severity", "errors", "kinds"])]
    pub config: Option<PathBuf>,
    /// Watch these directories for *.jsonl transcripts instead of using a configuration file.
    /// With neither, ~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions, ~/.qwen/projects, ~/.gemini/tmp and ~/.copilot/session-state are watched (once they exist).
    #[arg(long, value_name = "DIR", num_args = 1..)]
    pub watch: Vec<PathBuf>,
    /// Serve /metrics, /health, /stats and /tap on this address (with --watch or the defaults;
    /// default 127.0.0.1:9464, which `tap` and `top` reach without flags; when another process
    /// holds that default port the daemon runs without a listener and says so).
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<String>,
    /// No listener (with --watch or the defaults).
    #[arg(long, conflicts_with = "metrics_addr")]
    pub no_metrics: bool,
    /// Directory for checkpoints (with --watch or the defaults; default
    /// ~/.local/state/transcriptd).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Which findings the stdout sink writes (with --watch or the defaults; a configuration
    /// file says it with the stdout sink's `severity` and `kinds`).
    #[command(flatten)]
    pub filter: FilterArgs,
}

/// Arguments of `transcriptd validate-config`.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// The configuration file, or `-` for standard input.
    pub file: PathBuf,
    /// Also check what `run` needs of this machine: the state directory is writable or can be
    /// created, the metrics address can be bound, the sources' roots exist, the file and
    /// repaired_files sinks can write.
    #[arg(long)]
    pub check_env: bool,
    /// How results are written (-o json: one object per error, or one for a valid file).
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Checks a configuration file: exit 0 when valid; 2 otherwise, with every error, each naming
/// its line.
pub fn validate(args: ValidateArgs) -> anyhow::Result<Exit> {
    let stdin = args.file.as_os_str() == "-";
    let name = if stdin { "<stdin>".to_owned() } else { args.file.display().to_string() };
    let mut out = args.out.stdout();
    let json = args.out.format() == OutputFormat::Json;
    let checked = if stdin {
        // `-`: the text on standard input (relative paths in it are taken against the working
        // directory, as `run` would take them).
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut text).context("reading the configuration on stdin")?;
        Config::check_text_with(&text, &name, args.check_env)
    } else {
        Config::load_checked(&args.file, args.check_env)
    };
    let r = match checked {
        Ok(r) => r,
        Err(ConfigErrors(errors)) => {
            let paint = super::style::stderr();
            for e in &errors {
                let (file, line, message) = e.parts();
                if json {
                    serde_json::to_writer(&mut out, &serde_json::json!({ "file": file, "line": line, "severity": "error", "message": message }))?;
                    out.write_all(b"\n")?;
                } else if !args.out.quiet {
                    eprintln!("{}", paint.note(file, line.unwrap_or(0) as u64, "error", &message));
                }
            }
            out.flush()?;
            let n = errors.len();
            anyhow::bail!("{name}: {n} error{}", plural(n as u64));
        }
    };
    let counts = format!(
        "{} source{}, {} stage{}, {} sink{}",
        r.config.sources.len(),
        s(r.config.sources.len()),
        r.config.stages.len(),
        s(r.config.stages.len()),
        r.config.sinks.len(),
        s(r.config.sinks.len())
    );
    if json {
        let v = serde_json::json!({ "file": name, "ok": true, "sources": r.config.sources.len(), "stages": r.config.stages.len(), "sinks": r.config.sinks.len(), "environment_checked": args.check_env });
        serde_json::to_writer(&mut out, &v)?;
        out.write_all(b"\n")?;
    } else {
        let env = if args.check_env { "; the environment too" } else { "" };
        writeln!(out, "{name}: ok ({counts}){env}")?;
    }
    out.flush()?;
    Ok(Exit::Clean)
}

fn s(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn load(args: &Args) -> anyhow::Result<Resolved> {
    if let Some(path) = &args.config {
        return Ok(Config::load_checked(path, false)?);
    }
    let dirs = if args.watch.is_empty() {
        // The standard locations, also when they do not exist yet: a rescan picks them up
        // when the agent creates them.
        let home = std::env::var_os("HOME").map(PathBuf::from).context("HOME is not set; give --watch DIR or --config FILE")?;
        let dirs = super::standard_roots(&home);
        for d in dirs.iter().filter(|d| !d.is_dir()) {
            info!(dir = %d.display(), "does not exist yet; it is watched once it appears");
        }
        dirs
    } else {
        // A directory given that does not exist is watched once it appears, as the standard
        // ones are; but it is most likely a typo, so it is said.
        for d in args.watch.iter().filter(|d| !d.is_dir()) {
            let what = if d.exists() { "is not a directory" } else { "does not exist" };
            warn!(dir = %d.display(), "--watch {}: {what}: nothing is read from it until it is created", d.display());
        }
        args.watch.clone()
    };
    let addr = match (&args.metrics_addr, args.no_metrics) {
        (Some(a), _) => Some(a.as_str()),
        (None, true) => None,
        (None, false) => Some(DEFAULT_ADDR),
    };
    let mut config = Config::for_watch(&dirs, addr, args.state_dir.as_deref());
    let filter = args.filter.filter();
    for s in &mut config.sinks {
        if let SinkConfig::Stdout { severity, kinds } = s {
            (*severity, *kinds) = (filter.severity, filter.kinds.clone());
        }
    }
    Ok(config.validate("--watch")?)
}

/// Runs the daemon.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let cfg = load(&args)?;
    // Before anything is read: every counter counts from the first byte.
    let metrics = crate::telemetry::install();
    crate::daemon::fds::raise_limit();
    let health = Arc::new(Health::new(cfg.config.daemon.stall_timeout));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().context("starting the runtime")?;
    let result = rt.block_on(supervise(args, cfg, metrics, health, Tap::new()));
    // A task stuck in a blocking call must not keep the process alive after the shutdown
    // timeout.
    rt.shutdown_timeout(Duration::from_secs(1));
    result
}

/// Where the daemon serves on its built-in defaults and with `--watch`: loopback, as exporters
/// do, and where `tap` and `top` look.
const DEFAULT_ADDR: &str = "127.0.0.1:9464";

/// Whether the listener is the built-in default, which another process may hold: then the
/// daemon runs without it (an address asked for must be had).
fn optional_listener(args: &Args) -> bool {
    args.config.is_none() && args.metrics_addr.is_none()
}

/// A start that failed, with the configuration's lines behind it: the file checked against
/// this machine (as `validate-config --check-env` does), each problem of a path the daemon
/// writes (state directory, sinks) named `FILE:LINE: \`key\`: …`.
fn named(args: &Args, e: anyhow::Error) -> anyhow::Error {
    let Some(path) = &args.config else { return e };
    let Err(ConfigErrors(errors)) = Config::load_checked(path, true) else { return e };
    let lines: Vec<String> = errors
        .iter()
        .map(|c| c.parts())
        .filter(|(_, _, m)| m.starts_with("`daemon.state_dir`") || m.starts_with("`sinks"))
        .map(|(file, line, m)| format!("{file}:{}: {m}", line.unwrap_or(0)))
        .collect();
    if lines.is_empty() {
        e
    } else {
        e.context(lines.join("\n"))
    }
}

/// The metrics listener a configuration asks for, given the one running.
enum Listener {
    /// The running one (same address), or none.
    Keep,
    /// A new one, already bound.
    New(MetricsServer),
    /// A new one on the running one's port (another interface): bound once the running one
    /// is closed.
    Rebind(std::net::SocketAddr),
    /// None any more.
    Stop,
}

/// Binds the listener `cfg` asks for, unless the running one has its address.
fn listener(
    cfg: &Resolved,
    running: Option<&MetricsServer>,
    metrics: &PrometheusHandle,
    health: &Arc<Health>,
    tap: &Arc<Tap>,
    optional: bool,
) -> anyhow::Result<Listener> {
    let Some(m) = &cfg.metrics else { return Ok(if running.is_some() { Listener::Stop } else { Listener::Keep }) };
    // The token file is read here, so that one that cannot be read stops a start or a reload.
    let limits = limits(cfg)?;
    if running.is_some_and(|s| s.configured() == m.addr) {
        return Ok(Listener::Keep);
    }
    match MetricsServer::bind(m.addr, limits, health.clone(), metrics.clone(), tap.clone()) {
        Ok(server) => Ok(Listener::New(server)),
        // 127.0.0.1:9464 -> 0.0.0.0:9464: the running listener holds the port itself.
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && running.is_some_and(|s| s.local().port() == m.addr.port()) => Ok(Listener::Rebind(m.addr)),
        Err(e) if optional && running.is_none() && e.kind() == std::io::ErrorKind::AddrInUse => {
            warn!(addr = %m.addr, "{} is in use (another transcriptd?): running without /metrics, /health and /tap; give --metrics-addr ADDR or --no-metrics", m.addr);
            Ok(Listener::Keep)
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("listening on {}", m.addr))),
    }
}

/// The listener's limits: metrics connections and `/tap` clients at once as configured, within
/// the descriptor budget (taps first served from what is left to scrapes).
/// The bearer token is read from its file here.
fn limits(cfg: &Resolved) -> anyhow::Result<ServerLimits> {
    let m = cfg.metrics.as_ref();
    let (conns, taps) = m.map_or((1, 0), |m| (m.max_connections, m.tap_clients));
    let budget = crate::daemon::fds::budget(crate::daemon::fds::limit(), cfg.config.daemon.max_open_files, conns + taps).connections;
    let tap_clients = taps.min(budget / 2);
    let token = crate::cli::client::read_token(m.and_then(|m| m.token_file.as_deref())).context("the prometheus sink's token_file")?;
    Ok(ServerLimits {
        max_connections: budget.saturating_sub(tap_clients).max(1),
        request_timeout: m.map_or(Duration::from_secs(5), |m| m.request_timeout),
        tap_clients,
        tap_buffer: m.map_or(1, |m| m.tap_buffer),
        token: token.map(Into::into),
    })
}

/// A reload, checked: the configuration loads, validates and can start (state directory,
/// checkpoint, sinks, listener), all without touching the running daemon.
fn prepare(
    args: &Args,
    running: Option<&MetricsServer>,
    metrics: &PrometheusHandle,
    health: &Arc<Health>,
    tap: &Arc<Tap>,
) -> anyhow::Result<(Resolved, Listener)> {
    let new = load(args)?;
    crate::daemon::build::preflight(&new)?;
    let l = listener(&new, running, metrics, health, tap, optional_listener(args))?;
    Ok((new, l))
}

async fn supervise(args: Args, mut cfg: Resolved, metrics: PrometheusHandle, health: Arc<Health>, tap: Arc<Tap>) -> anyhow::Result<Exit> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    // The daemon first (state directory, its lock, checkpoints, sinks), then the listener: a
    // start that fails does not first log that it serves.
    let mut started = match crate::daemon::start(cfg.clone(), health.clone(), tap.clone()).await {
        Ok(s) => s,
        Err(e) => return Err(named(&args, e)),
    };
    let mut server = match listener(&cfg, None, &metrics, &health, &tap, optional_listener(&args))? {
        Listener::New(s) => Some(s),
        Listener::Keep | Listener::Stop | Listener::Rebind(_) => None,
    };
    loop {
        let stop = tokio_util::sync::CancellationToken::new();
        let daemon = tokio::spawn(started.run(stop.clone().cancelled_owned()));
        tokio::pin!(daemon);
        // Wait for the daemon to fail, or for a signal.
        let reload = loop {
            tokio::select! {
                r = &mut daemon => return r.context("daemon task")?.map(|_| Exit::Clean),
                _ = term.recv() => break None,
                _ = int.recv() => break None,
                _ = hup.recv() => match prepare(&args, server.as_ref(), &metrics, &health, &tap) {
                    Ok(new) => break Some(new),
                    Err(e) => error!(error = %format!("{e:#}"), "configuration reload refused; keeping the running configuration"),
                },
            }
        };
        info!(reload = reload.is_some(), "stopping the pipeline");
        stop.cancel();
        match tokio::time::timeout(cfg.config.daemon.shutdown_timeout, &mut daemon).await {
            Ok(r) => r.context("daemon task")??,
            Err(_) => {
                warn!(timeout = ?cfg.config.daemon.shutdown_timeout, "shutdown timed out; exiting without the final checkpoint");
                return Ok(Exit::Clean);
            }
        }
        let Some((new, new_listener)) = reload else { return Ok(Exit::Clean) };
        started = match crate::daemon::start(new.clone(), health.clone(), tap.clone()).await {
            Ok(s) => {
                match new_listener {
                    Listener::Keep => {}
                    Listener::New(s) => server = Some(s),
                    Listener::Stop => server = None,
                    Listener::Rebind(addr) => {
                        let old = server.take().map(|s| s.configured());
                        let bound = limits(&new).and_then(|l| Ok(MetricsServer::bind(addr, l, health.clone(), metrics.clone(), tap.clone())?));
                        server = match bound {
                            Ok(s) => Some(s),
                            Err(e) => {
                                error!(error = %format!("{e:#}"), %addr, "cannot listen on the new address; listening on the old one again");
                                old.and_then(|a| MetricsServer::bind(a, limits(&cfg).ok()?, health.clone(), metrics.clone(), tap.clone()).ok())
                            }
                        };
                    }
                }
                if let (Some(s), Some(_)) = (server.as_ref(), new.metrics.as_ref()) {
                    match limits(&new) {
                        Ok(l) => s.set_limits(l),
                        // Read when the reload was checked; gone since: the old token stays.
                        Err(e) => error!(error = %format!("{e:#}"), "keeping the listener's limits and token"),
                    }
                }
                health.set_stall_after(new.config.daemon.stall_timeout);
                cfg = new;
                info!("configuration reloaded");
                s
            }
            Err(e) => {
                error!(error = %format!("{e:#}"), "configuration reload refused: it cannot start; going on with the running configuration");
                crate::daemon::start(cfg.clone(), health.clone(), tap.clone()).await?
            }
        };
    }
}
