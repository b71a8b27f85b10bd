//! The sessions an agent keeps for one working directory (what `transcriptd doctor` lists), as
//! each agent files them:
//!
//! - **Claude Code**: `<config>/projects/<encoded cwd>/<session-id>.jsonl`, where `<config>` is
//!   `$CLAUDE_CONFIG_DIR` or `~/.claude`, and the encoding is [`claude_project_name`] (from the
//!   2.1.332 bundle; for a long path also the whole name 2.0.77 gave it). With `$CLAUDE_CONFIG_DIR` set, `$CLAUDE_CODE_PROJECT_DIR_NAME` (letters,
//!   digits, `_` and `-`, at most 64) names the directory instead, as the bundle does.
//! - **Codex**: `<codex home>/sessions/YYYY/MM/DD/rollout-*.jsonl` (`$CODEX_HOME` or
//!   `~/.codex`) whose first line is a `session_meta` whose `payload.cwd` is the directory.
//!
//! - **Copilot CLI**: `<copilot home>/session-state/<uuid>/events.jsonl` (`$COPILOT_HOME` or
//!   `~/.copilot`) whose first line is a `session.start` whose `data.context.cwd` is the
//!   directory.
//!
//! The walks are [`super::layout::discover`]'s: repair by-products (`.rejects.jsonl`, backups)
//! and subagent transcripts are not sessions.

use super::layout::{discover, Discovery, Layout, Session};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Claude Code cuts an encoded directory name at this many characters (and appends a hash).
pub const CLAUDE_NAME_MAX: usize = 200;

/// The agent a session belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Agent {
    /// Claude Code.
    ClaudeCode,
    /// The OpenAI Codex CLI.
    Codex,
    /// GitHub Copilot CLI.
    Copilot,
}

impl Agent {
    /// Its name in output.
    pub fn as_str(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::Codex => "codex",
            Agent::Copilot => "copilot",
        }
    }

    /// The agent's own command that resumes session `id` of directory `dir`, for a shell.
    pub fn resume_command(self, dir: &Path, id: &str) -> String {
        match self {
            Agent::ClaudeCode => format!("cd {} && claude --resume {id}", shell_word(&dir.display().to_string())),
            Agent::Codex => format!("codex resume {id}"),
            Agent::Copilot => format!("cd {} && copilot --resume={id}", shell_word(&dir.display().to_string())),
        }
    }
}

/// `s` as one shell word: as it is when it holds only characters no shell treats specially,
/// else in single quotes.
pub fn shell_word(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+=:@%,".contains(c)) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// One session of the directory.
#[derive(Debug, Clone)]
pub struct Found {
    /// Whose it is.
    pub agent: Agent,
    /// The session as the walk found it (its id, its transcript).
    pub session: Session,
    /// The transcript's modification time.
    pub modified: SystemTime,
}

/// Where the sessions of a directory were looked for, and what was found.
#[derive(Debug, Default)]
pub struct Sessions {
    /// Newest first (modification time), then by id.
    pub found: Vec<Found>,
    /// The places looked in, for a message when nothing is found: Claude Code's project
    /// directory, Codex's sessions directory.
    pub looked_in: Vec<PathBuf>,
    /// Directories that could not be read (the walk went on without them).
    pub unreadable: Vec<super::Error>,
}

/// Java's `String.hashCode` over UTF-16 code units, as Claude Code computes it (`(h << 5) - h +
/// c | 0`), then `Math.abs` (of `i32::MIN` too) in base 36.
fn claude_hash(s: &str) -> String {
    let h = s.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    let mut n = i64::from(h).unsigned_abs();
    if n == 0 {
        return "0".to_owned();
    }
    let mut digits = Vec::new();
    while n > 0 {
        digits.push(b"0123456789abcdefghijklmnopqrstuvwxyz"[(n % 36) as usize]);
        n /= 36;
    }
    digits.reverse();
    String::from_utf8(digits).expect("ASCII digits")
}

/// The name of Claude Code's project directory for working directory `cwd`: every UTF-16 code
/// unit that is not an ASCII letter or digit becomes `-`; a name longer than
/// [`CLAUDE_NAME_MAX`] is cut there and gets `-` and a hash of `cwd` (see `claude_hash`). Pure.
pub fn claude_project_name(cwd: &str) -> String {
    let name: String = cwd.encode_utf16().map(|u| if u < 0x80 && (u as u8).is_ascii_alphanumeric() { u as u8 as char } else { '-' }).collect();
    if name.len() <= CLAUDE_NAME_MAX {
        return name;
    }
    format!("{}-{}", &name[..CLAUDE_NAME_MAX], claude_hash(cwd))
}

fn env_dir(var: &str) -> Option<PathBuf> {
    std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from)
}

