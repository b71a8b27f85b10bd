//! Which processes hold a file open for writing, as `fuser` finds them: every `/proc/<pid>/fd/*`
//! that resolves to the file's device and inode, with the access mode from
//! `/proc/<pid>/fdinfo/<fd>`.
//!
//! Linux only; elsewhere nothing is found. A process whose descriptors this process may not read
//! (another user's, unless running as root; a `/proc` mounted with `hidepid`) is not seen:
//! [`Scan::hidden`] counts them, so a caller can say that the answer is partial.

use std::collections::HashMap;
use std::path::Path;

/// One descriptor open for writing on a file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Holder {
    /// The process.
    pub pid: u32,
    /// Its command name (`/proc/<pid>/comm`).
    pub command: String,
    /// The descriptor.
    pub fd: u32,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} ({}) fd {}", self.pid, self.command, self.fd)
    }
}

/// One look through `/proc`.
#[derive(Debug, Default)]
pub struct Scan {
    /// Descriptors open for writing, by (device, inode) of the file.
    pub writers: HashMap<(u64, u64), Vec<Holder>>,
    /// Processes whose descriptors could not be read.
    pub hidden: usize,
}

impl Scan {
    /// The writers of the file with device `dev` and inode `ino`.
    pub fn of(&self, dev: u64, ino: u64) -> &[Holder] {
        self.writers.get(&(dev, ino)).map_or(&[], Vec::as_slice)
    }
}

/// Every regular file some other process holds open for writing, when `want` says the file is
/// of interest (device, inode). This process is left out.
pub fn scan(mut want: impl FnMut(u64, u64) -> bool) -> Scan {
    use std::os::unix::fs::MetadataExt;
    let mut out = Scan::default();
    let Ok(procs) = std::fs::read_dir("/proc") else { return out };
    let me = std::process::id();
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if pid == me {
            continue;
        }
        let dir = p.path();
        let fds = match std::fs::read_dir(dir.join("fd")) {
            Ok(f) => f,
            // The process exited meanwhile.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(_) => {
                out.hidden += 1;
                continue;
            }
        };
        for fd in fds.flatten() {
            // stat follows the magic link to the open file.
            let Ok(m) = std::fs::metadata(fd.path()) else { continue };
            if !m.is_file() || !want(m.dev(), m.ino()) {
                continue;
            }
            let Some(n) = fd.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            if !open_for_writing(&dir.join("fdinfo").join(n.to_string())) {
                continue;
            }
            let command = std::fs::read_to_string(dir.join("comm")).map(|c| c.trim_end().to_owned()).unwrap_or_default();
            out.writers.entry((m.dev(), m.ino())).or_default().push(Holder { pid, command, fd: n });
        }
    }
    out
}

/// The other processes that hold the file with device `dev` and inode `ino` open for writing.
pub fn writers_of(dev: u64, ino: u64) -> (Vec<Holder>, usize) {
    let mut s = scan(|d, i| (d, i) == (dev, ino));
    (s.writers.remove(&(dev, ino)).unwrap_or_default(), s.hidden)
}

/// Whether the `flags:` line of an fdinfo file has write access (`O_WRONLY` or `O_RDWR`).
fn open_for_writing(fdinfo: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(fdinfo) else { return false };
    text.lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        .is_some_and(|f| f & libc::O_ACCMODE as u32 != libc::O_RDONLY as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn finds_a_child_process_writing_and_not_a_reader() {
        if !Path::new("/proc/self/fdinfo").exists() {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("t.jsonl");
        std::fs::write(&f, "").unwrap();
        let m = std::fs::metadata(&f).unwrap();
        // This process's own descriptors never count.
        let _mine = std::fs::OpenOptions::new().append(true).open(&f).unwrap();
        assert!(writers_of(m.dev(), m.ino()).0.is_empty());
        // A reader is not a writer.
        let mut reader = std::process::Command::new("sh").arg("-c").arg("exec sleep 5 < \"$0\"").arg(&f).spawn().unwrap();
        let mut writer = std::process::Command::new("sh").arg("-c").arg("exec sleep 5 >> \"$0\"").arg(&f).spawn().unwrap();
        let found = (0..200)
            .find_map(|_| {
                let w = writers_of(m.dev(), m.ino()).0;
                if w.is_empty() {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    None
                } else {
                    Some(w)
                }
            })
            .expect("the writer is found");
        reader.kill().unwrap();
        writer.kill().unwrap();
        reader.wait().unwrap();
        writer.wait().unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].pid, writer.id());
        assert_eq!(found[0].fd, 1);
    }
}
