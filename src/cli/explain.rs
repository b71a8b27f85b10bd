//! `transcriptd explain SESSION ERROR`: an API error as the user pasted it, traced to the line
//! of the session file behind it, the finding `check` reports there, and the command that
//! repairs it.
//!
//! The request position the error names (`messages.N.content.M`) is looked up in the request
//! the agent rebuilds from the file on resume (`context`'s records: [`super::context`]), its
//! block traced to the line it came from, and each call id it quotes to the lines that call and
//! answer it ([`crate::transcript::explain`]); the findings are `check`'s
//! ([`crate::batch_check::check_all`]).

use super::args::{OutputArgs, ReadArgs};
use super::output::FindingRecord;
use super::roots_or_default;
use super::safe::Safe;
use super::{Exit, OutputFormat};
use crate::batch_check::check_all;
use crate::sessions::find_by_prefix;
use crate::sessions::id::rollout_id;
use crate::sessions::project::{shell_word, Agent};
use crate::sources::batch::Input;
use crate::sources::reverse::{self, FileSource};
use crate::transcript::explain::{as_sent, block_at, id_lines, ApiError, At, Block, Line, Origin, Position};
use crate::transcript::{Finding, Format, Options, Severity};
use anyhow::Context as _;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Arguments of `transcriptd explain`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The session: its transcript file, or a prefix of its id (looked for under the standard
    /// locations, or under --root).
    pub session: String,
    /// The API error as the agent printed it (the whole "API Error: 400 {…}" line will do).
    /// `-` or nothing: read it from stdin.
    pub error: Option<String>,
    /// Where to look for a session named by id (repeatable; default: ~/.claude/projects and
    /// ~/.codex/sessions).
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<PathBuf>,
    /// How the transcript is read.
    #[command(flatten)]
    pub read: ReadArgs,
    /// How the answer is written (-o json: one JSON object).
    #[command(flatten)]
    pub out: OutputArgs,
}

/// What the error's position is in the rebuilt request.
struct Located {
    position: Position,
    /// `None`: the new turn or beyond the request.
    role: Option<String>,
    /// The block's type and call id, when the position names a block that is there.
    block: Option<(String, Option<String>)>,
    /// The message's blocks.
    blocks: usize,
    /// Where it comes from.
    origin: Vec<Origin>,
    new_turn: bool,
}

/// Where one quoted id is called and answered.
struct IdLines {
    id: String,
    calls: Vec<u64>,
    results: Vec<u64>,
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let file = resolve(&args)?;
    let name = file.display().to_string();
    let text = match args.error.as_deref() {
        Some(t) if t != "-" => t.to_owned(),
        _ => {
            let mut t = String::new();
            std::io::stdin().lock().read_to_string(&mut t).context("reading the error from stdin")?;
            t
        }
    };
    let error = ApiError::parse(&text);
    anyhow::ensure!(
        error.position.is_some() || !error.ids.is_empty() || error.rule.is_some(),
        "the error names no request position (messages.N), no call id (toolu_…, call_…) and no rule of the API transcriptd knows: paste the error as the agent printed it"
    );

    // What the agent sends on resume, and the file's lines.
    let f = crate::sources::regular::open_file(&file).with_context(|| format!("{name}: cannot open"))?;
    let scanned = super::rebuilt::scan(&mut FileSource::new(f)?, args.read.format, args.read.max_line_bytes, reverse::FIRST_PAGE)
        .with_context(|| format!("{name}: read failed"))?;
    let mut records = Vec::new();
    super::rebuilt::write(&scanned.context, false, &mut records).with_context(|| name.clone())?;
    let records: Vec<Value> = records.split(|&b| b == b'\n').filter(|r| !r.is_empty()).filter_map(|r| serde_json::from_slice(r).ok()).collect();
    // Claude Code sends consecutive messages of one role as one; an API history file is the
    // request as it is.
    let request = if scanned.context.format == Some(Format::ClaudeCode) { as_sent(records) } else { records };
    let bytes = std::fs::read(&file).with_context(|| format!("{name}: read failed"))?;
    let mut lines: Vec<Line<'_>> = Vec::new();
    let mut starts = Vec::new();
    let mut at = 0usize;
    for (i, l) in bytes.split(|&b| b == b'\n').enumerate() {
        if at < bytes.len() {
            lines.push((i as u64 + 1, l));
            starts.push(at as u64);
        }
        at += l.len() + 1;
    }
    let sent: BTreeSet<u64> = scanned.context.lines.iter().filter_map(|l| starts.binary_search(&l.offset).ok()).map(|i| i as u64 + 1).collect();
    let preferred = |n: u64| sent.contains(&n);

