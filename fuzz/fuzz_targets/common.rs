//! What the fuzz targets share: the structure-aware mutator of the mutation test, the
//! promises of `repair` and the framing helpers, included from `tests/integration/` so that the
//! fuzzer and `cargo test` check the same things; and the pool of real lines to mutate with.

#![allow(dead_code)]

#[path = "../../tests/integration/framing.rs"]
pub mod framing;
#[path = "../../tests/integration/invariants.rs"]
pub mod invariants;
#[path = "../../tests/integration/support/mutate.rs"]
pub mod mutate;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use transcriptd::transcript::repair::OrphanPolicy;
use transcriptd::transcript::Options;

/// The line limit of the runs with a small one (and of the long lines the mutator makes).
pub const SMALL_LIMIT: usize = 2048;

fn jsonl_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            jsonl_under(&p, out);
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
        }
    }
}

/// Lines of the real fixtures (and the data-driven cases), to borrow from.
pub fn pool() -> &'static [&'static [u8]] {
    static POOL: OnceLock<Vec<&'static [u8]>> = OnceLock::new();
    POOL.get_or_init(|| {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data");
        let mut files = Vec::new();
        for d in ["real", "check", "repair"] {
            jsonl_under(&data.join(d), &mut files);
        }
        files.sort();
        let mut lines = Vec::new();
        for f in files {
            let bytes: &'static [u8] = Box::leak(std::fs::read(&f).unwrap_or_default().into_boxed_slice());
            lines.extend(bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty() && l.len() < 4096));
        }
        lines
    })
}

/// libFuzzer's custom mutator: one structure-aware mutation (lines duplicated, removed,
/// reordered, borrowed; ids, parents and types changed; CRLF, a byte-order mark, long lines, a
/// torn end) two times in three, libFuzzer's own byte-level mutation otherwise.
pub fn structured_mutate(data: &mut [u8], size: usize, max_size: usize, seed: u32) -> usize {
    let mut rng = mutate::Rng(u64::from(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ size as u64);
    if rng.one_in(3) {
        return libfuzzer_sys::fuzzer_mutate(data, size, max_size);
    }
    let out = mutate::mutate_once(&data[..size], &mut rng, pool(), SMALL_LIMIT);
    let n = out.len().min(max_size);
    data[..n].copy_from_slice(&out[..n]);
    n
}

/// A small hash of the input, to vary options and chunk sizes with it.
pub fn hash(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64 ^ data.len() as u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// The options an input is checked with: half the runs with a small line limit (long lines
/// are then over it), every orphan policy.
pub fn options(data: &[u8]) -> (Options, OrphanPolicy) {
    let h = hash(data);
    let max_line_bytes = if h & 1 == 0 { SMALL_LIMIT } else { Options::default().max_line_bytes };
    let policy = match (h >> 1) % 4 {
        0 | 1 => OrphanPolicy::Answer,
        2 => OrphanPolicy::Drop,
        _ => OrphanPolicy::Keep,
    };
    (Options { max_line_bytes, ..Options::default() }, policy)
}

/// One adapter on any line: no panic; it reads a line exactly when the line is a JSON object;
/// detection and the validator take whatever it reads.
pub fn adapter(format: transcriptd::transcript::Format, data: &[u8]) {
    use transcriptd::transcript::formats::Detector;
    use transcriptd::transcript::scan;
    use transcriptd::transcript::pairing::validator::Validator;
    // Framing hands adapters valid UTF-8 lines only.
    if std::str::from_utf8(data).is_err() {
        return;
    }
    let object = scan::object_line(data, |s, _| s.skip()).is_ok();
    let parsed = format.parse(data);
    assert_eq!(parsed.is_ok(), object, "read as an object or not");
    let mut d = Detector::new();
    d.observe(data);
    if let Ok(p) = parsed {
        let mut v = Validator::new(format);
        v.push(1, &p, &mut |_| {});
        v.push(2, &p, &mut |_| {});
        v.finish(&mut |_| {});
    }
}
