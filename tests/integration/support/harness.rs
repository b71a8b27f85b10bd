//! The daemon under test: the real `transcriptd run` binary in its own temp directories, driven
//! by real processes and files (signals, `kill -9`, renames, truncation, FIFOs, links, TCP
//! connections), and the fold that turns its output records into "what is true now".
//!
//! Everything here goes through the binary's public surface (config file, stdout records,
//! stderr logs, `/health`, `/metrics`, the checkpoint file), so these tests hold whatever the
//! daemon's insides become.

use super::transcriptd;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// Where the daemon's stdout goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Out {
    /// `out.jsonl`, opened for appending, with stderr in `err.log`: a stdout file only the
    /// daemon writes.
    File,
    /// `out.jsonl` for both stdout and stderr (`run >> out.jsonl 2>&1`): a shared file.
    Shared,
    /// A pipe nobody reads (held open in [`Daemon::pipe`]).
    Pipe,
}

/// How to start a daemon.
#[derive(Debug, Clone)]
pub struct Opts {
    /// Lines added to `[daemon]`.
    pub daemon: String,
    /// Stages, sinks or sources appended to the config.
    pub extra: String,
    /// The prometheus sink's address; `None` is loopback port 0 (the port the daemon gets is
    /// read from its log, so parallel tests never collide).
    pub address: Option<String>,
    /// Stdout's wiring.
    pub out: Out,
    /// RLIMIT_NOFILE (soft and hard) of the daemon.
    pub nofile: Option<u64>,
    /// `[[stages]]` in place of the default list ([`DEFAULT_STAGES`]).
    pub stages: Option<String>,
}

/// The stages of the harness's config: parse, compaction, orphans (grace 300 ms), validate.
pub const DEFAULT_STAGES: &str = r#"[[stages]]
type = "parse"
[[stages]]
type = "compaction"
[[stages]]
type = "orphans"
grace = "300ms"
[[stages]]
type = "validate"
"#;

impl Default for Opts {
    fn default() -> Self {
        Opts { daemon: String::new(), extra: String::new(), address: None, out: Out::File, nofile: None, stages: None }
    }
}

/// A daemon under test, with its directories.
pub struct Daemon {
    child: Option<Child>,
    /// Its temp directory: `watch/`, `state/`, `out.jsonl`, `err.log`, `transcriptd.toml`.
    pub root: tempfile::TempDir,
    /// The prometheus sink's address, as configured.
    pub address: String,
    /// The metrics port the running daemon listens on.
    pub port: u16,
    /// How it was started.
    pub opts: Opts,
    /// Stdout, when it is a pipe.
    pub pipe: Option<ChildStdout>,
}

impl Daemon {
    /// The watched directory.
    pub fn watch_dir(&self) -> PathBuf {
        self.root.path().join("watch")
    }
    /// Stdout's file.
    pub fn out(&self) -> PathBuf {
        self.root.path().join("out.jsonl")
    }
    /// The configuration file.
    pub fn config_path(&self) -> PathBuf {
        self.root.path().join("transcriptd.toml")
    }
    /// The state directory.
    pub fn state_dir(&self) -> PathBuf {
        self.root.path().join("state")
    }

    /// A config: sources in `watch/`, grace 300 ms, stdout and Prometheus sinks (on `port` of
    /// loopback; 0: any), `extra` appended (more stages or sinks).
    pub fn config(root: &Path, port: u16, extra_daemon: &str, extra: &str) -> String {
        Self::config_at(root, &format!("127.0.0.1:{port}"), extra_daemon, extra)
    }

    /// [`Daemon::config`] with the metrics address spelt out.
    pub fn config_at(root: &Path, address: &str, extra_daemon: &str, extra: &str) -> String {
        format!(
            r#"[daemon]
state_dir = "{state}"
checkpoint_interval = "100ms"
poll_interval = "500ms"
{extra_daemon}

[[sources]]
include = ["{watch}/**/*.jsonl"]
exclude = ["**/*.rejects.jsonl"]

{DEFAULT_STAGES}{extra}
[[sinks]]
type = "stdout"
[[sinks]]
type = "prometheus"
address = "{address}"
"#,
            state = root.join("state").display(),
            watch = root.join("watch").display(),
        )
    }

