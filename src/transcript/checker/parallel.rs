//! One stream parsed on several threads, paired in order.
//!
//! Parsing a line (UTF-8, JSON grammar, the fields a format needs) is most of the work and needs
//! nothing from the lines before it; pairing (validation, the session tree, counters) needs every
//! line in file order but is cheap. So the stream is cut into chunks of complete lines, the
//! chunks are parsed on `jobs` threads, and each parsed chunk is paired as soon as every chunk
//! before it has been: whichever thread finishes the chunk that is next in order does the
//! pairing, with no barrier between chunks, so no thread waits while another pairs.
//!
//! Every thread reads too: it takes the next chunk of the stream into a buffer of its own (one
//! thread at a time, under the lock that also guards the line splitter) and parses it while the
//! bytes are still in its core's cache. Lines are never copied, except one that spans two
//! reads. A chunk's buffer is free again once the chunk is paired, and there are only a few
//! buffers: memory stays flat whatever the file size. The outputs are those of
//! [`Checker::feed`], byte for byte (tested).

use super::{read_framed, Checker, Observer, Outcome, StrictStop};
use crate::transcript::formats::Format;
use crate::transcript::lines::{self, Block, Cut, LineSplitter};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, TryLockError};

/// Read buffers per parse thread (being parsed, or parsed and waiting for their turn).
const BUFFERS_PER_JOB: usize = 3;

/// Where the lines of a chunk are.
#[derive(Debug)]
enum Span {
    /// Complete lines in the chunk's buffer, the first at stream offset `offset`.
    InBuffer { range: Range<usize>, offset: u64 },
    /// A line that spanned two reads, copied out of the splitter, at stream offset `offset`.
    Copied(Vec<u8>, u64),
    /// An over-long line (its length, and its length on disk), skipped by the splitter.
    TooLong(u64, u64),
}

/// A buffer as read, and what the splitter found in it.
#[derive(Debug)]
struct Chunk {
    buf: Vec<u8>,
    spans: Vec<Span>,
}

/// A span once parsed.
#[derive(Debug)]
enum Piece<'a> {
    /// Lines: their bytes (blank ones included), their number (physical lines, numbered from 0
    /// in the span) and what each non-blank one turned into.
    Lines { bytes: u64, count: u64, outcomes: Vec<Outcome<'a>> },
    /// An over-long line of this length (and this length on disk).
    TooLong(u64, u64),
}

type Pieces<'a> = Vec<Piece<'a>>;

self_cell::self_cell!(
    /// A chunk and its parsed lines, which borrow from it.
    struct Parsed {
        owner: Chunk,
        // Not covariant: the parsed model holds `SmallVec`s, which are invariant.
        #[not_covariant]
        dependent: Pieces,
    }
    impl {Debug}
);

fn parse(chunk: &Chunk, max: usize, format: Option<Format>) -> Pieces<'_> {
    chunk
        .spans
        .iter()
        .map(|s| {
            let (bytes, offset) = match s {
                Span::InBuffer { range, offset } => (&chunk.buf[range.clone()], *offset),
                Span::Copied(v, offset) => (v.as_slice(), *offset),
                Span::TooLong(len, raw) => return Piece::TooLong(*len, *raw),
            };
            // Offsets only tell the stream's first line (and its byte-order mark) apart.
            let mut it = lines::lines(0, offset, bytes);
            let outcomes = it.by_ref().map(|l| read_framed(&l, max, format)).collect();
            Piece::Lines { bytes: bytes.len() as u64, count: it.next_number(), outcomes }
        })
        .collect()
}

/// Cuts `bytes` (the next read of the stream) into spans of complete lines.
fn cut_spans(splitter: &mut LineSplitter, bytes: &[u8], spans: &mut Vec<Span>) {
    splitter.cut(bytes, &mut |c| match c {
        Cut::InChunk { range, offset } => spans.push(Span::InBuffer { range, offset }),
        Cut::Block(Block::Lines { bytes, offset }) => spans.push(Span::Copied(bytes.to_vec(), offset)),
        Cut::Block(Block::TooLong { len, raw, .. }) => spans.push(Span::TooLong(len, raw)),
        // Not kept: `keep_long` is off.
        Cut::Block(Block::LongBytes(_)) => {}
    });
}

