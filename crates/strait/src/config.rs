//! Strait's TOML configuration: clusters, flows and residency policies, and their validation.
//!
//! Every field is documented with its unit and default; `README.md` carries a complete example,
//! which a test parses. Loading rejects unknown keys and every inconsistency with a
//! [`ConfigError`] that names the field, e.g. `flows[1].target: unknown cluster alias "eu"`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use regex::Regex;
use serde::Deserialize;
use strait_mm2::{ReplicationPolicy, DEFAULT_GROUPS_EXCLUDE, DEFAULT_TOPICS_EXCLUDE};

/// A configuration problem: the field path and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    /// Path of the offending field, e.g. `flows[0].topics[2]`, or the file for parse errors.
    pub field: String,
    /// What is wrong and, where useful, what would be right.
    pub message: String,
}

fn err(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError { field: field.into(), message: message.into() }
}

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Kafka clusters, each known by a unique alias (`[[clusters]]`).
    #[serde(default)]
    pub clusters: Vec<ClusterConfig>,
    /// Replication flows, one per (source alias, target alias) pair (`[[flows]]`).
    #[serde(default)]
    pub flows: Vec<FlowConfig>,
    /// Which topics may reach which compliance zones (`[residency]`).
    #[serde(default)]
    pub residency: ResidencyConfig,
}

/// One Kafka cluster.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Name used in flows, topic prefixes and MM2 internal topic names. Must not contain a flow's
    /// replication-policy separator.
    pub alias: String,
    /// Comma-separated `host:port` list (librdkafka `bootstrap.servers`).
    pub bootstrap_servers: String,
    /// Compliance zones the cluster's data lives in (e.g. `["eu"]`); checked by residency policies.
    /// Default: none.
    #[serde(default)]
    pub zones: Vec<String>,
    /// librdkafka properties added to every client of this cluster (security, timeouts...), as
    /// strings. Default: none.
    #[serde(default)]
    pub client: BTreeMap<String, String>,
}

/// MM2's naming choice for replicated topics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    /// `<source-alias><separator><topic>` (MM2 `DefaultReplicationPolicy`).
    Default,
    /// Topic names unchanged (MM2 `IdentityReplicationPolicy`).
    Identity,
}

/// Where offset syncs are written (KIP-716 `offset-syncs.topic.location`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncsLocation {
    /// `mm2-offset-syncs.<source-alias>.internal` on the target; Strait writes nothing to the source.
    Target,
    /// `mm2-offset-syncs.<target-alias>.internal` on the source, as MM2 does by default.
    Source,
}

/// One replication flow from a source cluster to a target cluster.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowConfig {
    /// Alias of the cluster to read from.
    pub source: String,
    /// Alias of the cluster to write to.
    pub target: String,
    /// Regexes (whole-name match, as MM2) of source topics to replicate. Default `[".*"]`.
    #[serde(default = "all_topics")]
    pub topics: Vec<String>,
    /// Regexes of source topics never to replicate. Default MM2's
    /// `[".*[\-\.]internal", ".*\.replica", "__.*"]`. Internal topics are never replicated anyway.
    #[serde(default = "default_topics_exclude")]
    pub topics_exclude: Vec<String>,
    /// `default` (`<source-alias>.<topic>`) or `identity`. Default `default`.
    #[serde(default = "default_policy")]
    pub replication_policy: PolicyKind,
    /// Separator of the `default` policy. Default `.`.
    #[serde(default = "default_separator")]
    pub separator: String,
    /// `target` (default) or `source`.
    #[serde(default = "default_location")]
    pub offset_syncs_topic_location: SyncsLocation,
    /// Most downstream records between two offset syncs of a partition (MM2 `offset.lag.max`).
    /// Default 100; 0 writes one sync per record.
    #[serde(default = "default_offset_lag_max")]
    pub offset_lag_max: u64,
    /// How often source topics and partitions are re-listed (ms). Default 5,000.
    #[serde(default = "default_refresh_ms")]
    pub refresh_topics_interval_ms: u64,
    /// Longest time a batch stays uncommitted (ms): bounds duplicates after a crash. Default 1,000.
    #[serde(default = "default_commit_ms")]
    pub commit_interval_ms: u64,
    /// A batch is committed at this many records. Default 50,000.
    #[serde(default = "default_batch_records")]
    pub max_batch_records: u64,
    /// A batch is committed at this many bytes. Default 16,777,216 (16 MiB).
    #[serde(default = "default_batch_bytes")]
    pub max_batch_bytes: u64,
    /// Replication factor of topics Strait creates on the target; -1 takes the broker's
    /// `default.replication.factor`. Default -1.
    #[serde(default = "default_rf")]
    pub replication_factor: i32,
    /// Regexes (whole-name match) of source consumer groups to checkpoint. Default `[".*"]`.
    #[serde(default = "all_topics")]
    pub groups: Vec<String>,
    /// Regexes of groups never to checkpoint. Default MM2's
    /// `["console-consumer-.*", "connect-.*", "__.*"]`.
    #[serde(default = "default_groups_exclude")]
    pub groups_exclude: Vec<String>,
    /// Write checkpoints to `<source-alias>.checkpoints.internal` on the target (MM2
    /// `emit.checkpoints.enabled`). Default true.
    #[serde(default = "yes")]
    pub emit_checkpoints: bool,
    /// How often checkpoints are emitted (ms). Default 5,000 (MM2 waits 60 s).
    #[serde(default = "default_checkpoints_ms")]
    pub emit_checkpoints_interval_ms: u64,
    /// How often source consumer groups are re-listed (ms). Default 10,000.
    #[serde(default = "default_groups_ms")]
    pub refresh_groups_interval_ms: u64,
    /// Commit translated offsets into target groups that are absent or empty (MM2
    /// `sync.group.offsets.enabled`). Default false.
    #[serde(default)]
    pub sync_group_offsets: bool,
    /// How often group offsets are synced (ms). Default 5,000.
    #[serde(default = "default_checkpoints_ms")]
    pub sync_group_offsets_interval_ms: u64,
    /// Write heartbeats to `heartbeats` on the target (MM2 `emit.heartbeats.enabled`). Default true.
    #[serde(default = "yes")]
    pub emit_heartbeats: bool,
    /// How often heartbeats are written (ms). Default 1,000.
    #[serde(default = "default_heartbeats_ms")]
    pub emit_heartbeats_interval_ms: u64,
}

