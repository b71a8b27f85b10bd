//! Whether a session resumes, from its findings: what `transcriptd doctor` says of each session.
//!
//! The model is what the real agents were measured to do on resume (TRUTH.md: the oracle
//! `tests/integration/peers/agent_oracle.py` resumed each fixture in Claude Code 2.1.332 and
//! 2.0.77 and in Codex 0.171.0):
//!
//! - What the agent **mends leaving nothing of the file out** is a warning, not an error
//!   ([`OnResume::Mended`], [`tell`]): a call without its result (`orphan_call`,
//!   `unanswered_call`) is answered with the agent's own "interrupted" / "missing" / `"aborted"`
//!   result (Claude Code 2.1.332, Codex, Pi, Qwen Code, Copilot CLI); Qwen Code joins two model
//!   turns in a row (`consecutive_assistant`); Claude Code skips a line of NUL padding. The
//!   session resumes with its whole history; `repair` still mends the file
//!   ([`Finding::mended`]).
//! - Some errors the agent **mends and resumes past, losing something**: a line it cannot read
//!   (`malformed_line`, `invalid_utf8`, `line_too_long`, `torn_line`) is left out of the history
//!   it sends (and, in Claude Code, the lines whose chain led through it); a result without its
//!   call (`orphan_result`) is not sent, nor (Claude Code) a second result for one call
//!   (`duplicate_result`); the history before a line whose parent is missing (`lost_on_resume`:
//!   Claude Code's chain walk stops there). [`on_resume`] says it per format and kind, and the
//!   findings carry it. [`Verdict::Drops`].
//! - Every other error is taken as the provider **refusing** the history the agent sends: the
//!   Anthropic Messages API's own rules (`empty_text`, `unsigned_thinking`, …: the API's error
//!   texts are quoted in TRUTH.md), and the kinds no agent was measured to mend
//!   (`consecutive_assistant`, …). [`Verdict::Refused`].
//! - Warnings do not stop a resume ([`crate::transcript::Severity::Warning`]): [`Verdict::Resumes`].
//!
//! Pure: findings in, a verdict out.

use crate::transcript::model::MAIN_THREAD;
use crate::transcript::{Finding, Format, Kind, Severity};
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

/// Whether the agent of a file of `format` was measured to resume past an error of this kind
/// (leaving out or replacing what it is about) rather than sending a history the provider
/// refuses: the lines it cannot read, the history its chain walk loses, and what
/// [`on_resume`] says it mends. A file of no known format mends only what cannot be read.
pub fn agent_mends(format: Option<Format>, kind: Kind) -> bool {
    // A record Copilot's loader refuses is framing (repair removes it), but the agent refuses the
    // session with it.
    (kind.is_framing() && kind != Kind::RefusedRecord)
        || matches!(kind, Kind::LostOnResume | Kind::ContentWiped | Kind::CompactionUnsummarized)
        || matches!(format.and_then(|f| on_resume(f, kind)), Some(OnResume::Agent(_) | OnResume::Mended(_)))
}

