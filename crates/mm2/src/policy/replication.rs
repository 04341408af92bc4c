//! Remote-topic naming (MM2 `DefaultReplicationPolicy`, `IdentityReplicationPolicy`).

use super::names::{DEFAULT_SEPARATOR, HEARTBEATS_TOPIC};

/// How topics are renamed on the target cluster, and how a remote topic's origin is read back
/// from its name.
///
/// - `Default` (MM2 `DefaultReplicationPolicy`): remote name is `alias + separator + topic`,
///   e.g. `us.orders`; multi-hop names stack, e.g. `eu.us.orders`.
/// - `Identity` (MM2 `IdentityReplicationPolicy`): names are unchanged, except topics whose name
///   ends with `heartbeats`, which are handled exactly like `Default` so heartbeats still reveal
///   the topology. Identity naming cannot detect cycles from names (see [`is_cycle`](Self::is_cycle)).
///
/// `separator` is MM2's `replication.policy.separator` (default `.`); it must be non-empty
/// (with an empty separator no topic is considered remote). Internal topic names follow MM2's
/// default `replication.policy.internal.topic.separator.enabled=true`, i.e. they use the custom
/// separator too. The default value is `Default { separator: "." }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicationPolicy {
    /// Prefix the source alias: `alias + separator + topic`.
    Default {
        /// Text between alias and topic, usually `.`.
        separator: String,
    },
    /// Keep names unchanged, except heartbeats topics, which are prefixed like `Default`.
    Identity {
        /// Separator used for heartbeats topics and internal topic names, usually `.`.
        separator: String,
    },
}

impl Default for ReplicationPolicy {
    /// `Default { separator: "." }`, MM2's default policy.
    fn default() -> Self {
        Self::Default { separator: DEFAULT_SEPARATOR.to_owned() }
    }
}

impl ReplicationPolicy {
    /// `Identity { separator: "." }`.
    pub fn identity() -> Self {
        Self::Identity { separator: DEFAULT_SEPARATOR.to_owned() }
    }

    /// The configured separator.
    pub fn separator(&self) -> &str {
        match self {
            Self::Default { separator } | Self::Identity { separator } => separator,
        }
    }

    /// True when this policy treats `topic` with the `Default` naming rules: always for
    /// `Default`; for `Identity` only when the name ends with `heartbeats` (MM2's
    /// `looksLikeHeartbeat`, a plain suffix test).
    fn uses_prefix(&self, topic: &str) -> bool {
        match self {
            Self::Default { .. } => true,
            Self::Identity { .. } => topic.ends_with(HEARTBEATS_TOPIC),
        }
    }

    /// Name on the target cluster of `topic` replicated from the cluster `source_alias`
    /// (MM2 `formatRemoteTopic`).
    ///
    /// `Default`: `source_alias + separator + topic`. `Identity`: `topic`, unless it ends with
    /// `heartbeats`, then as `Default`.
    pub fn remote_topic(&self, source_alias: &str, topic: &str) -> String {
        if self.uses_prefix(topic) {
            format!("{source_alias}{}{topic}", self.separator())
        } else {
            topic.to_owned()
        }
    }

    /// Alias of the cluster a remote topic was replicated from, read from its name
    /// (MM2 `topicSource`); `None` if the name is not a remote topic.
    ///
    /// `Default`: the text before the first separator, `None` if there is no separator.
    /// Like MM2 (which uses Java's `String.split`), a separator followed only by more separators
    /// does not count: `us.` and `us..` are not remote, `.t` has source `""`.
    /// `Identity`: as `Default` for names ending with `heartbeats`, otherwise `None`
    /// (MM2 would return its optional `source.cluster.alias` setting, which Strait does not use).
    pub fn topic_source(&self, topic: &str) -> Option<String> {
        if !self.uses_prefix(topic) {
            return None;
        }
        split_source(topic, self.separator()).map(str::to_owned)
    }

    /// Name of a remote topic on the cluster it was replicated from, i.e. the name with one
    /// `alias + separator` prefix removed (MM2 `upstreamTopic`); `None` when
    /// [`topic_source`](Self::topic_source) is `None`. The result may itself be a remote topic.
    ///
    /// Deviation from MM2: for `Identity` and a non-heartbeats name MM2 returns the name
    /// unchanged; this returns `None`, so a walk "until `None`" always terminates (each `Some`
    /// is strictly shorter than its input).
    pub fn upstream_topic(&self, topic: &str) -> Option<String> {
        if !self.uses_prefix(topic) {
            return None;
        }
        let sep = self.separator();
        let source = split_source(topic, sep)?;
        Some(topic[source.len() + sep.len()..].to_owned())
    }

