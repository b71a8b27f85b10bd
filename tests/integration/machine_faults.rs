//! Issue 29: the daemon under the machine's faults and its operators' mistakes — a full disk
//! under the file sink, relative paths, a device number that changes at a remount, two daemons
//! on one state directory, the temporary files a crash leaves where `O_TMPFILE` is missing, and
//! the directory syncs a power loss needs. Every test runs the real binary.
//!
//! Tests that mount a filesystem (a small tmpfs, as root) print `skipped: <why>` and pass when
//! the mount is refused, unless `TRANSCRIPTD_REQUIRE_MOUNT` is set; the directory-sync test
//! needs `strace` (`TRANSCRIPTD_REQUIRE_STRACE`).

use super::harness::{fold, http_get, listening_port, read_records, result_line, wait, Daemon, Key};
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A daemon started with the given arguments in `cwd`, stdout to `cwd/out.jsonl`, stderr to
/// `cwd/err.log`; killed when dropped.
struct Proc {
    child: Child,
    cwd: PathBuf,
    port: u16,
}

impl Proc {
    fn spawn(cwd: &Path, args: &[&str]) -> Child {
        let append = |p: PathBuf| std::fs::OpenOptions::new().create(true).append(true).open(p).unwrap();
        Command::new(env!("CARGO_BIN_EXE_transcriptd"))
            .args(args)
            .current_dir(cwd)
            .env("TRANSCRIPTD_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::from(append(cwd.join("out.jsonl"))))
            .stderr(Stdio::from(append(cwd.join("err.log"))))
            .spawn()
            .unwrap()
    }

    /// Starts and waits until `/health` answers `ok`.
    fn start(cwd: &Path, args: &[&str]) -> Proc {
        let child = Self::spawn(cwd, args);
        let mut p = Proc { child, cwd: cwd.to_path_buf(), port: 0 };
        assert!(
            wait(Duration::from_secs(20), || listening_port(&p.log()).is_some_and(|port| {
                p.port = port;
                true
            })),
            "no port: {}",
            p.log()
        );
        assert!(wait(Duration::from_secs(20), || http_get(p.port, "/health").as_deref() == Some("ok\n")), "not healthy: {}", p.log());
        p
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.cwd.join("err.log")).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits up to `secs` for `child` to exit; its code (killed and `None` if it did not).
fn exits_within(child: &mut Child, secs: u64) -> Option<i32> {
    let mut code = None;
    wait(Duration::from_secs(secs), || {
        code = child.try_wait().unwrap().map(|s| s.code().unwrap_or(-1));
        code.is_some()
    });
    if code.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    code
}

/// The `orphan_result` findings of `file` (a name's suffix), by line, with how often each was
/// reported.
fn orphan_results(records: &[Value], file: &str) -> BTreeMap<u64, usize> {
    let mut out = BTreeMap::new();
    for r in records.iter().filter(|r| r["type"] == "finding" && r["kind"] == "orphan_result" && r["file"].as_str().is_some_and(|f| f.ends_with(file))) {
        *out.entry(r["line"].as_u64().unwrap()).or_default() += 1;
    }
    out
}

fn result_lines(calls: std::ops::Range<usize>) -> String {
    calls.map(|i| result_line(&format!("c{i}"))).collect()
}

/// Issue 29.2: `run --watch DIR --state-dir DIR` with relative directories, and a config file
/// with a relative `state_dir`, source pattern and file sink: lines appended to files that
/// existed at start are read at once (before the fix only files created later were, and the
/// others only at the 30 s rescan), and every path the checkpoint keeps is absolute.
#[test]
fn relative_paths_in_flags_and_config_are_made_absolute() {
    let root = tempfile::tempdir().unwrap();
    let cwd = root.path().canonicalize().unwrap();
    for (dir, args) in
        [("flags", vec!["run", "--watch", "w", "--state-dir", "./st", "--metrics-addr", "127.0.0.1:0"]), ("config", vec!["run", "--config", "cfg.toml"])]
    {
        let cwd = cwd.join(dir);
        std::fs::create_dir_all(cwd.join("w/sub")).unwrap();
        std::fs::write(
            cwd.join("cfg.toml"),
            "[daemon]\nstate_dir = \"st\"\ncheckpoint_interval = \"100ms\"\n\n[[sources]]\ninclude = [\"w/**/*.jsonl\"]\n\n[[sinks]]\ntype = \"stdout\"\n[[sinks]]\ntype = \"file\"\npath = \"sink/f.jsonl\"\n[[sinks]]\ntype = \"prometheus\"\naddress = \"127.0.0.1:0\"\n",
        )
        .unwrap();
        let f = cwd.join("w/sub/a.jsonl");
        std::fs::write(&f, "{\"role\":\"user\",\"content\":\"q\"}\n").unwrap();
        let p = Proc::start(&cwd, &args);
        std::fs::OpenOptions::new().append(true).open(&f).and_then(|mut h| std::io::Write::write_all(&mut h, result_lines(0..10).as_bytes())).unwrap();
        let want: BTreeMap<u64, usize> = (2..12).map(|l| (l, 1)).collect();
        let mut got = BTreeMap::new();
        // Well within the 30 s rescan that found them before.
        wait(Duration::from_secs(8), || {
            got = orphan_results(&read_records(&cwd.join("out.jsonl")), "a.jsonl");
            got == want
        });
        assert_eq!(got, want, "{dir}: every appended line once; log:\n{}", p.log());
        let records = read_records(&cwd.join("out.jsonl"));
        assert!(records.iter().filter_map(|r| r["file"].as_str()).all(|f| f.starts_with('/')), "{dir}: records name absolute paths");
        let state = cwd.join("st/checkpoints.json");
        assert!(wait(Duration::from_secs(5), || std::fs::read_to_string(&state).is_ok_and(|t| t.contains("a.jsonl"))), "{dir}: a checkpoint");
        let cp: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
        for file in cp["files"].as_array().unwrap() {
            assert!(file["path"].as_str().unwrap().starts_with(&cwd.display().to_string()), "{dir}: {file}");
        }
        for key in cp["sinks"].as_object().unwrap().keys() {
            assert!(!key.starts_with("file:") || key.starts_with(&format!("file:{}/sink/", cwd.display())), "{dir}: {key}");
        }
        drop(p);
    }
}

/// Issue 29.4: a second daemon on the same state directory exits at once with a message that
/// names the one running (before the fix it started, and both reported everything).
#[test]
fn a_second_daemon_on_one_state_dir_refuses_to_start_and_names_the_holder() {
    let mut d = Daemon::new("", "");
    let root = tempfile::tempdir().unwrap();
    let mut second = Proc::spawn(root.path(), &["run", "--config", d.config_path().to_str().unwrap()]);
    let code = exits_within(&mut second, 15);
    let log = std::fs::read_to_string(root.path().join("err.log")).unwrap();
    assert_eq!(code, Some(2), "the second daemon exits with an error: {log}");
    assert!(log.contains(&format!("in use by transcriptd pid {}", d.pid())) && log.contains(&d.state_dir().display().to_string()), "{log}");
    assert_eq!(std::fs::read_to_string(d.state_dir().join("lock")).unwrap().trim(), d.pid().to_string());
    // The first goes on; once it is stopped (or killed: the kernel lets the lock go), the
    // directory is free.
    assert_eq!(d.health().map(|h| h.0), Some(200));
    d.kill9();
    d.start();
    assert_eq!(d.stop(), Some(0));
}

/// A pid that names no process now.
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

/// Issue 29.5: where `O_TMPFILE` is missing (FUSE, NFS) a write killed half-way leaves its
/// named temporary file. The daemon's next start on the state directory removes the project's
/// own (by name and owner, their writer gone) and nothing else; so does the next atomic write
/// of a file beside its own (here `repair --out`).
#[test]
fn stale_temporary_files_of_ours_are_removed_and_no_others() {
    let mut d = Daemon::prepare(Default::default());
    let state = d.state_dir();
    let spool = state.join("http-0123456789abcdef");
    std::fs::create_dir_all(&spool).unwrap();
    let dead = dead_pid();
    // A live writer: this test process.
    let live = std::process::id();
    let plant = |dir: &Path, name: String| {
        let p = dir.join(name);
        std::fs::write(&p, "{\"partial\":").unwrap();
        p
    };
    let ours = [
        plant(&state, format!(".checkpoints.json.transcriptd-{dead}-a1B2c3.tmp")),
        plant(&spool, format!(".delivered.json.transcriptd-{dead}-Zz9y8x.tmp")),
        // Builds before the pid was in the name.
        plant(&state, ".checkpoints.json.Qw3rTy.tmp".into()),
    ];
    let kept = [
        plant(&state, format!(".checkpoints.json.transcriptd-{live}-Ab12Cd.tmp")),
        plant(&state, ".notes.tmp".into()),
        plant(&state, "checkpoints.json.transcriptd-1-abcdef.tmp".into()),
    ];
    let foreign = plant(&state, format!(".checkpoints.json.transcriptd-{dead}-F0r3gn.tmp"));
    let chowned = std::os::unix::fs::chown(&foreign, Some(4242), Some(4242)).is_ok();
    d.start();
    for p in &ours {
        assert!(!p.exists(), "{} removed; log:\n{}", p.display(), d.log());
    }
    for p in &kept {
        assert!(p.exists(), "{} kept", p.display());
    }
    if chowned {
        assert!(foreign.exists(), "another user's file is kept");
    } else {
        eprintln!("skipped: (part) cannot chown a file to another user here");
    }
    assert!(d.log().contains("removed a temporary file a stopped write left"), "{}", d.log());
    assert_eq!(d.stop(), Some(0));

    // `repair --out DIR`: the stale temporary files of its output, in the output's directory.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in/t.jsonl");
    std::fs::create_dir_all(input.parent().unwrap()).unwrap();
    std::fs::write(&input, format!("{{\"role\":\"user\",\"content\":\"q\"}}\n{}", result_line("c1"))).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let stale = plant(&out, format!(".t.jsonl.transcriptd-{dead}-q1w2e3.tmp"));
    let other = plant(&out, format!(".other.jsonl.transcriptd-{dead}-q1w2e3.tmp"));
    let o = super::support::transcriptd(&["repair", input.to_str().unwrap(), "--out", out.to_str().unwrap(), "--min-idle", "0s"]);
    assert!(out.join("t.jsonl").exists(), "{}", super::support::stderr(&o));
    assert!(!stale.exists(), "the output's stale temporary file is removed");
    assert!(other.exists(), "another file's is left to its own next write");
}

/// Issue 29.6: the file sink's creation and its rotation are made durable (the directory
/// synced) before the checkpoint that names the new file is written. Seen from the outside
/// with strace: after the rename that rotates `f.jsonl`, the sink's directory is fsynced
/// before the next rename of a checkpoint. (Before the fix it never was.)
#[test]
fn the_file_sink_directory_is_synced_before_a_checkpoint_names_a_new_file() {
    if Command::new("strace").arg("-V").output().is_err() {
        assert!(std::env::var_os("TRANSCRIPTD_REQUIRE_STRACE").is_none(), "no strace on PATH");
        eprintln!("skipped: no strace on PATH");
        return;
    }
    let mut d = Daemon::prepare(super::harness::Opts { extra: String::new(), ..Default::default() });
    let sink_dir = d.root.path().join("sink");
    let text = std::fs::read_to_string(d.config_path()).unwrap()
        + &format!("[[sinks]]\ntype = \"file\"\npath = \"{}/f.jsonl\"\nmax_bytes = \"2KiB\"\nkeep = 2\n", sink_dir.display());
    std::fs::write(d.config_path(), text).unwrap();
    let trace = d.root.path().join("strace.txt");
    let mut child = Command::new("strace")
        .args(["-f", "-qq", "-y", "-e", "trace=fsync,fdatasync,rename,renameat,renameat2", "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_transcriptd"))
        .args(["run", "--config", d.config_path().to_str().unwrap()])
        .env("TRANSCRIPTD_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(d.root.path().join("err.log")).unwrap()))
        .spawn()
        .unwrap();
    let f = d.watch_dir().join("a.jsonl");
    std::fs::write(&f, "{\"role\":\"user\",\"content\":\"q\"}\n").unwrap();
    // Enough findings for a rotation or two.
    for i in 0..4 {
        super::harness::append(&f, result_lines(i * 10..i * 10 + 10));
        std::thread::sleep(Duration::from_millis(400));
    }
    let rotated = wait(Duration::from_secs(20), || {
        sink_dir.join("f.jsonl.1").exists() && std::fs::read_to_string(&trace).is_ok_and(|t| t.matches("checkpoints.json").count() > 4)
    });
    // SAFETY: our own child (strace), which passes SIGTERM on to the daemon.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = exits_within(&mut child, 20);
    assert!(rotated, "the sink rotated: {}", d.log());
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let dir_synced = |l: &str| (l.contains("fsync(") || l.contains("fdatasync(")) && l.contains(&format!("<{}>", sink_dir.display()));
    let is_checkpoint = |l: &str| l.contains("rename") && l.contains("checkpoints.json\"") && !l.contains("<unfinished");
    let rotation = lines.iter().position(|l| l.contains("rename") && l.contains("f.jsonl.1\"")).expect("a rotation in the trace");
    let next_checkpoint = lines[rotation..].iter().position(|l| is_checkpoint(l)).map(|i| i + rotation).expect("a checkpoint after the rotation");
    assert!(
        lines[rotation..next_checkpoint].iter().any(|l| dir_synced(l)),
        "no fsync of {} between the rotation and the checkpoint:\n{}",
        sink_dir.display(),
        lines[rotation..=next_checkpoint].join("\n")
    );
    let first_checkpoint = lines.iter().position(|l| is_checkpoint(l)).unwrap();
    assert!(lines[..first_checkpoint].iter().any(|l| dir_synced(l)), "the new sink file's directory is synced before the first checkpoint");
    let _ = &mut d;
}

#[allow(dead_code)]
fn keys_of(records: &[Value]) -> BTreeMap<Key, usize> {
    fold(records)
}

#[allow(dead_code)]
fn ino(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().ino()
}
