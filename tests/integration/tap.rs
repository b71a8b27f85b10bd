//! `/tap` and `transcriptd tap` with real HTTP clients against a real daemon: curl, the tap
//! verb, and a Python client that stops reading. The slow one is told exactly how many
//! records it missed, at the place of the gap; the others, and the daemon's stdout sink, get
//! every record; the checkpoints move on while the slow client stalls.

use super::support::harness::{http, wait, Daemon};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A client that reads `/tap` over HTTP/1.0 (a close-delimited body) with a 4 KiB receive
/// buffer, says `ready` once subscribed, stops reading until the file `go` exists, then reads
/// until a record of a file ending in `end` comes, and prints every event as a JSON line.
const SLOW_CLIENT: &str = r#"
import json, os, socket, sys, time
port, go, end = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", port))
s.sendall(b"GET /tap HTTP/1.0\r\nHost: x\r\n\r\n")
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(4096)
head, buf = buf.split(b"\r\n\r\n", 1)
assert b" 200 " in head.split(b"\r\n")[0], head
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.02)
done = False
while not done:
    while b"\n\n" not in buf:
        more = s.recv(65536)
        if not more:
            sys.exit("the stream ended")
        buf += more
    block, buf = buf.split(b"\n\n", 1)
    kind, data = "message", None
    for line in block.decode().split("\n"):
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
    if data is None:
        continue
    print(json.dumps({"event": kind, "data": data}), flush=True)
    if kind == "message" and json.loads(data)["file"].endswith(end):
        done = True
"#;

fn checkpoint_offsets(d: &Daemon) -> Vec<(String, u64)> {
    let Ok(text) = std::fs::read(d.state_dir().join("checkpoints.json")) else { return vec![] };
    let v: serde_json::Value = serde_json::from_slice(&text).unwrap_or_default();
    v["files"].as_array().map_or(vec![], |a| a.iter().map(|f| (f["path"].as_str().unwrap_or("").to_owned(), f["offset"].as_u64().unwrap_or(0))).collect())
}

fn lines_of(path: &Path) -> Vec<String> {
    String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).lines().map(str::to_owned).collect()
}

/// The records of an SSE stream as curl wrote it.
fn sse_records(path: &Path) -> Vec<String> {
    lines_of(path).into_iter().filter_map(|l| l.strip_prefix("data: ").map(str::to_owned)).collect()
}

fn spawn(cmd: &mut Command) -> Child {
    cmd.spawn().unwrap()
}

