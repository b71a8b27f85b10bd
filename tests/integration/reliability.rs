//! The reliability suite: exactly-once under `kill -9`, and a rotation model.
//!
//! - **kill -9 harness**: writers append generated transcripts (faults, compactions, torn last
//!   lines) in pieces cut at random bytes while the daemon is killed with SIGKILL at random
//!   moments and restarted, many times; then the stdout file and the file sink (rotated) must
//!   hold every finding and compaction of the final files exactly once: 0 lost, 0 duplicated,
//!   0 spurious.
//! - **rotation model**: random appends, rename-rotations, copytruncates, truncations, in-place
//!   rewrites, deletions, recreations, renames and inode reuse, each round applied while the
//!   daemon is stopped (so that it sees them all at once, the hardest case), sometimes with a
//!   `kill -9` and restart; after each round the folded records equal `check` on what the files
//!   hold.
//!
//! CI runs a bounded version. `benches/reliability.sh` runs the full one (sizes by environment:
//! `TRANSCRIPTD_KILLS`, `TRANSCRIPTD_ROUNDS`, `TRANSCRIPTD_SEED`); each test prints its figures.

use super::support::harness::{check_dir, compactions_in, fold_records, read_records, wait, Daemon, Key, Opts};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// xorshift64*: reproducible from the printed seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

fn seed() -> u64 {
    env_or("TRANSCRIPTD_SEED", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64)
}

/// Records of a rotated file sink, oldest first.
fn file_sink_records(path: &Path) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for k in (1..=1000).rev() {
        let p = PathBuf::from(format!("{}.{k}", path.display()));
        if p.exists() {
            out.extend(read_records(&p));
        }
    }
    out.extend(read_records(path));
    out
}

/// Lost, duplicated and spurious findings and compactions of `records` against the files.
#[derive(Debug, Default, PartialEq, Eq)]
struct Tally {
    findings: usize,
    compactions: usize,
    lost: Vec<String>,
    duplicated: Vec<String>,
    spurious: Vec<String>,
}

fn tally(records: &[serde_json::Value], want: &BTreeMap<Key, usize>, want_compactions: &BTreeSet<(String, u64)>) -> Tally {
    let f = fold_records(records);
    let got = f.findings();
    let got_c = f.compaction_set();
    let mut t = Tally { findings: got.len(), compactions: got_c.len(), ..Tally::default() };
    t.lost.extend(want.keys().filter(|k| !got.contains_key(*k)).map(|k| format!("{k:?}")));
    t.lost.extend(want_compactions.difference(&got_c).map(|k| format!("compaction {k:?}")));
    t.spurious.extend(got.keys().filter(|k| !want.contains_key(*k)).map(|k| format!("{k:?}")));
    t.spurious.extend(got_c.difference(want_compactions).map(|k| format!("compaction {k:?}")));
    t.spurious.extend(f.unknown.iter().map(|u| format!("unknown {u}")));
    t.duplicated.extend(f.duplicates().into_iter().map(|k| format!("{k:?}")));
    t.duplicated.extend(f.compactions.iter().filter(|(_, n)| **n > 1).map(|(k, n)| format!("compaction {k:?} x{n}")));
    t.duplicated.extend(f.opened.iter().filter(|(_, n)| **n > 1).map(|(k, n)| format!("file_opened {k} x{n}")));
    t
}

