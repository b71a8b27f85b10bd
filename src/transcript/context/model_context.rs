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

use crate::transcript::formats::codex::ItemKind;
use crate::transcript::progress::Progress;
use crate::transcript::reverse::LineBytes;

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
