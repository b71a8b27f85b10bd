//! The repair driver: make transcripts resumable again, losing nothing. `transcriptd repair`
//! ([`crate::cli::repair`]) and the daemon's repair stage both call it.
//!
//! Per file: one pass that checks, plans and rewrites into a temporary file beside the
//! destination (the core's [`StreamRepair`]; a clean prefix is not written until the first edit,
//! then copied by the kernel; when that pass gives up, the plan is finished and the file
//! rewritten in a second pass), add what was removed or changed to `<name>.rejects.jsonl`,
//! then rename the new file into place. When the plan says its edits may have created new findings, the
//! output is checked and planned again (at most [`MAX_ROUNDS`](crate::transcript::repair::MAX_ROUNDS) rewrites; [`Rounds`] keeps the
//! report, the dry run and the rejects in the input's own line numbers). `--dry-run` runs the
//! same rounds into a scratch directory and prints every edit they make.
//!
//! The filesystem side trusts nothing (see docs/commands/repair.md, "Guarantees"):
//! - The input is opened once, as a regular file ([`regular::open`]), and every pass reads that
//!   descriptor up to the length the first pass read: one snapshot, whatever is appended.
//! - A file modified within `--min-idle` is skipped (in place, in a dry run) only if it needs an
//!   edit: one that needs none is reported as it is, so a run right after a repair says clean.
//! - The idle guard holds to the end: just before the swap the file's identity, size and
//!   modification time are checked again ([`Guard`]); a file that changed is not replaced, but
//!   repaired again (at most [`ATTEMPTS`] times), so the guards apply anew, or reported.
//! - A file another process holds open for writing ([`holders`]) is not repaired in place.
//!   With `--force` it is, covering its complete lines only, and after the swap the bytes a
//!   writer appends to the old file (the writer's descriptor still points at it) are carried
//!   into the new one until the writer closes it (`swap::follow_old`, at most [`FOLLOW_MAX`]). An
//!   old file that grew is never deleted, even with `--no-backup`.
//! - Order on disk: the new file is synced, the rejects file replaced (old records + new ones,
//!   atomically, never through a link), the backup linked, the last check made, the rename
//!   done. A `kill -9` at any moment leaves the file intact or replaced; a run after it finds
//!   the records and the backup already there and does not add them twice.
//! - Owner, group and mode are kept; a symbolic link given to `--in-place` keeps pointing at
//!   its target, which is repaired; `--out` never reaches an input by another spelling, and two
//!   inputs never share an output.

pub mod dataset;
pub mod jobs;
mod swap;

pub use jobs::{in_shard, jobs, Job, Jobs, Reach, Walked};
use swap::{after_swap, link_backup};

use crate::sinks::atomic::{self, AtomicFile, Keep, Merged, Spool};
use crate::sources::batch;
use crate::sources::holders::{self, Holder};
use crate::sources::regular::{self, Follow, Identity, ReadAt};
use crate::sources::READ_CHUNK;
use crate::transcript::context::chain::Session;
use crate::transcript::dataset::repair::{Action, Examples, Policy as DatasetPolicy};
use crate::transcript::repair::{salvage, Edit, Emit, OrphanPolicy, Plan, RewriteLog, RewriteStats, Rewriter, RoundEdit, Rounds, Unrepaired, MAX_ROUNDS};
use crate::transcript::repair_run::{finish_plan, plan_pipeline, ErrorTally, Rest, Step, StreamRepair};
use crate::transcript::{Format, Options};
use anyhow::Context;
use serde::Serialize;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Repairs of one file that changed while it was repaired before it is reported as skipped.
pub const ATTEMPTS: usize = 3;

/// How long an in-place repair keeps carrying what a writer appends to the old file after the
/// swap, waiting for it to close the file.
pub const FOLLOW_MAX: Duration = Duration::from_secs(10);

/// After the old file grew with no writer in sight (one this process cannot see), how long it
/// must stay quiet before the carrying stops.
const QUIET: Duration = Duration::from_millis(200);

/// How a file ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Nothing to repair.
    Clean,
    /// Repaired completely.
    Repaired,
    /// Some findings could not be repaired (see `unrepaired`).
    Partial,
    /// Planned only (--dry-run).
    Planned,
    /// Skipped: modified within --min-idle.
    Skipped,
    /// An IO error.
    Failed,
}

/// The report of one file.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The input.
    pub file: String,
    /// Where the result went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// How it ended.
    pub status: Status,
    /// Its format.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
    /// Edits planned, over every round.
    pub edits: usize,
    /// Rewrites made (a later one when the edits of the one before left new findings).
    pub rounds: usize,
    /// What the rewrite did (all rounds).
    pub lines: RewriteStats,
    /// Findings left.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unrepaired: Vec<Unrepaired>,
    /// Why it was skipped, as a word (`recently_modified`, `held_open`, `changed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<SkipWhy>,
    /// Why it was skipped or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The backup of the original (`--in-place`), when one is kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup: Option<String>,
    /// What a writer appended to the old file during an in-place repair, carried into the new
    /// one.
    #[serde(skip_serializing_if = "Carried::is_empty")]
    pub carried: Carried,
    /// What else happened that the user must know: a link followed, other hard links that keep
    /// the old content, a writer still writing to the old file, a backup kept despite
    /// `--no-backup`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The edits of every round, for --dry-run.
    #[serde(skip)]
    pub plan: Vec<RoundEdit>,
    /// Lines whose `parentUuid` is re-pointed, for --dry-run.
    #[serde(skip)]
    pub reparented: Vec<u64>,
    /// Datasets: the lines removed or replaced (the plan, for --dry-run).
    #[serde(skip)]
    pub dataset_actions: Vec<Action>,
    /// Datasets: how many examples were dropped, truncated and answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub examples: Option<Examples>,
}

impl Report {
    pub(crate) fn new(job: &Job, status: Status) -> Self {
        Report {
            file: job.input.display().to_string(),
            output: None,
            status,
            format: None,
            edits: 0,
            rounds: 0,
            lines: RewriteStats::default(),
            unrepaired: Vec::new(),
            reason: None,
            message: None,
            backup: None,
            carried: Carried::default(),
            notes: Vec::new(),
            plan: Vec::new(),
            reparented: Vec::new(),
            dataset_actions: Vec::new(),
            examples: None,
        }
    }

    fn skipped(job: &Job, why: SkipWhy, message: String) -> Self {
        let mut r = Report::new(job, Status::Skipped);
        r.reason = Some(why);
        r.message = Some(message);
        r
    }
}

