//! The promises of `repair`, as code, for any input whatsoever (shared by the integration
//! tests, the mutation test and the fuzz targets in `fuzz/`, which include this file):
//!
//! 1. No panic (the caller runs it; a panic fails the test or the fuzz run).
//! 2. The verdict is true: a repair that says it is complete leaves an output that `check`
//!    finds no error in, and that a second repair does not change; a repair that is not
//!    complete names at least one finding it left, and every error `check` still finds in its
//!    output is among those named (by kind and call).
//! 3. Nothing is lost: every input line (its bytes without the `\n`: a `\r` before it and a
//!    byte-order mark that starts the file included) is either in the output, byte for byte
//!    and in order, or in the rejects under its own line number with its own bytes, once.

use base64::Engine;
use transcriptd::transcript::repair::{OrphanPolicy, MAX_ROUNDS};
use transcriptd::transcript::repair_run::{repair_bytes, Repaired};
use transcriptd::transcript::{check_bytes, Options, Severity};

/// The lines of `b` as on disk, without their `\n` (a last line without one included).
pub fn raw_lines(b: &[u8]) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = b.split(|c| *c == b'\n').collect();
    if v.last().is_some_and(|l| l.is_empty()) {
        v.pop();
    }
    v
}

/// One record of a rejects stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reject {
    /// Its input line.
    pub line: usize,
    /// `removed`, `modified` or `merged`.
    pub action: String,
    /// The finding, if any.
    pub reason: Option<String>,
    /// The line's bytes.
    pub bytes: Vec<u8>,
}

/// Reads a rejects stream.
pub fn rejects(stream: &[u8]) -> Result<Vec<Reject>, String> {
    let mut v = Vec::new();
    for l in raw_lines(stream) {
        let r: serde_json::Value = serde_json::from_slice(l).map_err(|e| format!("a rejects record is not JSON: {e}"))?;
        let bytes = match (r.get("text").and_then(|t| t.as_str()), r.get("base64").and_then(|b| b.as_str())) {
            (Some(t), None) => t.as_bytes().to_vec(),
            (None, Some(b)) => base64::engine::general_purpose::STANDARD.decode(b).map_err(|e| format!("bad base64 in the rejects: {e}"))?,
            _ => return Err(format!("a rejects record has neither text nor base64: {r}")),
        };
        let line = r.get("line").and_then(|n| n.as_u64()).ok_or_else(|| format!("a rejects record without a line: {r}"))? as usize;
        let action = r.get("action").and_then(|a| a.as_str()).unwrap_or_default().to_owned();
        if !["removed", "modified", "merged"].contains(&action.as_str()) {
            return Err(format!("a rejects record with action {action:?}"));
        }
        let reason = r.get("reason").and_then(|a| a.as_str()).map(str::to_owned);
        v.push(Reject { line, action, reason, bytes });
    }
    Ok(v)
}

/// Promise 3: every input line is in the output (in order) or in the rejects under its own
/// number with its own bytes.
pub fn nothing_lost(input: &[u8], output: &[u8], rejects_stream: &[u8], inserted: u64) -> Result<(), String> {
    let inp = raw_lines(input);
    let out = raw_lines(output);
    let rej = rejects(rejects_stream)?;
    let mut in_rejects = vec![None; inp.len() + 1];
    for r in &rej {
        if r.line == 0 || r.line > inp.len() {
            return Err(format!("a rejects record names line {} of a {}-line input", r.line, inp.len()));
        }
        if in_rejects[r.line].is_some() {
            return Err(format!("line {} has two rejects records", r.line));
        }
        if r.bytes != inp[r.line - 1] {
            return Err(format!(
                "the rejects record of line {} is not that line's bytes: {:?} vs {:?}",
                r.line,
                String::from_utf8_lossy(&r.bytes),
                String::from_utf8_lossy(inp[r.line - 1])
            ));
        }
        in_rejects[r.line] = Some(r.action.as_str());
    }
    let mut at = 0;
    let mut kept = 0;
    for (i, l) in inp.iter().enumerate() {
        if in_rejects[i + 1].is_some() {
            continue;
        }
        match out[at..].iter().position(|o| o == l) {
            Some(p) => at += p + 1,
            None => return Err(format!("input line {} is neither in the output (in order) nor in the rejects: {:?}", i + 1, String::from_utf8_lossy(l))),
        }
        kept += 1;
    }
    let modified = in_rejects.iter().filter(|a| **a == Some("modified")).count();
    if out.len() < kept || out.len() > kept + modified + inserted as usize {
        return Err(format!("{} output lines from {kept} kept, {modified} modified and {inserted} inserted", out.len()));
    }
    Ok(())
}

/// Repairs `input` with `opts` and `policy` and checks every promise; the error names the one
/// broken.
pub fn check(input: &[u8], opts: &Options, policy: OrphanPolicy) -> Result<Repaired, String> {
    let opts = Options { strict: false, jobs: 1, ..opts.clone() };
    let r = repair_bytes(input, &opts, policy, MAX_ROUNDS).map_err(|e| format!("the lenient repair stopped: {e}"))?;
    let (after, _, _) = check_bytes(&r.output, opts.clone()).map_err(|e| format!("check of the output stopped: {e}"))?;
    let errors: Vec<_> = after.iter().filter(|f| f.severity == Severity::Error).collect();
    if r.complete {
        if !errors.is_empty() {
            return Err(format!("repair says complete, but check of its output finds {errors:?}"));
        }
        let again = repair_bytes(&r.output, &opts, policy, MAX_ROUNDS).map_err(|e| format!("repairing the output stopped: {e}"))?;
        if again.output != r.output || !again.plans[0].is_empty() {
            return Err(format!("repair says complete, but a second repair changes the output: {:?}", again.plans[0].edits));
        }
    } else {
        if r.unrepaired.is_empty() {
            return Err("repair is not complete but names no finding it left".into());
        }
        for f in &errors {
            let named = r.unrepaired.iter().any(|u| u.kind == f.kind && (f.call_id.is_none() || u.call_id.is_none() || u.call_id == f.call_id));
            if !named {
                return Err(format!("check of the output finds {f:?}, which the repair does not name among {:?}", r.unrepaired));
            }
        }
    }
    nothing_lost(input, &r.output, &r.rejects, r.stats.inserted)?;
    Ok(r)
}
