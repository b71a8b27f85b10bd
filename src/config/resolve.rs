//! Validation and resolution: the values that parse but cannot work, each with its place; the
//! configuration made absolute; what `run` needs of the machine (`--check-env`).

use super::model::{Config, RepairMode, SinkConfig, SourceConfig, StageConfig};
use super::{expand_home, literal_root, tools};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The configuration, validated and resolved: what the daemon is built from.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The configuration as written.
    pub config: Config,
    /// Prometheus listen address, if the sink is configured.
    pub metrics_addr: Option<SocketAddr>,
    /// The Prometheus sink's settings, if it is configured.
    pub metrics: Option<MetricsSettings>,
}

/// The Prometheus sink, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsSettings {
    /// Listen address.
    pub addr: SocketAddr,
    /// Connections at once.
    pub max_connections: usize,
    /// Time a connection has for its request and answer (a `/tap` client: to take what
    /// waits for it).
    pub request_timeout: Duration,
    /// `/tap` clients at once.
    pub tap_clients: usize,
    /// Records a `/tap` client's queue holds.
    pub tap_buffer: usize,
    /// The file holding the bearer token every path but `/health` asks for.
    pub token_file: Option<PathBuf>,
}

/// Where a problem is: a section (`daemon`, `sources`, `stages`, `sinks`), the element of an
/// array section, and a key in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The section.
    pub section: &'static str,
    /// The element, in an array section.
    pub index: Option<usize>,
    /// The key inside it.
    pub key: Option<&'static str>,
}

impl Place {
    fn section(section: &'static str) -> Self {
        Place { section, index: None, key: None }
    }

    fn element(section: &'static str, index: usize) -> Self {
        Place { section, index: Some(index), key: None }
    }

    fn key(section: &'static str, index: Option<usize>, key: &'static str) -> Self {
        Place { section, index, key: Some(key) }
    }

    /// As a dotted path: `sources[0].format`.
    pub fn dotted(&self) -> String {
        let mut s = self.section.to_owned();
        if let Some(i) = self.index {
            s.push_str(&format!("[{i}]"));
        }
        if let Some(k) = self.key {
            s.push('.');
            s.push_str(k);
        }
        s
    }
}

