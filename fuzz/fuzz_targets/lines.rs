//! Line framing on any bytes: the same lines, numbers, offsets and reports whatever the chunk
//! size, and from the end in pages of any size.

#![no_main]

mod common;

use common::framing::{backward, forward, forward_in};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let h = common::hash(data);
    let max = 1 + (h % 40) as usize;
    let whole = forward(data, max);
    let chunk = 1 + ((h >> 8) % 13) as usize;
    assert_eq!(forward_in(data, max, chunk), whole, "chunks of {chunk}, max {max}");
    let pages = [1 + ((h >> 16) % 17) as usize, 1 + ((h >> 24) % 5) as usize];
    assert_eq!(backward(data, max, &pages), whole, "pages {pages:?}, max {max}");
});
