//! The `snapshot` sink and `restore`, end to end (issue 32): a session the agent deleted,
//! truncated or emptied is found by the daemon within a second and put back byte for byte from
//! the store; the store holds each byte once through kill -9s; a file held open for writing
//! is never replaced.

use super::support::harness::{wait, Daemon, Opts, DEFAULT_STAGES};
use super::support::{stderr, stdout, transcriptd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SESSION: &str = "0c6e3f4e-5a1b-4c2d-9e8f-7a6b5c4d3e2f";

fn opts(store: &Path) -> Opts {
    Opts {
        stages: Some(format!("{DEFAULT_STAGES}[[stages]]\ntype = \"loss\"\n")),
        extra: format!("[[sinks]]\ntype = \"snapshot\"\ndir = \"{}\"\n", store.display()),
        ..Opts::default()
    }
}

/// Claude Code line `i` of the session (content `text`).
fn line(i: usize, text: &str) -> String {
    let role = if i % 2 == 0 { "user" } else { "assistant" };
    let content = if role == "user" { serde_json::json!(text) } else { serde_json::json!([{"type": "text", "text": text}]) };
    let mut message = serde_json::json!({"role": role, "content": content});
    if role == "assistant" {
        message["id"] = format!("msg_{i}").into();
        message["model"] = "claude-sonnet-4-5".into();
    }
    let parent = if i == 0 { serde_json::Value::Null } else { format!("u{}", i - 1).into() };
    let v = serde_json::json!({"parentUuid": parent, "cwd": "/w/app", "sessionId": SESSION, "type": role, "message": message,
        "uuid": format!("u{i}"), "timestamp": format!("2026-12-03T10:{:02}:{:02}Z", i / 60 % 60, i % 60)});
    format!("{v}\n")
}

fn lines(range: std::ops::Range<usize>, text: &str) -> String {
    range.map(|i| line(i, &format!("{text} {i}"))).collect()
}

fn append(p: &Path, s: &str) {
    use std::io::Write as _;
    std::fs::OpenOptions::new().append(true).create(true).open(p).unwrap().write_all(s.as_bytes()).unwrap();
}

fn restore(store: &Path, args: &[&str]) -> std::process::Output {
    let mut a = vec!["restore", "--store", store.to_str().unwrap()];
    a.extend_from_slice(args);
    transcriptd(&a)
}

fn found(d: &Daemon, kind: &str, file: &Path) -> bool {
    let f = file.to_str().unwrap();
    wait(Duration::from_secs(10), || d.records().iter().any(|r| r["type"] == "finding" && r["kind"] == kind && r["file"] == f))
}

fn session_file(d: &Daemon) -> PathBuf {
    let p = d.watch_dir().join("-w-app").join(format!("{SESSION}.jsonl"));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    p
}

#[test]
fn a_deleted_session_is_found_within_a_second_and_restored_byte_for_byte() {
    let root = tempfile::tempdir().unwrap();
    let store = root.path().join("snapshots");
    let d = Daemon::with(opts(&store));
    let f = session_file(&d);
    // Written as an agent does: a line at a time, and one long tool output.
    let mut all = String::new();
    for i in 0..40 {
        let l = if i == 17 { line(i, &"x".repeat(300_000)) } else { line(i, &format!("said {i}")) };
        append(&f, &l);
        all.push_str(&l);
        if i % 10 == 9 {
            std::thread::sleep(Duration::from_millis(150));
        }
    }
    assert!(
        wait(Duration::from_secs(10), || d.metric("transcriptd_snapshot_bytes_total") == Some(all.len() as f64)),
        "{:?}\n{}",
        d.metric("transcriptd_snapshot_bytes_total"),
        d.log()
    );
    // A checkpoint covers it: the store has it durably.
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    std::fs::remove_file(&f).unwrap();
    assert!(found(&d, "transcript_deleted", &f), "{:#?}", d.records());
    let took = t.elapsed();
    eprintln!("transcript_deleted {took:?} after the unlink");
    assert!(took < Duration::from_secs(1), "{took:?}");

    let r = d.records().into_iter().find(|r| r["kind"] == "transcript_deleted").unwrap();
    let msg = r["message"].as_str().unwrap();
    assert!(msg.ends_with(&format!("the snapshot store holds them: `transcriptd restore FILE --store {}` puts it back", store.display())), "{msg}");
    let o = restore(&store, &[&SESSION[..8]]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&f).unwrap(), all, "restored byte for byte");
    let out = stdout(&o);
    assert!(out.contains(&format!("{}: restored, {} bytes", f.display(), all.len())), "{out}");
    assert!(out.contains(&format!("resume it with: cd /w/app && claude --resume {SESSION}")), "{out}");
    // The restored file is a new file to the daemon: read again, not lost again.
    assert!(wait(Duration::from_secs(10), || d.records().iter().filter(|r| r["type"] == "file_opened").count() == 2), "{}", d.log());
    // Once is enough: the file holds those bytes now.
    let o = restore(&store, &[SESSION]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("already holds those"), "{}", stderr(&o));
    let stats = (d.metric("transcriptd_snapshot_streams"), d.metric("transcriptd_snapshot_store_bytes"));
    eprintln!("streams, store bytes: {stats:?}");
}