    /// Starts a daemon with `extra_daemon` in `[daemon]` and `extra` appended, and waits until
    /// it is healthy.
    pub fn new(extra_daemon: &str, extra: &str) -> Daemon {
        Daemon::with(Opts { daemon: extra_daemon.into(), extra: extra.into(), ..Opts::default() })
    }

    /// [`Daemon::new`] with the configuration text changed by `edit` first.
    pub fn edited(extra_daemon: &str, extra: &str, edit: impl FnOnce(String) -> String) -> Daemon {
        let mut d = Daemon::prepare(Opts { daemon: extra_daemon.into(), extra: extra.into(), ..Opts::default() });
        let text = std::fs::read_to_string(d.config_path()).unwrap();
        std::fs::write(d.config_path(), edit(text)).unwrap();
        d.start();
        d
    }

    /// Starts a daemon as `opts` say, and waits until it is healthy.
    pub fn with(opts: Opts) -> Daemon {
        let mut d = Daemon::prepare(opts);
        d.start();
        d
    }

    /// Writes the directories and config, without starting.
    pub fn prepare(opts: Opts) -> Daemon {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("watch")).unwrap();
        let address = opts.address.clone().unwrap_or_else(|| "127.0.0.1:0".into());
        let mut config = Self::config_at(root.path(), &address, &opts.daemon, &opts.extra);
        if let Some(stages) = &opts.stages {
            config = config.replace(DEFAULT_STAGES, stages);
        }
        std::fs::write(root.path().join("transcriptd.toml"), config).unwrap();
        Daemon { child: None, root, address, port: 0, opts, pipe: None }
    }

    /// Starts the process, learns its metrics port from its log, and waits until `/health`
    /// answers `ok`.
    pub fn start(&mut self) {
        let from = self.log().len();
        self.spawn();
        let mut port = None;
        wait(Duration::from_secs(20), || {
            port = listening_port(&self.log()[from.min(self.log().len())..]);
            port.is_some()
        });
        self.port = port.unwrap_or_else(|| panic!("the daemon did not say where it listens: {}", self.log()));
        assert!(wait(Duration::from_secs(20), || self.get("/health").as_deref() == Some("ok\n")), "daemon did not become healthy: {}", self.log());
    }

    /// Starts the process without waiting for it.
    pub fn spawn(&mut self) {
        let append = |p: PathBuf| std::fs::OpenOptions::new().create(true).append(true).open(p).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_transcriptd"));
        cmd.args(["run", "--config", self.config_path().to_str().unwrap()]).env("TRANSCRIPTD_LOG", "info");
        match self.opts.out {
            Out::File => {
                cmd.stdout(Stdio::from(append(self.out()))).stderr(Stdio::from(append(self.root.path().join("err.log"))));
            }
            Out::Shared => {
                let f = append(self.out());
                cmd.stdout(Stdio::from(f.try_clone().unwrap())).stderr(Stdio::from(f));
            }
            Out::Pipe => {
                cmd.stdout(Stdio::piped()).stderr(Stdio::from(append(self.root.path().join("err.log"))));
            }
        }
        if let Some(n) = self.opts.nofile {
            // SAFETY: setrlimit is async-signal-safe; it only changes the child's own limit.
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit { rlim_cur: n, rlim_max: n };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().unwrap();
        self.pipe = child.stdout.take();
        self.child = Some(child);
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    /// Its logs (stderr).
    pub fn log(&self) -> String {
        let p = if self.opts.out == Out::Shared { self.out() } else { self.root.path().join("err.log") };
        String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned()
    }

    /// Sends `sig`.
    pub fn signal(&self, sig: i32) {
        // SAFETY: sending a signal to our own child process.
        unsafe { libc::kill(self.pid(), sig) };
    }

    /// Stops the daemon (SIGSTOP) and waits until every one of its threads has stopped: the
    /// signal takes effect a moment later, and a thread still running sees what is done next
    /// (an inode-reuse test saw the rewrite before the rename: 1 run in 30).
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
        let pid = self.pid() as u32;
        assert!(wait(Duration::from_secs(5), || all_stopped(pid)), "the daemon did not stop");
    }

    /// Lets a paused daemon run on (SIGCONT).
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    /// Runs `f` while the daemon is stopped ([`Daemon::pause`] ... [`Daemon::resume`]): what
    /// `f` does looks atomic to it, as if it had looked only afterwards.
    pub fn while_stopped<T>(&self, f: impl FnOnce() -> T) -> T {
        self.pause();
        let r = f();
        self.resume();
        r
    }

    /// SIGTERM and wait up to 20 s; returns the exit code, or `None` if it had to be killed.
    pub fn stop(&mut self) -> Option<i32> {
        self.signal(libc::SIGTERM);
        let mut c = self.child.take().unwrap();
        let end = Instant::now() + Duration::from_secs(20);
        while Instant::now() < end {
            if let Some(s) = c.try_wait().unwrap() {
                return s.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
        None
    }

    /// `kill -9` and reap.
    pub fn kill9(&mut self) {
        self.signal(libc::SIGKILL);
        self.child.take().unwrap().wait().unwrap();
    }

    /// GET `path`: the body of a 200 answer.
    pub fn get(&self, path: &str) -> Option<String> {
        http_get(self.port, path)
    }

    /// GET `/health`: status and body.
    pub fn health(&self) -> Option<(u16, String)> {
        http(self.port, "/health")
    }

    /// Open file descriptors of the process.
    pub fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).map_or(0, |d| d.count())
    }

    /// How many inotify watches the process holds.
    pub fn inotify_watches(&self) -> usize {
        let pid = self.pid();
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return 0 };
        fds.filter_map(Result::ok)
            .filter(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().contains("inotify")))
            .map(|e| {
                let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", e.file_name().to_string_lossy())).unwrap_or_default();
                info.lines().filter(|l| l.starts_with("inotify wd:")).count()
            })
            .sum()
    }

    /// The value of a metric sample (`name{labels}` as served), if served.
    pub fn metric(&self, sample: &str) -> Option<f64> {
        metric(&self.get("/metrics")?, sample)
    }

    /// The records on stdout (lines that are not records, in a shared file, are skipped).
    pub fn records(&self) -> Vec<Value> {
        read_records(&self.out())
    }
}

