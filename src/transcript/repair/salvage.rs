//! Salvage: the round before the plan's edits, for lines the agent could have kept.
//!
//! The planner removes a line it cannot read whole, and drops a result whose call it has not
//! seen yet. Measured against the agent itself (issue 27 point 5: Claude Code 2.1.332 resuming
//! the repaired file), some of those lines carry conversation the break did not destroy:
//!
//! | shape | salvage |
//! |---|---|
//! | a complete record glued behind a torn one (`{…"tor{…}`) | the complete record is kept as a line of its own; the torn fragment is only in the rejects |
//! | a record split by a raw newline inside a string (two lines, neither JSON) | the lines are joined with an escaped `\n` (`\r\n` for a CRLF file) when that is one JSON object |
//! | a last line that is complete JSON without its newline | it gets its newline |
//! | NUL padding before, after or between records on a line | the NULs are dropped |
//! | Claude Code: a result written on the line before its call's line (its `parentUuid` names the call's line, which comes after it) | the line moves to right after its call; the line after the call that hung under the call now hangs under the moved result |
//!
//! Pure: the whole input and the first plan of it in (only the lines that plan removes as
//! framing, or whose results it drops as orphans, are looked at), the salvaged bytes, the
//! rejects (by input line, [`write_record`]'s format) and a [`RewriteLog`] (its [`Origins`] map
//! the salvaged lines to the input's) out. [`super::rounds::Rounds`] records it as the first
//! round, so every later round is told in input lines and the rejects are written again from
//! the input when a later round changes lines too.

use super::origins::{Action, Change, Source};
use super::plan::{Edit, How, Plan};
use super::rejects::{write_record, Emit};
use super::rewrite::RewriteLog;
use crate::transcript::finding::Kind;
use crate::transcript::formats::{claude_code, Format};
use crate::transcript::model::Entry;
use crate::transcript::{Map, Set};

/// A byte-order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";
/// Lines a record split by raw newlines may span.
const MAX_JOIN: usize = 8;
/// Start positions tried per line for a record glued behind a torn one.
const MAX_GLUE_TRIES: usize = 64;
/// Lines ahead of a result where its call's line is looked for.
const MOVE_WINDOW: usize = 64;

/// The salvage round.
#[derive(Debug, Clone)]
pub struct Salvaged {
    /// The salvaged transcript.
    pub output: Vec<u8>,
    /// The rejects stream of the round, by input line.
    pub rejects: Vec<u8>,
    /// Its edits ([`Edit::Salvage`]), for the report.
    pub plan: Plan,
    /// What it did, with where each output line comes from.
    pub log: RewriteLog,
}

/// Whether `b` is one JSON object with at least one key (and nothing else but whitespace), in
/// UTF-8: a record the checker reads (`{}` is not one).
fn is_object(b: &[u8]) -> bool {
    let t = b.trim_ascii_start();
    t.first() == Some(&b'{')
        && std::str::from_utf8(t).is_ok()
        && serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(t).is_ok_and(|m| !m.is_empty())
}

/// `b` without NUL bytes and whitespace around it.
fn trim_nul(b: &[u8]) -> &[u8] {
    let is_pad = |c: &u8| *c == 0 || c.is_ascii_whitespace();
    let start = b.iter().position(|c| !is_pad(c)).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !is_pad(c)).map_or(start, |e| e + 1);
    &b[start..end]
}

/// The first key of a JSON object line (`None` if it has an escape or is not one).
fn first_key(b: &[u8]) -> Option<&[u8]> {
    let t = b.trim_ascii_start().strip_prefix(b"{")?.trim_ascii_start().strip_prefix(b"\"")?;
    let end = memchr::memchr2(b'"', b'\\', t)?;
    (t[end] == b'"').then(|| &t[..end])
}

