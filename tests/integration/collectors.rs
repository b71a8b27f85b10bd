//! The `http` sink against a real collector users run: Fluent Bit's `http` input, with a `file`
//! output (`Format plain`: one JSON object per line). The daemon posts to it; a writer lays down
//! transcripts with known faults (`tests/data/check`) and one more file appended in pieces (torn
//! lines completed later: retractions too); the records Fluent Bit writes must be the daemon's
//! records (its stdout sink), every one once, and fold to what `check` finds. Then Fluent Bit is
//! killed (`kill -9`, while idle) for a while: the records written meanwhile wait in the sink's
//! spool, tried again with backoff; once Fluent Bit is back, every record arrives, none twice.
//!
//! Fluent Bit is not in the package registries CI reaches (nor is Vector), so `.ci/run` cannot
//! install it. The test takes the binary from `$TRANSCRIPTD_FLUENT_BIT`, else
//! `$TRANSCRIPTD_PEER_DIR/fluent-bit/bin/fluent-bit` (`target/peer` by default), else
//! `fluent-bit` on `PATH`. Without one it says so and passes, unless
//! `TRANSCRIPTD_REQUIRE_COLLECTORS` is set, where a missing binary fails. Fluent Bit runs with
//! the configuration README shows ("Pushed over HTTP"), read from there.
//!
//! The binary these tests were run with: Fluent Bit v5.1.1 from its source tag, built with the
//! Debian packages `cmake flex bison libssl-dev libyaml-dev libsqlite3-dev` and
//! `cmake -DCMAKE_BUILD_TYPE=Release -DFLB_MINIMAL=On -DFLB_IN_HTTP=On
//! -DFLB_IN_STORAGE_BACKLOG=On -DFLB_OUT_FILE=On -DFLB_OUT_STDOUT=On -DFLB_FILTER_GREP=On
//! -DFLB_HTTP_SERVER=On -DFLB_TLS=On -DFLB_SQLDB=On -DFLB_PREFER_SYSTEM_LIB_SQLITE=On
//! -DFLB_UNICODE_ENCODER=Off -DFLB_USE_SIMDUTF=Off -DFLB_EXAMPLES=Off -DFLB_SHARED_LIB=Off
//! -DFLB_LUAJIT=Off -DFLB_WASM=Off -DFLB_KAFKA=Off -DFLB_ZIG=Off -DFLB_PROXY_GO=Off
//! -DFLB_BACKTRACE=Off -DFLB_STREAM_PROCESSOR=Off -DFLB_CHUNK_TRACE=Off -DFLB_AVRO_ENCODER=Off
//! -DFLB_JEMALLOC=Off` then `make fluent-bit-bin` (about 30 minutes of two busy cores), copied
//! to `target/peer/fluent-bit/bin/fluent-bit`.

use super::harness::{append_in_pieces, check_dir, fold, wait, Daemon};
use super::receiver::free_port;
use super::support::{data, jsonl_files};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The Fluent Bit binary, if one is installed (see the module docs).
fn fluent_bit_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TRANSCRIPTD_FLUENT_BIT") {
        return Some(PathBuf::from(p));
    }
    let peer = std::env::var_os("TRANSCRIPTD_PEER_DIR").map(PathBuf::from).unwrap_or_else(|| super::support::root().join("target/peer"));
    let p = peer.join("fluent-bit/bin/fluent-bit");
    if p.exists() {
        return Some(p);
    }
    std::env::var_os("PATH").and_then(|path| std::env::split_paths(&path).map(|d| d.join("fluent-bit")).find(|p| p.is_file()))
}

/// The binary, or `None` (after saying so) when the test is to be skipped.
fn fluent_bit_or_skip() -> Option<PathBuf> {
    let bin = fluent_bit_bin();
    if bin.is_none() {
        let why = "no Fluent Bit binary ($TRANSCRIPTD_FLUENT_BIT, $TRANSCRIPTD_PEER_DIR/fluent-bit/bin/fluent-bit or fluent-bit on PATH)";
        assert!(std::env::var_os("TRANSCRIPTD_REQUIRE_COLLECTORS").is_none(), "{why}");
        eprintln!("skipped: {why}");
    }
    bin
}

/// The Fluent Bit configuration README shows (the `ini` block after "**Fluent Bit**, `http`
/// input"), listening on loopback `port`, writing every record to `<out>/records.jsonl`, and
/// keeping its chunks in `storage`.
pub fn fluent_bit_conf(port: u16, out: &Path, storage: &Path) -> String {
    let readme = std::fs::read_to_string(super::support::root().join("README.md")).unwrap();
    let from = readme.find("**Fluent Bit**, `http` input").expect("README shows the Fluent Bit http input");
    let block: Vec<&str> = readme[from..].lines().skip_while(|l| l.trim() != "```ini").skip(1).take_while(|l| l.trim() != "```").collect();
    let conf: String = block.iter().map(|l| format!("{}\n", l.strip_prefix("  ").unwrap_or(l))).collect();
    for (what, at) in [("    Port              9880\n", "port"), ("/var/lib/fluent-bit/storage\n", "storage.path"), ("/var/log/fluent-bit\n", "Path")] {
        assert_eq!(conf.matches(what).count(), 1, "README's Fluent Bit config has its {at} as the test expects:\n{conf}");
    }
    conf.replace("    Port              9880\n", &format!("    Port              {port}\n"))
        .replace("/var/lib/fluent-bit/storage\n", &format!("{}\n", storage.display()))
        .replace("/var/log/fluent-bit\n", &format!("{}\n", out.display()))
}

