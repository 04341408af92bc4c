//! Building blocks of config validation, shared by [`crate::config`] and [`crate::residency`]:
//! the error that names the field at fault, and regexes matched against whole names (as Java's
//! `Pattern.matches`, which MM2 uses for its topic and group filters).

use regex::Regex;
use serde::{Deserialize, Serialize};

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
    patterns.iter().enumerate().map(|(i, p)| whole_name(p).map_err(|m| err(format!("{field}[{i}]"), m))).collect()
}

/// `pattern` compiled to match whole names; the error shows the user's pattern.
fn whole_name(pattern: &str) -> Result<Regex, String> {
    let bad = |e: regex::Error| format!("bad regex {pattern:?}: {e}");
    Regex::new(pattern).map_err(bad)?;
    Regex::new(&format!("^(?:{pattern})$")).map_err(bad)
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

    /// The include and exclude regexes as anchored patterns, which [`NameFilter::new`] takes
    /// back unchanged in meaning.
    pub fn patterns(&self) -> (Vec<String>, Vec<String>) {
        let strings = |rs: &[Regex]| rs.iter().map(|r| r.as_str().to_string()).collect();
        (strings(&self.include), strings(&self.exclude))
    }
}

/// Regexes matched against whole names, read from a TOML list of strings: each is compiled as it
/// is read, so a bad one is refused naming its index (`...sync_topic_configs_exclude[1]: bad regex
/// "(": ...`). Written back as the user's patterns. Derefs to the compiled regexes.
#[derive(Debug, Clone, Default)]
pub struct Patterns {
    written: Vec<String>,
    compiled: Vec<Regex>,
}

/// One pattern of a [`Patterns`] list, compiled as it is read.
struct Pattern(String, Regex);

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let written = String::deserialize(d)?;
        let compiled = whole_name(&written).map_err(serde::de::Error::custom)?;
        Ok(Pattern(written, compiled))
    }
}

impl<'de> Deserialize<'de> for Patterns {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (written, compiled) = Vec::<Pattern>::deserialize(d)?.into_iter().map(|Pattern(w, c)| (w, c)).unzip();
        Ok(Self { written, compiled })
    }
}

impl Serialize for Patterns {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.written.serialize(s)
    }
}

impl std::ops::Deref for Patterns {
    type Target = [Regex];

    fn deref(&self) -> &[Regex] {
        &self.compiled
    }
}

impl Patterns {
    /// The patterns as the user wrote them.
    pub fn written(&self) -> &[String] {
        &self.written
    }
}
