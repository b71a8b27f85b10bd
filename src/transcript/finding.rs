//! Findings: what is wrong with a transcript, as data.
//!
//! The kind names are the public contract (docs/findings.md): they appear in JSON output,
//! in metrics labels and in repair plans, and never change meaning.

use crate::transcript::model::MAIN_THREAD;
use serde::{Deserialize, Serialize};
use std::fmt;

/// How bad a finding is: errors make the API reject the history or lose data; warnings do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth knowing; the transcript still resumes.
    Warning,
    /// The transcript will not resume as it is, or data is damaged.
    Error,
}

impl Severity {
    /// The name used in JSON and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// The closed set of finding kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Not JSON, or JSON that is not an object.
    MalformedLine,
    /// Bytes that are not UTF-8.
    InvalidUtf8,
    /// Longer than the line limit; skipped unread.
    LineTooLong,
    /// The last line has no newline: an interrupted write.
    TornLine,
    /// A JSON object nested deeper than [`crate::transcript::scan::MAX_DEPTH`] levels: valid
    /// JSON (the agent reads it back), but not read here; kept by repair.
    NestedTooDeep,
    /// A call whose result is missing although the conversation moved on.
    UnansweredCall,
    /// A call still without a result at the end of the transcript.
    OrphanCall,
    /// A result with no pending call.
    OrphanResult,
    /// A second result for a call that already has one.
    DuplicateResult,
    /// Two assistant turns with no user turn between them.
    ConsecutiveAssistant,
    /// An assistant turn whose parts are all blank.
    EmptyAssistantTurn,
    /// Call arguments that are not a JSON object.
    InvalidArguments,
    /// Two calls with one id.
    DuplicateCallId,
    /// A session meta sidecar whose transcript file is missing (data-loss guard).
    MissingTranscript,
    /// A line the agent's own loader refuses, and with it the whole session (Copilot CLI: an
    /// event of a known type whose envelope or data does not fit its schema, "Session file is
    /// corrupted or incompatible"). Repair removes it, into the rejects file.
    RefusedRecord,
    /// Datasets: a line that holds no conversation of its format.
    NotAConversation,
    /// Datasets: a message whose role the format does not have.
    UnknownRole,
    /// Datasets: a system or developer message after the conversation started.
    MisplacedSystem,
    /// Fine-tuning datasets: the conversation does not end with an assistant message.
    LastMessageNotAssistant,
    /// Datasets: a message without content.
    EmptyContent,
    /// Datasets: a call to a tool the line's `tools` does not declare.
    UndeclaredTool,
    /// Datasets: call arguments without a property the tool's schema requires.
    MissingRequiredArgument,
    /// Fine-tuning datasets: an assistant `weight` other than 0 or 1.
    InvalidWeight,
    /// Batch datasets: a `custom_id` an earlier line already used.
    DuplicateCustomId,
    /// No line of the file is a conversation line of a known format (or of the format given):
    /// nothing in it was checked. About the whole file, so it has no line.
    UnknownFormat,
    /// Anthropic Messages: a `text` block that is empty or only whitespace ("text content
    /// blocks must be non-empty" / "must contain non-whitespace text").
    EmptyText,
    /// Anthropic Messages: a `thinking` block without its `signature` ("thinking.signature:
    /// Field required").
    UnsignedThinking,
    /// Anthropic Messages: an assistant message whose `thinking` block comes after another
    /// block ("Expected `thinking` or `redacted_thinking`, but found `text`").
    ThinkingNotFirst,
    /// Anthropic Messages: a user message with a `tool_result` block after a block that is not
    /// one ("Did not find N `tool_result` block(s) at the beginning of this message").
    ResultNotFirst,
    /// Anthropic Messages: an image over the API's limits (5 MB; 8000 px; 2000 px when the
    /// request has more than 20 images).
    ImageTooLarge,
    /// Anthropic Messages: an image whose base64 `data` is empty.
    EmptyImage,
    /// Anthropic Messages: the history the agent sends on resume is over the 32 MB request
    /// limit ("request_too_large").
    RequestTooLarge,
    /// Claude Code: a line whose parent is missing and cannot be bridged, so resuming the
    /// session silently leaves out every message before it (since the last compaction).
    LostOnResume,
    /// A run of conversation lines whose content was wiped (Claude Code's compaction clears the
    /// messages before its summary call; when the call fails, no summary replaces them).
    ContentWiped,
    /// Claude Code: a compaction boundary whose next message is not its summary: resume sends
    /// nothing of the history before it.
    CompactionUnsummarized,
    /// The daemon saw the transcript deleted.
    TranscriptDeleted,
    /// The daemon saw the transcript truncated or rewritten in place: what it had read is no
    /// longer in the file.
    TranscriptRewritten,
}

