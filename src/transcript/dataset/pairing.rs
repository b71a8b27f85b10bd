//! The canonical pairing rules of [`Validator`](crate::transcript::pairing::validator::Validator),
//! for one conversation of a dataset line.
//!
//! A conversation is one thread with no compaction, no rewind and no turn keys, so of the
//! validator's state only three things matter: the pending calls, the calls answered since the
//! conversation last moved on, and whether an assistant turn came since the last user turn. Ids
//! are borrowed from the conversation's messages (no `String` per call), and a conversation's
//! few ids are kept in a small inline list, looked up by comparison (a hash map takes over past
//! [`FEW`] ids, so a line with a million calls stays linear).
//!
//! The findings are the validator's, in the same order, made by the same functions; empty
//! assistant turns are left out (the dataset rules report blank content themselves). A property
//! test holds it to the validator on random conversations.

use crate::transcript::finding::Finding;
use crate::transcript::model::{Message, Role};
use crate::transcript::pairing::validator::{consecutive_assistant, duplicate_call_id, invalid_arguments, orphan_call, unanswered_call, unmatched_result};
use crate::transcript::Map;
use smallvec::SmallVec;

/// Ids kept in the inline list before a hash map takes over.
const FEW: usize = 16;

/// A map keyed by borrowed ids: a short list while it is short, a hash map after.
#[derive(Debug)]
enum Ids<'m, V> {
    Few(SmallVec<[(&'m str, V); 8]>),
    Many(Map<&'m str, V>),
}

impl<'m, V> Default for Ids<'m, V> {
    fn default() -> Self {
        Ids::Few(SmallVec::new())
    }
}

impl<'m, V> Ids<'m, V> {
    fn is_empty(&self) -> bool {
        match self {
            Ids::Few(v) => v.is_empty(),
            Ids::Many(m) => m.is_empty(),
        }
    }

    fn contains(&self, id: &str) -> bool {
        match self {
            Ids::Few(v) => v.iter().any(|(k, _)| *k == id),
            Ids::Many(m) => m.contains_key(id),
        }
    }

    /// Inserts an id that is not in the map.
    fn insert_new(&mut self, id: &'m str, value: V) {
        match self {
            Ids::Few(v) if v.len() < FEW => v.push((id, value)),
            Ids::Few(v) => {
                let mut m: Map<&'m str, V> = v.drain(..).collect();
                m.insert(id, value);
                *self = Ids::Many(m);
            }
            Ids::Many(m) => drop(m.insert(id, value)),
        }
    }

    fn remove(&mut self, id: &str) -> Option<V> {
        match self {
            Ids::Few(v) => v.iter().position(|(k, _)| *k == id).map(|i| v.swap_remove(i).1),
            Ids::Many(m) => m.remove(id),
        }
    }

    fn clear(&mut self) {
        *self = Ids::default();
    }

    /// Empties the map, returning its entries.
    fn take(&mut self) -> Vec<(&'m str, V)> {
        match std::mem::take(self) {
            Ids::Few(v) => v.into_vec(),
            Ids::Many(m) => m.into_iter().collect(),
        }
    }
}

/// The pairing state of one conversation. Calling order: [`Pairs::push`] each message with its
/// index, [`Pairs::moved_on`] where the dataset rules end an exchange, then [`Pairs::finish`].
#[derive(Debug, Default)]
pub(super) struct Pairs<'m> {
    /// Responses API items (the Codex rules): a turn may hold many assistant items in a row,
    /// and a user prompt moves the conversation on.
    codex: bool,
    /// Pending calls: id → (index of the call's message, tool name).
    pending: Ids<'m, (u64, &'m str)>,
    /// Calls answered since the conversation last moved on.
    answered: Ids<'m, ()>,
    assistant_since_user: bool,
}

impl<'m> Pairs<'m> {
    /// The state at the start of a conversation; `codex` for Responses API items.
    pub(super) fn new(codex: bool) -> Self {
        Pairs { codex, ..Pairs::default() }
    }

    /// Whether any call waits for a result.
    pub(super) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Feeds message `at`.
    pub(super) fn push(&mut self, at: u64, m: &'m Message<'_>, out: &mut Vec<Finding>) {
        match m.role {
            Role::Assistant => {
                if !self.codex {
                    if self.assistant_since_user {
                        out.push(consecutive_assistant(at));
                    }
                    self.moved_on(at, out);
                }
                self.assistant_since_user = true;
                for c in &m.calls {
                    if let Some(f) = invalid_arguments(at, c) {
                        out.push(f);
                    }
                    if self.pending.contains(&c.id) || self.answered.contains(&c.id) {
                        out.push(duplicate_call_id(at, c));
                        continue;
                    }
                    self.pending.insert_new(&c.id, (at, &c.name));
                }
            }
            Role::User | Role::Tool => {
                for r in &m.results {
                    if self.pending.remove(&r.id).is_some() {
                        if !self.answered.contains(&r.id) {
                            self.answered.insert_new(&r.id, ());
                        }
                        continue;
                    }
                    out.push(unmatched_result(at, &r.id, self.answered.contains(&r.id)));
                }
                self.assistant_since_user = false;
                if self.codex && m.prompt {
                    self.moved_on(at, out);
                }
            }
            Role::System | Role::Developer => self.assistant_since_user = false,
        }
    }

    /// The conversation moved on at message `at`: calls still pending are unanswered.
    pub(super) fn moved_on(&mut self, at: u64, out: &mut Vec<Finding>) {
        if !self.pending.is_empty() {
            for (id, (line, name)) in self.sorted_pending() {
                out.push(unanswered_call(line, id, name, at));
            }
        }
        self.answered.clear();
    }

    /// The end of the conversation: calls still pending are orphans.
    pub(super) fn finish(mut self, out: &mut Vec<Finding>) {
        if self.pending.is_empty() {
            return;
        }
        for (id, (line, name)) in self.sorted_pending() {
            out.push(orphan_call(line, id, name));
        }
    }

    /// Takes the pending calls, in the validator's order: by message, then id.
    fn sorted_pending(&mut self) -> Vec<(&'m str, (u64, &'m str))> {
        let mut v = self.pending.take();
        v.sort_by(|a, b| (a.1 .0, a.0).cmp(&(b.1 .0, b.0)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::finding::{Kind, Output};
    use crate::transcript::formats::Format;
    use crate::transcript::model::{Args, Call, Entry, Parsed, ToolResult};
    use crate::transcript::pairing::validator::Validator;
    use proptest::prelude::*;

    /// One message of a random conversation: role, call ids, result ids, prompt.
    fn message() -> impl Strategy<Value = Message<'static>> {
        let id = || (0u8..12).prop_map(|k| format!("c{k}"));
        let role = prop_oneof![Just(Role::User), Just(Role::Assistant), Just(Role::Tool), Just(Role::System), Just(Role::Developer)];
        let args = prop_oneof![4 => Just(Args::Object), 1 => Just(Args::NotObject), 1 => Just(Args::Unparseable)];
        (role, prop::collection::vec((id(), args, 0u8..3), 0..4), prop::collection::vec(id(), 0..3), any::<bool>(), any::<bool>()).prop_map(
            |(role, calls, results, prompt, has_content)| {
                let mut m = Message::new(role);
                m.prompt = prompt && role == Role::User;
                m.has_content = has_content;
                if role == Role::Assistant {
                    m.calls = calls.into_iter().map(|(id, args, n)| Call { id: id.into(), name: format!("f{n}").into(), args, item: None }).collect();
                }
                if matches!(role, Role::User | Role::Tool) {
                    m.results = results.into_iter().map(|id| ToolResult { id: id.into() }).collect();
                }
                m
            },
        )
    }

    /// The findings of the validator itself on `messages`, fed as the dataset stage fed it
    /// (a prompt ends the exchange in chat pairings), empty turns left out.
    fn by_validator(format: Format, messages: &[Message<'static>]) -> Vec<Finding> {
        let mut v = Validator::new(format);
        let mut found = Vec::new();
        let mut out = |o: Output| {
            if let Output::Finding(f) = o {
                found.push(f);
            }
        };
        for (i, m) in messages.iter().enumerate() {
            let at = i as u64;
            if m.role == Role::User && m.prompt && format != Format::Codex && v.has_pending() {
                v.moved_on(at, crate::transcript::model::MAIN_THREAD, &mut out);
            }
            v.push(at, &Parsed::of(Entry::Message(m.clone())), &mut out);
        }
        v.finish(&mut out);
        found.retain(|f| f.kind != Kind::EmptyAssistantTurn);
        found
    }

    fn by_pairs(codex: bool, messages: &[Message<'static>]) -> Vec<Finding> {
        let mut p = Pairs::new(codex);
        let mut found = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            let at = i as u64;
            if m.role == Role::User && m.prompt && !codex && p.has_pending() {
                p.moved_on(at, &mut found);
            }
            p.push(at, m, &mut found);
        }
        p.finish(&mut found);
        found
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn the_same_findings_as_the_validator(messages in prop::collection::vec(message(), 0..24)) {
            for format in [Format::OpenAiChat, Format::Anthropic, Format::Codex] {
                prop_assert_eq!(by_pairs(format == Format::Codex, &messages), by_validator(format, &messages), "{:?}", format);
            }
        }
    }

    /// Past [`FEW`] ids the hash map takes over, with the same findings.
    #[test]
    fn many_calls_in_one_conversation() {
        let mut messages = vec![Message::new(Role::User)];
        let mut a = Message::new(Role::Assistant);
        a.calls = (0..100).map(|k| Call { id: format!("c{}", k % 90).into(), name: "f".into(), args: Args::Object, item: None }).collect();
        messages.push(a);
        let mut t = Message::new(Role::Tool);
        t.results = (0..95).rev().map(|k| ToolResult { id: format!("c{k}").into() }).collect();
        messages.push(t);
        messages.push(Message::new(Role::Assistant));
        messages.push(Message::new(Role::Assistant));
        for format in [Format::OpenAiChat, Format::Anthropic, Format::Codex] {
            let found = by_pairs(format == Format::Codex, &messages);
            assert_eq!(found, by_validator(format, &messages));
            assert!(found.iter().any(|f| f.kind == Kind::DuplicateCallId) && found.iter().any(|f| f.kind == Kind::OrphanResult));
        }
    }
}
