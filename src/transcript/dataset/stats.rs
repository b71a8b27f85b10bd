//! Dataset statistics, as the OpenAI cookbook's data-preparation notebook reports them
//! (`examples/Chat_finetuning_data_prep.ipynb`): conversations, messages per role, tool calls
//! per tool, examples missing a system or user message, the distributions of messages, tokens
//! and assistant tokens per conversation, conversations over a token limit, and the tokens a
//! fine-tuning job bills for its epochs.
//!
//! Token counts follow the notebook's `num_tokens_from_messages`: 3 tokens per message, each
//! value of the message encoded (1 more for a `name`), 3 more per conversation. The notebook
//! only handles string values; here a value that is not a string (`tool_calls`, content parts)
//! is counted as its compact JSON, and `weight` (training metadata, never sent) is not counted.
//! Assistant tokens are those of assistant messages' `content` and calls. The encodings are
//! `tiktoken-rs`'s bundled `cl100k_base` (the notebook's) and `o200k_base`; nothing is fetched.
//!
//! Lines are parsed with serde_json: statistics are not the hot path (and token counting costs
//! far more than parsing). Pure: [`line_stats`] on any thread, [`Totals`] folded in line order.

use crate::transcript::formats::dataset::Dataset;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use tiktoken_rs::CoreBPE;

/// The notebook's token limit per example (`MAX_TOKENS_PER_EXAMPLE`).
pub const DEFAULT_MAX_TOKENS: u64 = 16_385;

/// A tiktoken encoding bundled in the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// `cl100k_base` (GPT-3.5, GPT-4; the notebook's).
    Cl100kBase,
    /// `o200k_base` (GPT-4o, GPT-4.1, o-series).
    O200kBase,
}

impl std::str::FromStr for Encoding {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cl100k" | "cl100k_base" => Ok(Encoding::Cl100kBase),
            "o200k" | "o200k_base" => Ok(Encoding::O200kBase),
            _ => Err(format!("unknown encoding `{s}` (expected cl100k or o200k)")),
        }
    }
}

/// A loaded tokenizer. Loading parses the bundled vocabulary (tens of milliseconds): load once.
pub struct Tokenizer {
    bpe: &'static CoreBPE,
    /// Which encoding.
    pub encoding: Encoding,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer").field("encoding", &self.encoding).finish()
    }
}

impl Tokenizer {
    /// The tokenizer of `encoding`.
    pub fn new(encoding: Encoding) -> Self {
        let bpe = match encoding {
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
            Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
        };
        Tokenizer { bpe, encoding }
    }

    /// Tokens of `text` (special-token text counted as ordinary text).
    pub fn count(&self, text: &str) -> u64 {
        self.bpe.encode_ordinary(text).len() as u64
    }

    fn value(&self, v: &Value) -> u64 {
        match v {
            Value::String(s) => self.count(s),
            Value::Null => 0,
            other => self.count(&other.to_string()),
        }
    }
}

/// What one line contributes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineStats {
    /// Whether the line holds a conversation (else it only counts as a line).
    pub conversation: bool,
    /// Messages by role as written (`from` in ShareGPT).
    pub roles: Vec<String>,
    /// Tool names of its calls.
    pub tools: Vec<String>,
    /// Conversation tokens, when counted.
    pub tokens: Option<u64>,
    /// Tokens of assistant messages, when counted.
    pub assistant_tokens: Option<u64>,
    /// Why the line could not be read (not a JSON object), as `check`'s `malformed_line` says it.
    pub unreadable: Option<String>,
}

