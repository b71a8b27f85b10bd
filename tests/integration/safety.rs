//! Repair loses nothing, ever (issue 14), and no verb is stopped by a hostile tree: every
//! scenario with real processes and real files.
//!
//! - a real writer process appending through an `O_APPEND` descriptor every 5 ms during an
//!   in-place repair: every line it wrote is in the repaired file, in order, once; the old file
//!   (the backup) has them all;
//! - the idle guard holds to the end: a file written while the repair is stopped mid-way
//!   (SIGSTOP) is not replaced; a file held open for writing is not repaired in place;
//! - `kill -9` of the repair at random moments, over a hundred times: each file intact or
//!   fully replaced, backup and rejects consistent, and a run after it finishes the job exactly;
//! - `--out` reaching an input by another spelling, two inputs with one output name;
//! - symbolic and hard links, another owner (when the tests run as root), a planted rejects
//!   link, a rejects file wider than its transcript;
//! - dangling links, link loops, FIFOs, sockets and devices named `*.jsonl`, for every verb;
//! - the rejects record of a long line of control bytes.

use super::support::harness::{all_stopped, wait};
use super::support::{data, generate, json_lines, put, set_mtime, stderr, stdout, transcriptd, transcriptd_home};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BROKEN: &str = "real/derived/claude-code/short.orphan-tool-result.jsonl";

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_transcriptd"))
}

/// Waits for `child` at most `limit`; a process still running then is killed and the test
/// fails (a verb blocked on a FIFO never returns on its own).
fn wait_limited(mut child: Child, limit: Duration, what: &str) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!("{what} still running after {limit:?}: blocked?\nstderr: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs the binary with `args`, failing the test if it takes over 60 s.
fn run_limited(args: &[&str]) -> Output {
    let child = bin().args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    wait_limited(child, Duration::from_secs(60), &format!("transcriptd {args:?}"))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo {}", p.display());
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A broken transcript (needs repair) at `p`, modified an hour ago.
fn broken_at(p: &Path) -> Vec<u8> {
    let bytes = fs::read(data(BROKEN)).unwrap();
    put(p, &bytes);
    set_mtime(p, now_secs() - 3600);
    bytes
}

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// The lines a test writer wrote, by their number, in file order.
fn writer_lines(bytes: &[u8]) -> Vec<u64> {
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| l.windows(9).any(|w| w == b"\"writer\":"))
        .map(|l| {
            let v: serde_json::Value = serde_json::from_slice(l).unwrap_or_else(|e| panic!("a writer line is whole: {e}: {}", String::from_utf8_lossy(l)));
            v["writer"].as_u64().unwrap()
        })
        .collect()
}

/// A real writer: a Python process that opens `path` with `O_APPEND` once and appends `count`
/// lines, one every `interval_ms`, then closes it. It prints `open` once it holds the file.
fn start_writer(path: &Path, count: usize, interval_ms: u64) -> Child {
    let script = r#"
import os, sys, time
path, count, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) / 1000
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
print("open", flush=True)
for i in range(count):
    line = '{"type":"progress","writer":%d,"data":{"pad":"%s"}}\n' % (i, "w" * 80)
    os.write(fd, line.encode())
    if interval > 0:
        time.sleep(interval)
os.close(fd)
print("closed", flush=True)
"#;
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(path)
        .arg(count.to_string())
        .arg(interval_ms.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs the writer");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "open");
    child
}

/// The one JSON report of a `repair -o json` run on one file.
fn report(o: &Output) -> serde_json::Value {
    let reports: Vec<serde_json::Value> = json_lines(o).into_iter().filter(|v| v.get("status").is_some()).collect();
    assert_eq!(reports.len(), 1, "{}\n{}", stdout(o), stderr(o));
    reports.into_iter().next().unwrap()
}

#[test]
fn in_place_force_carries_every_line_a_live_writer_appends() {
    // The issue's case scaled down: a transcript of 8 MB (benches/live_writer.py runs 100 MB),
    // a writer appending a line every 5 ms through a descriptor it keeps open.
    let d = tempfile::tempdir().unwrap();
    let template = d.path().join("template.jsonl");
    generate(&template, &["--bytes", "8M", "--seed", "14", "--faults", "0.01", "--split-assistant"]);
    for no_backup in [false, true] {
        let f = d.path().join(format!("live-{no_backup}.jsonl"));
        fs::copy(&template, &f).unwrap();
        let original = fs::read(&f).unwrap();
        let count = 300;
        let mut writer = start_writer(&f, count, 5);
        // Let it write a few lines before the repair starts: the file is live.
        while fs::metadata(&f).unwrap().len() < original.len() as u64 + 2000 {
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut args = vec!["repair", "--in-place", "--force", "-o", "json", s(&f)];
        if no_backup {
            args.push("--no-backup");
        }
        let r = run_limited(&args);
        let status = writer.wait().unwrap();
        assert!(status.success());
        assert_eq!(r.status.code(), Some(0), "{}\n{}", stdout(&r), stderr(&r));
        let rep = report(&r);
        assert_eq!(rep["status"], "repaired", "{rep}");
        assert!(rep["carried"]["lines"].as_u64().unwrap() > 0, "the writer was still writing after the swap: {rep}");

        // Every line the writer wrote is in the repaired file, in order, once.
        let repaired = fs::read(&f).unwrap();
        assert_eq!(writer_lines(&repaired), (0..count as u64).collect::<Vec<_>>(), "no-backup {no_backup}: {rep}");
        let c = transcriptd(&["check", "--no-summary", s(&f)]);
        assert_eq!(c.status.code(), Some(0), "the repaired file with the carried lines is clean: {}", stdout(&c));

        // The old file the writer kept using is kept, whole: the original and every line. With
        // --no-backup too, since it grew.
        let backup = PathBuf::from(rep["backup"].as_str().unwrap_or_else(|| panic!("a backup: {rep}")));
        assert_eq!(fs::read(&backup).unwrap()[..original.len()], original[..]);
        assert_eq!(writer_lines(&fs::read(&backup).unwrap()), (0..count as u64).collect::<Vec<_>>());
        let notes = rep["notes"].to_string();
        assert!(notes.contains("carried into the repaired file"), "{notes}");
        if no_backup {
            assert!(notes.contains("despite --no-backup"), "{notes}");
        }
        assert!(fs::metadata(d.path().join(format!("live-{no_backup}.rejects.jsonl"))).unwrap().len() > 0);
    }
}

#[test]
fn a_file_held_open_for_writing_is_not_repaired_in_place() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("held.jsonl");
    let original = broken_at(&f);
    // A writer that holds the file and writes nothing (the mtime stays an hour old).
    let mut holder = Command::new("sh").arg("-c").arg("exec sleep 30 >> \"$0\"").arg(&f).spawn().unwrap();
    let pid = holder.id();
    let mut seen = false;
    for _ in 0..500 {
        let fds = fs::read_dir(format!("/proc/{pid}/fd")).map(|r| r.flatten().filter_map(|e| fs::read_link(e.path()).ok()).collect::<Vec<_>>());
        if fds.is_ok_and(|l| l.contains(&f)) {
            seen = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(seen, "the holder opened the file");
    let r = transcriptd(&["repair", "--in-place", s(&f)]);
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert_eq!(r.status.code(), Some(1), "{}", stderr(&r));
    let out = stdout(&r);
    assert!(out.contains("held open for writing by pid") && out.contains(&pid.to_string()) && out.contains("--force"), "{out}");
    assert_eq!(fs::read(&f).unwrap(), original);
    let names: Vec<String> = fs::read_dir(d.path()).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["held.jsonl"], "no backup, no rejects, no temporary file");
}

/// Stops `pid` (SIGSTOP) once it has `file` open: the repair is then between opening the file
/// and replacing it.
fn stop_when_open(pid: u32, file: &Path) {
    let start = Instant::now();
    loop {
        let open = fs::read_dir(format!("/proc/{pid}/fd")).map(|r| r.flatten().any(|e| fs::read_link(e.path()).is_ok_and(|l| l == file)));
        if open.unwrap_or(false) {
            // SAFETY: signalling a child process.
            assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGSTOP) }, 0);
            // The signal is only queued: every thread must have stopped before the test goes on
            // (a thread still running could do its next step after the test's change).
            assert!(wait(Duration::from_secs(5), || all_stopped(pid)), "the repair did not stop");
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the repair never opened {}", file.display());
        std::thread::yield_now();
    }
}

