//! The canonical turn model every format adapter produces, one [`Entry`] per line.
//!
//! An entry borrows from the line it was parsed from; ids that contain JSON escapes are the only
//! owned strings. The validator, the compaction scans and the repair planner all work on entries,
//! never on a format's own JSON.

use smallvec::SmallVec;
use std::borrow::Cow;

/// Who speaks in a conversation entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// A person, or the host speaking for them (tool results in Claude and Anthropic formats).
    User,
    /// The model.
    Assistant,
    /// System instructions.
    System,
    /// Developer instructions (OpenAI, Codex).
    Developer,
    /// A tool result message (OpenAI `role: "tool"`, Codex `*_output` items).
    Tool,
}

impl Role {
    /// Lower-case name, as the APIs spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
            Role::Developer => "developer",
            Role::Tool => "tool",
        }
    }
}

/// Whether a call's arguments are a JSON object, as every API requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Args {
    /// A JSON object (or arguments a format does not carry as JSON, such as Codex's freeform
    /// `custom_tool_call` input).
    Object,
    /// JSON that is not an object.
    NotObject,
    /// A string that does not parse as JSON.
    Unparseable,
}

/// A tool call made by the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call<'a> {
    /// The id results refer to.
    pub id: Cow<'a, str>,
    /// Tool name.
    pub name: Cow<'a, str>,
    /// Shape of the arguments.
    pub args: Args,
    /// The item type of the call where the format has several (Codex `function_call`,
    /// `custom_tool_call`, ...): its result is the `<type>_output` item.
    pub item: Option<Cow<'a, str>>,
}

/// A tool result, answering the call with `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult<'a> {
    /// The call it answers.
    pub id: Cow<'a, str>,
}

/// Token usage reported on a line (Claude `message.usage`, Codex `token_count`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Lines that repeat one usage report share a key (Claude: the message id, Codex: the
    /// running total); count a report once per key.
    pub key: u64,
    /// Input tokens not read from the cache.
    pub input: u64,
    /// Output tokens (reasoning included).
    pub output: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the prompt cache.
    pub cache_creation: u64,
    /// The part of `cache_creation` written with a one-hour lifetime (Claude's
    /// `cache_creation.ephemeral_1h_input_tokens`), which Anthropic prices higher than the
    /// default five minutes. Never more than `cache_creation`.
    pub cache_creation_1h: u64,
}

impl Usage {
    /// All four counts. Counts are what a transcript says (`1e85` reads as `u64::MAX`): the
    /// sum saturates, never wraps.
    pub fn total(&self) -> u64 {
        self.input.saturating_add(self.output).saturating_add(self.cache_read).saturating_add(self.cache_creation)
    }

    /// Adds `o`'s counts to these, saturating.
    pub fn add(&mut self, o: &Usage) {
        self.input = self.input.saturating_add(o.input);
        self.output = self.output.saturating_add(o.output);
        self.cache_read = self.cache_read.saturating_add(o.cache_read);
        self.cache_creation = self.cache_creation.saturating_add(o.cache_creation);
        self.cache_creation_1h = self.cache_creation_1h.saturating_add(o.cache_creation_1h);
    }

    /// The prompt's size: every input token, read from the cache, written to it or neither
    /// (what a long-context price tier is decided on).
    pub fn prompt(&self) -> u64 {
        self.input.saturating_add(self.cache_read).saturating_add(self.cache_creation)
    }
}

/// Where a Claude Code line sits in the session's uuid tree. Uuids are kept as 64-bit hashes:
/// the tree is only asked "is this an ancestor of that".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    /// Hash of `uuid`.
    pub id: u64,
    /// Hash of `parentUuid`, when not null.
    pub parent: Option<u64>,
    /// `isSidechain: true`: the line belongs to a subagent's thread, not to the main
    /// conversation (see [`crate::transcript::pairing::threads`]).
    pub sidechain: bool,
}

