//! Cost: token counts priced by a price table in LiteLLM's shape (`model_prices_and_context_window.json`:
//! one object per model, US dollars per token). Pricing is data and a pure function of it: the
//! table is parsed from text handed in (the shell reads `--prices FILE` or takes the table
//! built into the binary), and [`cost`] is arithmetic.
//!
//! How the providers price what the counts hold:
//! - **input**, **output** (reasoning included) and **cache reads** at their per-token prices;
//! - **cache writes** at `cache_creation_input_token_cost`, and the part written with a one-hour
//!   lifetime ([`Usage::cache_creation_1h`]) at `cache_creation_input_token_cost_above_1hr`
//!   when the table has it (Anthropic charges 2x input for those, 1.25x for five minutes);
//! - a request whose prompt (input, cache reads and writes) passed [`LONG_CONTEXT_TOKENS`] is
//!   charged at the `*_above_200k_tokens` prices *as a whole*, its output included (Anthropic's
//!   and Google's long-context pricing); the checker keeps those requests' tokens apart
//!   (`Stats::long_context`). A price the table has no long tier for stays the base price.

use crate::transcript::model::Usage;
use serde::Deserialize;

/// The prompt size past which a request is a long-context one (the `_above_200k_tokens` of
/// LiteLLM's field names).
pub const LONG_CONTEXT_TOKENS: u64 = 200_000;

/// Prices of one model, in US dollars per token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
pub struct Price {
    /// Input not read from or written to the cache.
    #[serde(rename = "input_cost_per_token")]
    pub input: Option<f64>,
    /// Output.
    #[serde(rename = "output_cost_per_token")]
    pub output: Option<f64>,
    /// A cache write (five-minute lifetime).
    #[serde(rename = "cache_creation_input_token_cost")]
    pub cache_write: Option<f64>,
    /// A cache write with a one-hour lifetime.
    #[serde(rename = "cache_creation_input_token_cost_above_1hr")]
    pub cache_write_1h: Option<f64>,
    /// A cache read.
    #[serde(rename = "cache_read_input_token_cost")]
    pub cache_read: Option<f64>,
    /// Input of a long-context request.
    #[serde(rename = "input_cost_per_token_above_200k_tokens")]
    pub long_input: Option<f64>,
    /// Output of a long-context request.
    #[serde(rename = "output_cost_per_token_above_200k_tokens")]
    pub long_output: Option<f64>,
    /// A cache write of a long-context request.
    #[serde(rename = "cache_creation_input_token_cost_above_200k_tokens")]
    pub long_cache_write: Option<f64>,
    /// A cache read of a long-context request.
    #[serde(rename = "cache_read_input_token_cost_above_200k_tokens")]
    pub long_cache_read: Option<f64>,
}

impl Price {
    /// Whether the entry prices tokens at all (LiteLLM also lists image and audio models,
    /// priced per image or second: those are no price for a token count).
    fn prices_tokens(&self) -> bool {
        self.input.is_some() || self.output.is_some()
    }
}

/// A price table: model names and their prices, in the table's order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices {
    entries: Vec<(String, Price)>,
}

