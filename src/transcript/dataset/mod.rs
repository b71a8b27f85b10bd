//! Dataset checks: the canonical rules applied within each line's conversation, plus what a
//! training or batch endpoint rejects.
//!
//! Each conversation is fed, message by message, into the canonical pairing rules of the
//! [`Validator`](super::validate::Validator) (`validate_canonical`'s rules, docs/requirements.md: unanswered calls, results
//! without a call, duplicate results, consecutive assistant turns), as [`pairing`] applies them
//! to one conversation, whose findings are mapped to the line and the message index. What a conversation-per-line file adds:
//!
//! - a user prompt ends the exchange of the calls before it (chat and Messages API pairing:
//!   results come right after their call, before the next prompt);
//! - fine-tuning files: the conversation ends with an assistant message, and a call in that
//!   last message is the training target, not an orphan;
//! - content that is missing or blank, roles the format does not have, system messages after
//!   the conversation started, assistant `weight`s other than 0 or 1;
//! - calls to tools the line does not declare, arguments that lack a property the declared
//!   schema requires; `invalid_arguments` and `duplicate_call_id` are errors here (an endpoint
//!   rejects the example), where in a transcript they are warnings;
//! - batch files: a `custom_id` used twice (the checker keeps the ids; see [`CustomIds`]).
//!
//! Pure and per line: [`check_line`] runs on the parallel checker's worker threads.

mod pairing;
pub mod repair;
pub mod stats;

use crate::transcript::finding::{Finding, Kind, Severity};
use crate::transcript::formats::dataset::{self, Content, Conversation, Dataset, Msg, PairingStyle, Record};
use crate::transcript::model::{Args, Role};
use crate::transcript::scan;
use crate::transcript::Map;

/// What checking one dataset line gives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineReport {
    /// Its findings, each with the line and (when about one message) the message index.
    pub findings: Vec<Finding>,
    /// Messages in its conversations.
    pub messages: u64,
    /// Tool calls.
    pub calls: u64,
    /// Tool results.
    pub results: u64,
    /// Batch lines: the `custom_id`, for the duplicate check across lines.
    pub custom_id: Option<String>,
}

/// Checks one line (valid UTF-8, not blank, no newline) of a dataset. `Err` means it is not a
/// JSON object.
pub fn check_line(d: Dataset, line: u64, bytes: &[u8]) -> scan::Result<LineReport> {
    let rec = dataset::read(d, bytes)?;
    Ok(check_record(d, line, rec))
}

/// Checks a read line. See the module docs.
pub fn check_record(d: Dataset, line: u64, rec: Record<'_>) -> LineReport {
    let mut report = LineReport { custom_id: rec.custom_id.map(|c| c.decode().into_owned()), ..LineReport::default() };
    if let Some(problem) = rec.problem {
        let f = Finding::new(line, Kind::NotAConversation, format!("not a {} record: {problem}", d.as_str()));
        report.findings.push(f);
        return report;
    }
    for (k, conv) in rec.conversations.into_iter().enumerate() {
        let shared = conv.shared;
        // Each conversation's findings on their own (check_conversation sorts and labels what
        // it finds), then added to the line's.
        let earlier = std::mem::take(&mut report.findings);
        check_conversation(d, line, conv, &mut report);
        if k > 0 {
            // The prompt of a preference line was checked with the first output.
            report.findings.retain(|f| f.message_index.is_none_or(|m| (m as usize) >= shared));
        }
        let own = std::mem::replace(&mut report.findings, earlier);
        report.findings.extend(own);
    }
    report.findings.sort_by_key(|f| f.message_index);
    report
}

