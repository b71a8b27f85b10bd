//! Tail findings across reloads and restarts (issue 30.3): a torn last line and calls left open
//! at a file's end, once reported, are not retracted by a SIGHUP (the same configuration or a
//! changed one), a SIGTERM and a start, or a `kill -9` and a start, nor reported again a grace
//! period later, nor counted again; a finding that stopped holding while the daemon was down is
//! retracted once, with the reason that is true.

use super::support::harness::{append, fold, result_line, settle, wait, Daemon};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// A chat assistant line calling `Read` as `id`.
fn call_line(id: &str) -> String {
    format!("{{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{{\"id\":\"{id}\",\"function\":{{\"name\":\"Read\",\"arguments\":\"{{}}\"}}}}]}}\n")
}

const USER: &str = "{\"role\":\"user\",\"content\":\"q\"}\n";
/// The start of a line whose write was interrupted.
const TORN: &str = "{\"role\":\"assistant\",\"content\":\"half a rep";

/// The tail findings reported (`finding` records of `torn_line` and `orphan_call`), as
/// (file name, kind, call id).
fn tail_reports(d: &Daemon) -> Vec<(String, String, Option<String>)> {
    let mut v: Vec<_> = d
        .records()
        .iter()
        .filter(|r| r["type"] == "finding" && (r["kind"] == "torn_line" || r["kind"] == "orphan_call"))
        .map(|r| (name(&r["file"]), r["kind"].as_str().unwrap().to_owned(), r["call_id"].as_str().map(str::to_owned)))
        .collect();
    v.sort();
    v
}

/// The retractions, as (file name, kind, reason).
fn retractions(d: &Daemon) -> Vec<(String, String, String)> {
    let mut v: Vec<_> = d
        .records()
        .iter()
        .filter(|r| r["type"] == "finding_retracted")
        .map(|r| (name(&r["file"]), r["kind"].as_str().unwrap().to_owned(), r["reason"].as_str().unwrap().to_owned()))
        .collect();
    v.sort();
    v
}

fn name(file: &Value) -> String {
    Path::new(file.as_str().unwrap()).file_name().unwrap().to_string_lossy().into_owned()
}

/// The sum of the samples of `name` whose labels contain `label` (`""`: all).
fn counted(metrics: &str, name: &str, label: &str) -> f64 {
    metrics.lines().filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
}

/// What this process counted of the tail findings: torn lines, orphan calls (the findings
/// counter), orphan calls (the alert's counter).
fn counters(d: &Daemon) -> (f64, f64, f64) {
    let m = d.get("/metrics").unwrap_or_default();
    (
        counted(&m, "transcriptd_findings_total", "kind=\"torn_line\""),
        counted(&m, "transcriptd_findings_total", "kind=\"orphan_call\""),
        counted(&m, "transcriptd_orphan_tool_calls_total", ""),
    )
}

/// The calls waiting for their result now (the gauge).
fn pending(d: &Daemon) -> Option<f64> {
    super::support::harness::metric(&d.get("/metrics")?, "transcriptd_pending_tool_calls")
}

/// Whether the last checkpoint records the tail findings of every file in `want` (name, count).
fn checkpointed(d: &Daemon, want: &[(&str, usize)]) -> bool {
    let Ok(bytes) = std::fs::read(d.state_dir().join("checkpoints.json")) else { return false };
    let Ok(cp) = serde_json::from_slice::<Value>(&bytes) else { return false };
    let files = cp["files"].as_array().cloned().unwrap_or_default();
    want.iter().all(|(n, k)| files.iter().any(|f| name(&f["path"]) == *n && f["tail"].as_array().is_some_and(|t| t.len() == *k)))
}

/// Long enough for every grace period (300 ms, 250 ms after the changed reload) to pass several
/// times over, and for a poll (500 ms) and checkpoints (100 ms) to happen.
const PAST_GRACE: Duration = Duration::from_millis(1500);

