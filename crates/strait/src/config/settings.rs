//! A flow's settings as written under `[[flows]]`, one type per concern, each read straight from
//! the flow's (flat) TOML table and used by the rest of Strait as it is read ([`super::Flow`]
//! holds them). Defaults are each type's `Default`; bounds are checked while reading
//! ([`super::bounds`]). `docs/configuration.md` documents every key, checked by a test.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use strait_mm2::{DEFAULT_GROUPS_EXCLUDE, DEFAULT_TOPICS_EXCLUDE};

use super::bounds;
use super::kinds::{Compression, CopySetting, DeliveryKind, OnSourceGap, PolicyKind, StartFrom, SyncsLocation};
use crate::rules::Patterns;

/// Which clusters, topics and groups a flow replicates, and how target topics are named.
/// Resolved into [`super::Flow`]'s clusters, filters and policy.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Routing {
    /// Alias of the cluster to read from.
    pub source: String,
    /// Alias of the cluster to write to.
    pub target: String,
    /// Regexes (whole-name match, as MM2) of source topics to replicate. Default `[".*"]`.
    #[serde(default = "all_names")]
    pub topics: Vec<String>,
    /// Regexes of source topics never to replicate. Default MM2's
    /// `[".*[\-\.]internal", ".*\.replica", "__.*"]`. Internal topics are never replicated anyway.
    #[serde(default = "topics_exclude")]
    pub topics_exclude: Vec<String>,
    /// Regexes (whole-name match) of source consumer groups to checkpoint. Default `[".*"]`.
    #[serde(default = "all_names")]
    pub groups: Vec<String>,
    /// Regexes of groups never to checkpoint. Default MM2's
    /// `["console-consumer-.*", "connect-.*", "__.*"]`.
    #[serde(default = "groups_exclude")]
    pub groups_exclude: Vec<String>,
    /// `default` (`<source-alias>.<topic>`) or `identity`. Default `default`.
    #[serde(default)]
    pub replication_policy: PolicyKind,
    /// Separator of the `default` policy: one or more of `[a-zA-Z0-9._-]`. Default `.`.
    #[serde(default = "separator")]
    pub separator: String,
}

impl Routing {
    /// A flow from `source` to `target` with every other key at its default.
    pub fn new(source: &str, target: &str) -> Self {
        Self {
            source: source.into(),
            target: target.into(),
            topics: all_names(),
            topics_exclude: topics_exclude(),
            groups: all_names(),
            groups_exclude: groups_exclude(),
            replication_policy: PolicyKind::Default,
            separator: separator(),
        }
    }
}

fn all_names() -> Vec<String> {
    vec![".*".into()]
}
fn topics_exclude() -> Vec<String> {
    DEFAULT_TOPICS_EXCLUDE.iter().map(|s| s.to_string()).collect()
}
fn groups_exclude() -> Vec<String> {
    DEFAULT_GROUPS_EXCLUDE.iter().map(|s| s.to_string()).collect()
}
fn separator() -> String {
    ".".into()
}

/// How the source is read: topic discovery, where partitions start, progress logging.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct Reading {
    /// How often source topics and partitions are re-listed (`refresh_topics_interval_ms`; ms,
    /// [`bounds::INTERVAL_MS`]; MM2 `refresh.topics.interval.seconds`). Default 5 s.
    #[serde(rename = "refresh_topics_interval_ms", with = "bounds::interval")]
    pub refresh_topics_interval: Duration,
    /// Where a topic with no saved position starts. Partitions added later to a topic already
    /// replicated always start at earliest. Default `earliest`.
    pub start_from: StartFrom,
    /// What to do when records the flow had not copied yet were deleted on the source (a saved
    /// position below the log start). Both values log the loss. Default `continue`.
    pub on_source_gap: OnSourceGap,
    /// While a flow is behind, one INFO line this often gives records/s and the total lag
    /// (`progress_log_interval_ms`; ms, [`bounds::INTERVAL_MS`]). Default 30 s.
    #[serde(rename = "progress_log_interval_ms", with = "bounds::interval")]
    pub progress_log_interval: Duration,
    /// Kafka Connect offsets topic on the target where a MirrorMaker 2 that ran this flow before
    /// kept its source offsets; source partitions Strait has no position for resume there.
    /// Default (`None`) `mm2-offsets.<source-alias>.internal`, MM2's dedicated mode
    /// ([`super::Flow::mm2_offsets_topic`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mm2_offsets_topic: Option<String>,
    /// A cap on the record bytes (keys, values, headers) the flow copies per second, shared by
    /// its slots (bytes/s, at least 1; KIP-1279 `mirror.replication.throttled.rate`). Default
    /// (`None`): no cap. Waits are counted in `strait_throttled_ms_total`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_bytes_per_second: Option<std::num::NonZeroU64>,
}