/// Generates sessions with faults, compactions and torn last lines, and starts writers that
/// append them into the daemon's watched directory in pieces cut at random bytes, paced over
/// roughly the time `kills` kills take.
fn start_writers(d: &Daemon, kills: u64, seed: u64) -> Vec<std::thread::JoinHandle<()>> {
    // The corpus: sessions with faults, compactions and torn last lines.
    let corpus = d.root.path().join("corpus");
    let lines = 400 + kills * 40;
    let status = std::process::Command::new("python3")
        .arg(super::support::generator("gen_transcripts.py"))
        .args(["--lines", &lines.to_string(), "--sessions", "6", "--out-dir", corpus.to_str().unwrap()])
        .args(["--faults", "0.02", "--compact-boundary", "0.2", "--truncate-last", "0.5", "--split-assistant", "--seed", &seed.to_string()])
        .status()
        .expect("python3 runs the generator");
    assert!(status.success());
    let sources = super::support::jsonl_files(&corpus);
    let w = d.watch_dir();
    // Writers pace themselves over roughly the time the kills take.
    let span = Duration::from_millis(kills * 90);
    sources
        .iter()
        .enumerate()
        .map(|(i, src)| {
            let bytes = std::fs::read(src).unwrap();
            let dest = w.join(format!("s{}", i % 3)).join(src.file_name().unwrap());
            let mut r = Rng::new(seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9));
            std::thread::spawn(move || {
                std::thread::sleep(span.mul_f64(r.below(40) as f64 / 100.0));
                std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
                let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&dest).unwrap();
                let mut at = 0;
                let pieces = (bytes.len() / 700).max(1) as u32;
                while at < bytes.len() {
                    let n = (1 + r.below(1400) as usize).min(bytes.len() - at);
                    f.write_all(&bytes[at..at + n]).unwrap();
                    at += n;
                    std::thread::sleep(span.mul_f64(0.6) / pieces);
                }
            })
        })
        .collect()
}

/// Starts and `kill -9`s the daemon `kills` times, at random moments, until the writers are done;
/// with `long`, one life in five lasts 0.4–0.9 s (long enough to deliver over HTTP on a loaded
/// machine).
fn kill_while_writing(d: &mut Daemon, rng: &mut Rng, kills: u64, writers: Vec<std::thread::JoinHandle<()>>, long: bool) {
    for i in 0..kills {
        d.spawn();
        let life = if long && i % 5 == 4 { 400 + rng.below(500) } else { 10 + rng.below(140) };
        std::thread::sleep(Duration::from_millis(life));
        d.kill9();
    }
    for wr in writers {
        wr.join().unwrap();
    }
}

/// `kill -9` at random moments while writers append torn pieces: exactly-once on the stdout
/// file and on the (rotating) file sink, compaction records included.
#[test]
fn kill_9_harness_is_exactly_once_for_the_file_sink_and_stdout_to_a_file() {
    let kills = env_or("TRANSCRIPTD_KILLS", 25);
    let seed = seed();
    let mut rng = Rng::new(seed);
    eprintln!("kill -9 harness: {kills} kills, TRANSCRIPTD_SEED={seed}");
    let mut d = Daemon::prepare(Opts::default());
    let sink = d.root.path().join("sink/records.jsonl");
    let extra = format!("[[sinks]]\ntype = \"file\"\npath = \"{}\"\nmax_bytes = \"4KiB\"\nkeep = 1000\n", sink.display());
    std::fs::write(d.config_path(), Daemon::config(d.root.path(), d.port, "", &extra)).unwrap();

    let writers = start_writers(&d, kills, seed);
    let t = Instant::now();
    kill_while_writing(&mut d, &mut rng, kills, writers, false);
    d.start();
    let w = d.watch_dir();
    let want = check_dir(&w);
    let want_c = compactions_in(&w);
    let done = |d: &Daemon| tally(&d.records(), &want, &want_c).lost.is_empty() && tally(&file_sink_records(&sink), &want, &want_c).lost.is_empty();
    wait(Duration::from_secs(30), || done(&d));
    assert_eq!(d.stop(), Some(0), "{}", d.log());
    let elapsed = t.elapsed();
    let log = d.log();
    let cuts = |what: &str| log.lines().filter(|l| l.contains(what) && l.contains("cut back")).count();
    let (stdout_cuts, sink_cuts) = (cuts("stdout cut back"), cuts("file sink cut back"));
    eprintln!("kill -9 harness: the crash window was hit: stdout cut back {stdout_cuts} times, the file sink {sink_cuts} times");
    // (The file sink reaches its file only at checkpoints, so its records after the last one are
    // mostly in memory when the kill comes: it is cut back less often, and replays the rest.)
    assert!(stdout_cuts > 0, "no kill fell between a write and the next checkpoint: the harness proved nothing");
    for (name, records) in [("stdout file", read_records(&d.out())), ("file sink", file_sink_records(&sink))] {
        let t = tally(&records, &want, &want_c);
        eprintln!(
            "kill -9 harness, {name}: {kills} kills, {} records, {} findings and {} compactions expected, {} lost, {} duplicated, {} spurious ({:.1}s)",
            records.len(),
            want.len(),
            want_c.len(),
            t.lost.len(),
            t.duplicated.len(),
            t.spurious.len(),
            elapsed.as_secs_f64()
        );
        assert!(t.lost.is_empty() && t.duplicated.is_empty() && t.spurious.is_empty(), "{name} (TRANSCRIPTD_SEED={seed}): {t:#?}");
        assert!(t.findings > 0 && t.compactions > 0, "{name}: the corpus has findings and compactions: {t:?}");
    }
    let rotated = (1..).take_while(|k| PathBuf::from(format!("{}.{k}", sink.display())).exists()).count();
    assert!(rotated > 0, "the file sink rotated");
}

