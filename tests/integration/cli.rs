//! The command-line contract of `check`: exit codes, output formats, strict mode, stdin, paths,
//! broken pipes.

use super::support::{data, stdout, transcriptd};
use std::io::Write;
use std::process::{Command, Stdio};

fn case(rel: &str) -> String {
    data(&format!("check/{rel}")).to_string_lossy().into_owned()
}

#[test]
fn exit_codes() {
    assert_eq!(transcriptd(&["check", &case("claude-code/0001_split_message_clean.jsonl")]).status.code(), Some(0));
    assert_eq!(transcriptd(&["check", &case("claude-code/0004_orphan_result.jsonl")]).status.code(), Some(1));
    // A call the agent answers on resume (a kill mid-tool) is a warning: the session resumes.
    assert_eq!(transcriptd(&["check", &case("claude-code/0002_orphan_call_at_end.jsonl")]).status.code(), Some(0));
    // Warnings only: clean.
    assert_eq!(transcriptd(&["check", &case("claude-code/0016_invalid_arguments.jsonl")]).status.code(), Some(0));
    let missing = transcriptd(&["check", "/nonexistent/x.jsonl"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/x.jsonl"));
    assert_eq!(transcriptd(&["check", "--bogus"]).status.code(), Some(2));
}

#[test]
fn json_output_has_the_documented_fields() {
    let out = transcriptd(&["check", "-o", "json", &case("codex/0002_unanswered_call_when_new_user_turn_starts.jsonl")]);
    let v: serde_json::Value = serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    for key in ["file", "line", "format", "kind", "severity", "call_id", "message"] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert_eq!(v["kind"], "unanswered_call");
    assert_eq!(v["format"], "codex");
    assert_eq!(v["tool"], "exec_command");
}

#[test]
fn text_output_names_file_and_line() {
    let f = case("claude-code/0004_orphan_result.jsonl");
    let out = transcriptd(&["check", &f]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with(&format!("{f}:2: error: orphan_result:")), "{text}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 error"));
}

#[test]
fn strict_stops_at_the_first_bad_line() {
    let f = case("claude-code/0014_framing_errors.jsonl");
    let out = transcriptd(&["check", "--strict", &f]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{f}:2: error: malformed_line: ")), "{err}");
    // Lenient: all of them, exit 1.
    let out = transcriptd(&["check", &f]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 4);
}

#[test]
fn stdin_and_directories() {
    let input = std::fs::read(case("anthropic/0002_unanswered_call.jsonl")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_transcriptd"))
        .args(["check", "-o", "json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(v["file"], "-");
    // A directory is searched recursively; output is sorted by path, then line.
    let out = transcriptd(&["check", "-o", "json", "--jobs", "3", &case("")]);
    let files: Vec<(String, u64)> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| (v["file"].as_str().unwrap().to_owned(), v["line"].as_u64().unwrap()))
        .collect();
    let mut sorted = files.clone();
    sorted.sort();
    assert_eq!(files, sorted);
    assert!(files.iter().any(|(f, _)| f.contains("openai-chat")));
}

#[test]
fn line_limit() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("long.jsonl");
    let long = format!("{{\"role\":\"user\",\"content\":\"{}\"}}\n{{\"role\":\"assistant\",\"content\":\"ok\"}}\n", "x".repeat(5000));
    std::fs::write(&f, long).unwrap();
    let out = transcriptd(&["check", "-o", "json", "--max-line-bytes", "1k", f.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("\"line_too_long\"") && text.contains("\"line\":1"), "{text}");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn broken_pipe_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("many.jsonl");
    let mut body = String::new();
    for i in 0..20000 {
        body.push_str(&format!("{{\"role\":\"tool\",\"tool_call_id\":\"c{i}\",\"content\":\"x\"}}\n"));
    }
    std::fs::write(&f, body).unwrap();
    let mut child =
        Command::new(env!("CARGO_BIN_EXE_transcriptd")).args(["check", f.to_str().unwrap()]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("error"));
}

#[test]
fn missing_transcript_beside_a_meta_sidecar_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("agent-1.meta.json"), "{}").unwrap();
    let out = transcriptd(&["check", "-o", "json", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("missing_transcript") && text.contains("agent-1.jsonl"), "{text}");
}

/// Each finding of the main conversation says what resuming does about it (`on_resume`): what
/// the agent does (Claude Code, Codex), or the API's own error (the API formats, each its own
/// once the file says which API it is for); not a sidechain's finding, nor one demoted because
/// resume never sends its branch; and text output appends it to the message.
#[test]
fn findings_say_what_resume_does_about_them() {
    let on_resume = |fixture: &str| -> Vec<(String, Option<String>)> {
        let o = transcriptd(&["check", "--no-summary", "-o", "json", data(fixture).to_str().unwrap()]);
        super::support::json_lines(&o).iter().map(|v| (v["kind"].as_str().unwrap().to_owned(), v["on_resume"].as_str().map(str::to_owned))).collect()
    };
    let said = |s: &str| Some(s.to_owned());
    assert_eq!(
        on_resume("check/claude-code/0002_orphan_call_at_end.jsonl"),
        [("orphan_call".to_owned(), said("on resume Claude Code answers it as interrupted: its real result is lost"))]
    );
    assert_eq!(
        on_resume("check/claude-code/0008_duplicate_call_id_is_one_pending_call.jsonl")[0].1,
        said("on resume Claude Code does not send this call, nor a result for its id after it")
    );
    assert_eq!(on_resume("check/codex/0003_orphan_call_at_end.jsonl")[0].1, said("on resume Codex answers it \"aborted\": its real result is lost"));
    assert_eq!(
        on_resume("check/anthropic/0002_unanswered_call.jsonl")[0].1,
        said("the API refuses it: \"`tool_use` ids were found without `tool_result` blocks immediately after\"")
    );
    assert_eq!(
        on_resume("check/openai-chat/0003_orphan_tool_message.jsonl")[0].1,
        said("the API refuses it: \"messages with role 'tool' must be a response to a preceeding message with 'tool_calls'\"")
    );
    // A call the agent answers on resume is a warning; one in a file whose chain is cut (a line
    // names a parent not in the file: here the walk bridges it past the call, and Claude Code
    // 2.1.332 left the call out, TRUTH.md) stays an error.
    let severity = |fixture: &str| -> Vec<(String, String, Option<String>)> {
        let o = transcriptd(&["check", "--no-summary", "-o", "json", data(fixture).to_str().unwrap()]);
        super::support::json_lines(&o)
            .iter()
            .map(|v| (v["kind"].as_str().unwrap().to_owned(), v["severity"].as_str().unwrap().to_owned(), v["on_resume"].as_str().map(str::to_owned)))
            .collect()
    };
    assert_eq!(severity("check/claude-code/0002_orphan_call_at_end.jsonl")[0].1, "warning");
    assert_eq!(
        severity("real/derived/claude-code/short.orphan-tool-use.jsonl"),
        [(
            "orphan_call".to_owned(),
            "error".to_owned(),
            said("on resume Claude Code answers it as interrupted if its chain walk reaches it; a line of this file names a parent that is not in it, and where the walk bridges that past the call, the call is left out")
        )]
    );
    // A subagent's thread is not what resume sends; an abandoned branch is never sent.
    assert!(on_resume("check/claude-code/0020_inline_subagent_break_stays_in_its_thread.jsonl").iter().all(|(_, r)| r.is_none()));
    assert_eq!(on_resume("check/claude-code/0011_rewind_demotes_findings_on_abandoned_branch.jsonl"), [("unanswered_call".to_owned(), None)]);
    let o = transcriptd(&["check", "--no-summary", data("check/claude-code/0002_orphan_call_at_end.jsonl").to_str().unwrap()]);
    assert!(
        stdout(&o).contains("has no result at the end of the transcript; on resume Claude Code answers it as interrupted: its real result is lost ["),
        "{}",
        stdout(&o)
    );
}