/// Why a price table could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub String);

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Prices {
    /// Parses a table in LiteLLM's shape: a JSON object of model name to an object of prices.
    /// Fields other than the prices are ignored, and so are entries that price no tokens; an
    /// entry whose price is not a number (or negative) is an error naming it, as is a table
    /// that prices no model.
    pub fn parse(text: &str) -> Result<Prices, Invalid> {
        let v: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text).map_err(|e| Invalid(format!("not a JSON object of model prices: {e}")))?;
        let mut entries = Vec::with_capacity(v.len());
        for (model, p) in v {
            if !p.is_object() {
                return Err(Invalid(format!("{model:?}: not an object of prices")));
            }
            let price: Price = serde_json::from_value(p).map_err(|e| Invalid(format!("{model:?}: {e}")))?;
            let all = [
                price.input,
                price.output,
                price.cache_write,
                price.cache_write_1h,
                price.cache_read,
                price.long_input,
                price.long_output,
                price.long_cache_write,
                price.long_cache_read,
            ];
            if all.iter().flatten().any(|x| !x.is_finite() || *x < 0.0) {
                return Err(Invalid(format!("{model:?}: a price is negative or not finite")));
            }
            if price.prices_tokens() {
                entries.push((model, price));
            }
        }
        if entries.is_empty() {
            return Err(Invalid("no model in it has a per-token price".into()));
        }
        Ok(Prices { entries })
    }

    /// How many models the table prices.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it prices none (never, for a parsed table).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The price of `model` and the table's name for it, found as ccusage 19 finds it: the
    /// name itself; else the name behind one of the prefixes LiteLLM files Claude and
    /// OpenRouter models under; else the entry whose name contains the model's or is contained
    /// in it (case aside), the closest in length, the first in the table on a tie (so
    /// `converse/jp.anthropic.claude-haiku-4-5-20251001-v1:0` finds Bedrock's Japanese entry),
    /// where the part matched has a version number and six characters (unlike ccusage).
    /// None: the table does not price it, and its cost is unknown.
    pub fn lookup(&self, model: &str) -> Option<(&str, &Price)> {
        const PREFIXES: [&str; 5] = ["anthropic/", "claude-3-5-", "claude-3-", "claude-", "openrouter/openai/"];
        let exact = |name: &str| self.entries.iter().find(|(m, _)| m == name).map(|(m, p)| (m.as_str(), p));
        if model.is_empty() {
            return None;
        }
        if let Some(hit) = exact(model) {
            return Some(hit);
        }
        if let Some(hit) = PREFIXES.iter().find_map(|p| exact(&format!("{p}{model}"))) {
            return Some(hit);
        }
        let want = model.to_lowercase();
        let mut best: Option<(usize, &str, &Price)> = None;
        for (m, p) in &self.entries {
            let have = m.to_lowercase();
            let inner = if have.len() < want.len() { &have } else { &want };
            if !(have.contains(&want) || want.contains(&have)) || !specific(inner) {
                continue;
            }
            let diff = have.len().abs_diff(want.len());
            if best.is_none_or(|(d, _, _)| diff < d) {
                best = Some((diff, m, p));
            }
        }
        best.map(|(_, m, p)| (m, p))
    }
}

/// Whether a name says enough to be matched inside another: a version number in it and six
/// characters at least. ccusage matches any part (a model named `m` would take the first price
/// whose name has an `m`); a wrong price is worse than an unknown one.
fn specific(name: &str) -> bool {
    name.len() >= 6 && name.bytes().any(|b| b.is_ascii_digit())
}

/// The cost in US dollars of `all` tokens of a model at `price`, of which `long` came from
/// long-context requests (a part of `all`, as the checker counts them).
pub fn cost(price: &Price, all: &Usage, long: &Usage) -> f64 {
    let base = Usage {
        key: 0,
        input: all.input.saturating_sub(long.input),
        output: all.output.saturating_sub(long.output),
        cache_read: all.cache_read.saturating_sub(long.cache_read),
        cache_creation: all.cache_creation.saturating_sub(long.cache_creation),
        cache_creation_1h: all.cache_creation_1h.saturating_sub(long.cache_creation_1h),
    };
    let long_price = Price {
        input: price.long_input.or(price.input),
        output: price.long_output.or(price.output),
        cache_write: price.long_cache_write.or(price.cache_write),
        // LiteLLM has no one-hour write price for long requests: the long write price, else
        // the one-hour price.
        cache_write_1h: price.long_cache_write.or(price.cache_write_1h),
        cache_read: price.long_cache_read.or(price.cache_read),
        ..Price::default()
    };
    at(price, &base) + at(&long_price, long)
}