/// A watched file and what it holds, as the model knows it.
#[derive(Debug, Clone)]
struct Model {
    paths: Vec<PathBuf>,
    /// Torn-line-free content pool: lines that make findings of every kind.
    pool: Vec<String>,
}

impl Model {
    fn lines(&self, rng: &mut Rng, n: u64) -> String {
        (0..n).map(|_| self.pool[rng.below(self.pool.len() as u64) as usize].clone()).collect()
    }
}

/// Chat lines: calls, results, orphan results, malformed lines, a rare long line; ids unique per
/// draw so that a rewrite differs from what it replaces.
fn pool(rng: &mut Rng) -> Vec<String> {
    let mut v = Vec::new();
    for i in 0..200 {
        let id = format!("c{}-{i}", rng.below(1 << 30));
        v.push(format!("{{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{{\"id\":\"{id}\",\"type\":\"function\",\"function\":{{\"name\":\"Read\",\"arguments\":\"{{}}\"}}}}]}}\n"));
        v.push(format!("{{\"role\":\"tool\",\"tool_call_id\":\"{id}\",\"content\":\"ok\"}}\n"));
        v.push(format!("{{\"role\":\"user\",\"content\":\"{}\"}}\n", "u".repeat(rng.below(300) as usize)));
        if i % 5 == 0 {
            v.push(format!("{{\"role\":\"tool\",\"tool_call_id\":\"stray-{id}\",\"content\":\"x\"}}\n"));
            v.push(format!("not json {id}\n"));
        }
    }
    v
}

