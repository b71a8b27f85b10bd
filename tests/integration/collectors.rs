//! The `http` sink against the real collectors users run: Fluent Bit's `http` input with a
//! `file` output (`Format plain`: one JSON object per line), and Vector's `http_server` source
//! with a `file` sink (`encoding.codec = "json"`). The daemon posts to it; a writer lays down
//! transcripts with known faults (`tests/data/check`) and one more file appended in pieces (torn
//! lines completed later: retractions too); the records the collector writes must be the
//! daemon's records (its stdout sink; for Vector, less the fields its source adds), every one
//! once, and fold to what `check` finds. Then the collector is killed (`kill -9`, while idle)
//! for a while: the records written meanwhile wait in the sink's spool, tried again with
//! backoff; once it is back, every record arrives, none twice. Then it is killed four times in
//! the middle of a stream: every record arrives (some may come twice). For Vector also: while
//! its sink cannot write it answers 500 and the batches come again; and docs/deploy.md's `dedupe`
//! transform drops a batch POSTed again with its `X-Transcriptd-Batch`, and nothing else.
//!
//! Neither is in the package registries CI reaches, so `.ci/run` cannot install them. A test
//! takes the binary from `$TRANSCRIPTD_FLUENT_BIT` / `$TRANSCRIPTD_VECTOR`, else
//! `$TRANSCRIPTD_PEER_DIR/fluent-bit/bin/fluent-bit` / `.../vector/bin/vector` (`target/peer`
//! by default), else `fluent-bit` / `vector` on `PATH`. Without one it says so and passes,
//! unless `TRANSCRIPTD_REQUIRE_COLLECTORS` is set, where a missing binary fails. Each collector
//! runs with the configuration docs/deploy.md shows ("Pushed over HTTP"), read from there.
//!
//! The Fluent Bit these tests were run with: v5.1.1 from its source tag, built with the
//! Debian packages `cmake flex bison libssl-dev libyaml-dev libsqlite3-dev` and
//! `cmake -DCMAKE_BUILD_TYPE=Release -DFLB_MINIMAL=On -DFLB_IN_HTTP=On
//! -DFLB_IN_STORAGE_BACKLOG=On -DFLB_OUT_FILE=On -DFLB_OUT_STDOUT=On -DFLB_FILTER_GREP=On
//! -DFLB_HTTP_SERVER=On -DFLB_TLS=On -DFLB_SQLDB=On -DFLB_PREFER_SYSTEM_LIB_SQLITE=On
//! -DFLB_UNICODE_ENCODER=Off -DFLB_USE_SIMDUTF=Off -DFLB_EXAMPLES=Off -DFLB_SHARED_LIB=Off
//! -DFLB_LUAJIT=Off -DFLB_WASM=Off -DFLB_KAFKA=Off -DFLB_ZIG=Off -DFLB_PROXY_GO=Off
//! -DFLB_BACKTRACE=Off -DFLB_STREAM_PROCESSOR=Off -DFLB_CHUNK_TRACE=Off -DFLB_AVRO_ENCODER=Off
//! -DFLB_JEMALLOC=Off` then `make fluent-bit-bin` (about 30 minutes of two busy cores), copied
//! to `target/peer/fluent-bit/bin/fluent-bit`.
//!
//! The Vector: 0.58.0 (`vector --version`) from a snapshot of `vectordotdev/vector` at commit
//! `c3445d42d2799eb9afe102b71cba7ae96a80942b` (2026-08-21), with Rust 1.95.0, `protoc` (Debian's
//! `protobuf-compiler`) and no access to GitHub. Its git dependencies came from snapshots of
//! their repositories, cloned by Cargo from local paths: in its `Cargo.toml` the
//! `[patch.crates-io] ntapi` entry (a git revision, for Windows only) is removed, and
//!
//! ```toml
//! [patch."https://github.com/vectordotdev/vrl.git"]
//! vrl = { git = "file:///work/.mirror/vectordotdev+vrl/repo", rev = "ca05c29ab61f5288e858b32089add9a4cb13718c" }
//! [patch."https://github.com/tokio-rs/tracing"]
//! tracing-tower = { git = "file:///work/.mirror/tokio-rs+tracing/repo", rev = "e0642d949891546a3bb7e47080365ee7274f05cd" }
//! [patch."https://github.com/vectordotdev/heim.git"]
//! heim = { git = "file:///work/.mirror/vectordotdev+heim/repo", rev = "5ca0d3be3a8246812173f339d287a0f99bbdbe64" }
//! ```
//!
//! added: vrl and tracing at the very commits its `Cargo.lock` names; heim at the head of the
//! `vectordotdev/heim` default branch, as the lock's `b62e0420` (branch `update-deps`) is not in
//! the snapshot (with these features heim only measures disks for the disk buffer's size check;
//! Cargo then locks heim's older dependencies, nix 0.20 and smol 1.3, beside the others). They
//! are git sources, not `path = ...` ones: a path dependency is built with its own
//! `#![deny(warnings)]`, which fails tracing-core on Rust 1.95; a git one gets `--cap-lints`.
//! Then, with Cargo re-locking only what the patches change:
//! `RUSTUP_TOOLCHAIN=1.95.0 CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16
//! nice -n 19 cargo build --release --no-default-features --features
//! sources-http_server,sinks-file,sinks-console,transforms-dedupe,transforms-remap` (its release
//! profile's fat LTO and single codegen unit turned off to save time; about 40 minutes of two
//! busy cores), `target/release/vector` copied to `target/peer/vector/bin/vector`.