/// Applies a parsed chunk's lines to `checker`, in order.
fn pair<O: Observer>(checker: &mut Checker<O>, p: &mut Parsed) {
    p.with_dependent_mut(|_, pieces| {
        for piece in pieces.drain(..) {
            match piece {
                Piece::Lines { bytes, count, outcomes } => checker.apply_lines(bytes, count, outcomes),
                Piece::TooLong(len, raw) => checker.too_long(len, raw),
            }
        }
    });
}

/// The line framing of a stream taken out of its [`Checker`] ([`Checker::cutter`]) so that a
/// shell can read ahead on other threads, across as many calls as it likes: each read is cut
/// here (in stream order, one read at a time), parsed anywhere ([`CutChunk::parse`]), and
/// applied to the checker in stream order ([`Checker::apply_parsed`]). The outputs are those of
/// [`Checker::feed`] over the same reads (tested).
#[derive(Debug)]
pub struct Cutter {
    splitter: LineSplitter,
    max: usize,
    format: Option<Format>,
}

impl Cutter {
    /// Cuts the next read of the stream, `buf[..len]`, into spans of complete lines (a line
    /// that continues in the next read stays held).
    pub fn cut(&mut self, buf: Vec<u8>, len: usize) -> CutChunk {
        let mut spans = Vec::new();
        cut_spans(&mut self.splitter, &buf[..len], &mut spans);
        let committed = self.splitter.committed_offset();
        CutChunk { chunk: Chunk { buf, spans }, len, committed, max: self.max, format: self.format }
    }
}

/// One read, cut into spans of lines, not parsed yet.
#[derive(Debug)]
pub struct CutChunk {
    chunk: Chunk,
    len: usize,
    committed: u64,
    max: usize,
    format: Option<Format>,
}

impl CutChunk {
    /// Parses its lines (on any thread).
    pub fn parse(self) -> ParsedChunk {
        let (max, format, len, committed) = (self.max, self.format, self.len, self.committed);
        ParsedChunk { parsed: Parsed::new(self.chunk, |c| parse(c, max, format)), len, committed }
    }
}

/// One read with its lines parsed, to be applied in stream order ([`Checker::apply_parsed`]).
#[derive(Debug)]
pub struct ParsedChunk {
    parsed: Parsed,
    len: usize,
    committed: u64,
}

impl ParsedChunk {
    /// The bytes read.
    pub fn bytes(&self) -> &[u8] {
        &self.parsed.borrow_owner().buf[..self.len]
    }

    /// Stream offset after the last complete line cut so far, this read's included.
    pub fn committed(&self) -> u64 {
        self.committed
    }
}

impl<O: Observer> Checker<O> {
    /// Takes the line framing out, for reads cut and parsed elsewhere ([`Cutter`]); `None`
    /// until the format is settled (the adapter a line is parsed with depends on it) or after
    /// the strict policy stopped. Until [`Checker::restore_cutter`], the checker's own splitter
    /// stands at the last line applied, with nothing held: dropping the cutter instead of
    /// restoring it leaves the checker ready to read again from
    /// `splitter().committed_offset()`.
    pub fn cutter(&mut self) -> Option<Cutter> {
        if self.stopped.is_some() || self.detector.wants_more() {
            return None;
        }
        let (max, committed) = (self.opts.max_line_bytes, self.splitter.committed_offset());
        let splitter = std::mem::replace(&mut self.splitter, LineSplitter::resume(max, committed));
        Some(Cutter { splitter, max, format: self.detector.format() })
    }

    /// Applies the next parsed read, in stream order; returns its buffer for the next read.
    pub fn apply_parsed(&mut self, mut chunk: ParsedChunk) -> Vec<u8> {
        pair(self, &mut chunk.parsed);
        self.splitter = LineSplitter::resume(self.opts.max_line_bytes, chunk.committed);
        chunk.parsed.into_owner().buf
    }

    /// Puts back the framing taken by [`Checker::cutter`], after every read it cut was applied.
    pub fn restore_cutter(&mut self, cutter: Cutter) {
        self.splitter = cutter.splitter;
    }
}