impl Default for Reading {
    fn default() -> Self {
        Self {
            refresh_topics_interval: Duration::from_secs(5),
            start_from: StartFrom::Earliest,
            on_source_gap: OnSourceGap::Continue,
            progress_log_interval: Duration::from_secs(30),
            mm2_offsets_topic: None,
            max_bytes_per_second: None,
        }
    }
}

/// How the target is written: delivery guarantee, offset syncs, created topics.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct Writing {
    /// `at_least_once` or `exactly_once` (records, offset syncs and positions of a batch in one
    /// transaction on the target). Default `at_least_once`. See [`super::Flow::delivery`].
    pub delivery: DeliveryKind,
    /// Longest a transaction may stay open before the target aborts it (`transaction_timeout_ms`;
    /// ms, [`bounds::TRANSACTION_TIMEOUT_MS`]; Kafka `transaction.timeout.ms`, at most the broker's
    /// `transaction.max.timeout.ms`, 15 min by default). Used with `exactly_once`, where it must
    /// exceed `commit_interval_ms`. Default 60 s.
    #[serde(rename = "transaction_timeout_ms", with = "bounds::transaction_timeout")]
    pub transaction_timeout: Duration,
    /// `target` or `source` (KIP-716); `exactly_once` needs `target`. Default `target`.
    pub offset_syncs_topic_location: SyncsLocation,
    /// Most downstream records between two offset syncs of a partition (MM2 `offset.lag.max`;
    /// records, [`bounds::OFFSET_LAG_MAX`]; 0 is one sync per record). Default 100.
    #[serde(with = "bounds::offset_lag_max")]
    pub offset_lag_max: u64,
    /// Replication factor of topics Strait creates on the target: 1 to 32,767 (Kafka's `i16`), at
    /// most the target's broker count (checked at start: the flow stops naming this setting), or
    /// -1 for the broker's `default.replication.factor`. Default -1.
    #[serde(with = "bounds::replication_factor")]
    pub replication_factor: i32,
    /// Also write MirrorMaker 2's source offsets (Kafka Connect's format) to the flow's
    /// `mm2_offsets_topic` whenever positions are saved, so a dedicated MM2 on the same aliases
    /// resumes where Strait stopped ([`crate::sink`]'s `mm2_offsets`). Default false.
    pub write_mm2_offsets: bool,
    /// `records`, `batches` or `auto` ([`CopySetting`]): `batches` forwards the source's record
    /// batches as they are stored; `auto` takes batches where the flow allows them. Default
    /// `records` ([`CopySetting`]'s default). The flow's [`crate::config::Flow::copy`] says what it took.
    pub copy: CopySetting,
    /// `auto`, `none`, `gzip`, `snappy`, `lz4` or `zstd` ([`Compression`]): the codec the record
    /// path produces with (`auto`: lz4 to a target in another region, else none); `batches` keep
    /// the source's. Default `auto`.
    pub compression: Compression,
}

impl Default for Writing {
    fn default() -> Self {
        Self {
            delivery: DeliveryKind::AtLeastOnce,
            transaction_timeout: Duration::from_secs(60),
            offset_syncs_topic_location: SyncsLocation::Target,
            offset_lag_max: strait_mm2::DEFAULT_OFFSET_LAG_MAX,
            replication_factor: -1,
            write_mm2_offsets: false,
            copy: CopySetting::default(),
            compression: Compression::Auto,
        }
    }
}