/// Why a file was skipped (the `reason` of its report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipWhy {
    /// Modified within `--min-idle`: it may still be written.
    RecentlyModified,
    /// In place: another process holds it open for writing.
    HeldOpen,
    /// It changed while being repaired, [`ATTEMPTS`] times.
    Changed,
    /// Found by a walk through a symbolic link that resolves outside the paths given.
    LinkOutside,
    /// Found by a walk through a symbolic link whose owner is not the file's.
    LinkOwner,
}

impl SkipWhy {
    /// How the summary counts it.
    pub fn counted(self) -> &'static str {
        match self {
            SkipWhy::RecentlyModified => "modified within --min-idle",
            SkipWhy::HeldOpen => "held open for writing",
            SkipWhy::Changed => "changed while repaired",
            SkipWhy::LinkOutside => "reached through a link out of the paths given",
            SkipWhy::LinkOwner => "reached through a link of another owner",
        }
    }
}

/// Bytes appended to the old file during an in-place repair and carried into the new one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Carried {
    /// Bytes.
    pub bytes: u64,
    /// Lines (newlines among them).
    pub lines: u64,
}

impl Carried {
    fn is_empty(&self) -> bool {
        self.bytes == 0
    }
}

/// Settings shared by every file.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Check options (format, line limit).
    pub check: Options,
    /// Orphan policy.
    pub orphans: OrphanPolicy,
    /// Plan only.
    pub dry_run: bool,
    /// Replace the input.
    pub in_place: bool,
    /// Backup suffix for --in-place, if a backup is kept.
    pub backup: Option<String>,
    /// Live-file guard.
    pub min_idle: Duration,
    /// Ignore the guard.
    pub force: bool,
    /// A core is left idle by the pool of files (more jobs than files): each output is
    /// surveyed on a thread of its own as it is written.
    pub overlap: bool,
}

impl Settings {
    /// The settings every repair starts from, which the callers then change field by field: a
    /// repair of a snapshot into a copy, read as `format` (detected when `None`) with lines up to
    /// `max_line_bytes`, never strict and on one thread, `orphans` for the calls left open; not
    /// a plan only, not in place, no backup, and no live-file guard (`force`, `min_idle` zero).
    pub fn copy(format: Option<Format>, max_line_bytes: usize, orphans: OrphanPolicy) -> Settings {
        Settings {
            check: Options { format, max_line_bytes, strict: false, jobs: 1 },
            orphans,
            dry_run: false,
            in_place: false,
            backup: None,
            min_idle: Duration::ZERO,
            force: true,
            overlap: false,
        }
    }
}