#[test]
fn the_idle_guard_holds_to_the_end() {
    // A file quiet for an hour; its writer resumes while the repair runs. The repair is frozen
    // (SIGSTOP) once it has the file open, the line is appended as an agent does (open, append,
    // close), and the repair goes on: it must see the change and not replace the file.
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("quiet.jsonl");
    generate(&f, &["--bytes", "8M", "--seed", "15", "--faults", "0.01"]);
    set_mtime(&f, now_secs() - 3600);
    let original = fs::read(&f).unwrap();
    let child = bin().args(["repair", "--in-place", "--min-idle", "10s", "-o", "json", s(&f)]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    stop_when_open(pid, &f);
    assert!(!d.path().join("quiet.jsonl.orig").exists(), "stopped before the swap");
    let line = b"{\"type\":\"progress\",\"writer\":0,\"data\":{}}\n";
    fs::OpenOptions::new().append(true).open(&f).unwrap().write_all(line).unwrap();
    // SAFETY: signalling a child process.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGCONT) }, 0);
    let r = wait_limited(child, Duration::from_secs(60), "repair");
    assert_eq!(r.status.code(), Some(1), "{}\n{}", stdout(&r), stderr(&r));
    let rep = report(&r);
    assert_eq!(rep["status"], "skipped", "{rep}");
    assert!(rep["message"].as_str().unwrap().contains("changed while being repaired"), "{rep}");
    let mut want = original;
    want.extend_from_slice(line);
    assert_eq!(fs::read(&f).unwrap(), want, "the file is the original and the appended line: not replaced");
    assert!(!d.path().join("quiet.jsonl.orig").exists());
    // Records of the attempt that was not swapped may have been written: whole lines then.
    if let Ok(rejects) = fs::read_to_string(d.path().join("quiet.rejects.jsonl")) {
        assert!(rejects.lines().all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()));
    }

    // Without a writer, the same repair replaces it.
    let r = transcriptd(&["repair", "--in-place", "--min-idle", "0s", "-o", "json", s(&f)]);
    assert_eq!(report(&r)["status"], "repaired", "{}", stdout(&r));
}

