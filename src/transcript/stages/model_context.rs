//! The Codex compaction cut: [`ModelContextScan`], the seed-001 rules for how much of a rollout
//! resuming needs.
//!
//! A Codex rollout keeps every item of a session; a `compacted` item carries the
//! `replacement_history` that replaces the model-visible items before it. Resuming therefore
//! needs only a suffix of the file, but *which* suffix has rules: the compaction restores the
//! model-visible items, and the newest completed user turn's `turn_context` restores the
//! previous settings (model, `comp_hash`, `realtime_active`) and the reference baseline. The scan
//! is fed items newest to oldest and says when it holds both:
//!
//! - a `compacted` item with both `replacement_history` and `window_number`;
//! - a completed user turn with a compatible `turn_context`. Walking backwards, a turn is the run
//!   of items since the newest `task_complete` / `turn_aborted` (which names its `turn_id`) back
//!   to its `task_started`. At the `task_started` the turn counts when it held a `turn_context`
//!   and a user-turn proof, both with a compatible `turn_id` (equal, or either absent). Proofs
//!   are what paginated writers persist for real user turns: an `event_msg` `user_message`, an
//!   `item_completed` whose item is a `UserMessage`, an inter-agent message (an
//!   `inter_agent_communication` line, or an assistant `message` whose only text part is one),
//!   or an `agent_message` response item. A raw `role: "user"` response item is *not* a proof:
//!   contextual fragments (AGENTS.md, environment context) use that role too.
//!
//! A compaction missing either field, or a rollback marker (`event_msg` `thread_rolled_back`),
//! disables the bounded cutoff: the scan goes on to the beginning and returns the full replay.
//! So does a rollout that simply has no usable compaction. The real compaction in the fixtures
//! (Codex 0.104) has a `replacement_history` but no `window_number`: full replay is the right
//! answer there.
//!
//! The scan never sees a file: a local reverse-paged reader feeds it today, an object store may
//! tomorrow. Calling order: [`ModelContextScan::push`] items newest first until it returns
//! [`Progress::Complete`] or the source is exhausted, then [`ModelContextScan::finish`] once with
//! the rollout's head `session_meta`, which comes first in the result after a bounded cutoff.

use crate::transcript::progress::Progress;
use crate::transcript::reverse::LineBytes;
use crate::transcript::scan::{self, object_line, RawStr, Scanner};

/// What one rollout line means to the cutoff rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemKind {
    /// `session_meta`.
    SessionMeta,
    /// `response_item`; `proves_user_turn` for an `agent_message` item or an assistant message
    /// that carries an inter-agent message.
    ResponseItem {
        /// Whether it proves a user turn.
        proves_user_turn: bool,
    },
    /// `inter_agent_communication`: a user-turn proof.
    InterAgentCommunication,
    /// `compacted`, and whether the fields a bounded cutoff needs are present.
    Compacted {
        /// `replacement_history` is an array.
        replacement_history: bool,
        /// `window_number` is an unsigned integer.
        window_number: bool,
    },
    /// `turn_context`.
    TurnContext {
        /// Its `turn_id`, when present.
        turn_id: Option<String>,
    },
    /// `event_msg` `task_started` (or `turn_started`).
    TurnStarted {
        /// The turn.
        turn_id: String,
    },
    /// `event_msg` `task_complete` (or `turn_complete`).
    TurnComplete {
        /// The turn.
        turn_id: String,
    },
    /// `event_msg` `turn_aborted`.
    TurnAborted {
        /// The turn, when named.
        turn_id: Option<String>,
    },
    /// `event_msg` `item_completed`.
    ItemCompleted {
        /// The turn.
        turn_id: String,
        /// The item is a `UserMessage`: a user-turn proof.
        user_message: bool,
    },
    /// `event_msg` `user_message`: a user-turn proof.
    UserMessage,
    /// `event_msg` `thread_rolled_back`: disables the bounded cutoff.
    ThreadRolledBack,
    /// Anything else: other events, `world_state`, legacy-layout lines, unknown types. An event
    /// without the `turn_id` Codex requires of it is one too (Codex cannot read it either).
    Other,
    /// Not a JSON object (or not UTF-8); kept for the raw output, no effect on the rules.
    Unreadable,
}

