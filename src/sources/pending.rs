//! `pending.json` (`Harness\Transcript`, docs/requirements.md): the calls a host paused on, persisted beside its transcripts for a
//! person to decide. The one reading of it, for the `orphans` verb and the daemon's `orphans`
//! stage (the core takes the ids as [`crate::transcript::Inputs::paused`]).

use anyhow::Context as _;
use std::collections::HashSet;
use std::path::Path;

/// The call ids listed in `pending.json` in `dir`: a JSON array of objects with a string
/// `call_id`. A missing file lists nothing; a file that cannot be read, is not such an array,
/// or has an entry without a string `call_id` is an error naming the file (and the entry).
pub fn paused_calls(dir: &Path) -> anyhow::Result<HashSet<String>> {
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let path = dir.join("pending.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashSet::new()),
        Err(e) => return Err(e).with_context(|| format!("{}: cannot read", path.display())),
    };
    let value: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    let Some(items) = value.as_array() else {
        anyhow::bail!("{}: expected an array of pending calls (objects with a call_id)", path.display());
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.get("call_id").and_then(|c| c.as_str()).map(str::to_owned).with_context(|| format!("{}: entry {i} has no string call_id", path.display()))
        })
        .collect()
}
