//! README.md and the reference under docs/ against the binary, so that they cannot drift apart
//! (each check runs over every page; a failure names the page and its line):
//!
//! - every `$ transcriptd …` example is run (through `sh`, in a scratch home and working
//!   directory laid out from the repository's fixtures: `~/.claude/projects`,
//!   `~/.codex/sessions`, `train.jsonl`, `session.jsonl`, `bad.toml`, `tests/`), and its output
//!   must be what the README shows: line for line, `…` standing for any text within a line (or,
//!   alone on a line, for any lines), timings (`in 0.21s`) and the scratch home (`/home/me`)
//!   aside;
//! - every other `transcriptd …` command in a code block or in the text parses with the real
//!   command line (placeholders such as `DIR` are taken as they are);
//! - the flags agree both ways: each flag of each verb is described in its section of the
//!   README (or among the common arguments), and each flag a README flag table names exists;
//! - the TOML shown is valid: the tool registry's shape, and configuration snippets;
//! - every relative link resolves (the file, and the heading an anchor names), and every page
//!   is reachable from README.md;
//! - the set-up: `transcriptd run` on built-in defaults starts in a fresh home and stops
//!   cleanly on SIGTERM (`cargo test --locked`, the other set-up command, is what runs this).

use super::support::{data, no_time, put, root};
use clap::{CommandFactory, Parser};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// README.md and the pages under docs/, in reading order (the order of the README they were
/// split from: the examples run in this order on one scratch machine).
const PAGES: &[&str] = &[
    "README.md",
    "docs/formats.md",
    "docs/findings.md",
    "docs/commands/README.md",
    "docs/commands/doctor.md",
    "docs/commands/explain.md",
    "docs/commands/check.md",
    "docs/commands/stats.md",
    "docs/commands/report.md",
    "docs/commands/context.md",
    "docs/commands/history.md",
    "docs/commands/orphans.md",
    "docs/commands/repair.md",
    "docs/daemon.md",
    "docs/metrics.md",
    "docs/commands/tap.md",
    "docs/commands/top.md",
    "docs/commands/usage.md",
    "docs/commands/sessions.md",
    "docs/commands/show.md",
    "docs/commands/restore.md",
    "docs/commands/hooks.md",
    "docs/commands/hooks-exec.md",
    "docs/deploy.md",
    "docs/install.md",
    "docs/development.md",
    "docs/requirements.md",
];

/// A page: its path from the repository's root, and its text.
struct Page {
    path: &'static str,
    text: String,
}

fn pages() -> Vec<Page> {
    PAGES.iter().map(|p| Page { path: p, text: std::fs::read_to_string(root().join(p)).unwrap_or_else(|e| panic!("{p}: {e}")) }).collect()
}

/// The page that holds `heading`, and its section there.
fn find_section<'a>(pages: &'a [Page], heading: &str) -> (&'static str, &'a str) {
    let hits: Vec<(&'static str, &str)> = pages.iter().filter(|p| has_heading(&p.text, heading)).map(|p| (p.path, section(&p.text, heading))).collect();
    match hits.as_slice() {
        [one] => *one,
        [] => panic!("no page has the heading {heading}"),
        many => panic!("the heading {heading} is on {} pages: {:?}", many.len(), many.iter().map(|h| h.0).collect::<Vec<_>>()),
    }
}

fn has_heading(text: &str, heading: &str) -> bool {
    text.lines().any(|l| l.starts_with(heading) && l.starts_with('#'))
}

/// A fenced code block: its language, the README line it starts on, its lines.
struct Block {
    lang: String,
    line: usize,
    lines: Vec<String>,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, l) in text.lines().enumerate() {
        match (&mut open, l.strip_prefix("```")) {
            (None, Some(lang)) => open = Some(Block { lang: lang.trim().to_owned(), line: i + 1, lines: Vec::new() }),
            (Some(_), Some(_)) => out.push(open.take().unwrap()),
            (Some(b), None) => b.lines.push(l.to_owned()),
            (None, None) => {}
        }
    }
    out
}

