//! `transcriptd repair`: the command line of the repair driver ([`crate::repair`]), which does
//! the work and holds the guarantees (docs/commands/repair.md, "Guarantees").

use super::args::{OutputArgs, ReadArgs};
use super::output::human_bytes;
use super::{Exit, OutputFormat};
use crate::sources::batch;
use crate::transcript::dataset::repair::Policy as DatasetPolicy;
use crate::transcript::repair::{Edit, OrphanPolicy};
use anyhow::Context;
use rayon::prelude::*;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use crate::repair::*;

/// Arguments of `transcriptd repair`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files or directories (searched recursively for *.jsonl), or `-`: standard input,
    /// repaired onto standard output (with --rejects FILE for what is removed).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Write repaired files under DIR, mirroring the input tree (clean files are copied). DIR
    /// must not be, or reach by any spelling, an input directory; two inputs must not map to one
    /// output.
    #[arg(long, value_name = "DIR", conflicts_with = "in_place")]
    pub out: Option<PathBuf>,
    /// Replace the files themselves, keeping the original as <name><suffix> (a symbolic link
    /// keeps pointing at its target, which is repaired; owner, group and mode are kept).
    #[arg(long)]
    pub in_place: bool,
    /// With `-` (standard input): the file the removed and changed lines go to (JSON lines, as
    /// <name>.rejects.jsonl; an existing file keeps its records and gets the new ones after
    /// them, replaced atomically).
    #[arg(long, value_name = "FILE")]
    pub rejects: Option<PathBuf>,
    /// Suffix of the backup --in-place keeps.
    #[arg(long, default_value = ".orig", value_name = "SUFFIX")]
    pub backup_suffix: String,
    /// With --in-place, keep no backup (the rejects file still keeps every removed line; an old
    /// file a writer appended to during the repair is kept all the same).
    #[arg(long, requires = "in_place")]
    pub no_backup: bool,
    /// Print the plan, one line per action (-o json: one JSON action per line), and write
    /// nothing.
    #[arg(long, conflicts_with_all = ["out", "in_place"])]
    pub dry_run: bool,
    /// What to do with calls still pending at the end: answer them with an "interrupted" error
    /// result, drop them, or keep them (the file then stays not fully repaired).
    #[arg(long, default_value = "answer", value_parser = clap::value_parser!(OrphanPolicy), value_name = "POLICY")]
    pub orphans: OrphanPolicy,
    /// Datasets (one conversation per line): what to do with a line whose conversation has
    /// errors: drop it, truncate the conversation before its first break, or answer its calls
    /// without results. A line the policy cannot make clean is dropped.
    #[arg(long, default_value = "drop", value_parser = clap::builder::TypedValueParser::map(clap::builder::PossibleValuesParser::new(["drop", "truncate", "answer"]), |p| p.parse::<DatasetPolicy>().expect("a policy")), value_name = "POLICY")]
    pub dataset_policy: DatasetPolicy,
    /// In place (and in a dry run), skip files modified more recently than this that need an
    /// edit: they may still be written (a file that needs none is reported clean). Files that
    /// change while repaired, and files another process holds open for writing, are skipped
    /// too. With --out, which never writes the input, only the last two.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub min_idle: Duration,
    /// Repair files even if they are live. In place, lines a writer appends to the old file
    /// during the repair are carried into the repaired one; the old file is kept if it grew.
    #[arg(long)]
    pub force: bool,
    /// Also repair files a directory's walk reaches through symbolic links that resolve outside
    /// the paths given (by default they are skipped and said so). A file whose owner is not
    /// the owner of a link on its way is never repaired through it.
    #[arg(long)]
    pub follow_links_outside: bool,
    /// Process only the files whose path hashes to shard I of N (e.g. 0/4), for Kubernetes
    /// Indexed Jobs: N pods cover every file exactly once.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    pub shard: Option<(u64, u64)>,
    /// How transcripts are read (--max-line-bytes: longer lines are removed as line_too_long;
    /// --jobs: files repaired in parallel).
    #[command(flatten)]
    pub read: ReadArgs,
    /// How results are written (-o json: one JSON report per file).
    #[command(flatten)]
    pub out_args: OutputArgs,
}

fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let (i, n) = s.split_once('/').ok_or("expected I/N, such as 0/4")?;
    let (i, n): (u64, u64) = (i.trim().parse().map_err(|_| "I must be a number")?, n.trim().parse().map_err(|_| "N must be a number")?);
    if n == 0 || i >= n {
        return Err(format!("shard {i}/{n}: need 0 <= I < N"));
    }
    Ok((i, n))
}

impl Args {
    /// Whether the input is standard input (`-`): [`super::repair_stdin`] repairs it.
    pub fn reads_stdin(&self) -> bool {
        self.paths.iter().any(|p| p.as_os_str() == "-")
    }
}