impl Kind {
    /// Every kind, in documentation order.
    pub const ALL: [Kind; 37] = [
        Kind::MalformedLine,
        Kind::InvalidUtf8,
        Kind::LineTooLong,
        Kind::TornLine,
        Kind::NestedTooDeep,
        Kind::UnansweredCall,
        Kind::OrphanCall,
        Kind::OrphanResult,
        Kind::DuplicateResult,
        Kind::ConsecutiveAssistant,
        Kind::EmptyAssistantTurn,
        Kind::InvalidArguments,
        Kind::DuplicateCallId,
        Kind::MissingTranscript,
        Kind::RefusedRecord,
        Kind::NotAConversation,
        Kind::UnknownRole,
        Kind::MisplacedSystem,
        Kind::LastMessageNotAssistant,
        Kind::EmptyContent,
        Kind::UndeclaredTool,
        Kind::MissingRequiredArgument,
        Kind::InvalidWeight,
        Kind::DuplicateCustomId,
        Kind::UnknownFormat,
        Kind::EmptyText,
        Kind::UnsignedThinking,
        Kind::ThinkingNotFirst,
        Kind::ResultNotFirst,
        Kind::ImageTooLarge,
        Kind::EmptyImage,
        Kind::RequestTooLarge,
        Kind::LostOnResume,
        Kind::ContentWiped,
        Kind::CompactionUnsummarized,
        Kind::TranscriptDeleted,
        Kind::TranscriptRewritten,
    ];

    /// The public name of the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::MalformedLine => "malformed_line",
            Kind::InvalidUtf8 => "invalid_utf8",
            Kind::LineTooLong => "line_too_long",
            Kind::TornLine => "torn_line",
            Kind::NestedTooDeep => "nested_too_deep",
            Kind::UnansweredCall => "unanswered_call",
            Kind::OrphanCall => "orphan_call",
            Kind::OrphanResult => "orphan_result",
            Kind::DuplicateResult => "duplicate_result",
            Kind::ConsecutiveAssistant => "consecutive_assistant",
            Kind::EmptyAssistantTurn => "empty_assistant_turn",
            Kind::InvalidArguments => "invalid_arguments",
            Kind::DuplicateCallId => "duplicate_call_id",
            Kind::MissingTranscript => "missing_transcript",
            Kind::RefusedRecord => "refused_record",
            Kind::NotAConversation => "not_a_conversation",
            Kind::UnknownRole => "unknown_role",
            Kind::MisplacedSystem => "misplaced_system",
            Kind::LastMessageNotAssistant => "last_message_not_assistant",
            Kind::EmptyContent => "empty_content",
            Kind::UndeclaredTool => "undeclared_tool",
            Kind::MissingRequiredArgument => "missing_required_argument",
            Kind::InvalidWeight => "invalid_weight",
            Kind::DuplicateCustomId => "duplicate_custom_id",
            Kind::UnknownFormat => "unknown_format",
            Kind::EmptyText => "empty_text",
            Kind::UnsignedThinking => "unsigned_thinking",
            Kind::ThinkingNotFirst => "thinking_not_first",
            Kind::ResultNotFirst => "result_not_first",
            Kind::ImageTooLarge => "image_too_large",
            Kind::EmptyImage => "empty_image",
            Kind::RequestTooLarge => "request_too_large",
            Kind::LostOnResume => "lost_on_resume",
            Kind::ContentWiped => "content_wiped",
            Kind::CompactionUnsummarized => "compaction_unsummarized",
            Kind::TranscriptDeleted => "transcript_deleted",
            Kind::TranscriptRewritten => "transcript_rewritten",
        }
    }

    /// The severity a finding of this kind has unless a rule lowers it (an abandoned branch).
    pub fn default_severity(self) -> Severity {
        match self {
            Kind::EmptyAssistantTurn
            | Kind::InvalidArguments
            | Kind::DuplicateCallId
            | Kind::MisplacedSystem
            | Kind::UnknownFormat
            | Kind::NestedTooDeep
            | Kind::TranscriptDeleted
            | Kind::TranscriptRewritten => Severity::Warning,
            _ => Severity::Error,
        }
    }

    /// Whether the kind is one of the provider API's own rules on the request the agent sends
    /// (not a pairing rule): repair does not change these lines, it reports them unrepaired.
    pub fn is_api_rule(self) -> bool {
        matches!(
            self,
            Kind::EmptyText
                | Kind::UnsignedThinking
                | Kind::ThinkingNotFirst
                | Kind::ResultNotFirst
                | Kind::ImageTooLarge
                | Kind::EmptyImage
                | Kind::RequestTooLarge
        )
    }

    /// Whether the kind is about framing (the line could not be read at all), and so repair
    /// removes the line. `nested_too_deep` is not: the line was not read either, but it is a
    /// valid JSON record, which repair keeps.
    pub fn is_framing(self) -> bool {
        matches!(self, Kind::MalformedLine | Kind::InvalidUtf8 | Kind::LineTooLong | Kind::TornLine | Kind::RefusedRecord)
    }
}

