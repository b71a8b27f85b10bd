//! `transcriptd report`: the page in a real browser (headless Chromium) against what `check
//! --output json`, `history` and `repair` say of the same files; hostile names; the JSON
//! against `check` on generated archives; determinism; the repair plan; the progress bar; a DOM
//! that does not grow with the archive.

use super::support::browser::Chromium;
use super::support::{data, root, stdout, transcriptd};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use transcriptd::config::tools::ToolRegistry;
use transcriptd::sessions::Timestamp;

/// A fixed "generated" time, so that the page is the same bytes for the same input.
const EPOCH: &str = "1767225600";

fn report_cmd(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_transcriptd")).current_dir(dir).env("SOURCE_DATE_EPOCH", EPOCH).args(args).output().expect("run transcriptd")
}

fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The finding records of `check --output json` (skip records left out).
fn check_findings(dir: &Path, path: &str) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_transcriptd")).current_dir(dir).args(["check", path, "-o", "json", "--no-summary"]).output().unwrap();
    json_lines(&out.stdout).into_iter().filter(|r| r.get("skipped").is_none()).collect()
}

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

fn format_of(f: &Value) -> String {
    f.get("format").and_then(Value::as_str).unwrap_or("undetected").to_owned()
}

/// Counts of the findings of `check`, keyed by `key`.
fn count_by(findings: &[Value], key: impl Fn(&Value) -> Option<(String, String)>) -> BTreeMap<(String, String), u64> {
    let mut m = BTreeMap::new();
    for f in findings {
        if let Some(k) = key(f) {
            *m.entry(k).or_default() += 1;
        }
    }
    m
}

/// The numbers of one chart as the browser sees them: (key, series) → value.
fn chart(c: &mut Chromium, name: &str) -> BTreeMap<(String, String), u64> {
    let v = c.eval(&format!(
        "Array.from(document.querySelectorAll('[data-chart=\"{name}\"]')).map(e => [e.dataset.key, e.dataset.series, Number(e.dataset.value)])"
    ));
    let mut m = BTreeMap::new();
    for e in v.as_array().unwrap() {
        let prev = m.insert((s(&e[0]), s(&e[1])), e[2].as_u64().unwrap());
        assert!(prev.is_none(), "{name}: {e} drawn twice");
    }
    m
}

/// The session date the test finds on its own: the first `timestamp` among the first 64 lines
/// (within 64 KiB), else a Codex rollout's name.
fn session_date(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).unwrap();
    let head = &bytes[..bytes.len().min(64 << 10)];
    let complete = &head[..head.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1)];
    for line in complete.split(|b| *b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace)).take(64) {
        if let Ok(v) = serde_json::from_slice::<Value>(line) {
            if let Some(t) = v.get("timestamp").and_then(Value::as_str).and_then(Timestamp::parse_rfc3339) {
                return Some(t.to_rfc3339()[..10].to_owned());
            }
        }
    }
    let name = path.file_name()?.to_str()?;
    name.strip_prefix("rollout-").map(|r| r[..10].to_owned())
}

fn period(date: &str, granularity: &str) -> String {
    match granularity {
        "day" => date[..10].to_owned(),
        "month" => date[..7].to_owned(),
        _ => date[..4].to_owned(),
    }
}

/// Compactions per file as `history` marks them.
fn history_compactions(dir: &Path, file: &str) -> u64 {
    let out = Command::new(env!("CARGO_BIN_EXE_transcriptd")).current_dir(dir).args(["history", file]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with("{\"type\":\"compact_boundary\"")).count() as u64
}

fn bucket(n: u64) -> &'static str {
    match n {
        0 => "0",
        1 => "1",
        2 => "2",
        3..=5 => "3-5",
        6..=10 => "6-10",
        _ => "over 10",
    }
}