/// One random operation on the files, described for the failure message.
fn operate(m: &Model, rng: &mut Rng, rotated: &Path) -> String {
    let p = m.paths[rng.below(m.paths.len() as u64) as usize].clone();
    let name = p.file_name().unwrap().to_string_lossy().into_owned();
    let exists = p.exists();
    let op = if exists { rng.below(10) } else { 0 };
    match op {
        0..=2 => {
            // Append whole lines, and sometimes a torn piece of one.
            let mut text = {
                let n = 1 + rng.below(12);
                m.lines(rng, n)
            };
            if rng.chance(0.3) {
                let extra = m.lines(rng, 1);
                text.push_str(&extra[..1 + rng.below(extra.len() as u64 - 1) as usize]);
            }
            let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&p).unwrap();
            f.write_all(text.as_bytes()).unwrap();
            format!("append {} bytes to {name}", text.len())
        }
        3 => {
            // Rotate by rename to a name no source watches (beside it, or in another
            // directory), then a new file.
            let to = if rng.chance(0.5) { p.with_file_name(format!("{name}.{}", rng.below(1000))) } else { rotated.join(format!("{name}.{}", rng.next())) };
            std::fs::rename(&p, to).unwrap();
            std::fs::write(&p, {
                let n = rng.below(4);
                m.lines(rng, n)
            })
            .unwrap();
            format!("rename-rotate {name}")
        }
        4 => {
            // copytruncate: copy away, truncate in place, go on writing.
            std::fs::copy(&p, rotated.join(format!("{name}.copy.{}", rng.next()))).unwrap();
            let mut f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
            f.set_len(0).unwrap();
            f.write_all(
                {
                    let n = rng.below(3);
                    m.lines(rng, n)
                }
                .as_bytes(),
            )
            .unwrap();
            format!("copytruncate {name}")
        }
        5 => {
            let len = std::fs::metadata(&p).unwrap().len();
            let to = rng.below(len + 1);
            std::fs::OpenOptions::new().write(true).open(&p).unwrap().set_len(to).unwrap();
            format!("truncate {name} from {len} to {to}")
        }
        6 => {
            // In place: keep the first KiB or more, change what follows, grow past the old end.
            let old = std::fs::read(&p).unwrap();
            let keep = old.iter().take(1100.min(old.len())).count();
            let keep = old[..keep].iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            let mut new = old[..keep].to_vec();
            while new.len() <= old.len() + 10 {
                new.extend_from_slice(m.lines(rng, 1).as_bytes());
            }
            let mut f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
            f.set_len(0).unwrap();
            f.write_all(&new).unwrap();
            format!("rewrite {name} in place: {} -> {} bytes, first {keep} kept", old.len(), new.len())
        }
        7 => {
            std::fs::remove_file(&p).unwrap();
            format!("delete {name}")
        }
        8 => {
            // Inode reuse: delete, and create another watched file (the filesystem tends to
            // give it the freed inode), or recreate the same name.
            let ino = std::fs::metadata(&p).unwrap().ino();
            std::fs::remove_file(&p).unwrap();
            let free: Vec<&PathBuf> = m.paths.iter().filter(|q| !q.exists()).collect();
            let q = free[rng.below(free.len() as u64) as usize].clone();
            std::fs::write(&q, {
                let n = 1 + rng.below(5);
                m.lines(rng, n)
            })
            .unwrap();
            let reused = std::fs::metadata(&q).unwrap().ino() == ino;
            format!("delete {name}, create {} (inode reused: {reused})", q.file_name().unwrap().to_string_lossy())
        }
        _ => {
            // Rename to another watched name.
            let free: Vec<&PathBuf> = m.paths.iter().filter(|q| !q.exists()).collect();
            if free.is_empty() {
                return "nothing".into();
            }
            let q = free[rng.below(free.len() as u64) as usize].clone();
            std::fs::rename(&p, &q).unwrap();
            format!("rename {name} -> {}", q.file_name().unwrap().to_string_lossy())
        }
    }
}

/// Random rotations while the daemon looks away; after each round, the fold equals check.
#[test]
fn rotation_model_findings_equal_check_on_what_the_files_held() {
    let rounds = env_or("TRANSCRIPTD_ROUNDS", 25);
    let seed = seed();
    let mut rng = Rng::new(seed);
    eprintln!("rotation model: {rounds} rounds, TRANSCRIPTD_SEED={seed}");
    let mut d = Daemon::new("", "");
    let w = d.watch_dir();
    let rotated = d.root.path().join("rotated");
    std::fs::create_dir_all(&rotated).unwrap();
    std::fs::create_dir_all(w.join("sub")).unwrap();
    let m = Model { paths: vec![w.join("a.jsonl"), w.join("b.jsonl"), w.join("sub/c.jsonl"), w.join("sub/d.jsonl"), w.join("e.jsonl")], pool: pool(&mut rng) };
    let mut history: Vec<String> = Vec::new();
    let t = Instant::now();
    let (mut ops, mut restarts) = (0, 0);
    for round in 0..rounds {
        let n = 1 + rng.below(3);
        let restart = rng.chance(0.15);
        d.pause();
        for _ in 0..n {
            let what = operate(&m, &mut rng, &rotated);
            history.push(format!("round {round}: {what}"));
            ops += 1;
        }
        if restart {
            history.push(format!("round {round}: kill -9 and restart"));
            restarts += 1;
            d.kill9();
            d.start();
        } else {
            d.resume();
        }
        let mut last = (BTreeMap::new(), BTreeMap::new(), Vec::new());
        let ok = wait(Duration::from_secs(15), || {
            let f = fold_records(&d.records());
            let current: BTreeMap<Key, usize> = f.live.iter().filter(|(k, _)| Path::new(&k.0).exists()).map(|(k, n)| (k.clone(), *n)).collect();
            let mut problems: Vec<String> = f.unknown.clone();
            problems.extend(f.duplicates().iter().map(|k| format!("twice: {k:?}")));
            last = (current, check_dir(&w), problems);
            last.0 == last.1 && last.2.is_empty()
        });
        if !ok {
            let (got, want, problems) = &last;
            let missing: Vec<_> = want.keys().filter(|k| !got.contains_key(*k)).collect();
            let extra: Vec<_> = got.keys().filter(|k| !want.contains_key(*k)).collect();
            let files: BTreeSet<&String> = missing.iter().chain(&extra).map(|k| &k.0).collect();
            let about: Vec<String> =
                d.records().iter().filter(|r| r["file"].as_str().is_some_and(|f| files.contains(&f.to_owned()))).map(|r| r.to_string()).collect();
            panic!(
                "round {round} (TRANSCRIPTD_SEED={seed}): daemon != check\nmissing {missing:#?}\nextra {extra:#?}\nproblems {problems:#?}\nops:\n{}\nrecords about those files:\n{}\nlog:\n{}",
                history.join("\n"),
                about.join("\n"),
                d.log()
            );
        }
    }
    assert_eq!(d.stop(), Some(0));
    eprintln!(
        "rotation model: {rounds} rounds, {ops} operations, {restarts} kill -9 restarts, {} records, 0 differences from check ({:.1}s)",
        d.records().len(),
        t.elapsed().as_secs_f64()
    );
}

