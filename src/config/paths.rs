//! Paths and glob patterns as the configuration names them.

use std::path::{Path, PathBuf};

/// `$XDG_STATE_HOME/transcriptd` or `~/.local/state/transcriptd`: where a user's daemon keeps
/// its checkpoints when no state directory is given.
pub fn default_user_state_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("transcriptd");
    }
    std::env::var_os("HOME").map_or_else(|| PathBuf::from(".transcriptd"), |h| PathBuf::from(h).join(".local/state/transcriptd"))
}

/// The directory a glob pattern's files are under: its leading components without glob
/// characters (what the daemon watches for the pattern).
pub fn literal_root(pattern: &str) -> PathBuf {
    let mut root = PathBuf::new();
    for c in Path::new(pattern).components() {
        let s = c.as_os_str().to_string_lossy();
        if s.contains(['*', '?', '[', '{']) {
            break;
        }
        root.push(c);
    }
    root
}

/// Replaces a leading `~` with the home directory.
pub fn expand_home(pattern: &str) -> String {
    match (pattern.strip_prefix("~/"), std::env::var("HOME")) {
        (Some(rest), Ok(home)) => format!("{home}/{rest}"),
        _ => pattern.to_owned(),
    }
}
