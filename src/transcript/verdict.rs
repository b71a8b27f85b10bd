//! Whether a session resumes, from its findings: what `transcriptd doctor` says of each session.
//!
//! The model is what the real agents were measured to do on resume (TRUTH.md: the oracle
//! `tests/integration/peers/agent_oracle.py` resumed each fixture in Claude Code 2.1.332 and
//! 2.0.77 and in Codex 0.171.0):
//!
//! - Some errors the agent **mends and resumes past, losing something**: a line it cannot read
//!   (`malformed_line`, `invalid_utf8`, `line_too_long`, `torn_line`) is left out of the history
//!   it sends (and, in Claude Code, the lines whose chain led through it); a result without its
//!   call (`orphan_result`) is not sent; a call without its result (`orphan_call`,
//!   `unanswered_call`) is answered with the agent's own "interrupted" / `"aborted"` result, or
//!   dropped (Claude Code 2.0.77), so its real outcome is lost; the history before a line whose
//!   parent is missing (`lost_on_resume`: Claude Code's chain walk stops there).
//!   [`Verdict::Drops`].
//! - Every other error is taken as the provider **refusing** the history the agent sends: the
//!   Anthropic Messages API's own rules (`empty_text`, `unsigned_thinking`, …: the API's error
//!   texts are quoted in TRUTH.md), and the kinds no agent was measured to mend
//!   (`duplicate_result`, `consecutive_assistant`, …). [`Verdict::Refused`].
//! - Warnings do not stop a resume ([`crate::transcript::Severity::Warning`]): [`Verdict::Resumes`].
//!
//! Pure: findings in, a verdict out.

use crate::transcript::{Finding, Kind, Severity};
use serde::Serialize;

/// What resuming a session will do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It resumes with its whole history: no error finding.
    Resumes,
    /// The provider will refuse the history: the first error finding no agent mends (by line).
    Refused(Finding),
    /// It resumes, but the agent leaves out or replaces what these error findings are about
    /// (in line order).
    Drops(Vec<Finding>),
}

/// The verdict as a word, in JSON output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Word {
    /// [`Verdict::Resumes`].
    Resumes,
    /// [`Verdict::Refused`].
    Refused,
    /// [`Verdict::Drops`].
    Drops,
}

/// Whether the agents were measured to resume past an error of this kind (leaving out or
/// replacing what it is about) rather than sending a history the provider refuses.
pub fn agent_mends(kind: Kind) -> bool {
    kind.is_framing() || matches!(kind, Kind::OrphanResult | Kind::OrphanCall | Kind::UnansweredCall | Kind::LostOnResume)
}

impl Verdict {
    /// The verdict on a session whose check found `findings` (in any order).
    pub fn of(findings: &[Finding]) -> Verdict {
        let mut errors: Vec<&Finding> = findings.iter().filter(|f| f.severity == Severity::Error).collect();
        errors.sort_by_key(|f| f.line);
        if let Some(f) = errors.iter().find(|f| !agent_mends(f.kind)) {
            return Verdict::Refused((*f).clone());
        }
        if errors.is_empty() {
            Verdict::Resumes
        } else {
            Verdict::Drops(errors.into_iter().cloned().collect())
        }
    }

    /// Whether the session resumes with its whole history.
    pub fn resumes(&self) -> bool {
        matches!(self, Verdict::Resumes)
    }

    /// The verdict as a word.
    pub fn word(&self) -> Word {
        match self {
            Verdict::Resumes => Word::Resumes,
            Verdict::Refused(_) => Word::Refused,
            Verdict::Drops(_) => Word::Drops,
        }
    }
}

/// What the agent leaves out or replaces for one finding it mends, for people: "line 7 (torn_line)",
/// "the result of call toolu_1 at line 9 (orphan_call)".
pub fn dropped(f: &Finding) -> String {
    let call = f.call_id.as_deref().map(|c| format!(" {c}")).unwrap_or_default();
    match f.kind {
        Kind::OrphanCall | Kind::UnansweredCall => format!("the result of call{call} at line {} ({})", f.line, f.kind),
        Kind::OrphanResult => format!("the result at line {} ({})", f.line, f.kind),
        Kind::LostOnResume => format!("the history before line {} ({})", f.line, f.kind),
        _ => format!("line {} ({})", f.line, f.kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(line: u64, kind: Kind) -> Finding {
        Finding::new(line, kind, "m")
    }

    #[test]
    fn warnings_resume_mended_errors_drop_the_rest_is_refused() {
        assert_eq!(Verdict::of(&[]), Verdict::Resumes);
        assert_eq!(Verdict::of(&[f(3, Kind::InvalidArguments)]), Verdict::Resumes, "a warning");
        let torn = f(9, Kind::TornLine);
        let orphan = f(4, Kind::OrphanCall).with_call("toolu_1", Some("Bash"));
        assert_eq!(Verdict::of(&[torn.clone(), orphan.clone()]), Verdict::Drops(vec![orphan.clone(), torn.clone()]));
        // One error no agent mends makes the whole session refused, whatever its line.
        let blank = f(12, Kind::EmptyText);
        assert_eq!(Verdict::of(&[torn.clone(), blank.clone(), orphan.clone()]), Verdict::Refused(blank.clone()));
        // The first of them by line.
        let dup = f(2, Kind::DuplicateResult);
        assert_eq!(Verdict::of(&[blank, dup.clone()]), Verdict::Refused(dup));
        // A demoted error (an abandoned branch) is a warning.
        let mut demoted = f(5, Kind::ConsecutiveAssistant);
        demoted.demote("on an abandoned branch");
        assert_eq!(Verdict::of(&[demoted]), Verdict::Resumes);
        assert_eq!(dropped(&orphan), "the result of call toolu_1 at line 4 (orphan_call)");
        assert_eq!(dropped(&torn), "line 9 (torn_line)");
    }
}