/// The records of a line that is not one JSON object: a complete record glued behind a torn
/// fragment (or behind another record), NUL runs between them dropped. A record is an object
/// whose first key starts records of the file (`keys`): an object nested in the torn record
/// that happens to end the line is not one. `None` when no complete record ends the line.
fn glued<'a>(t: &'a [u8], keys: &Set<Vec<u8>>, format: Option<Format>) -> Option<Vec<&'a [u8]>> {
    // In a known format, a record is what its adapter reads as a conversation line or a tree
    // node (a content block nested in the torn record is neither).
    let record =
        |b: &[u8]| format.is_none_or(|f| f.parse(b).is_ok_and(|p| p.node.is_some() || matches!(p.entry, Entry::Message(_) | Entry::Compaction { .. })));
    let mut tries = 0;
    for p in memchr::memchr_iter(b'{', t).skip(1) {
        if tries == MAX_GLUE_TRIES {
            break;
        }
        if !t[p..].starts_with(b"{\"") {
            continue;
        }
        tries += 1;
        let rest = trim_nul(&t[p..]);
        if first_key(rest).is_some_and(|k| keys.contains(k)) && is_object(rest) && record(rest) {
            let head = trim_nul(&t[..p]);
            let mut v = Vec::with_capacity(2);
            if is_object(head) {
                v.push(head);
            }
            v.push(rest);
            return Some(v);
        }
    }
    None
}

/// One physical line of the input.
struct Line<'a> {
    /// Without its `\n` (a `\r` before it kept).
    raw: &'a [u8],
    /// Content: no `\r`, no byte-order mark.
    content: &'a [u8],
    bom: bool,
    crlf: bool,
    /// Ends with a newline.
    ended: bool,
}

fn lines(input: &[u8]) -> Vec<Line<'_>> {
    let mut v = Vec::new();
    let mut start = 0;
    while start < input.len() {
        let (end, ended) = match memchr::memchr(b'\n', &input[start..]) {
            Some(i) => (start + i, true),
            None => (input.len(), false),
        };
        let raw = &input[start..end];
        let (no_cr, crlf) = match raw.strip_suffix(b"\r") {
            Some(c) if ended => (c, true),
            _ => (raw, false),
        };
        let (content, bom) = match (v.is_empty(), no_cr.strip_prefix(BOM)) {
            (true, Some(c)) => (c, true),
            _ => (no_cr, false),
        };
        v.push(Line { raw, content, bom, crlf, ended });
        start = end + 1;
    }
    v
}

/// What becomes of one input line.
enum Fate {
    /// Written as it is (possibly elsewhere: moved lines are written after their call).
    Same,
    /// Replaced by these lines.
    Lines(Vec<Vec<u8>>),
    /// Joined into an earlier line.
    Joined,
    /// Removed (NUL padding only).
    Gone,
}

/// Whether [`salvage`] may find something in a file with this first plan (it looks at the
/// lines the plan removes as framing or whose results it drops as orphans only).
pub fn worth_a_look(plan: &Plan) -> bool {
    plan.edits.iter().any(|e| match e {
        Edit::Remove { reason, .. } => reason.is_framing() && *reason != Kind::LineTooLong,
        Edit::DropResults { reason, .. } => *reason == Kind::OrphanResult,
        _ => false,
    })
}

