//! What `--help` (long form) and the manual pages say after each verb's flags: its exit status
//! and examples. One text per verb, in two sections the manual pages render as `EXIT STATUS`
//! and `EXAMPLES` (`man.rs`); the same words as the verb's page under `docs/commands/`
//! (`tests/integration/docs.rs` checks that every example parses and that the codes agree).

/// The heading of the exit-status section in a verb's `after_long_help`.
pub const EXIT_STATUS: &str = "Exit status:";
/// The heading of the examples section.
pub const EXAMPLES: &str = "Examples:";

/// `transcriptd` itself: the contract every verb keeps, and the way from a broken session to a
/// resumed one.
pub const TRANSCRIPTD: &str = "\
Exit status:
  0  nothing wrong
  1  findings (or orphans, or files not fully repaired)
  2  usage or IO error

Examples:
  transcriptd doctor --fix                            # in the project: repair its sessions that will not resume
  transcriptd sessions list                           # find the session
  transcriptd check ~/.claude/projects/-home-me-app/SESSION.jsonl
  transcriptd repair --in-place ~/.claude/projects/-home-me-app/SESSION.jsonl
  transcriptd run                                     # the daemon on built-in defaults";

/// `transcriptd doctor`.
pub const DOCTOR: &str = "\
Exit status:
  0  every session of the directory resumes (after --fix: every one resumes now)
  1  some session will be refused or resumes without some of its lines (after --fix: some still does)
  2  usage or IO error: a directory or a session that could not be read, a repair that failed

Examples:
  transcriptd doctor                                  # the sessions of the current directory
  transcriptd doctor --fix                            # quit the agent first
  transcriptd doctor ~/src/app -o json";

/// `transcriptd explain`.
pub const EXPLAIN: &str = "\
Exit status:
  0  the session has no error finding as it is now (the error is not about it as it is)
  1  the session has error findings (those behind the API error are named)
  2  usage or IO error: no such session, an error text that names nothing transcriptd knows

Examples:
  transcriptd explain ~/.claude/projects/-home-me-app/SESSION.jsonl 'messages.98.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_01…'
  transcriptd explain 0c6e3f4e -                      # a session by id prefix; paste the error, then Ctrl-D
  transcriptd explain -o json SESSION.jsonl 'No tool output found for function call call_…'";

/// `transcriptd restore`.
pub const RESTORE: &str = "\
Exit status:
  0  restored (or the file already holds those bytes), or listed with --list
  2  usage or IO error: no store, nothing of the session in it, a session the agent has open for writing

Examples:
  transcriptd restore 0c6e3f4e --store /var/lib/transcriptd/snapshots     # the session the agent deleted or emptied
  transcriptd restore 0c6e3f4e --config /etc/transcriptd/transcriptd.toml --list
  transcriptd restore 0c6e3f4e --store /var/lib/transcriptd/snapshots --at 2026-12-03T09:00:00Z --out /tmp/before.jsonl";

/// `transcriptd sessions audit`.
pub const SESSIONS_AUDIT: &str = "\
Exit status:
  0  every index agrees with the files (or there is none)
  1  an index names a session that is gone, or a session file no index names
  2  usage or IO error: an index that cannot be read

Examples:
  transcriptd sessions audit
  transcriptd sessions audit --codex-home ~/.codex -o json";

/// `transcriptd hooks`.
pub const HOOKS: &str = "\
Exit status:
  0  done (hooks exec: always)
  2  usage or IO error

Examples:
  transcriptd hooks install claude-code
  transcriptd hooks install gemini-cli      # also qwen-code, copilot, pi
  transcriptd hooks uninstall claude-code";

/// `transcriptd hooks install`.
pub const HOOKS_INSTALL: &str = "\
Exit status:
  0  installed (the settings written, the old ones kept beside them)
  2  usage or IO error: a settings file that is not a JSON object is left as it is

Examples:
  transcriptd hooks install claude-code
  transcriptd hooks install claude-code --store /var/lib/transcriptd/snapshots --settings ~/.claude/settings.json
  transcriptd hooks install pi              # writes ~/.pi/agent/extensions/transcriptd.ts";

/// `transcriptd hooks uninstall`.
pub const HOOKS_UNINSTALL: &str = "\
Exit status:
  0  taken out (or there was nothing to take out)
  2  usage or IO error

Examples:
  transcriptd hooks uninstall claude-code";

/// `transcriptd hooks exec`.
pub const HOOKS_EXEC: &str = "\
Exit status:
  0  always: a hook never stops the agent (what went wrong is on stderr)

Examples:
  transcriptd hooks exec claude-code --store ~/.local/state/transcriptd/snapshots    # Claude Code runs it, the hook's JSON on stdin
  transcriptd hooks exec gemini-cli --store ~/.local/state/transcriptd/snapshots     # Gemini CLI runs it";

/// `transcriptd check`.
pub const CHECK: &str = "\
Exit status:
  0  no finding of severity error (warnings do not count)
  1  some error finding
  2  usage or IO error, or some path that could not be read (everything else is still checked)

Examples:
  transcriptd check                                   # the standard locations
  transcriptd check ~/.claude/projects/-home-me-app/SESSION.jsonl
  transcriptd check --errors -o json train.jsonl      # datasets and batch files too
  transcriptd check -q session.jsonl && echo clean";