    // Claude Code and the API history formats count messages as their APIs do; Codex's errors
    // name ids.
    let counts_messages = matches!(scanned.context.format, Some(Format::ClaudeCode | Format::Anthropic | Format::OpenAiChat));
    let mut located = error.position.filter(|_| counts_messages).map(|position| locate(&request, position, &lines, &preferred));
    // An API history file is the request: its message N is its N-th message line.
    if let (Some(l), Some(Format::Anthropic | Format::OpenAiChat)) = (located.as_mut(), scanned.context.format) {
        let unreadable: BTreeSet<u64> = scanned.context.skipped.iter().map(|s| s.offset).collect();
        let nth =
            scanned.context.lines.iter().filter(|c| !unreadable.contains(&c.offset) && !c.bytes.iter().all(u8::is_ascii_whitespace)).nth(l.position.message);
        if let Some(n) = nth.and_then(|c| starts.binary_search(&c.offset).ok()) {
            l.origin = vec![Origin::Line(n as u64 + 1)];
        }
    }
    let mut ids = error.ids.clone();
    if let Some((_, Some(id))) = located.as_ref().and_then(|l| l.block.as_ref()) {
        if !ids.contains(id) {
            ids.insert(0, id.clone());
        }
    }
    let id_lines: Vec<IdLines> = ids
        .iter()
        .map(|id| {
            let (calls, results) = id_lines(id, &lines);
            IdLines { id: id.clone(), calls, results }
        })
        .collect();

    // The findings behind it: at the lines found, or about the ids; else of the rule's kinds.
    let opts = Options { format: args.read.format, max_line_bytes: args.read.max_line_bytes, strict: false, jobs: 1 };
    let report = check_all(&[Input::File(file.clone())], &opts, 1).pop().expect("one report");
    if let Some(e) = &report.error {
        anyhow::bail!("{name}: {e}");
    }
    let mut at_lines: BTreeSet<u64> = id_lines.iter().flat_map(|i| i.calls.iter().chain(&i.results).copied()).collect();
    if let Some(l) = &located {
        at_lines.extend(l.origin.iter().filter_map(|o| match o {
            Origin::Line(n) => Some(*n),
            _ => None,
        }));
    }
    let mut related: Vec<&Finding> =
        report.findings.iter().filter(|f| at_lines.contains(&f.line) || f.call_id.as_ref().is_some_and(|c| ids.contains(c))).collect();
    if related.is_empty() {
        if let Some(rule) = error.rule {
            related = report.findings.iter().filter(|f| rule.kinds().contains(&f.kind)).collect();
        }
    }
    let errors = report.findings.iter().filter(|f| f.severity == Severity::Error).count();
    // What repair mends: the errors, and the breaks the agent mends on resume (warnings, which
    // an older agent, or another program reading the file, may still send as they are).
    let to_mend = report.findings.iter().filter(|f| f.wants_repair()).count();
    let resume = resume_command(&file, &lines, scanned.context.format);
    let fix = (to_mend > 0).then(|| format!("transcriptd repair --in-place {}", shell_word(&name)));