/// An example: `$ COMMAND` and the output shown under it.
struct Example {
    line: usize,
    command: String,
    output: Vec<String>,
}

fn examples(text: &str) -> Vec<Example> {
    let mut out: Vec<Example> = Vec::new();
    for b in blocks(text) {
        let mut current: Option<Example> = None;
        for (i, l) in b.lines.iter().enumerate() {
            if let Some(cmd) = l.strip_prefix("$ ") {
                out.extend(current.take());
                current = Some(Example { line: b.line + 1 + i, command: cmd.to_owned(), output: Vec::new() });
            } else if let Some(e) = current.as_mut() {
                e.output.push(l.clone());
            }
        }
        out.extend(current);
    }
    out
}

/// The scratch machine the examples run on.
struct Machine {
    _dir: tempfile::TempDir,
    home: PathBuf,
    cwd: PathBuf,
}

fn copy_tree(from: &Path, to: &Path) {
    for f in walkdir::WalkDir::new(from).into_iter().filter_map(Result::ok).filter(|e| e.file_type().is_file()) {
        put(&to.join(f.path().strip_prefix(from).unwrap()), std::fs::read(f.path()).unwrap());
    }
}

impl Machine {
    fn new() -> Machine {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let cwd = dir.path().join("work");
        let real = data("real");
        let claude = home.join(".claude/projects");
        copy_tree(&real.join("claude-code/codemie/-tmp-private"), &claude.join("-tmp-private"));
        copy_tree(
            &real.join("claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d"),
            &claude.join("-home-me-spotter/258c7280-ae70-4798-800f-63464d01a85d"),
        );
        put(
            &claude.join("-home-me-spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"),
            std::fs::read(real.join("claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.slice-L1168-L1863.jsonl")).unwrap(),
        );
        put(
            &claude.join("-w-app/0c6e3f4e-2a57-4b0e-9d7c-1e1c0d3f5a11.jsonl"),
            std::fs::read(real.join("claude-code/codemie/incremental-subagents/turn-1.jsonl")).unwrap(),
        );
        let codex = home.join(".codex/sessions/2026/02/23");
        for r in
            ["rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl", "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"]
        {
            put(&codex.join(r), std::fs::read(real.join("codex/localpush").join(r)).unwrap());
        }
        put(&cwd.join("train.jsonl"), std::fs::read(data("dataset/openai-dataset/0002_issue_example.jsonl")).unwrap());
        for f in ["session.jsonl", "bad.toml", "tools.toml"] {
            put(&cwd.join(f), std::fs::read(data("readme").join(f)).unwrap());
        }
        std::os::unix::fs::symlink(root().join("tests"), cwd.join("tests")).unwrap();
        Machine { _dir: dir, home, cwd }
    }

    /// Runs `command` with `sh`, `transcriptd` on the PATH: what it printed (stdout, then
    /// stderr), and its exit status.
    fn run(&self, command: &str) -> (String, Option<i32>) {
        let bin = Path::new(env!("CARGO_BIN_EXE_transcriptd")).parent().unwrap().to_path_buf();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let o = Command::new("sh")
            .args(["-c", command])
            .current_dir(&self.cwd)
            .env("HOME", &self.home)
            .env("PATH", path)
            .env_remove("NO_COLOR")
            .env_remove("TRANSCRIPTD_LOG")
            .env_remove("XDG_STATE_HOME")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        (text.replace(&self.home.display().to_string(), "/home/me").replace(&self.cwd.display().to_string(), "."), o.status.code())
    }
}