fn home() -> Option<PathBuf> {
    env_dir("HOME")
}

/// Claude Code's configuration directory: `$CLAUDE_CONFIG_DIR`, or `~/.claude`.
pub fn claude_config_dir() -> Option<PathBuf> {
    env_dir("CLAUDE_CONFIG_DIR").or_else(|| home().map(|h| h.join(".claude")))
}

/// Codex's home: `$CODEX_HOME`, or `~/.codex`.
pub fn codex_home() -> Option<PathBuf> {
    env_dir("CODEX_HOME").or_else(|| home().map(|h| h.join(".codex")))
}

/// Copilot CLI's home: `$COPILOT_HOME`, or `~/.copilot`.
pub fn copilot_home() -> Option<PathBuf> {
    env_dir("COPILOT_HOME").or_else(|| home().map(|h| h.join(".copilot")))
}

/// The `data.context.cwd` of a Copilot session whose first line (in `head`) is its
/// `session.start`. Pure.
pub fn copilot_cwd(head: &[u8]) -> Option<String> {
    let first = crate::transcript::lines::lines(1, 0, head).next()?;
    let v: serde_json::Value = serde_json::from_slice(first.bytes).ok()?;
    if v.get("type")?.as_str()? != "session.start" {
        return None;
    }
    Some(v.get("data")?.get("context")?.get("cwd")?.as_str()?.to_owned())
}

/// The project directory name `$CLAUDE_CODE_PROJECT_DIR_NAME` gives, when Claude Code would take
/// it (only with `$CLAUDE_CONFIG_DIR` set; a name of `[A-Za-z0-9_-]{1,64}` that is not a
/// reserved Windows device name).
fn claude_name_override() -> Option<String> {
    env_dir("CLAUDE_CONFIG_DIR")?;
    let name = std::env::var("CLAUDE_CODE_PROJECT_DIR_NAME").ok()?;
    let ok = (1..=64).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let lower = name.to_ascii_lowercase();
    let device = ["con", "prn", "aux", "nul"].contains(&lower.as_str())
        || ((lower.starts_with("com") || lower.starts_with("lpt")) && lower.len() == 4 && lower.as_bytes()[3].is_ascii_digit());
    (ok && !device).then_some(name)
}

/// The names Claude Code gives the project directory of `cwd`: [`claude_project_name`], and for
/// a name it cuts, also the whole name that versions before the cut (2.0.77) gave it. Pure.
pub fn claude_project_names(cwd: &str) -> Vec<String> {
    let name = claude_project_name(cwd);
    let whole: String = cwd.encode_utf16().map(|u| if u < 0x80 && (u as u8).is_ascii_alphanumeric() { u as u8 as char } else { '-' }).collect();
    if whole == name {
        vec![name]
    } else {
        vec![name, whole]
    }
}

/// Claude Code's project directories for `dir` (canonical): where its sessions are.
pub fn claude_project_dirs(dir: &Path) -> Vec<PathBuf> {
    let Some(projects) = claude_config_dir().map(|c| c.join("projects")) else { return Vec::new() };
    match claude_name_override() {
        Some(name) => vec![projects.join(name)],
        None => claude_project_names(&dir.to_string_lossy()).into_iter().map(|n| projects.join(n)).collect(),
    }
}

