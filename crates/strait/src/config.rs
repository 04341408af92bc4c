//! Strait's TOML configuration: clusters, flows and residency policies, parsed and validated once
//! into the [`Flow`]s the rest of Strait uses.
//!
//! Every field is documented with its unit and default; `README.md` carries a complete example,
//! which a test parses. Loading rejects unknown keys and every inconsistency with a
//! [`ConfigError`] that names the field, e.g. `flows[1].target: unknown cluster alias "eu"`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use regex::Regex;
use serde::Deserialize;
use strait_mm2::{ReplicationPolicy, DEFAULT_GROUPS_EXCLUDE, DEFAULT_TOPICS_EXCLUDE};

use crate::residency::{names_of, ResidencyConfig, ResidencyGate, ResidencyRules};
pub use crate::rules::ConfigError;
use crate::rules::{compile, err, NameFilter};

/// The whole file, as written.
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
    /// The operator endpoint (`[metrics]`).
    #[serde(default)]
    pub metrics: Option<MetricsConfig>,
}

/// `[metrics]`: where `strait run` serves `/metrics`, `/health` and `/ready`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// `host:port` to listen on, e.g. `"127.0.0.1:9464"`; default: not served (unless
    /// `strait run --metrics-addr` is given).
    #[serde(default)]
    pub listen: Option<String>,
    /// Per-partition series (default true); `false` aggregates them per topic (the `partition`
    /// label is then empty, which Prometheus treats as absent), for clusters with many partitions.
    #[serde(default = "yes")]
    pub per_partition: bool,
}

/// The `[metrics]` settings, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsSettings {
    /// Where to serve them, if anywhere.
    pub listen: Option<SocketAddr>,
    /// Per-partition series, or per topic.
    pub per_partition: bool,
}

/// One Kafka cluster. Its `Debug` output hides secret client settings ([`is_secret`]).
#[derive(Clone, Deserialize)]
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

/// Whether the librdkafka property `key` holds a secret (passwords, private keys, OAuth client
/// secrets, JAAS-style configs): never printed, whatever the log level.
pub fn is_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["password", "secret", "ssl.key.pem", "ssl_key", "sasl.oauthbearer.config", "jaas"].iter().any(|s| key.contains(s))
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let client: BTreeMap<&str, &str> = self
            .client
            .iter()
            .map(|(k, v)| (k.as_str(), if is_secret(k) { "[redacted]" } else { v.as_str() }))
            .collect();
        f.debug_struct("ClusterConfig")
            .field("alias", &self.alias)
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("zones", &self.zones)
            .field("client", &client)
            .finish()
    }
}

impl ClusterConfig {
    /// librdkafka config for a client of this cluster: bootstrap servers, then `base` settings,
    /// then the cluster's own `client` overrides (which win, so an operator can tune anything).
    pub fn client_config(&self, base: &[(&str, &str)]) -> ClientConfig {
        let mut cfg = ClientConfig::new();
        cfg.set("bootstrap.servers", &self.bootstrap_servers);
        cfg.set("client.id", format!("strait-{}", self.alias));
        for (k, v) in base {
            cfg.set(*k, *v);
        }
        for (k, v) in &self.client {
            cfg.set(k, v);
        }
        cfg
    }
}

/// librdkafka properties Strait sets itself: overriding them would silently change where a flow
/// starts, what it reads, or its delivery guarantee, so a cluster's `client` table may not hold them.
const STRAIT_CONTROLLED: &[&str] = &[
    "bootstrap.servers",
    "group.id",
    "auto.offset.reset",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "isolation.level",
    "enable.partition.eof",
    "enable.idempotence",
    "enable.gapless.guarantee",
    "acks",
    "transactional.id",
    "transaction.timeout.ms",
];

/// Bounds (inclusive) of the flows' interval settings (`*_interval_ms`, `commit_interval_ms`):
/// 1 ms to one year (31,536,000,000 ms), far from where timers overflow.
pub const INTERVAL_MS: (u64, u64) = (1, 365 * 24 * 3600 * 1000);
/// Bounds of `transaction_timeout_ms`: librdkafka's range for `transaction.timeout.ms` (1 s to
/// `i32::MAX` ms); the target broker's `transaction.max.timeout.ms` (15 min by default) bounds it
/// further, checked at start.
pub const TRANSACTION_TIMEOUT_MS: (u64, u64) = (1_000, i32::MAX as u64);
/// Bounds of `[flows.scale_out] session_timeout_ms`: 1 s to librdkafka's most for
/// `session.timeout.ms` (1 h); the target brokers' `group.min/max.session.timeout.ms` (6 s and
/// 30 min by default) bound it further, checked at start.
pub const SESSION_TIMEOUT_MS: (u64, u64) = (1_000, 3_600_000);
/// Bounds of `[flows.scale_out] slots`, the coordination topic's partitions: 1 to 1,000. Each
/// slot an instance owns runs its own clients, so more slots than instances costs threads and
/// connections; 1,000 instances of one flow is far past any deployment.
pub const SLOTS: (u64, u64) = (1, 1_000);
/// Bounds of `max_batch_records`: 1 to 100,000,000 records.
pub const BATCH_RECORDS: (u64, u64) = (1, 100_000_000);
/// Bounds of `max_batch_bytes`: 1 byte to 16 GiB (17,179,869,184 bytes).
pub const BATCH_BYTES: (u64, u64) = (1, 16 << 30);
/// Bounds of `offset_lag_max`: 0 to `i64::MAX` records (Kafka offsets are `i64`: a larger lag
/// cannot occur).
pub const OFFSET_LAG_MAX: (u64, u64) = (0, i64::MAX as u64);
/// Largest `replication_factor`: Kafka's replication factor is an `i16` (32,767).
pub const MAX_REPLICATION_FACTOR: i32 = i16::MAX as i32;

