//! The `loss` stage in the daemon, end to end: a transcript deleted, truncated, rewritten in
//! place, or emptied of its messages (the shape a compaction whose summary call failed leaves,
//! anthropics/claude-code#40352) is a finding within a second of it, with its metric.

use super::support::harness::{wait, Daemon, Opts, DEFAULT_STAGES};
use std::time::{Duration, Instant};

fn daemon() -> Daemon {
    Daemon::with(Opts { stages: Some(format!("{DEFAULT_STAGES}[[stages]]\ntype = \"loss\"\n")), ..Opts::default() })
}

/// A Claude Code line: `text` as its content ("" when wiped).
fn line(i: usize, text: &str) -> String {
    let role = if i % 2 == 0 { "user" } else { "assistant" };
    let parent = if i == 0 { "null".to_string() } else { format!("\"u{}\"", i - 1) };
    let content = if role == "user" { serde_json::json!(text) } else { serde_json::json!([{"type": "text", "text": text}]) };
    let mut message = serde_json::json!({"role": role, "content": content});
    if role == "assistant" {
        message["id"] = format!("msg_{i}").into();
        message["model"] = "claude-sonnet-4-5".into();
    }
    let v = serde_json::json!({"type": role, "uuid": format!("u{i}"), "parentUuid": serde_json::from_str::<serde_json::Value>(&parent).unwrap(),
        "sessionId": "s1", "timestamp": "2026-12-01T10:00:00Z", "message": message});
    format!("{v}\n")
}

fn session(n: usize, wiped: impl Fn(usize) -> bool) -> String {
    (0..n).map(|i| line(i, if wiped(i) { "" } else { "said something" })).collect()
}

/// Waits for a finding of `kind` about `file`; returns how long it took from `since`.
fn found(d: &Daemon, kind: &str, file: &std::path::Path, since: Instant) -> Duration {
    let f = file.to_str().unwrap();
    assert!(
        wait(Duration::from_secs(10), || d.records().iter().any(|r| r["type"] == "finding" && r["kind"] == kind && r["file"] == f)),
        "no {kind} for {f}: {:#?}\n{}",
        d.records(),
        d.log()
    );
    since.elapsed()
}

#[test]
fn a_deleted_transcript_is_a_warning_with_what_was_read_and_counted() {
    let d = daemon();
    let f = d.watch_dir().join("proj/s1.jsonl");
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    std::fs::write(&f, session(6, |_| false)).unwrap();
    assert!(wait(Duration::from_secs(10), || d.records().iter().any(|r| r["type"] == "file_opened")), "{}", d.log());
    assert!(wait(Duration::from_secs(10), || d.metric("transcriptd_lines_read_total{format=\"claude-code\"}") == Some(6.0)), "{}", d.log());
    let t = Instant::now();
    std::fs::remove_file(&f).unwrap();
    let took = found(&d, "transcript_deleted", &f, t);
    eprintln!("transcript_deleted {took:?} after the unlink");
    let r = d.records().into_iter().find(|r| r["kind"] == "transcript_deleted").unwrap();
    assert_eq!(r["severity"], "warning");
    assert!(r.get("line").is_none(), "a whole-file finding: {r}");
    let msg = r["message"].as_str().unwrap();
    assert!(msg.contains("6 lines (6 conversation entries"), "{msg}");
    assert_eq!(r["on_resume"], "the agent finds no such session");
    assert_eq!(d.metric("transcriptd_findings_total{kind=\"transcript_deleted\",severity=\"warning\"}"), Some(1.0));
    // Exported at 0 before any: a first finding is an increase to Prometheus.
    assert_eq!(d.metric("transcriptd_findings_total{kind=\"content_wiped\",severity=\"error\"}"), Some(0.0));
    // A file that is renamed to another watched name is not lost.
    let g = d.watch_dir().join("proj/s2.jsonl");
    std::fs::write(&g, session(2, |_| false)).unwrap();
    assert!(wait(Duration::from_secs(10), || d.metric("transcriptd_lines_read_total{format=\"claude-code\"}") == Some(8.0)), "{}", d.log());
    std::fs::rename(&g, d.watch_dir().join("proj/s3.jsonl")).unwrap();
    assert!(wait(Duration::from_secs(10), || d.records().iter().any(|r| r["type"] == "file_closed" && r["reason"] == "renamed")), "{}", d.log());
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(d.records().iter().filter(|r| r["kind"] == "transcript_deleted").count(), 1, "{:#?}", d.records());
}

