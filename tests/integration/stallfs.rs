//! The stuck filesystem the daemon's tests use ([`StallFs`], `peers/stallfs.py`), checked on
//! its own: what is written through the mount reads back; a stalled read blocks while a read
//! of another file, a `stat` of the stalled one, a listing and an append to it all answer;
//! released, the read returns the file's bytes. Appends (through the mount, or in the backing
//! directory) show their size at once and read back at the old size, as the daemon tails
//! (size, then pread). inotify on the mount sees writes through it, not those made in the
//! backing directory. A reader killed while held dies; dropping a `StallFs` lets held reads go
//! and leaves no mount, even when its server was killed.
//!
//! Without FUSE (no `/dev/fuse`, python3-fusepy or libfuse2, or a mount refused) each test
//! says "skipped" and passes, unless `TRANSCRIPTD_REQUIRE_FUSE` is set.

use super::support::harness::{append, is_mount_point, result_line, settle, wait, Daemon, Opts, StallFs};
use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// `f` run on a thread of its own: its result, or a panic if it has not answered in 10 s (it
/// was held up; the thread is left behind, to finish when the stall is let go).
fn answers<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| panic!("{what} was held up by the stalled read"))
}

fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
}

fn lines(tag: &str, n: usize) -> Vec<u8> {
    (0..n).flat_map(|i| format!("{{\"{tag}\":{i}}}\n").into_bytes()).collect()
}

#[test]
fn a_stalled_read_holds_up_only_itself_until_released() {
    let Some(fs) = StallFs::mount() else { return };
    let (m, a_path, b_path) = (fs.mount_dir(), fs.mount_dir().join("a.jsonl"), fs.mount_dir().join("b.jsonl"));
    let (a, b) = (lines("a", 1000), lines("b", 10));
    std::fs::write(&a_path, &a).unwrap();
    std::fs::write(&b_path, &b).unwrap();
    assert_eq!(std::fs::read(&a_path).unwrap(), a, "read back through the mount");
    assert_eq!(std::fs::read(fs.backing_dir().join("a.jsonl")).unwrap(), a, "written through to the backing directory");

    fs.stall("a.jsonl");
    // The control file is not seen through the mount.
    assert_eq!(names(&m), BTreeSet::from(["a.jsonl".to_owned(), "b.jsonl".to_owned()]));
    assert_eq!(m.join(".stall").symlink_metadata().unwrap_err().kind(), std::io::ErrorKind::NotFound);

    let (tx, rx) = mpsc::channel();
    let path = a_path.clone();
    std::thread::spawn(move || tx.send(std::fs::read(path)));
    assert!(fs.wait_held(1), "the read of a.jsonl never reached the server: {}", fs.log());
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "a stalled read returned");

    // While it is held, everything else answers: another file's read, a stat of the stalled
    // file, a listing, an append to the stalled file (a writer goes on while a reader is stuck).
    let b_path2 = b_path.clone();
    assert_eq!(answers("a read of another file", move || std::fs::read(b_path2).unwrap()), b);
    let p = a_path.clone();
    assert_eq!(answers("a stat of the stalled file", move || std::fs::metadata(p).unwrap().len()), a.len() as u64);
    let dir = m.clone();
    assert_eq!(answers("a listing", move || names(&dir)).len(), 2);
    let more = lines("more", 3);
    let (p, bytes) = (a_path.clone(), more.clone());
    answers("an append to the stalled file", move || append(&p, bytes));
    let p = a_path.clone();
    assert_eq!(answers("a stat after the append", move || std::fs::metadata(p).unwrap().len()), (a.len() + more.len()) as u64);
    assert_eq!(fs.held(), 1, "the stalled read was let go");
    assert!(rx.try_recv().is_err(), "the stalled read returned before it was released");

    fs.release();
    let got = rx.recv_timeout(Duration::from_secs(10)).expect("a released read never returned").unwrap();
    assert_eq!(got, [a, more].concat(), "the released read's bytes");
    assert_eq!(fs.held(), 0);
}

