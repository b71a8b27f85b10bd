//! Durable file writes.
//!
//! A file is replaced atomically: written to a temporary file in the same directory, synced,
//! given the permissions of the file it replaces, renamed over it, and the directory synced, so
//! that a crash leaves either the old file or the new one, never a mix. Appends write whole
//! lines in one `write` on an append-mode handle (as `Harness\Transcript` does, docs/requirements.md), so that concurrent writers
//! interleave lines, never parts of lines.

use crate::sources::regular::{self, Follow};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

/// What a replacement keeps of the file it replaces (or of the file it derives from): the
/// permission bits and, when given, the owner and group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keep {
    /// Permission bits (`0o7777` at most), set after the owner (a `chown` clears set-id bits).
    pub mode: u32,
    /// Owner and group.
    pub owner: Option<(u32, u32)>,
    /// Whether failing to set the owner (not permitted: another user's file, and not root)
    /// fails the write. Otherwise the new file keeps the writer's owner.
    pub owner_required: bool,
}

impl Keep {
    /// Mode, owner and group of `meta`; `owner_required` as for the field.
    pub fn of(meta: &Metadata, owner_required: bool) -> Keep {
        Keep { mode: meta.mode() & 0o7777, owner: Some((meta.uid(), meta.gid())), owner_required }
    }

    /// Only a mode.
    pub fn mode(mode: u32) -> Keep {
        Keep { mode: mode & 0o7777, owner: None, owner_required: false }
    }

    /// Sets owner, then mode, on `file`.
    pub fn apply(&self, file: &File) -> io::Result<()> {
        if let Some((uid, gid)) = self.owner {
            let m = file.metadata()?;
            if (m.uid(), m.gid()) != (uid, gid) {
                if let Err(e) = std::os::unix::fs::fchown(file, Some(uid), Some(gid)) {
                    if self.owner_required || e.kind() != io::ErrorKind::PermissionDenied {
                        return Err(io::Error::new(e.kind(), format!("cannot keep owner {uid}:{gid}: {e}")));
                    }
                }
            }
        }
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(fs::Permissions::from_mode(self.mode))
    }
}

/// A file being written that replaces `dest` on [`AtomicFile::commit`]. Dropped without a
/// commit, it leaves nothing behind.
///
/// On Linux it is an unnamed file (`O_TMPFILE`) in `dest`'s directory: a crash or `kill -9`
/// while it is written leaves nothing at all. [`AtomicFile::commit`] links it under a temporary
/// name and renames that over `dest` (two system calls: the only moment a crash leaves a
/// `.<name>.transcriptd-<pid>-*.tmp` file, complete and synced). Where unnamed files are not
/// supported (FUSE, NFS) it is a named temporary file from the start, which a crash while it is
/// written leaves behind, partial; the next atomic write of `dest` in any process removes the
/// ones whose writer is gone ([`sweep`]), and the daemon sweeps its state directory at start.
#[derive(Debug)]
pub struct AtomicFile {
    file: BufWriter<File>,
    /// The temporary name, when the file has one (no `O_TMPFILE`).
    named: Option<tempfile::TempPath>,
    dest: PathBuf,
    keep: Option<Keep>,
    synced: bool,
}

impl AtomicFile {
    /// Starts writing a replacement for `dest` (its directory must exist). Writes of 64 KiB or
    /// more go straight to the file, unbuffered. `keep`, when given, is applied to the new file
    /// before it takes `dest`'s place.
    pub fn create(dest: &Path, keep: Option<Keep>) -> io::Result<Self> {
        let dir = parent_dir(dest);
        sweep_once(dest);
        let (file, named) = match unnamed_in(dir) {
            Ok(f) => (f, None),
            Err(_) => {
                let (f, p) = tempfile::Builder::new().prefix(&temp_prefix(dest)).suffix(".tmp").tempfile_in(dir)?.into_parts();
                (f, Some(p))
            }
        };
        Ok(AtomicFile { file: BufWriter::with_capacity(64 << 10, file), named, dest: dest.to_path_buf(), keep, synced: false })
    }

