//! The daemon under faults: each defect an adversary found (issue 15), reproduced with real
//! processes — FIFOs, device links, symlinks, `rm -rf` of the watched root, nested `mkdir`,
//! SIGSTOP around in-place rewrites, inode reuse, `kill -9`, a shared stdout file, SIGHUP with a
//! configuration that cannot start, connection floods under a descriptor limit — and kept fixed.

use super::support::harness::{append, compactions_in, fold_records, http, metric, metric_sum, result_line, settle, wait, Daemon, Opts, Out};
use super::support::{data, transcriptd};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn has_call(d: &Daemon, call: &str) -> bool {
    d.records().iter().any(|r| r["type"] == "finding" && r["call_id"] == call)
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; mkfifo does not touch our memory otherwise.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo {}", p.display());
}

/// Issue 15, defect 1: A FIFO, a socket or a link to a character device named `*.jsonl` is skipped with a
/// warning; nothing blocks the loop, and SIGTERM still ends the process.
#[test]
fn fifos_sockets_and_device_links_are_skipped_and_never_freeze_the_loop() {
    let mut d = Daemon::prepare(Opts::default());
    let w = d.watch_dir();
    // One already there at startup ...
    mkfifo(&w.join("early-fifo.jsonl"));
    d.start();
    // ... and the rest created while the daemon runs.
    mkfifo(&w.join("fifo.jsonl"));
    std::os::unix::fs::symlink("/dev/zero", w.join("zero.jsonl")).unwrap();
    let _sock = std::os::unix::net::UnixListener::bind(w.join("sock.jsonl")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // A regular file written afterwards is read at once.
    std::fs::write(w.join("ok.jsonl"), result_line("after-fifo")).unwrap();
    assert!(wait(Duration::from_secs(10), || has_call(&d, "after-fifo")), "the loop is frozen; log:\n{}", d.log());
    assert_eq!(d.health().map(|h| h.0), Some(200));
    let log = d.log();
    for name in ["fifo.jsonl", "sock.jsonl", "zero.jsonl"] {
        assert!(log.lines().any(|l| l.contains("WARN") && l.contains(name)), "no warning naming {name}:\n{log}");
    }
    assert!(d.records().iter().all(|r| !r["file"].as_str().unwrap_or("").contains("fifo")), "nothing is reported for a FIFO");
    let t = Instant::now();
    assert_eq!(d.stop(), Some(0), "SIGTERM ends the daemon; log:\n{}", d.log());
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

/// Issue 15, defect 2: The watched root, deleted and created again, is watched again at once: new files and
/// later appends are read without waiting for the periodic rescan (30 s).
#[test]
fn a_watched_root_deleted_and_recreated_is_watched_again() {
    let d = Daemon::new("", "");
    let w = d.watch_dir();
    std::fs::write(w.join("a.jsonl"), result_line("before")).unwrap();
    assert!(wait(Duration::from_secs(10), || has_call(&d, "before")), "{}", d.log());
    std::fs::remove_dir_all(&w).unwrap();
    assert!(wait(Duration::from_secs(10), || d.records().iter().any(|r| r["type"] == "file_closed")), "{}", d.log());
    std::fs::create_dir_all(w.join("sub")).unwrap();
    std::fs::write(w.join("b.jsonl"), result_line("recreated")).unwrap();
    assert!(wait(Duration::from_secs(5), || has_call(&d, "recreated")), "a file in the recreated root is not read; log:\n{}", d.log());
    append(&w.join("b.jsonl"), result_line("appended"));
    assert!(wait(Duration::from_secs(5), || has_call(&d, "appended")), "an append in the recreated root is not read; log:\n{}", d.log());
    std::fs::write(w.join("sub/c.jsonl"), result_line("in-sub")).unwrap();
    assert!(wait(Duration::from_secs(5), || has_call(&d, "in-sub")), "{}", d.log());
    // Twice over: the second recreation is no different.
    std::fs::remove_dir_all(&w).unwrap();
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(w.join("d.jsonl"), result_line("again")).unwrap();
    assert!(wait(Duration::from_secs(5), || has_call(&d, "again")), "{}", d.log());
}

/// Issue 15, defect 3: Files created right after a nested `mkdir` (or in a directory tree moved in) are never
/// missed: each new directory is searched after its watch is in place.
#[test]
fn files_created_right_after_a_nested_mkdir_are_never_missed() {
    let d = Daemon::new("", "");
    let w = d.watch_dir();
    // Directories made, then a file written in them after a pause of 0-3 ms: in the window
    // between the daemon hearing of the directory and its watch being in place.
    let n = 160;
    std::thread::scope(|s| {
        for t in 0..8 {
            let w = w.clone();
            s.spawn(move || {
                let mut x = 0x9E37_79B9_u64 ^ t;
                for i in (t as usize..n).step_by(8) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let deep = w.join(format!("p{i}/session/subagents"));
                    std::fs::create_dir_all(&deep).unwrap();
                    std::thread::sleep(Duration::from_micros(x % 3000));
                    std::fs::write(deep.join("agent-1.jsonl"), result_line(&format!("nested{i}"))).unwrap();
                }
            });
        }
    });
    // A tree of many empty directories moved in, and files written in them at once: the
    // watcher takes a while to watch them all, the search of the (empty) tree takes no time.
    let tree = d.root.path().join("tree");
    let m = 1500;
    for i in 0..m {
        std::fs::create_dir_all(tree.join(format!("d{i}"))).unwrap();
    }
    std::fs::rename(&tree, w.join("tree")).unwrap();
    for i in (0..m).rev() {
        std::fs::write(w.join(format!("tree/d{i}/x.jsonl")), result_line(&format!("moved{i}"))).unwrap();
    }
    // Well before the periodic rescan (30 s).
    let missed = |d: &Daemon| {
        let calls: BTreeSet<String> = d.records().iter().filter_map(|r| r["call_id"].as_str().map(str::to_owned)).collect();
        let mut v: Vec<String> = (0..n).map(|i| format!("nested{i}")).chain((0..m).map(|i| format!("moved{i}"))).filter(|c| !calls.contains(c)).collect();
        v.truncate(20);
        v
    };
    assert!(wait(Duration::from_secs(10), || missed(&d).is_empty()), "missed: {:?}\n{}", missed(&d), d.log());
}

/// Waits until `/health` answers 503 with `why` among its reasons.
fn wait_unhealthy(d: &Daemon, why: &str, timeout: Duration) {
    let mut last = None;
    let unhealthy = wait(timeout, || {
        last = d.health();
        last.as_ref().is_some_and(|h| h.0 == 503 && h.1.contains(why))
    });
    assert!(unhealthy, "/health stays {last:?}, not 503 \"{why}\"; log:\n{}", d.log());
}

/// Issue 15, defect 4a: `/health` turns unhealthy when the loop is stuck (here: writing to a stdout pipe nobody
/// reads), and healthy again once it moves.
#[test]
fn health_turns_unhealthy_when_the_loop_is_stuck() {
    let mut d = Daemon::prepare(Opts { daemon: "stall_timeout = \"1s\"".into(), out: Out::Pipe, ..Opts::default() });
    d.start();
    // Far more records than a pipe holds (64 KiB).
    let mut text = String::new();
    for i in 0..3000 {
        text.push_str(&result_line(&format!("stuck-{i:04}")));
    }
    std::fs::write(d.watch_dir().join("many.jsonl"), text).unwrap();
    wait_unhealthy(&d, "stuck", Duration::from_secs(15));
    // Drain the pipe: the loop moves again.
    let mut pipe = d.pipe.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = pipe.read_to_end(&mut sink);
        sink
    });
    assert!(wait(Duration::from_secs(15), || d.health().is_some_and(|h| h.0 == 200)), "{}", d.log());
    assert_eq!(d.stop(), Some(0));
    let out = String::from_utf8(reader.join().unwrap()).unwrap();
    assert_eq!(out.lines().filter(|l| l.contains("\"kind\":\"orphan_result\"")).count(), 3000);
}

