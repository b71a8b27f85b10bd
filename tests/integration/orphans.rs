//! `orphans`: data-driven cases (`tests/data/orphans/<format>/...jsonl` against `.expected`
//! beside them: `line call_id tool side_effect handling` per call; a case directory may hold a
//! `pending.json` and a `tools.toml`), the real transcripts against EXPECTED.jsonl, and the
//! command-line contract.

use super::support::{data, expect_file, jsonl_files, transcriptd, transcriptd_in};
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};
use transcriptd::cli::orphans::scan;
use transcriptd::config::tools::ToolRegistry;
use transcriptd::sources::batch::Input;
use transcriptd::sources::pending::paused_calls;
use transcriptd::transcript::stages::orphans::{classify, Policy};

#[test]
fn every_case_matches_its_expectation() {
    let root = data("orphans");
    let mut count = 0;
    for case in jsonl_files(&root) {
        let format = case.strip_prefix(&root).unwrap().components().next().unwrap().as_os_str().to_str().unwrap().to_owned();
        let dir = case.parent().unwrap();
        let registry = if dir.join("tools.toml").exists() { ToolRegistry::load(&dir.join("tools.toml")).unwrap() } else { ToolRegistry::builtin() };
        let scanned = scan(&Input::File(case.clone()), None, 64 << 20, Duration::ZERO).unwrap();
        assert_eq!(scanned.format.map(|f| f.to_string()), Some(format), "{}", case.display());
        let paused = paused_calls(dir).unwrap();
        let mut actual = String::new();
        for o in classify(&scanned.orphans, |t| registry.side_effect(t), &paused, Policy::Suggest) {
            actual.push_str(&format!("{} {} {} {} {}\n", o.line, o.call_id, o.tool, o.side_effect.as_str(), o.handling.as_str()));
        }
        expect_file(&case.with_extension("expected"), &actual);
        count += 1;
    }
    assert!(count >= 14, "only {count} cases");
}

#[test]
fn orphans_on_real_transcripts_are_the_expected_orphan_calls() {
    let dir = data("real");
    let want: BTreeSet<(String, u64, String)> = std::fs::read_to_string(dir.join("EXPECTED.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["kind"] == "orphan_call")
        .map(|v| (v["file"].as_str().unwrap().to_owned(), v["line"].as_u64().unwrap(), v["call_id"].as_str().unwrap().to_owned()))
        .collect();
    let out = transcriptd_in(&dir, &["orphans", "-o", "json", "--no-summary", "."]);
    assert_eq!(out.status.code(), Some(1));
    let got: BTreeSet<(String, u64, String)> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| (v["file"].as_str().unwrap().trim_start_matches("./").to_owned(), v["line"].as_u64().unwrap(), v["call_id"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(got, want);
}

fn case(rel: &str) -> String {
    data(&format!("orphans/{rel}")).to_string_lossy().into_owned()
}

#[test]
fn exit_codes_output_and_policy() {
    assert_eq!(transcriptd(&["orphans", &case("claude-code/0003_an_earlier_turn_left_unanswered_is_not_an_orphan.jsonl")]).status.code(), Some(0));
    let out = transcriptd(&["orphans", "-o", "json", &case("claude-code/0002_split_message_one_of_two_parallel_calls_answered.jsonl")]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for (key, want) in [("call_id", "toolu_e"), ("tool", "Edit"), ("side_effect", "write"), ("handling", "abort"), ("format", "claude-code")] {
        assert_eq!(v[key], want, "{v}");
    }
    assert_eq!(v["line"], 3);
    let out = transcriptd(&["orphans", "--policy", "skip", &case("codex/0001_function_call_at_the_tail_has_no_output.jsonl")]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.ends_with(":5: error: orphan_call: call to `exec_command` [call_2] has no result; side effect external: skip\n"), "{text}");
    // Only paused calls: nothing to handle.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("s.jsonl");
    std::fs::copy(case("codex/0005_pending_json_pauses_calls/rollout.jsonl"), &f).unwrap();
    std::fs::write(dir.path().join("pending.json"), r#"[{"call_id":"call_wait"},{"call_id":"call_run"}]"#).unwrap();
    let out = transcriptd(&["orphans", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(String::from_utf8(out.stdout).unwrap().matches(": warning: orphan_call: call to ").count(), 2);
}

#[test]
fn bad_registry_pending_json_or_path_exit_2() {
    let session = case("claude-code/0001_call_at_the_tail_has_no_result.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let reg = dir.path().join("tools.toml");
    std::fs::write(&reg, "[tools]\nBash = \"explosive\"\n").unwrap();
    let out = transcriptd(&["orphans", "--registry", reg.to_str().unwrap(), &session]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tools.toml") && err.contains("line 2") && err.contains("explosive"), "{err}");
    let f = dir.path().join("s.jsonl");
    std::fs::copy(&session, &f).unwrap();
    std::fs::write(dir.path().join("pending.json"), r#"[{"id":"x"}]"#).unwrap();
    let out = transcriptd(&["orphans", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("entry 0 has no string call_id"));
    assert_eq!(transcriptd(&["orphans", "/nonexistent/x.jsonl"]).status.code(), Some(2));
    assert_eq!(transcriptd(&["orphans", "--policy", "maybe", &session]).status.code(), Some(2));
}

#[test]
fn a_live_file_gets_a_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("live.jsonl");
    std::fs::copy(case("claude-code/0001_call_at_the_tail_has_no_result.jsonl"), &f).unwrap();
    // Just written: the call at the tail is still running.
    let out = transcriptd(&["orphans", "--grace", "1h", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("still within the"), "{}", String::from_utf8_lossy(&out.stderr));
    // Quiet for two hours: an orphan.
    let file = std::fs::File::options().write(true).open(&f).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(7200)).unwrap();
    let out = transcriptd(&["orphans", "--grace", "1h", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stdout).unwrap().contains("[toolu_a]"));
}