/// Reads the statistics of one line. Lines that hold no conversation give an empty
/// [`LineStats`]; those that are not JSON objects say why in `unreadable`.
pub fn line_stats(d: Dataset, line: &[u8], tokenizer: Option<&Tokenizer>) -> LineStats {
    let Ok(Value::Object(v)) = serde_json::from_slice::<Value>(line) else {
        return LineStats { unreadable: Some(crate::transcript::finding::malformed(0, line).message), ..LineStats::default() };
    };
    let messages = d.all_messages(&v);
    if messages.is_empty() {
        return LineStats::default();
    }
    let mut s = LineStats { conversation: true, ..LineStats::default() };
    let (mut tokens, mut assistant) = (3u64, 0u64);
    for m in &messages {
        let Some(obj) = m.as_object() else { continue };
        let role = obj.get("role").or_else(|| obj.get("from")).and_then(Value::as_str).or_else(|| obj.get("type").and_then(Value::as_str));
        s.roles.push(role.unwrap_or("(none)").to_owned());
        s.tools.extend(call_names(obj));
        if let Some(t) = tokenizer {
            tokens += 3;
            for (k, val) in obj {
                if k == "weight" {
                    continue;
                }
                tokens += t.value(val) + u64::from(k == "name");
            }
            if matches!(role, Some("assistant" | "gpt" | "function_call" | "model")) {
                for k in ["content", "value", "tool_calls", "function_call", "parts"] {
                    assistant += obj.get(k).map_or(0, |v| t.value(v));
                }
            }
        }
    }
    if tokenizer.is_some() {
        s.tokens = Some(tokens);
        s.assistant_tokens = Some(assistant);
    }
    s
}

/// The tool names of a message's calls, in every shape datasets use.
fn call_names(m: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut names = Vec::new();
    let name_of = |v: &Value| v.get("name").and_then(Value::as_str).map(str::to_owned);
    for c in m.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        names.extend(c.get("function").and_then(name_of));
    }
    names.extend(m.get("function_call").and_then(name_of));
    for p in m.get("content").and_then(Value::as_array).into_iter().flatten() {
        if p.get("type").and_then(Value::as_str) == Some("tool_use") {
            names.extend(name_of(p));
        }
    }
    if m.get("type").and_then(Value::as_str) == Some("function_call") {
        names.extend(name_of(&Value::Object(m.clone())));
    }
    // Gemini: `functionCall` parts.
    for p in m.get("parts").and_then(Value::as_array).into_iter().flatten() {
        names.extend(p.get("functionCall").or_else(|| p.get("function_call")).and_then(name_of));
    }
    if m.get("from").and_then(Value::as_str) == Some("function_call") {
        if let Some(text) = m.get("value").and_then(Value::as_str) {
            names.extend(crate::transcript::formats::dataset::sharegpt_calls(text).into_iter().map(|(n, _, _)| n));
        }
    }
    names
}

/// min, max, mean, median, p5 and p95 of a distribution (numpy's linear quantiles).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Distribution {
    /// Smallest.
    pub min: u64,
    /// Largest.
    pub max: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// 5th percentile.
    pub p5: f64,
    /// 95th percentile.
    pub p95: f64,
}

impl Distribution {
    /// The distribution of `values` (sorted in place).
    pub fn of(values: &mut [u32]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        values.sort_unstable();
        let q = |p: f64| {
            let pos = p * (values.len() - 1) as f64;
            let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
            let (a, b) = (f64::from(values[lo]), f64::from(values[hi]));
            a + (b - a) * (pos - lo as f64)
        };
        let sum: u64 = values.iter().map(|&v| u64::from(v)).sum();
        Some(Distribution {
            min: u64::from(values[0]),
            max: u64::from(values[values.len() - 1]),
            mean: sum as f64 / values.len() as f64,
            median: q(0.5),
            p5: q(0.05),
            p95: q(0.95),
        })
    }
}