/// Parsed chunks waiting for their turn to be paired.
struct Turns {
    next: u64,
    waiting: BTreeMap<u64, Parsed>,
}

/// The stream, read by one thread at a time.
struct Source<F> {
    fill: F,
    splitter: LineSplitter,
    seq: u64,
    done: bool,
}

/// Read buffers: made up to a limit, then reused once their chunk is paired.
struct Buffers {
    spare: Vec<Vec<u8>>,
    made: usize,
    /// A thread panicked: nobody should wait for a buffer any more.
    broken: bool,
}

/// What the threads share: the stream, the checker (locked by whoever pairs), the chunks
/// parsed out of order, the buffers, and whether to stop reading.
struct Shared<'c, O, F> {
    source: Mutex<Source<F>>,
    checker: Mutex<&'c mut Checker<O>>,
    turns: Mutex<Turns>,
    buffers: Mutex<Buffers>,
    returned: Condvar,
    stop: AtomicBool,
    chunk: usize,
    limit: usize,
    max: usize,
    format: Option<Format>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().expect("a parse thread panicked")
}

impl<O: Observer, F: FnMut(&mut [u8]) -> usize> Shared<'_, O, F> {
    /// One parse thread: read a chunk, parse it, pair what is in turn; until the stream ends.
    fn work(&self) {
        let _guard = PanicGuard(self);
        while let Some(buf) = self.buffer() {
            let Some((seq, chunk)) = self.read(buf) else { return };
            let parsed = Parsed::new(chunk, |c| parse(c, self.max, self.format));
            self.arrive(seq, parsed);
        }
    }

    /// A free buffer, waiting for one if all are in use; `None` once reading should stop.
    fn buffer(&self) -> Option<Vec<u8>> {
        let mut b = lock(&self.buffers);
        loop {
            if b.broken || self.stop.load(Ordering::Relaxed) {
                return None;
            }
            if let Some(buf) = b.spare.pop() {
                return Some(buf);
            }
            if b.made < self.limit {
                b.made += 1;
                return Some(vec![0u8; self.chunk]);
            }
            b = self.returned.wait(b).expect("a parse thread panicked");
        }
    }

    /// Reads the next chunk into `buf` and cuts it into spans of lines; `None` at the end.
    fn read(&self, mut buf: Vec<u8>) -> Option<(u64, Chunk)> {
        let mut src = lock(&self.source);
        let mut spans = Vec::new();
        while !src.done && spans.is_empty() {
            let n = (src.fill)(&mut buf);
            if n == 0 {
                src.done = true;
                break;
            }
            cut_spans(&mut src.splitter, &buf[..n], &mut spans);
            // No span: all of it is the start of a long line, now held by the splitter.
        }
        if spans.is_empty() {
            lock(&self.buffers).spare.push(buf);
            return None;
        }
        src.seq += 1;
        Some((src.seq - 1, Chunk { buf, spans }))
    }

    /// Files chunk `seq` and pairs every chunk whose turn has come, unless another thread is
    /// pairing already (it will take this one too).
    fn arrive(&self, seq: u64, parsed: Parsed) {
        lock(&self.turns).waiting.insert(seq, parsed);
        loop {
            let mut checker = match self.checker.try_lock() {
                Ok(c) => c,
                Err(TryLockError::WouldBlock) => return,
                Err(TryLockError::Poisoned(e)) => panic!("a parse thread panicked while pairing: {e}"),
            };
            while let Some(mut p) = self.next_in_turn() {
                pair(&mut checker, &mut p);
                lock(&self.buffers).spare.push(p.into_owner().buf);
                if checker.stopped.is_some() {
                    // Every thread waiting for a buffer must see it, not just one.
                    self.stop.store(true, Ordering::Relaxed);
                    self.returned.notify_all();
                } else {
                    self.returned.notify_one();
                }
            }
            drop(checker);
            // A chunk that arrived while this thread held the checker found it taken: look
            // again now that it is released.
            let t = lock(&self.turns);
            if !t.waiting.contains_key(&t.next) {
                return;
            }
        }
    }

    fn next_in_turn(&self) -> Option<Parsed> {
        let mut t = lock(&self.turns);
        let next = t.next;
        let p = t.waiting.remove(&next)?;
        t.next += 1;
        Some(p)
    }
}

