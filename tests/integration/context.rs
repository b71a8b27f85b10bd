//! `context` and `history`: data-driven cases (`tests/data/context/<format>/NNNN_name.jsonl`
//! against `NNNN_name.expected`: where the cut is, which lines the raw output keeps, the
//! canonical context and the history), the real compactions, and the bound on bytes read.

use super::support::{data, expect_file, generate, json_lines, jsonl_files, stderr, stdout, transcriptd};
use std::path::Path;
use transcriptd::cli::conversation::{history, Render};
use transcriptd::cli::rebuilt::{scan, write, Scanned};
use transcriptd::sources::batch::Input;
use transcriptd::sources::reverse::FIRST_PAGE;
use transcriptd::transcript::context::resume::Cut;

const MAX: usize = 64 << 20;

/// The 1-based line at `offset`.
fn line_at(input: &[u8], offset: u64) -> usize {
    input[..offset as usize].iter().filter(|b| **b == b'\n').count() + 1
}

/// The context of `input`, checked to be the same whatever the page size.
fn context(input: &[u8]) -> Scanned {
    let first = scan(&mut &input[..], None, MAX, FIRST_PAGE).unwrap();
    for page in [1, 3, 64] {
        let other = scan(&mut &input[..], None, MAX, page).unwrap();
        assert_eq!(other.context, first.context, "page size {page}");
    }
    first
}

fn render(case: &Path) -> String {
    let input = std::fs::read(case).unwrap();
    let s = context(&input);
    let ctx = &s.context;
    let mut out = String::from("# cut\n");
    match ctx.cut {
        Cut::Whole => out.push_str("whole file\n"),
        Cut::Bounded { offset } => out.push_str(&format!("bounded at line {}\n", line_at(&input, offset))),
    }
    let raw: Vec<String> = ctx.lines.iter().map(|l| line_at(&input, l.offset).to_string()).collect();
    out.push_str(&format!("# raw lines\n{}\n", raw.join(" ")));
    let mut skipped: Vec<_> = ctx.skipped.iter().map(|k| (line_at(&input, k.offset), k.kind)).collect();
    skipped.sort();
    out.push_str("# skipped\n");
    for (line, kind) in skipped {
        out.push_str(&format!("line {line}: {kind}\n"));
    }
    let mut canonical = Vec::new();
    write(ctx, false, &mut canonical).unwrap();
    out.push_str("# context\n");
    out.push_str(&String::from_utf8(canonical).unwrap());
    let mut hist = Vec::new();
    let faults = history(&Input::File(case.to_path_buf()), None, MAX, Render::Canonical, &mut hist).unwrap();
    out.push_str("# history\n");
    out.push_str(&String::from_utf8(hist).unwrap());
    for f in faults {
        out.push_str(&format!("# history fault: line {} {}\n", f.line, f.kind));
    }
    out
}

#[test]
fn every_case_matches_its_expectation() {
    let mut count = 0;
    for case in jsonl_files(&data("context")) {
        let format = case.parent().unwrap().file_name().unwrap().to_str().unwrap().to_owned();
        let input = std::fs::read(&case).unwrap();
        assert_eq!(context(&input).context.format.map(|f| f.to_string()), Some(format), "{}", case.display());
        expect_file(&case.with_extension("expected"), &render(&case));
        count += 1;
    }
    assert!(count >= 20, "only {count} cases");
}

