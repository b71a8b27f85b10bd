//! Formats: one module per transcript format holding its reading and its writing together —
//! the adapter that turns a line into an [`Entry`](crate::transcript::model::Entry), the fields
//! canonical records and the compaction cut read, and what repair writes in it (synthetic
//! results, removed blocks and calls, merged messages, the Claude Code tree edits) — plus
//! detection of a file's format from its first lines. [`edit`] holds the byte-level pieces the
//! writers share.
//!
//! Wherever behaviour depends on the format it is decided here, by an exhaustive `match` on
//! [`Format`] (no catch-all arm): a new format does not compile until each rule names it, so it
//! cannot silently get another format's rules ([`Format::uuid_tree`],
//! [`Format::prompt_ends_turn`], [`Format::consecutive_repair`], [`Format::synthetic_result`],
//! ...).

pub mod blocks;
pub mod chat;
pub mod claude_code;
pub mod codex;
pub mod copilot;
pub mod dataset;
pub mod edit;
pub mod gemini;
pub mod image;
pub mod mend;
pub mod pi;
pub mod qwen;

pub use dataset::Dataset;
pub use edit::{CallRef, Edited, Unable};

/// What a synthetic result copies from the line it follows ([`Format::result_envelope`]).
#[derive(Debug, Clone, Default)]
pub struct Envelope(serde_json::Map<String, serde_json::Value>);

use crate::transcript::model::Parsed;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The transcript formats transcriptd reads. Serialized as its public name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum Format {
    /// Claude Code session and subagent files.
    #[serde(rename = "claude-code")]
    ClaudeCode,
    /// OpenAI Codex CLI rollouts.
    #[serde(rename = "codex")]
    Codex,
    /// Pi sessions (and OpenClaw's and Oh-My-Pi's, which share the format).
    #[serde(rename = "pi")]
    Pi,
    /// Qwen Code sessions.
    #[serde(rename = "qwen")]
    Qwen,
    /// Gemini CLI sessions (an upsert log).
    #[serde(rename = "gemini")]
    Gemini,
    /// GitHub Copilot CLI session event logs.
    #[serde(rename = "copilot")]
    Copilot,
    /// One OpenAI Chat Completions message per line.
    #[serde(rename = "openai-chat")]
    OpenAiChat,
    /// One Anthropic Messages API message per line.
    #[serde(rename = "anthropic")]
    Anthropic,
    /// One whole conversation per line: fine-tuning, batch request and chat datasets.
    Dataset(Dataset),
}

