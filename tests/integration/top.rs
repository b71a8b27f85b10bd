//! `transcriptd top` in a real terminal: tmux (80×24) runs it against a daemon fed by a writer
//! (the real fixtures, line by line, with malformed lines among them); the numbers on screen
//! are those of the daemon's `/metrics`; the keys sort, filter and quit. The last screen is
//! kept as `target/top.txt` (and, with `UPDATE_EXPECT=1`, `tests/artifacts/top.txt`: the
//! the screen in docs/commands/top.md).

use super::support::harness::{metric_sum, wait, Daemon};
use super::support::{data, root};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

struct Tmux {
    socket: String,
    session: String,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux").arg("-L").arg(&self.socket).args(args).output().expect("tmux is installed (.ci/run installs it)")
    }

    fn capture(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", &self.session]).stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.session];
        args.extend_from_slice(keys);
        assert!(self.cmd(&args).status.success());
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// The real fixtures (Claude Code and Codex sessions).
fn fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = walk(&data("real/claude-code")).into_iter().chain(walk(&data("real/codex"))).collect();
    v.sort();
    v
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
        }
    }
    out
}

/// The number after `label` on the screen.
fn shown(screen: &str, label: &str) -> Option<u64> {
    let at = screen.find(label)? + label.len();
    screen[at..].split_whitespace().next()?.trim_end_matches('│').parse().ok()
}

