//! Opening transcripts as regular files, and only as regular files.
//!
//! A path named `*.jsonl` is not always a file: it can be a FIFO (whose open blocks until a
//! writer comes, and whose read blocks until it writes), a socket, a device (whose open can have
//! side effects: a tape rewinds, a terminal becomes controlling), a directory, or a symbolic link
//! an adversary planted. Every reader of transcripts in the verbs and the sessions index opens
//! through [`open`] (the daemon's tailer too, with [`Follow::No`], through its adapter
//! `daemon/open.rs`), which:
//!
//! 1. looks at the path first (`stat`, or `lstat` with [`Follow::No`]) and refuses anything but
//!    a regular file without opening it;
//! 2. opens it read-only with `O_NONBLOCK | O_NOCTTY` (and `O_NOFOLLOW` with [`Follow::No`]), so
//!    that a FIFO swapped in between the look and the open cannot block the open, nor a terminal
//!    become the controlling one;
//! 3. checks with `fstat` on the open descriptor that it is still a regular file and still the
//!    file looked at (device and inode), then clears `O_NONBLOCK` (it means nothing for a
//!    regular file, but reads stay plain).
//!
//! A refused path is an [`io::Error`] whose [`not_regular`] says what it was, so callers can
//! skip it with a warning rather than fail. [`Identity`] is what the repair re-checks just
//! before it replaces a file: device, inode, size and modification time.

use std::fs::{self, File, Metadata};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Whether [`open`] follows a symbolic link at the last component of the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// Follow it (a link to a regular file opens that file).
    Yes,
    /// Refuse it (`O_NOFOLLOW`): for files transcriptd writes, where a planted link must not
    /// redirect the write.
    No,
}

/// What a path is, for messages and skip records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A symbolic link (only seen with [`Follow::No`]).
    Symlink,
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
}

impl FileKind {
    /// The kind of a file type.
    pub fn of(t: fs::FileType) -> FileKind {
        if t.is_file() {
            FileKind::Regular
        } else if t.is_dir() {
            FileKind::Directory
        } else if t.is_symlink() {
            FileKind::Symlink
        } else if t.is_fifo() {
            FileKind::Fifo
        } else if t.is_socket() {
            FileKind::Socket
        } else if t.is_char_device() {
            FileKind::CharDevice
        } else {
            FileKind::BlockDevice
        }
    }

    /// "a FIFO", "a socket", ... for messages.
    pub fn describe(self) -> &'static str {
        match self {
            FileKind::Regular => "a regular file",
            FileKind::Directory => "a directory",
            FileKind::Symlink => "a symbolic link",
            FileKind::Fifo => "a FIFO",
            FileKind::Socket => "a socket",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
        }
    }
}

/// The error inside an [`io::Error`] for a path that is not a regular file.
#[derive(Debug, thiserror::Error)]
#[error("{path}: not a regular file ({kind}): not opened", kind = kind.describe())]
pub struct NotRegular {
    /// The path.
    pub path: String,
    /// What it is.
    pub kind: FileKind,
}

/// The [`io::Error`] for `path`, which is a `kind`, not a regular file.
pub fn not_regular_error(path: &Path, kind: FileKind) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, NotRegular { path: path.display().to_string(), kind })
}

/// What the path was, when `e` is the refusal of a path that is not a regular file.
pub fn not_regular(e: &io::Error) -> Option<FileKind> {
    e.get_ref().and_then(|i| i.downcast_ref::<NotRegular>()).map(|n| n.kind)
}

/// The path is a symbolic link and [`Follow::No`] refused it (`ELOOP` from `O_NOFOLLOW`).
pub fn is_symlink_refusal(e: &io::Error) -> bool {
    not_regular(e) == Some(FileKind::Symlink) || e.raw_os_error() == Some(libc::ELOOP)
}

/// Opens `path` read-only if it is a regular file, never blocking; see the module docs. Returns
/// the file and its metadata (from `fstat`).
pub fn open(path: &Path, follow: Follow) -> io::Result<(File, Metadata)> {
    let looked = match follow {
        Follow::Yes => fs::metadata(path)?,
        Follow::No => fs::symlink_metadata(path)?,
    };
    if !looked.is_file() {
        return Err(not_regular_error(path, FileKind::of(looked.file_type())));
    }
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;
    if follow == Follow::No {
        flags |= libc::O_NOFOLLOW;
    }
    let file = fs::OpenOptions::new().read(true).custom_flags(flags).open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular_error(path, FileKind::of(meta.file_type())));
    }
    if (meta.dev(), meta.ino()) != (looked.dev(), looked.ino()) {
        return Err(io::Error::other(format!("{}: replaced by another file while being opened", path.display())));
    }
    clear_nonblock_read_only(&file)?;
    Ok((file, meta))
}

