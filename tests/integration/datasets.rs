//! Conversation-per-line datasets: data-driven cases per format (`tests/data/dataset/<format>/`),
//! generated datasets against the generator's fault manifest, repair's guarantees with real
//! processes and files, the parallel checker, token counts against the cookbook's formula, a
//! differential test against mistral-common, and real public datasets.

use super::support::{data, expect_file, json_lines, root, stderr, stdout, transcriptd};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use transcriptd::transcript::{check_bytes, Finding, Format, Kind, Options, Severity};

/// The shapes the generator (`tests/gen/gen_datasets.py`) writes.
const FORMATS: [&str; 4] = ["openai-dataset", "openai-batch", "anthropic-batch", "sharegpt"];
/// The shapes with data-driven cases (`tests/data/dataset/<format>/`).
const CASE_FORMATS: [&str; 5] = ["openai-dataset", "openai-batch", "anthropic-batch", "sharegpt", "gemini-tuning"];

fn render(findings: &[Finding]) -> String {
    let mut s = String::new();
    for f in findings {
        s.push_str(&f.line.to_string());
        if let Some(m) = f.message_index {
            s.push_str(&format!(":{m}"));
        }
        s.push_str(&format!(" {} {}", f.kind, f.severity.as_str()));
        if let Some(c) = &f.call_id {
            s.push_str(&format!(" {c}"));
        }
        s.push('\n');
    }
    s
}

#[test]
fn every_dataset_case_matches_its_expectation() {
    let mut count = 0;
    for format in CASE_FORMATS {
        let dir = data("dataset").join(format);
        let mut cases: Vec<PathBuf> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "jsonl")).collect();
        cases.sort();
        for case in cases {
            let input = std::fs::read(&case).unwrap();
            let (findings, _, detected) = check_bytes(&input, Options::default()).unwrap();
            assert_eq!(detected.map(|f| f.to_string()).as_deref(), Some(format), "{}: detected format", case.display());
            // The same with the format given, and on three threads.
            let given = Options { format: detected, ..Options::default() };
            assert_eq!(check_bytes(&input, given).unwrap().0, findings, "{}: --format", case.display());
            assert_eq!(check_bytes(&input, Options { jobs: 3, ..Options::default() }).unwrap().0, findings, "{}: 3 jobs", case.display());
            expect_file(&case.with_extension("expected"), &render(&findings));
            count += 1;
        }
    }
    assert!(count >= 10, "only {count} cases");
}

