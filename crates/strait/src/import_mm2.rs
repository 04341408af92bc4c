//! `strait import-mm2`: a Strait config from a MirrorMaker 2 dedicated-mode properties file
//! (`connect-mirror-maker.properties`): clusters and their security settings (under librdkafka's
//! names), enabled `A->B` flows and the MM2 settings Strait has, per flow or global as MM2 reads
//! them, built as Strait's config types ([`Config`], [`FlowConfig`]) and written as TOML with the
//! settings that differ from Strait's defaults. Every key it cannot carry is returned with the
//! reason, so nothing is dropped silently.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use crate::config::{ClusterConfig, Config, DeliveryKind, FlowConfig, PolicyKind, SyncsLocation};

mod strimzi;

pub use strimzi::{import_strimzi, SECRETS_DIR};

/// The imported config and what could not be carried.
pub struct Imported {
    /// Strait's TOML.
    pub toml: String,
    /// (key, why it was not carried), sorted by key.
    pub dropped: Vec<(String, String)>,
    /// Differences of behaviour worth knowing (MM2 defaults Strait does not share).
    pub notes: Vec<String>,
}

/// Sets one setting of a flow from an MM2 value; the error says what the value should be.
type Setter = fn(&mut FlowConfig, &str) -> Result<(), &'static str>;

/// A [`Setter`] of the flow's `$field` with the value `$convert`ed.
macro_rules! set {
    ($($field:ident).+, $convert:expr) => {
        |f, v| {
            f.$($field).+ = $convert(v)?;
            Ok(())
        }
    };
}

/// MM2 flow settings Strait has: (MM2 key, how its value sets the flow's).
const FLOW_SETTINGS: &[(&str, Setter)] = &[
    ("topics", set!(routing.topics, strings)),
    ("topics.exclude", set!(routing.topics_exclude, strings)),
    ("topics.blacklist", set!(routing.topics_exclude, strings)),
    ("groups", set!(routing.groups, strings)),
    ("groups.exclude", set!(routing.groups_exclude, strings)),
    ("groups.blacklist", set!(routing.groups_exclude, strings)),
    ("replication.policy.class", set!(routing.replication_policy, policy)),
    ("replication.policy.separator", set!(routing.separator, text)),
    ("offset-syncs.topic.location", set!(writing.offset_syncs_topic_location, location)),
    ("sync.group.offsets.enabled", set!(checkpoints.sync_group_offsets, boolean)),
    ("sync.group.offsets.interval.seconds", set!(checkpoints.sync_group_offsets_interval, seconds)),
    ("emit.checkpoints.enabled", set!(checkpoints.emit_checkpoints, boolean)),
    ("emit.checkpoints.interval.seconds", set!(checkpoints.emit_checkpoints_interval, seconds)),
    ("emit.heartbeats.enabled", set!(heartbeats.emit_heartbeats, boolean)),
    ("emit.heartbeats.interval.seconds", set!(heartbeats.emit_heartbeats_interval, seconds)),
    ("offset.lag.max", set!(writing.offset_lag_max, integer)),
    ("refresh.topics.interval.seconds", set!(reading.refresh_topics_interval, seconds)),
    ("refresh.groups.interval.seconds", set!(checkpoints.refresh_groups_interval, seconds)),
    ("replication.factor", set!(writing.replication_factor, integer)),
    ("sync.topic.configs.enabled", set!(topic_configs.sync_topic_configs, boolean)),
    ("sync.topic.configs.interval.seconds", set!(topic_configs.sync_topic_configs_interval, seconds)),
    ("config.properties.exclude", set!(topic_configs.sync_topic_configs_exclude, patterns)),
    ("sync.topic.acls.enabled", set!(topic_acls.sync_topic_acls, boolean)),
    ("sync.topic.acls.interval.seconds", set!(topic_acls.sync_topic_acls_interval, seconds)),
];

/// A comma-separated MM2 list.
fn list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

fn strings(value: &str) -> Result<Vec<String>, &'static str> {
    Ok(list(value))
}

fn text(value: &str) -> Result<String, &'static str> {
    Ok(value.trim().into())
}

fn integer<T: std::str::FromStr>(value: &str) -> Result<T, &'static str> {
    value.trim().parse().map_err(|_| "not an integer in range")
}

fn boolean(value: &str) -> Result<bool, &'static str> {
    // Kafka's BOOLEAN type ignores case.
    value.trim().to_ascii_lowercase().parse().map_err(|_| "not true or false")
}

