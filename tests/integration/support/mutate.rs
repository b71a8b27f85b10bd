//! Structure-aware mutations of transcripts, for the mutation test and the fuzz targets in
//! `fuzz/` (which include this file): byte flips, duplicated, removed, reordered and foreign
//! lines, changed ids, parents, types and roles, dropped fields and content blocks, CRLF line
//! ends, a byte-order mark, over-long lines, blank lines and a torn end. Deterministic for a
//! given random source.

use serde_json::Value;

/// A small deterministic random source (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// True with probability 1/n.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

/// Keys whose string values are ids the pairing and the tree follow.
const ID_KEYS: &[&str] = &["id", "tool_use_id", "call_id", "tool_call_id", "uuid", "parentUuid", "logicalParentUuid", "leafUuid", "sessionId"];
/// Keys that say what a record or block is.
const TYPE_KEYS: &[&str] = &["type", "role", "subtype"];
/// Values those keys take in the four formats (and a few they do not).
const TYPES: &[&str] = &[
    "user",
    "assistant",
    "system",
    "developer",
    "tool",
    "progress",
    "summary",
    "compact_boundary",
    "response_item",
    "event_msg",
    "compacted",
    "turn_context",
    "session_meta",
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "tool_use",
    "tool_result",
    "text",
    "thinking",
    "input_text",
    "output_text",
    "server_tool_use",
    "web_search_call",
    "",
    "future-thing",
];
/// Bytes byte flips favour: JSON structure, escapes, line ends, invalid UTF-8.
const BYTES: &[u8] = &[b'"', b'{', b'}', b'[', b']', b',', b':', b'\\', b'\n', b'\r', 0, 0xff, 0xc3, 0x80, b' ', b'u', b'0', b'n', b't'];

/// The lines of `input` (without their `\n`) and whether the last one had one.
fn split(input: &[u8]) -> (Vec<Vec<u8>>, bool) {
    let ends = input.last() == Some(&b'\n');
    let mut lines: Vec<Vec<u8>> = input.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    if ends {
        lines.pop();
    }
    (lines, ends || input.is_empty())
}

fn join(lines: &[Vec<u8>], ends: bool) -> Vec<u8> {
    let mut out = lines.join(&b'\n');
    if ends && !lines.is_empty() {
        out.push(b'\n');
    }
    out
}

/// Every string value under one of `keys`, anywhere in `v`.
fn strings_under(v: &Value, keys: &[&str], out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if let (true, Value::String(s)) = (keys.contains(&k.as_str()), x) {
                    out.push(s.clone());
                }
                strings_under(x, keys, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| strings_under(x, keys, out)),
        _ => {}
    }
}

/// Paths (object keys and array indexes) to every member named one of `keys`.
fn paths_to(v: &Value, keys: &[&str], at: &mut Vec<PathStep>, out: &mut Vec<Vec<PathStep>>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                at.push(PathStep::Key(k.clone()));
                if keys.is_empty() || keys.contains(&k.as_str()) {
                    out.push(at.clone());
                }
                paths_to(x, keys, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                at.push(PathStep::Index(i));
                if keys.is_empty() {
                    out.push(at.clone());
                }
                paths_to(x, keys, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

#[derive(Debug, Clone)]
enum PathStep {
    Key(String),
    Index(usize),
}

fn get_mut<'a>(v: &'a mut Value, path: &[PathStep]) -> Option<&'a mut Value> {
    let mut at = v;
    for s in path {
        at = match s {
            PathStep::Key(k) => at.get_mut(k.as_str())?,
            PathStep::Index(i) => at.get_mut(*i)?,
        };
    }
    Some(at)
}

/// The parent container of `path` and the last step.
fn parent_mut<'a>(v: &'a mut Value, path: &'a [PathStep]) -> Option<(&'a mut Value, &'a PathStep)> {
    let (last, init) = path.split_last()?;
    Some((get_mut(v, init)?, last))
}