/// One file of the kill test: its original and what a complete repair makes of it.
struct Expected {
    name: String,
    original: Vec<u8>,
    repaired: Vec<u8>,
    rejects: Vec<u8>,
}

fn stem(name: &str) -> &str {
    name.strip_suffix(".jsonl").unwrap()
}

/// A tiny deterministic generator for the kill moments.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// What a killed or finished run left: checks it against the two states allowed.
fn check_state(dir: &Path, out: Option<&Path>, files: &[Expected], mode: &str, finished: bool, what: &str) {
    for e in files {
        let transcript = dir.join(&e.name);
        let (written, rejects_at) = match out {
            Some(o) => (o.join(&e.name), o.join(format!("{}.rejects.jsonl", stem(&e.name)))),
            None => (transcript.clone(), dir.join(format!("{}.rejects.jsonl", stem(&e.name)))),
        };
        let now = fs::read(&written).ok();
        let rejects = fs::read(&rejects_at).ok();
        let replaced = now.as_deref() == Some(&e.repaired[..]);
        if out.is_some() {
            assert_eq!(fs::read(&transcript).unwrap(), e.original, "{what}: --out never touches the input");
            assert!(now.is_none() || replaced, "{what}: {} is neither absent nor the repaired file", written.display());
        } else {
            assert!(replaced || now.as_deref() == Some(&e.original[..]), "{what}: {} is neither intact nor repaired", e.name);
        }
        if replaced || finished {
            assert!(replaced, "{what}: {} not repaired after a full run", e.name);
            assert_eq!(rejects.as_deref(), Some(&e.rejects[..]), "{what}: the rejects of a replaced {} hold its records exactly once", e.name);
        } else {
            assert!(rejects.is_none() || rejects.as_deref() == Some(&e.rejects[..]), "{what}: rejects of an intact {} are absent or complete", e.name);
        }
        let backups: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|x| x.path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(&format!("{}.orig", e.name)))
            .collect();
        assert!(backups.len() <= 1, "{what}: one backup at most: {backups:?}");
        for b in &backups {
            assert_eq!(fs::read(b).unwrap(), e.original, "{what}: the backup {} is the original", b.display());
        }
        if mode == "in-place" && replaced {
            assert_eq!(backups.len(), 1, "{what}: a replaced {} has its backup", e.name);
        }
    }
    // A temporary file is left only in the instant between linking a complete, synced file
    // and renaming it: then it is a whole repaired file or a whole rejects file.
    for dir in [Some(dir), out].into_iter().flatten().filter(|d| d.exists()) {
        for x in fs::read_dir(dir).unwrap().flatten() {
            let name = x.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && name.ends_with(".tmp") {
                let bytes = fs::read(x.path()).unwrap();
                assert!(files.iter().any(|e| bytes == e.repaired || bytes == e.rejects), "{what}: a partial temporary file {name} was left");
            }
        }
    }
}