    let mut out = args.out.stdout();
    match args.out.format() {
        OutputFormat::Json => {
            let record = json!({
                "file": name,
                "format": scanned.context.format,
                "error": {"position": error.position, "ids": error.ids, "rule": error.rule},
                "request_messages": request.len(),
                "at": located.as_ref().map(|l| located_json(l)),
                "ids": id_lines.iter().map(|i| json!({"id": i.id, "calls": i.calls, "results": i.results})).collect::<Vec<_>>(),
                "findings": related.iter().map(|f| FindingRecord::new(&name, report.format, f)).collect::<Vec<_>>(),
                "errors_in_file": errors,
                "fix": fix,
                "resume_command": resume,
            });
            serde_json::to_writer(&mut *out, &record)?;
            out.write_all(b"\n")?;
        }
        OutputFormat::Text => {
            let paint = args.out.paint();
            let rule = error.rule.map_or_else(String::new, |r| format!(" ({})", r.describe()));
            writeln!(out, "{}: the error{rule}", Safe(&name))?;
            if let Some(p) = error.position.filter(|_| !counts_messages) {
                writeln!(
                    out,
                    "  {}: this is a {} file, whose errors are traced by call id",
                    pos(p),
                    scanned.context.format.map_or("transcript", Format::as_str)
                )?;
            }
            if let Some(l) = &located {
                writeln!(out, "  {}", Safe(&located_text(l, request.len())))?;
                if let Some(id) = error.ids.iter().find(|id| !near(&request, l.position.message, id)) {
                    writeln!(out, "  {}", Safe(&format!("{id} is not in {} of the request this file gives, nor next to it: the agent sent another request (the file changed since the error, or the error is another session's)", pos(Position { block: None, ..l.position }))))?;
                }
            }
            for i in &id_lines {
                writeln!(out, "  {}", Safe(&id_text(i)))?;
            }
            for f in &related {
                writeln!(out, "  {}", paint.at(&name, f.line, f.severity.as_str(), f.kind.as_str(), &f.says()))?;
            }
            match (&fix, related.is_empty()) {
                (None, _) => writeln!(
                    out,
                    "  check finds no error in the file as it is now: it resumes (it may have been repaired or changed since the error, or the error is another session's)"
                )?,
                (Some(_), true) if errors > 0 => {
                    writeln!(out, "  no finding at those lines; check finds {errors} error{} elsewhere in the file", super::output::plural(errors as u64))?
                }
                (Some(_), true) => writeln!(
                    out,
                    "  no finding at those lines; check finds {to_mend} break{} elsewhere in the file that the agent mends on resume and repair mends in the file",
                    super::output::plural(to_mend as u64)
                )?,
                (Some(_), false) => {}
            }
            if let Some(fix) = &fix {
                writeln!(out, "  to fix: quit the agent, then `{}`", Safe(fix))?;
            }
            if let Some(r) = &resume {
                writeln!(out, "  then resume: {}", Safe(r))?;
            }
        }
    }
    out.flush()?;
    Ok(if to_mend > 0 { Exit::Findings } else { Exit::Clean })
}

/// The transcript `args.session` names: a file, or a session found by id prefix.
fn resolve(args: &Args) -> anyhow::Result<PathBuf> {
    let p = Path::new(&args.session);
    if p.exists() {
        anyhow::ensure!(!p.is_dir(), "{}: a directory; explain reads one session (a file, or an id prefix)", p.display());
        return Ok(p.to_path_buf());
    }
    if args.session.contains('/') {
        anyhow::bail!("{}: no such file", p.display());
    }
    let roots = roots_or_default(&args.roots)?;
    Ok(find_by_prefix(&roots, &args.session)?.transcript)
}

/// Whether call `id` is in message `n` of the request or in a message next to it (the API
/// names the call's message or the result's).
fn near(request: &[Value], n: usize, id: &str) -> bool {
    let quoted = format!("\"{id}\"");
    (n.saturating_sub(1)..=n + 1).filter_map(|i| request.get(i)).any(|m| m.to_string().contains(&quoted))
}

fn pos(p: Position) -> String {
    match p.block {
        Some(b) => format!("messages.{}.content.{b}", p.message),
        None => format!("messages.{}", p.message),
    }
}

fn locate(request: &[Value], position: Position, lines: &[Line<'_>], preferred: &dyn Fn(u64) -> bool) -> Located {
    let mut l = Located { position, role: None, block: None, blocks: 0, origin: Vec::new(), new_turn: false };
    match block_at(request, position) {
        At::Message { role, block, blocks } => {
            l.role = Some(role.to_owned());
            l.blocks = blocks;
            if let Some(b) = &block {
                l.block = Some((b.ty().to_owned(), b.call_id().map(str::to_owned)));
                l.origin.push(Origin::of(b, lines, preferred));
            } else if position.block.is_none() {
                // The whole message: where each of its blocks comes from.
                let m = &request[position.message];
                let all: Vec<Block<'_>> = match m.get("content") {
                    Some(Value::String(s)) => vec![Block::Text(s)],
                    Some(Value::Array(a)) => a.iter().map(Block::Value).collect(),
                    _ => Vec::new(),
                };
                for b in &all {
                    let o = Origin::of(b, lines, preferred);
                    if !l.origin.contains(&o) {
                        l.origin.push(o);
                    }
                }
            }
        }
        At::NewTurn => l.new_turn = true,
        At::Beyond => {}
    }
    l
}

