//! The parse front of a transcript stream: framing → format detection → adapter → counters.
//!
//! Fed byte chunks (never the whole file), it produces the framing [`Output`]s, hands each
//! readable line to its [`Observer`] and counts [`Stats`]. It validates nothing: it is the front
//! of [`super::Pipeline`], whose stages pair and validate, and every shell, test and fuzz target
//! checks through the pipeline ([`super::check::check_bytes`] too). [`feed_parallel`] feeds a
//! whole stream, parsing on several threads; the lines reach the observer in file order, so the
//! outputs are identical.
//!
//! Calling order: [`Checker::feed`] any number of times, then [`Checker::finish`] once.

use super::dataset::{self, CustomIds, LineReport};
use super::finding::malformed;
use super::finding::{Finding, Kind, Output};
use super::formats::{Detector, Format};
use super::lines::{self, Block, LineSplitter};
use super::model::{Entry, Parsed, Usage};
use super::scan;

mod parallel;
pub use parallel::{feed_parallel, CutChunk, Cutter, ParsedChunk};

/// How a checker reads its input.
#[derive(Debug, Clone)]
pub struct Options {
    /// The format, or `None` to detect it from the first lines.
    pub format: Option<Format>,
    /// Lines longer than this are `line_too_long`.
    pub max_line_bytes: usize,
    /// Stop at the first line that cannot be read (`load_strict`) instead of reporting it and
    /// going on (`load`).
    pub strict: bool,
    /// Threads to parse one large stream with ([`feed_parallel`], [`check_bytes`]).
    pub jobs: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options { format: None, max_line_bytes: lines::DEFAULT_MAX_LINE_BYTES, strict: false, jobs: 1 }
    }
}

/// The strict policy met a line it cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {kind}: {message}")]
pub struct StrictStop {
    /// The line.
    pub line: u64,
    /// What is wrong with it.
    pub kind: Kind,
    /// Details.
    pub message: String,
}

/// Counters over what was read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Non-blank lines read (complete ones).
    pub lines: u64,
    /// Bytes read: those framed into lines, blank ones included, and a torn last line's (a
    /// summary that counts the torn line among the lines counts its bytes too).
    pub bytes: u64,
    /// Conversation entries.
    pub messages: u64,
    /// User turns: user messages that start one (prompts), not those that only carry tool
    /// results or a compaction summary, nor the prompt of a subagent whose records Claude Code
    /// 1.0.x wrote into the main file (a sidechain line, when the file's first message is not).
    pub turns: u64,
    /// Known records that are not conversation.
    pub other_records: u64,
    /// Records of unknown types (skipped).
    pub unknown_records: u64,
    /// Tool calls.
    pub calls: u64,
    /// Tool results.
    pub results: u64,
    /// Compactions.
    pub compactions: u64,
    /// Lines that could not be read (framing findings).
    pub bad_lines: u64,
    /// Claude Code: lines whose `parentUuid` names a line not seen before them.
    pub dangling_parents: u64,
    /// Token usage by model: each API message once, with its final usage.
    pub tokens: ByModel,
    /// The part of `tokens` from requests whose prompt (input and cache) passed
    /// [`pricing::LONG_CONTEXT_TOKENS`](crate::transcript::pricing::LONG_CONTEXT_TOKENS), which
    /// long-context prices charge at their higher rates as a whole.
    pub long_context: ByModel,
}

/// Token usage by model, in model order. Most files name one or two models: a sorted vector
/// (one small allocation) rather than a B-tree, whose first node has room for eleven — one
/// per watched file, twice (the daemon keeps the counters it last exported).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ByModel(Vec<(String, Usage)>);

impl ByModel {
    /// The usage of `model`, made zero if it has none yet.
    pub fn entry(&mut self, model: &str) -> &mut Usage {
        let i = match self.0.binary_search_by(|(m, _)| m.as_str().cmp(model)) {
            Ok(i) => i,
            Err(i) => {
                // Room for one more, not for four: a file names one model or two.
                self.0.reserve_exact(1);
                self.0.insert(i, (model.to_owned(), Usage::default()));
                i
            }
        };
        &mut self.0[i].1
    }