impl TryFrom<String> for Format {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Format> for &'static str {
    fn from(f: Format) -> Self {
        f.as_str()
    }
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 13] = [
        Format::ClaudeCode,
        Format::Codex,
        Format::Pi,
        Format::Qwen,
        Format::Gemini,
        Format::Copilot,
        Format::OpenAiChat,
        Format::Anthropic,
        Format::Dataset(Dataset::OpenAi),
        Format::Dataset(Dataset::OpenAiBatch),
        Format::Dataset(Dataset::AnthropicBatch),
        Format::Dataset(Dataset::ShareGpt),
        Format::Dataset(Dataset::GeminiTuning),
    ];

    /// Its public name.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
            Format::Pi => "pi",
            Format::Qwen => "qwen",
            Format::Gemini => "gemini",
            Format::Copilot => "copilot",
            Format::OpenAiChat => "openai-chat",
            Format::Anthropic => "anthropic",
            Format::Dataset(d) => d.as_str(),
        }
    }

    /// Parses one line of this format. The line is valid UTF-8 and not blank; `Err` means it is
    /// not a JSON object.
    pub fn parse(self, line: &[u8]) -> Result<Parsed<'_>, crate::transcript::scan::Invalid> {
        match self {
            Format::ClaudeCode => claude_code::parse(line),
            Format::Codex => codex::parse(line),
            Format::Pi => pi::parse(line),
            Format::Qwen => qwen::parse(line),
            Format::Gemini => gemini::parse(line),
            Format::Copilot => copilot::parse(line),
            Format::OpenAiChat | Format::Anthropic => chat::parse(line),
            // A whole conversation is not one entry of the turn model: the checker reads
            // dataset lines with `dataset`; other readers see a record to skip.
            Format::Dataset(_) => crate::transcript::scan::object_line(line, |s, _| s.skip()).map(|_| Parsed::of(crate::transcript::model::Entry::Other)),
        }
    }

    /// The dataset shape, when the format is one.
    pub fn dataset(self) -> Option<Dataset> {
        match self {
            Format::Dataset(d) => Some(d),
            Format::ClaudeCode | Format::Codex | Format::Pi | Format::Qwen | Format::Gemini | Format::Copilot | Format::OpenAiChat | Format::Anthropic => None,
        }
    }

    /// Whether lines form an id tree (Claude Code's `uuid`/`parentUuid` with sidechain
    /// threads, Pi's `id`/`parentId`): the validator follows the branches, and repair re-points
    /// parents and gives the lines it adds ids.
    pub fn uuid_tree(self) -> bool {
        self.tree_keys().is_some()
    }

    /// Whether the agent's loader takes `id` as a line's parent: a line re-pointed by repair
    /// under the parent of a removed line never gets one it refuses (Copilot: a UUID).
    pub fn takes_parent(self, id: &str) -> bool {
        match self {
            Format::Copilot => copilot::is_uuid(id),
            Format::ClaudeCode | Format::Pi | Format::Qwen | Format::Gemini | Format::Codex | Format::OpenAiChat | Format::Anthropic | Format::Dataset(_) => {
                true
            }
        }
    }

    /// The members that make the tree, when the format has one ([`Format::uuid_tree`]).
    pub fn tree_keys(self) -> Option<edit::TreeKeys> {
        match self {
            Format::ClaudeCode => Some(claude_code::TREE),
            Format::Pi => Some(pi::TREE),
            Format::Qwen => Some(qwen::TREE),
            // Copilot: each event names the one before it; a repair's inserted result takes
            // its place in the chain.
            Format::Copilot => Some(copilot::TREE),
            Format::Codex | Format::Gemini | Format::OpenAiChat | Format::Anthropic | Format::Dataset(_) => None,
        }
    }

    /// A tree line's own id and parent id ([`edit::tree_ids`]; none outside a tree format).
    pub fn tree_ids(self, line: &[u8]) -> (Option<String>, Option<String>) {
        self.tree_keys().map_or((None, None), |k| edit::tree_ids(k, line))
    }

    /// Where a tree line's parent id is, and what it names ([`edit::parent_span`]).
    pub fn parent_span(self, line: &[u8]) -> Option<(edit::Span, Option<std::borrow::Cow<'_, str>>)> {
        edit::parent_span(self.tree_keys()?, line)
    }

    /// A tree line with its parent id replaced ([`edit::set_parent`]).
    pub fn set_parent(self, line: &[u8], parent: Option<&str>) -> Option<Vec<u8>> {
        edit::set_parent(self.tree_keys()?, line, parent)
    }

    /// Whether only a user prompt moves the conversation on (Codex response items): assistant
    /// items may follow one another within a turn, and calls stay answered until the next
    /// prompt. Elsewhere each new assistant turn moves it on, and two with no user turn between
    /// them are `consecutive_assistant`.
    ///
    /// Pi: its files hold two answers in a row (a real session of Pi's own repository,
    /// `tests/data/real/pi/large-session.jsonl` lines 465-466), and its providers send them so
    /// (the Messages API joins consecutive assistant turns).
    ///
    /// Gemini CLI: consecutive model turns are sent as one (`coalesceConsecutiveRoles`), and a
    /// call's response must come in the user turn before the next prompt.
    pub fn prompt_ends_turn(self) -> bool {
        match self {
            // Copilot: an assistant.message per model call; one turn's answers follow one
            // another, with the results of their calls between them.
            Format::Codex | Format::Pi | Format::Gemini | Format::Copilot => true,
            // Qwen Code: its provider is OpenAI Chat Completions, whose rule is that the tool
            // messages answer the assistant message right before them.
            Format::ClaudeCode | Format::Qwen | Format::OpenAiChat | Format::Anthropic | Format::Dataset(_) => false,
        }
    }

    /// Whether a compaction keeps the entries from one it names (Pi's `firstKeptEntryId`): a
    /// result kept whose call is not kept is sent without it, so the validator remembers where
    /// each result's call was.
    pub fn compaction_keeps_entries(self) -> bool {
        match self {
            Format::Pi => true,
            Format::ClaudeCode
            | Format::Codex
            | Format::Qwen
            | Format::Gemini
            | Format::Copilot
            | Format::OpenAiChat
            | Format::Anthropic
            | Format::Dataset(_) => false,
        }
    }

    /// Whether the file is an upsert log (Gemini CLI): a record appended again under its id
    /// replaces the one before in place, so a later version of a record may answer the calls an
    /// earlier one left open (its results are taken, never judged as second results), and
    /// declares again the calls it still has open (not a second call). Repair appends
    /// corrected records instead of editing lines ([`gemini::answer_call`]).
    pub fn upserts(self) -> bool {
        match self {
            Format::Gemini => true,
            Format::ClaudeCode | Format::Codex | Format::Pi | Format::Qwen | Format::Copilot | Format::OpenAiChat | Format::Anthropic | Format::Dataset(_) => {
                false
            }
        }
    }

    /// Whether a model named on a line (a Codex `turn_context`) stays in force for the usage of
    /// later lines; elsewhere a line's usage is its own message's model's.
    pub fn model_carries_over(self) -> bool {
        match self {
            Format::Codex => true,
            Format::ClaudeCode | Format::Pi | Format::Qwen | Format::Gemini | Format::Copilot | Format::OpenAiChat | Format::Anthropic | Format::Dataset(_) => {
                false
            }
        }
    }

    /// How repair mends two assistant turns with no user turn between them.
    pub fn consecutive_repair(self) -> Consecutive {
        match self {
            Format::ClaudeCode => Consecutive::Join,
            Format::OpenAiChat | Format::Anthropic => Consecutive::Merge,
            // Pi: two answers in a row are sent as they are (an errored or aborted one is not
            // sent at all, and reads as no turn).
            // Qwen Code: each model turn is a record of its own, sent as its own `Content`.
            // Gemini CLI: consecutive model turns are sent as one.
            Format::Codex | Format::Pi | Format::Qwen | Format::Gemini | Format::Copilot | Format::Dataset(_) => Consecutive::NotRepaired,
        }
    }

    /// A synthetic error result for `call` with `text`, in this format, to be written after
    /// the line `follows` (whose envelope it copies where the format has one). Claude Code:
    /// `parent` is the uuid the new line hangs under and `uuid` its own (empty: none).
    pub fn synthetic_result(self, follows: &[u8], call: &CallRef, text: &str, parent: Option<&str>, uuid: &str) -> Vec<u8> {
        self.synthetic_result_in(&self.result_envelope(follows), call, text, parent, uuid)
    }

    /// What a synthetic result written after the line `follows` copies from it, read once for
    /// every result inserted there ([`Format::synthetic_result_in`]).
    pub fn result_envelope(self, follows: &[u8]) -> Envelope {
        Envelope(match self {
            Format::ClaudeCode => claude_code::envelope(follows),
            Format::Codex => codex::envelope(follows),
            Format::Pi => pi::envelope(follows),
            Format::Qwen => qwen::envelope(follows),
            Format::Gemini => gemini::envelope(follows),
            Format::Copilot => copilot::envelope(follows),
            Format::OpenAiChat | Format::Anthropic | Format::Dataset(_) => serde_json::Map::new(),
        })
    }

    /// [`Format::synthetic_result`] with the envelope of the line it follows already read.
    pub fn synthetic_result_in(self, env: &Envelope, call: &CallRef, text: &str, parent: Option<&str>, uuid: &str) -> Vec<u8> {
        match self {
            Format::ClaudeCode => claude_code::synthetic_result_in(&env.0, call, text, parent, uuid),
            Format::Codex => codex::synthetic_result_in(&env.0, call, text),
            Format::Pi => pi::synthetic_result_in(&env.0, call, text, parent, uuid),
            Format::Qwen => qwen::synthetic_result_in(&env.0, call, text, parent, uuid),
            Format::Gemini => gemini::synthetic_result_in(&env.0, call, text, uuid),
            Format::Copilot => copilot::synthetic_result_in(&env.0, call, text, parent, uuid),
            Format::OpenAiChat => chat::openai_result(call, text),
            Format::Anthropic => chat::anthropic_result(call, text),
            // Inside a dataset's conversation a result is a message of the conversation's own
            // shape; the dataset repair asks for the format of its pairing (this is the OpenAI
            // one, for a caller that does not).
            Format::Dataset(_) => chat::openai_result(call, text),
        }
    }

    /// Removes the results for `call_id` from a line (all of them, or all but the first),
    /// editing only what holds them: every other byte of the line stays as it was.
    pub fn drop_results(self, line: &[u8], call_id: &str, keep_first: bool) -> Result<Edited, Unable> {
        match self {
            Format::ClaudeCode => claude_code::drop_results(line, call_id, keep_first),
            Format::Codex => codex::drop_results(keep_first),
            Format::Pi => pi::drop_results(keep_first),
            Format::Qwen => qwen::drop_results(line, call_id, keep_first),
            Format::Gemini => gemini::drop_results(),
            Format::Copilot => copilot::drop_results(keep_first),
            Format::OpenAiChat | Format::Anthropic => chat::drop_results(line, call_id, keep_first),
            // Datasets are repaired line by line by the dataset repair, never by plan edits.
            Format::Dataset(_) => Err(Unable("a dataset line is repaired by the dataset repair")),
        }
    }

    /// Mends the blocks of a line's message that the provider's API rejects ([`mend::Mend`]),
    /// editing only its content array: the formats whose provider's rules `pairing::api`
    /// applies (the Anthropic Messages API's).
    pub fn mend_blocks(self, line: &[u8], how: &mend::Mend) -> Result<Edited, Unable> {
        match self {
            Format::ClaudeCode => mend::blocks(line, &[b"message", b"content"], how),
            Format::Anthropic | Format::OpenAiChat => mend::blocks(line, &[b"content"], how),
            Format::Codex | Format::Pi | Format::Qwen | Format::Gemini | Format::Copilot | Format::Dataset(_) => {
                Err(Unable("the format's provider rules are not checked, so not mended"))
            }
        }
    }

    /// [`Format::drop_results`] for several calls of one line in one walk of it (`(call id,
    /// keep_first)` each): `None` when this format or line needs them one at a time.
    pub fn drop_results_many(self, line: &[u8], drops: &[(&str, bool)]) -> Option<Edited> {
        match self {
            Format::ClaudeCode => edit::drop_result_blocks_many(line, &[b"message", b"content"], drops),
            Format::OpenAiChat | Format::Anthropic if !chat::is_tool_line(line) => edit::drop_result_blocks_many(line, &[b"content"], drops),
            Format::OpenAiChat | Format::Anthropic | Format::Codex | Format::Pi | Format::Qwen | Format::Gemini | Format::Copilot | Format::Dataset(_) => None,
        }
    }

    /// Removes the call `call_id` from a line, editing only the arrays that hold it (a Codex
    /// call is its line).
    pub fn drop_call(self, line: &[u8], call_id: &str) -> Result<Edited, Unable> {
        match self {
            Format::ClaudeCode => claude_code::drop_call(line, call_id),
            Format::Codex => codex::drop_call(),
            Format::Pi => pi::drop_call(line, call_id),
            Format::Qwen => qwen::drop_call(line, call_id),
            Format::Gemini => gemini::drop_call(),
            Format::Copilot => copilot::drop_call(line, call_id),
            Format::OpenAiChat | Format::Anthropic => chat::drop_call(line, call_id),
            // A conversation's messages are laid out as chat messages.
            Format::Dataset(_) => chat::drop_call(line, call_id),
        }
    }

    /// Merges the assistant message `next` into `into` (the formats whose
    /// [`Format::consecutive_repair`] is [`Consecutive::Merge`]).
    pub fn merge_messages(self, into: &[u8], next: &[u8]) -> Result<Vec<u8>, Unable> {
        match self {
            Format::OpenAiChat => chat::merge_messages(true, into, next),
            Format::Anthropic => chat::merge_messages(false, into, next),
            Format::ClaudeCode | Format::Codex | Format::Pi | Format::Qwen | Format::Gemini | Format::Copilot | Format::Dataset(_) => {
                Err(Unable("messages of this format are not merged"))
            }
        }
    }

    /// Whether the OpenAI and Anthropic flavours can still be told apart by later lines.
    fn is_chat(self) -> bool {
        match self {
            Format::OpenAiChat | Format::Anthropic => true,
            Format::ClaudeCode | Format::Codex | Format::Pi | Format::Qwen | Format::Gemini | Format::Copilot | Format::Dataset(_) => false,
        }
    }
}

