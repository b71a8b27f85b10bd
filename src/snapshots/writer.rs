//! The store's writer: bytes appended to streams as they are read, made durable by
//! [`Writer::sync`] in an order a crash cannot break (see the steps there), and old streams
//! retired by a [`Retention`] policy.
//!
//! Every call can be repeated after it failed (a full disk): an append of bytes the stream
//! already holds is compared and skipped, a sync does again only what it did not finish.

use super::{chosen, format_time, hex, Chunk, Line, Store, Stream, MAX_CHUNK, MIN_CHUNK, TAIL};
use sha2::Digest as _;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A stream written in the last this long is never retired by size.
const ACTIVE: Duration = Duration::from_secs(600);
/// Append handles kept open between syncs, at most.
const MAX_HANDLES: usize = 64;

/// How long the store keeps what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Streams not written for longer are removed.
    pub max_age: Option<Duration>,
    /// The oldest streams (by last write) are removed while the store is larger (never one
    /// written in the last ten minutes).
    pub max_bytes: Option<u64>,
    /// How often the policy is applied (at a sync).
    pub every: Duration,
}

/// What applying the retention policy removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retired {
    /// Streams removed for their age.
    pub by_age: u64,
    /// Streams removed for the store's size.
    pub by_size: u64,
    /// Objects no stream refers to any more, removed.
    pub objects: u64,
    /// Whether the store is still larger than `max_bytes` (what is left was written lately).
    pub over: bool,
}

/// What the writer has done since it started, and the store's size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Transcript bytes the store took.
    pub kept: u64,
    /// Bytes of sealed chunks the store already held (stored once).
    pub deduplicated: u64,
    /// The store's size on disk: objects and open bytes (as of the last retention pass, and
    /// what was written since).
    pub store_bytes: u64,
    /// Streams in the store (as of the last retention pass, and those begun since).
    pub streams: u64,
    /// Streams the retention policy removed for their age.
    pub retired_by_age: u64,
    /// ... and for the store's size.
    pub retired_by_size: u64,
    /// Whether the last retention pass left the store larger than its limit.
    pub over: bool,
    /// Streams found damaged outside transcriptd (an open file shorter than its manifest
    /// says), left as they were: their files' next bytes began another incarnation.
    pub damaged: u64,
}

type Key = (PathBuf, u64, u64);

/// What the writer touched while a retention pass runs on another thread: the pass removes
/// none of it. Taken with the lock held around each removal (the pass) and each link or load
/// (the writer), so that an object the writer links, or a chunk it finds stored already, is
/// never removed under it.
#[derive(Debug, Default)]
struct Pins {
    /// A pass is running.
    active: bool,
    /// Objects linked, or found stored already, since the pass began.
    objects: HashSet<String>,
    /// Streams written, loaded or begun since the pass began (and those in memory then).
    streams: HashSet<String>,
}

type Shared = std::sync::Arc<std::sync::Mutex<Pins>>;