/// librdkafka client properties naming a file Strait's clients read (or the kinit command, for
/// the keytab); checked readable by [`Config::load`]. `ssl.ca.location` and `https.ca.location`
/// may name a directory, or be `probe` (the system's CA stores).
const FILE_SETTINGS: &[&str] = &[
    "ssl.ca.location",
    "https.ca.location",
    "ssl.crl.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.keystore.location",
    "ssl.engine.location",
    "sasl.kerberos.keytab",
    "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.file",
    "sasl.oauthbearer.assertion.jwt.template.file",
];

/// Why the file `path` named by client property `key` cannot be used, or `None` when it can be read.
fn unreadable(key: &str, path: &str) -> Option<String> {
    let ca = key.ends_with("ca.location");
    if path.is_empty() || (ca && path == "probe") {
        return None;
    }
    let readable = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() && ca => std::fs::read_dir(path).map(|_| ()),
        Ok(m) if m.is_dir() => return Some(format!("{path:?} is a directory, not a file")),
        Ok(_) => std::fs::File::open(path).map(|_| ()),
        Err(e) => Err(e),
    };
    readable.err().map(|e| format!("cannot read {path:?}: {e}"))
}

/// Delivery guarantee of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryKind {
    /// Every record at least once: a crash replays at most the last two batches.
    AtLeastOnce,
    /// Each batch's records, offset syncs and positions in one Kafka transaction: a
    /// `read_committed` consumer on the target sees each source record exactly once.
    ExactlyOnce,
}

/// Where a topic with no saved position starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartFrom {
    /// At the log start: copy the topic's history (MM2's behaviour).
    Earliest,
    /// At the end the first time the topic is seen: copy only records written after that.
    Latest,
}

/// What a flow does when a saved position lies below the source partition's log start (records
/// deleted by retention or delete-records before they were copied).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnSourceGap {
    /// Log an error with the number of records lost and continue at the log start.
    Continue,
    /// Log the same error and stop the flow at start; nothing past the gap is copied.
    Fail,
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

