//! The command line as ripgrep, jq and Vector users expect it (issue 17), each point run as a
//! real process on real files: what happened is said (skips with their reason, unknown formats,
//! empty directories), one location style, filters and `-q`, colour and logs, completions and
//! manual pages, `-`, sessions without repair by-products, and `validate-config` reporting every
//! error.

use super::support::{data, json_lines, no_time, put, put_fixture, set_mtime, stderr, stdout, transcriptd, transcriptd_home};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_transcriptd"))
}

/// Runs the binary with `input` on its standard input.
fn with_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = bin().args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A real Codex rollout with 1 error among 134 warnings.
fn noisy() -> String {
    data("real/codex/localpush/rollout-2026-02-23T12-47-42-019c8a53-a0dd-7130-bcd7-95445d84846a.jsonl").to_string_lossy().into_owned()
}

#[test]
fn repair_says_why_each_file_was_skipped_in_text_and_json() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("in");
    // Freshly copied files: within the 60 s idle guard.
    put(&input.join("a.jsonl"), std::fs::read(data("check/claude-code/0002_orphan_call_at_end.jsonl")).unwrap());
    put(&input.join("b.jsonl"), std::fs::read(data("check/claude-code/0004_orphan_result.jsonl")).unwrap());
    // An old clean one.
    put(&input.join("c.jsonl"), std::fs::read(data("check/claude-code/0001_split_message_clean.jsonl")).unwrap());
    set_mtime(&input.join("c.jsonl"), 1_600_000_000);
    let bytes: u64 = ["a", "b", "c"].iter().map(|n| std::fs::metadata(input.join(format!("{n}.jsonl"))).unwrap().len()).sum();
    let out = d.path().join("out");

    let o = transcriptd(&["repair", s(&input), "--in-place"]);
    assert_eq!(o.status.code(), Some(1), "skipped files: exit 1");
    let text = stdout(&o);
    for f in ["a", "b"] {
        let want = format!("{}: warning: skipped: modified ", input.join(format!("{f}.jsonl")).display());
        assert!(text.contains(&want) && text.contains("within --min-idle 60s"), "{text}");
    }
    let human = format!("{:.1} KiB", bytes as f64 / 1024.0);
    let human = if bytes < 1024 { format!("{bytes} B") } else { human };
    assert_eq!(
        no_time(&stderr(&o)),
        format!("repair of 3 files ({human}) in Ts: 1 clean, 0 repaired, 0 partly repaired, 2 skipped: 2 modified within --min-idle 1m, 0 failed\n")
    );

    let o = transcriptd(&["repair", s(&input), "--in-place", "-o", "json", "--no-summary"]);
    let reports = json_lines(&o);
    let skipped: Vec<_> = reports.iter().filter(|r| r["status"] == "skipped").collect();
    assert_eq!(skipped.len(), 2, "{reports:?}");
    assert!(skipped.iter().all(|r| r["reason"] == "recently_modified" && r["message"].as_str().unwrap().contains("--min-idle")), "{skipped:?}");

    // The dry run says so too: one record per skipped file.
    let o = transcriptd(&["repair", s(&input), "--dry-run", "-o", "json"]);
    let plan = json_lines(&o);
    let skipped: Vec<_> = plan.iter().filter(|r| r["action"] == "skipped").collect();
    assert_eq!(skipped.len(), 2, "{plan:?}");
    assert!(skipped.iter().all(|r| r["reason"] == "recently_modified" && r["file"].as_str().is_some()), "{skipped:?}");
    assert!(no_time(&stderr(&o)).starts_with("dry run over 3 files ("), "{}", stderr(&o));
    assert!(stderr(&o).contains(": 1 clean, 0 to repair, 2 skipped: 2 modified within --min-idle 1m, 0 failed; nothing written"), "{}", stderr(&o));

    // `--out` never writes the input: freshly copied files are repaired (issue 30: they were
    // skipped), and a file a process holds open for writing is skipped, naming the process.
    let o = transcriptd(&["repair", s(&input), "--out", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(no_time(&stderr(&o)).contains("1 clean, 2 repaired"), "{}", stderr(&o));
    let writer = std::fs::OpenOptions::new().append(true).open(input.join("a.jsonl")).unwrap();
    let o = transcriptd(&["repair", s(&input.join("a.jsonl")), "--out", s(&d.path().join("out2"))]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).contains("skipped: held open for writing by pid"), "{}", stdout(&o));
    drop(writer);
}

