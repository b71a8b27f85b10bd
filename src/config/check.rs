//! The spanned reader: every error of a file at once, each with its key's line.

use super::model::{default_sinks, default_stages, Config, DaemonConfig, SinkConfig, SourceConfig, StageConfig};
use super::resolve::{Place, Resolved};
use std::path::Path;

/// Reads a configuration file.
fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| ConfigError::Io { path: path.display().to_string(), message: e.to_string() })
}

/// A TOML error, with the line it points at.
fn parse_error(e: &toml::de::Error, text: &str, path: &str) -> ConfigError {
    let line = e.span().map_or(1, |s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    ConfigError::Parse { path: path.to_owned(), line, message: e.message().trim().to_owned() }
}

/// A configuration error: what, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// TOML syntax, an unknown key, or a value of the wrong type.
    #[error("{path}:{line}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// 1-based line.
        line: usize,
        /// What is wrong (naming the key).
        message: String,
    },
    /// A value that parses but cannot be used.
    #[error("{path}:{}`{key}`: {message}", line.map_or_else(|| " ".to_owned(), |l| format!("{l}: ")))]
    Invalid {
        /// The file.
        path: String,
        /// 1-based line of the key (of its table when the key is absent), when known.
        line: Option<usize>,
        /// The key, as a dotted path (`sources[0].format`).
        key: String,
        /// Why.
        message: String,
    },
}

impl ConfigError {
    /// The file, the line (when there is one) and the message without them: what
    /// `validate-config` prints as `path:line: error: message`.
    pub fn parts(&self) -> (&str, Option<usize>, String) {
        match self {
            ConfigError::Io { path, message } => (path, None, message.clone()),
            ConfigError::Parse { path, line, message } => (path, Some(*line), message.clone()),
            ConfigError::Invalid { path, line, key, message } => (path, *line, format!("`{key}`: {message}")),
        }
    }
}

/// Every error of a configuration file, in the order of their lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl std::fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        ConfigErrors(vec![e])
    }
}

impl Config {
    /// Parses TOML text. `path` only names the file in errors.
    pub fn parse(text: &str, path: &str) -> Result<Config, ConfigError> {
        toml::from_str::<Config>(text).map_err(|e| parse_error(&e, text, path))
    }