/// One replication flow from a source cluster to a target cluster (`[[flows]]`), as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowConfig {
    /// Alias of the cluster to read from.
    pub source: String,
    /// Alias of the cluster to write to.
    pub target: String,
    /// Regexes (whole-name match, as MM2) of source topics to replicate. Default `[".*"]`.
    #[serde(default = "all_names")]
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
    /// `target` (default) or `source`; `exactly_once` needs `target`.
    #[serde(default = "default_location")]
    pub offset_syncs_topic_location: SyncsLocation,
    /// `at_least_once` (default) or `exactly_once` (records, offset syncs and positions of a
    /// batch in one transaction on the target).
    #[serde(default = "default_delivery")]
    pub delivery: DeliveryKind,
    /// Longest a transaction may stay open before the target aborts it (ms; Kafka
    /// `transaction.timeout.ms`, at most the broker's `transaction.max.timeout.ms`, 15 min by
    /// default). Only with `exactly_once`; must exceed `commit_interval_ms`. 1,000 to 2,147,483,647
    /// ([`TRANSACTION_TIMEOUT_MS`]). Default 60,000.
    #[serde(default = "default_transaction_timeout_ms")]
    pub transaction_timeout_ms: u64,
    /// Most downstream records between two offset syncs of a partition (MM2 `offset.lag.max`).
    /// 0 (one sync per record) to 9,223,372,036,854,775,807 ([`OFFSET_LAG_MAX`]). Default 100.
    #[serde(default = "default_offset_lag_max")]
    pub offset_lag_max: u64,
    /// How often source topics and partitions are re-listed (ms; 1 to one year, [`INTERVAL_MS`]).
    /// Default 5,000.
    #[serde(default = "default_refresh_ms")]
    pub refresh_topics_interval_ms: u64,
    /// `earliest` (default) or `latest`: where a topic with no saved position starts. Partitions
    /// added later to a topic already replicated always start at earliest.
    #[serde(default = "default_start_from")]
    pub start_from: StartFrom,
    /// `continue` (default) or `fail`: what to do when records the flow had not copied yet were
    /// deleted on the source (a saved position below the log start). Both log the loss.
    #[serde(default = "default_on_source_gap")]
    pub on_source_gap: OnSourceGap,
    /// While a flow is behind, one INFO line this often (ms; 1 to one year) gives records/s and
    /// the total lag. Default 30,000.
    #[serde(default = "default_progress_ms")]
    pub progress_log_interval_ms: u64,
    /// Kafka Connect offsets topic on the target where a MirrorMaker 2 that ran this flow before
    /// kept its source offsets; source partitions Strait has no position for resume there.
    /// Default `mm2-offsets.<source-alias>.internal` (MM2's dedicated mode).
    #[serde(default)]
    pub mm2_offsets_topic: Option<String>,
    /// Apply source topic config changes to the target topics after creation (MM2
    /// `sync.topic.configs.enabled`, with KIP-894's incremental semantics). Default true.
    #[serde(default = "yes")]
    pub sync_topic_configs: bool,
    /// How often topic configs are synced (ms; 1 to one year). Default 60,000 (MM2
    /// `sync.topic.configs.interval.seconds`).
    #[serde(default = "default_topic_configs_ms")]
    pub sync_topic_configs_interval_ms: u64,
    /// Regexes (whole-name match) of topic config names never synced, in addition to MM2's
    /// exclude list (MM2 `config.properties.exclude`). Default none.
    #[serde(default)]
    pub sync_topic_configs_exclude: Vec<String>,
    /// Longest time a batch stays uncommitted (ms): bounds duplicates after a crash in
    /// at-least-once mode, and the latency of `read_committed` consumers in exactly-once mode.
    /// 1 to one year ([`INTERVAL_MS`]). Default 1,000.
    #[serde(default = "default_commit_ms")]
    pub commit_interval_ms: u64,
    /// A batch is committed at this many records: 1 to 100,000,000 ([`BATCH_RECORDS`]). Default
    /// 250,000.
    #[serde(default = "default_batch_records")]
    pub max_batch_records: u64,
    /// A batch is committed at this many bytes: 1 to 17,179,869,184 (16 GiB, [`BATCH_BYTES`]).
    /// Default 134,217,728 (128 MiB).
    #[serde(default = "default_batch_bytes")]
    pub max_batch_bytes: u64,
    /// Replication factor of topics Strait creates on the target: 1 to 32,767 (Kafka's `i16`), at
    /// most the target's broker count (checked at start: the flow stops naming this setting), or
    /// -1 for the broker's `default.replication.factor`. Default -1.
    #[serde(default = "default_rf")]
    pub replication_factor: i32,
    /// Regexes (whole-name match) of source consumer groups to checkpoint. Default `[".*"]`.
    #[serde(default = "all_names")]
    pub groups: Vec<String>,
    /// Regexes of groups never to checkpoint. Default MM2's
    /// `["console-consumer-.*", "connect-.*", "__.*"]`.
    #[serde(default = "default_groups_exclude")]
    pub groups_exclude: Vec<String>,
    /// Write checkpoints to `<source-alias>.checkpoints.internal` on the target (MM2
    /// `emit.checkpoints.enabled`). Default true.
    #[serde(default = "yes")]
    pub emit_checkpoints: bool,
    /// How often checkpoints are emitted (ms; 1 to one year). Default 5,000 (MM2 waits 60 s).
    #[serde(default = "default_checkpoints_ms")]
    pub emit_checkpoints_interval_ms: u64,
    /// How often source consumer groups are re-listed (ms; 1 to one year). Default 10,000.
    #[serde(default = "default_groups_ms")]
    pub refresh_groups_interval_ms: u64,
    /// Commit translated offsets into target groups that are absent or empty (MM2
    /// `sync.group.offsets.enabled`). Default false.
    #[serde(default)]
    pub sync_group_offsets: bool,
    /// How often group offsets are synced (ms; 1 to one year). Default 5,000.
    #[serde(default = "default_checkpoints_ms")]
    pub sync_group_offsets_interval_ms: u64,
    /// Write heartbeats to `heartbeats` on the target (MM2 `emit.heartbeats.enabled`). Default true.
    #[serde(default = "yes")]
    pub emit_heartbeats: bool,
    /// How often heartbeats are written (ms; 1 to one year). Default 1,000.
    #[serde(default = "default_heartbeats_ms")]
    pub emit_heartbeats_interval_ms: u64,
    /// Running the flow on several instances (`[flows.scale_out]`). Off by default.
    #[serde(default)]
    pub scale_out: ScaleOutConfig,
}

/// `[flows.scale_out]`: instances of a flow share its source partitions through a consumer group
/// on the target cluster, in slots (see [`crate::slots`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleOutConfig {
    /// Share the flow between instances. Off: one instance runs the flow, and a second one is
    /// refused. Default false.
    #[serde(default)]
    pub enabled: bool,
    /// Slots the flow's source partitions are spread over (the coordination topic's partition
    /// count); the most instances that can share the work: 1 to 1,000 ([`SLOTS`]). Fixed once
    /// instances ran. Default 12.
    #[serde(default = "default_slots")]
    pub slots: u32,
    /// How long an instance that stopped answering keeps its slots before the group gives them
    /// to the others (ms; the group's `session.timeout.ms`, within the broker's
    /// `group.min/max.session.timeout.ms`, checked at start): 1,000 to 3,600,000
    /// ([`SESSION_TIMEOUT_MS`]). Default 10,000.
    #[serde(default = "default_session_timeout_ms")]
    pub session_timeout_ms: u64,
}