/// `transcriptd_findings_total` of `kind`, all severities.
fn findings_of(metrics: &str, kind: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("transcriptd_findings_total{") && l.contains(&format!("kind=\"{kind}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The `total` column of a kind in the findings box.
fn kind_total(screen: &str, kind: &str) -> Option<u64> {
    let line = screen.lines().find(|l| l.contains(kind))?;
    let right = &line[line.find(kind)? + kind.len()..];
    right.split_whitespace().nth(1)?.trim_end_matches('│').parse().ok()
}

#[test]
fn top_in_tmux_shows_what_metrics_say_and_its_keys_work() {
    let d = Daemon::new("", "");
    let addr = format!("127.0.0.1:{}", d.port);
    let dir = tempfile::tempdir().unwrap();
    let exited = dir.path().join("exited");

    // The writer: each fixture appended in chunks of 20 lines, a malformed line every 100.
    let watch = d.watch_dir();
    let writer = std::thread::spawn(move || {
        for (i, f) in fixtures().iter().enumerate() {
            let name = format!("{}/{}", f.parent().unwrap().file_name().unwrap().to_string_lossy(), f.file_name().unwrap().to_string_lossy());
            let to = watch.join(format!("s{i:02}-{name}"));
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            let mut out = std::fs::OpenOptions::new().create(true).append(true).open(&to).unwrap();
            let text = std::fs::read_to_string(f).unwrap();
            for (n, chunk) in text.lines().collect::<Vec<_>>().chunks(20).enumerate() {
                let mut s = String::new();
                for l in chunk {
                    s.push_str(l);
                    s.push('\n');
                }
                if n % 5 == 4 {
                    s.push_str("{\"torn\": \n");
                }
                out.write_all(s.as_bytes()).unwrap();
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    });

    let tmux = Tmux { socket: format!("transcriptd-top-{}", std::process::id()), session: "top".into() };
    let command = format!("{} top --addr {addr} --interval 300ms; echo $? > {}", env!("CARGO_BIN_EXE_transcriptd"), exited.display());
    let started = tmux.cmd(&["new-session", "-d", "-s", &tmux.session, "-x", "80", "-y", "24", &command]);
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    assert!(wait(Duration::from_secs(20), || tmux.capture().contains("transcriptd top")), "{}", tmux.capture());
    // While the writer writes: lines are read, and top says so.
    assert!(wait(Duration::from_secs(30), || shown(&tmux.capture(), "lines/s").is_some_and(|n| n > 0)), "lines/s while writing:\n{}", tmux.capture());
    writer.join().unwrap();

    // The writer is done; once the daemon has read everything, the screen shows /metrics.
    assert!(wait(Duration::from_secs(30), || d.metric("transcriptd_source_lag_bytes") == Some(0.0)));
    std::thread::sleep(Duration::from_secs(1)); // the orphan grace, then a reading or two
    let mut last = (String::new(), String::new());
    let agree = wait(Duration::from_secs(20), || {
        let metrics = d.get("/metrics").unwrap_or_default();
        let screen = tmux.capture();
        let ok = shown(&screen, "files watched") == Some(metric_sum(&metrics, "transcriptd_files_watched") as u64)
            && shown(&screen, "lines ") == Some(metric_sum(&metrics, "transcriptd_lines_read_total") as u64)
            && shown(&screen, "pending calls") == Some(metric_sum(&metrics, "transcriptd_pending_tool_calls") as u64)
            && shown(&screen, "orphan calls") == Some(metric_sum(&metrics, "transcriptd_orphan_tool_calls_total") as u64)
            && shown(&screen, "lines/s") == Some(0)
            && kind_total(&screen, "malformed_line") == Some(findings_of(&metrics, "malformed_line"));
        last = (screen, metrics);
        ok
    });
    let (screen, metrics) = last;
    assert!(agree, "the screen:\n{screen}\n/metrics:\n{metrics}");
    assert_eq!(metric_sum(&metrics, "transcriptd_files_watched") as usize, fixtures().len());
    assert!(kind_total(&screen, "malformed_line").unwrap() > 50);
    assert!(screen.contains("tokens/min") && screen.contains("files by bytes/s"));
    // The cost since start is the cost counter's, in dollars.
    let cost = metric_sum(&metrics, "transcriptd_cost_microdollars_total") / 1e6;
    assert!(cost > 0.0, "the fixtures' models are priced: {metrics}");
    assert!(screen.contains(&format!("(${cost:.2} since start)")), "{screen}");
    assert_eq!(screen.lines().count(), 24, "{screen}");
    assert!(screen.lines().all(|l| l.chars().count() <= 80));
    std::fs::create_dir_all(root().join("target")).unwrap();
    std::fs::write(root().join("target/top.txt"), &screen).unwrap();
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(root().join("tests/artifacts/top.txt"), &screen).unwrap();
    }

    // s sorts by the next key; / filters; q quits.
    tmux.keys(&["s"]);
    assert!(wait(Duration::from_secs(10), || tmux.capture().contains("files by lag")), "{}", tmux.capture());
    tmux.keys(&["/", "s", "0", "3", "-", "Enter"]);
    assert!(
        wait(Duration::from_secs(10), || {
            let s = tmux.capture();
            s.contains(&format!("(1 shown, {} hidden)", fixtures().len() - 1)) && s.contains("s03-") && !s.contains("s04-")
        }),
        "{}",
        tmux.capture()
    );
    tmux.keys(&["q"]);
    assert!(wait(Duration::from_secs(10), || std::fs::read_to_string(&exited).is_ok_and(|s| s.trim() == "0")), "top exits 0 on q: {}", tmux.capture());
}

#[test]
fn top_without_a_daemon_says_so() {
    let o = super::support::transcriptd(&["top", "--addr", "127.0.0.1:1"]);
    assert_eq!(o.status.code(), Some(2));
    // Not a terminal here: it says what to use instead.
    assert!(String::from_utf8_lossy(&o.stderr).contains("top needs a terminal"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn top_at_80_columns_keeps_the_session_ids_and_counts_every_line_read() {
    // Issue 30: at 80x24 the names were cut from the right, so two sessions of one project
    // looked alike; and lines/s (and lines) left out the lines that failed to parse.
    let d = Daemon::new("", "");
    let addr = format!("127.0.0.1:{}", d.port);
    // Two projects (so that the directory part is not common to all files and stays in the
    // name), one session each, their ids alike but for the end.
    let ids = ["0197f3a2-1111-7abc-9def-00000000000a", "0197f3a2-1111-7abc-9def-00000000000b"];
    let fixture = std::fs::read_to_string(&fixtures()[0]).unwrap();
    let good: Vec<&str> = fixture.lines().take(10).collect();
    for (p, id) in ids.iter().enumerate() {
        let project = d.watch_dir().join(format!("-home-someone-work-projects-a-rather-long-project-name-{p}"));
        std::fs::create_dir_all(&project).unwrap();
        let mut text = String::new();
        for l in &good {
            text.push_str(l);
            text.push('\n');
        }
        text.push_str(&"{\"not json\": \n".repeat(5));
        std::fs::write(project.join(format!("{id}.jsonl")), text).unwrap();
    }
    let written = 2 * (good.len() + 5) as u64;
    // The name column is 37 wide at 80 columns: `…` and the name's last 36 characters, where
    // the ids differ (before: the directory, the same on both rows, and no id).
    let end = |id: &str| {
        let name = format!("{id}.jsonl");
        format!("…{}", &name[name.len() - 36..])
    };
    let tmux = Tmux { socket: format!("transcriptd-top-ids-{}", std::process::id()), session: "top".into() };
    let command = format!("{} top --addr {addr} --interval 300ms", env!("CARGO_BIN_EXE_transcriptd"));
    let started = tmux.cmd(&["new-session", "-d", "-s", &tmux.session, "-x", "80", "-y", "24", &command]);
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    let mut screen = String::new();
    let ok = wait(Duration::from_secs(30), || {
        screen = tmux.capture();
        shown(&screen, "lines ") == Some(written) && ids.iter().all(|id| screen.contains(&end(id)))
    });
    let metrics = d.get("/metrics").unwrap_or_default();
    assert!(ok, "every line written ({written}), the bad ones too, and both session ids in view:\n{screen}\n{metrics}");
    assert_eq!(metric_sum(&metrics, "transcriptd_lines_read_total") as u64, written, "{metrics}");
    // The directory part is what gives way, from the left, behind an ellipsis.
    for id in ids {
        let row = screen.lines().find(|l| l.contains(&end(id))).unwrap();
        assert!(row.starts_with(&format!("│{} ", end(id))), "{row}");
    }
    assert!(screen.lines().all(|l| l.chars().count() <= 80), "{screen}");
}
