//! Batch sources: turn command-line paths into an ordered list of inputs, and read an input in
//! chunks into a reused buffer.
//!
//! The walk follows links and never stops at a path it cannot use: a dangling link, a link loop,
//! a directory it may not read, a FIFO or socket named `*.jsonl` are each a [`Skipped`] record
//! (the verbs print a warning and go on, as ripgrep does). Files are opened through
//! [`regular::open`], so nothing but a regular file is ever read.

use super::regular;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// One thing to read.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Input {
    /// A file on disk.
    File(PathBuf),
    /// Standard input (`-`).
    Stdin,
}

impl Input {
    /// How the input is named in output.
    pub fn display(&self) -> String {
        match self {
            Input::File(p) => p.display().to_string(),
            Input::Stdin => "-".to_owned(),
        }
    }

    /// The path, when the input is a file.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Input::File(p) => Some(p),
            Input::Stdin => None,
        }
    }
}

/// A meta sidecar found while walking whose transcript is missing (the data-loss guard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingTranscript {
    /// The sidecar.
    pub meta: PathBuf,
    /// Where its transcript should be.
    pub transcript: PathBuf,
}

/// Why a path was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// A symbolic link whose target does not exist.
    DanglingSymlink,
    /// A symbolic link that leads back to itself or to a directory above it.
    SymlinkLoop,
    /// A FIFO, socket or device named like a transcript (never opened).
    NotRegular,
    /// Any other error reading the path or directory (permission denied, vanished, ...).
    Unreadable,
}

impl SkipReason {
    /// The name in records (`dangling_symlink`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::DanglingSymlink => "dangling_symlink",
            SkipReason::SymlinkLoop => "symlink_loop",
            SkipReason::NotRegular => "not_regular",
            SkipReason::Unreadable => "unreadable",
        }
    }
}

/// A path the walk could not use: skipped with a warning, the rest goes on (as ripgrep does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The path.
    pub path: PathBuf,
    /// Why.
    pub reason: SkipReason,
    /// What went wrong, for people.
    pub message: String,
    /// Whether it makes the verb exit 2 at the end: a path that could not be read (a dangling
    /// link, a loop, an IO error), or one named on the command line that is not a regular file.
    /// A FIFO, socket or device met while walking a directory is only a warning.
    pub error: bool,
}

/// What [`expand`] found.
#[derive(Debug, Default)]
pub struct Expanded {
    /// The inputs, sorted by path, each once.
    pub inputs: Vec<Input>,
    /// Meta sidecars whose transcript is missing.
    pub missing: Vec<MissingTranscript>,
    /// Paths skipped, sorted by path.
    pub skipped: Vec<Skipped>,
    /// Directories given that hold no `*.jsonl` file (nor a meta sidecar, nor anything
    /// skipped): nothing was read from them, which a verb says rather than report a clean run.
    pub empty_dirs: Vec<PathBuf>,
}

impl Expanded {
    /// How many skipped paths are errors (see [`Skipped::error`]).
    pub fn errors(&self) -> usize {
        self.skipped.iter().filter(|s| s.error).count()
    }
}

/// The inputs named by `paths`, sorted by path: files as given, directories walked recursively
/// (following links) for `*.jsonl`, `-` for stdin. Also returns meta sidecars whose transcript
/// is missing, and the paths skipped: a path that cannot be read (a dangling link, a link loop,
/// a permission error) or that is not a regular file is skipped and reported, never fatal.
pub fn expand(paths: &[PathBuf]) -> Expanded {
    let mut out = Expanded::default();
    for p in paths {
        if p.as_os_str() == "-" {
            out.inputs.push(Input::Stdin);
            continue;
        }
        let meta = match std::fs::metadata(p) {
            Ok(m) => m,
            Err(e) => {
                out.skipped.push(skip_io(p, &e));
                continue;
            }
        };
        if meta.is_file() {
            out.inputs.push(Input::File(p.clone()));
            continue;
        }
        if !meta.is_dir() {
            let kind = regular::FileKind::of(meta.file_type());
            out.skipped.push(Skipped {
                path: p.clone(),
                reason: SkipReason::NotRegular,
                message: format!("not a regular file ({}): not read", kind.describe()),
                error: true,
            });
            continue;
        }
        let before = (out.inputs.len(), out.missing.len(), out.skipped.len());
        walk(p, &mut out);
        if before == (out.inputs.len(), out.missing.len(), out.skipped.len()) {
            out.empty_dirs.push(p.clone());
        }
    }
    out.inputs.sort();
    out.inputs.dedup();
    out.missing.sort_by(|a, b| a.transcript.cmp(&b.transcript));
    out.skipped.sort_by(|a, b| a.path.cmp(&b.path));
    out.skipped.dedup_by(|a, b| a.path == b.path);
    out
}