#[test]
fn kill_9_at_random_moments_leaves_each_file_intact_or_replaced() {
    let d = tempfile::tempdir().unwrap();
    let template = d.path().join("template");
    fs::create_dir_all(&template).unwrap();
    generate(&template.join("a.jsonl"), &["--bytes", "700k", "--seed", "21", "--faults", "0.03", "--split-assistant", "--truncate-last", "1"]);
    generate(&template.join("b.jsonl"), &["--bytes", "500k", "--seed", "22", "--faults", "0.03", "--merge-results"]);
    fs::set_permissions(template.join("b.jsonl"), fs::Permissions::from_mode(0o600)).unwrap();
    // What a complete repair gives.
    let full = d.path().join("full");
    let r = transcriptd(&["repair", "--force", "--no-summary", "--out", s(&full), s(&template)]);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    let files: Vec<Expected> = ["a.jsonl", "b.jsonl"]
        .iter()
        .map(|n| Expected {
            name: n.to_string(),
            original: fs::read(template.join(n)).unwrap(),
            repaired: fs::read(full.join(n)).unwrap(),
            rejects: fs::read(full.join(format!("{}.rejects.jsonl", stem(n)))).unwrap(),
        })
        .collect();
    let fresh = |i: usize| {
        let w = d.path().join(format!("w{i}"));
        fs::create_dir_all(&w).unwrap();
        for e in &files {
            fs::copy(template.join(&e.name), w.join(&e.name)).unwrap();
        }
        w
    };
    let args_for = |mode: &str, w: &Path| -> Vec<String> {
        let mut a: Vec<String> = ["repair", "--no-summary", "--jobs", "1", "--min-idle", "0s"].map(String::from).to_vec();
        match mode {
            "in-place" => a.push("--in-place".into()),
            "no-backup" => a.extend(["--in-place".into(), "--no-backup".into()]),
            _ => a.extend(["--out".into(), w.with_extension("out").display().to_string()]),
        }
        a.push(w.display().to_string());
        a
    };
    // How long a whole run takes, to spread the kills over it.
    let w = fresh(0);
    let started = Instant::now();
    let r = bin().args(args_for("in-place", &w)).output().unwrap();
    let full_run = started.elapsed();
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    check_state(&w, None, &files, "in-place", true, "calibration");
    fs::remove_dir_all(&w).unwrap();

    let seed = 0x14_u64 ^ now_secs();
    let mut rng = Lcg(seed);
    let modes = ["in-place", "no-backup", "out"];
    // At least 100 kills that land while the repair runs (a kill after it ended counts too, but
    // not towards the 100).
    let mut killed_mid = 0;
    let mut i = 0;
    // Kills after which 0, 1 or 2 files had been replaced.
    let mut outcomes = [0usize; 3];
    // The kills are spread over `span`: the calibrated run time at first, then shorter after a
    // kill that came after the run had ended and longer after one that landed, so that the
    // spread follows how long runs take now (other processes on the machine make them slower
    // or faster than the calibration run), never beyond twice the calibration.
    let mut span = full_run;
    while killed_mid < 100 {
        assert!(i < 400, "only {killed_mid} of {i} kills landed while the repair ran (seed {seed:#x})");
        let mode = modes[i % modes.len()];
        let w = fresh(i + 1);
        let out = (mode == "out").then(|| w.with_extension("out"));
        let args = args_for(mode, &w);
        let delay = Duration::from_micros(rng.next() % (span.as_micros() as u64 + 1));
        let mut child = bin().args(&args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        std::thread::sleep(delay);
        let was_running = child.try_wait().unwrap().is_none();
        child.kill().unwrap();
        child.wait().unwrap();
        killed_mid += usize::from(was_running);
        span = if was_running { span.mul_f64(1.05).min(full_run * 2) } else { span.mul_f64(0.8) };
        let what = format!("kill {i} ({mode}, after {delay:?}, seed {seed:#x})");
        check_state(&w, out.as_deref(), &files, mode, false, &what);
        let replaced = files.iter().filter(|e| fs::read(out.as_deref().unwrap_or(&w).join(&e.name)).is_ok_and(|b| b == e.repaired)).count();
        outcomes[replaced] += 1;
        // A run after the kill finishes the job, adding nothing twice.
        let r = bin().args(&args).output().unwrap();
        assert_eq!(r.status.code(), Some(0), "{what}: the run after it: {}", stderr(&r));
        check_state(&w, out.as_deref(), &files, mode, true, &format!("{what}, then a full run"));
        fs::remove_dir_all(&w).unwrap();
        if let Some(o) = out {
            fs::remove_dir_all(o).unwrap();
        }
        i += 1;
    }
    eprintln!("{i} kills ({killed_mid} while running; seed {seed:#x}): files replaced at the kill 0/1/2: {outcomes:?}");
}

#[test]
fn out_never_reaches_an_input_by_another_spelling() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("in");
    let original = broken_at(&input.join("t.jsonl"));
    std::os::unix::fs::symlink(&input, d.path().join("alias")).unwrap();
    fs::create_dir_all(d.path().join("work")).unwrap();
    let cases: Vec<(Vec<String>, PathBuf)> = vec![
        (vec!["--out".into(), s(&d.path().join("alias")).into(), s(&input).into()], d.path().to_path_buf()),
        (vec!["--out".into(), format!("{}/../in", s(&input)), s(&input).into()], d.path().to_path_buf()),
        (vec!["--out".into(), "../in".into(), "../in".into()], d.path().join("work")),
        (vec!["--out".into(), s(&input.join("sub")).into(), s(&input).into()], d.path().to_path_buf()),
        // A file given alone, and an --out that is its directory through a link.
        (vec!["--out".into(), s(&d.path().join("alias")).into(), s(&input.join("t.jsonl")).into()], d.path().to_path_buf()),
    ];
    for (args, cwd) in cases {
        let mut all = vec!["repair", "--force"];
        all.extend(args.iter().map(String::as_str));
        let r = super::support::transcriptd_in(&cwd, &all);
        assert_eq!(r.status.code(), Some(2), "{all:?}: {}", stderr(&r));
        let err = stderr(&r);
        assert!(err.contains("inside the input directory") || err.contains("would overwrite an input"), "{all:?}: {err}");
        let names: Vec<_> = fs::read_dir(&input).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(names, ["t.jsonl"], "{all:?}: nothing written among the inputs");
        assert_eq!(fs::read(input.join("t.jsonl")).unwrap(), original);
    }
}

#[test]
fn two_inputs_never_share_an_output() {
    let d = tempfile::tempdir().unwrap();
    broken_at(&d.path().join("a/x.jsonl"));
    put(&d.path().join("b/x.jsonl"), fs::read(data("real/claude-code/spotter/short.jsonl")).unwrap());
    let out = d.path().join("o");
    for args in [vec![s(&d.path().join("a/x.jsonl")), s(&d.path().join("b/x.jsonl"))], vec![s(&d.path().join("a")), s(&d.path().join("b"))]] {
        let mut all = vec!["repair", "--force", "--out", s(&out)];
        all.extend(args);
        let r = transcriptd(&all);
        assert_eq!(r.status.code(), Some(2), "{all:?}");
        assert!(stderr(&r).contains("would both be written to"), "{}", stderr(&r));
        assert!(!out.exists(), "nothing written");
    }
    // The same file named twice is one input.
    let r = transcriptd(&["repair", "--force", "-o", "json", "--out", s(&out), s(&d.path().join("a")), s(&d.path().join("a/x.jsonl"))]);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert_eq!(report(&r)["status"], "repaired");
}

