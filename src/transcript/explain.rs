//! `transcriptd explain`'s core: an API error as users paste it, read into what it names, and
//! what it names traced back to the transcript line it came from.
//!
//! - [`ApiError::parse`] reads the pasted text (the bare message, the provider's JSON error
//!   body, or the agent's "API Error: 400 {…}" line, escaped or not): the request position
//!   `messages.N.content.M` (N counts the messages of the request the agent rebuilt from the
//!   file, M the blocks of that message), the call ids it quotes (`toolu_…`, `call_…`, `fc_…`),
//!   and the rule it is about ([`Rule`], by the API's own wording; TRUTH.md quotes the texts and
//!   their sources).
//! - [`block_at`] finds that position in the rebuilt request (`transcriptd context`'s records:
//!   what the agent sends, tests/integration/oracle.rs); [`Origin::of`] the line of the file
//!   the block came from, or says that the agent made it itself on resume (an interrupted call's
//!   result, a placeholder), and [`id_lines`] where a quoted id is called and answered.
//!
//! Pure: request records and file lines in, positions and line numbers out; the verb
//! (`src/cli/explain.rs`) reads the file and runs the check.

use super::context::agent::{CLAUDE_INTERRUPTED, CLAUDE_MISSING, CLAUDE_NO_CONTENT, CLAUDE_NO_RESPONSE, CLAUDE_ORPHANED, CODEX_ABORTED};
use super::finding::Kind;
use super::formats::copilot;
use memchr::memmem;
use serde_json::Value;

/// The rule of the provider's API an error is about, by its wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Anthropic: "unexpected `tool_use_id` found in `tool_result` blocks"; OpenAI: "No tool
    /// call found for function call output": a result whose call is not where the API wants it.
    ResultWithoutCall,
    /// Anthropic: "`tool_use` ids were found without `tool_result` blocks immediately after";
    /// OpenAI: "No tool output found for function call": a call whose result is not next.
    CallWithoutResult,
    /// Anthropic: "`tool_use` ids must be unique"; OpenAI: "Duplicate item found with id".
    DuplicateId,
    /// Anthropic: "Did not find N `tool_result` block(s) at the beginning of this message".
    ResultNotFirst,
    /// Anthropic: "text content blocks must be non-empty" / "must contain non-whitespace text".
    EmptyText,
    /// Anthropic: "all messages must have non-empty content".
    EmptyMessage,
    /// Anthropic: a thinking block's `signature` missing ("Field required") or invalid.
    ThinkingSignature,
    /// Anthropic: "Expected `thinking` or `redacted_thinking`, but found `text`".
    ThinkingNotFirst,
    /// Anthropic: "image exceeds 5 MB maximum", "image dimensions exceed max allowed size",
    /// the many-image 2000 px limit.
    ImageTooLarge,
    /// Anthropic: an image without data.
    EmptyImage,
    /// Anthropic: 413 `request_too_large`, "Request exceeds the maximum size".
    RequestTooLarge,
}

