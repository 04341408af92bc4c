//! Strait's TOML configuration: clusters, flows and residency policies, read into typed settings
//! (one type per concern, [`settings`]) and validated once into the [`Flow`]s the rest of Strait
//! uses.
//!
//! `docs/configuration.md` documents every key (a test checks it against these types). Reading
//! rejects unknown keys and every inconsistency with a [`ConfigError`] that names the field, e.g.
//! `flows[1].target: unknown cluster alias "eu"` or `flows[0].scale_out.slots: 1001 is out of
//! bounds: must be 1 to 1000 slots`.

pub mod bounds;
mod cluster;
mod cycles;
mod flow;
mod kinds;
pub mod references;
pub mod settings;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub use self::bounds::{
    BATCH_BYTES, BATCH_RECORDS, INTERVAL_MS, MAX_REPLICATION_FACTOR, OFFSET_LAG_MAX, SESSION_TIMEOUT_MS, SLOTS,
    TRANSACTION_TIMEOUT_MS,
};
pub use self::cluster::{is_secret, ClusterConfig};
pub use self::flow::{Delivery, Flow, Skip};
pub use self::kinds::{
    Compression, ConnectionsPerBroker, CopyChoice, CopyKind, CopySetting, DeliveryKind, OnSourceGap, PolicyKind,
    StartFrom, SyncsLocation,
};
pub use self::settings::{
    Batching, Checkpoints, FlowConfig, Heartbeats, Reading, Routing, ScaleOut, TopicAclSync, TopicConfigSync, Writing,
};
use crate::residency::{ResidencyConfig, ResidencyRules};
use crate::rules::err;
pub use crate::rules::ConfigError;

/// The whole file, as written; `F` is a flow as read ([`FlowConfig`]), or its raw table while
/// reading.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config<F = FlowConfig> {
    /// Kafka clusters, each known by a unique alias (`[[clusters]]`).
    #[serde(default)]
    pub clusters: Vec<ClusterConfig>,
    /// Replication flows, one per (source alias, target alias) pair (`[[flows]]`).
    #[serde(default)]
    pub flows: Vec<F>,
    /// Which topics may reach which compliance zones (`[residency]`).
    #[serde(default)]
    pub residency: ResidencyConfig,
    /// The operator endpoint (`[metrics]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<MetricsConfig>,
}

/// `[metrics]`: where `strait run` serves `/metrics`, `/health` and `/ready`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// `host:port` to listen on, e.g. `"127.0.0.1:9464"`; default: not served (unless
    /// `strait run --metrics-addr` is given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// Per-partition series (default true); `false` aggregates them per topic (the `partition`
    /// label is then empty, which Prometheus treats as absent), for clusters with many partitions.
    pub per_partition: bool,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self { listen: None, per_partition: true }
    }
}

/// The `[metrics]` settings, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsSettings {
    /// Where to serve them, if anywhere.
    pub listen: Option<SocketAddr>,
    /// Per-partition series, or per topic.
    pub per_partition: bool,
}

/// A TOML syntax error in `text` by its line, column and key, without the value, which may be a
/// secret: `TOML syntax at line 12, column 18 (offset_lag_max = ...): number too large...`.
fn syntax_error(text: &str, e: &toml::de::Error) -> String {
    let Some(span) = e.span() else { return format!("TOML syntax: {}", e.message()) };
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or_default().chars().count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let key = text[start..].lines().next().and_then(|l| l.split_once('=')).map(|(k, _)| k.trim());
    let key = key.map_or(String::new(), |k| format!(" ({k} = ...)"));
    format!("TOML syntax at line {line}, column {column}{key}: {}", e.message())
}

/// `T` read from `value` (a flow's table or part of it); errors name `prefix.<path>`.
fn read_at<T: DeserializeOwned>(value: toml::Value, prefix: &str) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { prefix.to_string() } else { format!("{prefix}.{path}") };
        err(field, e.into_inner().message())
    })
}

/// The keys of a `[[flows]]` table: those of each concern, and the `scale_out` table.
pub fn flow_keys() -> Vec<&'static str> {
    use serde_aux::serde_introspection::serde_introspect as keys;
    let concerns = [
        keys::<Routing>(),
        keys::<Reading>(),
        keys::<Writing>(),
        keys::<Batching>(),
        keys::<Checkpoints>(),
        keys::<Heartbeats>(),
        keys::<TopicConfigSync>(),
        keys::<TopicAclSync>(),
    ];
    concerns.into_iter().flatten().copied().chain(["scale_out"]).collect()
}

/// Why `key` is refused: no such key, the closest known one when a typo is likely (a
/// Jaro-Winkler similarity of 0.8 or more), and every key the table takes.
fn unknown_key(key: &str, known: &[&str]) -> String {
    let closest = known.iter().map(|k| (strsim::jaro_winkler(key, k), *k)).max_by(|a, b| a.0.total_cmp(&b.0));
    let hint = match closest {
        Some((score, k)) if score >= 0.8 => format!("; did you mean `{k}`?"),
        _ => String::new(),
    };
    let all = known.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
    format!("no such key{hint} (a [[flows]] table takes {all})")
}

impl FlowConfig {
    /// `flows[i]` read from its table: each concern from the same flat table, `[flows.scale_out]`
    /// from its own. Errors name the field; a key no concern has is refused.
    fn read(i: usize, table: toml::Table) -> Result<Self, ConfigError> {
        let field = format!("flows[{i}]");
        let known = flow_keys();
        if let Some(key) = table.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(err(format!("{field}.{key}"), unknown_key(key, &known)));
        }
        let scale_out = match table.get("scale_out") {
            Some(t) => read_at(t.clone(), &format!("{field}.scale_out"))?,
            None => ScaleOut::default(),
        };
        let flat = toml::Value::Table(table);
        Ok(Self {
            routing: read_at(flat.clone(), &field)?,
            reading: read_at(flat.clone(), &field)?,
            writing: read_at(flat.clone(), &field)?,
            batching: read_at(flat.clone(), &field)?,
            checkpoints: read_at(flat.clone(), &field)?,
            heartbeats: read_at(flat.clone(), &field)?,
            topic_configs: read_at(flat.clone(), &field)?,
            topic_acls: read_at(flat, &field)?,
            scale_out,
        })
    }
}