fn pins(p: &Shared) -> std::sync::MutexGuard<'_, Pins> {
    // A pass that panicked leaves the pins as they were: still right.
    p.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A retention pass, begun by [`Writer::begin_retention`] right after a sync (when every
/// object linked is in a durable manifest), that runs anywhere (a blocking thread) while the
/// writer goes on; its outcome goes back with [`Writer::end_retention`].
#[derive(Debug)]
pub struct RetentionPass {
    /// The store's lock, shared with the writer: no other writer opens the store until the
    /// pass ends, even if this one has gone (its pins would not be seen).
    _lock: File,
    store: Store,
    retention: Retention,
    pins: Shared,
    /// Bytes the writer had kept when the pass began.
    kept_at_start: u64,
}

/// What a pass found and did.
#[derive(Debug)]
pub struct RetentionDone {
    /// What it removed.
    pub retired: Retired,
    /// The store's size when it measured it.
    size: u64,
    /// Streams left.
    streams: u64,
    kept_at_start: u64,
    /// The stream names it removed (the writer forgets them).
    gone: HashSet<String>,
}

/// A stream being written.
#[derive(Debug)]
struct Live {
    name: String,
    /// Its incarnation (the name's last part).
    n: u32,
    from: u64,
    chunks: Vec<Chunk>,
    /// Bytes in the open file (from the end of the last chunk).
    open_len: u64,
    /// The open chunk's hash so far.
    hasher: sha2::Sha256,
    /// The last bytes written (what chooses a line end).
    tail: Vec<u8>,
    /// Manifest lines not written yet.
    lines: Vec<u8>,
    /// The manifest's durable length (a failed append is cut back to it).
    manifest_len: u64,
    /// Chunks sealed since the last sync: their objects are linked at the next.
    sealed: Vec<Chunk>,
    /// How many of them a failed sync linked already.
    linked: usize,
    /// The extent line is among `lines` (a failed sync added it).
    extent_due: bool,
    /// The open file was written since the last sync.
    open_dirty: bool,
    /// The daemon saw the file truncated, rewritten or deleted: what comes next is another
    /// incarnation.
    gone: bool,
    /// The append handle of the open file.
    handle: Option<File>,
    last_write: SystemTime,
}

impl Live {
    fn sealed_end(&self) -> u64 {
        self.chunks.last().map_or(self.from, |c| c.at + c.len)
    }

    fn end(&self) -> u64 {
        self.sealed_end() + self.open_len
    }

    fn push_line(&mut self, l: &Line) {
        serde_json::to_writer(&mut self.lines, l).expect("a manifest line serializes");
        self.lines.push(b'\n');
    }

    fn view(&self) -> Stream {
        Stream {
            name: self.name.clone(),
            path: PathBuf::new(),
            id: (0, 0),
            from: self.from,
            started: SystemTime::UNIX_EPOCH,
            chunks: self.chunks.clone(),
            extents: vec![(self.end(), SystemTime::UNIX_EPOCH)],
            left: None,
            valid_len: 0,
        }
    }
}

/// The writer of a store.
#[derive(Debug)]
pub struct Writer {
    store: Store,
    /// The store's `lock` file, locked (flock) while the writer lives: one writer at a time.
    _lock: File,
    live: HashMap<Key, Live>,
    dirty: BTreeSet<Key>,
    /// Streams replaced by their file's next incarnation, synced once more.
    retiring: Vec<Live>,
    /// Files were made in `streams/` since the last sync.
    made: bool,
    /// Open files left by a crash, by stream name: removed when the stream is loaded.
    strays: HashMap<String, Vec<u64>>,
    /// Streams found damaged when loaded (as far as they still hold bytes), until their file's
    /// next incarnation begins.
    damaged: HashMap<Key, Stream>,
    handles: usize,
    retention: Retention,
    last_retention: Option<std::time::Instant>,
    /// Shared with a retention pass while one runs.
    pins: Shared,
    stats: WriterStats,
}

impl Writer {
    /// The writer of the store at `root` (made if missing), with `retention`.
    pub fn open(root: &Path, retention: Retention) -> io::Result<Writer> {
        let store = Store::at(root);
        // Made durable before anything is written in them: a power loss must not take back a
        // directory whose files a checkpoint counts on.
        for d in [root.to_path_buf(), store.streams_dir(), root.join("objects")] {
            if !d.is_dir() {
                std::fs::create_dir_all(&d)?;
                if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
                    sync_path(parent)?;
                }
            }
        }
        let lock = OpenOptions::new().create(true).truncate(false).write(true).open(root.join("lock"))?;
        use std::os::fd::AsRawFd as _;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = io::Error::last_os_error();
            return Err(if e.kind() == io::ErrorKind::WouldBlock {
                io::Error::new(io::ErrorKind::WouldBlock, format!("{}: another writer holds the store (a daemon's snapshot sink)", root.display()))
            } else {
                e
            });
        }
        let mut strays: HashMap<String, Vec<u64>> = HashMap::new();
        for e in std::fs::read_dir(store.streams_dir())? {
            let e = e?;
            let n = e.file_name();
            let Some((name, at)) = n.to_str().and_then(|n| n.rsplit_once(".open.")) else { continue };
            if let Ok(at) = at.parse() {
                strays.entry(name.to_owned()).or_default().push(at);
            }
        }
        Ok(Writer {
            store,
            _lock: lock,
            live: HashMap::new(),
            dirty: BTreeSet::new(),
            retiring: Vec::new(),
            made: false,
            strays,
            damaged: HashMap::new(),
            handles: 0,
            retention,
            last_retention: None,
            pins: Shared::default(),
            stats: WriterStats::default(),
        })
    }

    /// The store it writes.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// What it did, and the store's size.
    pub fn stats(&self) -> WriterStats {
        self.stats
    }

    /// Appends `bytes`, read at `at` from the file `path` (device and inode `id`). Bytes the
    /// stream already holds are compared: the same are skipped, others begin the next
    /// incarnation (a file rewritten in place).
    pub fn append(&mut self, path: &Path, id: (u64, u64), at: u64, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let key: Key = (path.to_path_buf(), id.0, id.1);
        self.load(&key)?;
        let (mut at, mut bytes) = (at, bytes);
        let restart = match self.live.get(&key) {
            None => true,
            Some(l) if l.gone || at < l.from || at > l.end() => true,
            Some(l) if at < l.end() => {
                let n = (l.end() - at).min(bytes.len() as u64);
                let mut held = Vec::with_capacity(n as usize);
                self.store.read(&l.view(), at, at + n, &mut held)?;
                if held[..] == bytes[..n as usize] {
                    at += n;
                    bytes = &bytes[n as usize..];
                    false
                } else {
                    true
                }
            }
            Some(_) => false,
        };
        // Bytes that differ from what the stream holds at `at`: the file was rewritten from
        // there on. The bytes before `at` were the same: the next incarnation begins with them
        // (a restore needs the file from its start).
        let carry = match self.live.get(&key) {
            Some(l) if restart && !l.gone && at > l.from && at <= l.end() => Some((l.view(), l.from)),
            // A stream damaged outside transcriptd: what it still holds, when that reaches `at`.
            None => self.damaged.remove(&key).filter(|s| at > s.from && at <= s.end()).map(|s| {
                let from = s.from;
                (s, from)
            }),
            _ => None,
        };
        if restart {
            self.begin(&key, carry.as_ref().map_or(at, |c| c.1))?;
        }
        if let Some((old, from)) = carry {
            let mut piece = Vec::new();
            let mut pos = from;
            while pos < at {
                let to = (pos + (8 << 20)).min(at);
                piece.clear();
                self.store.read(&old, pos, to, &mut piece)?;
                self.write(&key, &piece)?;
                pos = to;
            }
        }
        if bytes.is_empty() {
            return Ok(());
        }
        self.write(&key, bytes)
    }

    /// The daemon saw the file truncated, rewritten (`how`) or deleted: the stream says so,
    /// and what is read of the file next begins another.
    pub fn left(&mut self, path: &Path, id: (u64, u64), how: &str) -> io::Result<()> {
        let key: Key = (path.to_path_buf(), id.0, id.1);
        self.load(&key)?;
        let Some(l) = self.live.get_mut(&key) else { return Ok(()) };
        if !l.gone {
            l.push_line(&Line::Left { how: how.to_owned(), t: format_time(SystemTime::now()) });
            l.gone = true;
            self.dirty.insert(key);
        }
        Ok(())
    }

    /// The stream of `key` from the store, if it has one and it is not in memory.
    fn load(&mut self, key: &Key) -> io::Result<()> {
        if self.live.contains_key(key) || self.damaged.contains_key(key) {
            return Ok(());
        }
        let base = base_name(key);
        // Held while the stream is read: a retention pass removes it before, or not at all.
        let shared = self.pins.clone();
        let mut pinned = pins(&shared);
        let Some(n) = last_incarnation(&self.store, &base) else { return Ok(()) };
        let name = format!("{base}-{n}");
        if pinned.active {
            pinned.streams.insert(name.clone());
        }
        let mpath = self.store.manifest_path(&name);
        let bytes = std::fs::read(&mpath)?;
        let Some(s) = Stream::parse(&name, &bytes) else {
            // Not even its first line is whole: the stream never held a durable byte.
            return Ok(());
        };
        if (s.valid_len as usize) < bytes.len() {
            // What a crash cut short.
            let f = OpenOptions::new().write(true).open(&mpath)?;
            f.set_len(s.valid_len)?;
            f.sync_all()?;
        }
        let sealed_end = s.sealed_end();
        let last_write = s.last_write();
        let open_len = s.end() - sealed_end;
        let mut hasher = sha2::Sha256::new();
        let mut tail = Vec::new();
        if open_len > 0 {
            let p = self.store.open_path(&name, sealed_end);
            let held = match std::fs::read(&p) {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
                Err(e) => return Err(e),
            };
            if (held.len() as u64) < open_len {
                // Damaged outside transcriptd (the writer never makes an extent past what the
                // open file holds): the stream is left as it is, and the file's next bytes
                // begin the next incarnation, with what this one still holds from its start
                // when that reaches them. Never an error: it would stop the daemon.
                tracing::warn!(
                    file = %p.display(),
                    holds = held.len(),
                    manifest_says = open_len,
                    "a snapshot stream was damaged outside transcriptd (its open file is shorter than its manifest says): it is kept as it is, and the transcript's next bytes begin another incarnation"
                );
                let mut view = s.clone();
                view.extents = vec![(sealed_end + held.len() as u64, last_write)];
                self.damaged.insert(key.clone(), view);
                self.stats.damaged += 1;
                return Ok(());
            }
            let f = OpenOptions::new().write(true).open(&p)?;
            f.set_len(open_len)?;
            f.sync_all()?;
            hasher.update(&held[..open_len as usize]);
            tail = held[held.len().saturating_sub(TAIL).min(open_len as usize)..open_len as usize].to_vec();
        }
        for at in self.strays.remove(&name).unwrap_or_default() {
            if at != sealed_end {
                let _ = std::fs::remove_file(self.store.open_path(&name, at));
            }
        }
        self.live.insert(
            key.clone(),
            Live {
                name,
                n,
                from: s.from,
                chunks: s.chunks,
                open_len,
                hasher,
                tail,
                lines: Vec::new(),
                manifest_len: s.valid_len,
                sealed: Vec::new(),
                linked: 0,
                extent_due: false,
                open_dirty: false,
                gone: s.left.is_some(),
                handle: None,
                last_write,
            },
        );
        Ok(())
    }

    /// Begins the next incarnation of `key` at offset `from`.
    fn begin(&mut self, key: &Key, from: u64) -> io::Result<()> {
        let base = base_name(key);
        let mut n = last_incarnation(&self.store, &base).unwrap_or(0) + 1;
        if let Some(mut old) = self.live.remove(key) {
            // What the old one has not made durable yet is synced with the others.
            if old.handle.take().is_some() {
                self.handles -= 1;
            }
            n = n.max(old.n + 1);
            if self.dirty.remove(key) {
                self.retiring.push(old);
            }
        }
        let name = format!("{base}-{n}");
        {
            let mut p = pins(&self.pins);
            if p.active {
                p.streams.insert(name.clone());
            }
        }
        let (path_s, path_hex) = match key.0.to_str() {
            Some(s) => (s.to_owned(), None),
            None => {
                use std::os::unix::ffi::OsStrExt as _;
                (key.0.to_string_lossy().into_owned(), Some(hex(key.0.as_os_str().as_bytes())))
            }
        };
        let mut l = Live {
            name,
            n,
            from,
            chunks: Vec::new(),
            open_len: 0,
            hasher: sha2::Sha256::new(),
            tail: Vec::new(),
            lines: Vec::new(),
            manifest_len: 0,
            sealed: Vec::new(),
            linked: 0,
            extent_due: false,
            open_dirty: false,
            gone: false,
            handle: None,
            last_write: SystemTime::now(),
        };
        l.push_line(&Line::Stream { v: super::VERSION, path: path_s, path_hex, dev: key.1, ino: key.2, from, t: format_time(SystemTime::now()) });
        self.live.insert(key.clone(), l);
        self.dirty.insert(key.clone());
        self.stats.streams += 1;
        Ok(())
    }

    /// Writes `bytes` at the stream's end, sealing chunks where they end.
    fn write(&mut self, key: &Key, bytes: &[u8]) -> io::Result<()> {
        let mut rest = bytes;
        while !rest.is_empty() {
            let l = self.live.get(key).expect("begun");
            let room = (MAX_CHUNK - l.open_len) as usize;
            let window = &rest[..rest.len().min(room)];
            // The first line end after MIN_CHUNK whose last bytes choose it.
            let skip = (MIN_CHUNK.saturating_sub(l.open_len + 1) as usize).min(window.len());
            let mut cut = memchr::memchr_iter(b'\n', &window[skip..]).map(|i| i + skip).find(|&nl| {
                if nl >= TAIL {
                    chosen(&window[nl - TAIL..nl])
                } else {
                    let mut t = l.tail[l.tail.len().saturating_sub(TAIL - nl)..].to_vec();
                    t.extend_from_slice(&window[..nl]);
                    chosen(&t)
                }
            });
            cut = cut.map(|nl| nl + 1);
            if cut.is_none() && rest.len() >= room {
                cut = Some(room);
            }
            let n = cut.unwrap_or(rest.len());
            self.write_open(key, &rest[..n])?;
            if cut.is_some() {
                self.seal(key);
            }
            rest = &rest[n..];
        }
        Ok(())
    }

    /// Appends to the stream's open file (as much as lands is counted: a repeated append
    /// after a failure skips it).
    fn write_open(&mut self, key: &Key, bytes: &[u8]) -> io::Result<()> {
        let path = {
            let l = &self.live[key];
            self.store.open_path(&l.name, l.sealed_end())
        };
        let fresh = self.live[key].open_len == 0;
        let mut taken = None;
        if self.live[key].handle.is_none() {
            let f = OpenOptions::new().append(true).create(true).open(&path)?;
            if fresh {
                // A file left by a crash (never in a manifest): from its start.
                f.set_len(0)?;
                self.made = true;
            }
            if self.handles < MAX_HANDLES {
                self.handles += 1;
                self.live.get_mut(key).expect("begun").handle = Some(f);
            } else {
                taken = Some(f);
            }
        }
        let l = self.live.get_mut(key).expect("begun");
        let f = taken.as_mut().or(l.handle.as_mut()).expect("opened");
        let mut done = 0;
        let r = loop {
            if done == bytes.len() {
                break Ok(());
            }
            match f.write(&bytes[done..]) {
                Ok(0) => break Err(io::Error::new(io::ErrorKind::WriteZero, "wrote nothing")),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        let landed = &bytes[..done];
        l.hasher.update(landed);
        l.open_len += done as u64;
        l.open_dirty |= done > 0;
        let keep = l.tail.len().saturating_sub(TAIL.saturating_sub(landed.len()));
        l.tail.drain(..keep);
        l.tail.extend_from_slice(&landed[landed.len().saturating_sub(TAIL)..]);
        l.last_write = SystemTime::now();
        self.stats.kept += done as u64;
        self.stats.store_bytes += done as u64;
        self.dirty.insert(key.clone());
        r
    }

    /// The open file becomes a chunk: its object is linked at the next sync.
    fn seal(&mut self, key: &Key) {
        let l = self.live.get_mut(key).expect("begun");
        let at = l.sealed_end();
        let c = Chunk { at, len: l.open_len, sha256: hex(&l.hasher.finalize_reset()) };
        l.push_line(&Line::Chunk { at, len: c.len, sha256: c.sha256.clone() });
        l.chunks.push(c.clone());
        l.sealed.push(c);
        l.open_len = 0;
        // Synced as a sealed chunk: there is no open file until the next write.
        l.open_dirty = false;
        if l.handle.take().is_some() {
            self.handles -= 1;
        }
    }

    /// Makes everything appended durable, in an order a crash cannot break:
    /// 1. the open files' bytes (those sealed into chunks too) are synced;
    /// 2. each sealed chunk's object is linked to its file (a chunk the store already holds is
    ///    not: it is the same bytes), and the directories synced;
    /// 3. the manifests get their lines and an extent (the length now durable), synced;
    /// 4. the sealed chunks' open files are removed (a crash before leaves them for the next
    ///    start to remove).
    ///
    /// Then, when it is time, the retention policy is applied.
    pub fn sync(&mut self) -> io::Result<()> {
        let Writer { store, live, dirty, retiring, made, handles, stats, pins: pins_shared, .. } = self;
        let mut ls: Vec<&mut Live> = live.iter_mut().filter(|(k, _)| dirty.contains(*k)).map(|(_, l)| l).chain(retiring.iter_mut()).collect();
        // 1. All at once, on a few threads: the filesystem commits concurrent syncs together
        //    (one journal commit for many files on ext4), where one after another each waits
        //    for its own. Every one has ended before step 2 begins.
        let mut syncs: Vec<Syncing<'_>> = Vec::new();
        for l in &ls {
            if l.open_dirty {
                syncs.push(match l.handle.as_ref() {
                    Some(f) => Syncing::Data(f),
                    None => Syncing::Path(store.open_path(&l.name, l.sealed_end())),
                });
            }
            syncs.extend(l.sealed.iter().map(|c| Syncing::Path(store.open_path(&l.name, c.at))));
        }
        sync_all(&syncs)?;
        drop(syncs);
        // 2.
        let mut dirs = HashSet::new();
        for l in &mut ls {
            while l.linked < l.sealed.len() {
                let c = &l.sealed[l.linked];
                let obj = store.object_path(&c.sha256);
                let dir = obj.parent().expect("objects/xx").to_path_buf();
                if !dir.exists() {
                    std::fs::create_dir_all(&dir)?;
                    dirs.insert(store.root().join("objects"));
                }
                // Linked, or found stored already, with the pins held: a retention pass
                // removes the object before (and the link makes it again) or not at all.
                let mut p = pins(pins_shared);
                if p.active {
                    p.objects.insert(c.sha256.clone());
                }
                match std::fs::hard_link(store.open_path(&l.name, c.at), &obj) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        stats.deduplicated += c.len;
                        stats.store_bytes = stats.store_bytes.saturating_sub(c.len);
                    }
                    Err(e) => return Err(e),
                }
                drop(p);
                dirs.insert(dir);
                // Linked: a repeated sync does not count it again.
                l.linked += 1;
            }
        }
        sync_all(&dirs.into_iter().map(Syncing::Path).collect::<Vec<_>>())?;
        if *made {
            sync_path(&store.streams_dir())?;
        }
        // 3.
        let now = format_time(SystemTime::now());
        let mut new_manifest = false;
        for l in &mut ls {
            if !l.extent_due {
                let end = l.end();
                l.push_line(&Line::Extent { end, t: now.clone() });
                l.extent_due = true;
            }
            let p = store.manifest_path(&l.name);
            new_manifest |= l.manifest_len == 0;
            let mut f = OpenOptions::new().write(true).create(true).truncate(false).open(&p)?;
            // A failed append before is cut back.
            f.set_len(l.manifest_len)?;
            use std::io::Seek as _;
            f.seek(io::SeekFrom::Start(l.manifest_len))?;
            f.write_all(&l.lines)?;
            f.sync_data()?;
            l.manifest_len += l.lines.len() as u64;
            l.lines.clear();
            l.extent_due = false;
        }
        if new_manifest || *made {
            sync_path(&store.streams_dir())?;
        }
        *made = false;
        // 4.
        for l in &mut ls {
            for c in std::mem::take(&mut l.sealed) {
                remove_if_there(&store.open_path(&l.name, c.at))?;
            }
            l.linked = 0;
            l.open_dirty = false;
            if l.handle.take().is_some() {
                *handles -= 1;
            }
        }
        dirty.clear();
        retiring.clear();
        // Files gone, and streams not written for a while, leave memory (a stream is loaded
        // again from the store when its file grows).
        live.retain(|_, l| !l.gone && l.last_write.elapsed().is_ok_and(|d| d < ACTIVE));
        Ok(())
    }

    /// Whether the retention policy is due (never applied yet, or `every` ago) and no pass
    /// runs.
    pub fn retention_due(&self) -> bool {
        !pins(&self.pins).active && self.last_retention.is_none_or(|t| t.elapsed() >= self.retention.every)
    }

    /// Begins a retention pass, to run anywhere while the writer goes on. Call it right after
    /// a [`Writer::sync`] that succeeded (nothing linked is missing from a manifest then).
    pub fn begin_retention(&mut self) -> io::Result<RetentionPass> {
        let lock = self._lock.try_clone()?;
        self.last_retention = Some(std::time::Instant::now());
        let mut p = pins(&self.pins);
        p.active = true;
        p.objects.clear();
        p.streams = self.live.values().map(|l| l.name.clone()).chain(self.retiring.iter().map(|l| l.name.clone())).collect();
        drop(p);
        Ok(RetentionPass { _lock: lock, store: self.store.clone(), retention: self.retention, pins: self.pins.clone(), kept_at_start: self.stats.kept })
    }

    /// Takes back a pass's outcome (or its error: the pass ends, nothing else changes).
    pub fn end_retention(&mut self, done: io::Result<RetentionDone>) -> io::Result<Retired> {
        {
            let mut p = pins(&self.pins);
            p.active = false;
            p.objects.clear();
            p.streams.clear();
        }
        let done = done?;
        self.live.retain(|_, l| !done.gone.contains(l.name.as_str()));
        self.stats.store_bytes = done.size + (self.stats.kept - done.kept_at_start);
        self.stats.streams = done.streams;
        self.stats.retired_by_age += done.retired.by_age;
        self.stats.retired_by_size += done.retired.by_size;
        self.stats.over = done.retired.over;
        Ok(done.retired)
    }

    /// Applies the retention policy now, on this thread (after a sync: nothing is pending),
    /// and measures the store.
    pub fn retain(&mut self, now: SystemTime) -> io::Result<Retired> {
        let pass = self.begin_retention()?;
        let done = pass.run(now);
        self.end_retention(done)
    }
}

