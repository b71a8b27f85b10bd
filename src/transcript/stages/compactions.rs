//! The `compaction` stage.

use crate::transcript::pipeline::{Event, Input, Pairing, Stage};

/// The compaction stage: a `compaction` event for each compaction boundary.
#[derive(Debug, Default)]
pub struct Compactions;

impl Stage for Compactions {
    fn name(&self) -> &'static str {
        "compaction"
    }

    fn input(&mut self, input: &Input<'_, '_>, _pairing: &Pairing, events: &mut Vec<Event>) {
        if let Input::Entry { number, parsed, .. } = input {
            if matches!(parsed.entry, crate::transcript::model::Entry::Compaction { .. }) {
                events.push(Event::Compaction { line: *number });
            }
        }
    }
}
