//! Durable file writes.
//!
//! A file is replaced atomically: written to a temporary file in the same directory, synced,
//! given the permissions of the file it replaces, renamed over it, and the directory synced, so
//! that a crash leaves either the old file or the new one, never a mix. Appends write whole
//! lines in one `write` on an append-mode handle (seed 003), so that concurrent writers
//! interleave lines, never parts of lines.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// A file being written that replaces `dest` on [`AtomicFile::commit`]. Dropped without a
/// commit, it leaves nothing behind.
#[derive(Debug)]
pub struct AtomicFile {
    tmp: BufWriter<tempfile::NamedTempFile>,
    dest: PathBuf,
    permissions: Option<Permissions>,
}

impl AtomicFile {
    /// Starts writing a replacement for `dest` (its directory must exist). Writes of 64 KiB or
    /// more go straight to the file, unbuffered. `permissions`, when
    /// given, are set on the new file before it takes `dest`'s place.
    pub fn create(dest: &Path, permissions: Option<Permissions>) -> io::Result<Self> {
        let dir = parent_dir(dest);
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = tempfile::Builder::new().prefix(&format!(".{name}.")).suffix(".tmp").tempfile_in(dir)?;
        Ok(AtomicFile { tmp: BufWriter::with_capacity(64 << 10, tmp), dest: dest.to_path_buf(), permissions })
    }

    /// The temporary file's path (to read back what was written before committing).
    pub fn path(&self) -> &Path {
        self.tmp.get_ref().path()
    }

    /// Flushes what is buffered (so that [`AtomicFile::path`] can be read).
    pub fn flush(&mut self) -> io::Result<()> {
        self.tmp.flush()
    }

    /// Appends the first `len` bytes of `src`, copied by the kernel where it can
    /// (`copy_file_range`, `sendfile`): no pass through user space. Fails if `src` is shorter.
    pub fn copy_prefix(&mut self, src: &Path, len: u64) -> io::Result<()> {
        self.tmp.flush()?;
        let copied = io::copy(&mut File::open(src)?.take(len), self.tmp.get_mut().as_file_mut())?;
        if copied < len {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("{} shrank while being copied", src.display())));
        }
        Ok(())
    }

    /// Syncs the data, renames it over the destination and syncs the directory.
    pub fn commit(self) -> io::Result<()> {
        let tmp = self.tmp.into_inner().map_err(|e| e.into_error())?;
        if let Some(p) = self.permissions {
            tmp.as_file().set_permissions(p)?;
        }
        tmp.as_file().sync_all()?;
        tmp.persist(&self.dest).map_err(|e| e.error)?;
        sync_dir(parent_dir(&self.dest))
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tmp.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.tmp.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.tmp.flush()
    }
}

fn parent_dir(p: &Path) -> &Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Syncs a directory, so that a rename in it survives a crash.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Writes `bytes` (`dest` in whole, atomically) with `permissions`.
pub fn write_file(dest: &Path, bytes: &[u8], permissions: Option<Permissions>) -> io::Result<()> {
    let mut f = AtomicFile::create(dest, permissions)?;
    f.write_all(bytes)?;
    f.commit()
}

/// Copies `src` to `dest` atomically, keeping `src`'s permissions.
pub fn copy_file(src: &Path, dest: &Path) -> io::Result<()> {
    let perms = fs::metadata(src)?.permissions();
    let mut f = AtomicFile::create(dest, Some(perms))?;
    // File to file: the kernel copies (copy_file_range, sendfile).
    io::copy(&mut File::open(src)?, f.tmp.get_mut().as_file_mut())?;
    f.commit()
}

/// An append-mode handle on `path`, created with `permissions` (before the umask) if given.
fn append_handle(path: &Path, permissions: Option<&Permissions>) -> io::Result<File> {
    let mut open = OpenOptions::new();
    open.create(true).append(true);
    if let Some(p) = permissions {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        open.mode(p.mode() & 0o777);
    }
    open.open(path)
}

/// Appends whole lines to `path` in one `write` on an append-mode handle, then syncs. `lines`
/// must end with a newline. A new file gets `permissions` (before the umask), or 0666 less the
/// umask: the rejects of a 0600 transcript hold its lines and stay as private as it is.
pub fn append_lines(path: &Path, lines: &[u8], permissions: Option<&Permissions>) -> io::Result<()> {
    debug_assert!(lines.is_empty() || lines.ends_with(b"\n"));
    if lines.is_empty() {
        return Ok(());
    }
    let mut f = append_handle(path, permissions)?;
    // One write call for the whole batch: an append-mode write of a regular file is not
    // interleaved with other appends.
    let n = f.write(lines)?;
    if n < lines.len() {
        f.write_all(&lines[n..])?;
    }
    f.sync_data()
}