    /// The destination.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Flushes what is buffered (so that [`AtomicFile::read_back`] sees it).
    pub fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }

    /// A reader of what was written so far, from its start (positional reads: the write
    /// position is not moved).
    pub fn read_back(&mut self) -> io::Result<regular::ReadAt<'_>> {
        self.file.flush()?;
        Ok(regular::ReadAt::new(self.file.get_ref(), 0, None))
    }

    /// Appends bytes `[from, from + len)` of `src`, copied by the kernel where it can
    /// (`copy_file_range`): no pass through user space. Fails if `src` is shorter.
    pub fn copy_from(&mut self, src: &File, from: u64, len: u64) -> io::Result<()> {
        self.file.flush()?;
        copy_range(src, from, len, self.file.get_mut())
    }

    /// Applies the kept owner and mode and syncs the data: what [`AtomicFile::commit`] does
    /// first, done earlier when the caller wants the slow part behind it before a last check.
    pub fn sync(&mut self) -> io::Result<()> {
        self.file.flush()?;
        if let Some(k) = &self.keep {
            k.apply(self.file.get_ref())?;
        }
        self.file.get_ref().sync_all()?;
        self.synced = true;
        Ok(())
    }

    /// Syncs (unless [`AtomicFile::sync`] was called), renames the new file over the
    /// destination and syncs the directory.
    pub fn commit(self) -> io::Result<()> {
        self.commit_file().map(drop)
    }

    /// [`AtomicFile::commit`], returning the new file (open for reading and writing).
    pub fn commit_file(mut self) -> io::Result<File> {
        if !self.synced {
            self.sync()?;
        }
        let file = self.file.into_inner().map_err(|e| e.into_error())?;
        let dir = parent_dir(&self.dest).to_path_buf();
        match self.named {
            Some(p) => p.persist(&self.dest).map_err(|e| e.error)?,
            None => match link_unnamed(&file, &self.dest) {
                Ok(tmp) => {
                    if let Err(e) = fs::rename(&tmp, &self.dest) {
                        let _ = fs::remove_file(&tmp);
                        return Err(e);
                    }
                }
                Err(e) => {
                    // No /proc and no CAP_DAC_READ_SEARCH: the unnamed file cannot be linked.
                    // Copy it into a named one instead.
                    tracing::debug!(error = %e, dest = %self.dest.display(), "cannot link an unnamed file: copying it");
                    let (mut named, path) = tempfile::Builder::new().prefix(&temp_prefix(&self.dest)).suffix(".tmp").tempfile_in(&dir)?.into_parts();
                    copy_range(&file, 0, file.metadata()?.len(), &mut named)?;
                    if let Some(k) = &self.keep {
                        k.apply(&named)?;
                    }
                    named.sync_all()?;
                    path.persist(&self.dest).map_err(|e| e.error)?;
                    sync_dir(&dir)?;
                    return Ok(named);
                }
            },
        }
        sync_dir(&dir)?;
        Ok(file)
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// What marks a temporary name as the project's: `.<name>.transcriptd-<pid>-<random>.tmp`.
const TEMP_MARK: &str = ".transcriptd-";

/// The start of a temporary name beside `dest`: `.<name>.transcriptd-<pid>-` (a random part
/// and `.tmp` follow). The pid tells a temporary file whose writer died (a crash, `kill -9`
/// while it was written) from one being written: see [`sweep`].
fn temp_prefix(dest: &Path) -> String {
    format!(".{}{TEMP_MARK}{}-", dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(), std::process::id())
}

/// A temporary file name of the project's: the name of the file it was to replace and the pid
/// of its writer. `legacy` also takes the names of builds before the pid was in them
/// (`.<name>.<6 or more letters and digits>.tmp`), which say nothing of their writer.
fn temp_name_parts(file_name: &str, legacy: bool) -> Option<(&str, Option<u32>)> {
    let inner = file_name.strip_prefix('.')?.strip_suffix(".tmp")?;
    if let Some(at) = inner.rfind(TEMP_MARK) {
        let (name, rest) = (&inner[..at], &inner[at + TEMP_MARK.len()..]);
        let (pid, random) = rest.split_once('-')?;
        if !name.is_empty() && !random.is_empty() && random.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Some((name, Some(pid.parse().ok()?)));
        }
        return None;
    }
    let (name, random) = inner.rsplit_once('.')?;
    (legacy && !name.is_empty() && random.len() >= 6 && random.bytes().all(|b| b.is_ascii_alphanumeric())).then_some((name, None))
}