/// The `payload.cwd` of a rollout whose first line (in `head`) is a `session_meta`. Pure.
pub fn codex_cwd(head: &[u8]) -> Option<String> {
    let first = crate::transcript::lines::lines(1, 0, head).next()?;
    let v: serde_json::Value = serde_json::from_slice(first.bytes).ok()?;
    if v.get("type")?.as_str()? != "session_meta" {
        return None;
    }
    Some(v.get("payload")?.get("cwd")?.as_str()?.to_owned())
}

/// Bytes read from the start of a rollout to find its `session_meta` (its instructions can
/// make it long).
const CODEX_HEAD: u64 = 1 << 20;

/// The start of a file up to its first newline (at most [`CODEX_HEAD`] bytes), read in 64 KiB
/// steps: a listing reads every rollout's head, most of which is one short line.
fn first_bytes(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = crate::sources::regular::open_file(path)?.take(CODEX_HEAD);
    let mut head = Vec::new();
    loop {
        let start = head.len();
        let n = (&mut file).take(64 << 10).read_to_end(&mut head)?;
        if n == 0 || memchr::memchr(b'\n', &head[start..]).is_some() {
            return Ok(head);
        }
    }
}

fn walk(dir: &Path, out: &mut Sessions) -> Vec<Session> {
    out.looked_in.push(dir.to_path_buf());
    if !dir.is_dir() {
        return Vec::new();
    }
    match discover(&[dir.to_path_buf()]) {
        Ok(Discovery { sessions, unreadable, .. }) => {
            out.unreadable.extend(unreadable);
            sessions
        }
        Err(e) => {
            out.unreadable.push(e);
            Vec::new()
        }
    }
}