/// A Fluent Bit process and its directory.
struct FluentBit {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl FluentBit {
    fn start(bin: &Path, dir: &Path, port: u16) -> FluentBit {
        std::fs::create_dir_all(dir.join("out")).unwrap();
        std::fs::write(dir.join("fluent-bit.conf"), fluent_bit_conf(port, &dir.join("out"), &dir.join("storage"))).unwrap();
        let mut f = FluentBit { bin: bin.to_owned(), dir: dir.to_owned(), port, child: None };
        f.restart();
        f
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("fluent-bit.log")).unwrap_or_default()
    }

    /// Starts the process (again) and waits until it takes connections.
    fn restart(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("fluent-bit.log")).unwrap();
        let child = Command::new(&self.bin)
            .arg("-c")
            .arg(self.dir.join("fluent-bit.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", self.bin.display()));
        self.child = Some(child);
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.port));
        let mut exited = None;
        let up = wait(Duration::from_secs(20), || {
            exited = self.child.as_mut().and_then(|c| c.try_wait().unwrap());
            exited.is_some() || std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        });
        assert!(up && exited.is_none(), "Fluent Bit did not listen on {} ({exited:?}): {}", self.port, self.log());
    }

    /// `kill -9`, and reap.
    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The records its `file` output wrote.
    fn records(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.dir.join("out/records.jsonl")).unwrap_or_default();
        // A line is written whole by the output; one cut short is a test failure (shown by the
        // comparison), not skipped.
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("Fluent Bit wrote `{l}`: {e}"))).collect()
    }
}