/// Where the tests keep the page and its screenshot.
fn artifacts() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report");
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn page_of_the_real_fixtures_in_chromium_has_checks_numbers() {
    let repo = root();
    let html = artifacts().join("report.html");
    let out = report_cmd(&repo, &["report", "tests/data/real", "--plan", "--html", html.to_str().unwrap(), "-o", "json", "--no-summary"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings = check_findings(&repo, "tests/data/real");
    assert!(findings.len() > 10, "the fixtures have findings");

    let mut c = Chromium::start();
    c.navigate(&format!("file://{}", html.display()));
    assert_eq!(c.problems(), Vec::<String>::new(), "the page logs no error");
    assert_eq!(c.eval("document.title"), "Transcript audit — transcriptd report");
    // Self-contained: nothing but the document was loaded.
    let loaded = c.eval("performance.getEntriesByType('resource').map(e => e.name)");
    assert_eq!(loaded, serde_json::json!([]), "no resource loaded");
    assert_eq!(c.eval("document.scripts.length"), 0);

    // Findings by severity and by kind.
    let by_severity = count_by(&findings, |f| Some((s(&f["severity"]), s(&f["severity"]))));
    assert_eq!(chart(&mut c, "severity"), by_severity);
    let by_kind = count_by(&findings, |f| Some((s(&f["kind"]), s(&f["severity"]))));
    assert_eq!(chart(&mut c, "kinds"), by_kind);
    let by_kind_format = count_by(&findings, |f| Some((s(&f["kind"]), format_of(f))));
    assert_eq!(chart(&mut c, "kind-format"), by_kind_format);

    // Over time: each finding under its file's session date, found here on our own.
    let granularity = s(&json["over_time"]["granularity"]);
    let dates: BTreeMap<String, Option<String>> = findings.iter().map(|f| s(&f["file"])).map(|f| (f.clone(), session_date(&repo.join(&f)))).collect();
    let over_time = count_by(&findings, |f| dates[&s(&f["file"])].as_ref().map(|d| (period(d, &granularity), s(&f["severity"]))));
    assert_eq!(chart(&mut c, "over-time"), over_time);
    let undated: u64 = findings.iter().filter(|f| dates[&s(&f["file"])].is_none()).count() as u64;
    assert_eq!(json["over_time"]["undated"]["errors"].as_u64().unwrap() + json["over_time"]["undated"]["warnings"].as_u64().unwrap(), undated);

    // Calls left without results, by tool and by the registry's side effect.
    let registry = ToolRegistry::builtin();
    let no_result = |f: &Value| matches!(f["kind"].as_str(), Some("orphan_call" | "unanswered_call"));
    let by_tool = count_by(&findings, |f| no_result(f).then(|| (s(&f["tool"]), s(&f["kind"]))));
    assert_eq!(chart(&mut c, "calls-by-tool"), by_tool);
    let by_effect = count_by(&findings, |f| no_result(f).then(|| (registry.side_effect(&s(&f["tool"])).as_str().to_owned(), s(&f["kind"]))));
    assert_eq!(chart(&mut c, "calls-by-side-effect"), by_effect);
    assert!(!by_effect.is_empty());

    // Compactions per transcript, as `history` marks them.
    let files = super::support::jsonl_files(&data("real"));
    let mut histogram: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut total = 0;
    for f in &files {
        let rel = f.strip_prefix(&repo).unwrap().to_str().unwrap();
        let n = history_compactions(&repo, rel);
        total += n;
        *histogram.entry((bucket(n).to_owned(), "files".to_owned())).or_default() += 1;
    }
    assert!(total > 0, "the fixtures have compactions");
    assert_eq!(chart(&mut c, "compactions"), histogram);
    assert_eq!(json["compactions"]["total"], total);
    assert_eq!(json["totals"]["files"], files.len());

    // Tokens by model: the table holds what `usage` counts, and the chart's periods add up to
    // it (the models past the chart's eight summed as `(other)`).
    let usage = Command::new(env!("CARGO_BIN_EXE_transcriptd")).current_dir(&repo).args(["usage", "tests/data/real", "-o", "json"]).output().unwrap();
    let usage: BTreeMap<String, u64> = json_lines(&usage.stdout).iter().map(|r| (s(&r["model"]), r["total_tokens"].as_u64().unwrap())).collect();
    assert!(usage.len() > 8, "the fixtures have more models than the chart has colours");
    let table = c.eval("Array.from(document.querySelectorAll('#tokens table tr')).slice(1).map(r => [r.cells[0].textContent, Number(r.cells[5].textContent.replace(/,/g, ''))])");
    let table: BTreeMap<String, u64> = table.as_array().unwrap().iter().map(|r| (s(&r[0]), r[1].as_u64().unwrap())).collect();
    assert_eq!(table, usage);
    let charted: Vec<String> = json["tokens"]["chart_models"].as_array().unwrap().iter().map(s).collect();
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for (model, n) in &usage {
        let series = if charted.contains(model) { model.clone() } else { "(other)".to_owned() };
        *expected.entry(series).or_default() += n;
    }
    let mut drawn: BTreeMap<String, u64> = BTreeMap::new();
    for ((_, model), n) in chart(&mut c, "tokens-over-time") {
        *drawn.entry(model).or_default() += n;
    }
    assert_eq!(json["tokens"]["undated"]["input"], 0, "every session with tokens is dated");
    assert_eq!(drawn, expected);

    // The worst sessions are the files with the most errors in `check`'s output.
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    for f in findings.iter().filter(|f| f["severity"] == "error") {
        *errors.entry(s(&f["file"])).or_default() += 1;
    }
    let mut worst: Vec<(String, u64)> = errors.into_iter().collect();
    worst.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    worst.truncate(20);
    let table = c.eval("Array.from(document.querySelectorAll('#worst table')[0].querySelectorAll('tr.session')).map(r => [r.cells[0].querySelector('code').title, Number(r.cells[3].textContent.replace(/,/g, ''))])");
    let table: Vec<(String, u64)> = table.as_array().unwrap().iter().map(|r| (s(&r[0]), r[1].as_u64().unwrap())).collect();
    assert_eq!(table, worst);

    // Each command the page gives opens its transcript's session.
    let commands = c.eval("Array.from(document.querySelectorAll('#worst code.cmd, #compactions code.cmd')).map(e => e.textContent)");
    let commands: Vec<String> = commands.as_array().unwrap().iter().map(s).collect();
    assert!(commands.iter().any(|c| c.starts_with("transcriptd show ")) && commands.iter().any(|c| c.starts_with("transcriptd history ")));
    for cmd in &commands {
        let line = cmd.replacen("transcriptd", env!("CARGO_BIN_EXE_transcriptd"), 1);
        let out = Command::new("sh").arg("-c").arg(&line).output().unwrap();
        assert!(matches!(out.status.code(), Some(0 | 1)), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(!out.stdout.is_empty(), "{cmd} printed nothing");
    }

    // The plan: what `repair --out` does to the same files.
    let tmp = tempfile::tempdir().unwrap();
    let repaired = Command::new(env!("CARGO_BIN_EXE_transcriptd"))
        .current_dir(&repo)
        .args(["repair", "tests/data/real", "--out", tmp.path().join("out").to_str().unwrap(), "--min-idle", "0s", "-o", "json", "--no-summary"])
        .output()
        .unwrap();
    let reports = json_lines(&repaired.stdout);
    let sum = |k: &str| reports.iter().map(|r| r["lines"][k].as_u64().unwrap()).sum::<u64>();
    let plan = chart(&mut c, "plan");
    for k in ["inserted", "removed", "modified"] {
        assert_eq!(plan.get(&(k.to_owned(), "lines".to_owned())).copied().unwrap_or(0), sum(k), "{k}");
        assert_eq!(json["plan"][k], sum(k), "{k}");
    }
    assert!(sum("inserted") + sum("removed") > 0, "the fixtures need repairs");
    let status = |st: &str| reports.iter().filter(|r| r["status"] == st).count();
    assert_eq!(json["plan"]["repaired"], status("repaired"));
    assert_eq!(json["plan"]["partial"], status("partial"));
    assert_eq!(json["plan"]["clean"], status("clean"));
    let unrepaired: u64 = reports.iter().map(|r| r.get("unrepaired").and_then(Value::as_array).map_or(0, |u| u.len() as u64)).sum();
    assert_eq!(json["plan"]["unrepairable"].as_array().unwrap().iter().map(|k| k["count"].as_u64().unwrap()).sum::<u64>(), unrepaired);

    // The JSON is what the page shows.
    assert_eq!(json["severity"]["error"], by_severity.get(&("error".into(), "error".into())).copied().unwrap_or(0));
    assert_eq!(json["totals"]["lines"], c.eval("Number(document.querySelectorAll('#totals .card b')[1].textContent.replace(/,/g, ''))"));

    let shot = artifacts().join("report.png");
    c.screenshot(&shot);
    let committed = repo.join("tests/artifacts/report.png");
    if std::env::var_os("UPDATE_EXPECT").is_some() || !committed.exists() {
        std::fs::create_dir_all(committed.parent().unwrap()).unwrap();
        std::fs::copy(&shot, &committed).unwrap();
    }
}

/// A Claude Code session whose tool name, model name, file name and directory are markup.
#[test]
fn hostile_names_stay_text() {
    let tool = "</script><script>alert(1)</script>";
    let model = "\"><img src=x onerror=alert(2)>";
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("x\" onmouseover=\"alert(4)");
    let file = dir.join("<img src=x onerror=alert(3)>.jsonl");
    let user = serde_json::json!({"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","timestamp":"2026-01-02T03:04:05Z","message":{"role":"user","content":"hi"}});
    let assistant = serde_json::json!({"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"s","timestamp":"2026-01-02T03:04:06Z",
        "message":{"id":"msg_1","type":"message","role":"assistant","model":model,"content":[{"type":"tool_use","id":"toolu_1","name":tool,"input":{}}],
        "usage":{"input_tokens":5,"output_tokens":7}}});
    super::support::put(&file, format!("{user}\n{assistant}\n"));
    let findings = check_findings(tmp.path(), dir.to_str().unwrap());
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0]["tool"], tool);

    let html = tmp.path().join("report.html");
    let out = report_cmd(tmp.path(), &["report", dir.to_str().unwrap(), "--html", html.to_str().unwrap(), "-o", "json", "--no-summary"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    for raw in ["<script", "<img", "onmouseover=\"alert"] {
        assert!(!page.contains(raw), "{raw} is in the page as markup");
    }
    let mut c = Chromium::start();
    c.navigate(&format!("file://{}", html.display()));
    assert_eq!(c.problems(), Vec::<String>::new());
    assert_eq!(c.eval("document.querySelectorAll('script, img, iframe, object, embed, [onerror], [onload], [onmouseover]').length"), 0);
    let text = c.eval("document.body.textContent");
    let text = text.as_str().unwrap();
    for literal in [tool, model, "<img src=x onerror=alert(3)>.jsonl"] {
        assert!(text.contains(literal), "{literal} is not shown as text");
    }
    assert_eq!(chart(&mut c, "calls-by-tool"), BTreeMap::from([((tool.to_owned(), "orphan_call".to_owned()), 1)]));
    // The command given for it is one shell word per argument, whatever the name holds.
    let cmd = c.eval("document.querySelector('#worst code.cmd').textContent");
    let line = s(&cmd).replacen("transcriptd", env!("CARGO_BIN_EXE_transcriptd"), 1);
    let run = Command::new("sh").arg("-c").arg(&line).output().unwrap();
    assert_eq!(run.status.code(), Some(0), "{line}: {}", String::from_utf8_lossy(&run.stderr));
    assert!(String::from_utf8_lossy(&run.stdout).contains("toolu_1"));
}

/// Generates an archive of `sessions` sessions with faults and compactions under `dir`.
fn archive(dir: &Path, sessions: &str, lines: &str, seed: &str) {
    let status = Command::new("python3")
        .arg(super::support::generator("gen_transcripts.py"))
        .args([
            "--sessions",
            sessions,
            "--lines",
            lines,
            "--seed",
            seed,
            "--faults",
            "0.01",
            "--truncate-last",
            "0.1",
            "--compact-boundary",
            "0.05",
            "--out-dir",
        ])
        .arg(dir)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn json_has_checks_numbers_on_a_generated_archive_whatever_the_jobs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    archive(&dir, "60", "6000", "report");
    // A meta sidecar without its transcript, and a dangling link: `check` reports both.
    super::support::put(&dir.join("lost.meta.json"), "{}");
    std::os::unix::fs::symlink(dir.join("gone.jsonl"), dir.join("dangling.jsonl")).unwrap();
    let d = dir.to_str().unwrap();
    let one = report_cmd(tmp.path(), &["report", d, "-o", "json", "--no-summary", "-j", "1"]);
    let two = report_cmd(tmp.path(), &["report", d, "-o", "json", "--no-summary", "-j", "2"]);
    assert_eq!(one.status.code(), Some(2), "a path that cannot be read: exit 2 as check");
    assert_eq!(stdout(&one), stdout(&two), "the same report whatever the thread count");
    let json: Value = serde_json::from_slice(&one.stdout).unwrap();
    let findings = check_findings(tmp.path(), d);

    let count = |sev: &str| findings.iter().filter(|f| f["severity"] == sev).count() as u64;
    assert_eq!(json["totals"]["errors"], count("error"));
    assert_eq!(json["totals"]["warnings"], count("warning"));
    assert_eq!(json["totals"]["missing_transcripts"], 1);
    assert_eq!(json["totals"]["skipped_paths"], 1);
    assert_eq!(json["skipped"][0]["skipped"], "dangling_symlink");
    assert_eq!(json["totals"]["files"], 60);
    let mut kinds: BTreeMap<(String, String), u64> = BTreeMap::new();
    for k in json["kinds"].as_array().unwrap() {
        for (format, n) in k["by_format"].as_object().unwrap() {
            kinds.insert((s(&k["kind"]), format.clone()), n.as_u64().unwrap());
        }
    }
    assert_eq!(kinds, count_by(&findings, |f| Some((s(&f["kind"]), format_of(f)))));
    // Lines and files as `check` counts them.
    let check = Command::new(env!("CARGO_BIN_EXE_transcriptd")).args(["check", d]).output().unwrap();
    let summary = String::from_utf8_lossy(&check.stderr);
    assert!(summary.contains(&format!("checked 60 files ({} lines", json["totals"]["lines"])), "{summary}");
    // Calls without results: every orphan and unanswered call of `check`.
    let calls = findings.iter().filter(|f| matches!(f["kind"].as_str(), Some("orphan_call" | "unanswered_call"))).count() as u64;
    assert!(calls > 0);
    assert_eq!(json["calls_without_results"]["total"], calls);
    // The worst list is ordered by errors, then path.
    let worst = json["worst"]["by_calls_without_results"].as_array().unwrap();
    assert_eq!(worst.len(), 20);
    for w in worst.windows(2) {
        let key = |r: &Value| (std::cmp::Reverse(r["calls_without_results"].as_u64().unwrap()), s(&r["file"]));
        assert!(key(&w[0]) < key(&w[1]));
    }
    // The generator spreads sessions over months, each with its first timestamp.
    assert_eq!(json["over_time"]["granularity"], "month");
    assert_eq!(json["over_time"]["dated_by"]["transcript"], 60);
    let by_period: u64 = json["over_time"]["periods"].as_array().unwrap().iter().map(|p| p["sessions"].as_u64().unwrap()).sum();
    assert_eq!(by_period, 60);
}

#[test]
fn plan_changes_nothing_and_leaves_no_scratch() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("real");
    for f in super::support::jsonl_files(&data("real")) {
        let rel = f.strip_prefix(data("real")).unwrap();
        super::support::put(&dir.join(rel), std::fs::read(&f).unwrap());
    }
    let before: Vec<(PathBuf, Vec<u8>)> = super::support::jsonl_files(&dir).into_iter().map(|f| (f.clone(), std::fs::read(&f).unwrap())).collect();
    let scratch = tmp.path().join("tmp");
    std::fs::create_dir(&scratch).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_transcriptd"))
        .env("TMPDIR", &scratch)
        .args(["report", dir.to_str().unwrap(), "--plan", "-o", "json", "--no-summary"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(json["plan"]["inserted"].as_u64().unwrap() > 0);
    let after: Vec<(PathBuf, Vec<u8>)> = super::support::jsonl_files(&dir).into_iter().map(|f| (f.clone(), std::fs::read(&f).unwrap())).collect();
    assert!(before == after, "--plan changed the inputs");
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0, "the scratch directory is removed");
}

#[test]
fn progress_bar_only_on_a_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    archive(&dir, "40", "2000", "bar");
    let bin = env!("CARGO_BIN_EXE_transcriptd");
    // `script` gives the command a terminal (its stdout and stderr).
    let on_tty = Command::new("script")
        .args(["-qec", &format!("{bin} report {} -o json -j 1", dir.display()), "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(on_tty.status.success());
    let screen = String::from_utf8_lossy(&on_tty.stdout);
    assert!(screen.contains("reporting [") && screen.contains("files"), "no progress bar on a terminal: {screen}");
    let piped = transcriptd(&["report", dir.to_str().unwrap(), "-o", "json", "-j", "1"]);
    assert!(!String::from_utf8_lossy(&piped.stderr).contains("reporting ["), "a progress bar without a terminal");
}

#[test]
fn page_size_does_not_grow_with_the_archive() {
    let tmp = tempfile::tempdir().unwrap();
    let mut pages = Vec::new();
    let mut c = Chromium::start();
    for (n, lines) in [("600", "30000"), ("3000", "150000")] {
        let dir = tmp.path().join(n);
        archive(&dir, n, lines, "size");
        let html = tmp.path().join(format!("{n}.html"));
        let out = report_cmd(tmp.path(), &["report", dir.to_str().unwrap(), "--html", html.to_str().unwrap(), "-o", "json", "--no-summary"]);
        assert!(out.status.success());
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        c.navigate(&format!("file://{}", html.display()));
        assert_eq!(c.problems(), Vec::<String>::new());
        let elements = c.eval("document.getElementsByTagName('*').length").as_u64().unwrap();
        pages.push((json, elements, std::fs::metadata(&html).unwrap().len()));
    }
    let ((small, small_n, small_bytes), (large, large_n, large_bytes)) = (&pages[0], &pages[1]);
    // The small archive already has every tool, model, month and top-list row the generator
    // makes: what is left to grow is the number of files.
    for key in [
        "/calls_without_results/tools",
        "/tokens/by_model",
        "/over_time/periods",
        "/worst/by_errors",
        "/worst/by_calls_without_results",
        "/compactions/top",
        "/kinds",
    ] {
        let len = |v: &Value| v.pointer(key).map(|x| x.as_array().map_or_else(|| x.as_u64().unwrap(), |a| a.len() as u64)).unwrap();
        assert_eq!(len(small), len(large), "{key}");
    }
    assert_eq!(small["worst"]["by_errors"].as_array().unwrap().len(), 20);
    assert!(large_n <= &(small_n + small_n / 20), "{small_n} elements for 600 sessions, {large_n} for 3000");
    assert!(large_bytes <= &(small_bytes + small_bytes / 20), "{small_bytes} bytes for 600 sessions, {large_bytes} for 3000");
}

/// How long a page takes to open in headless Chromium (for BENCHMARKS.md, not a test target):
/// `REPORT_PAGE=FILE cargo test --test integration report_page_load -- --ignored --nocapture`.
/// Each of five loads is a fresh navigation; timings are the browser's navigation timing.
#[test]
#[ignore = "a measurement: run by benches/report.sh"]
fn report_page_load() {
    let page = std::env::var("REPORT_PAGE").expect("REPORT_PAGE names the page to load");
    let page = std::fs::canonicalize(page).unwrap();
    let mut c = Chromium::start();
    for round in 1..=5 {
        c.navigate("about:blank");
        c.navigate(&format!("file://{}", page.display()));
        assert_eq!(c.problems(), Vec::<String>::new());
        let t = c.eval(
            "(() => { const n = performance.getEntriesByType('navigation')[0]; \
              const p = performance.getEntriesByName('first-contentful-paint')[0]; \
              return { dom_content_loaded_ms: n.domContentLoadedEventEnd, load_ms: n.loadEventEnd, \
                       first_contentful_paint_ms: p ? p.startTime : null, \
                       elements: document.getElementsByTagName('*').length, bytes: n.decodedBodySize }; })()",
        );
        println!("round {round}: {t}");
    }
}

/// The report's cost by model is `usage`'s for the same files (one pricing for both), a model
/// without a price has a null cost and is named, and the total is the priced models' sum.
#[test]
fn cost_by_model_is_usages() {
    let repo = super::support::root();
    for dir in ["tests/data/real/claude-code", "tests/data/check/claude-code"] {
        let out = report_cmd(&repo, &["report", dir, "-o", "json", "--no-summary"]);
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        let usage = Command::new(env!("CARGO_BIN_EXE_transcriptd")).current_dir(&repo).args(["usage", dir, "-o", "json"]).output().unwrap();
        let want: BTreeMap<String, Option<f64>> = json_lines(&usage.stdout).iter().map(|r| (s(&r["model"]), r["cost_usd"].as_f64())).collect();
        let got: BTreeMap<String, Option<f64>> =
            json["tokens"]["by_model"].as_array().unwrap().iter().map(|m| (s(&m["model"]), m["cost_usd"].as_f64())).collect();
        assert_eq!(got, want, "{dir}");
        let unpriced: Vec<String> = want.iter().filter(|(_, c)| c.is_none()).map(|(m, _)| m.clone()).collect();
        let mut named: Vec<String> = json["tokens"]["unpriced_models"].as_array().unwrap().iter().map(s).collect();
        named.sort();
        assert_eq!(named, unpriced, "{dir}");
        let sum: f64 = want.values().flatten().sum();
        assert!((json["tokens"]["cost_usd"].as_f64().unwrap() - sum).abs() < 1e-9, "{dir}: {}", json["tokens"]["cost_usd"]);
    }
    let text = String::from_utf8(report_cmd(&repo, &["report", "tests/data/check/claude-code", "--no-summary"]).stdout).unwrap();
    assert!(text.contains("tokens       claude-x: 248 (93 in, 155 out, 0 cache read, 0 cache write), cost unknown"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("cost         $0.0") && l.ends_with("(cost unknown for 3 models: claude-x, claude-b, claude-a)")), "{text}");
}

/// What the browser measures of the page's layout, as one object of lists of problems (each
/// empty when the layout holds) and the figures they come from.
const LAYOUT_PROBE: &str = r#"(() => {
  const out = { paths: [], commands: [], tables: [], bars: [], cards: [], ticks: [], scale: [], overflow: [], figures: {} };
  const vw = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > vw) out.overflow.push(`page ${document.documentElement.scrollWidth}px wide in ${vw}px`);
  // Paths in tables: one line, the whole value in the title, what is shown a part of it.
  for (const e of document.querySelectorAll('table code[title]')) {
    const lh = parseFloat(getComputedStyle(e).lineHeight);
    const rects = e.getClientRects().length, h = e.getBoundingClientRect().height;
    if (rects !== 1 || h > lh * 1.5) out.paths.push(`${e.title}: ${rects} boxes, ${h}px tall (a line is ${lh}px)`);
    const shown = e.textContent.split('\u2026');
    if (shown.length > 2 || !e.title.startsWith(shown[0]) || !e.title.endsWith(shown[shown.length - 1])) out.paths.push(`${e.title} shown as ${e.textContent}`);
    const cell = e.closest('td').getBoundingClientRect();
    if (e.getBoundingClientRect().right > cell.right + 0.5) out.paths.push(`${e.title} overflows its cell`);
  }
  out.figures.paths = document.querySelectorAll('table code[title]').length;
  // Commands: no argument cut across lines.
  for (const e of document.querySelectorAll('code.cmd')) {
    // A range over the characters [from, to) of the element's text, whatever its markup.
    const range = (from, to) => {
      const r = document.createRange(), w = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
      let at = 0, n;
      while ((n = w.nextNode())) {
        const len = n.textContent.length;
        if (from >= at && from <= at + len) r.setStart(n, from - at);
        if (to >= at && to <= at + len) { r.setEnd(n, to - at); break; }
        at += len;
      }
      return r;
    };
    let at = 0;
    for (const word of e.textContent.split(' ')) {
      const n = Array.from(range(at, at + word.length).getClientRects()).filter(b => b.width > 0);
      const lines = new Set(n.map(b => Math.round(b.top))).size;
      if (lines !== 1) out.commands.push(`${word} on ${lines} lines in: ${e.textContent}`);
      at += word.length + 1;
    }
    if (e.getBoundingClientRect().right > vw) out.commands.push(`${e.textContent} runs off the page`);
  }
  out.figures.commands = document.querySelectorAll('code.cmd').length;
  // The page uses the screen up to 1,400 px, and the session tables the page's width.
  const main = document.querySelector('main'), ms = getComputedStyle(main);
  const content = main.clientWidth - parseFloat(ms.paddingLeft) - parseFloat(ms.paddingRight);
  if (main.getBoundingClientRect().width < Math.min(vw, 1400) - 1) out.tables.push(`the page is ${main.getBoundingClientRect().width}px wide on a ${vw}px screen`);
  for (const t of document.querySelectorAll('#worst table, #compactions table, #plan table:has(code[title])')) {
    const w = t.getBoundingClientRect().width;
    if (w < content - 1) out.tables.push(`${t.closest('section').id} table ${Math.round(w)}px wide in a ${content}px page`);
  }
  out.figures.page_px = content;
  // Every drawn value can be seen.
  let thinnest = Infinity;
  for (const e of document.querySelectorAll('rect[data-value]')) {
    const b = e.getBoundingClientRect(), v = Number(e.dataset.value);
    thinnest = Math.min(thinnest, b.width, b.height);
    if (v > 0 && (b.width < 4 || b.height < 4)) out.bars.push(`${e.dataset.chart} ${e.dataset.key} ${e.dataset.series} = ${v}: ${b.width.toFixed(1)}x${b.height.toFixed(1)}px`);
  }
  out.figures.thinnest_bar_px = thinnest;
  // Every card says what it counts.
  for (const c of document.querySelectorAll('.card')) {
    const l = c.querySelector('.label');
    const v = c.querySelector('b');
    if (!l || !/^[A-Za-z][a-z ()-]*$/.test(l.textContent) || l.getBoundingClientRect().height === 0) out.cards.push(`card ${v && v.textContent}: label ${l ? JSON.stringify(l.textContent) : 'none'}`);
  }
  out.figures.cards = document.querySelectorAll('.card').length;
  // Axis ticks: 0, s, 2s, ... with s one of 1, 2, 5 times a power of ten, the top one at or
  // above the tallest column, and the columns drawn to that scale.
  for (const svg of document.querySelectorAll('svg.chart.columns')) {
    const name = svg.querySelector('rect[data-chart]')?.dataset.chart;
    const ticks = Array.from(svg.querySelectorAll('text.tick')).map(t => ({ v: Number(t.textContent.replace(/,/g, '')), y: t.getBoundingClientRect().top + t.getBoundingClientRect().height / 2 }));
    const vals = ticks.map(t => t.v);
    if (ticks.length < 2) { out.ticks.push(`${name}: ${ticks.length} ticks`); continue; }
    const step = vals[1] - vals[0], mag = Math.pow(10, Math.floor(Math.log10(step))), lead = step / mag;
    if (vals[0] !== 0 || ![1, 2, 5].includes(Math.round(lead * 1e9) / 1e9) || vals.some((v, i) => v !== i * step)) out.ticks.push(`${name}: ticks ${vals.join(' ')}`);
    const totals = {};
    for (const r of svg.querySelectorAll('rect[data-value]')) {
      const k = r.dataset.key, b = r.getBoundingClientRect();
      totals[k] = totals[k] || { v: 0, top: Infinity, bottom: -Infinity };
      totals[k].v += Number(r.dataset.value); totals[k].top = Math.min(totals[k].top, b.top); totals[k].bottom = Math.max(totals[k].bottom, b.bottom);
    }
    const max = Math.max(...Object.values(totals).map(t => t.v)), top = vals[vals.length - 1];
    if (top < max || top - step >= max) out.ticks.push(`${name}: top tick ${top} for a tallest column of ${max}`);
    out.figures[name] = vals.join(' ');
    // The tallest column, measured against the ticks' positions: its length is its total's.
    const perUnit = (ticks[0].y - ticks[ticks.length - 1].y) / top;
    const tallest = Object.values(totals).find(t => t.v === max);
    const drawn = tallest.bottom - tallest.top, want = max * perUnit;
    if (Math.abs(drawn - want) > 1.5) out.scale.push(`${name}: ${max} drawn ${drawn.toFixed(1)}px tall, the ticks say ${want.toFixed(1)}px`);
  }
  out.figures.column_charts = document.querySelectorAll('svg.chart.columns').length;
  return out;
})()"#;

/// The page's layout as headless Chromium lays it out, at a laptop's width and a wide
/// screen's: paths on one line with their whole value in the title, commands never cut inside
/// an argument, the session tables as wide as the page, every non-zero value at least 4 px,
/// every card labelled, and axis ticks that are round numbers on the scale the columns use.
#[test]
fn page_layout_in_chromium() {
    let repo = root();
    let html = artifacts().join("layout.html");
    let out = report_cmd(&repo, &["report", "tests/data/real", "--plan", "--html", html.to_str().unwrap(), "--no-summary"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut c = Chromium::start();
    for width in [1100, 1600] {
        c.call("Emulation.setDeviceMetricsOverride", serde_json::json!({ "width": width, "height": 900, "deviceScaleFactor": 1, "mobile": false }));
        c.navigate(&format!("file://{}", html.display()));
        assert_eq!(c.problems(), Vec::<String>::new());
        let m = c.eval(LAYOUT_PROBE);
        eprintln!("at {width}px: {}", m["figures"]);
        assert!(m["figures"]["paths"].as_u64().unwrap() >= 20, "{m}");
        assert!(m["figures"]["commands"].as_u64().unwrap() >= 10, "{m}");
        assert!(m["figures"]["cards"].as_u64().unwrap() >= 10, "{m}");
        assert_eq!(m["figures"]["column_charts"], 3, "{m}");
        for what in ["paths", "commands", "tables", "bars", "cards", "ticks", "scale", "overflow"] {
            assert_eq!(m[what], serde_json::json!([]), "at {width}px, {what}");
        }
        if width == 1100 {
            c.screenshot(&artifacts().join("layout.png"));
        }
    }
}
