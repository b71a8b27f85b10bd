//! `sessions list` and `show` over real directory trees: every layout (built from the real
//! transcripts), the meta sidecar errors, the data-loss guard, the listing order and its
//! tie-breakers, prefix lookup and its errors, history and lookup by uuid.

use super::support::{json_lines, put, put_fixture, set_mtime, stderr, stdout, transcriptd, transcriptd_home};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use transcriptd::sessions::{self, Error};

const SLICE: &str = "real/claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.slice-L1168-L1863.jsonl";
const SPOTTER_ID: &str = "258c7280-ae70-4798-800f-63464d01a85d";
const OLD_ID: &str = "4c2ddfdc-b619-4525-8d03-1950fb1b0257";
const CODEX_ID: &str = "019c8bfe-ec25-79e0-97d7-bda6a9c575ff";
const FLAT_ID: &str = "7d1f6a2e-0000-4000-8000-000000000001";

/// A tree with every layout, built from the real transcripts:
///
/// - `claude/-home-USER-spotter/<id>.jsonl` with `<id>/subagents/agent-*.jsonl` (new layout)
/// - `claude/-tmp-private/<id>.jsonl` with `agent-*.jsonl` beside it (old layout)
/// - `codex/2026/02/23/rollout-…-<id>.jsonl`
/// - `ws/20260301T090000Z-s-dir-1/transcript.jsonl` + `.meta.json` (session directory)
/// - `flat/<id>.jsonl` + `<id>.meta.json` without `schema_version` (flat, pre-schema)
fn every_layout(root: &Path) {
    let spotter = root.join("claude/-home-USER-spotter");
    put_fixture(SLICE, &spotter.join(format!("{SPOTTER_ID}.jsonl")));
    for agent in ["agent-a881341", "agent-acompact-fffbd0"] {
        put_fixture(&format!("real/claude-code/spotter/{SPOTTER_ID}/subagents/{agent}.jsonl"), &spotter.join(format!("{SPOTTER_ID}/subagents/{agent}.jsonl")));
    }
    let old = root.join("claude/-tmp-private");
    for f in [format!("{OLD_ID}.jsonl"), "agent-36541525.jsonl".into(), "agent-50243ee8.jsonl".into()] {
        put_fixture(&format!("real/claude-code/codemie/-tmp-private/{f}"), &old.join(&f));
    }
    let rollout = format!("rollout-2026-02-23T20-34-25-{CODEX_ID}.jsonl");
    put_fixture(&format!("real/codex/localpush/{rollout}"), &root.join("codex/2026/02/23").join(&rollout));
    let dir = root.join("ws/20260301T090000Z-s-dir-1");
    put_fixture("check/openai-chat/0001_clean_tool_round_trip.jsonl", &dir.join("transcript.jsonl"));
    put(&dir.join(".meta.json"), r#"{"schema_version":1,"session_id":"s-dir-1","updated_at":"2026-03-01T10:00:00+01:00","title":"from a meta"}"#);
    put_fixture("check/anthropic/0001_clean_tool_round_trip.jsonl", &root.join(format!("flat/{FLAT_ID}.jsonl")));
    put(&root.join(format!("flat/{FLAT_ID}.meta.json")), r#"{"agent_id":"7d1f6a2e","updated_at":"2026-02-25T00:00:00Z"}"#);
}

fn list_json(root: &Path) -> Vec<Value> {
    let out = transcriptd(&["sessions", "list", "-o", "json", root.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    json_lines(&out)
}

fn ids(rows: &[Value]) -> Vec<&str> {
    rows.iter().map(|r| r["id"].as_str().unwrap()).collect()
}

#[test]
fn every_layout_is_listed_with_its_details_most_recent_first() {
    let d = tempfile::tempdir().unwrap();
    every_layout(d.path());
    let rows = list_json(d.path());
    // Subagents (both layouts) are counted, never rows of their own.
    assert_eq!(ids(&rows), ["s-dir-1", FLAT_ID, CODEX_ID, SPOTTER_ID, OLD_ID]);
    let row = |id: &str| rows.iter().find(|r| r["id"] == id).unwrap().clone();

    let s = row("s-dir-1");
    assert_eq!((s["layout"].as_str(), s["format"].as_str()), (Some("directory"), Some("openai-chat")));
    assert_eq!((s["updated"].as_str(), s["updated_from"].as_str()), (Some("2026-03-01T09:00:00.000Z"), Some("meta")));
    assert!(s["path"].as_str().unwrap().ends_with("ws/20260301T090000Z-s-dir-1/transcript.jsonl"));
    assert!(s["meta"].as_str().unwrap().ends_with("20260301T090000Z-s-dir-1/.meta.json"));

    let f = row(FLAT_ID);
    assert_eq!((f["layout"].as_str(), f["format"].as_str(), f["updated_from"].as_str()), (Some("sidecar"), Some("anthropic"), Some("meta")));

    let c = row(CODEX_ID);
    assert_eq!((c["layout"].as_str(), c["format"].as_str()), (Some("rollout"), Some("codex")));
    // The last timestamp in the file (its last line, read from the tail).
    assert_eq!((c["updated"].as_str(), c["updated_from"].as_str()), (Some("2026-02-23T19:36:02.635Z"), Some("transcript")));
    assert_eq!((c["lines"].as_u64(), c["size"].as_u64(), c["subagents"].as_u64()), (Some(63), Some(22660), Some(0)));

    let n = row(SPOTTER_ID);
    assert_eq!((n["layout"].as_str(), n["format"].as_str(), n["subagents"].as_u64()), (Some("file"), Some("claude-code"), Some(2)));
    assert_eq!((n["updated"].as_str(), n["lines"].as_u64()), (Some("2026-02-11T21:46:25.932Z"), Some(696)));

    let o = row(OLD_ID);
    assert_eq!((o["subagents"].as_u64(), o["updated"].as_str()), (Some(2), Some("2025-12-10T19:38:31.216Z")));
    let show = json_lines(&transcriptd(&["show", "4c2d", "--root", d.path().to_str().unwrap(), "-o", "json"]))[0].clone();
    assert_eq!((show["turns"].as_u64(), show["tool_calls"].as_u64(), show["compactions"].as_u64()), (Some(3), Some(6), Some(0)));
    assert_eq!(show["subagents"].as_array().map(Vec::len), Some(2), "old-style subagents, by their sessionId");
}

#[test]
fn text_table_has_a_header_and_one_row_per_session() {
    let d = tempfile::tempdir().unwrap();
    every_layout(d.path());
    let out = transcriptd(&["sessions", "list", d.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("UPDATED") && lines[0].contains("SUBAGENTS") && lines[0].ends_with("PATH"), "{text}");
    assert_eq!(lines.len(), 6, "{text}");
    assert!(lines[1].starts_with("2026-03-01T09:00:00.000Z  openai-chat") && lines[1].contains("s-dir-1"), "{text}");
}

#[test]
fn ties_break_by_transcript_mtime_then_by_id_across_sources() {
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().join("ws");
    let chat = "{\"role\":\"user\",\"content\":\"hi\"}\n";
    // Three sessions active at the same instant, written three ways.
    for (name, updated, mtime) in [
        ("20260101T000000Z-b", "2026-01-01T00:00:00Z", 1000),
        ("20260101T000000Z-a", "2026-01-01T01:00:00+01:00", 1000),
        ("20260101T000000Z-c", "2026-01-01T00:00:00.000000000Z", 2000),
    ] {
        let t = ws.join(name).join("transcript.jsonl");
        put(&t, chat);
        put(&ws.join(name).join(".meta.json"), format!(r#"{{"schema_version":1,"updated_at":"{updated}"}}"#));
        set_mtime(&t, mtime);
    }
    // A Claude-style file whose last timestamp is that instant too, same mtime as a and b.
    let claude = ws.join("0-claude.jsonl");
    put(&claude, "{\"type\":\"user\",\"uuid\":\"u\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"message\":{\"role\":\"user\",\"content\":\"x\"}}\n");
    set_mtime(&claude, 1000);
    // A file without timestamps: its mtime (2026-01-02) makes it the most recent.
    let chat_file = ws.join("z-chat.jsonl");
    put(&chat_file, chat);
    set_mtime(&chat_file, 1_767_312_000);
    // And an older one.
    let old = ws.join("20251231T000000Z-old");
    put(&old.join("transcript.jsonl"), chat);
    put(&old.join(".meta.json"), r#"{"updated_at":"2025-12-31T23:59:59.999Z"}"#);

    let rows = list_json(d.path());
    assert_eq!(ids(&rows), ["z-chat", "c", "0-claude", "a", "b", "old"]);
    assert_eq!(rows[0]["updated_from"], "mtime");
    assert_eq!(rows[0]["updated"], "2026-01-02T00:00:00.000Z");
}

#[test]
fn meta_that_cannot_be_read_leaves_the_session_out_and_show_names_the_error() {
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().join("ws");
    let chat = "{\"role\":\"user\",\"content\":\"hi\"}\n";
    for (id, meta) in [
        ("good", r#"{"session_id":"good","updated_at":"2026-01-01T00:00:00Z"}"#),
        ("corrupt", r#"{"session_id":"#),
        ("future", r#"{"schema_version":99,"updated_at":1234}"#),
        ("typed", r#"{"updated_at":5}"#),
    ] {
        put(&ws.join(format!("20260101T000000Z-{id}/transcript.jsonl")), chat);
        put(&ws.join(format!("20260101T000000Z-{id}/.meta.json")), meta);
    }
    let out = transcriptd(&["sessions", "list", "-o", "json", d.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(ids(&json_lines(&out)), ["good"]);
    assert_eq!(stderr(&out), "", "left out silently");

    let root = d.path().to_str().unwrap();
    let corrupt = transcriptd(&["show", "corrupt", "--root", root]);
    assert_eq!(corrupt.status.code(), Some(2));
    assert!(stderr(&corrupt).contains("20260101T000000Z-corrupt/.meta.json: meta sidecar cannot be parsed"), "{}", stderr(&corrupt));
    let future = transcriptd(&["show", "future", "--root", root]);
    assert_eq!(future.status.code(), Some(2));
    assert!(stderr(&future).contains("schema_version 99, newer than this build supports (1)"), "{}", stderr(&future));
    let typed = transcriptd(&["show", "typed", "--root", root]);
    assert!(stderr(&typed).contains("cannot be parsed"), "{}", stderr(&typed));
    // A file from before schema_version existed loads, and shows its fields.
    let good = transcriptd(&["show", "good", "--root", root, "-o", "json"]);
    assert_eq!(good.status.code(), Some(0), "{}", stderr(&good));
    assert_eq!(json_lines(&good)[0]["meta"]["session_id"], "good");

    // Not found and unparseable are distinct errors of the library too.
    let missing = sessions::load_meta(&ws.join("nope/.meta.json")).unwrap_err();
    assert!(matches!(missing, Error::MetaNotFound { .. }), "{missing}");
    let bad = sessions::load_meta(&ws.join("20260101T000000Z-corrupt/.meta.json")).unwrap_err();
    assert!(matches!(bad, Error::MetaParse { .. }), "{bad}");
    let too_new = sessions::load_meta(&ws.join("20260101T000000Z-future/.meta.json")).unwrap_err();
    assert!(matches!(too_new, Error::UnsupportedSchema { found: 99, supported: 1, .. }), "{too_new}");
}

#[test]
fn a_meta_without_its_transcript_is_lost_data_never_an_empty_session() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().to_str().unwrap();
    put(&d.path().join("flat/gone-1.meta.json"), r#"{"agent_id":"gone-1"}"#);
    put(&d.path().join("ws/20260101T000000Z-lost/.meta.json"), r#"{"schema_version":1}"#);
    put(&d.path().join("flat/kept.jsonl"), "{\"role\":\"user\",\"content\":\"hi\"}\n");

    let out = transcriptd(&["sessions", "list", "-o", "json", root]);
    assert_eq!(out.status.code(), Some(1), "lost data is an error finding");
    assert_eq!(ids(&json_lines(&out)), ["kept"]);
    let err = stderr(&out);
    assert_eq!(err.matches("missing_transcript").count(), 2, "{err}");
    assert!(
        err.contains("flat/gone-1.jsonl: error: missing_transcript: ") && err.contains("20260101T000000Z-lost/transcript.jsonl: error: missing_transcript: "),
        "{err}"
    );

    for prefix in ["gone", "lost"] {
        let show = transcriptd(&["show", prefix, "--root", root]);
        assert_eq!(show.status.code(), Some(2), "{prefix}");
        assert!(stderr(&show).contains("missing_transcript: meta sidecar"), "{}", stderr(&show));
        assert_eq!(stdout(&show), "");
    }
    // `check` guards the same data.
    let check = transcriptd(&["check", "-o", "json", root]);
    assert_eq!(check.status.code(), Some(1));
    assert_eq!(json_lines(&check).iter().filter(|v| v["kind"] == "missing_transcript").count(), 2);
}

#[test]
fn prefix_lookup_errors_are_distinct() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    let chat = "{\"role\":\"user\",\"content\":\"hi\"}\n";
    for id in ["abc", "abcd", "abd1"] {
        put(&root.join(format!("p/{id}.jsonl")), chat);
    }
    put(&d.path().join("outside.jsonl"), chat);
    let r = root.to_str().unwrap();

    let nf = transcriptd(&["show", "zzz", "--root", r]);
    assert_eq!(nf.status.code(), Some(2));
    assert!(stderr(&nf).contains("no session id starts with `zzz` under"), "{}", stderr(&nf));

    let amb = transcriptd(&["show", "ab", "--root", r]);
    assert_eq!(amb.status.code(), Some(2));
    let e = stderr(&amb);
    assert!(e.contains("session id prefix `ab` is ambiguous: 3 sessions match"), "{e}");
    for id in ["abc", "abcd", "abd1"] {
        assert!(e.contains(&format!("  {id}  {}", root.join(format!("p/{id}.jsonl")).display())), "{e}");
    }

    // An id that equals the prefix is chosen over longer ones; a unique prefix resolves.
    for (prefix, id) in [("abc", "abc"), ("abd", "abd1"), ("abcd", "abcd")] {
        let out = transcriptd(&["show", prefix, "--root", r, "-o", "json"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(json_lines(&out)[0]["id"], id);
    }

    // Characters outside ids are refused before anything is read: nothing outside the root.
    for bad in ["../outside", "p/abc", "..", "", "a*", "/etc/passwd"] {
        let out = transcriptd(&["show", bad, "--root", r]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(stderr(&out).contains("invalid session id prefix"), "{bad}: {}", stderr(&out));
    }
    assert!(stderr(&transcriptd(&["show", "outside", "--root", r])).contains("no session id starts with"));
}

#[test]
fn show_summarises_a_real_session_with_a_compaction() {
    let d = tempfile::tempdir().unwrap();
    every_layout(d.path());
    let root = d.path().to_str().unwrap();
    let out = transcriptd(&["show", "258c", "--root", root, "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = &json_lines(&out)[0];
    assert_eq!(s["id"], SPOTTER_ID);
    assert_eq!(s["format"], "claude-code");
    assert_eq!(s["compactions"], 1);
    assert_eq!(s["tool_calls"], s["tool_results"]);
    assert!(s["tool_calls"].as_u64().unwrap() > 10, "{s}");
    // Two user prompts; the compaction's summary message is not a turn.
    assert_eq!(s["turns"], 2, "{s}");
    assert_eq!(s["errors"], 0);
    assert_eq!(s["meta"], Value::Null);
    let subagents: Vec<&str> = s["subagents"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    assert!(subagents[0].ends_with("subagents/agent-a881341.jsonl") && subagents[1].ends_with("subagents/agent-acompact-fffbd0.jsonl"));

    // The session directory shows its meta, fields kept as written.
    let text = stdout(&transcriptd(&["show", "s-dir", "--root", root]));
    assert!(text.contains("layout       directory") && text.contains("\"title\": \"from a meta\""), "{text}");
    assert!(text.contains("updated      2026-03-01T09:00:00.000Z (meta updated_at)"), "{text}");
}

#[test]
fn show_reports_findings_by_kind_and_exits_1_on_errors_only() {
    let d = tempfile::tempdir().unwrap();
    let id = "55604662-cf2a-4331-851a-ec234028f8ca";
    // A result without its call (which Claude Code leaves out on resume): an error.
    put_fixture("real/derived/claude-code/short.orphan-tool-result.jsonl", &d.path().join(format!("-home-marco/{id}.jsonl")));
    let out = transcriptd(&["show", "5560", "--root", d.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("findings     1 error, 0 warnings"), "{text}");
    assert!(text.lines().any(|l| l.trim_start().starts_with("orphan_result") && l.ends_with("1 error")), "{text}");
    let json = transcriptd(&["show", "5560", "--root", d.path().to_str().unwrap(), "-o", "json"]);
    assert_eq!(json_lines(&json)[0]["findings"]["orphan_result"]["errors"], 1);
    // A call left open, which Claude Code answers on resume: a warning, and exit 0.
    put_fixture("check/claude-code/0002_orphan_call_at_end.jsonl", &d.path().join(format!("-home-marco/{id}.jsonl")));
    let out = transcriptd(&["show", "5560", "--root", d.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("findings     0 errors, 1 warning"), "{}", stdout(&out));
}

#[test]
fn history_lists_every_conversation_line_with_compactions_marked() {
    let d = tempfile::tempdir().unwrap();
    every_layout(d.path());
    let root = d.path().to_str().unwrap();
    let out = transcriptd(&["show", SPOTTER_ID, "--root", root, "--history", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let items = json_lines(&out);
    // The records of `transcriptd history`: one canonical message per API message (split
    // assistant lines merged), each compaction as a marker in place.
    let direct = json_lines(&transcriptd(&[
        "history",
        super::support::data("real/claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.slice-L1168-L1863.jsonl").to_str().unwrap(),
    ]));
    assert_eq!(items, direct);
    let compactions: Vec<u64> = items.iter().filter(|i| i["type"] == "compact_boundary").map(|i| i["line"].as_u64().unwrap()).collect();
    assert_eq!(compactions, [89]);
    let lines: Vec<u64> = items.iter().map(|i| i["line"].as_u64().unwrap()).collect();
    assert!(lines.windows(2).all(|w| w[0] < w[1]), "in file order");
    // Messages before the compaction are kept.
    assert!(lines[0] < 89);
    assert!(items.iter().filter(|i| i["type"] != "compact_boundary").all(|m| matches!(m["role"].as_str(), Some("user" | "assistant"))));

    let text = stdout(&transcriptd(&["show", SPOTTER_ID, "--root", root, "--history"]));
    assert!(text.lines().any(|l| l.starts_with("    89  ─── compaction")), "{text}");

    // Codex: response items only (the message items and the calls and their outputs).
    let codex = json_lines(&transcriptd(&["show", "019c8bfe", "--root", root, "--history", "-o", "json"]));
    assert!(codex.iter().any(|i| i["type"] == "function_call_output"), "{codex:?}");
    assert!(codex.iter().all(|i| i["type"] != "event_msg" && i["type"] != "turn_context"));
}

#[test]
fn one_line_by_uuid() {
    let d = tempfile::tempdir().unwrap();
    every_layout(d.path());
    let root = d.path().to_str().unwrap();
    let uuid = "d46d6800-2f43-4360-ba84-c1de9c1ecbae";
    let out = transcriptd(&["show", "258c", "--root", root, "--uuid", uuid, "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let line89 = std::fs::read_to_string(super::support::data(SLICE)).unwrap().lines().nth(88).unwrap().to_owned();
    assert_eq!(stdout(&out), format!("{line89}\n"));
    let text = stdout(&transcriptd(&["show", "258c", "--root", root, "--uuid", uuid]));
    assert!(text.starts_with(&format!("{}:89\n", d.path().join(format!("claude/-home-USER-spotter/{SPOTTER_ID}.jsonl")).display())), "{text}");
    assert!(text.contains("\"subtype\": \"compact_boundary\""), "{text}");

    let missing = transcriptd(&["show", "258c", "--root", root, "--uuid", "no-such-uuid"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("no line has uuid `no-such-uuid`"), "{}", stderr(&missing));
    assert_eq!(transcriptd(&["show", "258c", "--root", root, "--uuid", uuid, "--history"]).status.code(), Some(2), "one or the other");
}

#[test]
fn lookup_prunes_without_missing_sessions() {
    let d = tempfile::tempdir().unwrap();
    let chat = "{\"role\":\"user\",\"content\":\"hi\"}\n";
    let ws = d.path().join("ws");
    for i in 0..40 {
        let dir = ws.join(format!("20260101T{i:06}-{:08x}-0000-4000-8000-000000000000", i * 0x1111));
        put(&dir.join("transcript.jsonl"), chat);
        put(&dir.join(".meta.json"), "{}");
    }
    let r = d.path().to_str().unwrap();
    let out = transcriptd(&["show", "00007777", "--root", r, "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_lines(&out)[0]["id"], "00007777-0000-4000-8000-000000000000");
    // A Claude companion directory is the session's, not a place for sessions.
    let p = d.path().join("claude/-p");
    put(&p.join("e1.jsonl"), chat);
    put(&p.join("e1/subagents/agent-x1.jsonl"), chat);
    assert!(stderr(&transcriptd(&["show", "agent-x1", "--root", r])).contains("no session id starts with"));
    assert_eq!(list_json(d.path()).iter().find(|r| r["id"] == "e1").unwrap()["subagents"], 1);
    // A timestamp-like session file keeps its companion directory, though that directory's
    // name would read as a session directory whose id does not match.
    let t = d.path().join("claude/-t");
    put(&t.join("20260101-abc.jsonl"), chat);
    put(&t.join("20260101-abc/subagents/agent-1.jsonl"), chat);
    let out = transcriptd(&["show", "20260101", "--root", r, "-o", "json"]);
    assert_eq!(json_lines(&out)[0]["subagents"].as_array().map(Vec::len), Some(1), "{}", stderr(&out));
    // An old-style subagent beside its session can be shown by its name.
    put_fixture("real/claude-code/codemie/-tmp-private/agent-36541525.jsonl", &p.join("agent-36541525.jsonl"));
    assert_eq!(transcriptd(&["show", "agent-365", "--root", r]).status.code(), Some(0));
}

#[test]
fn links_are_followed_each_directory_once_and_a_loop_ends() {
    let d = tempfile::tempdir().unwrap();
    let elsewhere = d.path().join("elsewhere/-proj");
    put(&elsewhere.join("linked.jsonl"), "{\"role\":\"user\",\"content\":\"hi\"}\n");
    let root = d.path().join("root");
    put(&root.join("-p/own.jsonl"), "{\"role\":\"user\",\"content\":\"hi\"}\n");
    std::os::unix::fs::symlink(&elsewhere, root.join("-proj")).unwrap();
    std::os::unix::fs::symlink(&root, root.join("-p/loop")).unwrap();
    // A second way to the same directory lists its sessions once.
    std::os::unix::fs::symlink(root.join("-p"), root.join("-p-again")).unwrap();
    let rows = list_json(&root);
    let mut got = ids(&rows);
    got.sort();
    assert_eq!(got, ["linked", "own"]);
}

#[test]
fn standard_locations_are_used_without_a_root() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let rollout = format!("rollout-2026-02-23T20-34-25-{CODEX_ID}.jsonl");
    put_fixture(&format!("real/codex/localpush/{rollout}"), &h.join(".codex/sessions/2026/02/23").join(&rollout));
    put_fixture(&format!("real/claude-code/codemie/-tmp-private/{OLD_ID}.jsonl"), &h.join(format!(".claude/projects/-tmp-private/{OLD_ID}.jsonl")));
    let out = transcriptd_home(h, &["sessions", "list", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(ids(&json_lines(&out)), [CODEX_ID, OLD_ID]);
    assert_eq!(transcriptd_home(h, &["show", "4c2d"]).status.code(), Some(0));

    let empty = tempfile::tempdir().unwrap();
    let out = transcriptd_home(empty.path(), &["sessions", "list"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "none of ~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions, ~/.qwen/projects, ~/.gemini/tmp and ~/.copilot/session-state exists"
        ),
        "{}",
        stderr(&out)
    );
    let missing_root = transcriptd(&["sessions", "list", "/nonexistent/root"]);
    assert_eq!(missing_root.status.code(), Some(2));
    assert!(stderr(&missing_root).contains("/nonexistent/root"));
}

#[test]
fn a_large_flat_directory_is_looked_up_from_its_cached_names_and_never_wrongly() {
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let line = b"{\"role\":\"user\",\"content\":\"x\"}\n";
    for i in 0..10_050u32 {
        std::fs::write(root.path().join(format!("{i:08x}-aaaa-4bbb-8ccc-{i:012x}.jsonl")), line).unwrap();
    }
    let show = |prefix: &str| {
        Command::new(env!("CARGO_BIN_EXE_transcriptd"))
            .env("HOME", home.path())
            .env_remove("XDG_CACHE_HOME")
            .args(["show", prefix, "--root", root.path().to_str().unwrap(), "-o", "json"])
            .output()
            .unwrap()
    };
    // The first lookup reads the directory and keeps its names; the cache is then used.
    assert_eq!(show("0000000a").status.code(), Some(0));
    let cache = home.path().join(".cache/transcriptd/names");
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1, "the names are kept");
    assert_eq!(show("0000000a").status.code(), Some(0));
    // A session added after the cache was written is found: the directory changed.
    std::thread::sleep(std::time::Duration::from_millis(10));
    std::fs::write(root.path().join("feedbeef-aaaa-4bbb-8ccc-000000000000.jsonl"), line).unwrap();
    assert_eq!(show("feedbeef").status.code(), Some(0), "{}", String::from_utf8_lossy(&show("feedbeef").stderr));
    // One removed is not found any more.
    std::thread::sleep(std::time::Duration::from_millis(10));
    std::fs::remove_file(root.path().join("0000000a-aaaa-4bbb-8ccc-00000000000a.jsonl")).unwrap();
    assert_eq!(show("0000000a").status.code(), Some(2));
}

#[test]
fn an_unreadable_directory_is_said_and_every_other_session_still_listed() {
    // Issue 30: one unreadable subdirectory made `sessions list` print nothing at all.
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    every_layout(d.path());
    let closed = d.path().join("claude/-home-me-closed");
    put_fixture(SLICE, &closed.join("11111111-1111-4111-8111-111111111111.jsonl"));
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o000)).unwrap();
    // Root reads any directory: the listing runs as another user there.
    let root = unsafe { libc::geteuid() } == 0;
    let mut cmd = if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid", "65534", "--regid", "65534", "--clear-groups", env!("CARGO_BIN_EXE_transcriptd")]);
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_transcriptd"))
    };
    let o = cmd.args(["sessions", "list", "-o", "json"]).arg(d.path()).output().unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o755)).unwrap();
    let rows = json_lines(&o);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("-home-me-closed") && stderr(&o).contains("Permission denied"), "{}", stderr(&o));
    let mut expected = list_json(d.path());
    expected.retain(|r| !r["path"].as_str().unwrap().contains("-home-me-closed"));
    assert_eq!(ids(&rows), ids(&expected), "{}", stderr(&o));
    assert!(rows.len() >= 5);
}

/// Pi's sessions, where Pi keeps them (`~/.pi/agent/sessions/--<cwd>--/<ts>_<uuid>.jsonl`, or
/// under `$PI_CODING_AGENT_DIR`), are found with no path by `sessions`, `show`, `check` and
/// `usage`, by the uuid in their name.
#[test]
fn pi_sessions_are_found_in_pis_own_place() {
    const PI_ID: &str = "0b6a1c2e-1111-4222-8333-944445555666";
    let name = format!("2026-03-01T10-00-00-000Z_{PI_ID}.jsonl");
    for custom in [false, true] {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let agent = if custom { h.join("elsewhere/pi") } else { h.join(".pi/agent") };
        put_fixture("check/pi/0002_killed_mid_tool.jsonl", &agent.join("sessions/--work-p--").join(&name));
        let run = |args: &[&str]| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_transcriptd"));
            c.env("HOME", h).env_remove("PI_CODING_AGENT_DIR").env_remove("PI_CODING_AGENT_SESSION_DIR").args(args);
            if custom {
                c.env("PI_CODING_AGENT_DIR", "~/elsewhere/pi");
            }
            c.output().unwrap()
        };
        let out = run(&["sessions", "list", "-o", "json"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let rows = json_lines(&out);
        assert_eq!(ids(&rows), [PI_ID], "custom dir: {custom}");
        assert_eq!(rows[0]["format"], "pi");
        let show = run(&["show", "0b6a1c2e"]);
        // Exit 0: its open call is a warning (the agent answers it on resume).
        assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
        assert!(stdout(&show).contains("format       pi"), "{}", stdout(&show));
        let check = run(&["check", "-o", "json"]);
        assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));
        let kinds: Vec<(String, String)> =
            json_lines(&check).iter().filter_map(|f| Some((f["kind"].as_str()?.to_owned(), f["severity"].as_str()?.to_owned()))).collect();
        assert_eq!(kinds, [("orphan_call".to_owned(), "warning".to_owned())]);
        let usage = run(&["usage", "-o", "json"]);
        assert_eq!(usage.status.code(), Some(0), "{}", stderr(&usage));
        let u = &json_lines(&usage)[0];
        assert_eq!(
            (&u["model"], &u["input_tokens"], &u["output_tokens"], &u["cache_read_input_tokens"], &u["cache_creation_input_tokens"]),
            (&"claude-sonnet-4-5".into(), &10.into(), &5.into(), &100.into(), &20.into())
        );
    }
}

/// Qwen Code's sessions, where Qwen Code keeps them
/// (`~/.qwen/projects/<sanitized cwd>/chats/<sessionId>.jsonl`, or `projects` under
/// `$QWEN_HOME`), are found with no path by `sessions`, `show`, `check`, `usage` and `report`,
/// and read by `history`,
/// by the id in their name; tokens are counted by model (the cached prompt tokens apart).
#[test]
fn qwen_sessions_are_found_in_qwen_codes_own_place() {
    const QWEN_ID: &str = "7d1e6f0a-2b3c-4d5e-8f90-a1b2c3d4e5f6";
    for custom in [false, true] {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let base = if custom { h.join("elsewhere/qwen") } else { h.join(".qwen") };
        put_fixture("check/qwen/0002_killed_mid_tool.jsonl", &base.join("projects/-work-p/chats").join(format!("{QWEN_ID}.jsonl")));
        let run = |args: &[&str]| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_transcriptd"));
            c.env("HOME", h).env_remove("QWEN_HOME").env_remove("QWEN_RUNTIME_DIR").args(args);
            if custom {
                c.env("QWEN_HOME", "~/elsewhere/qwen");
            }
            c.output().unwrap()
        };
        let out = run(&["sessions", "list", "-o", "json"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let rows = json_lines(&out);
        assert_eq!(ids(&rows), [QWEN_ID], "custom dir: {custom}");
        assert_eq!(rows[0]["format"], "qwen");
        let show = run(&["show", "7d1e6f0a"]);
        // Exit 0: its open call is a warning (the agent answers it on resume).
        assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
        assert!(stdout(&show).contains("format       qwen"), "{}", stdout(&show));
        let check = run(&["check", "-o", "json"]);
        assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));
        let kinds: Vec<(String, String)> =
            json_lines(&check).iter().filter_map(|f| Some((f["kind"].as_str()?.to_owned(), f["severity"].as_str()?.to_owned()))).collect();
        assert_eq!(kinds, [("orphan_call".to_owned(), "warning".to_owned())]);
        let usage = run(&["usage", "-o", "json"]);
        assert_eq!(usage.status.code(), Some(0), "{}", stderr(&usage));
        let u = &json_lines(&usage)[0];
        assert_eq!(
            (&u["model"], &u["input_tokens"], &u["output_tokens"], &u["cache_read_input_tokens"], &u["cache_creation_input_tokens"]),
            (&"qwen3-coder-plus".into(), &200.into(), &40.into(), &1000.into(), &0.into())
        );
        // Exit 0: a report is made whatever the findings.
        let report = run(&["report", "-o", "json", "--no-summary"]);
        assert_eq!(report.status.code(), Some(0), "{}", stderr(&report));
        let r: Value = serde_json::from_slice(&report.stdout).unwrap();
        assert_eq!((&r["formats"][0]["format"], &r["formats"][0]["errors"]), (&"qwen".into(), &0.into()), "{r}");
        assert_eq!(r["formats"][0]["warnings"], 1, "{r}");
        assert_eq!((&r["tokens"]["by_model"][0]["model"], &r["tokens"]["by_model"][0]["input"]), (&"qwen3-coder-plus".into(), &200.into()), "{r}");
        let file = base.join("projects/-work-p/chats").join(format!("{QWEN_ID}.jsonl"));
        let history = run(&["history", "-o", "text", file.to_str().unwrap()]);
        assert!(matches!(history.status.code(), Some(0 | 1)), "{}", stderr(&history));
        let text = stdout(&history);
        assert!(text.contains("list the files") && text.contains("[call run_shell_command call_0a1b2c3d4e5f]"), "{text}");
    }
}

/// `run` with no configuration and no `--watch` watches Qwen Code's place too
/// (`~/.qwen/projects`): a session already there is opened as a Qwen Code file.
#[test]
fn run_with_no_paths_watches_qwen_codes_place() {
    use std::io::BufRead;
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    put_fixture("check/qwen/0002_killed_mid_tool.jsonl", &h.join(".qwen/projects/-work-p/chats/7d1e6f0a-2b3c-4d5e-8f90-a1b2c3d4e5f6.jsonl"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_transcriptd"))
        .env("HOME", h)
        .env_remove("QWEN_HOME")
        .env_remove("QWEN_RUNTIME_DIR")
        .args(["run", "--no-metrics", "--state-dir", h.join("state").to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut opened = None;
    while opened.is_none() && std::time::Instant::now() < deadline {
        if let Ok(l) = rx.recv_timeout(std::time::Duration::from_millis(200)) {
            let v: Value = serde_json::from_str(&l).unwrap_or(Value::Null);
            if v["type"] == "file_opened" {
                opened = Some(v);
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let opened = opened.expect("the daemon opened no file in 30 s");
    assert_eq!(opened["format"], "qwen", "{opened}");
    assert!(opened["file"].as_str().is_some_and(|f| f.ends_with(".qwen/projects/-work-p/chats/7d1e6f0a-2b3c-4d5e-8f90-a1b2c3d4e5f6.jsonl")), "{opened}");
}

/// Gemini CLI's sessions, where it keeps them (`~/.gemini/tmp/<project>/chats/session-<ts>-<id>.jsonl`,
/// the home `$GEMINI_CLI_HOME` when set), are found with no path by `sessions`, `show`, `check`
/// and `usage`, by the id in their name (the session id's first 8 characters).
#[test]
fn gemini_sessions_are_found_in_gemini_clis_own_place() {
    let name = "session-2026-12-03T12-47-3002191b.jsonl";
    for custom in [false, true] {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let base = if custom { h.join("elsewhere") } else { h.to_path_buf() };
        put_fixture("agents/sessions/gemini-cli-0.61.0/echo.jsonl", &base.join(".gemini/tmp/scratch/chats").join(name));
        let run = |args: &[&str]| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_transcriptd"));
            c.env("HOME", h).env_remove("GEMINI_CLI_HOME").args(args);
            if custom {
                c.env("GEMINI_CLI_HOME", h.join("elsewhere"));
            }
            c.output().unwrap()
        };
        let out = run(&["sessions", "list", "-o", "json"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let rows = json_lines(&out);
        assert_eq!(ids(&rows), ["3002191b"], "custom home: {custom}");
        assert_eq!(rows[0]["format"], "gemini");
        let show = run(&["show", "3002191b"]);
        // Exit 1: the session has a finding (its response recorded twice).
        assert_eq!(show.status.code(), Some(1), "{}", stderr(&show));
        assert!(stdout(&show).contains("format       gemini"), "{}", stdout(&show));
        let check = run(&["check", "-o", "json"]);
        assert_eq!(check.status.code(), Some(1), "{}", stderr(&check));
        let kinds: Vec<String> = json_lines(&check).iter().filter_map(|f| f["kind"].as_str().map(str::to_owned)).collect();
        assert_eq!(kinds, ["duplicate_result"]);
        let usage = run(&["usage", "-o", "json"]);
        assert_eq!(usage.status.code(), Some(0), "{}", stderr(&usage));
        let u = &json_lines(&usage)[0];
        // Two answers of 100 input and 10 output tokens each; the first, appended twice, counts once.
        assert_eq!(
            (&u["model"], &u["input_tokens"], &u["output_tokens"], &u["cache_read_input_tokens"]),
            (&"gemini-2.5-flash".into(), &200.into(), &20.into(), &0.into())
        );
    }
}
