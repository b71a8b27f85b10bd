//! GitHub Copilot CLI sessions (`@github/copilot`): `~/.copilot/session-state/<id>/events.jsonl`
//! (`$COPILOT_HOME/session-state/...`).
//!
//! One event per line, `{type, data, id, timestamp, parentId, ephemeral?, agentId?}` (the
//! schema is `session-events.schema.json` in the npm package, the same as github/copilot-sdk's
//! `nodejs/src/generated/session-events.ts`); each event's `parentId` is the event written
//! before it, so the file is one chain. A session begins with `session.start`; a resumed one
//! appends `session.resume` and goes on; `session.shutdown` ends a run.
//!
//! What the model sees (checked against Copilot CLI 1.0.102, resuming real sessions against a
//! local Anthropic Messages server): a `user.message` is a user text (`data.transformedContent`,
//! the prompt with what the agent added, else `data.content`); an `assistant.message` is an
//! assistant turn of its `data.content` text and one call per `data.toolRequests[]`
//! (`{toolCallId, name, arguments}`); a `tool.execution_complete` is the result for
//! `data.toolCallId` (`data.result.content`, or `data.error.message` when `success` is false).
//! Events of a subagent carry `data.parentToolCallId` and are its own conversation, not the
//! main one. The other types (turn starts and ends, usage records, permissions, hooks, ...) are
//! not sent. `session.compaction_complete` with `success: true` replaces the history before it
//! by its `summaryContent`.
//!
//! Usage is `session.usage_record`'s `data.usage` (`model`, `inputTokens`, `outputTokens`,
//! `cacheReadTokens`, `cacheWriteTokens`), one record per model call.

use super::edit::{self, CallRef, Edited, TreeKeys};
use crate::transcript::model::{Args, Call, Entry, Message, Node, Parsed, Role, ToolResult, Usage};
use crate::transcript::scan::{self, object_line, Kind, RawStr, Scanner};
use serde_json::{json, Map, Value};

/// Copilot's event chain: every event names the one before it.
pub const TREE: TreeKeys = TreeKeys { id: "id", parent: "parentId" };

/// The type of the first event of a session (detection looks for the `session.` and other
/// dotted types with a `data` object).
pub const START: &str = "session.start";

/// Event types the schema of Copilot CLI 1.0.102 names (`session-events.schema.json`); an event
/// of another type is `Unknown`.
pub const TYPES: &[&str] = &[
    "abort",
    "assistant.fusion_phase_activity",
    "assistant.fusion_phase_completed",
    "assistant.fusion_phase_failed",
    "assistant.fusion_phase_started",
    "assistant.idle",
    "assistant.intent",
    "assistant.message",
    "assistant.message_delta",
    "assistant.message_start",
    "assistant.reasoning",
    "assistant.reasoning_delta",
    "assistant.server_tool_progress",
    "assistant.streaming_delta",
    "assistant.tool_call_delta",
    "assistant.turn_end",
    "assistant.turn_start",
    "assistant.usage",
    "auto_mode_switch.completed",
    "auto_mode_switch.requested",
    "capabilities.changed",
    "command.completed",
    "command.execute",
    "command.queued",
    "commands.changed",
    "elicitation.completed",
    "elicitation.requested",
    "exit_plan_mode.completed",
    "exit_plan_mode.requested",
    "external_tool.completed",
    "external_tool.requested",
    "hook.end",
    "hook.progress",
    "hook.start",
    "human_response.recorded",
    "mcp.headers_refresh_completed",
    "mcp.headers_refresh_required",
    "mcp.oauth_completed",
    "mcp.oauth_recovery_completed",
    "mcp.oauth_required",
    "mcp.prompts.list_changed",
    "mcp.resources.list_changed",
    "mcp.tools.list_changed",
    "mcp_app.tool_call_complete",
    "model.call_failure",
    "model.call_finished",
    "pending_messages.modified",
    "permission.completed",
    "permission.requested",
    "sampling.completed",
    "sampling.requested",
    "session.auto_mode_resolved",
    "session.auto_tier_recommendation",
    "session.auto_tier_switch_failed",
    "session.autopilot_objective_changed",
    "session.autopilot_stopped",
    "session.background_tasks_changed",
    "session.binary_asset",
    "session.canvas.closed",
    "session.canvas.opened",
    "session.canvas.recorded",
    "session.canvas.registry_changed",
    "session.canvas.removed",
    "session.canvas.unavailable",
    "session.compaction_complete",
    "session.compaction_start",
    "session.completion_receipt",
    "session.context_changed",
    "session.context_cleared",
    "session.custom_agents_updated",
    "session.custom_notification",
    "session.error",
    "session.extensions.attachments_pushed",
    "session.extensions_loaded",
    "session.fusion_completed",
    "session.fusion_resolved",
    "session.fusion_route_failed",
    "session.fusion_route_started",
    "session.handoff",
    "session.idle",
    "session.indexed_search",
    "session.info",
    "session.managed_plugin_progress",
    "session.managed_settings_enforced",
    "session.managed_settings_resolved",
    "session.mcp_server_needs_reconnect",
    "session.mcp_server_removed",
    "session.mcp_server_status_changed",
    "session.mcp_server_tools_loaded",
    "session.mcp_servers_loaded",
    "session.mode_changed",
    "session.mode_notice_delivered",
    "session.model_change",
    "session.model_deselected",
    "session.permission_recovery",
    "session.permissions_changed",
    "session.plan_changed",
    "session.quota_observation",
    "session.remote_steerable_changed",
    "session.resume",
    "session.schedule_cancelled",
    "session.schedule_created",
    "session.schedule_rearmed",
    "session.session_limits_changed",
    "session.shutdown",
    "session.skills_loaded",
    "session.snapshot_rewind",
    "session.start",
    "session.task_complete",
    "session.title_changed",
    "session.todos_changed",
    "session.tools_updated",
    "session.truncation",
    "session.usage_checkpoint",
    "session.usage_info",
    "session.usage_record",
    "session.warning",
    "session.workspace_file_changed",
    "session_limits_exhausted.completed",
    "session_limits_exhausted.requested",
    "skill.invoked",
    "subagent.completed",
    "subagent.configured",
    "subagent.deselected",
    "subagent.failed",
    "subagent.selected",
    "subagent.started",
    "system.message",
    "system.notification",
    "tool.execution_complete",
    "tool.execution_partial_result",
    "tool.execution_progress",
    "tool.execution_start",
    "tool.shell_output",
    "tool.user_requested",
    "tool_search.activated",
    "user.message",
    "user_input.completed",
    "user_input.requested",
    "workflow.run_settled",
    "workflow.run_started",
    "workflow.run_updated",
];

