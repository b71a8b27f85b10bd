//! The snapshot store: every byte the daemon read from a transcript, kept where a deletion, a
//! truncation, a rewrite or an emptied file cannot reach it (the `snapshot` sink writes it,
//! `transcriptd restore` reads it). Its format, version 1, is a plain directory that other
//! tools can read (docs/commands/restore.md):
//!
//! - `objects/<xx>/<sha256>`: a chunk of a transcript, named by the SHA-256 of its bytes (`xx`
//!   its first two hex digits). Immutable; a chunk two transcripts share (a copy, a fork that
//!   kept the history) is stored once.
//! - `streams/<name>.manifest`: one incarnation of one transcript (a path and an inode; a
//!   truncation or a rewrite starts the next incarnation and keeps this one), as JSON lines,
//!   appended: first `{"stream": {...}}` (the path, device, inode, the offset it starts at,
//!   when), then `{"chunk": {"at", "len", "sha256"}}` for each sealed chunk in file order,
//!   `{"extent": {"end", "t"}}` each time its bytes up to `end` were made durable (so the file
//!   as it was at any time can be put back), and `{"left": {"how", "t"}}` (followed by an extent) when the
//!   daemon saw the file deleted or rewritten. Only lines up to the last `extent` count: what follows it
//!   is a write a crash cut short.
//! - `streams/<name>.open.<at>`: the stream's bytes from offset `at` (the end of its last
//!   sealed chunk) on, not yet sealed into a chunk.
//!
//! Chunks end at a line end chosen by the content (the hash of the line's last bytes), between
//! [`MIN_CHUNK`] and [`MAX_CHUNK`] bytes: two files with the same lines cut the same chunks
//! wherever their reads began, which is what lets copies and forks share them.
//!
//! This module is the store's reader ([`Store`]) and its writer ([`Writer`]); it knows nothing
//! of the daemon.

mod writer;

pub use writer::{Retention, RetentionDone, RetentionPass, Retired, Writer, WriterStats};

use sha2::Digest as _;
use std::fs::File;
use std::io::{self, Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The store format's version, in each stream's first line.
pub const VERSION: u32 = 1;
/// A chunk ends at the first chosen line end after this many bytes.
pub const MIN_CHUNK: u64 = 64 << 10;
/// ... and at this many bytes in any case (inside a line if it is longer).
pub const MAX_CHUNK: u64 = 4 << 20;
/// One line end in this many (by the hash of its last bytes) ends a chunk after [`MIN_CHUNK`].
const LINE_MASK: u64 = 63;
/// The bytes before a line end that choose it.
const TAIL: usize = 64;

/// A line of a stream's manifest.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Line {
    /// The stream: which file, from where, since when.
    Stream {
        /// The store format's version.
        v: u32,
        /// The transcript's path (lossy if it is not UTF-8: then `path_hex` holds its bytes).
        path: String,
        /// The path's bytes in hex, when it is not UTF-8.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path_hex: Option<String>,
        /// Its device and inode.
        dev: u64,
        /// Its inode.
        ino: u64,
        /// The offset of the first byte kept (0 unless the daemon first read the file there).
        from: u64,
        /// When the stream began (RFC 3339).
        t: String,
    },
    /// A sealed chunk: the bytes `at..at + len` are the object `sha256`.
    Chunk {
        /// Its offset in the file.
        at: u64,
        /// Its length.
        len: u64,
        /// The object's name.
        sha256: String,
    },
    /// The bytes up to `end` were durable at `t`.
    Extent {
        /// The end offset.
        end: u64,
        /// When (RFC 3339).
        t: String,
    },
    /// The daemon saw the file go (`deleted`) or its bytes change (`rewritten`, `truncated`).
    Left {
        /// How.
        how: String,
        /// When (RFC 3339).
        t: String,
    },
}

/// A sealed chunk of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Its offset in the file.
    pub at: u64,
    /// Its length.
    pub len: u64,
    /// The object's name (hex SHA-256).
    pub sha256: String,
}

/// One stream of the store, as its manifest says (only what a completed write made durable).
#[derive(Debug, Clone)]
pub struct Stream {
    /// Its name (the manifest's file name without `.manifest`).
    pub name: String,
    /// The transcript's path.
    pub path: PathBuf,
    /// Device and inode of the file.
    pub id: (u64, u64),
    /// The offset of its first byte.
    pub from: u64,
    /// When it began.
    pub started: SystemTime,
    /// Its sealed chunks, in file order.
    pub chunks: Vec<Chunk>,
    /// When each length was durable, in order: `(end, t)`.
    pub extents: Vec<(u64, SystemTime)>,
    /// How and when the file left, if it did.
    pub left: Option<(String, SystemTime)>,
    /// The manifest's bytes that count (up to its last extent line).
    pub(crate) valid_len: u64,
}

