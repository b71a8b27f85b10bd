//! Conversation threads (Claude Code 1.0.x inline subagents): interleaved threads are never a
//! finding, and repair never edits a thread for what another thread did. The cases are the
//! hand-written (synthetic) files `tests/data/check/claude-code/0019..0021`, shaped like the
//! 1.0.x files in `tests/data/real/`.

use super::support::data;
use serde_json::Value;
use transcriptd::transcript::repair::{Edit, OrphanPolicy};
use transcriptd::transcript::repair_run::repair_bytes;
use transcriptd::transcript::{check_bytes, Options, Severity};

fn case(name: &str) -> Vec<u8> {
    std::fs::read(data("check/claude-code").join(name)).unwrap()
}

fn lines(b: &[u8]) -> Vec<Value> {
    b.split(|c| *c == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect()
}

/// The chain of uuids from the last line of `thread` (main: not sidechain) up to its root.
fn chain_from_leaf(b: &[u8], sidechain: bool) -> Vec<String> {
    let ls = lines(b);
    let by_uuid: std::collections::HashMap<&str, &Value> = ls.iter().map(|v| (v["uuid"].as_str().unwrap(), v)).collect();
    let leaf = ls.iter().rev().find(|v| v["isSidechain"].as_bool() == Some(sidechain)).unwrap();
    let mut chain = vec![leaf["uuid"].as_str().unwrap().to_owned()];
    let mut at = leaf;
    while let Some(p) = at["parentUuid"].as_str() {
        at = by_uuid[p];
        chain.push(p.to_owned());
    }
    chain
}

#[test]
fn interleaved_subagents_are_clean_and_repair_leaves_them_alone() {
    let input = case("0019_inline_subagents_interleave_without_findings.jsonl");
    let (findings, _, _) = check_bytes(&input, Options::default()).unwrap();
    assert!(findings.is_empty(), "{findings:?}");
    let r = repair_bytes(&input, &Options::default(), OrphanPolicy::Answer, 4).unwrap();
    assert!(r.plans[0].is_empty(), "{:?}", r.plans[0]);
    assert_eq!(r.output, input);
}

#[test]
fn a_break_in_a_subagent_is_repaired_in_its_thread_only() {
    let input = case("0020_inline_subagent_break_stays_in_its_thread.jsonl");
    let r = repair_bytes(&input, &Options::default(), OrphanPolicy::Answer, 4).unwrap();
    // One result inserted for agent A's call, after the call's own line; nothing else planned.
    let edits = &r.plans[0].edits;
    assert!(matches!(&edits[..], [Edit::Insert { after: 7, call_id, .. }] if call_id == "toolu_a1"), "{edits:?}");
    let (after, _, _) = check_bytes(&r.output, Options::default()).unwrap();
    assert!(after.iter().all(|f| f.severity != Severity::Error), "{after:?}");
    // The inserted result joins agent A's thread, and A's next line hangs under it.
    let out = lines(&r.output);
    let inserted = &out[7];
    assert_eq!(inserted["isSidechain"], true);
    assert_eq!(inserted["parentUuid"], "a2");
    let a4 = out.iter().find(|v| v["uuid"] == "a4").unwrap();
    assert_eq!(a4["parentUuid"], inserted["uuid"]);
    // Every line of the main thread and of agent B is byte-identical and in order.
    let keep = |b: &[u8]| -> Vec<Vec<u8>> {
        b.split(|c| *c == b'\n')
            .filter(|l| serde_json::from_slice::<Value>(l).is_ok_and(|v| v["uuid"].as_str().is_some_and(|u| u.starts_with('m') || u.starts_with('b'))))
            .map(<[u8]>::to_vec)
            .collect()
    };
    assert_eq!(keep(&r.output), keep(&input));
}

#[test]
fn a_result_written_into_another_thread_is_repaired_where_each_thread_needs_it() {
    let input = case("0021_result_in_another_thread_answers_nothing.jsonl");
    let r = repair_bytes(&input, &Options::default(), OrphanPolicy::Answer, 4).unwrap();
    let edits = &r.plans[0].edits;
    // Agent A's thread loses the result that answers nothing there (line 13); the main thread
    // gets the result its Task call lacks, after the results its turn did get (line 14, agent
    // A's answer): each where it belongs.
    assert!(edits.iter().any(|e| matches!(e, Edit::DropResults { line: 13, call_id, .. } if call_id == "toolu_B")), "{edits:?}");
    assert!(edits.iter().any(|e| matches!(e, Edit::Insert { after: 14, call_id, .. } if call_id == "toolu_B")), "{edits:?}");
    assert_eq!(edits.len(), 2, "{edits:?}");
    let (after, _, _) = check_bytes(&r.output, Options::default()).unwrap();
    assert!(after.iter().all(|f| f.severity != Severity::Error), "{after:?}");
    // Resume follows parentUuid from the main thread's last line: the inserted result is on
    // that chain although subagent lines separate it from the main thread's next line.
    let out = lines(&r.output);
    let inserted = out.iter().find(|v| v["message"]["content"][0]["tool_use_id"] == "toolu_B" && v["isSidechain"] == false).unwrap();
    assert!(chain_from_leaf(&r.output, false).contains(&inserted["uuid"].as_str().unwrap().to_owned()));
}

/// `context` of a file with inline subagents: the main conversation only, a valid resume seed
/// (the Messages API's pairing rules hold, checked by the validator in the `anthropic` format).
pub fn assert_context_is_a_resume_seed(path: &std::path::Path) -> Vec<Value> {
    let out = super::support::transcriptd(&["context", "--no-summary", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", super::support::stderr(&out));
    let opts = Options { format: Some(transcriptd::transcript::Format::Anthropic), ..Options::default() };
    let (findings, stats, _) = check_bytes(&out.stdout, opts).unwrap();
    let errors: Vec<_> = findings.iter().filter(|f| f.severity == Severity::Error).collect();
    assert!(errors.is_empty(), "{}: {errors:?}", path.display());
    assert!(stats.messages > 0, "{}", path.display());
    lines(&out.stdout)
}

#[test]
fn context_leaves_subagents_out_and_is_a_resume_seed() {
    let path = data("check/claude-code/0019_inline_subagents_interleave_without_findings.jsonl");
    let records = assert_context_is_a_resume_seed(&path);
    let text = serde_json::to_string(&records).unwrap();
    assert!(!text.contains("agent A prompt") && !text.contains("toolu_a1"), "{text}");
    assert_eq!(records.len(), 5, "prompt, the merged Task calls, two results, the answer: {text}");
    assert_eq!(records[1]["content"].as_array().unwrap().len(), 3);
}

#[test]
fn history_shows_subagent_records_marked_after_the_call_they_ran_under() {
    let path = data("check/claude-code/0019_inline_subagents_interleave_without_findings.jsonl");
    let out = super::support::transcriptd(&["history", path.to_str().unwrap()]);
    let records = lines(&out.stdout);
    let order: Vec<(u64, bool)> = records.iter().map(|r| (r["line"].as_u64().unwrap(), r["sidechain"] == true)).collect();
    let want: Vec<(u64, bool)> =
        [(1, false), (2, false)].into_iter().chain((5..=12).map(|l| (l, true))).chain([(13, false), (14, false), (15, false)]).collect();
    assert_eq!(order, want);
}

/// The real Claude Code 1.0.x files with inline subagents (tests/data/real/claude-code/happy-cli):
/// no finding, `repair` changes nothing, and `context` is a resume seed without the subagents.
#[test]
fn real_inline_subagent_sessions_are_clean_and_left_alone() {
    let dir = data("real/claude-code/happy-cli");
    let files = super::support::jsonl_files(&dir);
    assert_eq!(files.len(), 2);
    for f in files {
        let input = std::fs::read(&f).unwrap();
        assert!(input.windows(20).any(|w| w == b"\"isSidechain\":true,\""), "{}: has inline subagents", f.display());
        let (findings, _, _) = check_bytes(&input, Options::default()).unwrap();
        assert!(findings.is_empty(), "{}: {findings:?}", f.display());
        let r = repair_bytes(&input, &Options::default(), OrphanPolicy::Answer, 4).unwrap();
        assert!(r.plans[0].is_empty(), "{}: {:?}", f.display(), r.plans[0]);
        let records = assert_context_is_a_resume_seed(&f);
        let prompts = lines(&input).into_iter().filter(|v| v["isSidechain"] == true && v["parentUuid"].is_null()).count();
        assert!(prompts > 0);
        // The subagent's prompt is not a user message of the context (the Task call's input
        // repeats its text, as the model wrote it).
        for v in lines(&input).into_iter().filter(|v| v["isSidechain"] == true && v["parentUuid"].is_null()) {
            assert!(!records.iter().any(|r| r["content"] == v["message"]["content"]), "{}: a subagent prompt in the context", f.display());
        }
    }
}

/// Every real Claude Code session without an error in EXPECTED.jsonl has a `context` that is a
/// valid resume seed.
#[test]
fn context_of_every_clean_real_claude_session_is_a_resume_seed() {
    let expected = std::fs::read_to_string(data("real/EXPECTED.jsonl")).unwrap();
    for f in super::support::jsonl_files(&data("real")) {
        let rel = f.strip_prefix(data("real")).unwrap().to_str().unwrap().to_owned();
        let claude = rel.starts_with("claude-code/") || rel.contains("dag_compact");
        if !claude || expected.contains(&format!("\"{rel}\"")) {
            continue;
        }
        assert_context_is_a_resume_seed(&f);
    }
}

/// A subagent's prompt in the main file is not a user turn; in a subagent's own file its
/// conversation is the sidechain.
#[test]
fn subagent_prompts_are_not_user_turns() {
    let turns = |rel: &str| check_bytes(&std::fs::read(data(rel)).unwrap(), Options::default()).unwrap().1.turns;
    assert_eq!(turns("real/claude-code/happy-cli/task_non_sdk.jsonl"), 1);
    assert_eq!(turns("check/claude-code/0019_inline_subagents_interleave_without_findings.jsonl"), 1);
    assert_eq!(turns("real/claude-code/codemie/-tmp-private/agent-36541525.jsonl"), 1);
    // Parallel Task calls (1.0.98): the main prompts are lines 2 and 3 (a slash command and its
    // `isMeta` expansion) and 434; the five subagent prompts (16, 38, 125, 229, 295) are not turns.
    assert_eq!(turns("real/claude-code/claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"), 3);
    // 1.0.108: main prompts 1 and 2; the subagent prompts 16 and 26 are not turns.
    assert_eq!(turns("real/claude-code/claude-code-viewer/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"), 2);
}