#[test]
fn a_truncated_or_emptied_session_comes_back_as_it_was_before_and_the_cut_one_is_kept() {
    let root = tempfile::tempdir().unwrap();
    let store = root.path().join("snapshots");
    let d = Daemon::with(opts(&store));
    let f = session_file(&d);
    let full = lines(0..30, "said");
    append(&f, &full);
    assert!(wait(Duration::from_secs(10), || d.metric("transcriptd_snapshot_bytes_total") == Some(full.len() as f64)), "{}", d.log());
    std::thread::sleep(Duration::from_millis(300));
    // Truncated in place (same inode) to its first four lines.
    let cut: String = full.split_inclusive('\n').take(4).collect();
    std::fs::OpenOptions::new().write(true).open(&f).unwrap().set_len(cut.len() as u64).unwrap();
    assert!(found(&d, "transcript_rewritten", &f), "{:#?}", d.records());
    std::thread::sleep(Duration::from_millis(400));
    let o = restore(&store, &[SESSION, "--list", "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let listed: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(listed.len(), 2, "{listed:#?}");
    assert_eq!((listed[0]["bytes"].as_u64(), listed[0]["left"]["how"].as_str()), (Some(full.len() as u64), Some("truncated")));
    assert_eq!(listed[1]["bytes"].as_u64(), Some(cut.len() as u64));

    let o = restore(&store, &[SESSION, "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(std::fs::read_to_string(&f).unwrap(), full);
    let kept = PathBuf::from(v["replaced"].as_str().unwrap());
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), cut, "what was there is kept");
    assert!(kept.file_name().unwrap().to_str().unwrap().ends_with(".replaced.jsonl"));

    // Emptied of its messages by a rewrite (a compaction whose call failed): --at puts back
    // the file as it was before, into another file.
    std::thread::sleep(Duration::from_millis(1100));
    let before = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    std::thread::sleep(Duration::from_millis(1100));
    let emptied: String = (0..30).map(|i| line(i, "")).collect();
    std::fs::write(&f, &emptied).unwrap();
    assert!(wait(Duration::from_secs(10), || d.records().iter().filter(|r| r["kind"] == "transcript_rewritten").count() == 2), "{:#?}", d.records());
    std::thread::sleep(Duration::from_millis(400));
    let out = root.path().join("before.jsonl");
    let o = restore(&store, &[SESSION, "--at", &before, "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), full);
    // --out never replaces.
    let o = restore(&store, &[SESSION, "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("exists"), "{}", stderr(&o));
}

#[test]
fn a_session_open_for_writing_is_never_replaced() {
    let root = tempfile::tempdir().unwrap();
    let store = root.path().join("snapshots");
    let d = Daemon::with(opts(&store));
    let f = session_file(&d);
    append(&f, &lines(0..6, "said"));
    assert!(wait(Duration::from_secs(10), || d.metric("transcriptd_snapshot_bytes_total").is_some_and(|b| b > 0.0)), "{}", d.log());
    std::thread::sleep(Duration::from_millis(300));
    std::fs::OpenOptions::new().write(true).open(&f).unwrap().set_len(10).unwrap();
    assert!(found(&d, "transcript_rewritten", &f), "{:#?}", d.records());
    std::thread::sleep(Duration::from_millis(300));
    let writer = std::fs::OpenOptions::new().append(true).open(&f).unwrap();
    let o = restore(&store, &[SESSION]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stderr(&o).contains("has it open for writing"), "{}", stderr(&o));
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 10, "untouched");
    drop(writer);
    let o = restore(&store, &[SESSION]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&f).unwrap(), lines(0..6, "said"));
    // Nothing of another session; no store.
    let o = restore(&store, &["ffffffff"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no transcript whose name contains"), "{}", stderr(&o));
    let o = restore(&root.path().join("nowhere"), &[SESSION]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a snapshot store"), "{}", stderr(&o));
}

/// kill -9 at random moments while the files grow: after each restart, what follows the
/// checkpoint is read again; the store ends with every file whole, each in one stream.
#[test]
fn kill_9s_while_files_grow_leave_every_file_whole_in_the_store_once() {
    let root = tempfile::tempdir().unwrap();
    let store = root.path().join("snapshots");
    let mut d = Daemon::with(opts(&store));
    let files: Vec<PathBuf> = (0..4).map(|i| d.watch_dir().join(format!("p{i}/{i}{}.jsonl", &SESSION[1..]))).collect();
    for f in &files {
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    }
    let mut n = 0;
    let mut seed = 12345u64;
    for round in 0..20 {
        for _ in 0..30 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let f = &files[(seed >> 40) as usize % files.len()];
            let big = (seed >> 20) % 9 == 0;
            append(f, &line(n, &if big { "y".repeat(200_000) } else { format!("round {round} line {n}") }));
            n += 1;
        }
        std::thread::sleep(Duration::from_millis(30 + (seed >> 50) % 200));
        d.kill9();
        d.start();
    }
    let total: u64 = files.iter().map(|f| std::fs::metadata(f).unwrap().len()).sum();
    // Read to the end (what the last start had left) and checkpointed.
    std::thread::sleep(Duration::from_millis(1500));
    d.stop();
    let s = transcriptd::snapshots::Store::at(&store);
    let streams = s.streams().unwrap();
    for f in &files {
        let of: Vec<_> = streams.iter().filter(|s| &s.path == f).collect();
        assert_eq!(of.len(), 1, "{}: {of:#?}", f.display());
        let mut held = Vec::new();
        s.read(of[0], 0, of[0].end(), &mut held).unwrap();
        assert!(held == std::fs::read(f).unwrap(), "{}: {} bytes held of {}", f.display(), held.len(), std::fs::metadata(f).unwrap().len());
    }
    eprintln!("{total} bytes in {} files, {n} lines, 20 kill -9s", files.len());
}

/// Without a daemon watching (a hook's snapshot): a file cut since is put back whole; a file
/// that only grew since holds everything the store has, and is left alone.
#[test]
fn restore_tells_a_file_cut_unobserved_from_one_that_only_grew() {
    use std::os::unix::fs::MetadataExt as _;
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("store");
    let f = d.path().join(format!("{SESSION}.jsonl"));
    let full = lines(0..20, "said");
    std::fs::write(&f, &full).unwrap();
    let m = std::fs::metadata(&f).unwrap();
    let keep = transcriptd::snapshots::Retention { max_age: None, max_bytes: None, every: Duration::MAX };
    let mut w = transcriptd::snapshots::Writer::open(&store, keep).unwrap();
    w.append(&f, (m.dev(), m.ino()), 0, full.as_bytes()).unwrap();
    w.sync().unwrap();
    drop(w);
    // Grown: nothing to do, and the file is untouched.
    append(&f, &line(20, "more"));
    let o = restore(&store, &[SESSION]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("holds everything the store has of it"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&f).unwrap(), format!("{full}{}", line(20, "more")));
    // Cut to 3 lines (the same inode): the whole file comes back.
    let cut: String = full.split_inclusive('\n').take(3).collect();
    std::fs::OpenOptions::new().write(true).open(&f).unwrap().set_len(cut.len() as u64).unwrap();
    let o = restore(&store, &[SESSION]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&f).unwrap(), full);
}

/// A store damaged outside transcriptd (a stream's open file cut shorter than its manifest
/// says) while the daemon is stopped: the restarted daemon warns, naming the file, keeps running,
/// and the file's next bytes begin another incarnation; nothing the store holds is taken back.
#[test]
fn a_store_damaged_outside_transcriptd_does_not_stop_the_daemon() {
    let root = tempfile::tempdir().unwrap();
    let store = root.path().join("snapshots");
    let mut d = Daemon::with(opts(&store));
    let f = session_file(&d);
    let first = lines(0..20, "said");
    append(&f, &first);
    assert!(wait(Duration::from_secs(10), || d.metric("transcriptd_snapshot_bytes_total") == Some(first.len() as f64)), "{}", d.log());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(d.stop(), Some(0), "{}", d.log());
    let open = std::fs::read_dir(store.join("streams")).unwrap().map(|e| e.unwrap().path()).find(|p| p.to_string_lossy().contains(".open.")).unwrap();
    std::fs::OpenOptions::new().write(true).open(&open).unwrap().set_len(10).unwrap();
    d.start();
    let more = lines(20..30, "then");
    append(&f, &more);
    let name = open.display().to_string();
    assert!(
        wait(Duration::from_secs(10), || d.log().contains("damaged outside transcriptd") && d.log().contains(&name)),
        "the warning names the file: {}",
        d.log()
    );
    assert!(
        wait(Duration::from_secs(10), || transcriptd::snapshots::Store::at(&store)
            .streams()
            .unwrap()
            .iter()
            .any(|s| s.end() == (first.len() + more.len()) as u64)),
        "{}",
        d.log()
    );
    assert_eq!(d.health().map(|h| h.0), Some(200), "still running: {}", d.log());
    let streams = transcriptd::snapshots::Store::at(&store).streams().unwrap();
    assert_eq!(streams.len(), 2, "the damaged one kept, another begun: {streams:#?}");
    let newest = streams.iter().max_by_key(|s| s.started).unwrap();
    let mut held = Vec::new();
    transcriptd::snapshots::Store::at(&store).read(newest, newest.from, newest.end(), &mut held).unwrap();
    assert_eq!(held, more.as_bytes(), "the new incarnation holds what was read after the checkpoint");
}