impl Stream {
    /// The end of its sealed chunks: where its open bytes begin.
    pub fn sealed_end(&self) -> u64 {
        self.chunks.last().map_or(self.from, |c| c.at + c.len)
    }

    /// Its durable end: the last extent's.
    pub fn end(&self) -> u64 {
        self.extents.last().map_or(self.from, |e| e.0)
    }

    /// When it was last written.
    pub fn last_write(&self) -> SystemTime {
        self.extents.last().map_or(self.started, |e| e.1)
    }

    /// The end the file had at `t` (`None`: the stream had nothing durable by then).
    pub fn end_at(&self, t: SystemTime) -> Option<u64> {
        self.extents.iter().rev().find(|e| e.1 <= t).map(|e| e.0)
    }

    /// The bytes it holds of the file: `from..end`.
    pub fn len(&self) -> u64 {
        self.end() - self.from
    }

    /// Whether it holds no byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Parses a manifest: only the lines up to the last `extent` count. `None`: not a stream
    /// (no `stream` line first).
    pub fn parse(name: &str, bytes: &[u8]) -> Option<Stream> {
        let mut s: Option<Stream> = None;
        let mut pos = 0u64;
        let mut chunks = Vec::new();
        let mut left = None;
        for raw in bytes.split_inclusive(|b| *b == b'\n') {
            let start = pos;
            pos += raw.len() as u64;
            if raw.last() != Some(&b'\n') {
                break;
            }
            let Ok(line) = serde_json::from_slice::<Line>(raw) else { break };
            match line {
                Line::Stream { v: _, path, path_hex, dev, ino, from, t } if start == 0 => {
                    let path = path_hex.as_deref().and_then(unhex).map(path_of_bytes).unwrap_or_else(|| PathBuf::from(path));
                    s = Some(Stream {
                        name: name.to_owned(),
                        path,
                        id: (dev, ino),
                        from,
                        started: parse_time(&t).unwrap_or(SystemTime::UNIX_EPOCH),
                        chunks: Vec::new(),
                        extents: Vec::new(),
                        left: None,
                        valid_len: pos,
                    });
                }
                Line::Stream { .. } => break,
                Line::Chunk { at, len, sha256 } => chunks.push(Chunk { at, len, sha256 }),
                Line::Left { how, t } => left = Some((how, parse_time(&t).unwrap_or(SystemTime::UNIX_EPOCH))),
                Line::Extent { end, t } => {
                    let st = s.as_mut()?;
                    st.chunks.append(&mut chunks);
                    if left.is_some() {
                        st.left = left.take();
                    }
                    st.extents.push((end, parse_time(&t).unwrap_or(SystemTime::UNIX_EPOCH)));
                    st.valid_len = pos;
                }
            }
        }
        s
    }
}

