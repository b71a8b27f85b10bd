//! `transcriptd doctor` with real processes: a scratch HOME holding Claude Code's project
//! directory for a working directory (a clean and a broken session) and a Codex rollout of the
//! same directory, beside sessions of other directories that must not be listed.

use super::support::{data, put, set_mtime, stderr, stdout};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const CLEAN: &str = "11111111-1111-4111-8111-111111111111";
const BROKEN: &str = "22222222-2222-4222-8222-222222222222";
const CODEX: &str = "01a233d3-6db3-75b1-b5c6-14c69fc22c64";

struct Project {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    /// The working directory, canonical (its name has a space and a dot).
    cwd: PathBuf,
    clean: PathBuf,
    broken: PathBuf,
    codex: PathBuf,
}

/// Claude Code's name for a short directory: every character not an ASCII letter or digit
/// becomes `-` (the long-name case is the unit test of `sessions::project`).
fn encoded(dir: &Path) -> String {
    dir.to_str().unwrap().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect()
}

fn ago(secs: u64) -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() - secs
}

/// A Codex rollout fixture with its `session_meta` naming `cwd` as its working directory.
fn rollout_in(fixture: &str, cwd: &Path) -> String {
    let text = std::fs::read_to_string(data(fixture)).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    let mut meta: serde_json::Value = serde_json::from_str(first).unwrap();
    meta["payload"]["cwd"] = cwd.to_str().unwrap().into();
    format!("{meta}\n{rest}")
}

fn project() -> Project {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let cwd = tmp.path().join("my app.v2");
    std::fs::create_dir_all(&cwd).unwrap();
    let cwd = std::fs::canonicalize(&cwd).unwrap();
    let projects = home.join(".claude/projects");
    let dir = projects.join(encoded(&cwd));
    let clean = dir.join(format!("{CLEAN}.jsonl"));
    let broken = dir.join(format!("{BROKEN}.jsonl"));
    put(&clean, std::fs::read(data("agents/sessions/claude-2.1.332/echo.jsonl")).unwrap());
    // A second result for one call: Claude Code sends the first only, so the second is lost.
    put(&broken, std::fs::read(data("check/claude-code/0005_duplicate_result.jsonl")).unwrap());
    // A subagent's transcript and another directory's session are not this directory's sessions.
    put(&dir.join(format!("{CLEAN}/subagents/agent-a1.jsonl")), std::fs::read(data("check/claude-code/0005_duplicate_result.jsonl")).unwrap());
    put(
        &projects.join(format!("{}-other/33333333-3333-4333-8333-333333333333.jsonl", encoded(&cwd))),
        std::fs::read(data("check/claude-code/0005_duplicate_result.jsonl")).unwrap(),
    );
    let day = home.join(".codex/sessions/2026/12/01");
    let codex = day.join(format!("rollout-2026-12-01T22-57-04-{CODEX}.jsonl"));
    // Killed mid-tool: a call without its output at the end.
    put(&codex, rollout_in("agents/sessions/codex-0.171.0/killed-mid-tool.jsonl", &cwd));
    put(
        &day.join("rollout-2026-12-01T22-57-00-01a233d3-5f0f-74f2-97e2-1c92cdf54b33.jsonl"),
        rollout_in("agents/sessions/codex-0.171.0/killed-mid-tool.jsonl", &cwd.join("sub")),
    );
    set_mtime(&broken, ago(100));
    set_mtime(&codex, ago(500));
    set_mtime(&clean, ago(7200));
    Project { _tmp: tmp, home, cwd, clean, broken, codex }
}

impl Project {
    fn doctor_in(&self, dir: &Path, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_transcriptd"))
            .arg("doctor")
            .args(args)
            .current_dir(dir)
            .env("HOME", &self.home)
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("CODEX_HOME")
            .env_remove("CLAUDE_CODE_PROJECT_DIR_NAME")
            .env_remove("NO_COLOR")
            .output()
            .unwrap()
    }

    fn doctor(&self, args: &[&str]) -> Output {
        self.doctor_in(&self.cwd, args)
    }
}

fn check_exit(file: &Path) -> Option<i32> {
    Command::new(env!("CARGO_BIN_EXE_transcriptd")).arg("check").arg(file).output().unwrap().status.code()
}

