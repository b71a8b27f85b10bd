//! Truth on real data: `check --output json` over the real fixtures reports exactly the errors
//! listed in EXPECTED.jsonl — same files, lines, kinds and call ids, nothing more, nothing less.

use super::support::{data, transcriptd_in};
use std::collections::BTreeSet;
use std::path::Path;

type Key = (String, u64, String, Option<String>);

fn expected(dir: &Path) -> BTreeSet<Key> {
    std::fs::read_to_string(dir.join("EXPECTED.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["file"].as_str().unwrap().to_owned(),
                v["line"].as_u64().unwrap(),
                v["kind"].as_str().unwrap().to_owned(),
                v["call_id"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

fn reported_errors(dir: &Path) -> BTreeSet<Key> {
    let out = transcriptd_in(dir, &["check", "--output", "json", "--no-summary", "."]);
    assert_eq!(out.status.code(), Some(1), "errors exist, so exit 1: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        // The errors, and the breaks the agent mends on resume (warnings marked `agent_mends`: the
        // session resumes with its history, and repair still mends them).
        .filter(|v| v["severity"] == "error" || v["agent_mends"] == true)
        .map(|v| {
            (
                v["file"].as_str().unwrap().trim_start_matches("./").to_owned(),
                v["line"].as_u64().unwrap(),
                v["kind"].as_str().unwrap().to_owned(),
                v["call_id"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn errors_on_real_transcripts_are_exactly_the_expected_ones() {
    let dir = data("real");
    assert_eq!(reported_errors(&dir), expected(&dir));
}

/// The same check against the shared copy, when the workspace has it (it may be newer).
#[test]
fn shared_fixtures_agree_too() {
    let shared = super::support::root().join("../shared/fixtures/real");
    if shared.join("EXPECTED.jsonl").exists() {
        assert_eq!(reported_errors(&shared), expected(&shared));
    }
}

#[test]
fn every_real_file_gets_its_format_detected() {
    let out = transcriptd_in(&data("real"), &["check", "--output", "json", "."]);
    for l in String::from_utf8(out.stdout).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        if v["file"] == "./EXPECTED.jsonl" {
            // The list of expected findings is no transcript: that is said, once.
            assert_eq!((v["kind"].as_str(), v["severity"].as_str(), v.get("line")), (Some("unknown_format"), Some("warning"), None), "{l}");
            continue;
        }
        assert!(v["format"].is_string(), "{l}");
    }
    // Format per directory: claude-code files are Claude Code, rollouts are Codex, pi/ is Pi.
    for f in super::support::jsonl_files(&data("real")).into_iter().filter(|f| !f.ends_with("EXPECTED.jsonl")) {
        let input = std::fs::read(&f).unwrap();
        let (_, _, format) = transcriptd::transcript::check_bytes(&input, Default::default()).unwrap();
        let name = f.to_string_lossy();
        let want = if name.contains("rollout") {
            "codex"
        } else if f.strip_prefix(data("real")).is_ok_and(|r| r.starts_with("pi")) {
            "pi"
        } else {
            "claude-code"
        };
        assert_eq!(format.map(|f| f.as_str()), Some(want), "{name}");
    }
}