    /// Reads and parses a file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = read(path)?;
        Config::parse(&text, &path.display().to_string())
    }

    /// Reads, parses and validates a file, with every error it has (see [`Config::check_text`]);
    /// with `env`, the machine too ([`Resolved::environment_problems`]).
    pub fn load_checked(path: &Path, env: bool) -> Result<Resolved, ConfigErrors> {
        let text = read(path)?;
        Config::check_text_with(&text, &path.display().to_string(), env)
    }

    /// Parses and validates TOML text, collecting every error rather than stopping at the
    /// first: each section and each element of `sources`, `stages` and `sinks` is read on its
    /// own, so that one bad element does not hide the next, and values that parse but cannot
    /// work are named with the line of their key. A syntax error stops there (nothing after it
    /// can be trusted).
    pub fn check_text(text: &str, path: &str) -> Result<Resolved, ConfigErrors> {
        Config::check_text_with(text, path, false)
    }

    /// [`Config::check_text`], and with `env` also what `run` would need of this machine (see
    /// [`Resolved::environment_problems`]), each problem named with its key's line.
    pub fn check_text_with(text: &str, path: &str, env: bool) -> Result<Resolved, ConfigErrors> {
        use toml::de::{DeTable, DeValue, ValueDeserializer};
        let doc = DeTable::parse(text).map_err(|e| parse_error(&e, text, path))?;
        let line_of = |pos: usize| text[..pos.min(text.len())].matches('\n').count() + 1;
        let mut errors = Vec::new();
        let mut config = Config { daemon: DaemonConfig::default(), sources: Vec::new(), stages: default_stages(), sinks: default_sinks() };
        // Where each element that parsed came from: (its index in the file, its value).
        let mut origin: std::collections::BTreeMap<&'static str, Vec<(usize, &toml::Spanned<DeValue<'_>>)>> = Default::default();
        let mut sections: std::collections::BTreeMap<&'static str, &toml::Spanned<DeValue<'_>>> = Default::default();
        fn element<T: serde::de::DeserializeOwned>(v: &toml::Spanned<DeValue<'_>>) -> Result<T, toml::de::Error> {
            T::deserialize(ValueDeserializer::from(v.clone()))
        }
        for (k, v) in doc.get_ref().iter() {
            let key = k.get_ref().as_ref();
            let section: &'static str = match key {
                "daemon" => "daemon",
                "sources" => "sources",
                "stages" => "stages",
                "sinks" => "sinks",
                other => {
                    errors.push(ConfigError::Parse {
                        path: path.to_owned(),
                        line: line_of(k.span().start),
                        message: format!("unknown field `{other}`, expected one of `daemon`, `sources`, `stages`, `sinks`"),
                    });
                    continue;
                }
            };
            sections.insert(section, v);
            let fail = |e: toml::de::Error, at: &toml::Spanned<DeValue<'_>>, what: String| ConfigError::Parse {
                path: path.to_owned(),
                line: line_of(e.span().unwrap_or(at.span()).start),
                message: format!("`{what}`: {}", e.message().trim()),
            };
            if section == "daemon" {
                match element::<DaemonConfig>(v) {
                    Ok(d) => config.daemon = d,
                    Err(e) => errors.push(fail(e, v, "daemon".into())),
                }
                continue;
            }
            let Some(items) = v.get_ref().as_array() else {
                errors.push(ConfigError::Parse {
                    path: path.to_owned(),
                    line: line_of(v.span().start),
                    message: format!("`{section}` must be an array of tables (`[[{section}]]`)"),
                });
                continue;
            };
            let kept = origin.entry(section).or_default();
            match section {
                "sources" => config.sources.clear(),
                "stages" => config.stages.clear(),
                _ => config.sinks.clear(),
            }
            for (i, item) in items.iter().enumerate() {
                let what = format!("{section}[{i}]");
                let parsed = match section {
                    "sources" => element::<SourceConfig>(item).map(|x| config.sources.push(x)),
                    "stages" => element::<StageConfig>(item).map(|x| config.stages.push(x)),
                    _ => element::<SinkConfig>(item).map(|x| config.sinks.push(x)),
                };
                match parsed {
                    Ok(()) => kept.push((i, item)),
                    Err(e) => errors.push(fail(e, item, what)),
                }
            }
        }
        // The line of a place: its key's value, else its element, else its section.
        let locate = |p: &Place| -> (String, Option<usize>) {
            let elements = origin.get(p.section);
            let (index, value) = match (p.index, elements) {
                (Some(i), Some(e)) => match e.get(i) {
                    Some((orig, v)) => (Some(*orig), Some(*v)),
                    None => (Some(i), None),
                },
                (i, _) => (i, sections.get(p.section).copied()),
            };
            let dotted = Place { index, ..p.clone() }.dotted();
            let span = value.map(|v| {
                p.key
                    .and_then(|k| v.get_ref().as_table().and_then(|t| t.iter().find(|(name, _)| name.get_ref() == k)).map(|(_, x)| x.span()))
                    .unwrap_or(v.span())
            });
            (dotted, span.map(|s| line_of(s.start)))
        };
        let (resolved, mut problems) = config.resolve();
        if let (Some(r), true) = (&resolved, env) {
            problems.extend(r.environment_problems());
        }
        for (place, message) in problems {
            let (key, line) = locate(&place);
            errors.push(ConfigError::Invalid { path: path.to_owned(), line, key, message });
        }
        match resolved {
            Some(r) if errors.is_empty() => Ok(r),
            _ => {
                errors.sort_by_key(|e| e.parts().1.unwrap_or(0));
                Err(ConfigErrors(errors))
            }
        }
    }

    /// Checks the values and resolves sizes, formats and addresses (the first problem is the
    /// error; [`Config::check_text`] reports them all, with their lines).
    pub fn validate(self, path: &str) -> Result<Resolved, ConfigError> {
        let (resolved, problems) = self.resolve();
        match (resolved, problems.into_iter().next()) {
            (Some(r), None) => Ok(r),
            (_, Some((place, message))) => Err(ConfigError::Invalid { path: path.to_owned(), line: None, key: place.dotted(), message }),
            (None, None) => unreachable!("resolve gives a result or a problem"),
        }
    }
}