    /// The usage of `model`.
    pub fn get(&self, model: &str) -> Option<&Usage> {
        self.0.binary_search_by(|(m, _)| m.as_str().cmp(model)).ok().map(|i| &self.0[i].1)
    }

    /// Models and their usage, in model order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Usage)> {
        self.0.iter().map(|(m, u)| (m, u))
    }

    /// The usages, in model order.
    pub fn values(&self) -> impl Iterator<Item = &Usage> {
        self.0.iter().map(|(_, u)| u)
    }

    /// How many models.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no model was seen.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'a> IntoIterator for &'a ByModel {
    type Item = (&'a String, &'a Usage);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (String, Usage)>, fn(&'a (String, Usage)) -> (&'a String, &'a Usage)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(m, u)| (m, u))
    }
}

impl std::ops::Index<&str> for ByModel {
    type Output = Usage;

    fn index(&self, model: &str) -> &Usage {
        self.get(model).unwrap_or_else(|| panic!("no usage for model {model}"))
    }
}

impl Stats {
    /// Every non-blank line: those read and those that could not be (what a summary counts as
    /// the file's lines: a file of 20 lines of garbage has 20 lines, not 0).
    pub fn non_blank_lines(&self) -> u64 {
        self.lines + self.bad_lines
    }
}

/// What one line turned into, before pairing.
#[derive(Debug)]
pub enum Outcome<'a> {
    /// A readable line.
    Parsed(u64, Parsed<'a>),
    /// A line that cannot be read.
    Fault(Finding),
    /// Valid JSON, but the format is not known yet.
    Undetected(u64),
    /// A line of a dataset: a whole conversation, checked on its own.
    Dataset(u64, Box<LineReport>),
}

impl Outcome<'_> {
    /// Adds `base` to the line number (lines of a piece parsed on its own start at 0).
    fn renumber(&mut self, base: u64) {
        match self {
            Outcome::Parsed(line, _) | Outcome::Undetected(line) => *line += base,
            Outcome::Fault(f) => f.line += base,
            Outcome::Dataset(line, r) => {
                *line += base;
                for f in &mut r.findings {
                    f.line += base;
                }
            }
        }
    }
}

/// Reads one line (no newline, not blank). Pure and thread-safe: the parallel path calls it from
/// several threads.
pub fn read_line(number: u64, bytes: &[u8], max: usize, format: Option<Format>) -> Outcome<'_> {
    if bytes.len() > max {
        return Outcome::Fault(Finding::new(number, Kind::LineTooLong, format!("line of {} bytes is over the limit of {max}", bytes.len())));
    }
    if simdutf8::basic::from_utf8(bytes).is_err() {
        let e = simdutf8::compat::from_utf8(bytes).unwrap_err();
        return Outcome::Fault(Finding::new(number, Kind::InvalidUtf8, format!("invalid UTF-8 at byte {}", e.valid_up_to())));
    }
    if let Some(d) = format.and_then(Format::dataset) {
        return match dataset::check_line(d, number, bytes) {
            Ok(r) => Outcome::Dataset(number, Box::new(r)),
            // A dataset line is a conversation for an API to take: one that cannot be checked
            // stays a `malformed_line` (removed by repair), its message naming the limit.
            Err(_) if too_deep(bytes) => Outcome::Fault(Finding::new(number, Kind::MalformedLine, format!("{TOO_DEEP}: the conversation cannot be checked"))),
            Err(_) => Outcome::Fault(malformed(number, bytes)),
        };
    }
    let parsed = match format {
        Some(f) => f.parse(bytes),
        None => scan::object_line(bytes, |s, _| s.skip()).map(|_| Parsed::of(crate::transcript::model::Entry::Unknown)),
    };
    match parsed {
        Ok(_) if format.is_none() => Outcome::Undetected(number),
        // The agent's own loader refuses the line (and the file with it): a line it cannot read.
        Ok(p) => match p.refused {
            Some(why) => Outcome::Fault(Finding::new(number, Kind::RefusedRecord, format!("the agent's loader refuses this record: {why}"))),
            None => Outcome::Parsed(number, p),
        },
        // A transcript line nested too deep is still a valid JSON record the agent reads back:
        // said (a warning), not read, and kept by repair.
        Err(_) if too_deep(bytes) => {
            Outcome::Fault(Finding::new(number, Kind::NestedTooDeep, format!("{TOO_DEEP}: the line was not read, and is kept as it is")))
        }
        Err(_) if format == Some(Format::ClaudeCode) && is_padding(bytes) => Outcome::Fault(padding(number)),
        Err(_) => Outcome::Fault(malformed(number, bytes)),
    }
}

