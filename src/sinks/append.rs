//! Appending whole lines to a JSONL file (as `Harness\Transcript` writes, docs/requirements.md), the only way transcriptd appends.
//!
//! Other writers may append to the same file at the same time: threads of the daemon, other
//! processes, the agent that owns the transcript. Every append here is one `write` of whole,
//! newline-terminated lines on a handle opened in append mode (`O_APPEND`), where the kernel
//! moves to the end of the file and writes in one step. Concurrent appends therefore interleave
//! whole lines, never parts of lines. (Two handles opened for plain writing each keep their own
//! offset and overwrite each other, leaving lines cut into each other.)
//!
//! A write to a regular file is short only when the disk is full or a file size limit is hit;
//! the rest is then written at once, since the line is damaged either way and a reader reports
//! it (`torn_line`, `malformed_line`).

use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// An append-mode handle on one JSONL file. Share it between threads (`&self` appends), or
/// open one per thread or process: either way lines stay whole.
#[derive(Debug)]
pub struct Appender {
    file: File,
    path: PathBuf,
}

impl Appender {
    /// Opens `path` for appending, creating it if it does not exist. Anything but a regular
    /// file is refused (see [`crate::sources::regular`]); the open never blocks (a FIFO without
    /// a reader would block a plain open for writing).
    pub fn open(path: &Path) -> io::Result<Self> {
        use crate::sources::regular;
        use std::os::unix::fs::OpenOptionsExt;
        let file = OpenOptions::new().append(true).create(true).custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC).open(path).map_err(|e| {
            if e.raw_os_error() == Some(libc::ENXIO) {
                regular::not_regular_error(path, regular::FileKind::Fifo)
            } else {
                named(path, e)
            }
        })?;
        let meta = file.metadata().map_err(|e| named(path, e))?;
        if !meta.is_file() {
            return Err(regular::not_regular_error(path, regular::FileKind::of(meta.file_type())));
        }
        regular::clear_nonblock(&file).map_err(|e| named(path, e))?;
        Ok(Appender { file, path: path.to_path_buf() })
    }

    /// The file appended to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one line (without its newline), in one write.
    pub fn append_line(&self, line: &[u8]) -> io::Result<()> {
        self.append_lines([line])
    }

    /// Appends several lines (each without its newline) in one write, so that they also stay
    /// together. A line that contains a newline is refused: it would be two lines, and nothing
    /// is written.
    pub fn append_lines<'a>(&self, lines: impl IntoIterator<Item = &'a [u8]>) -> io::Result<()> {
        let mut buf = Vec::new();
        for line in lines {
            if memchr::memchr(b'\n', line).is_some() {
                return Err(named(&self.path, io::Error::new(io::ErrorKind::InvalidInput, "a JSONL line cannot contain a newline")));
            }
            buf.extend_from_slice(line);
            buf.push(b'\n');
        }
        self.write_whole(&buf)
    }

    /// Appends `value` as one JSON line (serde_json escapes newlines inside strings).
    pub fn append_json<T: Serialize + ?Sized>(&self, value: &T) -> io::Result<()> {
        let mut buf = serde_json::to_vec(value).map_err(io::Error::other)?;
        buf.push(b'\n');
        self.write_whole(&buf)
    }

    /// One `write` of `buf`; see the module docs for the rare short write.
    fn write_whole(&self, buf: &[u8]) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let mut file = &self.file;
        let n = loop {
            match file.write(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r,
            }
        }
        .map_err(|e| named(&self.path, e))?;
        if n < buf.len() {
            file.write_all(&buf[n..]).map_err(|e| named(&self.path, e))?;
        }
        Ok(())
    }
}

/// The error, its message prefixed with the path, its kind kept (a caller may test for
/// `BrokenPipe` or `StorageFull`).
fn named(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::OpenOptionsExt;

    #[test]
    fn appends_newline_terminated_lines_and_creates_the_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.jsonl");
        std::fs::write(&p, "{\"old\":1}\n").unwrap();
        let a = Appender::open(&p).unwrap();
        a.append_line(br#"{"a":1}"#).unwrap();
        a.append_lines([&br#"{"b":2}"#[..], br#"{"c":3}"#]).unwrap();
        a.append_json(&serde_json::json!({"text": "two\nlines"})).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\"old\":1}\n{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n{\"text\":\"two\\nlines\"}\n");
        let fresh = Appender::open(&d.path().join("new.jsonl")).unwrap();
        fresh.append_line(b"{}").unwrap();
        assert_eq!(std::fs::read(fresh.path()).unwrap(), b"{}\n");
    }

    #[test]
    fn a_line_with_a_newline_is_refused_and_nothing_is_written() {
        let d = tempfile::tempdir().unwrap();
        let a = Appender::open(&d.path().join("x.jsonl")).unwrap();
        let err = a.append_lines([&b"{}"[..], b"{\n}"]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("x.jsonl"));
        assert_eq!(std::fs::read(a.path()).unwrap(), b"");
    }

    #[test]
    fn a_fifo_or_directory_is_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("p.jsonl");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = Appender::open(&fifo).unwrap_err();
        assert_eq!(crate::sources::regular::not_regular(&e), Some(crate::sources::regular::FileKind::Fifo), "{e}");
        // With a reader on the FIFO the open succeeds, and fstat refuses it.
        let _reader = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&fifo).unwrap();
        assert!(crate::sources::regular::not_regular(&Appender::open(&fifo).unwrap_err()).is_some());
        assert!(Appender::open(d.path()).is_err());
    }

    #[test]
    fn open_errors_name_the_path() {
        let err = Appender::open(Path::new("/nonexistent-dir/x.jsonl")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent-dir/x.jsonl"), "{err}");
    }
}
