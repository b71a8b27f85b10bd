//! The IO half of polling a tailed file, run on tokio's blocking pool so that no `stat`, `open`
//! or `pread` of a watched file runs on the event loop: a file on a stuck filesystem (an NFS
//! server gone) holds one blocking thread, not the loop and every other file with it.
//!
//! The loop describes what it wants ([`Request`], made by [`super::tail::Tailed::begin_poll`]
//! from the file's state: which inode it is read as, what identifies the content read so far,
//! where to read and how much); [`fetch`] does the IO and hands back what it found
//! ([`Outcome`]); the loop applies it to the file's state and pipeline
//! ([`super::tail::Tailed::finish_poll`]). A file has at most one fetch in flight, and nothing
//! the loop does meanwhile moves its read offset (a read-ahead's reads are not fetched; an
//! eviction waits), so the bytes fetched are the bytes that follow.
//!
//! The loop keeps at most [`MAX_FETCHES`] fetches under way that have not been running for
//! [`SLOW`] yet, and [`fds::MAX_STUCK`](super::fds::MAX_STUCK) in all: a few stuck files do not take the slots the others
//! need, and a whole mount gone stuck cannot take every thread of the pool.

use super::identity::{Fingerprint, FP_LEN};
use super::open;
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Fetches under way at once that are not slow.
pub const MAX_FETCHES: usize = 32;

/// A fetch under way for this long is slow (its filesystem is stuck or very slow): it no longer
/// takes one of the [`MAX_FETCHES`] slots.
pub const SLOW: Duration = Duration::from_secs(1);

/// Bytes one fetch reads at most.
pub const MAX_READ: u64 = 1 << 20;

/// Bytes a file that left its path has read from its open handle in one fetch; what is left
/// after them is read on the loop (see [`Rest::complete`]).
pub const MAX_REST: u64 = 64 << 20;

/// What the loop asks of one poll of a file.
#[derive(Debug)]
pub struct Request {
    /// The path it is read under.
    pub path: PathBuf,
    /// The open handle, if one is open (else the path is opened).
    pub file: Option<Arc<File>>,
    /// The inode it is read as (`None`: its first poll).
    pub id: Option<(u64, u64)>,
    /// Size and modification time at the last poll: the content is checked only when they
    /// moved (`None`: always).
    pub last: Option<(u64, (i64, i64))>,
    /// What identifies the content read so far.
    pub check: Check,
    /// What to read, if anything is read.
    pub read: Option<Plan>,
    /// Where the file stands, should the path be gone: what its open handle still has after
    /// this offset is read (lines written just before a rotation or a deletion are still the
    /// file's).
    pub rest_from: Option<u64>,
}

/// What identifies the content read so far.
#[derive(Debug, Clone, Copy)]
pub struct Check {
    /// The file must be at least this long.
    pub end: u64,
    /// Hash and length of its first bytes.
    pub head: Option<(u64, u64)>,
    /// The hash of the bytes before the read offset.
    pub fp: Option<Fingerprint>,
}

/// Where to read.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// From here.
    pub at: u64,
    /// Up to here at most (a replay ends at the committed offset).
    pub until: Option<u64>,
    /// Only if the file is longer than this (`None`: whatever its size).
    pub beyond: Option<u64>,
}

/// What a fetch found.
#[derive(Debug)]
pub enum Outcome {
    /// The path is gone.
    Gone(Left),
    /// The path names another inode now, or something that is not a regular file.
    Replaced(Left),
    /// The file is there.
    Found(Found),
}

/// A file that left its path: what its handle still had, and where it went.
#[derive(Debug, Default)]
pub struct Left {
    /// What the open handle had after the offset.
    pub rest: Option<Rest>,
    /// Another name of its directory that holds its inode, and whether that is this very file
    /// (the content read from it is there: a rename keeps it, an unrelated file on a reused
    /// inode has it not).
    pub moved: Option<(PathBuf, bool)>,
}

/// What the open handle of a file that left its path had after the offset.
#[derive(Debug)]
pub struct Rest {
    /// Where the bytes were read.
    pub at: u64,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// Whether they reach the end ([`MAX_REST`]).
    pub complete: bool,
}

/// The file, as the fetch found it.
#[derive(Debug)]
pub struct Found {
    /// Its handle (opened by the fetch if none was open).
    pub file: Arc<File>,
    /// Device and inode.
    pub id: (u64, u64),
    /// Size.
    pub size: u64,
    /// Modification time (seconds, nanoseconds).
    pub mtime: (i64, i64),
    /// Modification time.
    pub modified: Option<SystemTime>,
    /// Whether size or modification time moved since the last poll.
    pub changed: bool,
    /// Whether the content read so far is no longer there (truncated, rewritten): the file is
    /// read again from the start, and nothing was read this time.
    pub rewritten: bool,
    /// What was read, if the plan asked for a read and there was something to read.
    pub data: Option<Data>,
}

