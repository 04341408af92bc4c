//! References to values kept outside the config file, in Kafka's config-provider syntax
//! (KIP-297; the providers of KIP-421 and KIP-887): `${env:NAME}` (an environment variable,
//! Kafka's `EnvVarConfigProvider`), `${file:PATH:KEY}` (a key of a Java properties file,
//! `FileConfigProvider`) and `${directory:DIR:FILE}` (the whole content of a file in a directory,
//! such as a mounted Kubernetes Secret, `DirectoryConfigProvider`). Any string value of the config
//! may hold references, alone or among other text; they are resolved once, when the file is read.
//!
//! A reference that cannot be resolved is an error naming the field and the reference, never a
//! value. `${...}` without a `:` is not a reference (as in Kafka) and is left as written.

use std::path::Path;

use crate::rules::{err, ConfigError};

/// Where references find their values; [`Sources::system`] outside tests.
pub struct Sources<'a> {
    /// The value of an environment variable, if set.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

impl Sources<'static> {
    /// The process environment and the file system.
    pub fn system() -> Self {
        Sources { env: &|name| std::env::var(name).ok() }
    }
}

/// Resolves every reference in the string values of `table`, in place; returns the values the
/// references gave, for [`redact`]. Errors name the field (`clusters[0].client."sasl.password"`)
/// and the reference.
pub fn resolve_table(table: &mut toml::Table, sources: &Sources) -> Result<Vec<String>, ConfigError> {
    let mut given = Vec::new();
    for (key, value) in table.iter_mut() {
        resolve_value(value, &segment(key, ""), sources, &mut given)?;
    }
    Ok(given)
}

/// `e` with every value of `given` (what references gave, 4 characters or more) replaced by
/// `[from a reference]`: a later error about such a value (say, a file that cannot be read) names
/// the field, not the value, which may be a secret.
pub fn redact(mut e: ConfigError, given: &[String]) -> ConfigError {
    for value in given.iter().filter(|v| v.chars().count() >= 4) {
        e.message = e.message.replace(value.as_str(), "[from a reference]");
    }
    e
}

/// `key` appended to `path`, quoted when it holds a dot (`client."ssl.ca.location"`).
fn segment(key: &str, path: &str) -> String {
    let key = if key.contains('.') { format!("\"{key}\"") } else { key.to_string() };
    if path.is_empty() {
        key
    } else {
        format!("{path}.{key}")
    }
}

fn resolve_value(
    value: &mut toml::Value,
    path: &str,
    sources: &Sources,
    given: &mut Vec<String>,
) -> Result<(), ConfigError> {
    match value {
        toml::Value::String(s) if s.contains("${") => {
            *s = resolve_giving(s, sources, given).map_err(|why| err(path, why))?;
        }
        toml::Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                resolve_value(item, &format!("{path}[{i}]"), sources, given)?;
            }
        }
        toml::Value::Table(table) => {
            for (key, item) in table.iter_mut() {
                resolve_value(item, &segment(key, path), sources, given)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// `text` with each reference replaced by its value. Errors: why a reference cannot be resolved,
/// naming it.
pub fn resolve(text: &str, sources: &Sources) -> Result<String, String> {
    resolve_giving(text, sources, &mut Vec::new())
}

/// [`resolve`], adding each value a reference gave to `given`.
fn resolve_giving(text: &str, sources: &Sources, given: &mut Vec<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start..].find('}') else { break };
        let reference = &rest[start..start + len + 1];
        out.push_str(&rest[..start]);
        match parse(&reference[2..len]) {
            Some(parsed) => {
                let value = lookup(parsed, sources).map_err(|why| format!("`{reference}`: {why}"))?;
                out.push_str(&value);
                given.push(value);
            }
            None => out.push_str(reference),
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A reference's parts: provider, path (empty for `env`) and key, split as Kafka's
/// `ConfigTransformer` does (at the first colon, then at the next one if any). `None` without a
/// colon: not a reference.
fn parse(inner: &str) -> Option<(&str, &str, &str)> {
    let (provider, rest) = inner.split_once(':')?;
    Some(match rest.split_once(':') {
        Some((path, key)) => (provider, path, key),
        None => (provider, "", rest),
    })
}

/// The value one reference names.
fn lookup((provider, path, key): (&str, &str, &str), sources: &Sources) -> Result<String, String> {
    match provider {
        "env" if path.is_empty() => {
            (sources.env)(key).ok_or_else(|| format!("the environment variable {key} is not set"))
        }
        "env" => Err("an environment reference is `${env:NAME}`".into()),
        "file" if !path.is_empty() => {
            let file = std::fs::File::open(path).map_err(|e| format!("cannot read {path}: {e}"))?;
            let properties = java_properties::read(std::io::BufReader::new(file))
                .map_err(|e| format!("{path} is not a properties file: {e}"))?;
            properties.get(key).cloned().ok_or_else(|| format!("{path} has no key {key}"))
        }
        "file" => Err("a file reference is `${file:PATH:KEY}`, KEY a key of the properties file PATH".into()),
        "directory" if !path.is_empty() && !key.is_empty() && !key.contains('/') => {
            let file = Path::new(path).join(key);
            // Kafka's DirectoryConfigProvider returns the content as it is, newline included.
            std::fs::read_to_string(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))
        }
        "directory" => Err("a directory reference is `${directory:DIR:FILE}`, FILE a file name in DIR".into()),
        other => Err(format!("no config provider `{other}`: Strait has `env`, `file` and `directory`")),
    }
}

#[cfg(test)]
mod tests;
