//! The `prometheus` sink: the metrics of what the pipeline produced, counted from the records
//! and counters each step hands the sinks (findings by kind and severity, orphan calls by the
//! side effect the tool registry gives them, repairs by action, lines, tokens, events) and the
//! gauges of the step. The daemon's own health (checkpoint writes) is counted where it happens;
//! the listener that serves `/metrics` lives in the shell (`cli/run.rs`), across reloads.

use super::record::Record;
use super::{Batch, Count, Position, Sink};
use crate::telemetry as t;
use crate::transcript::stages::orphans::SideEffect;
use crate::transcript::Kind;

/// What a tool does, by its name (the tool registry's answer).
pub type SideEffectOf = Box<dyn Fn(&str) -> SideEffect + Send + Sync>;

/// Metrics of the records and counters it is given.
pub struct PrometheusSink {
    side_effect: SideEffectOf,
}

impl std::fmt::Debug for PrometheusSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrometheusSink").finish_non_exhaustive()
    }
}

impl PrometheusSink {
    /// A sink that labels orphan calls with the side effects `side_effect` gives their tools
    /// (the tool registry's).
    pub fn new(side_effect: SideEffectOf) -> Self {
        // Every kind at its own severity is exported from the start at 0: Prometheus's
        // `increase()` cannot see a counter's first step (a series that appears at 1 increased
        // by nothing), and the alert rules watch first findings (a deleted transcript).
        for k in Kind::ALL {
            metrics::counter!(t::FINDINGS, "kind" => k.as_str(), "severity" => k.default_severity().as_str()).increment(0);
        }
        PrometheusSink { side_effect }
    }

    /// Counts one batch.
    pub fn count(&self, batch: &Batch) {
        for r in &batch.records {
            match r {
                Record::Finding { finding: f, .. } => {
                    metrics::counter!(t::FINDINGS, "kind" => f.kind.as_str(), "severity" => f.severity.as_str()).increment(1);
                    if f.kind == Kind::OrphanCall {
                        let effect = (self.side_effect)(f.tool.as_deref().unwrap_or(""));
                        metrics::counter!(t::ORPHAN_TOOL_CALLS, "side_effect" => effect.as_str()).increment(1);
                    }
                }
                Record::Repaired { inserted, removed, modified, .. } => {
                    for (action, n) in [("insert", *inserted), ("remove", *removed), ("modify", *modified)] {
                        if n > 0 {
                            metrics::counter!(t::REPAIRS, "action" => action).increment(n);
                        }
                    }
                }
                _ => {}
            }
        }
        for c in &batch.counts {
            match c {
                Count::BytesRead(n) => metrics::counter!(t::BYTES_READ).increment(*n),
                Count::Lines(f, n) => metrics::counter!(t::LINES_READ, "format" => *f).increment(*n),
                Count::ToolCalls(f, n) => metrics::counter!(t::TOOL_CALLS, "format" => *f).increment(*n),
                Count::ToolResults(f, n) => metrics::counter!(t::TOOL_RESULTS, "format" => *f).increment(*n),
                Count::Compactions(f, n) => metrics::counter!(t::COMPACTIONS, "format" => *f).increment(*n),
                Count::Tokens(model, ty, n) => metrics::counter!(t::TOKENS, "model" => model.clone(), "type" => *ty).increment(*n),
                Count::CostMicros(model, n) => metrics::counter!(t::COST, "model" => model.clone()).increment(*n),
                Count::Events(ty, n) => metrics::counter!(t::EVENTS, "type" => ty.clone()).increment(*n),
            }
        }
        if let Some(g) = batch.gauges {
            metrics::gauge!(t::FILES_WATCHED).set(g.files_watched as f64);
            metrics::gauge!(t::OPEN_FILES).set(g.open_files as f64);
            metrics::gauge!(t::SOURCE_LAG_BYTES).set(g.lag_bytes as f64);
            metrics::gauge!(t::OLDEST_UNREAD_SECONDS).set(g.oldest_unread_seconds as f64);
            metrics::gauge!(t::PENDING_TOOL_CALLS).set(g.pending_calls as f64);
        }
    }
}

#[async_trait::async_trait]
impl Sink for PrometheusSink {
    fn key(&self) -> String {
        "prometheus".into()
    }

    async fn recover(&mut self, _at: Option<Position>) -> anyhow::Result<()> {
        // Counters count from the start of this process: nothing to restore.
        Ok(())
    }

    async fn write(&mut self, batch: &Batch) -> anyhow::Result<()> {
        self.count(batch);
        Ok(())
    }

    async fn flush(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
}
