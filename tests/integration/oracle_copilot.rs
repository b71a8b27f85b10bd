//! The real GitHub Copilot CLI (`@github/copilot`, pinned by `.ci/run` to 1.0.102) as the oracle
//! of the Copilot format: run by `tests/integration/peers/agent_oracle.py` in its own network
//! namespace (`unshare --net`, loopback only) with a throwaway HOME, offline (`COPILOT_OFFLINE`)
//! against the local server speaking the Anthropic Messages API (its BYOK provider).
//!
//! * It writes sessions `check` reads: a healthy one (the tool really ran) is clean; killed while
//!   the tool runs it leaves an `orphan_call`; killed mid-stream it leaves no partial message
//!   (clean); `/compact` writes a real `session.compaction_complete`.
//! * For each of those, the sessions under `tests/data/agents/sessions/copilot-1.0.102`, and the
//!   Copilot check and context cases, the request Copilot sends on `--resume` is what
//!   `transcriptd context` prints (`compare --agent copilot`).
//! * Every `repair`ed file loads in Copilot's strict loader (no "Session file is corrupted") and
//!   resumes as `context` says, with the repair's result in place of Copilot's own.
//!
//! Without the agent (or without network namespaces) the tests say `skipped: <why>` and pass,
//! unless `TRANSCRIPTD_REQUIRE_AGENTS` is set. The binary: `$TRANSCRIPTD_COPILOT`, else where
//! `.ci/run` installs it under `$TRANSCRIPTD_PEER_DIR` (`target/peer`).

use super::support::{data, jsonl_files, root, transcriptd};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const ORACLE: &str = "tests/integration/peers/agent_oracle.py";
const BIN: &str = "copilot-1.0.102/node_modules/@github/copilot-linux-x64/copilot";

/// Copilot's binary, or `None` after saying why the test skips.
fn copilot_or_skip() -> Option<PathBuf> {
    let skip = |why: String| {
        assert!(std::env::var_os("TRANSCRIPTD_REQUIRE_AGENTS").is_none(), "{why}");
        eprintln!("skipped: {why}");
    };
    let peer = std::env::var_os("TRANSCRIPTD_PEER_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target/peer"));
    let bin = std::env::var_os("TRANSCRIPTD_COPILOT").map(PathBuf::from).unwrap_or_else(|| peer.join(BIN));
    if !bin.is_file() {
        skip(format!("no Copilot CLI 1.0.102 ($TRANSCRIPTD_COPILOT or $TRANSCRIPTD_PEER_DIR/{BIN}; .ci/run installs @github/copilot@1.0.102)"));
        return None;
    }
    if !super::support::netns_works() {
        skip(super::support::NO_NETNS.into());
        return None;
    }
    Some(bin)
}

fn oracle(args: &[&str]) -> std::process::Output {
    Command::new("python3").arg(ORACLE).args(args).current_dir(root()).output().expect("run python3")
}