#[test]
fn the_real_claude_compaction_cuts_at_its_boundary() {
    let f = data("real/claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.slice-L1168-L1863.jsonl");
    let input = std::fs::read(&f).unwrap();
    let s = context(&input);
    let Cut::Bounded { offset } = s.context.cut else { panic!("no cut") };
    assert_eq!(line_at(&input, offset), 89, "PROVENANCE: the boundary is line 89 of the slice");
    assert_eq!(s.context.lines.len(), 696 - 89);
    assert!(s.context.skipped.is_empty());
    let mut out = Vec::new();
    write(&s.context, false, &mut out).unwrap();
    let first: serde_json::Value = serde_json::from_slice(out.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["role"], "user");
    assert!(first["content"].as_str().unwrap().starts_with("This session is being continued"), "the summary comes first");
    for l in out.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(l).unwrap();
        let mut keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["content", "role"], "persistence-only fields are dropped");
    }
    // Split assistant lines are one message each: no two assistant records in a row share an id.
    let ids: Vec<Option<String>> = input
        .split(|b| *b == b'\n')
        .skip(89)
        .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "assistant")
        .map(|v| v["message"]["id"].as_str().map(str::to_owned))
        .collect();
    let mut distinct = ids.clone();
    distinct.dedup();
    let assistants = String::from_utf8(out).unwrap().lines().filter(|l| l.starts_with(r#"{"role":"assistant""#)).count();
    assert_eq!(assistants, distinct.len());
    assert!(assistants < ids.len(), "the fixture does split messages");
}

#[test]
fn the_real_codex_compaction_without_window_number_is_a_full_replay() {
    let f = data("real/codex/localpush/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl");
    let input = std::fs::read(&f).unwrap();
    let s = context(&input);
    assert_eq!(s.context.cut, Cut::Whole);
    assert!(s.stats.reached_start);
    let mut raw = Vec::new();
    write(&s.context, true, &mut raw).unwrap();
    assert_eq!(raw, input, "--raw of a full replay is the file");
}

/// Bytes read by `context` against the post-compaction size (from the last boundary line to the
/// end). The reader's pages are each as large as everything read before them, so what it reads
/// stays within twice what follows the boundary (the first page is the floor for tiny tails).
fn assert_read_within_twice(input: &[u8]) -> (u64, u64) {
    let s = context(input);
    let Cut::Bounded { offset } = s.context.cut else { panic!("no boundary") };
    let post = input.len() as u64 - offset;
    assert!(s.stats.bytes_read <= 2 * post.max(FIRST_PAGE as u64 / 2), "read {} bytes for a post-compaction size of {post}", s.stats.bytes_read);
    (s.stats.bytes_read, post)
}

#[test]
fn bytes_read_stay_within_twice_the_post_compaction_size() {
    let real = std::fs::read(data("real/claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.slice-L1168-L1863.jsonl")).unwrap();
    assert_read_within_twice(&real);
    // Generated sessions with a boundary at every position the generator picks, small and large
    // tails alike: cut the file just before each line, keeping the last boundary before it.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("g.jsonl");
    generate(&f, &["--lines", "3000", "--seed", "7", "--compact-boundary", "0.15", "--split-assistant"]);
    let input = std::fs::read(&f).unwrap();
    let boundaries: Vec<usize> = input
        .split_inclusive(|b| *b == b'\n')
        .scan(0usize, |o, l| {
            let at = *o;
            *o += l.len();
            Some((at, l))
        })
        .filter(|(_, l)| l.windows(28).any(|w| w == b"\"subtype\":\"compact_boundary\""))
        .map(|(at, _)| at)
        .collect();
    assert!(boundaries.len() > 5, "the generator wrote boundaries");
    for (i, &b) in boundaries.iter().enumerate() {
        let end = boundaries.get(i + 1).copied().unwrap_or(input.len());
        let (_, post) = assert_read_within_twice(&input[..end]);
        assert_eq!(post, (end - b) as u64);
    }
}

#[test]
fn cli_context_raw_and_exit_codes() {
    let case = data("context/codex/0001_bounded_cut_at_the_compaction.jsonl");
    let input = std::fs::read_to_string(&case).unwrap();
    let out = transcriptd(&["context", "--raw", "--no-summary", case.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let raw = String::from_utf8(out.stdout).unwrap();
    let first = raw.lines().next().unwrap();
    assert_eq!(first, input.lines().next().unwrap(), "the session_meta line comes first");
    assert!(raw.lines().nth(1).unwrap().contains("\"type\":\"compacted\""), "then the lines from the cut");
    assert!(input.ends_with(raw.split_once('\n').unwrap().1), "to the end");
    let bad = data("context/claude-code/0005_unreadable_lines_after_the_boundary.jsonl");
    let out = transcriptd(&["context", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "unreadable lines are findings");
    let err = String::from_utf8_lossy(&out.stderr);
    // The read stopped at the boundary, so lines are located from the end of the file.
    assert!(err.contains(": error: malformed_line: ") && err.contains("(at byte 855, line 4 from the end)\n"), "{err}");
    assert!(err.contains(": error: torn_line: ") && err.contains(", line 1 from the end)\n"), "{err}");
    assert_eq!(transcriptd(&["context", "/nonexistent.jsonl"]).status.code(), Some(2));
    assert_eq!(transcriptd(&["history", "/nonexistent.jsonl"]).status.code(), Some(2));
    let out = transcriptd(&["history", "--raw", data("context/claude-code/0001_two_boundaries_the_last_wins.jsonl").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 10, "conversation and boundary lines; not progress");
}

#[test]
fn a_bounded_rollout_without_its_session_meta_is_reported() {
    let input = std::fs::read_to_string(data("context/codex/0001_bounded_cut_at_the_compaction.jsonl")).unwrap();
    let headless = input.split_once('\n').unwrap().1;
    let s = context(headless.as_bytes());
    assert!(s.context.head_missing);
    assert!(matches!(s.context.cut, Cut::Bounded { .. }));
    assert!(String::from_utf8_lossy(&s.context.lines[0].bytes).contains("\"type\":\"compacted\""), "the cut comes first");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rollout.jsonl");
    std::fs::write(&f, headless).unwrap();
    let out = transcriptd(&["context", "--no-summary", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a session_meta"));
    // With its head, nothing is missing.
    assert!(!context(input.as_bytes()).context.head_missing);
}

/// The binary prints what the agent itself adds on resume: the records of the case's
/// expectation, the agent's answers to open calls among them, as JSON and, as text, the same
/// records for people.
#[test]
fn cli_context_prints_what_the_agent_adds_on_resume() {
    for (case, added) in [
        ("context/claude-code/0006_open_call_at_the_end_gets_the_interrupted_result", "[Tool call interrupted: the session ended"),
        ("context/claude-code/0007_trailing_user_message_gets_no_response_requested", "No response requested."),
        ("context/codex/0017_open_call_is_answered_aborted_right_after_it", r#""call_id":"c1","output":"aborted""#),
        ("context/claude-code/0011_local_command_lines_are_user_text", "Kept model as Default</local-command-stdout>"),
    ] {
        let f = data(&format!("{case}.jsonl"));
        let out = transcriptd(&["context", "--no-summary", f.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{case}");
        let got = String::from_utf8(out.stdout).unwrap();
        assert!(got.contains(added), "{case}: {got}");
        let expected = std::fs::read_to_string(f.with_extension("expected")).unwrap();
        let context = expected.split_once("# context\n").unwrap().1.split_once("# history\n").unwrap().0;
        assert_eq!(got, context, "{case}: the binary prints the case's context");
        let text = transcriptd(&["context", "--no-summary", "-o", "text", f.to_str().unwrap()]);
        assert_eq!(text.status.code(), Some(0), "{case}");
        let shown = String::from_utf8_lossy(&text.stdout);
        let word = if case.contains("codex") { "aborted" } else { added };
        assert!(shown.contains(word), "{case}: -o text shows it: {shown}");
    }
}

/// The chain-walk cases (`tests/data/resume/claude-code`, measured against Claude Code by
/// `oracle.rs`): `check`'s findings are those in `NNNN_name.expected` (`line kind severity
/// [call_id]`), and a case that loses history on resume (`lost_on_resume`) is repaired into a
/// file that checks clean, whose `context` sends every message line the input had but the
/// unreadable ones, and whose rejects hold the line as it was.
#[test]
fn the_chain_walk_cases_check_as_expected_and_repair_keeps_their_history() {
    let mut cases = jsonl_files(&data("resume/claude-code"));
    cases.sort();
    assert!(cases.len() >= 7);
    let tmp = tempfile::tempdir().unwrap();
    for case in &cases {
        let o = transcriptd(&["check", "-o", "json", "--no-summary", case.to_str().unwrap()]);
        let mut actual = String::new();
        for v in json_lines(&o) {
            actual.push_str(&format!("{} {} {}", v["line"].as_u64().unwrap_or(0), v["kind"].as_str().unwrap(), v["severity"].as_str().unwrap()));
            if let Some(c) = v["call_id"].as_str() {
                actual.push_str(&format!(" {c}"));
            }
            actual.push('\n');
        }
        expect_file(&case.with_extension("expected"), &actual);
        if !actual.contains("lost_on_resume") {
            continue;
        }
        let ctx = transcriptd(&["context", "--raw", "--no-summary", case.to_str().unwrap()]);
        assert_eq!(ctx.status.code(), Some(1), "{}: context says history is lost: {}", case.display(), stderr(&ctx));
        assert!(stderr(&ctx).contains("error: lost_on_resume: "), "{}", stderr(&ctx));
        let out = tmp.path().join(case.file_stem().unwrap());
        let o = transcriptd(&["repair", "--no-summary", "--out", out.to_str().unwrap(), case.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let repaired = out.join(case.file_name().unwrap());
        let check = transcriptd(&["check", "--no-summary", repaired.to_str().unwrap()]);
        assert_eq!(check.status.code(), Some(0), "{}", stdout(&check));
        let ctx = transcriptd(&["context", "--raw", "--no-summary", repaired.to_str().unwrap()]);
        assert_eq!(ctx.status.code(), Some(0), "{}", stderr(&ctx));
        let messages = |text: &str| -> Vec<String> {
            text.lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter(|v| matches!(v["type"].as_str(), Some("user" | "assistant")))
                .map(|v| v["uuid"].as_str().unwrap_or_default().to_owned())
                .collect()
        };
        let input = std::fs::read_to_string(case).unwrap();
        assert_eq!(messages(&stdout(&ctx)), messages(&input), "{}: every message line is sent", case.display());
        let rejects = std::fs::read_to_string(out.join(format!("{}.rejects.jsonl", case.file_stem().unwrap().to_str().unwrap()))).unwrap();
        assert!(rejects.lines().any(|l| l.contains("\"reason\":\"lost_on_resume\"") && l.contains("\"action\":\"modified\"")), "{rejects}");
    }
}

/// Gemini CLI's upsert log: `history` shows a record appended again once, where it first stood,
/// as its last version left it; `--raw` prints every version as written.
#[test]
fn history_shows_a_gemini_record_once_as_its_last_version() {
    let file = data("agents/sessions/gemini-cli-0.61.0/resumed-after-kill-mid-tool.jsonl");
    let out = transcriptd(&["history", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let lines: Vec<u64> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["line"].as_u64().unwrap()).collect();
    // Line 11 is the first version of the model record line 13 appends again with its call.
    assert_eq!(lines, [3, 5, 9, 13, 13, 14, 16], "the record of lines 11 and 13 once, as line 13");
    let text = String::from_utf8(transcriptd(&["history", "-o", "text", file.to_str().unwrap()]).stdout).unwrap();
    assert_eq!(text.matches("I will run it.").count(), 2, "the first session's and the resumed one's, once each: {text}");
    let raw = String::from_utf8(transcriptd(&["history", "--raw", file.to_str().unwrap()]).stdout).unwrap();
    assert_eq!(raw.matches("7e2de407-682b-44af-932b-c4067beee7f9").count(), 2, "both versions, as written");
}