fn walk(root: &Path, out: &mut Expanded) {
    for entry in walkdir::WalkDir::new(root).follow_links(true).sort_by_file_name() {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                out.skipped.push(skip_walk(root, &e));
                continue;
            }
        };
        let ty = entry.file_type();
        if ty.is_dir() {
            continue;
        }
        let path = entry.path();
        let name = entry.file_name().to_string_lossy();
        if is_no_transcript(&name) {
            // What `repair` removed, a backup it kept, or an agent's sidecar: not a transcript.
            continue;
        }
        if !ty.is_file() {
            if name.ends_with(".jsonl") {
                let kind = regular::FileKind::of(ty);
                out.skipped.push(Skipped {
                    path: path.to_path_buf(),
                    reason: SkipReason::NotRegular,
                    message: format!("not a regular file ({}): skipped, never opened", kind.describe()),
                    error: false,
                });
            }
            continue;
        }
        if name.ends_with(".jsonl") {
            out.inputs.push(Input::File(path.to_path_buf()));
        } else if let Some(transcript) = transcript_of_meta(path) {
            if !transcript.exists() {
                out.missing.push(MissingTranscript { meta: path.to_path_buf(), transcript });
            }
        }
    }
}

/// The skip record of a path `stat` failed on.
fn skip_io(path: &Path, e: &io::Error) -> Skipped {
    let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let (reason, message) = if e.raw_os_error() == Some(libc::ELOOP) {
        (SkipReason::SymlinkLoop, "symbolic link loop: not followed".to_owned())
    } else if link && e.kind() == io::ErrorKind::NotFound {
        let target = std::fs::read_link(path).map(|t| t.display().to_string()).unwrap_or_default();
        (SkipReason::DanglingSymlink, format!("dangling symbolic link (to {target}): skipped"))
    } else {
        (SkipReason::Unreadable, format!("{e}"))
    };
    Skipped { path: path.to_path_buf(), reason, message, error: true }
}

fn skip_walk(root: &Path, e: &walkdir::Error) -> Skipped {
    let path = e.path().unwrap_or(root).to_path_buf();
    if let Some(ancestor) = e.loop_ancestor() {
        return Skipped {
            path,
            reason: SkipReason::SymlinkLoop,
            message: format!("symbolic link loop (back to {}): not followed", ancestor.display()),
            error: true,
        };
    }
    match e.io_error() {
        Some(io) => skip_io(&path, io),
        None => Skipped { path, reason: SkipReason::Unreadable, message: e.to_string(), error: true },
    }
}

/// Whether a file name is one `repair` writes beside a transcript rather than a transcript: its
/// rejects file `<stem>.rejects.jsonl`, or a backup `<name>.jsonl<suffix>` whose suffix ends in
/// `.jsonl` too (`--backup-suffix .orig.jsonl`; the default `.orig` ends otherwise, and so does
/// any temporary file of an atomic write). Walks leave them out; named as paths, they are read.
pub fn is_repair_by_product(name: &str) -> bool {
    name.ends_with(".rejects.jsonl") || name.strip_suffix(".jsonl").is_some_and(|stem| stem.contains(".jsonl"))
}

/// Whether a walk leaves a `.jsonl` file out as no transcript: a by-product of `repair`
/// ([`is_repair_by_product`]), or an agent's own sidecar beside its sessions — Qwen Code's
/// prompt ledger `<sessionId>.ledger.jsonl` (`qwen serve`'s `getPromptLedgerPath`; its own
/// session lists leave it out by that suffix). Named as paths, they are read.
pub fn is_no_transcript(name: &str) -> bool {
    is_repair_by_product(name) || name.ends_with(".ledger.jsonl")
}