/// Statistics over a whole file.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    /// Lines seen (non-blank).
    pub lines: u64,
    /// Lines that hold a conversation.
    pub conversations: u64,
    /// Messages by role.
    pub roles: BTreeMap<String, u64>,
    /// Calls by tool name.
    pub tools: BTreeMap<String, u64>,
    /// Conversations with no system message.
    pub missing_system: u64,
    /// Conversations with no user message.
    pub missing_user: u64,
    /// Lines that could not be read (not JSON objects, or over the line limit): not counted.
    pub unreadable: u64,
    messages_per: Vec<u32>,
    tokens_per: Vec<u32>,
    assistant_per: Vec<u32>,
    /// Lines whose conversation has more tokens than the limit.
    pub over_limit: Vec<(u64, u64)>,
    billed: u64,
    max_tokens: u64,
}

impl Totals {
    /// Empty totals; `max_tokens` is the per-example limit.
    pub fn new(max_tokens: u64) -> Self {
        Totals { max_tokens, ..Totals::default() }
    }

    /// Adds line `line`'s statistics.
    pub fn add(&mut self, line: u64, s: LineStats) {
        self.lines += 1;
        self.unreadable += u64::from(s.unreadable.is_some());
        if !s.conversation {
            return;
        }
        self.conversations += 1;
        let has = |r: &[&str]| s.roles.iter().any(|x| r.contains(&x.as_str()));
        self.missing_system += u64::from(!has(&["system", "developer"]));
        self.missing_user += u64::from(!has(&["user", "human"]));
        self.messages_per.push(s.roles.len() as u32);
        for r in s.roles {
            *self.roles.entry(r).or_default() += 1;
        }
        for t in s.tools {
            *self.tools.entry(t).or_default() += 1;
        }
        if let (Some(t), Some(a)) = (s.tokens, s.assistant_tokens) {
            self.tokens_per.push(t.min(u64::from(u32::MAX)) as u32);
            self.assistant_per.push(a.min(u64::from(u32::MAX)) as u32);
            self.billed += t.min(self.max_tokens);
            if t > self.max_tokens {
                self.over_limit.push((line, t));
            }
        }
    }

    /// The report; `epochs` overrides the notebook's default epoch count.
    pub fn report(mut self, encoding: Option<Encoding>, epochs: Option<u64>) -> Report {
        let tokens = encoding.map(|encoding| {
            let n = self.conversations;
            let default_epochs = default_epochs(n);
            let epochs = epochs.unwrap_or(default_epochs);
            TokenReport {
                encoding,
                total: self.tokens_per.iter().map(|&t| u64::from(t)).sum(),
                per_conversation: Distribution::of(&mut self.tokens_per),
                assistant_per_conversation: Distribution::of(&mut self.assistant_per),
                max_tokens: self.max_tokens,
                over_limit: self.over_limit.len() as u64,
                over_limit_lines: std::mem::take(&mut self.over_limit).into_iter().map(|(l, _)| l).collect(),
                billed_per_epoch: self.billed,
                epochs,
                billed: self.billed * epochs,
            }
        });
        Report {
            lines: self.lines,
            conversations: self.conversations,
            messages: self.roles.values().sum(),
            messages_per_role: self.roles,
            tool_calls: self.tools.values().sum(),
            tool_calls_per_tool: self.tools,
            missing_system: self.missing_system,
            missing_user: self.missing_user,
            unreadable_lines: self.unreadable,
            messages_per_conversation: Distribution::of(&mut self.messages_per),
            tokens,
        }
    }
}

/// The notebook's default epoch count for `n` examples: 3, raised towards 100 examples seen
/// (at most 25 epochs), lowered towards 25,000 (at least 1).
pub fn default_epochs(n: u64) -> u64 {
    const TARGET_EPOCHS: u64 = 3;
    const MIN_TARGET_EXAMPLES: u64 = 100;
    const MAX_TARGET_EXAMPLES: u64 = 25_000;
    const MIN_DEFAULT_EPOCHS: u64 = 1;
    const MAX_DEFAULT_EPOCHS: u64 = 25;
    if n == 0 {
        return TARGET_EPOCHS;
    }
    if n * TARGET_EPOCHS < MIN_TARGET_EXAMPLES {
        MAX_DEFAULT_EPOCHS.min(MIN_TARGET_EXAMPLES / n)
    } else if n * TARGET_EPOCHS > MAX_TARGET_EXAMPLES {
        MIN_DEFAULT_EPOCHS.max(MAX_TARGET_EXAMPLES / n)
    } else {
        TARGET_EPOCHS
    }
}