/// A problem with one element of a section: the key it is about (`None`: the element as a
/// whole) and what is wrong. Each config type says its own ([`SourceConfig::validate`],
/// [`StageConfig::validate`], [`SinkConfig::validate`]); [`Config::resolve`] adds where.
type Problems = Vec<(Option<&'static str>, String)>;

impl SourceConfig {
    /// What is wrong with this source on its own, key by key (names are checked across sources
    /// by [`Config::resolve`]).
    pub fn validate(&self) -> Vec<(&'static str, String)> {
        let mut problems = Vec::new();
        if self.include.is_empty() {
            problems.push(("include", "at least one pattern is needed".into()));
        }
        for (key, pats) in [("include", &self.include), ("exclude", &self.exclude)] {
            for g in pats {
                if let Err(e) = globset::Glob::new(&expand_home(g)) {
                    problems.push((key, format!("`{g}`: {e}")));
                }
            }
        }
        if let Err(m) = self.format.read() {
            problems.push(("format", m.to_owned()));
        }
        problems
    }
}

impl StageConfig {
    /// What is wrong with this stage, given the configured `sinks` (a stage may need one).
    /// Every variant is named: a new stage does not compile until it says what it checks.
    pub fn validate(&self, sinks: &[SinkConfig]) -> Problems {
        let mut problems = Vec::new();
        match self {
            StageConfig::Repair { orphans, mode, .. } => {
                if let Err(m) = orphans.read() {
                    problems.push((Some("orphans"), m.to_owned()));
                }
                if *mode == RepairMode::Copy && !sinks.iter().any(|s| matches!(s, SinkConfig::RepairedFiles { .. })) {
                    problems.push((None, "repair mode `copy` needs a `repaired_files` sink".into()));
                }
            }
            StageConfig::Orphans { registry: Some(r), .. } => {
                if let Err(e) = tools::ToolRegistry::load(r) {
                    problems.push((Some("registry"), e.to_string()));
                }
            }
            StageConfig::Orphans { registry: None, .. } | StageConfig::Parse | StageConfig::Compaction | StageConfig::Validate | StageConfig::Loss { .. } => {}
        }
        problems
    }
}

impl SinkConfig {
    /// What is wrong with this sink on its own. Every variant is named: a new sink does not
    /// compile until it says what it checks.
    pub fn validate(&self) -> Problems {
        let mut problems = Vec::new();
        let mut bad = |key: &'static str, m: String| problems.push((Some(key), m));
        match self {
            SinkConfig::Prometheus { address, max_connections, request_timeout, tap_buffer, .. } => {
                if *max_connections == 0 {
                    bad("max_connections", "must be at least 1".into());
                }
                if *tap_buffer == 0 {
                    bad("tap_buffer", "must be at least 1".into());
                }
                if request_timeout.is_zero() {
                    bad("request_timeout", "must be more than 0".into());
                }
                if let Err(m) = address.read() {
                    bad("address", m.to_owned());
                }
            }
            SinkConfig::File { max_bytes, keep, .. } => {
                if let Err(m) = max_bytes.read() {
                    bad("max_bytes", m.to_owned());
                }
                if *keep == 0 {
                    bad("keep", "must be at least 1".into());
                }
            }
            SinkConfig::Http { max_bytes, queue_bytes, .. } => {
                if let Some(m) = self.http_problem() {
                    problems.push((None, m));
                }
                for (key, size) in [("max_bytes", max_bytes), ("queue_bytes", queue_bytes)] {
                    if let Err(m) = size.read() {
                        problems.push((Some(key), m.to_owned()));
                    }
                }
            }
            SinkConfig::Snapshot { max_age, max_bytes, .. } => {
                if let Some(Err(m)) = max_bytes.as_ref().map(|m| m.read()) {
                    problems.push((Some("max_bytes"), m.to_owned()));
                }
                if max_age.is_some_and(|a| a.is_zero()) {
                    problems.push((Some("max_age"), "must be more than 0".into()));
                }
            }
            SinkConfig::Stdout { .. } | SinkConfig::RepairedFiles { .. } => {}
        }
        problems
    }
}

impl Config {
    /// Every value that parses but cannot work, with where it is; the resolved configuration
    /// when there is none.
    pub fn resolve(self) -> (Option<Resolved>, Vec<(Place, String)>) {
        let mut problems: Vec<(Place, String)> = Vec::new();
        let mut bad = |place: Place, message: String| problems.push((place, message));
        if self.sources.is_empty() {
            bad(Place::section("sources"), "at least one source is needed".into());
        }
        if let Err(m) = self.daemon.max_line_bytes.read() {
            bad(Place::key("daemon", None, "max_line_bytes"), m.to_owned());
        }
        if self.daemon.max_open_files == 0 {
            bad(Place::key("daemon", None, "max_open_files"), "must be at least 1".into());
        }
        if self.daemon.stall_timeout.is_zero() {
            bad(Place::key("daemon", None, "stall_timeout"), "must be more than 0".into());
        }
        let mut names: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for (i, s) in self.sources.iter().enumerate() {
            if let Some(n) = &s.name {
                match names.get(n.as_str()) {
                    Some(j) => bad(
                        Place::key("sources", Some(i), "name"),
                        format!("`{n}` names sources[{j}] too: source names must be unique (logs tell sources apart by them)"),
                    ),
                    None => {
                        names.insert(n, i);
                    }
                }
            }
            for (key, m) in s.validate() {
                bad(Place::key("sources", Some(i), key), m);
            }
        }
        if !matches!(self.stages.first(), Some(StageConfig::Parse)) {
            bad(Place::element("stages", 0), "the first stage must be `parse`".into());
        }
        let mut seen = std::collections::HashMap::new();
        for (i, st) in self.stages.iter().enumerate() {
            if let Some(j) = seen.insert(std::mem::discriminant(st), i) {
                bad(Place::element("stages", i), format!("stages[{j}] is the same stage: each stage may appear once"));
            }
            for (key, m) in st.validate(&self.sinks) {
                bad(key.map_or_else(|| Place::element("stages", i), |k| Place::key("stages", Some(i), k)), m);
            }
        }
        let mut metrics = None;
        let mut sinks_seen: std::collections::HashMap<&'static str, usize> = std::collections::HashMap::new();
        for (i, s) in self.sinks.iter().enumerate() {
            if let Some(j) = sinks_seen.insert(s.type_name(), i) {
                bad(Place::element("sinks", i), format!("a second `{}` sink (sinks[{j}] is one): each sink may appear once", s.type_name()));
            }
            for (key, m) in s.validate() {
                bad(key.map_or_else(|| Place::element("sinks", i), |k| Place::key("sinks", Some(i), k)), m);
            }
            if let SinkConfig::Prometheus { address, max_connections, request_timeout, tap_clients, tap_buffer, token_file } = s {
                if let Ok(addr) = address.read() {
                    metrics = Some(MetricsSettings {
                        addr: *addr,
                        max_connections: *max_connections,
                        request_timeout: *request_timeout,
                        tap_clients: *tap_clients,
                        tap_buffer: *tap_buffer,
                        token_file: token_file.clone(),
                    });
                }
            }
        }
        if !problems.is_empty() {
            return (None, problems);
        }
        let mut config = self;
        config.make_absolute();
        // What the `loss` stage's findings name: the store that holds what was lost.
        let store = config.sinks.iter().find_map(|s| match s {
            SinkConfig::Snapshot { dir, .. } => Some(dir.clone()),
            _ => None,
        });
        for st in &mut config.stages {
            if let StageConfig::Loss { restore_from } = st {
                restore_from.clone_from(&store);
            }
        }
        if let Some(t) = metrics.as_mut().and_then(|m| m.token_file.as_mut()) {
            *t = std::path::absolute(&*t).unwrap_or_else(|_| t.clone());
        }
        (Some(Resolved { config, metrics_addr: metrics.as_ref().map(|m| m.addr), metrics }), problems)
    }

    /// Every path the daemon keeps made absolute against the current directory, as it is at
    /// start (the state directory, the sources' patterns, the file sink, the repaired files'
    /// directory, a tool registry): a relative pattern would otherwise give the files found by
    /// walking its root relative names and the files named by inotify absolute ones, two
    /// entries for one file (whose appends were then never read), and relative names in the
    /// checkpoint. A pattern that starts with a glob (`**/*.rejects.jsonl`) matches anywhere and
    /// is left as it is.
    fn make_absolute(&mut self) {
        let Ok(cwd) = std::env::current_dir() else { return };
        let abs = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = std::path::absolute(&*p).unwrap_or_else(|_| cwd.join(&*p));
            }
        };
        abs(&mut self.daemon.state_dir);
        for st in &mut self.stages {
            if let StageConfig::Orphans { registry: Some(r), .. } = st {
                abs(r);
            }
        }
        for s in &mut self.sinks {
            match s {
                SinkConfig::File { path, .. } => abs(path),
                SinkConfig::RepairedFiles { dir } | SinkConfig::Snapshot { dir, .. } => abs(dir),
                SinkConfig::Prometheus { token_file: Some(t), .. } => abs(t),
                SinkConfig::Stdout { .. } | SinkConfig::Prometheus { .. } | SinkConfig::Http { .. } => {}
            }
        }
        let mut escaped = String::new();
        for c in cwd.to_string_lossy().chars() {
            if "*?[]{}\\".contains(c) {
                escaped.push('\\');
            }
            escaped.push(c);
        }
        // `include` patterns name where files are (their root is watched): always under the
        // current directory when relative. An `exclude` pattern that starts with a glob matches
        // anywhere.
        let pattern = |p: &mut String, rooted: bool| {
            if p.starts_with('/') || p.starts_with("~/") || p == "~" {
                return;
            }
            let explicit = p.starts_with("./") || p == ".";
            let mut rest = p.as_str();
            while let Some(r) = rest.strip_prefix("./") {
                rest = r.trim_start_matches('/');
            }
            if rest == "." {
                rest = "";
            }
            if !rooted && !explicit && rest.split('/').next().unwrap_or("").contains(['*', '?', '[', '{']) {
                return;
            }
            *p = if rest.is_empty() { escaped.clone() } else { format!("{}/{rest}", escaped.trim_end_matches('/')) };
        };
        for src in &mut self.sources {
            src.include.iter_mut().for_each(|p| pattern(p, true));
            src.exclude.iter_mut().for_each(|p| pattern(p, false));
        }
    }
}

