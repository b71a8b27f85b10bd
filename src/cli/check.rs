//! `transcriptd check`: validate transcripts and report findings.

use super::args::FindingArgs;
use super::output::{human_bytes, plural, FindingRecord};
use super::style::Paint;
use super::{Exit, OutputFormat};
use crate::batch_check::check_all;
use crate::sources::batch::{self, Input};
use crate::transcript::{Finding, FindingFilter, Format, Kind, Options, Severity};
use anyhow::Context;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `transcriptd check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files, directories (searched recursively for *.jsonl) or `-` for stdin. Default: the
    /// standard locations, ~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions, ~/.qwen/projects, ~/.gemini/tmp and ~/.copilot/session-state.
    pub paths: Vec<PathBuf>,
    /// Stop at the first line that cannot be read and exit 2, naming file and line.
    #[arg(long)]
    pub strict: bool,
    /// How transcripts are read, which findings, how results are written.
    #[command(flatten)]
    pub common: FindingArgs,
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let started = Instant::now();
    let paths = if args.paths.is_empty() { super::default_roots() } else { args.paths.clone() };
    if paths.is_empty() {
        anyhow::bail!("no paths given, and none of ~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions, ~/.qwen/projects, ~/.gemini/tmp and ~/.copilot/session-state exists");
    }
    let found = batch::expand(&paths);
    let (inputs, missing) = (&found.inputs, &found.missing);
    let jobs = args.common.read.jobs();
    let opts = Options { format: args.common.read.format, max_line_bytes: args.common.read.max_line_bytes, strict: args.strict, jobs };
    let reports = check_all(inputs, &opts, jobs);
    let filter = args.common.filter.filter();
    let format = args.common.out.format();
    let paint = args.common.out.paint();

    let mut out = args.common.out.stdout();
    let unreadable = super::output::report_skipped(&mut out, &args.common.out, &found.skipped)?;
    super::output::warn_empty_dirs(&args.common.out, &found.empty_dirs);
    let mut count = Counts::default();
    for m in missing {
        let f = Finding::file(
            Kind::MissingTranscript,
            format!("meta sidecar {} exists but its transcript is missing: the session's data is gone", m.meta.display()),
        );
        if count.add(&filter, &f) {
            count.bad_files += 1;
            count.files += 1;
            write_finding(&mut out, format, paint, &m.transcript.display().to_string(), None, &f)?;
        }
    }
    let mut failed = 0u64;
    let mut stopped = 0u64;
    for r in &reports {
        if let Some(stop) = &r.stop {
            // --strict stopped at a line that cannot be read: that line is the file's one
            // finding, said on stderr (why the run exits 2), written as a record with -o json,
            // and counted as the error it is.
            stopped += 1;
            let f = Finding::new(stop.line, stop.kind, stop.message.clone());
            let name = r.input.display();
            count.found(&f);
            count.bad_files += 1;
            count.files += 1;
            count.last_bad = Some(r.input.clone());
            count.transcripts |= !matches!(r.format, Some(Format::Dataset(_)));
            if format == OutputFormat::Json {
                write_finding(&mut out, format, paint, &name, r.format, &f)?;
            }
            out.flush()?;
            eprintln!(
                "{}",
                super::style::stderr().at(
                    &name,
                    stop.line,
                    "error",
                    stop.kind.as_str(),
                    &format!("{} (--strict stops at the first line that cannot be read)", stop.message)
                )
            );
            continue;
        }
        if let Some(e) = &r.error {
            failed += 1;
            out.flush()?;
            super::style::error(e);
            continue;
        }
        let name = r.input.display();
        let mut file_errors = false;
        let mut file_findings = false;
        for f in &r.findings {
            if count.add(&filter, f) {
                file_errors |= f.severity == Severity::Error;
                file_findings = true;
                write_finding(&mut out, format, paint, &name, r.format, f)?;
            }
        }
        count.bad_files += u64::from(file_errors);
        count.files += u64::from(file_findings);
        if file_errors {
            count.last_bad = Some(r.input.clone());
            count.transcripts |= !matches!(r.format, Some(Format::Dataset(_)));
        }
    }
    out.flush()?;
    if args.common.out.summary() {
        // Every physical line that is not blank: read ones and those that could not be read.
        let lines: u64 = reports.iter().map(|r| r.stats.non_blank_lines()).sum();
        let bytes: u64 = reports.iter().map(|r| r.stats.bytes).sum();
        let secs = started.elapsed().as_secs_f64();
        let next = next_command(&count, &paths);
        let Counts { errors, warnings, files, hidden, .. } = count;
        eprintln!(
            "checked {} file{} ({} line{}, {}) in {secs:.2}s: {errors} error{}, {warnings} warning{} in {files} file{}{}{}{}{next}",
            reports.len(),
            plural(reports.len() as u64),
            lines,
            plural(lines),
            human_bytes(bytes),
            plural(errors),
            plural(warnings),
            plural(files),
            if hidden > 0 { format!(" ({hidden} more not shown: --severity/--kind)") } else { String::new() },
            if stopped > 0 { format!("; --strict stopped at a line that cannot be read in {stopped} file{}", plural(stopped)) } else { String::new() },
            if failed > 0 { format!("; {failed} could not be checked") } else { String::new() },
        );
        if !found.skipped.is_empty() {
            eprintln!("skipped {} path{} ({unreadable} could not be read)", found.skipped.len(), plural(found.skipped.len() as u64));
        }
    }
    let n = failed + unreadable as u64;
    match (n, stopped) {
        (0, 0) => {}
        (0, s) => anyhow::bail!("--strict: {s} file{} {} a line that cannot be read", plural(s), if s == 1 { "has" } else { "have" }),
        (n, 0) => anyhow::bail!("{n} input{} could not be checked", plural(n)),
        (n, s) => anyhow::bail!("{n} input{} could not be checked, and --strict stopped at a line that cannot be read in {s}", plural(n)),
    }
    Ok(if count.errors > 0 { Exit::Findings } else { Exit::Clean })
}

/// The findings reported, and those the filter left out.
#[derive(Debug, Default)]
struct Counts {
    errors: u64,
    warnings: u64,
    /// Files with an error finding reported (the next command repairs them).
    bad_files: u64,
    /// Files with any finding reported (what the summary's `in N files` counts).
    files: u64,
    hidden: u64,
    /// The last of them.
    last_bad: Option<Input>,
    /// Whether some of them is an agent's transcript (not a dataset).
    transcripts: bool,
}

/// What the summary says to run next when there are errors: the repair of the one file with
/// errors, or of the paths given; for agents' transcripts, with the agent quit (or `doctor
/// --fix` in the project's directory). Nothing for standard input (`repair -` writes the repair
/// to standard output: the user knows where it goes).
fn next_command(count: &Counts, paths: &[PathBuf]) -> String {
    let Some(last) = &count.last_bad else { return String::new() };
    let word = |p: &std::path::Path| crate::sessions::project::shell_word(&p.display().to_string());
    let target = match last {
        Input::File(p) if count.bad_files == 1 => word(p),
        Input::File(_) if paths.iter().all(|p| p.as_os_str() != "-") => paths.iter().map(|p| word(p)).collect::<Vec<_>>().join(" "),
        _ => return String::new(),
    };
    let agent = if count.transcripts { " (quit the agent first, or run `transcriptd doctor --fix` in its project's directory)" } else { "" };
    format!("; to fix: `transcriptd repair --in-place {}`{agent}", super::safe::Safe(target))
}

