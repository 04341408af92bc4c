//! Fixed names and default lists, for the default `.` separator.
//!
//! Pattern lists here are Java regular expressions that MM2 matches against the **whole** name
//! (`Matcher.matches`); with the `regex` crate anchor them as `^(?:PATTERN)$`.

/// Separator of the default replication policy (MM2 `replication.policy.separator` default).
pub const DEFAULT_SEPARATOR: &str = ".";

/// Name of the heartbeats topic on every cluster MM2 writes to (MM2 `heartbeats.topic` default).
pub const HEARTBEATS_TOPIC: &str = "heartbeats";

/// MM2 default `topics.exclude` (regexes, whole-name match): internal-looking names, `.replica`
/// (MM1 legacy) and double-underscore topics.
pub const DEFAULT_TOPICS_EXCLUDE: &[&str] = &[".*[\\-\\.]internal", ".*\\.replica", "__.*"];

/// MM2 default `groups.exclude` (regexes, whole-name match): console consumers, Connect workers
/// and double-underscore groups.
pub const DEFAULT_GROUPS_EXCLUDE: &[&str] = &["console-consumer-.*", "connect-.*", "__.*"];

/// Topic config keys MM2 never copies to the target (MM2 default `config.properties.exclude`).
///
/// These are literal key names. MM2's own config spells them as regexes with escaped dots; the
/// literal form compares exactly with `==` and, used as a regex, still matches its own key
/// (a `.` also matches a literal dot).
pub const CONFIG_PROPERTIES_EXCLUDE: &[&str] = &[
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "message.timestamp.difference.max.ms",
    "message.timestamp.type",
    "unclean.leader.election.enable",
    "min.insync.replicas",
];

/// Name of the offset-syncs topic for the default separator:
/// `mm2-offset-syncs.<other_alias>.internal`.
///
/// `other_alias` is the alias of the cluster the topic is **not** on (KIP-716): the target alias
/// when the topic lives on the source cluster (`offset-syncs.topic.location=source`, MM2's
/// default), the source alias when it lives on the target (`target`, Strait's default).
/// For a custom separator use [`ReplicationPolicy::offset_syncs_topic`](super::ReplicationPolicy::offset_syncs_topic).
pub fn offset_syncs_topic(other_alias: &str) -> String {
    super::ReplicationPolicy::default().offset_syncs_topic(other_alias)
}

/// Name of the checkpoints topic on the target cluster for the default separator:
/// `<source_alias>.checkpoints.internal`.
/// For a custom separator use [`ReplicationPolicy::checkpoints_topic`](super::ReplicationPolicy::checkpoints_topic).
pub fn checkpoints_topic(source_alias: &str) -> String {
    super::ReplicationPolicy::default().checkpoints_topic(source_alias)
}

/// Whether a topic is internal and must never be replicated, whatever the filters say
/// (MM2 `ReplicationPolicy.isInternalTopic` with the default separator): names ending in
/// `.internal` or `-internal` (Connect and MM2 internal topics, including offset-syncs and
/// checkpoints topics) or starting with `__` or `.` (Kafka internal topics).
///
/// Heartbeats topics are **not** internal: they are replicated onward.
/// For a custom separator use [`ReplicationPolicy::is_internal_topic`](super::ReplicationPolicy::is_internal_topic).
pub fn is_internal_topic(topic: &str) -> bool {
    topic.ends_with(".internal") || topic.ends_with("-internal") || topic.starts_with("__") || topic.starts_with('.')
}
