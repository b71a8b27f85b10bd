//! Opening watched files without trusting what a name points at: only regular files are read,
//! never through a symbolic link, and no open or read can block the loop.
//!
//! A FIFO named `*.jsonl` would block `open` until a writer comes (and then block reads); a link
//! to `/dev/zero` never reaches its end; a socket cannot be opened at all. So a path is opened
//! with [`regular::open`] and [`Follow::No`] (`lstat` first, then `O_NONBLOCK | O_NOFOLLOW |
//! O_NOCTTY`, so that a FIFO swapped in after the look still opens at once and a link swapped in
//! fails, and `fstat` on the open handle); this module adds the descriptor gate and says why a
//! path is refused ([`Refused`]). Symbolic links are not followed, neither for files nor for directories below a
//! watched root (the roots themselves may be links): a link to a file outside the tree would be
//! read once and never again (its target's appends make no event in the tree), and a link to a
//! file inside the tree would report the file twice.
//!
//! (The daemon's adapter over the one opener every reader uses, `src/sources/regular.rs`.)

use crate::sources::regular::{self, FileKind, Follow};
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Why a path is not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A symbolic link (to a file or a directory).
    Symlink,
    /// Not a regular file: a FIFO, socket, device or directory.
    NotRegular(&'static str),
    /// A directory on the way from the watched root is a symbolic link.
    LinkedDirectory,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Symlink => f.write_str("a symlink; symlinks are not followed (the file it names is read under its own name if a source watches it)"),
            Refused::NotRegular(kind) => write!(f, "not a regular file but a {kind}; only regular files are read"),
            Refused::LinkedDirectory => f.write_str("below a symlinked directory; symlinks are not followed"),
        }
    }
}

/// The kind of a non-regular file, for messages.
pub fn kind(m: &Metadata) -> &'static str {
    name(FileKind::of(m.file_type()))
}

/// The name of a kind of file, for messages.
fn name(k: FileKind) -> &'static str {
    match k {
        FileKind::Directory => "directory",
        FileKind::Symlink => "symlink",
        FileKind::Fifo => "FIFO",
        FileKind::Socket => "socket",
        FileKind::CharDevice => "character device",
        FileKind::BlockDevice => "block device",
        FileKind::Regular => "regular file",
    }
}

/// Whether `m` (from `lstat`) may be read.
pub fn check(m: &Metadata) -> Result<(), Refused> {
    if m.file_type().is_symlink() {
        Err(Refused::Symlink)
    } else if m.file_type().is_file() {
        Ok(())
    } else {
        Err(Refused::NotRegular(kind(m)))
    }
}

/// Whether a directory between `root` (excluded) and `path` (excluded) is a symbolic link.
pub fn linked_dir_between(root: &Path, path: &Path) -> bool {
    let Ok(rel) = path.strip_prefix(root) else { return false };
    let mut dir = root.to_path_buf();
    let mut comps: Vec<_> = rel.components().collect();
    comps.pop();
    for c in comps {
        dir.push(c);
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
            return true;
        }
    }
    false
}

/// Opens `path` for reading if it is a regular file, without following a link and without
/// blocking: [`regular::open`] with [`Follow::No`] under the descriptor gate, its refusals as
/// [`Refused`]. `Ok(Err(_))` is a path that is not to be read; `Err` an IO error.
pub fn open_regular(path: &Path) -> io::Result<Result<(File, Metadata), Refused>> {
    let opened = {
        let _gate = super::fds::gate();
        regular::open(path, Follow::No)
    };
    match opened {
        Ok(opened) => Ok(Ok(opened)),
        Err(e) => match regular::not_regular(&e) {
            Some(FileKind::Symlink) => Ok(Err(Refused::Symlink)),
            Some(k) => Ok(Err(Refused::NotRegular(name(k)))),
            // O_NOFOLLOW on a link swapped in after the look.
            None if e.raw_os_error() == Some(libc::ELOOP) => Ok(Err(Refused::Symlink)),
            // A socket swapped in after the look.
            None if e.raw_os_error() == Some(libc::ENXIO) => Ok(Err(Refused::NotRegular("socket"))),
            None => Err(e),
        },
    }
}

/// Device and inode.
pub fn id(m: &Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_open() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("f.jsonl");
        std::fs::write(&file, "{}\n").unwrap();
        assert!(open_regular(&file).unwrap().is_ok());
        let link = d.path().join("l.jsonl");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(open_regular(&link).unwrap().err(), Some(Refused::Symlink));
        let fifo = d.path().join("p.jsonl");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        // Opens at once (no writer), and is refused.
        assert_eq!(open_regular(&fifo).unwrap().err(), Some(Refused::NotRegular("FIFO")));
        assert_eq!(check(&std::fs::symlink_metadata(&fifo).unwrap()), Err(Refused::NotRegular("FIFO")));
        assert_eq!(check(&std::fs::symlink_metadata(&link).unwrap()), Err(Refused::Symlink));
        let sub = d.path().join("real");
        std::fs::create_dir(&sub).unwrap();
        std::os::unix::fs::symlink(&sub, d.path().join("via")).unwrap();
        assert!(linked_dir_between(d.path(), &d.path().join("via/x.jsonl")));
        assert!(!linked_dir_between(d.path(), &d.path().join("real/x.jsonl")));
    }
}