/// Whether process `pid` exists (in this pid namespace).
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: signal 0 checks for the process without sending anything.
    unsafe { libc::kill(pid, 0) == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH) }
}

/// Removes the project's stale temporary files in `dir`: named as [`temp_prefix`] names them,
/// regular files owned by this process's user, whose writer is gone (its pid names no
/// process, and it is not this one). Where unnamed files (`O_TMPFILE`) are not supported
/// (FUSE, NFS), a crash while a file is written leaves its named temporary file, often partial;
/// this is what takes it away. `only`: only the temporary files of the file of that name.
/// `legacy` (for a directory the caller holds exclusively: the daemon's locked state
/// directory) also removes those of older builds, which carry no pid. Returns the paths
/// removed.
pub fn sweep(dir: &Path, only: Option<&str>, legacy: bool) -> io::Result<Vec<PathBuf>> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let mut removed = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        let file_name = e.file_name();
        let Some(n) = file_name.to_str() else { continue };
        let Some((name, pid)) = temp_name_parts(n, legacy) else { continue };
        if only.is_some_and(|o| o != name) {
            continue;
        }
        if pid.is_some_and(|p| p == std::process::id() || alive(p)) {
            continue;
        }
        let path = e.path();
        let Ok(m) = fs::symlink_metadata(&path) else { continue };
        if !m.is_file() || m.uid() != me {
            continue;
        }
        match fs::remove_file(&path) {
            Ok(()) => {
                tracing::info!(file = %path.display(), bytes = m.len(), "removed a temporary file a stopped write left");
                removed.push(path);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(file = %path.display(), error = %e, "cannot remove a temporary file a stopped write left"),
        }
    }
    Ok(removed)
}

/// [`sweep`] of the temporary files of `dest`, once per destination in this process (at its
/// first atomic write: a checkpoint is written every second; its directory is read once).
fn sweep_once(dest: &Path) {
    static SWEPT: std::sync::Mutex<Option<std::collections::HashSet<PathBuf>>> = std::sync::Mutex::new(None);
    let Some(name) = dest.file_name().and_then(|n| n.to_str()) else { return };
    let first = SWEPT.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get_or_insert_with(Default::default).insert(dest.to_path_buf());
    if first {
        if let Err(e) = sweep(parent_dir(dest), Some(name), false) {
            tracing::debug!(dir = %parent_dir(dest).display(), error = %e, "cannot look for stale temporary files");
        }
    }
}

/// An unnamed file in `dir` (`O_TMPFILE`), mode 0600.
#[cfg(target_os = "linux")]
fn unnamed_in(dir: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new().read(true).write(true).mode(0o600).custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC).open(dir)
}

#[cfg(not(target_os = "linux"))]
fn unnamed_in(_dir: &Path) -> io::Result<File> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Gives the unnamed `file` a fresh temporary name beside `dest`; returns it.
fn link_unnamed(file: &File, dest: &Path) -> io::Result<PathBuf> {
    let dir = parent_dir(dest);
    let proc_path = std::ffi::CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())).expect("no NUL");
    for attempt in 0u32..100 {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let name = format!("{}{nanos:x}{attempt}.tmp", temp_prefix(dest));
        let tmp = dir.join(name);
        let c_tmp = std::ffi::CString::new(tmp.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
        // SAFETY: both paths are valid NUL-terminated strings; no memory is kept.
        let mut r = unsafe { libc::linkat(libc::AT_FDCWD, proc_path.as_ptr(), libc::AT_FDCWD, c_tmp.as_ptr(), libc::AT_SYMLINK_FOLLOW) };
        if r != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOENT) {
            // No /proc: linking the descriptor itself needs CAP_DAC_READ_SEARCH.
            // SAFETY: an empty path with AT_EMPTY_PATH names the descriptor.
            r = unsafe { libc::linkat(file.as_raw_fd(), c"".as_ptr(), libc::AT_FDCWD, c_tmp.as_ptr(), libc::AT_EMPTY_PATH) };
        }
        if r == 0 {
            return Ok(tmp);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::AlreadyExists {
            return Err(e);
        }
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, "no free temporary name"))
}

