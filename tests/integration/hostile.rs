//! Hostile content and hostile peers (issue 28): a transcript whose text, model name, tool
//! name, call id and file name carry terminal controls (OSC 0 sets the window title, OSC 52
//! writes the clipboard, CSI 2J clears the screen, CR moves the cursor back, a newline in a
//! file name forges a finding line, C1 controls U+0080–U+009F act as ESC on some terminals) is
//! shown by every text verb on a real terminal (a pty: `script`; `top` in tmux) with each of
//! them as a visible escape (`\x1b`, `\r`, `\n`, `\u{9b}`) and none of them raw. Token counts
//! of `1e85` saturate. A peer on the daemon's port that sends an endless event, or an endless
//! body, does not grow `tap` or `top` without bound.

use super::support::{put, stdout, transcriptd};
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Every control, with a marker after each so a raw one can be told from the terminal's own
/// (a pty writes `\r\n` for each `\n`; `top` draws with CSI).
const EVIL: &str = "\x1b]0;TITLE\x07 \x1b]52;c;Y2xpcA==\x07 \x1b[2JCLEAR \rCRMARK \u{9b}31mCSI \u{85}NEL";
/// A file name with all of that and a newline that would start a forged finding line.
const EVIL_NAME: &str = "s\x1b]0;TITLE\x07\rCRMARK\u{9b}31mCSI\nFORGED:1: error: forged";

/// What must never reach the terminal.
const RAW: [&str; 8] = ["\x1b]0;", "\x1b]52;", "\x1b[2JCLEAR", "\rCRMARK", "\u{9b}", "\u{85}", "\nFORGED", "\x07"];

/// How each shows instead.
const VISIBLE_TEXT: [&str; 6] = ["\\x1b]0;TITLE\\x07", "\\x1b]52;c;Y2xpcA==\\x07", "\\x1b[2JCLEAR", "\\rCRMARK", "\\u{9b}31mCSI", "\\u{85}NEL"];
const VISIBLE_NAME: [&str; 4] = ["\\x1b]0;TITLE\\x07", "\\rCRMARK", "\\u{9b}31mCSI", "\\nFORGED:1: error: forged"];

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A Claude Code projects root with one session named [`EVIL_NAME`]: a prompt, an assistant
/// turn of a hostile model with a hostile text and a call to a hostile tool with a hostile id,
/// left without its result (an orphan call: `check` and `orphans` name the tool and the id), and
/// a torn last line (an error, so that `report` lists the file among those with errors).
fn hostile_root(dir: &Path) -> (PathBuf, PathBuf) {
    let root = dir.join("projects");
    let file = root.join("-work-proj").join(format!("{EVIL_NAME}.jsonl"));
    let base =
        |uuid: &str, parent: Option<&str>| json!({"uuid": uuid, "parentUuid": parent, "sessionId": "s1", "cwd": "/work", "timestamp": "2026-01-01T00:00:00Z"});
    let mut user = base("u1", None);
    user["type"] = json!("user");
    user["message"] = json!({"role": "user", "content": format!("prompt {EVIL}")});
    let mut asst = base("a1", Some("u1"));
    asst["type"] = json!("assistant");
    asst["message"] = json!({
        "id": "msg_1", "role": "assistant", "model": format!("model {EVIL}"),
        "content": [
            {"type": "text", "text": format!("answer {EVIL}")},
            {"type": "tool_use", "id": format!("toolu_{EVIL}"), "name": format!("tool {EVIL}"), "input": {"command": format!("rm {EVIL}")}}
        ],
        "usage": {"input_tokens": 10, "output_tokens": 5}
    });
    put(&file, format!("{user}\n{asst}\n{{\"type\":\"user\""));
    (root, file)
}

