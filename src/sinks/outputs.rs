//! The daemon's record sinks (see [`super::Sink`]): stdout and a size-rotated file, both able to say how far they
//! have durably written, so that a checkpoint can record it and a restart after `kill -9` can
//! cut off what was written after the last checkpoint (it will be written again): no record is
//! lost and none appears twice.
//!
//! Only a file the daemon owns is ever cut back: its file sink, or a stdout file that nobody
//! else writes. Stdout is such a file when it is a regular file, stderr is not the same file
//! (`run >> log 2>&1` shares it with the daemon's own logs), no foreign write was seen between
//! the daemon's writes (its length is checked before and after each flush), and everything after
//! the checkpointed length is records (a line another program wrote is proof it is shared).
//! Otherwise stdout is at-least-once: records after the last checkpoint may appear twice.

use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::mem::ManuallyDrop;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::FromRawFd;
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
    /// Whether the daemon was the file's only writer (so it may be cut back to `len`).
    /// Positions written before this field are not.
    #[serde(default)]
    pub exclusive: bool,
    /// A hash of the last bytes before `len` (at most [`TAIL_HASH_LEN`]): tells the same file
    /// under another device number (a remount) from another file. The file sink's; `None`
    /// for the others and in checkpoints written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail_hash: Option<u64>,
}

/// How many bytes before a position [`Position::tail_hash`] covers.
pub const TAIL_HASH_LEN: u64 = 1024;

/// The hash of the last bytes of `f` before `len` (none for an empty prefix, or when they
/// cannot be read).
fn tail_hash(f: &File, len: u64) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let n = len.min(TAIL_HASH_LEN);
    if n == 0 {
        return None;
    }
    let mut b = vec![0u8; n as usize];
    f.read_exact_at(&mut b, len - n).ok()?;
    Some(xxhash_rust::xxh3::xxh3_64(&b))
}

/// Whether the file `f` (with metadata `m`) is the one `at` names: the same device and inode,
/// or — a remount gave the filesystem another device number — the same inode holding the same
/// bytes before `at.len`.
fn names(at: &Position, f: &File, m: &std::fs::Metadata) -> bool {
    if (m.dev(), m.ino()) == (at.dev, at.ino) {
        return true;
    }
    let same = m.ino() == at.ino && m.len() >= at.len && at.tail_hash.is_some() && tail_hash(f, at.len) == at.tail_hash;
    if same {
        tracing::info!(from_dev = at.dev, to_dev = m.dev(), "the file sink's device number changed (a remount?): same inode and content");
    }
    same
}

/// Bytes after a checkpoint that recovery reads to prove they are records (a second of output
/// is far less).
const PROOF_LIMIT: u64 = 64 << 20;

/// A regular file behind stdout.
#[derive(Debug, Clone, Copy)]
struct Tracked {
    dev: u64,
    ino: u64,
    /// Where the daemon's last write ended.
    len: u64,
    exclusive: bool,
}

/// Records as JSON lines on stdout.
#[derive(Debug)]
pub struct StdoutSink {
    buf: Vec<u8>,
    /// File descriptor 1, written without Rust's line buffering (one `write` per flush).
    out: ManuallyDrop<File>,
    file: Option<Tracked>,
    /// Which findings it writes (every record when `None`).
    filter: Option<crate::transcript::FindingFilter>,
}

impl Default for StdoutSink {
    fn default() -> Self {
        StdoutSink::new()
    }
}

fn fd_meta(fd: i32) -> Option<std::fs::Metadata> {
    // SAFETY: borrowing a descriptor this process has open; ManuallyDrop never closes it.
    let f = ManuallyDrop::new(unsafe { File::from_raw_fd(fd) });
    f.metadata().ok()
}

impl StdoutSink {
    /// Stdout as it is now.
    pub fn new() -> Self {
        // SAFETY: fd 1 is this process's stdout; ManuallyDrop never closes it.
        let out = ManuallyDrop::new(unsafe { File::from_raw_fd(1) });
        let file = fd_meta(1).filter(std::fs::Metadata::is_file).map(|m| {
            // `2>&1`: the daemon's own logs go to the same file.
            let shared = fd_meta(2).is_some_and(|e| e.dev() == m.dev() && e.ino() == m.ino());
            Tracked { dev: m.dev(), ino: m.ino(), len: m.len(), exclusive: !shared }
        });
        StdoutSink { buf: Vec::with_capacity(256 << 10), out, file, filter: None }
    }

    /// The same sink writing only the findings `filter` keeps (and every record that is no
    /// finding).
    pub fn filtered(mut self, filter: crate::transcript::FindingFilter) -> Self {
        self.filter = Some(filter);
        self
    }

