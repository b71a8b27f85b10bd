//! End-to-end tests of `transcriptd run`: real temp dirs, real appends in pieces, real
//! rotation, a real HTTP scrape (and promtool), a real kill -9 and restart, real signals.
//!
//! The central property: folding the daemon's records (findings, minus retractions, with
//! demotions applied) gives exactly what `transcriptd check --output json` reports on the final
//! files.

use super::support::harness::{append_in_pieces, metric, settle, wait, Daemon, Opts};
use super::support::{data, jsonl_files, transcriptd};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn daemon_findings_equal_check_on_the_final_files() {
    let d = Daemon::new("", "");
    let w = d.watch_dir();
    let mut sources: Vec<PathBuf> = jsonl_files(&data("real")).into_iter().filter(|f| !f.ends_with("EXPECTED.jsonl")).collect();
    sources.extend(jsonl_files(&data("check")));
    // The sessions the real Qwen Code wrote (in the agent oracle).
    sources.extend(jsonl_files(&data("agents/sessions/qwen-code-0.24.4")));
    std::thread::scope(|s| {
        for (i, chunk) in sources.chunks(sources.len().div_ceil(4)).enumerate() {
            let w = w.clone();
            s.spawn(move || {
                for (j, f) in chunk.iter().enumerate() {
                    let bytes = std::fs::read(f).unwrap();
                    let dest = w.join(format!("t{i}")).join(format!("{j}-{}", f.file_name().unwrap().to_string_lossy()));
                    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
                    // Pieces cut anywhere, lines split across writes.
                    append_in_pieces(&dest, &bytes, 1 + (j % 4), Duration::from_millis(15));
                }
            });
        }
    });
    let (got, want) = settle(&d);
    assert!(want.len() > 30, "the corpus has findings");
    assert_eq!(got, want, "daemon vs check; log:\n{}", d.log());
    let kinds: std::collections::BTreeSet<String> = d.records().iter().map(|r| r["type"].as_str().unwrap().to_owned()).collect();
    assert!(kinds.contains("file_opened") && kinds.contains("compaction"), "{kinds:?}");
}

#[test]
fn torn_line_is_held_and_completed_once_across_a_restart() {
    let mut d = Daemon::new("", "");
    let f = d.watch_dir().join("s.jsonl");
    std::fs::write(&f, "{\"role\":\"user\",\"content\":\"q\"}\n{\"role\":\"tool\",\"tool_call_id\":\"c9\",\"con").unwrap();
    // The torn line is reported once the file is quiet for the grace period...
    assert!(wait(Duration::from_secs(10), || d.records().iter().any(|r| r["kind"] == "torn_line")), "{}", d.log());
    assert_eq!(d.stop(), Some(0));
    // ... and after a restart, completing it retracts that and reports what the line holds.
    append_in_pieces(&f, b"tent\":\"x\"}\n", 1, Duration::ZERO);
    d.start();
    let (got, want) = settle(&d);
    assert_eq!(got, want, "{}", d.log());
    assert!(got.keys().any(|k| k.2 == "orphan_result" && k.1 == 2));
    let retracted = d.records().iter().filter(|r| r["type"] == "finding_retracted").count();
    assert_eq!(retracted, 1);
}