/// Whether a line holds only NUL bytes (and blanks): what a crash leaves where a write the
/// filesystem had sized was lost.
fn is_padding(bytes: &[u8]) -> bool {
    bytes.contains(&0) && bytes.iter().all(|&b| b == 0 || b.is_ascii_whitespace())
}

/// A line of NUL padding in a Claude Code transcript: `malformed_line`, but a warning — Claude
/// Code skips the line on resume, and it held nothing (issue 27's measurement with 2.1.332).
/// Repair still removes it ([`Finding::mended`]).
fn padding(number: u64) -> Finding {
    let mut f = Finding::new(number, Kind::MalformedLine, "a line of only NUL bytes (what a crash leaves where a write was lost): not JSON");
    f.severity = crate::transcript::Severity::Warning;
    f.mended = true;
    f.on_resume = Some("on resume Claude Code skips it: it held nothing".into());
    f
}

const TOO_DEEP: &str = "a JSON object nested deeper than 128 levels (the depth limit)";

/// Whether `bytes`, which the scanner rejected, are a JSON object that is valid but nested
/// deeper than [`scan::MAX_DEPTH`]: serde_json's ignoring reader has no depth limit.
fn too_deep(bytes: &[u8]) -> bool {
    let text = bytes.trim_ascii_start();
    text.first() == Some(&b'{') && scan::nesting_depth(text) > scan::MAX_DEPTH as usize && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
}

/// Reads a framed line: [`read_line`], with the line limit counting a byte-order mark that
/// starts the stream (left out of the content), as the splitter counts it.
pub fn read_framed<'a>(l: &lines::Line<'a>, max: usize, format: Option<Format>) -> Outcome<'a> {
    if l.bytes.len() > l.limit(max) {
        let len = l.bytes.len() + (max - l.limit(max));
        return Outcome::Fault(Finding::new(l.number, Kind::LineTooLong, format!("line of {len} bytes is over the limit of {max}")));
    }
    read_line(l.number, l.bytes, max, format)
}

/// Something that watches the front line by line, in order: a pipeline's stages do.
///
/// Each readable line reaches [`Observer::line`]; framing findings and the findings of
/// [`Checker::finish`] arrive through [`Observer::output`].
pub trait Observer: Send {
    /// The format, once it is known (before the first line in that format).
    fn format(&mut self, _format: Format) {}
    /// The format detector looked at line `number` (detection may still change with it).
    fn detecting(&mut self, _number: u64) {}
    /// A readable line and its meaning.
    fn line(&mut self, _number: u64, _parsed: &Parsed<'_>) {}
    /// An output, as it is produced.
    fn output(&mut self, _output: &Output) {}
}

/// No observer.
impl Observer for () {}

/// What a finished stream produced.
#[derive(Debug)]
pub struct Checked<O = ()> {
    /// Outputs not drained yet.
    pub outputs: Vec<Output>,
    /// Counters.
    pub stats: Stats,
    /// The format, if known.
    pub format: Option<Format>,
    /// The observer, with what it gathered.
    pub observer: O,
}

/// The parse front of one stream. See the module docs.
#[derive(Debug)]
pub struct Checker<O = ()> {
    opts: Options,
    splitter: LineSplitter,
    detector: Detector,
    outputs: Vec<Output>,
    stats: Stats,
    stopped: Option<StrictStop>,
    codex_model: Option<String>,
    custom_ids: CustomIds,
    /// Claude Code: `isSidechain` of the file's first message, the main conversation's.
    main_side: Option<bool>,
    /// The usage counted for the API messages seen last, newest first (see [`Checker::count`]).
    recent_usage: std::collections::VecDeque<(u64, Usage)>,
    /// Number of the next physical line.
    next_line: u64,
    /// Whether the observer was told the format.
    told: bool,
    observer: O,
}

impl Checker<()> {
    /// A checker at the start of a stream.
    pub fn new(opts: Options) -> Self {
        Checker::observed(opts, ())
    }
}

impl<O: Observer> Checker<O> {
    /// A checker at the start of a stream, watched by `observer`.
    pub fn observed(opts: Options, observer: O) -> Self {
        let splitter = LineSplitter::new(opts.max_line_bytes);
        Self::with_splitter(opts, splitter, observer)
    }

