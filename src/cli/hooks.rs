//! `transcriptd hooks install|uninstall|exec AGENT`: transcriptd in the agent's own hooks, so
//! that a session is kept even where no daemon runs.
//!
//! For the agents whose hooks are command entries in a JSON settings file (Claude Code, Gemini
//! CLI, Qwen Code, Copilot CLI), `install` merges transcriptd's entries into that file (a backup
//! of the file as it was beside it): before a compaction, at a session's end (and, where the
//! agent fires no end in its headless mode, at each turn's end), the session's bytes go into a
//! snapshot store (the format the daemon's `snapshot` sink writes, so `restore` reads both),
//! and when a session is resumed they go in too and the session is checked, telling the user
//! (a `systemMessage`, never the model) what resume will drop. For Pi, whose hooks are
//! extensions (TypeScript modules it loads from its `extensions/` directory), `install` writes
//! one that runs the same command at the same events. `uninstall` takes out exactly what
//! `install` put in. `exec` is what the agent runs: it reads the hook's JSON on stdin and
//! always exits 0 (a hook must never stop the agent); what went wrong goes to stderr.
//!
//! Codex 0.171.0 has hooks too (`hooks.json`, behind `[features] hooks`), but runs a new hook
//! only once the user has reviewed and trusted it in its own interface: transcriptd does not
//! install what it would have to trust for the user (docs/commands/hooks.md).

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
    /// Gemini CLI (`~/.gemini/settings.json` hooks).
    GeminiCli,
    /// Qwen Code (`~/.qwen/settings.json` hooks).
    QwenCode,
    /// GitHub Copilot CLI (`~/.copilot/settings.json` hooks).
    Copilot,
    /// Pi (an extension in `~/.pi/agent/extensions/`).
    Pi,
}

impl HookAgent {
    /// Its name on the command line.
    fn name(self) -> &'static str {
        match self {
            HookAgent::ClaudeCode => "claude-code",
            HookAgent::GeminiCli => "gemini-cli",
            HookAgent::QwenCode => "qwen-code",
            HookAgent::Copilot => "copilot",
            HookAgent::Pi => "pi",
        }
    }

    /// Its name for people.
    fn title(self) -> &'static str {
        match self {
            HookAgent::ClaudeCode => "Claude Code",
            HookAgent::GeminiCli => "Gemini CLI",
            HookAgent::QwenCode => "Qwen Code",
            HookAgent::Copilot => "Copilot CLI",
            HookAgent::Pi => "Pi",
        }
    }

    /// The events transcriptd's entries are installed at, each with its matcher (learnt from
    /// each agent's own code, docs/commands/hooks.md): before a compaction, at the session's
    /// end, at a turn's end where the headless mode fires no session end, and on resume.
    fn events(self) -> &'static [(&'static str, Option<&'static str>)] {
        match self {
            HookAgent::ClaudeCode => &[("PreCompact", None), ("SessionEnd", None), ("SessionStart", Some("resume"))],
            // `matcher` is compared with the trigger of a lifecycle event (`matchesTrigger`).
            HookAgent::GeminiCli => &[("PreCompress", None), ("SessionEnd", None), ("SessionStart", Some("resume"))],
            // `matcher` is compared with the source (`getHookMatcherTarget`). Headless (`-p`),
            // Qwen Code 0.24.4 fires no SessionEnd: Stop ends each turn.
            HookAgent::QwenCode => &[("PreCompact", None), ("Stop", None), ("SessionEnd", None), ("SessionStart", Some("resume"))],
            // What Copilot CLI compares a matcher with at a session start was not learnt (its
            // hooks are in its native runtime): the source is looked at by `exec`.
            HookAgent::Copilot => &[("PreCompact", None), ("Stop", None), ("SessionEnd", None), ("SessionStart", None)],
            // The extension's own events (session_before_compact, agent_end,
            // session_shutdown, session_start of a session that has bytes), named as above.
            HookAgent::Pi => &[("PreCompact", None), ("Stop", None), ("SessionEnd", None), ("SessionStart", Some("resume"))],
        }
    }

    /// The `timeout` of an entry: Gemini CLI reads milliseconds, the others seconds.
    fn timeout(self) -> u64 {
        match self {
            HookAgent::GeminiCli => 60_000,
            _ => 60,
        }
    }

    /// The settings file (or, for Pi, the extension file) by default.
    fn default_settings(self) -> anyhow::Result<PathBuf> {
        let env = |k: &str| std::env::var_os(k).filter(|d| !d.is_empty()).map(PathBuf::from);
        let home = || env("HOME").context("HOME is not set: name the settings file with --settings");
        Ok(match self {
            HookAgent::ClaudeCode => env("CLAUDE_CONFIG_DIR").map_or_else(|| home().map(|h| h.join(".claude")), Ok)?.join("settings.json"),
            HookAgent::GeminiCli => env("GEMINI_CLI_HOME").map_or_else(home, Ok)?.join(".gemini").join("settings.json"),
            HookAgent::QwenCode => env("QWEN_HOME").map_or_else(|| home().map(|h| h.join(".qwen")), Ok)?.join("settings.json"),
            HookAgent::Copilot => env("COPILOT_HOME").map_or_else(|| home().map(|h| h.join(".copilot")), Ok)?.join("settings.json"),
            HookAgent::Pi => {
                env("PI_CODING_AGENT_DIR").map_or_else(|| home().map(|h| h.join(".pi").join("agent")), Ok)?.join("extensions").join("transcriptd.ts")
            }
        })
    }
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
    /// The settings file (default: the agent's own: ~/.claude/settings.json,
    /// ~/.gemini/settings.json, ~/.qwen/settings.json, ~/.copilot/settings.json; for Pi, the
    /// extension file ~/.pi/agent/extensions/transcriptd.ts).
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
    /// Wait (at most 30 s) until the session's file is whole (Copilot CLI's: its last record
    /// is `session.shutdown`; Qwen Code's: unchanged for 2 s), then keep it: what `exec`
    /// starts, detached, after a hook the agent runs before it has written the turn out.
    #[arg(long, value_name = "FILE", hide = true)]
    pub settle: Option<PathBuf>,
    /// How results are written.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// The words in every command transcriptd installs for `agent`: how its own entries are told