impl Rule {
    /// The wording that names each rule, lowercased, most specific first.
    const WORDING: [(&'static str, Rule); 21] = [
        ("unexpected `tool_use_id`", Rule::ResultWithoutCall),
        ("unexpected tool_use_id", Rule::ResultWithoutCall),
        ("no tool call found for function call output", Rule::ResultWithoutCall),
        ("messages with role 'tool' must be a response to a prece", Rule::ResultWithoutCall),
        ("were found without `tool_result` blocks", Rule::CallWithoutResult),
        ("were found without tool_result blocks", Rule::CallWithoutResult),
        ("no tool output found for function call", Rule::CallWithoutResult),
        ("must be followed by tool messages responding to each", Rule::CallWithoutResult),
        ("ids must be unique", Rule::DuplicateId),
        ("duplicate item found with id", Rule::DuplicateId),
        ("block(s) at the beginning of this message", Rule::ResultNotFirst),
        ("text content blocks must", Rule::EmptyText),
        ("must have non-empty content", Rule::EmptyMessage),
        ("signature", Rule::ThinkingSignature),
        ("expected `thinking` or `redacted_thinking`", Rule::ThinkingNotFirst),
        ("image exceeds", Rule::ImageTooLarge),
        ("image dimensions exceed", Rule::ImageTooLarge),
        ("dimension limit", Rule::ImageTooLarge),
        ("image cannot be empty", Rule::EmptyImage),
        ("request_too_large", Rule::RequestTooLarge),
        ("request exceeds the maximum size", Rule::RequestTooLarge),
    ];

    /// The finding kinds `check` reports for what breaks this rule.
    pub fn kinds(self) -> &'static [Kind] {
        match self {
            Rule::ResultWithoutCall => &[Kind::OrphanResult, Kind::DuplicateResult, Kind::LostOnResume],
            Rule::CallWithoutResult => &[Kind::OrphanCall, Kind::UnansweredCall, Kind::LostOnResume],
            Rule::DuplicateId => &[Kind::DuplicateCallId, Kind::DuplicateResult],
            Rule::ResultNotFirst => &[Kind::ResultNotFirst],
            Rule::EmptyText => &[Kind::EmptyText, Kind::EmptyContent],
            Rule::EmptyMessage => &[Kind::EmptyContent, Kind::EmptyAssistantTurn, Kind::EmptyText],
            Rule::ThinkingSignature => &[Kind::UnsignedThinking],
            Rule::ThinkingNotFirst => &[Kind::ThinkingNotFirst],
            Rule::ImageTooLarge => &[Kind::ImageTooLarge, Kind::RequestTooLarge],
            Rule::EmptyImage => &[Kind::EmptyImage],
            Rule::RequestTooLarge => &[Kind::RequestTooLarge, Kind::ImageTooLarge],
        }
    }

    /// What the rule asks, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::ResultWithoutCall => "a tool result whose call is not in the message before it",
            Rule::CallWithoutResult => "a tool call whose result is not in the message after it",
            Rule::DuplicateId => "two tool calls with one id",
            Rule::ResultNotFirst => "a message after tool calls that does not start with their results",
            Rule::EmptyText => "an empty or whitespace-only text block",
            Rule::EmptyMessage => "a message without content",
            Rule::ThinkingSignature => "a thinking block without a valid signature",
            Rule::ThinkingNotFirst => "an assistant message that does not start with its thinking block",
            Rule::ImageTooLarge => "an image over the API's size limits",
            Rule::EmptyImage => "an image without data",
            Rule::RequestTooLarge => "a request over the API's 32 MB limit",
        }
    }
}

/// A position in the request: `messages.N` or `messages.N.content.M`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Position {
    /// N: the message, counted from 0 in the request.
    pub message: usize,
    /// M: the block of that message, counted from 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block: Option<usize>,
}

/// What a pasted API error names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiError {
    /// The first request position it names.
    pub position: Option<Position>,
    /// The call ids it quotes, in order, each once.
    pub ids: Vec<String>,
    /// The rule, when the wording is known.
    pub rule: Option<Rule>,
}

/// The id prefixes the providers give calls: Anthropic `toolu_` (and server tools'
/// `srvtoolu_`), OpenAI `call_` and Responses items `fc_`.
const ID_PREFIXES: [&str; 4] = ["srvtoolu_", "toolu_", "call_", "fc_"];

impl ApiError {
    /// Reads a pasted error. Nothing in it is required: what is not found is `None` or empty.
    pub fn parse(text: &str) -> ApiError {
        let lower = text.to_ascii_lowercase();
        let rule = Rule::WORDING.iter().find(|(w, _)| lower.contains(w)).map(|&(_, r)| r);
        ApiError { position: position(text), ids: ids(text), rule }
    }
}

/// The first `messages.N[.content.M]` of `text`.
///
/// Anthropic writes `messages.98.content.1`; OpenAI's `param` is `messages.[3].role` (or
/// `messages[3]`).
fn position(text: &str) -> Option<Position> {
    let mut rest = text;
    while let Some(i) = rest.find("messages") {
        rest = &rest[i + "messages".len()..];
        let (n, bracket) = match rest.strip_prefix(".[").or_else(|| rest.strip_prefix('[')) {
            Some(r) => (r, true),
            None => match rest.strip_prefix('.') {
                Some(r) => (r, false),
                None => continue,
            },
        };
        let Some((message, after)) = number(n) else { continue };
        let after = if bracket {
            match after.strip_prefix(']') {
                Some(a) => a,
                None => continue,
            }
        } else {
            after
        };
        let block = after.strip_prefix(".content.").and_then(number).map(|(b, _)| b);
        return Some(Position { message, block });
    }
    None
}