/// How repair mends two assistant turns with no user turn between them
/// ([`Format::consecutive_repair`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consecutive {
    /// The second turn joins the first: it gets the first's message id (Claude Code).
    Join,
    /// The second message merges into the first (OpenAI chat, Anthropic).
    Merge,
    /// Not repaired.
    NotRepaired,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Format::ALL.into_iter().find(|f| f.as_str() == s).ok_or_else(|| {
            format!(
                "unknown format `{s}` (expected one of: claude-code, codex, pi, qwen, gemini, copilot, openai-chat, anthropic, openai-dataset, openai-batch, anthropic-batch, sharegpt, gemini-tuning)"
            )
        })
    }
}

/// How many lines detection looks at before it settles.
pub const DETECT_LINES: u32 = 256;

/// Record types only Claude Code writes at the top level.
const CLAUDE_TYPES: &[&str] = &["user", "assistant", "system", "summary", "progress", "file-history-snapshot", "queue-operation"];
/// Top-level types of the Codex rollout envelope.
const CODEX_ENVELOPE: &[&str] = &["session_meta", "response_item", "event_msg", "turn_context", "compacted"];
/// Response item types that appear at the top level of legacy Codex rollouts.
const CODEX_LEGACY_ITEMS: &[&str] =
    &["message", "function_call", "function_call_output", "reasoning", "local_shell_call", "custom_tool_call", "custom_tool_call_output", "web_search_call"];