/// Issue 15, defect 4b: `/health` turns unhealthy while checkpoints cannot be written, and healthy once they can.
#[test]
fn health_turns_unhealthy_while_checkpoints_fail() {
    let d = Daemon::new("", "");
    let f = d.watch_dir().join("a.jsonl");
    std::fs::write(&f, result_line("one")).unwrap();
    assert!(wait(Duration::from_secs(10), || has_call(&d, "one")));
    // The state directory becomes a regular file: no checkpoint can be written.
    std::fs::remove_dir_all(d.state_dir()).unwrap();
    std::fs::write(d.state_dir(), "not a directory").unwrap();
    append(&f, result_line("two"));
    wait_unhealthy(&d, "checkpoint writes fail", Duration::from_secs(10));
    std::fs::remove_file(d.state_dir()).unwrap();
    assert!(wait(Duration::from_secs(10), || d.health().is_some_and(|h| h.0 == 200)), "{}", d.log());
    assert!(d.state_dir().join("checkpoints.json").exists());
}

fn set_nofile(pid: i32, n: u64) {
    let mut old = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: prlimit on our own child with valid structs.
    assert_eq!(unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) }, 0);
    let lim = libc::rlimit { rlim_cur: n.min(old.rlim_max), rlim_max: old.rlim_max };
    // SAFETY: as above.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &lim, std::ptr::null_mut()) };
    assert_eq!(r, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// Leaves the daemon no descriptor: its limit is set to its lowest free descriptor, taken with
/// the daemon stopped (every thread) at a moment when that means something:
/// - it holds no descriptor only for a moment (a directory being walked or synced, anything in
///   its state directory: a checkpoint being written) — else that slot is free a moment later
///   and the limit leaves room (1 run in 10);
/// - no hole lies below a descriptor it keeps (the metrics listener's reserve, on `/dev/null`):
///   a limit below it leaves the reserve out, where a process that ran out of descriptors at
///   its limit has it inside (1 run in 150). A hole is filled by a file the daemon opens.
fn exhaust_descriptors(d: &Daemon) {
    let pid = d.pid();
    let state = d.state_dir();
    let table = || -> BTreeMap<u64, PathBuf> {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .filter_map(|e| {
                let e = e.ok()?;
                Some((e.file_name().to_str()?.parse().ok()?, std::fs::read_link(e.path()).unwrap_or_default()))
            })
            .collect()
    };
    for fill in 0..500 {
        d.pause();
        let fds = table();
        let passing = fds.iter().any(|(n, l)| {
            std::fs::metadata(format!("/proc/{pid}/fd/{n}")).is_ok_and(|m| m.is_dir())
                || (l.starts_with(&state) && *l != state.join("lock"))
                || l.to_string_lossy().ends_with(".tmp")
        });
        let lowest = (0..).find(|n| !fds.contains_key(n)).unwrap();
        let hole = fds.iter().any(|(n, l)| *n > lowest && l == Path::new("/dev/null"));
        if !passing && !hole {
            set_nofile(pid, lowest);
            d.resume();
            return;
        }
        d.resume();
        if hole {
            let filler = d.watch_dir().join(format!("filler{fill}.jsonl"));
            std::fs::write(&filler, "{\"role\":\"user\",\"content\":\"q\"}\n").unwrap();
            assert!(wait(Duration::from_secs(5), || table().values().any(|l| *l == filler)), "{} not opened", filler.display());
        } else {
            std::thread::sleep(Duration::from_millis(3));
        }
    }
    panic!("no moment to take the daemon's descriptors away");
}

/// Issue 15, defects 4c and 13: When no descriptor is left, a file that cannot be opened is retried, `/health`
/// says reading fails, and the line is reported once descriptors are back: never lost.
#[test]
fn a_line_unreadable_for_want_of_descriptors_is_retried_not_lost() {
    let d = Daemon::new("", "");
    let w = d.watch_dir();
    std::fs::write(w.join("a.jsonl"), result_line("first")).unwrap();
    assert!(wait(Duration::from_secs(10), || has_call(&d, "first")));
    std::thread::sleep(Duration::from_millis(300));
    // No descriptor left: the lowest free one is at the limit.
    exhaust_descriptors(&d);
    std::fs::write(w.join("b.jsonl"), "{\"role\":\"user\",\"content\":\"q\"}\nnot json at all\n").unwrap();
    assert!(wait(Duration::from_secs(10), || d.log().contains("b.jsonl")), "{}", d.log());
    wait_unhealthy(&d, "reading fails", Duration::from_secs(10));
    set_nofile(d.pid(), 1024);
    assert!(
        wait(Duration::from_secs(10), || d.records().iter().any(|r| r["kind"] == "malformed_line" && r["file"].as_str().unwrap().ends_with("b.jsonl"))),
        "the line was lost; log:\n{}",
        d.log()
    );
    assert!(wait(Duration::from_secs(10), || d.health().is_some_and(|h| h.0 == 200)), "{}", d.log());
    let (got, want) = settle(&d);
    assert_eq!(got, want);
}

/// Issue 15, defect 5: `compaction` records are exactly-once, like findings: not again after SIGHUP, a restart,
/// or `kill -9`.
#[test]
fn compaction_records_are_exactly_once_across_sighup_restart_and_kill_9() {
    let mut d = Daemon::new("", "");
    let w = d.watch_dir();
    let f = w.join("s.jsonl");
    std::fs::copy(data("real/claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.slice-L1168-L1863.jsonl"), &f).unwrap();
    let want = compactions_in(&w);
    assert!(!want.is_empty());
    let check = |d: &Daemon, step: &str| {
        let got = fold_records(&d.records());
        let twice: Vec<_> = got.compactions.iter().filter(|(_, n)| **n > 1).collect();
        assert!(twice.is_empty(), "after {step}: compaction records emitted twice: {twice:?}");
        assert_eq!(got.compaction_set(), want, "after {step}");
    };
    // A malformed line appended after each step: its finding shows the daemon read on.
    let poke = |d: &Daemon| {
        append(&f, "not json\n");
        let line = std::fs::read_to_string(&f).unwrap().lines().count() as u64;
        let file = f.display().to_string();
        assert!(
            wait(Duration::from_secs(10), || fold_records(&d.records()).live.keys().any(|k| k.0 == file && k.1 == line && k.2 == "malformed_line")),
            "{}",
            d.log()
        );
    };
    poke(&d);
    check(&d, "the first read");
    d.signal(libc::SIGHUP);
    assert!(wait(Duration::from_secs(10), || d.log().contains("configuration reloaded")), "{}", d.log());
    poke(&d);
    check(&d, "SIGHUP");
    assert_eq!(d.stop(), Some(0));
    d.start();
    poke(&d);
    check(&d, "a restart");
    d.kill9();
    d.start();
    poke(&d);
    check(&d, "kill -9");
}

/// Lines whose first KiB is fixed, then `tail` lines.
fn rewritten(head_calls: &[&str], tail_calls: &[&str]) -> String {
    let pad = "p".repeat(600);
    let mut s = String::new();
    for c in head_calls {
        s.push_str(&format!("{{\"role\":\"user\",\"content\":\"{pad} {c}\"}}\n"));
    }
    for c in tail_calls {
        s.push_str(&result_line(c));
    }
    s
}

/// Issue 15, defect 6: A file rewritten in place (same inode, same first KiB) that grows past the old offset
/// before the daemon looks is read again from the start — live, and across a restart.
#[test]
fn an_in_place_rewrite_past_the_old_offset_is_detected_live_and_across_a_restart() {
    let mut d = Daemon::new("", "");
    let f = d.watch_dir().join("s.jsonl");
    std::fs::write(&f, rewritten(&["h1", "h2"], &["old1", "old2"])).unwrap();
    assert!(wait(Duration::from_secs(10), || has_call(&d, "old2")), "{}", d.log());
    let ino = std::fs::metadata(&f).unwrap().ino();
    let rewrite = |calls: &[&str]| {
        let mut fh = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
        fh.set_len(0).unwrap();
        fh.write_all(rewritten(&["h1", "h2"], calls).as_bytes()).unwrap();
    };
    // The daemon looks only once the file holds more than before.
    d.while_stopped(|| rewrite(&["new1-is-a-longer-call-id", "new2-is-a-longer-call-id", "new3"]));
    assert_eq!(std::fs::metadata(&f).unwrap().ino(), ino);
    assert!(wait(Duration::from_secs(10), || d.records().iter().any(|r| r["type"] == "file_truncated")), "rewrite not seen; log:\n{}", d.log());
    let (got, want) = settle(&d);
    assert_eq!(got, want, "live; log:\n{}", d.log());
    // Across a restart: rewritten while the daemon is down.
    assert_eq!(d.stop(), Some(0));
    rewrite(&["after-restart-1-with-a-much-longer-call-id", "after-restart-2-with-a-much-longer-call-id", "a3", "a4"]);
    d.start();
    let (got, want) = settle(&d);
    assert_eq!(got, want, "across a restart; log:\n{}", d.log());
    assert_eq!(d.records().iter().filter(|r| r["type"] == "file_truncated").count(), 2);
}

/// Deletes `x` and creates `y` with `content` on `x`'s inode, really: creates throwaway files
/// until one gets the freed inode (ext4 hands it out again at once, unless a process elsewhere
/// takes it first). Whether it did; if not, `y` is a new file all the same.
fn delete_and_reuse_inode(x: &Path, y: &Path, content: &str) -> bool {
    let ino = std::fs::metadata(x).unwrap().ino();
    std::fs::remove_file(x).unwrap();
    let mut extra = Vec::new();
    let mut reused = false;
    for i in 0..50 {
        let p = y.with_extension(format!("tmp{i}"));
        std::fs::write(&p, content).unwrap();
        if std::fs::metadata(&p).unwrap().ino() == ino {
            std::fs::rename(&p, y).unwrap();
            reused = true;
            break;
        }
        extra.push(p);
    }
    for p in extra {
        std::fs::remove_file(p).unwrap();
    }
    if !reused {
        std::fs::write(y, content).unwrap();
    }
    reused
}

/// `x` rewritten with `content` and renamed to `y`: to the daemon exactly what inode reuse is
/// (`x` gone, its device and inode under another watched name with unrelated content), and
/// deterministic.
fn emulate_inode_reuse(x: &Path, y: &Path, content: &str) {
    std::fs::write(x, content).unwrap();
    std::fs::rename(x, y).unwrap();
}

/// Issue 15, defect 7: A new, unrelated file that reuses a deleted file's inode starts from scratch; the deleted
/// file's retraction and closing are reported under the deleted file's name — live, and across
/// a restart.
#[test]
fn a_new_file_reusing_a_deleted_files_inode_inherits_nothing() {
    // One open file at a time: the daemon holds no handle on a quiet file, so its inode can be
    // freed and reused while the daemon still tracks it.
    let mut d = Daemon::new("max_open_files = 1", "");
    let w = d.watch_dir();
    let torn = |call: &str| format!("{}{{\"role\":\"user\",\"con", result_line(call));
    let unrelated = |call: &str| format!("{}{}", result_line(&format!("{call}-unrelated-and-longer")), result_line(call));
    let torn_lines = |d: &Daemon| d.records().iter().filter(|r| r["kind"] == "torn_line").count();
    let mut reused = Vec::new();
    for (round, restart) in [(1, false), (2, true)] {
        // x ends in a torn line: a tail finding that a retraction withdraws when x goes.
        let x = w.join(format!("x{round}.jsonl"));
        let y = w.join(format!("y{round}.jsonl"));
        let before = torn_lines(&d);
        std::fs::write(&x, torn(&format!("x{round}"))).unwrap();
        assert!(wait(Duration::from_secs(10), || torn_lines(&d) > before), "{}", d.log());
        // Another file grows: x's handle is closed (max_open_files = 1).
        let z = w.join(format!("z{round}.jsonl"));
        std::fs::write(&z, result_line(&format!("z{round}"))).unwrap();
        assert!(wait(Duration::from_secs(10), || has_call(&d, &format!("z{round}"))));
        std::thread::sleep(Duration::from_millis(200));
        if restart {
            // Across a restart: really (the checkpoint names x's inode).
            assert_eq!(d.stop(), Some(0));
            reused.push(delete_and_reuse_inode(&x, &y, &unrelated(&format!("y{round}"))));
            d.start();
        } else {
            // Live: deterministically, while the daemon looks away.
            d.while_stopped(|| emulate_inode_reuse(&x, &y, &unrelated(&format!("y{round}"))));
        }
        let (got, want) = settle(&d);
        assert_eq!(got, want, "round {round}; log:\n{}", d.log());
        let recs = d.records();
        let about = |name: &str, ty: &str| recs.iter().filter(|r| r["type"] == ty && r["file"].as_str().unwrap().ends_with(name)).count();
        let (xn, yn) = (format!("x{round}.jsonl"), format!("y{round}.jsonl"));
        assert_eq!(about(&yn, "finding_retracted"), 0, "round {round}: x's retraction reported under y's name");
        assert_eq!(about(&xn, "finding_retracted"), 1, "round {round}: x's torn line is retracted under x's name");
        assert_eq!(about(&xn, "file_closed"), 1, "round {round}");
        let opened: Vec<&Value> = recs.iter().filter(|r| r["type"] == "file_opened" && r["file"].as_str().unwrap().ends_with(&yn)).collect();
        assert_eq!(opened.len(), 1, "round {round}: {recs:?}");
        assert_eq!(opened[0]["offset"], 0, "round {round}: y is read from its first byte");
    }
    eprintln!("inode really reused across the restart: {reused:?}");
}

/// Issue 15, defect 8: What is read at start-up is counted: every counter counts from the first byte.
#[test]
fn metrics_count_what_is_read_at_startup() {
    let mut d = Daemon::prepare(Opts::default());
    let f = d.watch_dir().join("s.jsonl");
    std::fs::copy(data("real/claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.slice-L1168-L1863.jsonl"), &f).unwrap();
    std::fs::write(d.watch_dir().join("bad.jsonl"), "{\"role\":\"user\",\"content\":\"q\"}\nnot json\n").unwrap();
    d.start();
    let (got, want) = settle(&d);
    assert_eq!(got, want);
    let m = d.get("/metrics").unwrap();
    let bytes = std::fs::metadata(&f).unwrap().len() + std::fs::metadata(d.watch_dir().join("bad.jsonl")).unwrap().len();
    assert_eq!(metric(&m, "transcriptd_bytes_read_total"), Some(bytes as f64), "{m}");
    // Lines read are every non-blank line, the malformed one too (it is also a finding; issue
    // 30: top's lines/s left it out).
    let lines = std::fs::read_to_string(&f).unwrap().lines().filter(|l| !l.trim().is_empty()).count() + 2;
    assert_eq!(metric_sum(&m, "transcriptd_lines_read_total"), lines as f64, "{m}");
    let findings = d.records().iter().filter(|r| r["type"] == "finding").count();
    assert!(findings > 0);
    assert_eq!(metric_sum(&m, "transcriptd_findings_total"), findings as f64, "{m}");
    assert!(metric_sum(&m, "transcriptd_compactions_total") >= 1.0, "{m}");
    // Tokens: what `usage` reports on the same file, type by type.
    let usage = transcriptd(&["usage", "--output", "json", f.to_str().unwrap()]);
    let usage: Vec<Value> = String::from_utf8(usage.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(!usage.is_empty());
    for u in &usage {
        let model = u["model"].as_str().unwrap();
        for (ty, field) in [
            ("input", "input_tokens"),
            ("output", "output_tokens"),
            ("cache_read", "cache_read_input_tokens"),
            ("cache_creation", "cache_creation_input_tokens"),
        ] {
            let want = u[field].as_u64().unwrap();
            let got = metric(&m, &format!("transcriptd_tokens_total{{model=\"{model}\",type=\"{ty}\"}}")).unwrap_or(0.0);
            assert_eq!(got, want as f64, "{model} {ty}: {m}");
        }
    }
}

/// Issue 15, defect 9: `file_opened` carries the file's `format`.
#[test]
fn file_opened_records_carry_the_format() {
    let d = Daemon::new("", "");
    let w = d.watch_dir();
    std::fs::copy(data("real/claude-code/spotter/short.jsonl"), w.join("c.jsonl")).unwrap();
    std::fs::write(w.join("o.jsonl"), result_line("o1")).unwrap();
    let opened = |name: &str| d.records().into_iter().find(|r| r["type"] == "file_opened" && r["file"].as_str().unwrap().ends_with(name));
    assert!(wait(Duration::from_secs(10), || opened("c.jsonl").is_some() && opened("o.jsonl").is_some()), "{}", d.log());
    assert_eq!(opened("c.jsonl").unwrap()["format"], "claude-code");
    assert_eq!(opened("o.jsonl").unwrap()["format"], "openai-chat");
    // Before the file's other records.
    let recs = d.records();
    let first = recs.iter().position(|r| r["file"].as_str().is_some_and(|f| f.ends_with("o.jsonl"))).unwrap();
    assert_eq!(recs[first]["type"], "file_opened");
}

/// Issue 15, defect 10: A restart cuts back only a stdout file nobody else writes: `run >> log 2>&1` keeps the
/// daemon's logs and other programs' lines (stdout is then at-least-once).
#[test]
fn a_restart_never_cuts_back_a_stdout_file_others_write() {
    for out in [Out::Shared, Out::File] {
        let mut d = Daemon::with(Opts { out, ..Opts::default() });
        let f = d.watch_dir().join("a.jsonl");
        std::fs::write(&f, result_line("c1")).unwrap();
        assert!(wait(Duration::from_secs(10), || has_call(&d, "c1")));
        // Let a checkpoint cover it, then another program appends, and nothing more happens
        // before the crash: the foreign line is past the checkpointed length.
        std::thread::sleep(Duration::from_millis(400));
        append(&d.out(), "a line from another program\n");
        d.kill9();
        d.start();
        append(&f, result_line("c2"));
        assert!(wait(Duration::from_secs(10), || has_call(&d, "c2")), "{}", d.log());
        let text = std::fs::read_to_string(d.out()).unwrap();
        assert!(text.contains("a line from another program\n"), "{out:?}: the restart cut another program's line:\n{text}");
        if out == Out::Shared {
            assert!(text.contains("watching"), "{out:?}: the daemon's own logs were cut:\n{text}");
        }
        // At least once: every finding is there.
        let got = fold_records(&d.records());
        let want = super::support::harness::check_dir(&d.watch_dir());
        assert_eq!(got.findings(), want, "{out:?}");
    }
}

/// Issue 15, defect 11: Symlinks named `*.jsonl` (to a file outside the tree, or inside it) and symlinked
/// directories are skipped with a warning: a file is read under its own name only.
#[test]
fn symlinks_are_skipped_with_a_warning() {
    let d = Daemon::new("", "");
    let w = d.watch_dir();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("target.jsonl");
    std::fs::write(&target, result_line("outside1")).unwrap();
    std::fs::create_dir(outside.path().join("dir")).unwrap();
    std::fs::write(outside.path().join("dir/in-linked-dir.jsonl"), result_line("linkeddir1")).unwrap();
    std::fs::write(w.join("real.jsonl"), result_line("inside1")).unwrap();
    std::os::unix::fs::symlink(&target, w.join("link.jsonl")).unwrap();
    std::os::unix::fs::symlink(w.join("real.jsonl"), w.join("alias.jsonl")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("dir"), w.join("linkdir")).unwrap();
    // A link to the whole filesystem: never walked, never watched.
    std::os::unix::fs::symlink("/", w.join("slash")).unwrap();
    assert!(wait(Duration::from_secs(10), || has_call(&d, "inside1")));
    append(&target, result_line("outside2"));
    std::fs::write(w.join("later.jsonl"), result_line("later")).unwrap();
    assert!(wait(Duration::from_secs(10), || has_call(&d, "later")));
    std::thread::sleep(Duration::from_millis(300));
    let recs = d.records();
    for r in &recs {
        let file = r["file"].as_str().unwrap_or_default();
        assert!(!file.contains("link") && !file.contains("alias"), "read through a symlink: {r}");
    }
    assert_eq!(recs.iter().filter(|r| r["call_id"] == "inside1").count(), 1, "read once, under its own name");
    let log = d.log();
    for name in ["link.jsonl", "alias.jsonl", "linkdir", "slash"] {
        assert!(log.lines().any(|l| l.contains("WARN") && l.contains(name) && l.contains("symlink")), "no warning naming {name}:\n{log}");
    }
    assert!(d.inotify_watches() < 10, "{} inotify watches: a link was followed", d.inotify_watches());
}

/// Issue 15, defect 12: SIGHUP with a configuration that validates but cannot start (metrics port in use, a
/// state directory that cannot be created) keeps the running configuration; `/health` stays up
/// across quick reloads.
#[test]
fn sighup_with_an_unstartable_config_keeps_running_and_health_stays_up() {
    let mut d = Daemon::new("", "");
    let good = std::fs::read_to_string(d.config_path()).unwrap();
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = held.local_addr().unwrap().port();
    let blocker = d.root.path().join("a-file");
    std::fs::write(&blocker, "").unwrap();
    let bad_configs = [
        good.replace(&format!("address = \"{}\"", d.address), &format!("address = \"127.0.0.1:{busy}\"")),
        good.replace(&d.state_dir().display().to_string(), &blocker.join("state").display().to_string()),
    ];
    for (i, bad) in bad_configs.iter().enumerate() {
        std::fs::write(d.config_path(), bad).unwrap();
        let ok = transcriptd(&["validate-config", d.config_path().to_str().unwrap()]);
        assert_eq!(ok.status.code(), Some(0), "the configuration is valid, only it cannot start");
        let refused = d.log().matches("reload refused").count();
        d.signal(libc::SIGHUP);
        assert!(wait(Duration::from_secs(10), || d.log().matches("reload refused").count() > refused), "{}", d.log());
        assert!(d.running(), "the daemon exited on an unstartable configuration; log:\n{}", d.log());
        assert_eq!(d.health().map(|h| h.0), Some(200));
        let call = format!("after-bad-{i}");
        std::fs::write(d.watch_dir().join(format!("{call}.jsonl")), result_line(&call)).unwrap();
        assert!(wait(Duration::from_secs(10), || has_call(&d, &call)), "{}", d.log());
    }
    // Quick reloads of a good configuration: /health answers every poll.
    std::fs::write(d.config_path(), &good).unwrap();
    let port = d.port;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut ok, mut failed) = (0, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match http(port, "/health") {
                    Some((200, _)) => ok += 1,
                    other => failed.push(other),
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            (ok, failed)
        })
    };
    let reloads = d.log().matches("configuration reloaded").count();
    for _ in 0..20 {
        d.signal(libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(wait(Duration::from_secs(20), || d.log().matches("configuration reloaded").count() > reloads), "{}", d.log());
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (ok, failed) = poller.join().unwrap();
    assert!(failed.is_empty() && ok > 20, "{ok} polls answered, failed: {failed:?}");
    assert!(d.running());
    std::fs::write(d.watch_dir().join("last.jsonl"), result_line("after-reloads")).unwrap();
    assert!(wait(Duration::from_secs(10), || has_call(&d, "after-reloads")), "{}", d.log());
    assert_eq!(d.stop(), Some(0));
}

/// Issue 15, defect 13: The metrics listener caps connections and times out requests whose head does not
/// arrive: 200 idle and 200 slow connections under `nofile = 128` leave `/health`, checkpoints
/// and reading working, and are closed by the daemon.
#[test]
fn a_connection_flood_under_a_descriptor_limit_leaves_health_checkpoints_and_reading_working() {
    let d = Daemon::with(Opts { nofile: Some(128), ..Opts::default() });
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], d.port));
    let mut conns = Vec::new();
    for i in 0..400 {
        let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else { continue };
        if i % 2 == 1 {
            // Slowloris: a request head that never ends.
            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ");
        }
        conns.push(s);
    }
    // The daemon serves /health at once, and stays within its descriptor limit.
    assert!(wait(Duration::from_secs(5), || d.health().is_some_and(|h| h.0 == 200)), "/health does not answer during the flood; log:\n{}", d.log());
    assert!(d.fds() < 128, "{} descriptors", d.fds());
    // A malformed line written during the flood is reported; checkpoints keep working.
    std::fs::write(d.watch_dir().join("a.jsonl"), "{\"role\":\"user\",\"content\":\"q\"}\nnot json\n").unwrap();
    assert!(wait(Duration::from_secs(10), || d.records().iter().any(|r| r["kind"] == "malformed_line")), "{}", d.log());
    assert!(wait(Duration::from_secs(5), || d.metric("transcriptd_checkpoint_writes_total{result=\"ok\"}").is_some_and(|n| n > 1.0)));
    assert_eq!(d.metric("transcriptd_checkpoint_writes_total{result=\"error\"}"), None, "checkpoint writes failed during the flood");
    // Every flood connection is closed by the daemon within the request timeout.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut open = 0;
    for s in &mut conns {
        s.set_read_timeout(Some(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(10)))).unwrap();
        let mut b = [0u8; 512];
        match s.read(&mut b) {
            Ok(0) => {}
            Ok(_) => {
                // An error response (408/503) then the close.
                let mut rest = Vec::new();
                if s.read_to_end(&mut rest).is_err() {
                    open += 1;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(_) => open += 1,
        }
    }
    assert_eq!(open, 0, "{open} flood connections still open after 15 s");
    assert_eq!(d.health().map(|h| h.0), Some(200));
}