/// MM2's `*.interval.seconds`.
fn seconds(value: &str) -> Result<Duration, &'static str> {
    value.trim().parse().map(Duration::from_secs).map_err(|_| "not a whole number of seconds")
}

fn policy(value: &str) -> Result<PolicyKind, &'static str> {
    match value.trim().rsplit('.').next() {
        Some("DefaultReplicationPolicy") => Ok(PolicyKind::Default),
        Some("IdentityReplicationPolicy") => Ok(PolicyKind::Identity),
        _ => Err("only MM2's DefaultReplicationPolicy and IdentityReplicationPolicy exist in Strait"),
    }
}

fn location(value: &str) -> Result<SyncsLocation, &'static str> {
    match value.trim() {
        "source" => Ok(SyncsLocation::Source),
        "target" => Ok(SyncsLocation::Target),
        _ => Err("not source or target"),
    }
}

/// Topic config name regexes, compiled as the config reads them.
fn patterns(value: &str) -> Result<crate::rules::Patterns, &'static str> {
    toml::Value::Array(list(value).into_iter().map(toml::Value::String).collect())
        .try_into()
        .map_err(|_| "a regex that does not compile")
}

/// Why a key that is not a Strait setting is left out.
fn reason(key: &str) -> &'static str {
    let last = key.rsplit_once("->").map_or(key, |(_, k)| k);
    let last = last.split_once('.').filter(|(alias, _)| !alias.contains('-')).map_or(last, |(_, k)| k);
    if key.starts_with("config.providers.") {
        "a config provider's parameter: Strait's providers (env, file, directory) take none"
    } else if key.ends_with("tasks.max") {
        "Strait has no Connect tasks: one flow reads every partition"
    } else if key.ends_with("topic.replication.factor") || key.ends_with("storage.replication.factor") {
        "Strait creates every topic with the flow's replication_factor"
    } else if [
        "offset.storage",
        "config.storage",
        "status.storage",
        "dedicated.mode",
        "listeners",
        "rest.",
        "converter",
    ]
    .iter()
    .any(|p| key.contains(p))
    {
        "a Kafka Connect setting: Strait does not run on Connect"
    } else if [".producer.", ".consumer.", ".admin."].iter().any(|p| key.contains(p))
        || ["producer.", "consumer.", "admin."].iter().any(|p| last.starts_with(p))
    {
        "a Java client override: set the librdkafka equivalent in the cluster's [clusters.client] table"
    } else if key.contains("ssl.") {
        "a Java TLS store librdkafka cannot read: convert it to PEM (ssl.ca.location, ssl.certificate.location, ssl.key.location) or PKCS#12 (ssl.keystore.location)"
    } else {
        "not a setting Strait has"
    }
}

/// Reads `username` and `password` out of a `PlainLoginModule` or `ScramLoginModule` JAAS line.
fn jaas_credentials(jaas: &str) -> Option<(String, String)> {
    if !(jaas.contains("PlainLoginModule") || jaas.contains("ScramLoginModule")) {
        return None;
    }
    let field = |name: &str| {
        let start = jaas.find(&format!("{name}=\""))? + name.len() + 2;
        Some(jaas[start..].split('"').next()?.to_string())
    };
    Some((field("username")?, field("password")?))
}

/// Kafka's config providers and the names Strait gives them ([`crate::config::references`]).
const PROVIDERS: &[(&str, &str)] = &[
    ("org.apache.kafka.common.config.provider.FileConfigProvider", "file"),
    ("org.apache.kafka.common.config.provider.DirectoryConfigProvider", "directory"),
    ("org.apache.kafka.common.config.provider.EnvVarConfigProvider", "env"),
];

/// `props` with MM2's config-provider references (`${<name>:...}`, `<name>` one of
/// `config.providers`) renamed after Strait's provider of the same class, so that a secret stays
/// where MM2 read it from; the `config.providers*` keys are marked used. Errors: a provider
/// class Strait does not have, naming its key.
fn with_strait_references(
    props: &HashMap<String, String>,
    used: &mut HashSet<String>,
) -> Result<HashMap<String, String>, String> {
    let mut renames = Vec::new();
    if let Some(names) = props.get("config.providers") {
        used.insert("config.providers".into());
        for name in list(names) {
            let key = format!("config.providers.{name}.class");
            let class = props.get(&key).map(|c| c.trim()).unwrap_or_default();
            let (_, strait) = PROVIDERS.iter().find(|(java, _)| *java == class).ok_or_else(|| {
                format!("{key} = {class:?}: Strait resolves only Kafka's FileConfigProvider, DirectoryConfigProvider and EnvVarConfigProvider")
            })?;
            used.insert(key);
            renames.push((name, *strait));
        }
    }
    Ok(props.iter().map(|(k, v)| (k.clone(), renamed(v, &renames))).collect())
}