/// Copies bytes `[from, from + len)` of `src` to the end of what was written to `dst` (its
/// current position): `copy_file_range` where the kernel has it, else reads and writes. Fails
/// if `src` is shorter.
pub fn copy_range(src: &File, from: u64, len: u64, dst: &mut File) -> io::Result<()> {
    let (mut off, end) = (from as i64, from + len);
    while (off as u64) < end {
        let want = ((end - off as u64).min(1 << 30)) as usize;
        // SAFETY: both descriptors are open; `off` is a valid i64 the kernel updates; the
        // destination offset is its file position (null).
        let n = unsafe { libc::copy_file_range(src.as_raw_fd(), &mut off, dst.as_raw_fd(), std::ptr::null_mut(), want, 0) };
        if n > 0 {
            continue;
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the file shrank while being copied"));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ENOSYS | libc::EXDEV | libc::EINVAL | libc::EOPNOTSUPP | libc::EBADF) => return send_range(src, off as u64, end, dst),

            _ => return Err(e),
        }
    }
    Ok(())
}

/// [`copy_range`] where `copy_file_range` cannot (across file systems on older kernels, into
/// an append-mode file): `sendfile` from an offset, else reads and writes of 256 KiB.
fn send_range(src: &File, mut off: u64, end: u64, dst: &mut File) -> io::Result<()> {
    let short = || io::Error::new(io::ErrorKind::UnexpectedEof, "the file shrank while being copied");
    while off < end {
        let want = ((end - off).min(1 << 30)) as usize;
        let mut at = off as libc::off_t;
        // SAFETY: both descriptors are open; `at` is a valid off_t the kernel updates.
        let n = unsafe { libc::sendfile(dst.as_raw_fd(), src.as_raw_fd(), &mut at, want) };
        if n > 0 {
            off = at as u64;
            continue;
        }
        if n == 0 {
            return Err(short());
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EINVAL | libc::ENOSYS) => break,
            _ => return Err(e),
        }
    }
    let mut buf = vec![0u8; ((end - off) as usize).min(256 << 10)];
    while off < end {
        let n = ((end - off) as usize).min(buf.len());
        let got = src.read_at(&mut buf[..n], off)?;
        if got == 0 {
            return Err(short());
        }
        dst.write_all(&buf[..got])?;
        off += got as u64;
    }
    Ok(())
}

/// The directory a path's file is in: `.` for a bare name (whose `parent()` is empty).
pub fn parent_dir(p: &Path) -> &Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Syncs a directory, so that a rename in it survives a crash (an empty path is the current
/// directory, as a bare file name's `parent()` is).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    File::open(dir)?.sync_all()
}

/// Writes `bytes` (`dest` in whole, atomically), keeping `keep`.
pub fn write_file(dest: &Path, bytes: &[u8], keep: Option<Keep>) -> io::Result<()> {
    let mut f = AtomicFile::create(dest, keep)?;
    f.write_all(bytes)?;
    f.commit()
}

/// Copies the first `len` bytes of `src` to `dest` atomically, with `keep`.
pub fn copy_file(src: &File, len: u64, dest: &Path, keep: Option<Keep>) -> io::Result<()> {
    let mut f = AtomicFile::create(dest, keep)?;
    f.copy_from(src, 0, len)?;
    f.commit()
}

/// An append-mode handle on `path`, created with `mode` (before the umask) if given. A symbolic
/// link is not followed and anything but a regular file is refused (a FIFO is never opened for
/// a blocking write).
fn append_handle(path: &Path, mode: Option<u32>) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut open = OpenOptions::new();
    open.create(true).append(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    if let Some(m) = mode {
        open.mode(m & 0o777);
    }
    let f = open.open(path)?;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(regular::not_regular_error(path, regular::FileKind::of(m.file_type())));
    }
    regular::clear_nonblock(&f)?;
    Ok(f)
}

