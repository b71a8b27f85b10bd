//! Conversation lines rendered for people: `show --history` and `history -o text` / `context
//! -o text` print one block per line (`line  role  text`), tool calls and results named, and
//! each compaction marked where it happened.

use super::safe;
use crate::transcript::model::Role;
use crate::transcript::Format;
use serde_json::Value;
use std::io::{self, Write};

/// Writes one conversation line (`record` as written, of `format`): its number, its role (a
/// subagent's record that Claude Code 1.0.x wrote into the main file is marked `↳`), and its
/// parts, one under the other.
pub fn entry(out: &mut dyn Write, line: u64, role: Role, record: &[u8], format: Format) -> io::Result<()> {
    let v: Value = serde_json::from_slice(record).map_err(io::Error::other)?;
    let role = if v["isSidechain"] == true { format!("↳ {}", role.as_str()) } else { role.as_str().to_owned() };
    parts(out, &format!("{line:>6}"), &role, &render_parts(&v, format))
}

/// Writes a canonical record of `context` (no line number: the context is not numbered).
pub fn canonical(out: &mut dyn Write, record: &[u8], format: Format) -> io::Result<()> {
    let v: Value = serde_json::from_slice(record).map_err(io::Error::other)?;
    let (shape, role) = match format {
        // Codex's canonical records are rollout items: `{"type", "payload"}`.
        Format::Codex => (Format::Codex, v["payload"]["role"].as_str().or(v["payload"]["type"].as_str()).or(v["type"].as_str()).unwrap_or("")),
        // The others are API messages: `{"role", "content"}`.
        // Pi's records are its own messages: `{"role", "content"}` with `toolCall` blocks.
        Format::Pi => (Format::Pi, v["role"].as_str().unwrap_or("")),
        // Qwen Code's are Gemini `Content`s: `{"role": "user" | "model", "parts"}`.
        Format::Qwen => (Format::Qwen, v["role"].as_str().unwrap_or("")),
        // Gemini's records are API contents: `{"role", "parts"}`.
        Format::Gemini => (Format::Gemini, v["role"].as_str().unwrap_or("")),
        // Copilot's records are the Anthropic Messages it sends.
        Format::ClaudeCode | Format::Copilot | Format::OpenAiChat | Format::Anthropic | Format::Dataset(_) => {
            (Format::Anthropic, v["role"].as_str().unwrap_or(""))
        }
    };
    parts(out, &format!("{:>6}", ""), &safe::line(role), &render_parts(&v, shape))
}

/// Writes a compaction marker at `line`.
pub fn compaction(out: &mut dyn Write, line: u64) -> io::Result<()> {
    writeln!(out, "{line:>6}  ─── compaction: the model saw only a summary of everything above ───")
}

fn parts(out: &mut dyn Write, head: &str, role: &str, parts: &[String]) -> io::Result<()> {
    let mut parts = parts.iter();
    writeln!(out, "{head}  {role:<9}  {}", indent(parts.next().map_or("", String::as_str)))?;
    for p in parts {
        writeln!(out, "{:>6}  {:<9}  {}", "", "", indent(p))?;
    }
    Ok(())
}

/// Continuation lines of a multi-line text, indented under the first; its other controls
/// escaped ([`safe::text`]).
fn indent(text: &str) -> String {
    safe::text(text).replace('\n', &format!("\n{:19}", ""))
}

/// The readable parts of one conversation line: text, tool calls with their arguments, tool
/// results with their output.
pub fn render_parts(v: &Value, format: Format) -> Vec<String> {
    let msg = match format {
        Format::ClaudeCode => &v["message"],
        Format::Codex => v.get("payload").unwrap_or(v),
        // A Pi line is an entry holding its message; a record is the message.
        Format::Pi => v.get("message").unwrap_or(v),
        // A Qwen Code line is a record holding its `Content`; a record is the `Content`.
        Format::Qwen => v.get("message").unwrap_or(v),
        Format::Gemini => return gemini_parts(v),
        // A Copilot line is an event: its `data` holds the text, calls or result.
        Format::Copilot => v.get("data").unwrap_or(v),
        Format::OpenAiChat | Format::Anthropic | Format::Dataset(_) => v,
    };
    let mut parts = Vec::new();
    let call_id = |m: &Value| safe::line(m.get("call_id").or_else(|| m.get("id")).and_then(Value::as_str).unwrap_or("")).into_owned();
    match msg.get("type").and_then(Value::as_str) {
        Some(t) if t.ends_with("_output") => {
            let out = msg.get("output").or_else(|| msg.get("tools")).map(text_of).unwrap_or_default();
            parts.push(format!("[{} {}] {out}", safe::line(t), call_id(msg)));
        }
        Some(t) if t.ends_with("_call") => {
            let name = safe::line(msg.get("name").and_then(Value::as_str).unwrap_or(t));
            let args = msg.get("arguments").or_else(|| msg.get("input")).or_else(|| msg.get("action")).map(text_of).unwrap_or_default();
            parts.push(format!("[call {name} {}] {args}", call_id(msg)));
        }
        Some("reasoning") => parts.push("[reasoning]".to_owned()),
        _ => {}
    }
    match msg.get("content") {
        Some(Value::String(s)) => parts.push(s.clone()),
        Some(Value::Array(blocks)) => parts.extend(blocks.iter().map(render_block)),
        _ => {}
    }
    // Gemini `Content` parts (Qwen Code).
    parts.extend(msg.get("parts").and_then(Value::as_array).into_iter().flatten().map(render_part));
    // Copilot's `toolRequests`.
    for call in msg.get("toolRequests").and_then(Value::as_array).into_iter().flatten() {
        let name = safe::line(call["name"].as_str().unwrap_or("?"));
        parts.push(format!("[call {name} {}] {}", safe::line(call["toolCallId"].as_str().unwrap_or("")), text_of(&call["arguments"])));
    }
    if let Some(r) = msg.get("result").and_then(|r| r.get("content")).or_else(|| msg.get("error").and_then(|e| e.get("message"))) {
        parts.push(text_of(r));
    }
    for call in msg.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        let f = &call["function"];
        parts.push(format!("[call {} {}] {}", safe::line(f["name"].as_str().unwrap_or("?")), call_id(call), text_of(&f["arguments"])));
    }
    if let Some(id) = msg.get("tool_call_id").or_else(|| msg.get("toolCallId")).and_then(Value::as_str) {
        parts.insert(0, format!("[result {}]", safe::line(id)));
    }
    if parts.is_empty() {
        parts.push(String::new());
    }
    parts
}