/// Issue 15, defect 14: A metrics listener on a non-loopback address logs a warning.
#[test]
fn a_non_loopback_metrics_bind_logs_a_warning() {
    let d = Daemon::with(Opts { address: Some("0.0.0.0:0".into()), ..Opts::default() });
    assert!(d.log().lines().any(|l| l.contains("WARN") && l.contains("0.0.0.0") && l.contains("loopback")), "{}", d.log());
    let local = Daemon::new("", "");
    assert!(!local.log().contains("loopback"), "{}", local.log());
    // Opening a loopback listener to every interface on the same port by SIGHUP (the host
    // configuration's documented step): the running listener holds the port, so it is closed
    // first and the new one bound in its place.
    let port = local.port;
    let text =
        std::fs::read_to_string(local.config_path()).unwrap().replace(&format!("address = \"{}\"", local.address), &format!("address = \"0.0.0.0:{port}\""));
    std::fs::write(local.config_path(), text).unwrap();
    local.signal(libc::SIGHUP);
    assert!(wait(Duration::from_secs(10), || local.log().contains("configuration reloaded")), "{}", local.log());
    assert!(local.log().lines().any(|l| l.contains("WARN") && l.contains(&format!("0.0.0.0:{port}")) && l.contains("loopback")), "{}", local.log());
    assert!(wait(Duration::from_secs(5), || local.health().is_some_and(|h| h.0 == 200)), "{}", local.log());
}

