//! The daemon's record sinks: stdout and a size-rotated file, both able to say how far they
//! have durably written, so that a checkpoint can record it and a restart after `kill -9` can
//! cut off what was written after the last checkpoint (it will be written again): no record is
//! lost and none appears twice.

use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where a sink's output stood at a checkpoint: which file, and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// Device of the output file.
    pub dev: u64,
    /// Inode of the output file.
    pub ino: u64,
    /// Its length.
    pub len: u64,
}

/// Records as JSON lines on stdout.
#[derive(Debug)]
pub struct StdoutSink {
    out: BufWriter<io::Stdout>,
}

impl Default for StdoutSink {
    fn default() -> Self {
        StdoutSink { out: BufWriter::with_capacity(256 << 10, io::stdout()) }
    }
}

impl StdoutSink {
    /// Writes one record (a whole JSON line).
    pub fn write(&mut self, line: &[u8]) -> io::Result<()> {
        self.out.write_all(line)
    }

    /// Flushes to the reader.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// When stdout is a regular file: where it stands (after a flush).
    pub fn position(&self) -> Option<Position> {
        regular_file_position(&stdout_metadata()?)
    }

    /// After a crash: when stdout is the same regular file as at the checkpoint and it grew past
    /// the checkpointed length, cut it back; the records after it will be written again.
    pub fn recover(&mut self, at: Option<Position>) -> io::Result<()> {
        let (Some(at), Some(now)) = (at, stdout_metadata()) else { return Ok(()) };
        if now.is_file() && now.dev() == at.dev && now.ino() == at.ino && now.len() > at.len {
            truncate_stdout(at.len)?;
        }
        Ok(())
    }
}

fn stdout_metadata() -> Option<std::fs::Metadata> {
    std::fs::metadata("/dev/stdout").ok().or_else(|| std::fs::metadata("/proc/self/fd/1").ok())
}

fn regular_file_position(m: &std::fs::Metadata) -> Option<Position> {
    m.is_file().then(|| Position { dev: m.dev(), ino: m.ino(), len: m.len() })
}

fn truncate_stdout(len: u64) -> io::Result<()> {
    // SAFETY: fd 1 is this process's stdout; ftruncate on it does not touch memory.
    let r = unsafe { libc::ftruncate(1, len as libc::off_t) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Records as JSON lines appended to a file, rotated by size at checkpoints.
#[derive(Debug)]
pub struct FileSink {
    path: PathBuf,
    max_bytes: u64,
    keep: usize,
    out: BufWriter<File>,
}

impl FileSink {
    /// Opens (creating) the file for appending.
    pub fn open(path: &Path, max_bytes: u64, keep: usize) -> io::Result<Self> {
        if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d)?;
        }
        let f = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(FileSink { path: path.to_path_buf(), max_bytes, keep, out: BufWriter::with_capacity(256 << 10, f) })
    }

    /// Writes one record.
    pub fn write(&mut self, line: &[u8]) -> io::Result<()> {
        self.out.write_all(line)
    }

    /// Flushes and syncs.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_data()
    }

    /// Where the file stands.
    pub fn position(&self) -> Option<Position> {
        regular_file_position(&self.out.get_ref().metadata().ok()?)
    }

    /// After a crash: cut the file back to the checkpointed length if it is the same file.
    pub fn recover(&mut self, at: Option<Position>) -> io::Result<()> {
        let Some(at) = at else { return Ok(()) };
        let m = self.out.get_ref().metadata()?;
        if m.dev() == at.dev && m.ino() == at.ino && m.len() > at.len {
            self.out.get_ref().set_len(at.len)?;
        }
        Ok(())
    }

    /// Rotates when the file is over its size: `path` → `path.1` → ... → `path.keep` (dropped).
    /// Called right after a checkpoint, so that the checkpointed position is the end of the
    /// file rotated away.
    pub fn rotate_if_full(&mut self) -> io::Result<bool> {
        self.out.flush()?;
        if self.out.get_ref().metadata()?.len() < self.max_bytes {
            return Ok(false);
        }
        let name = |k: usize| PathBuf::from(format!("{}.{k}", self.path.display()));
        let _ = std::fs::remove_file(name(self.keep));
        for k in (1..self.keep).rev() {
            let _ = std::fs::rename(name(k), name(k + 1));
        }
        std::fs::rename(&self.path, name(1))?;
        let f = OpenOptions::new().create(true).append(true).open(&self.path)?;
        self.out = BufWriter::with_capacity(256 << 10, f);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_sink_rotates_and_recovers() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.jsonl");
        let mut s = FileSink::open(&p, 50, 2).unwrap();
        for i in 0..10 {
            s.write(format!("{{\"i\":{i}}}\n").as_bytes()).unwrap();
        }
        s.flush().unwrap();
        let at = s.position().unwrap();
        s.write(b"{\"late\":1}\n").unwrap();
        s.flush().unwrap();
        s.recover(Some(at)).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap().lines().count(), 10);
        assert!(s.rotate_if_full().unwrap());
        assert!(d.path().join("f.jsonl.1").exists());
        s.write(b"{\"new\":1}\n").unwrap();
        s.flush().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\"new\":1}\n");
    }
}
