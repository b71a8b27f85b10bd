//! Ground truth from generated corpora: the generator (`tests/gen/gen_transcripts.py`) writes a
//! manifest of every fault it injects. Every injected fault must be reported at its line, and
//! nothing else may be reported as an error.

use super::support::generate;
use std::collections::BTreeSet;
use transcriptd::transcript::{check_bytes, Finding, Kind, Options};

/// A fault, normalised so that manifest entries and findings compare: (line, class, call id).
type Fault = (u64, &'static str, Option<String>);

fn from_manifest(path: &std::path::Path) -> BTreeSet<Fault> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let line = v["line"].as_u64().unwrap();
            let id = v["tool_use_id"].as_str().map(str::to_owned);
            let class = match v["kind"].as_str().unwrap() {
                "missing_tool_result" => "missing",
                "orphan_tool_result" => "orphan_result",
                "duplicate_tool_result" => "duplicate_result",
                "consecutive_assistant" => return Some((line, "consecutive", None)),
                "malformed_line" => return Some((line, "unreadable", None)),
                "truncated_last_line" => return Some((line, "torn", None)),
                "compact_boundary" => return None,
                k => panic!("unknown manifest kind {k}"),
            };
            Some((line, class, id))
        })
        .collect()
}

fn from_findings(input: &[u8], jobs: usize) -> BTreeSet<Fault> {
    let (findings, _, _) = check_bytes(input, Options { jobs, ..Options::default() }).unwrap();
    findings
        .into_iter()
        // The errors, and the breaks the agent mends on resume (warnings repair mends too).
        .filter(Finding::wants_repair)
        .map(|f| {
            let class = match f.kind {
                Kind::UnansweredCall | Kind::OrphanCall => "missing",
                Kind::OrphanResult => "orphan_result",
                Kind::DuplicateResult => "duplicate_result",
                Kind::ConsecutiveAssistant => return (f.line, "consecutive", None),
                Kind::MalformedLine | Kind::InvalidUtf8 => return (f.line, "unreadable", None),
                Kind::TornLine => return (f.line, "torn", None),
                k => panic!("unexpected error finding {k} at line {}", f.line),
            };
            (f.line, class, f.call_id)
        })
        .collect()
}

fn check_seed(seed: u32, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (out, manifest) = (dir.path().join("s.jsonl"), dir.path().join("m.jsonl"));
    let seed_s = seed.to_string();
    let mut args = vec!["--lines", "4000", "--seed", &seed_s, "--faults", "0.02", "--truncate-last", "1", "--compact-boundary", "0.05", "--manifest"];
    let m = manifest.to_str().unwrap().to_owned();
    args.push(&m);
    args.extend_from_slice(extra);
    generate(&out, &args);
    let input = std::fs::read(&out).unwrap();
    let want = from_manifest(&manifest);
    assert!(want.len() > 20, "seed {seed}: too few faults injected ({})", want.len());
    let got = from_findings(&input, 1);
    let missing: Vec<_> = want.difference(&got).collect();
    let extra_found: Vec<_> = got.difference(&want).collect();
    assert!(missing.is_empty() && extra_found.is_empty(), "seed {seed} {extra:?}: not reported {missing:?}; reported but not injected {extra_found:?}");
    assert_eq!(got, from_findings(&input, 3), "parallel parse agrees");
}

/// `check --output json` of a file with `jobs` threads.
fn check_json(path: &std::path::Path, jobs: &str) -> String {
    let out = super::support::transcriptd(&["check", "-o", "json", "--no-summary", "--jobs", jobs, path.to_str().unwrap()]);
    assert!(out.status.code().is_some_and(|c| c < 2), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn one_large_file_on_several_threads_reports_what_one_thread_does() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("big.jsonl");
    generate(&f, &["--bytes", "24MiB", "--seed", "9", "--faults", "0.01", "--truncate-last", "1", "--split-assistant"]);
    let one = check_json(&f, "1");
    assert!(one.lines().count() > 50 && one.contains("torn_line"));
    assert_eq!(one, check_json(&f, "2"));
    assert_eq!(one, check_json(&f, "3"));
    // A line over the limit in the middle, and a long torn one at the end.
    let mut bytes = std::fs::read(&f).unwrap();
    let cut = bytes.len() / 2;
    let nl = cut + bytes[cut..].iter().position(|b| *b == b'\n').unwrap() + 1;
    let long = format!("{{\"role\":\"user\",\"content\":\"{}\"}}\n", "x".repeat(9 << 20));
    bytes.splice(nl..nl, long.bytes());
    bytes.extend_from_slice(format!("{{\"pad\":\"{}", "y".repeat(10 << 20)).as_bytes());
    std::fs::write(&f, &bytes).unwrap();
    let limited = |jobs: &str| {
        let out = super::support::transcriptd(&["check", "-o", "json", "--no-summary", "--max-line-bytes", "8MiB", "--jobs", jobs, f.to_str().unwrap()]);
        String::from_utf8(out.stdout).unwrap()
    };
    let one = limited("1");
    assert!(one.contains("line_too_long"), "{one}");
    assert_eq!(one, limited("2"));
}

#[test]
fn generated_faults_are_found_exactly() {
    check_seed(1, &[]);
    check_seed(2, &["--split-assistant"]);
    check_seed(3, &["--merge-results"]);
    check_seed(4, &["--layout", "type-first", "--split-assistant", "--tool-use-result"]);
}