/// Residency: which topics may be written to which zones.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResidencyConfig {
    /// What happens to a topic that no policy names: `allow` (default) or `deny`.
    #[serde(default)]
    pub default: ResidencyDefault,
    /// Policies; a topic named by several must pass them all.
    #[serde(default)]
    pub policies: Vec<ResidencyPolicy>,
}

/// The rule for topics that no residency policy names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResidencyDefault {
    /// Replicate anywhere.
    #[default]
    Allow,
    /// Replicate nowhere.
    Deny,
}

/// One residency policy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResidencyPolicy {
    /// Name used in logs and errors.
    pub name: String,
    /// Regexes (whole-name match) of the topics it governs; matched against the source topic
    /// name and each suffix after a separator (so `eu.customers` is also `customers`), so
    /// renaming cannot escape it.
    pub topics: Vec<String>,
    /// If non-empty, every zone of the target must be listed here (a target with no zones fails).
    #[serde(default)]
    pub allow_zones: Vec<String>,
    /// No zone of the target may be listed here. Deny wins over allow.
    #[serde(default)]
    pub deny_zones: Vec<String>,
}

fn all_topics() -> Vec<String> {
    vec![".*".into()]
}
fn default_topics_exclude() -> Vec<String> {
    DEFAULT_TOPICS_EXCLUDE.iter().map(|s| s.to_string()).collect()
}
fn default_groups_exclude() -> Vec<String> {
    DEFAULT_GROUPS_EXCLUDE.iter().map(|s| s.to_string()).collect()
}
fn yes() -> bool {
    true
}
fn default_checkpoints_ms() -> u64 {
    5_000
}
fn default_groups_ms() -> u64 {
    10_000
}
fn default_heartbeats_ms() -> u64 {
    1_000
}
fn default_policy() -> PolicyKind {
    PolicyKind::Default
}
fn default_separator() -> String {
    ".".into()
}
fn default_location() -> SyncsLocation {
    SyncsLocation::Target
}
fn default_offset_lag_max() -> u64 {
    100
}
fn default_refresh_ms() -> u64 {
    5_000
}
fn default_commit_ms() -> u64 {
    1_000
}
fn default_batch_records() -> u64 {
    50_000
}
fn default_batch_bytes() -> u64 {
    16 << 20
}
fn default_rf() -> i32 {
    -1
}

/// Regexes compiled for whole-name matching, as Java's `Pattern.matches`.
#[derive(Debug, Clone)]
pub struct NameFilter {
    include: Vec<Regex>,
    exclude: Vec<Regex>,
}

impl NameFilter {
    /// True when `name` matches an include pattern and no exclude pattern.
    pub fn matches(&self, name: &str) -> bool {
        self.include.iter().any(|r| r.is_match(name)) && !self.exclude.iter().any(|r| r.is_match(name))
    }
}