/// Runs `tests/gen/gen_datasets.py` with `args`, writing `out` (and the manifest beside it).
fn generate(out: &Path, args: &[&str]) -> Vec<Value> {
    let manifest = out.with_extension("manifest");
    let status = Command::new("python3")
        .arg(super::support::generator("gen_datasets.py"))
        .args(args)
        .arg("--manifest")
        .arg(&manifest)
        .arg("-o")
        .arg(out)
        .status()
        .expect("python3 runs the generator");
    assert!(status.success(), "generator failed: {args:?}");
    std::fs::read_to_string(manifest).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn generated_datasets_match_their_manifest() {
    let dir = tempfile::tempdir().unwrap();
    for (k, format) in FORMATS.into_iter().enumerate() {
        let file = dir.path().join(format!("{format}.jsonl"));
        let seed = (11 + k).to_string();
        let manifest = generate(&file, &["--format", format, "--lines", "400", "--faults", "0.5", "--seed", &seed]);
        let input = std::fs::read(&file).unwrap();
        let (findings, stats, detected) = check_bytes(&input, Options { jobs: 2, ..Options::default() }).unwrap();
        assert_eq!(detected.map(|f| f.to_string()).as_deref(), Some(format));
        assert_eq!(stats.lines + stats.bad_lines, 400);
        let faulty: BTreeSet<u64> = manifest.iter().map(|m| m["line"].as_u64().unwrap()).collect();
        assert!(faulty.len() > 150, "{format}: only {} faults injected", faulty.len());
        for m in &manifest {
            let line = m["line"].as_u64().unwrap();
            let kind = m["finding"].as_str().unwrap();
            let index = m.get("message").and_then(Value::as_u64);
            let hit = findings.iter().any(|f| f.line == line && f.kind.as_str() == kind && (index.is_none() || f.message_index == index));
            assert!(
                hit,
                "{format}: injected {m} not found; findings on the line: {}",
                render(&findings.iter().filter(|f| f.line == line).cloned().collect::<Vec<_>>())
            );
        }
        let noise: Vec<&Finding> = findings.iter().filter(|f| !faulty.contains(&f.line)).collect();
        assert!(noise.is_empty(), "{format}: findings on clean lines: {noise:?}");
    }
}

/// A repair of `file` into `out` with `args`; returns (output, rejects as JSON values).
fn repair(file: &Path, out: &Path, args: &[&str]) -> (Vec<u8>, Vec<Value>) {
    let o = transcriptd(&[&["repair", "--force", "--no-summary", "--out", out.to_str().unwrap()], args, &[file.to_str().unwrap()]].concat());
    assert!(o.status.success(), "repair {args:?}: {}", stderr(&o));
    let name = file.file_name().unwrap().to_str().unwrap();
    let output = std::fs::read(out.join(name)).unwrap();
    let rejects = std::fs::read_to_string(out.join(name.replace(".jsonl", ".rejects.jsonl"))).unwrap_or_default();
    (output, rejects.lines().map(|l| serde_json::from_str(l).unwrap()).collect())
}

/// Data-driven repair cases (`tests/data/dataset-repair/<format>/*.jsonl`): each policy's output
/// and rejects against `<case>.expected`, and repair's guarantees on each: untouched lines
/// byte-identical and in order, every removed or changed line in the rejects under its own
/// number, an output without errors, and a second repair that changes nothing.
#[test]
fn every_dataset_repair_case_matches_its_expectation() {
    let tmp = tempfile::tempdir().unwrap();
    let mut count = 0;
    for format in CASE_FORMATS {
        let Ok(entries) = std::fs::read_dir(data("dataset-repair").join(format)) else { continue };
        let mut cases: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "jsonl")).collect();
        cases.sort();
        for case in cases {
            let input = std::fs::read(&case).unwrap();
            let in_lines: Vec<&[u8]> = input.split_inclusive(|&b| b == b'\n').collect();
            let mut report = String::new();
            for policy in ["drop", "truncate", "answer"] {
                let out = tmp.path().join(format!("{count}-{policy}"));
                let (output, rejects) = repair(&case, &out, &["--format", format, "--dataset-policy", policy]);
                let what = format!("{}/{policy}", case.display());
                let mut action = BTreeMap::new();
                for r in &rejects {
                    let line = r["line"].as_u64().unwrap();
                    let text = r["text"].as_str().unwrap().as_bytes();
                    assert_eq!(text, in_lines[line as usize - 1].trim_ascii_end(), "{what}: rejects line {line}");
                    action.insert(line, r["action"].as_str().unwrap().to_owned());
                }
                let mut out_lines = output.split_inclusive(|&b| b == b'\n');
                for (i, l) in in_lines.iter().enumerate() {
                    match action.get(&(i as u64 + 1)).map(String::as_str) {
                        Some("removed") => {}
                        Some(_) => assert_ne!(out_lines.next(), Some(*l), "{what}: line {} is in the rejects as changed", i + 1),
                        None => assert_eq!(out_lines.next(), Some(*l), "{what}: line {} is not byte-identical", i + 1),
                    }
                }
                assert_eq!(out_lines.next(), None, "{what}: more output than input");
                let (findings, _, _) = check_bytes(&output, Options { format: Format::from_str(format).ok(), ..Options::default() }).unwrap();
                assert!(findings.iter().all(|f| f.severity != Severity::Error), "{what}: the output has errors: {findings:?}");
                let again = out.join(case.file_name().unwrap());
                let (twice, rejects_twice) =
                    repair(&again, &tmp.path().join(format!("{count}-{policy}-again")), &["--format", format, "--dataset-policy", policy]);
                assert_eq!((twice, rejects_twice.len()), (output.clone(), 0), "{what}: a second repair changed something");
                report.push_str(&format!("== {policy}\n{}", String::from_utf8(output).unwrap()));
                for r in &rejects {
                    report.push_str(&format!("-- line {} {} {}\n", r["line"], r["action"].as_str().unwrap(), r["reason"].as_str().unwrap()));
                }
            }
            expect_file(&case.with_extension("expected"), &report);
            count += 1;
        }
    }
    assert!(count >= 1, "no repair case");
}