/// Whole lines to append to a file later (repair's rejects: written only once the repaired
/// transcript is complete): held in memory up to a limit, beyond it in an unnamed temporary
/// file, so that memory stays flat however much a file loses. Write errors are kept and
/// returned by [`Spool::append_to`].
#[derive(Debug)]
pub struct Spool {
    mem: Vec<u8>,
    limit: usize,
    dir: PathBuf,
    disk: Option<BufWriter<File>>,
    failed: Option<io::Error>,
}

impl Spool {
    /// Bytes held in memory before the spool moves to disk.
    pub const LIMIT: usize = 4 << 20;

    /// A spool that moves past `limit` bytes to an unnamed file in the directory of `beside`
    /// (the file it will be appended to, or one next to it).
    pub fn new(beside: &Path, limit: usize) -> Self {
        Spool { mem: Vec::new(), limit, dir: parent_dir(beside).to_path_buf(), disk: None, failed: None }
    }

    /// Adds bytes (whole lines, or pieces of one in order).
    pub fn push(&mut self, bytes: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        if self.disk.is_none() && self.mem.len() + bytes.len() <= self.limit {
            self.mem.extend_from_slice(bytes);
            return;
        }
        if let Err(e) = self.spill(bytes) {
            self.failed = Some(e);
        }
    }

    fn spill(&mut self, bytes: &[u8]) -> io::Result<()> {
        let disk = match &mut self.disk {
            Some(d) => d,
            None => self.disk.insert(BufWriter::with_capacity(256 << 10, tempfile::tempfile_in(&self.dir)?)),
        };
        disk.write_all(&self.mem)?;
        self.mem = Vec::new();
        disk.write_all(bytes)
    }

    /// Whether nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.mem.is_empty() && self.disk.is_none()
    }

    /// Appends everything pushed to `path`, then syncs: in one write (see [`append_lines`]) when
    /// it stayed in memory; copied from the spooled file in several writes otherwise, so then
    /// another process appending to the same file at the same moment could land inside a line.
    pub fn append_to(self, path: &Path, permissions: Option<&Permissions>) -> io::Result<()> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let Some(disk) = self.disk else { return append_lines(path, &self.mem, permissions) };
        let mut spooled = disk.into_inner().map_err(io::IntoInnerError::into_error)?;
        spooled.seek(io::SeekFrom::Start(0))?;
        let mut f = append_handle(path, permissions)?;
        io::copy(&mut spooled, &mut f)?;
        f.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_spool_appends_what_it_held_in_memory_or_on_disk() {
        let d = tempfile::tempdir().unwrap();
        for limit in [0, 10, 1 << 20] {
            let p = d.path().join(format!("r{limit}.jsonl"));
            fs::write(&p, "earlier\n").unwrap();
            let mut s = Spool::new(&p, limit);
            assert!(s.is_empty());
            for piece in ["{\"a\":1}\n", "{\"b\":", "2}\n", "{\"c\":3}\n"] {
                s.push(piece.as_bytes());
            }
            assert!(!s.is_empty());
            s.append_to(&p, None).unwrap();
            assert_eq!(fs::read_to_string(&p).unwrap(), "earlier\n{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n", "limit {limit}");
        }
        // A spool that cannot reach its directory reports it at the end.
        let mut s = Spool::new(&d.path().join("missing/r.jsonl"), 0);
        s.push(b"x\n");
        assert!(s.append_to(&d.path().join("r.jsonl"), None).is_err());
    }

    #[test]
    fn replaces_atomically_and_keeps_permissions() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.jsonl");
        fs::write(&p, "old\n").unwrap();
        fs::set_permissions(&p, Permissions::from_mode(0o600)).unwrap();
        let perms = fs::metadata(&p).unwrap().permissions();
        let mut f = AtomicFile::create(&p, Some(perms)).unwrap();
        f.write_all(b"new\n").unwrap();
        // Not visible before the commit.
        assert_eq!(fs::read_to_string(&p).unwrap(), "old\n");
        f.commit().unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new\n");
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn dropping_without_commit_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.jsonl");
        let mut f = AtomicFile::create(&p, None).unwrap();
        f.write_all(b"x").unwrap();
        drop(f);
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn concurrent_appends_interleave_whole_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.jsonl");
        std::thread::scope(|s| {
            for w in 0..8 {
                let p = p.clone();
                s.spawn(move || {
                    for i in 0..200 {
                        let line = format!("{{\"writer\":{w},\"i\":{i},\"pad\":\"{}\"}}\n", "x".repeat(3000));
                        append_lines(&p, line.as_bytes(), None).unwrap();
                    }
                });
            }
        });
        let text = fs::read_to_string(&p).unwrap();
        assert_eq!(text.lines().count(), 1600);
        for l in text.lines() {
            let v: serde_json::Value = serde_json::from_str(l).expect("every line whole");
            assert_eq!(v["pad"].as_str().unwrap().len(), 3000);
        }
    }
}