/// The kill -9 harness for the `http` sink: the daemon killed at random moments, and the
/// collector (a real HTTP server process) killed and restarted at random moments of its own,
/// sometimes staying down a while. Every finding and compaction reaches the collector exactly
/// once — counting, as a collector keyed on `X-Transcriptd-Batch` does, a batch it took once
/// (one whose answer the kill cut off comes again with the same id, and is dropped).
#[test]
fn kill_9_harness_is_exactly_once_for_the_http_sink_with_the_collector_killed_too() {
    use super::support::receiver::{free_port, Receiver};
    let kills = env_or("TRANSCRIPTD_KILLS", 25);
    let seed = seed();
    let mut rng = Rng::new(seed ^ 0x4854_5450);
    eprintln!("kill -9 harness (http): {kills} kills, TRANSCRIPTD_SEED={seed}");
    let mut d = Daemon::prepare(Opts::default());
    let port = free_port();
    let collector = std::sync::Arc::new(std::sync::Mutex::new(Receiver::start(&d.root.path().join("collector"), port, &[])));
    std::fs::write(d.config_path(), Daemon::config(d.root.path(), d.port, "", &super::http_sink::http_sink(port))).unwrap();
    let writers = start_writers(&d, kills, seed);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let chaos = {
        let (collector, stop) = (collector.clone(), stop.clone());
        let mut rng = Rng::new(seed ^ 0x4b49_4c4c);
        std::thread::spawn(move || {
            let mut restarts = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50 + rng.below(400)));
                let mut c = collector.lock().unwrap();
                c.kill9();
                let down = if rng.chance(0.2) { 1500 } else { 200 };
                std::thread::sleep(Duration::from_millis(rng.below(down)));
                c.restart();
                restarts += 1;
            }
            restarts
        })
    };
    let t = Instant::now();
    kill_while_writing(&mut d, &mut rng, kills, writers, true);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let restarts = chaos.join().unwrap();
    let before_restart = collector.lock().unwrap().batches().len();
    d.start();
    let w = d.watch_dir();
    let want = check_dir(&w);
    let want_c = compactions_in(&w);
    let c = collector.lock().unwrap();
    // Everything the daemon wrote to stdout reaches the collector too: what a checkpoint covers
    // is sent, the rest at the next start (a stop can leave records in the spool).
    let delivered_all = |d: &Daemon| c.records().len() == d.records().len();
    wait(Duration::from_secs(60), || delivered_all(&d) && tally(&c.records(), &want, &want_c).lost.is_empty());
    assert_eq!(d.stop(), Some(0), "{}", d.log());
    if !delivered_all(&d) {
        d.start();
        wait(Duration::from_secs(60), || delivered_all(&d));
        assert_eq!(d.stop(), Some(0), "{}", d.log());
    }
    let records = c.records();
    let t2 = tally(&records, &want, &want_c);
    let spool_cuts = d.log().lines().filter(|l| l.contains("http spool cut back")).count();
    let retried = d.log().lines().filter(|l| l.contains("batch not accepted")).count();
    eprintln!(
        "kill -9 harness, http sink: {kills} kills ({spool_cuts} cut the spool back), {restarts} collector kills ({retried} batches tried again), {} batches, {before_restart} of them during the kills ({} sent again after a lost answer), {} records, {} findings and {} compactions expected, {} lost, {} duplicated, {} spurious ({:.1}s)",
        c.batches().len(),
        c.resent(),
        records.len(),
        want.len(),
        want_c.len(),
        t2.lost.len(),
        t2.duplicated.len(),
        t2.spurious.len(),
        t.elapsed().as_secs_f64()
    );
    assert!(t2.lost.is_empty() && t2.duplicated.is_empty() && t2.spurious.is_empty(), "http (TRANSCRIPTD_SEED={seed}): {t2:#?}");
    assert!(t2.findings > 0 && t2.compactions > 0, "the corpus has findings and compactions: {t2:?}");
    assert!(restarts > 0, "the collector was killed");
    // (Like the file sink, the spool reaches its file only at checkpoints: a kill cuts it back
    // only now and then; the records after the checkpoint are replayed either way.)
    assert!(before_restart > 0, "nothing was delivered while the kills went on: the harness proved little");
}

