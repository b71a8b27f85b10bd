//! The daemon's assembly: what it is built from a resolved configuration (the stage settings,
//! the sinks, the compiled sources) and [`preflight`], the check a reload must pass. The loop
//! (`mod.rs`) runs what this builds.

use super::{checkpoint, tail};
use crate::config::{ReadFrom, RepairRequest, Resolved, SourceKind};
use crate::sinks::record::{now, Record};
use crate::sinks::{Batch, Sink};
use crate::sources::batch::is_no_transcript;
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tracing::warn;

/// What the loop needs of the configured stage list: the pipeline each file runs (the stages,
/// in order), and what the stages need of the shell ([`crate::config::Needs`]): the repairs
/// they request, the tool registry (also for `orphan_tool_calls_total`), the paused calls and
/// the quiet time (in the spec).
#[derive(Debug)]
pub(super) struct StageSettings {
    pub(super) spec: Arc<tail::Spec>,
    pub(super) repair: Option<RepairRequest>,
    /// Side effects of tools, for `orphan_tool_calls_total` (the metrics sink's).
    pub(super) registry: crate::config::tools::ToolRegistry,
}

impl StageSettings {
    pub(super) fn from(r: &Resolved) -> anyhow::Result<Self> {
        let needs = r.config.needs();
        let registry = match &needs.registry {
            Some(path) => crate::config::tools::ToolRegistry::load(path)?,
            None => crate::config::tools::ToolRegistry::builtin(),
        };
        let keep_bytes = r.config.sinks.iter().any(|s| s.needs().bytes);
        let spec =
            tail::Spec { stages: r.config.stages.clone(), quiet: r.config.quiet(), max_line: r.max_line_bytes(), paused_calls: needs.paused_calls, keep_bytes };
        Ok(StageSettings { spec: Arc::new(spec), repair: needs.repair, registry })
    }
}

/// The sinks, in the configured order, and the directory the repairs the stages request are
/// written into (the one a sink asks for: [`crate::config::SinkNeeds::repairs_into`]).
pub(super) struct Sinks {
    pub(super) list: Vec<Box<dyn Sink>>,
    pub(super) repaired_dir: Option<PathBuf>,
    /// Notified by a sink that has records of its own (a repair it wrote).
    pub(super) wake: Arc<tokio::sync::Notify>,
}

/// The repair driver as the `repaired_files` sink runs it: a copy of the file under the sink's
/// directory (never in place), and the record of what it did.
pub(super) fn repairer() -> crate::sinks::repaired::Repairer {
    Arc::new(|due: &crate::sinks::repaired::Due, dir: &Path| {
        let settings = crate::repair::Settings::copy(due.format, due.max_line_bytes, due.orphans);
        let job = crate::repair::Job { input: due.file.clone(), output: dir.join(&due.rel), rel: due.rel.clone(), walked: None };
        let report = crate::repair::repair_file(&job, &settings, &mut Vec::new());
        repair_record(&due.file, report)
    })
}

/// The record of a repair the daemon ran (none when there is nothing to report; a failure is
/// logged).
pub(super) fn repair_record(p: &Path, report: crate::repair::Report) -> Option<Record> {
    use crate::repair::Status;
    match report.status {
        Status::Planned => Some(Record::RepairPlanned { time: now(), file: report.file, edits: report.edits }),
        Status::Repaired | Status::Partial => Some(Record::Repaired {
            time: now(),
            file: report.file,
            output: report.output.unwrap_or_default(),
            inserted: report.lines.inserted,
            removed: report.lines.removed,
            modified: report.lines.modified,
        }),
        Status::Failed => {
            warn!(file = %p.display(), error = report.message.as_deref().unwrap_or(""), "repair failed");
            None
        }
        Status::Clean | Status::Skipped => None,
    }
}

impl Sinks {
    /// Builds the configured sinks and recovers each to the position the checkpoint recorded
    /// for it.
    pub(super) async fn open(cfg: &Resolved, cp: &checkpoint::Checkpoint, registry: &crate::config::tools::ToolRegistry) -> anyhow::Result<Sinks> {
        let wake = Arc::new(tokio::sync::Notify::new());
        let mut sinks = Sinks { list: Vec::new(), repaired_dir: None, wake: wake.clone() };
        for s in &cfg.config.sinks {
            let needs = s.needs();
            let repairer = needs.repairs_into.is_some().then(repairer);
            if needs.repairs_into.is_some() {
                sinks.repaired_dir = needs.repairs_into;
            }
            let ctx = crate::config::SinkContext { state_dir: &cfg.config.daemon.state_dir, registry, repairer, wake: wake.clone() };
            if let Some(mut sink) = s.build(&ctx)? {
                sink.recover(cp.sink(&sink.key())).await?;
                sinks.list.push(sink);
            }
        }
        Ok(sinks)
    }

