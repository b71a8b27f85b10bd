//! Repair invariants, over every real fixture, every data-driven case and generated corpora
//! with every fault kind of the generator:
//! - `check(repair(x))` has no error findings;
//! - `repair(repair(x)) == repair(x)`, byte for byte;
//! - lines that needed no change are byte-identical and keep their order;
//! - every removed (or changed) line is in the rejects stream, byte for byte: nothing is lost;
//! - in Claude Code files, if every `parentUuid` resolved (or was null) before, it does after.

use super::support::{data, generate, jsonl_files, transcriptd};
use base64::Engine;
use std::collections::{HashMap, HashSet};
use transcriptd::transcript::stages::repair::{repair_bytes, repair_bytes_streaming, Abandon, OrphanPolicy};
use transcriptd::transcript::{check_bytes, Format, Options, Severity};

/// Physical lines without terminators; a last line without newline is included.
fn physical_lines(b: &[u8]) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = b.split(|c| *c == b'\n').collect();
    if v.last().is_some_and(|l| l.is_empty()) {
        v.pop();
    }
    v.into_iter().map(|l| l.strip_suffix(b"\r").unwrap_or(l)).collect()
}

fn is_blank(l: &[u8]) -> bool {
    l.iter().all(|c| c.is_ascii_whitespace())
}

struct Reject {
    line: usize,
    action: String,
    bytes: Vec<u8>,
}

fn rejects(stream: &[u8]) -> Vec<Reject> {
    physical_lines(stream)
        .into_iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_slice(l).expect("rejects are JSON lines");
            let bytes = match (v.get("text"), v.get("base64")) {
                (Some(t), _) => t.as_str().unwrap().as_bytes().to_vec(),
                (_, Some(b)) => base64::engine::general_purpose::STANDARD.decode(b.as_str().unwrap()).unwrap(),
                _ => panic!("reject without content: {v}"),
            };
            Reject { line: v["line"].as_u64().unwrap() as usize, action: v["action"].as_str().unwrap().to_owned(), bytes }
        })
        .collect()
}

/// Whether every parentUuid names a uuid of the file (or is null).
fn tree_resolves(b: &[u8]) -> bool {
    let lines: Vec<serde_json::Value> = physical_lines(b).into_iter().filter_map(|l| serde_json::from_slice(l).ok()).collect();
    let uuids: HashSet<&str> = lines.iter().filter_map(|v| v.get("uuid").and_then(|u| u.as_str())).collect();
    lines.iter().all(|v| match v.get("parentUuid") {
        Some(serde_json::Value::String(p)) => uuids.contains(p.as_str()),
        _ => true,
    })
}

/// The one-pass repair, fed in chunks of several sizes, gives the two-pass repair's output,
/// rejects and plan byte for byte. Returns why it gave up, if it did (whole input in one chunk).
pub fn assert_one_pass_matches(name: &str, input: &[u8], policy: OrphanPolicy) -> Option<Abandon> {
    let opts = Options::default();
    let two = repair_bytes(input, &opts, policy, 1).unwrap();
    let small = if input.len() < 64 << 10 { 7 } else { 4096 };
    let mut gave_up = None;
    for chunk in [small, 65_536, input.len().max(1)] {
        let one = repair_bytes_streaming(input, &opts, policy, chunk).unwrap();
        let (out, rej, plan, abandoned) = (one.output, one.rejects, one.plan, one.abandoned);
        assert!(out == two.output, "{name}: one-pass output (chunks of {chunk}) differs from the two-pass one ({abandoned:?})");
        assert!(rej == two.rejects, "{name}: one-pass rejects (chunks of {chunk}) differ from the two-pass ones");
        assert_eq!(plan, two.plans[0], "{name}: one-pass plan (chunks of {chunk})");
        gave_up = gave_up.or(abandoned);
    }
    gave_up
}