/// The port in the first "serving /metrics and /health" log line of `log`.
pub fn listening_port(log: &str) -> Option<u16> {
    // Without colours' escape sequences.
    let mut plain = String::with_capacity(log.len());
    let mut esc = false;
    for c in log.chars() {
        match (esc, c) {
            (false, '\u{1b}') => esc = true,
            (true, 'm') => esc = false,
            (true, _) => {}
            (false, c) => plain.push(c),
        }
    }
    let line = plain.lines().find(|l| l.contains("serving /metrics and /health"))?;
    let addr = line.split_whitespace().find_map(|w| w.strip_prefix("addr="))?;
    addr.rsplit(':').next()?.parse().ok()
}

/// The JSON records in a file, skipping lines that are not JSON objects with a `type` (logs
/// sharing the file, a torn last line).
pub fn read_records(path: &Path) -> Vec<Value> {
    let bytes = std::fs::read(path).unwrap_or_default();
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r.get("type").is_some_and(Value::is_string))
        .collect()
}

/// The value of `sample` in a Prometheus exposition text.
pub fn metric(text: &str, sample: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(sample)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The sum of every sample of `name` (all label sets).
pub fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.strip_prefix(name).is_some_and(|r| r.starts_with('{') || r.starts_with(' ')))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // A stopped process must be continued to die of SIGKILL promptly.
            let _ = c.kill();
            // SAFETY: our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
            let _ = c.wait();
        }
    }
}