#[test]
fn in_place_keeps_links_and_says_what_happened() {
    let d = tempfile::tempdir().unwrap();
    // A symbolic link: its target is repaired, the link stays a link.
    let target = d.path().join("real/t.jsonl");
    let original = broken_at(&target);
    let link = d.path().join("link.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let r = transcriptd(&["repair", "--in-place", "--force", "-o", "json", s(&link)]);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    let rep = report(&r);
    assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link is kept");
    assert_eq!(fs::read_link(&link).unwrap(), target);
    assert_ne!(fs::read(&target).unwrap(), original, "the target is repaired");
    assert_eq!(fs::read(d.path().join("real/t.jsonl.orig")).unwrap(), original, "the backup is beside the target");
    assert!(d.path().join("real/t.rejects.jsonl").exists());
    assert!(rep["notes"].to_string().contains("is a symbolic link"), "{rep}");
    let c = transcriptd(&["check", s(&link)]);
    assert_eq!(c.status.code(), Some(0));
    // With --out a link is read through, under the idle guard (no --force).
    let other = d.path().join("real2/u.jsonl");
    broken_at(&other);
    let link2 = d.path().join("in2/link.jsonl");
    fs::create_dir_all(link2.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&other, &link2).unwrap();
    let r = transcriptd(&["repair", "--min-idle", "10s", "-o", "json", "--out", s(&d.path().join("out2")), s(&link2)]);
    assert_eq!(report(&r)["status"], "repaired", "{}", stdout(&r));
    assert!(fs::symlink_metadata(&link2).unwrap().file_type().is_symlink());

    // Hard links: the name given is replaced; the other name keeps the old content, and the
    // report says so.
    let a = d.path().join("h/a.jsonl");
    let original = broken_at(&a);
    let b = d.path().join("h/b.jsonl");
    fs::hard_link(&a, &b).unwrap();
    let r = transcriptd(&["repair", "--in-place", "--force", "-o", "json", s(&a)]);
    let rep = report(&r);
    assert_eq!(rep["status"], "repaired");
    assert_eq!(fs::read(&b).unwrap(), original);
    assert_ne!(fs::read(&a).unwrap(), original);
    assert!(rep["notes"].to_string().contains("1 other hard link to this file keep the old content"), "{rep}");
    let text = transcriptd(&["repair", "--in-place", "--force", s(&b)]);
    assert!(stdout(&text).contains("note:") && stdout(&text).contains("other hard link"), "{}", stdout(&text));

    // A link and its target in one tree: repaired once.
    let t = d.path().join("tree");
    broken_at(&t.join("x.jsonl"));
    std::os::unix::fs::symlink(t.join("x.jsonl"), t.join("y.jsonl")).unwrap();
    let r = transcriptd(&["repair", "--in-place", "--force", "-o", "json", s(&t)]);
    assert_eq!(json_lines(&r).len(), 1, "{}", stdout(&r));
    assert!(fs::symlink_metadata(t.join("y.jsonl")).unwrap().file_type().is_symlink());
}

#[test]
fn owner_group_and_mode_are_kept() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("owned.jsonl");
    broken_at(&f);
    fs::set_permissions(&f, fs::Permissions::from_mode(0o600)).unwrap();
    let owner = if is_root() {
        std::os::unix::fs::chown(&f, Some(1000), Some(1000)).unwrap();
        (1000, 1000)
    } else {
        let m = fs::metadata(&f).unwrap();
        (m.uid(), m.gid())
    };
    let r = transcriptd(&["repair", "--in-place", "--force", "-o", "json", s(&f)]);
    assert_eq!(report(&r)["status"], "repaired", "{}", stderr(&r));
    for p in [f.clone(), d.path().join("owned.rejects.jsonl"), d.path().join("owned.jsonl.orig")] {
        let m = fs::metadata(&p).unwrap();
        assert_eq!((m.uid(), m.gid()), owner, "{} keeps the transcript's owner (root run: {})", p.display(), is_root());
        assert_eq!(m.mode() & 0o777, 0o600, "{}", p.display());
    }
}