/// Detects a file's format from its first lines, one line at a time.
///
/// Claude Code and Codex files say what they are on their first record. The two chat formats
/// only differ once tools or provider-specific parts appear, so a chat file is `openai-chat`
/// until a line shows Anthropic blocks; both are parsed by one adapter, so a late decision only
/// changes the name.
#[derive(Debug, Default, Clone)]
pub struct Detector {
    decided: Option<Format>,
    settled: bool,
    seen: u32,
}

impl Detector {
    /// A detector that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// A detector fixed to `format` (the `--format` override).
    pub fn fixed(format: Format) -> Self {
        Detector { decided: Some(format), settled: true, seen: 0 }
    }

    /// The format decided so far.
    pub fn format(&self) -> Option<Format> {
        self.decided
    }

    /// Whether more lines can still change the answer.
    pub fn wants_more(&self) -> bool {
        !self.settled
    }

    /// Looks at one valid JSON line. After [`DETECT_LINES`] lines the answer is final.
    pub fn observe(&mut self, line: &[u8]) {
        if self.settled {
            return;
        }
        self.seen += 1;
        if self.seen > DETECT_LINES {
            self.settled = true;
            return;
        }
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) else { return };
        match self.decided {
            None => {
                self.decided = classify(&v);
                if let Some(f) = self.decided {
                    self.settled = !f.is_chat() || chat::flavour_evidence(&v).is_some();
                    if f.is_chat() {
                        self.decided = Some(chat::flavour_evidence(&v).unwrap_or(Format::OpenAiChat));
                    }
                }
            }
            Some(f) if f.is_chat() => {
                if let Some(flavour) = chat::flavour_evidence(&v) {
                    self.decided = Some(flavour);
                    self.settled = true;
                }
            }
            Some(_) => self.settled = true,
        }
    }
}