/// The store in a directory.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// The store at `root` (nothing is read or made).
    pub fn at(root: &Path) -> Store {
        Store { root: root.to_path_buf() }
    }

    /// Its directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn streams_dir(&self) -> PathBuf {
        self.root.join("streams")
    }

    pub(crate) fn object_path(&self, sha256: &str) -> PathBuf {
        self.root.join("objects").join(&sha256[..2.min(sha256.len())]).join(sha256)
    }

    pub(crate) fn manifest_path(&self, name: &str) -> PathBuf {
        self.streams_dir().join(format!("{name}.manifest"))
    }

    pub(crate) fn open_path(&self, name: &str, at: u64) -> PathBuf {
        self.streams_dir().join(format!("{name}.open.{at}"))
    }

    /// Every stream, by name. A store that does not exist has none.
    pub fn streams(&self) -> io::Result<Vec<Stream>> {
        let dir = self.streams_dir();
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for e in rd {
            let e = e?;
            let Some(name) = e.file_name().to_str().and_then(|n| n.strip_suffix(".manifest")).map(str::to_owned) else { continue };
            let bytes = match std::fs::read(e.path()) {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            if let Some(s) = Stream::parse(&name, &bytes) {
                out.push(s);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Reads the stream's bytes `from..to` (within `s.from..s.end()`) into `out`, checking
    /// each whole chunk read against its name.
    pub fn read(&self, s: &Stream, from: u64, to: u64, out: &mut Vec<u8>) -> io::Result<()> {
        if from < s.from || to > s.end() || from > to {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bytes {from}..{to} are not in the stream ({}..{})", s.from, s.end())));
        }
        let mut at = from;
        let i = s.chunks.partition_point(|c| c.at + c.len <= at);
        for c in &s.chunks[i..] {
            if at >= to {
                break;
            }
            let bytes = match std::fs::read(self.object_path(&c.sha256)) {
                Ok(b) => b,
                // Sealed and not linked yet (the writer's own streams): still its open file.
                Err(e) if e.kind() == io::ErrorKind::NotFound => match std::fs::read(self.open_path(&s.name, c.at)) {
                    Ok(mut b) if b.len() as u64 >= c.len => {
                        b.truncate(c.len as usize);
                        b
                    }
                    _ => return Err(with_path(e, &self.object_path(&c.sha256))),
                },
                Err(e) => return Err(with_path(e, &self.object_path(&c.sha256))),
            };
            if bytes.len() as u64 != c.len || hex(&sha2::Sha256::digest(&bytes)) != c.sha256 {
                return Err(io::Error::new(io::ErrorKind::InvalidData, format!("the store's chunk {} does not hold what its name says", c.sha256)));
            }
            let lo = (at - c.at) as usize;
            let hi = (to.min(c.at + c.len) - c.at) as usize;
            out.extend_from_slice(&bytes[lo..hi]);
            at = c.at + hi as u64;
        }
        if at < to {
            let open_at = s.sealed_end();
            let p = self.open_path(&s.name, open_at);
            let mut f = File::open(&p).map_err(|e| with_path(e, &p))?;
            f.seek(SeekFrom::Start(at - open_at))?;
            let want = (to - at) as usize;
            let start = out.len();
            out.resize(start + want, 0);
            f.read_exact(&mut out[start..]).map_err(|e| with_path(e, &p))?;
        }
        Ok(())
    }
}

fn with_path(e: io::Error, p: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", p.display()))
}

/// Lowercase hex.
pub(crate) fn hex(b: &[u8]) -> String {
    use std::fmt::Write as _;
    b.iter().fold(String::with_capacity(b.len() * 2), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    (s.len() % 2 == 0).then_some(())?;
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

fn path_of_bytes(b: Vec<u8>) -> PathBuf {
    use std::os::unix::ffi::OsStringExt as _;
    PathBuf::from(std::ffi::OsString::from_vec(b))
}

/// A time as the manifests write it.
pub(crate) fn format_time(t: SystemTime) -> String {
    humantime::format_rfc3339_micros(t).to_string()
}

/// A time as the manifests (or a user) write it.
pub fn parse_time(s: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(s).ok()
}

/// Whether the line end after `tail` (the bytes before it, at most [`TAIL`]) ends a chunk.
pub(crate) fn chosen(tail: &[u8]) -> bool {
    xxhash_rust::xxh3::xxh3_64(tail) & LINE_MASK == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_counts_up_to_its_last_extent() {
        let head = r#"{"stream":{"v":1,"path":"/a/b.jsonl","dev":1,"ino":2,"from":0,"t":"2026-12-03T00:00:00Z"}}"#;
        let text = format!(
            "{head}\n{}\n{}\n{}\n{}\n{{\"chu",
            r#"{"chunk":{"at":0,"len":10,"sha256":"aa"}}"#,
            r#"{"extent":{"end":12,"t":"2026-12-03T00:00:01Z"}}"#,
            r#"{"chunk":{"at":10,"len":10,"sha256":"bb"}}"#,
            r#"{"extent":{"end":25,"t":"2026-12-03T00:00:02Z"}}"#,
        );
        let s = Stream::parse("b", text.as_bytes()).unwrap();
        assert_eq!(s.chunks.len(), 2);
        assert_eq!((s.end(), s.sealed_end()), (25, 20));
        assert_eq!(s.valid_len as usize, text.rfind('{').unwrap());
        assert_eq!(s.end_at(parse_time("2026-12-03T00:00:01.5Z").unwrap()), Some(12));
        assert_eq!(s.end_at(parse_time("2026-12-02T00:00:00Z").unwrap()), None);
        // A chunk line after the last extent does not count.
        let cut = format!("{head}\n{}\n", r#"{"chunk":{"at":0,"len":10,"sha256":"aa"}}"#);
        let s = Stream::parse("b", cut.as_bytes()).unwrap();
        assert!(s.chunks.is_empty() && s.extents.is_empty() && s.valid_len as usize == head.len() + 1);
        assert!(Stream::parse("b", b"{\"extent\":{\"end\":1,\"t\":\"x\"}}\n").is_none());
    }

    #[test]
    fn paths_that_are_not_utf8_come_back_whole() {
        assert_eq!(unhex(&hex(b"/a/\xff.jsonl")).map(path_of_bytes), Some(path_of_bytes(b"/a/\xff.jsonl".to_vec())));
        assert_eq!(unhex("abc"), None);
    }
}
