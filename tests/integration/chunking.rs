//! The paths agree: a transcript fed in one chunk, byte by byte, in random chunk splits, or
//! parsed by several threads gives the same findings.

use super::support::{data, jsonl_files};
use proptest::prelude::*;
use transcriptd::transcript::{check, checker, Finding, Options};

fn run(input: &[u8], cuts: &[usize]) -> Vec<Finding> {
    let mut c = check::pipeline(Options::default());
    let mut start = 0;
    for &cut in cuts {
        let cut = cut.clamp(start, input.len());
        c.feed(&input[start..cut]).unwrap();
        start = cut;
    }
    c.feed(&input[start..]).unwrap();
    check::findings(c.finish().unwrap().0)
}

/// Parsed by `jobs` threads, read `chunk` bytes at a time.
fn parallel(input: &[u8], jobs: usize, chunk: usize) -> Vec<Finding> {
    let mut c = check::pipeline(Options::default());
    let mut rest = input;
    checker::feed_parallel(c.checker_mut().unwrap(), jobs, chunk, |buf| {
        let n = buf.len().min(rest.len());
        buf[..n].copy_from_slice(&rest[..n]);
        rest = &rest[n..];
        n
    })
    .unwrap();
    check::findings(c.finish().unwrap().0)
}

#[test]
fn real_fixtures_line_by_line_equal_one_chunk() {
    for f in jsonl_files(&data("real")) {
        let input = std::fs::read(&f).unwrap();
        let whole = run(&input, &[]);
        let at_newlines: Vec<usize> = input.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i + 1).collect();
        assert_eq!(whole, run(&input, &at_newlines), "{}", f.display());
        for (jobs, chunk) in [(2, 1 << 10), (4, 4093), (3, 64 << 10)] {
            assert_eq!(whole, parallel(&input, jobs, chunk), "{} with {jobs} jobs, {chunk}-byte reads", f.display());
        }
    }
}

#[test]
fn data_cases_byte_by_byte_equal_one_chunk() {
    for f in jsonl_files(&data("check")) {
        let input = std::fs::read(&f).unwrap();
        let each: Vec<usize> = (1..input.len()).collect();
        assert_eq!(run(&input, &[]), run(&input, &each), "{}", f.display());
    }
}

/// The repair regression cases (found by the fuzz targets and the mutation test), with the
/// line limit their name asks for: byte by byte as in one chunk, counters included (an
/// over-long `\r\n` line read across chunks once lost its `\r` from the byte count).
#[test]
fn regression_cases_byte_by_byte_equal_one_chunk() {
    for f in jsonl_files(&data("repair")) {
        let input = std::fs::read(&f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let max = name.split('.').find_map(|p| p.strip_prefix("max").and_then(|n| n.parse().ok()));
        let opts = Options { max_line_bytes: max.unwrap_or(Options::default().max_line_bytes), ..Options::default() };
        let whole = transcriptd::transcript::check_bytes(&input, opts.clone()).unwrap();
        let mut c = check::pipeline(opts);
        for b in input.chunks(1) {
            c.feed(b).unwrap();
        }
        let (events, stats, format) = c.finish().unwrap();
        assert_eq!((check::findings(events), stats, format), whole, "{name}");
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
        prop_assert_eq!(run(&input, &[]), run(&input, &cuts));
    }

    #[test]
    fn parallel_parse_of_real_fixtures(file in 0usize..1000, jobs in 2usize..5, chunk in 1usize..20_000) {
        let files = jsonl_files(&data("real"));
        let f = &files[file % files.len()];
        let input = std::fs::read(f).unwrap();
        prop_assert_eq!(run(&input, &[]), parallel(&input, jobs, chunk));
    }
}