/// Runs the verb over files and directories (standard input: [`super::repair_stdin::run`]).
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let started = std::time::Instant::now();
    if args.out.is_none() && !args.in_place && !args.dry_run {
        anyhow::bail!("say where the repaired files go: --out DIR, --in-place, or --dry-run to only print the plan");
    }
    if args.rejects.is_some() {
        anyhow::bail!("--rejects names the rejects file of a repair of `-` (standard input); a file's rejects go beside it as <name>.rejects.jsonl");
    }
    let jobs_n = args.read.jobs();
    let Jobs { jobs, skipped, empty_dirs } = jobs(&args.paths, args.out.as_deref(), args.shard, args.follow_links_outside)?;
    super::output::warn_empty_dirs(&args.out_args, &empty_dirs);
    let settings = Settings {
        dry_run: args.dry_run,
        in_place: args.in_place,
        backup: (!args.no_backup).then(|| args.backup_suffix.clone()),
        min_idle: args.min_idle,
        force: args.force,
        overlap: jobs_n > jobs.len(),
        ..Settings::copy(args.read.format, args.read.max_line_bytes, args.orphans)
    };
    let progress = (jobs.len() > 1 && std::io::stderr().is_terminal() && args.out_args.summary()).then(|| {
        let bar = indicatif::ProgressBar::new(jobs.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} repairing [{bar:40}] {pos}/{len} files {elapsed_precise} eta {eta}")
                .expect("template")
                .progress_chars("=> "),
        );
        bar
    });
    // The summary's size is the input's, whatever the mode: taken before --in-place replaces it.
    let bytes: u64 = jobs.iter().filter_map(|j| std::fs::metadata(&j.input).ok()).map(|m| m.len()).sum();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs_n).build().context("starting worker threads")?;
    let reports: Vec<Report> = pool.install(|| {
        jobs.par_iter()
            .with_max_len(1)
            .map(|job| {
                let r = batch::with_buffer(|buf| repair_file_with(job, &settings, args.dataset_policy, buf));
                if let Some(p) = &progress {
                    p.inc(1);
                }
                r
            })
            .collect()
    });
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    let mut out = args.out_args.stdout();
    let unreadable = super::output::report_skipped(&mut out, &args.out_args, &skipped)?;
    let paint = args.out_args.paint();
    for r in &reports {
        write_report(&mut out, r, args.out_args.format(), args.dry_run, paint)?;
    }
    out.flush()?;
    for r in reports.iter().filter(|r| r.status == Status::Failed) {
        super::style::error(format_args!("{}: {}", r.file, r.message.as_deref().unwrap_or("")));
    }
    if args.out_args.summary() {
        eprintln!("{}", summary(&reports, bytes, started.elapsed(), args.dry_run, args.min_idle, args.shard));
        if !skipped.is_empty() {
            eprintln!("skipped {} path{} ({unreadable} could not be read)", skipped.len(), if skipped.len() == 1 { "" } else { "s" });
        }
    }
    let count = |s: Status| reports.iter().filter(|r| r.status == s).count();
    let failed = count(Status::Failed);
    if failed + unreadable > 0 {
        let n = failed + unreadable;
        anyhow::bail!("{n} file{} could not be repaired", if n == 1 { "" } else { "s" });
    }
    Ok(if count(Status::Partial) + count(Status::Skipped) > 0 { Exit::Findings } else { Exit::Clean })
}