/// apart.
fn mark(agent: HookAgent) -> String {
    format!("hooks exec {}", agent.name())
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    match args.command {
        HooksCommand::Install(a) => install(a),
        HooksCommand::Uninstall(a) => uninstall(a),
        HooksCommand::Exec(a) => Ok(hook(a)),
    }
}

fn settings_path(agent: HookAgent, given: Option<&Path>) -> anyhow::Result<PathBuf> {
    match given {
        Some(p) => Ok(p.to_path_buf()),
        None => agent.default_settings(),
    }
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

/// Keeps `old`, the bytes of `p`, beside it (`NAME.transcriptd-backup-<time>`).
fn write_backup(p: &Path, old: &[u8]) -> anyhow::Result<Option<PathBuf>> {
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string().replace(':', "");
    let name = format!("{}.transcriptd-backup-{stamp}", p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
    let bp = p.with_file_name(name);
    crate::sinks::atomic::write_file(&bp, old, None).with_context(|| format!("backing up {}", p.display()))?;
    Ok(Some(bp))
}

/// Writes the settings back atomically, the old bytes kept beside them first.
fn write_settings(p: &Path, v: &Value, old: Option<&[u8]>) -> anyhow::Result<Option<PathBuf>> {
    let backup = match old {
        Some(b) => write_backup(p, b)?,
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
fn ours(h: &Value, mark: &str) -> bool {
    h.get("command").and_then(Value::as_str).is_some_and(|c| c.contains(mark))
}

/// Takes transcriptd's entries out of `settings` (empty groups and events with them); how many.
fn strip(settings: &mut Value, mark: &str) -> usize {
    let mut removed = 0;
    let Some(hooks) = settings.get_mut("hooks").and_then(Value::as_object_mut) else { return 0 };
    for (_, groups) in hooks.iter_mut() {
        let Some(groups) = groups.as_array_mut() else { continue };
        for g in groups.iter_mut() {
            if let Some(list) = g.get_mut("hooks").and_then(Value::as_array_mut) {
                let before = list.len();
                list.retain(|h| !ours(h, mark));
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

/// The command line the agent runs at the hooks: the binary's own path, then `args`.
fn command_words(agent: HookAgent, store: &Path) -> anyhow::Result<Vec<String>> {
    let exe = std::env::current_exe().context("finding transcriptd's own path")?;
    Ok(vec![exe.display().to_string(), "hooks".into(), "exec".into(), agent.name().into(), "--store".into(), store.display().to_string()])
}

/// The shell command the agent runs for the hooks.
fn command(agent: HookAgent, store: &Path) -> anyhow::Result<String> {
    Ok(command_words(agent, store)?.iter().map(|w| crate::sessions::project::shell_word(w)).collect::<Vec<_>>().join(" "))
}

fn install(args: InstallArgs) -> anyhow::Result<Exit> {
    let agent = args.agent;
    let p = settings_path(agent, args.settings.as_deref())?;
    let store = match &args.store {
        Some(s) => std::path::absolute(s).unwrap_or_else(|_| s.clone()),
        None => crate::config::default_user_state_dir().join("snapshots"),
    };
    let events: Vec<&str> = agent.events().iter().map(|e| e.0).collect();
    let backup = if agent == HookAgent::Pi { install_extension(&p, &store)? } else { install_settings(agent, &p, &store)? };
    say(
        &args.out,
        &json!({"agent": agent.name(), "settings": p.display().to_string(), "installed": events, "store": store.display().to_string(), "backup": backup.as_ref().map(|b| b.display().to_string())}),
        || {
            let mut s = if agent == HookAgent::Pi {
                format!(
                    "{}: transcriptd's extension for Pi written (before compaction, at each turn's and the session's end, on resume); snapshots go to {}",
                    p.display(),
                    store.display()
                )
            } else {
                format!("{}: transcriptd added to {}'s {} hooks; snapshots go to {}", p.display(), agent.title(), events.join(", "), store.display())
            };
            if let Some(b) = &backup {
                s.push_str(&format!("\n  the file as it was: {}", b.display()));
            }
            s
        },
    )?;
    Ok(Exit::Clean)
}

/// Merges transcriptd's entries into a JSON settings file; the backup of the file as it was.
fn install_settings(agent: HookAgent, p: &Path, store: &Path) -> anyhow::Result<Option<PathBuf>> {
    let (mut v, old) = read_settings(p)?;
    if v.get("hooks").is_some_and(|h| !h.is_object()) {
        bail!("{}: `hooks` is not an object (left as it is)", p.display());
    }
    strip(&mut v, &mark(agent));
    let cmd = command(agent, store)?;
    let hooks = v.as_object_mut().expect("an object").entry("hooks").or_insert_with(|| json!({}));
    for (event, matcher) in agent.events() {
        let groups = hooks.as_object_mut().expect("checked").entry(*event).or_insert_with(|| json!([]));
        let Some(groups) = groups.as_array_mut() else { bail!("{}: hooks.{event} is not a list (left as it is)", p.display()) };
        let mut g = json!({"hooks": [{"type": "command", "command": cmd, "timeout": agent.timeout()}]});
        if let Some(m) = matcher {
            g["matcher"] = json!(m);
        }
        groups.push(g);
    }
    write_settings(p, &v, old.as_deref())
}

/// The first line of the extension transcriptd writes for Pi: how it is told apart.
const PI_MARK: &str = "// transcriptd: hooks exec pi";

/// The Pi extension: runs `hooks exec pi` with a Claude Code-shaped hook input at Pi's
/// compaction, turn end, shutdown and at the start of a session that already has bytes (a
/// resumed one), and shows the user what `exec` says then.
fn pi_extension(words: &[String]) -> String {
    let js = |s: &str| serde_json::to_string(s).expect("a string");
    let (bin, rest) = words.split_first().expect("the binary");
    let bin = js(bin);
    let args = format!("[{}]", rest.iter().map(|w| js(w)).collect::<Vec<_>>().join(", "));
    format!(
        r#"{PI_MARK}
// Written by `transcriptd hooks install pi`; `transcriptd hooks uninstall pi` removes it.
// It keeps the session in transcriptd's snapshot store before a compaction, at each turn's end
// and at shutdown, and checks a resumed session (docs/commands/hooks.md).
import {{ execFileSync }} from "node:child_process";
import {{ statSync }} from "node:fs";

const BIN = {bin};
const ARGS = {args};

function keep(event: string, file: string | undefined, source?: string): string | undefined {{
  if (!file) return undefined;
  try {{
    const out = execFileSync(BIN, ARGS, {{
      input: JSON.stringify({{ hook_event_name: event, transcript_path: file, source }}),
      encoding: "utf8",
      timeout: 60000,
      stdio: ["pipe", "pipe", "pipe"],
    }});
    const line = out.trim();
    return line ? JSON.parse(line).systemMessage : undefined;
  }} catch {{
    return undefined;
  }}
}}

function hasBytes(file: string | undefined): boolean {{
  try {{
    return !!file && statSync(file).size > 0;
  }} catch {{
    return false;
  }}
}}

export default function (pi: any) {{
  pi.on("session_start", async (event: any, ctx: any) => {{
    const file = ctx.sessionManager.getSessionFile();
    if (event.reason !== "resume" && !hasBytes(file)) return;
    const said = keep("SessionStart", file, "resume");
    if (said && ctx.hasUI) ctx.ui.notify(said, "warning");
  }});
  pi.on("session_before_compact", async (_event: any, ctx: any) => {{
    keep("PreCompact", ctx.sessionManager.getSessionFile());
  }});
  pi.on("agent_end", async (_event: any, ctx: any) => {{
    keep("Stop", ctx.sessionManager.getSessionFile());
  }});
  pi.on("session_shutdown", async (_event: any, ctx: any) => {{
    keep("SessionEnd", ctx.sessionManager.getSessionFile());
  }});
}}
"#
    )
}

/// Writes transcriptd's Pi extension (a file of its own: one that is not transcriptd's is
/// refused); the backup of the one it replaces, when that one differs.
fn install_extension(p: &Path, store: &Path) -> anyhow::Result<Option<PathBuf>> {
    let text = pi_extension(&command_words(HookAgent::Pi, store)?);
    let old = match std::fs::read(p) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("reading {}", p.display())),
    };
    if let Some(b) = &old {
        if !b.starts_with(PI_MARK.as_bytes()) {
            bail!("{}: not transcriptd's extension (left as it is): name another file with --settings", p.display());
        }
    }
    let backup = match &old {
        Some(b) if b != text.as_bytes() => write_backup(p, b)?,
        _ => None,
    };
    if let Some(d) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).with_context(|| format!("making {}", d.display()))?;
    }
    crate::sinks::atomic::write_file(p, text.as_bytes(), None).with_context(|| format!("writing {}", p.display()))?;
    Ok(backup)
}

fn uninstall(args: UninstallArgs) -> anyhow::Result<Exit> {
    let agent = args.agent;
    let p = settings_path(agent, args.settings.as_deref())?;
    let (removed, backup) = if agent == HookAgent::Pi {
        match std::fs::read(&p) {
            Ok(b) if b.starts_with(PI_MARK.as_bytes()) => {
                std::fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
                (agent.events().len(), None)
            }
            Ok(_) => bail!("{}: not transcriptd's extension (left as it is)", p.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (0, None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", p.display())),
        }
    } else {
        let (mut v, old) = read_settings(&p)?;
        let removed = strip(&mut v, &mark(agent));
        (removed, if removed > 0 { write_settings(&p, &v, old.as_deref())? } else { None })
    };
    say(
        &args.out,
        &json!({"agent": agent.name(), "settings": p.display().to_string(), "removed": removed, "backup": backup.as_ref().map(|b| b.display().to_string())}),
        || match removed {
            0 => format!("{}: holds no transcriptd hook: nothing to do", p.display()),
            n => format!("{}: {n} transcriptd hook{} taken out", p.display(), if n == 1 { "" } else { "s" }),
        },
    )?;
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
    if let Err(e) = hook_inner(&args) {
        eprintln!("transcriptd hooks exec: {e:#}");
    }
    Exit::Clean
}

fn hook_inner(args: &RunArgs) -> anyhow::Result<()> {
    if let Some(t) = &args.settle {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let look = || std::fs::metadata(t).ok().map(|m| (m.len(), m.modified().ok()));
        let (mut last, mut since) = (look(), std::time::Instant::now());
        while std::time::Instant::now() < deadline {
            if args.agent == HookAgent::Copilot {
                if ends_with_shutdown(t) {
                    break;
                }
            } else {
                let now = look();
                if now != last {
                    (last, since) = (now, std::time::Instant::now());
                } else if since.elapsed() >= std::time::Duration::from_secs(2) {
                    break;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        snapshot(&args.store, t)?;
        return Ok(());
    }
    let mut input = Vec::new();
    std::io::stdin().take(1 << 20).read_to_end(&mut input)?;
    let v: Value = serde_json::from_slice(&input).context("the hook's input is not JSON")?;
    let event = v.get("hook_event_name").and_then(Value::as_str).unwrap_or("");
    let resumed = event == "SessionStart" && v.get("source").and_then(Value::as_str) == Some("resume");
    if event == "SessionStart" && !resumed {
        // A new session (Copilot CLI's entry has no matcher): nothing to keep yet.
        return Ok(());
    }
    let Some(transcript) = transcript_of(args.agent, &v) else { return Ok(()) };
    let lags = match args.agent {
        // Copilot CLI 1.0.102 runs sessionEnd hooks before it writes the session's last
        // records out (the last turn, `session.shutdown`).
        HookAgent::Copilot => event == "SessionEnd" && !ends_with_shutdown(&transcript),
        // Qwen Code 0.24.4 queues its records' writes: at Stop the turn may not be in the
        // file yet.
        HookAgent::QwenCode => event == "Stop" || event == "SessionEnd",
        _ => false,
    };
    // Copilot CLI 1.0.102 may not have created the file at all yet when its sessionEnd hook
    // runs (it writes the session out at its exit, measured: the file appeared 40 ms after the
    // hook): then only the later snapshot can keep it.
    let now = if lags && !transcript.exists() { Ok(0) } else { snapshot(&args.store, &transcript) };
    if lags {
        // A process of its own, detached, keeps the file again once it is whole.
        settle_later(args, &transcript)?;
    }
    let kept = now?;
    tracing::debug!(event, file = %transcript.display(), kept, "snapshot taken");
    if resumed {
        if let Some(m) = resume_warning(&transcript)? {
            let mut o = args.out.stdout();
            serde_json::to_writer(&mut o, &json!({"systemMessage": m}))?;
            o.write_all(b"\n")?;
            o.flush()?;
        }
    }
    Ok(())
}

/// Whether a Copilot CLI session file's last record is its `session.shutdown` (the last it
/// writes).
fn ends_with_shutdown(p: &Path) -> bool {
    use std::io::{Seek as _, SeekFrom};
    let Ok(mut f) = std::fs::File::open(p) else { return false };
    let Ok(len) = f.seek(SeekFrom::End(0)) else { return false };
    // The record holds the session's accounting: a few KiB; the last 1 MiB is more than enough.
    let from = len.saturating_sub(1 << 20);
    let mut tail = Vec::new();
    if f.seek(SeekFrom::Start(from)).is_err() || f.read_to_end(&mut tail).is_err() {
        return false;
    }
    let Some(body) = tail.strip_suffix(b"\n") else { return false };
    let last = body.rsplit(|b| *b == b'\n').next().unwrap_or(body);
    serde_json::from_slice::<Value>(last).is_ok_and(|v| v.get("type").and_then(Value::as_str) == Some("session.shutdown"))
}

/// Starts `exec --settle FILE`, detached (a session of its own, no stdio), and does
/// not wait for it.
fn settle_later(args: &RunArgs, transcript: &Path) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt as _;
    let exe = std::env::current_exe().context("finding transcriptd's own path")?;
    let mut c = std::process::Command::new(exe);
    c.args(["hooks", "exec", args.agent.name(), "--store"]).arg(&args.store).arg("--settle").arg(transcript);
    c.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    // SAFETY: setsid is async-signal-safe; the child only leaves the agent's session and
    // process group, so that the agent's end does not end it.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    c.spawn().context("starting the snapshot that waits for the session's end")?;
    Ok(())
}

/// The transcript a hook's input names: its `transcript_path`; for Copilot CLI, whose
/// `sessionStart` and `sessionEnd` inputs carry only the session's id, the session's
/// `events.jsonl` under `$COPILOT_HOME` (or `~/.copilot`).
fn transcript_of(agent: HookAgent, v: &Value) -> Option<PathBuf> {
    if let Some(t) = v.get("transcript_path").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        return Some(PathBuf::from(t));
    }
    let id = v.get("session_id").or_else(|| v.get("sessionId")).and_then(Value::as_str)?;
    if agent != HookAgent::Copilot || !crate::sessions::id::is_uuid(id) {
        return None;
    }
    Some(crate::sessions::project::copilot_home()?.join("session-state").join(id).join("events.jsonl"))
}

/// How long a hook waits for the store another writer holds.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Keeps the file's bytes in the store (only what it does not hold yet is written); the bytes
/// new to it. A store a daemon holds is left to the daemon: it has them.
fn snapshot(store: &Path, transcript: &Path) -> anyhow::Result<u64> {
    let retention = crate::snapshots::Retention { max_age: None, max_bytes: None, every: std::time::Duration::MAX };
    // Another hook of the same agent may hold the store for the moment it takes (Copilot CLI
    // runs its agentStop and sessionEnd hooks at once): waited for. A daemon holds it for good:
    // after the wait it is left to the daemon, which has the bytes.
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    let mut w = loop {
        match crate::snapshots::Writer::open(store, retention) {
            Ok(w) => break w,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if std::time::Instant::now() >= deadline {
                    return Ok(0);
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) => return Err(e).with_context(|| format!("opening the snapshot store {}", store.display())),
        }
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