impl Resolved {
    /// The line limit, in bytes.
    pub fn max_line_bytes(&self) -> usize {
        self.config.daemon.max_line_bytes.get().bytes()
    }

    /// What `run` needs of this machine that the file alone cannot tell (`validate-config
    /// --check-env`, as `vector validate` checks its environment): the state directory (and a
    /// `repaired_files` directory) exists and is writable or can be created, the `file` sink's
    /// directory is writable, the metrics address can be bound, and the root of every source's
    /// `include` pattern exists. Nothing is created or left behind.
    pub fn environment_problems(&self) -> Vec<(Place, String)> {
        let mut out = Vec::new();
        if let Err(m) = creatable(&self.config.daemon.state_dir) {
            out.push((Place::key("daemon", None, "state_dir"), m));
        }
        for (i, s) in self.config.sinks.iter().enumerate() {
            match s {
                SinkConfig::Prometheus { .. } => {
                    if let Some(addr) = self.metrics_addr {
                        if let Err(e) = std::net::TcpListener::bind(addr) {
                            out.push((Place::key("sinks", Some(i), "address"), format!("{addr} cannot be bound: {e}")));
                        }
                    }
                }
                SinkConfig::RepairedFiles { dir } | SinkConfig::Snapshot { dir, .. } => {
                    if let Err(m) = creatable(dir) {
                        out.push((Place::key("sinks", Some(i), "dir"), m));
                    }
                }
                SinkConfig::File { path, .. } => {
                    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
                    if let Err(m) = writable(dir) {
                        out.push((Place::key("sinks", Some(i), "path"), m));
                    }
                }
                SinkConfig::Stdout { .. } | SinkConfig::Http { .. } => {}
            }
        }
        for (i, s) in self.config.sources.iter().enumerate() {
            for p in &s.include {
                let root = literal_root(&expand_home(p));
                if !root.exists() {
                    out.push((
                        Place::key("sources", Some(i), "include"),
                        format!("{} (the root of `{p}`) does not exist: nothing is read from it until it is created", root.display()),
                    ));
                }
            }
        }
        out
    }
}

/// Whether files can be made in `dir`: a directory is tried with an unnamed temporary file
/// (nothing is left behind).
fn writable(dir: &Path) -> Result<(), String> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => Err(format!("{} is not a directory", dir.display())),
        Ok(_) => tempfile::tempfile_in(dir).map(drop).map_err(|e| format!("{} is not writable: {e}", dir.display())),
        Err(e) => Err(format!("{}: {e}", dir.display())),
    }
}

/// Whether `dir` is a writable directory, or can be created: its nearest existing ancestor is
/// a writable directory.
fn creatable(dir: &Path) -> Result<(), String> {
    if dir.exists() {
        return writable(dir);
    }
    let mut up = dir.parent();
    while let Some(p) = up {
        let p = if p.as_os_str().is_empty() { Path::new(".") } else { p };
        if p.exists() {
            return writable(p).map_err(|m| format!("{} cannot be created: {m}", dir.display()));
        }
        up = p.parent();
    }
    Err(format!("{} cannot be created", dir.display()))
}