/// A decimal number at the start of `s`, and what follows it.
fn number(s: &str) -> Option<(usize, &str)> {
    let end = s.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    Some((s[..end].parse().ok()?, &s[end..]))
}

/// The call ids quoted in `text`, each once, in order.
fn ids(text: &str) -> Vec<String> {
    let id_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let mut out: Vec<String> = Vec::new();
    let mut start = 0;
    for (i, _) in text.char_indices() {
        if i < start {
            continue;
        }
        // An id starts a word: not inside another one (`srvtoolu_` holds `toolu_`).
        if i > 0 && text[..i].chars().next_back().is_some_and(id_char) {
            continue;
        }
        let Some(p) = ID_PREFIXES.iter().find(|p| text[i..].starts_with(**p)) else { continue };
        let end = text[i..].find(|c: char| !id_char(c)).map_or(text.len(), |e| i + e);
        let id = text[i..end].trim_end_matches(['-', '_']);
        if id.len() > p.len() + 3 && !out.iter().any(|o| o == id) {
            out.push(id.to_owned());
        }
        start = end;
    }
    // OpenAI's texts name the id after these words, whatever its prefix.
    for lead in ["for function call ", "with call_id ", "found with id "] {
        for (i, _) in text.match_indices(lead) {
            let rest = &text[i + lead.len()..];
            let id = rest[..rest.find(|c: char| !id_char(c)).unwrap_or(rest.len())].trim_end_matches(['-', '_']);
            if !id.is_empty() && id != "output" && !out.iter().any(|o| o == id) {
                out.push(id.to_owned());
            }
        }
    }
    out
}

/// What is at a position of the request.
#[derive(Debug, Clone, PartialEq)]
pub enum At<'a> {
    /// The message is there.
    Message {
        /// Its role.
        role: &'a str,
        /// The block, when the position names one that is there (a string content is one
        /// text block).
        block: Option<Block<'a>>,
        /// How many blocks the message has.
        blocks: usize,
    },
    /// The position is the new turn the agent adds after the history (its prompt).
    NewTurn,
    /// Beyond the request the file gives.
    Beyond,
}

/// A block of the request.
#[derive(Debug, Clone, PartialEq)]
pub enum Block<'a> {
    /// A block of a content array.
    Value(&'a Value),
    /// A string content: one text block.
    Text(&'a str),
}

impl Block<'_> {
    /// Its type (`text`, `tool_use`, `tool_result`, `thinking`, `image`, …).
    pub fn ty(&self) -> &str {
        match self {
            Block::Value(v) => v.get("type").and_then(Value::as_str).unwrap_or("?"),
            Block::Text(_) => "text",
        }
    }

    /// The call id it carries: a call's `id`, a result's `tool_use_id`.
    pub fn call_id(&self) -> Option<&str> {
        let Block::Value(v) = self else { return None };
        match self.ty() {
            "tool_result" => v.get("tool_use_id").and_then(Value::as_str),
            "tool_use" | "server_tool_use" => v.get("id").and_then(Value::as_str),
            _ => None,
        }
    }

    /// Its text, for a text block (or a result whose content is one string).
    fn text(&self) -> Option<&str> {
        match self {
            Block::Text(t) => Some(t),
            Block::Value(v) => match self.ty() {
                "text" => v.get("text").and_then(Value::as_str),
                "thinking" => v.get("thinking").and_then(Value::as_str),
                "tool_result" => match v.get("content") {
                    Some(Value::String(s)) => Some(s),
                    Some(Value::Array(a)) => a.first().and_then(|b| b.get("text")).and_then(Value::as_str),
                    _ => None,
                },
                _ => None,
            },
        }
    }
}