impl ItemKind {
    /// Reads what a rollout line means. Never fails: a line that cannot be read is
    /// [`ItemKind::Unreadable`], a field of an unexpected shape is absent.
    pub fn of(line: &[u8]) -> ItemKind {
        if simdutf8::basic::from_utf8(line).is_err() {
            return ItemKind::Unreadable;
        }
        let mut ty = None;
        let mut payload = Payload::default();
        let read = object_line(line, |s, k| {
            match &*k.key() {
                b"type" => ty = s.opt_string()?,
                b"payload" => payload = read_payload(s)?,
                _ => s.skip()?,
            }
            Ok(())
        });
        if read.is_err() {
            return ItemKind::Unreadable;
        }
        let Some(ty) = ty else { return ItemKind::Other };
        match &*ty.key() {
            b"session_meta" => ItemKind::SessionMeta,
            b"response_item" => ItemKind::ResponseItem { proves_user_turn: payload.proves_user_turn() },
            b"inter_agent_communication" => ItemKind::InterAgentCommunication,
            b"compacted" => ItemKind::Compacted { replacement_history: payload.replacement_history, window_number: payload.window_number },
            b"turn_context" => ItemKind::TurnContext { turn_id: payload.turn_id },
            b"event_msg" => payload.event(),
            _ => ItemKind::Other,
        }
    }
}

/// The payload fields the rules read, from any payload shape.
#[derive(Default)]
struct Payload {
    ty: Option<String>,
    role: Option<String>,
    turn_id: Option<String>,
    replacement_history: bool,
    window_number: bool,
    /// `item.type` of an `item_completed` event.
    item_type: Option<String>,
    /// The text of the only content part, when the content is exactly one text part.
    only_text: Option<String>,
}

fn read_payload(s: &mut Scanner<'_>) -> scan::Result<Payload> {
    let mut p = Payload::default();
    let decode = |r: Option<RawStr<'_>>| r.map(|r| r.decode().into_owned());
    s.opt_object(|s, k| {
        match &*k.key() {
            b"type" => p.ty = decode(s.opt_string()?),
            b"role" => p.role = decode(s.opt_string()?),
            b"turn_id" => p.turn_id = decode(s.opt_string()?),
            b"replacement_history" => p.replacement_history = s.opt_array(|s| s.skip())?,
            // Codex reads it as an unsigned integer.
            b"window_number" if s.peek() == Some(scan::Kind::Number) => p.window_number = s.number()?.iter().all(u8::is_ascii_digit),
            b"item" => {
                s.opt_object(|s, k| {
                    match &*k.key() {
                        b"type" => p.item_type = decode(s.opt_string()?),
                        _ => s.skip()?,
                    }
                    Ok(())
                })?;
            }
            b"content" => p.only_text = read_only_text(s)?,
            _ => s.skip()?,
        }
        Ok(())
    })?;
    Ok(p)
}

/// The text of message content made of exactly one `input_text` / `output_text` part.
fn read_only_text(s: &mut Scanner<'_>) -> scan::Result<Option<String>> {
    let mut parts = 0;
    let mut text = None;
    s.opt_array(|s| {
        parts += 1;
        let (mut ty, mut t) = (None, None);
        s.opt_object(|s, k| {
            match &*k.key() {
                b"type" => ty = s.opt_string()?,
                b"text" => t = s.opt_string()?,
                _ => s.skip()?,
            }
            Ok(())
        })?;
        if ty.is_some_and(|ty| ty.is("input_text") || ty.is("output_text")) {
            text = t.map(|t| t.decode().into_owned());
        }
        Ok(())
    })?;
    Ok(if parts == 1 { text } else { None })
}

impl Payload {
    fn is(&self, field: &Option<String>, value: &str) -> bool {
        field.as_deref() == Some(value)
    }

    fn proves_user_turn(&self) -> bool {
        match self.ty.as_deref() {
            Some("agent_message") => true,
            Some("message") => self.is(&self.role, "assistant") && self.only_text.as_deref().is_some_and(is_inter_agent_message),
            _ => false,
        }
    }

    fn event(self) -> ItemKind {
        let turn_id = self.turn_id;
        match (self.ty.as_deref(), turn_id) {
            (Some("task_started" | "turn_started"), Some(turn_id)) => ItemKind::TurnStarted { turn_id },
            (Some("task_complete" | "turn_complete"), Some(turn_id)) => ItemKind::TurnComplete { turn_id },
            (Some("turn_aborted"), turn_id) => ItemKind::TurnAborted { turn_id },
            (Some("item_completed"), Some(turn_id)) => ItemKind::ItemCompleted { turn_id, user_message: self.item_type.as_deref() == Some("UserMessage") },
            (Some("user_message"), _) => ItemKind::UserMessage,
            (Some("thread_rolled_back"), _) => ItemKind::ThreadRolledBack,
            _ => ItemKind::Other,
        }
    }
}