impl std::str::FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| {
            let all: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
            format!("unknown finding kind `{s}` (expected one of: {})", all.join(", "))
        })
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One finding in one transcript. File and format are added by whoever knows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// 1-based physical line the finding points at (a call's line for call findings, a result's
    /// line for result findings); 0 for a finding about the whole file (`missing_transcript`,
    /// `unknown_format`), which is written without a line (no `line` key in JSON).
    #[serde(skip_serializing_if = "is_whole_file", default)]
    pub line: u64,
    /// What is wrong.
    pub kind: Kind,
    /// How bad it is.
    pub severity: Severity,
    /// The call id involved, when there is one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub call_id: Option<String>,
    /// The tool name of the call involved, when known.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tool: Option<String>,
    /// Datasets: the 0-based index of the message in the line's conversation
    /// (`messages[i]`), when the finding is about one message.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message_index: Option<u64>,
    /// A sentence for people.
    pub message: String,
    /// What resuming the session does about it, when that is known: the agent's own handling
    /// (Claude Code, Codex, as measured: TRUTH.md) or the provider API's error text
    /// ([`crate::transcript::verdict::on_resume`]). Text output appends it to the message.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub on_resume: Option<std::borrow::Cow<'static, str>>,
    /// The conversation thread it is about (Claude Code; [`MAIN_THREAD`] otherwise): what the
    /// repair planner needs to act within that thread. Not part of the output.
    #[serde(skip)]
    pub thread: u64,
    /// A break the agent mends on resume without leaving anything of the file out, reported
    /// as a warning ([`crate::transcript::verdict::tell`]): `repair` still mends it in the file.
    /// In JSON `"agent_mends": true` (absent when false).
    #[serde(rename = "agent_mends", skip_serializing_if = "is_false", default)]
    pub mended: bool,
}

fn is_false(b: &bool) -> bool {
    !b
}

/// Whether a finding's line says it is about the whole file (line 0: there is no line 0).
fn is_whole_file(line: &u64) -> bool {
    *line == 0
}

impl Finding {
    /// A finding about the whole file rather than one line (it is written without a line).
    pub fn file(kind: Kind, message: impl Into<String>) -> Self {
        Finding::new(0, kind, message)
    }

    /// Whether it is about the whole file, not a line.
    pub fn is_whole_file(&self) -> bool {
        self.line == 0
    }

    /// A finding with the kind's default severity.
    pub fn new(line: u64, kind: Kind, message: impl Into<String>) -> Self {
        Finding {
            line,
            kind,
            severity: kind.default_severity(),
            call_id: None,
            tool: None,
            message_index: None,
            message: message.into(),
            on_resume: None,
            thread: MAIN_THREAD,
            mended: false,
        }
    }

    /// Adds the call id.
    pub fn with_call(mut self, call_id: &str, tool: Option<&str>) -> Self {
        self.call_id = Some(call_id.to_owned());
        self.tool = tool.filter(|t| !t.is_empty()).map(str::to_owned);
        self
    }

    /// Names the thread it is about.
    pub fn in_thread(mut self, thread: u64) -> Self {
        self.thread = thread;
        self
    }