impl Default for ScaleOutConfig {
    fn default() -> Self {
        Self { enabled: false, slots: default_slots(), session_timeout_ms: default_session_timeout_ms() }
    }
}

fn default_slots() -> u32 {
    12
}
fn default_session_timeout_ms() -> u64 {
    10_000
}

fn all_names() -> Vec<String> {
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
fn default_delivery() -> DeliveryKind {
    DeliveryKind::AtLeastOnce
}
fn default_transaction_timeout_ms() -> u64 {
    60_000
}
fn default_offset_lag_max() -> u64 {
    100
}
fn default_progress_ms() -> u64 {
    30_000
}
fn default_on_source_gap() -> OnSourceGap {
    OnSourceGap::Continue
}
fn default_start_from() -> StartFrom {
    StartFrom::Earliest
}
fn default_topic_configs_ms() -> u64 {
    60_000
}
fn default_refresh_ms() -> u64 {
    5_000
}
fn default_commit_ms() -> u64 {
    1_000
}
// Large enough that in a catch-up `commit_interval_ms` decides: an at-least-once commit waits
// for every ack, so each one lets librdkafka's queue run empty (bench/FINDINGS.md, eighth round).
fn default_batch_records() -> u64 {
    250_000
}
fn default_batch_bytes() -> u64 {
    128 << 20
}
fn default_rf() -> i32 {
    -1
}

/// How a flow delivers, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// See [`DeliveryKind::AtLeastOnce`].
    AtLeastOnce,
    /// See [`DeliveryKind::ExactlyOnce`]; the target aborts a transaction open longer than
    /// `transaction_timeout`.
    ExactlyOnce {
        /// Kafka `transaction.timeout.ms`.
        transaction_timeout: Duration,
    },
}

/// Why a flow does not replicate a source topic ([`Flow::not_replicated`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// No `topics` pattern names it.
    NotSelected,
    /// An internal topic (MM2's rule: `.internal`/`-internal` suffix, `__` or `.` prefix).
    Internal,
    /// It came from the target cluster: replicating it back would make a cycle.
    Cycle,
    /// A `topics_exclude` pattern names it.
    Excluded,
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Skip::NotSelected => "no topics pattern names it",
            Skip::Internal => {
                "an internal topic (ends in .internal or -internal, or starts with __ or .): never replicated"
            }
            Skip::Cycle => "it came from the target cluster: replicating it back would make a cycle",
            Skip::Excluded => "a topics_exclude pattern names it",
        })
    }
}

/// A validated flow with everything resolved: clusters, policy, filters, intervals as
/// [`Duration`]s. The only shape of the config the rest of Strait sees.
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
    /// Residency rules for this flow's target.
    pub residency: ResidencyGate,
    /// At-least-once or exactly-once.
    pub delivery: Delivery,
    /// Where offset syncs are written.
    pub offset_syncs_location: SyncsLocation,
    /// MM2 `offset.lag.max` (records).
    pub offset_lag_max: u64,
    /// Re-list interval for source topics.
    pub refresh_topics_interval: Duration,
    /// Where a topic with no saved position starts.
    pub start_from: StartFrom,
    /// Continue past a source gap, or stop.
    pub on_source_gap: OnSourceGap,
    /// MM2's source offsets topic on the target (cut-over from MM2).
    pub mm2_offsets_topic: String,
    /// Interval of the "catching up" progress line.
    pub progress_log_interval: Duration,
    /// Topic config sync interval; `None` when off.
    pub sync_topic_configs_interval: Option<Duration>,
    /// Topic config names never synced (besides MM2's list).
    pub sync_topic_configs_exclude: Vec<Regex>,
    /// Longest a batch stays uncommitted.
    pub commit_interval: Duration,
    /// A batch commits at this many records.
    pub max_batch_records: usize,
    /// A batch commits at this many bytes.
    pub max_batch_bytes: usize,
    /// Replication factor of created topics; -1 = broker default.
    pub replication_factor: i32,
    /// Write MM2 checkpoints.
    pub emit_checkpoints: bool,
    /// Checkpoint interval.
    pub emit_checkpoints_interval: Duration,
    /// Consumer-group re-list interval.
    pub refresh_groups_interval: Duration,
    /// Commit translated offsets into inactive target groups.
    pub sync_group_offsets: bool,
    /// Group offset sync interval.
    pub sync_group_offsets_interval: Duration,
    /// Write MM2 heartbeats.
    pub emit_heartbeats: bool,
    /// Heartbeat interval.
    pub emit_heartbeats_interval: Duration,
    /// Slots of the flow: `[flows.scale_out] slots`, or 1 when scale-out is off.
    pub slots: u32,
    /// Whether several instances share the flow (`[flows.scale_out] enabled`).
    pub scale_out: bool,
    /// `session.timeout.ms` of the flow's coordination group.
    pub session_timeout: Duration,
}