/// Tokens times their prices; a price the table lacks charges nothing for its tokens (LiteLLM
/// lists no cache write price for a model without one, such as OpenAI's).
fn at(p: &Price, u: &Usage) -> f64 {
    let n = |t: u64, price: Option<f64>| t as f64 * price.unwrap_or(0.0);
    let one_hour = u.cache_creation_1h.min(u.cache_creation);
    n(u.input, p.input)
        + n(u.output, p.output)
        + n(u.cache_read, p.cache_read)
        + n(u.cache_creation - one_hour, p.cache_write)
        + n(one_hour, p.cache_write_1h.or(p.cache_write))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, cache_read: u64, cache_creation: u64, cache_creation_1h: u64) -> Usage {
        Usage { key: 0, input, output, cache_read, cache_creation, cache_creation_1h }
    }

    const SONNET: &str = r#"{
        "claude-sonnet-4-5": {"input_cost_per_token": 3e-6, "output_cost_per_token": 1.5e-5,
            "cache_creation_input_token_cost": 3.75e-6, "cache_creation_input_token_cost_above_1hr": 6e-6,
            "cache_read_input_token_cost": 3e-7,
            "input_cost_per_token_above_200k_tokens": 6e-6, "output_cost_per_token_above_200k_tokens": 2.25e-5,
            "cache_creation_input_token_cost_above_200k_tokens": 7.5e-6, "cache_read_input_token_cost_above_200k_tokens": 6e-7,
            "max_tokens": 64000, "mode": "chat"},
        "gpt-5": {"input_cost_per_token": 1.25e-6, "output_cost_per_token": 1e-5, "cache_read_input_token_cost": 1.25e-7},
        "jp.anthropic.claude-haiku-4-5-20251001-v1:0": {"input_cost_per_token": 1.1e-6, "output_cost_per_token": 5.5e-6},
        "anthropic.claude-haiku-4-5-20251001-v1:0": {"input_cost_per_token": 1e-6, "output_cost_per_token": 5e-6},
        "dall-e-2": {"output_cost_per_pixel": 0.0, "mode": "image_generation"}
    }"#;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs().max(1.0)
    }

    #[test]
    fn base_prices_and_both_cache_lifetimes() {
        let t = Prices::parse(SONNET).unwrap();
        let (_, p) = t.lookup("claude-sonnet-4-5").unwrap();
        // 1000 in, 200 out, 10k read, 4000 written of which 1000 for an hour.
        let c = cost(p, &usage(1000, 200, 10_000, 4000, 1000), &Usage::default());
        let want = 1000.0 * 3e-6 + 200.0 * 1.5e-5 + 10_000.0 * 3e-7 + 3000.0 * 3.75e-6 + 1000.0 * 6e-6;
        assert!(close(c, want), "{c} vs {want}");
        // Without a one-hour price, one-hour writes are written at the five-minute price.
        let (_, g) = t.lookup("gpt-5").unwrap();
        let c = cost(&Price { cache_write: Some(1e-6), ..*g }, &usage(0, 0, 0, 10, 4), &Usage::default());
        assert!(close(c, 10.0 * 1e-6), "{c}");
        // A price the table lacks (OpenAI writes no cache) charges nothing for those tokens.
        assert!(close(cost(g, &usage(100, 10, 1000, 50, 0), &Usage::default()), 100.0 * 1.25e-6 + 10.0 * 1e-5 + 1000.0 * 1.25e-7));
    }

    #[test]
    fn a_long_request_is_priced_at_the_long_rates_as_a_whole() {
        let t = Prices::parse(SONNET).unwrap();
        let (_, p) = t.lookup("claude-sonnet-4-5").unwrap();
        // Two requests: a short one (1000 in, 100 out) and a long one (10 in, 250k read, 300 out).
        let short = usage(1000, 100, 0, 0, 0);
        let long = usage(10, 300, 250_000, 0, 0);
        let mut all = short;
        all.add(&long);
        let c = cost(p, &all, &long);
        let want = (1000.0 * 3e-6 + 100.0 * 1.5e-5) + (10.0 * 6e-6 + 300.0 * 2.25e-5 + 250_000.0 * 6e-7);
        assert!(close(c, want), "{c} vs {want}");
        // A model without a long tier keeps its base prices for long requests.
        let (_, g) = t.lookup("gpt-5").unwrap();
        assert!(close(cost(g, &long, &long), cost(g, &long, &Usage::default())));
    }

    #[test]
    fn the_checker_keeps_long_requests_apart() {
        let line = |id: &str, read: u64, out: u64| {
            format!(
                "{{\"type\":\"assistant\",\"uuid\":\"{id}{out}\",\"message\":{{\"id\":\"{id}\",\"model\":\"m\",\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"x\"}}],\"usage\":{{\"input_tokens\":1,\"cache_read_input_tokens\":{read},\"cache_creation_input_tokens\":0,\"output_tokens\":{out}}}}}}}\n"
            )
        };
        // `a` is long (its final usage replaces its first), `b` is not.
        let input = [line("a", 200_000, 5), line("b", 100, 7), line("a", 200_000, 50)].concat();
        let (_, stats, _) = crate::transcript::check_bytes(input.as_bytes(), Default::default()).unwrap();
        let long = stats.long_context["m"];
        assert_eq!((long.input, long.output, long.cache_read), (1, 50, 200_000));
        let all = stats.tokens["m"];
        assert_eq!((all.input, all.output, all.cache_read), (2, 57, 200_100));
    }

    #[test]
    fn lookup_finds_names_as_ccusage_does() {
        let t = Prices::parse(SONNET).unwrap();
        assert_eq!(t.lookup("gpt-5").unwrap().0, "gpt-5");
        assert_eq!(t.lookup("sonnet-4-5").unwrap().0, "claude-sonnet-4-5", "a key containing the name");
        assert_eq!(t.lookup("converse/jp.anthropic.claude-haiku-4-5-20251001-v1:0").unwrap().0, "jp.anthropic.claude-haiku-4-5-20251001-v1:0");
        assert_eq!(t.lookup("unknown"), None);
        assert_eq!(t.lookup("m"), None, "a part without a version number matches nothing");
        assert_eq!(t.lookup("sonnet"), None);
        assert_eq!(t.lookup("4-5"), None, "nor one too short");
        assert_eq!(t.lookup("claude-x"), None);
        assert_eq!(t.lookup(""), None);
        assert_eq!(t.len(), 4, "the image model prices no tokens");
    }

    #[test]
    fn a_bad_table_says_what_is_wrong() {
        assert!(Prices::parse("[1]").unwrap_err().0.contains("not a JSON object"));
        assert!(Prices::parse("{\"m\": 3}").unwrap_err().0.contains("\"m\": not an object"));
        assert!(Prices::parse("{\"m\": {\"input_cost_per_token\": \"cheap\"}}").unwrap_err().0.starts_with("\"m\": "));
        assert!(Prices::parse("{\"m\": {\"input_cost_per_token\": -1}}").unwrap_err().0.contains("negative"));
        assert!(Prices::parse("{\"m\": {\"mode\": \"image_generation\"}}").unwrap_err().0.contains("no model"));
    }

    #[test]
    fn the_one_hour_part_is_read_from_claude_lines() {
        let line = "{\"type\":\"assistant\",\"uuid\":\"u\",\"message\":{\"id\":\"a\",\"model\":\"m\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":1,\"cache_creation_input_tokens\":30,\"cache_creation\":{\"ephemeral_5m_input_tokens\":10,\"ephemeral_1h_input_tokens\":20},\"output_tokens\":2}}}\n";
        let (_, stats, _) = crate::transcript::check_bytes(line.as_bytes(), Default::default()).unwrap();
        assert_eq!((stats.tokens["m"].cache_creation, stats.tokens["m"].cache_creation_1h), (30, 20));
    }
}