/// The messages as the agent sends them, from `context`'s records (oldest first): consecutive
/// messages of one role are one message, their content blocks in order (a string content is one
/// text block), as Claude Code 2.1.332 sends them (tests/integration/oracle.rs). Records without
/// a role (another format's) are left as they are.
pub fn as_sent(records: Vec<Value>) -> Vec<Value> {
    let blocks = |v: Value| match v {
        Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
        Value::Array(a) => a,
        _ => Vec::new(),
    };
    let mut out: Vec<Value> = Vec::with_capacity(records.len());
    for mut r in records {
        let role = r.get("role").and_then(Value::as_str).map(str::to_owned);
        let last = out.last_mut().filter(|l| role.is_some() && l.get("role").and_then(Value::as_str) == role.as_deref());
        match last {
            Some(l) => {
                let mut content = blocks(l.get_mut("content").map_or(Value::Null, Value::take));
                content.extend(blocks(r.get_mut("content").map_or(Value::Null, Value::take)));
                l["content"] = Value::Array(content);
            }
            None => out.push(r),
        }
    }
    out
}

/// What is at `pos` in `request` (the messages as sent, oldest first: [`as_sent`]).
pub fn block_at(request: &[Value], pos: Position) -> At<'_> {
    let Some(m) = request.get(pos.message) else {
        return if pos.message == request.len() { At::NewTurn } else { At::Beyond };
    };
    let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
    let (block, blocks) = match m.get("content") {
        Some(Value::String(s)) => (pos.block.filter(|&b| b == 0).map(|_| Block::Text(s)), 1),
        Some(Value::Array(a)) => (pos.block.and_then(|b| a.get(b)).map(Block::Value), a.len()),
        _ => (None, 0),
    };
    At::Message { role, block, blocks }
}

/// Where a block of the request comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// From this line of the file (1-based).
    Line(u64),
    /// The agent makes it on resume; the text says why.
    Agent(&'static str),
    /// No line of the file holds it.
    Unknown,
}

/// One line of the file: its number (1-based) and bytes.
pub type Line<'a> = (u64, &'a [u8]);

impl Origin {
    /// The origin of `block` among `lines` (the file's, in order). Lines of `preferred` (the
    /// lines the agent sends, when known) are looked at first: a block can be in the file twice
    /// (a rewound branch, a copied line).
    pub fn of(block: &Block<'_>, lines: &[Line<'_>], preferred: &dyn Fn(u64) -> bool) -> Origin {
        if let Some(t) = block.text() {
            let made = [
                (CLAUDE_INTERRUPTED, "Claude Code answers a call the session ended before it was answered"),
                (CLAUDE_MISSING, "Claude Code answers a call in the middle of the history that has no result"),
                (CLAUDE_ORPHANED, "Claude Code puts it in place of results whose call is not sent"),
                (CLAUDE_NO_CONTENT, "Claude Code puts it in a user message left without content"),
                (CLAUDE_NO_RESPONSE, "Claude Code closes a history that ends with a user message with it"),
                ("[Tool use interrupted]", "Claude Code puts it in place of an assistant message left without content"),
                ("[Tool use removed]", "Claude Code puts it in place of calls it does not send"),
                (CODEX_ABORTED, "Codex answers a call without an output with it"),
                (copilot::INTERRUPTED, "Copilot answers a call the history ends before it was answered"),
                (copilot::INTERRUPTED_BEFORE, "Copilot answers a call still open at the next answer or resume"),
            ];
            if let Some((_, why)) = made.iter().find(|(m, _)| *m == t) {
                return Origin::Agent(why);
            }
        }
        let needle = needle(block);
        let candidate = |&(_, bytes): &Line<'_>| needle.as_deref().is_none_or(|k| memmem::find(bytes, k).is_some()) && line_holds(bytes, block);
        let first = |want: bool| lines.iter().filter(|(n, _)| preferred(*n) == want).find(|l| candidate(l)).map(|(n, _)| *n);
        first(true).or_else(|| first(false)).map_or(Origin::Unknown, Origin::Line)
    }
}

/// Bytes every line that holds `block` contains (its id), to skip reading the others.
fn needle(block: &Block<'_>) -> Option<Vec<u8>> {
    block.call_id().map(|id| id.as_bytes().to_vec())
}

