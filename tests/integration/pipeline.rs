//! The configured stage list is the pipeline, in order: the real daemon with stage lists other
//! than the default, against `check` on the same files.

use super::support::harness::{check_dir, fold, result_line, wait, Daemon, Opts};
use serde_json::Value;
use std::time::Duration;

fn daemon_with(stages: &[&str]) -> Daemon {
    let mut text = String::new();
    for s in stages {
        text.push_str("[[stages]]\n");
        text.push_str(s);
        text.push('\n');
    }
    Daemon::with(Opts { stages: Some(text), ..Opts::default() })
}

const PARSE: &str = "type = \"parse\"";
const VALIDATE: &str = "type = \"validate\"";
const COMPACTION: &str = "type = \"compaction\"";
const ORPHANS: &str = "type = \"orphans\"\ngrace = \"300ms\"";
const PLAN: &str = "type = \"repair\"\nmode = \"plan\"\nmin_idle = \"200ms\"";

/// Framing kinds: what the parse front reports by itself.
const FRAMING: [&str; 4] = ["malformed_line", "invalid_utf8", "line_too_long", "torn_line"];

/// A chat file with a framing error (line 2) and a validation error (line 3: a result nothing
/// called).
fn chat_with_both_errors() -> String {
    format!("{{\"role\":\"user\",\"content\":\"q\"}}\nnot json\n{}", result_line("c9"))
}

#[test]
fn a_config_without_validate_reports_framing_findings_only() {
    let d = daemon_with(&[PARSE, COMPACTION]);
    let f = d.watch_dir().join("a.jsonl");
    std::fs::write(&f, chat_with_both_errors()).unwrap();
    let want: Vec<_> = check_dir(&d.watch_dir()).into_keys().filter(|k| FRAMING.contains(&k.2.as_str())).collect();
    assert_eq!(want.len(), 1, "check sees the malformed line");
    assert!(wait(Duration::from_secs(10), || fold(&d.records()).into_keys().collect::<Vec<_>>() == want), "{:?}\n{}", d.records(), d.log());
    // Well past the validation of line 3: still nothing but the framing finding.
    std::thread::sleep(Duration::from_millis(800));
    let kinds: Vec<String> = d.records().iter().filter(|r| r["type"] == "finding").map(|r| r["kind"].as_str().unwrap().to_owned()).collect();
    assert_eq!(kinds, vec!["malformed_line"], "{}", d.log());
}

#[test]
fn with_validate_the_same_file_reports_what_check_reports() {
    let d = daemon_with(&[PARSE, VALIDATE, ORPHANS]);
    let f = d.watch_dir().join("a.jsonl");
    std::fs::write(&f, chat_with_both_errors()).unwrap();
    let want = check_dir(&d.watch_dir());
    assert!(want.keys().any(|k| k.2 == "orphan_result"));
    assert!(wait(Duration::from_secs(10), || fold(&d.records()) == want), "{:?}\n{}", d.records(), d.log());
}

/// A Claude Code session whose compaction boundary (line 3) closes a turn with a call still
/// open: the validation stage reports `unanswered_call` for line 2 while it takes line 3.
const COMPACTED: &str = concat!(
    r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"go"}}"#,
    "\n",
    r#"{"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"s","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}}"#,
    "\n",
    r#"{"type":"system","subtype":"compact_boundary","uuid":"c1","parentUuid":null,"sessionId":"s","content":"Conversation compacted"}"#,
    "\n",
);

/// The types of the records about line 3's input, in the order they came out: the compaction
/// (line 3) and the unanswered call it closed (line 2).
fn order_of(stages: &[&str]) -> Vec<String> {
    let d = daemon_with(stages);
    std::fs::write(d.watch_dir().join("s.jsonl"), COMPACTED).unwrap();
    let of_interest = |r: &Value| r["type"] == "compaction" || r["kind"] == "unanswered_call";
    assert!(wait(Duration::from_secs(10), || d.records().iter().filter(|r| of_interest(r)).count() == 2), "{:?}\n{}", d.records(), d.log());
    d.records().iter().filter(|r| of_interest(r)).map(|r| format!("{}@{}", r["type"].as_str().unwrap(), r["line"])).collect()
}

#[test]
fn stages_run_in_the_configured_order() {
    assert_eq!(order_of(&[PARSE, COMPACTION, VALIDATE]), vec!["compaction@3", "finding@2"]);
    assert_eq!(order_of(&[PARSE, VALIDATE, COMPACTION]), vec!["finding@2", "compaction@3"]);
}

/// Whether the repair stage planned a repair of a file whose only error is a validation one.
fn plans_repair(stages: &[&str]) -> bool {
    let d = daemon_with(stages);
    std::fs::write(d.watch_dir().join("a.jsonl"), format!("{{\"role\":\"user\",\"content\":\"q\"}}\n{}", result_line("c9"))).unwrap();
    // Read, then idle well past min_idle.
    assert!(wait(Duration::from_secs(10), || d.records().iter().any(|r| r["type"] == "file_opened")), "{}", d.log());
    std::thread::sleep(Duration::from_millis(1200));
    d.records().iter().any(|r| r["type"] == "repair_planned")
}