impl Drop for FluentBit {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Records as a multiset of their JSON texts.
fn multiset(records: &[Value]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for r in records {
        *m.entry(r.to_string()).or_default() += 1;
    }
    m
}

/// What one multiset has more of than the other: (missing from `got`, extra in `got`).
fn difference(want: &BTreeMap<String, usize>, got: &BTreeMap<String, usize>) -> (Vec<String>, Vec<String>) {
    let missing = want.iter().filter(|(k, n)| got.get(*k).copied().unwrap_or(0) < **n).map(|(k, _)| k.clone()).collect();
    let extra = got.iter().filter(|(k, n)| want.get(*k).copied().unwrap_or(0) < **n).map(|(k, n)| format!("{n}x {k}")).collect();
    (missing, extra)
}

/// The `http` sink to Fluent Bit on `port`: small batches, quick retries (the path is the tag).
fn sink(port: u16) -> String {
    format!(
        "[[sinks]]\ntype = \"http\"\nurl = \"http://127.0.0.1:{port}/transcriptd\"\nmax_records = 7\nmax_delay = \"20ms\"\nretry_initial = \"50ms\"\nretry_max = \"400ms\"\ntimeout = \"5s\"\n"
    )
}

/// Lays down `files` under the daemon's watch directory as `<prefix><i>.jsonl`, and appends the
/// last of them again to one more file in 5 pieces (lines torn, then completed).
fn write_transcripts(d: &Daemon, files: &[PathBuf], prefix: &str) {
    for (i, f) in files.iter().enumerate() {
        std::fs::copy(f, d.watch_dir().join(format!("{prefix}{i}.jsonl"))).unwrap();
    }
    if let Some(last) = files.last() {
        append_in_pieces(&d.watch_dir().join(format!("{prefix}live.jsonl")), &std::fs::read(last).unwrap(), 5, Duration::from_millis(150));
    }
}

/// Waits until Fluent Bit holds as many records as the daemon's stdout, once the daemon's own
/// fold equals `check`; then both must be the same multiset, and fold to `check`'s findings.
fn assert_delivered_once(d: &Daemon, fb: &FluentBit) {
    let want_findings = check_dir(&d.watch_dir());
    assert!(want_findings.len() > 10, "{want_findings:?}");
    assert!(wait(Duration::from_secs(30), || fold(&d.records()) == want_findings), "the daemon's stdout vs check\n{}", d.log());
    let want = multiset(&d.records());
    let mut got = BTreeMap::new();
    let arrived = wait(Duration::from_secs(30), || {
        got = multiset(&fb.records());
        got.values().sum::<usize>() >= want.values().sum::<usize>()
    });
    // Anything still on its way would show as missing; anything sent twice as extra.
    std::thread::sleep(Duration::from_millis(500));
    got = multiset(&fb.records());
    let (missing, extra) = difference(&want, &got);
    assert!(
        arrived && missing.is_empty() && extra.is_empty(),
        "Fluent Bit's records vs the daemon's: {} missing, {} extra\nmissing: {missing:#?}\nextra: {extra:#?}\ndaemon: {}\nfluent-bit: {}",
        missing.len(),
        extra.len(),
        d.log(),
        fb.log()
    );
    assert_eq!(fold(&fb.records()), want_findings, "Fluent Bit's records fold to check's findings");
    eprintln!("Fluent Bit wrote the daemon's {} records, each once ({} findings hold)", want.values().sum::<usize>(), want_findings.len());
}

#[test]
fn fluent_bit_receives_every_record_once() {
    let Some(bin) = fluent_bit_or_skip() else { return };
    let port = free_port();
    let d = Daemon::new("", &sink(port));
    let fb = FluentBit::start(&bin, &d.root.path().join("fluent-bit"), port);
    write_transcripts(&d, &jsonl_files(&data("check")), "c");
    assert_delivered_once(&d, &fb);
    assert!(!d.log().contains("batch not accepted"), "Fluent Bit refused a batch:\n{}\n{}", d.log(), fb.log());
}

#[test]
fn fluent_bit_killed_for_a_while_then_back_misses_nothing_and_gets_nothing_twice() {
    let Some(bin) = fluent_bit_or_skip() else { return };
    let files = jsonl_files(&data("check"));
    let (first, second) = files.split_at(files.len() / 2);
    let port = free_port();
    let d = Daemon::new("", &sink(port));
    let mut fb = FluentBit::start(&bin, &d.root.path().join("fluent-bit"), port);
    write_transcripts(&d, first, "a");
    assert_delivered_once(&d, &fb);

    // Down (kill -9 while idle: everything it answered for is in its output): what is written
    // now waits in the daemon's spool, tried again and again with backoff.
    fb.kill9();
    let before = d.log().matches("batch not accepted").count();
    let delivered = fb.records().len();
    write_transcripts(&d, second, "b");
    assert!(wait(Duration::from_secs(20), || d.log().matches("batch not accepted").count() >= before + 3), "no retries:\n{}", d.log());
    // Held down past a few doublings of the backoff (50 ms up to 400 ms).
    std::thread::sleep(Duration::from_secs(2));
    let spooled: u64 = std::fs::read_dir(d.state_dir())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("http-"))
        .flat_map(|e| std::fs::read_dir(e.path()).unwrap().filter_map(Result::ok))
        .filter(|e| e.file_name().to_string_lossy().starts_with("spool-"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(spooled > 0, "the undelivered records are in the spool");
    assert_eq!(fb.records().len(), delivered);

    // Back: every record arrives, none twice.
    fb.restart();
    assert_delivered_once(&d, &fb);
}

#[test]
fn fluent_bit_killed_mid_stream_with_filesystem_storage_loses_nothing() {
    let Some(bin) = fluent_bit_or_skip() else { return };
    let port = free_port();
    let d = Daemon::new("", &sink(port));
    let mut fb = FluentBit::start(&bin, &d.root.path().join("fluent-bit"), port);
    let corpus = d.root.path().join("corpus");
    let gen = Command::new("python3")
        .arg(super::support::root().join("benches/gen_transcripts.py"))
        .args(["--lines", "6000", "--sessions", "12", "--faults", "0.05", "--seed", "16", "--out-dir", corpus.to_str().unwrap()])
        .status()
        .expect("python3 runs the generator");
    assert!(gen.success());
    let files = jsonl_files(&corpus);
    assert_eq!(files.len(), 12);
    // A writer appends the sessions, each in 10 pieces, while Fluent Bit is killed (`kill -9`)
    // and started again, four times, in the middle of the stream.
    let watch = d.watch_dir();
    let writer = std::thread::spawn(move || {
        for (i, f) in files.iter().enumerate() {
            append_in_pieces(&watch.join(format!("s{i}.jsonl")), &std::fs::read(f).unwrap(), 10, Duration::from_millis(25));
        }
    });
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(400));
        fb.kill9();
        std::thread::sleep(Duration::from_millis(300));
        fb.restart();
    }
    writer.join().unwrap();
    let want_findings = check_dir(&d.watch_dir());
    assert!(wait(Duration::from_secs(30), || fold(&d.records()) == want_findings), "the daemon's stdout vs check\n{}", d.log());
    let want = multiset(&d.records());
    let mut missing = Vec::new();
    let mut extra = Vec::new();
    let complete = wait(Duration::from_secs(30), || {
        (missing, extra) = difference(&want, &multiset(&fb.records()));
        missing.is_empty()
    });
    assert!(complete, "Fluent Bit lost {} of {} records: {missing:#?}\ndaemon: {}\nfluent-bit: {}", missing.len(), want.len(), d.log(), fb.log());
    // A record may come twice (what Fluent Bit wrote before it was killed and had not yet
    // cleared from its storage, or a batch it took and died before answering), never a record
    // the daemon did not send.
    assert!(extra.iter().all(|e| want.contains_key(e.split_once("x ").unwrap().1)), "{extra:#?}");
    eprintln!(
        "{} records, all delivered; {} sent twice (at-least-once across a Fluent Bit kill -9); {} batches refused while it was down",
        want.values().sum::<usize>(),
        extra.len(),
        d.log().matches("batch not accepted").count()
    );
}
