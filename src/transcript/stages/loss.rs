//! The `loss` stage: what a transcript lost of itself, found where it happens.
//!
//! - In the stream: a run of at least [`MIN_WIPED`] conversation lines in a row that hold no
//!   content (`content_wiped`). Claude Code's compaction clears the content of the messages it
//!   is about to summarize before the summary call; when that call fails, no summary replaces
//!   them, and the session resumes with nothing of them (anthropics/claude-code#40352: 4,252
//!   of 4,319 messages left as empty strings). Healthy sessions hold no such run: the agents
//!   write no empty conversation line but the odd blank text block.
//! - In the stream: a Claude Code `compact_boundary` whose next message is not its summary
//!   (`compaction_unsummarized`): the agent resumes from the boundary, so the history before it is not
//!   sent and no summary stands for it (measured with Claude Code 2.1.332: a compacted session
//!   without its summary line resumed with the four local-command lines after the boundary
//!   only). The lines are still in the file.
//! - From the shell ([`Stage::left`]): the file deleted (`transcript_deleted`: an agent's
//!   cleanup, a user's `rm`) or truncated or rewritten in place so that what was read is no
//!   longer there (`transcript_rewritten`). Warnings: a deletion may be meant; the agents only
//!   append, so a rewrite is not theirs.

use crate::transcript::finding::{Finding, Kind, Output};
use crate::transcript::model::{Entry, Role, MAIN_THREAD};
use crate::transcript::pipeline::{Event, Gone, Input, Inputs, Left, Pairing, Quiet, Stage};
use std::time::Duration;

/// The shortest run of empty conversation lines that is a wipe, not a stray blank message.
pub const MIN_WIPED: u64 = 3;

/// The `loss` stage (see the module docs). On a live stream, a run still open at the tail is
/// reported once the stream has been quiet for the quiet period, as the tail findings are.
#[derive(Debug)]
pub struct Loss {
    quiet: Quiet,
    run: Option<Run>,
    /// The snapshot store that holds what the file had (the daemon's `snapshot` sink).
    store: Option<String>,
    /// Conversation lines of the main thread since the start or the last compaction.
    messages: u64,
    /// A compaction whose summary comes on a line of its own, not seen yet.
    boundary: Option<Boundary>,
}

/// A compaction whose summary is still to come: its line and the messages before it.
#[derive(Debug, Clone, Copy)]
struct Boundary {
    line: u64,
    before: u64,
}

impl Boundary {
    fn finding(self, next: Option<u64>) -> Finding {
        let Boundary { line, before } = self;
        let next = match next {
            Some(n) => format!("the next message, line {n}, is not its summary"),
            None => "the file ends before its summary".into(),
        };
        let mut f = Finding::new(
            line,
            Kind::CompactionUnsummarized,
            format!(
                "a compaction with no summary after it ({next}): Claude Code resumes the conversation from this line, so the {before} message{} before it {} not sent and no summary stands for {} (nothing says so); the lines are still in the file",
                if before == 1 { "" } else { "s" },
                if before == 1 { "is" } else { "are" },
                if before == 1 { "it" } else { "them" },
            ),
        );
        f.on_resume = Some(format!("resume sends nothing of the {before} messages before line {line}").into());
        f
    }
}

/// Conversation lines in a row without content.
#[derive(Debug, Clone, Copy)]
struct Run {
    first: u64,
    last: u64,
    lines: u64,
}

impl Run {
    fn finding(self, held: &str) -> Finding {
        let Run { first, last, lines } = self;
        let mut f = Finding::new(
            first,
            Kind::ContentWiped,
            format!(
                "lines {first}-{last}: {lines} conversation lines in a row hold no content: what they said was wiped (as a failed compaction leaves them), \
                 and no repair can bring it back; {held}"
            ),
        );
        f.on_resume = Some(format!("resume sends nothing of these {lines} lines").into());
        f
    }
}

impl Loss {
    /// The stage; on a live stream its tail is due after `quiet` without growth.
    pub fn new(quiet: Duration) -> Self {
        Loss { quiet: Quiet::new(quiet), run: None, store: None, messages: 0, boundary: None }
    }

    /// Its findings say that `store` (a snapshot store) holds what was lost, and how to put it
    /// back.
    pub fn restoring_from(mut self, store: Option<String>) -> Self {
        self.store = store;
        self
    }