fn backup(file: &Path) -> PathBuf {
    PathBuf::from(format!("{}.orig", file.display()))
}

#[test]
fn lists_the_directorys_sessions_newest_first_with_whether_each_resumes() {
    let p = project();
    let before = std::fs::read(&p.broken).unwrap();
    let o = p.doctor(&[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "only this directory's three sessions, one line each:\n{out}");
    assert!(lines[0].starts_with(&format!("claude-code  {BROKEN}")), "{out}");
    assert!(lines[0].ends_with(" 1m ago  resumes but drops: the second result t1 at line 4 (duplicate_result)"), "{out}");
    assert!(lines[1].starts_with(&format!("codex        {CODEX}")), "{out}");
    // Killed mid-tool: Codex answers the call "aborted" on resume, and nothing of the file is
    // left out.
    assert!(lines[1].contains(" 8m ago  resumes, mending: the call call_oracle"), "{out}");
    assert!(lines[1].ends_with("left without a result at line 12 (orphan_call)"), "{out}");
    assert!(lines[2].starts_with(&format!("claude-code  {CLEAN}")) && lines[2].ends_with(" 2h ago  resumes"), "{out}");
    let err = stderr(&o);
    assert!(err.contains("3 sessions of "), "{err}");
    assert!(err.contains("2 resume, 0 will be refused, 1 resumes but loses part of its history"), "{err}");
    assert!(err.contains("quit the agent, run `transcriptd doctor --fix`"), "{err}");
    // Nothing written without --fix.
    assert_eq!(std::fs::read(&p.broken).unwrap(), before);
    assert!(!backup(&p.broken).exists());

    // The directory named, from elsewhere and by another spelling, is the same directory.
    let parent = p.cwd.parent().unwrap();
    let o = p.doctor_in(parent, &["./my app.v2/", "-o", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let records = super::support::json_lines(&o);
    let got: Vec<(&str, &str, &str)> =
        records.iter().map(|r| (r["agent"].as_str().unwrap(), r["id"].as_str().unwrap(), r["verdict"].as_str().unwrap())).collect();
    assert_eq!(got, [("claude-code", BROKEN, "drops"), ("codex", CODEX, "resumes"), ("claude-code", CLEAN, "resumes")]);
    assert_eq!(records[0]["drops"][0]["kind"], "duplicate_result");
    assert_eq!(records[0]["drops"][0]["line"], 4);
    assert_eq!(records[0]["drops"][0]["on_resume"], "on resume Claude Code does not send it");
    assert_eq!(records[1]["mends"][0]["kind"], "orphan_call");
    assert_eq!(records[1]["mends"][0]["severity"], "warning");
    assert!(records[2].get("mends").is_none(), "{}", records[2]);
    assert_eq!(records[0]["file"], p.broken.to_str().unwrap());
    assert_eq!(records[0]["resume_command"], format!("cd '{}' && claude --resume {BROKEN}", p.cwd.display()));

    // -q: the exit status alone.
    let o = p.doctor(&["-q"]);
    assert_eq!((o.status.code(), o.stdout.is_empty(), o.stderr.is_empty()), (Some(1), true, true));

    // A block the API refuses (an image over its limits): the session will be refused.
    let refused = p.broken.with_file_name("33333333-3333-4333-8333-333333333333.jsonl");
    put(&refused, std::fs::read(data("check/claude-code/0024_api_rules_on_the_resumed_request.jsonl")).unwrap());
    let o = p.doctor(&[]);
    let out = stdout(&o);
    assert!(
        out.lines().any(|l| l.starts_with("claude-code  33333333-3333-4333-8333-333333333333") && l.contains(" will be refused: line 6: image_too_large: ")),
        "{out}"
    );
    assert!(stderr(&o).contains("4 sessions of "), "{}", stderr(&o));
}

#[test]
fn fix_repairs_in_place_checks_again_and_prints_the_resume_command() {
    let p = project();
    let (broken, codex, clean) = (std::fs::read(&p.broken).unwrap(), std::fs::read(&p.codex).unwrap(), std::fs::read(&p.clean).unwrap());
    let o = p.doctor(&["--fix"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "every session resumes now:\n{out}{}", stderr(&o));
    assert!(out.contains(&format!("  resume: cd '{}' && claude --resume {BROKEN}\n", p.cwd.display())), "{out}");
    assert_eq!(out.matches("  now: resumes\n").count(), 1, "{out}");
    assert!(
        stderr(&o).contains(" as found: 2 resume, 0 will be refused, 1 resumes but loses part of its history; fixed 1 of 1; every one resumes now"),
        "{}",
        stderr(&o)
    );
    // The repaired file checks clean; the backup holds the original bytes; what was removed is in
    // the rejects file.
    assert_eq!(check_exit(&p.broken), Some(0));
    assert_eq!(std::fs::read(backup(&p.broken)).unwrap(), broken);
    assert_ne!(std::fs::read(&p.broken).unwrap(), broken);
    assert!(p.broken.with_file_name(format!("{BROKEN}.rejects.jsonl")).is_file());
    // The sessions that resume with their whole history are left alone: the clean one, and the
    // Codex session killed mid-tool (Codex answers its open call on resume).
    for (file, original) in [(&p.clean, &clean), (&p.codex, &codex)] {
        assert_eq!(&std::fs::read(file).unwrap(), original, "{}", file.display());
        assert!(!backup(file).exists());
    }
    // And doctor now says so; the backups and rejects files are not sessions.
    let o = p.doctor(&[]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o).lines().filter(|l| l.ends_with(" resumes")).count(), 2, "{}", stdout(&o));
    assert_eq!(stdout(&o).lines().filter(|l| l.contains(" resumes, mending: ")).count(), 1, "{}", stdout(&o));
}

#[test]
fn fix_leaves_a_session_a_process_holds_open_for_writing() {
    let p = project();
    let before = std::fs::read(&p.broken).unwrap();
    // The agent still running: a process with the transcript open for appending.
    let mut holder = Command::new("sh").arg("-c").arg("exec 3>>\"$0\"; exec sleep 30").arg(&p.broken).spawn().unwrap();
    let ino = std::fs::metadata(&p.broken).unwrap().ino();
    let fd = PathBuf::from(format!("/proc/{}/fd/3", holder.id()));
    for _ in 0..500 {
        if std::fs::metadata(&fd).is_ok_and(|m| m.ino() == ino)
            && std::fs::read_to_string(format!("/proc/{}/comm", holder.id())).is_ok_and(|c| c.trim() == "sleep")
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = p.doctor(&["--fix"]);
    holder.kill().unwrap();
    holder.wait().unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{}", stderr(&o));
    assert!(
        out.contains(&format!("  not fixed: {} is held open for writing by pid {} (sleep) fd 3: quit the agent", p.broken.display(), holder.id())),
        "{out}"
    );
    assert_eq!(std::fs::read(&p.broken).unwrap(), before, "not touched");
    assert!(!backup(&p.broken).exists());
    assert_eq!(check_exit(&p.codex), Some(0), "the Codex session resumes as it is");
    assert!(stderr(&o).contains("1 held open for writing"), "{}", stderr(&o));
}

#[test]
fn no_session_says_where_it_looked_and_the_agents_own_variables_move_the_places() {
    let p = project();
    let empty = p.cwd.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = p.doctor_in(&empty, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
    let err = stderr(&o);
    assert!(err.contains("no sessions of "), "{err}");
    assert!(err.contains(&format!("{}/.claude/projects/{} (absent)", p.home.display(), encoded(&empty))), "{err}");

    // CLAUDE_CONFIG_DIR and CODEX_HOME: where the agents then keep their sessions.
    let moved = p.home.parent().unwrap().join("elsewhere");
    std::fs::create_dir_all(&moved).unwrap();
    std::fs::rename(p.home.join(".claude"), moved.join("claude")).unwrap();
    std::fs::rename(p.home.join(".codex"), moved.join("codex")).unwrap();
    let run = |env: &[(&str, &Path)]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_transcriptd"));
        c.args(["doctor", "-o", "json"]).current_dir(&p.cwd).env("HOME", &p.home).env_remove("CLAUDE_CODE_PROJECT_DIR_NAME");
        c.env_remove("CLAUDE_CONFIG_DIR").env_remove("CODEX_HOME");
        for (k, v) in env {
            c.env(k, v);
        }
        super::support::json_lines(&c.output().unwrap()).len()
    };
    assert_eq!(run(&[]), 0);
    assert_eq!(run(&[("CLAUDE_CONFIG_DIR", &moved.join("claude")), ("CODEX_HOME", &moved.join("codex"))]), 3);
}

#[test]
fn a_long_directory_is_found_under_the_cut_name_and_under_the_whole_one_older_versions_gave_it() {
    let p = project();
    // Over 200 characters once encoded, under 255 (a file name's limit).
    let long = p.home.parent().unwrap().join("d".repeat(100)).join("e".repeat(100));
    std::fs::create_dir_all(&long).unwrap();
    let long = std::fs::canonicalize(&long).unwrap();
    let names = transcriptd::sessions::project::claude_project_names(long.to_str().unwrap());
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(names[1], encoded(&long));
    assert!(names[0].len() > 200 && names[0].starts_with(&names[1][..200]) && names[0] != names[1]);
    let projects = p.home.join(".claude/projects");
    put(&projects.join(&names[0]).join(format!("{CLEAN}.jsonl")), std::fs::read(&p.clean).unwrap());
    put(&projects.join(&names[1]).join(format!("{BROKEN}.jsonl")), std::fs::read(&p.broken).unwrap());
    let o = p.doctor_in(&long, &["-o", "json"]);
    let ids: Vec<String> = super::support::json_lines(&o).iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ids.len(), 2, "{ids:?} {}", stderr(&o));
    assert!(ids.contains(&CLEAN.to_owned()) && ids.contains(&BROKEN.to_owned()), "{ids:?}");
}

#[test]
fn fix_says_so_when_no_edit_mends_what_the_api_refuses() {
    let p = project();
    // A request over the API's 32 MB: repair has no edit for it (it names the largest lines).
    let refused = p.broken.with_file_name("44444444-4444-4444-8444-444444444444.jsonl");
    let big = "x".repeat(33 << 20);
    let line = |uuid: &str, parent: serde_json::Value, ty: &str, content: serde_json::Value, t: &str| {
        serde_json::json!({"parentUuid": parent, "isSidechain": false, "type": ty, "uuid": uuid, "sessionId": "44444444-4444-4444-8444-444444444444",
            "timestamp": t, "message": {"role": ty, "content": content}})
        .to_string()
    };
    let text = format!(
        "{}\n{}\n",
        line("a1", serde_json::Value::Null, "user", serde_json::json!(big), "2026-01-01T00:00:00.000Z"),
        line("a2", serde_json::json!("a1"), "assistant", serde_json::json!([{"type": "text", "text": "ok"}]), "2026-01-01T00:00:01.000Z")
    );
    put(&refused, text.into_bytes());
    let before = std::fs::read(&refused).unwrap();
    let o = p.doctor(&["--fix"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{}", stderr(&o));
    let at = out.find("44444444-4444-4444-8444-444444444444").expect("listed");
    let block: Vec<&str> = out[at..].lines().take_while(|l| l.starts_with("  ") || l.starts_with("44444444")).collect();
    assert!(block[0].contains("will be refused: line 1: request_too_large: "), "{out}");
    assert_eq!(block[1], "  not fixed: repair has no edit that mends it; the file is as it was", "{out}");
    assert!(block[2].starts_with("  not repaired: line 1: request_too_large: "), "{out}");
    assert!(!block.iter().any(|l| l.starts_with("  resume: ")), "{out}");
    assert_eq!(std::fs::read(&refused).unwrap(), before);
    assert!(!backup(&refused).exists());
    // The others were fixed all the same.
    assert_eq!(check_exit(&p.broken), Some(0));
    assert!(stderr(&o).contains("fixed 1 of 2, 1 still will not resume whole"), "{}", stderr(&o));
}

/// An image over the API's limits and an unsigned thinking block, which the API refuses, are
/// mended by `doctor --fix` (the image becomes a placeholder, the block goes; the originals are
/// in the rejects), and the session then resumes.
#[test]
fn fix_mends_an_image_over_the_limits_and_an_unsigned_thinking_block() {
    let p = project();
    let refused = p.broken.with_file_name("44444444-4444-4444-8444-444444444444.jsonl");
    put(&refused, std::fs::read(data("check/claude-code/0024_api_rules_on_the_resumed_request.jsonl")).unwrap());
    let o = p.doctor(&["--fix"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    let at = out.find("44444444-4444-4444-8444-444444444444").expect("listed");
    let block: Vec<&str> = out[at..].lines().take_while(|l| l.starts_with("  ") || l.starts_with("44444444")).collect();
    assert!(block[0].contains("will be refused: line 6: image_too_large: "), "{out}");
    assert!(block.iter().any(|l| *l == "  now: resumes"), "{out}");
    assert!(block.iter().any(|l| l.starts_with("  resume: ")), "{out}");
    assert!(backup(&refused).exists());
    assert_eq!(check_exit(&refused), Some(0));
}

/// The real Claude Code (2.1.332, the pinned peer) started in a working directory whose
/// encoded name is over 200 characters: doctor finds the session it writes, in the directory it
/// chose. The agent runs in a network namespace with no provider: it writes the prompt, fails
/// to connect and is killed.
#[test]
fn the_real_claude_code_files_a_long_directorys_session_where_doctor_looks() {
    let rel = "claude-code-2.1.332/node_modules/@anthropic-ai/claude-code-linux-x64/claude";
    let peer = std::env::var_os("TRANSCRIPTD_PEER_DIR").map(PathBuf::from).unwrap_or_else(|| super::support::root().join("target/peer"));
    let bin = std::env::var_os("TRANSCRIPTD_CLAUDE").map(PathBuf::from).unwrap_or_else(|| peer.join(rel));
    if !super::support::peer_present(&format!("Claude Code 2.1.332 ($TRANSCRIPTD_CLAUDE or $TRANSCRIPTD_PEER_DIR/{rel})"), bin.is_file()) {
        return;
    }
    let ns = ["--net", "--map-root-user"];
    let ns: &[&str] = if Command::new("unshare").args(ns).arg("true").status().is_ok_and(|s| s.success()) {
        &ns
    } else if Command::new("unshare").args(["--net", "true"]).status().is_ok_and(|s| s.success()) {
        &ns[..1]
    } else {
        assert!(std::env::var_os("TRANSCRIPTD_REQUIRE_PEERS").is_none(), "cannot make a network namespace (unshare --net)");
        eprintln!("skipped: cannot make a network namespace (unshare --net)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let cwd = tmp.path().join("d".repeat(150)).join("é".repeat(50)).join("😀app");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let cwd = std::fs::canonicalize(&cwd).unwrap();
    let mut agent = Command::new("unshare")
        .args(ns)
        .arg(&bin)
        .args(["-p", "hello", "--max-turns", "1"])
        .current_dir(&cwd)
        .env("HOME", &home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let projects = home.join(".claude/projects");
    let session = (0..600).find_map(|_| {
        let found = super::support::jsonl_files(&projects).into_iter().find(|f| std::fs::metadata(f).is_ok_and(|m| m.len() > 0));
        if found.is_none() {
            std::thread::sleep(Duration::from_millis(100));
        }
        found
    });
    agent.kill().unwrap();
    agent.wait().unwrap();
    let session = session.expect("Claude Code wrote a session within a minute");
    let names = transcriptd::sessions::project::claude_project_names(cwd.to_str().unwrap());
    assert!(names[0].len() > 200, "{}", names[0]);
    assert_eq!(session.parent().unwrap().file_name().unwrap().to_str().unwrap(), names[0], "the directory Claude Code chose");
    let id = session.file_stem().unwrap().to_str().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_transcriptd"))
        .args(["doctor", "-o", "json"])
        .current_dir(&cwd)
        .env("HOME", &home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .output()
        .unwrap();
    let records = super::support::json_lines(&o);
    assert_eq!(records.len(), 1, "{}", stderr(&o));
    assert_eq!(records[0]["id"], id);
    assert_eq!(records[0]["agent"], "claude-code");
}