/// Applies one structure-aware mutation to `input`. `pool` holds lines to borrow from (other
/// transcripts); `max_line` is the line limit the result will be checked with.
pub fn mutate_once(input: &[u8], rng: &mut Rng, pool: &[&[u8]], max_line: usize) -> Vec<u8> {
    let (mut lines, ends) = split(input);
    let n = lines.len();
    match rng.below(18) {
        0 | 1 if !input.is_empty() => {
            let mut b = input.to_vec();
            let at = rng.below(b.len());
            let byte = if rng.one_in(4) { rng.next() as u8 } else { *rng.pick(BYTES) };
            match rng.below(3) {
                0 => b[at] = byte,
                1 => b.insert(at, byte),
                _ => drop(b.remove(at)),
            }
            return b;
        }
        2 if n > 0 => {
            let i = rng.below(n);
            let l = lines[i].clone();
            lines.insert(rng.below(n + 1), l);
        }
        3 if n > 0 => drop(lines.remove(rng.below(n))),
        4 if n > 1 => {
            let (i, j) = (rng.below(n), rng.below(n));
            lines.swap(i, j);
        }
        5 if n > 1 => {
            let i = rng.below(n - 1);
            lines.swap(i, i + 1);
        }
        6 if !pool.is_empty() => {
            let l = rng.pick(pool).to_vec();
            lines.insert(rng.below(n + 1), l);
        }
        7..=12 if n > 0 => {
            let i = rng.below(n);
            let Ok(mut v) = serde_json::from_slice::<Value>(&lines[i]) else { return join(&lines, ends) };
            let mut ids = Vec::new();
            for l in &lines {
                if let Ok(x) = serde_json::from_slice::<Value>(l) {
                    strings_under(&x, ID_KEYS, &mut ids);
                }
            }
            json_mutation(&mut v, rng, &ids, max_line);
            lines[i] = serde_json::to_vec(&v).expect("a value serializes");
        }
        13 => {
            // CRLF: one line, or all.
            if rng.one_in(2) {
                lines.iter_mut().for_each(|l| l.push(b'\r'));
            } else if n > 0 {
                let i = rng.below(n);
                lines[i].push(b'\r');
            }
        }
        14 => {
            let mut b = b"\xEF\xBB\xBF".to_vec();
            b.extend_from_slice(&join(&lines, ends));
            return b;
        }
        15 => {
            const BLANKS: [&[u8]; 4] = [b"", b"  ", b"\r", b"\t \r"];
            let blank = rng.pick(&BLANKS).to_vec();
            lines.insert(rng.below(n + 1), blank);
        }
        16 if !input.is_empty() => {
            // A torn end: the input cut anywhere.
            let at = input.len() - rng.below(input.len().min(200)) - 1;
            return input[..at].to_vec();
        }
        17 => {
            let long = format!("{{\"type\":\"progress\",\"data\":\"{}\"}}", "x".repeat(max_line.min(1 << 20) + rng.below(8)));
            lines.insert(rng.below(n + 1), long.into_bytes());
        }
        _ => {}
    }
    join(&lines, ends)
}

/// A mutation inside one JSON line: an id, parent or type changed, a field or a content block
/// dropped or duplicated, content emptied, a long string.
fn json_mutation(v: &mut Value, rng: &mut Rng, ids: &[String], max_line: usize) {
    match rng.below(6) {
        0 | 1 => {
            let mut paths = Vec::new();
            paths_to(v, ID_KEYS, &mut Vec::new(), &mut paths);
            let Some(p) = (!paths.is_empty()).then(|| rng.pick(&paths).clone()) else { return };
            let new = match rng.below(6) {
                0..=2 if !ids.is_empty() => Value::String(rng.pick(ids).clone()),
                3 => Value::from(7),
                4 => Value::Null,
                _ => Value::String(format!("x{}", rng.below(5))),
            };
            if let Some(x) = get_mut(v, &p) {
                *x = new;
            }
        }
        2 => {
            let mut paths = Vec::new();
            paths_to(v, TYPE_KEYS, &mut Vec::new(), &mut paths);
            let Some(p) = (!paths.is_empty()).then(|| rng.pick(&paths).clone()) else { return };
            let t = Value::String(rng.pick(TYPES).to_string());
            if let Some(x) = get_mut(v, &p) {
                *x = t;
            }
        }
        3 => {
            // Drop any member or element.
            let mut paths = Vec::new();
            paths_to(v, &[], &mut Vec::new(), &mut paths);
            let Some(p) = (!paths.is_empty()).then(|| rng.pick(&paths).clone()) else { return };
            match parent_mut(v, &p) {
                Some((Value::Object(m), PathStep::Key(k))) => drop(m.shift_remove(k)),
                Some((Value::Array(a), PathStep::Index(i))) if *i < a.len() => drop(a.remove(*i)),
                _ => {}
            }
        }
        4 => {
            // Duplicate an array element (a content block, a tool call).
            let mut paths = Vec::new();
            paths_to(v, &[], &mut Vec::new(), &mut paths);
            let arrays: Vec<_> = paths.into_iter().filter(|p| matches!(p.last(), Some(PathStep::Index(_)))).collect();
            let Some(p) = (!arrays.is_empty()).then(|| rng.pick(&arrays).clone()) else { return };
            if let Some((Value::Array(a), PathStep::Index(i))) = parent_mut(v, &p) {
                if *i < a.len() {
                    let x = a[*i].clone();
                    let at = rng.below(a.len() + 1);
                    a.insert(at, x);
                }
            }
        }
        _ => {
            // Empty or blank content, or a long string.
            let mut paths = Vec::new();
            paths_to(v, &["content", "text", "input", "arguments"], &mut Vec::new(), &mut paths);
            let Some(p) = (!paths.is_empty()).then(|| rng.pick(&paths).clone()) else { return };
            let new = match rng.below(5) {
                0 => Value::String(String::new()),
                1 => Value::String(" \n".into()),
                2 => Value::Array(Vec::new()),
                3 => serde_json::json!([{"type": "text", "text": " "}]),
                _ => Value::String("y".repeat(max_line.min(1 << 20))),
            };
            if let Some(x) = get_mut(v, &p) {
                *x = new;
            }
        }
    }
}

/// Applies `count` mutations.
pub fn mutate(input: &[u8], rng: &mut Rng, pool: &[&[u8]], max_line: usize, count: usize) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..count {
        b = mutate_once(&b, rng, pool, max_line);
    }
    b
}