#[test]
fn a_truncated_or_wiped_transcript_is_found_as_it_happens() {
    let d = daemon();
    let a = d.watch_dir().join("a.jsonl");
    std::fs::write(&a, session(8, |_| false)).unwrap();
    assert!(wait(Duration::from_secs(10), || d.metric("transcriptd_lines_read_total{format=\"claude-code\"}") == Some(8.0)), "{}", d.log());
    // Truncated to its first two lines (same inode).
    let t = Instant::now();
    let keep = session(2, |_| false);
    std::fs::OpenOptions::new().write(true).open(&a).unwrap().set_len(keep.len() as u64).unwrap();
    let took = found(&d, "transcript_rewritten", &a, t);
    eprintln!("transcript_rewritten {took:?} after the truncation");
    let r = d.records().into_iter().find(|r| r["kind"] == "transcript_rewritten").unwrap();
    assert!(r["message"].as_str().unwrap().contains(&format!("it holds {} bytes now", keep.len())), "{r}");

    // Wiped in place, as the failed compaction does: lines 2-7 empty, the last two kept.
    let b = d.watch_dir().join("b.jsonl");
    std::fs::write(&b, session(10, |_| false)).unwrap();
    assert!(wait(Duration::from_secs(10), || d.metric("transcriptd_lines_read_total{format=\"claude-code\"}") == Some(20.0)), "{}", d.log());
    let t = Instant::now();
    std::fs::write(&b, session(10, |i| (2..8).contains(&i))).unwrap();
    let took = found(&d, "content_wiped", &b, t);
    eprintln!("content_wiped {took:?} after the rewrite");
    found(&d, "transcript_rewritten", &b, t);
    let r = d.records().into_iter().find(|r| r["kind"] == "content_wiped").unwrap();
    assert_eq!((r["line"].as_u64(), r["severity"].as_str()), (Some(3), Some("error")), "{r}");
    assert!(r["message"].as_str().unwrap().starts_with("lines 3-8: 6 conversation lines"), "{r}");

    // Wiped to its end: reported once the file is quiet, as the tail findings are.
    let c = d.watch_dir().join("c.jsonl");
    let t = Instant::now();
    std::fs::write(&c, session(6, |i| i >= 1)).unwrap();
    found(&d, "content_wiped", &c, t);
    assert!(wait(Duration::from_secs(10), || d.metric("transcriptd_findings_total{kind=\"content_wiped\",severity=\"error\"}") == Some(2.0)), "{}", d.log());
}

#[test]
fn check_reports_a_wiped_session_and_repair_says_it_cannot_bring_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("s.jsonl");
    std::fs::write(&f, session(12, |i| (1..11).contains(&i))).unwrap();
    let (fs, outdir) = (f.to_str().unwrap(), dir.path().join("out"));
    let out = super::support::transcriptd(&["check", "--output", "json", fs]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"content_wiped\"") && text.contains("lines 2-11: 10 conversation lines"), "{text}");
    let out = super::support::transcriptd(&["repair", "--out", outdir.to_str().unwrap(), fs]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("partly repaired") && stdout.contains("content_wiped") && stdout.contains("restore it from a backup"), "{stdout}");
}

/// A compaction whose summary line is missing (a kill between the boundary and the summary, an
/// older version, an edit): Claude Code 2.1.332 resumes from the boundary and sends nothing of
/// the history before it (measured). `check` says so at the boundary's line, and `repair`
/// leaves it unrepaired, saying why, instead of calling the file clean.
#[test]
fn a_compaction_without_its_summary_is_an_error_check_names_and_repair_cannot_mend() {
    use super::support::{stdout, transcriptd};
    let f = "tests/data/loss/compaction-without-its-summary.jsonl";
    let o = transcriptd(&["check", "-o", "json", f]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let found: Vec<serde_json::Value> =
        stdout(&o).lines().filter_map(|l| serde_json::from_str(l).ok()).filter(|v: &serde_json::Value| v["kind"].is_string()).collect();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0]["kind"].as_str(), found[0]["line"].as_u64(), found[0]["severity"].as_str()),
        (Some("compaction_unsummarized"), Some(3), Some("error"))
    );
    assert!(found[0]["message"].as_str().unwrap().contains("the 2 messages before it are not sent"), "{}", found[0]["message"]);
    let d = tempfile::tempdir().unwrap();
    let o = transcriptd(&["repair", "--out", d.path().to_str().unwrap(), f]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let said = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("partly repaired") && said.contains("compaction_unsummarized: not repaired"), "{said}");
}