/// The transcript a meta sidecar describes: `<dir>/.meta.json` → `<dir>/transcript.jsonl`
/// (session directories), `<id>.meta.json` → `<id>.jsonl` (flat layout).
pub fn transcript_of_meta(meta: &Path) -> Option<PathBuf> {
    let name = meta.file_name()?.to_str()?;
    if name == ".meta.json" {
        return Some(meta.with_file_name("transcript.jsonl"));
    }
    let stem = name.strip_suffix(".meta.json")?;
    Some(meta.with_file_name(format!("{stem}.jsonl")))
}

thread_local! {
    static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's read buffer: one allocation per worker thread, however many
/// files it reads (zeroing a fresh megabyte per small file costs more than reading it).
pub fn with_buffer<T>(f: impl FnOnce(&mut Vec<u8>) -> T) -> T {
    BUFFER.with(|b| match b.try_borrow_mut() {
        Ok(mut buf) => {
            let r = f(&mut buf);
            if buf.len() > 8 << 20 {
                // Grown for one unusual file (a long held tail): not kept for the rest.
                *buf = Vec::new();
            }
            r
        }
        // Re-entered (a worker helping another task of the pool): a buffer of its own.
        Err(_) => f(&mut Vec::new()),
    })
}

/// Runs `f` with a reader of `input` (one that can move to another thread).
pub fn with_reader<T>(input: &Input, f: impl FnOnce(&mut (dyn Read + Send)) -> io::Result<T>) -> io::Result<T> {
    match input {
        Input::File(p) => f(&mut regular::open_file(p)?),
        Input::Stdin => f(&mut io::stdin()),
    }
}

/// Reads `input` to the end in chunks of the buffer's capacity, handing each to `f`.
pub fn read_chunks(input: &Input, buf: &mut Vec<u8>, f: impl FnMut(&[u8]) -> bool) -> io::Result<u64> {
    with_reader(input, |r| read_to_end(r, buf, f))
}

/// One read into `buf`, retried when interrupted: how many bytes, 0 at the end.
pub fn read_some(reader: &mut (impl Read + ?Sized), buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match reader.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// Reads `reader` to the end in chunks of the buffer's capacity (at least 64 KiB), handing
/// each to `f` until it returns false.
pub fn read_to_end(reader: &mut (impl Read + ?Sized), buf: &mut Vec<u8>, mut f: impl FnMut(&[u8]) -> bool) -> io::Result<u64> {
    let cap = buf.capacity().max(64 << 10);
    buf.resize(cap, 0);
    let mut total = 0u64;
    loop {
        let n = read_some(reader, &mut buf[..])?;
        if n == 0 {
            return Ok(total);
        }
        total += n as u64;
        if !f(&buf[..n]) {
            return Ok(total);
        }
    }
}

/// A read buffer that keeps the bytes its consumer is not done with: each read lands after
/// them, so a consumer can hold back a tail (an unfinished line, lines not yet final) without
/// copying it anywhere else. Held bytes move to the front only when the buffer's end is
/// reached. The buffer is borrowed, so that one allocation serves every file a worker reads.
#[derive(Debug)]
pub struct Window<'b> {
    buf: &'b mut Vec<u8>,
    start: usize,
    end: usize,
    chunk: usize,
}

impl<'b> Window<'b> {
    /// A window over `buf` (its contents are overwritten) that reads `chunk` bytes at a time.
    pub fn new(buf: &'b mut Vec<u8>, chunk: usize) -> Self {
        let chunk = chunk.max(1);
        if buf.len() < 2 * chunk {
            buf.resize(2 * chunk, 0);
        }
        Window { buf, start: 0, end: 0, chunk }
    }

    /// Reads the next chunk after the held bytes: how many bytes came (0 at the end).
    pub fn fill(&mut self, r: &mut impl Read) -> io::Result<usize> {
        if self.end + self.chunk > self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.end + self.chunk > self.buf.len() {
                self.buf.resize(self.end + self.chunk, 0);
            }
        }
        let n = read_some(r, &mut self.buf[self.end..self.end + self.chunk])?;
        self.end += n;
        Ok(n)
    }

    /// The bytes held: those not consumed, the last read's at the end.
    pub fn held(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// The last `n` bytes held (what the last read brought).
    pub fn fresh(&self, n: usize) -> &[u8] {
        &self.buf[self.end - n..self.end]
    }

    /// Drops the first `n` bytes held.
    pub fn consume(&mut self, n: usize) {
        self.start += n.min(self.end - self.start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_keeps_what_is_not_consumed() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let mut r = &data[..];
        let mut buf = Vec::new();
        let mut w = Window::new(&mut buf, 7);
        let mut got = Vec::new();
        let mut step = 0;
        while w.fill(&mut r).unwrap() > 0 {
            step += 1;
            // Consume a varying part of what is held, sometimes nothing.
            let n = w.held().len() * (step % 3) / 2;
            got.extend_from_slice(&w.held()[..n]);
            w.consume(n);
        }
        got.extend_from_slice(w.held());
        assert_eq!(got, data);
    }

    #[test]
    fn meta_sidecar_names() {
        assert_eq!(transcript_of_meta(Path::new("/w/s1/.meta.json")), Some(PathBuf::from("/w/s1/transcript.jsonl")));
        assert_eq!(transcript_of_meta(Path::new("/w/abc.meta.json")), Some(PathBuf::from("/w/abc.jsonl")));
        assert_eq!(transcript_of_meta(Path::new("/w/abc.json")), None);
    }

    #[test]
    fn expand_skips_what_it_cannot_read_and_goes_on() {
        use std::os::unix::fs::symlink;
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.jsonl"), "").unwrap();
        symlink(d.path().join("nowhere"), d.path().join("dangling.jsonl")).unwrap();
        symlink(d.path().join("self.jsonl"), d.path().join("self.jsonl")).unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        symlink("..", d.path().join("sub/up")).unwrap();
        let _sock = std::os::unix::net::UnixListener::bind(d.path().join("s.jsonl")).unwrap();
        let found = expand(&[d.path().to_path_buf(), d.path().join("missing.jsonl")]);
        assert_eq!(found.inputs, vec![Input::File(d.path().join("a.jsonl"))]);
        let got: Vec<(String, SkipReason, bool)> =
            found.skipped.iter().map(|s| (s.path.strip_prefix(d.path()).unwrap().display().to_string(), s.reason, s.error)).collect();
        assert_eq!(
            got,
            vec![
                ("dangling.jsonl".into(), SkipReason::DanglingSymlink, true),
                ("missing.jsonl".into(), SkipReason::Unreadable, true),
                ("s.jsonl".into(), SkipReason::NotRegular, false),
                ("self.jsonl".into(), SkipReason::SymlinkLoop, true),
                ("sub/up".into(), SkipReason::SymlinkLoop, true),
            ]
        );
        assert_eq!(found.errors(), 4);
    }

    #[test]
    fn expand_walks_sorted_and_guards_data_loss() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("b")).unwrap();
        std::fs::write(d.path().join("b/z.jsonl"), "").unwrap();
        std::fs::write(d.path().join("a.jsonl"), "").unwrap();
        std::fs::write(d.path().join("notes.txt"), "").unwrap();
        std::fs::write(d.path().join("gone.meta.json"), "{}").unwrap();
        // Qwen Code's prompt ledger beside a session, and repair's by-products: no transcripts.
        std::fs::write(d.path().join("b/s1.ledger.jsonl"), "{}\n").unwrap();
        std::fs::write(d.path().join("b/z.rejects.jsonl"), "{}\n").unwrap();
        let found = expand(&[d.path().to_path_buf()]);
        assert_eq!(found.inputs, vec![Input::File(d.path().join("a.jsonl")), Input::File(d.path().join("b/z.jsonl"))]);
        assert_eq!(found.missing[0].transcript, d.path().join("gone.jsonl"));
        assert!(found.skipped.is_empty());
        assert_eq!(expand(&[d.path().join("b/s1.ledger.jsonl")]).inputs.len(), 1, "named, it is read");
    }
}