use super::support::harness::{append_in_pieces, check_dir, fold, wait, Daemon};
use super::support::receiver::free_port;
use super::support::{data, jsonl_files};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A collector's binary, if one is installed: `$<env>`, else `$TRANSCRIPTD_PEER_DIR/<rel>`
/// (`target/peer` by default), else `<name>` on `PATH`. `None` (after saying so) when the
/// test is to be skipped; a missing binary fails when `TRANSCRIPTD_REQUIRE_COLLECTORS` is set.
fn collector_or_skip(env: &str, rel: &str, name: &str) -> Option<PathBuf> {
    let peer = std::env::var_os("TRANSCRIPTD_PEER_DIR").map(PathBuf::from).unwrap_or_else(|| super::support::root().join("target/peer"));
    let bin = std::env::var_os(env)
        .map(PathBuf::from)
        .or_else(|| Some(peer.join(rel)).filter(|p| p.exists()))
        .or_else(|| std::env::var_os("PATH").and_then(|path| std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())));
    if bin.is_none() {
        let why = format!("no {name} binary (${env}, $TRANSCRIPTD_PEER_DIR/{rel} or {name} on PATH)");
        assert!(std::env::var_os("TRANSCRIPTD_REQUIRE_COLLECTORS").is_none(), "{why}");
        eprintln!("skipped: {why}");
    }
    bin
}

fn fluent_bit_or_skip() -> Option<PathBuf> {
    collector_or_skip("TRANSCRIPTD_FLUENT_BIT", "fluent-bit/bin/fluent-bit", "fluent-bit")
}

fn vector_or_skip() -> Option<PathBuf> {
    collector_or_skip("TRANSCRIPTD_VECTOR", "vector/bin/vector", "vector")
}

/// The first fenced block of docs/deploy.md (with the given opening fence) after `anchor`, unindented.
fn readme_block(anchor: &str, fence: &str) -> String {
    let readme = std::fs::read_to_string(super::support::root().join("docs/deploy.md")).unwrap();
    let from = readme.find(anchor).unwrap_or_else(|| panic!("docs/deploy.md shows {anchor}"));
    let block: Vec<&str> = readme[from..].lines().skip_while(|l| l.trim() != fence).skip(1).take_while(|l| l.trim() != "```").collect();
    block.iter().map(|l| format!("{}\n", l.strip_prefix("  ").unwrap_or(l))).collect()
}

/// `conf` with each `(what, with)` replaced, each `what` found exactly once.
fn substitute(name: &str, conf: &str, edits: &[(&str, String)]) -> String {
    edits.iter().fold(conf.to_owned(), |conf, (what, with)| {
        assert_eq!(conf.matches(what).count(), 1, "docs/deploy.md's {name} config has `{what}` once, as the test expects:\n{conf}");
        conf.replace(what, with)
    })
}

/// The Fluent Bit configuration docs/deploy.md shows (the `ini` block after "**Fluent Bit**, `http`
/// input"), listening on loopback `port`, writing every record to `<out>/records.jsonl`, and
/// keeping its chunks in `storage`.
pub fn fluent_bit_conf(port: u16, out: &Path, storage: &Path) -> String {
    let conf = readme_block("**Fluent Bit**, `http` input", "```ini");
    substitute(
        "Fluent Bit",
        &conf,
        &[
            ("    Port              9880\n", format!("    Port              {port}\n")),
            ("/var/lib/fluent-bit/storage\n", format!("{}\n", storage.display())),
            ("/var/log/fluent-bit\n", format!("{}\n", out.display())),
        ],
    )
}

