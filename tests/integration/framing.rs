//! Line framing seen from both ends, as comparable lists: the forward splitter fed in chunks of
//! any size, and the reverse splitter fed pages of any size (shared by `reverse.rs` and the
//! `lines` fuzz target, which includes this file).

use transcriptd::transcript::lines::{lines, Block, LineSplitter};
use transcriptd::transcript::reverse::{RevItem, ReverseSplitter};
use transcriptd::transcript::Progress;

/// A framed line as both directions report it: (number, offset, what).
pub type Framed = (u64, u64, String);

fn what(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Frames `input` forward, fed in chunks of `chunk` bytes.
pub fn forward_in(input: &[u8], max: usize, chunk: usize) -> Vec<Framed> {
    let mut s = LineSplitter::new(max);
    let mut got = Vec::new();
    let mut next = 1u64;
    for piece in input.chunks(chunk.max(1)) {
        s.feed(piece, &mut |b| match b {
            Block::Lines { offset, bytes } => {
                let mut it = lines(next, offset, bytes);
                for l in it.by_ref() {
                    // Too long counts the whole line (a byte-order mark too), as the splitter does.
                    let len = l.bytes.len() + if l.bom { 3 } else { 0 };
                    let w = if l.bytes.len() > l.limit(max) { format!("<too long {len}>") } else { what(l.bytes) };
                    got.push((l.number, l.offset, w));
                }
                next = it.next_number();
            }
            Block::TooLong { offset, len, .. } => {
                got.push((next, offset, format!("<too long {len}>")));
                next += 1;
            }
            Block::LongBytes(_) => {}
        });
    }
    if let Some(t) = s.finish() {
        let w = match t.bytes {
            Some(b) => format!("<torn {} {}>", t.len, what(b)),
            None => format!("<torn {}>", t.len),
        };
        got.push((next, t.offset, w));
    }
    got
}

/// Frames `input` forward, in 64 KiB chunks.
pub fn forward(input: &[u8], max: usize) -> Vec<Framed> {
    forward_in(input, max, 1 << 16)
}

/// Reads `input` backwards in pages of the given sizes (cycled), newest first, then numbers
/// the lines once the start is reached.
pub fn backward(input: &[u8], max: usize, pages: &[usize]) -> Vec<Framed> {
    let mut r = ReverseSplitter::new(input.len() as u64, max);
    let mut got: Vec<Framed> = Vec::new();
    let mut push = |it: RevItem<'_>| {
        let w = match it {
            RevItem::Line { bytes, .. } => what(bytes),
            RevItem::TooLong { len, .. } => format!("<too long {len}>"),
            RevItem::Torn { bytes: Some(b), len, .. } => format!("<torn {len} {}>", what(b)),
            RevItem::Torn { bytes: None, len, .. } => format!("<torn {len}>"),
        };
        got.push((it.from_end(), it.offset(), w));
        Progress::NeedMore
    };
    let mut k = 0;
    while let Some(range) = r.next_page(pages[k % pages.len()].max(1)) {
        k += 1;
        assert_eq!(r.feed(&input[range.start as usize..range.end as usize], &mut push), Progress::NeedMore);
    }
    let _ = r.finish(&mut push);
    got.reverse();
    got.into_iter().map(|(from_end, o, w)| (r.number(from_end).unwrap(), o, w)).collect()
}