/// Opens `path` read-only if it is a regular file (following links), never blocking.
pub fn open_file(path: &Path) -> io::Result<File> {
    open(path, Follow::Yes).map(|(f, _)| f)
}

/// Clears `O_NONBLOCK` on an open file. `F_SETFL` sets only the status flags (`O_APPEND`,
/// `O_ASYNC`, `O_DIRECT`, `O_NOATIME`, `O_NONBLOCK`), so the ones kept are read first, unless
/// none can be set: a read-only descriptor opened here has none but `O_NONBLOCK`.
pub fn clear_nonblock(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function borrows; no memory is passed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// [`clear_nonblock`] for a descriptor [`open`] made: read-only, no other status flag set.
fn clear_nonblock_read_only(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on a descriptor this function borrows; no memory is passed.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A reader of a file from a given offset with positional reads (`pread`): the file's own
/// position is neither used nor moved, so several readers (and a writer) can share one
/// descriptor. With an end, it reads up to there only: a snapshot of a file that may grow.
#[derive(Debug)]
pub struct ReadAt<'f> {
    file: &'f File,
    pos: u64,
    end: Option<u64>,
}

impl<'f> ReadAt<'f> {
    /// A reader of `file` from `pos` up to `end` (or its current end).
    pub fn new(file: &'f File, pos: u64, end: Option<u64>) -> Self {
        ReadAt { file, pos, end }
    }

    /// Where the next read starts: after a read to the end, the length read up to.
    pub fn pos(&self) -> u64 {
        self.pos
    }
}

impl io::Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let want = match self.end {
            Some(e) => buf.len().min(e.saturating_sub(self.pos).try_into().unwrap_or(usize::MAX)),
            None => buf.len(),
        };
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// What identifies a file's state: which file (device, inode) and what it holds (size,
/// modification time to the nanosecond).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Size in bytes.
    pub len: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
}

impl Identity {
    /// The identity in `meta`.
    pub fn of(meta: &Metadata) -> Identity {
        Identity { dev: meta.dev(), ino: meta.ino(), len: meta.len(), mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()) }
    }

    /// Whether `other` is the same file (device and inode), whatever it holds now.
    pub fn same_file(&self, other: &Identity) -> bool {
        (self.dev, self.ino) == (other.dev, other.ino)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mkfifo(p: &Path) {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "{}", io::Error::last_os_error());
    }

    #[test]
    fn opens_regular_files_and_refuses_the_rest_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("a.jsonl");
        fs::write(&f, "x\n").unwrap();
        let (file, meta) = open(&f, Follow::Yes).unwrap();
        assert_eq!(meta.len(), 2);
        // O_NONBLOCK is cleared on the returned handle.
        use std::os::fd::AsRawFd;
        // SAFETY: fcntl on an open descriptor.
        assert_eq!(unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) } & libc::O_NONBLOCK, 0);

        let fifo = d.path().join("p.jsonl");
        mkfifo(&fifo);
        let e = open(&fifo, Follow::Yes).unwrap_err();
        assert_eq!(not_regular(&e), Some(FileKind::Fifo), "{e}");
        assert!(e.to_string().contains("a FIFO"), "{e}");

        let sock = d.path().join("s.jsonl");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert_eq!(not_regular(&open(&sock, Follow::Yes).unwrap_err()), Some(FileKind::Socket));
        assert_eq!(not_regular(&open(d.path(), Follow::Yes).unwrap_err()), Some(FileKind::Directory));
        assert_eq!(not_regular(&open(Path::new("/dev/null"), Follow::Yes).unwrap_err()), Some(FileKind::CharDevice));

        let link = d.path().join("l.jsonl");
        symlink(&f, &link).unwrap();
        assert!(open(&link, Follow::Yes).is_ok());
        assert!(is_symlink_refusal(&open(&link, Follow::No).unwrap_err()));
        let dangling = d.path().join("gone.jsonl");
        symlink(d.path().join("nowhere"), &dangling).unwrap();
        assert_eq!(open(&dangling, Follow::Yes).unwrap_err().kind(), io::ErrorKind::NotFound);
        // A link to a FIFO is refused as a FIFO, without opening it.
        let to_fifo = d.path().join("tf.jsonl");
        symlink(&fifo, &to_fifo).unwrap();
        assert_eq!(not_regular(&open(&to_fifo, Follow::Yes).unwrap_err()), Some(FileKind::Fifo));
    }

    #[test]
    fn identity_tells_same_file_from_changed_content() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("a.jsonl");
        fs::write(&f, "x\n").unwrap();
        let a = Identity::of(&fs::metadata(&f).unwrap());
        fs::OpenOptions::new().append(true).open(&f).unwrap();
        use std::io::Write;
        fs::OpenOptions::new().append(true).open(&f).unwrap().write_all(b"y\n").unwrap();
        let b = Identity::of(&fs::metadata(&f).unwrap());
        assert!(a.same_file(&b));
        assert_ne!(a, b);
    }
}