#[test]
fn repair_keeps_every_line_and_converges() {
    let dir = tempfile::tempdir().unwrap();
    for (k, format) in FORMATS.into_iter().enumerate() {
        let file = dir.path().join(format!("{format}.jsonl"));
        generate(&file, &["--format", format, "--lines", "150", "--faults", "0.5", "--seed", &(21 + k).to_string()]);
        let input = std::fs::read(&file).unwrap();
        let in_lines: Vec<&[u8]> = input.split_inclusive(|&b| b == b'\n').collect();
        for policy in ["drop", "truncate", "answer"] {
            let out = dir.path().join(format!("out-{format}-{policy}"));
            let (output, rejects) = repair(&file, &out, &["--dataset-policy", policy]);
            // Every removed or changed line is in the rejects, under its own number, byte for byte.
            let mut touched = BTreeMap::new();
            for r in &rejects {
                let line = r["line"].as_u64().unwrap();
                let text = r["text"].as_str().unwrap();
                assert_eq!(text.as_bytes(), in_lines[line as usize - 1].strip_suffix(b"\n").unwrap(), "{format}/{policy}: rejects line {line}");
                touched.insert(line, r["action"].as_str().unwrap().to_owned());
            }
            // Untouched lines are byte-identical and in order; modified ones are where they were.
            let out_lines: Vec<&[u8]> = output.split_inclusive(|&b| b == b'\n').collect();
            let mut o = out_lines.iter();
            for (i, l) in in_lines.iter().enumerate() {
                match touched.get(&(i as u64 + 1)).map(String::as_str) {
                    Some("removed") => {}
                    Some("modified") => {
                        o.next().expect("a modified line is written");
                    }
                    _ => assert_eq!(o.next(), Some(l), "{format}/{policy}: line {} changed without a reject", i + 1),
                }
            }
            assert!(o.next().is_none(), "{format}/{policy}: extra output lines");
            if policy == "drop" {
                assert!(touched.values().all(|a| a == "removed"));
            }
            // The output checks clean, and repairing it changes nothing.
            let (findings, _, _) = check_bytes(&output, Options::default()).unwrap();
            let errors: Vec<&Finding> = findings.iter().filter(|f| f.severity == Severity::Error).collect();
            assert!(errors.is_empty(), "{format}/{policy}: errors after repair: {errors:?}");
            let again = dir.path().join(format!("again-{format}-{policy}"));
            let repaired = out.join(file.file_name().unwrap());
            let (twice, rejects) = repair(&repaired, &again, &["--dataset-policy", policy]);
            assert_eq!((twice == output, rejects.len()), (true, 0), "{format}/{policy}: not idempotent");
        }
    }
}