/// Plans the repair of a file: a check pass watched by the planner.
pub fn plan_file(path: &Path, s: &Settings, buf: &mut Vec<u8>) -> anyhow::Result<Plan> {
    let file = regular::open_file(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(survey(&mut ReadAt::new(&file, 0, None), s, buf, false).with_context(|| format!("reading {}", path.display()))?.plan)
}

/// What one read of a stream says: the plan of its repair, its errors by kind (as `check`
/// ends with them) and, when asked for (Claude Code), the edit that mends a missing parent the
/// agent's chain walk would stop at ([`Session::bridge`]). One read instead of three: a
/// repaired output is planned again, held to the input's errors and looked at for a break
/// from the same bytes.
#[derive(Debug, PartialEq)]
pub(crate) struct Survey {
    plan: Plan,
    errors: Kinds,
    bridge: Option<Option<Plan>>,
}

/// Errors counted by kind.
type Kinds = std::collections::BTreeMap<crate::transcript::Kind, usize>;

/// A [`Survey`] made of bytes as they are written: a repair's output is surveyed as it goes
/// out, not read back after.
struct Surveyor {
    p: crate::transcript::Pipeline,
    errors: ErrorTally,
    /// Whether to look for a break.
    bridge: bool,
    /// The resume walk's session, until the stream turns out not to be Claude Code's.
    session: Option<Session>,
    fed: Result<(), crate::transcript::StrictStop>,
}

impl Surveyor {
    /// `bridge`: look for a break too (Claude Code).
    fn new(s: &Settings, bridge: bool) -> Surveyor {
        Surveyor {
            p: plan_pipeline(&Options { strict: false, jobs: 1, ..s.check.clone() }, s.orphans),
            errors: ErrorTally::default(),
            bridge,
            session: bridge.then(Session::default),
            fed: Ok(()),
        }
    }

    /// The next bytes of the stream.
    fn feed(&mut self, bytes: &[u8]) {
        if self.fed.is_err() {
            return;
        }
        if let Some(session) = self.session.as_mut() {
            if self.p.checker().and_then(|c| c.settled_format()).is_some_and(|f| f != Format::ClaudeCode) {
                self.session = None;
            } else {
                session.feed(bytes);
            }
        }
        self.fed = self.p.feed(bytes);
        self.errors.add(self.p.drain());
    }

    fn finish(self) -> anyhow::Result<Survey> {
        let Surveyor { p, mut errors, bridge, session, fed } = self;
        fed.map_err(|e| anyhow::anyhow!("{e}"))?;
        let plan = finish_plan(p, &mut errors).map_err(|e| anyhow::anyhow!("{e}"))?;
        // A stream of another format has no break of Claude Code's walk to mend.
        let claude = plan.format.is_none_or(|f| f == Format::ClaudeCode);
        let bridge = bridge.then(|| {
            session.filter(|_| claude).and_then(|mut session| {
                session.end();
                bridge_edit(&session)
            })
        });
        Ok(Survey { plan, errors: errors.kinds(), bridge })
    }
}

/// A [`Surveyor`] of a repair's output on this thread, or — when the file pool leaves a core
/// idle ([`Settings::overlap`]) — on a thread of its own, fed in blocks while the output is
/// planned and written, so that surveying the output costs no time beside writing it.
enum Tee {
    Here(Box<Surveyor>),
    There { tx: std::sync::mpsc::SyncSender<Vec<u8>>, block: Vec<u8>, thread: std::thread::JoinHandle<anyhow::Result<Survey>> },
}

/// The blocks a [`Tee::There`] hands over (and how many may wait); small in the tests, so
/// that their files cross many blocks.
const TEE_BLOCK: usize = if cfg!(test) { 61 } else { 1 << 20 };
const TEE_QUEUE: usize = 4;

impl Tee {
    fn new(s: &Settings, bridge: bool) -> Tee {
        let here = || Tee::Here(Box::new(Surveyor::new(s, bridge)));
        if !s.overlap {
            return here();
        }
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(TEE_QUEUE);
        let settings = s.clone();
        let spawned = std::thread::Builder::new().name("repair-survey".into()).spawn(move || {
            let mut sv = Surveyor::new(&settings, bridge);
            for block in rx {
                sv.feed(&block);
            }
            sv.finish()
        });
        match spawned {
            Ok(thread) => Tee::There { tx, block: Vec::with_capacity(TEE_BLOCK), thread },
            // No thread to be had: the survey is made here.
            Err(_) => here(),
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        match self {
            Tee::Here(sv) => sv.feed(bytes),
            Tee::There { tx, block, .. } => {
                block.extend_from_slice(bytes);
                if block.len() >= TEE_BLOCK {
                    // A survey that ended early (its thread gone) says why at the end.
                    let _ = tx.send(std::mem::replace(block, Vec::with_capacity(TEE_BLOCK)));
                }
            }
        }
    }

    fn finish(self) -> anyhow::Result<Survey> {
        match self {
            Tee::Here(sv) => sv.finish(),
            Tee::There { tx, block, thread } => {
                if !block.is_empty() {
                    let _ = tx.send(block);
                }
                drop(tx);
                thread.join().map_err(|_| anyhow::anyhow!("the survey of the repaired output stopped (a defect: please report it)"))?
            }
        }
    }
}

/// Surveys what `r` reads (see [`Survey`]); `bridge`: look for a break too.
fn survey(r: &mut impl Read, s: &Settings, buf: &mut Vec<u8>, bridge: bool) -> anyhow::Result<Survey> {
    let mut sv = Surveyor::new(s, bridge);
    batch::read_to_end(r, buf, |chunk| {
        sv.feed(chunk);
        sv.fed.is_ok()
    })?;
    sv.finish()
}

/// Claude Code: the edit that mends a missing parent the agent's chain walk would stop at
/// ([`Session::bridge`]), if what `r` reads has one; its lines numbered as `r` reads them.
fn bridge_plan(r: &mut impl Read, buf: &mut Vec<u8>) -> std::io::Result<Option<Plan>> {
    let mut session = Session::default();
    batch::read_to_end(r, buf, |chunk| {
        session.feed(chunk);
        true
    })?;
    session.end();
    Ok(bridge_edit(&session))
}

/// The plan of [`bridge_plan`], of a session read to its end.
fn bridge_edit(session: &Session) -> Option<Plan> {
    session.bridge().map(|(line, under)| Plan {
        format: Some(Format::ClaudeCode),
        edits: vec![Edit::Bridge { line, under, reason: crate::transcript::Kind::LostOnResume }],
        recheck: true,
        ..Plan::default()
    })
}

/// The error findings of what `r` reads (demotions applied), counted by kind.
fn error_kinds(r: &mut impl Read, s: &Settings, buf: &mut Vec<u8>) -> anyhow::Result<Kinds> {
    let mut c = crate::transcript::check::pipeline(Options { strict: false, jobs: 1, ..s.check.clone() });
    let mut fed = Ok(());
    batch::read_to_end(r, buf, |chunk| {
        fed = c.feed(chunk);
        fed.is_ok()
    })?;
    fed.map_err(|e| anyhow::anyhow!("{e}"))?;
    let (events, _, _) = c.finish().map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut kinds = std::collections::BTreeMap::new();
    for f in crate::transcript::check::findings(events) {
        if f.wants_repair() {
            *kinds.entry(f.kind).or_default() += 1;
        }
    }
    Ok(kinds)
}

/// Rewrites what `src` reads with `plan` into `dest`; rejects are added to `rejects` (none are
/// written without it); what is written is surveyed by `tee`.
fn rewrite(
    src: &mut impl Read,
    plan: &Plan,
    s: &Settings,
    dest: &mut AtomicFile,
    mut rejects: Option<&mut Spool>,
    buf: &mut Vec<u8>,
    mut tee: Option<&mut Tee>,
) -> anyhow::Result<RewriteLog> {
    let mut rw = Rewriter::new(plan, s.check.max_line_bytes);
    if rejects.is_none() {
        rw = rw.without_rejects();
    }
    let mut failed: Option<std::io::Error> = None;
    let mut emit = |e: Emit<'_>| match e {
        Emit::Out(b) => {
            if let Some(t) = tee.as_mut() {
                t.feed(b);
            }
            if failed.is_none() {
                if let Err(err) = dest.write_all(b) {
                    failed = Some(err);
                }
            }
        }
        Emit::Reject(b) => {
            if let Some(r) = rejects.as_mut() {
                r.push(b)
            }
        }
    };
    batch::read_to_end(src, buf, |chunk| {
        rw.feed(chunk, &mut emit);
        true
    })
    .context("reading")?;
    let log = rw.finish(&mut emit);
    if let Some(e) = failed {
        return Err(e).with_context(|| format!("writing beside {}", dest.dest().display()));
    }
    dest.flush()?;
    Ok(log)
}

/// Files up to this size get the salvage round (it holds the file in memory); larger ones are
/// repaired without it, as before it.
const SALVAGE_MAX: u64 = 256 << 20;

/// What the first round of a file's repair produced.
pub(crate) struct FirstRound {
    pub(crate) plan: Plan,
    /// The output, when the plan has edits.
    pub(crate) out: Option<AtomicFile>,
    pub(crate) rejects: Spool,
    pub(crate) log: RewriteLog,
    /// Bytes of the input the round covered (its snapshot).
    pub(crate) covered: u64,
    /// Datasets: the lines removed or replaced (their plan is empty).
    pub(crate) actions: Vec<Action>,
    /// The input's errors by kind, when the round read all of it as a transcript.
    pub(crate) errors: Option<Kinds>,
    /// The output's survey, made as it was written (a transcript's output only).
    pub(crate) survey: Option<Survey>,
}

impl FirstRound {
    /// Whether the round changed anything.
    fn edited(&self) -> bool {
        !self.plan.is_empty() || !self.actions.is_empty()
    }
}

/// The output of the one-pass repair. Nothing is written until the first edit: up to then the
/// output is the input, and that prefix is copied from the input by the kernel when the first
/// edit comes (a clean file is never written at all).
pub(crate) struct LazyOut<'a> {
    input: &'a File,
    dest: &'a Path,
    keep: Keep,
    pub(crate) file: Option<AtomicFile>,
    same: u64,
    pub(crate) rejects: Spool,
    failed: Option<std::io::Error>,
}

impl<'a> LazyOut<'a> {
    /// An output for `dest` that copies `input` up to the first edit.
    pub(crate) fn new(input: &'a File, dest: &'a Path, keep: Keep) -> Self {
        LazyOut { input, dest, keep, file: None, same: 0, rejects: Spool::new(dest, Spool::LIMIT), failed: None }
    }

