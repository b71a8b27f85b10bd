//! `transcriptd repair` on a dataset (one conversation per line): per line, under
//! `--dataset-policy`, with repair's guarantees (untouched lines byte-identical, every removed
//! or changed line in `<name>.rejects.jsonl` under its own line number, atomic replacement).
//! The core is [`DatasetRepair`]; this is its first round in the file shell of
//! [`super`], which reads the same snapshot descriptor and applies the same guards
//! (identity re-checked before the swap, writers, owner and mode kept, backups).

use super::{FirstRound, LazyOut, Settings};
use crate::sinks::atomic::Keep;
use crate::sources::batch;
use crate::sources::regular::ReadAt;
use crate::transcript::dataset::repair::{Action, DatasetRepair, Policy};
use crate::transcript::formats::dataset::{detect_head, Dataset};
use crate::transcript::repair::{Emit, Plan, RewriteLog};
use crate::transcript::Format;
use anyhow::Context;
use std::fs::File;
use std::io::Read;
use std::path::Path;

/// Bytes of a file's head read to decide whether it is a dataset.
const HEAD: u64 = 4 << 20;

/// The dataset shape of `file`: `--format` when given, else detected from its head.
pub fn dataset_of(file: &File, s: &Settings) -> std::io::Result<Option<Dataset>> {
    if let Some(f) = s.check.format {
        return Ok(f.dataset());
    }
    let mut head = Vec::new();
    ReadAt::new(file, 0, Some(HEAD)).read_to_end(&mut head)?;
    Ok(detect_head(&head).and_then(Format::dataset))
}

/// What the repair of the dataset `src` reads would do (`--dry-run`).
pub fn plan(src: &mut impl Read, d: Dataset, policy: Policy, s: &Settings, buf: &mut Vec<u8>) -> std::io::Result<Vec<Action>> {
    let mut core = DatasetRepair::new(d, policy, s.check.max_line_bytes);
    let mut discard = |_: Emit<'_>| {};
    batch::read_to_end(src, buf, |chunk| {
        core.feed(chunk, &mut discard);
        true
    })?;
    Ok(core.finish(&mut discard).1)
}

/// Repairs the dataset `input` (`path`'s open descriptor) up to `limit` bytes or its end, into a
/// temporary file beside `output` that is opened only when a line changes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn first_round(
    path: &Path,
    input: &File,
    limit: Option<u64>,
    output: &Path,
    d: Dataset,
    policy: Policy,
    s: &Settings,
    keep: Keep,
    buf: &mut Vec<u8>,
) -> anyhow::Result<FirstRound> {
    let mut core = DatasetRepair::new(d, policy, s.check.max_line_bytes);
    let mut reader = ReadAt::new(input, 0, limit);
    let mut out = LazyOut::new(input, output, keep);
    let mut opened: anyhow::Result<()> = Ok(());
    let mut emit = |e: Emit<'_>| {
        // Nothing is written until a line changes: up to there the output is the input.
        if matches!(e, Emit::Reject(_)) && out.file.is_none() && opened.is_ok() {
            opened = out.open();
        }
        out.emit(e);
    };
    batch::read_to_end(&mut reader, buf, |chunk| {
        core.feed(chunk, &mut emit);
        true
    })
    .with_context(|| format!("reading {}", path.display()))?;
    let (stats, actions) = core.finish(&mut emit);
    let log = RewriteLog { stats, ..RewriteLog::default() };
    opened?;
    out.check()?;
    if let Some(f) = out.file.as_mut() {
        f.flush().with_context(|| format!("writing {}", output.display()))?;
    }
    let plan = Plan { format: Some(Format::Dataset(d)), ..Plan::default() };
    Ok(FirstRound { plan, out: out.file, rejects: out.rejects, log, covered: reader.pos(), actions, errors: None, survey: None })
}