impl Flow {
    /// Where the flow's offset syncs live: the cluster and `mm2-offset-syncs.<alias>.internal`
    /// (KIP-716: named after the other cluster's alias).
    pub fn offset_syncs(&self) -> (&ClusterConfig, String) {
        match self.offset_syncs_location {
            SyncsLocation::Target => (&self.target, self.policy.offset_syncs_topic(&self.source.alias)),
            SyncsLocation::Source => (&self.source, self.policy.offset_syncs_topic(&self.target.alias)),
        }
    }

    /// The `transactional.id` through which `slot` of the flow writes to the target (records too
    /// in exactly-once mode; offset syncs and positions in both modes):
    /// `strait-<source>-><target>/slot-<n>`. Stable across restarts, so the slot's next owner's
    /// `init_transactions` fences the previous one.
    pub fn transactional_id(&self, slot: u32) -> String {
        format!("strait-{}/slot-{slot}", self.name)
    }

    /// Each slot's share of a per-flow budget (buffer bytes, batch records): `total` divided by
    /// the slot count, at least `floor` (and at most `total`). Every slot has its own clients and
    /// batches, so an instance owning every slot keeps about the memory of a flow without
    /// scale-out.
    pub fn slot_share(&self, total: usize, floor: usize) -> usize {
        // At most SLOTS.1 slots: the count fits.
        (total / self.slots.max(1) as usize).max(floor).min(total)
    }

    /// The consumer group on the target whose members share the flow's slots:
    /// `strait-slots-<source>-><target>`.
    pub fn slots_group(&self) -> String {
        format!("strait-slots-{}", self.name)
    }

    /// The coordination topic on the target, one partition per slot:
    /// `strait-slots.<source>.<target>.internal`. Nothing is written to it.
    pub fn slots_topic(&self) -> String {
        format!("strait-slots.{}.{}.internal", self.source.alias, self.target.alias)
    }

    /// Whether a source topic is replicated by this flow: MM2's rules — the topic filter (or a
    /// heartbeats topic, always replicated so upstream clusters can be discovered), never an
    /// internal topic, never a topic that came from the target (a cycle under default naming).
    pub fn replicates(&self, topic: &str) -> bool {
        self.not_replicated(topic).is_none()
    }

    /// Whether `topic` has a copy on the target: the flow replicates it and residency lets it
    /// reach the target (the sink's gate, [`ResidencyGate::check`]).
    pub fn reaches_target(&self, topic: &str) -> bool {
        self.replicates(topic) && self.residency.check(&names_of(topic, self.policy.separator())).is_ok()
    }

    /// Why this flow does not replicate `topic`, or `None` when it does. [`Skip::NotSelected`]
    /// is a topic no `topics` pattern names; the other reasons overrule a pattern that does.
    pub fn not_replicated(&self, topic: &str) -> Option<Skip> {
        if !self.topics.includes(topic) && !self.policy.is_heartbeats_topic(topic) {
            Some(Skip::NotSelected)
        } else if self.policy.is_internal_topic(topic) {
            Some(Skip::Internal)
        } else if self.policy.is_cycle(topic, &self.target.alias) {
            Some(Skip::Cycle)
        } else if self.topics.excludes(topic) && !self.policy.is_heartbeats_topic(topic) {
            Some(Skip::Excluded)
        } else {
            None
        }
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
        let text =
            std::fs::read_to_string(path).map_err(|e| err(path.display().to_string(), format!("cannot read: {e}")))?;
        let config: Config = toml::from_str(&text).map_err(|e| err(path.display().to_string(), e.to_string()))?;
        let loaded = config.resolve()?;
        config.check_client_files()?;
        Ok(loaded)
    }

    /// Every file named in a cluster's client settings ([`FILE_SETTINGS`]) can be read. Errors:
    /// `clusters[i].client."<key>"` with the path and the OS error.
    fn check_client_files(&self) -> Result<(), ConfigError> {
        for (i, c) in self.clusters.iter().enumerate() {
            for (key, path) in c.client.iter().filter(|(k, _)| FILE_SETTINGS.contains(&k.as_str())) {
                if let Some(why) = unreadable(key, path) {
                    return Err(err(format!("clusters[{i}].client.\"{key}\""), why));
                }
            }
        }
        Ok(())
    }

    /// Parses and validates TOML text into its flows. Errors name the field at fault.
    pub fn parse(text: &str) -> Result<Vec<Flow>, ConfigError> {
        Self::parse_with_metrics(text).map(|(flows, _)| flows)
    }