/// What resuming a session does about a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnResume {
    /// The agent mends it and resumes past it, leaving nothing of the file out: it answers a
    /// call the file holds no result for, or joins what it would otherwise refuse. The finding
    /// is a warning ([`tell`]): the session resumes with its whole history.
    Mended(&'static str),
    /// The agent mends it and resumes past it, leaving out or replacing what it is about.
    Agent(&'static str),
    /// The provider refuses the request, with this error.
    Refused(&'static str),
}

impl OnResume {
    /// In words, for the finding's message.
    pub fn text(self) -> &'static str {
        match self {
            OnResume::Mended(t) | OnResume::Agent(t) | OnResume::Refused(t) => t,
        }
    }
}

/// What resuming a file of `format` does about a finding of the main conversation: what the
/// agent does (Claude Code 2.1.332 and Codex 0.171.0 as measured, TRUTH.md, "Every difference
/// observed" and "The chain walk"; `src/transcript/context/agent.rs` models it), or, for the API
/// formats, the provider's error text (TRUTH.md, "The API's rules", with their sources). `None`
/// where nothing was measured or found.
pub fn on_resume(format: Format, kind: Kind) -> Option<OnResume> {
    match (format, kind) {
        (Format::ClaudeCode, Kind::OrphanCall) => Some(OnResume::Mended("on resume Claude Code answers it as interrupted: its real result is lost")),
        (Format::ClaudeCode, Kind::UnansweredCall) => {
            Some(OnResume::Mended("on resume Claude Code answers it with \"[Tool result missing due to internal error]\""))
        }
        (Format::ClaudeCode, Kind::OrphanResult) => Some(OnResume::Agent("on resume Claude Code does not send it")),
        (Format::ClaudeCode, Kind::DuplicateCallId) => Some(OnResume::Agent("on resume Claude Code does not send this call, nor a result for its id after it")),
        (Format::ClaudeCode, Kind::DuplicateResult) => Some(OnResume::Agent("on resume Claude Code does not send it")),
        (Format::Codex, Kind::OrphanCall | Kind::UnansweredCall) => Some(OnResume::Mended("on resume Codex answers it \"aborted\": its real result is lost")),
        (Format::Codex, Kind::OrphanResult) => Some(OnResume::Agent("on resume Codex does not send it")),
        // pi-ai's `transformMessages` (modelled from its source, not measured).
        (Format::Pi, Kind::OrphanCall | Kind::UnansweredCall) => {
            Some(OnResume::Mended("on resume Pi answers it \"No result provided\" (an error): its real result is lost"))
        }
        (Format::Pi, Kind::OrphanResult) => Some(OnResume::Refused(
            "on resume Pi sends it as it is, and the provider refuses it (Anthropic: \"unexpected `tool_use_id` found in `tool_result` blocks\")",
        )),
        // Qwen Code's `repairOrphanedToolUseTurns` and its OpenAI converter's
        // `cleanOrphanedToolCalls` (modelled from its source, `context` checked against the agent).
        (Format::Qwen, Kind::OrphanCall | Kind::UnansweredCall) => {
            Some(OnResume::Mended("on resume Qwen Code answers it with an error (\"Tool execution result was not recorded\"): its real result is lost"))
        }
        // Its OpenAI converter's `mergeConsecutiveAssistantMessages` (measured: the real 0.24.4
        // resumed two model records in a row and sent one assistant message).
        (Format::Qwen, Kind::ConsecutiveAssistant) => {
            Some(OnResume::Mended("on resume Qwen Code sends the two as one assistant message (its OpenAI converter merges consecutive ones)"))
        }
        (Format::Qwen, Kind::OrphanResult) => {
            Some(OnResume::Agent("on resume Qwen Code does not send it (its OpenAI converter drops a tool message without its call)"))
        }
        // Gemini CLI 0.61.0 sends the history as the file holds it (measured with the oracle,
        // tests/integration/oracle.rs); the Gemini API counts response parts against call parts.
        (Format::Gemini, Kind::OrphanCall | Kind::UnansweredCall | Kind::OrphanResult | Kind::DuplicateResult) => Some(OnResume::Refused(
            "on resume Gemini CLI sends it as it is, and the Gemini API refuses it: \"Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.\"",
        )),
        // Copilot CLI 1.0.102, measured (tests/integration/oracle_copilot.rs): a call without a
        // recorded result gets one on resume; a result for no open call is not sent.
        (Format::Copilot, Kind::OrphanCall) => {
            Some(OnResume::Mended("on resume Copilot answers it \"Tool execution was interrupted before a result was recorded...\": its real result is lost"))
        }
        (Format::Copilot, Kind::UnansweredCall) => {
            Some(OnResume::Mended("on resume Copilot answers it \"The execution of this tool, or a previous tool was interrupted.\": its real result is lost"))
        }
        (Format::Copilot, Kind::OrphanResult) => Some(OnResume::Agent("on resume Copilot does not send it")),
        // Copilot CLI 1.0.102, measured: its loader stops at the line and loads nothing.
        (Format::Copilot, Kind::RefusedRecord) => {
            Some(OnResume::Refused("on resume Copilot refuses to load the session: \"Session file is corrupted (line N: ...)\""))
        }
        (Format::Anthropic, Kind::OrphanCall | Kind::UnansweredCall) => {
            Some(OnResume::Refused("the API refuses it: \"`tool_use` ids were found without `tool_result` blocks immediately after\""))
        }
        (Format::Anthropic, Kind::OrphanResult) => Some(OnResume::Refused("the API refuses it: \"unexpected `tool_use_id` found in `tool_result` blocks\"")),
        (Format::Anthropic, Kind::DuplicateCallId) => Some(OnResume::Refused("the API refuses it: \"`tool_use` ids must be unique\"")),
        (Format::OpenAiChat, Kind::OrphanCall | Kind::UnansweredCall) => Some(OnResume::Refused(
            "the API refuses it: \"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'\"",
        )),
        (Format::OpenAiChat, Kind::OrphanResult) => {
            Some(OnResume::Refused("the API refuses it: \"messages with role 'tool' must be a response to a preceeding message with 'tool_calls'\""))
        }
        _ => None,
    }
}

/// Says in `f` what resuming a file of `format` does about it ([`on_resume`]), when it is a
/// finding of the main conversation (a sidechain is not what resume sends) and an error, or a
/// duplicate call id (a warning whose later call Claude Code silently does not send).
pub fn tell(format: Format, f: &mut Finding) {
    if f.thread == MAIN_THREAD && (f.severity == Severity::Error || f.kind == Kind::DuplicateCallId) {
        let r = on_resume(format, f.kind);
        f.on_resume = r.map(|r| r.text().into());
        // What the agent mends leaving nothing of the file out does not stop the session from
        // resuming with its history: a warning, which repair still mends ([`Finding::mended`]).
        if matches!(r, Some(OnResume::Mended(_))) && f.severity == Severity::Error {
            f.severity = Severity::Warning;
            f.mended = true;
        }
    }
}

impl Verdict {
    /// The verdict on a session of `format` whose check found `findings` (in any order).
    pub fn of(format: Option<Format>, findings: &[Finding]) -> Verdict {
        let mut errors: Vec<&Finding> = findings.iter().filter(|f| f.severity == Severity::Error).collect();
        errors.sort_by_key(|f| f.line);
        if let Some(f) = errors.iter().find(|f| !agent_mends(format, f.kind)) {
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

/// What the agent mends on resume leaving nothing out, for one finding, for people: "the call
/// toolu_1 left without a result at line 9 (orphan_call)", "line 4 (malformed_line)".
pub fn mended(f: &Finding) -> String {
    let call = f.call_id.as_deref().map(|c| format!(" {c}")).unwrap_or_default();
    match f.kind {
        Kind::OrphanCall | Kind::UnansweredCall => format!("the call{call} left without a result at line {} ({})", f.line, f.kind),
        _ => format!("line {} ({})", f.line, f.kind),
    }
}

/// What the agent leaves out or replaces for one finding it mends, for people: "line 7 (torn_line)",
/// "the result of call toolu_1 at line 9 (orphan_call)".
pub fn dropped(f: &Finding) -> String {
    let call = f.call_id.as_deref().map(|c| format!(" {c}")).unwrap_or_default();
    match f.kind {
        Kind::OrphanCall | Kind::UnansweredCall => format!("the result of call{call} at line {} ({})", f.line, f.kind),
        Kind::OrphanResult => format!("the result at line {} ({})", f.line, f.kind),
        Kind::DuplicateResult => format!("the second result{call} at line {} ({})", f.line, f.kind),
        Kind::LostOnResume => format!("the history before line {} ({})", f.line, f.kind),
        Kind::ContentWiped => format!("what the lines from {} on said ({})", f.line, f.kind),
        Kind::CompactionUnsummarized => format!("the history before line {} ({})", f.line, f.kind),
        _ => format!("line {} ({})", f.line, f.kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CC: Option<Format> = Some(Format::ClaudeCode);

    fn f(line: u64, kind: Kind) -> Finding {
        Finding::new(line, kind, "m")
    }

    #[test]
    fn what_the_agent_mends_leaving_nothing_out_is_a_warning() {
        let told = |format: Format, kind: Kind| {
            let mut g = f(3, kind);
            tell(format, &mut g);
            (g.severity, g.mended)
        };
        for format in [Format::ClaudeCode, Format::Codex, Format::Pi, Format::Qwen, Format::Copilot] {
            for kind in [Kind::OrphanCall, Kind::UnansweredCall] {
                assert_eq!(told(format, kind), (Severity::Warning, true), "{format:?} {kind:?}: the agent answers it");
            }
            assert_eq!(told(format, Kind::OrphanResult), (Severity::Error, false), "{format:?}: the agent leaves the result out");
        }
        assert_eq!(told(Format::Qwen, Kind::ConsecutiveAssistant), (Severity::Warning, true), "Qwen Code joins them");
        assert_eq!(told(Format::ClaudeCode, Kind::ConsecutiveAssistant), (Severity::Error, false));
        assert_eq!(told(Format::Gemini, Kind::OrphanCall), (Severity::Error, false), "the Gemini API refuses it");
        assert_eq!(told(Format::Anthropic, Kind::OrphanCall), (Severity::Error, false), "the API refuses it");
        // A finding of a sidechain, which resume does not send, is left as it is.
        let mut side = f(3, Kind::OrphanCall).in_thread(7);
        tell(Format::ClaudeCode, &mut side);
        assert_eq!((side.severity, side.on_resume), (Severity::Error, None));
        let mut g = f(3, Kind::OrphanCall);
        tell(Format::ClaudeCode, &mut g);
        assert_eq!(Verdict::of(CC, &[g]), Verdict::Resumes, "a warning: it resumes with its history");
    }

    #[test]
    fn qwen_code_mends_what_it_repairs_and_merges_on_resume() {
        let q = Some(Format::Qwen);
        for k in [Kind::OrphanCall, Kind::UnansweredCall, Kind::OrphanResult, Kind::ConsecutiveAssistant] {
            assert!(agent_mends(q, k), "{k:?}");
        }
        assert!(!agent_mends(q, Kind::DuplicateCallId));
        assert!(!agent_mends(CC, Kind::ConsecutiveAssistant));
    }

    #[test]
    fn warnings_resume_mended_errors_drop_the_rest_is_refused() {
        assert_eq!(Verdict::of(CC, &[]), Verdict::Resumes);
        assert_eq!(Verdict::of(CC, &[f(3, Kind::InvalidArguments)]), Verdict::Resumes, "a warning");
        let torn = f(9, Kind::TornLine);
        let orphan = f(4, Kind::OrphanCall).with_call("toolu_1", Some("Bash"));
        assert_eq!(Verdict::of(CC, &[torn.clone(), orphan.clone()]), Verdict::Drops(vec![orphan.clone(), torn.clone()]));
        // One error no agent mends makes the whole session refused, whatever its line.
        let blank = f(12, Kind::EmptyText);
        assert_eq!(Verdict::of(CC, &[torn.clone(), blank.clone(), orphan.clone()]), Verdict::Refused(blank.clone()));
        // The first of them by line.
        let consecutive = f(2, Kind::ConsecutiveAssistant);
        assert_eq!(Verdict::of(CC, &[blank.clone(), consecutive.clone()]), Verdict::Refused(consecutive));
        // Claude Code sends the first result of a call only; the API refuses the second.
        let dup = f(2, Kind::DuplicateResult);
        assert_eq!(Verdict::of(CC, &[dup.clone()]), Verdict::Drops(vec![dup.clone()]));
        assert_eq!(Verdict::of(Some(Format::Anthropic), &[dup.clone()]), Verdict::Refused(dup));
        assert_eq!(Verdict::of(Some(Format::Anthropic), &[orphan.clone()]), Verdict::Refused(orphan.clone()));
        assert_eq!(Verdict::of(Some(Format::Codex), &[orphan.clone()]), Verdict::Drops(vec![orphan.clone()]));
        assert_eq!(Verdict::of(None, &[torn.clone()]), Verdict::Drops(vec![torn.clone()]));
        // A demoted error (an abandoned branch) is a warning.
        let mut demoted = f(5, Kind::ConsecutiveAssistant);
        demoted.demote("on an abandoned branch");
        assert_eq!(Verdict::of(CC, &[demoted]), Verdict::Resumes);
        assert_eq!(dropped(&orphan), "the result of call toolu_1 at line 4 (orphan_call)");
        assert_eq!(dropped(&torn), "line 9 (torn_line)");
    }
}
