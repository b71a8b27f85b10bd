//! `transcriptd run` and `transcriptd validate-config`.
//!
//! `run` loads and validates the configuration, then runs the daemon until SIGTERM or SIGINT;
//! SIGHUP reloads the configuration file (an invalid one is refused and the running one kept).

use super::Exit;
use crate::config::{Config, Resolved};
use anyhow::Context;
use std::path::PathBuf;
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};
use tracing::{error, info, warn};

/// Arguments of `transcriptd run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Configuration file (see config/transcriptd.toml).
    #[arg(long, short = 'c', conflicts_with = "watch")]
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
}

/// Arguments of `transcriptd validate-config`.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// The configuration file.
    pub file: PathBuf,
}

/// Checks a configuration file: exit 0 when valid, 2 with the key and line otherwise.
pub fn validate(args: ValidateArgs) -> anyhow::Result<Exit> {
    let name = args.file.display().to_string();
    let r = Config::load(&args.file).and_then(|c| c.validate(&name))?;
    println!(
        "{name}: ok ({} source{}, {} stage{}, {} sink{})",
        r.config.sources.len(),
        s(r.config.sources.len()),
        r.config.stages.len(),
        s(r.config.stages.len()),
        r.config.sinks.len(),
        s(r.config.sinks.len())
    );
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
        let name = path.display().to_string();
        return Ok(Config::load(path).and_then(|c| c.validate(&name))?);
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
        args.watch.clone()
    };
    Ok(Config::for_watch(&dirs, args.metrics_addr.as_deref(), args.state_dir.as_deref()).validate("--watch")?)
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