#[test]
fn the_repair_stage_sees_only_the_findings_of_the_stages_before_it() {
    assert!(plans_repair(&[PARSE, VALIDATE, PLAN]), "after validate, a validation error is repaired");
    assert!(!plans_repair(&[PARSE, PLAN, VALIDATE]), "before validate, the repair stage has seen no error");
}

#[test]
fn a_whole_file_repair_runs_beside_tailing_without_stalling_it() {
    let repaired = tempfile::tempdir().unwrap();
    let mut opts = Opts {
        stages: Some(format!("[[stages]]\n{PARSE}\n[[stages]]\n{VALIDATE}\n[[stages]]\ntype = \"repair\"\nmode = \"copy\"\nmin_idle = \"100ms\"\n")),
        ..Opts::default()
    };
    opts.extra = format!("[[sinks]]\ntype = \"repaired_files\"\ndir = \"{}\"\n", repaired.path().display());
    let d = Daemon::with(opts);
    // A large file with one error: its repair reads and writes all of it (here, some 400 ms,
    // against the tens of milliseconds the live file's finding takes).
    let line = format!("{{\"role\":\"user\",\"content\":\"{}\"}}\n{{\"role\":\"assistant\",\"content\":\"ok\"}}\n", "x".repeat(200));
    let mut big = line.repeat(450_000);
    big.push_str(&result_line("c1"));
    std::fs::write(d.watch_dir().join("big.jsonl"), big).unwrap();
    assert!(wait(Duration::from_secs(60), || d.log().contains("repair started")), "{}", d.log());
    // While it runs, another file gets an error: reported before the repair is done.
    std::fs::write(d.watch_dir().join("live.jsonl"), format!("{{\"role\":\"user\",\"content\":\"q\"}}\n{}", result_line("c2"))).unwrap();
    let position = |d: &Daemon| {
        let r = d.records();
        let live = r.iter().position(|r| r["type"] == "finding" && r["call_id"] == "c2");
        let done = r.iter().position(|r| r["type"] == "repaired" && r["file"].as_str().is_some_and(|f| f.ends_with("big.jsonl")));
        (live, done)
    };
    assert!(wait(Duration::from_secs(60), || matches!(position(&d), (Some(_), Some(_)))), "{:?}\n{}", position(&d), d.log());
    let (live, done) = position(&d);
    assert!(live < done, "the live file's finding waited for the repair: {live:?} {done:?}");
    let out = d.records().swap_remove(done.unwrap());
    let copy = std::path::PathBuf::from(out["output"].as_str().unwrap());
    assert!(copy.starts_with(repaired.path()) && copy.exists(), "{out}");
}

/// A backlog (here 24 MiB found at once) is read over many budgeted steps: the findings are
/// still exactly `check`'s, compaction boundaries included.
#[test]
fn a_large_backlog_read_in_steps_gives_what_check_gives() {
    let d = Daemon::with(Opts::default());
    let staged = d.root.path().join("staged");
    std::fs::create_dir_all(&staged).unwrap();
    let big = staged.join("big.jsonl");
    let status = std::process::Command::new("python3")
        .arg(super::support::generator("gen_transcripts.py"))
        .args(["--bytes", "24MiB", "--seed", "16", "--faults", "0.01", "--compact-boundary", "0.3", "--truncate-last", "1", "--split-assistant", "-o"])
        .arg(&big)
        .status()
        .expect("python3 runs the generator");
    assert!(status.success());
    std::fs::rename(&big, d.watch_dir().join("big.jsonl")).unwrap();
    let (got, want) = super::support::harness::settle(&d);
    assert!(want.len() > 100, "the corpus has findings: {}", want.len());
    assert_eq!(got, want, "{}", d.log());
    let folded = super::support::harness::fold_records(&d.records());
    assert_eq!(folded.compaction_set(), super::support::harness::compactions_in(&d.watch_dir()));
}

mod one_pairing {
    //! `validate` and `orphans` in one list share one pairing: each line is paired once, and
    //! what the list reports is what the two stages report each on its own.

    use crate::support::{data, generate, jsonl_files};
    use std::time::Duration;
    use transcriptd::transcript::pipeline::{Event, Input, Inputs, Pairing, Pipeline, Stage};
    use transcriptd::transcript::stages::{orphans::Orphans, validate::Validate};
    use transcriptd::transcript::Options;

    /// Counts the readable lines handed to the stages.
    #[derive(Debug, Default)]
    struct Entries(u64);

    impl Stage for Entries {
        fn name(&self) -> &'static str {
            "entries"
        }