/// Runs `args` (the binary first) on a pseudo-terminal (`script`), with colour as a terminal
/// gets it; returns everything the terminal was sent. Arguments go through the environment,
/// so no shell reads them.
fn on_a_pty(args: &[&str]) -> String {
    let mut cmd = String::from("\"$BIN\"");
    let mut c = Command::new("script");
    for (i, a) in args.iter().enumerate() {
        cmd.push_str(&format!(" \"$ARG{i}\""));
        c.env(format!("ARG{i}"), a);
    }
    c.args(["-qec", &cmd, "/dev/null"]).stdin(Stdio::null()).env("BIN", env!("CARGO_BIN_EXE_transcriptd")).env_remove("NO_COLOR").env("TERM", "xterm");
    let o = c.output().expect("script (bsdutils) is installed (.ci/run)");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn assert_safe(verb: &str, shown: &str, visible: &[&str]) {
    for raw in RAW {
        assert!(!shown.contains(raw), "{verb}: {raw:?} reached the terminal raw:\n{shown:?}");
    }
    for v in visible {
        assert!(shown.contains(v), "{verb}: {v:?} is not shown:\n{shown:?}");
    }
}

#[test]
fn every_text_verb_shows_controls_from_transcripts_and_file_names_as_visible_escapes() {
    let d = tempfile::tempdir().unwrap();
    let (root, file) = hostile_root(d.path());
    let dir = root.join("-work-proj");
    let all: Vec<&str> = VISIBLE_TEXT.iter().chain(&VISIBLE_NAME).copied().collect();
    let cases: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![
        // The orphan call's finding: the file name, the tool and the call id.
        ("check", vec!["check", s(&dir)], all.clone()),
        ("orphans", vec!["orphans", "--grace", "0s", s(&dir)], all.clone()),
        ("report", vec!["report", s(&dir)], VISIBLE_TEXT.iter().chain(&VISIBLE_NAME).copied().collect()),
        ("usage", vec!["usage", "--per-file", s(&dir)], all.clone()),
        ("history -o text", vec!["history", "-o", "text", s(&file)], VISIBLE_TEXT.to_vec()),
        ("show", vec!["show", "s", "--root", s(&root)], VISIBLE_NAME.to_vec()),
        ("show --history", vec!["show", "s", "--root", s(&root), "--history"], VISIBLE_TEXT.to_vec()),
        ("sessions list", vec!["sessions", "list", s(&root)], VISIBLE_NAME.to_vec()),
    ];
    for (verb, args, visible) in &cases {
        let shown = on_a_pty(&[&["--color", "always"], &args[..]].concat());
        assert_safe(verb, &shown, visible);
        // JSON output is left as it is: JSON escapes C0 itself, and a reader gets the bytes.
        if *verb != "show --history" && *verb != "history -o text" {
            let o = transcriptd(&[&args[..], &["-o", "json"]].concat());
            assert!(stdout(&o).contains("\\u001b]0;TITLE\\u0007"), "{verb} -o json: {}", stdout(&o));
        }
    }
    // stderr diagnostics: an error naming a path, a warning of the walk, and a tracing log
    // (`--log-format text`) naming a path (a FIFO among the sessions is skipped, logged).
    let missing = d.path().join(format!("missing {EVIL_NAME}.jsonl"));
    assert_safe("error", &on_a_pty(&["check", s(&missing)]), &VISIBLE_NAME);
    let fifo_root = d.path().join("fifo-root");
    let fifo = fifo_root.join("-p").join(format!("{EVIL_NAME}.jsonl"));
    std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let warned = on_a_pty(&["check", s(&fifo_root)]);
    assert!(warned.contains("warning"), "{warned:?}");
    assert_safe("warning", &warned, &VISIBLE_NAME);
    let logged = on_a_pty(&["--log-format", "text", "sessions", "list", s(&fifo_root)]);
    assert!(logged.contains("not a regular file"), "{logged:?}");
    assert_safe("tracing log", &logged, &VISIBLE_NAME);
}

/// A [`hostile_peer.py`](peers/hostile_peer.py) serving `mode` from `dir`: the child and its port.
struct Peer(Child, u16);

impl Peer {
    fn start(mode: &str, dir: &Path) -> Peer {
        let mut c = Command::new("python3")
            .arg(super::support::root().join("tests/integration/peers/hostile_peer.py"))
            .args([mode, s(dir)])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 is installed (.ci/run)");
        let mut line = String::new();
        BufReader::new(c.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().parse().unwrap();
        Peer(c, port)
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.1)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What the records peer serves: a finding and a record of another type whose file, message,
/// call and reason carry [`EVIL`]; a model and a file of such names in `/metrics`, `/stats`.
fn hostile_peer_files(dir: &Path) {
    let file = format!("/w/{EVIL_NAME}.jsonl");
    let finding = json!({"time": format!("t{EVIL}"), "type": "finding", "file": file, "line": 2, "kind": "orphan_call", "severity": "error", "message": format!("call to `tool {EVIL}` [toolu_{EVIL}]")});
    let closed = json!({"time": "2026-01-01T00:00:00Z", "type": "file_closed", "file": file, "reason": format!("gone {EVIL}")});
    put(&dir.join("records.jsonl"), format!("{finding}\n{closed}\n"));
    // Prometheus escapes only `\`, `"` and newlines in label values.
    let model = format!("model {EVIL}").replace('\n', "\\n");
    put(&dir.join("metrics.txt"), format!("transcriptd_tokens_total{{model=\"{model}\",type=\"input\"}} 1000\ntranscriptd_files_watched 1\n"));
    let stats = json!({"time_ms": 1, "files": [{"path": file, "format": "claude-code", "size": 10, "offset": 10, "lag": 0, "open": true, "pending": 0, "findings": 1}]});
    put(&dir.join("stats.json"), stats.to_string());
}

#[test]
fn tap_shows_controls_from_the_daemon_as_visible_escapes() {
    let d = tempfile::tempdir().unwrap();
    hostile_peer_files(d.path());
    let peer = Peer::start("records", d.path());
    let shown = on_a_pty(&["tap", "--addr", &peer.addr()]);
    assert!(shown.contains("file_closed"), "{shown:?}");
    assert_safe("tap", &shown, &VISIBLE_TEXT.iter().chain(&VISIBLE_NAME).copied().collect::<Vec<_>>());
}

struct Tmux(String);

impl Tmux {
    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux").arg("-L").arg(&self.0).args(args).output().expect("tmux is installed (.ci/run installs it)")
    }

    fn capture(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    f()
}

/// `top` (80×24 is too narrow for the names: 200 columns) in tmux against `addr`; what it sent
/// the terminal raw goes to `raw` (`pipe-pane`).
fn top_in_tmux(name: &str, addr: &str, raw: &Path) -> Tmux {
    let tmux = Tmux(format!("transcriptd-{name}-{}", std::process::id()));
    let command = format!("exec {} top --addr {addr}", env!("CARGO_BIN_EXE_transcriptd"));
    assert!(tmux.cmd(&["new-session", "-d", "-s", "top", "-x", "200", "-y", "30", &command]).status.success());
    assert!(tmux.cmd(&["pipe-pane", "-o", "-t", "top", &format!("cat >> {}", s(raw))]).status.success());
    tmux
}

#[test]
fn top_shows_controls_from_the_daemon_as_visible_escapes() {
    let d = tempfile::tempdir().unwrap();
    hostile_peer_files(d.path());
    let peer = Peer::start("records", d.path());
    let raw = d.path().join("raw");
    let tmux = top_in_tmux("hostile", &peer.addr(), &raw);
    // The names are drawn with their escapes (the first reading, then every second).
    assert!(wait_for(Duration::from_secs(20), || tmux.capture().contains("\\x1b]0;TITLE\\x07")), "{}", tmux.capture());
    std::thread::sleep(Duration::from_millis(1500));
    let screen = tmux.capture();
    for v in ["\\x1b]0;TITLE\\x07", "\\rCRMARK", "\\u{9b}31mCSI"] {
        assert!(screen.contains(v), "{v:?} not on the screen:\n{screen}");
    }
    let sent = String::from_utf8_lossy(&std::fs::read(&raw).unwrap_or_default()).into_owned();
    // top draws with CSI itself (and clears the screen once): only the transcript's own
    // sequences must be absent.
    for r in ["\x1b]0;", "\x1b]52;", "\x1b[2JCLEAR", "\rCRMARK", "\u{9b}", "\u{85}", "\x07"] {
        assert!(!sent.contains(r), "{r:?} reached the terminal raw");
    }
    let title = String::from_utf8_lossy(&tmux.cmd(&["display", "-p", "-t", "top", "#{pane_title}"]).stdout).into_owned();
    assert!(!title.contains("TITLE"), "the window title was set: {title}");
}

/// `VmHWM` (peak resident set) of a process, in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap()
}

#[test]
fn tap_skips_an_endless_event_in_bounded_memory_and_goes_on() {
    let d = tempfile::tempdir().unwrap();
    // 200 MiB of one event without its end.
    put(&d.path().join("bytes"), "200");
    let peer = Peer::start("endless", d.path());
    let started = Instant::now();
    let tap = Command::new(env!("CARGO_BIN_EXE_transcriptd"))
        .args(["tap", "--addr", &peer.addr(), "-o", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_for(Duration::from_secs(120), || d.path().join("sent").exists()), "the peer did not send it all");
    let peak = peak_kib(tap.id());
    put(&d.path().join("go"), "");
    let o = tap.wait_with_output().unwrap();
    assert!(peak < 64 * 1024, "tap held {peak} KiB for an event without end");
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    // The record after it is read, and the skip is said.
    assert!(String::from_utf8_lossy(&o.stdout).contains("after.jsonl"), "{}", String::from_utf8_lossy(&o.stdout));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("warning: an event of over 1 MiB without its end was skipped"), "{err}");
    // Each chunk is searched once, not the whole event again: well within the time it takes.
    assert!(started.elapsed() < Duration::from_secs(60), "{:?}", started.elapsed());
}

#[test]
fn top_reads_a_bounded_body_from_an_endless_peer() {
    let d = tempfile::tempdir().unwrap();
    put(&d.path().join("bytes"), "1");
    let peer = Peer::start("endless", d.path());
    let tmux = top_in_tmux("endless", &peer.addr(), &d.path().join("raw"));
    // It says what is wrong, in its title line, and goes on (asking again each second).
    assert!(wait_for(Duration::from_secs(30), || tmux.capture().contains("over 16 MiB")), "{}", tmux.capture());
    std::thread::sleep(Duration::from_secs(3));
    let pid: u32 = String::from_utf8_lossy(&tmux.cmd(&["display", "-p", "-t", "top", "#{pane_pid}"]).stdout).trim().parse().unwrap();
    let peak = peak_kib(pid);
    assert!(peak < 128 * 1024, "top held {peak} KiB of an endless body");
    assert!(tmux.capture().contains("transcriptd top"), "{}", tmux.capture());
}

#[test]
fn token_counts_past_u64_saturate_in_usage_and_report() {
    let d = tempfile::tempdir().unwrap();
    let line = |id: &str, uuid: &str, input: &str| {
        format!(
            r#"{{"type":"assistant","uuid":"{uuid}","parentUuid":null,"sessionId":"s","timestamp":"2026-01-01T00:00:00Z","message":{{"id":"{id}","role":"assistant","model":"m","content":[{{"type":"text","text":"x"}}],"usage":{{"input_tokens":{input},"output_tokens":{input}}}}}}}"#
        )
    };
    // `1e85` reads as u64::MAX, a 30-digit integer too; summed over messages and files.
    let body = [line("m1", "a1", "1e85"), line("m2", "a2", "123456789012345678901234567890"), line("m3", "a3", "7")].join("\n") + "\n";
    put(&d.path().join("a.jsonl"), &body);
    put(&d.path().join("b.jsonl"), &body);
    let o = transcriptd(&["usage", "-o", "json", s(d.path())]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
    for k in ["input_tokens", "output_tokens", "total_tokens"] {
        assert_eq!(v[k], json!(u64::MAX), "{k}: {v}");
    }
    let o = transcriptd(&["usage", s(d.path())]);
    assert!(stdout(&o).contains(&u64::MAX.to_string()), "{}", stdout(&o));
    let o = transcriptd(&["report", "-o", "json", s(d.path())]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout(&o).contains(&format!("\"total\":{}", u64::MAX)), "{}", stdout(&o));
}

#[test]
fn a_line_nested_deeper_than_128_levels_is_said_so_and_kept_by_repair() {
    let d = tempfile::tempdir().unwrap();
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let user = r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"hi"}}"#;
    let asst = format!(
        r#"{{"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"s","timestamp":"2026-01-01T00:00:01Z","message":{{"id":"m1","role":"assistant","model":"m","content":[{{"type":"text","text":"ok"}}]}},"toolUseResult":{deep}}}"#
    );
    let f = d.path().join("deep.jsonl");
    let body = format!("{user}\n{asst}\n");
    put(&f, &body);
    let o = transcriptd(&["check", "-o", "json", s(&f)]);
    let v: serde_json::Value = serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
    assert_eq!((v["line"].as_u64(), v["kind"].as_str(), v["severity"].as_str()), (Some(2), Some("nested_too_deep"), Some("warning")), "{v}");
    assert!(v["message"].as_str().unwrap().contains("nested deeper than 128 levels"), "{v}");
    assert_eq!(o.status.code(), Some(0), "a warning: the transcript resumes");
    // Repair keeps it byte for byte: it is a valid JSON record the agent reads back.
    let out = d.path().join("out");
    let o = transcriptd(&["repair", "--force", "--out", s(&out), s(&f)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(out.join("deep.jsonl")).unwrap(), body);
    assert!(!out.join("deep.rejects.jsonl").exists(), "nothing rejected");
    // A dataset line is a conversation to check: one nested too deep stays an error, said so.
    let ds = d.path().join("ds.jsonl");
    put(&ds, format!("{{\"messages\":[{{\"role\":\"user\",\"content\":\"hi\"}},{{\"role\":\"assistant\",\"content\":\"ok\"}}],\"x\":{deep}}}\n"));
    let o = transcriptd(&["check", "--format", "openai-dataset", "-o", "json", s(&ds)]);
    let v: serde_json::Value = serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
    assert_eq!(v["kind"], "malformed_line", "{v}");
    assert!(v["message"].as_str().unwrap().contains("nested deeper than 128 levels"), "{v}");
}
