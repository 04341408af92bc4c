//! Building blocks of config validation, shared by [`crate::config`] and [`crate::residency`]:
//! the error that names the field at fault, and regexes matched against whole names (as Java's
//! `Pattern.matches`, which MM2 uses for its topic and group filters).

use regex::Regex;

/// A configuration problem: the field path and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    /// Path of the offending field, e.g. `flows[0].topics[2]`, or the file for parse errors.
    pub field: String,
    /// What is wrong and, where useful, what would be right.
    pub message: String,
}

/// A [`ConfigError`] for `field`.
pub fn err(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError { field: field.into(), message: message.into() }
}

/// Compiles `patterns` for whole-name matching. Errors name `field[i]` and show the user's
/// pattern, not the anchored one.
pub fn compile(field: &str, patterns: &[String]) -> Result<Vec<Regex>, ConfigError> {
    patterns
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let bad = |e: regex::Error| err(format!("{field}[{i}]"), format!("bad regex {p:?}: {e}"));
            Regex::new(p).map_err(bad)?;
            Regex::new(&format!("^(?:{p})$")).map_err(bad)
        })
        .collect()
}

/// Include and exclude regexes, each matched against whole names.
#[derive(Debug, Clone)]
pub struct NameFilter {
    include: Vec<Regex>,
    exclude: Vec<Regex>,
}

impl NameFilter {
    /// Compiles `include` (field `{field}`) and `exclude` (field `{exclude_field}`).
    /// Errors: an empty include list, or a bad regex, naming the field.
    pub fn new(field: &str, include: &[String], exclude_field: &str, exclude: &[String]) -> Result<Self, ConfigError> {
        if include.is_empty() {
            return Err(err(field, "must list at least one regex (\".*\" for all)"));
        }
        Ok(Self { include: compile(field, include)?, exclude: compile(exclude_field, exclude)? })
    }

    /// True when `name` matches an include pattern and no exclude pattern.
    pub fn matches(&self, name: &str) -> bool {
        self.includes(name) && !self.excludes(name)
    }

    /// True when `name` matches an include pattern (whatever the excludes say).
    pub fn includes(&self, name: &str) -> bool {
        self.include.iter().any(|r| r.is_match(name))
    }

    /// True when `name` matches an exclude pattern.
    pub fn excludes(&self, name: &str) -> bool {
        self.exclude.iter().any(|r| r.is_match(name))
    }
}