/// Writes what happened to one file (a failure goes to stderr, once, from the caller).
///
/// - `--dry-run`: the plan, one JSON action per line (`unrepairable` for what no edit fixes,
///   `skipped` with `reason` and `message` for a file left alone).
/// - `-o json`: the report.
/// - text: `FILE: repaired (...)`, `FILE:LINE: error: KIND: not repaired: WHY`, `FILE: backup: ...`,
///   `FILE: note: ...`, `FILE: skipped: WHY`; nothing for a clean file.
pub fn write_report(out: &mut impl Write, r: &Report, format: OutputFormat, dry_run: bool, paint: super::style::Paint) -> anyhow::Result<()> {
    let mut record = |mut v: serde_json::Value, extra: &[(&str, serde_json::Value)]| -> anyhow::Result<()> {
        let o = v.as_object_mut().expect("records are objects");
        for (k, x) in extra {
            o.insert((*k).into(), x.clone());
        }
        o.insert("file".into(), r.file.clone().into());
        serde_json::to_writer(&mut *out, &v)?;
        out.write_all(b"\n")?;
        Ok(())
    };
    if dry_run && format == OutputFormat::Text {
        return write_plan_text(out, r, paint);
    }
    if dry_run {
        for e in &r.plan {
            let mut extra = vec![("round", serde_json::Value::from(e.round))];
            if e.on_inserted {
                extra.push(("on_inserted", true.into()));
            }
            record(serde_json::to_value(&e.edit)?, &extra)?;
        }
        for line in &r.reparented {
            record(serde_json::json!({ "action": "set_parent", "line": line }), &[])?;
        }
        for a in &r.dataset_actions {
            record(serde_json::to_value(a)?, &[])?;
        }
        for u in &r.unrepaired {
            record(serde_json::to_value(u)?, &[("action", "unrepairable".into())])?;
        }
        if r.status == Status::Skipped {
            let v = serde_json::json!({ "action": "skipped", "reason": r.reason, "message": r.message });
            record(v, &[])?;
        }
        return Ok(());
    }
    if format == OutputFormat::Json {
        serde_json::to_writer(&mut *out, r)?;
        out.write_all(b"\n")?;
        return Ok(());
    }
    let l = r.lines;
    match r.status {
        Status::Clean | Status::Failed | Status::Planned => {}
        Status::Repaired | Status::Partial => {
            let verdict = if r.status == Status::Repaired { "repaired" } else { "partly repaired" };
            if let Some(e) = r.examples {
                // A dataset's lines are its examples: say how many are gone from the training
                // data and how many were changed, and how, not "lines removed" (issue 30: `drop`
                // removed 4 of 6 and said `repaired`).
                writeln!(out, "{} {verdict}: {} (the originals are in its rejects file)", paint.location(&format!("{}:", r.file)), examples(e))?;
            } else {
                writeln!(
                    out,
                    "{} {verdict} ({} inserted, {} removed, {} modified)",
                    paint.location(&format!("{}:", r.file)),
                    l.inserted,
                    l.removed,
                    l.modified
                )?;
            }
            for u in &r.unrepaired {
                writeln!(out, "{}", paint.at(&r.file, u.line, "error", u.kind.as_str(), &format!("not repaired: {}", u.why)))?;
            }
            if let Some(b) = &r.backup {
                writeln!(out, "{} backup: {}", paint.location(&format!("{}:", r.file)), super::safe::Safe(b))?;
            }
            for n in &r.notes {
                writeln!(out, "{} {}: {}", paint.location(&format!("{}:", r.file)), paint.severity("note"), super::safe::Safe(n))?;
            }
        }
        Status::Skipped => {
            writeln!(
                out,
                "{} {}: {}",
                paint.location(&format!("{}:", r.file)),
                paint.severity("warning"),
                format_args!("skipped: {}", super::safe::Safe(r.message.as_deref().unwrap_or("")))
            )?;
        }
    }
    Ok(())
}

/// `--dry-run` in text: the plan, one line per action, as `FILE:LINE: plan: KIND: WHAT` (the
/// finding it repairs, then what will be done, in input lines), then the findings it would
/// leave and a skip, as the repair itself says them.
fn write_plan_text(out: &mut impl Write, r: &Report, paint: super::style::Paint) -> anyhow::Result<()> {
    for e in &r.plan {
        let mut what = describe(&e.edit);
        if e.on_inserted {
            what.push_str(" (on the line an earlier round inserted after it)");
        }
        if e.round > 1 {
            what.push_str(&format!(" (round {})", e.round));
        }
        writeln!(out, "{}", paint.at(&r.file, e.edit.line(), "plan", e.edit.reason().as_str(), &what))?;
    }
    for line in &r.reparented {
        writeln!(out, "{}", paint.note(&r.file, *line, "plan", "re-point the line's parentUuid to the parent it has once the lines above are edited"))?;
    }
    for a in &r.dataset_actions {
        let at = a.message_index.map(|m| format!(" (message {m})")).unwrap_or_default();
        let what = if a.action == "remove" {
            format!("drop the example{at}: it goes to the rejects file")
        } else {
            format!("replace the example with its repaired conversation{at}: the original goes to the rejects file")
        };
        writeln!(out, "{}", paint.at(&r.file, a.line, "plan", a.reason.as_str(), &what))?;
    }
    for u in &r.unrepaired {
        writeln!(out, "{}", paint.at(&r.file, u.line, "error", u.kind.as_str(), &format!("not repaired: {}", u.why)))?;
    }
    if r.status == Status::Skipped {
        writeln!(out, "{}", paint.note(&r.file, 0, "warning", &format!("skipped: {}", r.message.as_deref().unwrap_or(""))))?;
    }
    Ok(())
}