/// Appends whole lines to `path` in one `write` on an append-mode handle, then syncs. `lines`
/// must end with a newline. A new file gets `mode` (before the umask), or 0666 less the umask.
pub fn append_lines(path: &Path, lines: &[u8], mode: Option<u32>) -> io::Result<()> {
    debug_assert!(lines.is_empty() || lines.ends_with(b"\n"));
    if lines.is_empty() {
        return Ok(());
    }
    let mut f = append_handle(path, mode)?;
    // One write call for the whole batch: an append-mode write of a regular file is not
    // interleaved with other appends.
    let n = f.write(lines)?;
    if n < lines.len() {
        f.write_all(&lines[n..])?;
    }
    f.sync_data()
}

/// What [`Spool::replace_into`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merged {
    /// Nothing was pushed: the file is untouched.
    Nothing,
    /// The file was replaced by its old content followed by what was pushed.
    Written,
    /// The file already ended with exactly what was pushed (an earlier run was stopped after
    /// writing it): untouched.
    AlreadyThere,
}

/// Whole lines to add to a file later (repair's rejects: written only once the repaired
/// transcript is complete): held in memory up to a limit, beyond it in an unnamed temporary
/// file, so that memory stays flat however much a file loses. Write errors are kept and
/// returned by [`Spool::replace_into`].
#[derive(Debug)]
pub struct Spool {
    mem: Vec<u8>,
    limit: usize,
    dir: PathBuf,
    disk: Option<BufWriter<File>>,
    len: u64,
    failed: Option<io::Error>,
}

impl Spool {
    /// Bytes held in memory before the spool moves to disk.
    pub const LIMIT: usize = 4 << 20;

    /// A spool that moves past `limit` bytes to an unnamed file in the directory of `beside`
    /// (the file it will be added to, or one next to it).
    pub fn new(beside: &Path, limit: usize) -> Self {
        Spool { mem: Vec::new(), limit, dir: parent_dir(beside).to_path_buf(), disk: None, len: 0, failed: None }
    }

    /// Adds bytes (whole lines, or pieces of one in order).
    pub fn push(&mut self, bytes: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        self.len += bytes.len() as u64;
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
        self.len == 0
    }

    /// Bytes pushed.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Adds everything pushed to the end of the file at `path`, atomically: a new file holding
    /// the old content (a newline added if its last line had none) and then the pushed bytes,
    /// synced and renamed over `path`. So a crash leaves the old file or the new one, never a
    /// torn record; a descriptor someone holds on the old file never sees the new lines; and
    /// the new file gets `keep`'s owner and its mode narrowed by the old file's (never wider than
    /// either). A symbolic link at `path` is not followed: it is an error, and nothing is
    /// written. When the file already ends with exactly the pushed bytes (an earlier run
    /// stopped after writing them), it is left as it is.
    pub fn replace_into(self, path: &Path, keep: Keep) -> io::Result<Merged> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if self.len == 0 {
            return Ok(Merged::Nothing);
        }
        let spooled = match self.disk {
            Some(d) => Some(d.into_inner().map_err(io::IntoInnerError::into_error)?),
            None => None,
        };
        let existing = match regular::open(path, Follow::No) {
            Ok(x) => Some(x),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) if regular::is_symlink_refusal(&e) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is a symbolic link: not followed, so the removed lines are not written through it (move it away)", path.display()),
                ))
            }
            Err(e) => return Err(e),
        };
        let pushed = Pushed { mem: &self.mem, disk: spooled.as_ref(), len: self.len };
        let mut mode = keep.mode & 0o666;
        if let Some((f, m)) = &existing {
            if pushed.is_tail_of(f, m.len())? {
                return Ok(Merged::AlreadyThere);
            }
            mode &= m.mode() & 0o666;
        }
        let mut out = AtomicFile::create(path, Some(Keep { mode, ..keep }))?;
        if let Some((f, m)) = &existing {
            out.copy_from(f, 0, m.len())?;
            let mut last = [0u8];
            if m.len() > 0 && f.read_at(&mut last, m.len() - 1)? == 1 && last[0] != b'\n' {
                out.write_all(b"\n")?;
            }
        }
        match pushed.disk {
            Some(d) => out.copy_from(d, 0, pushed.len)?,
            None => out.write_all(pushed.mem)?,
        }
        out.commit()?;
        Ok(Merged::Written)
    }
}

/// The bytes a [`Spool`] holds, in memory or on disk.
struct Pushed<'a> {
    mem: &'a [u8],
    disk: Option<&'a File>,
    len: u64,
}

