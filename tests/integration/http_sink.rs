//! The `http` sink against a real collector process (`peers/http_receiver.py`) that is down,
//! answers errors, and comes back.

use super::harness::{check_dir, fold, wait, Daemon};
use super::receiver::{free_port, Receiver};
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
    assert!(complete, "collector vs check: {:?}\n{}", super::harness::fold(&r.records()).len(), d.log());
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