/// Bytes read.
#[derive(Debug)]
pub struct Data {
    /// Where.
    pub at: u64,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The last bytes before `at + bytes.len()`, at most [`FP_LEN`]: the next fingerprint.
    pub tail: Vec<u8>,
    /// Whether the read reached the end of what it could read (the file's end, or the plan's).
    pub end: bool,
}

/// Does the IO of one poll (on the blocking pool).
pub fn fetch(req: Request) -> io::Result<Outcome> {
    let meta = match std::fs::symlink_metadata(&req.path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Outcome::Gone(left(&req))),
        Err(e) => return Err(e),
    };
    let id = open::id(&meta);
    // A remount can give a filesystem another device number (NFS, btrfs subvolumes,
    // device-mapper, across a reboot) and keep its inode numbers: the same inode number on
    // another device, holding the content read so far (first bytes and fingerprint, checked
    // below whatever the size), is the same file.
    let renumbered = req.id.is_some_and(|old| old.0 != id.0 && old.1 == id.1);
    if open::check(&meta).is_err() || (req.id.is_some_and(|old| old != id) && !renumbered) {
        // Rotated, recreated, or replaced by something that is not a regular file.
        return Ok(Outcome::Replaced(left(&req)));
    }
    let file = match &req.file {
        Some(f) if !renumbered => f.clone(),
        _ => match open::open_regular(&req.path)? {
            Ok((f, m)) if open::id(&m) == id => Arc::new(f),
            _ => return Ok(Outcome::Replaced(Left::default())),
        },
    };
    let size = meta.len();
    let mtime = (meta.mtime(), meta.mtime_nsec());
    let changed = req.last.is_none_or(|(s, m)| s != size || m != mtime) || renumbered;
    let mut checked = Vec::new();
    if changed {
        match content_holds(&file, &req.check, size)? {
            Some(bytes) => checked = bytes,
            // Another file on the other device: not this one.
            None if renumbered => return Ok(Outcome::Replaced(left(&req))),
            None => {
                return Ok(Outcome::Found(Found { file, id, size, mtime, modified: meta.modified().ok(), changed, rewritten: true, data: None }));
            }
        }
    }
    let data = match req.read {
        Some(plan) if plan.beyond.is_none_or(|b| size > b) => Some(read(&file, plan, size, &req.check, checked)?),
        _ => None,
    };
    Ok(Outcome::Found(Found { file, id, size, mtime, modified: meta.modified().ok(), changed, rewritten: false, data }))
}

/// Reads what the plan asks of a file of `size` bytes, at most [`MAX_READ`]; `checked`: the
/// bytes before the fingerprint's end, if they were just read to check it.
fn read(f: &File, plan: Plan, size: u64, check: &Check, checked: Vec<u8>) -> io::Result<Data> {
    // What the file holds (a buffer of its size: 10,000 small files cost no 1 MiB each), up
    // to where the plan stops.
    let stop = plan.until.unwrap_or(size).min(plan.at.saturating_add(MAX_READ));
    let want = stop.saturating_sub(plan.at);
    let bytes = read_at(f, plan.at, want)?;
    // Short of what was asked, or all the file had when it was looked at: its end (what it
    // appends since makes an event of its own).
    let end = (bytes.len() as u64) < want || (plan.until.is_none() && plan.at + bytes.len() as u64 >= size);
    // The fingerprint's bytes: the last read, and before them (fewer than a fingerprint read)
    // those just checked, or else the file's.
    let want_tail = (FP_LEN as u64).min(plan.at + bytes.len() as u64) as usize;
    let tail = if bytes.is_empty() {
        Vec::new()
    } else if bytes.len() >= want_tail {
        bytes[bytes.len() - want_tail..].to_vec()
    } else {
        let need = (want_tail - bytes.len()) as u64;
        let mut before = if check.fp.is_some_and(|fp| fp.end == plan.at) && checked.len() as u64 >= need {
            checked[checked.len() - need as usize..].to_vec()
        } else {
            read_at(f, plan.at - need, need)?
        };
        before.extend_from_slice(&bytes);
        before
    };
    Ok(Data { at: plan.at, bytes, tail, end })
}

/// What is known of a file that left its path.
fn left(req: &Request) -> Left {
    let moved = req.id.and_then(|id| {
        let q = find_in_dir(&req.path, id)?;
        let same = same_file_at(&q, id, &req.check).unwrap_or(false);
        Some((q, same))
    });
    Left { rest: rest(req), moved }
}