    /// Writes one record (a whole JSON line).
    pub fn write(&mut self, line: &[u8]) {
        self.buf.extend_from_slice(line);
    }

    /// Flushes to the reader.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let before = self.file.and_then(|_| fd_meta(1)).map(|m| m.len());
        if let (Some(t), Some(len)) = (self.file.as_mut(), before) {
            if len != t.len {
                t.exclusive = false;
            }
        }
        let r = self.out.write_all(&self.buf);
        let n = self.buf.len() as u64;
        self.buf.clear();
        r?;
        if let (Some(t), Some(m)) = (self.file.as_mut(), fd_meta(1)) {
            if before.is_some_and(|b| m.len() != b + n) {
                t.exclusive = false;
            }
            t.len = m.len();
        }
        Ok(())
    }

    /// When stdout is a regular file: where it stands (after a flush).
    pub fn position(&self) -> Option<Position> {
        self.file.map(|t| Position { dev: t.dev, ino: t.ino, len: t.len, exclusive: t.exclusive, tail_hash: None })
    }

    /// After a crash: when stdout is the same regular file as at the checkpoint, the daemon its
    /// only writer, and everything after the checkpointed length records (`is_record` says of a
    /// line without its newline), cut it back: those records will be written again. Otherwise
    /// leave it, and stdout is at-least-once.
    pub fn recover(&mut self, at: Option<Position>, is_record: fn(&[u8]) -> bool) -> io::Result<()> {
        let (Some(at), Some(t)) = (at, self.file.as_mut()) else { return Ok(()) };
        if (t.dev, t.ino) != (at.dev, at.ino) || t.len <= at.len {
            return Ok(());
        }
        let why = if !at.exclusive {
            "other writers were seen on it before"
        } else if !t.exclusive {
            "stderr is the same file"
        } else if !after_checkpoint_is_records(at.len, t.len, is_record) {
            "it has lines after the last checkpoint that the daemon did not write"
        } else {
            tracing::info!(from = t.len, to = at.len, "stdout cut back to the last checkpoint; the records after it are written again");
            truncate_stdout(at.len)?;
            t.len = at.len;
            return Ok(());
        };
        t.exclusive = false;
        tracing::warn!(
            "stdout is a file others write to ({why}): it is not cut back to the last checkpoint, so records written after it may appear twice (stdout is at-least-once; the file sink is exactly-once)"
        );
        Ok(())
    }
}

/// Whether the bytes of stdout's file from `from` to `to` are whole record lines (the last one
/// may be torn: a record cut by the crash).
fn after_checkpoint_is_records(from: u64, to: u64, is_record: fn(&[u8]) -> bool) -> bool {
    if to - from > PROOF_LIMIT {
        return false;
    }
    // fd 1 may be write-only (`>>`): read the same file through /proc.
    let Ok(mut f) = File::open("/proc/self/fd/1") else { return false };
    let mut bytes = Vec::new();
    if f.seek(io::SeekFrom::Start(from)).is_err() || f.take(to - from).read_to_end(&mut bytes).is_err() || bytes.len() as u64 != to - from {
        return false;
    }
    let mut lines = bytes.split(|b| *b == b'\n').peekable();
    while let Some(line) = lines.next() {
        let last = lines.peek().is_none();
        let ok = if last { line.is_empty() || line.starts_with(b"{\"type\":\"") } else { is_record(line) };
        if !ok {
            return false;
        }
    }
    true
}

fn truncate_stdout(len: u64) -> io::Result<()> {
    // SAFETY: fd 1 is this process's stdout; ftruncate and fcntl on it do not touch memory.
    unsafe {
        if libc::ftruncate(1, len as libc::off_t) != 0 {
            return Err(io::Error::last_os_error());
        }
        // Without O_APPEND the descriptor's offset may be past the new end: writes would leave
        // a hole.
        let flags = libc::fcntl(1, libc::F_GETFL);
        if flags >= 0 && flags & libc::O_APPEND == 0 {
            libc::lseek(1, 0, libc::SEEK_END);
        }
    }
    Ok(())
}

/// Records as JSON lines appended to a file, rotated by size at checkpoints.
///
/// Records are held in memory until [`FileSink::flush`] (before each checkpoint) writes them in
/// one go and syncs: the file only ever holds whole records up to what was synced. A write or
/// sync that fails for want of space (`ENOSPC`, `EDQUOT`) cuts the file back to what was synced
/// before and keeps the records, so nothing is lost and no record is torn; the daemon's sink
/// then waits and tries again ([`FileSink::flush_waiting`]), pausing reading, reported on
/// `/health` and by `transcriptd_sink_paused{sink="file"}`, and goes on once there is space.
#[derive(Debug)]
pub struct FileSink {
    path: PathBuf,
    max_bytes: u64,
    keep: usize,
    out: File,
    /// Records not written yet.
    pending: Vec<u8>,
    /// The file's length up to what was written and synced: whole records.
    synced: u64,
}