impl Counts {
    /// Counts `f`; whether the filter keeps it.
    fn add(&mut self, filter: &FindingFilter, f: &Finding) -> bool {
        if !filter.keeps_finding(f) {
            self.hidden += 1;
            return false;
        }
        self.found(f);
        true
    }

    /// Counts `f` by its severity (a --strict stop is counted so whatever the filter).
    fn found(&mut self, f: &Finding) {
        match f.severity {
            Severity::Error => self.errors += 1,
            Severity::Warning => self.warnings += 1,
        }
    }
}

/// A finding's words as text output shows them, after its kind.
struct Said<'a>(&'a Finding);

impl std::fmt::Display for Said<'_> {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let f = self.0;
        if let Some(m) = f.message_index {
            write!(out, "message {m}: ")?;
        }
        out.write_str(&f.message)?;
        if let Some(r) = &f.on_resume {
            write!(out, "; {r}")?;
        }
        if let Some(c) = &f.call_id {
            write!(out, " [{c}]")?;
        }
        Ok(())
    }
}

/// Writes one finding: a JSON record, or `path:line: severity: kind: message [call_id]` (a
/// dataset finding's message starts with the message it is about: `message 2: ...`).
pub fn write_finding(out: &mut impl Write, format: OutputFormat, paint: Paint, file: &str, fmt: Option<Format>, f: &Finding) -> anyhow::Result<()> {
    match format {
        OutputFormat::Json => {
            serde_json::to_writer(&mut *out, &FindingRecord::new(file, fmt, f)).context("writing output")?;
            out.write_all(b"\n")?;
        }
        // What `Paint::at` makes of `[message M: ]MESSAGE[; ON_RESUME][ [CALL]]`, written as it
        // goes (a file can have tens of thousands of findings).
        OutputFormat::Text => {
            let said = Said(f);
            if paint.on {
                let place = if f.line == 0 { format!("{file}:") } else { format!("{file}:{}:", f.line) };
                write!(out, "{} {}: ", paint.location(&place), paint.severity(f.severity.as_str()))?;
            } else if f.line == 0 {
                write!(out, "{}: {}: ", super::safe::Safe(file), f.severity.as_str())?;
            } else {
                write!(out, "{}:{}: {}: ", super::safe::Safe(file), f.line, f.severity.as_str())?;
            }
            writeln!(out, "{}: {}", f.kind.as_str(), super::safe::Safe(said))?;
        }
    }
    Ok(())
}
