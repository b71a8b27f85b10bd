//! `transcriptd hooks install|uninstall|run claude-code`: transcriptd in Claude Code's own
//! hooks, so that a session is kept even where no daemon runs.
//!
//! `install` merges three entries into Claude Code's `settings.json` (a backup of the file as
//! it was beside it): `PreCompact` and `SessionEnd` take a snapshot of the session into a
//! snapshot store (the format the daemon's `snapshot` sink writes, so `restore` reads both),
//! and `SessionStart` with source `resume` does too and checks the session, telling the user
//! (a `systemMessage`, never the model) what resume will drop. `uninstall` takes out exactly
//! what `install` put in. `run` is what Claude Code runs: it reads the hook's JSON on stdin and
//! always exits 0 (a hook must never stop the agent); what went wrong goes to stderr.
//!
//! Only Claude Code: Codex has no hooks that fire on compaction or session end (its `notify`
//! program is told of finished turns only), so the daemon is its guard.

use super::args::OutputArgs;
use super::{Exit, OutputFormat};
use anyhow::{bail, Context as _};
use serde_json::{json, Value};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

/// Arguments of `transcriptd hooks`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub command: HooksCommand,
}

/// The agents whose hooks transcriptd joins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HookAgent {
    /// Claude Code (`settings.json` hooks).
    ClaudeCode,
}

/// The `hooks` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum HooksCommand {
    /// Add transcriptd to the agent's hooks (PreCompact and SessionEnd snapshot the session;
    /// SessionStart on resume snapshots and checks it), keeping the user's own hooks and a
    /// backup of the settings file.
    #[command(after_long_help = super::help::HOOKS_INSTALL)]
    Install(InstallArgs),
    /// Take out what `hooks install` added, and nothing else.
    #[command(after_long_help = super::help::HOOKS_UNINSTALL)]
    Uninstall(UninstallArgs),
    /// What the agent runs at a hook: the hook's JSON on stdin. Always exits 0.
    #[command(after_long_help = super::help::HOOKS_EXEC)]
    Exec(RunArgs),
}

/// Arguments of `transcriptd hooks install`.
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// The agent.
    #[arg(value_enum)]
    pub agent: HookAgent,
    /// The settings file (default: $CLAUDE_CONFIG_DIR/settings.json, or ~/.claude/settings.json).
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// The snapshot store the hooks write (default: ~/.local/state/transcriptd/snapshots; a
    /// daemon's `snapshot` sink store works too: while the daemon holds it, it has the bytes).
    #[arg(long, value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// How results are written.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Arguments of `transcriptd hooks uninstall`.
#[derive(Debug, clap::Args)]
pub struct UninstallArgs {
    /// The agent.
    #[arg(value_enum)]
    pub agent: HookAgent,
    /// The settings file (default: as for install).
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// How results are written.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Arguments of `transcriptd hooks exec`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The agent.
    #[arg(value_enum)]
    pub agent: HookAgent,
    /// The snapshot store to write.
    #[arg(long, value_name = "DIR")]
    pub store: PathBuf,
    /// How results are written.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// The words in every command transcriptd installs: how its own entries are told apart.
const MARK: &str = "hooks exec claude-code";
/// The events and the matcher each entry is installed with.
const EVENTS: &[(&str, Option<&str>)] = &[("PreCompact", None), ("SessionEnd", None), ("SessionStart", Some("resume"))];

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    match args.command {
        HooksCommand::Install(a) => install(a),
        HooksCommand::Uninstall(a) => uninstall(a),
        HooksCommand::Exec(a) => Ok(hook(a)),
    }
}

fn settings_path(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    if let Some(d) = std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("settings.json"));
    }
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).context("HOME is not set: name the settings file with --settings")?;
    Ok(PathBuf::from(home).join(".claude").join("settings.json"))
}