#[test]
fn kill_9_and_restart_lose_nothing_and_double_nothing() {
    let mut d = Daemon::new("", "");
    let w = d.watch_dir();
    let cases = jsonl_files(&data("check"));
    let (first, second) = cases.split_at(cases.len() / 2);
    for (i, f) in first.iter().enumerate() {
        std::fs::copy(f, w.join(format!("a{i}.jsonl"))).unwrap();
    }
    // Give it time to read some, not necessarily all, then kill it hard mid-way.
    wait(Duration::from_secs(5), || d.records().iter().filter(|r| r["type"] == "finding").count() > 5);
    d.kill9();
    for (i, f) in second.iter().enumerate() {
        std::fs::copy(f, w.join(format!("b{i}.jsonl"))).unwrap();
    }
    d.start();
    let (got, want) = settle(&d);
    assert_eq!(got, want, "{}", d.log());
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn rotation_truncation_deletion_recreation() {
    let d = Daemon::new("", "");
    let w = d.watch_dir();
    let line = |i: u32| format!("{{\"role\":\"tool\",\"tool_call_id\":\"c{i}\",\"content\":\"x\"}}\n");
    let a = w.join("a.jsonl");
    append_in_pieces(&a, line(1).as_bytes(), 1, Duration::ZERO);
    assert!(wait(Duration::from_secs(10), || d.records().iter().any(|r| r["call_id"] == "c1")));

    // Rename to another watched name: the same file goes on, nothing is reported twice.
    let b = w.join("b.jsonl");
    std::fs::rename(&a, &b).unwrap();
    append_in_pieces(&b, line(2).as_bytes(), 1, Duration::ZERO);
    assert!(
        wait(Duration::from_secs(10), || d.records().iter().any(|r| r["call_id"] == "c2" && r["file"] == b.to_str().unwrap())),
        "{}\n{:#?}",
        d.log(),
        d.records()
    );
    assert_eq!(d.records().iter().filter(|r| r["call_id"] == "c1" && r["type"] == "finding").count(), 1);

    // copytruncate: the content is copied away (to a name not watched) and the file truncated.
    std::fs::copy(&b, w.join("b.jsonl.1")).unwrap();
    std::fs::OpenOptions::new().write(true).open(&b).unwrap().set_len(0).unwrap();
    append_in_pieces(&b, line(3).as_bytes(), 1, Duration::ZERO);
    assert!(wait(Duration::from_secs(10), || d.records().iter().any(|r| r["type"] == "file_truncated")), "{}", d.log());
    assert!(wait(Duration::from_secs(10), || d.records().iter().any(|r| r["call_id"] == "c3")));

    // Deletion releases the handle at once.
    std::fs::remove_file(&b).unwrap();
    assert!(wait(Duration::from_secs(10), || d.records().iter().any(|r| r["type"] == "file_closed" && r["reason"] == "deleted")));
    let fds: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", d.pid()))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
        .map(|p| p.display().to_string())
        .collect();
    assert!(!fds.iter().any(|p| p.contains("b.jsonl")), "{fds:?}");

    // Recreation: a new file under the old name is read from the start.
    append_in_pieces(&b, line(4).as_bytes(), 1, Duration::ZERO);
    assert!(wait(Duration::from_secs(10), || d.records().iter().any(|r| r["call_id"] == "c4")), "{}", d.log());
}

#[test]
fn new_files_in_new_directories_are_picked_up() {
    let d = Daemon::new("", "");
    let deep = d.watch_dir().join("proj/session/subagents");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("agent-1.jsonl"), "{\"role\":\"tool\",\"tool_call_id\":\"z\",\"content\":\"x\"}\n").unwrap();
    assert!(wait(Duration::from_secs(10), || d.records().iter().any(|r| r["call_id"] == "z")), "{}", d.log());
}