impl RetentionPass {
    /// Applies the policy as of `now`: streams not written for `max_age`, then the oldest
    /// while the store is over `max_bytes`, then the objects no stream refers to, skipping
    /// whatever the writer touched since the pass began.
    pub fn run(self, now: SystemTime) -> io::Result<RetentionDone> {
        let mut out = Retired::default();
        let streams = self.store.streams()?;
        let mut refs: HashMap<&str, (u64, u64)> = HashMap::new();
        for s in &streams {
            for c in &s.chunks {
                refs.entry(c.sha256.as_str()).or_insert((0, c.len)).0 += 1;
            }
        }
        let open_bytes = |s: &Stream| s.end() - s.sealed_end();
        let mut size: u64 = refs.values().map(|r| r.1).sum::<u64>() + streams.iter().map(open_bytes).sum::<u64>();
        let mut gone: HashSet<&str> = HashSet::new();
        let drop_stream = |s: &Stream, refs: &mut HashMap<&str, (u64, u64)>, size: &mut u64| {
            for c in &s.chunks {
                let r = refs.get_mut(c.sha256.as_str()).expect("counted");
                r.0 -= 1;
                if r.0 == 0 {
                    *size -= r.1;
                }
            }
            *size -= open_bytes(s);
        };
        if let Some(age) = self.retention.max_age {
            for s in &streams {
                if now.duration_since(s.last_write()).is_ok_and(|d| d > age) {
                    drop_stream(s, &mut refs, &mut size);
                    gone.insert(&s.name);
                    out.by_age += 1;
                }
            }
        }
        if let Some(max) = self.retention.max_bytes {
            let mut by_age: Vec<&Stream> = streams.iter().filter(|s| !gone.contains(s.name.as_str())).collect();
            by_age.sort_by_key(|s| s.last_write());
            for s in by_age {
                if size <= max {
                    break;
                }
                if now.duration_since(s.last_write()).is_ok_and(|d| d > ACTIVE) {
                    drop_stream(s, &mut refs, &mut size);
                    gone.insert(&s.name);
                    out.by_size += 1;
                }
            }
            out.over = size > max;
        }
        let mut removed: HashSet<String> = HashSet::new();
        for s in streams.iter().filter(|s| gone.contains(s.name.as_str())) {
            let p = pins(&self.pins);
            if p.streams.contains(&s.name) {
                // Written again since the listing: kept, and what it holds with it.
                for c in &s.chunks {
                    let r = refs.entry(c.sha256.as_str()).or_insert((0, c.len));
                    if r.0 == 0 {
                        size += r.1;
                    }
                    r.0 += 1;
                }
                size += open_bytes(s);
                continue;
            }
            remove_if_there(&self.store.manifest_path(&s.name))?;
            if open_bytes(s) > 0 {
                remove_if_there(&self.store.open_path(&s.name, s.sealed_end()))?;
            }
            drop(p);
            removed.insert(s.name.clone());
        }
        if !removed.is_empty() {
            sync_path(&self.store.streams_dir())?;
        }
        // Objects no stream refers to (those of retired streams, or linked by a sync a crash
        // cut short).
        let objects = self.store.root().join("objects");
        for d in std::fs::read_dir(&objects)? {
            let d = d?;
            if !d.file_type()?.is_dir() {
                continue;
            }
            for f in std::fs::read_dir(d.path())? {
                let f = f?;
                let name = f.file_name();
                let held = name.to_str().and_then(|n| refs.get(n)).is_some_and(|r| r.0 > 0);
                if !held {
                    let p = pins(&self.pins);
                    if name.to_str().is_some_and(|n| p.objects.contains(n)) {
                        continue;
                    }
                    remove_if_there(&f.path())?;
                    drop(p);
                    out.objects += 1;
                }
            }
        }
        let kept_back = gone.len() - removed.len();
        if kept_back > 0 {
            // Counted as retired, then written again: neither retired nor measured out.
            let by_size = out.by_size.min(kept_back as u64);
            out.by_size -= by_size;
            out.by_age -= (kept_back as u64 - by_size).min(out.by_age);
        }
        Ok(RetentionDone { retired: out, size, streams: (streams.len() - removed.len()) as u64, kept_at_start: self.kept_at_start, gone: removed })
    }
}

