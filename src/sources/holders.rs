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

/// The descriptors other processes hold open for writing on any of `files` (device, inode).
/// This process is left out.
///
/// Each descriptor's `fdinfo` is read first (access mode and, on Linux 5.14 and later, inode):
/// only a descriptor open for writing on a wanted inode is then `stat`ed to learn its device, so
/// the file systems of other processes' files (a hung network mount) are not touched.
pub fn scan(files: &[(u64, u64)]) -> Scan {
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
        let fds = match std::fs::read_dir(dir.join("fdinfo")) {
            Ok(f) => f,
            // The process exited meanwhile.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(_) => {
                out.hidden += 1;
                continue;
            }
        };
        let mut hidden = false;
        for fd in fds.flatten() {
            let Some(n) = fd.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let Some((flags, ino)) = fdinfo(&fd.path()) else { continue };
            if flags & libc::O_ACCMODE as u32 == libc::O_RDONLY as u32 {
                continue;
            }
            if ino.is_some_and(|ino| !files.iter().any(|f| f.1 == ino)) {
                continue;
            }
            // stat follows the magic link to the open file.
            let m = match std::fs::metadata(dir.join("fd").join(n.to_string())) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    hidden = true;
                    continue;
                }
                Err(_) => continue,
            };
            if !m.is_file() || !files.contains(&(m.dev(), m.ino())) {
                continue;
            }
            let command = std::fs::read_to_string(dir.join("comm")).map(|c| c.trim_end().to_owned()).unwrap_or_default();
            out.writers.entry((m.dev(), m.ino())).or_default().push(Holder { pid, command, fd: n });
        }
        out.hidden += usize::from(hidden);
    }
    out
}

/// The other processes that hold the file with device `dev` and inode `ino` open for writing.
pub fn writers_of(dev: u64, ino: u64) -> (Vec<Holder>, usize) {
    let mut s = scan(&[(dev, ino)]);
    (s.writers.remove(&(dev, ino)).unwrap_or_default(), s.hidden)
}

/// The access flags and (when the kernel gives it) the inode of one `fdinfo` file.
fn fdinfo(path: &Path) -> Option<(u32, Option<u64>)> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut flags = None;
    let mut ino = None;
    for l in text.lines() {
        if let Some(f) = l.strip_prefix("flags:") {
            flags = u32::from_str_radix(f.trim(), 8).ok();
        } else if let Some(i) = l.strip_prefix("ino:") {
            ino = i.trim().parse().ok();
        }
    }
    Some((flags?, ino))
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