/// GET `path` on the loopback port: status and body (de-chunked).
pub fn http(port: u16, path: &str) -> Option<(u16, String)> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").ok()?;
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).ok()?;
    let resp = String::from_utf8_lossy(&resp).into_owned();
    let (head, body) = resp.split_once("\r\n\r\n")?;
    let status: u16 = head.split_whitespace().nth(1)?.parse().ok()?;
    // Bodies may be chunked.
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            if n == 0 {
                break;
            }
            out.push_str(after.get(..n)?);
            rest = after.get(n + 2..)?;
        }
        return Some((status, out));
    }
    Some((status, body.to_owned()))
}

/// GET `path`: the body of a 200 answer.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    http(port, path).filter(|(s, _)| *s == 200).map(|(_, b)| b)
}

/// Polls `cond` every 20 ms until it holds or `timeout` passes.
/// Whether every thread of process `pid` is stopped: SIGSTOP takes effect a moment after it is
/// sent, and a thread still running sees what a test does next.
pub fn all_stopped(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|tasks| {
        tasks.filter_map(Result::ok).all(|t| {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            // The state follows the command name, which is in parentheses.
            stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()).is_some_and(|st| st == "T")
        })
    })
}

pub fn wait(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// A finding: file, line, kind, severity, call id.
pub type Key = (String, u64, String, String, Option<String>);

/// What the records say is true now.
#[derive(Debug, Default)]
pub struct Folded {
    /// Findings that hold, with how often each was emitted while it held (1 when exactly-once).
    pub live: BTreeMap<Key, usize>,
    /// Compaction boundaries of the files as they are: (file, line) and how often each was
    /// emitted.
    pub compactions: BTreeMap<(String, u64), usize>,
    /// Retractions and demotions of findings that were not live.
    pub unknown: Vec<String>,
    /// `file_opened` records per file incarnation, counted.
    pub opened: BTreeMap<String, usize>,
}

impl Folded {
    /// Findings emitted twice while they held.
    pub fn duplicates(&self) -> Vec<&Key> {
        self.live.iter().filter(|(_, n)| **n > 1).map(|(k, _)| k).collect()
    }

    /// The live findings as a set.
    pub fn findings(&self) -> BTreeMap<Key, usize> {
        self.live.keys().map(|k| (k.clone(), 1)).collect()
    }

    /// Compaction lines as a set.
    pub fn compaction_set(&self) -> BTreeSet<(String, u64)> {
        self.compactions.keys().cloned().collect()
    }
}

fn key(r: &Value, sev: &str) -> Key {
    (
        r["file"].as_str().unwrap().to_owned(),
        r["line"].as_u64().unwrap(),
        r["kind"].as_str().unwrap().to_owned(),
        sev.to_owned(),
        r["call_id"].as_str().map(str::to_owned),
    )
}

/// Folds records: findings minus retractions, with demotions applied. A file's incarnation
/// ends at `file_truncated` (its content was replaced: what was reported about it no longer
/// holds) and at `file_closed` (gone); a `file_closed` for a rename (`to`) moves the file's
/// findings to its new name.
pub fn fold_records(records: &[Value]) -> Folded {
    let mut f = Folded::default();
    for r in records {
        let file = r["file"].as_str().unwrap_or_default().to_owned();
        match r["type"].as_str().unwrap_or_default() {
            "finding" => *f.live.entry(key(r, r["severity"].as_str().unwrap())).or_default() += 1,
            "finding_retracted" if f.live.remove(&key(r, "error")).is_none() && f.live.remove(&key(r, "warning")).is_none() => f.unknown.push(r.to_string()),
            // An error turned warning, or a warning of a break the agent mends (now on an
            // abandoned branch) that stays one.
            "finding_demoted" => match f.live.remove(&key(r, "error")) {
                Some(n) => {
                    f.live.insert(key(r, "warning"), n);
                }
                None if f.live.contains_key(&key(r, "warning")) => {}
                None => f.unknown.push(r.to_string()),
            },
            "compaction" => *f.compactions.entry((file, r["line"].as_u64().unwrap())).or_default() += 1,
            "file_opened" => *f.opened.entry(file).or_default() += 1,
            "file_truncated" | "file_closed" => {
                let to = r.get("to").and_then(Value::as_str).filter(|_| r["reason"] == "renamed");
                let live: Vec<Key> = f.live.keys().filter(|k| k.0 == file).cloned().collect();
                for k in live {
                    let n = f.live.remove(&k).unwrap();
                    if let Some(to) = to {
                        f.live.insert((to.to_owned(), k.1, k.2, k.3, k.4), n);
                    }
                }
                let comps: Vec<(String, u64)> = f.compactions.keys().filter(|k| k.0 == file).cloned().collect();
                for k in comps {
                    let n = f.compactions.remove(&k).unwrap();
                    if let Some(to) = to {
                        f.compactions.insert((to.to_owned(), k.1), n);
                    }
                }
                f.opened.remove(&file);
                if let Some(to) = to {
                    *f.opened.entry(to.to_owned()).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    f
}

/// The daemon's findings, folded. Panics on a finding emitted twice while live, or a
/// retraction or demotion of a finding that was not live.
pub fn fold(records: &[Value]) -> BTreeMap<Key, usize> {
    let f = fold_records(records);
    assert!(f.duplicates().is_empty(), "findings emitted twice: {:?}", f.duplicates());
    assert!(f.unknown.is_empty(), "retractions or demotions of unknown findings: {:?}", f.unknown);
    f.live
}

/// The findings `check --output json` reports on `path` (a file or directory).
pub fn check_dir(dir: &Path) -> BTreeMap<Key, usize> {
    let out = transcriptd(&["check", "--output", "json", "--no-summary", dir.to_str().unwrap()]);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        // Findings only: not `missing_transcript`, nor the notice of a path that is not a
        // regular file (`skipped`, which the daemon logs as a warning instead).
        .filter(|r| r["kind"].is_string() && r["kind"] != "missing_transcript")
        .map(|r| (key(&r, r["severity"].as_str().unwrap()), 1))
        .collect()
}

/// The compaction boundaries `transcriptd history` finds in every `*.jsonl` file under `dir`.
pub fn compactions_in(dir: &Path) -> BTreeSet<(String, u64)> {
    let mut out = BTreeSet::new();
    for f in super::jsonl_files(dir) {
        let o = transcriptd(&["history", f.to_str().unwrap()]);
        for l in String::from_utf8_lossy(&o.stdout).lines() {
            if let Ok(v) = serde_json::from_str::<Value>(l) {
                if v["type"] == "compact_boundary" {
                    out.insert((f.display().to_string(), v["line"].as_u64().unwrap()));
                }
            }
        }
    }
    out
}

/// Appends `bytes` to `path` in `pieces` writes, pausing between them.
pub fn append_in_pieces(path: &Path, bytes: &[u8], pieces: usize, pause: Duration) {
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
    let step = bytes.len().div_ceil(pieces.max(1)).max(1);
    for chunk in bytes.chunks(step) {
        f.write_all(chunk).unwrap();
        f.flush().unwrap();
        std::thread::sleep(pause);
    }
}

/// Appends `bytes` to `path` in one write.
pub fn append(path: &Path, bytes: impl AsRef<[u8]>) {
    append_in_pieces(path, bytes.as_ref(), 1, Duration::ZERO);
}

/// A chat tool result line for `call` (an `orphan_result` finding where nothing called it).
pub fn result_line(call: &str) -> String {
    format!("{{\"role\":\"tool\",\"tool_call_id\":\"{call}\",\"content\":\"x\"}}\n")
}

/// Waits until the fold equals check on the watch dir; returns both.
pub fn settle(d: &Daemon) -> (BTreeMap<Key, usize>, BTreeMap<Key, usize>) {
    settle_on(d, &d.watch_dir())
}

/// Waits until the fold of the records about files under `dir` equals check on `dir`.
pub fn settle_on(d: &Daemon, dir: &Path) -> (BTreeMap<Key, usize>, BTreeMap<Key, usize>) {
    let prefix = dir.display().to_string();
    let mut last = (BTreeMap::new(), BTreeMap::new());
    wait(Duration::from_secs(20), || {
        let got: BTreeMap<Key, usize> = fold(&d.records()).into_iter().filter(|(k, _)| k.0.starts_with(&prefix)).collect();
        last = (got, check_dir(dir));
        last.0 == last.1
    });
    last
}

/// Starts a FUSE peer of `tests/integration/peers/` (`python3 SCRIPT ARGS`, its stderr to `log`)
/// and waits up to `within` for it to print `mounted`. `None` (after saying why in one line)
/// where FUSE cannot be used here: no `/dev/fuse`, no python3, or the peer's exit status 3 (no
/// fusepy or libfuse2, the mount refused: its log says which); that fails instead when
/// `TRANSCRIPTD_REQUIRE_FUSE` is set. The peer gets SIGTERM when the thread that started it
/// ends (PR_SET_PDEATHSIG), and unmounts itself then.
pub fn spawn_fuse_peer(script: &str, args: &[&OsStr], log: &Path, within: Duration) -> Option<Child> {
    let unavailable = |why: String| {
        assert!(std::env::var_os("TRANSCRIPTD_REQUIRE_FUSE").is_none(), "{why}");
        eprintln!("skipped: {why}");
        None
    };
    if !Path::new("/dev/fuse").exists() {
        return unavailable("no /dev/fuse (FUSE is not available here)".into());
    }
    let read_log = || std::fs::read_to_string(log).unwrap_or_default();
    let mut cmd = Command::new("python3");
    cmd.arg(super::root().join("tests/integration/peers").join(script))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::fs::File::create(log).unwrap()));
    // SAFETY: prctl is async-signal-safe; it only sets the child's own parent-death signal.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return unavailable("no python3 on PATH".into()),
        Err(e) => panic!("cannot start {script}: {e}"),
    };
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line);
        let _ = tx.send(line);
    });
    let fail = |mut child: Child, why: String| -> ! {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{why}: {}", read_log())
    };
    match rx.recv_timeout(within) {
        Ok(line) if line == "mounted\n" => Some(child),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => fail(child, format!("{script} did not mount in {within:?}")),
        Ok(line) if !line.is_empty() => fail(child, format!("{script} said {line:?}, not \"mounted\"")),
        // Its stdout closed: it ended.
        _ => {
            let status = child.wait().unwrap();
            // 3: FUSE cannot be used here (the reason is in its log).
            if status.code() == Some(3) {
                return unavailable(read_log().trim().replace('\n', "; "));
            }
            panic!("{script} ended ({status}) before mounting: {}", read_log());
        }
    }
}