    /// A checker over a splitter that may continue a stream at some offset (lines are still
    /// numbered from 1). The pairing state starts empty.
    pub fn with_splitter(opts: Options, splitter: LineSplitter, observer: O) -> Self {
        let detector = opts.format.map_or_else(Detector::new, Detector::fixed);
        let told = opts.format.is_some();
        let mut observer = observer;
        if let Some(f) = opts.format {
            observer.format(f);
        }
        Checker {
            opts,
            splitter,
            detector,
            outputs: Vec::new(),
            stats: Stats::default(),
            stopped: None,
            codex_model: None,
            custom_ids: CustomIds::default(),
            main_side: None,
            recent_usage: std::collections::VecDeque::new(),
            next_line: 1,
            told,
            observer,
        }
    }

    /// The format, once known.
    pub fn format(&self) -> Option<Format> {
        self.detector.format()
    }

    /// The format, once the detector has stopped looking (it may still change before).
    pub fn settled_format(&self) -> Option<Format> {
        self.detector.format().filter(|_| !self.detector.wants_more())
    }

    /// Whether the detector has stopped looking (the format, or its absence, is final).
    pub fn settled(&self) -> bool {
        !self.detector.wants_more()
    }

    /// Counters so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Outputs produced since the last call.
    pub fn drain(&mut self) -> std::vec::Drain<'_, Output> {
        self.outputs.drain(..)
    }

    /// The `torn_line` [`Checker::finish`] would report if the stream ended now, without ending
    /// it. Lenient policy only.
    pub fn torn(&self) -> Option<Finding> {
        let held = self.splitter.pending_bytes();
        (held > 0 && !self.splitter.pending_is_blank())
            .then(|| Finding::new(self.next_line, Kind::TornLine, format!("last line ({held} bytes) has no newline: an interrupted write")))
    }

    /// Lets go of spare capacity between reads: outputs already drained. The state is kept.
    pub fn shrink(&mut self) {
        if self.outputs.is_empty() {
            self.outputs = Vec::new();
        }
    }

    /// The observer.
    pub fn observer(&self) -> &O {
        &self.observer
    }

    /// The observer, to change.
    pub fn observer_mut(&mut self) -> &mut O {
        &mut self.observer
    }

    /// Number of the next physical line.
    pub fn next_line(&self) -> u64 {
        self.next_line
    }

    /// The line splitter (offsets for checkpoints, the partial line held).
    pub fn splitter(&self) -> &LineSplitter {
        &self.splitter
    }