    /// Opens the output, copying what was passed through so far.
    pub(crate) fn open(&mut self) -> anyhow::Result<()> {
        if self.file.is_none() {
            let mut f = AtomicFile::create(self.dest, Some(self.keep)).with_context(|| format!("creating a temporary file beside {}", self.dest.display()))?;
            f.copy_from(self.input, 0, self.same).with_context(|| format!("writing {}", self.dest.display()))?;
            self.file = Some(f);
        }
        Ok(())
    }

    /// Writes an output or rejects piece.
    pub(crate) fn emit(&mut self, e: Emit<'_>) {
        match (e, &mut self.file) {
            (Emit::Out(b), None) => self.same += b.len() as u64,
            (Emit::Out(b), Some(f)) => {
                if self.failed.is_none() {
                    if let Err(err) = f.write_all(b) {
                        self.failed = Some(err);
                    }
                }
            }
            (Emit::Reject(b), _) => self.rejects.push(b),
        }
    }

    /// The first write error, if any.
    pub(crate) fn check(&mut self) -> anyhow::Result<()> {
        match self.failed.take() {
            Some(e) => Err(e).with_context(|| format!("writing {}", self.dest.display())),
            None => Ok(()),
        }
    }
}

/// The first round over `input` (`path`'s open descriptor), up to `limit` bytes or its end: in
/// one pass (read once, written once) unless that pass gives up, then planned to the end and
/// rewritten in a second pass over the same bytes.
fn first_round(path: &Path, input: &File, limit: Option<u64>, output: &Path, s: &Settings, keep: Keep, buf: &mut Vec<u8>) -> anyhow::Result<FirstRound> {
    let strict = |e: crate::transcript::StrictStop| anyhow::anyhow!("{}:{e}", path.display());
    let mut stream = StreamRepair::new(&s.check, s.orphans);
    let mut reader = ReadAt::new(input, 0, limit);
    let mut win = batch::Window::new(buf, READ_CHUNK);
    let mut out = LazyOut::new(input, output, keep);
    // The output is surveyed as it is written from the first edit on (until then it is the
    // input, which a clean file never has to be read again for): what passed before is read
    // from the input at that moment.
    let mut tee: Option<Tee> = None;
    let start = |tee: &mut Option<Tee>, same: u64| -> anyhow::Result<()> {
        if tee.is_none() {
            let mut t = Tee::new(s, true);
            let mut before = Vec::new();
            batch::read_to_end(&mut ReadAt::new(input, 0, Some(same)), &mut before, |chunk| {
                t.feed(chunk);
                true
            })
            .with_context(|| format!("reading {}", path.display()))?;
            *tee = Some(t);
        }
        Ok(())
    };
    let emit = |tee: &mut Option<Tee>, out: &mut LazyOut<'_>, e: Emit<'_>| {
        if let (Emit::Out(b), Some(t)) = (&e, tee.as_mut()) {
            t.feed(b);
        }
        out.emit(e);
    };
    let gave_up = loop {
        let n = win.fill(&mut reader).with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break stream.end().map_err(strict)?;
        }
        if let Some(why) = stream.read(win.fresh(n)).map_err(strict)? {
            break Some(why);
        }
        if stream.edited() {
            out.open()?;
            start(&mut tee, out.same)?;
        }
        match stream.write(win.held(), &mut |e| emit(&mut tee, &mut out, e)) {
            Step::Consumed(k) => win.consume(k),
            Step::Abandon(why) => break Some(why),
        }
        out.check()?;
    };
    let Some(why) = gave_up else {
        if stream.edited() {
            out.open()?;
            start(&mut tee, out.same)?;
        }
        let errors = Some(stream.take_errors().kinds());
        let (plan, log) = stream.finish(win.held(), &mut |e| emit(&mut tee, &mut out, e));
        out.check()?;
        let survey = tee.map(Tee::finish).transpose()?;
        if let Some(f) = out.file.as_mut() {
            f.flush().with_context(|| format!("writing {}", output.display()))?;
        }
        return Ok(FirstRound { plan, out: out.file, rejects: out.rejects, log, covered: reader.pos(), actions: Vec::new(), errors, survey });
    };
    tracing::debug!(file = %path.display(), ?why, "one-pass repair gave up: repairing in two passes");
    if buf.capacity() > 4 * READ_CHUNK {
        // The window grew to hold up to HOLD_LIMIT bytes; the passes below read in chunks of the
        // buffer's size, and a chunk that large would be copied again by the rewriter.
        *buf = Vec::with_capacity(READ_CHUNK);
    }
    let mut tally = stream.take_errors();
    let plan = match stream.abandon() {
        Rest::Planned(plan) => plan,
        Rest::Planning(mut p) => {
            // The rest of the file, from where the one pass stopped reading.
            batch::read_to_end(&mut reader, buf, |chunk| {
                let fed = p.feed(chunk).is_ok();
                tally.add(p.drain());
                fed
            })
            .with_context(|| format!("reading {}", path.display()))?;
            finish_plan(*p, &mut tally).map_err(strict)?
        }
    };
    let errors = Some(tally.kinds());
    let covered = reader.pos();
    if plan.is_empty() {
        return Ok(FirstRound { plan, out: None, rejects: out.rejects, log: RewriteLog::default(), covered, actions: Vec::new(), errors, survey: None });
    }
    let mut dest = AtomicFile::create(output, Some(keep)).with_context(|| format!("creating a temporary file beside {}", output.display()))?;
    // What the abandoned pass put aside is written again by the second.
    let mut rejects = Spool::new(output, Spool::LIMIT);
    let mut tee = Tee::new(s, true);
    let log = rewrite(&mut ReadAt::new(input, 0, Some(covered)), &plan, s, &mut dest, Some(&mut rejects), buf, Some(&mut tee))
        .with_context(|| path.display().to_string())?;
    Ok(FirstRound { plan, out: Some(dest), rejects, log, covered, actions: Vec::new(), errors, survey: Some(tee.finish()?) })
}

/// `<dir>/<stem>.rejects.jsonl` beside `output`.
pub fn rejects_path(output: &Path) -> PathBuf {
    let name = output.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.strip_suffix(".jsonl").unwrap_or(&name);
    output.with_file_name(format!("{stem}.rejects.jsonl"))
}

/// Repairs one file (a dataset under the default `drop` policy).
pub fn repair_file(job: &Job, s: &Settings, buf: &mut Vec<u8>) -> Report {
    repair_file_with(job, s, DatasetPolicy::default(), buf)
}

