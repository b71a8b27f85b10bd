//! The `http` sink against a real collector process (`peers/http_receiver.py`) that is down,
//! answers errors, and comes back.

use super::support::harness::{check_dir, fold, wait, Daemon};
use super::support::receiver::{free_port, Receiver};
use super::support::{data, jsonl_files};
use std::time::Duration;

/// An `http` sink posting to loopback `port`, small batches and quick retries.
pub fn http_sink(port: u16) -> String {
    format!(
        "[[sinks]]\ntype = \"http\"\nurl = \"http://127.0.0.1:{port}/ingest\"\nmax_records = 7\nmax_delay = \"20ms\"\nretry_initial = \"20ms\"\nretry_max = \"200ms\"\ntimeout = \"2s\"\n"
    )
}

#[test]
fn a_collector_down_then_failing_loses_nothing_and_receives_each_batch_once() {
    let port = free_port();
    let d = Daemon::new("", &http_sink(port));
    for (i, f) in jsonl_files(&data("check")).iter().enumerate() {
        std::fs::copy(f, d.watch_dir().join(format!("c{i}.jsonl"))).unwrap();
    }
    // Nobody listens: the batches wait in the spool, tried again and again.
    assert!(wait(Duration::from_secs(10), || d.log().contains("batch not accepted")), "{}", d.log());
    std::thread::sleep(Duration::from_secs(1));
    // Back, but the first answers are errors.
    let r = Receiver::start(&d.root.path().join("collector"), port, &["--fail-first", "3", "--status", "201"]);
    let want = check_dir(&d.watch_dir());
    assert!(want.len() > 30);
    let mut got = Default::default();
    let complete = wait(Duration::from_secs(30), || {
        got = fold(&r.records());
        got == want
    });
    assert!(complete, "collector vs check: {:?}\n{}", super::support::harness::fold(&r.records()).len(), d.log());
    // Every record arrived once (the fold panics on a finding emitted twice), and no batch came
    // twice: none was taken without its answer reaching the daemon.
    assert_eq!(r.resent(), 0);
    let ids: Vec<String> = r.batches().into_iter().map(|(id, _)| id).collect();
    let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    // The same records as stdout, in the same order.
    let stdout: Vec<String> = d.records().iter().map(ToString::to_string).collect();
    let posted: Vec<String> = r.records().iter().map(ToString::to_string).collect();
    assert!(stdout.starts_with(&posted) || posted == stdout, "the collector got what stdout got, in order");
}

/// The peak resident memory of process `pid`, in bytes (`VmHWM`).
fn peak_rss(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).unwrap().trim().trim_end_matches("kB").trim().parse().unwrap();
    kib << 10
}

#[test]
fn a_collector_answering_with_a_huge_body_is_read_only_at_its_head() {
    // Every answer declares and sends 1 GiB: reading it whole would take the daemon past 1 GiB
    // of memory (and past its timeout, so no batch would ever be taken).
    let dir = tempfile::tempdir().unwrap();
    let r = Receiver::start(&dir.path().join("collector"), 0, &["--answer-bytes", &(1u64 << 30).to_string()]);
    let sink = http_sink(r.port).replace("timeout = \"2s\"", "timeout = \"20s\"");
    let d = Daemon::new("", &sink);
    for (i, f) in jsonl_files(&data("check")).iter().enumerate() {
        std::fs::copy(f, d.watch_dir().join(format!("c{i}.jsonl"))).unwrap();
    }
    let want = check_dir(&d.watch_dir());
    let complete = wait(Duration::from_secs(60), || fold(&r.records()) == want);
    assert!(complete, "collector vs check: {} of {}\n{}", fold(&r.records()).len(), want.len(), d.log());
    let peak = peak_rss(d.pid());
    assert!(peak < 200 << 20, "the daemon's peak RSS is {} MiB", peak >> 20);
    // What the collector managed to write before each close: a few socket buffers, not the body.
    let taken = std::fs::read_to_string(r.out().with_extension("jsonl.taken")).unwrap_or_default();
    let most = taken.lines().filter_map(|l| l.parse::<u64>().ok()).max().unwrap_or(0);
    assert!(most < 64 << 20, "an answer was read to {} MiB", most >> 20);
}
