//! Each shape's layout as a JSON value: where it keeps a line's conversation, how it marks its
//! messages and how it shapes a synthetic result, for the dataset repair (which edits a line as
//! JSON) and the dataset stats. Every match names every shape, so that a new shape does not
//! compile until it says how it is laid out.

use super::Dataset;
use crate::transcript::formats::edit::CallRef;
use crate::transcript::formats::Format;
use serde_json::{json, Value};

impl Dataset {
    /// Whether an `openai-dataset` line is of the preference shape (read as the reader reads it:
    /// a `messages` array makes it a plain conversation).
    pub fn is_preference(self, v: &serde_json::Value) -> bool {
        match self {
            Dataset::OpenAi => !v.get("messages").is_some_and(serde_json::Value::is_array),
            Dataset::OpenAiBatch | Dataset::AnthropicBatch | Dataset::ShareGpt | Dataset::GeminiTuning => false,
        }
    }

    /// The line's conversation array, to edit: a preference line's shared prompt,
    /// `input.messages`, whose indices are those of each of its two conversations.
    pub fn conversation_mut(self, v: &mut serde_json::Value) -> Option<&mut Vec<serde_json::Value>> {
        let holder = match self {
            Dataset::OpenAi if self.is_preference(v) => v.get_mut("input")?.get_mut("messages")?,
            Dataset::OpenAi => v.get_mut("messages")?,
            Dataset::OpenAiBatch => {
                let body = v.get_mut("body")?;
                if body.get("messages").is_some() {
                    body.get_mut("messages")?
                } else {
                    body.get_mut("input")?
                }
            }
            Dataset::AnthropicBatch => v.get_mut("params")?.get_mut("messages")?,
            Dataset::ShareGpt => v.get_mut("conversations")?,
            Dataset::GeminiTuning => v.get_mut("contents")?,
        };
        holder.as_array_mut()
    }

    /// Whether a message carries tool results (and nothing that starts a new turn).
    pub fn is_result(self, m: &serde_json::Value) -> bool {
        use serde_json::Value;
        match self {
            Dataset::AnthropicBatch => {
                json_role(m) == Some("user")
                    && m.get("content")
                        .and_then(Value::as_array)
                        .is_some_and(|a| a.iter().all(|b| b.get("type").and_then(Value::as_str) == Some("tool_result")))
            }
            Dataset::ShareGpt => matches!(json_role(m), Some("observation" | "tool")),
            Dataset::GeminiTuning => json_role(m) == Some("user") && gemini_parts(m).is_some_and(|p| !p.is_empty() && p.iter().all(is_function_response)),
            Dataset::OpenAi | Dataset::OpenAiBatch => {
                matches!(json_role(m), Some("tool" | "function")) || m.get("type").and_then(Value::as_str).is_some_and(|t| t.ends_with("_output"))
            }
        }
    }

    /// Whether a message is the assistant's.
    pub fn is_assistant(self, m: &serde_json::Value) -> bool {
        match self {
            Dataset::ShareGpt => matches!(json_role(m), Some("gpt" | "assistant" | "model" | "function_call")),
            Dataset::GeminiTuning => json_role(m) == Some("model"),
            Dataset::OpenAi | Dataset::OpenAiBatch | Dataset::AnthropicBatch => json_role(m) == Some("assistant"),
        }
    }
    /// Every message of a line, for counting: a preference line's prompt and its preferred
    /// output, an Anthropic request's `system` as a first message, a Responses `input` string as
    /// one user message. Empty when the line holds no conversation.
    pub fn all_messages(self, v: &serde_json::Map<String, Value>) -> Vec<Value> {
        let mut messages: Vec<Value> = Vec::new();
        let take = |x: Option<&Value>| x.and_then(Value::as_array).cloned().unwrap_or_default();
        match self {
            Dataset::OpenAi => {
                if let Some(m) = v.get("messages") {
                    messages = take(Some(m));
                } else {
                    messages = take(v.get("input").and_then(|i| i.get("messages")));
                    messages.extend(take(v.get("preferred_output")));
                }
            }
            Dataset::OpenAiBatch => {
                let body = v.get("body");
                match body.and_then(|b| b.get("messages")).or_else(|| body.and_then(|b| b.get("input"))) {
                    Some(Value::String(s)) => messages.push(json!({"role": "user", "content": s})),
                    other => messages = take(other),
                }
            }
            Dataset::AnthropicBatch => {
                let params = v.get("params");
                if let Some(system) = params.and_then(|p| p.get("system")) {
                    messages.push(json!({"role": "system", "content": system}));
                }
                messages.extend(take(params.and_then(|p| p.get("messages"))));
            }
            Dataset::ShareGpt => messages = take(v.get("conversations")),
            Dataset::GeminiTuning => {
                if let Some(system) = v.get("systemInstruction").or_else(|| v.get("system_instruction")) {
                    messages.push(json!({"role": "system", "parts": system.get("parts").cloned().unwrap_or(Value::Null)}));
                }
                messages.extend(take(v.get("contents")));
            }
        }
        messages
    }

