//! The tool registry (`config/tools.toml`): tool name or glob → what running the tool does to
//! the world ([`SideEffect`]). `orphans` uses it to suggest what to do about a call without a
//! result.
//!
//! The file is data: parsed with serde (unknown keys and values are errors that name the line),
//! validated (every glob must compile), then built into a matcher. An exact name wins over a
//! glob; among globs the longest pattern wins, and on a tie the more cautious effect
//! (`external` > `write` > `read` > `none`), so adding a broad glob never makes a specific tool
//! look safer. A tool nothing matches is [`SideEffect::Unknown`]. The shipped file is built
//! into the binary as the default.

use crate::transcript::stages::orphans::SideEffect;
use globset::{Glob, GlobMatcher};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use toml::Spanned;

/// The registry shipped in `config/tools.toml`.
pub const DEFAULT: &str = include_str!("../../config/tools.toml");

/// The file's layout.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// Tool name or glob → side effect.
    tools: BTreeMap<Spanned<String>, Effect>,
}

/// A side effect as the file spells it (`unknown` is what an unlisted tool gets, not a value).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Effect {
    /// Nothing outside the conversation.
    None,
    /// Reads only.
    Read,
    /// Changes local files.
    Write,
    /// Acts beyond the files.
    External,
}

impl From<Effect> for SideEffect {
    fn from(e: Effect) -> Self {
        match e {
            Effect::None => SideEffect::None,
            Effect::Read => SideEffect::Read,
            Effect::Write => SideEffect::Write,
            Effect::External => SideEffect::External,
        }
    }
}

/// Why a registry could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The file could not be read.
    #[error("{origin}: cannot read the tool registry: {source}")]
    Io {
        /// The file.
        origin: String,
        /// The IO error.
        source: std::io::Error,
    },
    /// Not valid TOML, or not the registry's layout (the message names line and column).
    #[error("{origin}: invalid tool registry: {message}")]
    Parse {
        /// The file.
        origin: String,
        /// What is wrong, and where.
        message: String,
    },
    /// A key that is not a valid glob.
    #[error("{origin}:{line}: invalid tool glob `{key}`: {message}")]
    Glob {
        /// The file.
        origin: String,
        /// Line of the key.
        line: usize,
        /// The key.
        key: String,
        /// Why it does not compile.
        message: String,
    },
}

#[derive(Debug, Clone)]
struct Rule {
    pattern: String,
    matcher: GlobMatcher,
    effect: SideEffect,
}

/// Tool name → side effect. See the module docs.
#[derive(Debug, Clone)]
pub struct ToolRegistry {
    exact: HashMap<String, SideEffect>,
    /// Longest pattern first, then the most cautious effect.
    globs: Vec<Rule>,
}

fn caution(e: SideEffect) -> u8 {
    match e {
        SideEffect::None => 0,
        SideEffect::Read => 1,
        SideEffect::Write => 2,
        SideEffect::External => 3,
        SideEffect::Unknown => 4,
    }
}

impl ToolRegistry {
    /// Parses and validates registry text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, RegistryError> {
        let file: File = toml::from_str(text).map_err(|e| RegistryError::Parse { origin: origin.to_owned(), message: e.to_string().trim_end().to_owned() })?;
        let mut exact = HashMap::new();
        let mut globs = Vec::new();
        for (key, effect) in file.tools {
            let line = text[..key.span().start].matches('\n').count() + 1;
            let key = key.into_inner();
            let effect = SideEffect::from(effect);
            if !key.contains(['*', '?', '[', '{', '\\']) {
                exact.insert(key, effect);
                continue;
            }
            let glob = Glob::new(&key).map_err(|e| RegistryError::Glob { origin: origin.to_owned(), line, key: key.clone(), message: e.kind().to_string() })?;
            globs.push(Rule { pattern: key, matcher: glob.compile_matcher(), effect });
        }
        globs.sort_by(|a, b| b.pattern.len().cmp(&a.pattern.len()).then(caution(b.effect).cmp(&caution(a.effect))).then(a.pattern.cmp(&b.pattern)));
        Ok(ToolRegistry { exact, globs })
    }

    /// Reads and parses a registry file.
    pub fn load(path: &Path) -> Result<Self, RegistryError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| RegistryError::Io { origin: origin.clone(), source })?;
        Self::parse(&text, &origin)
    }

    /// The registry shipped with transcriptd.
    pub fn builtin() -> Self {
        Self::parse(DEFAULT, "config/tools.toml").expect("the shipped registry is valid (tested)")
    }

    /// What running `tool` does; [`SideEffect::Unknown`] when nothing matches.
    pub fn side_effect(&self, tool: &str) -> SideEffect {
        if let Some(e) = self.exact.get(tool) {
            return *e;
        }
        self.globs.iter().find(|r| r.matcher.is_match(tool)).map_or(SideEffect::Unknown, |r| r.effect)
    }

    /// Number of names and globs.
    pub fn len(&self) -> usize {
        self.exact.len() + self.globs.len()
    }

    /// Whether the registry is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_registry_covers_both_agents() {
        let r = ToolRegistry::builtin();
        for (tool, want) in [
            ("Bash", SideEffect::External),
            ("Read", SideEffect::Read),
            ("Edit", SideEffect::Write),
            ("TodoWrite", SideEffect::None),
            ("mcp__github__create_issue", SideEffect::External),
            ("exec_command", SideEffect::External),
            ("apply_patch", SideEffect::Write),
            ("update_plan", SideEffect::None),
            ("view_image", SideEffect::Read),
            ("SomethingNew", SideEffect::Unknown),
        ] {
            assert_eq!(r.side_effect(tool), want, "{tool}");
        }
    }

    #[test]
    fn exact_beats_glob_longest_glob_wins_ties_are_cautious() {
        let r = ToolRegistry::parse(
            r#"[tools]
"mcp__*" = "external"
"mcp__gh__get_*" = "read"
"mcp__gh__get_secret" = "external"
"x?" = "none"
"[x]y" = "write"
"#,
            "t.toml",
        )
        .unwrap();
        assert_eq!(r.side_effect("mcp__gh__get_issue"), SideEffect::Read);
        assert_eq!(r.side_effect("mcp__gh__get_secret"), SideEffect::External);
        assert_eq!(r.side_effect("mcp__gh__delete"), SideEffect::External);
        assert_eq!(r.side_effect("xy"), SideEffect::Write, "a tie goes to the more cautious effect");
        assert_eq!(r.len(), 5);
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = ToolRegistry::parse("[tools]\nBash = \"dangerous\"\n", "t.toml").unwrap_err().to_string();
        assert!(e.starts_with("t.toml: invalid tool registry:") && e.contains("line 2") && e.contains("dangerous"), "{e}");
        let e = ToolRegistry::parse("[tools]\nBash = \"external\"\n\"a[\" = \"read\"\n", "t.toml").unwrap_err().to_string();
        assert!(e.starts_with("t.toml:3: invalid tool glob `a[`"), "{e}");
        let e = ToolRegistry::parse("[tool]\nBash = \"external\"\n", "t.toml").unwrap_err().to_string();
        assert!(e.contains("unknown field `tool`"), "{e}");
    }
}