/// Salvages what the first plan of `input` would remove or drop although the agent could keep
/// it; `None` when there is nothing to salvage.
pub fn salvage(input: &[u8], plan: &Plan, max_line_bytes: usize) -> Option<Salvaged> {
    let framing: Map<u64, Kind> = plan
        .edits
        .iter()
        .filter_map(|e| match e {
            Edit::Remove { line, reason } if reason.is_framing() && *reason != Kind::LineTooLong => Some((*line, *reason)),
            _ => None,
        })
        .collect();
    let orphans: Set<u64> = plan
        .edits
        .iter()
        .filter_map(|e| match e {
            Edit::DropResults { line, reason: Kind::OrphanResult, .. } => Some(*line),
            _ => None,
        })
        .collect();
    if framing.is_empty() && orphans.is_empty() {
        return None;
    }
    let ls = lines(input);
    let n = ls.len();
    let mut fates: Vec<Fate> = (0..n).map(|_| Fate::Same).collect();
    let mut edits = Vec::new();
    let mut reasons: Map<usize, Kind> = Map::default();
    let mut keys: Option<Set<Vec<u8>>> = None;
    let mut i = 0;
    while i < n {
        let number = i as u64 + 1;
        let Some(&reason) = framing.get(&number) else {
            i += 1;
            continue;
        };
        let l = &ls[i];
        let t = trim_nul(l.content);
        let nul = t.len() < l.content.len() && l.content.contains(&0);
        if t.is_empty() {
            if nul {
                fates[i] = Fate::Gone;
                reasons.insert(i, reason);
                edits.push(Edit::Salvage { line: number, how: How::StripNul, with: None, reason });
            }
            i += 1;
            continue;
        }
        if is_object(t) && (nul || !l.ended) {
            let how = if !l.ended { How::EndLine } else { How::StripNul };
            fates[i] = Fate::Lines(vec![t.to_vec()]);
            reasons.insert(i, reason);
            edits.push(Edit::Salvage { line: number, how, with: None, reason });
            i += 1;
            continue;
        }
        // A record split by raw newlines: each piece unreadable, their join one object.
        let mut joined = t.to_vec();
        let mut found = None;
        for j in i + 1..n.min(i + MAX_JOIN) {
            if !framing.contains_key(&(j as u64 + 1)) || joined.len() + ls[j].content.len() > max_line_bytes {
                break;
            }
            joined.extend_from_slice(if ls[j - 1].crlf { b"\\r\\n" } else { b"\\n" });
            joined.extend_from_slice(ls[j].content);
            if is_object(&joined) {
                found = Some(j);
                break;
            }
        }
        if let Some(j) = found {
            fates[i] = Fate::Lines(vec![joined]);
            reasons.insert(i, reason);
            for k in i + 1..=j {
                fates[k] = Fate::Joined;
                reasons.insert(k, framing[&(k as u64 + 1)]);
            }
            edits.push(Edit::Salvage { line: number, how: How::JoinSplit, with: Some(j as u64 + 1), reason });
            i = j + 1;
            continue;
        }
        if keys.is_none() {
            // The first keys of the file's readable records.
            keys = Some((0..n).filter(|k| !framing.contains_key(&(*k as u64 + 1))).filter_map(|k| first_key(ls[k].content)).map(<[u8]>::to_vec).collect());
        }
        if let Some(records) = glued(t, keys.as_ref().expect("just made"), plan.format) {
            fates[i] = Fate::Lines(records.into_iter().map(<[u8]>::to_vec).collect());
            reasons.insert(i, reason);
            edits.push(Edit::Salvage { line: number, how: How::SplitGlued, with: None, reason });
        }
        i += 1;
    }
    // Claude Code: results written before their call's line.
    let mut moves: Map<usize, Vec<usize>> = Map::default();
    let mut moved: Set<usize> = Set::default();
    let mut repoint: Map<usize, String> = Map::default();
    if !orphans.is_empty() {
        let mut seen: Set<String> = Set::default();
        let ids: Vec<(Option<String>, Option<String>)> = ls.iter().map(|l| claude_code::claude_ids(l.content)).collect();
        for (k, (uuid, _)) in ids.iter().enumerate() {
            let number = k as u64 + 1;
            if orphans.contains(&number) && matches!(fates[k], Fate::Same) {
                if let Some(j) = call_after(&ls, &ids, k, &seen) {
                    moves.entry(j).or_default().push(k);
                    moved.insert(k);
                    reasons.insert(k, Kind::OrphanResult);
                    edits.push(Edit::Salvage { line: number, how: How::MoveAfter, with: Some(j as u64 + 1), reason: Kind::OrphanResult });
                }
            }
            if let Some(u) = uuid {
                seen.insert(u.clone());
            }
        }
        // The line after a call that hung under the call now hangs under the last result moved
        // after it: the conversation goes on through the result, as the agent wrote it.
        for (&j, rs) in &moves {
            let (Some(call), Some(last)) = (ids[j].0.as_ref(), rs.last().and_then(|&r| ids[r].0.clone())) else { continue };
            let next = (j + 1..n).find(|k| !moved.contains(k));
            if let Some(k) = next.filter(|&k| ids[k].1.as_ref() == Some(call) && matches!(fates[k], Fate::Same)) {
                repoint.insert(k, last);
            }
        }
    }
    if edits.is_empty() {
        return None;
    }
    // Write the round.
    let mut output = Vec::with_capacity(input.len() + 16);
    let mut rejects = Vec::new();
    let mut buf = Vec::new();
    let mut log = RewriteLog { recheck: true, ..RewriteLog::default() };
    let mut record = |line: usize, action: Action, reason: Option<Kind>, parent: bool, log: &mut RewriteLog, rejects: &mut Vec<u8>| {
        let raw = ls[line].raw;
        write_record(&mut buf, line as u64 + 1, action, reason, raw, max_line_bytes, &mut |e| {
            if let Emit::Reject(b) = e {
                rejects.extend_from_slice(b)
            }
        });
        log.changes.push(Change { line: line as u64 + 1, action, reason, parent });
        match action {
            Action::Removed | Action::Merged => log.stats.removed += 1,
            Action::Modified => log.stats.modified += 1,
        }
    };
    let term = |l: &Line<'_>| -> &'static [u8] {
        if l.crlf {
            b"\r\n"
        } else {
            b"\n"
        }
    };
    // Records moved lines (once each) before writing them after their call.
    let mut moved_recorded: Set<usize> = Set::default();
    let mut k = 0;
    while k < n {
        let l = &ls[k];
        let number = k as u64 + 1;
        if moved.contains(&k) {
            if moved_recorded.insert(k) {
                record(k, Action::Modified, Some(Kind::OrphanResult), false, &mut log, &mut rejects);
            }
            k += 1;
            continue;
        }
        match &fates[k] {
            Fate::Same => {
                if let Some(parent) = repoint.get(&k) {
                    match claude_code::set_parent(l.content, Some(parent)) {
                        Some(b) => {
                            record(k, Action::Modified, None, true, &mut log, &mut rejects);
                            if l.bom {
                                output.extend_from_slice(BOM);
                            }
                            output.extend_from_slice(&b);
                            output.extend_from_slice(term(l));
                            log.origins.push(Source::Modified(number), 1);
                        }
                        None => same(&mut output, &mut log, l, number),
                    }
                } else {
                    same(&mut output, &mut log, l, number);
                }
            }
            Fate::Lines(records) => {
                record(k, Action::Modified, reasons.get(&k).copied(), false, &mut log, &mut rejects);
                for (x, r) in records.iter().enumerate() {
                    if x == 0 && l.bom {
                        output.extend_from_slice(BOM);
                    }
                    output.extend_from_slice(r);
                    output.extend_from_slice(term(l));
                    if x == 0 {
                        log.origins.push(Source::Modified(number), 1);
                    } else {
                        // A second record of the line: a line of its own now.
                        log.origins.push(Source::Inserted { after: number }, 1);
                        log.stats.inserted += 1;
                    }
                }
            }
            Fate::Joined => record(k, Action::Merged, reasons.get(&k).copied(), false, &mut log, &mut rejects),
            Fate::Gone => record(k, Action::Removed, reasons.get(&k).copied(), false, &mut log, &mut rejects),
        }
        if let Some(rs) = moves.get(&k) {
            for &r in rs {
                let m = &ls[r];
                output.extend_from_slice(m.content);
                output.extend_from_slice(term(m));
                log.origins.push(Source::Modified(r as u64 + 1), 1);
            }
        }
        k += 1;
    }
    // The rejects name input lines in order (moved lines are recorded where they were).
    let mut recs: Vec<(u64, &[u8])> = Vec::new();
    for r in rejects.split_inclusive(|&b| b == b'\n') {
        let line = serde_json::from_slice::<serde_json::Value>(r).ok().and_then(|v| v.get("line").and_then(|x| x.as_u64())).unwrap_or(0);
        recs.push((line, r));
    }
    recs.sort_by_key(|r| r.0);
    let rejects = recs.into_iter().flat_map(|(_, r)| r.iter().copied()).collect();
    log.changes.sort_by_key(|c| c.line);
    Some(Salvaged {
        output,
        rejects,
        plan: Plan { format: plan.format, edits, unrepaired: Vec::new(), recheck: true, dangling_parents: plan.dangling_parents },
        log,
    })
}