/// Whether an error is for want of space (a full disk or quota): waited out, not fatal.
pub fn is_out_of_space(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) || matches!(e.kind(), io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded)
}

impl FileSink {
    /// Opens (creating) the file for appending.
    pub fn open(path: &Path, max_bytes: u64, keep: usize) -> io::Result<Self> {
        if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d)?;
        }
        let f = OpenOptions::new().read(true).create(true).append(true).open(path)?;
        // The checkpoint that names this file (its device and inode) must not outlive its
        // name: the directory entry is made durable before any checkpoint is written.
        super::atomic::sync_dir(super::atomic::parent_dir(path))?;
        let synced = f.metadata()?.len();
        Ok(FileSink { path: path.to_path_buf(), max_bytes, keep, out: f, pending: Vec::with_capacity(256 << 10), synced })
    }

    /// Takes one record (or several whole ones); written at the next flush.
    pub fn write(&mut self, line: &[u8]) -> io::Result<()> {
        self.pending.extend_from_slice(line);
        Ok(())
    }

    /// Writes what is held and syncs. On failure the file is cut back to what was synced
    /// before and the records stay held: flushing again later writes them whole, once.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let r = (&self.out).write_all(&self.pending).and_then(|()| self.out.sync_data());
        match r {
            Ok(()) => {
                self.synced += self.pending.len() as u64;
                self.pending.clear();
                Ok(())
            }
            Err(e) => {
                // A part written (up to the last byte there was room for) is taken back: the
                // file holds whole records only.
                if let Err(t) = self.out.set_len(self.synced) {
                    tracing::warn!(file = %self.path.display(), error = %t, "cannot cut the file sink back to its last whole record");
                }
                Err(e)
            }
        }
    }

    /// [`FileSink::flush`], waiting out a full disk: tried again with a growing delay (up to 5
    /// s) for as long as it takes, the pause reported (log, `/health`, metric) until it ends.
    /// Any other error is returned.
    pub async fn flush_waiting(&mut self) -> io::Result<()> {
        let mut delay = std::time::Duration::from_millis(100);
        let mut paused = false;
        loop {
            match self.flush() {
                Ok(()) => break,
                Err(e) if is_out_of_space(&e) => {
                    if !paused {
                        paused = true;
                        tracing::warn!(file = %self.path.display(), error = %e, held = self.pending.len(), "the file sink's disk is full: reading pauses, and the records are written once there is space (nothing is lost)");
                        super::pause(&self.key(), Some(format!("{}: {e}", self.path.display())));
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(std::time::Duration::from_secs(5));
                }
                Err(e) => {
                    if paused {
                        super::pause(&self.key(), None);
                    }
                    return Err(e);
                }
            }
        }
        if paused {
            tracing::info!(file = %self.path.display(), "the file sink has space again: reading goes on");
            super::pause(&self.key(), None);
        }
        Ok(())
    }

    fn key(&self) -> String {
        format!("file:{}", self.path.display())
    }

    /// Where the file stands: its device, inode and the length of what was synced.
    pub fn position(&self) -> Option<Position> {
        let m = self.out.metadata().ok()?;
        Some(Position { dev: m.dev(), ino: m.ino(), len: self.synced, exclusive: true, tail_hash: tail_hash(&self.out, self.synced) })
    }

    /// After a crash: cut the file back to the checkpointed length. When the checkpoint names
    /// the newest rotated file (a crash after a rotation, before the next checkpoint), all of
    /// the current file came after the checkpoint: it is emptied.
    pub fn recover(&mut self, at: Option<Position>) -> io::Result<()> {
        let Some(at) = at else { return Ok(()) };
        let m = self.out.metadata()?;
        if names(&at, &self.out, &m) {
            if m.len() > at.len {
                tracing::info!(file = %self.path.display(), from = m.len(), to = at.len, "file sink cut back to the last checkpoint; the records after it are written again");
                self.out.set_len(at.len)?;
            }
            self.synced = self.out.metadata()?.len();
            return Ok(());
        }
        let rotated = self.rotated(1);
        if let Ok(rf) = OpenOptions::new().read(true).write(true).open(&rotated) {
            let r = rf.metadata()?;
            if names(&at, &rf, &r) {
                if r.len() > at.len {
                    rf.set_len(at.len)?;
                }
                tracing::info!(file = %self.path.display(), from = m.len(), to = 0, "file sink cut back to the last checkpoint (in the file rotated away); the records after it are written again");
                self.out.set_len(0)?;
                self.synced = 0;
            }
        }
        Ok(())
    }

    fn rotated(&self, k: usize) -> PathBuf {
        PathBuf::from(format!("{}.{k}", self.path.display()))
    }

    /// Rotates when the file is over its size: `path` → `path.1` → ... → `path.keep` (dropped).
    /// Called right after a checkpoint, so that the checkpointed position is the end of the
    /// file rotated away.
    pub fn rotate_if_full(&mut self) -> io::Result<bool> {
        if self.synced < self.max_bytes {
            return Ok(false);
        }
        let _ = std::fs::remove_file(self.rotated(self.keep));
        for k in (1..self.keep).rev() {
            let _ = std::fs::rename(self.rotated(k), self.rotated(k + 1));
        }
        std::fs::rename(&self.path, self.rotated(1))?;
        self.out = OpenOptions::new().read(true).create(true).append(true).open(&self.path)?;
        self.synced = 0;
        // The next checkpoint names the new file: the renames and its creation are made durable
        // first, or a power loss could leave a checkpoint naming a file whose entry was lost
        // (ext4 orders no rename before a later fsync of another file).
        super::atomic::sync_dir(super::atomic::parent_dir(&self.path))?;
        Ok(true)
    }
}