    /// [`Config::parse`], with the `[metrics]` settings.
    pub fn parse_with_metrics(text: &str) -> Result<(Vec<Flow>, MetricsSettings), ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| err("", e.to_string()))?;
        config.resolve()
    }

    /// Validates the flows and the `[metrics]` settings.
    fn resolve(&self) -> Result<(Vec<Flow>, MetricsSettings), ConfigError> {
        let config = self;
        let listen = match config.metrics.as_ref().and_then(|m| m.listen.as_ref()) {
            Some(l) => Some(l.parse().map_err(|e| err("metrics.listen", format!("not a host:port address: {e}")))?),
            None => None,
        };
        let per_partition = config.metrics.as_ref().is_none_or(|m| m.per_partition);
        Ok((config.flows()?, MetricsSettings { listen, per_partition }))
    }

    /// Validates and resolves every flow.
    fn flows(&self) -> Result<Vec<Flow>, ConfigError> {
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
            if let Some(key) = c.client.keys().find(|k| STRAIT_CONTROLLED.contains(&k.as_str())) {
                return Err(err(
                    format!("{field}.client.\"{key}\""),
                    "Strait sets this itself (where it reads from, what it commits, how it fences); remove it",
                ));
            }
            if let Err(e) = c.client_config(&[]).create_native_config() {
                // librdkafka's message quotes the value it rejects: never a secret's.
                let mut message = e.to_string();
                for (_, v) in c.client.iter().filter(|(k, v)| is_secret(k) && !v.is_empty()) {
                    message = message.replace(v.as_str(), "[redacted]");
                }
                return Err(err(format!("{field}.client"), format!("librdkafka rejects these settings: {message}")));
            }
            if aliases.insert(c.alias.clone(), c).is_some() {
                return Err(err(format!("{field}.alias"), format!("duplicate cluster alias {:?}", c.alias)));
            }
        }
        let residency = ResidencyRules::compile(&self.residency)?;
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
            if f.separator.is_empty() || !f.separator.chars().all(|ch| ch.is_ascii_alphanumeric() || "._-".contains(ch))
            {
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
            let within = |name: &str, value: u64, (min, max): (u64, u64), unit: &str| {
                if (min..=max).contains(&value) {
                    Ok(value)
                } else {
                    Err(err(
                        format!("{field}.{name}"),
                        format!("{value} is out of bounds: must be {min} to {max} {unit}"),
                    ))
                }
            };
            let ms = |name: &str, value: u64| within(name, value, INTERVAL_MS, "ms").map(Duration::from_millis);
            // Both bounds fit `usize` on the 64-bit targets Strait builds for; `try_from` says so
            // on any other.
            let count = |name: &str, value: u64, bounds: (u64, u64), unit: &str| {
                let value = within(name, value, bounds, unit)?;
                usize::try_from(value).map_err(|_| err(format!("{field}.{name}"), format!("{value} is too large here")))
            };
            if f.replication_factor != -1 && !(1..=MAX_REPLICATION_FACTOR).contains(&f.replication_factor) {
                return Err(err(
                    format!("{field}.replication_factor"),
                    format!("must be 1 to {MAX_REPLICATION_FACTOR}, or -1 for the broker default"),
                ));
            }
            let commit_interval = ms("commit_interval_ms", f.commit_interval_ms)?;
            let delivery = match f.delivery {
                DeliveryKind::AtLeastOnce => Delivery::AtLeastOnce,
                DeliveryKind::ExactlyOnce => {
                    if f.offset_syncs_topic_location != SyncsLocation::Target {
                        return Err(err(
                            format!("{field}.offset_syncs_topic_location"),
                            "must be \"target\" with delivery = \"exactly_once\": offset syncs are written in the target's transactions",
                        ));
                    }
                    let transaction_timeout = Duration::from_millis(within(
                        "transaction_timeout_ms",
                        f.transaction_timeout_ms,
                        TRANSACTION_TIMEOUT_MS,
                        "ms",
                    )?);
                    if transaction_timeout <= commit_interval {
                        return Err(err(
                            format!("{field}.transaction_timeout_ms"),
                            format!(
                                "must exceed commit_interval_ms ({} ms): a batch is one transaction",
                                f.commit_interval_ms
                            ),
                        ));
                    }
                    Delivery::ExactlyOnce { transaction_timeout }
                }
            };
            let policy = match f.replication_policy {
                PolicyKind::Default => ReplicationPolicy::Default { separator: f.separator.clone() },
                PolicyKind::Identity => ReplicationPolicy::Identity { separator: f.separator.clone() },
            };
            flows.push(Flow {
                name: format!("{}->{}", f.source, f.target),
                source: (*source).clone(),
                target: (*target).clone(),
                topics: NameFilter::new(
                    &format!("{field}.topics"),
                    &f.topics,
                    &format!("{field}.topics_exclude"),
                    &f.topics_exclude,
                )?,
                groups: NameFilter::new(
                    &format!("{field}.groups"),
                    &f.groups,
                    &format!("{field}.groups_exclude"),
                    &f.groups_exclude,
                )?,
                policy,
                residency: residency.for_target(&target.alias, &target.zones),
                delivery,
                offset_syncs_location: f.offset_syncs_topic_location,
                offset_lag_max: within("offset_lag_max", f.offset_lag_max, OFFSET_LAG_MAX, "records")?,
                refresh_topics_interval: ms("refresh_topics_interval_ms", f.refresh_topics_interval_ms)?,
                start_from: f.start_from,
                on_source_gap: f.on_source_gap,
                progress_log_interval: ms("progress_log_interval_ms", f.progress_log_interval_ms)?,
                mm2_offsets_topic: f
                    .mm2_offsets_topic
                    .clone()
                    .unwrap_or_else(|| format!("mm2-offsets.{}.internal", f.source)),
                sync_topic_configs_interval: f
                    .sync_topic_configs
                    .then(|| ms("sync_topic_configs_interval_ms", f.sync_topic_configs_interval_ms))
                    .transpose()?,
                sync_topic_configs_exclude: compile(
                    &format!("{field}.sync_topic_configs_exclude"),
                    &f.sync_topic_configs_exclude,
                )?,
                commit_interval,
                max_batch_records: count("max_batch_records", f.max_batch_records, BATCH_RECORDS, "records")?,
                max_batch_bytes: count("max_batch_bytes", f.max_batch_bytes, BATCH_BYTES, "bytes")?,
                replication_factor: f.replication_factor,
                emit_checkpoints: f.emit_checkpoints,
                emit_checkpoints_interval: ms("emit_checkpoints_interval_ms", f.emit_checkpoints_interval_ms)?,
                refresh_groups_interval: ms("refresh_groups_interval_ms", f.refresh_groups_interval_ms)?,
                sync_group_offsets: f.sync_group_offsets,
                sync_group_offsets_interval: ms("sync_group_offsets_interval_ms", f.sync_group_offsets_interval_ms)?,
                emit_heartbeats: f.emit_heartbeats,
                emit_heartbeats_interval: ms("emit_heartbeats_interval_ms", f.emit_heartbeats_interval_ms)?,
                slots: match within("scale_out.slots", f.scale_out.slots.into(), SLOTS, "slots")? {
                    _ if !f.scale_out.enabled => 1,
                    _ => f.scale_out.slots,
                },
                scale_out: f.scale_out.enabled,
                session_timeout: Duration::from_millis(within(
                    "scale_out.session_timeout_ms",
                    f.scale_out.session_timeout_ms,
                    SESSION_TIMEOUT_MS,
                    "ms",
                )?),
            });
        }
        Ok(flows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_show_in_debug_output() {
        let toml = |client: &str| {
            format!(
                "[[clusters]]\nalias = \"a\"\nbootstrap_servers = \"h:1\"\n[[clusters]]\nalias = \"b\"\n\
                 bootstrap_servers = \"h:2\"\n[clusters.client]\n{client}\"sasl.username\" = \"strait\"\n\
                 [[flows]]\nsource = \"a\"\ntarget = \"b\"\n"
            )
        };
        let flows =
            Config::parse(&toml("\"sasl.password\" = \"hunter2-pw\"\n\"ssl.key.password\" = \"k3y-pw\"\n")).unwrap();
        let shown = format!("{flows:?} {:#?}", flows[0].target);
        for secret in ["hunter2-pw", "k3y-pw"] {
            assert!(!shown.contains(secret), "{secret} shown: {shown}");
        }
        assert!(shown.contains("strait") && shown.contains("[redacted]"), "{shown}");
        // This build has no OAuth support, so librdkafka rejects the setting, quoting its value.
        let rejected = Config::parse(&toml("\"sasl.oauthbearer.client.secret\" = \"0auth-s3cret\"\n")).unwrap_err();
        assert!(rejected.field == "clusters[1].client" && !rejected.to_string().contains("0auth-s3cret"), "{rejected}");
    }

    const TWO_CLUSTERS: &str = "[[clusters]]\nalias = \"a\"\nbootstrap_servers = \"h:1\"\n[[clusters]]\nalias = \"b\"\nbootstrap_servers = \"h:2\"\n[[flows]]\nsource = \"a\"\ntarget = \"b\"\n";

    /// The complete example config, `deploy/strait.example.toml`.
    fn readme_example() -> String {
        include_str!("../../../deploy/strait.example.toml").to_string()
    }

    #[test]
    fn readme_example_parses() {
        let flows = Config::parse(&readme_example()).expect("README example is valid");
        assert_eq!(flows.len(), 2);
        assert_eq!(flows[0].name, "eu-west->us-east");
        assert_eq!(flows[1].policy, ReplicationPolicy::Identity { separator: ".".into() });
        assert_eq!(flows[1].delivery, Delivery::ExactlyOnce { transaction_timeout: Duration::from_secs(60) });
        assert_eq!(flows[0].source.client.get("sasl.mechanism").map(String::as_str), Some("SCRAM-SHA-512"));
    }

    #[test]
    fn defaults_follow_the_docs() {
        let flow = &Config::parse(TWO_CLUSTERS).unwrap()[0];
        assert_eq!(flow.offset_lag_max, 100);
        assert_eq!(flow.refresh_topics_interval, Duration::from_secs(5));
        assert_eq!(flow.commit_interval, Duration::from_secs(1));
        assert_eq!(flow.offset_syncs_location, SyncsLocation::Target);
        assert_eq!(flow.policy, ReplicationPolicy::Default { separator: ".".into() });
        assert_eq!(flow.delivery, Delivery::AtLeastOnce);
        assert!(flow.topics.matches("orders"));
        assert!(
            !flow.topics.matches("x.internal")
                && !flow.topics.matches("a.replica")
                && !flow.topics.matches("__consumer_offsets")
        );
    }

    #[test]
    fn filters_match_whole_names() {
        let flow = &Config::parse(&format!("{TWO_CLUSTERS}topics = [\"ord.*\"]\n")).unwrap()[0];
        assert!(flow.topics.matches("orders"));
        assert!(!flow.topics.matches("old-orders"), "a regex must match the whole name, as in MM2");
    }

    #[test]
    fn exactly_once_settings_are_checked() {
        for (extra, field) in [
            (
                "delivery = \"exactly_once\"\noffset_syncs_topic_location = \"source\"",
                "flows[0].offset_syncs_topic_location",
            ),
            ("delivery = \"exactly_once\"\ntransaction_timeout_ms = 1000", "flows[0].transaction_timeout_ms"),
            ("delivery = \"exactly-once\"", ""),
        ] {
            let e = Config::parse(&format!("{TWO_CLUSTERS}{extra}\n")).expect_err(extra);
            assert_eq!(e.field, field, "{e}");
        }
        let flow =
            &Config::parse(&format!("{TWO_CLUSTERS}delivery = \"exactly_once\"\ntransaction_timeout_ms = 9000\n"))
                .unwrap()[0];
        assert_eq!(flow.delivery, Delivery::ExactlyOnce { transaction_timeout: Duration::from_secs(9) });
        assert_eq!(flow.transactional_id(0), "strait-a->b/slot-0");
    }

    #[test]
    fn numeric_bounds_are_inclusive() {
        let edge = "commit_interval_ms = 31536000000\nemit_heartbeats_interval_ms = 1\nmax_batch_records = 100000000\n\
                    max_batch_bytes = 17179869184\noffset_lag_max = 9223372036854775807\nreplication_factor = 32767\n\
                    [flows.scale_out]\nenabled = true\nslots = 1000\nsession_timeout_ms = 3600000\n";
        let flow = &Config::parse(&format!("{TWO_CLUSTERS}{edge}")).unwrap()[0];
        assert_eq!((flow.slots, flow.replication_factor, flow.max_batch_bytes), (1000, 32767, 16 << 30));
        assert_eq!(flow.commit_interval, Duration::from_secs(365 * 24 * 3600));
        let e = Config::parse(&format!("{TWO_CLUSTERS}{}", edge.replace("slots = 1000", "slots = 1001"))).unwrap_err();
        assert_eq!(e.to_string(), "flows[0].scale_out.slots: 1001 is out of bounds: must be 1 to 1000 slots");
    }

    #[test]
    fn client_files_must_be_readable() {
        assert_eq!(unreadable("ssl.ca.location", "probe"), None, "the system's CA stores");
        assert_eq!(unreadable("ssl.ca.location", "/tmp"), None, "a CA directory");
        assert_eq!(unreadable("ssl.ca.location", ""), None, "unset");
        let why = unreadable("ssl.key.location", "/tmp").unwrap();
        assert!(why.contains("is a directory"), "{why}");
        let why = unreadable("ssl.certificate.location", "/nonexistent/cert.pem").unwrap();
        assert!(why.contains("\"/nonexistent/cert.pem\"") && why.contains("No such file"), "{why}");
        let readable = std::env::temp_dir().join(format!("strait-config-{}.pem", std::process::id()));
        std::fs::write(&readable, "pem").unwrap();
        assert_eq!(unreadable("ssl.certificate.location", readable.to_str().unwrap()), None);
        std::fs::remove_file(readable).unwrap();
    }

    #[test]
    fn scale_out_settings_are_read_and_checked() {
        let flow = &Config::parse(&format!("{TWO_CLUSTERS}[flows.scale_out]\nenabled = true\n")).unwrap()[0];
        assert_eq!((flow.slots, flow.scale_out, flow.session_timeout), (12, true, Duration::from_secs(10)));
        assert_eq!(
            (flow.slots_group(), flow.slots_topic()),
            ("strait-slots-a->b".into(), "strait-slots.a.b.internal".into())
        );
        let flow = &Config::parse(&format!("{TWO_CLUSTERS}[flows.scale_out]\nslots = 5\n")).unwrap()[0];
        assert_eq!(flow.slots, 1, "slots apply only with scale-out on");
        for (extra, field) in [
            ("enabled = true\nslots = 0", "flows[0].scale_out.slots"),
            ("session_timeout_ms = 0", "flows[0].scale_out.session_timeout_ms"),
            ("instances = 3", ""),
        ] {
            let e = Config::parse(&format!("{TWO_CLUSTERS}[flows.scale_out]\n{extra}\n")).expect_err(extra);
            assert_eq!(e.field, field, "{e}");
        }
        assert_eq!((flow.slots, flow.scale_out), (1, false));
    }
}