impl Config {
    /// Reads, parses and validates `path` into its flows, and checks that every file a cluster's
    /// client settings name can be read here (`ssl.ca.location`...). Errors name the file or the
    /// field, e.g. `clusters[1].client."ssl.ca.location": cannot read "/etc/ca.pem": No such file
    /// or directory`.
    pub fn load(path: &Path) -> Result<Vec<Flow>, ConfigError> {
        Self::load_with_metrics(path).map(|(flows, _)| flows)
    }

    /// [`Config::load`], with the `[metrics]` settings.
    pub fn load_with_metrics(path: &Path) -> Result<(Vec<Flow>, MetricsSettings), ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| err(&file, format!("cannot read: {e}")))?;
        let (config, given) = Self::read_named(&text, &file)?;
        let clusters = config.clusters.clone();
        let hide = |e| references::redact(e, &given);
        let resolved = config.resolve().map_err(hide)?;
        cluster::check_client_files(&clusters).map_err(hide)?;
        Ok(resolved)
    }

    /// Parses and validates TOML text into its flows. Errors name the field at fault.
    pub fn parse(text: &str) -> Result<Vec<Flow>, ConfigError> {
        Self::parse_with_metrics(text).map(|(flows, _)| flows)
    }

    /// [`Config::parse`], with the `[metrics]` settings.
    pub fn parse_with_metrics(text: &str) -> Result<(Vec<Flow>, MetricsSettings), ConfigError> {
        let (config, given) = Self::read_named(text, "")?;
        config.resolve().map_err(|e| references::redact(e, &given))
    }

    /// Reads TOML text into the typed settings, unresolved, once every reference in its strings
    /// is replaced by its value ([`references`]: `${env:NAME}`, `${file:PATH:KEY}`,
    /// `${directory:DIR:FILE}`): unknown keys, wrong types, values out of bounds and references
    /// that cannot be resolved are refused naming the field (`flows[0].commit_interval_ms`);
    /// syntax errors give TOML's message with the line.
    pub fn read(text: &str) -> Result<Self, ConfigError> {
        Self::read_named(text, "").map(|(config, _)| config)
    }

    /// [`Config::read`], with the values references gave ([`references::redact`]); errors with
    /// no field path name `file`. A syntax error gives its line and column, not the line's text,
    /// and an error about a secret setting (`is_secret`) not the value, which may be the secret.
    fn read_named(text: &str, file: &str) -> Result<(Self, Vec<String>), ConfigError> {
        let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| err(file, syntax_error(text, &e)))?;
        let given = references::resolve_table(&mut table, &references::Sources::system())?;
        let raw: Config<toml::Table> =
            serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| match e.path().to_string() {
                path if path == "." => err(file, e.into_inner().to_string()),
                path if is_secret(&path) => err(path, "wrong type or value (a secret setting: not shown)"),
                path => references::redact(err(path, e.into_inner().message()), &given),
            })?;
        let flows = raw.flows.into_iter().enumerate().map(|(i, t)| FlowConfig::read(i, t)).collect::<Result<_, _>>();
        let flows = flows.map_err(|e| references::redact(e, &given))?;
        Ok((Config { clusters: raw.clusters, flows, residency: raw.residency, metrics: raw.metrics }, given))
    }

    /// Validates the clusters, the flows and the `[metrics]` settings into the resolved flows.
    pub fn resolve(self) -> Result<(Vec<Flow>, MetricsSettings), ConfigError> {
        let metrics = self.metrics.unwrap_or_default();
        let listen = match &metrics.listen {
            Some(l) => Some(l.parse().map_err(|e| err("metrics.listen", format!("not a host:port address: {e}")))?),
            None => None,
        };
        let clusters = cluster::by_alias(&self.clusters)?;
        let residency = ResidencyRules::compile(&self.residency)?;
        if self.flows.is_empty() {
            return Err(err("flows", "at least one [[flows]] entry is required"));
        }
        let mut seen = BTreeSet::new();
        let mut flows = Vec::new();
        for (i, f) in self.flows.into_iter().enumerate() {
            let mut flow = flow::resolve(i, f, &clusters, &residency)?;
            let clients = || {
                cluster::check_batch_client(&self.clusters, &flow.source.alias)?;
                cluster::check_batch_client(&self.clusters, &flow.target.alias)
            };
            match (flow.writing.copy, flow.copy.kind) {
                (CopySetting::Batches, _) => clients()?,
                (CopySetting::Auto, CopyKind::Batches) => {
                    if let Err(e) = clients() {
                        flow.copy = CopyChoice::records_unless(Some(e.to_string()));
                    }
                }
                _ => {}
            }
            if !seen.insert((flow.source.alias.clone(), flow.target.alias.clone())) {
                return Err(err(
                    format!("flows[{i}]"),
                    format!("duplicate flow {} -> {}", flow.source.alias, flow.target.alias),
                ));
            }
            flows.push(flow);
        }
        cycles::settle_auto(&mut flows);
        cycles::check_copy_kinds(&flows)?;
        cycles::check_exactly_once_relays(&flows)?;
        Ok((flows, MetricsSettings { listen, per_partition: metrics.per_partition }))
    }
}