#[test]
fn a_file_of_no_known_format_is_a_warning_and_a_forced_format_that_matches_nothing_says_so() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("foo.jsonl");
    put(&f, "{\"foo\":1}\n".repeat(3));
    let o = transcriptd(&["check", s(&f)]);
    assert_eq!(o.status.code(), Some(0), "a warning");
    assert_eq!(
        stdout(&o),
        format!(
            "{}: warning: unknown_format: no line is a record of a known format: none of its 3 lines was checked (give --format if it is one)\n",
            f.display()
        )
    );
    assert!(stderr(&o).contains("0 errors, 1 warning"), "{}", stderr(&o));
    let v = &json_lines(&transcriptd(&["check", "-o", "json", s(&f)]))[0];
    assert_eq!((v["kind"].as_str(), v["severity"].as_str(), v.get("line")), (Some("unknown_format"), Some("warning"), None), "{v}");

    // An OpenAI chat file with errors, read as Codex: no line is a Codex record.
    let chat = data("check/openai-chat/0002_unanswered_call.jsonl");
    assert_eq!(transcriptd(&["check", s(&chat)]).status.code(), Some(1));
    let o = transcriptd(&["check", "--format", "codex", "-o", "json", s(&chat)]);
    let records = json_lines(&o);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["kind"], "unknown_format");
    assert!(records[0]["message"].as_str().unwrap().starts_with("no line is a codex record (the format given)"), "{}", records[0]);
}

#[test]
fn an_empty_directory_and_a_missing_watch_directory_are_said() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("empty/sub")).unwrap();
    put(&d.path().join("empty/sub/notes.txt"), "x");
    let empty = d.path().join("empty");
    for verb in ["check", "orphans", "usage", "stats", "report", "repair --dry-run"] {
        let args: Vec<&str> = verb.split(' ').chain([s(&empty)]).collect();
        let o = transcriptd(&args);
        assert_eq!(o.status.code(), Some(0), "{verb}");
        assert!(stderr(&o).contains("empty: no *.jsonl file in this directory or below it: nothing was read from it"), "{verb}: {}", stderr(&o));
        assert!(stderr(&o).starts_with("transcriptd: warning: "), "{verb}: {}", stderr(&o));
    }
    // The daemon says it once it starts, and goes on.
    let mut cmd = bin();
    cmd.args(["run", "--watch", "/nonexistent/transcripts", "--state-dir", s(&d.path().join("state"))]);
    let (code, seen) = super::support::run_daemon_briefly(cmd);
    assert_eq!(code, Some(0), "{seen}");
    assert!(seen.contains("WARN") && seen.contains("does not exist: nothing is read from it until it is created"), "{seen}");
}

