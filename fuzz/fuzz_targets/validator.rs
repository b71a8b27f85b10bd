//! The check pipeline (framing, detection, adapters, validation) on any input: no panic, and
//! the same findings and counters whether the input comes in one piece, in small chunks or
//! parsed on two threads; the strict policy stops at the first unreadable line the lenient one
//! reports.

#![no_main]

mod common;

use libfuzzer_sys::{fuzz_mutator, fuzz_target};
use transcriptd::transcript::check::{self, check_bytes};
use transcriptd::transcript::Options;

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| { common::structured_mutate(data, size, max_size, seed) });

fuzz_target!(|data: &[u8]| {
    let (opts, _) = common::options(data);
    let (findings, stats, format) = check_bytes(data, opts.clone()).expect("lenient");
    let chunk = 1 + (common::hash(data) % 61) as usize;
    let mut c = check::pipeline(opts.clone());
    for piece in data.chunks(chunk) {
        c.feed(piece).expect("lenient");
    }
    let _ = c.pending();
    let (events, chunked_stats, chunked_format) = c.finish().expect("lenient");
    assert_eq!(check::findings(events), findings, "chunks of {chunk}");
    assert_eq!(chunked_stats, stats);
    assert_eq!(chunked_format, format);
    let parallel = check_bytes(data, Options { jobs: 2, ..opts.clone() }).expect("lenient");
    assert_eq!(parallel, (findings.clone(), stats, format), "two threads");
    let first_bad = findings.iter().filter(|f| f.kind.is_framing()).map(|f| f.line).min();
    match check_bytes(data, Options { strict: true, ..opts }) {
        Ok(_) => assert_eq!(first_bad, None, "strict went past an unreadable line"),
        Err(stop) => assert_eq!(Some(stop.line), first_bad, "strict stopped elsewhere"),
    }
});
