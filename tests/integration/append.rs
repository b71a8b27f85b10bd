//! Seed 003: appends from many writers at once — threads with their own handles, threads
//! sharing one, separate processes — interleave whole lines, never parts of lines. Lines are
//! far larger than a pipe's atomic size (4 KiB), so only append mode keeps them whole.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use transcriptd::sinks::Appender;

const LINES_PER_WRITER: usize = 200;

/// Line `n` of writer `w`: a JSON object whose padding length is a function of both, from a
/// few bytes to over 100 KiB, so a cut line cannot pass as another whole one.
fn line(w: usize, n: usize) -> Vec<u8> {
    let pad = (w * 7919 + n * 104_729) % 150_000;
    format!("{{\"w\":{w},\"n\":{n},\"pad\":\"{}\"}}", char::from(b'a' + (w % 26) as u8).to_string().repeat(pad)).into_bytes()
}

/// Every line of the file is one whole line of one writer, and each writer's lines are all
/// there, in its order.
fn assert_whole_lines(path: &Path, writers: usize) {
    let data = std::fs::read(path).unwrap();
    assert_eq!(data.last(), Some(&b'\n'), "the file ends with a whole line");
    let mut seen: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, l) in data[..data.len() - 1].split(|b| *b == b'\n').enumerate() {
        let v: serde_json::Value = serde_json::from_slice(l).unwrap_or_else(|e| panic!("line {} is not whole: {e}", i + 1));
        let (w, n) = (v["w"].as_u64().unwrap() as usize, v["n"].as_u64().unwrap() as usize);
        assert_eq!(l, &line(w, n)[..], "line {} is whole but not as written", i + 1);
        seen.entry(w).or_default().push(n);
    }
    assert_eq!(seen.len(), writers);
    for (w, ns) in seen {
        assert_eq!(ns, (0..LINES_PER_WRITER).collect::<Vec<_>>(), "writer {w}");
    }
}

fn write_all(path: &Path, w: usize) {
    let a = Appender::open(path).unwrap();
    for n in 0..LINES_PER_WRITER {
        a.append_line(&line(w, n)).unwrap();
    }
}

#[test]
fn threads_with_their_own_handles_append_whole_lines() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.jsonl");
    std::thread::scope(|s| {
        for w in 0..6 {
            let p = &p;
            s.spawn(move || write_all(p, w));
        }
    });
    assert_whole_lines(&p, 6);
}

#[test]
fn threads_sharing_one_handle_append_whole_lines() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.jsonl");
    let a = Appender::open(&p).unwrap();
    std::thread::scope(|s| {
        for w in 0..6 {
            let a = &a;
            s.spawn(move || {
                for n in 0..LINES_PER_WRITER {
                    a.append_line(&line(w, n)).unwrap();
                }
            });
        }
    });
    assert_whole_lines(&p, 6);
}

/// Env var that turns [`child_writer`] into a writer: `<path>:<writer>`.
const CHILD: &str = "TRANSCRIPTD_TEST_APPEND_CHILD";

#[test]
#[ignore = "a helper: run as a child process by processes_append_whole_lines"]
fn child_writer() {
    let spec = std::env::var(CHILD).expect("run by processes_append_whole_lines");
    let (path, w) = spec.rsplit_once(':').unwrap();
    write_all(Path::new(path), w.parse().unwrap());
}

#[test]
fn processes_append_whole_lines() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.jsonl");
    let me = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..4)
        .map(|w| {
            Command::new(&me)
                .args(["--ignored", "--exact", "append::child_writer", "--test-threads=1", "--quiet"])
                .env(CHILD, format!("{}:{w}", p.display()))
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    assert_whole_lines(&p, 4);
}