/// Repairs one file; a dataset under `policy`.
pub fn repair_file_with(job: &Job, s: &Settings, policy: DatasetPolicy, buf: &mut Vec<u8>) -> Report {
    match try_repair(job, s, policy, buf) {
        Ok(r) => r,
        Err(e) => {
            let mut r = Report::new(job, Status::Failed);
            r.message = Some(crate::error::chain(&e));
            r
        }
    }
}

/// How one attempt at a file ended.
enum Attempt {
    /// Reported (repaired, clean, skipped, planned).
    Done(Box<Report>),
    /// The file changed before the swap: nothing was replaced.
    Changed(String),
}

/// The file a job repairs (a link resolved: its target), with a note saying so; or why it is
/// not repaired (a walked link the rules refuse, [`Walked::reach`]).
fn resolve(job: &Job, s: &Settings) -> anyhow::Result<Result<(PathBuf, Option<String>), Report>> {
    let resolving = || format!("following the symbolic links to {}", job.input.display());
    let linked = match &job.walked {
        Some(w) => match w.reach(&job.rel).with_context(resolving)? {
            Reach::Refused(why, message) => return Ok(Err(Report::skipped(job, why, message))),
            Reach::Direct => None,
            Reach::Linked(target) => Some(target),
        },
        None => match std::fs::symlink_metadata(&job.input) {
            Ok(m) if m.file_type().is_symlink() => Some(std::fs::canonicalize(&job.input).with_context(resolving)?),
            _ => None,
        },
    };
    // --in-place on a symbolic link repairs its target and keeps the link.
    Ok(Ok(match linked.filter(|_| s.in_place) {
        Some(target) => {
            let note = format!("{} is a symbolic link: its target {} was repaired in place and the link kept", job.input.display(), target.display());
            (target, Some(note))
        }
        None => (job.input.clone(), None),
    }))
}

fn try_repair(job: &Job, s: &Settings, policy: DatasetPolicy, buf: &mut Vec<u8>) -> anyhow::Result<Report> {
    let mut why = String::new();
    for attempt in 0..ATTEMPTS {
        // Resolved at each attempt: a link swapped meanwhile is judged by the same rules.
        let (path, link_note) = match resolve(job, s)? {
            Ok(r) => r,
            Err(refused) => return Ok(refused),
        };
        let output = if s.in_place { path.clone() } else { job.output.clone() };
        match attempt_repair(job, &path, &output, s, policy, attempt, buf)? {
            Attempt::Done(mut r) => {
                if matches!(r.status, Status::Repaired | Status::Partial) {
                    r.notes.splice(0..0, link_note);
                }
                return Ok(*r);
            }
            Attempt::Changed(w) => {
                tracing::debug!(file = %path.display(), attempt, why = %w, "changed while being repaired: not replaced");
                why = w;
            }
        }
    }
    Ok(Report::skipped(
        job,
        SkipWhy::Changed,
        format!("it changed while being repaired ({why}), {ATTEMPTS} times: not replaced; it is still being written (repair it once it is idle)"),
    ))
}