    /// Feeds the next chunk. With the strict policy, returns the first unreadable line and
    /// ignores everything after it.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), StrictStop> {
        if let Some(s) = &self.stopped {
            return Err(s.clone());
        }
        let mut splitter = std::mem::replace(&mut self.splitter, LineSplitter::new(1));
        splitter.feed(chunk, &mut |b| self.block(b));
        self.splitter = splitter;
        match &self.stopped {
            Some(s) => Err(s.clone()),
            None => Ok(()),
        }
    }

    /// Ends the stream: a last line without a newline is `torn_line`; a stream none of whose
    /// lines was of a known format is `unknown_format`.
    pub fn finish(mut self) -> Result<Checked<O>, StrictStop> {
        if let Some(s) = self.stopped.take() {
            return Err(s);
        }
        let line = self.next_line;
        if let Some(t) = self.splitter.finish() {
            self.stats.bytes += t.len;
            let f = Finding::new(line, Kind::TornLine, format!("last line ({} bytes) has no newline: an interrupted write", t.len));
            self.fault(f);
            if let Some(s) = self.stopped.take() {
                return Err(s);
            }
        }
        if let Some(f) = unknown_format(self.opts.format, self.detector.format(), &self.stats) {
            let o = Output::Finding(f);
            self.observer.output(&o);
            self.outputs.push(o);
        }
        Ok(Checked { outputs: self.outputs, stats: self.stats, format: self.detector.format(), observer: self.observer })
    }

    fn block(&mut self, b: Block<'_>) {
        if self.stopped.is_some() {
            return;
        }
        match b {
            Block::LongBytes(_) => {}
            Block::TooLong { len, raw, .. } => self.too_long(len, raw),
            Block::Lines { offset, bytes } => {
                self.stats.bytes += bytes.len() as u64;
                let mut it = lines::lines(self.next_line, offset, bytes);
                for l in it.by_ref() {
                    if self.stopped.is_some() {
                        return;
                    }
                    self.observe(&l);
                    let o = read_framed(&l, self.opts.max_line_bytes, self.detector.format());
                    self.apply(o);
                }
                self.next_line = it.next_number();
            }
        }
    }

    /// An over-long line of `len` bytes (`raw` on disk), skipped by the splitter.
    fn too_long(&mut self, len: u64, raw: u64) {
        if self.stopped.is_some() {
            return;
        }
        self.stats.bytes += raw;
        let f = Finding::new(self.next_line, Kind::LineTooLong, format!("line of {len} bytes is over the limit of {}", self.opts.max_line_bytes));
        self.next_line += 1;
        self.fault(f);
    }

    /// Lines read elsewhere (by [`feed_parallel`]): `bytes` of them, `count` physical lines
    /// numbered from 0, with what each non-blank one turned into. Only once the format is known.
    fn apply_lines(&mut self, bytes: u64, count: u64, outcomes: Vec<Outcome<'_>>) {
        if self.stopped.is_some() {
            return;
        }
        self.stats.bytes += bytes;
        let base = self.next_line;
        for mut o in outcomes {
            if self.stopped.is_some() {
                return;
            }
            o.renumber(base);
            self.apply(o);
        }
        self.next_line = base + count;
    }

    /// Lets the detector look at a line while it still wants to. Not at an over-long line: one
    /// that spans reads is skipped without being held, so looking at one that did not would
    /// make the format depend on how the input was cut.
    fn observe(&mut self, line: &lines::Line<'_>) {
        if !self.detector.wants_more() || line.bytes.len() > line.limit(self.opts.max_line_bytes) {
            return;
        }
        self.detector.observe(line.bytes);
        self.observer.detecting(line.number);
        if let (false, Some(f)) = (self.told, self.detector.format()) {
            self.told = true;
            self.observer.format(f);
        }
    }

    fn apply(&mut self, o: Outcome<'_>) {
        match o {
            Outcome::Fault(f) => self.fault(f),
            Outcome::Undetected(_) => {
                self.stats.lines += 1;
                self.stats.unknown_records += 1;
            }
            Outcome::Dataset(line, r) => {
                self.stats.lines += 1;
                self.stats.messages += r.messages;
                self.stats.calls += r.calls;
                self.stats.results += r.results;
                let LineReport { findings, custom_id, .. } = *r;
                let dup = custom_id.and_then(|id| self.custom_ids.see(line, &id));
                for f in findings.into_iter().chain(dup) {
                    let o = Output::Finding(f);
                    self.observer.output(&o);
                    self.outputs.push(o);
                }
            }
            Outcome::Parsed(line, p) => {
                self.stats.lines += 1;
                self.count(&p);
                self.observer.line(line, &p);
            }
        }
    }

    fn count(&mut self, p: &Parsed<'_>) {
        let s = &mut self.stats;
        match &p.entry {
            Entry::Message(m) => {
                s.messages += 1;
                let side = p.node.is_some_and(|n| n.sidechain);
                s.turns += u64::from(m.prompt && side == *self.main_side.get_or_insert(side));
                s.calls += m.calls.len() as u64;
                s.results += m.results.len() as u64;
            }
            Entry::Compaction { .. } => s.compactions += 1,
            Entry::Other => s.other_records += 1,
            Entry::Unknown => s.unknown_records += 1,
        }
        if self.detector.format().is_some_and(Format::model_carries_over) {
            if let Some(m) = &p.model {
                self.codex_model = Some(m.to_string());
            }
        }
        if let Some(u) = p.usage {
            // Each API message counts once, with its final usage: Claude Code writes one
            // message over several lines (one content block each, other threads' lines may come
            // between), each with the usage so far, and output tokens grow over them. A later
            // line of a message seen lately replaces the usage counted for it when its total is
            // larger (as ccusage does); a line without a message id counts on its own. Codex
            // repeats a report under the same running total: it counts once.
            let model = p.model.as_deref().or(self.codex_model.as_deref()).unwrap_or("unknown");
            let seen = if u.key == 0 { None } else { self.recent_usage.iter().position(|(k, _)| *k == u.key) };
            let counted = match seen {
                Some(i) => {
                    let (_, old) = self.recent_usage[i];
                    if total(&u) <= total(&old) {
                        return;
                    }
                    self.recent_usage[i].1 = u;
                    Some(old)
                }
                None => {
                    if u.key != 0 {
                        if self.recent_usage.len() == RECENT_MESSAGES {
                            self.recent_usage.pop_back();
                        }
                        self.recent_usage.push_front((u.key, u));
                    }
                    None
                }
            };
            let old = counted.unwrap_or_default();
            replace(self.stats.tokens.entry(model), &old, &u);
            // A request whose prompt passed the long-context threshold is priced at the long
            // rates as a whole (input, cache and output): its tokens are kept apart too, so a
            // price can be put on them after the fact (`pricing`).
            let long = |u: &Usage| u.prompt() > crate::transcript::pricing::LONG_CONTEXT_TOKENS;
            if long(&old) || long(&u) {
                let none = Usage::default();
                let (o, n) = (if long(&old) { &old } else { &none }, if long(&u) { &u } else { &none });
                replace(self.stats.long_context.entry(model), o, n);
            }
        }
    }

    fn fault(&mut self, f: Finding) {
        self.stats.bad_lines += 1;
        if self.opts.strict {
            self.stopped = Some(StrictStop { line: f.line, kind: f.kind, message: f.message });
        } else {
            let o = Output::Finding(f);
            self.observer.output(&o);
            self.outputs.push(o);
        }
    }
}

