//! A backlog read ahead on reader threads (`sources/backlog.rs`): the real daemon with large
//! files found at once, against `check`, under a full `http` queue, truncation and `kill -9`.

use super::support::harness::{check_dir, settle, wait, Daemon, Opts};
use super::support::receiver::{free_port, Receiver};
use std::path::Path;
use std::time::Duration;

/// Writes a generated transcript of `mib` MiB (faults, compactions, a torn last line) to
/// `dest`, through a staging directory so that it appears at once.
pub fn backlog(d: &Daemon, dest: &Path, mib: u32, seed: u32) {
    backlog_with(d, dest, mib, seed, "0.01");
}

/// [`backlog`] with this rate of faults.
pub fn backlog_with(d: &Daemon, dest: &Path, mib: u32, seed: u32, faults: &str) {
    let staged = d.root.path().join("staged");
    std::fs::create_dir_all(&staged).unwrap();
    let tmp = staged.join(dest.file_name().unwrap());
    let status = std::process::Command::new("python3")
        .arg(super::support::generator("gen_transcripts.py"))
        .args(["--bytes", &format!("{mib}MiB"), "--seed", &seed.to_string(), "--faults", faults, "--compact-boundary", "0.3", "--truncate-last", "1"])
        .args(["--split-assistant", "-o"])
        .arg(&tmp)
        .status()
        .expect("python3 runs the generator");
    assert!(status.success());
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::rename(&tmp, dest).unwrap();
}

/// A field of `/proc/<pid>/status`, in KiB.
fn status_kib(pid: i32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// A field of `/proc/<pid>/io`.
fn status_io(pid: i32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    s.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Two large files found at once (more than one reader, and one more file than there are
/// readers) and small ones beside them: the findings are `check`'s.
#[test]
fn large_backlogs_read_ahead_give_what_check_gives() {
    let d = Daemon::with(Opts::default());
    for (i, mib) in [12u32, 9, 6].iter().enumerate() {
        backlog(&d, &d.watch_dir().join(format!("big{i}.jsonl")), *mib, 160 + i as u32);
    }
    for (i, f) in super::support::jsonl_files(&super::support::data("check")).iter().take(20).enumerate() {
        std::fs::copy(f, d.watch_dir().join(format!("small{i}.jsonl"))).unwrap();
    }
    let (got, want) = settle(&d);
    assert!(want.len() > 100, "the corpus has findings: {}", want.len());
    assert_eq!(got, want, "{}", d.log());
    let folded = super::support::harness::fold_records(&d.records());
    assert_eq!(folded.compaction_set(), super::support::harness::compactions_in(&d.watch_dir()));
}

/// A file rewritten (truncated, then other content) while it is read ahead: the read-ahead is
/// dropped, what was said about the old content is taken back, and the new content is read from
/// its start.
#[test]
fn a_backlog_rewritten_while_read_ahead_is_read_again_from_the_start() {
    let d = Daemon::with(Opts::default());
    let f = d.watch_dir().join("big.jsonl");
    backlog(&d, &f, 24, 161);
    // Reading has started (a finding is out) but cannot have finished.
    assert!(wait(Duration::from_secs(20), || d.records().iter().any(|r| r["type"] == "finding")), "{}", d.log());
    let other = d.root.path().join("other.jsonl");
    backlog(&d, &other, 5, 162);
    std::fs::write(&f, std::fs::read(&other).unwrap()).unwrap();
    let (got, want) = settle(&d);
    assert_eq!(got, want, "{}", d.log());
}

/// A full `http` queue (collector down) pauses a backlog's read-ahead: the reader threads wait
/// for their buffers, memory stays flat, nothing more is read; once the collector is back,
/// everything arrives once.
#[test]
fn a_full_http_queue_pauses_the_read_ahead_and_memory_stays_flat() {
    let port = free_port();
    let sink = format!("{}queue_bytes = \"16KiB\"\n", super::http_sink::http_sink(port));
    let d = Daemon::new("", &sink);
    let f = d.watch_dir().join("big.jsonl");
    // Many faults: records all along the file, so that the queue fills early.
    backlog_with(&d, &f, 48, 163, "0.2");
    assert!(wait(Duration::from_secs(30), || d.log().contains("http sink queue is full")), "{}", d.log());
    let size = std::fs::metadata(&f).unwrap().len();
    // The queue is full before the readers' buffers are: they fill those first (eight reads in
    // flight). Once they have, reading stops. (`rchar`: every byte its `read`s and `pread`s
    // returned.) A read-ahead that never paused would read the whole file: the bound below.
    let mut last = status_io(d.pid(), "rchar:");
    let settled = wait(Duration::from_secs(20), || {
        std::thread::sleep(Duration::from_millis(500));
        let now = status_io(d.pid(), "rchar:");
        std::mem::replace(&mut last, now) == now
    });
    assert!(settled, "reading never paused behind the full queue: {last} bytes read of {size}");
    // Paused: the process reads (nearly) nothing more, most of the file is unread, and it holds
    // no more than its buffers (its peak, whatever the file's size).
    let before = status_io(d.pid(), "rchar:");
    std::thread::sleep(Duration::from_secs(2));
    let after = status_io(d.pid(), "rchar:");
    assert!(after - before < 1 << 20, "reading went on behind a full queue: {before} -> {after}");
    assert!(after < size / 2, "read {after} of {size}");
    let peak = status_kib(d.pid(), "VmHWM:");
    eprintln!("read-ahead behind a full http queue: peak RSS {peak} KiB for a {} MiB file, {after} bytes read", size >> 20);
    assert!(peak < 40 * 1024, "peak RSS {peak} KiB");
    let r = Receiver::start(&d.root.path().join("collector"), port, &[]);
    let want = check_dir(&d.watch_dir());
    assert!(wait(Duration::from_secs(120), || super::support::harness::fold(&r.records()) == want), "{}", d.log());
    assert_eq!(r.resent(), 0);
}