/// Compiles `patterns` for whole-name matching; errors name `field[i]` and show the user's
/// pattern, not the anchored one.
pub(crate) fn compile(field: &str, patterns: &[String]) -> Result<Vec<Regex>, ConfigError> {
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

/// A validated flow with everything resolved: clusters, policy, filters, intervals.
#[derive(Debug, Clone)]
pub struct Flow {
    /// `source->target`, as logs and positions name the flow.
    pub name: String,
    /// The cluster read from.
    pub source: ClusterConfig,
    /// The cluster written to.
    pub target: ClusterConfig,
    /// Which source topics to replicate (before internal-topic and cycle rules).
    pub topics: NameFilter,
    /// Which source consumer groups to checkpoint.
    pub groups: NameFilter,
    /// Naming of target topics.
    pub policy: ReplicationPolicy,
    /// The flow's settings as written.
    pub settings: FlowConfig,
    /// Residency rules for this flow's target.
    pub residency: crate::sink::gate::ResidencyGate,
}

impl Flow {
    /// Re-list interval for source topics.
    pub fn refresh_interval(&self) -> Duration {
        Duration::from_millis(self.settings.refresh_topics_interval_ms)
    }

    /// Where the flow's offset syncs live: the cluster and `mm2-offset-syncs.<alias>.internal`
    /// (KIP-716: named after the other cluster's alias).
    pub fn offset_syncs(&self) -> (&ClusterConfig, String) {
        match self.settings.offset_syncs_topic_location {
            SyncsLocation::Target => (&self.target, self.policy.offset_syncs_topic(&self.source.alias)),
            SyncsLocation::Source => (&self.source, self.policy.offset_syncs_topic(&self.target.alias)),
        }
    }

    /// Whether a source topic is replicated by this flow: MM2's rules — the topic filter (or a
    /// heartbeats topic, always replicated so upstream clusters can be discovered), never an
    /// internal topic, never a topic that came from the target (a cycle under default naming).
    pub fn replicates(&self, topic: &str) -> bool {
        (self.topics.matches(topic) || self.policy.is_heartbeats_topic(topic))
            && !self.policy.is_internal_topic(topic)
            && !self.policy.is_cycle(topic, &self.target.alias)
    }
}

impl Config {
    /// Reads and validates `path`. Errors name the file or the field at fault.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| err(path.display().to_string(), format!("cannot read: {e}")))?;
        Self::parse(&text).map_err(|e| {
            if e.field.is_empty() {
                err(path.display().to_string(), e.message)
            } else {
                e
            }
        })
    }

    /// Parses and validates TOML text.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| err("", e.to_string()))?;
        config.flows()?;
        Ok(config)
    }

    /// Validates and resolves every flow.
    pub fn flows(&self) -> Result<Vec<Flow>, ConfigError> {
        let mut aliases = BTreeMap::new();
        for (i, c) in self.clusters.iter().enumerate() {
            let field = format!("clusters[{i}]");
            if c.alias.trim().is_empty() {
                return Err(err(format!("{field}.alias"), "must not be empty"));
            }
            if !c.alias.chars().all(|ch| ch.is_ascii_alphanumeric() || "._-".contains(ch)) || c.alias.len() > 100 {
                return Err(err(
                    format!("{field}.alias"),
                    format!("{:?} must be at most 100 of [a-zA-Z0-9._-]: it becomes part of topic names", c.alias),
                ));
            }
            if c.bootstrap_servers.split(',').all(|h| h.trim().is_empty()) {
                return Err(err(format!("{field}.bootstrap_servers"), "must list at least one host:port"));
            }
            if let Err(e) = crate::kafka::client_config(c, &[]).create_native_config() {
                return Err(err(format!("{field}.client"), format!("librdkafka rejects these settings: {e}")));
            }
            if aliases.insert(c.alias.clone(), c).is_some() {
                return Err(err(format!("{field}.alias"), format!("duplicate cluster alias {:?}", c.alias)));
            }
        }
        let residency = crate::sink::gate::ResidencyRules::compile(&self.residency)?;
        if self.flows.is_empty() {
            return Err(err("flows", "at least one [[flows]] entry is required"));
        }
        let mut seen = BTreeSet::new();
        let mut flows = Vec::new();
        for (i, f) in self.flows.iter().enumerate() {
            let field = format!("flows[{i}]");
            let source = aliases
                .get(&f.source)
                .ok_or_else(|| err(format!("{field}.source"), format!("unknown cluster alias {:?}", f.source)))?;
            let target = aliases
                .get(&f.target)
                .ok_or_else(|| err(format!("{field}.target"), format!("unknown cluster alias {:?}", f.target)))?;
            if f.source == f.target {
                return Err(err(format!("{field}.target"), "a flow's target must differ from its source"));
            }
            if !seen.insert((f.source.clone(), f.target.clone())) {
                return Err(err(field, format!("duplicate flow {} -> {}", f.source, f.target)));
            }
            if f.separator.is_empty() || !f.separator.chars().all(|ch| ch.is_ascii_alphanumeric() || "._-".contains(ch)) {
                return Err(err(format!("{field}.separator"), "must be one or more of [a-zA-Z0-9._-]"));
            }
            for (alias, side) in [(&f.source, "source"), (&f.target, "target")] {
                if alias.contains(&f.separator) {
                    return Err(err(
                        format!("{field}.{side}"),
                        format!("alias {alias:?} contains the separator {:?}", f.separator),
                    ));
                }
            }
            for (name, value) in [
                ("refresh_topics_interval_ms", f.refresh_topics_interval_ms),
                ("commit_interval_ms", f.commit_interval_ms),
                ("max_batch_records", f.max_batch_records),
                ("max_batch_bytes", f.max_batch_bytes),
                ("emit_checkpoints_interval_ms", f.emit_checkpoints_interval_ms),
                ("refresh_groups_interval_ms", f.refresh_groups_interval_ms),
                ("sync_group_offsets_interval_ms", f.sync_group_offsets_interval_ms),
                ("emit_heartbeats_interval_ms", f.emit_heartbeats_interval_ms),
            ] {
                if value == 0 {
                    return Err(err(format!("{field}.{name}"), "must be positive"));
                }
            }
            if f.replication_factor == 0 || f.replication_factor < -1 {
                return Err(err(format!("{field}.replication_factor"), "must be positive, or -1 for the broker default"));
            }
            for (name, list) in [("topics", &f.topics), ("groups", &f.groups)] {
                if list.is_empty() {
                    return Err(err(format!("{field}.{name}"), "must list at least one regex (\".*\" for all)"));
                }
            }
            let topics = NameFilter {
                include: compile(&format!("{field}.topics"), &f.topics)?,
                exclude: compile(&format!("{field}.topics_exclude"), &f.topics_exclude)?,
            };
            let groups = NameFilter {
                include: compile(&format!("{field}.groups"), &f.groups)?,
                exclude: compile(&format!("{field}.groups_exclude"), &f.groups_exclude)?,
            };
            let policy = match f.replication_policy {
                PolicyKind::Default => ReplicationPolicy::Default { separator: f.separator.clone() },
                PolicyKind::Identity => ReplicationPolicy::Identity { separator: f.separator.clone() },
            };
            flows.push(Flow {
                name: format!("{}->{}", f.source, f.target),
                source: (*source).clone(),
                target: (*target).clone(),
                topics,
                groups,
                policy,
                settings: f.clone(),
                residency: residency.for_target(&target.alias, &target.zones),
            });
        }
        Ok(flows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first ```toml block of README.md.
    fn readme_example() -> String {
        let readme = include_str!("../../../README.md");
        let start = readme.find("```toml\n").expect("README has a toml example") + "```toml\n".len();
        let end = start + readme[start..].find("```").expect("closed block");
        readme[start..end].to_string()
    }

    #[test]
    fn readme_example_parses() {
        let config = Config::parse(&readme_example()).expect("README example is valid");
        let flows = config.flows().unwrap();
        assert_eq!(flows.len(), 2);
        assert_eq!(flows[0].name, "eu-west->us-east");
        assert_eq!(flows[1].policy, ReplicationPolicy::Identity { separator: ".".into() });
        assert_eq!(config.clusters[0].client.get("sasl.mechanism").map(String::as_str), Some("SCRAM-SHA-512"));
    }

    #[test]
    fn defaults_follow_the_docs() {
        let config = Config::parse(
            "[[clusters]]\nalias = \"a\"\nbootstrap_servers = \"h:1\"\n[[clusters]]\nalias = \"b\"\nbootstrap_servers = \"h:2\"\n[[flows]]\nsource = \"a\"\ntarget = \"b\"\n",
        )
        .unwrap();
        let f = &config.flows[0];
        assert_eq!(f.offset_lag_max, 100);
        assert_eq!(f.refresh_topics_interval_ms, 5_000);
        assert_eq!(f.offset_syncs_topic_location, SyncsLocation::Target);
        assert_eq!(f.replication_policy, PolicyKind::Default);
        let flow = &config.flows().unwrap()[0];
        assert!(flow.topics.matches("orders"));
        assert!(!flow.topics.matches("x.internal") && !flow.topics.matches("a.replica") && !flow.topics.matches("__consumer_offsets"));
    }

    #[test]
    fn filters_match_whole_names() {
        let config = Config::parse(
            "[[clusters]]\nalias = \"a\"\nbootstrap_servers = \"h:1\"\n[[clusters]]\nalias = \"b\"\nbootstrap_servers = \"h:2\"\n[[flows]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"ord.*\"]\n",
        )
        .unwrap();
        let flow = &config.flows().unwrap()[0];
        assert!(flow.topics.matches("orders"));
        assert!(!flow.topics.matches("old-orders"), "a regex must match the whole name, as in MM2");
    }
}