#[test]
fn appends_show_their_size_at_once_and_read_back_at_the_old_size() {
    let Some(fs) = StallFs::mount() else { return };
    let path = fs.mount_dir().join("tail.jsonl");
    let backing = fs.backing_dir().join("tail.jsonl");
    // Two appenders through the mount (O_APPEND, as agents write: one creates the file, one
    // opens it), and one in the backing directory behind the mount's back: none overwrites
    // another.
    let w1 = std::fs::OpenOptions::new().create(true).append(true).open(&path).unwrap();
    let w2 = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    // The tailer's descriptor, opened once, as the daemon's is.
    let tail = std::fs::File::open(&path).unwrap();
    let line = |i: usize| format!("{{\"n\":{i},\"pad\":\"{}\"}}\n", "x".repeat(i * 37)).into_bytes();
    let write = |i: usize, line: &[u8]| match i % 3 {
        0 => std::io::Write::write_all(&mut &w1, line).unwrap(),
        1 => std::io::Write::write_all(&mut &w2, line).unwrap(),
        _ => append(&backing, line),
    };
    let mut want = Vec::new();
    for i in 0..30 {
        // The size as it was, looked at just before (the kernel may keep what it was told).
        assert_eq!(tail.metadata().unwrap().len(), want.len() as u64);
        let (old, line) = (want.len() as u64, line(i));
        write(i, &line);
        want.extend_from_slice(&line);
        // fstat first: a stat by path looks the name up again, which refreshes the size.
        assert_eq!(tail.metadata().unwrap().len(), want.len() as u64, "size (fstat) after append {i}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), want.len() as u64, "size after append {i}");
        let mut got = vec![0; line.len() + 10];
        let n = tail.read_at(&mut got, old).unwrap();
        assert_eq!(&got[..n], &line[..], "pread at the old size after append {i}");
    }
    // Appends with nothing looked at between them: each lands at the file's true end, not
    // where the kernel last saw it end.
    for i in [32, 30, 31, 32, 31, 30] {
        let line = line(i);
        write(i, &line);
        want.extend_from_slice(&line);
    }
    assert_eq!(std::fs::read(&backing).unwrap(), want);
    let mut all = Vec::new();
    std::fs::File::open(&path).unwrap().read_to_end(&mut all).unwrap();
    assert_eq!(all, want);
}

/// The inotify events (mask, name) on `fd` until one for `name` with `IN_CLOSE_WRITE`.
fn events_until_closed(fd: i32, name: &str) -> Vec<(u32, String)> {
    let mut seen = Vec::new();
    let done = |seen: &Vec<(u32, String)>| seen.iter().any(|(mask, n)| n == name && mask & libc::IN_CLOSE_WRITE != 0);
    let found = wait(Duration::from_secs(10), || {
        let mut buf = [0u8; 4096];
        // SAFETY: reading into our own buffer from our own descriptor.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        let mut i = 0;
        while n > 0 && i < n as usize {
            let mask = u32::from_ne_bytes(buf[i + 4..i + 8].try_into().unwrap());
            let len = u32::from_ne_bytes(buf[i + 12..i + 16].try_into().unwrap()) as usize;
            let name = String::from_utf8_lossy(&buf[i + 16..i + 16 + len]).trim_end_matches('\0').to_owned();
            seen.push((mask, name));
            i += 16 + len;
        }
        done(&seen)
    });
    assert!(found, "no IN_CLOSE_WRITE for {name}; events: {seen:?}");
    seen
}

#[test]
fn inotify_on_the_mount_sees_writes_through_it_and_not_in_the_backing_directory() {
    let Some(fs) = StallFs::mount() else { return };
    // SAFETY: plain syscalls on a descriptor this test owns and closes.
    let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    assert!(fd >= 0);
    let dir = std::ffi::CString::new(fs.mount_dir().to_str().unwrap()).unwrap();
    // SAFETY: as above.
    assert!(unsafe { libc::inotify_add_watch(fd, dir.as_ptr(), libc::IN_ALL_EVENTS) } >= 0);
    // First behind the mount's back, then through it: events come in order, so an event for
    // the first would come before the last one waited for.
    append(&fs.backing_dir().join("behind.jsonl"), b"{}\n");
    append(&fs.backing_dir().join("behind.jsonl"), b"{}\n");
    append(&fs.mount_dir().join("through.jsonl"), b"{}\n");
    let seen = events_until_closed(fd, "through.jsonl");
    append(&fs.mount_dir().join("through.jsonl"), b"{}\n");
    let again = events_until_closed(fd, "through.jsonl");
    // SAFETY: our own descriptor.
    unsafe { libc::close(fd) };
    assert!(seen.iter().all(|(_, n)| n == "through.jsonl"), "events for a file written in the backing directory: {seen:?}");
    let has = |events: &[(u32, String)], bit| events.iter().any(|(m, _)| m & bit != 0);
    assert!(has(&seen, libc::IN_CREATE) && has(&seen, libc::IN_MODIFY), "{seen:?}");
    assert!(has(&again, libc::IN_MODIFY) && !has(&again, libc::IN_CREATE), "{again:?}");
}

#[test]
fn a_reader_killed_while_held_dies_and_the_stall_holds_for_the_next() {
    let Some(fs) = StallFs::mount() else { return };
    let path = fs.mount_dir().join("a.jsonl");
    std::fs::write(&path, lines("a", 10)).unwrap();
    fs.stall("a.jsonl");
    let mut cat = Command::new("cat").arg(&path).stdout(Stdio::null()).spawn().unwrap();
    assert!(fs.wait_held(1), "cat's read never reached the server: {}", fs.log());
    cat.kill().unwrap();
    assert!(wait(Duration::from_secs(10), || cat.try_wait().unwrap().is_some()), "a reader killed while held never died");
    assert!(fs.wait_held(0), "the killed reader's read is still held");
    let mut cat = Command::new("cat").arg(&path).stdout(Stdio::null()).spawn().unwrap();
    assert!(fs.wait_held(1), "the next read was not held");
    fs.release();
    assert!(cat.wait().unwrap().success());
}

#[test]
fn dropping_it_lets_held_reads_go_and_leaves_no_mount() {
    let Some(fs) = StallFs::mount() else { return };
    let (mnt, path) = (fs.mount_dir(), fs.mount_dir().join("a.jsonl"));
    std::fs::write(&path, b"{}\n").unwrap();
    assert!(is_mount_point(&mnt));
    fs.stall("");
    let reader = std::thread::spawn(move || std::fs::read(path));
    assert!(fs.wait_held(1));
    drop(fs);
    assert_eq!(reader.join().unwrap().unwrap(), b"{}\n", "the held read, let go");
    assert!(!is_mount_point(&mnt), "a mount was left behind");

    // Its server killed: the mount is left dead ("transport endpoint is not connected") until
    // the drop detaches it.
    let Some(fs) = StallFs::mount() else { return };
    let mnt = fs.mount_dir();
    // SAFETY: our own child.
    unsafe { libc::kill(fs.pid(), libc::SIGKILL) };
    assert!(wait(Duration::from_secs(10), || std::fs::metadata(&mnt).is_err_and(|e| e.raw_os_error() == Some(libc::ENOTCONN))));
    assert!(is_mount_point(&mnt));
    drop(fs);
    assert!(!is_mount_point(&mnt), "a dead mount was left behind");
}

/// A daemon watching the mount, as the daemon's tests start one: its watched directory is a
/// symlink to the mount (watched roots may be symlinks). Declared after the `StallFs`, it is
/// dropped (killed) first.
fn daemon_on(fs: &StallFs, daemon: &str) -> Daemon {
    let mut d = Daemon::prepare(Opts { daemon: daemon.into(), ..Opts::default() });
    std::fs::remove_dir(d.watch_dir()).unwrap();
    std::os::unix::fs::symlink(fs.mount_dir(), d.watch_dir()).unwrap();
    d.start();
    d
}

#[test]
fn a_daemon_tails_files_written_through_the_mount_by_events_or_in_the_backing_directory_by_polling() {
    for (watch, dir) in [("", None), ("watch = \"poll\"", Some(()))] {
        let Some(fs) = StallFs::mount() else { return };
        let d = daemon_on(&fs, watch);
        let write_dir: PathBuf = if dir.is_some() { fs.backing_dir() } else { d.watch_dir() };
        append(&write_dir.join("a.jsonl"), result_line("c1"));
        append(&write_dir.join("a.jsonl"), result_line("c2"));
        let (got, want) = settle(&d);
        assert_eq!(want.len(), 2, "{want:?}");
        assert_eq!(got, want, "{watch:?}: {}", d.log());
    }
}