/// `record --agent copilot` with `extra` (a kill, a resume, a prompt): the oracle's result.
fn record(bin: &Path, script: &str, extra: &[&str], out: &Path) -> Value {
    let mut args = vec!["record", "--agent", "copilot", "--bin", bin.to_str().unwrap(), "--script", script, "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = oracle(&args);
    assert!(o.status.success(), "copilot: record {script} {extra:?}: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&std::fs::read(out.join("result.json")).unwrap()).unwrap()
}

fn check_kinds(file: &Path) -> (Option<i32>, Vec<String>) {
    let o = transcriptd(&["check", "-o", "json", file.to_str().unwrap()]);
    let kinds = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["kind"].as_str().map(str::to_owned))
        .collect();
    (o.status.code(), kinds)
}

/// Copilot resumes `file` (`copilot --resume=<id> -p continue`) and the request it sends is
/// compared with `transcriptd context -o json`: the comparison's report, with the request. A
/// file Copilot's loader refuses fails here, with its error.
fn resume(bin: &Path, file: &Path, work: &Path) -> Value {
    match try_resume(bin, file, work) {
        Ok(report) => report,
        Err(err) => panic!("{}: Copilot refuses it: {err}", file.display()),
    }
}

/// [`resume`], or the error of Copilot's loader when it refuses the file.
fn try_resume(bin: &Path, file: &Path, work: &Path) -> Result<Value, String> {
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    let (req, ctx) = (work.join(format!("{name}.request.json")), work.join(format!("{name}.context.jsonl")));
    let o = oracle(&["resume", file.to_str().unwrap(), "--agent", "copilot", "--bin", bin.to_str().unwrap(), "--out", req.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    if let Some(at) = err.find("Session file is corrupted") {
        return Err(err[at..].lines().next().unwrap_or("").to_owned());
    }
    assert!(o.status.success(), "{}: Copilot sent no request: {err}", file.display());
    let c = transcriptd(&["context", "-o", "json", file.to_str().unwrap()]);
    assert!(matches!(c.status.code(), Some(0 | 1)), "{}: {}", file.display(), String::from_utf8_lossy(&c.stderr));
    std::fs::write(&ctx, &c.stdout).unwrap();
    let o = oracle(&["compare", "--agent", "copilot", req.to_str().unwrap(), ctx.to_str().unwrap()]);
    let mut report: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    report["request"] = serde_json::from_slice(&std::fs::read(&req).unwrap()).unwrap();
    Ok(report)
}

/// The line of each `refused_record` `check` finds in `file`.
fn refused_lines(file: &Path) -> Vec<u64> {
    let o = transcriptd(&["check", "-o", "json", file.to_str().unwrap()]);
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["kind"] == "refused_record")
        .filter_map(|v| v["line"].as_u64())
        .collect()
}

/// The real Copilot CLI 1.0.102 writes sessions (healthy, killed mid-tool, killed mid-stream,
/// compacted and continued after the compaction) that `check` reads as the agent left them,
/// and for those, the recorded sessions and every Copilot case, what it sends on resume is what
/// `context` prints: the killed session's open call gets Copilot's interrupted result, and
/// after a compaction Copilot sends the summary after the user messages before it.
#[test]
fn copilot_writes_sessions_check_reads_and_resumes_what_context_prints() {
    let Some(bin) = copilot_or_skip() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (echo, killed, stalled, compacted, after) =
        (tmp.path().join("echo"), tmp.path().join("killed"), tmp.path().join("stalled"), tmp.path().join("compacted"), tmp.path().join("after"));
    let r = record(&bin, "tests/data/agents/scripts/copilot-echo.json", &[], &echo);
    assert_eq!(r["exit"], 0, "{r}");
    assert!(r["scratch"].as_array().unwrap().iter().any(|f| f == "out.txt"), "the command ran: {r}");
    assert_eq!(check_kinds(&echo.join("session.jsonl")), (Some(0), vec![]), "the session Copilot wrote");
    let r = record(&bin, "tests/data/agents/scripts/copilot-sleep.json", &["--kill-at", "mid-tool"], &killed);
    assert_eq!(r["killed"], "mid-tool", "{r}");
    // A warning: Copilot answers the open call itself on resume, and nothing of the file is lost.
    assert_eq!(check_kinds(&killed.join("session.jsonl")), (Some(0), vec!["orphan_call".to_owned()]), "the session the killed Copilot left");
    let r = record(&bin, "tests/data/agents/scripts/copilot-stall.json", &["--kill-at", "mid-stream"], &stalled);
    assert_eq!(r["killed"], "mid-stream", "{r}");
    // Copilot writes an answer only once it is whole: nothing of the cut-off text.
    let s = std::fs::read_to_string(stalled.join("session.jsonl")).unwrap();
    assert!(s.contains("\"user.message\"") && !s.contains("cut off"), "{s}");
    assert_eq!(check_kinds(&stalled.join("session.jsonl")), (Some(0), vec![]), "the session Copilot killed mid-stream left");
    let echo_file = echo.join("session.jsonl");
    let r = record(&bin, "tests/data/agents/scripts/copilot-echo.json", &["--resume", echo_file.to_str().unwrap(), "--prompt", "/compact"], &compacted);
    assert_eq!(r["exit"], 0, "{r}");
    let s = std::fs::read_to_string(compacted.join("session.jsonl")).unwrap();
    assert!(s.contains("\"session.compaction_complete\",\"data\":{\"success\":true"), "a real compaction");
    assert_eq!(check_kinds(&compacted.join("session.jsonl")), (Some(0), vec![]), "the compacted session");
    let compacted_file = compacted.join("session.jsonl");
    let r = record(&bin, "tests/data/agents/scripts/copilot-echo.json", &["--resume", compacted_file.to_str().unwrap(), "--prompt", "After it."], &after);
    assert_eq!(r["exit"], 0, "{r}");
    assert_eq!(check_kinds(&after.join("session.jsonl")), (Some(0), vec![]), "the session continued after its compaction");

    let mut files: Vec<PathBuf> = [&echo, &killed, &stalled, &compacted, &after].iter().map(|d| d.join("session.jsonl")).collect();
    for dir in ["check/copilot", "context/copilot", "agents/sessions/copilot-1.0.102"] {
        files.extend(jsonl_files(&data(dir)));
    }
    assert!(files.len() >= 20, "{} Copilot files", files.len());
    let work = tmp.path().join("work");
    let (mut differ, mut refused) = (Vec::new(), 0);
    for (i, f) in files.iter().enumerate() {
        let w = work.join(i.to_string());
        std::fs::create_dir_all(&w).unwrap();
        // Where check finds a record Copilot's loader refuses, the loader refuses the file, at
        // the first such line; elsewhere it loads it.
        let lines = refused_lines(f);
        let report = match (try_resume(&bin, f, &w), lines.first()) {
            (Ok(report), None) => report,
            (Err(err), Some(n)) => {
                assert!(err.starts_with(&format!("Session file is corrupted (line {n}:")), "{}: {err}", f.display());
                refused += 1;
                continue;
            }
            (Ok(_), Some(n)) => panic!("{}: check says line {n} is refused, Copilot loads it", f.display()),
            (Err(err), None) => panic!("{}: Copilot refuses it: {err}", f.display()),
        };
        if report["match"] != true {
            differ.push(format!("{}: {}", f.display(), report["differences"]));
        }
        let sent = report["request"].to_string();
        match i {
            // The killed session: Copilot answers the open call itself.
            1 => assert!(sent.contains("Tool execution was interrupted before a result was recorded."), "{sent}"),
            // After the compaction: the summary, after the user messages before it.
            3 | 4 => assert!(sent.contains("Here were the user messages:\\n<user_message>\\nRun the scripted command.\\n</user_message>"), "{sent}"),
            _ => {}
        }
    }
    assert!(refused >= 2, "{refused} files refused");
    assert!(differ.is_empty(), "{} of {} files: Copilot's request differs from context:\n{}", differ.len(), files.len(), differ.join("\n"));
}

/// Every Copilot check case and the killed session, `repair`ed: the output has no error, loads
/// in Copilot's strict loader (a refused record is removed, a result inserted with the envelope
/// it demands), and resumes as `context` says, the inserted result in place of Copilot's own.
#[test]
fn copilot_loads_and_resumes_repaired_files_as_context_says() {
    let Some(bin) = copilot_or_skip() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let killed = tmp.path().join("killed");
    let r = record(&bin, "tests/data/agents/scripts/copilot-sleep.json", &["--kill-at", "mid-tool"], &killed);
    assert_eq!(r["killed"], "mid-tool", "{r}");
    let mut inputs = jsonl_files(&data("check/copilot"));
    inputs.extend(jsonl_files(&data("agents/sessions/copilot-1.0.102")));
    inputs.push(killed.join("session.jsonl"));
    let repaired = tmp.path().join("repaired");
    let work = tmp.path().join("work");
    let (mut changed, mut differ) = (0, Vec::new());
    for (i, f) in inputs.iter().enumerate() {
        let out = repaired.join(i.to_string());
        let o = transcriptd(&["repair", "--no-summary", "--out", out.to_str().unwrap(), f.to_str().unwrap()]);
        assert!(o.status.success(), "{}: {}", f.display(), String::from_utf8_lossy(&o.stderr));
        let fixed = out.join(f.file_name().unwrap());
        if !fixed.exists() {
            continue;
        }
        changed += 1;
        assert_eq!(check_kinds(&fixed).0, Some(0), "{} repaired: {:?}", f.display(), check_kinds(&fixed));
        let w = work.join(i.to_string());
        std::fs::create_dir_all(&w).unwrap();
        let report = resume(&bin, &fixed, &w);
        if report["match"] != true {
            differ.push(format!("{}: {}", f.display(), report["differences"]));
        }
        let sent = report["request"].to_string();
        if f.starts_with(&killed) {
            assert!(sent.contains("(Result inserted by transcriptd repair.)") && !sent.contains("Tool execution was interrupted"), "{sent}");
        }
    }
    assert!(changed >= 6, "{changed} files repaired");
    assert!(differ.is_empty(), "{} repaired files: Copilot's request differs from context:\n{}", differ.len(), differ.join("\n"));
}

/// `usage` of a session Copilot wrote is what Copilot itself counts: per model, the tokens of
/// its `session.usage_record` events are the `modelMetrics` of the last `session.shutdown`
/// (its accounting over every run of the session; the summary call of a compaction is in
/// neither: Copilot keeps it in the compaction's `compactionTokensUsed`).
#[test]
fn copilot_usage_is_what_copilot_counts_at_shutdown() {
    let mut compared = 0;
    for f in jsonl_files(&data("agents/sessions/copilot-1.0.102")) {
        let text = std::fs::read_to_string(&f).unwrap();
        let Some(shutdown) = text.lines().rev().filter_map(|l| serde_json::from_str::<Value>(l).ok()).find(|v| v["type"] == "session.shutdown") else {
            continue;
        };
        let o = transcriptd(&["usage", "-o", "json", f.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}: {}", f.display(), String::from_utf8_lossy(&o.stderr));
        let ours: Vec<Value> = String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let theirs = shutdown["data"]["modelMetrics"].as_object().unwrap();
        assert_eq!(ours.len(), theirs.len(), "{}: models {ours:?} / {theirs:?}", f.display());
        for row in &ours {
            let m = &theirs[row["model"].as_str().unwrap()]["usage"];
            for (a, b) in [
                ("input_tokens", "inputTokens"),
                ("output_tokens", "outputTokens"),
                ("cache_read_input_tokens", "cacheReadTokens"),
                ("cache_creation_input_tokens", "cacheWriteTokens"),
            ] {
                assert_eq!(row[a], m[b], "{}: {a}", f.display());
            }
        }
        compared += 1;
    }
    assert!(compared >= 4, "{compared} sessions with a shutdown");
}

/// The verbs find Copilot's sessions where Copilot keeps them, with no path given
/// (`~/.copilot/session-state/<uuid>/events.jsonl`, or under `$COPILOT_HOME`), and name each by
/// its directory's UUID: `check`, `usage`, `report`, `sessions list`, `show` by a prefix.
#[test]
fn the_verbs_find_copilot_sessions_in_its_home() {
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join(".copilot/session-state");
    let (echo, killed) = ("1297a666-28f1-4b59-aefc-ef2ff372f621", "72015cae-bdb4-446c-a192-b49eed6e93c5");
    for (id, f) in [(echo, "echo"), (killed, "killed-mid-tool")] {
        super::support::put(&state.join(id).join("events.jsonl"), std::fs::read(data(&format!("agents/sessions/copilot-1.0.102/{f}.jsonl"))).unwrap());
    }
    let run = |args: &[&str], copilot_home: Option<&Path>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_transcriptd"));
        c.env("HOME", home.path()).env_remove("COPILOT_HOME").args(args);
        if let Some(d) = copilot_home {
            c.env("COPILOT_HOME", d);
        }
        let o = c.output().unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (code, out, _) = run(&["check", "-o", "json", "--no-summary"], None);
    assert_eq!(code, Some(0), "a call Copilot answers on resume is a warning: {out}");
    assert!(out.contains(&format!("{killed}/events.jsonl")) && out.contains("\"orphan_call\"") && out.lines().count() == 1, "{out}");
    let (code, out, _) = run(&["usage", "-o", "json"], None);
    assert_eq!(code, Some(0));
    // echo.jsonl two model calls, killed-mid-tool one, 100 input and 10 output tokens each.
    assert!(out.contains("\"model\":\"claude-sonnet-4.5\",\"input_tokens\":300,\"output_tokens\":30"), "{out}");
    let (code, out, _) = run(&["sessions", "list", "-o", "json"], None);
    assert_eq!(code, Some(0));
    let ids: Vec<String> = out.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ids.len(), 2, "{out}");
    assert!(ids.contains(&echo.to_owned()) && ids.contains(&killed.to_owned()), "{out}");
    // Exit 0: its one finding is a warning (the call Copilot answers on resume).
    let (code, out, err) = run(&["show", "7201"], None);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(killed) && out.contains("copilot"), "{out}");
    // Among the sessions with calls left without results, with the command that opens it.
    let (_, out, _) = run(&["report", "-o", "json", "--no-summary"], None);
    let r: Value = serde_json::from_str(&out).unwrap();
    let worst = r["worst"]["by_calls_without_results"][0]["open"].as_str().unwrap_or_default();
    assert!(worst.starts_with(&format!("transcriptd show {killed} --root")), "{out}");
    // $COPILOT_HOME moves it.
    let moved = home.path().join("elsewhere");
    std::fs::rename(home.path().join(".copilot"), &moved).unwrap();
    let (code, out, _) = run(&["sessions", "list", "-o", "json"], Some(&moved));
    assert_eq!((code, out.lines().count()), (Some(0), 2), "{out}");
}

/// One edit of a healthy session's event, as a mutation: (name, the type of the event edited,
/// the edit).
type Mutation = (&'static str, &'static str, fn(&mut Value));

/// Edits of the envelope and of the message events, each of one event of the real `echo.jsonl`:
/// `check` finds a `refused_record` at exactly the line Copilot's loader refuses the session
/// at ("Session file is corrupted (line N: ...)"), and none where it loads it; and once
/// `repair`ed, every one of them loads and resumes as `context` says.
#[test]
fn copilot_refuses_exactly_the_records_check_says_and_loads_them_repaired() {
    let Some(bin) = copilot_or_skip() else { return };
    let mutations: [Mutation; 27] = [
        ("parent_missing", "assistant.turn_start", |d| drop(d.as_object_mut().unwrap().remove("parentId"))),
        ("parent_not_uuid", "assistant.turn_start", |d| d["parentId"] = "x".into()),
        ("parent_number", "assistant.turn_start", |d| d["parentId"] = 5.into()),
        ("ephemeral_string", "assistant.turn_start", |d| d["ephemeral"] = "yes".into()),
        ("ephemeral_true", "assistant.turn_start", |d| d["ephemeral"] = true.into()),
        ("data_string", "assistant.turn_start", |d| d["data"] = "x".into()),
        ("data_missing", "assistant.turn_start", |d| drop(d.as_object_mut().unwrap().remove("data"))),
        ("timestamp_missing", "assistant.turn_start", |d| drop(d.as_object_mut().unwrap().remove("timestamp"))),
        ("timestamp_offset", "assistant.turn_start", |d| d["timestamp"] = "2026-12-03T12:00:00+05:30".into()),
        ("timestamp_no_seconds", "assistant.turn_start", |d| d["timestamp"] = "2026-12-03T12:00Z".into()),
        ("id_upper_case", "assistant.turn_start", |d| d["id"] = d["id"].as_str().unwrap().to_uppercase().into()),
        ("id_missing", "assistant.turn_start", |d| drop(d.as_object_mut().unwrap().remove("id"))),
        ("type_number", "assistant.turn_start", |d| d["type"] = 5.into()),
        ("no_message_id", "assistant.message", |d| drop(d["data"].as_object_mut().unwrap().remove("messageId"))),
        ("content_null", "assistant.message", |d| d["data"]["content"] = Value::Null),
        ("request_without_name", "assistant.message", |d| drop(d["data"]["toolRequests"][0].as_object_mut().unwrap().remove("name"))),
        ("request_without_id", "assistant.message", |d| drop(d["data"]["toolRequests"][0].as_object_mut().unwrap().remove("toolCallId"))),
        ("requests_null", "assistant.message", |d| d["data"]["toolRequests"] = Value::Null),
        ("requests_an_object", "assistant.message", |d| d["data"]["toolRequests"] = serde_json::json!({})),
        ("no_success", "tool.execution_complete", |d| drop(d["data"].as_object_mut().unwrap().remove("success"))),
        ("success_a_string", "tool.execution_complete", |d| d["data"]["success"] = "true".into()),
        ("no_call_id", "tool.execution_complete", |d| drop(d["data"].as_object_mut().unwrap().remove("toolCallId"))),
        ("result_without_content", "tool.execution_complete", |d| drop(d["data"]["result"].as_object_mut().unwrap().remove("content"))),
        ("result_null", "tool.execution_complete", |d| d["data"]["result"] = Value::Null),
        ("error_without_message", "tool.execution_complete", |d| d["data"]["error"] = serde_json::json!({"code": "x"})),
        ("prompt_a_number", "user.message", |d| d["data"]["content"] = 5.into()),
        ("prompt_missing", "user.message", |d| drop(d["data"].as_object_mut().unwrap().remove("content"))),
    ];
    let healthy: Vec<Value> =
        std::fs::read_to_string(data("agents/sessions/copilot-1.0.102/echo.jsonl")).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let tmp = tempfile::tempdir().unwrap();
    let (mut refused, mut differ) = (0, Vec::new());
    for (i, (name, ty, edit)) in mutations.iter().enumerate() {
        let mut events = healthy.clone();
        let at = events.iter().position(|e| e["type"] == *ty).unwrap();
        edit(&mut events[at]);
        let dir = tmp.path().join(i.to_string());
        let file = dir.join(format!("{name}.jsonl"));
        super::support::put(&file, events.iter().map(|e| format!("{e}\n")).collect::<String>());
        let lines = refused_lines(&file);
        match (try_resume(&bin, &file, &dir), lines.first()) {
            (Ok(_), None) => {}
            (Err(err), Some(n)) => {
                assert!(err.starts_with(&format!("Session file is corrupted (line {n}:")), "{name}: check says line {n}, Copilot: {err}");
                refused += 1;
            }
            (Ok(_), Some(n)) => panic!("{name}: check says line {n} is refused, Copilot loads it"),
            (Err(err), None) => panic!("{name}: check finds nothing Copilot refuses, Copilot: {err}"),
        }
        let out = dir.join("repaired");
        let o = transcriptd(&["repair", "--no-summary", "--out", out.to_str().unwrap(), file.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: {}", String::from_utf8_lossy(&o.stderr));
        let fixed = out.join(file.file_name().unwrap());
        if fixed.exists() {
            assert_eq!(check_kinds(&fixed).0, Some(0), "{name} repaired: {:?}", check_kinds(&fixed));
            let report = resume(&bin, &fixed, &dir);
            if report["match"] != true {
                differ.push(format!("{name} repaired: {}", report["differences"]));
            }
        }
    }
    assert_eq!(refused, 20, "mutations Copilot refuses");
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// `doctor` finds a directory's Copilot sessions (by `session.start`'s `data.context.cwd`),
/// says what resuming one killed mid-tool does (Copilot answers the open call: it resumes), and
/// once it also holds a result without its call (which Copilot does not send), `--fix` repairs it
/// in place, with Copilot's own resume command.
#[test]
fn doctor_finds_and_fixes_a_directorys_copilot_session() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(project.path()).unwrap();
    let id = "72015cae-bdb4-446c-a192-b49eed6e93c5";
    let mut events: Vec<Value> = std::fs::read_to_string(data("agents/sessions/copilot-1.0.102/killed-mid-tool.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    events[0]["data"]["context"]["cwd"] = cwd.to_str().unwrap().into();
    let file = home.path().join(".copilot/session-state").join(id).join("events.jsonl");
    super::support::put(&file, events.iter().map(|e| format!("{e}\n")).collect::<String>());
    let doctor = |fix: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_transcriptd"));
        c.env("HOME", home.path()).env_remove("COPILOT_HOME").env_remove("CODEX_HOME").env_remove("CLAUDE_CONFIG_DIR");
        c.args(["doctor", "-o", "json", "--no-summary"]).arg(&cwd);
        if fix {
            c.arg("--fix");
        }
        let o = c.output().unwrap();
        let rows: Vec<Value> = String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        (o.status.code(), rows)
    };
    let (code, rows) = doctor(false);
    assert_eq!((code, rows.len()), (Some(0), 1), "{rows:?}");
    assert_eq!((rows[0]["agent"].as_str(), rows[0]["id"].as_str(), rows[0]["verdict"].as_str()), (Some("copilot"), Some(id), Some("resumes")), "{rows:?}");
    assert_eq!(rows[0]["mends"][0]["kind"], "orphan_call", "{rows:?}");
    assert!(doctor(true).1[0].get("fix").is_none(), "a session that resumes whole is left as it is");
    // A result for a call the file does not hold, after the rest: Copilot leaves it out.
    let last = events.last().unwrap()["id"].clone();
    events.push(serde_json::json!({"type": "tool.execution_complete", "data": {"toolCallId": "toolu_gone", "success": true, "result": {"content": "x"}},
        "id": "0f1e2d3c-4b5a-4697-8887-766554433221", "timestamp": "2026-12-03T12:18:20.000Z", "parentId": last}));
    super::support::put(&file, events.iter().map(|e| format!("{e}\n")).collect::<String>());
    let (code, rows) = doctor(false);
    assert_eq!((code, rows[0]["verdict"].as_str()), (Some(1), Some("drops")), "{rows:?}");
    let (code, rows) = doctor(true);
    assert_eq!(code, Some(0), "{rows:?}");
    assert_eq!(rows[0]["fix"]["status"], "repaired", "{rows:?}");
    assert_eq!(rows[0]["resume_command"], format!("cd {} && copilot --resume={id}", cwd.display()), "{rows:?}");
    assert_eq!(check_kinds(&file), (Some(0), vec![]), "repaired in place");
}