/// Checks every invariant; returns why the one-pass repair gave up, if it did.
pub fn assert_invariants(name: &str, input: &[u8], policy: OrphanPolicy) -> Option<Abandon> {
    let gave_up = assert_one_pass_matches(name, input, policy);
    let opts = Options::default();
    let full = repair_bytes(input, &opts, policy, 3).unwrap();
    let (after, _, format) = check_bytes(&full.output, opts.clone()).unwrap();
    let errors: Vec<_> = after.iter().filter(|f| f.severity == Severity::Error).collect();
    let kept_by_choice = policy == OrphanPolicy::Keep;
    if !kept_by_choice {
        assert!(errors.is_empty(), "{name}: errors after repair: {errors:?}");
    }
    let again = repair_bytes(&full.output, &opts, policy, 3).unwrap();
    assert!(again.output == full.output, "{name}: repair is not idempotent");

    // One round, against the input's own line numbers.
    let one = repair_bytes(input, &opts, policy, 1).unwrap();
    let inp = physical_lines(input);
    let rej = rejects(&one.rejects);
    let mut touched: HashMap<usize, &str> = HashMap::new();
    for r in &rej {
        assert_eq!(r.bytes, inp[r.line - 1], "{name}: rejects record of line {} is not the line byte for byte", r.line);
        touched.insert(r.line, &r.action);
    }
    let out = physical_lines(&one.output);
    let mut at = 0;
    for (i, l) in inp.iter().enumerate() {
        if touched.contains_key(&(i + 1)) || is_blank(l) {
            continue;
        }
        let found = out[at..].iter().position(|o| o == l);
        assert!(found.is_some(), "{name}: untouched line {} is missing from the output or out of order", i + 1);
        at += found.unwrap() + 1;
    }
    let removed = touched.values().filter(|a| **a == "removed" || **a == "merged").count() as i64;
    assert_eq!(out.len() as i64, inp.len() as i64 - removed + one.stats.inserted as i64, "{name}: line count");
    if format == Some(Format::ClaudeCode) && tree_resolves(input) {
        assert!(tree_resolves(&full.output), "{name}: a parentUuid no longer resolves");
    }
    gave_up
}

#[test]
fn real_fixtures_and_cases() {
    for f in jsonl_files(&data("real")).into_iter().chain(jsonl_files(&data("check"))) {
        let input = std::fs::read(&f).unwrap();
        for policy in [OrphanPolicy::Answer, OrphanPolicy::Drop] {
            let gave_up = assert_invariants(&f.display().to_string(), &input, policy);
            assert_eq!(gave_up, None, "{}: the one-pass repair gave up", f.display());
        }
    }
}

#[test]
fn generated_corpora_with_every_fault() {
    let dir = tempfile::tempdir().unwrap();
    let layouts: [&[&str]; 5] =
        [&[], &["--split-assistant"], &["--merge-results"], &["--layout", "type-first", "--tool-use-result"], &["--split-assistant", "--merge-results"]];
    for (seed, extra) in layouts.iter().enumerate() {
        let out = dir.path().join(format!("g{seed}.jsonl"));
        let seed_s = (100 + seed).to_string();
        let mut args = vec!["--lines", "3000", "--seed", &seed_s, "--faults", "0.03", "--truncate-last", "1", "--compact-boundary", "0.05"];
        args.extend_from_slice(extra);
        generate(&out, &args);
        let input = std::fs::read(&out).unwrap();
        let gave_up = assert_invariants(&format!("seed {seed_s} {extra:?}"), &input, OrphanPolicy::Answer);
        assert_eq!(gave_up, None, "seed {seed_s}: the one-pass repair gave up");
    }
}