#[test]
fn the_rejects_file_is_never_reached_through_a_link_nor_left_wider() {
    let d = tempfile::tempdir().unwrap();
    // A planted link where the rejects go: not followed, nothing written, the file not replaced.
    let f = d.path().join("t.jsonl");
    let original = broken_at(&f);
    let victim = d.path().join("elsewhere/victim");
    put(&victim, "keep me\n");
    std::os::unix::fs::symlink(&victim, d.path().join("t.rejects.jsonl")).unwrap();
    let r = transcriptd(&["repair", "--in-place", "--force", s(&f)]);
    assert_eq!(r.status.code(), Some(2));
    assert!(stderr(&r).contains("is a symbolic link: not followed"), "{}", stderr(&r));
    assert_eq!(fs::read_to_string(&victim).unwrap(), "keep me\n");
    assert_eq!(fs::read(&f).unwrap(), original);
    assert!(!d.path().join("t.jsonl.orig").exists());

    // An existing rejects file readable by everyone, for a 0600 transcript: the records go
    // into a new 0600 file holding the old content too; a reader holding the old one never
    // sees them.
    let g = d.path().join("p.jsonl");
    broken_at(&g);
    fs::set_permissions(&g, fs::Permissions::from_mode(0o600)).unwrap();
    let rejects = d.path().join("p.rejects.jsonl");
    fs::write(&rejects, "{\"line\":1,\"action\":\"removed\",\"text\":\"earlier\"}\n").unwrap();
    fs::set_permissions(&rejects, fs::Permissions::from_mode(0o666)).unwrap();
    let spy = fs::File::open(&rejects).unwrap();
    let r = transcriptd(&["repair", "--in-place", "--force", s(&g)]);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert_eq!(fs::metadata(&rejects).unwrap().mode() & 0o777, 0o600);
    let now = fs::read_to_string(&rejects).unwrap();
    assert!(now.starts_with("{\"line\":1,\"action\":\"removed\",\"text\":\"earlier\"}\n") && now.lines().count() > 1, "{now}");
    let mut seen = String::new();
    std::io::Read::read_to_string(&mut &spy, &mut seen).unwrap();
    assert_eq!(seen.lines().count(), 1, "the old file never receives the new records");
}