#[test]
fn metrics_scrape_health_and_promtool() {
    let d = Daemon::new("", "");
    std::fs::copy(data("real/claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.slice-L1168-L1863.jsonl"), d.watch_dir().join("s.jsonl")).unwrap();
    std::fs::copy(data("real/codex/localpush/rollout-2026-02-23T12-47-42-019c8a53-a0dd-7130-bcd7-95445d84846a.jsonl"), d.watch_dir().join("r.jsonl")).unwrap();
    // These count things this corpus does not have, or a sink this daemon has not (the
    // snapshot store's: deploy.rs's live daemon serves them).
    use transcriptd::telemetry as t;
    let absent = [
        t::ORPHAN_TOOL_CALLS,
        t::REPAIRS,
        t::EVENTS,
        t::SNAPSHOT_BYTES,
        t::SNAPSHOT_DEDUPLICATED,
        t::SNAPSHOT_STORE_BYTES,
        t::SNAPSHOT_STREAMS,
        t::SNAPSHOT_RETIRED,
    ];
    let expected: Vec<&str> = transcriptd::telemetry::ALL.iter().copied().filter(|n| !absent.contains(n)).collect();
    // Both files read: every family is served (a scrape between the two files may lack some).
    let complete = |m: &str| m.contains("transcriptd_findings_total{") && m.contains("type=\"cache_read\"") && expected.iter().all(|n| m.contains(n));
    wait(Duration::from_secs(10), || d.get("/metrics").is_some_and(|m| complete(&m)));
    let m = d.get("/metrics").unwrap();
    for name in &expected {
        assert!(m.contains(name), "{name} missing from:\n{m}");
    }
    assert!(m.contains("type=\"cache_read\""), "{m}");
    assert!(!m.contains(".jsonl"), "no per-file labels");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("scrape.prom");
    std::fs::write(&f, &m).unwrap();
    let out = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&f).unwrap())
        .output()
        .expect("promtool is installed (.ci/run installs Debian's prometheus package)");
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sighup_reloads_and_refuses_an_invalid_config() {
    let d = Daemon::new("", "");
    let good = std::fs::read_to_string(d.config_path()).unwrap();
    std::fs::write(d.config_path(), format!("{good}\nbogus_key = 1\n")).unwrap();
    d.signal(libc::SIGHUP);
    assert!(wait(Duration::from_secs(10), || d.log().contains("reload refused")), "{}", d.log());
    assert!(d.log().contains("bogus_key"));
    assert_eq!(d.get("/health").as_deref(), Some("ok\n"));
    std::fs::write(d.config_path(), good.replace("grace = \"300ms\"", "grace = \"200ms\"")).unwrap();
    d.signal(libc::SIGHUP);
    assert!(wait(Duration::from_secs(10), || d.log().contains("configuration reloaded")), "{}", d.log());
    assert!(wait(Duration::from_secs(10), || d.get("/health").as_deref() == Some("ok\n")));
    std::fs::write(d.watch_dir().join("x.jsonl"), "{\"role\":\"tool\",\"tool_call_id\":\"after-reload\",\"content\":\"x\"}\n").unwrap();
    assert!(wait(Duration::from_secs(10), || d.records().iter().any(|r| r["call_id"] == "after-reload")));
}

#[test]
fn sigterm_exits_zero_with_a_final_checkpoint() {
    let mut d = Daemon::new("", "");
    std::fs::write(d.watch_dir().join("x.jsonl"), "{\"role\":\"user\",\"content\":\"x\"}\n").unwrap();
    assert!(wait(Duration::from_secs(10), || d.records().iter().any(|r| r["type"] == "file_opened")));
    let t = Instant::now();
    assert_eq!(d.stop(), Some(0));
    assert!(t.elapsed() < Duration::from_secs(10));
    let cp: Value = serde_json::from_slice(&std::fs::read(d.root.path().join("state/checkpoints.json")).unwrap()).unwrap();
    assert_eq!(cp["version"], 1);
    assert_eq!(cp["files"][0]["offset"], std::fs::metadata(d.watch_dir().join("x.jsonl")).unwrap().len());
}