/// What an edit will do, in words (the text of an inserted result quoted in full).
fn describe(e: &Edit) -> String {
    use crate::transcript::repair::plan::{How, Mend};
    match e {
        Edit::Remove { .. } => "remove the line (it goes to the rejects file)".into(),
        Edit::Insert { call_id, tool, text, .. } => {
            let tool = if tool.is_empty() { String::new() } else { format!(" ({tool})") };
            format!("insert after this line an error result for call `{call_id}`{tool}: {:?}", text.text())
        }
        Edit::DropResults { call_id, keep_first: true, .. } => format!("remove from the line the results for call `{call_id}` but the first"),
        Edit::DropResults { call_id, keep_first: false, .. } => format!("remove from the line the results for call `{call_id}`"),
        Edit::DropCall { call_id, .. } => format!("remove call `{call_id}` from the line"),
        Edit::JoinTurn { like, .. } => format!("give the line the message.id of line {like}, joining that turn"),
        Edit::MergeInto { into, .. } => format!("merge the line's message into the assistant message of line {into}"),
        Edit::Bridge { under, .. } => format!("hang the line under line {under} (its parentUuid set to that line's uuid)"),
        Edit::Mend { how, .. } => match how {
            Mend::Images { max_px, .. } => format!(
                "replace each image of the line over the API's limits (5 MB of base64, {max_px} px) or without data by a text placeholder saying what it was"
            ),
            Mend::DropUnsignedThinking => "remove the thinking blocks without a signature from the line".into(),
            Mend::ThinkingFirst => "move the line's thinking blocks before its other blocks".into(),
            Mend::ResultsFirst => "move the line's tool_result blocks before its other blocks".into(),
            Mend::DropBlankText => "remove the empty and whitespace-only text blocks from the line".into(),
        },
        Edit::Salvage { how, with, .. } => match (how, with) {
            (How::StripNul, _) => "drop the NUL bytes padding the line".into(),
            (How::SplitGlued, _) => "keep the complete record glued into the line as a line of its own".into(),
            (How::JoinSplit, Some(w)) => format!("join the line and those after it up to line {w} into the one record they were split from"),
            (How::JoinSplit, None) => "join the line with the next into the one record they were split from".into(),
            (How::EndLine, _) => "end the complete last line with its newline".into(),
            (How::MoveAfter, Some(w)) => format!("move the result to after its call's line {w}"),
            (How::MoveAfter, None) => "move the result to after its call's line".into(),
        },
    }
}

/// The summary line: what each file came to, every count named for what it counts.
pub fn summary(reports: &[Report], bytes: u64, elapsed: Duration, dry_run: bool, min_idle: Duration, shard: Option<(u64, u64)>) -> String {
    let count = |s: Status| reports.iter().filter(|r| r.status == s).count();
    let n = reports.len();
    let mut why: std::collections::BTreeMap<SkipWhy, usize> = std::collections::BTreeMap::new();
    for r in reports {
        if let Some(w) = r.reason {
            *why.entry(w).or_default() += 1;
        }
    }
    let skipped = count(Status::Skipped);
    let reasons: Vec<String> = why
        .iter()
        .map(|(w, k)| {
            if *w == SkipWhy::RecentlyModified {
                format!("{k} {} {}", w.counted(), humantime::format_duration(min_idle))
            } else {
                format!("{k} {}", w.counted())
            }
        })
        .collect();
    let skipped = if reasons.is_empty() { format!("{skipped} skipped") } else { format!("{skipped} skipped: {}", reasons.join(", ")) };
    let head = format!("{n} file{} ({}) in {:.2}s", if n == 1 { "" } else { "s" }, human_bytes(bytes), elapsed.as_secs_f64());
    let shard = shard.map(|(i, n)| format!(" (shard {i}/{n})")).unwrap_or_default();
    if dry_run {
        format!(
            "dry run over {head}: {} clean, {} to repair, {skipped}, {} failed; nothing written{shard}",
            count(Status::Clean),
            count(Status::Planned),
            count(Status::Failed)
        )
    } else {
        // What datasets lost or had changed is data of the training set: counted apart.
        let mut e = crate::transcript::dataset::repair::Examples::default();
        for r in reports.iter().filter(|r| matches!(r.status, Status::Repaired | Status::Partial)) {
            e.add(r.examples.unwrap_or_default());
        }
        let dropped =
            if e.is_empty() { String::new() } else { format!("; dataset examples: {} dropped, {} truncated, {} answered", e.dropped, e.truncated, e.answered) };
        format!(
            "repair of {head}: {} clean, {} repaired, {} partly repaired, {skipped}, {} failed{dropped}{shard}",
            count(Status::Clean),
            count(Status::Repaired),
            count(Status::Partial),
            count(Status::Failed)
        )
    }
}

/// A dataset repair's counts in words: `2 examples dropped, 1 truncated, 0 answered`.
fn examples(e: crate::transcript::dataset::repair::Examples) -> String {
    let noun = if e.dropped == 1 { "example" } else { "examples" };
    format!("{} {noun} dropped, {} truncated, {} answered", e.dropped, e.truncated, e.answered)
}