#[async_trait::async_trait]
impl super::Sink for StdoutSink {
    fn key(&self) -> String {
        "stdout".into()
    }

    async fn recover(&mut self, at: Option<Position>) -> anyhow::Result<()> {
        StdoutSink::recover(self, at, super::record::is_record_line).map_err(|e| anyhow::anyhow!("recovering stdout: {e}"))
    }

    async fn write(&mut self, batch: &super::Batch) -> anyhow::Result<()> {
        if batch.lines.is_empty() {
            return Ok(());
        }
        match &self.filter {
            Some(f) if !batch.records.iter().all(|r| r.passes(f)) => {
                for r in batch.records.iter().filter(|r| r.passes(f)) {
                    r.write_line(&mut self.buf);
                }
            }
            _ => StdoutSink::write(self, &batch.lines),
        }
        // Records reach a reader as soon as they are made.
        StdoutSink::flush(self).map_err(|e| anyhow::anyhow!("writing stdout: {e}"))
    }

    async fn flush(&mut self) -> anyhow::Result<()> {
        StdoutSink::flush(self).map_err(|e| anyhow::anyhow!("writing stdout: {e}"))
    }

    fn position(&self) -> Option<Position> {
        StdoutSink::position(self)
    }
}

#[async_trait::async_trait]
impl super::Sink for FileSink {
    fn key(&self) -> String {
        FileSink::key(self)
    }

    async fn recover(&mut self, at: Option<Position>) -> anyhow::Result<()> {
        FileSink::recover(self, at).map_err(|e| anyhow::anyhow!("recovering the file sink {}: {e}", self.path.display()))
    }

    async fn write(&mut self, batch: &super::Batch) -> anyhow::Result<()> {
        FileSink::write(self, &batch.lines).map_err(|e| anyhow::anyhow!("writing the file sink {}: {e}", self.path.display()))?;
        // Memory stays bounded between checkpoints (a backlog read in one go).
        if self.pending.len() >= 8 << 20 {
            self.flush_waiting().await.map_err(|e| anyhow::anyhow!("writing the file sink {}: {e}", self.path.display()))?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> anyhow::Result<()> {
        self.flush_waiting().await.map_err(|e| anyhow::anyhow!("flushing the file sink {}: {e}", self.path.display()))
    }

    fn position(&self) -> Option<Position> {
        FileSink::position(self)
    }

    async fn checkpointed(&mut self) -> anyhow::Result<bool> {
        // The checkpoint named the end of the file; rotated now, the next one names the new file.
        self.rotate_if_full().map_err(|e| anyhow::anyhow!("rotating the file sink {}: {e}", self.path.display()))
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
        // A crash after the rotation, before the next checkpoint: the new file is all after
        // the checkpoint (which names the rotated one).
        let at = Position { len: std::fs::metadata(d.path().join("f.jsonl.1")).unwrap().len(), ..at };
        s.write(b"{\"new\":1}\n").unwrap();
        s.flush().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\"new\":1}\n");
        let mut again = FileSink::open(&p, 50, 2).unwrap();
        again.recover(Some(at)).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "");
        assert_eq!(std::fs::read_to_string(d.path().join("f.jsonl.1")).unwrap().lines().count(), 10);
    }
}