#[test]
fn the_cli_names_line_and_message() {
    let case = data("dataset/openai-dataset/0002_issue_example.jsonl");
    let o = transcriptd(&["check", "--no-summary", case.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let text = stdout(&o);
    assert!(text.contains("0002_issue_example.jsonl:1: error: unanswered_call: message 1: call to `f` has no result"), "{text}");
    assert!(text.contains(":1: error: consecutive_assistant: message 2: "), "{text}");
    let o = transcriptd(&["check", "--no-summary", "-o", "json", case.to_str().unwrap()]);
    let records = json_lines(&o);
    assert_eq!(records[0]["format"], "openai-dataset");
    assert_eq!((records[0]["line"].as_u64(), records[0]["message_index"].as_u64()), (Some(1), Some(1)));
    // --format overrides detection: read as ShareGPT, the line holds no conversation.
    let o = transcriptd(&["check", "--no-summary", "-o", "json", "--format", "sharegpt", case.to_str().unwrap()]);
    assert_eq!(json_lines(&o)[0]["kind"], "not_a_conversation");
    // A dataset's dry-run plan names each line and why.
    let o = transcriptd(&["repair", "--force", "--no-summary", "--dry-run", "-o", "json", "--dataset-policy", "truncate", case.to_str().unwrap()]);
    let plan = json_lines(&o);
    assert_eq!((plan[0]["line"].as_u64(), plan[0]["action"].as_str(), plan[0]["reason"].as_str()), (Some(1), Some("replace"), Some("unanswered_call")));
}

#[test]
fn every_kind_and_format_is_in_the_docs() {
    let findings = std::fs::read_to_string(root().join("docs/findings.md")).unwrap();
    let formats = std::fs::read_to_string(root().join("docs/formats.md")).unwrap();
    let table: BTreeSet<String> = findings
        .lines()
        .skip_while(|l| !l.starts_with("# Finding kinds"))
        .take_while(|l| !l.starts_with("Rules worth knowing"))
        .filter_map(|l| l.strip_prefix("| `").and_then(|r| r.split('`').next()).map(str::to_owned))
        .collect();
    let kinds: BTreeSet<String> = Kind::ALL.iter().map(|k| k.as_str().to_owned()).collect();
    assert_eq!(table, kinds, "docs/findings.md's kinds table and Kind::ALL differ");
    for f in Format::ALL {
        assert!(formats.contains(&format!("| `{f}` |")), "docs/formats.md's table lacks {f}");
        // The reference configuration's comment on `format` names every one (issue 30: it named 4 of 8).
        let reference = std::fs::read_to_string(root().join("config/transcriptd.toml")).unwrap();
        let comment: String = reference.lines().skip_while(|l| !l.contains("\"auto\" detects per file")).take_while(|l| l.starts_with('#')).collect();
        assert!(comment.contains(&format!("\"{f}\"")), "config/transcriptd.toml's comment on `format` lacks {f}: {comment}");
    }
}

/// Where cargo unpacked tiktoken-rs (its bundled vocabularies).
fn tiktoken_vocab() -> PathBuf {
    let home = std::env::var_os("CARGO_HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cargo"));
    let src = home.join("registry/src");
    for index in std::fs::read_dir(&src).unwrap() {
        let p = index.unwrap().path().join("tiktoken-rs-0.12.1/assets/cl100k_base.tiktoken");
        if p.exists() {
            return p;
        }
    }
    panic!("tiktoken-rs 0.12.1 is not under {}", src.display());
}

#[test]
fn token_counts_match_the_cookbook_formula() {
    if !super::support::peer_present(
        "python tiktoken (pip install mistral-common==1.13.1 brings it; .ci/run installs it)",
        super::support::python_imports("tiktoken"),
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("d.jsonl");
    generate(&file, &["--format", "openai-dataset", "--lines", "300", "--seed", "5"]);
    let peer = Command::new("python3").arg(root().join("tests/integration/peers/cookbook_tokens.py")).arg(tiktoken_vocab()).arg(&file).output().unwrap();
    assert!(peer.status.success(), "cookbook_tokens.py: {} (mistral-common brings tiktoken; .ci/run installs it)", stderr(&peer));
    let want: Vec<Value> = stdout(&peer).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let o = transcriptd(&["stats", "-o", "json", "--per-conversation", "--max-tokens", "1000", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let records = json_lines(&o);
    let (per, summary) = records.split_at(records.len() - 1);
    assert_eq!(per.len(), 300);
    for (p, w) in per.iter().zip(&want) {
        assert_eq!((&p["line"], &p["tokens"], &p["assistant_tokens"]), (&w["line"], &w["tokens"], &w["assistant_tokens"]));
    }
    let s = &summary[0]["tokens"];
    let lens: Vec<u64> = want.iter().map(|w| w["tokens"].as_u64().unwrap()).collect();
    let billed: u64 = lens.iter().map(|&l| l.min(1000)).sum();
    assert_eq!(s["total"].as_u64(), Some(lens.iter().sum()));
    assert_eq!(s["over_limit"].as_u64(), Some(lens.iter().filter(|&&l| l > 1000).count() as u64));
    assert_eq!((s["billed_per_epoch"].as_u64(), s["epochs"].as_u64(), s["billed"].as_u64()), (Some(billed), Some(3), Some(billed * 3)));
    assert_eq!(summary[0]["conversations"], 300);
}

/// How the two checkers' verdicts differ, by injected fault, and why. Every other fault, and
/// every clean line, must get the same verdict from both.
const DIFFERENCES: &[(&str, bool, bool, &str)] = &[
    // (fault, transcriptd accepts, mistral-common accepts, why)
    (
        "consecutive_assistant",
        false,
        true,
        "mistral-common's message order allows an assistant message after another; OpenAI/Azure fine-tuning rejects two assistant turns in a row (microsoft-foundry/fine-tuning#23), and seed 002 forbids them",
    ),
    (
        "empty_answer",
        false,
        true,
        "from tokenizer v7 on, mistral-common skips its `content or tool_calls` check (_allow_tool_call_and_content), so an assistant message with neither passes; an empty training target teaches nothing and the APIs reject empty assistant content",
    ),
    ("invalid_arguments", false, true, "mistral-common never parses call arguments; a training target whose arguments are not a JSON object teaches broken calls"),
    ("undeclared_tool", false, true, "mistral-common validates the tool definitions, not that calls name one of them"),
    ("missing_argument", false, true, "mistral-common does not check arguments against the declared schema's required properties"),
    (
        "misplaced_system",
        true,
        false,
        "mistral-common's message order rejects a system message after an assistant or tool message; the OpenAI APIs accept it, so transcriptd only warns (misplaced_system)",
    ),
];

#[test]
fn differential_against_mistral_common() {
    if !super::support::peer_present(
        "mistral-common (pip install mistral-common==1.13.1; .ci/run installs it)",
        super::support::python_imports("mistral_common"),
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("d.jsonl");
    let manifest = generate(&file, &["--format", "openai-dataset", "--lines", "1200", "--faults", "0.6", "--seed", "7"]);
    let peer = Command::new("python3").arg(root().join("tests/integration/peers/mistral_verdicts.py")).arg(&file).output().unwrap();
    assert!(peer.status.success(), "mistral_verdicts.py failed (is mistral-common installed? .ci/run installs it): {}", stderr(&peer));
    let peer: BTreeMap<u64, Value> =
        stdout(&peer).lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).map(|v| (v["line"].as_u64().unwrap(), v)).collect();
    let input = std::fs::read(&file).unwrap();
    let (findings, _, _) = check_bytes(&input, Options::default()).unwrap();
    let rejected: BTreeSet<u64> = findings.iter().filter(|f| f.severity == Severity::Error).map(|f| f.line).collect();
    let faults: BTreeMap<u64, &str> = manifest.iter().map(|m| (m["line"].as_u64().unwrap(), m["fault"].as_str().unwrap())).collect();
    let mut seen: BTreeMap<&str, u64> = BTreeMap::new();
    assert_eq!(peer.len(), 1200);
    for (line, p) in &peer {
        let fault = faults.get(line).copied().unwrap_or("clean");
        let (ours, theirs) = (!rejected.contains(line), p["ok"].as_bool().unwrap());
        let expected = DIFFERENCES.iter().find(|d| d.0 == fault).map_or((theirs, theirs), |d| (d.1, d.2));
        assert_eq!((ours, theirs), expected, "line {line} ({fault}): transcriptd accepts: {ours}, mistral-common: {} {}", theirs, p["error"]);
        *seen.entry(fault).or_default() += 1;
    }
    // Every fault kind of the generator was exercised, and clean lines too.
    for kind in ["clean", "missing_result", "orphan_result", "duplicate_result", "result_after_prompt", "unknown_role", "no_final_answer", "malformed"] {
        assert!(seen.get(kind).is_some_and(|&n| n >= 10), "too few `{kind}` lines: {seen:?}");
    }
    for d in DIFFERENCES {
        assert!(seen.get(d.0).is_some_and(|&n| n >= 10), "too few `{}` lines: {seen:?}", d.0);
    }
}

#[test]
fn real_public_datasets() {
    let dir = data("real-datasets");
    let expected: Vec<Value> = std::fs::read_to_string(dir.join("EXPECTED.jsonl")).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut actual = Vec::new();
    let files = super::support::jsonl_files(&dir);
    let files: Vec<&PathBuf> = files.iter().filter(|p| !p.ends_with("EXPECTED.jsonl")).collect();
    assert!(!files.is_empty());
    for file in &files {
        let input = std::fs::read(file).unwrap();
        let (findings, _, format) = check_bytes(&input, Options::default()).unwrap();
        assert!(format.and_then(Format::dataset).is_some(), "{}: detected {format:?}", file.display());
        let rel = file.strip_prefix(&dir).unwrap().to_str().unwrap();
        for f in findings {
            actual.push(
                serde_json::json!({"file": rel, "line": f.line, "message_index": f.message_index, "kind": f.kind.as_str(), "severity": f.severity.as_str()}),
            );
        }
        // A clean real file is left as it is by every policy; in one with errors, the lines with
        // errors are the ones repaired or removed, and the others stay as they are.
        let bad: BTreeSet<u64> = actual.iter().filter(|a| a["file"] == rel && a["severity"] == "error").map(|a| a["line"].as_u64().unwrap()).collect();
        for policy in ["drop", "truncate", "answer"] {
            let out = tempfile::tempdir().unwrap();
            let (output, rejects) = repair(file, out.path(), &["--dataset-policy", policy]);
            let touched: BTreeSet<u64> = rejects.iter().map(|r| r["line"].as_u64().unwrap()).collect();
            assert_eq!(touched, bad, "{rel}: {policy}");
            if rejects.iter().all(|r| r["action"] == "removed") {
                let kept: Vec<&[u8]> =
                    input.split_inclusive(|&b| b == b'\n').enumerate().filter(|(i, _)| !bad.contains(&(*i as u64 + 1))).map(|(_, l)| l).collect();
                assert_eq!(output, kept.concat(), "{rel}: {policy} output");
            }
        }
    }
    assert_eq!(actual, expected, "findings on the real datasets differ from EXPECTED.jsonl");
    // The ShareGPT slice: its calls and tools, as stats counts them.
    let glaive = dir.join("sharegpt/glaive_toolcall_en_demo.head40.jsonl");
    let o = transcriptd(&["stats", "--no-tokens", "-o", "json", glaive.to_str().unwrap()]);
    let s = &json_lines(&o)[0];
    assert_eq!((s["conversations"].as_u64(), s["messages"].as_u64(), s["tool_calls"].as_u64()), (Some(40), Some(266), Some(29)));
    assert_eq!(s["tool_calls_per_tool"]["calculate_area"], 3);
}

/// Findings stay byte-identical across speed work: `check -o json` of generated datasets (every
/// format, 60% of lines with one injected fault of any kind, seed 19) against the output of
/// the build before the work (`tests/data/dataset-golden/`, written by the build of `ec5654c`),
/// with one thread and with two.
#[test]
fn findings_on_generated_datasets_are_those_of_the_reference_build() {
    let dir = tempfile::tempdir().unwrap();
    for format in FORMATS {
        let name = format!("{format}.jsonl");
        generate(&dir.path().join(&name), &["--format", format, "--lines", "300", "--faults", "0.6", "--seed", "19"]);
        let expected = std::fs::read_to_string(data("dataset-golden").join(format!("{format}.findings.jsonl"))).unwrap();
        for jobs in ["1", "2"] {
            let out = super::support::transcriptd_in(dir.path(), &["check", "-o", "json", "--jobs", jobs, &name]);
            assert_eq!(out.status.code(), Some(1), "{format}: {}", stderr(&out));
            assert!(stdout(&out) == expected, "{format} --jobs {jobs}: findings differ from tests/data/dataset-golden/{format}.findings.jsonl");
        }
    }
}

#[test]
fn a_dataset_repair_says_how_many_examples_it_dropped_truncated_and_answered() {
    // Issue 30: `--dataset-policy drop` removed 4 of 6 examples and said only "repaired (0
    // inserted, 4 removed, 0 modified)": the examples gone from the training data, and those
    // changed and how, are said as such, per file, in the summary and in the JSON report.
    let d = tempfile::tempdir().unwrap();
    let broken = std::fs::read_to_string(data("dataset/openai-dataset/0002_issue_example.jsonl")).unwrap();
    let clean = std::fs::read_to_string(data("dataset/openai-dataset/0001_clean_tool_round_trip.jsonl")).unwrap();
    // A role the format does not have: no policy but drop can mend it.
    let lost = r#"{"messages":[{"role":"user","content":"hi"},{"role":"bot","content":"x"},{"role":"assistant","content":"ok"}]}"#;
    let f = d.path().join("train.jsonl");
    std::fs::write(&f, format!("{clean}{broken}{broken}{lost}\n")).unwrap();
    let gemini = data("dataset-repair/gemini-tuning/0001_calls_and_responses.jsonl");
    for (file, policy, (dropped, truncated, answered)) in
        [(&f, "drop", (3, 0, 0)), (&f, "truncate", (1, 2, 0)), (&f, "answer", (1, 0, 2)), (&gemini, "answer", (1, 0, 3)), (&gemini, "truncate", (1, 3, 0))]
    {
        let out = d.path().join(format!("out-{policy}-{dropped}"));
        let args = ["repair", "--force", "--dataset-policy", policy, "--out", out.to_str().unwrap(), file.to_str().unwrap()];
        let o = transcriptd(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let name = file.file_name().unwrap().to_str().unwrap();
        let noun = if dropped == 1 { "example" } else { "examples" };
        let said = format!("{name}: repaired: {dropped} {noun} dropped, {truncated} truncated, {answered} answered (the originals are in its rejects file)");
        assert!(stdout(&o).contains(&said), "{policy}: {}", stdout(&o));
        let summary = format!("; dataset examples: {dropped} dropped, {truncated} truncated, {answered} answered");
        assert!(stderr(&o).contains(&summary), "{policy}: {}", stderr(&o));
        // The rejects file holds as many records as examples changed.
        let rejects = std::fs::read_to_string(out.join(name.replace(".jsonl", ".rejects.jsonl"))).unwrap();
        assert_eq!(rejects.lines().count() as u64, dropped + truncated + answered, "{policy}");
        let j = transcriptd(&[&args[..], &["-o", "json"]].concat());
        let v = &json_lines(&j)[0];
        assert_eq!(v["examples"], serde_json::json!({"dropped": dropped, "truncated": truncated, "answered": answered}), "{policy}: {v}");
    }
    // A transcript's report has no examples.
    let session = data("readme/session.jsonl");
    let j = transcriptd(&["repair", "--force", "-o", "json", "--out", d.path().join("t").to_str().unwrap(), session.to_str().unwrap()]);
    assert!(json_lines(&j)[0].get("examples").is_none(), "{}", stdout(&j));
}

#[test]
fn stats_reports_the_lines_it_cannot_read_exits_1_and_aligns_its_columns() {
    // Issue 30: `stats` skipped a broken line silently (exit 0, the figures short of it) and its
    // columns were misaligned.
    let d = tempfile::tempdir().unwrap();
    let clean = std::fs::read_to_string(data("dataset/openai-dataset/0001_clean_tool_round_trip.jsonl")).unwrap();
    let f = d.path().join("train.jsonl");
    // Line 4 is not JSON, line 5 is over the line limit below, line 6 is JSON but no object.
    let long = format!("{{\"messages\":[{{\"role\":\"user\",\"content\":\"{}\"}}]}}", "a".repeat(5000));
    std::fs::write(&f, format!("{clean}{{\"messages\": [tx\n{long}\n[1]\n{clean}")).unwrap();
    let name = f.to_str().unwrap();
    let o = transcriptd(&["stats", "--max-line-bytes", "4096", name]);
    assert_eq!(o.status.code(), Some(1), "a line not read exits 1, as `check` does: {}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(&format!("{name}:4: error: malformed_line: not JSON: ")), "{err}");
    assert!(err.contains(&format!("{name}:5: error: line_too_long: line of {} bytes is over the limit of 4096", long.len())), "{err}");
    assert!(err.contains(&format!("{name}:6: error: malformed_line: JSON that is not an object")), "{err}");
    assert!(err.contains("stats: 3 lines could not be read and are not counted"), "{err}");
    let out = stdout(&o);
    assert_aligned(&out);
    let row =
        |label: &str| out.lines().find(|l| l.trim_start().starts_with(label)).map(|l| l[label.len() + 2..].split_whitespace().collect::<Vec<_>>().join(" "));
    assert_eq!(row("conversations").as_deref(), Some("6 in 9 lines"), "{out}");
    assert_eq!(row("unreadable lines").as_deref(), Some("3 (not counted; see the messages on stderr)"), "{out}");
    let j = transcriptd(&["stats", "--max-line-bytes", "4096", "-o", "json", name]);
    assert_eq!(j.status.code(), Some(1));
    let v: Value = serde_json::from_str(stdout(&j).trim()).unwrap();
    assert_eq!((v["lines"].as_u64(), v["conversations"].as_u64(), v["unreadable_lines"].as_u64()), (Some(9), Some(6), Some(3)), "{v}");
    // A clean dataset still exits 0 and says 0.
    std::fs::write(&f, &clean).unwrap();
    let o = transcriptd(&["stats", name]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_aligned(&stdout(&o));
    assert!(stdout(&o).lines().any(|l| l.starts_with("  unreadable lines ") && l.ends_with(" 0")), "{}", stdout(&o));
}

/// `stats`' rows: labels padded to the widest, numbers right-aligned so that they end in one
/// column, distributions starting where the numbers do.
fn assert_aligned(out: &str) {
    let rows: Vec<&str> = out.lines().skip(1).collect();
    let label = rows.iter().map(|r| r.trim_start().split("  ").next().unwrap().len()).max().unwrap();
    let (mut ends, mut pads) = (BTreeSet::new(), BTreeSet::new());
    for r in &rows {
        assert!(r.starts_with("  ") && !r[2..].starts_with(' ') && r[2 + label..].starts_with("  "), "label column of {label}: {r:?}\n{out}");
        let cell = &r[2 + label + 2..];
        if r.contains(" min ") {
            assert!(cell.starts_with("min "), "a distribution starts where the numbers do: {r:?}\n{out}");
            continue;
        }
        let pad = cell.len() - cell.trim_start().len();
        let number = cell[pad..].split([' ', ':']).next().unwrap();
        assert!(number.trim_start_matches('~').parse::<u64>().is_ok(), "{r:?}\n{out}");
        pads.insert(pad);
        ends.insert(pad + number.len());
    }
    assert_eq!(pads.first(), Some(&0), "the widest number starts the column: {out}");
    assert_eq!(ends.len(), 1, "numbers end in one column: {ends:?}\n{out}");
}