/// Wakes the other threads if a parse thread panics, so that they stop instead of waiting for
/// a buffer that will never come back (the panic is then re-raised by the scope).
struct PanicGuard<'s, 'c, O, F>(&'s Shared<'c, O, F>);

impl<O, F> Drop for PanicGuard<'_, '_, O, F> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop.store(true, Ordering::Relaxed);
            if let Ok(mut b) = self.0.buffers.lock() {
                b.broken = true;
            }
            self.0.returned.notify_all();
        }
    }
}

/// Feeds a whole stream to `checker`, parsing on `jobs` threads (this one and `jobs - 1` more).
/// `fill` reads the next bytes of the stream into the buffer it is given (`chunk` bytes long)
/// and returns how many it read, 0 at the end (a read error is the caller's to keep: it returns
/// 0 and remembers it). It is called by one thread at a time, each parsing what it read while
/// the bytes are still in its cache.
///
/// Until the format is known the stream is fed line by line as with [`Checker::feed`]; the rest
/// is read in chunks that are parsed in parallel. Call [`Checker::finish`] afterwards as usual.
/// With the strict policy, reading stops at the first unreadable line, which is returned.
pub fn feed_parallel<O: Observer>(
    checker: &mut Checker<O>,
    jobs: usize,
    chunk: usize,
    mut fill: impl FnMut(&mut [u8]) -> usize + Send,
) -> Result<(), StrictStop> {
    let (jobs, chunk) = (jobs.max(1), chunk.max(1));
    let mut buf = vec![0u8; chunk];
    // The format decides how lines parse: settle it first, on this thread.
    while checker.detector.wants_more() {
        let n = fill(&mut buf);
        if n == 0 {
            return checker.stopped.clone().map_or(Ok(()), Err);
        }
        checker.feed(&buf[..n])?;
    }
    let (max, format) = (checker.opts.max_line_bytes, checker.detector.format());
    let splitter = std::mem::replace(&mut checker.splitter, LineSplitter::new(1));
    let shared = Shared {
        source: Mutex::new(Source { fill, splitter, seq: 0, done: false }),
        checker: Mutex::new(&mut *checker),
        turns: Mutex::new(Turns { next: 0, waiting: BTreeMap::new() }),
        buffers: Mutex::new(Buffers { spare: vec![buf], made: 1, broken: false }),
        returned: Condvar::new(),
        stop: AtomicBool::new(false),
        chunk,
        limit: jobs * BUFFERS_PER_JOB,
        max,
        format,
    };
    std::thread::scope(|scope| {
        for _ in 1..jobs {
            scope.spawn(|| shared.work());
        }
        shared.work();
    });
    let splitter = shared.source.into_inner().expect("no parse thread panicked").splitter;
    checker.splitter = splitter;
    checker.stopped.clone().map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::super::{collect, Options};
    use super::*;
    use proptest::prelude::*;

    type Checked = Result<(Vec<crate::transcript::finding::Finding>, super::super::Stats), StrictStop>;

    fn sequential(input: &[u8], max: usize, strict: bool) -> Checked {
        let mut c = Checker::new(Options { max_line_bytes: max, strict, ..Options::default() });
        c.feed(input)?;
        let d = c.finish()?;
        Ok((collect(d.outputs), d.stats))
    }

    fn parallel(input: &[u8], max: usize, strict: bool, jobs: usize, chunk: usize) -> Checked {
        let mut c = Checker::new(Options { max_line_bytes: max, strict, jobs, ..Options::default() });
        let mut at = 0;
        feed_parallel(&mut c, jobs, chunk, |buf| {
            let n = buf.len().min(input.len() - at);
            buf[..n].copy_from_slice(&input[at..at + n]);
            at += n;
            n
        })?;
        let d = c.finish()?;
        Ok((collect(d.outputs), d.stats))
    }

    fn line() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(r#"{"type":"user","uuid":"u1","parentUuid":null,"message":{"role":"user","content":"hi"}}"#.to_owned()),
            Just(r#"{"type":"assistant","uuid":"a1","parentUuid":"u1","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}}"#.to_owned()),
            Just(r#"{"type":"user","uuid":"r1","parentUuid":"a1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}"#.to_owned()),
            Just(r#"{"type":"user","uuid":"r2","parentUuid":"a1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t9","content":"x"}]}}"#.to_owned()),
            Just(r#"{"type":"progress","data":{}}"#.to_owned()),
            Just("not json".to_owned()),
            Just("   ".to_owned()),
            Just(format!(r#"{{"type":"user","message":{{"role":"user","content":"{}"}}}}"#, "y".repeat(90))),
        ]
    }

    #[test]
    fn an_over_long_line_never_decides_the_format() {
        // Over the limit, the first line is skipped whether it arrives in one read or across
        // several; once, the detector looked at it only in the first case.
        let input = format!(
            "{}\n{}\n",
            r#"{"type":"assistant","uuid":"a1","parentUuid":"u1","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}}"#,
            r#"{"type":"progress","data":{}}"#
        );
        let whole = sequential(input.as_bytes(), 100, false).unwrap();
        assert_eq!(whole.1.unknown_records, 1, "format undecided: the progress line is not known");
        for chunk in [1, 7, 64, 4096] {
            assert_eq!(parallel(input.as_bytes(), 100, false, 2, chunk).unwrap(), whole, "{chunk}-byte reads");
        }
    }

    /// Through a [`Cutter`], read `chunk` bytes at a time; after `cancel` reads (if any) the
    /// cutter is dropped and the rest fed from the committed offset, as the daemon does when
    /// it stops a read-ahead.
    fn cut_ahead(input: &[u8], max: usize, chunk: usize, cancel: Option<usize>) -> Checked {
        let mut c = Checker::new(Options { max_line_bytes: max, ..Options::default() });
        let mut at = 0;
        while !c.settled() && at < input.len() {
            let n = chunk.min(input.len() - at);
            c.feed(&input[at..at + n])?;
            at += n;
        }
        if let Some(mut cutter) = c.cutter() {
            let mut reads = 0;
            let mut cut = Vec::new();
            while at < input.len() && Some(reads) != cancel {
                let n = chunk.min(input.len() - at);
                cut.push(cutter.cut(input[at..at + n].to_vec(), n));
                at += n;
                reads += 1;
            }
            // Parsed on other threads, applied in order.
            let parsed: Vec<ParsedChunk> =
                std::thread::scope(|s| cut.into_iter().map(|c| s.spawn(|| c.parse())).collect::<Vec<_>>().into_iter().map(|h| h.join().unwrap()).collect());
            for p in parsed {
                let n = p.bytes().len();
                assert!(c.apply_parsed(p).len() >= n);
            }
            if Some(reads) == cancel {
                at = c.splitter().committed_offset() as usize;
            } else {
                c.restore_cutter(cutter);
            }
        }
        while at < input.len() {
            let n = chunk.min(input.len() - at);
            c.feed(&input[at..at + n])?;
            at += n;
        }
        let d = c.finish()?;
        Ok((collect(d.outputs), d.stats))
    }

    proptest! {
        #[test]
        fn read_ahead_equals_sequential(lines in proptest::collection::vec(line(), 0..60), torn in any::<bool>(), chunk in 1usize..300, cancel in proptest::option::of(0usize..20)) {
            let mut input = lines.join("\n").into_bytes();
            if !torn && !input.is_empty() {
                input.push(b'\n');
            }
            prop_assert_eq!(cut_ahead(&input, 100, chunk, cancel), sequential(&input, 100, false));
        }

        #[test]
        fn parallel_equals_sequential(lines in proptest::collection::vec(line(), 0..60), torn in any::<bool>(), jobs in 1usize..4, chunk in 1usize..300, strict in any::<bool>()) {
            let mut input = lines.join("\n").into_bytes();
            if !torn && !input.is_empty() {
                input.push(b'\n');
            }
            // A small limit makes the long line over-long, so skipped lines cross chunks too.
            let max = 100;
            prop_assert_eq!(parallel(&input, max, strict, jobs, chunk), sequential(&input, max, strict));
        }
    }
}