/// The Vector configuration docs/deploy.md shows (the `toml` block after "**Vector**, `http_server`
/// source"), listening on loopback `port` and writing every event to `<out>/records.jsonl`;
/// with `dedupe`, docs/deploy.md's `dedupe` transform (the next `toml` block) in front of the sink.
pub fn vector_conf(port: u16, out: &Path, dedupe: bool) -> String {
    let conf = readme_block("**Vector**, `http_server` source", "```toml");
    let mut edits = vec![
        ("\"0.0.0.0:8686\"", format!("\"127.0.0.1:{port}\"")),
        ("\"/var/log/vector/records.jsonl\"", format!("{:?}", out.join("records.jsonl").display().to_string())),
    ];
    if !dedupe {
        return substitute("Vector", &conf, &edits);
    }
    edits.push(("inputs = [\"transcriptd\"]", "inputs = [\"transcriptd_once\"]".to_owned()));
    substitute("Vector", &conf, &edits) + &readme_block("To drop a batch sent again after a lost answer", "```toml")
}

/// A collector process (Fluent Bit, Vector) and its directory: its log is `<dir>/log`, and it
/// writes the records it takes to `<dir>/out/records.jsonl`, one JSON object a line.
struct Collector {
    name: &'static str,
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    args: Vec<String>,
    /// Fields it adds to each record (taken off before comparing with the daemon's records).
    added: &'static [&'static str],
    child: Option<Child>,
}

impl Collector {
    /// Fluent Bit with docs/deploy.md's configuration.
    fn fluent_bit(bin: &Path, dir: &Path, port: u16) -> Collector {
        std::fs::create_dir_all(dir.join("out")).unwrap();
        let conf = dir.join("fluent-bit.conf");
        std::fs::write(&conf, fluent_bit_conf(port, &dir.join("out"), &dir.join("storage"))).unwrap();
        Collector::start("Fluent Bit", bin, dir, port, vec!["-c".into(), conf.display().to_string()], &[])
    }

    /// Vector with docs/deploy.md's configuration (and its `dedupe` transform, with `dedupe`).
    fn vector(bin: &Path, dir: &Path, port: u16, dedupe: bool) -> Collector {
        std::fs::create_dir_all(dir.join("out")).unwrap();
        let conf = dir.join("vector.toml");
        std::fs::write(&conf, vector_conf(port, &dir.join("out"), dedupe)).unwrap();
        Collector::start("Vector", bin, dir, port, vec!["--config".into(), conf.display().to_string()], VECTOR_ADDED)
    }

    fn start(name: &'static str, bin: &Path, dir: &Path, port: u16, args: Vec<String>, added: &'static [&'static str]) -> Collector {
        let mut c = Collector { name, bin: bin.to_owned(), dir: dir.to_owned(), port, args, added, child: None };
        c.restart();
        c
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// Starts the process (again) and waits until it takes connections.
    fn restart(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("log")).unwrap();
        let child = Command::new(&self.bin)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", self.bin.display()));
        self.child = Some(child);
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.port));
        let mut exited = None;
        let up = wait(Duration::from_secs(60), || {
            exited = self.child.as_mut().and_then(|c| c.try_wait().unwrap());
            exited.is_some() || std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        });
        assert!(up && exited.is_none(), "{} did not listen on {} ({exited:?}): {}", self.name, self.port, self.log());
    }

    /// `kill -9`, and reap.
    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The records its output wrote, as it wrote them.
    fn written(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.dir.join("out/records.jsonl")).unwrap_or_default();
        // A line is written whole by the output; one cut short is a test failure (shown by the
        // comparison), not skipped.
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{} wrote `{l}`: {e}", self.name))).collect()
    }

    /// The records its output wrote, without the fields it adds.
    fn records(&self) -> Vec<Value> {
        let mut records = self.written();
        for r in &mut records {
            let what = r.to_string();
            let o = r.as_object_mut().unwrap_or_else(|| panic!("{} wrote {what}", self.name));
            for f in self.added {
                o.shift_remove(*f);
            }
        }
        records
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// What Vector's `http_server` source adds to each event (the log schema's `timestamp` and
/// `source_type`, its `path_key`, the header asked for), when the record has no such field.
const VECTOR_ADDED: &[&str] = &["timestamp", "source_type", "path", "X-Transcriptd-Batch"];

/// A record's JSON text with the keys of every object sorted (collectors keep fields, not
/// their order).
fn canonical(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(o) => {
                let mut keys: Vec<&String> = o.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&o[k]))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            v => v.clone(),
        }
    }
    sorted(v).to_string()
}

