//! `transcriptd doctor`: the sessions of one project directory, for every agent, newest first,
//! each with whether it will resume; with `--fix`, the broken ones repaired in place (never one
//! a process holds open for writing), checked again, and the agent's own resume command.
//!
//! Finding the sessions is [`crate::sessions::project`]; the check is `check`'s
//! ([`crate::batch_check::check_all`]); the verdict is the core's [`Verdict`]; the repair is
//! `repair --in-place`'s ([`crate::repair::repair_file`], backup `.orig`, rejects file), and the
//! writers are looked for in `/proc` as it does ([`crate::sources::holders`]).

use super::args::{OutputArgs, ReadArgs};
use super::output::{plural, FindingRecord};
use super::safe::Safe;
use super::style::Paint;
use super::{Exit, OutputFormat};
use crate::batch_check::{check_all, FileReport};
use crate::repair::{rejects_path, repair_file, Job, Report, Settings, Status};
use crate::sessions::project::{sessions_of, Found};
use crate::sources::batch::Input;
use crate::sources::holders::{self, Holder};
use crate::transcript::repair::OrphanPolicy;
use crate::transcript::verdict::{dropped, mended, Verdict};
use crate::transcript::{Finding, Options};
use anyhow::Context;
use serde_json::{json, Value};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Arguments of `transcriptd doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The project directory (the agent's working directory) whose sessions are looked at.
    /// Default: the current directory.
    pub dir: Option<PathBuf>,
    /// Repair every session that will not resume as it is, in place (the original kept as
    /// <name>.orig, every removed or changed line in <name>.rejects.jsonl), check it again and
    /// print the agent's resume command. A session a process holds open for writing (the agent
    /// still running) is left alone.
    #[arg(long)]
    pub fix: bool,
    /// How transcripts are read (by the check, and by the repair of --fix).
    #[command(flatten)]
    pub read: ReadArgs,
    /// How results are written (-o json: one JSON object per session).
    #[command(flatten)]
    pub out: OutputArgs,
}

/// The drops a line names before it says how many more there are.
const DROPS_SHOWN: usize = 3;

/// What `--fix` did to one session.
enum Fix {
    /// Another process holds it open for writing: not touched.
    Held(Vec<Holder>),
    /// The repair ran: its report, and the check of the repaired file.
    Repaired(Box<Report>, Box<FileReport>),
    /// The repair ran and did not replace the file (skipped, clean, failed): its report.
    NotReplaced(Box<Report>),
}

/// One session, checked (and fixed).
struct Row<'a> {
    found: &'a Found,
    check: &'a FileReport,
    verdict: Verdict,
    fix: Option<Fix>,
}

impl Row<'_> {
    /// The verdict that holds now: after a repair, the repaired file's.
    fn now(&self) -> Verdict {
        match &self.fix {
            Some(Fix::Repaired(_, after)) if after.error.is_none() => Verdict::of(after.format, &after.findings),
            _ => self.verdict.clone(),
        }
    }
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let given = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let dir = std::fs::canonicalize(&given).with_context(|| format!("resolving {}", given.display()))?;
    anyhow::ensure!(dir.is_dir(), "{} is not a directory (doctor looks at a project directory's sessions)", dir.display());
    let sessions = sessions_of(&dir);
    for e in &sessions.unreadable {
        super::style::error(e);
    }
    let inputs: Vec<Input> = sessions.found.iter().map(|f| Input::File(f.session.transcript.clone())).collect();
    let jobs = args.read.jobs();
    let opts = Options { format: args.read.format, max_line_bytes: args.read.max_line_bytes, strict: false, jobs };
    let checks = check_all(&inputs, &opts, jobs);
    let mut rows: Vec<Row<'_>> =
        sessions.found.iter().zip(&checks).map(|(found, check)| Row { found, check, verdict: Verdict::of(check.format, &check.findings), fix: None }).collect();
    if args.fix {
        fix(&mut rows, &opts);
    }

    let now = SystemTime::now();
    let paint = args.out.paint();
    let mut out = args.out.stdout();
    for r in &rows {
        match args.out.format() {
            OutputFormat::Json => {
                serde_json::to_writer(&mut *out, &record(r, &dir, now))?;
                out.write_all(b"\n")?;
            }
            OutputFormat::Text => write_text(&mut out, r, &dir, now, paint)?,
        }
    }
    out.flush()?;

    let failed_checks = rows.iter().filter(|r| r.check.error.is_some()).count();
    let failed_fixes = rows.iter().filter(|r| matches!(&r.fix, Some(Fix::NotReplaced(rep)) if rep.status == Status::Failed)).count();
    if args.out.summary() {
        eprintln!("{}", summary(&rows, &dir, &sessions.looked_in, args.fix));
    }
    for r in &rows {
        if let Some(e) = &r.check.error {
            super::style::error(e);
        }
        if let Some(Fix::NotReplaced(rep)) = &r.fix {
            if rep.status == Status::Failed {
                super::style::error(format_args!("{}: {}", rep.file, rep.message.as_deref().unwrap_or("")));
            }
        }
    }
    let trouble = failed_checks + failed_fixes + sessions.unreadable.len();
    if trouble > 0 {
        anyhow::bail!("{trouble} session{} or director{} could not be checked or repaired", plural(trouble as u64), if trouble == 1 { "y" } else { "ies" });
    }
    Ok(if rows.iter().all(|r| r.now().resumes()) { Exit::Clean } else { Exit::Findings })
}

/// `--fix`: repairs every session that does not resume, unless a process holds it open for
/// writing (one look through `/proc` for all of them first, so that the user hears which
/// process; the repair looks again just before it replaces the file).
fn fix(rows: &mut [Row<'_>], opts: &Options) {
    let broken: Vec<usize> = (0..rows.len()).filter(|&i| !rows[i].verdict.resumes() && rows[i].check.error.is_none()).collect();
    if broken.is_empty() {
        return;
    }
    let ids: Vec<(u64, u64)> = broken.iter().filter_map(|&i| std::fs::metadata(&rows[i].found.session.transcript).ok()).map(|m| (m.dev(), m.ino())).collect();
    let scan = holders::scan(&ids);
    // `repair --in-place` without --force: no --min-idle wait (the user quit the agent a moment
    // ago), but a writer found at the last moment still keeps the file from being replaced.
    let settings = Settings {
        in_place: true,
        backup: Some(".orig".to_owned()),
        min_idle: Duration::ZERO,
        force: false,
        ..Settings::copy(opts.format, opts.max_line_bytes, OrphanPolicy::Answer)
    };
    let mut buf = Vec::new();
    for i in broken {
        let path = rows[i].found.session.transcript.clone();
        let writers = std::fs::metadata(&path).map(|m| scan.of(m.dev(), m.ino()).to_vec()).unwrap_or_default();
        if !writers.is_empty() {
            rows[i].fix = Some(Fix::Held(writers));
            continue;
        }
        let job = Job { input: path.clone(), output: path.clone(), rel: PathBuf::from(path.file_name().unwrap_or_default()), walked: None };
        let report = repair_file(&job, &settings, &mut buf);
        rows[i].fix = Some(match report.status {
            Status::Repaired | Status::Partial => {
                let after = crate::batch_check::check_input(&Input::File(path), opts, &mut buf);
                Fix::Repaired(Box::new(report), Box::new(after))
            }
            _ => Fix::NotReplaced(Box::new(report)),
        });
    }
}

/// How long ago, for people: `12s`, `5m`, `3h`, `2d`.
fn age(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// The verdict in words: `resumes` (`resumes, mending: …` when the agent mends breaks of the
/// file, `findings`, leaving nothing out), `will be refused: line N: kind: message`, `resumes
/// but drops: …`.
fn verdict_text(v: &Verdict, findings: &[Finding]) -> String {
    match v {
        Verdict::Resumes => {
            let mends: Vec<&Finding> = findings.iter().filter(|f| f.mended).collect();
            if mends.is_empty() {
                return "resumes".to_owned();
            }
            format!("resumes, mending: {}", first_few(mends.into_iter(), mended))
        }
        Verdict::Refused(f) => {
            let call = f.call_id.as_deref().map(|c| format!(" [{c}]")).unwrap_or_default();
            let at = if f.is_whole_file() { String::new() } else { format!("line {}: ", f.line) };
            format!("will be refused: {at}{}: {}{call}", f.kind, f.says())
        }
        Verdict::Drops(fs) => format!("resumes but drops: {}", first_few(fs.iter(), dropped)),
    }
}