/// A line written as it was.
fn same(output: &mut Vec<u8>, log: &mut RewriteLog, l: &Line<'_>, number: u64) {
    output.extend_from_slice(l.raw);
    if l.ended {
        output.push(b'\n');
    }
    log.origins.push(Source::Same(number), 1);
}

/// The line, after line `k`, of the call every result of line `k` answers, when line `k`'s
/// `parentUuid` (or `sourceToolAssistantUUID`) names that line and no earlier one.
fn call_after(ls: &[Line<'_>], ids: &[(Option<String>, Option<String>)], k: usize, seen: &Set<String>) -> Option<usize> {
    let v: serde_json::Value = serde_json::from_slice(ls[k].content).ok()?;
    let parent = ids[k].1.as_ref();
    let source = v.get("sourceToolAssistantUUID").and_then(|s| s.as_str());
    let target = parent.map(String::as_str).or(source)?;
    if seen.contains(target) || source.is_some_and(|s| s != target) {
        return None;
    }
    let results: Vec<&str> = v
        .pointer("/message/content")?
        .as_array()?
        .iter()
        .filter(|b| b.get("type").and_then(|t| t.as_str()) == Some("tool_result"))
        .filter_map(|b| b.get("tool_use_id").and_then(|t| t.as_str()))
        .collect();
    if results.is_empty() {
        return None;
    }
    let j = (k + 1..ls.len().min(k + 1 + MOVE_WINDOW)).find(|&j| ids[j].0.as_deref() == Some(target))?;
    let call: serde_json::Value = serde_json::from_slice(ls[j].content).ok()?;
    if call.get("type").and_then(|t| t.as_str()) != Some("assistant") {
        return None;
    }
    let calls: Set<&str> = call
        .pointer("/message/content")?
        .as_array()?
        .iter()
        .filter(|b| b.get("type").and_then(|t| t.as_str()) == Some("tool_use"))
        .filter_map(|b| b.get("id").and_then(|t| t.as_str()))
        .collect();
    results.iter().all(|r| calls.contains(r)).then_some(j)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glued_record_is_found_behind_a_torn_one() {
        let keys: Set<Vec<u8>> = [b"type".to_vec(), b"a".to_vec(), b"b".to_vec()].into_iter().collect();
        let t = br#"{"type":"user","message":{"content":"tor{"type":"assistant","uuid":"a"}"#;
        assert_eq!(glued(t, &keys, None), Some(vec![&br#"{"type":"assistant","uuid":"a"}"#[..]]));
        let two = br#"{"a":1}{"b":2}"#;
        assert_eq!(glued(two, &keys, None), Some(vec![&br#"{"a":1}"#[..], &br#"{"b":2}"#[..]]));
        assert_eq!(glued(br#"{"a":"x"#, &keys, None), None);
        // An object nested in a torn record, ending the line, is not a record of the file.
        let nested = br#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"Read","input":{}}"#;
        assert_eq!(glued(nested, &keys, Some(Format::ClaudeCode)), None);
    }

    #[test]
    fn nul_padding_is_trimmed() {
        assert_eq!(trim_nul(b"\0\0{}\0 "), b"{}");
        assert_eq!(trim_nul(b"\0\0\0"), b"");
    }
}