/// The shipped configurations bind loopback, except where a container's probes need the pod's
/// address (documented beside the setting).
#[test]
fn shipped_configurations_bind_loopback_or_say_why_not() {
    let root = super::support::root();
    for rel in ["config/transcriptd.toml", "deploy/systemd/transcriptd.toml", "deploy/docker/transcriptd.toml"] {
        let text = std::fs::read_to_string(root.join(rel)).unwrap();
        let r = transcriptd::config::Config::parse(&text, rel).unwrap().validate(rel).unwrap();
        let addr = r.metrics_addr.unwrap();
        if !addr.ip().is_loopback() {
            let before = &text[..text.find("address = ").unwrap()];
            let comment: String = before.lines().rev().take_while(|l| l.starts_with('#') || l.starts_with("[[") || l.starts_with("type")).collect();
            assert!(comment.contains("Not loopback") && comment.contains("probes"), "{rel}: {addr} without a reason beside it");
        }
    }
    let unit = std::fs::read_to_string(root.join("deploy/systemd/transcriptd.toml")).unwrap();
    assert!(unit.contains("address = \"127.0.0.1:9464\""), "the host configuration binds loopback by default");
}

/// Where there are no filesystem events (`watch = "poll"`, network filesystems), the same cases
/// hold by polling: appends, a rename, a rewrite in place, a FIFO, a recreated root.
#[test]
fn polling_covers_appends_renames_rewrites_fifos_and_a_recreated_root() {
    let d = Daemon::new("watch = \"poll\"", "");
    let w = d.watch_dir();
    let a = w.join("a.jsonl");
    std::fs::write(&a, result_line("p1")).unwrap();
    assert!(wait(Duration::from_secs(10), || has_call(&d, "p1")), "{}", d.log());
    mkfifo(&w.join("fifo.jsonl"));
    append(&a, result_line("p2"));
    assert!(wait(Duration::from_secs(10), || has_call(&d, "p2")), "{}", d.log());
    let b = w.join("b.jsonl");
    std::fs::rename(&a, &b).unwrap();
    append(&b, result_line("p3"));
    assert!(wait(Duration::from_secs(10), || has_call(&d, "p3")), "{}", d.log());
    d.while_stopped(|| {
        let mut f = std::fs::OpenOptions::new().write(true).open(&b).unwrap();
        f.set_len(0).unwrap();
        f.write_all(format!("{}{}{}", result_line("q1-rewritten"), result_line("q2-rewritten"), result_line("q3")).as_bytes()).unwrap();
    });
    let (got, want) = settle(&d);
    assert_eq!(got, want, "{}", d.log());
    std::fs::remove_dir_all(&w).unwrap();
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(w.join("c.jsonl"), result_line("p4")).unwrap();
    assert!(wait(Duration::from_secs(10), || has_call(&d, "p4")), "{}", d.log());
    append(&w.join("c.jsonl"), result_line("p5"));
    assert!(wait(Duration::from_secs(10), || has_call(&d, "p5")), "{}", d.log());
    assert!(d.log().lines().any(|l| l.contains("WARN") && l.contains("fifo.jsonl")), "{}", d.log());
}