/// Whether `actual` is the line `shown`, each `…` standing for any text.
fn line_matches(shown: &str, actual: &str) -> bool {
    let (shown, actual) = (no_time(shown), no_time(actual));
    let pieces: Vec<&str> = shown.split('…').collect();
    if pieces.len() == 1 {
        return shown == actual;
    }
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if !actual.starts_with(first) || !actual[first.len()..].ends_with(last) || actual.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &actual[first.len()..actual.len() - last.len()];
    for p in &pieces[1..pieces.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

/// Whether the output shown matches what was printed, line for line (`…` alone on a line
/// stands for any lines, none included).
fn output_matches(shown: &[String], actual: &[&str]) -> bool {
    match shown.split_first() {
        None => actual.is_empty(),
        Some((s, rest)) if s.trim() == "…" => (0..=actual.len()).any(|skip| output_matches(rest, &actual[skip..])),
        Some((s, rest)) => actual.split_first().is_some_and(|(a, more)| line_matches(s, a) && output_matches(rest, more)),
    }
}

#[test]
fn every_example_prints_what_the_docs_show() {
    let m = Machine::new();
    let all: Vec<(&str, Example)> = pages().into_iter().flat_map(|p| examples(&p.text).into_iter().map(move |e| (p.path, e))).collect();
    assert!(all.len() >= 10, "{} examples", all.len());
    let mut failures = Vec::new();
    for (page, e) in &all {
        assert!(e.command.starts_with("transcriptd "), "{page}:{}: an example runs transcriptd", e.line);
        // `…` in a path is a glob there.
        let (printed, code) = m.run(&e.command.replace('…', "*"));
        let lines: Vec<&str> = printed.lines().collect();
        let usage_error = printed.contains("Usage: transcriptd");
        if usage_error || !output_matches(&e.output, &lines) {
            failures.push(format!("{page}:{}: $ {} (exit {code:?})\n--- shown\n{}\n--- printed\n{printed}", e.line, e.command, e.output.join("\n")));
        }
    }
    assert!(failures.is_empty(), "{} of {} examples differ:\n\n{}", failures.len(), all.len(), failures.join("\n\n"));
}

/// Splits a shell command line into words (quotes and backslashes as `sh` reads them; no
/// expansion).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut w = String::new();
    let (mut quote, mut any) = (None, false);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, ' ' | '\t') => {
                if any {
                    out.push(std::mem::take(&mut w));
                    any = false;
                }
            }
            (None, '\'' | '"') => (quote, any) = (Some(c), true),
            (Some(q), c) if c == q => quote = None,
            (None | Some('"'), '\\') => w.extend(chars.next()),
            (_, c) => {
                w.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(w);
    }
    out
}

/// Every `transcriptd …` command in the README other than the `$` examples: in code blocks
/// (a segment of a shell line whose first word is `transcriptd`), and in inline code that
/// is a whole command.
fn other_commands(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    for b in blocks(text) {
        if b.lang != "sh" {
            continue;
        }
        for (i, l) in b.lines.iter().enumerate() {
            let code = l.split(" #").next().unwrap().trim_end();
            for seg in code.split(['|', ';', '&']) {
                let seg = seg.trim().trim_start_matches("do ").trim();
                if seg.starts_with("transcriptd ") || seg == "transcriptd" {
                    // Up to a redirection.
                    let args: Vec<String> = words(&seg.replace("$i", "0")).into_iter().take_while(|w| !w.starts_with(['>', '<'])).collect();
                    out.push((b.line + 1 + i, args));
                }
            }
        }
    }
    for (i, l) in text.lines().enumerate() {
        if l.starts_with("```") || l.starts_with("$ ") || l.starts_with('#') {
            continue;
        }
        for span in l.split('`').skip(1).step_by(2) {
            // A whole command: a verb (not a placeholder such as VERB) and an argument.
            let w = words(span);
            let placeholder = w.get(1).is_some_and(|v| v.chars().all(|c| c.is_ascii_uppercase()));
            if span.starts_with("transcriptd ") && w.len() >= 3 && !placeholder && !span.contains(['[', '(', '|', '…', '<']) && !span.contains("...") {
                // `--shard I/N` in the text: shard 0 of 4.
                out.push((i + 1, w.into_iter().map(|x| if x == "I/N" { "0/4".to_owned() } else { x }).collect()));
            }
        }
    }
    out
}