#[test]
fn tail_findings_that_still_hold_survive_reloads_and_restarts_once() {
    let mut d = Daemon::new("", "");
    let w = d.watch_dir();
    // A torn last line; calls left open at the end; both (an agent killed mid-write).
    std::fs::write(w.join("torn.jsonl"), format!("{USER}{TORN}")).unwrap();
    std::fs::write(w.join("open.jsonl"), format!("{USER}{}", call_line("call_open"))).unwrap();
    std::fs::write(w.join("both.jsonl"), format!("{USER}{}{TORN}", call_line("call_both"))).unwrap();
    std::fs::write(w.join("gone.jsonl"), format!("{USER}{TORN}")).unwrap();
    let reported = vec![
        ("both.jsonl".to_owned(), "orphan_call".to_owned(), Some("call_both".to_owned())),
        ("both.jsonl".to_owned(), "torn_line".to_owned(), None),
        ("gone.jsonl".to_owned(), "torn_line".to_owned(), None),
        ("open.jsonl".to_owned(), "orphan_call".to_owned(), Some("call_open".to_owned())),
        ("torn.jsonl".to_owned(), "torn_line".to_owned(), None),
    ];
    assert!(wait(Duration::from_secs(10), || tail_reports(&d) == reported), "{:?}\n{}", tail_reports(&d), d.log());
    let tails = [("torn.jsonl", 1), ("open.jsonl", 1), ("both.jsonl", 2), ("gone.jsonl", 1)];
    assert!(wait(Duration::from_secs(10), || checkpointed(&d, &tails)), "the tails are checkpointed");
    assert!(wait(Duration::from_secs(10), || counters(&d) == (3.0, 2.0, 2.0)), "{:?}", counters(&d));
    assert_eq!(pending(&d), Some(2.0));
    // Every step below: still exactly one report of each, no retraction.
    let unchanged = |d: &Daemon, step: &str| {
        std::thread::sleep(PAST_GRACE);
        assert_eq!(tail_reports(d), reported, "{step}: reported again\n{}", d.log());
        assert_eq!(retractions(d), vec![], "{step}: retracted though it holds\n{}", d.log());
        fold(&d.records());
        assert_eq!(pending(d), Some(2.0), "{step}: the calls still wait");
    };

    // SIGHUP, the same configuration: the same process, its counters go on.
    d.signal(libc::SIGHUP);
    assert!(wait(Duration::from_secs(10), || d.log().matches("configuration reloaded").count() == 1), "{}", d.log());
    unchanged(&d, "reload");
    assert_eq!(counters(&d), (3.0, 2.0, 2.0), "reload: counted again");

    // SIGHUP, a changed configuration (a shorter grace period).
    let text = std::fs::read_to_string(d.config_path()).unwrap();
    std::fs::write(d.config_path(), text.replace("grace = \"300ms\"", "grace = \"250ms\"")).unwrap();
    d.signal(libc::SIGHUP);
    assert!(wait(Duration::from_secs(10), || d.log().matches("configuration reloaded").count() == 2), "{}", d.log());
    unchanged(&d, "changed reload");
    assert_eq!(counters(&d), (3.0, 2.0, 2.0), "changed reload: counted again");

    // SIGTERM and a start: a new process counts from 0, and counts nothing it reported before.
    assert_eq!(d.stop(), Some(0));
    d.start();
    unchanged(&d, "restart");
    assert_eq!(counters(&d), (0.0, 0.0, 0.0), "restart: counted again");

    // kill -9 (after the checkpoint that recorded the tails) and a start.
    assert!(wait(Duration::from_secs(10), || checkpointed(&d, &tails)));
    d.kill9();
    d.start();
    unchanged(&d, "kill -9");
    assert_eq!(counters(&d), (0.0, 0.0, 0.0), "kill -9: counted again");

    // While it is down: the torn line is completed, the open call answered, `both` rewritten
    // in place (the same size), `gone` deleted. Each of their findings is retracted once, with
    // the reason that is true.
    assert!(wait(Duration::from_secs(10), || checkpointed(&d, &tails)));
    d.kill9();
    append(&w.join("torn.jsonl"), "ly\"}\n");
    append(&w.join("open.jsonl"), result_line("call_open"));
    let both = std::fs::read(w.join("both.jsonl")).unwrap();
    std::fs::write(w.join("both.jsonl"), both.iter().map(|b| if *b == b'q' { b'Q' } else { *b }).collect::<Vec<u8>>()).unwrap();
    std::fs::remove_file(w.join("gone.jsonl")).unwrap();
    d.start();
    let want = vec![
        ("both.jsonl".to_owned(), "orphan_call".to_owned(), "the file was truncated or rewritten".to_owned()),
        ("both.jsonl".to_owned(), "torn_line".to_owned(), "the file was truncated or rewritten".to_owned()),
        ("gone.jsonl".to_owned(), "torn_line".to_owned(), "the file was deleted".to_owned()),
        ("open.jsonl".to_owned(), "orphan_call".to_owned(), "the file grew".to_owned()),
        ("torn.jsonl".to_owned(), "torn_line".to_owned(), "the file grew".to_owned()),
    ];
    assert!(wait(Duration::from_secs(10), || retractions(&d) == want), "{:?}\n{}", retractions(&d), d.log());
    // The rewritten file is read again from its start: its findings hold again and are
    // reported again (after `file_truncated`); the others are not.
    let (got, check) = settle(&d);
    assert_eq!(got, check, "{}", d.log());
    std::thread::sleep(PAST_GRACE);
    assert_eq!(retractions(&d), want, "retracted once\n{}", d.log());
    let mut again = reported.clone();
    again.extend(reported.iter().filter(|r| r.0 == "both.jsonl").cloned());
    again.sort();
    assert_eq!(tail_reports(&d), again, "only the rewritten file's findings are reported again\n{}", d.log());
    assert_eq!(counters(&d), (1.0, 1.0, 1.0), "the rewritten file's findings, counted once: {:?}", counters(&d));
    assert_eq!(d.stop(), Some(0));
}