/// Where blocks come from, in words: "from line 4", "from lines 4, 5", and what no line holds.
fn origins_text(origins: &[Origin]) -> String {
    let lines: Vec<String> = origins
        .iter()
        .filter_map(|o| match o {
            Origin::Line(n) => Some(n.to_string()),
            _ => None,
        })
        .collect();
    let mut parts = Vec::new();
    match lines.len() {
        0 => {}
        1 => parts.push(format!("from line {}", lines[0])),
        _ => parts.push(format!("from lines {}", lines.join(", "))),
    }
    for o in origins {
        match o {
            Origin::Line(_) => {}
            Origin::Agent(why) => parts.push(format!("not in the file: the agent makes it on resume ({why})")),
            Origin::Unknown => parts.push("in no line of the file".to_owned()),
        }
    }
    parts.join("; ")
}

fn located_text(l: &Located, messages: usize) -> String {
    let p = pos(l.position);
    if l.new_turn {
        return format!("{p}: the new prompt the agent adds after the {messages} messages of the history");
    }
    let Some(role) = &l.role else {
        return format!("{p}: the request this file gives has {messages} messages (and the new prompt): the error is not about the file as it is now");
    };
    let from = origins_text(&l.origin);
    match (&l.block, l.position.block) {
        (Some((ty, id)), _) => {
            let id = id.as_ref().map_or_else(String::new, |i| format!(" for {i}"));
            format!("{p}: the {ty} block{id} of a{} {role} message, {}", if role.starts_with('a') { "n" } else { "" }, from)
        }
        (None, Some(b)) => format!("{p}: the {role} message there has {} block{}, not {}", l.blocks, super::output::plural(l.blocks as u64), b + 1),
        (None, None) => format!(
            "{p}: a{} {role} message of {} block{}, {}",
            if role.starts_with('a') { "n" } else { "" },
            l.blocks,
            super::output::plural(l.blocks as u64),
            from
        ),
    }
}

fn located_json(l: &Located) -> Value {
    let origin: Vec<Value> = l
        .origin
        .iter()
        .map(|o| match o {
            Origin::Line(n) => json!({"line": n}),
            Origin::Agent(why) => json!({"made_by_agent": why}),
            Origin::Unknown => json!({"line": null}),
        })
        .collect();
    json!({
        "position": l.position,
        "new_turn": l.new_turn,
        "role": l.role,
        "type": l.block.as_ref().map(|b| &b.0),
        "call_id": l.block.as_ref().and_then(|b| b.1.as_ref()),
        "from": origin,
    })
}

fn id_text(i: &IdLines) -> String {
    let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    match (i.calls.is_empty(), i.results.is_empty()) {
        (true, true) => format!("{}: in no call or result of the file", i.id),
        (false, true) => format!("{}: called at line {}, answered nowhere in the file", i.id, list(&i.calls)),
        (true, false) => format!("{}: answered at line {}, called nowhere in the file", i.id, list(&i.results)),
        (false, false) => format!("{}: called at line {}, answered at line {}", i.id, list(&i.calls), list(&i.results)),
    }
}

/// The agent's own command that resumes the session, when the file says whose it is.
fn resume_command(file: &Path, lines: &[Line<'_>], format: Option<Format>) -> Option<String> {
    let stem = file.file_stem()?.to_str()?;
    match format? {
        Format::ClaudeCode => {
            let cwd = lines.iter().find_map(|(_, l)| crate::sessions::lines::top_level_string(l, "cwd"))?;
            // `claude --resume ID` opens `<project dir>/ID.jsonl`: the file's name is the id.
            Some(Agent::ClaudeCode.resume_command(Path::new(cwd.as_ref()), stem))
        }
        Format::Codex => Some(Agent::Codex.resume_command(Path::new(""), rollout_id(stem)?)),
        _ => None,
    }
}