/// `value` with the provider of each `${provider:` renamed by `renames` (MM2's name, Strait's).
fn renamed(value: &str, renames: &[(String, &str)]) -> String {
    let mut parts = value.split("${");
    let mut out = parts.next().unwrap_or_default().to_string();
    for part in parts {
        out.push_str("${");
        let provider = part.split_once(':').map(|(p, _)| p);
        match renames.iter().find(|(mm2, _)| Some(mm2.as_str()) == provider) {
            Some((mm2, strait)) => out.extend([*strait, &part[mm2.len()..]]),
            None => out.push_str(part),
        }
    }
    out
}

/// Imports `props` (an MM2 properties file, read). Errors: no `clusters`, a cluster without
/// `bootstrap.servers`, or a value that does not convert, naming the key.
pub fn import(props: &HashMap<String, String>) -> Result<Imported, String> {
    finish(build(props, &BTreeMap::new())?, Vec::new())
}

/// A config built from MM2 properties, before it is written ([`finish`]).
struct Built {
    config: Config,
    /// Each property left out, with why.
    dropped: BTreeMap<String, String>,
    notes: Vec<String>,
}

/// `built` as TOML, with `more` left out besides the properties (a resource's own fields).
fn finish(built: Built, more: Vec<(String, String)>) -> Result<Imported, String> {
    let toml = to_toml(&built.config).map_err(|e| format!("cannot write TOML: {e}"))?;
    let mut dropped = built.dropped;
    dropped.extend(more);
    Ok(Imported { toml, dropped: dropped.into_iter().collect(), notes: built.notes })
}