/// Whether message text is a serialized inter-agent message: a JSON object with the agent
/// paths `author` and `recipient`, a string `content` and a boolean `trigger_turn` (and, if
/// present, an array of agent paths `other_recipients`).
fn is_inter_agent_message(text: &str) -> bool {
    let Ok(serde_json::Value::Object(o)) = serde_json::from_str::<serde_json::Value>(text) else { return false };
    let path = |v: &serde_json::Value| v.as_str().is_some_and(|p| p.starts_with('/'));
    o.get("author").is_some_and(path)
        && o.get("recipient").is_some_and(path)
        && o.get("content").is_some_and(|c| c.is_string())
        && o.get("trigger_turn").is_some_and(|t| t.is_boolean())
        && o.get("other_recipients").is_none_or(|r| r.as_array().is_some_and(|a| a.iter().all(path)))
}

/// One rollout line fed to the scan: where it is, its bytes (for the raw output and the
/// canonical items) and what it means to the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutItem {
    /// Stream offset of the line.
    pub offset: u64,
    /// The line, without its terminator.
    pub bytes: LineBytes,
    /// Its meaning.
    pub kind: ItemKind,
}

impl RolloutItem {
    /// Reads (and copies) the line at `offset`.
    pub fn read(offset: u64, bytes: &[u8]) -> Self {
        RolloutItem { offset, bytes: LineBytes::copy(bytes), kind: ItemKind::of(bytes) }
    }
}

/// The turn being walked (backwards) since the last turn boundary.
#[derive(Debug, Default)]
struct Segment {
    turn_id: Option<String>,
    has_user_turn: bool,
    has_turn_context: bool,
}

impl Segment {
    /// Equal turn ids, or either absent.
    fn compatible(&self, other: Option<&str>) -> bool {
        match (self.turn_id.as_deref(), other) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        }
    }

    fn adopt(&mut self, turn_id: &str) {
        self.turn_id.get_or_insert_with(|| turn_id.to_owned());
    }
}

/// Accumulates rollout items newest to oldest until they suffice to rebuild the latest model
/// context. See the module docs for the rules and the calling order.
#[derive(Debug, Default)]
pub struct ModelContextScan {
    newest_first: Vec<RolloutItem>,
    saw_compaction: bool,
    saw_completed_turn_context: bool,
    must_scan_to_start: bool,
    segment: Segment,
}

impl ModelContextScan {
    /// A scan that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the next item, newest to oldest, and says whether the reader can stop.
    pub fn push(&mut self, item: RolloutItem) -> Progress {
        let progress = self.observe(&item.kind);
        self.newest_first.push(item);
        progress
    }

    /// Whether [`ModelContextScan::finish`] will return a bounded suffix (not the full replay).
    pub fn is_bounded(&self) -> bool {
        !self.must_scan_to_start && self.saw_compaction && self.saw_completed_turn_context
    }

    /// The collected items in chronological order. After a bounded cutoff the rollout's head
    /// `session_meta` (read separately by the caller, and canonical even when copied fork
    /// history holds later metadata) comes first; `None` only when the source has none. Call
    /// after [`ModelContextScan::push`] returned [`Progress::Complete`] or the source ran out.
    pub fn finish(self, session_meta: Option<RolloutItem>) -> Vec<RolloutItem> {
        let bounded = self.is_bounded();
        let mut items = self.newest_first;
        items.reverse();
        if let (true, Some(meta)) = (bounded, session_meta) {
            items.insert(0, meta);
        }
        items
    }