    pub(super) async fn write(&mut self, batch: &Batch) -> anyhow::Result<()> {
        for s in &mut self.list {
            s.write(batch).await?;
        }
        Ok(())
    }

    pub(super) async fn flush(&mut self) -> anyhow::Result<()> {
        for s in &mut self.list {
            s.flush().await?;
        }
        Ok(())
    }

    /// Where each sink stands: what it made durable or had acknowledged.
    pub(super) fn positions(&self) -> std::collections::BTreeMap<String, crate::sinks::Position> {
        self.list.iter().filter_map(|s| Some((s.key(), s.position()?))).collect()
    }

    /// Records the sinks made of work they ran on their own (repairs written).
    pub(super) fn take_records(&mut self) -> Vec<Record> {
        self.list.iter_mut().flat_map(|s| s.take_records()).collect()
    }

    /// Waits for the work the sinks run on their own (at shutdown).
    pub(super) async fn settle(&mut self) -> anyhow::Result<()> {
        for s in &mut self.list {
            s.settle().await?;
        }
        Ok(())
    }

    /// Tells every sink a checkpoint was stored; whether some position moved.
    pub(super) async fn checkpointed(&mut self) -> anyhow::Result<bool> {
        let mut moved = false;
        for s in &mut self.list {
            moved |= s.checkpointed().await?;
        }
        Ok(moved)
    }
}

/// A source, compiled.
pub(super) struct Source {
    pub(super) kind: SourceKind,
    pub(super) format: Option<crate::transcript::Format>,
    pub(super) read_from: ReadFrom,
    pub(super) include: globset::GlobSet,
    pub(super) exclude: globset::GlobSet,
    pub(super) roots: Vec<PathBuf>,
}

impl Source {
    /// Whether `p` is one of this source's files: its patterns say so, and it is no by-product
    /// of a repair (a rejects file, a backup named `*.jsonl`), by the one rule `check` and
    /// `sessions` follow too ([`is_no_transcript`]).
    pub(super) fn matches(&self, p: &Path) -> bool {
        self.include.is_match(p) && !self.exclude.is_match(p) && !p.file_name().and_then(|n| n.to_str()).is_some_and(is_no_transcript)
    }

    pub(super) fn rel(&self, p: &Path) -> PathBuf {
        self.roots.iter().find_map(|r| p.strip_prefix(r).ok()).map_or_else(|| PathBuf::from(p.file_name().unwrap_or_default()), Path::to_path_buf)
    }
}

pub(super) fn compile(r: &Resolved) -> anyhow::Result<Vec<Source>> {
    let mut out = Vec::new();
    for (i, s) in r.config.sources.iter().enumerate() {
        let set = |pats: &[String]| -> anyhow::Result<globset::GlobSet> {
            let mut b = globset::GlobSetBuilder::new();
            for p in pats {
                b.add(globset::GlobBuilder::new(&crate::config::expand_home(p)).literal_separator(true).build()?);
            }
            Ok(b.build()?)
        };
        let mut roots: Vec<PathBuf> = s.include.iter().map(|p| crate::config::literal_root(&crate::config::expand_home(p))).collect();
        roots.sort();
        roots.dedup();
        out.push(Source {
            kind: s.kind,
            format: *s.format.get(),
            read_from: s.read_from,
            include: set(&s.include).with_context(|| format!("sources[{i}].include"))?,
            exclude: set(&s.exclude).with_context(|| format!("sources[{i}].exclude"))?,
            roots,
        });
    }
    Ok(out)
}

/// Checks what a configuration needs to start, without touching a running daemon: stages,
/// sources, a writable state directory with a readable checkpoint, the file sink, the repaired
/// files' directory. A reload whose configuration fails this is refused.
pub fn preflight(cfg: &Resolved) -> anyhow::Result<()> {
    StageSettings::from(cfg)?;
    compile(cfg)?;
    let state = &cfg.config.daemon.state_dir;
    std::fs::create_dir_all(state).with_context(|| format!("creating state directory {}", state.display()))?;
    // Unnamed where the filesystem can (a named one is removed at once): a crash here leaves
    // nothing.
    tempfile::tempfile_in(state).with_context(|| format!("state directory {} is not writable", state.display()))?;
    checkpoint::load(state)?;
    for s in &cfg.config.sinks {
        let needs = s.needs();
        for d in &needs.dirs {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        if let Some(path) = &needs.appends_to {
            std::fs::OpenOptions::new().create(true).append(true).open(path).with_context(|| format!("opening {}", path.display()))?;
        }
    }
    Ok(())
}