#[test]
fn several_clients_one_slow_nothing_lost_for_the_others_and_the_slow_one_is_told() {
    // A queue of 20,000 records: fast clients keep up with a writer pacing 20,000 records/s
    // even on a loaded machine; the slow one overflows its socket buffers and queue.
    let d = Daemon::edited("", "", |c| format!("{c}request_timeout = \"60s\"\ntap_buffer = 20000\ntap_clients = 4\n"));
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let port = d.port.to_string();

    let mut slow =
        spawn(Command::new("python3").args(["-c", SLOW_CLIENT, &port, go.to_str().unwrap(), "end.jsonl"]).stdout(Stdio::piped()).stderr(Stdio::inherit()));
    let mut slow_out = BufReader::new(slow.stdout.take().unwrap());
    let mut first = String::new();
    slow_out.read_line(&mut first).unwrap();
    assert_eq!(first, "ready\n");

    let curl_out = dir.path().join("curl.sse");
    let mut curl = spawn(Command::new("curl").args(["-sN", &format!("http://127.0.0.1:{port}/tap")]).stdout(std::fs::File::create(&curl_out).unwrap()));
    let filtered_out = dir.path().join("filtered.sse");
    let mut filtered = spawn(
        Command::new("curl")
            .args(["-sN", &format!("http://127.0.0.1:{port}/tap?kind=malformed_line&file=*%2Fb.jsonl")])
            .stdout(std::fs::File::create(&filtered_out).unwrap()),
    );
    let verb_out = dir.path().join("verb.jsonl");
    let mut verb = spawn(
        Command::new(env!("CARGO_BIN_EXE_transcriptd"))
            .args(["tap", "--addr", &format!("127.0.0.1:{port}"), "-o", "json"])
            .stdout(std::fs::File::create(&verb_out).unwrap())
            .stderr(Stdio::null()),
    );
    // Everyone is subscribed once a probe's record reaches the fast clients (and curl shows
    // the stream's first comment); a client that subscribed late gets a later probe.
    let probe = d.watch_dir().join("probe.jsonl");
    assert!(wait(Duration::from_secs(60), || {
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&probe).unwrap();
        f.write_all(b"not json\n").unwrap();
        std::thread::sleep(Duration::from_millis(200));
        sse_records(&curl_out).iter().any(|l| l.contains("probe.jsonl"))
            && lines_of(&verb_out).iter().any(|l| l.contains("probe.jsonl"))
            && lines_of(&filtered_out).iter().any(|l| l == ": transcriptd tap")
    }));
    // A fifth is refused (tap_clients = 4).
    assert_eq!(http(d.port, "/tap").map(|(s, _)| s), Some(503), "a fifth tap client is refused");

    // The writer: 150,000 malformed lines over three files, 300 at a time.
    let mut files: Vec<std::fs::File> =
        ["a", "b", "c"].iter().map(|n| std::fs::OpenOptions::new().create(true).append(true).open(d.watch_dir().join(format!("{n}.jsonl"))).unwrap()).collect();
    for i in 0..500 {
        let chunk: String = (0..100).map(|j| format!("not json {i} {j} {}\n", "x".repeat(40))).collect();
        for f in &mut files {
            f.write_all(chunk.as_bytes()).unwrap();
        }
        std::thread::sleep(Duration::from_millis(15));
    }
    let sizes: Vec<(String, u64)> =
        ["a", "b", "c"].iter().map(|n| d.watch_dir().join(format!("{n}.jsonl"))).map(|p| (p.display().to_string(), p.metadata().unwrap().len())).collect();
    // The pipeline and the checkpoints went on while the slow client read nothing.
    assert!(
        wait(Duration::from_secs(60), || {
            let cp = checkpoint_offsets(&d);
            sizes.iter().all(|(p, n)| cp.iter().any(|(q, o)| q == p && o == n))
        }),
        "checkpoints cover every file while a tap client stalls: {:?} vs {sizes:?}",
        checkpoint_offsets(&d)
    );
    assert!(slow.try_wait().unwrap().is_none());
    // The slow client reads again (its events collected beside), until a record of end.jsonl
    // reaches it: one is appended every 300 ms (those written while its queue is full are
    // dropped for it, and counted).
    std::fs::write(&go, "").unwrap();
    let reader = std::thread::spawn(move || slow_out.lines().map(|l| serde_json::from_str::<serde_json::Value>(&l.unwrap()).unwrap()).collect::<Vec<_>>());
    let end = d.watch_dir().join("end.jsonl");
    assert!(wait(Duration::from_secs(90), || {
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&end).unwrap();
        f.write_all(b"not json\n").unwrap();
        std::thread::sleep(Duration::from_millis(300));
        slow.try_wait().unwrap().is_some()
    }));
    assert!(slow.wait().unwrap().success());
    let events = reader.join().unwrap();
    let last = events.last().unwrap()["data"].as_str().unwrap().to_owned();
    assert!(wait(Duration::from_secs(20), || lines_of(&d.out()).contains(&last)));
    let out = lines_of(&d.out());
    let end_at = out.iter().position(|l| *l == last).unwrap();
    let out = &out[..=end_at];
    assert!(out.len() > 150_000, "{} records", out.len());

    // The slow client: each record is the stdout sink's next one, each gap skips exactly the
    // records it counts, and it ends where the stdout sink is.
    let (mut at, mut missed, mut gaps) = (0usize, 0u64, 0);
    for e in &events {
        match e["event"].as_str().unwrap() {
            "missed" => {
                let n = serde_json::from_str::<serde_json::Value>(e["data"].as_str().unwrap()).unwrap()["missed"].as_u64().unwrap();
                assert!(n > 0);
                at += n as usize;
                missed += n;
                gaps += 1;
            }
            _ => {
                assert_eq!(e["data"].as_str().unwrap(), out[at], "record {at} of the slow client");
                at += 1;
            }
        }
    }
    assert_eq!(at, out.len(), "the slow client's records and gaps add up to every record");
    assert!(missed > 10_000 && gaps >= 1, "the slow client missed {missed} records in {gaps} gaps");

    // The fast clients got every record from the one they subscribed before, in order.
    for (name, got) in [("curl", &curl_out), ("transcriptd tap -o json", &verb_out)] {
        let read = || if name == "curl" { sse_records(got) } else { lines_of(got) };
        assert!(wait(Duration::from_secs(30), || read().iter().any(|l| l.contains("end.jsonl"))), "{name}");
        let got = read();
        let from = out.iter().position(|l| *l == got[0]).unwrap();
        let n = out.len() - from;
        assert!(got.len() >= n, "{name}: {} records, {n} expected", got.len());
        assert_eq!(&got[..n], &out[from..], "{name}");
    }
    // The filtered client: the malformed lines of b.jsonl, nothing else.
    let want: Vec<&String> = out
        .iter()
        .filter(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["type"] == "finding" && v["kind"] == "malformed_line" && v["file"].as_str().unwrap().ends_with("/b.jsonl")
        })
        .collect();
    assert_eq!(want.len(), 50_000);
    assert!(wait(Duration::from_secs(20), || sse_records(&filtered_out).len() >= want.len()));
    assert_eq!(sse_records(&filtered_out).iter().collect::<Vec<_>>(), want, "?kind=malformed_line&file=*/b.jsonl");

    for c in [&mut curl, &mut filtered, &mut verb] {
        let _ = c.kill();
        let _ = c.wait();
    }
    // A client that leaves gets its slot back.
    assert!(wait(Duration::from_secs(10), || {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", d.port)).unwrap();
        write!(s, "GET /tap HTTP/1.0\r\n\r\n").unwrap();
        let mut head = [0u8; 12];
        std::io::Read::read_exact(&mut s, &mut head).is_ok() && &head[9..12] == b"200"
    }));
}