/// A watched root may itself be a symlink (a projects directory moved to another disk).
#[test]
fn a_watched_root_may_be_a_symlink() {
    let mut d = Daemon::prepare(Opts::default());
    let real = d.root.path().join("elsewhere");
    std::fs::rename(d.watch_dir(), &real).unwrap();
    std::os::unix::fs::symlink(&real, d.watch_dir()).unwrap();
    std::fs::write(real.join("before.jsonl"), result_line("r1")).unwrap();
    d.start();
    assert!(wait(Duration::from_secs(10), || has_call(&d, "r1")), "{}", d.log());
    std::fs::create_dir(real.join("sub")).unwrap();
    std::fs::write(real.join("sub/after.jsonl"), result_line("r2")).unwrap();
    assert!(wait(Duration::from_secs(10), || has_call(&d, "r2")), "{}", d.log());
    let files: BTreeSet<String> = d.records().iter().filter_map(|r| r["file"].as_str().map(str::to_owned)).collect();
    assert!(files.iter().all(|f| f.starts_with(&d.watch_dir().display().to_string())), "reported under the root as configured: {files:?}");
}

/// A file found quiet at startup (not modified for the grace period) has its tail reported at
/// once, also when it is larger than one step of the loop reads (the rest is read over the next
/// steps): reading what was already there is not growth.
#[test]
fn a_quiet_file_larger_than_a_step_has_its_tail_reported_at_once() {
    let mut d = Daemon::prepare(Opts::default());
    let text = std::fs::read_to_string(d.config_path()).unwrap().replace("grace = \"300ms\"", "grace = \"10m\"");
    std::fs::write(d.config_path(), text).unwrap();
    let f = d.watch_dir().join("big.jsonl");
    let mut body = String::new();
    let line = format!("{{\"role\":\"user\",\"content\":\"{}\"}}\n", "x".repeat(1000));
    while body.len() < 40 << 20 {
        body.push_str(&line);
    }
    body.push_str("{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"late\",\"type\":\"function\",\"function\":{\"name\":\"Read\",\"arguments\":\"{}\"}}]}\n");
    std::fs::write(&f, body).unwrap();
    let hour_ago = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() - 3600;
    super::support::set_mtime(&f, hour_ago);
    d.start();
    assert!(
        wait(Duration::from_secs(20), || d.records().iter().any(|r| r["kind"] == "orphan_call" && r["call_id"] == "late")),
        "the tail waits for a grace period that has long passed; log:\n{}",
        d.log()
    );
}