/// Every session of working directory `dir` (canonical), newest first.
pub fn sessions_of(dir: &Path) -> Sessions {
    let mut out = Sessions::default();
    let mut found = Vec::new();
    for (i, project) in claude_project_dirs(dir).into_iter().enumerate() {
        // The older whole name of a long path is said only when it is there.
        if i > 0 && !project.is_dir() {
            continue;
        }
        for s in walk(&project, &mut out) {
            // Only the sessions themselves: an old-style `agent-*.jsonl` is a subagent's, and
            // what lies in subdirectories is no session of this directory.
            if s.layout != Layout::File || s.id.starts_with("agent-") || s.transcript.parent() != Some(project.as_path()) {
                continue;
            }
            found.push((Agent::ClaudeCode, s));
        }
    }
    if let Some(codex) = codex_home() {
        let want = dir.to_string_lossy();
        for s in walk(&codex.join("sessions"), &mut out) {
            if s.layout != Layout::Rollout {
                continue;
            }
            let cwd = match first_bytes(&s.transcript) {
                Ok(head) => codex_cwd(&head),
                Err(e) => {
                    out.unreadable.push(super::Error::io(&s.transcript, e));
                    continue;
                }
            };
            if cwd.as_deref() == Some(&*want) {
                found.push((Agent::Codex, s));
            }
        }
    }
    if let Some(copilot) = copilot_home() {
        let want = dir.to_string_lossy();
        for s in walk(&copilot.join("session-state"), &mut out) {
            if s.transcript.file_name().is_none_or(|n| n != "events.jsonl") {
                continue;
            }
            let cwd = match first_bytes(&s.transcript) {
                Ok(head) => copilot_cwd(&head),
                Err(e) => {
                    out.unreadable.push(super::Error::io(&s.transcript, e));
                    continue;
                }
            };
            if cwd.as_deref() == Some(&*want) {
                found.push((Agent::Copilot, s));
            }
        }
    }
    out.found = found
        .into_iter()
        .filter_map(|(agent, session)| {
            let modified = std::fs::metadata(&session.transcript).and_then(|m| m.modified()).ok()?;
            Some(Found { agent, session, modified })
        })
        .collect();
    out.found.sort_by(|a, b| b.modified.cmp(&a.modified).then_with(|| a.session.id.cmp(&b.session.id)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_encodes_a_working_directory_as_its_bundle_does() {
        // The expected names were printed by the function of the 2.1.332 bundle under node.
        assert_eq!(claude_project_name("/home/me/app"), "-home-me-app");
        assert_eq!(claude_project_name("/home/me/my_app.v2"), "-home-me-my-app-v2");
        // One `-` per UTF-16 code unit: `é` is one, an emoji two.
        assert_eq!(claude_project_name("/tmp/x y/é😀"), "-tmp-x-y----");
        let long = format!("/home/me/{}projét/😀app", "very-long-directory-name/".repeat(9));
        let name = claude_project_name(&long);
        assert_eq!(
            name,
            "-home-me-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directory-name-\
             very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-direct-25ntl7"
        );
        assert_eq!(name.len(), 207);
        // Claude Code 2.0.77 did not cut: its sessions of that directory are under the whole name.
        let names = claude_project_names(&long);
        assert_eq!(names.len(), 2);
        assert_eq!(names[0], name);
        assert!(names[1].starts_with(&name[..CLAUDE_NAME_MAX]) && names[1].ends_with("-proj-t---app"), "{}", names[1]);
        assert_eq!(names[1].len(), long.encode_utf16().count());
        assert_eq!(claude_project_names("/home/me/app"), ["-home-me-app"]);
        // A negative hash: its absolute value.
        let a = "/a".repeat(101);
        assert_eq!(claude_project_name(&a), format!("{}-qlz1ly", &"-a".repeat(100)));
        // Exactly the limit: not cut.
        let at = format!("/{}", "b".repeat(CLAUDE_NAME_MAX - 1));
        assert_eq!(claude_project_name(&at), format!("-{}", "b".repeat(CLAUDE_NAME_MAX - 1)));
        assert_eq!(claude_hash(""), "0");
    }

    #[test]
    fn codex_names_its_directory_on_the_first_line() {
        let head = b"{\"timestamp\":\"t\",\"type\":\"session_meta\",\"payload\":{\"id\":\"x\",\"cwd\":\"/w/app\"}}\n{\"type\":\"response_item\"}\n";
        assert_eq!(codex_cwd(head).as_deref(), Some("/w/app"));
        assert_eq!(codex_cwd(b"{\"type\":\"response_item\",\"payload\":{\"cwd\":\"/w/app\"}}\n"), None);
        assert_eq!(codex_cwd(b"{\"type\":\"session_meta\",\"payload\":{}}\n"), None);
        assert_eq!(codex_cwd(b"not json\n"), None);
    }

    #[test]
    fn a_long_first_line_is_read_whole_and_no_more() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("rollout-x.jsonl");
        let first = format!("{{\"type\":\"session_meta\",\"payload\":{{\"instructions\":\"{}\",\"cwd\":\"/w\"}}}}\n", "x".repeat(200 << 10));
        std::fs::write(&p, format!("{first}{}", "{\"type\":\"response_item\"}\n".repeat(100_000))).unwrap();
        let head = first_bytes(&p).unwrap();
        assert!(head.len() >= first.len() && head.len() < first.len() + (64 << 10), "{}", head.len());
        assert_eq!(codex_cwd(&head).as_deref(), Some("/w"));
    }

    #[test]
    fn resume_commands_are_the_agents_own() {
        assert_eq!(Agent::ClaudeCode.resume_command(Path::new("/w/app"), "abc"), "cd /w/app && claude --resume abc");
        assert_eq!(Agent::ClaudeCode.resume_command(Path::new("/w/my app"), "abc"), "cd '/w/my app' && claude --resume abc");
        assert_eq!(Agent::Codex.resume_command(Path::new("/w/app"), "abc"), "codex resume abc");
    }
}
