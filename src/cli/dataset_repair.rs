//! `transcriptd repair` on a dataset (one conversation per line): per line, under
//! `--dataset-policy`, with repair's guarantees (untouched lines byte-identical, every removed
//! or changed line in `<name>.rejects.jsonl` under its own line number, atomic replacement).
//! The core is [`DatasetRepair`]; this is its file shell.

use super::repair::{put_in_place, Job, LazyOut, Report, Settings, Status};
use crate::sinks::atomic;
use crate::sources::batch::{self, Input};
use crate::transcript::formats::dataset::{detect_head, Dataset};
use crate::transcript::stages::dataset::repair::{DatasetRepair, Policy};
use crate::transcript::stages::repair::Emit;
use crate::transcript::Format;
use anyhow::Context;
use std::io::Read;
use std::path::Path;

/// Bytes of a file's head read to decide whether it is a dataset.
const HEAD: u64 = 4 << 20;

/// The dataset shape of the file at `path`: `--format` when given, else detected from its head.
pub fn dataset_of(path: &Path, s: &Settings) -> anyhow::Result<Option<Dataset>> {
    if let Some(f) = s.check.format {
        return Ok(f.dataset());
    }
    dataset_of_head(path)
}

/// The dataset shape the head of the file at `path` shows, if any.
pub fn dataset_of_head(path: &Path) -> anyhow::Result<Option<Dataset>> {
    let mut head = Vec::new();
    std::fs::File::open(path).and_then(|f| f.take(HEAD).read_to_end(&mut head)).with_context(|| format!("reading {}", path.display()))?;
    Ok(detect_head(&head).and_then(Format::dataset))
}

/// Repairs the dataset `job.input` under `policy`.
pub fn repair(job: &Job, s: &Settings, d: Dataset, policy: Policy, meta: &std::fs::Metadata, buf: &mut Vec<u8>) -> anyhow::Result<Report> {
    let mut report = Report::new(job, Status::Clean);
    report.format = Some(Format::Dataset(d));
    let mut core = DatasetRepair::new(d, policy, s.check.max_line_bytes);
    let input = Input::File(job.input.clone());
    if s.dry_run {
        let mut discard = |_: Emit<'_>| {};
        batch::read_chunks(&input, buf, |chunk| {
            core.feed(chunk, &mut discard);
            true
        })
        .with_context(|| format!("reading {}", job.input.display()))?;
        let (_, actions) = core.finish(&mut discard);
        report.edits = actions.len();
        report.status = if actions.is_empty() { Status::Clean } else { Status::Planned };
        report.dataset_actions = actions;
        return Ok(report);
    }
    if let Some(dir) = job.output.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut out = LazyOut::new(&job.input, &job.output, meta.permissions());
    let mut opened: anyhow::Result<()> = Ok(());
    let mut emit = |e: Emit<'_>| {
        // Nothing is written until a line changes: up to there the output is the input.
        if matches!(e, Emit::Reject(_)) && out.file.is_none() && opened.is_ok() {
            opened = out.open();
        }
        out.emit(e);
    };
    batch::read_chunks(&input, buf, |chunk| {
        core.feed(chunk, &mut emit);
        true
    })
    .with_context(|| format!("reading {}", job.input.display()))?;
    let (stats, actions) = core.finish(&mut emit);
    opened?;
    out.check()?;
    report.edits = actions.len();
    let Some(mut file) = out.file.take() else {
        if job.output != job.input {
            atomic::copy_file(&job.input, &job.output).with_context(|| format!("writing {}", job.output.display()))?;
            report.output = Some(job.output.display().to_string());
        }
        return Ok(report);
    };
    file.flush().with_context(|| format!("writing {}", job.output.display()))?;
    put_in_place(job, s, meta, out.rejects, file)?;
    report.output = Some(job.output.display().to_string());
    report.lines = stats;
    report.status = Status::Repaired;
    report.dataset_actions = actions;
    Ok(report)
}