#[test]
fn one_location_style_one_os_error_and_counts_that_hold() {
    let d = tempfile::tempdir().unwrap();
    // A meta sidecar without its transcript: about the file, so no line 0.
    put(&d.path().join("lost.meta.json"), "{}");
    let o = transcriptd(&["check", s(d.path())]);
    assert!(stdout(&o).starts_with(&format!("{}: error: missing_transcript: meta sidecar ", d.path().join("lost.jsonl").display())), "{}", stdout(&o));
    // A strict stop: path:line: severity: kind: message.
    let f = data("check/claude-code/0014_framing_errors.jsonl");
    let o = transcriptd(&["check", "--strict", s(&f)]);
    assert!(stderr(&o).starts_with(&format!("{}:2: error: malformed_line: ", f.display())), "{}", stderr(&o));
    // An OS error is said once, whatever the verb.
    for args in [
        vec!["check", "/nonexistent/x.jsonl"],
        vec!["orphans", "/nonexistent/x.jsonl"],
        vec!["context", "/nonexistent/x.jsonl"],
        vec!["history", "/nonexistent/x.jsonl"],
        vec!["validate-config", "/nonexistent/x.toml"],
        vec!["repair", "--dry-run", "/nonexistent/x.jsonl"],
    ] {
        let o = transcriptd(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert_eq!(stderr(&o).matches("No such file or directory").count(), 1, "{args:?}: {}", stderr(&o));
    }
    // 20 lines of garbage are 20 lines.
    let g = d.path().join("garbage.jsonl");
    put(&g, "not json\n".repeat(20));
    let o = transcriptd(&["check", s(&g)]);
    assert!(stderr(&o).starts_with("checked 1 file (20 lines, 180 B) in "), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().count(), 20);
    assert!(stdout(&o).lines().all(|l| l.contains(": error: malformed_line: ")), "{}", stdout(&o));
}

#[test]
fn severity_and_kind_filter_check_and_orphans() {
    // A real Codex rollout (its call left unanswered is a warning: Codex answers it on resume)
    // with a torn last line, its one error.
    let torn = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(noisy()).unwrap();
    bytes.extend_from_slice(b"{\"timestamp\":\"2026-02-23T12:50:00.000Z\",\"type\":\"resp");
    put(&torn.path().join("torn.jsonl"), bytes);
    let f = torn.path().join("torn.jsonl").to_string_lossy().into_owned();
    let all = json_lines(&transcriptd(&["check", "-o", "json", &f]));
    let count = |sev: &str| all.iter().filter(|r| r["severity"] == sev).count();
    assert!(count("error") == 1 && count("warning") > 100);

    for args in [vec!["--errors"], vec!["--severity", "error"]] {
        let o = transcriptd(&[&["check", "-o", "json"], &args[..], &[&f]].concat());
        assert_eq!(o.status.code(), Some(1));
        let r = json_lines(&o);
        assert!(r.len() == 1 && r[0]["severity"] == "error", "{r:?}");
        assert!(stderr(&o).contains(&format!("1 error, 0 warnings in 1 file ({} more not shown: --severity/--kind)", count("warning"))), "{}", stderr(&o));
    }
    let o = transcriptd(&["check", "-o", "json", "--severity", "warning", &f]);
    assert_eq!(o.status.code(), Some(0), "the exit status answers for what is shown");
    assert_eq!(json_lines(&o).len(), count("warning"));
    let o = transcriptd(&["check", "-o", "json", "--kind", "unanswered_call", "--kind", "orphan_call", &data("real/codex").to_string_lossy()]);
    let kinds: std::collections::BTreeSet<String> = json_lines(&o).iter().map(|r| r["kind"].as_str().unwrap().to_owned()).collect();
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), ["orphan_call", "unanswered_call"]);
    let o = transcriptd(&["check", "--kind", "no_such_kind", &f]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown finding kind `no_such_kind`"), "{}", stderr(&o));

    // orphans: an orphan is an error, a paused call a warning.
    let d = tempfile::tempdir().unwrap();
    let s1 = d.path().join("s.jsonl");
    std::fs::copy(data("orphans/codex/0005_pending_json_pauses_calls/rollout.jsonl"), &s1).unwrap();
    std::fs::write(d.path().join("pending.json"), r#"[{"call_id":"call_wait"}]"#).unwrap();
    let o = transcriptd(&["orphans", "-o", "json", s(&s1)]);
    let r = json_lines(&o);
    assert!(r.iter().any(|x| x["severity"] == "warning" && x["handling"] == "paused") && r.iter().any(|x| x["severity"] == "error"), "{r:?}");
    assert!(r.iter().all(|x| x["kind"] == "orphan_call"));
    let o = transcriptd(&["orphans", "-o", "json", "--errors", s(&s1)]);
    assert!(json_lines(&o).iter().all(|x| x["severity"] == "error" && x["handling"] != "paused"));
    assert_eq!(o.status.code(), Some(1));
    let o = transcriptd(&["orphans", "--severity", "warning", s(&s1)]);
    assert_eq!(o.status.code(), Some(0), "orphans not shown do not count");
    assert!(stdout(&o).lines().all(|l| l.contains(": warning: orphan_call: ")), "{}", stdout(&o));
}

#[test]
fn the_daemons_stdout_sink_filters_findings() {
    // In the configuration: errors of two kinds only.
    let d = super::support::harness::Daemon::edited("", "", |c| {
        c.replace("type = \"stdout\"\n", "type = \"stdout\"\nseverity = \"error\"\nkinds = [\"orphan_call\", \"malformed_line\"]\n")
    });
    let w = d.watch_dir();
    // Whole files, renamed in: picked up with their lines (a file picked up empty has no format
    // to tell yet).
    let staged = d.root.path().join("staged");
    std::fs::create_dir_all(&staged).unwrap();
    std::fs::copy(noisy(), staged.join("noisy.jsonl")).unwrap();
    std::fs::write(
        staged.join("chat.jsonl"),
        "{\"role\":\"user\",\"content\":\"go\"}\nnot json\n{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"function\":{\"name\":\"f\",\"arguments\":\"[]\"}}]}\n",
    )
    .unwrap();
    for f in ["noisy.jsonl", "chat.jsonl"] {
        std::fs::rename(staged.join(f), w.join(f)).unwrap();
    }
    let done = super::support::harness::wait(Duration::from_secs(20), || d.records().iter().any(|r| r["kind"] == "orphan_call"));
    assert!(done, "{}", d.log());
    std::thread::sleep(Duration::from_millis(500));
    let records = d.records();
    let findings: Vec<_> = records.iter().filter(|r| r["type"] == "finding").collect();
    let kinds: std::collections::BTreeSet<&str> = findings.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), ["malformed_line", "orphan_call"], "{findings:?}");
    assert!(findings.iter().all(|r| r["severity"] == "error"));
    // Records that are no finding pass, with the format the first lines told.
    let opened: Vec<_> = records.iter().filter(|r| r["type"] == "file_opened").collect();
    assert_eq!(opened.len(), 2, "{opened:?}");
    assert!(opened.iter().all(|r| r["format"].is_string() && r["offset"] == 0), "{opened:?}");
    // On the command line: `run --watch ... --errors`; --config and a filter conflict.
    let o = transcriptd(&["run", "--config", "x.toml", "--errors"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
}

#[test]
fn quiet_answers_by_exit_status_alone() {
    let d = tempfile::tempdir().unwrap();
    let home = d.path();
    let session = home.join(".claude/projects/-w/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl");
    put(&session, std::fs::read(data("check/claude-code/0002_orphan_call_at_end.jsonl")).unwrap());
    let ds = data("dataset/openai-dataset/0002_issue_example.jsonl");
    let cfg = super::support::root().join("deploy/docker/transcriptd.toml");
    let f = s(&session);
    let cases: Vec<(Vec<&str>, i32)> = vec![
        // A call left open: a warning for check (Claude Code answers it on resume), an orphan
        // (an error) for orphans.
        (vec!["check", f], 0),
        (vec!["check"], 0),
        (vec!["orphans", f], 1),
        (vec!["context", f], 0),
        (vec!["history", f], 0),
        (vec!["usage", f], 0),
        (vec!["stats", s(&ds)], 0),
        (vec!["report", f], 0),
        (vec!["repair", "--dry-run", "--force", f], 0),
        (vec!["sessions", "list"], 0),
        (vec!["show", "4c2d"], 0),
        (vec!["validate-config", s(&cfg)], 0),
    ];
    for (args, code) in cases {
        let loud = transcriptd_home(home, &args);
        assert_eq!(loud.status.code(), Some(code), "{args:?}: {}", stderr(&loud));
        assert!(!loud.stdout.is_empty() || !loud.stderr.is_empty(), "{args:?} says something");
        for q in ["-q", "--quiet"] {
            let quiet = transcriptd_home(home, &[&args[..], &[q]].concat());
            assert_eq!(quiet.status.code(), Some(code), "{args:?} {q}");
            assert_eq!((stdout(&quiet), stderr(&quiet)), (String::new(), String::new()), "{args:?} {q}");
        }
    }
    // Errors that make a verb exit 2 are still said.
    let o = transcriptd(&["check", "-q", "/nonexistent/x.jsonl"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent/x.jsonl"));
    // --no-summary keeps the results and drops the summary.
    let o = transcriptd_home(home, &["check", "--no-summary", f]);
    assert_eq!((stdout(&o).lines().count(), stderr(&o)), (1, String::new()));
}

#[test]
fn every_verb_shares_the_common_arguments() {
    use clap::CommandFactory;
    let cli = transcriptd::cli::Cli::command();
    let ids = |c: &clap::Command| -> std::collections::BTreeSet<String> { c.get_arguments().map(|a| a.get_id().to_string()).collect() };
    let global = ids(&cli);
    assert!(global.contains("color") && global.contains("log_format"), "{global:?}");
    let mut verbs: Vec<clap::Command> = Vec::new();
    for c in cli.get_subcommands() {
        if c.has_subcommands() {
            verbs.extend(c.get_subcommands().cloned());
        } else {
            verbs.push(c.clone());
        }
    }
    for c in &verbs {
        let name = c.get_name();
        let args = ids(c);
        // top draws a screen: nothing to write as JSON or quieten.
        if matches!(name, "run" | "top" | "completions" | "man") {
            assert!(!args.contains("quiet"), "{name}: nothing to quieten");
            continue;
        }
        for common in ["output", "quiet", "no_summary"] {
            assert!(args.contains(common), "{name} lacks --{common}: {args:?}");
        }
        // tap reads a daemon's records, restore the snapshot store, hooks settings: not transcripts.
        let reads = !matches!(name, "sessions" | "list" | "validate-config" | "tap" | "restore" | "install" | "uninstall" | "exec" | "audit");
        for read in ["format", "max_line_bytes", "jobs"] {
            assert_eq!(args.contains(read), reads, "{name}: --{read}");
        }
        // The same help text everywhere.
        let q = c.get_arguments().find(|a| a.get_id() == "quiet").unwrap();
        assert!(q.get_help().unwrap().to_string().starts_with("Print nothing"), "{name}");
    }
    // history accepts what the others do (it rejected -q once).
    let h = data("context/claude-code/0001_two_boundaries_the_last_wins.jsonl");
    let o = transcriptd(&["history", "-q", "-j", "2", "--no-summary", "--max-line-bytes", "1M", "-o", "text", s(&h)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// Runs `cmd` under a pseudo-terminal (util-linux `script`), returning what the terminal showed.
fn on_a_terminal(cmd: &str, env: &[(&str, &str)]) -> String {
    let mut c = Command::new("script");
    c.args(["-qec", cmd, "/dev/null"]).stdin(Stdio::null()).env_remove("NO_COLOR").env("TERM", "xterm");
    for (k, v) in env {
        c.env(k, v);
    }
    String::from_utf8_lossy(&c.output().unwrap().stdout).into_owned()
}

#[test]
fn colour_follows_color_no_color_and_the_terminal() {
    let f = data("check/claude-code/0004_orphan_result.jsonl");
    let esc = |o: &Output| o.stdout.contains(&0x1b) || o.stderr.contains(&0x1b);
    // Into a pipe: none unless asked.
    assert!(!esc(&transcriptd(&["check", s(&f)])));
    assert!(!esc(&transcriptd(&["check", "--color", "auto", s(&f)])));
    let always = transcriptd(&["check", "--color", "always", s(&f)]);
    assert!(stdout(&always).contains("\x1b[1;31merror\x1b[0m"), "{:?}", stdout(&always));
    let o = bin().args(["check", "--color", "always", s(&f)]).env("NO_COLOR", "1").output().unwrap();
    assert!(esc(&o), "always decides alone");
    // On a terminal: colour, unless NO_COLOR (non-empty) or --color never.
    let cmd = format!("{} check {}", env!("CARGO_BIN_EXE_transcriptd"), f.display());
    let shown = on_a_terminal(&cmd, &[]);
    assert!(shown.contains("\x1b[1;31merror\x1b[0m"), "{shown:?}");
    assert!(!on_a_terminal(&cmd, &[("NO_COLOR", "1")]).contains('\x1b'));
    assert!(on_a_terminal(&cmd, &[("NO_COLOR", "")]).contains('\x1b'), "an empty NO_COLOR does not count");
    assert!(!on_a_terminal(&format!("{cmd} --color never"), &[]).contains('\x1b'));
    assert!(!on_a_terminal(&cmd, &[("TERM", "dumb")]).contains('\x1b'));
}

#[test]
fn logs_into_a_file_carry_no_ansi_and_can_be_json() {
    let d = tempfile::tempdir().unwrap();
    let run = |extra: &[&str], terminal: bool| -> String {
        let state = d.path().join("state");
        let mut args = vec!["run", "--watch", "/nonexistent/dir", "--state-dir", s(&state)];
        args.extend_from_slice(extra);
        if terminal {
            // SIGINT after a moment: the daemon stops cleanly.
            let cmd = format!("timeout -s INT 2 {} {}", env!("CARGO_BIN_EXE_transcriptd"), args.join(" "));
            return on_a_terminal(&cmd, &[("TRANSCRIPTD_LOG", "info")]);
        }
        let log = d.path().join("err.log");
        let err = std::fs::File::create(&log).unwrap();
        let mut child = bin().args(&args).env("TRANSCRIPTD_LOG", "info").stdout(Stdio::null()).stderr(err).spawn().unwrap();
        let start = std::time::Instant::now();
        while !std::fs::read_to_string(&log).unwrap().contains("watching") && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        assert_eq!(child.wait().unwrap().code(), Some(0));
        std::fs::read_to_string(&log).unwrap()
    };
    let text = run(&[], false);
    assert!(text.contains("WARN") && !text.contains('\x1b'), "{text:?}");
    let json = run(&["--log-format", "json"], false);
    let lines: Vec<serde_json::Value> = json.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    assert!(lines.iter().any(|l| l["level"] == "WARN") && !json.contains('\x1b'), "{json}");
    // A person at a terminal gets colour, unless they said no.
    assert!(run(&[], true).contains('\x1b'));
    assert!(!run(&["--color", "never"], true).contains('\x1b'));
}

#[test]
fn completions_and_the_manual_come_from_the_clap_definitions() {
    let script = stdout(&transcriptd(&["completions", "bash"]));
    let o = Command::new("bash")
        .args(["-c", "source /dev/stdin; COMP_WORDS=(transcriptd val); COMP_CWORD=1; _transcriptd transcriptd val transcriptd; echo \"${COMPREPLY[@]}\""])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(script.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    assert_eq!(stdout(&o).trim(), "validate-config", "{}", stderr(&o));
    // A flag with a closed set of values completes to them, not to file names (issue 30).
    assert!(
        script.contains("--dataset-policy)\n                    COMPREPLY=($(compgen -W \"drop truncate answer\""),
        "--dataset-policy completes to file names"
    );
    assert!(stdout(&transcriptd(&["repair", "--help"])).contains("[possible values: drop, truncate, answer]"));
    for (shell, needle) in [("zsh", "#compdef transcriptd"), ("fish", "complete -c transcriptd -n \"__fish_transcriptd_needs_command\" -f -a \"check\"")] {
        let text = stdout(&transcriptd(&["completions", shell]));
        assert!(text.contains(needle), "{shell}: {text}");
        assert!(text.contains("no-summary") && text.contains("severity"), "{shell}");
    }
    assert_eq!(transcriptd(&["completions", "tcsh"]).status.code(), Some(2));
    let page = transcriptd(&["man"]);
    let page = stdout(&page);
    assert!(page.contains(".TH transcriptd 1") && page.contains("validate\\-config"), "{page}");
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(transcriptd(&["man", "--dir", s(dir.path())]).status.code(), Some(0));
    let rendered = Command::new("man").args(["-l", s(&dir.path().join("transcriptd-check.1"))]).env("MANWIDTH", "200").env("MANPAGER", "cat").output().unwrap();
    let rendered = stdout(&rendered);
    assert!(rendered.contains("--severity") && rendered.contains("--no-summary"), "{rendered}");
    // Each page has the sections man pages have (issue 30: neither --help nor the pages had
    // them), and the verb's own flags come before the global ones in --help.
    for page in std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()) {
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        if name == "transcriptd-sessions.1" {
            continue; // a verb that only holds `sessions list`
        }
        let rendered = stdout(&Command::new("man").args(["-l", s(&page)]).env("MANWIDTH", "200").env("MANPAGER", "cat").output().unwrap());
        let (exit, examples) = (rendered.find("\nEXIT STATUS\n"), rendered.find("\nEXAMPLES\n"));
        assert!(exit.is_some() && examples.is_some() && exit < examples, "{name}: no EXIT STATUS then EXAMPLES:\n{rendered}");
        assert!(rendered[examples.unwrap()..].contains("transcriptd"), "{name}: {rendered}");
    }
    let help = stdout(&transcriptd(&["check", "--help"]));
    let (own, global) = (help.find("--strict").unwrap(), help.find("Global options:").expect("a heading for the global options"));
    assert!(own < global && global < help.find("--color").unwrap(), "{help}");
    assert!(help.find("Exit status:").is_some_and(|e| e > global) && help.contains("Examples:"), "{help}");
}

#[test]
fn sessions_list_leaves_repair_by_products_out_and_names_uuid_files_by_their_uuid() {
    let d = tempfile::tempdir().unwrap();
    let chat = "{\"role\":\"user\",\"content\":\"hi\"}\n";
    let uuid = "66666666-6666-4666-8666-666666666666";
    for name in ["s.jsonl", "s.rejects.jsonl", "s.jsonl.orig.jsonl", "s.jsonl.orig", &format!("codex-rollout-2026-02-23T20-34-25-{uuid}.jsonl")] {
        put(&d.path().join(name), chat);
    }
    let o = transcriptd(&["sessions", "list", "-o", "json", s(d.path())]);
    let ids: Vec<String> = json_lines(&o).iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.contains(&"s".to_owned()) && ids.contains(&uuid.to_owned()), "{ids:?}");
    let o = transcriptd(&["show", "666666", "--root", s(d.path())]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains(&format!("id           {uuid}")), "{}", stdout(&o));
    // `show --history -o json` prints the records of `history`, as docs/commands/show.md says.
    let shown = transcriptd(&["show", "666666", "--root", s(d.path()), "--history", "-o", "json"]);
    let file = d.path().join(format!("codex-rollout-2026-02-23T20-34-25-{uuid}.jsonl"));
    let history = transcriptd(&["history", s(&file)]);
    assert_eq!((shown.status.code(), stdout(&shown)), (Some(0), stdout(&history)));
    assert!(stdout(&history).starts_with("{\"line\":1,\"role\":\"user\""), "{}", stdout(&history));
    // check walks past them too.
    let o = transcriptd(&["check", s(d.path())]);
    assert!(stderr(&o).starts_with("checked 2 files"), "{}", stderr(&o));
}

#[test]
fn validate_config_reports_every_error_with_its_line_and_checks_the_environment() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[daemon]\nmax_open_filez = 3\n\n[[sources]]\nname = \"a\"\ninclude = [\"/x/**/*.jsonl\"]\nformat = \"cobol\"\n\n[[sources]]\nname = \"a\"\ninclude = [\"/y/*.jsonl\"]\n\n[[sinks]]\ntype = \"stdout\"\n\n[[sinks]]\ntype = \"stdout\"\n",
    )
    .unwrap();
    let o = transcriptd(&["validate-config", s(&bad)]);
    assert_eq!(o.status.code(), Some(2));
    let b = bad.display();
    let err = stderr(&o);
    let want = [
        format!("{b}:2: error: `daemon`: unknown field `max_open_filez`"),
        format!("{b}:7: error: `sources[0].format`: unknown format `cobol`"),
        format!("{b}:10: error: `sources[1].name`: `a` names sources[0] too"),
        format!("{b}:16: error: `sinks[1]`: a second `stdout` sink"),
        format!("transcriptd: error: {b}: 4 errors"),
    ];
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), want.len(), "{err}");
    for (l, w) in lines.iter().zip(&want) {
        assert!(l.starts_with(w.as_str()), "{l}\n  wanted {w}");
    }
    let o = transcriptd(&["validate-config", "-o", "json", s(&bad)]);
    let records = json_lines(&o);
    assert_eq!(records.iter().map(|r| r["line"].as_u64().unwrap()).collect::<Vec<_>>(), [2, 7, 10, 16]);

    // --check-env: what `run` would need.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let blocker = d.path().join("a-file");
    std::fs::write(&blocker, "").unwrap();
    let env = d.path().join("env.toml");
    std::fs::write(
        &env,
        format!(
            "[daemon]\nstate_dir = \"{}/state\"\n\n[[sources]]\ninclude = [\"{}/missing/**/*.jsonl\"]\n\n[[sinks]]\ntype = \"prometheus\"\naddress = \"127.0.0.1:{port}\"\n",
            blocker.display(),
            d.path().display()
        ),
    )
    .unwrap();
    let o = transcriptd(&["validate-config", s(&env)]);
    assert_eq!(o.status.code(), Some(0), "the file alone is valid: {}", stderr(&o));
    assert_eq!(stdout(&o), format!("{}: ok (1 source, 5 stages, 1 sink)\n", env.display()));
    let o = transcriptd(&["validate-config", "--check-env", s(&env)]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    let e = env.display();
    assert!(err.contains(&format!("{e}:2: error: `daemon.state_dir`: ")) && err.contains("cannot be created"), "{err}");
    assert!(err.contains(&format!("{e}:5: error: `sources[0].include`: ")) && err.contains("does not exist"), "{err}");
    assert!(err.contains(&format!("{e}:9: error: `sinks[0].address`: 127.0.0.1:{port} cannot be bound")), "{err}");
    drop(taken);
    std::fs::create_dir_all(d.path().join("missing")).unwrap();
    std::fs::write(&env, std::fs::read_to_string(&env).unwrap().replace(&format!("{}/state", blocker.display()), &format!("{}/state", d.path().display())))
        .unwrap();
    let o = transcriptd(&["validate-config", "--check-env", s(&env)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!d.path().join("state").exists(), "nothing is created");
}

#[test]
fn a_dash_reads_standard_input_for_every_verb_that_takes_a_transcript() {
    let t = std::fs::read(data("check/claude-code/0002_orphan_call_at_end.jsonl")).unwrap();
    let from_file = |args: &[&str]| -> Output {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("-.jsonl");
        std::fs::write(&f, &t).unwrap();
        transcriptd(&[args, &[s(&f)]].concat())
    };
    for (args, code) in [
        (vec!["check", "-o", "json"], 0),
        (vec!["orphans", "-o", "json"], 1),
        (vec!["context"], 0),
        (vec!["history"], 0),
        (vec!["usage", "-o", "json"], 0),
        (vec!["report", "-o", "json"], 0),
    ] {
        let o = with_stdin(&[&args[..], &["-"]].concat(), &t);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        assert!(!o.stdout.is_empty(), "{args:?}");
        let f = from_file(&args);
        // The same records, but for the file's name.
        let norm = |o: &Output| {
            stdout(o)
                .lines()
                .map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    let mut v = v;
                    if let Some(o) = v.as_object_mut() {
                        o.remove("file");
                    }
                    v.to_string()
                })
                .collect::<Vec<_>>()
        };
        if args[0] != "report" {
            assert_eq!(norm(&o), norm(&f), "{args:?}");
        }
    }
    let ds = std::fs::read(data("dataset/openai-dataset/0002_issue_example.jsonl")).unwrap();
    let o = with_stdin(&["stats", "-o", "json", "-"], &ds);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json_lines(&o)[0]["file"], "-");

    // repair: the repaired stream on stdout, the removed lines in the named rejects file,
    // exactly what `repair --out` writes for the same bytes.
    let d = tempfile::tempdir().unwrap();
    let input = std::fs::read(data("check/claude-code/0004_orphan_result.jsonl")).unwrap();
    put(&d.path().join("in/x.jsonl"), &input);
    let o = transcriptd(&["repair", "--force", "--no-summary", s(&d.path().join("in/x.jsonl")), "--out", s(&d.path().join("out"))]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rejects = d.path().join("r.jsonl");
    let o = with_stdin(&["repair", "-", "--rejects", s(&rejects)], &input);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(o.stdout, std::fs::read(d.path().join("out/x.jsonl")).unwrap());
    assert_eq!(std::fs::read(&rejects).unwrap(), std::fs::read(d.path().join("out/x.rejects.jsonl")).unwrap());
    assert!(stderr(&o).starts_with("-: repaired ("), "the report goes to stderr: {}", stderr(&o));
    // Without --rejects, nothing is repaired: what is removed must go somewhere.
    let o = with_stdin(&["repair", "-"], &input);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("needs --rejects FILE"), "{}", stderr(&o));
}