/// The `unknown_format` finding of a whole stream, if it has one: readable lines, none of them a
/// record of a known format (detected), or of the format given (`forced`; datasets excepted,
/// whose lines are each judged as conversations). Nothing in such a file was checked, which a
/// clean result must not hide.
pub fn unknown_format(forced: Option<Format>, detected: Option<Format>, stats: &Stats) -> Option<Finding> {
    let lines = stats.lines;
    let s = if lines == 1 { "" } else { "s" };
    match forced {
        None if detected.is_none() && stats.unknown_records > 0 => {
            let scope = if lines > u64::from(crate::transcript::formats::DETECT_LINES) {
                format!(" among the first {}", crate::transcript::formats::DETECT_LINES)
            } else {
                String::new()
            };
            Some(Finding::file(
                Kind::UnknownFormat,
                format!("no line{scope} is a record of a known format: none of its {lines} line{s} was checked (give --format if it is one)"),
            ))
        }
        Some(f) if !matches!(f, Format::Dataset(_)) && lines > 0 && stats.messages + stats.compactions + stats.other_records == 0 => {
            Some(Finding::file(Kind::UnknownFormat, format!("no line is a {f} record (the format given): none of its {lines} line{s} was checked")))
        }
        _ => None,
    }
}

/// How many API messages back a later line of a message is still recognised as one: the lines
/// of one message are separated only by results and by other threads' lines (parallel
/// subagents), so a few suffice; a miss scans them all, for every message.
const RECENT_MESSAGES: usize = 16;