/// When a batch of records is committed (whichever limit comes first).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct Batching {
    /// Longest time a batch stays uncommitted (`commit_interval_ms`; ms, [`bounds::INTERVAL_MS`]):
    /// bounds duplicates after a crash in at-least-once mode. In exactly-once mode a batch is
    /// committed sooner once the source is drained ([`strait_connect::RuntimeConfig::min_batch_wait`]),
    /// so this bounds the latency of `read_committed` consumers only in a catch-up. Default 1 s.
    #[serde(rename = "commit_interval_ms", with = "bounds::interval")]
    pub commit_interval: Duration,
    /// A batch is committed at this many records ([`bounds::BATCH_RECORDS`]). Default 250,000:
    /// large enough that in a catch-up `commit_interval_ms` decides, since an at-least-once
    /// commit waits for every ack and so lets librdkafka's queue run empty.
    #[serde(with = "bounds::batch_records")]
    pub max_batch_records: usize,
    /// A batch is committed at this many bytes ([`bounds::BATCH_BYTES`]). Default 128 MiB.
    #[serde(with = "bounds::batch_bytes")]
    pub max_batch_bytes: usize,
}

impl Default for Batching {
    fn default() -> Self {
        Self { commit_interval: Duration::from_secs(1), max_batch_records: 250_000, max_batch_bytes: 128 << 20 }
    }
}

/// MM2 checkpoints of source consumer groups, and the sync of their offsets into target groups.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct Checkpoints {
    /// Write checkpoints to `<source-alias>.checkpoints.internal` on the target (MM2
    /// `emit.checkpoints.enabled`). Default true.
    pub emit_checkpoints: bool,
    /// How often checkpoints are emitted (`emit_checkpoints_interval_ms`; ms,
    /// [`bounds::INTERVAL_MS`]). Default 5 s (MM2 waits 60 s).
    #[serde(rename = "emit_checkpoints_interval_ms", with = "bounds::interval")]
    pub emit_checkpoints_interval: Duration,
    /// How often source consumer groups are re-listed (`refresh_groups_interval_ms`; ms,
    /// [`bounds::INTERVAL_MS`]). Default 10 s.
    #[serde(rename = "refresh_groups_interval_ms", with = "bounds::interval")]
    pub refresh_groups_interval: Duration,
    /// Commit translated offsets into target groups that are absent or empty (MM2
    /// `sync.group.offsets.enabled`). Default false.
    pub sync_group_offsets: bool,
    /// How often group offsets are synced (`sync_group_offsets_interval_ms`; ms,
    /// [`bounds::INTERVAL_MS`]). Default 5 s.
    #[serde(rename = "sync_group_offsets_interval_ms", with = "bounds::interval")]
    pub sync_group_offsets_interval: Duration,
}

impl Default for Checkpoints {
    fn default() -> Self {
        Self {
            emit_checkpoints: true,
            emit_checkpoints_interval: Duration::from_secs(5),
            refresh_groups_interval: Duration::from_secs(10),
            sync_group_offsets: false,
            sync_group_offsets_interval: Duration::from_secs(5),
        }
    }
}

/// MM2 heartbeats written to the target's `heartbeats` topic.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct Heartbeats {
    /// Write heartbeats (MM2 `emit.heartbeats.enabled`). Default true.
    pub emit_heartbeats: bool,
    /// How often heartbeats are written (`emit_heartbeats_interval_ms`; ms,
    /// [`bounds::INTERVAL_MS`]). Default 1 s.
    #[serde(rename = "emit_heartbeats_interval_ms", with = "bounds::interval")]
    pub emit_heartbeats_interval: Duration,
}

impl Default for Heartbeats {
    fn default() -> Self {
        Self { emit_heartbeats: true, emit_heartbeats_interval: Duration::from_secs(1) }
    }
}

/// Source topic configs applied to the target topics after creation.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct TopicConfigSync {
    /// Apply source topic config changes to the target topics (MM2 `sync.topic.configs.enabled`,
    /// with KIP-894's incremental semantics). Default true.
    pub sync_topic_configs: bool,
    /// How often topic configs are synced (`sync_topic_configs_interval_ms`; ms,
    /// [`bounds::INTERVAL_MS`]; MM2 `sync.topic.configs.interval.seconds`). Default 60 s.
    #[serde(rename = "sync_topic_configs_interval_ms", with = "bounds::interval")]
    pub sync_topic_configs_interval: Duration,
    /// Regexes (whole-name match) of topic config names never synced, in addition to MM2's
    /// exclude list (MM2 `config.properties.exclude`). Default none.
    pub sync_topic_configs_exclude: Patterns,
}

impl TopicConfigSync {
    /// The sync interval; `None` when the sync is off.
    pub fn interval(&self) -> Option<Duration> {
        self.sync_topic_configs.then_some(self.sync_topic_configs_interval)
    }
}