    fn observe(&mut self, kind: &ItemKind) -> Progress {
        if self.must_scan_to_start {
            return Progress::NeedMore;
        }
        let seg = &mut self.segment;
        match kind {
            ItemKind::Compacted { replacement_history: true, window_number: true } => self.saw_compaction = true,
            ItemKind::Compacted { .. } | ItemKind::ThreadRolledBack => self.must_scan_to_start = true,
            ItemKind::ItemCompleted { turn_id, user_message } => {
                seg.adopt(turn_id);
                if seg.compatible(Some(turn_id)) {
                    seg.has_user_turn |= *user_message;
                }
            }
            ItemKind::TurnComplete { turn_id } | ItemKind::TurnAborted { turn_id: Some(turn_id) } => seg.adopt(turn_id),
            ItemKind::TurnStarted { turn_id } => {
                if seg.compatible(Some(turn_id)) {
                    if seg.has_user_turn && seg.has_turn_context {
                        self.saw_completed_turn_context = true;
                    }
                    self.segment = Segment::default();
                }
            }
            ItemKind::TurnContext { turn_id } => {
                if seg.turn_id.is_none() {
                    seg.turn_id = turn_id.clone();
                }
                if seg.compatible(turn_id.as_deref()) {
                    seg.has_turn_context = true;
                }
            }
            ItemKind::ResponseItem { proves_user_turn } => seg.has_user_turn |= *proves_user_turn,
            ItemKind::InterAgentCommunication | ItemKind::UserMessage => seg.has_user_turn = true,
            ItemKind::TurnAborted { turn_id: None } | ItemKind::SessionMeta | ItemKind::Other | ItemKind::Unreadable => {}
        }
        if self.is_bounded() {
            Progress::Complete
        } else {
            Progress::NeedMore
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(line: &str) -> ItemKind {
        ItemKind::of(line.as_bytes())
    }

    #[test]
    fn reads_what_the_rules_need() {
        assert_eq!(kind(r#"{"timestamp":"t","type":"session_meta","payload":{"id":"x"}}"#), ItemKind::SessionMeta);
        assert_eq!(
            kind(r#"{"type":"compacted","payload":{"message":"","replacement_history":[],"window_number":2}}"#),
            ItemKind::Compacted { replacement_history: true, window_number: true }
        );
        assert_eq!(
            kind(r#"{"type":"compacted","payload":{"message":"","replacement_history":null,"window_number":null}}"#),
            ItemKind::Compacted { replacement_history: false, window_number: false }
        );
        assert_eq!(
            kind(r#"{"type":"compacted","payload":{"replacement_history":[],"window_number":-1}}"#),
            ItemKind::Compacted { replacement_history: true, window_number: false }
        );
        assert_eq!(kind(r#"{"type":"event_msg","payload":{"type":"turn_started","turn_id":"t1"}}"#), ItemKind::TurnStarted { turn_id: "t1".into() });
        assert_eq!(kind(r#"{"type":"event_msg","payload":{"type":"task_complete"}}"#), ItemKind::Other);
        assert_eq!(kind(r#"{"type":"event_msg","payload":{"type":"turn_aborted","reason":"interrupted"}}"#), ItemKind::TurnAborted { turn_id: None });
        assert_eq!(
            kind(
                r#"{"type":"event_msg","payload":{"type":"item_completed","thread_id":"x","turn_id":"t","item":{"type":"UserMessage","id":"i","content":[]}}}"#
            ),
            ItemKind::ItemCompleted { turn_id: "t".into(), user_message: true }
        );
        assert_eq!(kind(r#"{"type":"turn_context","payload":{"cwd":"/","model":"m"}}"#), ItemKind::TurnContext { turn_id: None });
        assert_eq!(
            kind(r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#),
            ItemKind::ResponseItem { proves_user_turn: false }
        );
        assert_eq!(
            kind(r#"{"type":"response_item","payload":{"type":"agent_message","author":"/root/a","content":[]}}"#),
            ItemKind::ResponseItem { proves_user_turn: true }
        );
        assert_eq!(kind("{not json"), ItemKind::Unreadable);
        assert_eq!(kind(r#"{"record_type":"state"}"#), ItemKind::Other);
    }

    #[test]
    fn inter_agent_message_content() {
        let msg = |text: &str| {
            let text = serde_json::to_string(text).unwrap();
            format!(r#"{{"type":"response_item","payload":{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":{text}}}]}}}}"#)
        };
        let proof = ItemKind::ResponseItem { proves_user_turn: true };
        assert_eq!(kind(&msg(r#"{"author":"/root/w","recipient":"/root","content":"done","trigger_turn":false}"#)), proof);
        assert_eq!(kind(&msg(r#"{"author":"/root/w","recipient":"/root","other_recipients":["/root/x"],"content":"c","trigger_turn":true}"#)), proof);
        let plain = ItemKind::ResponseItem { proves_user_turn: false };
        assert_eq!(kind(&msg("All tests pass.")), plain);
        assert_eq!(kind(&msg(r#"{"author":"/root/w","recipient":"/root","content":"done"}"#)), plain);
        assert_eq!(kind(&msg(r#"{"author":"w","recipient":"/root","content":"done","trigger_turn":false}"#)), plain);
    }
}