/// A Gemini content (`{"role", "parts"}`) or message record (`content`, `toolCalls`): its text,
/// calls and responses.
fn gemini_parts(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let list = v.get("parts").or_else(|| v.get("content"));
    let parts: Vec<Value> = match list {
        Some(Value::String(s)) => vec![serde_json::json!({"text": s})],
        Some(Value::Array(a)) => a.clone(),
        Some(other) => vec![other.clone()],
        None => Vec::new(),
    };
    let calls = v.get("toolCalls").and_then(Value::as_array).cloned().unwrap_or_default();
    let call =
        |f: &Value| format!("[call {} {}] {}", safe::line(f["name"].as_str().unwrap_or("?")), safe::line(f["id"].as_str().unwrap_or("")), text_of(&f["args"]));
    let response = |f: &Value| format!("[result {}] {}", safe::line(f["id"].as_str().unwrap_or("")), text_of(&f["response"]));
    for p in &parts {
        if let Some(f) = p.get("functionCall") {
            out.push(call(f));
        } else if let Some(f) = p.get("functionResponse") {
            out.push(response(f));
        } else if p.get("thought").is_some_and(|t| t != &Value::Bool(false) && !t.is_null()) {
            out.push(format!("[thought] {}", p["text"].as_str().unwrap_or("")));
        } else if let Some(t) = p.get("text").and_then(Value::as_str) {
            out.push(t.to_owned());
        } else if let Some(s) = p.as_str() {
            out.push(s.to_owned());
        }
    }
    for c in &calls {
        out.push(call(c));
        for r in c.get("result").and_then(Value::as_array).into_iter().flatten() {
            if let Some(f) = r.get("functionResponse") {
                out.push(response(f));
            }
        }
    }
    if out.is_empty() {
        out.push(String::new());
    }
    out
}

/// One content block of Claude, Anthropic, Codex or OpenAI content arrays.
fn render_block(b: &Value) -> String {
    let ty = b.get("type").and_then(Value::as_str).unwrap_or("");
    match ty {
        "text" | "input_text" | "output_text" => b["text"].as_str().unwrap_or("").to_owned(),
        "thinking" => format!("[thinking] {}", b["thinking"].as_str().unwrap_or("")),
        "tool_use" | "server_tool_use" => {
            format!("[call {} {}] {}", safe::line(b["name"].as_str().unwrap_or("?")), safe::line(b["id"].as_str().unwrap_or("")), text_of(&b["input"]))
        }
        // Pi's call block.
        "toolCall" => {
            format!("[call {} {}] {}", safe::line(b["name"].as_str().unwrap_or("?")), safe::line(b["id"].as_str().unwrap_or("")), text_of(&b["arguments"]))
        }
        "tool_result" => format!("[result {}] {}", safe::line(b["tool_use_id"].as_str().unwrap_or("")), text_of(&b["content"])),
        "" => text_of(b),
        other => format!("[{}]", safe::line(other)),
    }
}

/// One part of a Gemini `Content` (Qwen Code): text, thought, `functionCall`, `functionResponse`.
fn render_part(p: &Value) -> String {
    if let Some(c) = p.get("functionCall") {
        return format!("[call {} {}] {}", safe::line(c["name"].as_str().unwrap_or("?")), safe::line(c["id"].as_str().unwrap_or("")), text_of(&c["args"]));
    }
    if let Some(r) = p.get("functionResponse") {
        return format!("[result {}] {}", safe::line(r["id"].as_str().unwrap_or("")), text_of(&r["response"]));
    }
    match p.get("text").and_then(Value::as_str) {
        Some(t) if p.get("thought") == Some(&Value::Bool(true)) => format!("[thinking] {t}"),
        Some(t) => t.to_owned(),
        None => p.as_object().and_then(|o| o.keys().next()).map_or_else(String::new, |k| format!("[{}]", safe::line(k))),
    }
}

/// A value as text: strings as they are, content arrays by their text, anything else as JSON.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Array(a) if a.iter().all(|b| b.get("type").is_some()) => a.iter().map(render_block).collect::<Vec<_>>().join("\n"),
        other => other.to_string(),
    }
}
