//! The repair trigger stage (`repair` in the list): when a stream is due for repair.

use crate::transcript::pipeline::{Event, Input, Inputs, Pairing, Quiet, Stage};
use std::time::Duration;

/// The repair trigger: a stream that had error findings (or breaks the agent mends, which
/// repair mends too) from the stages before it, and has
/// been idle for `min_idle`, is due for repair ([`Event::RepairDue`], once per batch of
/// errors). The repair itself is IO: the shell runs it.
#[derive(Debug)]
pub struct RepairTrigger {
    idle: Quiet,
    errors: bool,
}

impl RepairTrigger {
    /// A trigger after `min_idle` without growth.
    pub fn new(min_idle: Duration) -> Self {
        RepairTrigger { idle: Quiet::new(min_idle), errors: false }
    }

    fn see(&mut self, events: &[Event]) {
        self.errors |= events.iter().filter_map(Event::finding).any(crate::transcript::Finding::wants_repair);
    }
}

impl Stage for RepairTrigger {
    fn name(&self) -> &'static str {
        "repair"
    }

    fn input(&mut self, _input: &Input<'_, '_>, _pairing: &Pairing, events: &mut Vec<Event>) {
        self.see(events);
    }

    fn grew(&mut self, now: Duration) {
        self.idle.grew(now);
    }

    fn poll_deadline(&self, _pairing: &Pairing) -> Option<Duration> {
        self.idle.deadline().filter(|_| self.errors)
    }

    fn handle_timeout(&mut self, now: Duration, _inputs: &Inputs, _pairing: &Pairing, events: &mut Vec<Event>) {
        // Tail findings of the stages before this one, due at the same time, count too.
        self.see(events);
        if self.errors && self.idle.take(now) {
            self.errors = false;
            events.push(Event::RepairDue);
        }
    }

    fn owes(&self) -> bool {
        self.errors
    }

    fn replayed(&mut self, owed: bool) {
        // The errors of the replayed lines were made due before the state was dropped, unless
        // they were still owed then (the file not idle for `min_idle` yet).
        self.errors = owed;
    }

    fn finish(&mut self, _pairing: &Pairing, events: &mut Vec<Event>) {
        self.see(events);
        if std::mem::take(&mut self.errors) {
            events.push(Event::RepairDue);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::finding::{Finding, Kind, Output};

    fn error() -> Event {
        Event::Output(Output::Finding(Finding::new(3, Kind::OrphanResult, "result without its call")))
    }

    /// What the repair trigger owes survives a replay only when the shell hands it back.
    #[test]
    fn the_repair_trigger_owes_a_repair_across_a_replay_only_when_told() {
        let secs = Duration::from_secs;
        // The trigger reads no pairing.
        let none = Pairing::default();
        for owed in [false, true] {
            let mut t = RepairTrigger::new(secs(5));
            let mut events = vec![error()];
            t.input(&Input::Fault, &none, &mut events);
            t.grew(secs(10));
            assert!(t.owes(), "errors seen and not yet idle for min_idle: a repair is owed");
            assert_eq!(t.poll_deadline(&none), Some(secs(15)));
            // The state is dropped and rebuilt by a replay (which sees the same error again).
            let mut rebuilt = RepairTrigger::new(secs(5));
            rebuilt.input(&Input::Fault, &none, &mut vec![error()]);
            rebuilt.grew(secs(10));
            rebuilt.replayed(owed);
            assert_eq!(rebuilt.owes(), owed);
            let mut due = Vec::new();
            rebuilt.handle_timeout(secs(15), &Inputs::default(), &none, &mut due);
            assert_eq!(due.iter().filter(|e| matches!(e, Event::RepairDue)).count(), usize::from(owed));
            assert!(!rebuilt.owes(), "made due: owed no more");
        }
    }
}
