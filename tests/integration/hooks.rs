//! `transcriptd hooks` (issue 32.5): merged into a user's Claude Code settings and taken out
//! again leaving them as they were; the hook command keeps the session in a snapshot store and
//! tells the user, on resume, what the session's errors are; and with the real Claude Code in
//! the oracle's harness: the hook runs, the store holds the session, a deleted session is
//! restored and resumes with its history.

use super::support::{stderr, stdout, transcriptd};
use serde_json::{json, Value};
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

fn hooks(args: &[&str]) -> std::process::Output {
    let mut a = vec!["hooks"];
    a.extend_from_slice(args);
    transcriptd(&a)
}

fn run_hook(store: &Path, input: &[u8]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_transcriptd"))
        .args(["hooks", "exec", "claude-code", "--store", store.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(input).unwrap();
    c.wait_with_output().unwrap()
}

#[test]
fn install_merges_into_the_users_settings_and_uninstall_leaves_them_as_they_were() {
    let d = tempfile::tempdir().unwrap();
    let s = d.path().join("settings.json");
    let user = json!({
        "model": "opus",
        "hooks": {"PreCompact": [{"hooks": [{"type": "command", "command": "my-backup.sh"}]}], "Stop": [{"hooks": [{"type": "command", "command": "notify"}]}]}
    });
    std::fs::write(&s, serde_json::to_vec_pretty(&user).unwrap()).unwrap();
    let store = d.path().join("store");
    let o = hooks(&["install", "claude-code", "--settings", s.to_str().unwrap(), "--store", store.to_str().unwrap(), "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let said: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let backup = said["backup"].as_str().unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&std::fs::read(backup).unwrap()).unwrap(), user, "the old settings kept");
    let v: Value = serde_json::from_slice(&std::fs::read(&s).unwrap()).unwrap();
    assert_eq!(v["model"], "opus");
    assert_eq!(v["hooks"]["Stop"], user["hooks"]["Stop"]);
    let pre = v["hooks"]["PreCompact"].as_array().unwrap();
    assert_eq!(pre.len(), 2, "the user's own hook and ours: {pre:?}");
    assert_eq!(pre[0], user["hooks"]["PreCompact"][0]);
    let ours = pre[1]["hooks"][0]["command"].as_str().unwrap();
    assert!(ours.ends_with(&format!("hooks exec claude-code --store {}", store.display())), "{ours}");
    assert_eq!(v["hooks"]["SessionStart"][0]["matcher"], "resume");
    assert!(v["hooks"]["SessionEnd"][0]["hooks"][0]["command"].as_str().unwrap().contains("hooks exec claude-code"));
    // Again: still one of ours per event.
    let o = hooks(&["install", "claude-code", "--settings", s.to_str().unwrap(), "--store", store.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&std::fs::read(&s).unwrap()).unwrap();
    assert_eq!(v["hooks"]["PreCompact"].as_array().unwrap().len(), 2);
    assert_eq!(v["hooks"]["SessionEnd"].as_array().unwrap().len(), 1);
    // Out again: the user's settings as they were.
    let o = hooks(&["uninstall", "claude-code", "--settings", s.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("3 transcriptd hooks taken out"), "{}", stdout(&o));
    assert_eq!(serde_json::from_slice::<Value>(&std::fs::read(&s).unwrap()).unwrap(), user);
    let o = hooks(&["uninstall", "claude-code", "--settings", s.to_str().unwrap()]);
    assert!(stdout(&o).contains("nothing to do"), "{}", stdout(&o));
    // A file that is not JSON is left as it is.
    std::fs::write(&s, "{ not json").unwrap();
    let o = hooks(&["install", "claude-code", "--settings", s.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not JSON (left as it is)"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&s).unwrap(), "{ not json");
    // No file yet: made, with only ours.
    let fresh = d.path().join("new/settings.json");
    let o = hooks(&["install", "claude-code", "--settings", fresh.to_str().unwrap(), "--store", store.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&std::fs::read(&fresh).unwrap()).unwrap();
    assert_eq!(v["hooks"].as_object().unwrap().len(), 3);
}

#[test]
fn the_hook_keeps_the_session_and_says_on_resume_what_is_wrong() {
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("store");
    let t = d.path().join("0c6e3f4e-5a1b-4c2d-9e8f-7a6b5c4d3e2f.jsonl");
    let good = concat!(
        r#"{"type":"user","uuid":"u0","parentUuid":null,"sessionId":"s","cwd":"/w","message":{"role":"user","content":"go"}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"u1","parentUuid":"u0","sessionId":"s","message":{"id":"m1","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}]}}"#,
        "\n"
    );
    std::fs::write(&t, good).unwrap();
    let input = |event: &str, source: Option<&str>| {
        let mut v = json!({"session_id": "s", "transcript_path": t, "cwd": "/w", "hook_event_name": event});
        if let Some(s) = source {
            v["source"] = json!(s);
        }
        serde_json::to_vec(&v).unwrap()
    };
    let o = run_hook(&store, &input("PreCompact", None));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).is_empty(), "PreCompact says nothing: {}", stdout(&o));
    // Grown, then the session ends: the store holds it all, in one stream.
    std::fs::OpenOptions::new().append(true).open(&t).unwrap().write_all(b"{\"type\":\"user\",\"uuid\":\"u2\",\"parentUuid\":\"u1\"}\n").unwrap();
    assert_eq!(run_hook(&store, &input("SessionEnd", None)).status.code(), Some(0));
    let s = transcriptd::snapshots::Store::at(&store);
    let streams = s.streams().unwrap();
    assert_eq!(streams.len(), 1, "{streams:#?}");
    let mut held = Vec::new();
    s.read(&streams[0], 0, streams[0].end(), &mut held).unwrap();
    assert_eq!(held, std::fs::read(&t).unwrap());
    // Resumed with a call left open: Claude Code answers it itself and nothing is lost, so the
    // hook says nothing.
    let o = run_hook(&store, &input("SessionStart", Some("resume")));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).is_empty(), "a break the agent mends is not said: {}", stdout(&o));
    // A result without its call, which Claude Code leaves out: said to the user (not to the
    // model), as a systemMessage.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&t)
        .unwrap()
        .write_all(concat!(r#"{"type":"user","uuid":"u3","parentUuid":"u2","sessionId":"s","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"x"}]}}"#, "\n").as_bytes())
        .unwrap();
    let o = run_hook(&store, &input("SessionStart", Some("resume")));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    let m = v["systemMessage"].as_str().unwrap();
    assert!(m.contains("orphan_result") && m.contains("transcriptd doctor --fix"), "{m}");
    // A new session: nothing said.
    let o = run_hook(&store, &input("SessionStart", Some("startup")));
    assert!(stdout(&o).is_empty());
    // Whatever it is given, it never fails the agent.
    for bad in [&b"not json"[..], b"{}", br#"{"transcript_path": "/nonexistent/x.jsonl", "hook_event_name": "SessionEnd"}"#] {
        let o = run_hook(&store, bad);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(bad));
    }
    // A store a daemon holds is the daemon's: the hook leaves it alone, and succeeds.
    let held_by =
        transcriptd::snapshots::Writer::open(&store, transcriptd::snapshots::Retention { max_age: None, max_bytes: None, every: std::time::Duration::MAX })
            .unwrap();
    let o = run_hook(&store, &input("SessionEnd", None));
    assert_eq!(o.status.code(), Some(0));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    drop(held_by);
}

#[test]
fn the_other_agents_hooks_go_where_each_agent_reads_them_and_come_out_again() {
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("store");
    // Gemini CLI: its event names, the matcher on the trigger, the timeout in milliseconds.
    let s = d.path().join("gemini/settings.json");
    std::fs::create_dir_all(s.parent().unwrap()).unwrap();
    let user = json!({"model": {"name": "gemini-2.5-flash"}, "hooks": {"SessionEnd": [{"hooks": [{"type": "command", "command": "mine"}]}]}});
    std::fs::write(&s, serde_json::to_vec(&user).unwrap()).unwrap();
    for _ in 0..2 {
        let o = hooks(&["install", "gemini-cli", "--settings", s.to_str().unwrap(), "--store", store.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let v: Value = serde_json::from_slice(&std::fs::read(&s).unwrap()).unwrap();
    let ours = &v["hooks"]["PreCompress"][0]["hooks"][0];
    assert!(ours["command"].as_str().unwrap().ends_with(&format!("hooks exec gemini-cli --store {}", store.display())), "{ours}");
    assert_eq!(ours["timeout"], 60000);
    assert_eq!(v["hooks"]["SessionEnd"].as_array().unwrap().len(), 2, "the user's and ours, once");
    assert_eq!(v["hooks"]["SessionStart"][0]["matcher"], "resume");
    // Another agent's entries are not these: uninstalling claude-code takes none of them out.
    let o = hooks(&["uninstall", "claude-code", "--settings", s.to_str().unwrap()]);
    assert!(stdout(&o).contains("nothing to do"), "{}", stdout(&o));
    let o = hooks(&["uninstall", "gemini-cli", "--settings", s.to_str().unwrap()]);
    assert!(stdout(&o).contains("3 transcriptd hooks taken out"), "{}", stdout(&o));
    assert_eq!(serde_json::from_slice::<Value>(&std::fs::read(&s).unwrap()).unwrap(), user);
    // Qwen Code and Copilot CLI: Stop too (their headless modes), seconds.
    for (agent, events) in [("qwen-code", 4), ("copilot", 4)] {
        let s = d.path().join(format!("{agent}/settings.json"));
        let o = hooks(&["install", agent, "--settings", s.to_str().unwrap(), "--store", store.to_str().unwrap(), "-o", "json"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let said: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
        assert_eq!(said["installed"].as_array().unwrap().len(), events, "{said}");
        let v: Value = serde_json::from_slice(&std::fs::read(&s).unwrap()).unwrap();
        assert_eq!(v["hooks"]["Stop"][0]["hooks"][0]["timeout"], 60);
    }
    // Pi: an extension file of transcriptd's own.
    let ext = d.path().join("pi/extensions/transcriptd.ts");
    let o = hooks(&["install", "pi", "--settings", ext.to_str().unwrap(), "--store", store.to_str().unwrap(), "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&ext).unwrap();
    assert!(text.starts_with("// transcriptd: hooks exec pi") && text.contains(&serde_json::to_string(store.to_str().unwrap()).unwrap()), "{text}");
    for event in ["session_before_compact", "agent_end", "session_shutdown", "session_start"] {
        assert!(text.contains(&format!("pi.on(\"{event}\"")), "{event}");
    }
    let o = hooks(&["install", "pi", "--settings", ext.to_str().unwrap(), "--store", store.to_str().unwrap(), "-o", "json"]);
    let said: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert!(said["backup"].is_null(), "the same file again: nothing to keep: {said}");
    let o = hooks(&["uninstall", "pi", "--settings", ext.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!ext.exists());
    std::fs::write(&ext, "export default function () {}\n").unwrap();
    for verb in ["install", "uninstall"] {
        let o = hooks(&[verb, "pi", "--settings", ext.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{verb}");
        assert!(stderr(&o).contains("not transcriptd's extension (left as it is)"), "{}", stderr(&o));
    }
    assert_eq!(std::fs::read_to_string(&ext).unwrap(), "export default function () {}\n");
}

/// Runs Copilot CLI's sessionEnd hook for session `id` under `copilot_home`.
fn copilot_session_end(copilot_home: &Path, store: &Path, id: &str) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_transcriptd"))
        .args(["hooks", "exec", "copilot", "--store", store.to_str().unwrap()])
        .env("COPILOT_HOME", copilot_home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(format!(r#"{{"hook_event_name":"SessionEnd","session_id":"{id}","reason":"complete"}}"#).as_bytes()).unwrap();
    c.wait_with_output().unwrap()
}

#[test]
fn copilots_session_end_names_only_the_session_and_its_events_file_is_kept() {
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("store");
    let id = "0c6e3f4e-5a1b-4c2d-9e8f-7a6b5c4d3e2f";
    let events = d.path().join("copilot/session-state").join(id).join("events.jsonl");
    std::fs::create_dir_all(events.parent().unwrap()).unwrap();
    std::fs::write(&events, b"{\"type\":\"session.start\",\"data\":{\"sessionId\":\"0c6e3f4e-5a1b-4c2d-9e8f-7a6b5c4d3e2f\"}}\n").unwrap();
    let o = copilot_session_end(&d.path().join("copilot"), &store, id);
    assert_eq!(o.status.code(), Some(0));
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    let streams = transcriptd::snapshots::Store::at(&store).streams().unwrap();
    assert_eq!(streams.iter().map(|s| s.path.as_path()).collect::<Vec<_>>(), [events.as_path()]);
    // restore takes the directory's name for the id.
    let back = d.path().join("back.jsonl");
    let o = transcriptd(&["restore", &id[..8], "--store", store.to_str().unwrap(), "--out", back.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&events).unwrap());
}

/// Copilot CLI 1.0.102 can run its sessionEnd hook before it has created the session's file
/// at all (it writes the session out at its exit; seen with the real agent on a quiet machine:
/// the file appeared 40 ms after the hook). The hook says nothing is wrong, and its detached
/// snapshot keeps the file once it is there and ends with `session.shutdown`.
#[test]
fn copilots_session_end_before_its_events_file_exists_keeps_the_file_once_it_is_written() {
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("store");
    let id = "1d7f4a5b-6b2c-4d3e-8f9a-8b7c6d5e4f3a";
    let events = d.path().join("copilot/session-state").join(id).join("events.jsonl");
    let o = copilot_session_end(&d.path().join("copilot"), &store, id);
    assert_eq!(o.status.code(), Some(0));
    assert!(o.stderr.is_empty(), "no error: {}", String::from_utf8_lossy(&o.stderr));
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::create_dir_all(events.parent().unwrap()).unwrap();
    let body = format!(
        "{{\"type\":\"session.start\",\"data\":{{\"sessionId\":\"{id}\"}}}}\n{{\"type\":\"session.shutdown\",\"data\":{{\"shutdownType\":\"routine\"}}}}\n"
    );
    std::fs::write(&events, &body).unwrap();
    let s = transcriptd::snapshots::Store::at(&store);
    super::support::harness::wait(std::time::Duration::from_secs(20), || {
        s.streams().ok().and_then(|v| v.first().map(|x| x.end())).unwrap_or(0) >= body.len() as u64
    });
    let streams = s.streams().unwrap();
    assert_eq!(streams.iter().map(|s| s.path.as_path()).collect::<Vec<_>>(), [events.as_path()], "the detached snapshot kept the file");
    let mut got = Vec::new();
    s.read(&streams[0], 0, streams[0].end(), &mut got).unwrap();
    assert_eq!(got, body.as_bytes());
}
