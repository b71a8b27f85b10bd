//! The command line: one module per verb, and the exit-code contract shared by all of them.

pub mod args;
pub mod check;
pub mod client;
pub mod completions;
pub mod context;
pub mod conversation;
pub mod doctor;
pub mod explain;
pub mod help;
pub mod history;
pub mod hooks;
pub mod input;
pub mod man;
pub mod orphans;
pub mod output;
pub mod rebuilt;
pub mod render;
pub mod repair;
pub mod repair_stdin;
pub mod report;
pub mod restore;
pub mod run;
pub mod safe;
pub mod sessions;
pub mod show;
pub mod stats;
pub mod style;
pub mod tap;
pub mod top;
pub mod usage;

use crate::error::chain;
use clap::{Parser, Subcommand, ValueEnum};
use std::process::ExitCode;

/// Check, repair and watch the JSONL transcripts AI coding agents write.
#[derive(Debug, Parser)]
#[command(name = "transcriptd", version, about, long_about = None, propagate_version = true, after_long_help = help::TRANSCRIPTD)]
pub struct Cli {
    /// The verb.
    #[command(subcommand)]
    pub command: Command,
    /// Log format on stderr: text, or one JSON object per line (for log collectors).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, value_name = "FORMAT", help_heading = "Global options")]
    pub log_format: LogFormat,
    /// Colour in output and logs: auto (only on a terminal, and not when NO_COLOR is set),
    /// always or never.
    #[arg(long, global = true, value_enum, default_value_t = style::ColorChoice::Auto, value_name = "WHEN", help_heading = "Global options")]
    pub color: style::ColorChoice,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable.
    Text,
    /// One JSON object per line.
    Json,
}

/// Output format of a verb's results on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// One readable line per result.
    Text,
    /// One JSON object per line.
    Json,
}

/// The verbs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate transcripts and report findings.
    #[command(after_long_help = help::CHECK)]
    Check(check::Args),
    /// Repair transcripts so the agent can resume them, keeping every removed line.
    #[command(after_long_help = help::REPAIR)]
    Repair(repair::Args),
    /// The sessions of a project directory, for every agent, newest first: whether each will
    /// resume, and with --fix the broken ones repaired in place and the agent's resume command.
    #[command(after_long_help = help::DOCTOR)]
    Doctor(doctor::Args),
    /// Trace an API error the agent printed ("messages.98.content.1: unexpected `tool_use_id`
    /// …") to the session line behind it, the finding there, and the command that repairs it.
    #[command(after_long_help = help::EXPLAIN)]
    Explain(explain::Args),
    /// Run the daemon: tail transcripts, report findings, export metrics.
    #[command(after_long_help = help::RUN)]
    Run(run::Args),
    /// Check a daemon configuration file.
    #[command(after_long_help = help::VALIDATE_CONFIG)]
    ValidateConfig(run::ValidateArgs),
    /// Print what the model sees on resume: the lines after the last compaction, read
    /// backwards from the end of the file.
    #[command(after_long_help = help::CONTEXT)]
    Context(context::Args),
    /// Print the whole conversation for people and exports, each compaction marked in place.
    #[command(after_long_help = help::HISTORY)]
    History(history::Args),
    /// List the calls of the last assistant turn that have no result, with what each tool does
    /// and a suggested handling.
    #[command(after_long_help = help::ORPHANS)]
    Orphans(orphans::Args),
    /// Put a session back, byte for byte, from the snapshot store the daemon's `snapshot` sink
    /// keeps (after the agent deleted, emptied or cut it), and print its resume command.
    #[command(after_long_help = help::RESTORE)]
    Restore(restore::Args),
    /// transcriptd in the agent's own hooks (Claude Code, Gemini CLI, Qwen Code, Copilot CLI, Pi): a snapshot of the session before a
    /// compaction and at its end, a check when it is resumed.
    #[command(after_long_help = help::HOOKS)]
    Hooks(hooks::Args),
    /// Find the sessions agent hosts keep on disk.
    Sessions(sessions::Args),
    /// Show one session, named by a short prefix of its id.
    #[command(after_long_help = help::SHOW)]
    Show(show::Args),
    /// An audit of an archive: one self-contained HTML page (--html) or JSON (--output json)
    /// with totals, findings by kind, format, severity and date, the worst sessions,
    /// compactions, calls without results by tool and side effect, tokens by model, and
    /// (--plan) what repair would do.
    #[command(after_long_help = help::REPORT)]
    Report(report::Args),
    /// Statistics of datasets (one conversation per line): messages per role, tool calls per
    /// tool, tokens per conversation and the tokens fine-tuning bills.
    #[command(after_long_help = help::STATS)]
    Stats(stats::Args),
    /// The records of a running daemon as it emits them (its /tap endpoint), as JSON lines or
    /// readable lines.
    #[command(after_long_help = help::TAP)]
    Tap(tap::Args),
    /// A full-screen view of a running daemon: files, lag, lines/s, findings/s by kind,
    /// pending and orphan calls, compactions, tokens/min by model, the busiest files.
    #[command(after_long_help = help::TOP)]
    Top(top::Args),
    /// Token usage by model (each API message once, with its final usage), without the daemon.
    #[command(after_long_help = help::USAGE)]
    Usage(usage::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(after_long_help = help::COMPLETIONS)]
    Completions(completions::Args),
    /// Print the manual page (roff), or write one page per verb into a directory.
    #[command(after_long_help = help::MAN)]
    Man(man::Args),
}