/// Issue 30.7: every count of a summary adds up with the others and with the files.
#[test]
fn summaries_add_up_and_a_strict_stop_is_a_counted_finding_in_json_too() {
    let d = tempfile::tempdir().unwrap();
    // A torn last line is one of the lines counted, and its bytes are among the bytes.
    let torn = d.path().join("torn.jsonl");
    put(&torn, "{\"role\":\"user\",\"content\":\"hi\"}\n{\"role\":\"assistant\",\"content\":\"ok\"}\n{\"role\":\"user\",\"con");
    let o = transcriptd(&["check", s(&torn)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(no_time(&stderr(&o)).starts_with("checked 1 file (3 lines, 86 B) in Ts: 1 error, 0 warnings in 1 file;"), "{}", stderr(&o));
    // A warning about one file is in that one file.
    let o = transcriptd(&["check", s(&data("check/claude-code/0007_empty_assistant_turn_spans_split_lines.jsonl"))]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stderr(&o).contains(": 0 errors, 1 warning in 1 file\n"), "{}", stderr(&o));

    // --strict -o json: the stop is the file's finding on stdout as a record, and the summary
    // counts the error it is (it said 0 errors in 0 files, and wrote no JSON).
    let bad = d.path().join("bad.jsonl");
    put(&bad, "{\"role\":\"user\",\"content\":\"hi\"}\nnot json\n{\"role\":\"assistant\",\"content\":\"ok\"}\n");
    let o = transcriptd(&["check", "--strict", "-o", "json", s(&bad)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let records = json_lines(&o);
    assert_eq!(records.len(), 1, "{records:?}");
    let r = &records[0];
    assert_eq!(
        (r["file"].as_str(), r["line"].as_u64(), r["kind"].as_str(), r["severity"].as_str()),
        (Some(s(&bad)), Some(2), Some("malformed_line"), Some("error")),
        "{r}"
    );
    let err = stderr(&o);
    assert!(err.contains(": 1 error, 0 warnings in 1 file; --strict stopped at a line that cannot be read in 1 file;"), "{err}");
    assert!(err.contains("transcriptd: error: --strict: 1 file has a line that cannot be read") && !err.contains("0 errors"), "{err}");
    // In text the stop stays on stderr, once.
    let o = transcriptd(&["check", "--strict", s(&bad)]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(2), String::new()));
    assert_eq!(stderr(&o).matches(":2: error: malformed_line: ").count(), 1, "{}", stderr(&o));

    // show: one result is `1 result`.
    let home = d.path().join("home");
    put_fixture("check/claude-code/0004_orphan_result.jsonl", &home.join(".claude/projects/-w/4c2d0000-1111-4222-8333-444455556666.jsonl"));
    let o = transcriptd_home(&home, &["show", "4c2d"]);
    assert!(stdout(&o).contains("\ntool calls   0 (1 result)\n"), "{}", stdout(&o));

    // repair's summary gives the input's size, in place as with --out (in place it gave the
    // repaired file's).
    let input = std::fs::read(data("check/claude-code/0002_orphan_call_at_end.jsonl")).unwrap();
    let size = format!("repair of 1 file ({} B) in Ts: ", input.len());
    let f = d.path().join("in/a.jsonl");
    put(&f, &input);
    let o = transcriptd(&["repair", "--force", "--out", s(&d.path().join("out")), s(&f)]);
    assert!(no_time(&stderr(&o)).starts_with(&size), "{}", stderr(&o));
    let o = transcriptd(&["repair", "--force", "--in-place", s(&f)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::metadata(&f).unwrap().len() > input.len() as u64, "repaired: a result inserted");
    assert!(no_time(&stderr(&o)).starts_with(&size), "{}", stderr(&o));
}

/// Issue 30.8: repair does not trip on its own work, and its plan reads as text.
#[test]
fn a_second_repair_in_place_says_clean_and_the_dry_run_says_what_it_inserts_in_words() {
    let d = tempfile::tempdir().unwrap();
    let input = std::fs::read(data("check/claude-code/0002_orphan_call_at_end.jsonl")).unwrap();
    let f = d.path().join("a.jsonl");
    put(&f, &input);
    set_mtime(&f, 1_600_000_000);

    // The dry run, in text: one line per action, the text it inserts in full; no JSON.
    let interrupted = "Tool call was interrupted and did not complete; its effects, if any, are unknown. (Result inserted by transcriptd repair.)";
    let o = transcriptd(&["repair", "--dry-run", "--no-summary", s(&f)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("{}:2: plan: orphan_call: insert after this line an error result for call `t1` (Bash): \"{interrupted}\"\n", f.display()));
    // In JSON, `text` is the text inserted, not a name for it.
    let o = transcriptd(&["repair", "--dry-run", "-o", "json", "--no-summary", s(&f)]);
    let plan = json_lines(&o);
    assert_eq!((plan.len(), plan[0]["action"].as_str(), plan[0]["text"].as_str()), (1, Some("insert"), Some(interrupted)), "{plan:?}");

    // The repair inserts that text; a second run right after it (its output is new, well
    // within --min-idle) finds the file clean instead of skipping it.
    let o = transcriptd(&["repair", "--in-place", s(&f)]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let repaired = std::fs::read(&f).unwrap();
    assert!(String::from_utf8_lossy(&repaired).contains(interrupted));
    for args in [vec!["repair", "--in-place"], vec!["repair", "--dry-run"]] {
        let o = transcriptd(&[&args[..], &[s(&f)]].concat());
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}{}", stdout(&o), stderr(&o));
        assert_eq!(stdout(&o), "", "{args:?}");
        assert!(stderr(&o).contains(": 1 clean, 0 "), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("1 skipped"), "{args:?}: {}", stderr(&o));
    }
    assert_eq!(std::fs::read(&f).unwrap(), repaired, "a clean file is not rewritten");
    // A file modified a moment ago that needs an edit is still left alone, and the dry run
    // says so in text.
    put(&f, &input);
    let o = transcriptd(&["repair", "--dry-run", "--no-summary", s(&f)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with(&format!("{}: warning: skipped: modified ", f.display())), "{}", stdout(&o));
    let o = transcriptd(&["repair", "--in-place", s(&f)]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(std::fs::read(&f).unwrap(), input);
}

/// Issue 30.11: serde_json's parser jargon does not reach users; a broken meta sidecar is said
/// in words, with where.
#[test]
fn a_meta_sidecar_that_is_not_json_is_said_in_plain_words() {
    let d = tempfile::tempdir().unwrap();
    put(&d.path().join("abcd1234.jsonl"), "{\"role\":\"user\",\"content\":\"hi\"}\n");
    put(&d.path().join("abcd1234.meta.json"), "{\"session_id\": tx}\n");
    let o = transcriptd(&["show", "abcd", "--root", s(d.path())]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("abcd1234.meta.json: meta sidecar cannot be parsed: a word JSON does not have (it has true, false and null) (line 1, column 17)"),
        "{err}"
    );
    assert!(!err.contains("expected ident"), "{err}");
}