/// Where the inode `id` is now in the directory of `p`, if it is there under another name.
fn find_in_dir(p: &std::path::Path, id: (u64, u64)) -> Option<PathBuf> {
    use std::os::unix::fs::DirEntryExt;
    let dir = p.parent()?;
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.ino() == id.1 && e.path() != p)
        .map(|e| e.path())
        .find(|q| std::fs::symlink_metadata(q).is_ok_and(|m| open::id(&m) == id))
}

/// Whether `path` holds the inode `id` with the content `check` describes.
pub fn same_file_at(path: &std::path::Path, id: (u64, u64), check: &Check) -> io::Result<bool> {
    let (f, m) = match open::open_regular(path)? {
        Ok(fm) => fm,
        Err(_) => return Ok(false),
    };
    Ok(open::id(&m) == id && content_holds(&f, check, m.len())?.is_some())
}

/// What the open handle has after the offset, once the path is gone.
fn rest(req: &Request) -> Option<Rest> {
    let (f, at) = (req.file.as_ref()?, req.rest_from?);
    // An error reading it is as good as nothing more: the file is gone.
    let bytes = read_at(f, at, MAX_REST + 1).unwrap_or_default();
    let complete = bytes.len() as u64 <= MAX_REST;
    let mut bytes = bytes;
    bytes.truncate(MAX_REST as usize);
    Some(Rest { at, bytes, complete })
}

/// Whether the bytes the file held when read are still there: the first bytes and the bytes
/// before the read offset. When they are, returns the latter (the fingerprint's bytes).
pub fn content_holds(f: &File, check: &Check, size: u64) -> io::Result<Option<Vec<u8>>> {
    if size < check.end {
        return Ok(None);
    }
    if let Some((hash, len)) = check.head {
        if size < len || xxhash_rust::xxh3::xxh3_64(&read_at(f, 0, len)?) != hash {
            return Ok(None);
        }
    }
    let Some(fp) = check.fp else { return Ok(Some(Vec::new())) };
    let bytes = read_at(f, fp.end - fp.len, fp.len)?;
    Ok((xxhash_rust::xxh3::xxh3_64(&bytes) == fp.hash).then_some(bytes))
}

/// `len` bytes at `at` (fewer at the end of the file).
pub fn read_at(f: &File, at: u64, len: u64) -> io::Result<Vec<u8>> {
    // Grown as bytes come: a large `len` (a rest) costs what the file has.
    let mut b = Vec::new();
    let mut got = 0usize;
    while (got as u64) < len {
        let step = (len - got as u64).min(MAX_READ) as usize;
        b.resize(got + step, 0);
        match f.read_at(&mut b[got..got + step], at + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    b.truncate(got);
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check() -> Check {
        Check { end: 0, head: None, fp: None }
    }

    #[test]
    fn a_read_brings_the_bytes_and_the_next_fingerprint() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.jsonl");
        let content: Vec<u8> = (0..3000u32).map(|i| b'a' + (i % 26) as u8).collect();
        std::fs::write(&p, &content).unwrap();
        let req = |at, beyond| Request {
            path: p.clone(),
            file: None,
            id: None,
            last: None,
            check: check(),
            read: Some(Plan { at, until: None, beyond }),
            rest_from: None,
        };
        let Outcome::Found(f) = fetch(req(2900, None)).unwrap() else { panic!("found") };
        let data = f.data.unwrap();
        assert_eq!(data.bytes, &content[2900..]);
        // Fewer bytes than a fingerprint: the rest of it from the file.
        assert_eq!(data.tail, &content[3000 - FP_LEN..]);
        assert!(data.end);
        assert_eq!(f.size, 3000);
        // Nothing beyond what was read: no read.
        let Outcome::Found(f) = fetch(req(3000, Some(3000))).unwrap() else { panic!("found") };
        assert!(f.data.is_none());
        // The head changed: rewritten, nothing read.
        let head = Some((xxhash_rust::xxh3::xxh3_64(b"x"), 1));
        let r = Request { check: Check { end: 0, head, fp: None }, ..req(0, None) };
        let Outcome::Found(f) = fetch(r).unwrap() else { panic!("found") };
        assert!(f.rewritten && f.data.is_none());
    }

    #[test]
    fn a_path_gone_brings_what_its_handle_still_has() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.jsonl");
        std::fs::write(&p, b"one\ntwo\n").unwrap();
        let file = Arc::new(File::open(&p).unwrap());
        std::fs::remove_file(&p).unwrap();
        let r = Request { path: p, file: Some(file), id: None, last: None, check: check(), read: None, rest_from: Some(4) };
        let Outcome::Gone(Left { rest: Some(rest), moved: None }) = fetch(r).unwrap() else { panic!("gone") };
        assert_eq!((rest.at, rest.bytes.as_slice(), rest.complete), (4, &b"two\n"[..], true));
    }
}