/// A filesystem whose reads can be made to hang, as a stuck NFS server's do: a passthrough
/// FUSE mount ([`StallFs::mount_dir`]) of a temp directory ([`StallFs::backing_dir`]) served by
/// `peers/stallfs.py` (fusepy over libfuse 2, multithreaded: one stuck read holds up no other
/// operation). While [`StallFs::stall`] names them, reads of the files whose path under the
/// mount contains the text block in the kernel until [`StallFs::release`]; `stat`, `readdir`,
/// writes and reads of other files go on. The kernel caches nothing (direct_io, no attribute
/// or entry cache): every read reaches the server, and a size is always the backing file's.
///
/// inotify on the mount sees what is done through the mount (create, modify, close, rename,
/// delete), and nothing done directly in the backing directory: a daemon watching the mount
/// either has its files written through the mount or polls (`watch = "poll"`).
///
/// A reader held there is in uninterruptible sleep as for a hard NFS mount, except that a
/// signal (kill -9 too) gets it answered EINTR: a daemon stuck on a stalled read can still be
/// killed. Dropping a `StallFs` releases every stall, stops the server and detaches the
/// mount (lazily), panic or not; if the test process itself dies, the server gets SIGTERM
/// (PR_SET_PDEATHSIG: when the thread that mounted it ends, so keep a `StallFs` in the test's
/// own thread) and detaches the mount itself.
pub struct StallFs {
    child: Option<Child>,
    /// `backing/`, `mnt/`, `stallfs.log` (the server's stderr), `held` (reads held now).
    root: tempfile::TempDir,
}