/// Records as a multiset of their JSON texts.
fn multiset(records: &[Value]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for r in records {
        *m.entry(canonical(r)).or_default() += 1;
    }
    m
}

/// What one multiset has more of than the other: (missing from `got`, extra in `got`).
fn difference(want: &BTreeMap<String, usize>, got: &BTreeMap<String, usize>) -> (Vec<String>, Vec<String>) {
    let missing = want.iter().filter(|(k, n)| got.get(*k).copied().unwrap_or(0) < **n).map(|(k, _)| k.clone()).collect();
    let extra = got.iter().filter(|(k, n)| want.get(*k).copied().unwrap_or(0) < **n).map(|(k, n)| format!("{n}x {k}")).collect();
    (missing, extra)
}

/// The `http` sink to `url`: small batches, quick retries.
fn sink(url: &str) -> String {
    format!("[[sinks]]\ntype = \"http\"\nurl = \"{url}\"\nmax_records = 7\nmax_delay = \"20ms\"\nretry_initial = \"50ms\"\nretry_max = \"400ms\"\ntimeout = \"5s\"\n")
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

/// Waits until the collector holds as many records as the daemon's stdout, once the daemon's
/// own fold equals `check`; then both must be the same multiset, and fold to `check`'s findings.
fn assert_delivered_once(d: &Daemon, c: &Collector) {
    let want_findings = check_dir(&d.watch_dir());
    assert!(want_findings.len() > 10, "{want_findings:?}");
    assert!(wait(Duration::from_secs(30), || fold(&d.records()) == want_findings), "the daemon's stdout vs check\n{}", d.log());
    let want = multiset(&d.records());
    let mut got = BTreeMap::new();
    let arrived = wait(Duration::from_secs(30), || {
        got = multiset(&c.records());
        got.values().sum::<usize>() >= want.values().sum::<usize>()
    });
    // Anything still on its way would show as missing; anything sent twice as extra.
    std::thread::sleep(Duration::from_millis(500));
    got = multiset(&c.records());
    let (missing, extra) = difference(&want, &got);
    assert!(
        arrived && missing.is_empty() && extra.is_empty(),
        "{}'s records vs the daemon's: {} missing, {} extra\nmissing: {missing:#?}\nextra: {extra:#?}\ndaemon: {}\n{}: {}",
        c.name,
        missing.len(),
        extra.len(),
        d.log(),
        c.name,
        c.log()
    );
    assert_eq!(fold(&c.records()), want_findings, "{}'s records fold to check's findings", c.name);
    eprintln!("{} wrote the daemon's {} records, each once ({} findings hold)", c.name, want.values().sum::<usize>(), want_findings.len());
}

/// How to start a collector: its binary, its directory, its port.
type Start = fn(&Path, &Path, u16) -> Collector;

/// The daemon sends every record to the collector, once, field for field.
fn receives_every_record_once(path: &str, start: Start, bin: &Path) -> (Daemon, Collector) {
    let port = free_port();
    let d = Daemon::new("", &sink(&format!("http://127.0.0.1:{port}{path}")));
    let c = start(bin, &d.root.path().join("collector"), port);
    write_transcripts(&d, &jsonl_files(&data("check")), "c");
    assert_delivered_once(&d, &c);
    assert!(!d.log().contains("batch not accepted"), "{} refused a batch:\n{}\n{}", c.name, d.log(), c.log());
    (d, c)
}

/// The collector is killed (`kill -9`, while idle) for a while, and started again: nothing lost,
/// nothing twice.
fn killed_for_a_while_then_back(path: &str, start: Start, bin: &Path) {
    let files = jsonl_files(&data("check"));
    let (first, second) = files.split_at(files.len() / 2);
    let port = free_port();
    let d = Daemon::new("", &sink(&format!("http://127.0.0.1:{port}{path}")));
    let mut c = start(bin, &d.root.path().join("collector"), port);
    write_transcripts(&d, first, "a");
    assert_delivered_once(&d, &c);

    // Down (kill -9 while idle: everything it answered for is in its output): what is written
    // now waits in the daemon's spool, tried again and again with backoff.
    c.kill9();
    let before = d.log().matches("batch not accepted").count();
    let delivered = c.records().len();
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
    assert_eq!(c.records().len(), delivered);

    // Back: every record arrives, none twice.
    c.restart();
    assert_delivered_once(&d, &c);
}

/// The collector is killed (`kill -9`) and started again four times in the middle of a stream:
/// every record arrives; a record may arrive twice, never one the daemon did not send. Returns
/// how many came twice.
fn killed_mid_stream_loses_nothing(path: &str, start: Start, bin: &Path) -> usize {
    let port = free_port();
    let d = Daemon::new("", &sink(&format!("http://127.0.0.1:{port}{path}")));
    let mut c = start(bin, &d.root.path().join("collector"), port);
    let corpus = d.root.path().join("corpus");
    let gen = Command::new("python3")
        .arg(super::support::generator("gen_transcripts.py"))
        .args(["--lines", "6000", "--sessions", "12", "--faults", "0.05", "--seed", "16", "--out-dir", corpus.to_str().unwrap()])
        .status()
        .expect("python3 runs the generator");
    assert!(gen.success());
    let files = jsonl_files(&corpus);
    assert_eq!(files.len(), 12);
    // A writer appends the sessions, each in 10 pieces, while the collector is killed
    // (`kill -9`) and started again, four times, in the middle of the stream.
    let watch = d.watch_dir();
    let writer = std::thread::spawn(move || {
        for (i, f) in files.iter().enumerate() {
            append_in_pieces(&watch.join(format!("s{i}.jsonl")), &std::fs::read(f).unwrap(), 10, Duration::from_millis(25));
        }
    });
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(400));
        c.kill9();
        std::thread::sleep(Duration::from_millis(300));
        c.restart();
    }
    writer.join().unwrap();
    let want_findings = check_dir(&d.watch_dir());
    assert!(wait(Duration::from_secs(30), || fold(&d.records()) == want_findings), "the daemon's stdout vs check\n{}", d.log());
    let want = multiset(&d.records());
    let mut missing = Vec::new();
    let mut extra = Vec::new();
    let complete = wait(Duration::from_secs(30), || {
        (missing, extra) = difference(&want, &multiset(&c.records()));
        missing.is_empty()
    });
    assert!(complete, "{} lost {} of {} records: {missing:#?}\ndaemon: {}\n{}: {}", c.name, missing.len(), want.len(), d.log(), c.name, c.log());
    // A record may come twice (what the collector wrote before it was killed and had not yet
    // cleared from its storage, or a batch it took and died before answering), never a record
    // the daemon did not send.
    assert!(extra.iter().all(|e| want.contains_key(e.split_once("x ").unwrap().1)), "{extra:#?}");
    eprintln!(
        "{} records, all delivered to {}; {} sent twice (at-least-once across a kill -9); {} batches refused while it was down",
        want.values().sum::<usize>(),
        c.name,
        extra.len(),
        d.log().matches("batch not accepted").count()
    );
    extra.len()
}