#[test]
fn pending_json_pauses_calls_and_bounded_open_files() {
    let d = Daemon::new("max_open_files = 3", "");
    let w = d.watch_dir();
    for i in 0..12 {
        let dir = w.join(format!("s{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let call = format!(
            "{{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{{\"id\":\"call{i}\",\"function\":{{\"name\":\"Read\",\"arguments\":\"{{}}\"}}}}]}}\n"
        );
        if i % 2 == 0 {
            std::fs::write(dir.join("pending.json"), format!("[{{\"call_id\":\"call{i}\"}}]")).unwrap();
        }
        std::fs::write(dir.join("t.jsonl"), call).unwrap();
    }
    assert!(wait(Duration::from_secs(10), || d.records().iter().filter(|r| r["kind"] == "orphan_call").count() == 6), "{}", d.log());
    // The gauges are set at the end of a step, the counter when a finding is made: wait for
    // the scrape that shows all twelve files (not a fixed sleep).
    let mut m = String::new();
    let settled = wait(Duration::from_secs(10), || {
        m = d.get("/metrics").unwrap_or_default();
        metric(&m, "transcriptd_files_watched") == Some(12.0) && metric(&m, "transcriptd_orphan_tool_calls_total{side_effect=\"read\"}") == Some(6.0)
    });
    assert!(settled, "{m}\n{}", d.log());
    // Open handles stay within the limit in every scrape.
    let open = metric(&m, "transcriptd_open_files").unwrap();
    assert!(open <= 3.0, "{open}");
    // By now every file has been read and its grace (300 ms) has passed for the odd ones: the
    // paused calls (even) were never reported.
    let orphans: Vec<String> = d.records().iter().filter(|r| r["kind"] == "orphan_call").map(|r| r["call_id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(orphans.len(), 6, "{orphans:?}");
    assert!(orphans.iter().all(|c| c.trim_start_matches("call").parse::<u32>().unwrap() % 2 == 1), "{orphans:?}");
}

/// A daemon with the `repair` stage (mode `copy`, `min_idle`) and a `repaired_files` sink under
/// `repaired/`, watching one file with a real error (a result without its call) written to
/// `proj/s.jsonl`.
struct Repairing {
    d: Daemon,
    repaired: PathBuf,
    file: PathBuf,
    src: Vec<u8>,
}

impl Repairing {
    fn start(min_idle: &str, extra_daemon: &str) -> Repairing {
        let stage = format!("[[stages]]\ntype = \"repair\"\nmode = \"copy\"\nmin_idle = \"{min_idle}\"\n");
        let mut d = Daemon::prepare(Opts::default());
        let repaired = d.root.path().join("repaired");
        let sink = format!("\n[[sinks]]\ntype = \"repaired_files\"\ndir = \"{}\"\n", repaired.display());
        std::fs::write(d.config_path(), Daemon::config(d.root.path(), d.port, extra_daemon, &format!("{stage}{sink}"))).unwrap();
        d.start();
        let src = std::fs::read(data("real/derived/claude-code/short.orphan-tool-result.jsonl")).unwrap();
        std::fs::create_dir_all(d.watch_dir().join("proj")).unwrap();
        let file = d.watch_dir().join("proj/s.jsonl");
        std::fs::write(&file, &src).unwrap();
        Repairing { d, repaired, file, src }
    }

    /// The file's entry in the last checkpoint written, if any.
    fn checkpointed(&self) -> Option<Value> {
        let bytes = std::fs::read(self.d.state_dir().join("checkpoints.json")).ok()?;
        let v: Value = serde_json::from_slice(&bytes).ok()?;
        v["files"].as_array()?.iter().find(|f| f["path"].as_str().is_some_and(|p| p.ends_with("proj/s.jsonl"))).cloned()
    }

    /// The `repaired` records so far.
    fn repairs(&self) -> Vec<Value> {
        self.d.records().into_iter().filter(|r| r["type"] == "repaired").collect()
    }

    /// The repaired copy passes `check`.
    fn assert_copy_is_clean(&self) {
        let c = transcriptd(&["check", self.repaired.join("proj/s.jsonl").to_str().unwrap()]);
        assert_eq!(c.status.code(), Some(0), "{}", String::from_utf8_lossy(&c.stdout));
    }
}

#[test]
fn repair_stage_writes_a_repaired_copy_once_idle() {
    let r = Repairing::start("300ms", "");
    assert!(wait(Duration::from_secs(10), || !r.repairs().is_empty()), "{}", r.d.log());
    r.assert_copy_is_clean();
    // The live file is untouched.
    assert_eq!(std::fs::read(&r.file).unwrap(), r.src);
}

/// A repair the repair stage makes due goes through the `repaired_files` sink: journaled in the
/// state directory, written, reported. Killed with -9 after the copy was written and reported
/// but before a checkpoint covered the report (checkpoints fail meanwhile: `checkpoints.json`
/// is a directory), the restarted daemon, back at the last checkpoint (which covers the file's
/// findings, so the file is only replayed), writes the copy again, byte for byte the same, and
/// reports it once: the repair is not lost, and there is no second, different output.
#[test]
fn a_due_repair_survives_kill_9_between_the_repair_and_the_checkpoint() {
    let mut r = Repairing::start("4s", "");
    let src = r.src.clone();
    // A checkpoint covers the whole file (its findings reported) before its repair is due.
    let cp = r.d.state_dir().join("checkpoints.json");
    assert!(wait(Duration::from_secs(20), || r.checkpointed().is_some_and(|f| f["offset"] == src.len())), "{}", r.d.log());
    assert!(r.repairs().is_empty(), "the repair came before the file's checkpoint: the test proves nothing");
    let saved = std::fs::read(&cp).unwrap();
    // From now on every checkpoint fails.
    std::fs::remove_file(&cp).unwrap();
    std::fs::create_dir(&cp).unwrap();
    std::fs::write(cp.join("in-the-way"), "").unwrap();
    assert!(wait(Duration::from_secs(30), || !r.repairs().is_empty()), "{}", r.d.log());
    let copy = r.repaired.join("proj/s.jsonl");
    let first = std::fs::read(&copy).unwrap();
    assert_ne!(first, src, "the copy is repaired");
    let journal = std::fs::read_dir(r.d.state_dir()).unwrap().filter_map(Result::ok).find(|e| e.file_name().to_string_lossy().starts_with("repaired-"));
    assert!(journal.is_some_and(|j| std::fs::read_to_string(j.path().join("journal.jsonl")).unwrap().contains("\"due\"")), "the request is journaled");
    r.d.kill9();
    // The state as the kill left it, had the checkpoint not been written yet.
    std::fs::remove_dir_all(&cp).unwrap();
    std::fs::write(&cp, &saved).unwrap();
    std::fs::remove_file(&copy).unwrap();
    r.d.start();
    assert!(wait(Duration::from_secs(30), || !r.repairs().is_empty()), "the repair was lost: {}", r.d.log());
    assert!(r.d.log().contains("repairs due before the restart run again"), "{}", r.d.log());
    // Settled: one report, the same copy, a clean one.
    std::thread::sleep(Duration::from_millis(500));
    let reports = r.repairs();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(std::fs::read(&copy).unwrap(), first, "a second, different output");
    r.assert_copy_is_clean();
    // The findings were reported once too (stdout cut back to the checkpoint, the file replayed).
    let records = r.d.records();
    let findings: Vec<&Value> = records.iter().filter(|r| r["type"] == "finding").collect();
    let mut keys: Vec<String> = findings.iter().map(|r| format!("{}:{}:{}", r["line"], r["kind"], r["call_id"])).collect();
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n, "a finding reported twice: {findings:?}");
    assert!(n > 0);
}

/// A repair owed when the daemon died: the file's errors were read and checkpointed, but it had
/// not been idle for `min_idle` yet. The checkpoint keeps what the `repair` stage owed; the
/// restarted daemon, which only replays the file (its findings were reported), makes the repair
/// once the file has been idle long enough — without a new error.
#[test]
fn a_repair_owed_when_the_daemon_died_is_made_after_the_restart() {
    let mut r = Repairing::start("8s", "");
    let len = r.src.len();
    let owed = || r.checkpointed().is_some_and(|f| f["offset"] == len && f["owed"] == serde_json::json!(["repair"]));
    assert!(wait(Duration::from_secs(20), owed), "no checkpoint says the repair is owed: {}", r.d.log());
    r.d.kill9();
    assert!(r.repairs().is_empty(), "the repair came before the kill: the test proves nothing");
    assert!(!r.repaired.join("proj/s.jsonl").exists());
    r.d.start();
    assert!(wait(Duration::from_secs(40), || r.repairs().len() == 1), "the owed repair was lost in the restart: {}", r.d.log());
    r.assert_copy_is_clean();
    assert_eq!(std::fs::read(&r.file).unwrap(), r.src, "the live file is untouched");
    // Owed no more: the next checkpoints say so, and no second repair comes.
    assert!(wait(Duration::from_secs(10), || r.checkpointed().is_some_and(|f| f.get("owed").is_none())), "{}", r.d.log());
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(r.repairs().len(), 1);
}

/// The same across an eviction: a file quiet for longer than `evict_after` but not yet idle
/// for `min_idle` keeps the state that makes its repair due, and is repaired.
#[test]
fn a_repair_owed_when_the_file_was_evicted_is_made() {
    let r = Repairing::start("3s", "evict_after = \"300ms\"");
    assert!(wait(Duration::from_secs(20), || !r.repairs().is_empty()), "the owed repair was lost in the eviction: {}", r.d.log());
    r.assert_copy_is_clean();
}

#[test]
fn event_sources_frame_strictly_and_count_types() {
    let mut d = Daemon::prepare(Opts::default());
    let root = d.root.path();
    std::fs::create_dir_all(root.join("events")).unwrap();
    let text = format!(
        "[daemon]\nstate_dir = \"{}\"\n[[sources]]\nkind = \"events\"\ninclude = [\"{}/*.jsonl\"]\n[[stages]]\ntype = \"parse\"\n[[stages]]\ntype = \"orphans\"\ngrace = \"300ms\"\n[[stages]]\ntype = \"validate\"\n[[sinks]]\ntype = \"stdout\"\n[[sinks]]\ntype = \"prometheus\"\naddress = \"127.0.0.1:{}\"\n",
        root.join("state").display(),
        root.join("events").display(),
        d.port
    );
    std::fs::write(d.config_path(), text).unwrap();
    d.start();
    let f = d.root.path().join("events/turn-1.jsonl");
    std::fs::write(&f, "{\"type\":\"tool_call\",\"call_id\":\"a\"}\n{\"type\":\"tool_call\",\"call_id\":\"b\"}\n{\"type\":\"tool_result\",\"call_id\":\"a\"}\nnot json\n{\"type\":\"text\"").unwrap();
    assert!(wait(Duration::from_secs(10), || d.records().iter().any(|r| r["kind"] == "torn_line" && r["line"] == 5)), "{}", d.log());
    assert!(d.records().iter().any(|r| r["kind"] == "malformed_line" && r["line"] == 4));
    let m = d.get("/metrics").unwrap();
    assert!(m.contains("transcriptd_events_total{type=\"tool_call\"} 2"), "{m}");
    assert!(m.contains("transcriptd_pending_tool_calls 1"), "{m}");
}

#[test]
fn validate_config_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let shipped = super::support::root().join("config/transcriptd.toml");
    let ok = transcriptd(&["validate-config", shipped.to_str().unwrap()]);
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[daemon]\nstate_dir = \"/tmp\"\nmax_open_filez = 3\n").unwrap();
    let out = transcriptd(&["validate-config", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml:3") && err.contains("max_open_filez"), "{err}");
    // `-` reads standard input (issue 30: it looked for a file named `-`), errors named `<stdin>:LINE`.
    let piped = |text: &str| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_transcriptd"))
            .args(["validate-config", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut c.stdin.take().unwrap(), text.as_bytes()).unwrap();
        c.wait_with_output().unwrap()
    };
    let ok = piped(&std::fs::read_to_string(&shipped).unwrap());
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));
    assert!(String::from_utf8_lossy(&ok.stdout).starts_with("<stdin>: ok"), "{}", String::from_utf8_lossy(&ok.stdout));
    let out = piped("[daemon]\nstate_dir = \"/tmp\"\nmax_open_filez = 3\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("<stdin>:3"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_start_that_fails_on_its_state_dir_names_the_config_line_and_never_said_it_serves() {
    // Issue 30: `run` logged that it was serving, then failed on an uncreatable state_dir
    // without naming the configuration's line.
    let d = tempfile::tempdir().unwrap();
    let config = d.path().join("c.toml");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::fs::write(
        &config,
        format!("[daemon]\nstate_dir = \"/proc/nope/state\"\n\n[[sources]]\ninclude = [\"{}/*.jsonl\"]\n\n[[sinks]]\ntype = \"prometheus\"\naddress = \"127.0.0.1:{port}\"\n", d.path().display()),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_transcriptd")).args(["run", "--config"]).arg(&config).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("c.toml:2: `daemon.state_dir`"), "the config line is not named: {err}");
    assert!(!err.contains("serving /metrics"), "it said it serves before failing: {err}");
}

#[test]
fn the_built_in_defaults_serve_on_loopback_9464_and_a_second_daemon_goes_on_without_the_port() {
    // Issue 30: the set-up's daemon served no listener, so `tap` and `top` could not reach it.
    let d = tempfile::tempdir().unwrap();
    let start = |name: &str| -> (std::process::Child, std::path::PathBuf) {
        let log = d.path().join(format!("{name}.log"));
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_transcriptd"))
            .args(["run", "--watch"])
            .arg(d.path())
            .arg("--state-dir")
            .arg(d.path().join(name))
            .env("TRANSCRIPTD_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        // Until it watches (it says whether it serves before that).
        let begun = Instant::now();
        while !std::fs::read_to_string(&log).unwrap_or_default().contains("watching") && begun.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        (child, log)
    };
    let stop = |mut child: std::process::Child, log: &std::path::Path| -> (Option<i32>, String) {
        // SAFETY: our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let code = child.wait().unwrap().code();
        (code, std::fs::read_to_string(log).unwrap())
    };
    let health = || -> Option<String> {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect("127.0.0.1:9464").ok()?;
        c.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
        let mut s = String::new();
        c.read_to_string(&mut s).ok()?;
        Some(s)
    };
    // Other tests may hold the default port for a moment: try again until this one has it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (first, first_log) = loop {
        let (child, log) = start("a");
        let said = std::fs::read_to_string(&log).unwrap();
        if said.contains("serving /metrics") {
            assert!(said.contains("addr=127.0.0.1:9464"), "{said}");
            break (child, log);
        }
        let (_, said) = stop(child, &log);
        assert!(said.contains("127.0.0.1:9464 is in use"), "no listener on the defaults and no reason said: {said}");
        assert!(Instant::now() < deadline, "127.0.0.1:9464 stayed taken for a minute");
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(health().is_some_and(|h| h.starts_with("HTTP/1.1 200")), "/health on the default address");
    // A second daemon on the defaults goes on without the port, and says why.
    let (second, second_log) = start("b");
    let (code, said) = stop(second, &second_log);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("127.0.0.1:9464 is in use") && said.contains("--no-metrics") && said.contains("watching"), "{said}");
    let (code, said) = stop(first, &first_log);
    assert_eq!(code, Some(0), "{said}");
}

#[test]
fn a_repairs_by_products_are_never_read_as_transcripts() {
    // Issue 30: the daemon read `.orig.jsonl` backups (their old errors reported again) and,
    // where a source did not exclude them, `.rejects.jsonl` files, which `check` skips. One
    // rule for by-products, everywhere (`sources::batch::is_repair_by_product`).
    let d = Daemon::new("", "");
    let broken = "{\"role\":\"tool\",\"tool_call_id\":\"BYPRODUCT\",\"content\":\"x\"}\n";
    std::fs::write(d.watch_dir().join("s.jsonl.orig.jsonl"), broken).unwrap();
    std::fs::write(d.watch_dir().join("s.jsonl.bak.jsonl"), broken).unwrap();
    std::fs::write(d.watch_dir().join("s.jsonl"), "{\"role\":\"tool\",\"tool_call_id\":\"REAL\",\"content\":\"x\"}\n").unwrap();
    assert!(wait(Duration::from_secs(10), || d.records().iter().any(|r| r["call_id"] == "REAL")), "{}", d.log());
    std::thread::sleep(Duration::from_millis(600));
    let read: Vec<Value> = d.records().into_iter().filter(|r| r["call_id"] == "BYPRODUCT").collect();
    assert!(read.is_empty(), "a backup was read as a transcript: {read:?}");
    // `check` of the directory agrees: only s.jsonl.
    let o = super::support::transcriptd(&["check", "-o", "json", d.watch_dir().to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("BYPRODUCT"), "{}", String::from_utf8_lossy(&o.stdout));
}
