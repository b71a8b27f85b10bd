//! Repair under structure-aware mutation: windows of real transcripts, data-driven cases and
//! generated corpora, mutated by `mutate.rs` (byte flips, duplicated, removed, reordered and
//! foreign lines, changed ids, parents and types, CRLF, a byte-order mark, long lines, a torn
//! end), must keep every promise of `invariants.rs`. Failures proptest finds are replayed first
//! from `proptest-regressions/integration/mutation.txt` (its seeds name sources by index, so
//! they replay the same inputs only while the fixtures stay as they are); every failure also
//! lives on, minimised, as a data-driven case in `tests/data/repair/`
//! (`every_regression_case_keeps_its_promises`). `MUTATION_FAILURES=DIR` keeps each failing
//! input whole in DIR.

use super::invariants;
use super::support::mutate::{mutate, Rng};
use super::support::{data, expect_file, generate, jsonl_files};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use std::sync::OnceLock;
use transcriptd::transcript::repair::{OrphanPolicy, RoundEdit};
use transcriptd::transcript::Options;

/// Transcripts to start from: the real fixtures, the data-driven cases, generated corpora.
fn sources() -> &'static Vec<Vec<u8>> {
    static SOURCES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SOURCES.get_or_init(|| {
        // Not `repair/`: it grows with every regression case, and the seeds proptest keeps
        // name sources by index.
        let mut v: Vec<Vec<u8>> = ["real", "check"].iter().flat_map(|d| jsonl_files(&data(d))).map(|f| std::fs::read(f).unwrap()).collect();
        let dir = tempfile::tempdir().unwrap();
        let layouts: [&[&str]; 3] = [&["--split-assistant"], &["--merge-results"], &["--layout", "type-first", "--tool-use-result"]];
        for (i, extra) in layouts.iter().enumerate() {
            let out = dir.path().join(format!("g{i}.jsonl"));
            let seed = (700 + i).to_string();
            let mut args = vec!["--lines", "400", "--seed", &seed, "--faults", "0.05", "--compact-boundary", "0.02"];
            args.extend_from_slice(extra);
            generate(&out, &args);
            v.push(std::fs::read(&out).unwrap());
        }
        v
    })
}

/// Lines of every source, to borrow from.
fn pool() -> &'static Vec<&'static [u8]> {
    static POOL: OnceLock<Vec<&'static [u8]>> = OnceLock::new();
    POOL.get_or_init(|| sources().iter().flat_map(|s| s.split(|b| *b == b'\n').filter(|l| !l.is_empty() && l.len() < 4096)).collect())
}

/// A window of `len` lines of source `which`, from line `start` on.
fn window(which: usize, start: usize, len: usize) -> Vec<u8> {
    let src = &sources()[which % sources().len()];
    let lines: Vec<&[u8]> = src.split_inclusive(|b| *b == b'\n').collect();
    if lines.is_empty() {
        return Vec::new();
    }
    let from = start % lines.len();
    lines[from..(from + len).min(lines.len())].concat()
}

fn policy(p: u8) -> OrphanPolicy {
    match p % 4 {
        0 | 1 => OrphanPolicy::Answer,
        2 => OrphanPolicy::Drop,
        _ => OrphanPolicy::Keep,
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1500,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/integration/mutation.txt"))),
        ..ProptestConfig::default()
    })]

    /// The promises hold for any mutation of any window.
    #[test]
    fn repair_keeps_its_promises_under_mutation(
        which in 0usize..1000,
        start in 0usize..100_000,
        len in 1usize..30,
        seed in any::<u64>(),
        count in 1usize..6,
        small_limit in any::<bool>(),
        p in any::<u8>(),
    ) {
        let max_line = if small_limit { 2048 } else { Options::default().max_line_bytes };
        let input = mutate(&window(which, start, len), &mut Rng(seed), pool(), max_line, count);
        let opts = Options { max_line_bytes: max_line, ..Options::default() };
        if let Err(e) = invariants::check(&input, &opts, policy(p)) {
            if let Some(dir) = std::env::var_os("MUTATION_FAILURES") {
                // Keep the failing input whole, to minimise it into a regression case.
                let path = std::path::Path::new(&dir).join(format!("failure-{seed:016x}.jsonl"));
                std::fs::write(&path, &input).unwrap();
            }
            let shown: String = String::from_utf8_lossy(&input).chars().take(400).collect();
            return Err(TestCaseError::fail(format!("{e}\ninput ({} bytes): {shown:?}", input.len())));
        }
    }
}