fn fluent_bit(bin: &Path, dir: &Path, port: u16) -> Collector {
    Collector::fluent_bit(bin, dir, port)
}

fn vector(bin: &Path, dir: &Path, port: u16) -> Collector {
    Collector::vector(bin, dir, port, false)
}

fn vector_dedupe(bin: &Path, dir: &Path, port: u16) -> Collector {
    Collector::vector(bin, dir, port, true)
}

// Fluent Bit: the URL's path is the tag.

#[test]
fn fluent_bit_receives_every_record_once() {
    let Some(bin) = fluent_bit_or_skip() else { return };
    receives_every_record_once("/transcriptd", fluent_bit, &bin);
}

#[test]
fn fluent_bit_killed_for_a_while_then_back_misses_nothing_and_gets_nothing_twice() {
    let Some(bin) = fluent_bit_or_skip() else { return };
    killed_for_a_while_then_back("/transcriptd", fluent_bit, &bin);
}

#[test]
fn fluent_bit_killed_mid_stream_with_filesystem_storage_loses_nothing() {
    let Some(bin) = fluent_bit_or_skip() else { return };
    killed_mid_stream_loses_nothing("/transcriptd", fluent_bit, &bin);
}

// Vector: the source takes the path `/` only.

#[test]
fn vector_receives_every_record_once() {
    let Some(bin) = vector_or_skip() else { return };
    let (_d, c) = receives_every_record_once("/", vector, &bin);
    // What the source added to each record: its own fields, and the batch id.
    for r in c.written() {
        assert_eq!((&r["source_type"], &r["path"]), (&Value::from("http_server"), &Value::from("/")), "{r}");
        let id = r["X-Transcriptd-Batch"].as_str().unwrap_or_else(|| panic!("no batch id: {r}"));
        assert!(id.split_once(':').is_some_and(|(g, o)| g.parse::<u64>().is_ok() && o.parse::<u64>().is_ok()), "{r}");
    }
}