/// While the daemon is down, files are renamed to other watched names and new files take their
/// old names: after the restart the renamed ones go on under their new names (nothing reported
/// twice) and the new ones are read at once — whatever order the directory lists them in (a
/// path the startup search had passed as known was taken over by a new file only later, when
/// its old file turned up under the new name, and waited for the next rescan).
#[test]
fn renamed_and_recreated_while_down_are_both_read_after_a_restart() {
    let mut d = Daemon::new("", "");
    let w = d.watch_dir();
    let n = 12;
    for i in 0..n {
        std::fs::write(w.join(format!("x{i}.jsonl")), result_line(&format!("old{i}"))).unwrap();
    }
    assert!(wait(Duration::from_secs(10), || (0..n).all(|i| has_call(&d, &format!("old{i}")))), "{}", d.log());
    assert_eq!(d.stop(), Some(0));
    for i in 0..n {
        std::fs::rename(w.join(format!("x{i}.jsonl")), w.join(format!("y{i}.jsonl"))).unwrap();
        std::fs::write(w.join(format!("x{i}.jsonl")), result_line(&format!("new{i}"))).unwrap();
    }
    d.start();
    // Well before the periodic rescan (30 s).
    assert!(wait(Duration::from_secs(5), || (0..n).all(|i| has_call(&d, &format!("new{i}")))), "{}", d.log());
    let (got, want) = settle(&d);
    assert_eq!(got, want, "{}", d.log());
    for i in 0..n {
        assert_eq!(d.records().iter().filter(|r| r["type"] == "finding" && r["call_id"] == format!("old{i}")).count(), 1, "old{i} reported again");
    }
}