/// One message, or for Claude Code one line of a message split over several lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message<'a> {
    /// Who speaks.
    pub role: Role,
    /// Lines that share this key are one turn (a hash of Claude's `message.id`); `None`: the
    /// line is a turn of its own.
    pub turn: Option<u64>,
    /// Tool calls it makes.
    pub calls: SmallVec<[Call<'a>; 1]>,
    /// Tool results it carries.
    pub results: SmallVec<[ToolResult<'a>; 1]>,
    /// Whether any part is not blank (text with non-whitespace, a call, an image, ...).
    pub has_content: bool,
    /// A user message that starts a user turn (not only tool results, not a compact summary).
    pub prompt: bool,
    /// What the provider API's own rules need from the content (Anthropic Messages shapes).
    pub api: ApiFacts,
}

/// What the provider API's own rules need from one line's content, read with its blocks
/// (Anthropic Messages shapes): for each rule, the first block that breaks it, by its index in
/// the line's `content` (a string content is block 0). Read by [`crate::transcript::pairing::api`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApiFacts {
    /// A `text` block that is empty (`false`) or only whitespace (`true`).
    pub empty_text: Option<(u16, bool)>,
    /// The content is a string (not an array of blocks).
    pub string: bool,
    /// A `thinking` block without a (non-empty) `signature`.
    pub unsigned_thinking: Option<u16>,
    /// A `thinking` or `redacted_thinking` block after a block that is neither (blank text
    /// aside: the agent drops it, and the API reports it as `empty_text`).
    pub thinking_after: Option<u16>,
    /// The line has a `thinking` or `redacted_thinking` block.
    pub thinking: bool,
    /// The line has a block that is not thinking and not blank text.
    pub other: bool,
    /// A `tool_result` block after a block that is not one.
    pub result_after: Option<u16>,
    /// Images in the content (those inside `tool_result` content included).
    pub images: u16,
    /// An image whose base64 `data` is empty.
    pub empty_image: Option<u16>,
    /// The largest base64 image: its block, bytes of its base64 data.
    pub image_bytes: Option<(u16, u64)>,
    /// The image with the longest side: its block, width, height.
    pub image_px: Option<(u16, u32, u32)>,
    /// Bytes of the `content` value as written (what the request carries of this line).
    pub bytes: u64,
}

impl<'a> Message<'a> {
    /// An empty message of `role`.
    pub fn new(role: Role) -> Self {
        Message { role, turn: None, calls: SmallVec::new(), results: SmallVec::new(), has_content: false, prompt: false, api: ApiFacts::default() }
    }
}

/// What one line of a transcript means, in any format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry<'a> {
    /// Part of the conversation the model sees.
    Message(Message<'a>),
    /// A compaction: the history before it is replaced. `carried` lists calls the replacement
    /// history still leaves pending (Codex `replacement_history`), which results after the
    /// compaction may answer.
    Compaction {
        /// Calls left pending by the replacement history.
        carried: Vec<Call<'a>>,
        /// Pi: the hash of `firstKeptEntryId`. The history before it is replaced; the entries
        /// from it to the compaction stay in the context, and so do the calls they leave open.
        keeps: Option<u64>,
        /// Claude Code: the summary is not in this record but the user message written right
        /// after it (`isCompactSummary`); without it, resume sends nothing of the history.
        summary_follows: bool,
    },
    /// A record of a known type that is not conversation (progress, events, snapshots, meta).
    Other,
    /// A record of a type this build does not know: skipped, counted, never an error.
    Unknown,
}

/// A parsed line: its entry plus what the metrics and the session tree want from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// Its meaning.
    pub entry: Entry<'a>,
    /// Claude Code tree position.
    pub node: Option<Node>,
    /// Token usage on the line.
    pub usage: Option<Usage>,
    /// Model that produced the usage.
    pub model: Option<Cow<'a, str>>,
    /// The conversation thread the line belongs to ([`MAIN_THREAD`] for every line of a format
    /// without threads). Assigned by the validator, which knows the lines before it; the
    /// adapters leave it at [`MAIN_THREAD`].
    pub thread: u64,
    /// Claude Code: hashes of the uuids of earlier lines this line takes back out of the
    /// conversation (an answer's `supersedesUuids`, a `model_refusal_fallback` record's
    /// `retractedMessageUuids`). They stay in the file; resume never sends them.
    pub retracts: Vec<u64>,
    /// Why the agent's own loader refuses the line, and with it the whole file (Copilot's
    /// strict event schema: a `refused_record`); `None` when it reads it.
    pub refused: Option<&'static str>,
}

/// The thread of the main conversation (see [`crate::transcript::pairing::threads`]).
pub const MAIN_THREAD: u64 = 0;

impl<'a> Parsed<'a> {
    /// A line that carries only `entry`.
    pub fn of(entry: Entry<'a>) -> Self {
        Parsed { entry, node: None, usage: None, model: None, thread: MAIN_THREAD, retracts: Vec::new(), refused: None }
    }
}

/// Stable 64-bit hash of an id (uuid), used for the Claude Code tree.
pub fn id_hash(s: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(s.as_bytes())
}