/// `kill -9` while large backlogs are read ahead (reader threads, reads applied in order
/// between checkpoints): after the restarts, every finding and compaction is on stdout exactly
/// once.
#[test]
fn kill_9_while_backlogs_are_read_ahead_is_exactly_once() {
    let kills = env_or("TRANSCRIPTD_KILLS", 25) / 3;
    let seed = seed();
    let mut rng = Rng::new(seed ^ 0x5245_4144);
    eprintln!("kill -9 during read-ahead: {kills} kills, TRANSCRIPTD_SEED={seed}");
    let mut d = Daemon::prepare(Opts::default());
    // Many faults: records all along the files, so that kills fall between a write and the
    // checkpoint after it.
    for (i, mib) in [24u32, 12].iter().enumerate() {
        super::read_ahead::backlog_with(&d, &d.watch_dir().join(format!("big{i}.jsonl")), *mib, (seed % 1000) as u32 + i as u32, "0.2");
    }
    let t = Instant::now();
    let len = |d: &Daemon| std::fs::metadata(d.out()).map_or(0, |m| m.len());
    for _ in 0..kills {
        // Each life is killed just after it wrote records (past its silent replay up to the
        // checkpoint), within the checkpoint interval: in the crash window, whatever the load.
        let before = len(&d);
        d.spawn();
        if !wait(Duration::from_secs(60), || len(&d) > before) {
            d.kill9();
            break;
        }
        std::thread::sleep(Duration::from_millis(rng.below(60)));
        d.kill9();
    }
    eprintln!("kill -9 during read-ahead: {kills} kills in {:.1}s", t.elapsed().as_secs_f64());
    d.start();
    let w = d.watch_dir();
    let want = check_dir(&w);
    let want_c = compactions_in(&w);
    wait(Duration::from_secs(120), || tally(&d.records(), &want, &want_c).lost.is_empty());
    assert_eq!(d.stop(), Some(0), "{}", d.log());
    let t = tally(&d.records(), &want, &want_c);
    let cuts = d.log().lines().filter(|l| l.contains("stdout cut back")).count();
    eprintln!(
        "kill -9 during read-ahead: {kills} kills ({cuts} cut stdout back), {} findings and {} compactions expected, {} lost, {} duplicated, {} spurious",
        want.len(),
        want_c.len(),
        t.lost.len(),
        t.duplicated.len(),
        t.spurious.len()
    );
    assert!(t.lost.is_empty() && t.duplicated.is_empty() && t.spurious.is_empty(), "TRANSCRIPTD_SEED={seed}: {t:#?}");
    assert!(cuts > 0, "no kill fell between a write and the next checkpoint: the test proved nothing");
}
