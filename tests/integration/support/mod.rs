//! Helpers shared by the integration tests: paths, fixtures, running the binary and expectation
//! files here; the daemon harness, the http receiver, the browser and the structured mutator
//! (which the fuzz targets include too) beside it.

pub mod browser;
pub mod harness;
pub mod mutate;
pub mod receiver;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `tests/data/<rel>`.
pub fn data(rel: &str) -> PathBuf {
    root().join("tests/data").join(rel)
}

/// Runs the built binary with `args`.
pub fn transcriptd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_transcriptd")).args(args).output().expect("run transcriptd")
}

/// Runs the built binary in `dir`.
pub fn transcriptd_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_transcriptd")).current_dir(dir).args(args).output().expect("run transcriptd")
}

/// Every `*.jsonl` file under `dir`, sorted.
pub fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "jsonl"))
        .map(|e| e.into_path())
        .collect();
    v.sort();
    v
}

/// A corpus generator of `tests/gen/` (stdlib Python; the benchmarks in `benches/` run them too).
pub fn generator(name: &str) -> PathBuf {
    root().join("tests/gen").join(name)
}

/// Runs the transcript generator (`tests/gen/gen_transcripts.py`) with `args`, writing `out`.
pub fn generate(out: &Path, args: &[&str]) {
    let status = Command::new("python3").arg(generator("gen_transcripts.py")).args(args).arg("-o").arg(out).status().expect("python3 runs the generator");
    assert!(status.success(), "generator failed: {args:?}");
}

/// Compares `actual` with the expectation file, or rewrites it when `UPDATE_EXPECT=1`.
pub fn expect_file(path: &Path, actual: &str) {
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path).unwrap_or_default();
    assert_eq!(actual, expected, "\n{} differs (UPDATE_EXPECT=1 rewrites it)", path.display());
}

/// Runs the built binary with `args` and `HOME` set to `home` (the standard locations live
/// there).
pub fn transcriptd_home(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_transcriptd")).env("HOME", home).args(args).output().expect("run transcriptd")
}

/// Writes `contents` to `path`, creating the directories above it.
pub fn put(path: &Path, contents: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, contents).unwrap();
}

/// Copies the file at `tests/data/<rel>` to `to`, creating the directories above it.
pub fn put_fixture(rel: &str, to: &Path) {
    put(to, std::fs::read(data(rel)).unwrap());
}

/// Sets a file's modification time to `secs` after the epoch.
pub fn set_mtime(path: &Path, secs: u64) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs)).unwrap();
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Standard error as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Standard output as JSON lines.
pub fn json_lines(o: &Output) -> Vec<serde_json::Value> {
    stdout(o).lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

/// Runs `transcriptd run` as `cmd` (its stderr piped here) until it watches, then stops it with
/// SIGTERM: its exit code and its log. Stderr is read to its end, so that the daemon never
/// writes its log into a closed pipe.
pub fn run_daemon_briefly(mut cmd: Command) -> (Option<i32>, String) {
    let mut child = cmd.env("TRANSCRIPTD_LOG", "info").stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut seen = String::new();
        for l in std::io::BufRead::lines(std::io::BufReader::new(err)) {
            let l = l.unwrap();
            // Signals are handled from then on.
            if l.contains("watching") {
                let _ = tx.send(());
            }
            seen.push_str(&l);
            seen.push('\n');
        }
        seen
    });
    let watching = rx.recv_timeout(std::time::Duration::from_secs(20)).is_ok();
    // SAFETY: our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let code = child.wait().unwrap().code();
    let log = reader.join().unwrap();
    assert!(watching, "the daemon did not start watching: {log}");
    (code, log)
}

/// Timings vary: `in 0.01s` becomes `in Ts`.
pub fn no_time(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(" in ") {
        out.push_str(&rest[..i + 4]);
        rest = &rest[i + 4..];
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if digits > 0 && rest[digits..].starts_with('s') {
            out.push('T');
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    out
}

/// Whether an optional peer is here. When it is not, the test says so in one line and should
/// return (a skip) — unless `TRANSCRIPTD_REQUIRE_PEERS` is set (`.ci/run` sets it, having
/// installed every peer), where a missing peer fails the test.
pub fn peer_present(what: &str, present: bool) -> bool {
    if !present {
        assert!(std::env::var_os("TRANSCRIPTD_REQUIRE_PEERS").is_none(), "{what} is missing and TRANSCRIPTD_REQUIRE_PEERS is set");
        eprintln!("skipped: {what} is not installed");
    }
    present
}

/// Whether the machine's `python3` can import `module`.
pub fn python_imports(module: &str) -> bool {
    Command::new("python3").args(["-c", &format!("import {module}")]).output().is_ok_and(|o| o.status.success())
}

/// Why an agent test skips when [`netns_works`] is false.
pub const NO_NETNS: &str = "cannot make a network namespace with loopback up (unshare --net, ip from iproute2)";

/// Whether a network namespace with loopback up can be made (as an unprivileged user with
/// `--map-root-user`, or as root): where the real agents run, reaching nothing but 127.0.0.1.
pub fn netns_works() -> bool {
    let ns = |args: &[&str]| Command::new("unshare").args(args).output().is_ok_and(|o| o.status.success());
    ns(&["--net", "--map-root-user", "sh", "-c", "ip link set lo up"]) || ns(&["--net", "sh", "-c", "ip link set lo up"])
}