impl Pushed<'_> {
    /// Whether `file` (of length `len`) ends with these bytes, starting a line.
    fn is_tail_of(&self, file: &File, len: u64) -> io::Result<bool> {
        if len < self.len {
            return Ok(false);
        }
        let start = len - self.len;
        let mut one = [0u8];
        if start > 0 && (file.read_at(&mut one, start - 1)? != 1 || one[0] != b'\n') {
            return Ok(false);
        }
        let (mut a, mut b) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
        let mut at = 0u64;
        while at < self.len {
            let n = ((self.len - at) as usize).min(a.len());
            file.read_exact_at(&mut a[..n], start + at)?;
            let ours: &[u8] = match self.disk {
                Some(d) => {
                    d.read_exact_at(&mut b[..n], at)?;
                    &b[..n]
                }
                None => &self.mem[at as usize..at as usize + n],
            };
            if a[..n] != *ours {
                return Ok(false);
            }
            at += n as u64;
        }
        Ok(true)
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
            assert_eq!(s.replace_into(&p, Keep::mode(0o644)).unwrap(), Merged::Written);
            assert_eq!(fs::read_to_string(&p).unwrap(), "earlier\n{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n", "limit {limit}");
        }
        // A spool that cannot reach its directory reports it at the end.
        let mut s = Spool::new(&d.path().join("missing/r.jsonl"), 0);
        s.push(b"x\n");
        assert!(s.replace_into(&d.path().join("r.jsonl"), Keep::mode(0o644)).is_err());
    }

    #[test]
    fn a_spool_is_added_once_never_through_a_link_and_never_wider() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.jsonl");
        let spool = |text: &str| {
            let mut s = Spool::new(&p, 4);
            s.push(text.as_bytes());
            s
        };
        // A last line without its newline gets one before the new records.
        fs::write(&p, "torn").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(spool("{\"a\":1}\n").replace_into(&p, Keep::mode(0o600)).unwrap(), Merged::Written);
        assert_eq!(fs::read_to_string(&p).unwrap(), "torn\n{\"a\":1}\n");
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600, "never wider than the transcript");
        // The same records again (a run stopped after writing them): not added twice.
        assert_eq!(spool("{\"a\":1}\n").replace_into(&p, Keep::mode(0o600)).unwrap(), Merged::AlreadyThere);
        // ... but only as whole lines at the end.
        assert_eq!(spool("1}\n").replace_into(&p, Keep::mode(0o600)).unwrap(), Merged::Written);
        assert_eq!(fs::read_to_string(&p).unwrap(), "torn\n{\"a\":1}\n1}\n");
        // A link is not followed.
        let target = d.path().join("target");
        fs::write(&target, "x\n").unwrap();
        let link = d.path().join("l.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut s = Spool::new(&link, 4);
        s.push(b"{}\n");
        assert!(s.replace_into(&link, Keep::mode(0o600)).unwrap_err().to_string().contains("symbolic link"));
        assert_eq!(fs::read_to_string(&target).unwrap(), "x\n");
        assert!(Spool::new(&p, 4).replace_into(&p, Keep::mode(0o600)).is_ok_and(|m| m == Merged::Nothing));
    }

    #[test]
    fn an_unnamed_file_leaves_nothing_until_committed_and_can_be_read_back() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.jsonl");
        let mut f = AtomicFile::create(&p, Some(Keep::mode(0o640))).unwrap();
        f.write_all(b"abc\n").unwrap();
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 0, "nothing visible while written");
        let mut back = String::new();
        std::io::Read::read_to_string(&mut f.read_back().unwrap(), &mut back).unwrap();
        assert_eq!(back, "abc\n");
        f.write_all(b"def\n").unwrap();
        let file = f.commit_file().unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "abc\ndef\n");
        assert_eq!(file.metadata().unwrap().permissions().mode() & 0o777, 0o640);
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn replaces_atomically_and_keeps_permissions() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.jsonl");
        fs::write(&p, "old\n").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
        let keep = Keep::of(&fs::metadata(&p).unwrap(), true);
        let mut f = AtomicFile::create(&p, Some(keep)).unwrap();
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
