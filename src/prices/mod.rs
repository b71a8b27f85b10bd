//! The price tables the shell hands the core's pricing (`transcript::pricing`): the one built
//! into the binary (`prices.json`, LiteLLM's prices; see `PROVENANCE.md` beside it) or the
//! file a user gives with `--prices FILE`.

use crate::transcript::model::Usage;
use crate::transcript::pricing::{self, Price, Prices};
use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

/// The table built into the binary.
pub const BUILTIN: &str = include_str!("prices.json");

/// The built-in table, parsed once.
pub fn builtin() -> &'static Prices {
    static TABLE: OnceLock<Prices> = OnceLock::new();
    TABLE.get_or_init(|| Prices::parse(BUILTIN).expect("the built-in price table parses (tested)"))
}

/// The table of `--prices FILE`, or the built-in one. An unreadable or invalid file is an
/// error naming it.
pub fn load(file: Option<&Path>) -> anyhow::Result<Prices> {
    let Some(path) = file else { return Ok(builtin().clone()) };
    let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("--prices {}: {e}", path.display()))?;
    Prices::parse(&text).map_err(|e| anyhow::anyhow!("--prices {}: {e}", path.display()))
}

/// A table and the prices it found for the models asked about (a lookup may scan the table).
#[derive(Debug, Clone)]
pub struct Pricer {
    table: Prices,
    found: HashMap<String, Option<(String, Price)>>,
}

/// The cost of one model's tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct Cost {
    /// US dollars, or None when the table has no price for the model (never a silent 0).
    pub usd: Option<f64>,
    /// The table's name for the price used.
    pub priced_as: Option<String>,
}

impl Pricer {
    /// Prices with `table`.
    pub fn new(table: Prices) -> Self {
        Pricer { table, found: HashMap::new() }
    }

    /// The cost of `all` tokens of `model`, `long` of them from long-context requests.
    pub fn cost(&mut self, model: &str, all: &Usage, long: &Usage) -> Cost {
        let table = &self.table;
        let hit = self.found.entry(model.to_owned()).or_insert_with(|| table.lookup(model).map(|(m, p)| (m.to_owned(), *p)));
        match hit {
            Some((name, p)) => Cost { usd: Some(pricing::cost(p, all, long)), priced_as: Some(name.clone()) },
            None => Cost { usd: None, priced_as: None },
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_builtin_table_parses_and_prices_the_agents_models() {
        let t = super::builtin();
        assert!(t.len() > 500, "{}", t.len());
        for m in ["claude-opus-4-6", "claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001", "gpt-5-codex", "gpt-5", "gemini-2.5-pro"] {
            assert_eq!(t.lookup(m).map(|(n, _)| n), Some(m), "{m}");
        }
    }
}