#[test]
fn a_client_that_stops_reading_is_closed_after_the_request_timeout() {
    let mut d = Daemon::edited("", "", |c| format!("{c}request_timeout = \"1s\"\ntap_buffer = 1000\ntap_clients = 1\n"));
    // A client that sends its request and never reads, with a small receive buffer.
    let stalled = {
        let s = socket_with_small_buffer(d.port);
        let mut w = &s;
        write!(w, "GET /tap HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        s
    };
    assert!(wait(Duration::from_secs(10), || http(d.port, "/tap").is_some_and(|(s, _)| s == 503)), "the one slot is taken");
    // Records keep coming, more than its socket buffers hold: what is sent to it waits.
    // Closed after the timeout: the slot is free again.
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(d.watch_dir().join("a.jsonl")).unwrap();
    let mut i = 0;
    let freed = wait(Duration::from_secs(30), || {
        let chunk: String = (0..100).map(|j| format!("not json {i} {j} {}\n", "y".repeat(60))).collect();
        f.write_all(chunk.as_bytes()).unwrap();
        i += 1;
        std::thread::sleep(Duration::from_millis(20));
        let mut s = std::net::TcpStream::connect(("127.0.0.1", d.port)).unwrap();
        write!(s, "GET /tap HTTP/1.0\r\n\r\n").unwrap();
        let mut head = [0u8; 12];
        std::io::Read::read_exact(&mut s, &mut head).is_ok() && &head[9..12] == b"200"
    });
    assert!(freed, "a stalled tap client is closed after request_timeout: {}", d.log());
    drop(stalled);
    assert_eq!(d.stop(), Some(0));
}

fn socket_with_small_buffer(port: u16) -> std::net::TcpStream {
    use std::os::fd::FromRawFd;
    // SAFETY: a new socket, its receive buffer set before it connects, then owned by the
    // TcpStream.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let size: libc::c_int = 4096;
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, (&size as *const libc::c_int).cast(), std::mem::size_of::<libc::c_int>() as u32);
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as u16,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be() },
            sin_zero: [0; 8],
        };
        assert_eq!(libc::connect(fd, (&addr as *const libc::sockaddr_in).cast(), std::mem::size_of::<libc::sockaddr_in>() as u32), 0);
        std::net::TcpStream::from_raw_fd(fd)
    }
}

/// GET `path` with `Authorization: Bearer <token>` when given: the status.
fn status_with(port: u16, path: &str, token: Option<&str>) -> u16 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(s, "HEAD {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n").unwrap();
    let mut head = [0u8; 64];
    let n = s.read(&mut head).unwrap();
    String::from_utf8_lossy(&head[..n]).split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_token_file_closes_everything_but_health_to_those_without_the_token() {
    let root = tempfile::tempdir().unwrap();
    let token = root.path().join("token");
    std::fs::write(&token, "s3cret-token\n").unwrap();
    let d = Daemon::edited("", "", |c| c.replacen("type = \"prometheus\"\n", &format!("type = \"prometheus\"\ntoken_file = \"{}\"\n", token.display()), 1));
    std::fs::copy(super::support::data("check/claude-code/0002_orphan_call_at_end.jsonl"), d.watch_dir().join("a.jsonl")).unwrap();
    assert_eq!(status_with(d.port, "/health", None), 200, "probes need no token");
    for path in ["/metrics", "/stats", "/tap"] {
        assert_eq!(status_with(d.port, path, None), 401, "{path} without the token");
        assert_eq!(status_with(d.port, path, Some("s3cret-toke")), 401, "{path} with a wrong token");
        assert_eq!(status_with(d.port, path, Some("s3cret-token")), 200, "{path} with the token");
    }
    // The clients: without --token-file they are told why; with it, they read.
    let addr = format!("127.0.0.1:{}", d.port);
    let no = super::support::transcriptd(&["tap", "--addr", &addr, "--count", "1"]);
    assert_eq!(no.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no.stderr).contains("401"), "{}", String::from_utf8_lossy(&no.stderr));
    let tap = Command::new(env!("CARGO_BIN_EXE_transcriptd"))
        .args(["tap", "--addr", &addr, "--token-file", token.to_str().unwrap(), "--count", "1", "-o", "json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    std::fs::copy(super::support::data("check/claude-code/0002_orphan_call_at_end.jsonl"), d.watch_dir().join("b.jsonl")).unwrap();
    let out = tap.wait_with_output().unwrap();
    assert!(out.status.success(), "tap with the token: {:?}", out);
    let record: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(record["kind"], "orphan_call", "{record}");
}