/// The first [`DROPS_SHOWN`] findings in words, and how many more there are.
fn first_few<'a>(fs: impl ExactSizeIterator<Item = &'a Finding>, said: fn(&Finding) -> String) -> String {
    let n = fs.len();
    let shown: Vec<String> = fs.take(DROPS_SHOWN).map(said).collect();
    let more = if n > DROPS_SHOWN { format!(" and {} more", n - DROPS_SHOWN) } else { String::new() };
    format!("{}{more}", shown.join(", "))
}

fn holders_text(w: &[Holder]) -> String {
    w.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// One session in text: `agent  id  age  verdict`, and under it what `--fix` did.
fn write_text(out: &mut impl Write, r: &Row<'_>, dir: &Path, now: SystemTime, paint: Paint) -> anyhow::Result<()> {
    let f = r.found;
    let ago = now.duration_since(f.modified).map(age).unwrap_or_else(|_| "0s".to_owned());
    let verdict = match &r.check.error {
        Some(e) => format!("could not be checked: {e}"),
        None => verdict_text(&r.verdict, &r.check.findings),
    };
    let word = |s: &str| if r.verdict.resumes() && r.check.error.is_none() { s.to_owned() } else { paint.severity(s) };
    let (head, rest) = verdict.split_once(':').map_or((verdict.as_str(), ""), |(h, t)| (h, t));
    let verdict = format!("{}{}", word(head), if rest.is_empty() { String::new() } else { format!(":{}", Safe(rest)) });
    writeln!(out, "{:<11}  {}  {:>4} ago  {verdict}", f.agent.as_str(), Safe(&f.session.id), ago)?;
    let file = f.session.transcript.display().to_string();
    match &r.fix {
        None => {}
        Some(Fix::Held(w)) => writeln!(
            out,
            "  not fixed: {} is held open for writing by {}: quit the agent, then run `transcriptd doctor --fix` again",
            Safe(&file),
            Safe(holders_text(w))
        )?,
        Some(Fix::NotReplaced(rep)) => {
            let why = rep.message.as_deref().unwrap_or(match rep.status {
                Status::Clean => "repair found nothing to change",
                _ => "not replaced",
            });
            writeln!(out, "  not fixed: {}", Safe(why))?;
        }
        Some(Fix::Repaired(rep, after)) => {
            let l = rep.lines;
            let verdict = if rep.status == Status::Repaired { "repaired" } else { "partly repaired" };
            let backup = rep.backup.as_deref().map(|b| format!("; the original is {}", Safe(b))).unwrap_or_default();
            let rejects = rejects_path(&f.session.transcript);
            let rejects = if rejects.exists() { format!(", the lines removed or changed are in {}", Safe(rejects.display())) } else { String::new() };
            let changed = l.inserted + l.removed + l.modified > 0 || rep.backup.is_some();
            if changed {
                writeln!(out, "  fixed: {verdict} ({} inserted, {} removed, {} modified){backup}{rejects}", l.inserted, l.removed, l.modified)?;
            } else {
                writeln!(out, "  not fixed: repair has no edit that mends it; the file is as it was")?;
            }
            for u in rep.unrepaired.iter().take(DROPS_SHOWN) {
                let why = u.why.strip_prefix("not repaired: ").unwrap_or(&u.why);
                writeln!(out, "  not repaired: line {}: {}: {}", u.line, u.kind, Safe(why))?;
            }
            if rep.unrepaired.len() > DROPS_SHOWN {
                writeln!(out, "  and {} more not repaired", rep.unrepaired.len() - DROPS_SHOWN)?;
            }
            let now = match &after.error {
                Some(e) => format!("could not be checked again: {e}"),
                None => verdict_text(&Verdict::of(after.format, &after.findings), &after.findings),
            };
            if changed {
                writeln!(out, "  now: {}", Safe(&now))?;
            }
            if r.now().resumes() {
                writeln!(out, "  resume: {}", Safe(f.agent.resume_command(dir, &f.session.id)))?;
            }
        }
    }
    Ok(())
}

/// One session in JSON.
fn record(r: &Row<'_>, dir: &Path, now: SystemTime) -> Value {
    let f = r.found;
    let file = f.session.transcript.display().to_string();
    let finding = |x: &crate::transcript::Finding| serde_json::to_value(FindingRecord::new(&file, r.check.format, x)).unwrap_or(Value::Null);
    let verdict = |v: &Verdict, findings: &[Finding]| -> Value {
        let mut o = json!({ "verdict": v.word() });
        match v {
            Verdict::Resumes => {
                let mends: Vec<Value> = findings.iter().filter(|f| f.mended).map(&finding).collect();
                if !mends.is_empty() {
                    o["mends"] = mends.into();
                }
            }
            Verdict::Refused(x) => o["refused_for"] = finding(x),
            Verdict::Drops(xs) => o["drops"] = xs.iter().map(&finding).collect(),
        }
        o
    };
    let modified = f.modified.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let mut o = json!({
        "agent": f.agent,
        "id": f.session.id,
        "file": file,
        "format": r.check.format,
        "modified": crate::sessions::Timestamp::from_unix(modified.as_secs() as i64, modified.subsec_nanos()),
        "age_secs": now.duration_since(f.modified).unwrap_or_default().as_secs(),
        "resume_command": f.agent.resume_command(dir, &f.session.id),
    });
    match &r.check.error {
        Some(e) => o["error"] = e.clone().into(),
        None => {
            let v = verdict(&r.verdict, &r.check.findings);
            for (k, x) in v.as_object().into_iter().flatten() {
                o[k] = x.clone();
            }
        }
    }
    if let Some(fix) = &r.fix {
        o["fix"] = match fix {
            Fix::Held(w) => json!({ "status": "held_open", "holders": w }),
            Fix::NotReplaced(rep) => json!({ "status": rep.status, "reason": rep.reason, "message": rep.message }),
            Fix::Repaired(rep, after) => {
                let rejects = rejects_path(&f.session.transcript);
                let mut x = json!({
                    "status": rep.status,
                    "lines": rep.lines,
                    "unrepaired": rep.unrepaired,
                    "backup": rep.backup,
                    "rejects": rejects.exists().then(|| rejects.display().to_string()),
                });
                match &after.error {
                    Some(e) => x["error"] = e.clone().into(),
                    None => x["after"] = verdict(&Verdict::of(after.format, &after.findings), &after.findings),
                }
                x
            }
        };
    }
    o
}

/// The summary on stderr: how many sessions resume, and the next command when some do not.
fn summary(rows: &[Row<'_>], dir: &Path, looked_in: &[PathBuf], fixed: bool) -> String {
    let dir = Safe(dir.display()).to_string();
    if rows.is_empty() {
        let places: Vec<String> = looked_in.iter().map(|p| format!("{}{}", Safe(p.display()), if p.is_dir() { "" } else { " (absent)" })).collect();
        if places.is_empty() {
            return format!("no sessions of {dir}: HOME is not set, nor CLAUDE_CONFIG_DIR or CODEX_HOME, so there is nowhere to look");
        }
        return format!("no sessions of {dir} (looked in {})", places.join(", "));
    }
    let count = |f: &dyn Fn(&Verdict) -> bool| rows.iter().filter(|r| r.check.error.is_none() && f(&r.verdict)).count();
    let resume = count(&|v| v.resumes());
    let refused = count(&|v| matches!(v, Verdict::Refused(_)));
    let drops = count(&|v| matches!(v, Verdict::Drops(_)));
    let unchecked = rows.iter().filter(|r| r.check.error.is_some()).count();
    // "1 resumes", "2 resume".
    let verb = |n: usize, one: &str, many: &str| if n == 1 { one.to_owned() } else { many.to_owned() };
    let n = rows.len();
    let mut s = format!(
        "{n} session{} of {dir}{}: {resume} {}, {refused} will be refused, {drops} {}",
        plural(n as u64),
        if fixed { " as found" } else { "" },
        verb(resume, "resumes", "resume"),
        verb(drops, "resumes but loses part of its history", "resume but lose part of their history"),
    );
    if unchecked > 0 {
        s.push_str(&format!(", {unchecked} could not be checked"));
    }
    let broken = refused + drops;
    if !fixed {
        if broken > 0 {
            s.push_str(&format!("; to repair {}: quit the agent, run `transcriptd doctor --fix`, then resume", if broken == 1 { "it" } else { "them" }));
        }
        return s;
    }
    let repaired = rows.iter().filter(|r| matches!(r.fix, Some(Fix::Repaired(..))) && r.now().resumes()).count();
    let held = rows.iter().filter(|r| matches!(r.fix, Some(Fix::Held(_)))).count();
    s.push_str(&format!("; fixed {repaired} of {broken}"));
    if held > 0 {
        s.push_str(&format!(", {held} held open for writing (quit the agent, then run `transcriptd doctor --fix` again)"));
    }
    let left = rows.iter().filter(|r| !r.now().resumes()).count() - held;
    if left > 0 {
        s.push_str(&format!(", {left} still will not resume whole (`transcriptd check FILE` says why, by line)"));
    }
    if rows.iter().all(|r| r.now().resumes()) {
        s.push_str(&format!("; {} now", if n == 1 { "it resumes" } else { "every one resumes" }));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::Kind;

    #[test]
    fn ages_and_verdicts_read_as_one_line() {
        assert_eq!(age(Duration::from_secs(5)), "5s");
        assert_eq!(age(Duration::from_secs(125)), "2m");
        assert_eq!(age(Duration::from_secs(3 * 3600 + 5)), "3h");
        assert_eq!(age(Duration::from_secs(9 * 86_400)), "9d");
        assert_eq!(verdict_text(&Verdict::Resumes, &[]), "resumes");
        let mut open = Finding::new(9, Kind::OrphanCall, "no result").with_call("toolu_1", None);
        crate::transcript::verdict::tell(crate::transcript::Format::ClaudeCode, &mut open);
        assert_eq!(verdict_text(&Verdict::Resumes, &[open]), "resumes, mending: the call toolu_1 left without a result at line 9 (orphan_call)");
        let blank = Finding::new(7, Kind::EmptyText, "blank text");
        assert_eq!(verdict_text(&Verdict::Refused(blank), &[]), "will be refused: line 7: empty_text: blank text");
        let drops: Vec<Finding> = (1..=5).map(|l| Finding::new(l, Kind::TornLine, "t")).collect();
        assert_eq!(verdict_text(&Verdict::Drops(drops), &[]), "resumes but drops: line 1 (torn_line), line 2 (torn_line), line 3 (torn_line) and 2 more");
    }
}