impl Default for TopicConfigSync {
    fn default() -> Self {
        Self {
            sync_topic_configs: true,
            sync_topic_configs_interval: Duration::from_secs(60),
            sync_topic_configs_exclude: Patterns::default(),
        }
    }
}

/// Topic ACLs of the source applied to the target topics (MM2 `sync.topic.acls.enabled`, whose
/// rules [`crate::control::topic_acls`] follows). Nothing is ever deleted on the target.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct TopicAclSync {
    /// Create the source's literal topic ACLs on the target topics, ALLOW WRITE dropped and ALLOW
    /// ALL made ALLOW READ (MM2 `sync.topic.acls.enabled`, on by default there). Default false.
    pub sync_topic_acls: bool,
    /// How often topic ACLs are synced, the first time at start (`sync_topic_acls_interval_ms`;
    /// ms, [`bounds::INTERVAL_MS`]; MM2 `sync.topic.acls.interval.seconds`). Default 600 s.
    #[serde(rename = "sync_topic_acls_interval_ms", with = "bounds::interval")]
    pub sync_topic_acls_interval: Duration,
}

impl TopicAclSync {
    /// The sync interval; `None` when the sync is off.
    pub fn interval(&self) -> Option<Duration> {
        self.sync_topic_acls.then_some(self.sync_topic_acls_interval)
    }
}

impl Default for TopicAclSync {
    fn default() -> Self {
        Self { sync_topic_acls: false, sync_topic_acls_interval: Duration::from_secs(600) }
    }
}

/// `[flows.scale_out]`: instances of a flow share its source partitions through a consumer group
/// on the target cluster, in slots (see [`crate::slots`]).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScaleOut {
    /// Share the flow between instances. Off: one instance runs the flow, and a second one is
    /// refused. Default false.
    pub enabled: bool,
    /// Slots the flow's source partitions are spread over (the coordination topic's partition
    /// count); the most instances that can share the work ([`bounds::SLOTS`]). Fixed once
    /// instances ran. Only with `enabled` (else the flow has one slot, [`super::Flow::slots`]).
    /// Default 12.
    #[serde(with = "bounds::slots")]
    pub slots: u32,
    /// How long an instance that stopped answering keeps its slots before the group gives them
    /// to the others (`session_timeout_ms`; ms, [`bounds::SESSION_TIMEOUT_MS`]; the group's
    /// `session.timeout.ms`, within the broker's `group.min/max.session.timeout.ms`, checked at
    /// start). Default 10 s.
    #[serde(rename = "session_timeout_ms", with = "bounds::session_timeout")]
    pub session_timeout: Duration,
}

impl Default for ScaleOut {
    fn default() -> Self {
        Self { enabled: false, slots: 12, session_timeout: Duration::from_secs(10) }
    }
}

/// One `[[flows]]` table as written: every concern, flat in TOML except `[flows.scale_out]`.
#[derive(Debug, Clone, Serialize)]
pub struct FlowConfig {
    /// Clusters, filters, naming.
    #[serde(flatten)]
    pub routing: Routing,
    /// Reading the source.
    #[serde(flatten)]
    pub reading: Reading,
    /// Writing the target.
    #[serde(flatten)]
    pub writing: Writing,
    /// Batch limits.
    #[serde(flatten)]
    pub batching: Batching,
    /// Checkpoints and group offset sync.
    #[serde(flatten)]
    pub checkpoints: Checkpoints,
    /// Heartbeats.
    #[serde(flatten)]
    pub heartbeats: Heartbeats,
    /// Topic config sync.
    #[serde(flatten)]
    pub topic_configs: TopicConfigSync,
    /// Topic ACL sync.
    #[serde(flatten)]
    pub topic_acls: TopicAclSync,
    /// `[flows.scale_out]`.
    pub scale_out: ScaleOut,
}

impl FlowConfig {
    /// A flow from `source` to `target` with every other key at its default.
    pub fn new(source: &str, target: &str) -> Self {
        Self {
            routing: Routing::new(source, target),
            reading: Reading::default(),
            writing: Writing::default(),
            batching: Batching::default(),
            checkpoints: Checkpoints::default(),
            heartbeats: Heartbeats::default(),
            topic_configs: TopicConfigSync::default(),
            topic_acls: TopicAclSync::default(),
            scale_out: ScaleOut::default(),
        }
    }
}
