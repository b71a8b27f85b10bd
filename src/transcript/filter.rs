//! Which findings a reader wants: `--severity`, `--errors` and `--kind` of the verbs, and the
//! `severity` and `kinds` keys of the daemon's stdout sink. Pure data and one predicate, so that
//! every place that filters agrees.

use super::finding::{Finding, Kind, Severity};
use serde::{Deserialize, Serialize};

/// A selection of findings: by severity (exactly that one), and by kind (any of those listed).
/// The default keeps everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingFilter {
    /// Only findings of this severity.
    pub severity: Option<Severity>,
    /// Only findings of these kinds (none listed: every kind).
    pub kinds: Vec<Kind>,
}

impl FindingFilter {
    /// Whether the filter keeps everything.
    pub fn keeps_all(&self) -> bool {
        self.severity.is_none() && self.kinds.is_empty()
    }

    /// Whether a finding of `kind` and `severity` is kept.
    pub fn keeps(&self, kind: Kind, severity: Severity) -> bool {
        self.severity.is_none_or(|s| s == severity) && self.keeps_kind(kind)
    }

    /// Whether findings of `kind` are kept, whatever their severity (what a correction of an
    /// earlier finding is judged by: its severity changed).
    pub fn keeps_kind(&self, kind: Kind) -> bool {
        self.kinds.is_empty() || self.kinds.contains(&kind)
    }

    /// Whether `f` is kept.
    pub fn keeps_finding(&self, f: &Finding) -> bool {
        self.keeps(f.kind, f.severity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_by_severity_and_kind() {
        let all = FindingFilter::default();
        assert!(all.keeps_all() && all.keeps(Kind::OrphanCall, Severity::Warning));
        let errors = FindingFilter { severity: Some(Severity::Error), kinds: vec![] };
        assert!(errors.keeps(Kind::OrphanCall, Severity::Error));
        assert!(!errors.keeps(Kind::InvalidArguments, Severity::Warning));
        let kinds = FindingFilter { severity: None, kinds: vec![Kind::OrphanCall, Kind::TornLine] };
        assert!(kinds.keeps(Kind::TornLine, Severity::Warning) && !kinds.keeps(Kind::OrphanResult, Severity::Error));
        let both = FindingFilter { severity: Some(Severity::Warning), kinds: vec![Kind::OrphanCall] };
        assert!(both.keeps(Kind::OrphanCall, Severity::Warning) && !both.keeps(Kind::OrphanCall, Severity::Error));
        assert!(both.keeps_kind(Kind::OrphanCall) && !both.keeps_kind(Kind::TornLine));
    }
}