/// Token figures of a file.
#[derive(Debug, Clone, Serialize)]
pub struct TokenReport {
    /// The encoding counted with.
    pub encoding: Encoding,
    /// Tokens of all conversations.
    pub total: u64,
    /// Tokens per conversation.
    pub per_conversation: Option<Distribution>,
    /// Tokens of assistant messages per conversation.
    pub assistant_per_conversation: Option<Distribution>,
    /// The limit per conversation.
    pub max_tokens: u64,
    /// Conversations over the limit (truncated in training).
    pub over_limit: u64,
    /// Their lines.
    pub over_limit_lines: Vec<u64>,
    /// Tokens billed for one epoch: each conversation counted up to the limit.
    pub billed_per_epoch: u64,
    /// Epochs (the notebook's default for this many examples, or as given).
    pub epochs: u64,
    /// Tokens billed for all epochs.
    pub billed: u64,
}

/// Statistics of a file.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Non-blank lines.
    pub lines: u64,
    /// Lines holding a conversation.
    pub conversations: u64,
    /// Messages in them.
    pub messages: u64,
    /// Messages by role as written.
    pub messages_per_role: BTreeMap<String, u64>,
    /// Tool calls.
    pub tool_calls: u64,
    /// Tool calls by tool name.
    pub tool_calls_per_tool: BTreeMap<String, u64>,
    /// Conversations without a system (or developer) message.
    pub missing_system: u64,
    /// Conversations without a user message.
    pub missing_user: u64,
    /// Lines that could not be read (not JSON objects, or over the line limit): in `lines`,
    /// counted in nothing else.
    pub unreadable_lines: u64,
    /// Messages per conversation.
    pub messages_per_conversation: Option<Distribution>,
    /// Token figures, when counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenReport>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_as_the_notebook_does() {
        let t = Tokenizer::new(Encoding::Cl100kBase);
        // "hello world" is 2 tokens in cl100k_base; "user" and "assistant" 1 each.
        assert_eq!(t.count("hello world"), 2);
        let line = br#"{"messages":[{"role":"user","content":"hello world"},{"role":"assistant","content":"hello world","weight":1}]}"#;
        let s = line_stats(Dataset::OpenAi, line, Some(&t));
        assert_eq!(s.tokens, Some(3 + (3 + 1 + 2) + (3 + 1 + 2)));
        assert_eq!(s.assistant_tokens, Some(2));
        assert_eq!(s.roles, ["user", "assistant"]);
    }

    #[test]
    fn epochs_follow_the_notebook() {
        assert_eq!(default_epochs(5), 20);
        assert_eq!(default_epochs(1), 25);
        assert_eq!(default_epochs(100), 3);
        assert_eq!(default_epochs(20_000), 1);
        assert_eq!(default_epochs(5_000), 3);
        assert_eq!(default_epochs(10_000), 2);
    }

    #[test]
    fn totals_and_limits() {
        let mut tot = Totals::new(10);
        let t = Tokenizer::new(Encoding::O200kBase);
        let line = br#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]}]}"#;
        tot.add(1, line_stats(Dataset::OpenAi, line, Some(&t)));
        tot.add(2, line_stats(Dataset::OpenAi, b"{}", Some(&t)));
        let r = tot.report(Some(Encoding::O200kBase), Some(2));
        assert_eq!((r.lines, r.conversations, r.tool_calls), (2, 1, 1));
        assert_eq!(r.tool_calls_per_tool.get("f"), Some(&1));
        let tok = r.tokens.unwrap();
        assert_eq!(tok.over_limit_lines, [1]);
        assert_eq!((tok.billed_per_epoch, tok.billed), (10, 20));
    }
}
