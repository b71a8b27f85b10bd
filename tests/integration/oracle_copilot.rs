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
    let ns = |args: &[&str]| Command::new("unshare").args(args).output().is_ok_and(|o| o.status.success());
    if !ns(&["--net", "--map-root-user", "sh", "-c", "ip link set lo up"]) && !ns(&["--net", "sh", "-c", "ip link set lo up"]) {
        skip("cannot make a network namespace with loopback up (unshare --net, ip from iproute2)".into());
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
    assert_eq!(check_kinds(&killed.join("session.jsonl")), (Some(1), vec!["orphan_call".to_owned()]), "the session the killed Copilot left");
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
        let Some(shutdown) = text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|v| v["type"] == "session.shutdown").last() else {
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