/// The same within one process: a quiet file's state is dropped (`evict_after`) and, polled
/// again (`watch = "poll"` looks at every file each `poll_interval`), is not rebuilt for a torn
/// line read before; it is rebuilt, and its findings retracted once, when it grows.
#[test]
fn an_evicted_file_with_a_torn_line_is_not_taken_for_grown() {
    let d = Daemon::new("watch = \"poll\"\nevict_after = \"300ms\"", "");
    let w = d.watch_dir();
    std::fs::write(w.join("both.jsonl"), format!("{USER}{}{TORN}", call_line("call_both"))).unwrap();
    let reported =
        vec![("both.jsonl".to_owned(), "orphan_call".to_owned(), Some("call_both".to_owned())), ("both.jsonl".to_owned(), "torn_line".to_owned(), None)];
    assert!(wait(Duration::from_secs(10), || tail_reports(&d) == reported), "{:?}\n{}", tail_reports(&d), d.log());
    // Evicted after 300 ms, polled every 500 ms, grace 300 ms: several rounds of each.
    std::thread::sleep(PAST_GRACE * 2);
    assert_eq!(tail_reports(&d), reported, "reported again\n{}", d.log());
    assert_eq!(retractions(&d), vec![], "retracted though it holds\n{}", d.log());
    assert_eq!(counters(&d), (1.0, 1.0, 1.0));
    let lag = d.get("/metrics").and_then(|m| super::support::harness::metric(&m, "transcriptd_source_lag_bytes"));
    assert_eq!(lag, Some(0.0), "a torn line read is not unread");
    append(&w.join("both.jsonl"), format!("ly\"}}\n{}", result_line("call_both")));
    let want = vec![
        ("both.jsonl".to_owned(), "orphan_call".to_owned(), "the file grew".to_owned()),
        ("both.jsonl".to_owned(), "torn_line".to_owned(), "the file grew".to_owned()),
    ];
    assert!(wait(Duration::from_secs(10), || retractions(&d) == want), "{:?}\n{}", retractions(&d), d.log());
    let (got, check) = settle(&d);
    assert_eq!(got, check, "{}", d.log());
    std::thread::sleep(PAST_GRACE);
    assert_eq!((tail_reports(&d), retractions(&d)), (reported, want), "{}", d.log());
}