/// A daemon whose stderr is a pipe its reader closed (a log shipper that went away, `run 2>&1 |
/// head`) keeps running: a log line it cannot write is dropped, never a panic. Before `0bb9546`
/// it exited 101 at its next log line.
#[test]
fn a_closed_stderr_pipe_never_stops_the_daemon() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let d = Daemon::prepare(Opts { address: Some(format!("127.0.0.1:{port}")), ..Opts::default() });
    let out = std::fs::OpenOptions::new().create(true).append(true).open(d.out()).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_transcriptd"))
        .args(["run", "--config", d.config_path().to_str().unwrap()])
        .env("TRANSCRIPTD_LOG", "debug")
        .stdout(Stdio::from(out))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("serving /metrics and /health") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "the daemon closed stderr before it listened");
    }
    assert!(wait(Duration::from_secs(20), || http(port, "/health").is_some_and(|h| h.0 == 200)));
    drop(err); // the reader goes away: every later log line meets EPIPE
               // Log lines on purpose: a reload, new files, findings.
               // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    for i in 0..3 {
        let call = format!("after-close-{i}");
        std::fs::write(d.watch_dir().join(format!("{call}.jsonl")), result_line(&call)).unwrap();
        assert!(
            wait(Duration::from_secs(10), || d.records().iter().any(|r| r.to_string().contains(&call))),
            "no finding for {call} after stderr was closed; exit: {:?}",
            child.try_wait()
        );
    }
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "the daemon exited: {:?}", child.try_wait());
    assert_eq!(http(port, "/health").map(|h| h.0), Some(200));
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let end = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(std::time::Instant::now() < end, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// Issue 16: a file whose reads hang (a stuck NFS server: the real thing, a FUSE mount whose
/// reads of it block, `peers/stallfs.py`) holds up only itself. While the daemon's read of it
/// hangs, an append to a local file and a new local file are reported, `/health` stays `ok`
/// past the stall timeout, and SIGTERM ends the process. Released, nothing of the stuck file is
/// lost and nothing is reported twice, across the restart.
#[test]
fn a_file_whose_reads_hang_holds_up_only_itself() {
    let Some(fs) = super::support::harness::StallFs::mount() else { return };
    std::fs::write(fs.mount_dir().join("stuck.jsonl"), result_line("s1")).unwrap();
    let mount = fs.mount_dir().display().to_string();
    let mut d = Daemon::prepare(Opts { daemon: "stall_timeout = \"1s\"".into(), ..Opts::default() });
    let watch = d.watch_dir().display().to_string();
    let text = std::fs::read_to_string(d.config_path()).unwrap();
    let text = text.replace(&format!("include = [\"{watch}/**/*.jsonl\"]"), &format!("include = [\"{watch}/**/*.jsonl\", \"{mount}/**/*.jsonl\"]"));
    assert!(text.contains(&mount), "{text}");
    std::fs::write(d.config_path(), text).unwrap();
    d.start();
    assert!(wait(Duration::from_secs(10), || has_call(&d, "s1")), "{}", d.log());

    fs.stall("stuck.jsonl");
    append(&fs.mount_dir().join("stuck.jsonl"), result_line("s2"));
    // The daemon's read of it is held in the kernel, as by a hung server.
    assert!(fs.wait_held(1), "the daemon never read the stalled file: {}", d.log());
    append(&fs.mount_dir().join("stuck.jsonl"), result_line("s3"));
    append(&d.watch_dir().join("live.jsonl"), result_line("l1"));
    std::fs::write(d.watch_dir().join("new.jsonl"), result_line("n1")).unwrap();
    assert!(wait(Duration::from_secs(10), || has_call(&d, "l1") && has_call(&d, "n1")), "a hung read of another file held up the loop: {}", d.log());
    // Past the stall timeout with the read still held: the loop is not stuck.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(fs.held(), 1, "the read was let go: {}", fs.log());
    assert_eq!(d.health().map(|(s, _)| s), Some(200), "{}", d.log());
    assert!(!has_call(&d, "s2"));
    // Said in the log, and counted as unread (the TranscriptdReadingStalled alert's gauge).
    assert!(d.log().lines().any(|l| l.contains("WARN") && l.contains("stuck.jsonl") && l.contains("hangs")), "{}", d.log());
    assert!(wait(Duration::from_secs(5), || d.metric("transcriptd_oldest_unread_seconds").is_some_and(|s| s >= 1.0)), "{:?}", d.get("/metrics"));
    assert_eq!(d.stop(), Some(0), "SIGTERM with a read held: {}", d.log());

    fs.release();
    d.start();
    let (got, want) = super::support::harness::settle_on(&d, &fs.mount_dir());
    assert_eq!(got, want, "{}", d.log());
    assert_eq!(want.len(), 3, "{want:?}");
    let (got, want) = settle(&d);
    assert_eq!(got, want, "{}", d.log());
    assert_eq!(want.len(), 2, "{want:?}");

    // The calls paused beside a transcript (`pending.json`, read when an orphan call's grace
    // ends) on a stuck mount hold up only that transcript's deadline.
    fs.stall("pending.json");
    std::fs::create_dir(fs.mount_dir().join("pj")).unwrap();
    std::fs::write(fs.mount_dir().join("pj/pending.json"), "[{\"call_id\":\"other\"}]").unwrap();
    let call = "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"pj1\",\"function\":{\"name\":\"Read\",\"arguments\":\"{}\"}}]}\n";
    std::fs::write(fs.mount_dir().join("pj/t.jsonl"), call).unwrap();
    assert!(fs.wait_held(1), "the daemon never read pending.json: {}", d.log());
    append(&d.watch_dir().join("live.jsonl"), result_line("l2"));
    assert!(wait(Duration::from_secs(10), || has_call(&d, "l2")), "a hung read of pending.json held up the loop: {}", d.log());
    assert!(!has_call(&d, "pj1"));
    fs.release();
    assert!(wait(Duration::from_secs(10), || has_call(&d, "pj1")), "{}", d.log());
    d.stop();
}