/// The settings as they are (an empty object when there is no file yet).
fn read_settings(p: &Path) -> anyhow::Result<(Value, Option<Vec<u8>>)> {
    match std::fs::read(p) {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) => Ok((json!({}), Some(b))),
        Ok(b) => {
            let v: Value = serde_json::from_slice(&b).with_context(|| format!("{}: not JSON (left as it is)", p.display()))?;
            if !v.is_object() {
                bail!("{}: not a JSON object (left as it is)", p.display());
            }
            Ok((v, Some(b)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((json!({}), None)),
        Err(e) => Err(e).with_context(|| format!("reading {}", p.display())),
    }
}

/// Writes the settings back atomically, the old bytes kept beside them first.
fn write_settings(p: &Path, v: &Value, old: Option<&[u8]>) -> anyhow::Result<Option<PathBuf>> {
    let backup = match old {
        Some(b) => {
            let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string().replace(':', "");
            let name = format!("{}.transcriptd-backup-{stamp}", p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
            let bp = p.with_file_name(name);
            crate::sinks::atomic::write_file(&bp, b, None).with_context(|| format!("backing up {}", p.display()))?;
            Some(bp)
        }
        None => None,
    };
    if let Some(d) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).with_context(|| format!("making {}", d.display()))?;
    }
    let keep = std::fs::metadata(p).ok().map(|m| crate::sinks::atomic::Keep::of(&m, false));
    let mut text = serde_json::to_vec_pretty(v)?;
    text.push(b'\n');
    crate::sinks::atomic::write_file(p, &text, keep).with_context(|| format!("writing {}", p.display()))?;
    Ok(backup)
}

/// Whether a hook entry (`{"type": "command", "command": ...}`) is one of ours.
fn ours(h: &Value) -> bool {
    h.get("command").and_then(Value::as_str).is_some_and(|c| c.contains(MARK))
}

/// Takes transcriptd's entries out of `settings` (empty groups and events with them); how many.
fn strip(settings: &mut Value) -> usize {
    let mut removed = 0;
    let Some(hooks) = settings.get_mut("hooks").and_then(Value::as_object_mut) else { return 0 };
    for (_, groups) in hooks.iter_mut() {
        let Some(groups) = groups.as_array_mut() else { continue };
        for g in groups.iter_mut() {
            if let Some(list) = g.get_mut("hooks").and_then(Value::as_array_mut) {
                let before = list.len();
                list.retain(|h| !ours(h));
                removed += before - list.len();
            }
        }
        groups.retain(|g| g.get("hooks").and_then(Value::as_array).is_none_or(|l| !l.is_empty()));
    }
    hooks.retain(|_, g| g.as_array().is_none_or(|a| !a.is_empty()));
    if hooks.is_empty() {
        settings.as_object_mut().expect("an object").remove("hooks");
    }
    removed
}

/// The shell command Claude Code runs for the hooks.
fn command(store: &Path) -> anyhow::Result<String> {
    let exe = std::env::current_exe().context("finding transcriptd's own path")?;
    let w = |p: &Path| crate::sessions::project::shell_word(&p.display().to_string());
    Ok(format!("{} {MARK} --store {}", w(&exe), w(store)))
}

fn install(args: InstallArgs) -> anyhow::Result<Exit> {
    let HookAgent::ClaudeCode = args.agent;
    let p = settings_path(args.settings.as_deref())?;
    let store = match &args.store {
        Some(s) => std::path::absolute(s).unwrap_or_else(|_| s.clone()),
        None => crate::config::default_user_state_dir().join("snapshots"),
    };
    let (mut v, old) = read_settings(&p)?;
    if v.get("hooks").is_some_and(|h| !h.is_object()) {
        bail!("{}: `hooks` is not an object (left as it is)", p.display());
    }
    strip(&mut v);
    let cmd = command(&store)?;
    let hooks = v.as_object_mut().expect("an object").entry("hooks").or_insert_with(|| json!({}));
    for (event, matcher) in EVENTS {
        let groups = hooks.as_object_mut().expect("checked").entry(*event).or_insert_with(|| json!([]));
        let Some(groups) = groups.as_array_mut() else { bail!("{}: hooks.{event} is not a list (left as it is)", p.display()) };
        let mut g = json!({"hooks": [{"type": "command", "command": cmd, "timeout": 60}]});
        if let Some(m) = matcher {
            g["matcher"] = json!(m);
        }
        groups.push(g);
    }
    let backup = write_settings(&p, &v, old.as_deref())?;
    say(
        &args.out,
        &json!({"settings": p.display().to_string(), "installed": EVENTS.iter().map(|e| e.0).collect::<Vec<_>>(), "store": store.display().to_string(), "backup": backup.as_ref().map(|b| b.display().to_string())}),
        || {
            let mut s = format!(
                "{}: transcriptd added to Claude Code's PreCompact, SessionEnd and SessionStart (resume) hooks; snapshots go to {}",
                p.display(),
                store.display()
            );
            if let Some(b) = &backup {
                s.push_str(&format!("\n  the settings as they were: {}", b.display()));
            }
            s
        },
    )?;
    Ok(Exit::Clean)
}

fn uninstall(args: UninstallArgs) -> anyhow::Result<Exit> {
    let HookAgent::ClaudeCode = args.agent;
    let p = settings_path(args.settings.as_deref())?;
    let (mut v, old) = read_settings(&p)?;
    let removed = strip(&mut v);
    let backup = if removed > 0 { write_settings(&p, &v, old.as_deref())? } else { None };
    say(&args.out, &json!({"settings": p.display().to_string(), "removed": removed, "backup": backup.as_ref().map(|b| b.display().to_string())}), || {
        match removed {
            0 => format!("{}: holds no transcriptd hook: nothing to do", p.display()),
            n => format!("{}: {n} transcriptd hook{} taken out", p.display(), if n == 1 { "" } else { "s" }),
        }
    })?;
    Ok(Exit::Clean)
}

fn say(out: &OutputArgs, v: &Value, text: impl FnOnce() -> String) -> anyhow::Result<()> {
    let mut o = out.stdout();
    match out.format() {
        OutputFormat::Json => {
            serde_json::to_writer(&mut o, v)?;
            o.write_all(b"\n")?;
        }
        OutputFormat::Text => writeln!(o, "{}", text())?,
    }
    o.flush()?;
    Ok(())
}

/// Runs a hook: never fails the agent.
fn hook(args: RunArgs) -> Exit {
    let HookAgent::ClaudeCode = args.agent;
    if let Err(e) = hook_inner(&args) {
        eprintln!("transcriptd hooks exec: {e:#}");
    }
    Exit::Clean
}

fn hook_inner(args: &RunArgs) -> anyhow::Result<()> {
    let mut input = Vec::new();
    std::io::stdin().take(1 << 20).read_to_end(&mut input)?;
    let v: Value = serde_json::from_slice(&input).context("the hook's input is not JSON")?;
    let event = v.get("hook_event_name").and_then(Value::as_str).unwrap_or("");
    let Some(transcript) = v.get("transcript_path").and_then(Value::as_str).filter(|t| !t.is_empty()).map(PathBuf::from) else { return Ok(()) };
    let kept = snapshot(&args.store, &transcript)?;
    tracing::debug!(event, file = %transcript.display(), kept, "snapshot taken");
    if event == "SessionStart" && v.get("source").and_then(Value::as_str) == Some("resume") {
        if let Some(m) = resume_warning(&transcript)? {
            let mut o = args.out.stdout();
            serde_json::to_writer(&mut o, &json!({"systemMessage": m}))?;
            o.write_all(b"\n")?;
            o.flush()?;
        }
    }
    Ok(())
}

/// Keeps the file's bytes in the store (only what it does not hold yet is written); the bytes
/// new to it. A store a daemon holds is left to the daemon: it has them.
fn snapshot(store: &Path, transcript: &Path) -> anyhow::Result<u64> {
    let retention = crate::snapshots::Retention { max_age: None, max_bytes: None, every: std::time::Duration::MAX };
    let mut w = match crate::snapshots::Writer::open(store, retention) {
        Ok(w) => w,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(0),
        Err(e) => return Err(e).with_context(|| format!("opening the snapshot store {}", store.display())),
    };
    let (f, meta) =
        crate::sources::regular::open(transcript, crate::sources::regular::Follow::No).with_context(|| format!("opening {}", transcript.display()))?;
    use std::os::unix::fs::{FileExt as _, MetadataExt as _};
    // In pieces: a long session costs a piece of memory, not its size (what the store holds
    // already is compared piece by piece and skipped).
    let mut buf = vec![0; 8 << 20];
    let mut at = 0u64;
    loop {
        let n = match f.read_at(&mut buf, at) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).with_context(|| format!("reading {}", transcript.display())),
        };
        w.append(transcript, (meta.dev(), meta.ino()), at, &buf[..n])?;
        at += n as u64;
    }
    w.sync()?;
    Ok(w.stats().kept)
}

/// What resume will lose of the session, when it loses something: its error findings, said
/// for the user.
fn resume_warning(transcript: &Path) -> anyhow::Result<Option<String>> {
    let bytes = std::fs::read(transcript).with_context(|| format!("reading {}", transcript.display()))?;
    // The lenient reading never stops.
    let (findings, _, _) = crate::transcript::check::check_bytes(&bytes, crate::transcript::checker::Options::default()).unwrap_or_default();
    let errors: Vec<_> = findings.iter().filter(|f| f.severity == crate::transcript::Severity::Error).collect();
    if errors.is_empty() {
        return Ok(None);
    }
    let mut kinds: Vec<&str> = errors.iter().map(|f| f.kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let first = errors[0];
    Ok(Some(format!(
        "transcriptd: this session has {} error finding{} ({}); the first, line {}: {}. Quit, then `transcriptd doctor --fix` in this directory repairs it.",
        errors.len(),
        if errors.len() == 1 { "" } else { "s" },
        kinds.join(", "),
        first.line,
        first.message
    )))
}