/// Whether `t` is a type of Copilot's schema.
pub fn is_type(t: &str) -> bool {
    TYPES.binary_search(&t).is_ok()
}

/// The fields of `data` we read.
#[derive(Default)]
struct Data<'a> {
    content: bool,
    /// `content` is a string (what the loader asks of a message event).
    content_string: bool,
    /// `messageId` is a string.
    message_id: bool,
    /// `toolRequests` is absent, `null`, or an array of objects each with a string
    /// `toolCallId` and `name`.
    requests_ok: bool,
    /// `result` is absent, `null`, or an object with a string `content`; `error` the same
    /// with `message`.
    result_ok: bool,
    error_ok: bool,
    transformed: bool,
    calls: smallvec::SmallVec<[Call<'a>; 1]>,
    tool_call_id: Option<RawStr<'a>>,
    /// `parentToolCallId`: the event belongs to a subagent's conversation.
    subagent: bool,
    success: Option<bool>,
    usage: Option<(Usage, Option<RawStr<'a>>)>,
}

/// What the envelope of an event holds, as Copilot's loader judges it.
#[derive(Default)]
struct Envelope {
    id_uuid: bool,
    /// `parentId` is present, and a UUID string or `null`.
    parent_ok: bool,
    timestamp_ok: bool,
    /// `ephemeral` is absent or a boolean.
    ephemeral_ok: bool,
}

/// Parses one line (valid UTF-8, not blank). `Err` means the line is not a JSON object.
pub fn parse(line: &[u8]) -> scan::Result<Parsed<'_>> {
    let (mut ty, mut id, mut parent) = (None, None, None);
    let mut data: Option<Data<'_>> = None;
    let mut env = Envelope { ephemeral_ok: true, ..Envelope::default() };
    object_line(line, |s, k| {
        match &*k.key() {
            b"type" => ty = s.opt_string()?,
            b"id" => {
                id = s.opt_string()?;
                env.id_uuid = id.is_some_and(|i| is_uuid(&i.decode()));
            }
            b"parentId" => {
                env.parent_ok = s.peek() == Some(Kind::Null);
                parent = s.opt_string()?;
                env.parent_ok |= parent.is_some_and(|p| is_uuid(&p.decode()));
            }
            b"timestamp" => env.timestamp_ok = s.opt_string()?.is_some_and(|t| is_timestamp(&t.decode())),
            b"ephemeral" => env.ephemeral_ok = s.shape()? == Some(Kind::Bool),
            b"data" => data = read_data(s)?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    let ty = ty.map(|t| t.decode()).unwrap_or_default();
    let node = id.map(|i| Node { id: i.hash(), parent: parent.map(|p| p.hash()), sidechain: false });
    let refused = if is_type(&ty) { refusal(&ty, &env, data.as_ref()) } else { None };
    let of = |entry| Parsed { node, refused, ..Parsed::of(entry) };
    let data = data.unwrap_or_default();
    let entry = match &*ty {
        // A subagent's messages, calls and results are its own conversation.
        "user.message" | "assistant.message" | "tool.execution_complete" if data.subagent => Entry::Other,
        "user.message" => {
            let mut m = Message::new(Role::User);
            m.has_content = data.content || data.transformed;
            m.prompt = true;
            Entry::Message(m)
        }
        "assistant.message" => {
            let mut m = Message::new(Role::Assistant);
            m.has_content = data.content || !data.calls.is_empty();
            m.calls = data.calls;
            Entry::Message(m)
        }
        "tool.execution_complete" => {
            let mut m = Message::new(Role::Tool);
            m.has_content = true;
            if let Some(id) = data.tool_call_id {
                m.results.push(ToolResult { id: id.decode() });
            }
            Entry::Message(m)
        }
        // A compaction that failed replaced nothing.
        "session.compaction_complete" if data.success == Some(true) => Entry::Compaction { carried: Vec::new(), keeps: None, summary_follows: false },
        "session.usage_record" => {
            let (usage, model) = data.usage.map_or((None, None), |(u, m)| (Some(u), m));
            let key = id.map_or_else(|| crate::transcript::model::id_hash(&String::from_utf8_lossy(line)), |i| i.hash());
            return Ok(Parsed { usage: usage.map(|u| Usage { key, ..u }), model: model.map(|m| m.decode()), ..of(Entry::Other) });
        }
        t if is_type(t) => Entry::Other,
        _ => Entry::Unknown,
    };
    Ok(of(entry))
}

/// Why Copilot CLI 1.0.102's loader (`sessionEventsLoadForResumeWithPolicyJson` of its native
/// runtime) refuses an event of a type its schema names, as measured against it: the envelope
/// (`id` a hyphenated UUID, `parentId` present and a UUID or `null`, `timestamp` an ISO 8601
/// date-time with a zone, `ephemeral` a boolean when present), `data` an object, and the
/// fields the message events require. An event of a type it does not know, a line that is not
/// an object, or without a string `type`, it skips; a line that is not JSON it drops, keeping a
/// backup (its "transcript recovery"); neither refuses the file.
fn refusal(ty: &str, env: &Envelope, data: Option<&Data<'_>>) -> Option<&'static str> {
    if !env.id_uuid {
        return Some("`id` must be a UUID string");
    }
    if !env.parent_ok {
        return Some("`parentId` must be a UUID string or null");
    }
    if !env.timestamp_ok {
        return Some("`timestamp` must be an ISO 8601 date-time string with a timezone offset");
    }
    if !env.ephemeral_ok {
        return Some("`ephemeral` must be a boolean");
    }
    let Some(d) = data else { return Some("`data` must be an object") };
    match ty {
        "user.message" if !d.content_string => Some("a user.message needs a string `data.content`"),
        "assistant.message" if !d.content_string => Some("an assistant.message needs a string `data.content`"),
        "assistant.message" if !d.message_id => Some("an assistant.message needs a string `data.messageId`"),
        "assistant.message" if !d.requests_ok => Some("each of `data.toolRequests` needs a string `toolCallId` and `name`"),
        "tool.execution_complete" if d.tool_call_id.is_none() => Some("a tool.execution_complete needs a string `data.toolCallId`"),
        "tool.execution_complete" if d.success.is_none() => Some("a tool.execution_complete needs a boolean `data.success`"),
        "tool.execution_complete" if !d.result_ok => Some("`data.result` needs a string `content`"),
        "tool.execution_complete" if !d.error_ok => Some("`data.error` needs a string `message`"),
        _ => None,
    }
}

/// A hyphenated UUID (`8-4-4-4-12` hex digits, either case).
pub fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36 && b.iter().enumerate().all(|(i, c)| if matches!(i, 8 | 13 | 18 | 23) { *c == b'-' } else { c.is_ascii_hexdigit() })
}

/// An ISO 8601 date-time with a zone, as Copilot's loader reads one (measured):
/// `YYYY-MM-DDTHH:MM`, optional `:SS` and `.fraction`, then `Z` or `±HH:MM` or `±HHMM`; the
/// date must exist and the time be in range. A lowercase `t` or `z`, a space, an hour-only
/// offset or no zone it refuses.
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let d = b.get(r)?;
        d.iter().all(u8::is_ascii_digit).then(|| d.iter().fold(0, |n, c| n * 10 + u32::from(c - b'0')))
    };
    let (Some(year), Some(month), Some(day)) = (num(0..4), num(5..7), num(8..10)) else { return false };
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') || b.get(10) != Some(&b'T') || b.get(13) != Some(&b':') {
        return false;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    let (Some(hour), Some(minute)) = (num(11..13), num(14..16)) else { return false };
    if day == 0 || day > days || hour > 23 || minute > 59 {
        return false;
    }
    let mut i = 16;
    if b.get(i) == Some(&b':') {
        match num(17..19) {
            Some(sec) if sec <= 59 => i = 19,
            _ => return false,
        }
        if b.get(i) == Some(&b'.') {
            let start = i + 1;
            i = start;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == start {
                return false;
            }
        }
    }
    let zone = &b[i..];
    let offset = |h: &[u8], m: &[u8]| {
        let n = |d: &[u8]| d.iter().all(u8::is_ascii_digit).then(|| d.iter().fold(0u32, |n, c| n * 10 + u32::from(c - b'0')));
        matches!((n(h), n(m)), (Some(h), Some(m)) if h <= 23 && m <= 59)
    };
    match zone {
        [b'Z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] | [b'+' | b'-', h1, h2, m1, m2] => offset(&[*h1, *h2], &[*m1, *m2]),
        _ => false,
    }
}

fn read_data<'a>(s: &mut Scanner<'a>) -> scan::Result<Option<Data<'a>>> {
    let mut d = Data { requests_ok: true, result_ok: true, error_ok: true, ..Data::default() };
    let is_object = s.opt_object(|s, k| {
        match &*k.key() {
            b"content" => {
                let c = s.opt_string()?;
                d.content_string = c.is_some();
                d.content = c.is_some_and(|c| !c.is_blank());
            }
            b"messageId" => d.message_id = s.opt_string()?.is_some(),
            b"transformedContent" => d.transformed = s.opt_string()?.is_some_and(|c| !c.is_blank()),
            b"toolRequests" => {
                let null = s.peek() == Some(Kind::Null);
                let mut ok = true;
                let array = s.opt_array(|s| read_request(s, &mut d.calls, &mut ok))?;
                d.requests_ok = null || (array && ok);
            }
            b"result" => d.result_ok = has_string(s, b"content")?,
            b"error" => d.error_ok = has_string(s, b"message")?,
            b"toolCallId" => d.tool_call_id = s.opt_string()?,
            b"parentToolCallId" => d.subagent = s.opt_string()?.is_some(),
            b"success" => {
                d.success = match s.peek() {
                    Some(Kind::Bool) => Some(s.boolean()?),
                    _ => {
                        s.skip()?;
                        None
                    }
                }
            }
            b"usage" => d.usage = read_usage(s)?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok(is_object.then_some(d))
}

/// Whether the next value is `null` or an object with a string member `key` (consumed).
fn has_string(s: &mut Scanner<'_>, key: &[u8]) -> scan::Result<bool> {
    if s.peek() == Some(Kind::Null) {
        s.skip()?;
        return Ok(true);
    }
    let mut found = false;
    let is_object = s.opt_object(|s, k| {
        if &*k.key() == key {
            found = s.opt_string()?.is_some();
        } else {
            s.skip()?;
        }
        Ok(())
    })?;
    Ok(is_object && found)
}

fn read_request<'a>(s: &mut Scanner<'a>, calls: &mut smallvec::SmallVec<[Call<'a>; 1]>, ok: &mut bool) -> scan::Result<()> {
    let (mut id, mut name, mut args) = (None, None, None);
    let is_object = s.opt_object(|s, k| {
        match &*k.key() {
            b"toolCallId" => id = s.opt_string()?,
            b"name" => name = s.opt_string()?,
            b"arguments" => args = s.shape()?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    *ok &= is_object && id.is_some() && name.is_some();
    if let (true, Some(id)) = (is_object, id) {
        let args = match args {
            Some(Kind::Object) | None => Args::Object,
            Some(_) => Args::NotObject,
        };
        calls.push(Call { id: id.decode(), name: name.map(|n| n.decode()).unwrap_or_default(), args, item: None });
    }
    Ok(())
}

/// `session.usage_record`'s `usage`.
fn read_usage<'a>(s: &mut Scanner<'a>) -> scan::Result<Option<(Usage, Option<RawStr<'a>>)>> {
    let mut u = Usage::default();
    let mut model = None;
    let is_object = s.opt_object(|s, k| {
        match &*k.key() {
            b"model" => model = s.opt_string()?,
            b"inputTokens" => u.input = s.opt_count()?,
            b"outputTokens" => u.output = s.opt_count()?,
            b"cacheReadTokens" => u.cache_read = s.opt_count()?,
            b"cacheWriteTokens" => u.cache_creation = s.opt_count()?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok(is_object.then_some((u, model)))
}

// Writing.

/// What a synthetic result copies from the event it follows: its `timestamp`, and the `turnId`
/// and `interactionId` of its data.
pub fn envelope(follows: &[u8]) -> Map<String, Value> {
    let mut env = edit::members(follows, &["timestamp"]);
    if let Some(Value::Object(data)) = edit::members(follows, &["data"]).remove("data") {
        for k in ["turnId", "interactionId"] {
            if let Some(v @ Value::String(_)) = data.get(k) {
                env.insert(k.into(), v.clone());
            }
        }
    }
    env
}

/// A synthetic error result for `call`: a `tool.execution_complete` event with `success: false`
/// and the text as its error, as Copilot writes one for a tool that failed, chained under
/// `parent` with `id` its own.
pub fn synthetic_result_in(env: &Map<String, Value>, call: &CallRef, text: &str, parent: Option<&str>, id: &str) -> Vec<u8> {
    let mut data = Map::new();
    data.insert("toolCallId".into(), json!(call.id));
    for k in ["interactionId", "turnId"] {
        if let Some(v) = env.get(k) {
            data.insert(k.into(), v.clone());
        }
    }
    data.insert("success".into(), json!(false));
    data.insert("error".into(), json!({"message": text}));
    let mut m = Map::new();
    m.insert("type".into(), json!("tool.execution_complete"));
    m.insert("data".into(), Value::Object(data));
    m.insert("id".into(), json!(id));
    m.insert("timestamp".into(), env.get("timestamp").cloned().unwrap_or(Value::Null));
    m.insert("parentId".into(), parent.map_or(Value::Null, |p| json!(p)));
    edit::to_line(&Value::Object(m))
}

/// Removes a result: a `tool.execution_complete` event is its line.
pub fn drop_results(keep_first: bool) -> Result<Edited, edit::Unable> {
    if keep_first {
        Err(edit::Unable("the event holds a single result"))
    } else {
        Ok(Edited::Gone)
    }
}

/// Removes the call `call_id` (an element of `data.toolRequests`), editing only that array;
/// the event goes when it has neither text nor another call left.
pub fn drop_call(line: &[u8], call_id: &str) -> Result<Edited, edit::Unable> {
    let span = edit::value_span(line, &[b"data", b"toolRequests"]).ok_or(edit::Unable("the message has no toolRequests"))?;
    let elems = edit::elements(line, &span).ok_or(edit::Unable("toolRequests is not an array"))?;
    let keep: Vec<bool> = elems.iter().map(|e| !is_request(&line[e.clone()], call_id)).collect();
    if keep.iter().all(|k| *k) {
        return Err(edit::Unable("the line has no such call"));
    }
    let text = edit::members(line, &["data"]).get("data").and_then(|d| d.get("content")).and_then(Value::as_str).is_some_and(|t| !t.trim().is_empty());
    if !keep.iter().any(|k| *k) && !text {
        return Ok(Edited::Gone);
    }
    Ok(Edited::Line(edit::splice(line, &span, &edit::array_of(line, &elems, &keep))))
}

fn is_request(elem: &[u8], call_id: &str) -> bool {
    matches!(edit::object(elem).and_then(|o| o.get("toolCallId").cloned()), Some(Value::String(id)) if id == call_id)
}

// What is sent.

/// The result Copilot CLI 1.0.102 sends on resume for a call that has no recorded result.
pub const INTERRUPTED: &str = "Tool execution was interrupted before a result was recorded. Its effects may be absent, partial, or already complete, and other tools may have completed successfully. Check the current state before retrying; do not assume success or replay this operation blindly.";

/// The user text Copilot CLI 1.0.102 sends on resume for its last successful compaction
/// (measured, tests/integration/oracle.rs): the `summaryContent`, after the `content` of every
/// user message of the main conversation before the compaction, earlier compactions or not.
pub fn summary_text(prompts: &[String], summary: &str) -> String {
    let mut t = String::from(
        "Some of the conversation history has been summarized to free up context.\n\nYou were originally given instructions from a user over one or more turns. Here were the user messages:\n",
    );
    for p in prompts {
        t.push_str("<user_message>\n");
        t.push_str(p);
        t.push_str("\n</user_message>\n");
    }
    t.push_str("\nHere is a summary of the prior context:\n<summary>\n");
    t.push_str(summary);
    t.push_str("\n</summary>");
    t
}

/// The `content` of a `user.message` of the main conversation (what a later compaction's
/// summary lists), else `None`.
pub fn prompt(line: &[u8]) -> Option<String> {
    memchr::memmem::find(line, b"user.message")?;
    let Value::Object(v) = serde_json::from_slice::<Value>(line).ok()? else { return None };
    let Some(Value::Object(d)) = v.get("data") else { return None };
    if v.get("type").and_then(Value::as_str) != Some("user.message") || d.get("parentToolCallId").is_some_and(Value::is_string) {
        return None;
    }
    d.get("content").and_then(Value::as_str).map(str::to_owned)
}

/// The compaction event `line` with its `summaryContent` replaced by the text Copilot sends for
/// it ([`summary_text`]), given the user messages before it: the line context reads in its
/// place. `None` when the line is not a successful compaction.
pub fn summarised(line: &[u8], prompts: &[String]) -> Option<Vec<u8>> {
    let Value::Object(mut v) = serde_json::from_slice::<Value>(line).ok()? else { return None };
    let Some(Value::Object(d)) = v.get_mut("data") else { return None };
    let summary = d.get("summaryContent").and_then(Value::as_str).unwrap_or("").to_owned();
    d.insert("summaryContent".into(), json!(summary_text(prompts, &summary)));
    Some(edit::to_line(&Value::Object(v)))
}

/// What one event is among the messages Copilot sends, in the Anthropic Messages shape it
/// sends them in to an Anthropic provider: a `user.message` a user text, an `assistant.message`
/// its text and `tool_use` blocks, a `tool.execution_complete` a user message with one
/// `tool_result`, a successful compaction its summary as a user text; `None` for the rest.
pub fn record(line: &[u8]) -> Option<Value> {
    let Value::Object(v) = serde_json::from_slice::<Value>(line).ok()? else { return None };
    let Some(Value::Object(d)) = v.get("data") else { return None };
    if d.get("parentToolCallId").is_some_and(Value::is_string) {
        return None;
    }
    let s = |k: &str| d.get(k).and_then(Value::as_str);
    match v.get("type").and_then(Value::as_str)? {
        "user.message" => {
            let text = s("transformedContent").or(s("content")).unwrap_or("");
            Some(json!({"role": "user", "content": [{"type": "text", "text": text}]}))
        }
        "assistant.message" => {
            let mut blocks = Vec::new();
            if let Some(t) = s("content").filter(|t| !t.is_empty()) {
                blocks.push(json!({"type": "text", "text": t}));
            }
            for r in d.get("toolRequests").and_then(Value::as_array).into_iter().flatten() {
                let Some(id) = r.get("toolCallId").and_then(Value::as_str) else { continue };
                blocks.push(json!({"type": "tool_use", "id": id, "name": r.get("name").and_then(Value::as_str).unwrap_or(""),
                                   "input": r.get("arguments").cloned().unwrap_or_else(|| json!({}))}));
            }
            Some(json!({"role": "assistant", "content": blocks}))
        }
        "tool.execution_complete" => {
            let id = s("toolCallId")?;
            let ok = d.get("success").and_then(Value::as_bool) != Some(false);
            let result = d.get("result").and_then(|r| r.get("content")).and_then(Value::as_str);
            let error = d.get("error").and_then(|e| e.get("message")).and_then(Value::as_str);
            let mut block = Map::new();
            block.insert("type".into(), json!("tool_result"));
            block.insert("tool_use_id".into(), json!(id));
            // A failed call's error is sent as its content, not flagged (1.0.102, measured).
            block.insert("content".into(), json!(if ok { result.or(error) } else { error.or(result) }.unwrap_or("")));
            Some(json!({"role": "user", "content": [Value::Object(block)]}))
        }
        "session.compaction_complete" if d.get("success").and_then(Value::as_bool) == Some(true) => {
            Some(json!({"role": "user", "content": [{"type": "text", "text": s("summaryContent").unwrap_or("")}]}))
        }
        _ => None,
    }
}

/// Whether a line is a successful compaction (the history before it is not sent).
pub fn is_compaction(line: &[u8]) -> bool {
    matches!(parse(line).map(|p| p.entry), Ok(Entry::Compaction { .. }))
}

/// The result Copilot CLI 1.0.102 sends on resume for a call still open when the next
/// assistant message or a `session.resume` comes (measured).
pub const INTERRUPTED_BEFORE: &str = "The execution of this tool, or a previous tool was interrupted.";

/// The marker record context reads a `session.resume` event as (for [`transform`] only: it is
/// never printed).
pub fn resume_marker(line: &[u8]) -> Option<&'static [u8]> {
    let is_resume = memchr::memmem::find(line, b"\"session.resume\"").is_some()
        && matches!(serde_json::from_slice::<Value>(line), Ok(Value::Object(v)) if v.get("type").and_then(Value::as_str) == Some("session.resume"));
    is_resume.then_some(b"{\"type\":\"session.resume\"}\n")
}

/// What Copilot does to the messages on resume (1.0.102, measured against it,
/// tests/integration/oracle_copilot.rs): the results of an assistant message's calls are sent
/// right after it, before any user message written while they ran; a call still open when the
/// next assistant message or a `session.resume` ([`resume_marker`]) comes gets
/// [`INTERRUPTED_BEFORE`], and one open at the end of the history [`INTERRUPTED`]; a result
/// for no open call (its call not sent, already closed, or answered) is not sent.
pub fn transform(records: Vec<Value>) -> Vec<Value> {
    struct Open {
        calls: Vec<String>,
        /// Where the next result goes in `out`.
        slot: usize,
    }
    fn result(id: &str, text: &str) -> Value {
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": text}]})
    }
    fn close(out: &mut Vec<Value>, open: &mut Option<Open>, text: &str) {
        if let Some(o) = open.take() {
            for (i, id) in o.calls.iter().enumerate() {
                out.insert(o.slot + i, result(id, text));
            }
        }
    }
    let ids = |r: &Value, ty: &str, key: &str| -> Vec<String> {
        r.get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some(ty))
            .filter_map(|b| b.get(key).and_then(Value::as_str).map(str::to_owned))
            .collect()
    };
    let mut out = Vec::with_capacity(records.len());
    let mut open: Option<Open> = None;
    for r in records {
        let results = ids(&r, "tool_result", "tool_use_id");
        match r.get("role").and_then(Value::as_str) {
            Some("user") if !results.is_empty() => {
                for id in results {
                    let Some(o) = open.as_mut() else { continue };
                    let Some(k) = o.calls.iter().position(|c| *c == id) else { continue };
                    o.calls.remove(k);
                    let block = r["content"].as_array().and_then(|c| c.iter().find(|b| b.get("tool_use_id").and_then(Value::as_str) == Some(&id))).cloned();
                    out.insert(o.slot, json!({"role": "user", "content": [block]}));
                    o.slot += 1;
                }
            }
            Some("assistant") => {
                close(&mut out, &mut open, INTERRUPTED_BEFORE);
                let calls = ids(&r, "tool_use", "id");
                out.push(r);
                if !calls.is_empty() {
                    open = Some(Open { calls, slot: out.len() });
                }
            }
            None if r.get("type").and_then(Value::as_str) == Some("session.resume") => close(&mut out, &mut open, INTERRUPTED_BEFORE),
            _ => out.push(r),
        }
    }
    close(&mut out, &mut open, INTERRUPTED);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(line: &str) -> Message<'_> {
        match parse(line.as_bytes()).unwrap().entry {
            Entry::Message(m) => m,
            e => panic!("not a message: {e:?}"),
        }
    }

    #[test]
    fn the_loaders_timestamps() {
        for ok in [
            "2026-12-03T11:12:53.890Z",
            "2026-12-03T11:12:53Z",
            "2026-12-03T11:12Z",
            "2026-12-03T11:12:53.890+02:00",
            "2026-12-03T11:12:53.890+0200",
            "2024-02-29T00:00:00Z",
        ] {
            assert!(is_timestamp(ok), "{ok}");
        }
        for bad in [
            "2026-12-03T11:12:53.890",
            "2026-12-03t11:12:53.890Z",
            "2026-12-03 11:12:53.890Z",
            "2026-12-03T11:12:53.890z",
            "2026-12-03T11:12:53.890+02",
            "2026-12-03T11:12:53.Z",
            "2026-13-03T11:12:53Z",
            "2026-02-29T00:00:00Z",
        ] {
            assert!(!is_timestamp(bad), "{bad}");
        }
        assert!(is_uuid("5CAA9001-d1df-4e46-9014-7aa6c7254ccf") && !is_uuid("5caa9001d1df4e4690147aa6c7254ccf"));
    }

    #[test]
    fn types_are_sorted() {
        assert!(TYPES.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn call_result_and_usage() {
        let m = msg(
            r#"{"type":"assistant.message","data":{"messageId":"m","content":"x","toolRequests":[{"toolCallId":"c1","name":"bash","arguments":{"command":"ls"},"type":"function"}]},"id":"e2","timestamp":"t","parentId":"e1"}"#,
        );
        assert_eq!((m.calls[0].id.as_ref(), m.calls[0].name.as_ref(), m.calls[0].args), ("c1", "bash", Args::Object));
        let m = msg(
            r#"{"type":"tool.execution_complete","data":{"toolCallId":"c1","success":true,"result":{"content":"ok"}},"id":"e3","timestamp":"t","parentId":"e2"}"#,
        );
        assert_eq!((m.role, m.results[0].id.as_ref()), (Role::Tool, "c1"));
        let p = parse(br#"{"type":"session.usage_record","data":{"usage":{"model":"m1","inputTokens":3,"outputTokens":4,"cacheReadTokens":5,"cacheWriteTokens":6}},"id":"u","timestamp":"t","parentId":null}"#).unwrap();
        let u = p.usage.unwrap();
        assert_eq!((u.input, u.output, u.cache_read, u.cache_creation, p.model.as_deref()), (3, 4, 5, 6, Some("m1")));
        let sub = parse(br#"{"type":"assistant.message","data":{"content":"x","parentToolCallId":"t","toolRequests":[{"toolCallId":"c9","name":"n"}]},"id":"s","parentId":"e"}"#).unwrap();
        assert_eq!(sub.entry, Entry::Other);
        assert_eq!(parse(br#"{"type":"future.event","data":{},"id":"f","parentId":"e"}"#).unwrap().entry, Entry::Unknown);
        assert!(is_compaction(br#"{"type":"session.compaction_complete","data":{"success":true,"summaryContent":"s"},"id":"k","parentId":"e"}"#));
        assert!(!is_compaction(br#"{"type":"session.compaction_complete","data":{"success":false},"id":"k","parentId":"e"}"#));
    }

    #[test]
    fn synthetic_result_reads_back_and_drop_call() {
        let follows = br#"{"type":"tool.execution_start","data":{"toolCallId":"c1","turnId":"0","interactionId":"i"},"id":"e","timestamp":"2026-01-01T00:00:00.000Z","parentId":"d"}"#;
        let call = CallRef { id: "c1".into(), tool: "bash".into(), item: None };
        let line = synthetic_result_in(&envelope(follows), &call, "not run", Some("e"), "n1");
        let m = msg(std::str::from_utf8(&line).unwrap());
        assert_eq!(m.results[0].id, "c1");
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!((v["parentId"].as_str(), v["data"]["turnId"].as_str(), v["data"]["success"].as_bool()), (Some("e"), Some("0"), Some(false)));
        let two =
            br#"{"type":"assistant.message","data":{"content":"","toolRequests":[{"toolCallId":"c1","name":"a"},{"toolCallId":"c2","name":"b"}]},"id":"a"}"#;
        assert_eq!(
            drop_call(two, "c1"),
            Ok(Edited::Line(br#"{"type":"assistant.message","data":{"content":"","toolRequests":[{"toolCallId":"c2","name":"b"}]},"id":"a"}"#.to_vec()))
        );
        let one = br#"{"type":"assistant.message","data":{"content":"","toolRequests":[{"toolCallId":"c1","name":"a"}]},"id":"a"}"#;
        assert_eq!(drop_call(one, "c1"), Ok(Edited::Gone));
        assert!(drop_call(one, "zz").is_err());
    }

    #[test]
    fn open_calls_get_the_interrupted_result() {
        let out = transform(vec![
            json!({"role": "user", "content": [{"type": "text", "text": "go"}]}),
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "bash", "input": {}}]}),
        ]);
        assert_eq!(out.len(), 3);
        assert_eq!(out[2]["content"][0]["content"], INTERRUPTED);
    }

    #[test]
    fn results_follow_their_call_and_a_resume_or_the_next_answer_closes_the_open_ones() {
        let call = |id: &str| json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "bash", "input": {}}]});
        let res = |id: &str| json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "ok"}]});
        let text = |t: &str| json!({"role": "user", "content": [{"type": "text", "text": t}]});
        let resume = json!({"type": "session.resume"});
        // A prompt written while the tool ran comes after its result.
        let out = transform(vec![call("c1"), text("p"), res("c1")]);
        assert_eq!(out, vec![call("c1"), res("c1"), text("p")]);
        // A resume closes the open call; its late result and a result of no call are not sent.
        let out = transform(vec![call("c1"), resume.clone(), res("c1"), res("c9"), text("p")]);
        assert_eq!(out.len(), 3);
        assert_eq!(out[1]["content"][0]["content"], INTERRUPTED_BEFORE);
        // So does the next assistant message.
        let out = transform(vec![call("c1"), call("c2")]);
        assert_eq!((out[1]["content"][0]["content"].as_str(), out[3]["content"][0]["content"].as_str()), (Some(INTERRUPTED_BEFORE), Some(INTERRUPTED)));
    }
}
