//! The paths agree: a transcript fed in one chunk, byte by byte, in random chunk splits, or
//! parsed by several threads gives the same findings.

use super::support::{data, jsonl_files};
use proptest::prelude::*;
use transcriptd::transcript::{checker, Checker, Finding, Options};

fn run(input: &[u8], cuts: &[usize], jobs: usize) -> Vec<Finding> {
    let mut c = Checker::new(Options { jobs, ..Options::default() });
    let mut start = 0;
    for &cut in cuts {
        let cut = cut.clamp(start, input.len());
        c.feed(&input[start..cut]).unwrap();
        start = cut;
    }
    c.feed(&input[start..]).unwrap();
    checker::collect(c.finish().unwrap().outputs)
}

#[test]
fn real_fixtures_line_by_line_equal_one_chunk() {
    for f in jsonl_files(&data("real")) {
        let input = std::fs::read(&f).unwrap();
        let whole = run(&input, &[], 1);
        let at_newlines: Vec<usize> = input.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i + 1).collect();
        assert_eq!(whole, run(&input, &at_newlines, 1), "{}", f.display());
        assert_eq!(whole, run(&input, &[], 4), "{} with 4 jobs", f.display());
    }
}

#[test]
fn data_cases_byte_by_byte_equal_one_chunk() {
    for f in jsonl_files(&data("check")) {
        let input = std::fs::read(&f).unwrap();
        let each: Vec<usize> = (1..input.len()).collect();
        assert_eq!(run(&input, &[], 1), run(&input, &each, 1), "{}", f.display());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn random_splits_of_real_fixtures(file in 0usize..1000, cuts in proptest::collection::vec(0usize..1_100_000, 0..40)) {
        let files = jsonl_files(&data("real"));
        let f = &files[file % files.len()];
        let input = std::fs::read(f).unwrap();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (input.len() + 1)).collect();
        cuts.sort();
        prop_assert_eq!(run(&input, &[], 1), run(&input, &cuts, 1));
    }
}