#[test]
fn every_other_command_in_the_docs_parses() {
    let commands: Vec<(&str, usize, Vec<String>)> =
        pages().into_iter().flat_map(|p| other_commands(&p.text).into_iter().map(move |(line, args)| (p.path, line, args))).collect();
    assert!(commands.len() >= 15, "{} commands", commands.len());
    let mut failures = Vec::new();
    for (page, line, args) in &commands {
        if let Err(e) = transcriptd::cli::Cli::try_parse_from(args) {
            // `--help` and `--version` "fail" with their text: that is a parse that worked.
            if !matches!(e.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion) {
                failures.push(format!("{page}:{line}: {args:?}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A section of a page: from its heading to the next heading of the same or a higher level.
fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    let start = text
        .lines()
        .scan(0, |at, l| {
            let here = *at;
            *at += l.len() + 1;
            Some((here, l))
        })
        .find(|(_, l)| l.starts_with(heading))
        .map(|(at, _)| at)
        .unwrap_or_else(|| panic!("no heading {heading}"));
    let level = heading.chars().take_while(|c| *c == '#').count();
    let body = &text[start + heading.len()..];
    let mut end = body.len();
    let mut at = 0;
    for l in body.split_inclusive('\n') {
        let hashes = l.chars().take_while(|c| *c == '#').count();
        if at > 0 && hashes > 0 && hashes <= level && l.chars().nth(hashes) == Some(' ') {
            end = at;
            break;
        }
        at += l.len();
    }
    &body[..end]
}

/// The `--long` flags named in `text`.
fn flags_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = text.as_bytes();
    let mut i = 0;
    while let Some(j) = text[i..].find("--").map(|j| j + i) {
        let boundary = j == 0 || matches!(b[j - 1], b'`' | b' ' | b'(' | b',' | b'[');
        let end = text[j + 2..].find(|c: char| !(c.is_ascii_lowercase() || c == '-')).map_or(text.len(), |e| e + j + 2);
        if boundary && end > j + 2 {
            out.insert(text[j..end].trim_end_matches('-').to_owned());
        }
        i = end.max(j + 2);
    }
    out
}

/// Rows of the `| flag |` tables of a section.
fn flag_rows(section: &str) -> String {
    let mut out = String::new();
    let mut in_table = false;
    for l in section.lines() {
        if l.starts_with("| flag |") {
            in_table = true;
        } else if !l.starts_with('|') {
            in_table = false;
        } else if in_table {
            // The first cell: the flags themselves.
            out.push_str(l.split(" | ").next().unwrap_or(""));
            out.push('\n');
        }
    }
    out
}

/// Every verb a user runs, by its name (`sessions list` for a verb with verbs), with its clap
/// definition.
fn leaf_verbs(cli: &clap::Command) -> Vec<(String, clap::Command)> {
    let mut verbs = Vec::new();
    for c in cli.get_subcommands() {
        if c.has_subcommands() {
            verbs.extend(c.get_subcommands().map(|s| (format!("{} {}", c.get_name(), s.get_name()), s.clone())));
        } else {
            verbs.push((c.get_name().to_owned(), c.clone()));
        }
    }
    verbs
}

#[test]
fn docs_and_help_describe_the_same_flags() {
    let pages = pages();
    let cli = transcriptd::cli::Cli::command();
    let longs = |c: &clap::Command| -> BTreeSet<String> { c.get_arguments().filter_map(|a| a.get_long()).map(|l| format!("--{l}")).collect() };
    let (_, common_section) = find_section(&pages, "# Commands");
    let common_table = common_section.split("\n## ").next().unwrap();
    let common: BTreeSet<String> = flags_in(&flag_rows(common_table));
    let global = longs(&cli);
    let verbs = leaf_verbs(&cli);
    let mut problems = Vec::new();
    let mut everywhere = global.clone();
    for (name, c) in &verbs {
        let heading = match name.as_str() {
            "validate-config" => "## Configuration".to_owned(),
            "completions" | "man" => "## Shell completions and manual pages".to_owned(),
            _ => format!("# `transcriptd {name}"),
        };
        let (page, sec) = find_section(&pages, &heading);
        let described = flags_in(sec);
        let own = longs(c);
        everywhere.extend(own.iter().cloned());
        for f in own.iter().filter(|f| !["--help", "--version"].contains(&f.as_str())) {
            if !described.contains(f) && !common.contains(f) {
                problems.push(format!("{name}: {f} is in --help but not in {page}'s section {heading}"));
            }
        }
        for f in flags_in(&flag_rows(sec)) {
            if !own.contains(&f) && !global.contains(&f) {
                problems.push(format!("{name}: {page}'s flag table names {f}, which `transcriptd {name} --help` does not have"));
            }
        }
    }
    for f in &common {
        if !everywhere.contains(f) {
            problems.push(format!("the common arguments name {f}, which no verb has"));
        }
    }
    // The filter flags are where the common table says they are, and nowhere else.
    for (name, c) in &verbs {
        let has = longs(c).contains("--severity");
        let said = ["check", "orphans", "report", "run", "tap"].contains(&name.as_str());
        if has != said {
            problems.push(format!(
                "{name}: --severity {} but docs/commands/README.md's common arguments say {}",
                if has { "exists" } else { "is missing" },
                if said { "it has it" } else { "not" }
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_toml_in_the_docs_is_valid() {
    let tomls: Vec<(&str, Block)> =
        pages().into_iter().flat_map(|p| blocks(&p.text).into_iter().filter(|b| b.lang == "toml").map(move |b| (p.path, b))).collect();
    assert!(tomls.len() >= 2);
    for (page, b) in tomls {
        let body = b.lines.join("\n");
        if body.trim_start().starts_with("[tools]") {
            let r = transcriptd::config::tools::ToolRegistry::parse(&body, page).unwrap_or_else(|e| panic!("{page}:{}: {e}", b.line));
            assert!(!r.is_empty());
        } else {
            // A snippet of the daemon's configuration: with a source, it is valid.
            let whole = format!("[[sources]]\ninclude = [\"/x/*.jsonl\"]\n\n{body}\n");
            transcriptd::config::Config::check_text(&whole, page).unwrap_or_else(|e| panic!("{page}:{}: {e}", b.line));
        }
    }
}

#[test]
fn the_set_up_command_runs_on_a_fresh_machine() {
    // `cargo run --release -- run`: the daemon on its built-in defaults, in a home that has
    // never seen an agent.
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_transcriptd"));
    cmd.arg("run").env("HOME", home.path()).env_remove("XDG_STATE_HOME");
    let (code, log) = super::support::run_daemon_briefly(cmd);
    assert_eq!(code, Some(0), "{log}");
    assert!(home.path().join(".local/state/transcriptd").is_dir(), "checkpoints in the default state directory");
}

/// The relative links of a page outside code blocks (`[text](target)`): target and line.
fn links(text: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut fence = false;
    for (i, l) in text.lines().enumerate() {
        if l.starts_with("```") {
            fence = !fence;
        }
        if fence {
            continue;
        }
        for (at, _) in l.match_indices("](") {
            let rest = &l[at + 2..];
            if let Some(end) = rest.find(')') {
                let target = &rest[..end];
                if !target.contains("://") && !target.starts_with("mailto:") {
                    out.push((target.to_owned(), i + 1));
                }
            }
        }
    }
    out
}

/// A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim_start_matches('#')
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn every_link_in_the_docs_resolves_and_every_page_is_reachable() {
    let pages = pages();
    let mut problems = Vec::new();
    let mut reached: BTreeSet<PathBuf> = BTreeSet::from([PathBuf::from("README.md")]);
    let mut edges: Vec<(PathBuf, PathBuf)> = Vec::new();
    for p in &pages {
        let dir = Path::new(p.path).parent().unwrap();
        for (target, line) in links(&p.text) {
            let (file, anchor) = target.split_once('#').map_or((target.as_str(), None), |(f, a)| (f, Some(a)));
            let resolved = if file.is_empty() { PathBuf::from(p.path) } else { normalize(&dir.join(file)) };
            if !root().join(&resolved).exists() {
                problems.push(format!("{}:{line}: the link {target} names {}, which does not exist", p.path, resolved.display()));
                continue;
            }
            if let Some(a) = anchor {
                let text = std::fs::read_to_string(root().join(&resolved)).unwrap_or_default();
                let headings: BTreeSet<String> = text.lines().filter(|l| l.starts_with('#')).map(slug).collect();
                if !headings.contains(a) {
                    problems.push(format!("{}:{line}: the link {target}: {} has no heading #{a}", p.path, resolved.display()));
                }
            }
            edges.push((PathBuf::from(p.path), resolved));
        }
    }
    loop {
        let before = reached.len();
        for (from, to) in &edges {
            if reached.contains(from) {
                reached.insert(to.clone());
            }
        }
        if reached.len() == before {
            break;
        }
    }
    for p in PAGES {
        if !reached.contains(Path::new(p)) {
            problems.push(format!("{p}: no chain of links from README.md reaches it"));
        }
    }
    // Every page under docs/ is one of PAGES (so each is tested).
    for f in walkdir::WalkDir::new(root().join("docs")).into_iter().filter_map(Result::ok).filter(|e| e.path().extension().is_some_and(|x| x == "md")) {
        let rel = f.path().strip_prefix(root()).unwrap().display().to_string();
        if !PAGES.contains(&rel.as_str()) {
            problems.push(format!("{rel}: a page the docs tests do not read (add it to PAGES)"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `a/b/../c` as `a/c` (the paths are relative to the repository's root).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Every verb's `--help` ends with its exit status and examples (`src/cli/help.rs`, which the
/// manual pages render as EXIT STATUS and EXAMPLES): each example parses, and the codes are
/// those the verb's page under docs/ gives after "Exit status:" (where it gives them so).
#[test]
fn every_verb_says_its_exit_status_and_examples_as_its_page_does() {
    let pages = pages();
    let cli = transcriptd::cli::Cli::command();
    let mut verbs: Vec<(String, clap::Command)> = vec![("transcriptd".to_owned(), cli.clone())];
    verbs.extend(leaf_verbs(&cli));
    let mut problems = Vec::new();
    for (name, c) in &verbs {
        let Some(after) = c.get_after_long_help().map(|h| h.to_string()) else {
            problems.push(format!("{name}: --help says no exit status nor examples"));
            continue;
        };
        let (codes, examples) = transcriptd::cli::help::sections(&after);
        if codes.is_empty() || examples.is_empty() || codes.iter().any(|(c, _)| *c > 2) {
            problems.push(format!("{name}: exit status {codes:?}, examples {examples:?}"));
        }
        for e in &examples {
            // The transcriptd part of a shell line (`... && echo clean`, `| man -l -`, `> FILE`).
            let seg = e.split(['|', '&', '>', ';']).next().unwrap().trim();
            let args = words(seg);
            if let Err(err) = transcriptd::cli::Cli::try_parse_from(&args) {
                if !matches!(err.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion) {
                    problems.push(format!("{name}: the example `{e}` does not parse: {err}"));
                }
            }
            if name != "transcriptd" && !seg.starts_with(&format!("transcriptd {name}")) {
                problems.push(format!("{name}: the example `{e}` runs another verb"));
            }
        }
        // The page's own words: every **N** of its "Exit status:" paragraph is a code --help
        // gives, and the other way round.
        let heading = if name == "run" { "# `transcriptd run".to_owned() } else { format!("# `transcriptd {name}") };
        let Some(page) = pages.iter().find(|p| has_heading(&p.text, &heading)) else { continue };
        let Some(at) = page.text.find("Exit status:") else { continue };
        let paragraph = page.text[at..].split("\n\n").next().unwrap();
        let said: BTreeSet<u8> = (0..=2).filter(|n| paragraph.contains(&format!("**{n}**"))).collect();
        let given: BTreeSet<u8> = codes.iter().map(|(c, _)| *c).collect();
        if said != given {
            problems.push(format!("{name}: {} says exit codes {said:?}, --help {given:?}", page.path));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