impl StallFs {
    /// Mounts a new one and waits (up to 10 s) until it answers. `None` (after saying why)
    /// when FUSE cannot be used here: no `/dev/fuse`, no python3, no fusepy or libfuse2, the
    /// mount refused; that fails instead when `TRANSCRIPTD_REQUIRE_FUSE` is set.
    pub fn mount() -> Option<StallFs> {
        let root = tempfile::tempdir().unwrap();
        // Canonical: the mount table names it so.
        let r = root.path().canonicalize().unwrap();
        std::fs::create_dir(r.join("backing")).unwrap();
        std::fs::create_dir(r.join("mnt")).unwrap();
        let args = [r.join("held"), r.join("backing"), r.join("mnt")];
        let child = spawn_fuse_peer(
            "stallfs.py",
            &[OsStr::new("--held"), args[0].as_os_str(), args[1].as_os_str(), args[2].as_os_str()],
            &r.join("stallfs.log"),
            Duration::from_secs(10),
        )?;
        Some(StallFs { child: Some(child), root })
    }

    /// Where it is mounted.
    pub fn mount_dir(&self) -> PathBuf {
        self.root.path().canonicalize().unwrap().join("mnt")
    }

    /// The directory it serves. Changes made here directly fire no inotify event on the mount.
    pub fn backing_dir(&self) -> PathBuf {
        self.root.path().canonicalize().unwrap().join("backing")
    }