/// How a verb ended, when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Nothing wrong: exit 0.
    Clean,
    /// Findings (or orphans, or files not fully repaired): exit 1.
    Findings,
}

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    style::init(cli.color);
    init_tracing(cli.log_format);
    let result = match cli.command {
        Command::Check(a) => check::run(a),
        Command::Repair(a) if a.reads_stdin() => repair_stdin::run(&a),
        Command::Repair(a) => repair::run(a),
        Command::Doctor(a) => doctor::run(a),
        Command::Explain(a) => explain::run(a),
        Command::Run(a) => run::run(a),
        Command::ValidateConfig(a) => run::validate(a),
        Command::Context(a) => context::run(a),
        Command::History(a) => history::run(a),
        Command::Orphans(a) => orphans::run(a),
        Command::Restore(a) => restore::run(a),
        Command::Hooks(a) => hooks::run(a),
        Command::Sessions(a) => sessions::run(a),
        Command::Show(a) => show::run(a),
        Command::Stats(a) => stats::run(a),
        Command::Report(a) => report::run(a),
        Command::Usage(a) => usage::run(a),
        Command::Tap(a) => tap::run(a),
        Command::Top(a) => top::run(a),
        Command::Completions(a) => completions::run(a),
        Command::Man(a) => man::run(a),
    };
    match result {
        Ok(Exit::Clean) => ExitCode::SUCCESS,
        Ok(Exit::Findings) => ExitCode::from(1),
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            style::error(chain(&e));
            ExitCode::from(2)
        }
    }
}

fn init_tracing(format: LogFormat) {
    // ANSI codes only where a person reads them: never into a file, the journal or a container
    // log (stderr is no terminal there), nor when NO_COLOR or --color never says so.
    crate::telemetry::init_tracing(format == LogFormat::Json, style::stderr().on, safe::line);
}