#[test]
fn cli_repair_out_in_place_dry_run_and_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("in");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    let broken = std::fs::read(data("real/derived/claude-code/short.orphan-tool-result.jsonl")).unwrap();
    let clean = std::fs::read(data("real/claude-code/spotter/short.jsonl")).unwrap();
    std::fs::write(src.join("sub/broken.jsonl"), &broken).unwrap();
    std::fs::write(src.join("clean.jsonl"), &clean).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(src.join("sub/broken.jsonl"), std::fs::Permissions::from_mode(0o600)).unwrap();

    // A freshly written file is live: skipped, exit 1.
    let out = dir.path().join("out");
    let r = transcriptd(&["repair", "--out", out.to_str().unwrap(), src.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(1), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stdout).contains("--min-idle"));

    // Dry run: the plan, nothing written.
    let r = transcriptd(&["repair", "--dry-run", "--force", src.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(0));
    let plan = String::from_utf8(r.stdout).unwrap();
    assert!(plan.contains("\"action\":\"drop_results\"") && plan.contains("toolu_01FdQ8qTyVyZjE3Kw4dguQGx"), "{plan}");
    assert_eq!(std::fs::read(src.join("sub/broken.jsonl")).unwrap(), broken);

    // --out mirrors the tree; permissions kept; rejects beside the output.
    let r = transcriptd(&["repair", "--force", "-o", "json", "--out", out.to_str().unwrap(), src.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(0), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(std::fs::read(out.join("clean.jsonl")).unwrap(), clean);
    let fixed = out.join("sub/broken.jsonl");
    assert_eq!(std::fs::metadata(&fixed).unwrap().permissions().mode() & 0o777, 0o600);
    // The rejects hold the transcript's lines: as private as it is.
    assert_eq!(std::fs::metadata(out.join("sub/broken.rejects.jsonl")).unwrap().permissions().mode() & 0o777, 0o600);
    let c = transcriptd(&["check", fixed.to_str().unwrap()]);
    assert_eq!(c.status.code(), Some(0));

    // --in-place keeps a backup; a second run changes nothing.
    let target = src.join("sub/broken.jsonl");
    let r = transcriptd(&["repair", "--force", "--in-place", target.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(0));
    assert_eq!(std::fs::read(src.join("sub/broken.jsonl.orig")).unwrap(), broken);
    assert_eq!(std::fs::read(&target).unwrap(), std::fs::read(&fixed).unwrap());
    let r = transcriptd(&["repair", "--force", "--in-place", "--no-backup", target.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(0));
    assert_eq!(std::fs::read(&target).unwrap(), std::fs::read(&fixed).unwrap());

    // Usage errors: exit 2.
    assert_eq!(transcriptd(&["repair", src.to_str().unwrap()]).status.code(), Some(2));
    assert_eq!(transcriptd(&["repair", "--dry-run", "--shard", "3/2", src.to_str().unwrap()]).status.code(), Some(2));
}

#[test]
fn shards_cover_every_file_once() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..40 {
        std::fs::write(dir.path().join(format!("s{i}.jsonl")), "{\"role\":\"user\",\"content\":\"x\"}\n").unwrap();
    }
    let mut seen = Vec::new();
    for i in 0..3 {
        let shard = format!("{i}/3");
        let r = transcriptd(&["repair", "--dry-run", "--force", "-o", "json", "--shard", &shard, dir.path().to_str().unwrap()]);
        assert_eq!(r.status.code(), Some(0));
        let err = String::from_utf8_lossy(&r.stderr).into_owned();
        let n: usize = err.strip_prefix("dry run over ").and_then(|e| e.split_whitespace().next()).unwrap_or_else(|| panic!("{err}")).parse().unwrap();
        seen.push(n);
    }
    assert_eq!(seen.iter().sum::<usize>(), 40, "{seen:?}");
    assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
}

/// The file verb (one pass, lazily written output, the two-pass fallback) gives what the
/// in-memory repair gives, output and rejects byte for byte.
fn assert_cli_matches_memory(dir: &std::path::Path, names: &[&str], extra: &[&str], opts: &Options) {
    let out = dir.join("out");
    let mut args = vec!["repair", "--force", "--no-summary", "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let paths: Vec<String> = names.iter().map(|n| dir.join(n).display().to_string()).collect();
    args.extend(paths.iter().map(String::as_str));
    let r = transcriptd(&args);
    assert!(r.status.code() == Some(0) || r.status.code() == Some(1), "{}", String::from_utf8_lossy(&r.stderr));
    for n in names {
        let input = std::fs::read(dir.join(n)).unwrap();
        let want = repair_bytes(&input, opts, OrphanPolicy::Answer, 3).unwrap();
        let got = std::fs::read(out.join(n)).unwrap();
        assert!(got == want.output, "{n}: the file verb's output differs from the in-memory repair");
        let stem = n.strip_suffix(".jsonl").unwrap();
        let rejects = std::fs::read(out.join(format!("{stem}.rejects.jsonl"))).unwrap_or_default();
        assert!(rejects == want.rejects, "{n}: the file verb's rejects differ from the in-memory repair");
    }
}

#[test]
fn cli_repair_matches_the_in_memory_repair() {
    let dir = tempfile::tempdir().unwrap();
    let mut names = Vec::new();
    let layouts: [&[&str]; 3] = [&["--split-assistant"], &["--merge-results"], &["--layout", "type-first", "--tool-use-result"]];
    for (i, extra) in layouts.iter().enumerate() {
        let name = format!("g{i}.jsonl");
        let mut args = vec!["--lines", "20000", "--seed", "7", "--faults", "0.02", "--truncate-last", "1", "--compact-boundary", "0.02"];
        args.extend_from_slice(extra);
        generate(&dir.path().join(&name), &args);
        names.push(name);
    }
    // A clean file, copied as it is.
    std::fs::copy(data("real/claude-code/spotter/short.jsonl"), dir.path().join("clean.jsonl")).unwrap();
    names.push("clean.jsonl".into());
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_cli_matches_memory(dir.path(), &names, &[], &Options::default());
}

#[test]
fn cli_repair_falls_back_to_two_passes() {
    let dir = tempfile::tempdir().unwrap();
    // An over-long line to remove: streamed into the rejects by the two-pass repair.
    let mut long = std::fs::read(data("real/derived/claude-code/short.orphan-tool-result.jsonl")).unwrap();
    let at = long.iter().position(|&b| b == b'\n').unwrap() + 1;
    let big = format!("{{\"type\":\"progress\",\"data\":\"{}\"}}\n", "x".repeat(5000));
    long.splice(at..at, big.into_bytes());
    std::fs::write(dir.path().join("long.jsonl"), &long).unwrap();
    let opts = Options { max_line_bytes: 1024, ..Options::default() };
    assert_cli_matches_memory(dir.path(), &["long.jsonl"], &["--max-line-bytes", "1k"], &opts);

    // Rejects larger than the spool keeps in memory (a 6 MiB line) go through a temporary
    // file: the same bytes come out.
    let mut huge = std::fs::read(data("real/derived/claude-code/short.orphan-tool-result.jsonl")).unwrap();
    let big = format!("{{\"type\":\"progress\",\"data\":\"{}\"}}\n", "y".repeat(6 << 20));
    huge.splice(at..at, big.into_bytes());
    std::fs::write(dir.path().join("huge.jsonl"), &huge).unwrap();
    let opts = Options { max_line_bytes: 1 << 20, ..Options::default() };
    assert_cli_matches_memory(dir.path(), &["huge.jsonl"], &["--max-line-bytes", "1m"], &opts);

    // No format to detect: nothing is final, more than the hold limit would be held.
    let mut unknown = Vec::new();
    for i in 0..(36usize << 20) / 24 {
        unknown.extend_from_slice(format!("{{\"kind\":\"x\",\"n\":\"{i:08}\"}}\n").as_bytes());
        if i == 1000 {
            unknown.extend_from_slice(b"not json\n");
        }
    }
    std::fs::write(dir.path().join("unknown.jsonl"), &unknown).unwrap();
    assert_cli_matches_memory(dir.path(), &["unknown.jsonl"], &[], &Options::default());
    let fixed = std::fs::read(dir.path().join("out/unknown.jsonl")).unwrap();
    assert_eq!(fixed.len(), unknown.len() - b"not json\n".len(), "only the malformed line goes");
}