/// Syncs the file or directory at `p`.
fn sync_path(p: &Path) -> io::Result<()> {
    File::open(p)?.sync_all()
}

/// A file to sync: open (its data), or by path (all of it).
enum Syncing<'a> {
    Data(&'a File),
    Path(PathBuf),
}

/// Threads that sync at once, at most.
const SYNC_THREADS: usize = 16;

/// [`SYNC_THREADS`], or `$TRANSCRIPTD_SNAPSHOT_SYNC_THREADS` (1: one after another, as
/// before; for the benchmark that compares them, BENCHMARKS.md).
fn sync_threads() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| std::env::var("TRANSCRIPTD_SNAPSHOT_SYNC_THREADS").ok().and_then(|v| v.parse().ok()).filter(|n| *n > 0).unwrap_or(SYNC_THREADS))
}

/// Syncs them all, on up to [`sync_threads`] threads; the first error, once every one has
/// ended.
fn sync_all(syncs: &[Syncing<'_>]) -> io::Result<()> {
    let one = |s: &Syncing<'_>| match s {
        Syncing::Data(f) => f.sync_data(),
        Syncing::Path(p) => sync_path(p),
    };
    let threads = sync_threads();
    if syncs.len() <= 1 || threads == 1 {
        return syncs.iter().try_for_each(one);
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let first_error: std::sync::Mutex<Option<io::Error>> = std::sync::Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads.min(syncs.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(s) = syncs.get(i) else { break };
                if let Err(e) = one(s) {
                    first_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get_or_insert(e);
                }
            });
        }
    });
    match first_error.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn remove_if_there(p: &Path) -> io::Result<()> {
    match std::fs::remove_file(p) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The name streams of `key` share: the file's stem (readable) and a hash of its path and
/// inode (unique).
fn base_name(key: &Key) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let stem: String = key
        .0
        .file_stem()
        .map(|s| s.to_string_lossy())
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
        .take(80)
        .collect();
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(key.0.as_os_str().as_bytes());
    h.update(&key.1.to_le_bytes());
    h.update(&key.2.to_le_bytes());
    format!("{stem}-{:016x}", h.digest())
}

