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
    transformed: bool,
    calls: smallvec::SmallVec<[Call<'a>; 1]>,
    tool_call_id: Option<RawStr<'a>>,
    /// `parentToolCallId`: the event belongs to a subagent's conversation.
    subagent: bool,
    success: Option<bool>,
    usage: Option<(Usage, Option<RawStr<'a>>)>,
}

/// Parses one line (valid UTF-8, not blank). `Err` means the line is not a JSON object.
pub fn parse(line: &[u8]) -> scan::Result<Parsed<'_>> {
    let (mut ty, mut id, mut parent) = (None, None, None);
    let mut data: Option<Data<'_>> = None;
    object_line(line, |s, k| {
        match &*k.key() {
            b"type" => ty = s.opt_string()?,
            b"id" => id = s.opt_string()?,
            b"parentId" => parent = s.opt_string()?,
            b"data" => data = read_data(s)?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    let ty = ty.map(|t| t.decode()).unwrap_or_default();
    let node = id.map(|i| Node { id: i.hash(), parent: parent.map(|p| p.hash()), sidechain: false });
    let of = |entry| Parsed { node, ..Parsed::of(entry) };
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
        "session.compaction_complete" if data.success == Some(true) => Entry::Compaction { carried: Vec::new(), keeps: None },
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

fn read_data<'a>(s: &mut Scanner<'a>) -> scan::Result<Option<Data<'a>>> {
    let mut d = Data::default();
    let is_object = s.opt_object(|s, k| {
        match &*k.key() {
            b"content" => d.content = s.opt_string()?.is_some_and(|c| !c.is_blank()),
            b"transformedContent" => d.transformed = s.opt_string()?.is_some_and(|c| !c.is_blank()),
            b"toolRequests" => {
                s.opt_array(|s| read_request(s, &mut d.calls))?;
            }
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

fn read_request<'a>(s: &mut Scanner<'a>, calls: &mut smallvec::SmallVec<[Call<'a>; 1]>) -> scan::Result<()> {
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

/// The user text Copilot sends for a compaction's summary (its `summaryContent`).
fn summary_text(summary: &str) -> String {
    summary.to_owned()
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
            Some(json!({"role": "user", "content": [{"type": "text", "text": summary_text(s("summaryContent").unwrap_or(""))}]}))
        }
        _ => None,
    }
}

/// Whether a line is a successful compaction (the history before it is not sent).
pub fn is_compaction(line: &[u8]) -> bool {
    matches!(parse(line).map(|p| p.entry), Ok(Entry::Compaction { .. }))
}

/// What Copilot does to the messages on resume (1.0.102, measured): a call that has no result
/// by the time the next assistant or user message comes, or by the end of the history (the new
/// prompt comes next), gets the result [`INTERRUPTED`] there.
pub fn transform(records: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::with_capacity(records.len());
    let mut pending: Vec<String> = Vec::new();
    let mut answered: std::collections::HashSet<String> = std::collections::HashSet::new();
    let flush = |out: &mut Vec<Value>, pending: &mut Vec<String>, answered: &mut std::collections::HashSet<String>| {
        for id in pending.drain(..) {
            if !answered.contains(&id) {
                out.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": INTERRUPTED}]}));
            }
        }
        answered.clear();
    };
    for r in records {
        let results: Vec<String> = r
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            .filter_map(|b| b.get("tool_use_id").and_then(Value::as_str).map(str::to_owned))
            .collect();
        match r.get("role").and_then(Value::as_str) {
            Some("user") if !results.is_empty() => {
                answered.extend(results);
                out.push(r);
            }
            Some("assistant") | Some("user") => {
                flush(&mut out, &mut pending, &mut answered);
                let calls: Vec<String> = r
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                    .filter_map(|b| b.get("id").and_then(Value::as_str).map(str::to_owned))
                    .collect();
                pending = calls;
                out.push(r);
            }
            _ => out.push(r),
        }
    }
    flush(&mut out, &mut pending, &mut answered);
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
}