    /// Where what was lost may be found (`wiped`: lines read without their content, which the
    /// store holds only if they had it once, before a rewrite).
    fn held(&self, wiped: bool) -> String {
        match (&self.store, wiped) {
            (Some(s), false) => format!("the snapshot store holds them: `transcriptd restore FILE --store {s}` puts it back"),
            (Some(s), true) => {
                format!("if the file held it before a rewrite, the snapshot store does: `transcriptd restore FILE --store {s} --list`")
            }
            (None, true) => "a backup or a `snapshot` sink's store may hold it".into(),
            (None, false) => "a backup or a `snapshot` sink's store may hold them".into(),
        }
    }

    /// The run so far, if it is one.
    fn open(&self) -> Option<Run> {
        self.run.filter(|r| r.lines >= MIN_WIPED)
    }

    fn close(&mut self, events: &mut Vec<Event>) {
        if let Some(r) = self.open() {
            events.push(Event::Output(Output::Finding(r.finding(&self.held(true)))));
        }
        self.run = None;
    }
}

impl Stage for Loss {
    fn name(&self) -> &'static str {
        "loss"
    }

    fn input(&mut self, input: &Input<'_, '_>, _pairing: &Pairing, events: &mut Vec<Event>) {
        let Input::Entry { number, parsed, thread } = input else { return };
        if *thread == MAIN_THREAD {
            match &parsed.entry {
                Entry::Message(m) => {
                    // Claude Code's summary: a user message of text that starts no turn.
                    let summary = m.role == Role::User && !m.prompt && m.results.is_empty() && m.has_content;
                    if let Some(b) = self.boundary.take() {
                        if !summary && b.before > 0 {
                            events.push(Event::Output(Output::Finding(b.finding(Some(*number)))));
                        }
                    }
                    self.messages += 1;
                }
                Entry::Compaction { summary_follows, .. } => {
                    self.boundary = summary_follows.then_some(Boundary { line: *number, before: self.messages });
                    self.messages = 0;
                }
                Entry::Other | Entry::Unknown => {}
            }
        }
        match &parsed.entry {
            Entry::Message(m) if !m.has_content => {
                let r = self.run.get_or_insert(Run { first: *number, last: *number, lines: 0 });
                r.last = *number;
                r.lines += 1;
            }
            Entry::Message(_) | Entry::Compaction { .. } => self.close(events),
            // Records that are not conversation (progress, meta) neither break a run nor
            // belong to it.
            Entry::Other | Entry::Unknown => {}
        }
    }

    fn grew(&mut self, now: Duration) {
        self.quiet.grew(now);
    }

    fn poll_deadline(&self, _pairing: &Pairing) -> Option<Duration> {
        self.open().and(self.quiet.deadline())
    }

    fn tail_stands(&mut self, done: bool, _reported: &[Finding]) {
        if done {
            self.quiet.stands();
        }
    }

    fn handle_timeout(&mut self, now: Duration, _inputs: &Inputs, _pairing: &Pairing, events: &mut Vec<Event>) {
        if self.open().is_some() && self.quiet.take(now) {
            events.extend(self.open().map(|r| Event::Tail(r.finding(&self.held(true)))));
        }
    }

    fn left(&mut self, gone: &Gone, _pairing: &Pairing, events: &mut Vec<Event>) {
        self.run = None;
        self.boundary = None;
        self.messages = 0;
        let Gone { how, bytes, lines, messages } = *gone;
        // After a restart the shell knows the bytes read, not yet the lines.
        let read = match lines {
            0 => format!("{bytes} bytes had been read"),
            _ => format!("{lines} lines ({messages} conversation entries, {bytes} bytes) had been read"),
        };
        let (kind, what) = match how {
            Left::Deleted => (Kind::TranscriptDeleted, format!("the transcript was deleted; {read}")),
            Left::Rewritten { size } => (
                Kind::TranscriptRewritten,
                format!("the transcript was truncated or rewritten in place (it holds {size} bytes now); {read}, and they are no longer in it"),
            ),
        };
        let mut f = Finding::new(0, kind, format!("{what}: {}", self.held(false)));
        f.on_resume = Some(match how {
            Left::Deleted => "the agent finds no such session".into(),
            Left::Rewritten { .. } => "resume sends only what the file holds now".into(),
        });
        events.push(Event::Output(Output::Finding(f)));
    }

    fn finish(&mut self, _pairing: &Pairing, events: &mut Vec<Event>) {
        self.close(events);
        if let Some(b) = self.boundary.take().filter(|b| b.before > 0) {
            events.push(Event::Output(Output::Finding(b.finding(None))));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::check::findings;
    use crate::transcript::checker::Options;
    use crate::transcript::pipeline::Pipeline;

    fn check(input: &str) -> Vec<Finding> {
        let mut p = Pipeline::transcript(Options::default(), vec![Box::new(Loss::new(Duration::MAX))], Duration::MAX);
        p.feed(input.as_bytes()).unwrap();
        findings(p.finish().unwrap().0)
    }

    fn line(i: usize, role: &str, content: &str) -> String {
        format!(
            "{{\"type\":\"{role}\",\"uuid\":\"u{i}\",\"parentUuid\":{},\"sessionId\":\"s\",\"message\":{{\"role\":\"{role}\",\"content\":{content}}}}}\n",
            if i == 0 { "null".to_string() } else { format!("\"u{}\"", i - 1) }
        )
    }

    #[test]
    fn a_run_of_wiped_lines_is_one_finding_with_its_extent() {
        let mut s = line(0, "user", "\"hello\"");
        for i in 1..=5 {
            s += &line(i, if i % 2 == 1 { "assistant" } else { "user" }, "\"\"");
        }
        s += &line(6, "assistant", "[{\"type\":\"text\",\"text\":\"back\"}]");
        let f = check(&s);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].kind, f[0].line), (Kind::ContentWiped, 2));
        assert!(f[0].message.contains("lines 2-6: 5 conversation lines"), "{}", f[0].message);
    }

    #[test]
    fn a_run_at_the_end_is_reported_and_short_runs_are_not() {
        let mut s = line(0, "user", "\"hello\"") + &line(1, "assistant", "\"\"") + &line(2, "user", "\"\"");
        s += &line(3, "assistant", "\"ok\"");
        assert!(check(&s).is_empty());
        for i in 4..4 + MIN_WIPED as usize {
            s += &line(i, "user", "[]");
        }
        let f = check(&s);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].line, 5);
    }

    fn boundary(i: usize) -> String {
        format!("{{\"type\":\"system\",\"subtype\":\"compact_boundary\",\"uuid\":\"u{i}\",\"parentUuid\":null,\"logicalParentUuid\":\"u{}\",\"sessionId\":\"s\"}}\n", i - 1)
    }

    fn summary(i: usize) -> String {
        format!(
            "{{\"type\":\"user\",\"isCompactSummary\":true,\"uuid\":\"u{i}\",\"parentUuid\":\"u{}\",\"sessionId\":\"s\",\"message\":{{\"role\":\"user\",\"content\":\"This session is being continued\"}}}}\n",
            i - 1
        )
    }

    #[test]
    fn a_compaction_without_its_summary_loses_the_history_before_it() {
        let before = line(0, "user", "\"hello\"") + &line(1, "assistant", "\"hi\"");
        // With its summary: nothing.
        assert!(check(&(before.clone() + &boundary(2) + &summary(3) + &line(4, "user", "\"go on\""))).is_empty());
        // Without: the boundary's line, the two messages before it.
        let f = check(&(before.clone() + &boundary(2) + &line(3, "user", "\"go on\"")));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].kind, f[0].line), (Kind::CompactionUnsummarized, 3));
        assert!(
            f[0].message.contains("the next message, line 4, is not its summary") && f[0].message.contains("the 2 messages before it are not sent"),
            "{}",
            f[0].message
        );
        // The file ends at the boundary.
        let f = check(&(before + &boundary(2)));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].message.contains("the file ends before its summary"), "{}", f[0].message);
        // Nothing before it: nothing lost.
        assert!(check(&(boundary(1) + &line(2, "user", "\"go on\""))).is_empty());
    }

    #[test]
    fn leaving_is_a_whole_file_warning() {
        let mut st = Loss::new(Duration::MAX);
        let mut ev = Vec::new();
        st.left(&Gone { how: Left::Deleted, bytes: 10, lines: 2, messages: 1 }, &Pairing::default(), &mut ev);
        st.left(&Gone { how: Left::Rewritten { size: 3 }, bytes: 10, lines: 2, messages: 1 }, &Pairing::default(), &mut ev);
        let kinds: Vec<_> = ev
            .iter()
            .map(|e| match e {
                Event::Output(Output::Finding(f)) => (f.kind, f.line, f.severity),
                e => panic!("{e:?}"),
            })
            .collect();
        use crate::transcript::finding::Severity::Warning;
        assert_eq!(kinds, [(Kind::TranscriptDeleted, 0, Warning), (Kind::TranscriptRewritten, 0, Warning)]);
    }
}