/// Takes `old` out of the counts `t` and puts `new` in. Saturating: a count is what a transcript
/// says (`1e85` reads as `u64::MAX`), and a sum that wrapped would report a handful of tokens
/// (or panic in a debug build).
fn replace(t: &mut Usage, old: &Usage, new: &Usage) {
    t.input = t.input.saturating_add(new.input).saturating_sub(old.input);
    t.output = t.output.saturating_add(new.output).saturating_sub(old.output);
    t.cache_read = t.cache_read.saturating_add(new.cache_read).saturating_sub(old.cache_read);
    t.cache_creation = t.cache_creation.saturating_add(new.cache_creation).saturating_sub(old.cache_creation);
    t.cache_creation_1h = t.cache_creation_1h.saturating_add(new.cache_creation_1h).saturating_sub(old.cache_creation_1h);
}

/// All the tokens of a usage report.
fn total(u: &Usage) -> u64 {
    u.total()
}

/// Applies a stream of outputs and sorts the findings by line (stable: same-line findings keep
/// their emission order).
pub fn collect(outputs: impl IntoIterator<Item = Output>) -> Vec<Finding> {
    let mut findings = Vec::new();
    for o in outputs {
        super::finding::apply(&mut findings, o);
    }
    findings.sort_by_key(|f| f.line);
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_that_is_not_json_is_said_in_plain_words_with_its_column() {
        // Issue 30: parser jargon reached users ("not JSON: expected ident (column 2)").
        let mut wrong = Vec::new();
        for (line, said) in [
            (&b"{\"a\": tx}"[..], "not JSON: a word JSON does not have (it has true, false and null) (column 8)"),
            (b"{\"a\":\"x", "not JSON: the line ends inside a string (column 7)"),
            (b"{\"a\":1", "not JSON: the line ends before its object is closed (column 6)"),
            (b"{\"a\":[1", "not JSON: the line ends before a list is closed (column 7)"),
            (b"{\"a\":", "not JSON: the line ends where a value should be (column 5)"),
            (b"{\"a\" 1}", "not JSON: a key without a `:` after it (column 6)"),
            (b"{\"a\":[1 2]}", "not JSON: a list item not followed by `,` or `]` (column 9)"),
            (b"{\"a\":1 \"b\":2}", "not JSON: a value not followed by `,` or `}` (column 8)"),
            (b"{\"a\":,}", "not JSON: no value where one should be (column 6)"),
            (b"{a:1}", "not JSON: an object key that is not a string (column 2)"),
            (b"{\"a\":\"\\q\"}", "not JSON: a backslash escape JSON does not have (column 8)"),
            (b"{\"a\":\"\x01\"}", "not JSON: a raw control character inside a string (a newline or tab must be written as \\n or \\t) (column 6)"),
            (b"{\"a\":[1,]}", "not JSON: no value where one should be (column 9)"),
            (b"{\"a\":1,}", "not JSON: an object key that is not a string (column 8)"),
            (b"{\"a\":1}{\"b\":2}", "not JSON: more text after the record's end (two records on one line?) (column 8)"),
            (b"{\"a\":\"\\u12\"}", "not JSON: a backslash escape JSON does not have (column 12)"),
        ] {
            let got = malformed(1, line).message;
            if got != said {
                wrong.push(format!("{}: {got}", String::from_utf8_lossy(line)));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn usage_by_model_iterates_in_model_order_and_keeps_one_slot_a_model() {
        let mut t = ByModel::default();
        for (model, n) in [("sonnet", 1), ("haiku", 2), ("opus", 3), ("haiku", 4), ("sonnet", 5)] {
            t.entry(model).input += n;
        }
        let got: Vec<(&str, u64)> = t.iter().map(|(m, u)| (m.as_str(), u.input)).collect();
        assert_eq!(got, [("haiku", 6), ("opus", 3), ("sonnet", 6)]);
        assert_eq!((t.len(), t["opus"].input, t.get("gpt").is_none()), (3, 3, true));
        assert_eq!(t.values().map(|u| u.input).sum::<u64>(), 15);
        let mut one = ByModel::default();
        one.entry("m").output = 1;
        assert_eq!(one.0.capacity(), 1, "a file of one model keeps one slot");
    }
}