/// `transcriptd repair`.
pub const REPAIR: &str = "\
Exit status:
  0  every file clean or repaired
  1  some file not fully repaired, or skipped (live, held open for writing, changing while repaired)
  2  usage or IO error, a refused --out, or a path that could not be read

Examples:
  transcriptd repair --in-place ~/.claude/projects/-home-me-app/SESSION.jsonl   # keeps SESSION.jsonl.orig
  transcriptd repair --out fixed ~/.codex/sessions
  transcriptd repair --dry-run session.jsonl          # every edit it would make, nothing written";

/// `transcriptd run`.
pub const RUN: &str = "\
Exit status:
  0  stopped by SIGTERM or SIGINT, the final checkpoint written
  2  a configuration that is invalid or cannot start (a state directory another daemon holds, a port in use)

Examples:
  transcriptd run                                     # watch ~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions, ~/.qwen/projects, ~/.gemini/tmp and ~/.copilot/session-state
  transcriptd run --watch /srv/agents --metrics-addr 127.0.0.1:9464
  transcriptd run --config /etc/transcriptd/transcriptd.toml";

/// `transcriptd validate-config`.
pub const VALIDATE_CONFIG: &str = "\
Exit status:
  0  the file is valid
  2  it is not: every error is printed, each naming its key and line

Examples:
  transcriptd validate-config /etc/transcriptd/transcriptd.toml";

/// `transcriptd context`.
pub const CONTEXT: &str = "\
Exit status:
  0  context printed
  1  some line of it could not be read
  2  usage or IO error

Examples:
  transcriptd context ~/.claude/projects/-home-me-app/SESSION.jsonl
  transcriptd context -o text session.jsonl";

/// `transcriptd history`.
pub const HISTORY: &str = "\
Exit status:
  0  history printed
  1  some line could not be read (reported on stderr)
  2  usage or IO error

Examples:
  transcriptd history -o text session.jsonl";

/// `transcriptd orphans`.
pub const ORPHANS: &str = "\
Exit status:
  0  no orphan shown (paused and in-flight calls do not count)
  1  some orphan
  2  usage or IO error (an unreadable registry or pending.json, a path that could not be read)

Examples:
  transcriptd orphans ~/.claude/projects
  transcriptd orphans --registry tools.toml -o json session.jsonl";

/// `transcriptd sessions list`.
pub const SESSIONS: &str = "\
Exit status:
  0  listed
  1  some missing_transcript
  2  usage or IO error (a root or a transcript that cannot be read)

Examples:
  transcriptd sessions list
  transcriptd sessions list ~/.claude/projects -o json";

/// `transcriptd show`.
pub const SHOW: &str = "\
Exit status:
  0  shown
  1  the summary has error findings
  2  usage or IO error, an invalid, unknown or ambiguous prefix, a meta sidecar that cannot be loaded, a missing transcript

Examples:
  transcriptd show 4c2d
  transcriptd show 4c2d --history -o json";

/// `transcriptd report`.
pub const REPORT: &str = "\
Exit status:
  0  report made (whatever the findings)
  2  usage or IO error, or some path that could not be read (the report is still written)

Examples:
  transcriptd report ~/.claude/projects --html report.html
  transcriptd report /archive --plan -o json";

/// `transcriptd stats`.
pub const STATS: &str = "\
Exit status:
  0  counted
  2  an input that is not a dataset or cannot be read

Examples:
  transcriptd stats train.jsonl";

/// `transcriptd tap`.
pub const TAP: &str = "\
Exit status:
  0  the daemon closed the stream, or --count records were read
  2  cannot connect, or usage error

Examples:
  transcriptd tap                                     # the daemon on 127.0.0.1:9464
  transcriptd tap --errors -o text";

/// `transcriptd top`.
pub const TOP: &str = "\
Exit status:
  0  quit (q)
  2  cannot connect, or usage error

Examples:
  transcriptd top
  transcriptd top --addr 127.0.0.1:9464";

/// `transcriptd usage`.
pub const USAGE: &str = "\
Exit status:
  0  counted
  2  usage or IO error

Examples:
  transcriptd usage                                   # the standard locations
  transcriptd usage ~/.codex/sessions -o json";

/// `transcriptd completions`.
pub const COMPLETIONS: &str = "\
Exit status:
  0  printed
  2  usage error

Examples:
  transcriptd completions bash > /etc/bash_completion.d/transcriptd";

/// `transcriptd man`.
pub const MAN: &str = "\
Exit status:
  0  printed or written
  2  usage or IO error

Examples:
  transcriptd man | man -l -
  transcriptd man --dir /usr/local/share/man/man1";

/// The `(code, meaning)` rows of a verb's exit-status section, and its example command lines
/// (without their `# comments`).
pub fn sections(after_help: &str) -> (Vec<(u8, String)>, Vec<String>) {
    let mut codes = Vec::new();
    let mut examples = Vec::new();
    let mut at = "";
    for line in after_help.lines() {
        match line.trim_end() {
            EXIT_STATUS => at = EXIT_STATUS,
            EXAMPLES => at = EXAMPLES,
            "" => {}
            l if at == EXIT_STATUS => {
                let l = l.trim_start();
                let (code, meaning) = l.split_once(' ').unwrap_or((l, ""));
                codes.push((code.parse().unwrap_or(u8::MAX), meaning.trim().to_owned()));
            }
            l if at == EXAMPLES => examples.push(l.split(" # ").next().unwrap_or(l).trim().to_owned()),
            _ => {}
        }
    }
    (codes, examples)
}