#[test]
fn hostile_trees_are_walked_with_warnings_for_every_verb() {
    let d = tempfile::tempdir().unwrap();
    let home = d.path().join("home");
    let tree = home.join(".claude/projects/-w");
    broken_at(&tree.join("good.jsonl"));
    std::os::unix::fs::symlink(tree.join("nowhere.jsonl"), tree.join("dangling.jsonl")).unwrap();
    std::os::unix::fs::symlink(tree.join("self.jsonl"), tree.join("self.jsonl")).unwrap();
    fs::create_dir_all(tree.join("sub")).unwrap();
    std::os::unix::fs::symlink("..", tree.join("sub/up")).unwrap();
    mkfifo(&tree.join("9f0c2d4e-fifo.jsonl"));
    let _sock = std::os::unix::net::UnixListener::bind(tree.join("sock.jsonl")).unwrap();
    if is_root() {
        let c = std::ffi::CString::new(tree.join("dev.jsonl").as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path; the device is /dev/null's (1, 3).
        assert_eq!(unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o644, libc::makedev(1, 3)) }, 0);
    }
    let t = s(&tree);

    // check: the good file is checked, each bad path is a warning, the exit status says that
    // some paths could not be read.
    let r = run_limited(&["check", t]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stdout(&r).contains("good.jsonl:") && stdout(&r).contains("orphan_result"), "{}", stdout(&r));
    let err = stderr(&r);
    for (name, what) in
        [("dangling.jsonl", "dangling symbolic link"), ("self.jsonl", "loop"), ("sub/up", "loop"), ("9f0c2d4e-fifo.jsonl", "FIFO"), ("sock.jsonl", "socket")]
    {
        assert!(err.lines().any(|l| l.contains(name) && l.contains(what)), "{name}: {what} in\n{err}");
    }
    if is_root() {
        assert!(err.contains("dev.jsonl") && err.contains("character device"), "{err}");
    }
    let r = run_limited(&["check", "-o", "json", t]);
    let records = json_lines(&r);
    let skipped: Vec<&serde_json::Value> = records.iter().filter(|v| v.get("skipped").is_some()).collect();
    assert!(skipped.iter().any(|v| v["skipped"] == "dangling_symlink" && v["severity"] == "error"), "{records:?}");
    assert!(skipped.iter().any(|v| v["skipped"] == "symlink_loop"), "{records:?}");
    assert!(skipped.iter().any(|v| v["skipped"] == "not_regular" && v["severity"] == "warning" && v["file"].as_str().unwrap().ends_with("fifo.jsonl")));
    assert!(records.iter().any(|v| v["kind"] == "orphan_result"));

    // Only FIFOs and sockets: warnings, the exit status is the findings'.
    let quiet = d.path().join("quiet");
    broken_at(&quiet.join("good.jsonl"));
    mkfifo(&quiet.join("p.jsonl"));
    assert_eq!(run_limited(&["check", s(&quiet)]).status.code(), Some(1));

    // orphans and repair go on the same way.
    let r = run_limited(&["orphans", t]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("FIFO") && stderr(&r).contains("dangling"), "{}", stderr(&r));
    let out = d.path().join("out");
    let r = run_limited(&["repair", "--force", "-o", "json", "--out", s(&out), t]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(json_lines(&r).iter().any(|v| v["status"] == "repaired"), "{}", stdout(&r));
    assert!(json_lines(&r).iter().any(|v| v["skipped"] == "not_regular"), "{}", stdout(&r));
    assert!(out.join("good.jsonl").exists());
    let r = run_limited(&["repair", "--dry-run", "--force", t]);
    assert_eq!(r.status.code(), Some(2));

    // A FIFO named on the command line: refused by every verb, never opened.
    let fifo = tree.join("9f0c2d4e-fifo.jsonl");
    for verb in [vec!["check"], vec!["orphans"], vec!["context"], vec!["history"], vec!["repair", "--in-place", "--force"]] {
        let mut args = verb.clone();
        args.push(s(&fifo));
        let r = run_limited(&args);
        assert_eq!(r.status.code(), Some(2), "{verb:?}: {}", stderr(&r));
        assert!(stderr(&r).contains("FIFO"), "{verb:?}: {}", stderr(&r));
    }
    // Sessions over the tree: listed without blocking; the FIFO session is not one.
    let child = Command::new(env!("CARGO_BIN_EXE_transcriptd"))
        .env("HOME", &home)
        .args(["sessions", "list"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let r = wait_limited(child, Duration::from_secs(60), "sessions list");
    assert!(stdout(&r).contains("good"), "{}\n{}", stdout(&r), stderr(&r));
    assert!(!stdout(&r).contains("9f0c2d4e"), "{}", stdout(&r));
    let r = transcriptd_home(&home, &["show", "9f0c2d4e"]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
}

#[test]
fn a_long_line_of_control_bytes_is_kept_in_a_compact_record() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("ctl.jsonl");
    let head = fs::read(data(BROKEN)).unwrap();
    let mut bytes = head.clone();
    let line = vec![1u8; 5 << 20];
    bytes.extend_from_slice(&line);
    bytes.push(b'\n');
    put(&f, &bytes);
    let out = d.path().join("out");
    let r = transcriptd(&["repair", "--force", "--no-summary", "--out", s(&out), s(&f)]);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    let rejects = fs::read(out.join("ctl.rejects.jsonl")).unwrap();
    // Base64 (4/3 of the line) rather than six bytes of `\u0001` per byte.
    assert!(rejects.len() < line.len() * 14 / 10, "{} bytes of rejects for a {} byte line", rejects.len(), line.len());
    let record: serde_json::Value =
        rejects.split(|&b| b == b'\n').filter_map(|l| serde_json::from_slice(l).ok()).find(|v: &serde_json::Value| v.get("base64").is_some()).unwrap();
    use base64::Engine;
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(record["base64"].as_str().unwrap()).unwrap(), line);
}

/// Makes `p` (not following a link) owned by `uid`.
fn own(p: &Path, uid: u32) {
    std::os::unix::fs::lchown(p, Some(uid), Some(uid)).unwrap_or_else(|e| panic!("lchown {}: {e}", p.display()));
}

/// A symbolic link at `link` to `target`, made by `uid` itself (a process running as that user,
/// through `setpriv`, as a user planting it would), or made and handed over with `lchown`.
fn plant_link(target: &str, link: &Path, uid: u32) {
    let made = Command::new("setpriv")
        .args(["--reuid", &uid.to_string(), "--regid", &uid.to_string(), "--clear-groups", "ln", "-s", target])
        .arg(link)
        .status()
        .is_ok_and(|s| s.success());
    // `setpriv` may fail after `ln` made the link (or not run at all): make it only if missing.
    if !made && fs::read_link(link).ok().as_deref() != Some(Path::new(target)) {
        std::os::unix::fs::symlink(target, link).unwrap();
    }
    if !made {
        own(link, uid);
    }
    assert_eq!(fs::symlink_metadata(link).unwrap().uid(), uid);
}

const NOBODY: u32 = 65534;

#[test]
fn links_met_by_a_walk_never_lead_a_repair_out_of_the_tree_nor_to_another_users_file() {
    // Issue 28: root repairs a tree another user can write. That user planted links.
    if !is_root() {
        println!("skipped: needs root (a tree owned by another user)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let tree = d.path().join("proj");
    fs::create_dir_all(tree.join("sub")).unwrap();
    // Root's files outside the tree: a file that is not a transcript (repair would empty it), a
    // broken transcript, and a directory of them.
    let victim = d.path().join("victim/passwd");
    put(&victim, "root:x:0:0:root:/root:/bin/bash\nbob:x:1000:1000::/home/bob:/bin/sh\n");
    set_mtime(&victim, now_secs() - 3600);
    let victim_t = d.path().join("victimdir/t.jsonl");
    broken_at(&victim_t);
    // The user's own files in the tree, and one of root's there.
    let good = tree.join("good.jsonl");
    broken_at(&good);
    let target = tree.join("sub/target.jsonl");
    broken_at(&target);
    let roots_file = tree.join("sub/roots.jsonl");
    broken_at(&roots_file);
    for p in [&tree, &tree.join("sub"), &good, &target] {
        own(p, NOBODY);
    }
    plant_link("../victim/passwd", &tree.join("evil.jsonl"), NOBODY);
    plant_link("../victimdir", &tree.join("evildir"), NOBODY);
    // Inside the tree: to the user's own file (repaired through the link), and to root's file
    // (not through the link; repaired under its own name, which the walk reaches too).
    plant_link("sub/target.jsonl", &tree.join("a-inner.jsonl"), NOBODY);
    plant_link("sub/roots.jsonl", &tree.join("a-roots.jsonl"), NOBODY);
    let before = |p: &Path| fs::read(p).unwrap();
    let (victim_bytes, victim_t_bytes) = (before(&victim), before(&victim_t));

    for extra in [&[][..], &["--force"][..], &["--force", "--follow-links-outside"][..]] {
        let mut args = vec!["repair", "--in-place", "--min-idle", "1s", "-o", "json"];
        args.extend_from_slice(extra);
        args.push(s(&tree));
        let r = transcriptd(&args);
        assert_eq!(r.status.code(), Some(1), "{extra:?}: skipped files make exit 1\n{}\n{}", stdout(&r), stderr(&r));
        assert_eq!(fs::read(&victim).unwrap(), victim_bytes, "{extra:?}: the victim is untouched");
        assert_eq!(fs::read(&victim_t).unwrap(), victim_t_bytes, "{extra:?}: the transcript outside is untouched");
        for p in ["victim/passwd.orig", "victim/passwd.rejects.jsonl", "victimdir/t.jsonl.orig", "victimdir/t.rejects.jsonl"] {
            assert!(!d.path().join(p).exists(), "{extra:?}: nothing written beside the victims: {p}");
        }
        let reports: Vec<serde_json::Value> = json_lines(&r).into_iter().filter(|v| v.get("status").is_some()).collect();
        let of = |name: &str| {
            reports
                .iter()
                .find(|v| v["file"].as_str().is_some_and(|f| f.ends_with(name)))
                .unwrap_or_else(|| panic!("{extra:?}: no report for {name}: {reports:?}"))
                .clone()
        };
        let outside = extra.contains(&"--follow-links-outside");
        for name in ["proj/evil.jsonl", "proj/evildir/t.jsonl"] {
            let rep = of(name);
            assert_eq!(rep["status"], "skipped", "{extra:?}: {rep}");
            let msg = rep["message"].as_str().unwrap();
            if outside {
                // Opted in: still never another user's file.
                assert_eq!(rep["reason"], "link_owner", "{extra:?}: {rep}");
                assert!(msg.contains("owned by uid 0") && msg.contains(&format!("owner uid {NOBODY}")), "{rep}");
            } else {
                assert_eq!(rep["reason"], "link_outside", "{extra:?}: {rep}");
                assert!(msg.contains("outside the paths given") && msg.contains("--follow-links-outside"), "{rep}");
            }
        }
        let rep = of("proj/a-roots.jsonl");
        assert_eq!((rep["status"].as_str(), rep["reason"].as_str()), (Some("skipped"), Some("link_owner")), "{extra:?}: {rep}");
        if extra.is_empty() {
            // The first run repairs the user's files, root's file in the tree under its own name,
            // and the user's file through the user's link.
            assert_eq!(of("proj/a-inner.jsonl")["status"], "repaired", "{reports:?}");
            assert_eq!(of("proj/good.jsonl")["status"], "repaired", "{reports:?}");
            assert_eq!(of("proj/sub/roots.jsonl")["status"], "repaired", "{reports:?}");
            assert!(!reports.iter().any(|v| v["file"].as_str().is_some_and(|f| f.ends_with("sub/target.jsonl"))), "repaired once, through the link");
            assert_eq!(fs::metadata(&good).unwrap().uid(), NOBODY, "owner kept");
        }
    }
    // The text output says why, too.
    let r = transcriptd(&["repair", "--in-place", "--force", s(&tree)]);
    let out = stdout(&r);
    assert!(out.contains("evil.jsonl: warning: skipped: reached through the symbolic link") && out.contains("../victim/passwd"), "{out}");
    assert!(stderr(&r).contains("reached through a link out of the paths given"), "{}", stderr(&r));
}

#[test]
fn a_directory_swapped_for_a_link_during_the_repair_does_not_redirect_it() {
    // The walk met a real directory; while the repair works on a file in it, the user who owns
    // the tree moves the directory away and plants a link to root's directory in its place. The
    // rules are applied again before the swap and at the next attempt: the victim is untouched.
    if !is_root() {
        println!("skipped: needs root (a tree owned by another user)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let tree = d.path().join("proj");
    let f = tree.join("sub/big.jsonl");
    fs::create_dir_all(f.parent().unwrap()).unwrap();
    generate(&f, &["--bytes", "8M", "--seed", "28", "--faults", "0.01"]);
    set_mtime(&f, now_secs() - 3600);
    for p in [&tree, &tree.join("sub"), &f] {
        own(p, NOBODY);
    }
    let victim = d.path().join("rootdir/big.jsonl");
    fs::create_dir_all(victim.parent().unwrap()).unwrap();
    fs::copy(&f, &victim).unwrap();
    set_mtime(&victim, now_secs() - 3600);
    let victim_bytes = fs::read(&victim).unwrap();
    let child =
        bin().args(["repair", "--in-place", "--min-idle", "10s", "-o", "json", s(&tree)]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    stop_when_open(pid, &f);
    fs::rename(tree.join("sub"), tree.join("moved")).unwrap();
    plant_link("../rootdir", &tree.join("sub"), NOBODY);
    // SAFETY: signalling a child process.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGCONT) }, 0);
    let r = wait_limited(child, Duration::from_secs(120), "repair");
    assert_eq!(fs::read(&victim).unwrap(), victim_bytes, "root's file is untouched\n{}\n{}", stdout(&r), stderr(&r));
    assert!(!d.path().join("rootdir/big.jsonl.orig").exists());
    let rep = report(&r);
    assert_eq!(rep["status"], "skipped", "{rep}");
    assert_eq!(rep["reason"], "link_outside", "{rep}");
}