fn check_conversation(d: Dataset, line: u64, conv: Conversation<'_>, report: &mut LineReport) {
    let Conversation { messages, tools, pairing, shared, part } = conv;
    let last = messages.iter().rposition(|m| !m.passive);
    let mut found: Vec<Finding> = Vec::new();
    let mut v = pairing::Pairs::new(pairing == PairingStyle::Responses);
    let mut started = false;
    let mut last_role = None;
    for (i, msg) in messages.iter().enumerate() {
        let at = i as u64;
        let own = |kind: Kind, text: String| Finding { message_index: Some(at), ..Finding::new(line, kind, text) };
        let Msg { role, message, content, bad_weight, args, passive } = msg;
        if *passive {
            continue;
        }
        let Some(m) = message else {
            let name = role.as_deref().map_or("(none)".to_owned(), |r| format!("`{r}`"));
            report.findings.push(own(Kind::UnknownRole, format!("role {name} is not a {} role", d.as_str())));
            last_role = None;
            continue;
        };
        report.messages += 1;
        report.calls += m.calls.len() as u64;
        report.results += m.results.len() as u64;
        last_role = Some(m.role);
        match m.role {
            Role::System | Role::Developer => {
                if started && pairing != PairingStyle::Responses {
                    report.findings.push(own(Kind::MisplacedSystem, format!("{} message after the conversation started", m.role.as_str())));
                }
            }
            _ => started = true,
        }
        // Content: missing is an error for every role; blank is one where the message is the
        // target (an assistant message without calls) and worth a warning for a prompt.
        let empty = match (m.role, *content) {
            (_, Content::Present) => None,
            (Role::Assistant, _) if !m.calls.is_empty() => None,
            (Role::Assistant, Content::Blank) => Some(Severity::Error),
            (Role::Tool, Content::Blank) => None,
            (_, Content::Blank) => Some(Severity::Warning),
            (_, Content::Absent) => Some(Severity::Error),
        };
        if let Some(severity) = empty {
            let what = if *content == Content::Blank { "blank" } else { "no" };
            let mut f = own(Kind::EmptyContent, format!("{} message with {what} content", m.role.as_str()));
            f.severity = severity;
            report.findings.push(f);
        }
        if *bad_weight {
            report.findings.push(own(Kind::InvalidWeight, "assistant `weight` must be 0 or 1".to_owned()));
        }
        for (c, keys) in m.calls.iter().zip(args.iter().map(Some).chain(std::iter::repeat(None))) {
            let Some(tools) = &tools else { break };
            let call = |f: Finding| f.with_call(&c.id, Some(&c.name));
            let Some(tool) = tools.iter().find(|t| t.name == c.name) else {
                report.findings.push(call(own(Kind::UndeclaredTool, format!("call to `{}`, which the line's `tools` does not declare", c.name))));
                continue;
            };
            if tool.required.is_empty() || c.args != Args::Object {
                continue;
            }
            let missing: Vec<&str> = tool.missing(keys).collect();
            if !missing.is_empty() {
                let list = missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ");
                report.findings.push(call(own(Kind::MissingRequiredArgument, format!("arguments of the call to `{}` lack required {list}", c.name))));
            }
        }
        // A prompt ends the exchange: results must come before it.
        if m.role == Role::User && m.prompt && pairing != PairingStyle::Responses && v.has_pending() {
            v.moved_on(at, &mut found);
        }
        v.push(at, m, &mut found);
    }
    v.finish(&mut found);
    for mut f in found {
        // The index goes where the line number was.
        let index = f.line;
        if f.kind == Kind::OrphanCall && d.fine_tuning() && Some(index as usize) == last && last_role == Some(Role::Assistant) {
            // The last message's calls are what the example teaches.
            continue;
        }
        if matches!(f.kind, Kind::InvalidArguments | Kind::DuplicateCallId) {
            f.severity = Severity::Error;
        }
        if f.kind == Kind::OrphanCall {
            f.message = f.message.replace("end of the transcript", "end of the conversation");
        }
        f.message = f.message.replace(" at line ", " at message ");
        f.line = line;
        f.message_index = Some(index);
        report.findings.push(f);
    }
    if d.fine_tuning() {
        // (A last message of an unknown role is reported as that.)
        if let (Some(at), Some(role)) = (last, last_role.filter(|r| *r != Role::Assistant)) {
            let role = role.as_str();
            let f = Finding {
                message_index: Some(at as u64),
                ..Finding::new(
                    line,
                    Kind::LastMessageNotAssistant,
                    format!("the conversation ends with a {role} message, not an assistant one: nothing to train on"),
                )
            };
            report.findings.push(f);
        }
    }
    if let Some(part) = part {
        for f in report.findings.iter_mut().filter(|f| f.message_index.is_some_and(|m| m as usize >= shared)) {
            if !f.message.starts_with(part) {
                let j = f.message_index.unwrap_or(0) as usize - shared;
                f.message = format!("{part}[{j}]: {}", f.message);
            }
        }
    }
    report.findings.sort_by_key(|f| f.message_index);
}