#[test]
fn vector_killed_for_a_while_then_back_misses_nothing_and_gets_nothing_twice() {
    let Some(bin) = vector_or_skip() else { return };
    killed_for_a_while_then_back("/", vector, &bin);
}

#[test]
fn vector_answers_500_while_its_sink_cannot_write_and_the_batch_comes_again() {
    let Some(bin) = vector_or_skip() else { return };
    let port = free_port();
    let d = Daemon::new("", &sink(&format!("http://127.0.0.1:{port}/")));
    let dir = d.root.path().join("collector");
    // The output path is a directory: the file sink cannot open it, so (with acknowledgements)
    // the source answers 500 to every POST.
    std::fs::create_dir_all(dir.join("out/records.jsonl")).unwrap();
    let c = vector(&bin, &dir, port);
    write_transcripts(&d, &jsonl_files(&data("check")), "c");
    assert!(wait(Duration::from_secs(20), || d.log().matches("answered 500 Internal Server Error").count() >= 3), "no 500 answers:\n{}\n{}", d.log(), c.log());
    assert!(c.log().contains("Unable to open the file"), "{}", c.log());
    // Made right: the batches it refused come again, and each record arrives once.
    std::fs::remove_dir(dir.join("out/records.jsonl")).unwrap();
    assert_delivered_once(&d, &c);
}

#[test]
fn vector_killed_mid_stream_with_acknowledgements_loses_nothing() {
    let Some(bin) = vector_or_skip() else { return };
    killed_mid_stream_loses_nothing("/", vector, &bin);
}

/// POSTs `body` to loopback `port` at `/` with `X-Transcriptd-Batch: id`, as the sink does:
/// the answer's status.
fn post_batch(port: u16, id: &str, body: &str) -> u16 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nX-Transcriptd-Batch: {id}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("answer: {answer}"))
}

#[test]
fn vector_dedupe_drops_a_batch_sent_again_and_nothing_else() {
    let Some(bin) = vector_or_skip() else { return };
    // Through docs/deploy.md's `dedupe`: every record still arrives, once (none taken for a copy).
    let (_d, c) = receives_every_record_once("/", vector_dedupe, &bin);
    // The largest batch again, as the sink sends it again after a lost answer: the same
    // records, the same id.
    let (written, records) = (c.written(), c.records());
    let mut batches: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for (r, w) in records.iter().zip(&written) {
        batches.entry(w["X-Transcriptd-Batch"].as_str().unwrap()).or_default().push(r);
    }
    let (id, batch) = batches.into_iter().max_by_key(|(_, b)| b.len()).unwrap();
    let id = id.to_owned();
    assert!(batch.len() > 1, "{batch:?}");
    let body: String = batch.iter().map(|r| format!("{r}\n")).collect();
    assert_eq!(post_batch(c.port, &id, &body), 200, "{}", c.log());
    // The same records under another id are another batch: they pass. Once they are written,
    // whatever the copy above let through would be too (one source, one sink, in order).
    assert_eq!(post_batch(c.port, "999:0", &body), 200, "{}", c.log());
    assert!(wait(Duration::from_secs(20), || c.written().len() >= written.len() + batch.len()), "{}", c.log());
    std::thread::sleep(Duration::from_millis(500));
    let now = c.written();
    let again: Vec<&Value> = now[written.len()..].iter().collect();
    assert_eq!(again.len(), batch.len(), "the copy was dropped, the other batch was not: {again:#?}");
    assert!(again.iter().all(|r| r["X-Transcriptd-Batch"] == "999:0"), "{again:#?}");
    eprintln!("Vector's dedupe dropped the {} records of batch {id} sent again, and kept them under another id", batch.len());
}