/// The config `props` describe, each cluster's client settings completed by `extra` (alias →
/// librdkafka settings no MM2 property carries). Errors: as [`import`].
fn build(props: &HashMap<String, String>, extra: &BTreeMap<String, BTreeMap<String, String>>) -> Result<Built, String> {
    let mut used: HashSet<String> = HashSet::new();
    let mut notes = Vec::new();
    let props = &with_strait_references(props, &mut used)?;
    let get = |key: &str, used: &mut HashSet<String>| {
        let v = props.get(key)?;
        used.insert(key.to_string());
        Some(v.clone())
    };
    let aliases = list(&get("clusters", &mut used).ok_or("clusters: missing (MM2's list of cluster aliases)")?);
    let mut clusters = Vec::new();
    for alias in &aliases {
        let bootstrap_servers = get(&format!("{alias}.bootstrap.servers"), &mut used)
            .ok_or_else(|| format!("{alias}.bootstrap.servers: missing"))?;
        // A cluster's own setting wins over the global one, as in MM2.
        let setting =
            |name: &str, used: &mut HashSet<String>| get(&format!("{alias}.{name}"), used).or_else(|| get(name, used));
        let mut client = BTreeMap::new();
        if let Some(v) = setting("security.protocol", &mut used) {
            client.insert("security.protocol".into(), v);
        }
        if let Some(v) = setting("sasl.mechanism", &mut used) {
            client.insert("sasl.mechanisms".into(), v);
        }
        if let Some(jaas) = setting("sasl.jaas.config", &mut used) {
            let (user, password) = jaas_credentials(&jaas).ok_or_else(|| {
                format!("{alias}.sasl.jaas.config: only PlainLoginModule and ScramLoginModule with username and password can be carried")
            })?;
            client.insert("sasl.username".into(), user);
            client.insert("sasl.password".into(), password);
        }
        if let Some(v) = setting("ssl.endpoint.identification.algorithm", &mut used) {
            let v = if v.trim().is_empty() { "none".to_string() } else { v };
            client.insert("ssl.endpoint.identification.algorithm".into(), v);
        }
        // Stores librdkafka cannot read stay unused, so they are listed with the reason.
        let store_type = |name: &str| {
            props.get(&format!("{alias}.{name}")).or_else(|| props.get(name)).map(|t| t.trim().to_ascii_uppercase())
        };
        if store_type("ssl.truststore.type").as_deref() == Some("PEM") {
            setting("ssl.truststore.type", &mut used);
            if let Some(v) = setting("ssl.truststore.location", &mut used) {
                client.insert("ssl.ca.location".into(), v);
            }
        }
        if store_type("ssl.keystore.type").as_deref() == Some("PKCS12") {
            setting("ssl.keystore.type", &mut used);
            for name in ["ssl.keystore.location", "ssl.keystore.password"] {
                if let Some(v) = setting(name, &mut used) {
                    client.insert(name.into(), v);
                }
            }
        }
        if let Some(v) = setting("ssl.key.password", &mut used) {
            client.insert("ssl.key.password".into(), v);
        }
        client.extend(extra.get(alias).cloned().unwrap_or_default());
        clusters.push(ClusterConfig {
            alias: alias.clone(),
            bootstrap_servers,
            zones: Vec::new(),
            client,
            connections_per_broker: Default::default(),
        });
    }
    let mut flows = Vec::new();
    let mut enabled = Vec::new();
    for (k, v) in props {
        // `A->B.enabled` of two declared clusters (not `A->B.sync.group.offsets.enabled`).
        let Some((source, target)) = k.strip_suffix(".enabled").and_then(|f| f.split_once("->")) else { continue };
        if !(aliases.iter().any(|a| a == source) && aliases.iter().any(|a| a == target)) {
            continue;
        }
        used.insert(k.clone());
        if boolean(v).map_err(|why| format!("{k} = {v:?}: {why}"))? {
            enabled.push((source.to_string(), target.to_string()));
        }
    }
    enabled.sort();
    for (source, target) in enabled {
        let mut flow = FlowConfig::new(&source, &target);
        let mut location_set = false;
        for &(mm2, set) in FLOW_SETTINGS {
            let flow_key = format!("{source}->{target}.{mm2}");
            let value = get(&flow_key, &mut used)
                .map(|v| (flow_key, v))
                .or_else(|| get(mm2, &mut used).map(|v| (mm2.to_string(), v)));
            if let Some((key, value)) = value {
                set(&mut flow, &value).map_err(|why| format!("{key} = {value:?}: {why}"))?;
                location_set |= mm2 == "offset-syncs.topic.location";
            }
        }
        let eos = get(&format!("{target}.exactly.once.source.support"), &mut used)
            .or_else(|| get("exactly.once.source.support", &mut used))
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("enabled"));
        if eos {
            flow.writing.delivery = DeliveryKind::ExactlyOnce;
        }
        if !location_set {
            // MM2's default place: Strait goes on reading and writing the syncs MM2 left there,
            // so group offsets MM2 replicated still translate after the cut-over.
            flow.writing.offset_syncs_topic_location = if eos { SyncsLocation::Target } else { SyncsLocation::Source };
            notes.push(if eos {
                format!("{source}->{target}: offset syncs go to the target (exactly-once writes them in its transactions), not to the source where MM2 kept them by default; group offsets MM2 replicated will translate once Strait's own syncs cover them")
            } else {
                format!("{source}->{target}: offset syncs stay on the source, MM2's default, so the syncs MM2 wrote keep translating group offsets (Strait's own default, \"target\", writes nothing to the source)")
            });
        }
        flows.push(flow);
    }
    let config = Config { clusters, flows, residency: Default::default(), metrics: None };
    let dropped = props.keys().filter(|k| !used.contains(*k)).map(|k| (k.clone(), reason(k).to_string())).collect();
    Ok(Built { config, dropped, notes })
}

/// `config` as TOML, each flow with only the keys that differ from Strait's defaults (and
/// `offset_syncs_topic_location`, which the import always decides), without `[residency]`.
fn to_toml(config: &Config) -> Result<String, toml::ser::Error> {
    let mut root = toml::Table::try_from(config)?;
    root.remove("residency");
    if let Some(toml::Value::Array(flows)) = root.get_mut("flows") {
        for (flow, written) in config.flows.iter().zip(flows.iter_mut()) {
            let defaults = toml::Table::try_from(FlowConfig::new(&flow.routing.source, &flow.routing.target))?;
            if let toml::Value::Table(written) = written {
                written.retain(|k, v| {
                    k == "source" || k == "target" || k == "offset_syncs_topic_location" || defaults.get(k) != Some(v)
                });
            }
        }
    }
    toml::to_string(&root)
}

#[cfg(test)]
mod tests;
