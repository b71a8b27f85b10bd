//! Data-driven rule tests: `tests/data/check/<format>/NNNN_name.jsonl` is checked and its error
//! and warning findings compared with `NNNN_name.expected` beside it (`line kind severity
//! [call_id]`, one per line). The directory names the format detection must find.

use super::support::{data, expect_file};
use transcriptd::transcript::{check_bytes, Options};

#[test]
fn every_case_matches_its_expectation() {
    let mut count = 0;
    for dir in std::fs::read_dir(data("check")).unwrap() {
        let dir = dir.unwrap().path();
        let format = dir.file_name().unwrap().to_str().unwrap().to_owned();
        let mut cases: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "jsonl")).collect();
        cases.sort();
        for case in cases {
            let input = std::fs::read(&case).unwrap();
            let (findings, _, detected) = check_bytes(&input, Options::default()).unwrap();
            assert_eq!(detected.map(|f| f.to_string()).as_deref(), Some(format.as_str()), "{}: detected format", case.display());
            let mut actual = String::new();
            for f in &findings {
                actual.push_str(&format!("{} {} {}", f.line, f.kind, f.severity.as_str()));
                if let Some(c) = &f.call_id {
                    actual.push(' ');
                    actual.push_str(c);
                }
                actual.push('\n');
            }
            expect_file(&case.with_extension("expected"), &actual);
            count += 1;
        }
    }
    assert!(count >= 40, "only {count} cases found");
}

/// Pi: a compaction whose `firstKeptEntryId` is a result keeps the result and summarises its
/// call: `check` says so at the result (Pi sends it alone, `tests/integration/oracle.rs` shows).
/// `repair` does not mend it yet (the mend would move `firstKeptEntryId` past the result):
/// removing the result would leave its call unanswered, so it refuses and writes nothing. Not in
/// `tests/data/check/`, whose every case repair mends.
#[test]
fn a_pi_compaction_that_keeps_a_result_without_its_call() {
    let case = data("context/pi/0005_compaction_keeps_a_result_without_its_call.jsonl");
    let (findings, _, detected) = check_bytes(&std::fs::read(&case).unwrap(), Options::default()).unwrap();
    assert_eq!(detected.map(|f| f.to_string()).as_deref(), Some("pi"));
    let got: Vec<(u64, &str, Option<&str>)> = findings.iter().map(|f| (f.line, f.kind.as_str(), f.call_id.as_deref())).collect();
    assert_eq!(got, [(4, "orphan_result", Some("toolu_1"))]);
    let out = tempfile::tempdir().unwrap();
    let o = super::support::transcriptd(&["repair", "--no-summary", "--out", out.path().to_str().unwrap(), case.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!out.path().join(case.file_name().unwrap()).exists());
}