    /// From now on, reads of every file whose path under the mount contains `name_part` (`""`:
    /// every file) block until [`StallFs::release`]. Reads already under way finish.
    pub fn stall(&self, name_part: &str) {
        // Written aside and renamed in: the server never reads half of it (an empty `.stall`
        // would stall everything).
        let tmp = self.root.path().join("stall.tmp");
        std::fs::write(&tmp, name_part).unwrap();
        std::fs::rename(tmp, self.backing_dir().join(".stall")).unwrap();
    }

    /// Lets every held read go on, and no more is held.
    pub fn release(&self) {
        match std::fs::remove_file(self.backing_dir().join(".stall")) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("cannot remove .stall: {e}"),
            _ => {}
        }
    }

    /// How many reads are held now.
    pub fn held(&self) -> usize {
        std::fs::read_to_string(self.root.path().join("held")).ok().and_then(|s| s.parse().ok()).unwrap_or(0)
    }

    /// Waits (up to 10 s) until `n` reads are held; false if they never were.
    pub fn wait_held(&self, n: usize) -> bool {
        wait(Duration::from_secs(10), || self.held() == n)
    }

    /// The server's process id.
    pub fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    /// The server's stderr.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.root.path().join("stallfs.log")).unwrap_or_default()
    }
}

/// Whether `dir` (canonical) is a mount point in `/proc/self/mountinfo`.
pub fn is_mount_point(dir: &Path) -> bool {
    let dir = dir.to_string_lossy();
    std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default().lines().any(|l| l.split(' ').nth(4) == Some(&dir))
}

impl Drop for StallFs {
    fn drop(&mut self) {
        // Readers held in the test (its threads, a daemon) go on first.
        self.release();
        // SIGTERM: it lets held reads go, detaches the mount and exits.
        stop_fuse_peer(self.child.take(), &self.mount_dir());
    }
}

/// Stops a FUSE peer (SIGTERM, then after 10 s SIGKILL) and, whatever became of it (killed, it
/// never got to unmount), leaves no mount behind at `mnt`: lazily, so files still open on it do
/// not keep it.
pub fn stop_fuse_peer(child: Option<Child>, mnt: &Path) {
    if let Some(mut c) = child {
        // SAFETY: our own child.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(10);
        while c.try_wait().unwrap().is_none() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = c.kill();
        let _ = c.wait();
    }
    if is_mount_point(mnt) {
        let c = std::ffi::CString::new(mnt.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string; MNT_DETACH detaches without waiting for its users.
        if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
            // Not root: the setuid helper does it.
            let _ = Command::new("fusermount").args(["-uz", mnt.to_str().unwrap()]).stderr(Stdio::null()).status();
        }
    }
}