        fn input(&mut self, input: &Input<'_, '_>, _pairing: &Pairing, _events: &mut Vec<Event>) {
            self.0 += u64::from(matches!(input, Input::Entry { .. }));
        }
    }

    #[derive(Clone, Copy, PartialEq)]
    enum S {
        Validate,
        Orphans,
        Entries,
    }

    /// What a list makes of `bytes`: the events of the lines, those of a deadline well after
    /// a growth (the tail of a live file), those of the end; and the pipeline's pairing count
    /// and the lines the stages were handed.
    struct Run {
        lines: Vec<Event>,
        tail: Vec<Event>,
        end: Vec<Event>,
        paired: u64,
        entries: u64,
    }

    fn run(list: &[S], bytes: &[u8]) -> Run {
        let secs = Duration::from_secs;
        let stages: Vec<Box<dyn Stage>> = list
            .iter()
            .map(|s| -> Box<dyn Stage> {
                match s {
                    S::Validate => Box::new(Validate::new(secs(5))),
                    S::Orphans => Box::new(Orphans::new(secs(30))),
                    S::Entries => Box::new(Entries::default()),
                }
            })
            .collect();
        let mut p = Pipeline::transcript(Options::default(), stages, secs(5));
        // In two pieces, as a live file grows.
        let (a, b) = bytes.split_at(bytes.len() / 2);
        p.feed(a).unwrap();
        p.grew(secs(1));
        p.feed(b).unwrap();
        p.grew(secs(2));
        let lines = p.drain().collect();
        p.handle_timeout(secs(1), &Inputs::default());
        assert_eq!(p.drain().count(), 0, "nothing is due before the quiet period");
        p.handle_timeout(secs(100), &Inputs::default());
        let tail = p.drain().collect();
        p.shrink();
        let paired = p.pairing().lines();
        let entries = p.stage::<Entries>().map_or(0, |e| e.0);
        let (end, _, _) = p.finish().unwrap();
        Run { lines, tail, end, paired, entries }
    }

    /// Every fixture and a few generated corpora (compactions, faults, split messages).
    fn inputs() -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = jsonl_files(&data("real")).into_iter().map(|p| (p.display().to_string(), std::fs::read(&p).unwrap())).collect();
        let dir = tempfile::tempdir().unwrap();
        for (seed, extra) in [("1", &[][..]), ("2", &["--split-assistant"][..]), ("3", &["--truncate-last", "1"][..])] {
            let out = dir.path().join(format!("g{seed}.jsonl"));
            let mut args = vec!["--lines", "3000", "--seed", seed, "--faults", "0.02", "--compact-boundary", "0.05"];
            args.extend_from_slice(extra);
            generate(&out, &args);
            v.push((format!("generated seed {seed} {extra:?}"), std::fs::read(&out).unwrap()));
        }
        v
    }

    #[test]
    fn validate_and_orphans_pair_each_line_once_and_report_what_each_reports_alone() {
        let mut checked = 0;
        for (name, bytes) in inputs() {
            // The front alone (framing findings, a torn last line), then each stage alone.
            let f = run(&[S::Entries], &bytes);
            let v = run(&[S::Validate, S::Entries], &bytes);
            let o = run(&[S::Orphans, S::Entries], &bytes);
            assert_eq!(v.paired, v.entries, "{name}: one stage pairs every line once");
            assert_eq!(o.paired, o.entries, "{name}");
            assert_eq!(o.lines, f.lines, "{name}: orphans says nothing per line");
            // What a stage adds after the front's own events.
            let own = |all: &[Event], front: &[Event]| -> Vec<Event> {
                assert_eq!(&all[..front.len()], front, "{name}: the front's events come first");
                all[front.len()..].to_vec()
            };
            let (vt, ve, ot, oe) = (own(&v.tail, &f.tail), own(&v.end, &f.end), own(&o.tail, &f.tail), own(&o.end, &f.end));
            for (list, first_v) in [(&[S::Validate, S::Orphans, S::Entries][..], true), (&[S::Orphans, S::Entries, S::Validate][..], false)] {
                let both = run(list, &bytes);
                assert_eq!(both.paired, both.entries, "{name}: both stages, each line paired once");
                assert_eq!(both.entries, v.entries, "{name}");
                assert_eq!(both.lines, v.lines, "{name}: validate's records per line, as alone");
                let (tail, end) = if first_v {
                    ([&vt[..], &ot[..]].concat(), [&ve[..], &oe[..]].concat())
                } else {
                    ([&ot[..], &vt[..]].concat(), [&oe[..], &ve[..]].concat())
                };
                assert_eq!(own(&both.tail, &f.tail), tail, "{name}: the tail, in stage order");
                assert_eq!(own(&both.end, &f.end), end, "{name}: the end, in stage order");
            }
            checked += usize::from(v.entries > 0);
        }
        assert!(checked > 10, "{checked} inputs with lines");
    }

    #[test]
    fn a_list_without_a_pairing_stage_pairs_nothing() {
        let bytes = std::fs::read(data("real/claude-code/spotter/short.jsonl")).unwrap();
        let r = run(&[S::Entries], &bytes);
        assert!(r.entries > 0);
        assert_eq!(r.paired, 0);
    }
}
