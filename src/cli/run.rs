//! `transcriptd run` and `transcriptd validate-config`.
//!
//! `run` loads and validates the configuration, then runs the daemon until SIGTERM or SIGINT;
//! SIGHUP reloads the configuration file (an invalid one is refused and the running one kept).

use super::args::{FilterArgs, OutputArgs};
use super::output::plural;
use super::{Exit, OutputFormat};
use crate::config::{Config, ConfigErrors, Resolved, SinkConfig};
use anyhow::Context;
use std::io::Write;
use std::path::PathBuf;
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
    /// With neither, ~/.claude/projects and ~/.codex/sessions are watched (once they exist).
    #[arg(long, value_name = "DIR", num_args = 1..)]
    pub watch: Vec<PathBuf>,
    /// Serve Prometheus metrics and /health on this address (with --watch or the defaults).
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<String>,
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
    /// The configuration file.
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
    let name = args.file.display().to_string();
    let mut out = args.out.stdout();
    let json = args.out.format() == OutputFormat::Json;
    let r = match Config::load_checked(&args.file, args.check_env) {
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
        let dirs = vec![home.join(".claude/projects"), home.join(".codex/sessions")];
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
    let mut config = Config::for_watch(&dirs, args.metrics_addr.as_deref(), args.state_dir.as_deref());
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
    let mut cfg = load(&args)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().context("starting the runtime")?;
    rt.block_on(async move {
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let mut hup = signal(SignalKind::hangup())?;
        loop {
            let timeout = cfg.config.daemon.shutdown_timeout;
            let stop = tokio_util::sync::CancellationToken::new();
            let daemon = tokio::spawn(crate::daemon::run(cfg.clone(), stop.clone().cancelled_owned()));
            tokio::pin!(daemon);
            // Wait for the daemon to fail, or for a signal.
            let reload = loop {
                tokio::select! {
                    r = &mut daemon => return r.context("daemon task")?.map(|_| Exit::Clean),
                    _ = term.recv() => break None,
                    _ = int.recv() => break None,
                    _ = hup.recv() => match load(&args) {
                        Ok(new) => break Some(new),
                        Err(e) => error!(error = %format!("{e:#}"), "configuration reload refused; keeping the running configuration"),
                    },
                }
            };
            info!(reload = reload.is_some(), "stopping the pipeline");
            stop.cancel();
            match tokio::time::timeout(timeout, &mut daemon).await {
                Ok(r) => r.context("daemon task")??,
                Err(_) => {
                    warn!(timeout = ?timeout, "shutdown timed out; exiting without the final checkpoint");
                    return Ok(Exit::Clean);
                }
            }
            match reload {
                Some(new) => {
                    info!("configuration reloaded");
                    cfg = new;
                    // Give the old metrics listener a moment to close before rebinding.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                None => return Ok(Exit::Clean),
            }
        }
    })
}