    /// Name of the topic on the cluster where it was first produced, through any number of hops
    /// (MM2 `originalTopic`): applies [`upstream_topic`](Self::upstream_topic) until it returns
    /// `None`. A non-remote topic is its own original. Example (default): `a.b.t` → `t`.
    pub fn original_topic(&self, topic: &str) -> String {
        let mut current = topic.to_owned();
        while let Some(up) = self.upstream_topic(&current) {
            current = up;
        }
        current
    }

    /// Whether replicating `topic` to the cluster `target_alias` would close a cycle
    /// (MM2 `MirrorSourceConnector.isCycle`): walks [`topic_source`](Self::topic_source) /
    /// [`upstream_topic`](Self::upstream_topic) hop by hop and returns true as soon as a hop's
    /// source alias equals `target_alias`. Example (default): `eu.us.t` towards `eu` or `us` is a
    /// cycle, towards `ap` is not.
    ///
    /// Under `Identity` only heartbeats names carry provenance, so data-topic cycles are not
    /// detected here (Strait uses its provenance header for those).
    pub fn is_cycle(&self, topic: &str, target_alias: &str) -> bool {
        let mut current = topic.to_owned();
        loop {
            match self.topic_source(&current) {
                None => return false,
                Some(source) if source == target_alias => return true,
                Some(_) => match self.upstream_topic(&current) {
                    Some(up) if up != current => current = up,
                    _ => return false,
                },
            }
        }
    }

    /// Whether `topic` is a heartbeats topic, local (`heartbeats`) or replicated
    /// (`us.heartbeats`, `eu.us.heartbeats`): its [`original_topic`](Self::original_topic) is
    /// [`HEARTBEATS_TOPIC`] (MM2 `isHeartbeatsTopic`).
    pub fn is_heartbeats_topic(&self, topic: &str) -> bool {
        self.original_topic(topic) == HEARTBEATS_TOPIC
    }

    /// Offset-syncs topic name with this policy's separator (MM2 `offsetSyncsTopic`):
    /// `mm2-offset-syncs<sep><other_alias><sep>internal`. Same as the free function
    /// [`offset_syncs_topic`](super::offset_syncs_topic) when the separator is `.`.
    pub fn offset_syncs_topic(&self, other_alias: &str) -> String {
        let sep = self.separator();
        format!("mm2-offset-syncs{sep}{other_alias}{sep}internal")
    }

    /// Checkpoints topic name with this policy's separator (MM2 `checkpointsTopic`):
    /// `<source_alias><sep>checkpoints<sep>internal`. Same as the free function
    /// [`checkpoints_topic`](super::checkpoints_topic) when the separator is `.`.
    pub fn checkpoints_topic(&self, source_alias: &str) -> String {
        let sep = self.separator();
        format!("{source_alias}{sep}checkpoints{sep}internal")
    }

    /// Whether `topic` is a checkpoints topic named with this policy's separator: ends with
    /// `<sep>checkpoints<sep>internal` (MM2 `isCheckpointsTopic`).
    pub fn is_checkpoints_topic(&self, topic: &str) -> bool {
        let sep = self.separator();
        topic.ends_with(&format!("{sep}checkpoints{sep}internal"))
    }

    /// Whether `topic` is internal and never replicated (MM2 `isInternalTopic`): the free
    /// function [`is_internal_topic`](super::is_internal_topic), or the name ends with
    /// `<sep>internal` (MM2 internal topics named with a custom separator).
    pub fn is_internal_topic(&self, topic: &str) -> bool {
        super::is_internal_topic(topic) || topic.ends_with(&format!("{}internal", self.separator()))
    }

    /// Topic name to put in a [`Checkpoint`](crate::Checkpoint) for source topic `topic` on the
    /// flow `source_alias` → `target_alias` (MM2 `MirrorCheckpointTask.renameTopicPartition`):
    /// if the topic came from the target in the first place (its
    /// [`topic_source`](Self::topic_source) is `target_alias`), its
    /// [`original_topic`](Self::original_topic) (`eu.orders` → `orders` for target `eu`);
    /// otherwise its [`remote_topic`](Self::remote_topic) (`orders` → `us.orders`).
    pub fn rename_for_checkpoint(&self, topic: &str, source_alias: &str, target_alias: &str) -> String {
        if self.topic_source(topic).as_deref() == Some(target_alias) {
            self.original_topic(topic)
        } else {
            self.remote_topic(source_alias, topic)
        }
    }
}

/// Text before the first `sep` in `topic`, with Java `String.split` semantics: `None` unless
/// splitting on `sep` and dropping trailing empty pieces leaves at least two pieces.
/// An empty `sep` never splits.
fn split_source<'a>(topic: &'a str, sep: &str) -> Option<&'a str> {
    if sep.is_empty() {
        return None;
    }
    let (source, rest) = topic.split_once(sep)?;
    // At least one non-empty piece must follow, i.e. `rest` is not made only of separators.
    if rest.split(sep).all(str::is_empty) {
        return None;
    }
    Some(source)
}