    /// The synthetic result, saying `text`, of call `id` to `tool` made in message `call`, shaped
    /// as this shape shapes results.
    pub fn synthetic_result(self, call: &Value, id: &str, tool: &str, text: &str) -> Option<Value> {
        let line = match self {
            Dataset::ShareGpt => return Some(json!({"from": "observation", "value": text})),
            // A `functionResponse` part; the API's convention for a failure is an `error` key.
            // The call's own `id`, when it has one, is repeated.
            Dataset::GeminiTuning => {
                let own_id = gemini_parts(call).into_iter().flatten().filter_map(function_call).any(|c| c.get("id").and_then(Value::as_str) == Some(id));
                let response =
                    if own_id { json!({"id": id, "name": tool, "response": {"error": text}}) } else { json!({"name": tool, "response": {"error": text}}) };
                return Some(json!({"functionResponse": response}));
            }
            Dataset::AnthropicBatch => {
                let msg: Value = serde_json::from_slice(&Format::Anthropic.synthetic_result(b"{}", &reference(id, tool, None), text, None, "")).ok()?;
                return msg.get("content")?.get(0).cloned();
            }
            Dataset::OpenAi | Dataset::OpenAiBatch if call.get("type").and_then(Value::as_str).is_some_and(|t| t.ends_with("_call")) => {
                // A Responses input item: the `<type>_output` item.
                let item = call.get("type").and_then(Value::as_str).map(str::to_owned);
                Format::Codex.synthetic_result(b"{}", &reference(id, tool, item), text, None, "")
            }
            Dataset::OpenAi | Dataset::OpenAiBatch if id.starts_with("function_call@") => {
                return Some(json!({"role": "function", "name": tool, "content": text}))
            }
            Dataset::OpenAi | Dataset::OpenAiBatch => Format::OpenAiChat.synthetic_result(b"{}", &reference(id, tool, None), text, None, ""),
        };
        serde_json::from_slice(&line).ok()
    }

