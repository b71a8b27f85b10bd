//! The `validate` stage: the pairing rules' findings where the stage stands in the list.

use crate::transcript::finding::{Kind, Output};
use crate::transcript::pairing::validator::Validator;
use crate::transcript::pipeline::{Event, Input, Inputs, Pairing, Quiet, Stage};

/// The `validate` stage: the canonical rules of [`Validator`] as a pipeline stage, over the
/// stream's [`Pairing`] (the runner pairs the lines; this stage reports what the pairing
/// found, where it stands in the list). At the end of a complete stream it reports what
/// [`Validator::finish`] does (calls still pending are `orphan_call`, as `check` reports them);
/// on a live stream, once it has been quiet, the empty open turns — calls left open at the tail
/// are the `orphans` stage's, which knows `pending.json` and the grace period.
#[derive(Debug)]
pub struct Validate {
    quiet: Quiet,
}

impl Validate {
    /// The stage; on a live stream its tail is due after `quiet` without growth.
    pub fn new(quiet: std::time::Duration) -> Self {
        Validate { quiet: Quiet::new(quiet) }
    }
}

impl Stage for Validate {
    fn name(&self) -> &'static str {
        "validate"
    }

    fn reads_pairing(&self) -> bool {
        true
    }

    fn input(&mut self, input: &Input<'_, '_>, pairing: &Pairing, events: &mut Vec<Event>) {
        match input {
            Input::Entry { .. } => events.extend(said(pairing).map(Event::Output)),
            Input::Dataset(o) => events.push(Event::Output((*o).clone())),
            Input::Event { .. } | Input::Fault => {}
        }
    }

    fn thread(&self, pairing: &Pairing) -> Option<u64> {
        pairing.validator().map(Validator::thread)
    }

    fn grew(&mut self, now: std::time::Duration) {
        self.quiet.grew(now);
    }

    fn poll_deadline(&self, _pairing: &Pairing) -> Option<std::time::Duration> {
        self.quiet.deadline()
    }

    fn tail_stands(&mut self, done: bool, _reported: &[crate::transcript::Finding]) {
        // Its tail (the empty turns) was looked at with the front's, at the same quiet period.
        if done {
            self.quiet.stands();
        }
    }

    fn handle_timeout(&mut self, now: std::time::Duration, _inputs: &Inputs, pairing: &Pairing, events: &mut Vec<Event>) {
        if !self.quiet.take(now) {
            return;
        }
        if let Some(v) = pairing.validator() {
            events.extend(v.tail().into_iter().filter(|f| f.kind != Kind::OrphanCall).map(|f| Event::Tail(v.with_resume(f))));
        }
    }

    fn finish(&mut self, pairing: &Pairing, events: &mut Vec<Event>) {
        events.extend(said(pairing).map(Event::Output));
    }

    fn pending(&self, pairing: &Pairing) -> Option<usize> {
        pairing.validator().map(Validator::pending_count)
    }
}

/// What the pairing found for the current input, each finding of the main conversation with
/// what resuming the file does about it ([`Validator::with_resume`]).
fn said(pairing: &Pairing) -> impl Iterator<Item = Output> + '_ {
    pairing.found().iter().cloned().map(|o| match (o, pairing.validator()) {
        (Output::Finding(f), Some(v)) => Output::Finding(v.with_resume(f)),
        (o, _) => o,
    })
}