/// The end of the last complete line within the first `len` bytes of `file` (0 if none).
fn complete_lines_end(file: &File, len: u64) -> std::io::Result<u64> {
    let mut page = vec![0u8; 64 << 10];
    let mut end = len;
    while end > 0 {
        let start = end.saturating_sub(page.len() as u64);
        let part = &mut page[..(end - start) as usize];
        file.read_exact_at(part, start)?;
        if let Some(i) = memchr::memrchr(b'\n', part) {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

fn list(holders: &[Holder]) -> String {
    holders.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// The last-moment check before a file is replaced.
struct Guard<'a> {
    job: &'a Job,
    file: &'a File,
    path: &'a Path,
    before: Identity,
    /// Bytes the repair covered.
    covered: u64,
    /// The repair covers a prefix of a file being appended to (in place, `--force`): growth is
    /// carried over, only a shrink or another file at the path is a change.
    live: bool,
}

/// What [`Guard::check`] found.
enum Checked {
    /// Nothing changed: go on.
    Unchanged,
    /// The file changed: not replaced, repaired again.
    Changed(String),
    /// Another process opened it for writing: not replaced in place.
    Held(Vec<Holder>),
    /// Its path now leads through a link the rules refuse ([`Walked::reach`]).
    Refused(SkipWhy, String),
}

impl Guard<'_> {
    /// What changed since the file was read, if anything; in place without `--force`, also
    /// whether another process opened it for writing.
    fn check(&self, s: &Settings) -> std::io::Result<Checked> {
        if let Some(w) = &self.job.walked {
            // The links on the way, looked at again by the rules that chose the file: one
            // swapped in since (the file's name, or a directory on the way) must not redirect
            // the write.
            let reach = w.reach(&self.job.rel);
            let here = match &reach {
                Ok(Reach::Refused(why, m)) => return Ok(Checked::Refused(*why, m.clone())),
                Ok(Reach::Direct) => self.path == self.job.input || !s.in_place,
                Ok(Reach::Linked(target)) => !s.in_place || self.path == target,
                Err(_) => false,
            };
            if !here {
                return Ok(Checked::Changed("the links on its path changed".into()));
            }
        }
        if s.force && !s.in_place {
            // A copy of a snapshot is what was asked for: the input is not touched.
            return Ok(Checked::Unchanged);
        }
        let now = Identity::of(&self.file.metadata()?);
        // In place the path is the file itself (a link was resolved): its name must still be
        // it. A --out input may be a link to it.
        let at_path = if s.in_place { std::fs::symlink_metadata(self.path) } else { std::fs::metadata(self.path) };
        match at_path {
            Ok(m) if Identity::of(&m).same_file(&now) => {}
            Ok(_) => return Ok(Checked::Changed("another file took its name".into())),
            Err(e) => return Ok(Checked::Changed(format!("its name is gone: {e}"))),
        }
        if now.len < self.covered {
            return Ok(Checked::Changed(format!("it shrank from {} to {} bytes", self.covered, now.len)));
        }
        if !self.live {
            if now.len > self.covered {
                return Ok(Checked::Changed(format!("it grew by {} bytes", now.len - self.covered)));
            }
            if now.mtime_ns != self.before.mtime_ns {
                return Ok(Checked::Changed("it was modified".into()));
            }
        }
        if s.in_place && !s.force {
            let (w, _) = holders::writers_of(now.dev, now.ino);
            if !w.is_empty() {
                return Ok(Checked::Held(w));
            }
        }
        Ok(Checked::Unchanged)
    }
}

/// The report of a file another process holds open for writing.
fn held(job: &Job, writers: &[Holder]) -> Report {
    Report::skipped(
        job,
        SkipWhy::HeldOpen,
        format!(
            "held open for writing by {}: not repaired in place, since the writer would go on writing to the old file (--force repairs it and carries over what the writer appends)",
            list(writers)
        ),
    )
}

/// One attempt: read, repair into a temporary file, check again, swap.
fn attempt_repair(job: &Job, path: &Path, output: &Path, s: &Settings, policy: DatasetPolicy, attempt: usize, buf: &mut Vec<u8>) -> anyhow::Result<Attempt> {
    let (file, meta) = regular::open(path, Follow::Yes).with_context(|| format!("reading {}", path.display()))?;
    let before = Identity::of(&meta);
    let done = |r: Report| Ok(Attempt::Done(Box::new(r)));
    let out_run = !s.in_place && !s.dry_run;
    let age = meta.modified().ok().and_then(|m| SystemTime::now().duration_since(m).ok()).unwrap_or_default();
    if !s.force && out_run && age < s.min_idle {
        // `--out` never writes the input: a file modified a moment ago (copied in, say) is
        // repaired; what would make the copy wrong is a process still writing it. (Only a file
        // modified within --min-idle is looked for in /proc, a scan of every process: an
        // archive of old files costs no scan per file.)
        let (w, _) = holders::writers_of(before.dev, before.ino);
        if !w.is_empty() {
            return done(Report::skipped(
                job,
                SkipWhy::HeldOpen,
                format!("held open for writing by {}: the output would miss what it still writes (--force repairs what is there now)", list(&w)),
            ));
        }
    }
    // In place (and in a dry run) a file modified within --min-idle may still be written: it is
    // skipped if it needs an edit. One that needs none is reported as it is, so that a second
    // run right after a repair (whose output is new) says the file is clean instead of skipping
    // it (issue 30).
    let recent = (!s.force && !out_run && age < s.min_idle).then(|| {
        let what = if attempt > 0 { "it changed while being repaired: modified" } else { "modified" };
        Report::skipped(
            job,
            SkipWhy::RecentlyModified,
            format!("{what} {}s ago, within --min-idle {}s: it may still be written (use --force to repair it anyway)", age.as_secs(), s.min_idle.as_secs()),
        )
    });
    // Without --force the checks before the swap look for writers (looks through /proc only
    // for the files replaced, not for every file); with it, a writer decides how to read.
    let writers = if s.in_place && s.force && !s.dry_run { holders::writers_of(before.dev, before.ino).0 } else { Vec::new() };
    // A file being appended to is repaired up to its last complete line; the rest is carried.
    let live = s.in_place && s.force && (!writers.is_empty() || attempt > 0);
    let limit = if live { Some(complete_lines_end(&file, before.len).with_context(|| format!("reading {}", path.display()))?) } else { None };
    let dataset = dataset::dataset_of(&file, s).with_context(|| format!("reading {}", path.display()))?;
    if let (true, Some(d)) = (s.dry_run, dataset) {
        let actions = dataset::plan(&mut ReadAt::new(&file, 0, limit), d, policy, s, buf).with_context(|| format!("reading {}", path.display()))?;
        if let (false, Some(skipped)) = (actions.is_empty(), recent) {
            return done(skipped);
        }
        let mut report = Report::new(job, if actions.is_empty() { Status::Clean } else { Status::Planned });
        report.format = Some(Format::Dataset(d));
        report.edits = actions.len();
        report.examples = Some(Examples::of(&actions));
        report.dataset_actions = actions;
        return done(report);
    }
    // A dry run makes the same rounds into a scratch directory, and keeps nothing.
    let scratch = if s.dry_run { Some(tempfile::tempdir().context("creating a scratch directory for --dry-run")?) } else { None };
    let scratch_out = scratch.as_ref().map(|d| d.path().join("dry-run.jsonl"));
    let output = scratch_out.as_deref().unwrap_or(output);
    // Only --out makes the directories of its output. In place the file's own directory is
    // there (the file was just opened in it); made again, a directory moved away meanwhile would
    // come back, empty, under the old name.
    if let Some(dir) = output.parent().filter(|d| !s.in_place && !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let keep = if s.dry_run { Keep::of(&meta, false) } else { Keep::of(&meta, s.in_place) };
    let mut first = match dataset {
        Some(d) => dataset::first_round(path, &file, limit, output, d, policy, s, keep, buf)?,
        None => first_round(path, &file, limit, output, s, keep, buf)?,
    };
    let covered = first.covered;
    // Lines the plan removes or empties that the agent could have kept: the salvage round
    // (in memory) comes first, and the rounds go on from its output, in a scratch file.
    let mut salvaged = None;
    if dataset.is_none() && covered <= SALVAGE_MAX && salvage::worth_a_look(&first.plan) {
        let mut bytes = Vec::new();
        ReadAt::new(&file, 0, Some(covered)).read_to_end(&mut bytes).with_context(|| format!("reading {}", path.display()))?;
        if let Some(sv) = salvage::salvage(&bytes, &first.plan, s.check.max_line_bytes) {
            drop(bytes);
            let dir = output.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            let mut scratch = tempfile::tempfile_in(dir).with_context(|| format!("creating a scratch file in {}", dir.display()))?;
            scratch.write_all(&sv.output).with_context(|| format!("writing a scratch file in {}", dir.display()))?;
            first = first_round(path, &scratch, None, output, s, keep, buf)?;
            first.covered = covered;
            // Those are the salvaged bytes' errors, not the input's.
            first.errors = None;
            salvaged = Some((sv, scratch));
        }
    }
    let first_edited = first.edited();
    let input_errors = first.errors.take();
    // What the latest survey said of the output as it now stands (`None` once it is rewritten
    // without one): the first round's output was surveyed as it was written.
    let mut latest: Option<Survey> = first.survey.take().filter(|_| first_edited);
    // Claude Code: a line whose parent is missing (never written, or a line removed as
    // unreadable) stops the agent's chain walk on resume, and the history before it is not
    // sent. Only a file with such a line, or with lines removed, can have one.
    let may_break = first.plan.format == Some(Format::ClaudeCode)
        && (first.plan.dangling_parents > 0 || salvaged.is_some() || first.plan.edits.iter().any(|e| matches!(e, Edit::Remove { .. })));
    let mut bridged_first = None;
    let mut out = first.out.filter(|_| first_edited);
    if may_break && !first_edited && salvaged.is_none() {
        if let Some(bp) = bridge_plan(&mut ReadAt::new(&file, 0, Some(covered)), buf).with_context(|| format!("reading {}", path.display()))? {
            let mut dest = AtomicFile::create(output, Some(keep)).with_context(|| format!("creating a temporary file beside {}", output.display()))?;
            let mut tee = Tee::new(s, false);
            let log = rewrite(&mut ReadAt::new(&file, 0, Some(covered)), &bp, s, &mut dest, Some(&mut first.rejects), buf, Some(&mut tee))
                .with_context(|| path.display().to_string())?;
            latest = Some(tee.finish()?);
            out = Some(dest);
            bridged_first = Some((bp, log));
        }
    }
    let edited = first_edited || salvaged.is_some() || bridged_first.is_some();
    if let (true, Some(skipped)) = (edited, recent) {
        return done(skipped); // nothing was written: the output is a temporary file
    }
    let bridge_last = first_edited || salvaged.is_some();
    let plan = first.plan;
    let mut rounds = if salvaged.is_some() { Rounds::with_max(MAX_ROUNDS + 1) } else { Rounds::new() };
    let mut report = Report::new(job, Status::Clean);
    report.format = dataset.map(Format::Dataset).or(plan.format);
    report.edits = plan.edits.len() + first.actions.len();
    report.examples = dataset.map(|_| Examples::of(&first.actions));
    report.dataset_actions = first.actions;
    let out = match (out, &salvaged) {
        (Some(o), _) => Some(o),
        (None, Some((sv, scratch))) => {
            // Only the salvage changed the file: its output is the repair's.
            let mut f = AtomicFile::create(output, Some(keep)).with_context(|| format!("creating a temporary file beside {}", output.display()))?;
            f.copy_from(scratch, 0, sv.output.len() as u64).with_context(|| format!("writing {}", output.display()))?;
            Some(f)
        }
        (None, None) => None,
    };
    let Some(mut out) = out.filter(|_| edited) else {
        rounds.verified(&plan);
        report.unrepaired = rounds.unrepaired().to_vec();
        report.status = if report.unrepaired.is_empty() { Status::Clean } else { Status::Partial };
        if !s.in_place && !s.dry_run {
            match (Guard { job, file: &file, path, before, covered, live }).check(s)? {
                Checked::Changed(w) => return Ok(Attempt::Changed(w)),
                Checked::Refused(why, m) => return done(Report::skipped(job, why, m)),
                Checked::Unchanged | Checked::Held(_) => {}
            }
            atomic::copy_file(&file, covered, output, Some(keep)).with_context(|| format!("writing {}", output.display()))?;
            report.output = Some(output.display().to_string());
        }
        return done(report);
    };
    let mut rejects = first.rejects;
    if let Some((sv, _)) = salvaged {
        rejects = Spool::new(output, Spool::LIMIT);
        rejects.push(&sv.rejects);
        rounds.record(&sv.plan, sv.log);
    }
    if first_edited {
        rounds.record(&plan, first.log);
    } else {
        rounds.verified(&plan);
    }
    if let Some((bp, log)) = bridged_first {
        rounds.record(&bp, log);
    }
    let bridge_at_end = may_break && bridge_last;
    while rounds.wants_another() {
        // The edits may have left new findings (two assistant turns side by side): check the
        // output again (what its survey said as it was written).
        let again = match latest.take() {
            Some(l) => l,
            None => survey(&mut out.read_back()?, s, buf, bridge_at_end)?,
        };
        if rounds.verified(&again.plan) {
            latest = Some(again);
            break;
        }
        let mut next = AtomicFile::create(output, Some(keep))?;
        let mut tee = Tee::new(s, bridge_at_end);
        let log = rewrite(&mut out.read_back()?, &again.plan, s, &mut next, None, buf, Some(&mut tee))?;
        rounds.record(&again.plan, log);
        latest = Some(tee.finish()?);
        out = next;
    }
    if bridge_at_end {
        // The edits are done: a break the agent's walk would stop at is mended last, on the
        // lines as they now stand (a removed unreadable line leaves its child without parent).
        let looked = match latest.as_mut().and_then(|l| l.bridge.take()) {
            Some(bridge) => bridge,
            None => {
                // One read for the break and the errors both.
                let mut l = survey(&mut out.read_back()?, s, buf, true)?;
                let bridge = l.bridge.take().flatten();
                latest = Some(l);
                bridge
            }
        };
        if let Some(bp) = looked {
            let mut next = AtomicFile::create(output, Some(keep))?;
            let mut tee = Tee::new(s, false);
            let log = rewrite(&mut out.read_back()?, &bp, s, &mut next, None, buf, Some(&mut tee))?;
            rounds.record(&bp, log);
            out = next;
            let again = tee.finish()?;
            rounds.verified(&again.plan);
            latest = Some(again);
        }
    }
    // The verdict holds only if the output checks no worse than the input: an error the input
    // did not have (or more of one kind) means an edit went wrong, whatever the plan says. The
    // file is then not replaced, nor is a copy written.
    let after = match latest {
        Some(l) => l.errors,
        None => error_kinds(&mut out.read_back()?, s, buf)?,
    };
    if !after.is_empty() {
        let before = match input_errors {
            Some(kinds) => kinds,
            None => error_kinds(&mut ReadAt::new(&file, 0, Some(covered)), s, buf).with_context(|| format!("reading {}", path.display()))?,
        };
        let worse: Vec<String> = after
            .iter()
            .filter(|(k, n)| before.get(*k).copied().unwrap_or(0) < **n)
            .map(|(k, n)| format!("{n} {} (the input had {})", k.as_str(), before.get(k).copied().unwrap_or(0)))
            .collect();
        if !worse.is_empty() {
            let mut r = Report::new(job, Status::Failed);
            r.format = report.format;
            r.edits = rounds.edits().len() + report.dataset_actions.len();
            r.rounds = rounds.rounds();
            r.message = Some(format!(
                "the repaired output checks worse than the input: {}; not {} (a defect of repair: please report it with the file)",
                worse.join(", "),
                if s.in_place { "replaced" } else { "written" }
            ));
            return done(r);
        }
    }
    if let Some(mut w) = rounds.rejects_writer(s.check.max_line_bytes).filter(|_| !s.dry_run) {
        // Later rounds changed lines too: the rejects are written again from the input (the
        // same snapshot), one record per line with what finally became of it.
        rejects = Spool::new(output, Spool::LIMIT);
        let mut emit = |e: Emit<'_>| {
            if let Emit::Reject(b) = e {
                rejects.push(b)
            }
        };
        batch::read_to_end(&mut ReadAt::new(&file, 0, Some(covered)), buf, |chunk| {
            w.feed(chunk, &mut emit);
            true
        })
        .with_context(|| format!("reading {}", path.display()))?;
        w.finish(&mut emit);
    }
    report.edits = rounds.edits().len() + report.dataset_actions.len();
    report.rounds = rounds.rounds();
    report.lines = rounds.stats();
    report.unrepaired = rounds.unrepaired().to_vec();
    let complete = rounds.complete();
    if s.dry_run {
        report.plan = rounds.edits().to_vec();
        report.reparented = rounds.reparented();
        report.status = if complete { Status::Planned } else { Status::Partial };
        return done(report);
    }
    let guard = Guard { job, file: &file, path, before, covered, live };
    match guard.check(s)? {
        Checked::Unchanged => {}
        Checked::Changed(w) => return Ok(Attempt::Changed(w)),
        Checked::Held(w) => return done(held(job, &w)),
        Checked::Refused(why, m) => return done(Report::skipped(job, why, m)),
    }
    // The slow part (owner, mode, fsync) before the last check, so that the check is close to
    // the rename.
    out.sync().with_context(|| format!("writing {}", output.display()))?;
    // What was removed is safe on disk before the new file takes the old one's place.
    let rejects_file = rejects_path(output);
    let merged = rejects.replace_into(&rejects_file, keep).with_context(|| format!("writing {}", rejects_file.display()))?;
    if merged == Merged::AlreadyThere {
        report.notes.push(format!("{} already ended with these records (a run stopped earlier wrote them): not added twice", rejects_file.display()));
    }
    let backup = match (s.in_place, &s.backup) {
        (true, suffix) => Some(link_backup(path, suffix.as_deref().unwrap_or(".orig"), &file, before, keep)?),
        (false, _) => None,
    };
    let last = guard.check(s)?;
    if !matches!(last, Checked::Unchanged) {
        if let Some(b) = backup.as_ref().filter(|b| b.created) {
            let _ = std::fs::remove_file(&b.path);
        }
        return match last {
            Checked::Held(w) => done(held(job, &w)),
            Checked::Changed(w) => Ok(Attempt::Changed(w)),
            Checked::Refused(why, m) => done(Report::skipped(job, why, m)),
            Checked::Unchanged => unreachable!(),
        };
    }
    let new = out.commit_file().with_context(|| format!("replacing {}", output.display()))?;
    report.output = Some(output.display().to_string());
    report.status = if complete { Status::Repaired } else { Status::Partial };
    if let Some(b) = backup {
        if b.other_links > 0 {
            report.notes.push(format!(
                "{} other hard link{} to this file keep the old content: only this name was replaced",
                b.other_links,
                if b.other_links == 1 { "" } else { "s" }
            ));
        }
        after_swap(&file, covered, live, &new, b, s, &mut report)
            .with_context(|| format!("carrying lines appended to {} during the repair", path.display()))?;
    }
    Ok(Attempt::Done(Box::new(report)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every transcript under tests/data (datasets aside: their first round counts nothing).
    fn transcripts() -> Vec<PathBuf> {
        fn walk(dir: &Path, into: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    if !p.file_name().unwrap().to_string_lossy().starts_with("dataset") {
                        walk(&p, into);
                    }
                } else if p.extension().is_some_and(|x| x == "jsonl") {
                    into.push(p);
                }
            }
        }
        let mut files = Vec::new();
        walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data"), &mut files);
        files.sort();
        files
    }

    /// The one read of a survey says what the three reads it replaces said: the plan, the
    /// errors `check` ends with, and the break; and the first round counts the input's errors
    /// as `check` does. On every transcript of the test data (broken ones by the hundred).
    #[test]
    fn a_survey_says_what_the_reads_it_replaces_say() {
        let s = Settings::copy(None, crate::transcript::lines::DEFAULT_MAX_LINE_BYTES, OrphanPolicy::Answer);
        let dir = tempfile::tempdir().unwrap();
        let (mut buf, mut wrong, mut with_errors, mut surveyed_as_written) = (Vec::new(), Vec::new(), 0, 0);
        let files = transcripts();
        assert!(files.len() > 150, "{} files", files.len());
        for path in &files {
            let file = File::open(path).unwrap();
            let read = || ReadAt::new(&file, 0, None);
            let checked = error_kinds(&mut read(), &s, &mut buf).unwrap();
            with_errors += usize::from(!checked.is_empty());
            let looked = survey(&mut read(), &s, &mut buf, true).unwrap();
            let plan = {
                let mut p = plan_pipeline(&s.check, s.orphans);
                batch::read_to_end(&mut read(), &mut buf, |chunk| {
                    let fed = p.feed(chunk).is_ok();
                    p.drain().for_each(drop);
                    fed
                })
                .unwrap();
                finish_plan(p, &mut ErrorTally::default()).unwrap()
            };
            // A break of Claude Code's walk is looked for in Claude Code's files.
            let bridge = bridge_plan(&mut read(), &mut buf).unwrap().filter(|_| plan.format.is_none_or(|f| f == Format::ClaudeCode));
            let keep = Keep::of(&file.metadata().unwrap(), false);
            let mut first = first_round(path, &file, None, &dir.path().join("out.jsonl"), &s, keep, &mut buf).unwrap();
            if looked.errors != checked || looked.plan != plan || looked.bridge != Some(bridge) || first.errors.as_ref() != Some(&checked) {
                wrong.push(format!("{}: check {checked:?}, survey {:?}, first round {:?}", path.display(), looked.errors, first.errors));
            }
            // The first round's output, surveyed as it was written, as when it is read back;
            // and the same on a thread of its own.
            let overlapped = first_round(path, &file, None, &dir.path().join("out2.jsonl"), &Settings { overlap: true, ..s.clone() }, keep, &mut buf).unwrap();
            if overlapped.survey != first.survey {
                wrong.push(format!("{}: output surveyed on a thread {:?}, here {:?}", path.display(), overlapped.survey, first.survey));
            }
            if first.edited() {
                surveyed_as_written += 1;
                let out = first.out.as_mut().expect("an edited first round has an output");
                let back = survey(&mut out.read_back().unwrap(), &s, &mut buf, true).unwrap();
                if first.survey.as_ref() != Some(&back) {
                    wrong.push(format!("{}: output surveyed as written {:?}, read back {back:?}", path.display(), first.survey));
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        assert!(with_errors > 50, "only {with_errors} files with errors: the test would prove little");
        assert!(surveyed_as_written > 50, "only {surveyed_as_written} outputs surveyed as written");
    }
}