/// The last incarnation of `base` that has a manifest.
fn last_incarnation(store: &Store, base: &str) -> Option<u32> {
    let mut last = None;
    for n in 1.. {
        if store.manifest_path(&format!("{base}-{n}")).exists() {
            last = Some(n);
        } else {
            break;
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KEEP: Retention = Retention { max_age: None, max_bytes: None, every: Duration::from_secs(3600) };

    /// Lines of a transcript: `n` lines of varied length (some long).
    fn transcript(n: usize, seed: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        for i in 0..n {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let len = 50 + (x >> 33) as usize % if i % 97 == 0 { 200_000 } else { 3000 };
            out.extend_from_slice(b"{\"pad\":\"");
            out.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, len));
            out.extend_from_slice(format!("\",\"s\":{x},\"i\":{i}}}\n").as_bytes());
        }
        out
    }

    fn stored(root: &Path, path: &Path) -> Vec<u8> {
        let store = Store::at(root);
        let s = store.streams().unwrap().into_iter().filter(|s| s.path == path).max_by_key(|s| s.started).expect("a stream of the file");
        let mut out = Vec::new();
        store.read(&s, s.from, s.end(), &mut out).unwrap();
        out
    }

    #[test]
    fn a_file_read_in_any_pieces_comes_back_whole_and_shares_its_chunks_with_a_copy() {
        let d = tempfile::tempdir().unwrap();
        let bytes = transcript(3000, 7);
        let mut w = Writer::open(d.path(), KEEP).unwrap();
        let (a, b) = (Path::new("/t/a.jsonl"), Path::new("/t/copy.jsonl"));
        for (i, piece) in bytes.chunks(65_536).enumerate() {
            w.append(a, (1, 1), (i * 65_536) as u64, piece).unwrap();
        }
        // The copy is read in other pieces.
        let mut at = 0;
        for (i, piece) in bytes.chunks(10_007).enumerate() {
            w.append(b, (1, 2), at, piece).unwrap();
            at += piece.len() as u64;
            if i % 50 == 0 {
                w.sync().unwrap();
            }
        }
        w.sync().unwrap();
        assert_eq!(stored(d.path(), a), bytes);
        assert_eq!(stored(d.path(), b), bytes);
        let st = w.stats();
        assert_eq!(st.kept, 2 * bytes.len() as u64);
        assert!(st.deduplicated * 10 > bytes.len() as u64 * 9, "{st:?} of {}", bytes.len());
        let r = w.retain(SystemTime::now()).unwrap();
        assert_eq!(r.objects, 0);
        let st = w.stats();
        assert!(st.store_bytes < bytes.len() as u64 * 11 / 10, "{st:?}");
        let chunks = Store::at(d.path()).streams().unwrap()[0].chunks.clone();
        assert!(chunks.len() > 10 && chunks.iter().all(|c| c.len >= MIN_CHUNK && c.len <= MAX_CHUNK), "{}", chunks.len());
    }

    #[test]
    fn bytes_read_again_are_kept_once_and_other_bytes_begin_the_next_incarnation() {
        let d = tempfile::tempdir().unwrap();
        let p = Path::new("/t/a.jsonl");
        let bytes = transcript(200, 1);
        let mut w = Writer::open(d.path(), KEEP).unwrap();
        w.append(p, (1, 1), 0, &bytes).unwrap();
        w.sync().unwrap();
        // Read again (a restart before the checkpoint): nothing new.
        w.append(p, (1, 1), 100, &bytes[100..]).unwrap();
        w.sync().unwrap();
        assert_eq!(Store::at(d.path()).streams().unwrap().len(), 1);
        // Rewritten in place: the old bytes stay, a new incarnation holds the new.
        let other = transcript(10, 2);
        w.append(p, (1, 1), 0, &other).unwrap();
        w.sync().unwrap();
        let all = Store::at(d.path()).streams().unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(stored(d.path(), p), other);
        let first = all.iter().min_by_key(|s| s.started).unwrap();
        let mut old = Vec::new();
        Store::at(d.path()).read(first, 0, first.end(), &mut old).unwrap();
        assert_eq!(old, bytes);
        // Rewritten from the middle on, read in pieces (a hook's snapshot): the next incarnation
        // holds the file whole, its unchanged start too.
        let mut changed = other.clone();
        changed.extend_from_slice(&transcript(5, 9));
        let half = other.len() / 2;
        w.append(p, (1, 1), 0, &changed[..half]).unwrap();
        w.append(p, (1, 1), half as u64, &changed[half..]).unwrap();
        w.sync().unwrap();
        assert_eq!(stored(d.path(), p), changed, "not changed, only grown: the same incarnation");
        let mut edited = changed.clone();
        edited[half + 10] ^= 1;
        w.append(p, (1, 1), 0, &edited[..half]).unwrap();
        w.append(p, (1, 1), half as u64, &edited[half..]).unwrap();
        w.sync().unwrap();
        assert_eq!(Store::at(d.path()).streams().unwrap().len(), 3);
        assert_eq!(stored(d.path(), p), edited);
        // Truncated, as the daemon says: the next read begins another, even with the same bytes.
        w.left(p, (1, 1), "truncated").unwrap();
        w.append(p, (1, 1), 0, &other[..50]).unwrap();
        w.sync().unwrap();
        let all = Store::at(d.path()).streams().unwrap();
        assert_eq!(all.len(), 4);
        assert_eq!(all.iter().filter(|s| s.left.as_ref().is_some_and(|l| l.0 == "truncated")).count(), 1);
        assert_eq!(stored(d.path(), p), &other[..50]);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        /// A crash (the writer dropped) after any append: a new writer, fed again from what
        /// was synced last (what the daemon's checkpoint covers), ends with the file whole.
        #[test]
        fn a_crash_anywhere_loses_nothing_a_reread_does_not_add(seed in 0u64..1000, cuts in proptest::collection::vec(1usize..300_000, 1..12), crash_after in 0usize..12) {
            let d = tempfile::tempdir().unwrap();
            let p = Path::new("/t/x.jsonl");
            let bytes = transcript(600, seed);
            let mut w = Writer::open(d.path(), KEEP).unwrap();
            let (mut at, mut synced) = (0usize, 0usize);
            for (i, c) in cuts.iter().cycle().enumerate() {
                if at >= bytes.len() { break; }
                let n = (*c).min(bytes.len() - at);
                w.append(p, (3, 4), at as u64, &bytes[at..at + n]).unwrap();
                at += n;
                if i % 3 == 2 {
                    w.sync().unwrap();
                    synced = at;
                }
                if i == crash_after {
                    drop(w);
                    w = Writer::open(d.path(), KEEP).unwrap();
                    at = synced;
                }
            }
            w.sync().unwrap();
            prop_assert_eq!(stored(d.path(), p), bytes);
            prop_assert_eq!(Store::at(d.path()).streams().unwrap().len(), 1);
        }
    }

    #[test]
    fn a_store_damaged_outside_transcriptd_begins_another_incarnation_instead_of_failing() {
        let d = tempfile::tempdir().unwrap();
        let p = Path::new("/t/d.jsonl");
        // Short lines: all of it stays in the open file (no chunk is sealed under MIN_CHUNK).
        let bytes: Vec<u8> = (0..200).flat_map(|i| format!("{{\"i\":{i}}}\n").into_bytes()).collect();
        let half = bytes.len() / 2;
        let mut w = Writer::open(d.path(), KEEP).unwrap();
        w.append(p, (1, 1), 0, &bytes[..half]).unwrap();
        w.sync().unwrap();
        drop(w);
        let open = std::fs::read_dir(d.path().join("streams")).unwrap().map(|e| e.unwrap().path()).find(|p| p.to_string_lossy().contains(".open.")).unwrap();
        // Cut short by someone else: shorter than the manifest's last extent.
        std::fs::OpenOptions::new().write(true).open(&open).unwrap().set_len(10).unwrap();
        // The daemon reads on from its checkpoint: no error, another incarnation from there.
        let mut w = Writer::open(d.path(), KEEP).unwrap();
        w.append(p, (1, 1), half as u64, &bytes[half..]).unwrap();
        w.sync().unwrap();
        assert_eq!(w.stats().damaged, 1);
        let all = Store::at(d.path()).streams().unwrap();
        assert_eq!(all.len(), 2, "{all:#?}");
        let newest = all.iter().max_by_key(|s| s.name.clone()).unwrap();
        assert_eq!((newest.from, newest.end()), (half as u64, bytes.len() as u64), "what was lost before the checkpoint is not made up");
        assert_eq!(stored(d.path(), p), &bytes[half..]);
        drop(w);
        // Damaged again, and read from the start this time (a hook's snapshot): the next
        // incarnation holds the file whole, the bytes the damaged one still holds carried over
        // when they reach the read.
        let open =
            std::fs::read_dir(d.path().join("streams")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.to_string_lossy().contains(".open.")).max().unwrap();
        std::fs::OpenOptions::new().write(true).open(&open).unwrap().set_len(20).unwrap();
        let mut w = Writer::open(d.path(), KEEP).unwrap();
        w.append(p, (1, 1), half as u64 + 5, &bytes[half + 5..]).unwrap();
        w.sync().unwrap();
        assert_eq!(Store::at(d.path()).streams().unwrap().len(), 3);
        assert_eq!(stored(d.path(), p), &bytes[half..], "the damaged one's first 5 bytes carried, the rest appended");
        drop(w);
        std::fs::remove_file(
            std::fs::read_dir(d.path().join("streams")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.to_string_lossy().contains(".open.")).max().unwrap(),
        )
        .unwrap();
        let mut w = Writer::open(d.path(), KEEP).unwrap();
        w.append(p, (1, 1), 0, &bytes).unwrap();
        w.sync().unwrap();
        assert_eq!(stored(d.path(), p), bytes, "an open file that is gone: the same");
        assert_eq!(Store::at(d.path()).streams().unwrap().len(), 4);
    }

    #[test]
    fn a_retention_pass_off_the_writers_thread_removes_nothing_the_writer_touched_meanwhile() {
        let d = tempfile::tempdir().unwrap();
        let a = transcript(400, 5);
        let b = transcript(300, 6);
        let mut w = Writer::open(d.path(), KEEP).unwrap();
        w.append(Path::new("/t/a.jsonl"), (1, 1), 0, &a).unwrap();
        w.append(Path::new("/t/b.jsonl"), (1, 2), 0, &b).unwrap();
        w.sync().unwrap();
        drop(w);
        let mut w = Writer::open(d.path(), Retention { max_age: Some(Duration::from_secs(3600)), max_bytes: None, every: Duration::from_secs(3600) }).unwrap();
        assert!(w.retention_due());
        let pass = w.begin_retention().unwrap();
        assert!(!w.retention_due(), "one pass at a time");
        // While it has not run yet: a copy of a.jsonl (every chunk found stored already) and a
        // file that grew again (b.jsonl, loaded from the store).
        w.append(Path::new("/t/a-copy.jsonl"), (1, 3), 0, &a).unwrap();
        let more = transcript(5, 7);
        w.append(Path::new("/t/b.jsonl"), (1, 2), b.len() as u64, &more).unwrap();
        w.sync().unwrap();
        // Two hours on, on another thread: a.jsonl is old and goes; its chunks stay (the copy
        // holds them), and b.jsonl stays (written since the pass began).
        let later = SystemTime::now() + Duration::from_secs(7200);
        let done = std::thread::spawn(move || pass.run(later)).join().unwrap();
        let r = w.end_retention(done).unwrap();
        assert_eq!((r.by_age, r.by_size), (1, 0), "{r:?}");
        assert_eq!(stored(d.path(), Path::new("/t/a-copy.jsonl")), a);
        let mut whole = b.clone();
        whole.extend_from_slice(&more);
        assert_eq!(stored(d.path(), Path::new("/t/b.jsonl")), whole);
        let names: Vec<PathBuf> = Store::at(d.path()).streams().unwrap().into_iter().map(|s| s.path).collect();
        assert!(!names.contains(&PathBuf::from("/t/a.jsonl")), "{names:?}");
        assert_eq!(w.stats().streams, 2);
        // The next writer's first pass, with nothing touched (the streams a writer holds in
        // memory were written in the last ten minutes: a pass keeps them): the rest is old too.
        drop(w);
        let mut w = Writer::open(d.path(), KEEP).unwrap();
        w.retention.max_age = Some(Duration::from_secs(3600));
        let pass = w.begin_retention().unwrap();
        let r = w.end_retention(pass.run(later)).unwrap();
        assert_eq!(r.by_age, 2);
        assert!(Store::at(d.path()).streams().unwrap().is_empty());
    }

    #[test]
    fn one_writer_at_a_time() {
        let d = tempfile::tempdir().unwrap();
        let w = Writer::open(d.path(), KEEP).unwrap();
        let e = Writer::open(d.path(), KEEP).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
        drop(w);
        Writer::open(d.path(), KEEP).unwrap();
    }

    #[test]
    fn retention_removes_old_streams_and_the_objects_only_they_held() {
        let d = tempfile::tempdir().unwrap();
        let mut w = Writer::open(d.path(), KEEP).unwrap();
        let a = transcript(400, 3);
        let b = transcript(400, 4);
        w.append(Path::new("/t/a.jsonl"), (1, 1), 0, &a).unwrap();
        w.append(Path::new("/t/b.jsonl"), (1, 2), 0, &b).unwrap();
        w.append(Path::new("/t/a-copy.jsonl"), (1, 3), 0, &a).unwrap();
        w.sync().unwrap();
        // A writer's pass keeps the streams it holds in memory (written in the last ten
        // minutes): the next writer's, with the clock moved on, is the one to look at.
        drop(w);
        let mut w = Writer::open(d.path(), KEEP).unwrap();
        let objects = |root: &Path| walkdir::WalkDir::new(root.join("objects")).into_iter().filter(|e| e.as_ref().unwrap().file_type().is_file()).count();
        let before = objects(d.path());
        // Nothing is old yet.
        w.retention.max_age = Some(Duration::from_secs(3600));
        assert_eq!(w.retain(SystemTime::now()).unwrap(), Retired::default());
        // An hour and a minute later: all of them; two hours before, none.
        let later = SystemTime::now() + Duration::from_secs(3660);
        w.retention.max_age = None;
        w.retention.max_bytes = Some(1);
        let r = w.retain(later).unwrap();
        assert_eq!((r.by_size, r.over), (3, false));
        assert_eq!(objects(d.path()), 0, "{before} objects before");
        assert!(Store::at(d.path()).streams().unwrap().is_empty());
    }
}
