//! The repair planner as a pipeline stage (`repair_plan`, placed after `validate` in the
//! repair's preset list, `repair_run::plan_pipeline`): the findings of the stages before it and
//! the entries go to the [`Planner`], whose machine lives in [`crate::transcript::repair::plan`].

use crate::transcript::formats::Format;
use crate::transcript::pipeline::{Event, Input, Pairing, Stage};
use crate::transcript::repair::plan::Planner;

/// The outputs among `events`, in order.
fn outputs(events: &[Event]) -> impl Iterator<Item = &crate::transcript::finding::Output> {
    events.iter().filter_map(|e| match e {
        Event::Output(o) => Some(o),
        _ => None,
    })
}

impl Stage for Planner {
    fn name(&self) -> &'static str {
        "repair_plan"
    }

    fn format(&mut self, format: Format) {
        self.set_format(format);
    }

    fn detecting(&mut self, number: u64) {
        self.detected_through = number;
    }

    /// The findings the stages before made of the input come first (a line's own results are
    /// recorded after its findings), then the line itself.
    fn input(&mut self, input: &Input<'_, '_>, _pairing: &Pairing, events: &mut Vec<Event>) {
        self.outputs(outputs(events));
        if let Input::Entry { number, parsed, thread } = input {
            self.line(*number, parsed, *thread);
        }
    }

    /// A plan is made of a complete stream: tail findings (about a live stream as it stands)
    /// are not planned for.
    fn finish(&mut self, _pairing: &Pairing, events: &mut Vec<Event>) {
        self.end();
        self.outputs(outputs(events));
    }
}