/// Options a regression case's name asks for: `.drop` / `.keep` (orphan policy), `.max<N>`
/// (line limit).
fn case_options(name: &str) -> (Options, OrphanPolicy) {
    let mut opts = Options::default();
    let mut policy = OrphanPolicy::Answer;
    for part in name.split('.') {
        match part {
            "drop" => policy = OrphanPolicy::Drop,
            "keep" => policy = OrphanPolicy::Keep,
            p if p.starts_with("max") => opts.max_line_bytes = p[3..].parse().expect("max<N>"),
            _ => {}
        }
    }
    (opts, policy)
}

fn describe(e: &RoundEdit) -> String {
    let v = serde_json::to_value(&e.edit).unwrap();
    format!("round {} {}", e.round, v)
}

/// Every input that ever broke a promise (found by the mutation test or the fuzz targets),
/// minimised, in `tests/data/repair/NNNN_name[.options].jsonl`: the promises hold, and the
/// repair is what `NNNN_name[.options].expected` beside it says (verdict, edits in input
/// lines, what is left, the rejects; `UPDATE_EXPECT=1` rewrites it).
#[test]
fn every_regression_case_keeps_its_promises() {
    let cases = jsonl_files(&data("repair"));
    assert!(cases.len() >= 10, "only {} cases", cases.len());
    for case in cases {
        let input = std::fs::read(&case).unwrap();
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let (opts, policy) = case_options(&name);
        let r = invariants::check(&input, &opts, policy).unwrap_or_else(|e| panic!("{}: {e}", case.display()));
        super::repair::assert_one_pass_matches_in(&name, &input, &opts, policy, &[1, 7, 20, 4096, input.len().max(1)]);
        let mut actual = format!("{}\n", if r.complete { "complete" } else { "partial" });
        for e in &r.edits {
            actual.push_str(&format!("edit {}\n", describe(e)));
        }
        for u in &r.unrepaired {
            actual.push_str(&format!("left {} {} {}\n", u.line, u.kind, u.why));
        }
        for j in invariants::rejects(&r.rejects).unwrap() {
            actual.push_str(&format!("reject {} {} {}\n", j.line, j.action, j.reason.as_deref().unwrap_or("-")));
        }
        actual.push_str("output:\n");
        actual.push_str(&String::from_utf8_lossy(&r.output));
        expect_file(&case.with_extension("expected"), &actual);
    }
}

/// For minimising a failure by hand: checks the promises on the file `INVARIANT_FILE` with the
/// options its name asks for (see `case_options`). `cargo test --test integration
/// check_one_file -- --ignored`.
#[test]
#[ignore]
fn check_one_file() {
    let Some(path) = std::env::var_os("INVARIANT_FILE") else { return };
    let input = std::fs::read(&path).unwrap();
    let (opts, policy) = case_options(&std::path::Path::new(&path).file_name().unwrap().to_string_lossy());
    if let Err(e) = invariants::check(&input, &opts, policy) {
        panic!("{e}");
    }
}

#[test]
#[ignore]
fn debug_one_pass() {
    let Some(path) = std::env::var_os("INVARIANT_FILE") else { return };
    let input = std::fs::read(&path).unwrap();
    let (opts, policy) = case_options(&std::path::Path::new(&path).file_name().unwrap().to_string_lossy());
    let plan = transcriptd::transcript::repair_run::plan_bytes(&input, &opts, policy).unwrap();
    println!("plan {:?}", plan);
    let (output, rejects, _) = transcriptd::transcript::repair_run::rewrite_bytes(&input, &plan, opts.max_line_bytes, true);
    let one = transcriptd::transcript::repair_run::repair_bytes_streaming(&input, &opts, policy, 1).unwrap();
    println!("two {:?}\n one {:?}", String::from_utf8_lossy(&output), String::from_utf8_lossy(&one.output));
    println!("two rej {:?}\n one rej {:?}", String::from_utf8_lossy(&rejects), String::from_utf8_lossy(&one.rejects));
}
