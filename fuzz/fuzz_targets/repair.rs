//! `repair` keeps its promises for any input (`tests/integration/invariants.rs`: no panic, a
//! true verdict, nothing lost), and its one pass gives the bytes of the two passes.

#![no_main]

mod common;

use libfuzzer_sys::{fuzz_mutator, fuzz_target};
use transcriptd::transcript::repair_run::{plan_bytes, repair_bytes_streaming, rewrite_bytes};

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| { common::structured_mutate(data, size, max_size, seed) });

fuzz_target!(|data: &[u8]| {
    let (opts, policy) = common::options(data);
    if let Err(e) = common::invariants::check(data, &opts, policy) {
        panic!("{e}");
    }
    let plan = plan_bytes(data, &opts, policy).expect("lenient");
    let (output, rejects, log) = rewrite_bytes(data, &plan, opts.max_line_bytes, true);
    let chunk = 1 + (common::hash(data) % 97) as usize;
    let one = repair_bytes_streaming(data, &opts, policy, chunk).expect("lenient");
    assert!(one.output == output, "one pass (chunks of {chunk}) and two passes give different outputs");
    assert!(one.rejects == rejects, "one pass (chunks of {chunk}) and two passes give different rejects");
    assert_eq!(one.plan, plan);
    assert_eq!(one.log, log);
});
