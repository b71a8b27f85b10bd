//! `transcriptd explain`: an API error as the user pastes it, traced to the session line behind
//! it, the finding there, and the commands that repair and resume it (issue 27, point 4). That
//! its positions count as the real agent's requests do is `oracle::explain_traces_…`.

use super::support::{data, put, put_fixture, stderr, stdout, transcriptd, transcriptd_home};
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

const ID: &str = "0c6e3f4e-2a57-4b0e-9d7c-1e1c0d3f5a11";
const CALL: &str = "toolu_bdrk_01NNGBKLENmr7j3TfUKZW7rz";

/// A home with one Claude Code session (a real one, its last call left without a result).
fn home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    put_fixture("real/claude-code/codemie/incremental-subagents/turn-1.jsonl", &home.path().join(format!(".claude/projects/-w-app/{ID}.jsonl")));
    home
}

fn api_error(message: &str) -> String {
    format!(r#"API Error: 400 {{"type":"error","error":{{"type":"invalid_request_error","message":"{message}"}}}}"#)
}

#[test]
fn an_api_error_is_traced_to_its_line_the_finding_there_and_the_commands_that_repair_and_resume() {
    let home = home();
    let error = api_error(&format!("messages.13: `tool_use` ids were found without `tool_result` blocks immediately after: {CALL}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."));
    let o = transcriptd_home(home.path(), &["explain", "0c6e3f", &error]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{}", stderr(&o));
    let file = home.path().join(format!(".claude/projects/-w-app/{ID}.jsonl"));
    for want in [
        "(a tool call whose result is not in the message after it)".to_owned(),
        "messages.13: an assistant message of 2 blocks, from lines 24, 25".to_owned(),
        format!("{CALL}: called at line 25, answered nowhere in the file"),
        format!("{}:25: warning: orphan_call:", file.display()),
        format!("to fix: quit the agent, then `transcriptd repair --in-place {}`", file.display()),
        format!("then resume: cd /Users/User/repo/codemie-ai/codemie-code && claude --resume {ID}"),
    ] {
        assert!(out.contains(&want), "{want:?} not in\n{out}");
    }
    assert!(!out.contains("another request"), "{out}");

    // Repaired, the file has nothing left that the error could be about.
    let o = transcriptd(&["repair", "--in-place", "--min-idle", "0s", "-q", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = transcriptd_home(home.path(), &["explain", file.to_str().unwrap(), &error]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("check finds no error in the file as it is now"), "{}", stdout(&o));
}

#[test]
fn the_error_is_read_from_stdin_and_the_answer_written_as_json() {
    let home = home();
    let explain = |error: &str| -> Value {
        let mut child = Command::new(env!("CARGO_BIN_EXE_transcriptd"))
            .env("HOME", home.path())
            .args(["explain", "-o", "json", ID, "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(error.as_bytes()).unwrap();
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(1));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    // The call's block is at its line; the result after it is the agent's own "interrupted" one.
    let v = explain(&format!("messages.13.content.1: `tool_use` ids must be unique: {CALL}"));
    assert_eq!(v["error"]["rule"], "duplicate_id");
    assert_eq!(v["at"]["type"], "tool_use");
    assert_eq!(v["at"]["call_id"], CALL);
    assert_eq!(v["at"]["from"], serde_json::json!([{"line": 25}]));
    assert_eq!(v["ids"], serde_json::json!([{"id": CALL, "calls": [25], "results": []}]));
    assert_eq!(v["findings"][0]["kind"], "orphan_call");
    assert_eq!(v["resume_command"], format!("cd /Users/User/repo/codemie-ai/codemie-code && claude --resume {ID}"));
    let v = explain(&api_error(&format!("messages.14.content.0: unexpected `tool_use_id` found in `tool_result` blocks: {CALL}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.")));
    assert_eq!(v["at"]["type"], "tool_result");
    assert!(v["at"]["from"][0]["made_by_agent"].as_str().unwrap().contains("answers a call the session ended before"), "{v}");
    // Past the history: the new prompt, then nothing the file gives.
    assert_eq!(explain("messages.16: text content blocks must be non-empty")["at"]["new_turn"], true);
    let v = explain("messages.40.content.0: text content blocks must be non-empty");
    assert_eq!((v["at"]["role"].clone(), v["request_messages"].clone()), (Value::Null, Value::from(16)));
}

#[test]
fn a_position_that_does_not_hold_the_quoted_id_says_the_request_was_another() {
    let home = home();
    let o = transcriptd_home(
        home.path(),
        &["explain", ID, &format!("messages.3: `tool_use` ids were found without `tool_result` blocks immediately after: {CALL}.")],
    );
    assert!(stdout(&o).contains(&format!("{CALL} is not in messages.3 of the request this file gives, nor next to it")), "{}", stdout(&o));
    let o = transcriptd_home(home.path(), &["explain", ID, "messages.40: text content blocks must be non-empty"]);
    assert!(stdout(&o).contains("messages.40: the request this file gives has 16 messages (and the new prompt)"), "{}", stdout(&o));
}

#[test]
fn codex_errors_are_traced_by_call_id() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl");
    put(&file, std::fs::read_to_string(data("check/codex/0003_orphan_call_at_end.jsonl")).unwrap().replace("\"c1\"", "\"call_K2v9Qa\""));
    let o = transcriptd(&["explain", file.to_str().unwrap(), "No tool output found for function call call_K2v9Qa."]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("call_K2v9Qa: called at line 3, answered nowhere in the file"), "{out}");
    assert!(out.contains(":3: warning: orphan_call:"), "{out}");
    assert!(out.contains("then resume: codex resume 019c8a70-dda7-7f33-98ea-f30553347322"), "{out}");
}

#[test]
fn an_error_that_names_nothing_and_a_session_that_is_not_there_are_usage_errors() {
    let home = home();
    let o = transcriptd_home(home.path(), &["explain", ID, "something went wrong"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("names no request position (messages.N), no call id"), "{}", stderr(&o));
    let o = transcriptd_home(home.path(), &["explain", "ffffffff", "messages.1: x"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = transcriptd_home(home.path(), &["explain", "./no/such.jsonl", "messages.1: x"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no such file"), "{}", stderr(&o));
}

#[test]
fn an_openai_chat_error_is_traced_by_its_message_index() {
    let file = data("check/openai-chat/0003_orphan_tool_message.jsonl");
    let error = r#"{"error":{"message":"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.","type":"invalid_request_error","param":"messages.[1].role","code":null}}"#;
    let o = transcriptd(&["explain", "-o", "json", file.to_str().unwrap(), error]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["error"]["rule"], "result_without_call");
    assert_eq!(v["at"]["role"], "tool");
    assert_eq!(v["at"]["from"], serde_json::json!([{"line": 2}]));
    assert_eq!(v["findings"][0]["kind"], "orphan_result");
    assert_eq!(v["findings"][0]["line"], 2);
}