/// Number of worker threads: `--jobs`, or every core.
pub fn jobs(requested: Option<usize>) -> usize {
    requested.filter(|&j| j > 0).unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The standard transcript locations that exist on this machine: `~/.claude/projects`,
/// `~/.codex/sessions`, Pi's sessions ([`pi_sessions_dir`]), Qwen Code's
/// ([`qwen_projects_dir`]), Gemini CLI's ([`gemini_sessions_dir`]) and Copilot's
/// ([`copilot_sessions_dir`]).
pub fn default_roots() -> Vec<std::path::PathBuf> {
    let Some(home) = std::env::var_os("HOME").map(std::path::PathBuf::from) else { return Vec::new() };
    standard_roots(&home).into_iter().filter(|p| p.is_dir()).collect()
}

/// The standard transcript locations under `home`, whether they exist or not (the daemon
/// watches them once they appear): the one list of them.
pub fn standard_roots(home: &std::path::Path) -> Vec<std::path::PathBuf> {
    vec![
        home.join(".claude/projects"),
        home.join(".codex/sessions"),
        pi_sessions_dir(home),
        qwen_projects_dir(home),
        gemini_sessions_dir(home),
        copilot_sessions_dir(home),
    ]
}

/// `~` and `~/` expanded, as Pi and Qwen Code do with their directory variables.
fn expand_home(home: &std::path::Path, d: String) -> std::path::PathBuf {
    match d.as_str() {
        "~" => home.to_path_buf(),
        _ if d.starts_with("~/") => home.join(&d[2..]),
        _ => std::path::PathBuf::from(d),
    }
}

/// Where Qwen Code keeps its sessions (`<dir>/<sanitized cwd>/chats/<sessionId>.jsonl`):
/// `projects` in its runtime directory, `$QWEN_RUNTIME_DIR`, else `$QWEN_HOME`, else `~/.qwen`
/// (`Storage.getRuntimeBaseDir`, `getGlobalQwenDir`).
pub fn qwen_projects_dir(home: &std::path::Path) -> std::path::PathBuf {
    let var = |k: &str| std::env::var(k).ok().filter(|d| !d.is_empty());
    match var("QWEN_RUNTIME_DIR").or_else(|| var("QWEN_HOME")) {
        Some(d) => expand_home(home, d).join("projects"),
        None => home.join(".qwen/projects"),
    }
}

/// Where Gemini CLI keeps its sessions (`<project>/chats/session-*.jsonl` below it): `tmp` in
/// `~/.gemini`, the home being `$GEMINI_CLI_HOME` when set (as Gemini CLI's `homedir`).
pub fn gemini_sessions_dir(home: &std::path::Path) -> std::path::PathBuf {
    let base = std::env::var_os("GEMINI_CLI_HOME").filter(|d| !d.is_empty()).map_or_else(|| home.to_path_buf(), std::path::PathBuf::from);
    base.join(".gemini/tmp")
}

/// Where Copilot CLI keeps its sessions: `session-state` in `$COPILOT_HOME`, else in
/// `~/.copilot` (each session a directory `<id>/` holding `events.jsonl`).
pub fn copilot_sessions_dir(home: &std::path::Path) -> std::path::PathBuf {
    match std::env::var_os("COPILOT_HOME").filter(|d| !d.is_empty()) {
        Some(d) => std::path::PathBuf::from(d).join("session-state"),
        None => home.join(".copilot/session-state"),
    }
}

/// Where Pi keeps its sessions: `$PI_CODING_AGENT_SESSION_DIR`, else `sessions` in its agent
/// directory, `$PI_CODING_AGENT_DIR` or `~/.pi/agent` (`~` and `~/` expanded, as Pi does).
pub fn pi_sessions_dir(home: &std::path::Path) -> std::path::PathBuf {
    let expand = |d: String| expand_home(home, d);
    let var = |k: &str| std::env::var(k).ok().filter(|d| !d.is_empty());
    match (var("PI_CODING_AGENT_SESSION_DIR"), var("PI_CODING_AGENT_DIR")) {
        (Some(d), _) => expand(d),
        (None, Some(d)) => expand(d).join("sessions"),
        (None, None) => home.join(".pi/agent/sessions"),
    }
}

/// The roots given, or the standard locations that exist.
pub fn roots_or_default(given: &[std::path::PathBuf]) -> anyhow::Result<Vec<std::path::PathBuf>> {
    if !given.is_empty() {
        return Ok(given.to_vec());
    }
    let roots = default_roots();
    if roots.is_empty() {
        anyhow::bail!("no root given, and none of ~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions, ~/.qwen/projects, ~/.gemini/tmp and ~/.copilot/session-state exists");
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("100"), Ok(100));
        assert_eq!(parse_size("2k"), Ok(2048));
        assert_eq!(parse_size("3m"), Ok(3 << 20));
        assert_eq!(parse_size("1MB"), Ok(1_000_000));
        assert!(parse_size("x").is_err());
        assert!(parse_size("5 parsecs").is_err());
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