/// The `custom_id`s of a batch file seen so far, to report one used twice. Keeps a 64-bit hash
/// and the first line per id: 16 bytes a request (batch files hold at most 50,000 (OpenAI) or
/// 100,000 (Anthropic) requests).
#[derive(Debug, Default)]
pub struct CustomIds {
    seen: Map<u64, u64>,
}

impl CustomIds {
    /// Records the id of `line`; a finding when an earlier line has it.
    pub fn see(&mut self, line: u64, id: &str) -> Option<Finding> {
        let first = *self.seen.entry(xxhash_rust::xxh3::xxh3_64(id.as_bytes())).or_insert(line);
        (first != line).then(|| Finding::new(line, Kind::DuplicateCustomId, format!("custom_id `{id}` is already used by line {first}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(d: Dataset, line: &str) -> Vec<String> {
        check_line(d, 1, line.as_bytes())
            .unwrap()
            .findings
            .iter()
            .map(|f| format!("{}:{}:{}", f.message_index.map_or("-".into(), |m| m.to_string()), f.kind, f.severity.as_str()))
            .collect()
    }

    #[test]
    fn the_issue_example() {
        let line = r#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"assistant","content":"done"}]}"#;
        assert_eq!(kinds(Dataset::OpenAi, line), ["1:unanswered_call:error", "2:consecutive_assistant:error"]);
    }

    #[test]
    fn a_call_in_the_last_message_is_the_target_of_a_fine_tuning_example() {
        let line = r#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}"#;
        assert_eq!(kinds(Dataset::OpenAi, line), Vec::<String>::new());
        let batch = format!(r#"{{"custom_id":"a","url":"/v1/chat/completions","body":{}}}"#, &line);
        assert_eq!(kinds(Dataset::OpenAiBatch, &batch), ["1:orphan_call:error"]);
    }

    #[test]
    fn a_prompt_before_the_result_ends_the_exchange() {
        let line = r#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"wait"},{"role":"tool","tool_call_id":"c","content":"r"},{"role":"assistant","content":"ok"}]}"#;
        assert_eq!(kinds(Dataset::OpenAi, line), ["1:unanswered_call:error", "3:orphan_result:error"]);
    }

    #[test]
    fn dataset_rules() {
        let tools = r#""tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","required":["q"]}}}]"#;
        let line = format!(
            r#"{{"messages":[{{"role":"system"}},{{"role":"user","content":"hi"}},{{"role":"assistant","tool_calls":[{{"id":"a","type":"function","function":{{"name":"g","arguments":"{{}}"}}}},{{"id":"b","type":"function","function":{{"name":"f","arguments":"{{\"x\":1}}"}}}}]}},{{"role":"tool","tool_call_id":"a","content":"r"}},{{"role":"tool","tool_call_id":"b","content":"r"}},{{"role":"system","content":"late"}},{{"role":"bot","content":"?"}},{{"role":"assistant","content":"","weight":2}}],{tools}}}"#
        );
        assert_eq!(
            kinds(Dataset::OpenAi, &line),
            [
                "0:empty_content:error",
                "2:undeclared_tool:error",
                "2:missing_required_argument:error",
                "5:misplaced_system:warning",
                "6:unknown_role:error",
                "7:empty_content:error",
                "7:invalid_weight:error"
            ]
        );
        assert_eq!(kinds(Dataset::OpenAi, r#"{"messages":[{"role":"user","content":"hi"}]}"#), ["0:last_message_not_assistant:error"]);
        assert_eq!(kinds(Dataset::OpenAi, r#"{"text":"hi"}"#), ["-:not_a_conversation:error"]);
    }

    #[test]
    fn anthropic_and_responses_pairing() {
        let line = r#"{"custom_id":"x","params":{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}]}}"#;
        assert_eq!(kinds(Dataset::AnthropicBatch, line), Vec::<String>::new());
        let line = r#"{"custom_id":"x","params":{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1]}]},{"role":"user","content":"no result"}]}}"#;
        assert_eq!(kinds(Dataset::AnthropicBatch, line), ["1:invalid_arguments:error", "1:unanswered_call:error"]);
        let line = r#"{"custom_id":"r","url":"/v1/responses","body":{"input":[{"role":"user","content":"q"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"t"}]},{"role":"user","content":"next"}]}}"#;
        assert_eq!(kinds(Dataset::OpenAiBatch, line), ["1:unanswered_call:error"]);
    }

    #[test]
    fn gemini_tuning_rules() {
        let call = |name: &str| format!(r#"{{"functionCall":{{"name":"{name}","args":{{}}}}}}"#);
        let resp = |name: &str| format!(r#"{{"functionResponse":{{"name":"{name}","response":{{"output":1}}}}}}"#);
        let line = |contents: &[String]| format!(r#"{{"contents":[{}]}}"#, contents.join(","));
        let user = |parts: &[String]| format!(r#"{{"role":"user","parts":[{}]}}"#, parts.join(","));
        let model = |parts: &[String]| format!(r#"{{"role":"model","parts":[{}]}}"#, parts.join(","));
        let text = |t: &str| format!(r#"{{"text":"{t}"}}"#);
        let d = Dataset::GeminiTuning;
        // A clean round trip, and a call in the last turn (the target).
        assert_eq!(kinds(d, &line(&[user(&[text("q")]), model(&[call("f")]), user(&[resp("f")]), model(&[text("ok")])])), Vec::<String>::new());
        assert_eq!(kinds(d, &line(&[user(&[text("q")]), model(&[call("f"), call("g")])])), Vec::<String>::new());
        // As many responses as calls: one missing, answered after a prompt, or extra.
        assert_eq!(
            kinds(d, &line(&[user(&[text("q")]), model(&[call("f"), call("g")]), user(&[resp("g")]), model(&[text("ok")])])),
            ["1:unanswered_call:error"]
        );
        assert_eq!(
            kinds(d, &line(&[user(&[text("q")]), model(&[call("f")]), user(&[text("wait")]), user(&[resp("f")]), model(&[text("ok")])])),
            ["1:unanswered_call:error", "3:orphan_result:error"]
        );
        assert_eq!(
            kinds(d, &line(&[user(&[text("q")]), model(&[call("f")]), user(&[resp("f"), resp("f")]), model(&[text("ok")])])),
            ["2:duplicate_result:error"]
        );
        // A response without a call before it; roles out of order; empty parts; a role the API
        // does not have; the last turn not the model's.
        assert_eq!(kinds(d, &line(&[user(&[resp("f")]), model(&[text("ok")])])), ["0:orphan_result:error"]);
        assert_eq!(kinds(d, &line(&[user(&[text("q")]), model(&[text("a")]), model(&[text("b")])])), ["2:consecutive_assistant:error"]);
        assert_eq!(kinds(d, &line(&[user(&[]), model(&[text("a")])])), ["0:empty_content:error"]);
        assert_eq!(kinds(d, &line(&[user(&[text("q")]), r#"{"role":"assistant","parts":[{"text":"a"}]}"#.to_owned()])), ["1:unknown_role:error"]);
        assert_eq!(kinds(d, &line(&[user(&[text("q")]), model(&[text("a")]), user(&[text("q2")])])), ["2:last_message_not_assistant:error"]);
        assert_eq!(kinds(d, r#"{"contents":[]}"#), ["-:not_a_conversation:error"]);
    }

    #[test]
    fn duplicate_custom_ids() {
        let mut ids = CustomIds::default();
        assert!(ids.see(1, "a").is_none());
        assert!(ids.see(2, "b").is_none());
        assert_eq!(ids.see(3, "a").map(|f| f.kind), Some(Kind::DuplicateCustomId));
    }
}