/// The format a single line suggests.
fn classify(v: &serde_json::Value) -> Option<Format> {
    let obj = v.as_object()?;
    // Gemini CLI: the metadata line, an update or a rewind of its upsert log, or a message
    // record (an `id`, a `timestamp` and one of its types; Claude Code's `user` lines have a
    // `uuid` and a `message`).
    let str_of = |k: &str| obj.get(k).and_then(|x| x.as_str());
    let gemini_meta = str_of("sessionId").is_some() && str_of("projectHash").is_some() && !obj.contains_key("type");
    let gemini_record = str_of("id").is_some()
        && str_of("timestamp").is_some()
        && str_of("type").is_some_and(|t| gemini::TYPES.contains(&t))
        && obj.contains_key("content")
        && !obj.contains_key("message")
        && !obj.contains_key("uuid");
    if gemini_meta || gemini_record || obj.get("$set").is_some_and(|s| s.is_object()) || str_of("$rewindTo").is_some() {
        return Some(Format::Gemini);
    }
    let ty = obj.get("type").and_then(|t| t.as_str());
    if let Some(t) = ty {
        // Copilot: a dotted event type of its schema with a `data` object and an `id`.
        if copilot::is_type(t) && t.contains('.') && obj.get("data").is_some_and(|d| d.is_object()) && obj.contains_key("id") {
            return Some(Format::Copilot);
        }
        // Pi: the `session` header, or (a file whose header was lost) a tree entry.
        let pi_header = t == "session" && obj.get("id").is_some_and(|i| i.is_string()) && (obj.contains_key("cwd") || obj.contains_key("version"));
        // A version 1 entry has no ids: a `message` entry holds its message as an object (a
        // legacy Codex `message` item has none), the other types are Pi's own names.
        let pi_entry = pi::TYPES.contains(&t)
            && t != "session"
            && obj.contains_key("timestamp")
            && (obj.contains_key("parentId") || if t == "message" { obj.get("message").is_some_and(|m| m.is_object()) } else { true });
        if pi_header || pi_entry {
            return Some(Format::Pi);
        }
        // Qwen Code: a `ChatRecord` (Claude Code's record keys) whose message is a Gemini
        // `Content` (`parts`, where Claude Code's has `content`), a `tool_result` record, or a
        // `system` record's `systemPayload`.
        let qwen_record = qwen::TYPES.contains(&t)
            && obj.contains_key("uuid")
            && obj.contains_key("sessionId")
            && (t == "tool_result" || obj.contains_key("systemPayload") || obj.get("message").is_some_and(|m| m.get("parts").is_some_and(|p| p.is_array())));
        if qwen_record {
            return Some(Format::Qwen);
        }
        if CODEX_ENVELOPE.contains(&t) && obj.contains_key("payload") {
            return Some(Format::Codex);
        }
        let claude_keys = ["uuid", "sessionId", "leafUuid", "messageId", "parentUuid"];
        if CLAUDE_TYPES.contains(&t) && claude_keys.iter().any(|k| obj.contains_key(*k)) {
            return Some(Format::ClaudeCode);
        }
        if CODEX_LEGACY_ITEMS.contains(&t) && !obj.contains_key("message") {
            let codex_parts = obj
                .get("content")
                .and_then(|c| c.as_array())
                .is_some_and(|a| a.iter().any(|p| matches!(p.get("type").and_then(|t| t.as_str()), Some("input_text" | "output_text"))));
            if t != "message" || codex_parts {
                return Some(Format::Codex);
            }
        }
    }
    if obj.contains_key("record_type") || (obj.contains_key("instructions") && obj.contains_key("id")) {
        return Some(Format::Codex);
    }
    if obj.get("role").is_some_and(|r| r.is_string()) {
        return Some(Format::OpenAiChat);
    }
    dataset::classify(obj).map(Format::Dataset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect(lines: &[&str]) -> Option<Format> {
        let mut d = Detector::new();
        for l in lines {
            d.observe(l.as_bytes());
        }
        d.format()
    }

    #[test]
    fn detects_each_format() {
        assert_eq!(detect(&[r#"{"type":"summary","summary":"x","leafUuid":"u"}"#]), Some(Format::ClaudeCode));
        assert_eq!(detect(&[r#"{"timestamp":"t","type":"session_meta","payload":{}}"#]), Some(Format::Codex));
        assert_eq!(
            detect(&[r#"{"type":"session.start","data":{"sessionId":"s","version":1},"id":"e","timestamp":"t","parentId":null}"#]),
            Some(Format::Copilot)
        );
        assert_eq!(detect(&[r#"{"type":"user.message","data":{"content":"x"},"id":"e","timestamp":"t","parentId":"d"}"#]), Some(Format::Copilot));
        assert_eq!(detect(&[r#"{"id":"x","timestamp":"t","instructions":null}"#]), Some(Format::Codex));
        assert_eq!(detect(&[r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/w"}"#]), Some(Format::Pi));
        assert_eq!(detect(&[r#"{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user","content":"x"}}"#]), Some(Format::Pi));
        assert_eq!(detect(&[r#"{"type":"message","timestamp":"t","message":{"role":"user","content":"x"}}"#]), Some(Format::Pi), "a version 1 entry");
        assert_eq!(
            detect(&[r#"{"uuid":"u","parentUuid":null,"sessionId":"s","timestamp":"t","type":"user","message":{"role":"user","parts":[{"text":"x"}]}}"#]),
            Some(Format::Qwen)
        );
        assert_eq!(
            detect(&[r#"{"uuid":"u","parentUuid":null,"sessionId":"s","type":"system","subtype":"ui_telemetry","systemPayload":{}}"#]),
            Some(Format::Qwen)
        );
        assert_eq!(
            detect(&[r#"{"uuid":"u","parentUuid":null,"sessionId":"s","type":"user","message":{"role":"user","content":"x"}}"#]),
            Some(Format::ClaudeCode)
        );
        assert_eq!(detect(&[r#"{"sessionId":"s","projectHash":"h","startTime":"t","lastUpdated":"t","kind":"main"}"#]), Some(Format::Gemini));
        assert_eq!(detect(&[r#"{"id":"u","timestamp":"t","type":"user","content":[{"text":"x"}]}"#]), Some(Format::Gemini));
        assert_eq!(detect(&[r#"{"$set":{"lastUpdated":"t"}}"#]), Some(Format::Gemini));
        assert_eq!(detect(&[r#"{"role":"system","content":"x"}"#]), Some(Format::OpenAiChat));
        assert_eq!(
            detect(&[r#"{"role":"user","content":"x"}"#, r#"{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"n","input":{}}]}"#]),
            Some(Format::Anthropic)
        );
        assert_eq!(detect(&[r#"{"role":"user","content":"x"}"#]), Some(Format::OpenAiChat));
        assert_eq!(detect(&["{}", "[1]"]), None);
        assert_eq!(detect(&[r#"{"messages":[{"role":"user","content":"x"}]}"#]), Some(Format::Dataset(Dataset::OpenAi)));
        assert_eq!(detect(&[r#"{"conversations":[{"from":"human","value":"x"}]}"#]), Some(Format::Dataset(Dataset::ShareGpt)));
        for f in Format::ALL {
            assert_eq!(f.as_str().parse::<Format>(), Ok(f));
            assert_eq!(serde_json::to_string(&f).unwrap(), format!("\"{f}\""));
        }
    }
}