    /// The message for people: with what resume does about it, when that is known.
    pub fn says(&self) -> std::borrow::Cow<'_, str> {
        match &self.on_resume {
            Some(r) => format!("{}; {r}", self.message).into(),
            None => self.message.as_str().into(),
        }
    }

    /// Whether `repair` mends what it is about: an error, or a break the agent would mend on
    /// resume ([`Finding::mended`], a warning).
    pub fn wants_repair(&self) -> bool {
        self.severity == Severity::Error || self.mended
    }

    /// Lowers the severity to a warning, saying why (what resume does no longer applies: the
    /// agent never sends what a demoted finding is about).
    pub fn demote(&mut self, why: &str) {
        if self.wants_repair() {
            self.severity = Severity::Warning;
            self.on_resume = None;
            self.mended = false;
            self.message.push_str(" (");
            self.message.push_str(why);
            self.message.push(')');
        }
    }
}

/// What a validator emits: a new finding, or a later correction of one already emitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// A new finding.
    Finding(Finding),
    /// A finding emitted earlier turned out to lie on a branch the user abandoned by rewinding
    /// (Claude Code): it is a warning now. Identified by line, kind and call id.
    Demoted {
        /// Line of the earlier finding.
        line: u64,
        /// Kind of the earlier finding.
        kind: Kind,
        /// Call id of the earlier finding.
        call_id: Option<String>,
        /// Why it was demoted.
        reason: String,
    },
}

/// Applies a stream of outputs to a list of findings: what a consumer that wants the final
/// state (the `check` verb, the daemon/batch equivalence test) does.
pub fn apply(findings: &mut Vec<Finding>, out: Output) {
    match out {
        Output::Finding(f) => findings.push(f),
        Output::Demoted { line, kind, call_id, reason } => {
            if let Some(f) = findings.iter_mut().rev().find(|f| f.line == line && f.kind == kind && f.call_id == call_id && f.wants_repair()) {
                f.demote(&reason);
            }
        }
    }
}

/// The finding for a line that is not a JSON object. The scanner decided; serde_json, which
/// agrees on validity, says what is wrong in words (`stats` says it of the lines it skips).
pub fn malformed(number: u64, bytes: &[u8]) -> Finding {
    let msg = match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
        Ok(_) => "JSON that is not an object".to_owned(),
        Err(e) => {
            let msg = e.to_string();
            // serde_json names line and column of the one-line input; the column is what helps.
            match msg.rfind(" at line ") {
                Some(i) => format!("not JSON: {} (column {})", plain(&msg[..i]), e.column()),
                None => format!("not JSON: {}", plain(&msg)),
            }
        }
    };
    Finding::new(number, Kind::MalformedLine, msg)
}

/// What is wrong with a JSON text (a meta sidecar, say) in plain words, where it is: `a word
/// JSON does not have (it has true, false and null) (line 3, column 9)`, not serde_json's
/// `expected ident at line 3 column 9`.
pub fn json_error_in_words(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    match msg.rfind(" at line ") {
        Some(i) => format!("{} (line {}, column {})", plain(&msg[..i]), e.line(), e.column()),
        None => plain(&msg).to_owned(),
    }
}

/// serde_json's words for what is wrong with a line, said for people who never wrote a parser
/// ("expected ident" is "a word JSON does not have"); anything else as serde_json says it.
fn plain(serde: &str) -> &str {
    match serde {
        "EOF while parsing a string" => "the line ends inside a string",
        "EOF while parsing an object" => "the line ends before its object is closed",
        "EOF while parsing a list" => "the line ends before a list is closed",
        "EOF while parsing a value" => "the line ends where a value should be",
        "expected `:`" => "a key without a `:` after it",
        "expected `,` or `]`" => "a list item not followed by `,` or `]`",
        "expected `,` or `}`" => "a value not followed by `,` or `}`",
        "expected ident" => "a word JSON does not have (it has true, false and null)",
        "expected value" => "no value where one should be",
        "expected `\"`" => "an object key that is not in double quotes",
        "key must be a string" => "an object key that is not a string",
        "invalid escape" => "a backslash escape JSON does not have",
        "invalid number" => "a number JSON cannot read",
        "number out of range" => "a number too large to read",
        "invalid unicode code point" => "a \\u escape that is no character",
        "control character (\\u0000-\\u001F) found while parsing a string" => {
            "a raw control character inside a string (a newline or tab must be written as \\n or \\t)"
        }
        "lone leading surrogate in hex escape" => "a \\u escape that is half a character (a lone surrogate)",
        "unexpected end of hex escape" => "a \\u escape cut short",
        "trailing comma" => "a comma before a closing bracket",
        "trailing characters" => "more text after the record's end (two records on one line?)",
        other => other,
    }
}
