//! [`Flow`]: one `[[flows]]` entry resolved (clusters by alias, compiled filters, the naming
//! policy, the residency gate) around its settings as read ([`super::settings`]), and the checks
//! that span several keys.

use std::collections::BTreeMap;
use std::time::Duration;

use strait_mm2::ReplicationPolicy;

use super::cluster::ClusterConfig;
use super::kinds::{Compression, CopyChoice, CopySetting, DeliveryKind, PolicyKind, SyncsLocation};
use super::settings::{
    Batching, Checkpoints, FlowConfig, Heartbeats, Reading, ScaleOut, TopicAclSync, TopicConfigSync, Writing,
};
use crate::residency::{names_of, ResidencyGate, ResidencyRules};
use crate::rules::{err, ConfigError, NameFilter};

/// How a flow delivers ([`Flow::delivery`]).
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

/// A validated flow: its clusters, filters, naming and residency resolved, and its settings per
/// concern as read from TOML. The only shape of the config the rest of Strait sees.
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
    /// Topic discovery, where partitions start, progress logging.
    pub reading: Reading,
    /// Delivery guarantee, offset syncs, created topics.
    pub writing: Writing,
    /// What the flow copies, records or batches, and why (the `copy` setting resolved).
    pub copy: CopyChoice,
    /// Batch limits.
    pub batching: Batching,
    /// Checkpoints and group offset sync.
    pub checkpoints: Checkpoints,
    /// Heartbeats.
    pub heartbeats: Heartbeats,
    /// Topic config sync.
    pub topic_configs: TopicConfigSync,
    /// Topic ACL sync.
    pub topic_acls: TopicAclSync,
    /// `[flows.scale_out]`.
    pub scale_out: ScaleOut,
}

impl Flow {
    /// At-least-once, or exactly-once with its transaction timeout.
    pub fn delivery(&self) -> Delivery {
        match self.writing.delivery {
            DeliveryKind::AtLeastOnce => Delivery::AtLeastOnce,
            DeliveryKind::ExactlyOnce => {
                Delivery::ExactlyOnce { transaction_timeout: self.writing.transaction_timeout }
            }
        }
    }

    /// This flow producing with `codec` (its `compression = "auto"` resolved at start).
    pub fn with_compression(&self, codec: Compression) -> Self {
        let mut flow = self.clone();
        flow.writing.compression = codec;
        flow
    }

    /// Slots of the flow: `[flows.scale_out] slots`, or 1 when scale-out is off.
    pub fn slots(&self) -> u32 {
        if self.scale_out.enabled {
            self.scale_out.slots
        } else {
            1
        }
    }

    /// MM2's source offsets topic on the target (cut-over from MM2): `mm2_offsets_topic`, by
    /// default `mm2-offsets.<source-alias>.internal`.
    pub fn mm2_offsets_topic(&self) -> String {
        self.reading.mm2_offsets_topic.clone().unwrap_or_else(|| format!("mm2-offsets.{}.internal", self.source.alias))
    }

    /// Where the flow's offset syncs live: the cluster and `mm2-offset-syncs.<alias>.internal`
    /// (KIP-716: named after the other cluster's alias).
    pub fn offset_syncs(&self) -> (&ClusterConfig, String) {
        match self.writing.offset_syncs_topic_location {
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
    /// the slot count, at least `floor` (and at most `total`). Every slot has its own batches
    /// and prefetch queue, so an instance owning every slot keeps about the memory of a flow
    /// without scale-out.
    pub fn slot_share(&self, total: usize, floor: usize) -> usize {
        // At most SLOTS.1 slots: the count fits.
        (total / self.slots().max(1) as usize).max(floor).min(total)
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

/// Resolves `flows[i]` (`f`) against the clusters and residency rules. Errors name the field: an
/// unknown alias, a flow onto its source, a separator not usable in topic names or found in an
/// alias, a bad filter regex, exactly-once with offset syncs on the source or a transaction
/// timeout within the commit interval, or `copy = "batches"` with a `compression`.
pub(super) fn resolve(
    i: usize,
    f: FlowConfig,
    clusters: &BTreeMap<String, &ClusterConfig>,
    residency: &ResidencyRules,
) -> Result<Flow, ConfigError> {
    let field = format!("flows[{i}]");
    let r = &f.routing;
    let cluster = |alias: &String, side: &str| {
        clusters
            .get(alias)
            .map(|c| (*c).clone())
            .ok_or_else(|| err(format!("{field}.{side}"), format!("unknown cluster alias {alias:?}")))
    };
    let (source, target) = (cluster(&r.source, "source")?, cluster(&r.target, "target")?);
    if r.source == r.target {
        return Err(err(format!("{field}.target"), "a flow's target must differ from its source"));
    }
    if r.separator.is_empty() || !r.separator.chars().all(|ch| ch.is_ascii_alphanumeric() || "._-".contains(ch)) {
        return Err(err(format!("{field}.separator"), "must be one or more of [a-zA-Z0-9._-]"));
    }
    for (alias, side) in [(&r.source, "source"), (&r.target, "target")] {
        if alias.contains(&r.separator) {
            return Err(err(
                format!("{field}.{side}"),
                format!("alias {alias:?} contains the separator {:?}", r.separator),
            ));
        }
    }
    if f.writing.delivery == DeliveryKind::ExactlyOnce {
        if f.writing.offset_syncs_topic_location != SyncsLocation::Target {
            return Err(err(
                format!("{field}.offset_syncs_topic_location"),
                "must be \"target\" with delivery = \"exactly_once\": offset syncs are written in the target's transactions",
            ));
        }
        if f.writing.transaction_timeout <= f.batching.commit_interval {
            return Err(err(
                format!("{field}.transaction_timeout_ms"),
                format!(
                    "must exceed commit_interval_ms ({} ms): a batch is one transaction",
                    f.batching.commit_interval.as_millis()
                ),
            ));
        }
    }
    let recompressed = !matches!(f.writing.compression, Compression::Auto | Compression::None);
    let copy = match f.writing.copy {
        CopySetting::Batches if recompressed => {
            return Err(err(
                format!("{field}.compression"),
                "applies to copy = \"records\": \"batches\" are forwarded in the codec the source stored them in",
            ))
        }
        CopySetting::Auto if recompressed => {
            CopyChoice::records_unless(Some(format!("{field}.compression asks the records to be compressed anew")))
        }
        setting => CopyChoice::of(setting),
    };
    let separator = r.separator.clone();
    Ok(Flow {
        name: format!("{}->{}", r.source, r.target),
        topics: NameFilter::new(
            &format!("{field}.topics"),
            &r.topics,
            &format!("{field}.topics_exclude"),
            &r.topics_exclude,
        )?,
        groups: NameFilter::new(
            &format!("{field}.groups"),
            &r.groups,
            &format!("{field}.groups_exclude"),
            &r.groups_exclude,
        )?,
        policy: match r.replication_policy {
            PolicyKind::Default => ReplicationPolicy::Default { separator },
            PolicyKind::Identity => ReplicationPolicy::Identity { separator },
        },
        residency: residency.for_target(&target.alias, &target.zones),
        source,
        target,
        reading: f.reading,
        writing: f.writing,
        copy,
        batching: f.batching,
        checkpoints: f.checkpoints,
        heartbeats: f.heartbeats,
        topic_configs: f.topic_configs,
        topic_acls: f.topic_acls,
        scale_out: f.scale_out,
    })
}