/// Whether the message of a file line holds `block`: the same call id, or the same text,
/// thinking or image data.
fn line_holds(bytes: &[u8], block: &Block<'_>) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(bytes) else { return false };
    let content = v.get("message").and_then(|m| m.get("content")).or_else(|| v.get("content"));
    let same = |b: &Block<'_>| match (block.call_id(), b.call_id()) {
        (Some(x), Some(y)) => x == y && block.ty() == b.ty(),
        (None, None) => {
            block.ty() == b.ty()
                && match (block, b) {
                    (Block::Value(x), Block::Value(y)) if block.ty() == "image" => x.get("source") == y.get("source"),
                    _ => block.text().is_some_and(|x| b.text().is_some_and(|y| x.trim_end_matches('\n') == y.trim_end_matches('\n'))),
                }
        }
        _ => false,
    };
    match content {
        Some(Value::String(s)) => same(&Block::Text(s)),
        Some(Value::Array(a)) => a.iter().any(|b| same(&Block::Value(b))),
        _ => false,
    }
}

/// Where the call `id` is made and answered in the file: the lines whose message holds a
/// `tool_use` (or Codex `function_call`) with that id, and those holding its result.
pub fn id_lines(id: &str, lines: &[Line<'_>]) -> (Vec<u64>, Vec<u64>) {
    let (mut calls, mut results) = (Vec::new(), Vec::new());
    let quoted = format!("\"{id}\"");
    for (n, bytes) in lines {
        if memmem::find(bytes, quoted.as_bytes()).is_none() {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<Value>(bytes) else { continue };
        // Codex: a response_item payload with a call_id.
        if let Some(p) = v.get("payload").filter(|p| p.get("call_id").and_then(Value::as_str) == Some(id)) {
            let ty = p.get("type").and_then(Value::as_str).unwrap_or("");
            if ty.ends_with("_output") {
                results.push(*n)
            } else {
                calls.push(*n)
            }
            continue;
        }
        let content = v.get("message").and_then(|m| m.get("content")).or_else(|| v.get("content"));
        for b in content.and_then(Value::as_array).into_iter().flatten() {
            let b = Block::Value(b);
            if b.call_id() == Some(id) {
                if b.ty() == "tool_result" {
                    results.push(*n)
                } else {
                    calls.push(*n)
                }
            }
        }
        // OpenAI chat: tool_calls on an assistant message, tool_call_id on a tool message.
        if v.get("tool_call_id").and_then(Value::as_str) == Some(id) {
            results.push(*n);
        }
        if v.get("tool_calls").and_then(Value::as_array).is_some_and(|a| a.iter().any(|c| c.get("id").and_then(Value::as_str) == Some(id))) {
            calls.push(*n);
        }
    }
    calls.dedup();
    results.dedup();
    (calls, results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_errors_users_paste_are_read() {
        // anthropics/claude-code#13460, as the agent prints it.
        let e = ApiError::parse(
            r#"API Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":"messages.98.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_01Xy7Ab. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."}}"#,
        );
        assert_eq!(
            e,
            ApiError { position: Some(Position { message: 98, block: Some(1) }), ids: vec!["toolu_01Xy7Ab".into()], rule: Some(Rule::ResultWithoutCall) }
        );
        let e = ApiError::parse("messages.4: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_A1b2, toolu_C3d4. Each `tool_use` block must have a corresponding `tool_result` block in the next message.");
        assert_eq!(e.position, Some(Position { message: 4, block: None }));
        assert_eq!(e.ids, ["toolu_A1b2", "toolu_C3d4"]);
        assert_eq!(e.rule, Some(Rule::CallWithoutResult));
        let e = ApiError::parse("No tool output found for function call call_abc123XYZ.");
        assert_eq!((e.position, e.ids, e.rule), (None, vec!["call_abc123XYZ".to_owned()], Some(Rule::CallWithoutResult)));
        let e = ApiError::parse(r#"{\"message\":\"messages.1.content.0.thinking.signature: Field required\"}"#);
        assert_eq!((e.position, e.rule), (Some(Position { message: 1, block: Some(0) }), Some(Rule::ThinkingSignature)));
        assert_eq!(ApiError::parse("messages: text content blocks must be non-empty").rule, Some(Rule::EmptyText));
        // OpenAI chat (miurla/morphic#136, BerriAI/litellm#10083).
        let e = ApiError::parse(
            r#"{"error":{"message":"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.","type":"invalid_request_error","param":"messages.[3].role","code":null}}"#,
        );
        assert_eq!((e.position, e.rule), (Some(Position { message: 3, block: None }), Some(Rule::ResultWithoutCall)));
        let e = ApiError::parse("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_jJATmoUd");
        assert_eq!((e.position, e.ids, e.rule), (None, vec!["call_jJATmoUd".to_owned()], Some(Rule::CallWithoutResult)));
        assert_eq!(ApiError::parse("at messages[7]").position, Some(Position { message: 7, block: None }));
        assert_eq!(ApiError::parse("messages.[x] messages.2").position, Some(Position { message: 2, block: None }));
        assert_eq!(ApiError::parse("srvtoolu_0123abcd").ids, ["srvtoolu_0123abcd"]);
        assert_eq!(ApiError::parse("No tool output found for function call c1.").ids, ["c1"]);
        assert_eq!(ApiError::parse("No tool call found for function call output with call_id call_9zz.").ids, ["call_9zz"]);
        assert_eq!(ApiError::parse("something else entirely"), ApiError::default());
        // A word that only contains a prefix is not an id.
        assert_eq!(ApiError::parse("recall_this and mytoolu_x").ids, Vec::<String>::new());
    }

    #[test]
    fn a_position_is_found_in_the_request_and_its_block_in_the_file() {
        let request = vec![
            json!({"role": "user", "content": "hello"}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "looking"}, {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]}),
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": CLAUDE_MISSING, "is_error": true}]}),
        ];
        let file: Vec<Vec<u8>> = vec![
            br#"{"type":"user","message":{"role":"user","content":"hello"}}"#.to_vec(),
            br#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"looking"}]}}"#.to_vec(),
            br#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{}}]}}"#.to_vec(),
        ];
        let lines: Vec<Line<'_>> = file.iter().enumerate().map(|(i, b)| (i as u64 + 1, b.as_slice())).collect();
        let any = |_| true;
        let at = |m, b| block_at(&request, Position { message: m, block: Some(b) });
        let origin = |m, b| match at(m, b) {
            At::Message { block: Some(block), .. } => Origin::of(&block, &lines, &any),
            other => panic!("{other:?}"),
        };
        assert_eq!(origin(0, 0), Origin::Line(1));
        assert_eq!(origin(1, 0), Origin::Line(2));
        assert_eq!(origin(1, 1), Origin::Line(3));
        assert!(matches!(origin(2, 0), Origin::Agent(_)));
        assert_eq!(at(3, 0), At::NewTurn);
        assert_eq!(at(9, 0), At::Beyond);
        assert!(matches!(at(1, 5), At::Message { block: None, blocks: 2, .. }));
        assert_eq!(id_lines("toolu_1", &lines), (vec![3], vec![]));
        // The line the agent sends is preferred to an earlier copy.
        let copy: Vec<Line<'_>> = vec![(1, file[0].as_slice()), (2, file[0].as_slice())];
        assert_eq!(Origin::of(&Block::Text("hello"), &copy, &|n| n == 2), Origin::Line(2));
        assert_eq!(Origin::of(&Block::Text("absent"), &copy, &any), Origin::Unknown);
    }

    #[test]
    fn consecutive_messages_of_one_role_are_sent_as_one() {
        let sent = as_sent(vec![
            json!({"role": "user", "content": "a"}),
            json!({"role": "user", "content": [{"type": "text", "text": "b"}]}),
            json!({"role": "assistant", "content": "c"}),
            json!({"role": "user", "content": "d"}),
        ]);
        assert_eq!(
            sent,
            vec![
                json!({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
                json!({"role": "assistant", "content": "c"}),
                json!({"role": "user", "content": "d"}),
            ]
        );
    }
}