    /// Puts `results` (synthetic results, in the order of their calls) at message `at` of a
    /// conversation, as this shape holds results: Anthropic in one user message, before any text
    /// it has; ShareGPT as one `observation` (which answers every call of the message before);
    /// OpenAI as one message each. `None` when there is nothing to put.
    pub fn insert_results(self, messages: &mut Vec<Value>, at: usize, results: Vec<Value>) -> Option<()> {
        match self {
            Dataset::AnthropicBatch => match messages.get_mut(at).filter(|m| m.get("role").and_then(Value::as_str) == Some("user")) {
                Some(next) => {
                    let content = match next.get("content") {
                        Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
                        Some(Value::Array(a)) => a.clone(),
                        _ => Vec::new(),
                    };
                    let (mut all, rest): (Vec<Value>, Vec<Value>) =
                        content.into_iter().partition(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"));
                    all.extend(results);
                    all.extend(rest);
                    next["content"] = Value::Array(all);
                }
                None => messages.insert(at, json!({"role": "user", "content": results})),
            },
            Dataset::ShareGpt => messages.insert(at, results.into_iter().next()?),
            // The responses go in the content right after the call's: added to the responses
            // already there, or first in the next user turn, or in a user turn of their own.
            Dataset::GeminiTuning => {
                if let Some(parts) = at
                    .checked_sub(1)
                    .and_then(|b| messages.get_mut(b))
                    .filter(|m| Dataset::GeminiTuning.is_result(m))
                    .and_then(|m| m.get_mut("parts"))
                    .and_then(Value::as_array_mut)
                {
                    parts.extend(results);
                } else if let Some(parts) =
                    messages.get_mut(at).filter(|m| json_role(m) == Some("user")).and_then(|m| m.get_mut("parts")).and_then(Value::as_array_mut)
                {
                    parts.splice(0..0, results);
                } else {
                    messages.insert(at, json!({"role": "user", "parts": results}));
                }
            }
            Dataset::OpenAi | Dataset::OpenAiBatch => {
                for (j, r) in results.into_iter().enumerate() {
                    messages.insert(at + j, r);
                }
            }
        }
        Some(())
    }
}

impl Dataset {
    /// Removes result parts the dataset rules found without a call (or answering one a second
    /// time): `drops` holds each one's message index and the id its finding names. `None` when
    /// this shape cannot say which part that is (every shape but `gemini-tuning`), or a part
    /// is not found; `messages` is then left as it was. A content left without parts goes too.
    pub fn drop_results(self, messages: &mut Vec<Value>, drops: &[(usize, &str)]) -> Option<()> {
        match self {
            Dataset::GeminiTuning => {
                let mut by_message: std::collections::BTreeMap<usize, Vec<usize>> = std::collections::BTreeMap::new();
                for &(at, id) in drops {
                    let chosen = by_message.entry(at).or_default();
                    let pick = gemini_response_part(messages, at, id, chosen)?;
                    chosen.push(pick);
                }
                for (at, mut chosen) in by_message.into_iter().rev() {
                    chosen.sort_unstable();
                    let parts = messages.get_mut(at)?.get_mut("parts")?.as_array_mut()?;
                    for p in chosen.into_iter().rev() {
                        parts.remove(p);
                    }
                    if parts.is_empty() {
                        messages.remove(at);
                    }
                }
                Some(())
            }
            Dataset::OpenAi | Dataset::OpenAiBatch | Dataset::AnthropicBatch | Dataset::ShareGpt => None,
        }
    }
}

/// Which `functionResponse` part of content `at` the finding about `id` is about, among those
/// not `chosen` yet: `response@<at>.<k>` is the k-th response; an `id` a response has, the last
/// response with it; a call's id (answered by name), the last response of the call's name.
fn gemini_response_part(messages: &[Value], at: usize, id: &str, chosen: &[usize]) -> Option<usize> {
    let parts = gemini_parts(messages.get(at)?)?;
    let responses: Vec<(usize, &Value)> =
        parts.iter().enumerate().filter_map(|(i, p)| Some((i, p.get("functionResponse").or_else(|| p.get("function_response"))?))).collect();
    if let Some(k) = id.strip_prefix(&format!("response@{at}.")).and_then(|k| k.parse::<usize>().ok()) {
        return responses.get(k).map(|(i, _)| *i).filter(|i| !chosen.contains(i));
    }
    let free = |f: &dyn Fn(&Value) -> bool| responses.iter().rev().find(|(i, r)| !chosen.contains(i) && f(r)).map(|(i, _)| *i);
    let own_id = |r: &Value| r.get("id").and_then(Value::as_str) == Some(id);
    if let Some(i) = free(&own_id) {
        return Some(i);
    }
    // A call without an id: `call@<content>.<k>`, the k-th call of that content.
    let (j, k) = id.strip_prefix("call@")?.split_once('.')?;
    let (j, k): (usize, usize) = (j.parse().ok()?, k.parse().ok()?);
    let call = gemini_parts(messages.get(j)?)?.iter().filter_map(function_call).nth(k)?;
    let name = call.get("name").and_then(Value::as_str)?;
    free(&|r: &Value| r.get("id").is_none() && r.get("name").and_then(Value::as_str) == Some(name))
}

/// A message's role as written (`role`, or ShareGPT's `from`).
fn json_role(m: &serde_json::Value) -> Option<&str> {
    m.get("role").or_else(|| m.get("from")).and_then(serde_json::Value::as_str)
}

/// A Gemini content's `parts`.
fn gemini_parts(m: &Value) -> Option<&Vec<Value>> {
    m.get("parts").and_then(Value::as_array)
}

/// A part's `functionCall` (or `function_call`).
fn function_call(p: &Value) -> Option<&Value> {
    p.get("functionCall").or_else(|| p.get("function_call"))
}

fn is_function_response(p: &Value) -> bool {
    p.get("functionResponse").or_else(|| p.get("function_response")).is_some()
}

fn reference(id: &str, tool: &str, item: Option<String>) -> CallRef {
    CallRef { id: id.to_owned(), tool: tool.to_owned(), item }
}
