//! One daemon per state directory: an exclusive `flock` on `state_dir/lock`, held for as long
//! as the daemon runs (the kernel lets it go when the process ends, `kill -9` too, so a stale
//! lock file never blocks a start). The holder writes its pid into the file, so that a second
//! daemon on the same directory refuses to start with a message that names the first — two
//! daemons would overwrite each other's checkpoints and report everything twice.
//!
//! A configuration reload stops the running pipeline (which lets the lock go) before the new
//! one takes it, so a reload on the same state directory goes through.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Name of the lock file in the state directory.
pub const FILE_NAME: &str = "lock";

/// The lock, held until dropped.
#[derive(Debug)]
pub struct StateLock {
    _file: File,
    path: PathBuf,
}

impl StateLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Takes the lock on `state_dir` (which must exist), or says who holds it.
pub fn acquire(state_dir: &Path) -> anyhow::Result<StateLock> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = state_dir.join(FILE_NAME);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("opening the state directory's lock {}: {e}", path.display()))?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            anyhow::bail!("locking the state directory {} ({}): {e}", state_dir.display(), path.display());
        }
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        let holder = match text.trim().parse::<u32>() {
            Ok(pid) => format!("transcriptd pid {pid}"),
            Err(_) => "another process".to_owned(),
        };
        anyhow::bail!(
            "the state directory {} is in use by {holder} (it holds the lock {}): another daemon already runs on it; two daemons on one state directory would overwrite each other's checkpoints and report everything twice (stop it, or give this one its own state_dir)",
            state_dir.display(),
            path.display()
        );
    }
    file.set_len(0)?;
    file.rewind()?;
    writeln!(file, "{}", std::process::id())?;
    Ok(StateLock { _file: file, path })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_second_lock_names_the_holder_and_a_dropped_one_is_free() {
        let d = tempfile::tempdir().unwrap();
        let held = super::acquire(d.path()).unwrap();
        let e = super::acquire(d.path()).unwrap_err().to_string();
        assert!(e.contains(&format!("pid {}", std::process::id())) && e.contains("in use"), "{e}");
        drop(held);
        super::acquire(d.path()).unwrap();
    }
}
