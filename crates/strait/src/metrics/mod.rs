//! Prometheus metrics of every flow (the counterparts of MM2's `kafka.connect.mirror` JMX beans),
//! kept in one process-wide registry and served by [`crate::http`]. Hot paths hold cloned metric
//! handles (atomics), so a record costs no registry lookup.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Labels of a per-partition metric (MM2: `source`, `target`, `topic`, `partition`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PartitionLabels {
    /// Source cluster alias.
    pub source: String,
    /// Target cluster alias.
    pub target: String,
    /// Source topic.
    pub topic: String,
    /// Partition number.
    pub partition: String,
}

/// Labels of a per-flow metric.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FlowLabels {
    /// Source cluster alias.
    pub source: String,
    /// Target cluster alias.
    pub target: String,
}

/// Labels of a per-slot metric of a flow (scale-out: [`crate::slots`]).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SlotLabels {
    /// Source cluster alias.
    pub source: String,
    /// Target cluster alias.
    pub target: String,
    /// Slot number, 0 to the flow's slot count - 1.
    pub slot: String,
}

/// Labels of a per-topic metric of a flow.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TopicLabels {
    /// Source cluster alias.
    pub source: String,
    /// Target cluster alias.
    pub target: String,
    /// Source topic.
    pub topic: String,
}

/// Labels of a per-broker metric.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BrokerLabels {
    /// Cluster alias.
    pub cluster: String,
    /// Broker id (`node.id`).
    pub broker: String,
}

/// Labels of a per-group metric (MM2's `MirrorCheckpointConnector` beans: `group`, `topic`,
/// `partition`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupLabels {
    /// Source cluster alias.
    pub source: String,
    /// Target cluster alias.
    pub target: String,
    /// Consumer group.
    pub group: String,
    /// Target-side topic, as checkpoints carry it.
    pub topic: String,
    /// Partition number.
    pub partition: String,
}

/// Replication latency buckets (ms): 1 ms to about 65 s, doubling.
#[derive(Clone)]
struct LatencyBuckets;

impl MetricConstructor<Histogram> for LatencyBuckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(exponential_buckets(1.0, 2.0, 17))
    }
}

/// Every metric family, registered once.
pub struct Metrics {
    registry: Registry,
    records: Family<PartitionLabels, Counter>,
    bytes: Family<PartitionLabels, Counter>,
    latency: Family<PartitionLabels, Histogram, LatencyBuckets>,
    age: Family<PartitionLabels, Gauge>,
    lag: Family<PartitionLabels, Gauge>,
    offset_syncs: Family<PartitionLabels, Counter>,
    flow_up: Family<FlowLabels, Gauge>,
    writable: Family<FlowLabels, Gauge>,
    copies_batches: Family<FlowLabels, Gauge>,
    slot_owned: Family<SlotLabels, Gauge>,
    control_tasks_up: Family<FlowLabels, Gauge>,
    throttled_ms: Family<FlowLabels, Counter>,
    acls_synced: Family<FlowLabels, Counter>,
    residency_dropped: Family<TopicLabels, Counter>,
    topics_recreated: Family<TopicLabels, Counter>,
    loop_guard_dropped: Family<FlowLabels, Counter>,
    checkpoints: Family<FlowLabels, Counter>,
    group_offset_syncs: Family<FlowLabels, Counter>,
    checkpoint_latency: Family<GroupLabels, Gauge>,
    broker_outages: Family<BrokerLabels, Counter>,
    invalid_positions: Family<TopicLabels, Counter>,
    /// Per-partition series, or one per topic (`partition=""`).
    per_partition: AtomicBool,
    /// Flow name → its labels, running, target answers: `/ready` and `strait_flow_writable`.
    flows: Mutex<BTreeMap<String, ready::FlowState>>,
}

/// The handles the data path updates for one source partition.
#[derive(Clone)]
pub struct PartitionMetrics {
    /// Records acknowledged by the target (`strait_records_total`).
    pub records: Counter,
    /// Their bytes, as the source consumer counted them (`strait_bytes_total`).
    pub bytes: Counter,
    /// Target ack time minus record timestamp, ms (`strait_replication_latency_ms`).
    pub latency: Histogram,
    /// Age of the last acknowledged record at its ack, ms (`strait_record_age_ms`).
    pub age: Gauge,
    /// Offset syncs written (`strait_offset_syncs_total`).
    pub offset_syncs: Counter,
}

/// The process-wide metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

fn group_labels((source, target): (&str, &str), group: &str, topic: &str, partition: i32) -> GroupLabels {
    GroupLabels {
        source: source.into(),
        target: target.into(),
        group: group.into(),
        topic: topic.into(),
        partition: partition.to_string(),
    }
}

impl Metrics {
    /// Per-partition series (`true`, the default) or one per topic. Set before any flow starts.
    pub fn set_per_partition(&self, per_partition: bool) {
        self.per_partition.store(per_partition, Ordering::Relaxed);
    }

    /// Whether series are per partition.
    pub fn per_partition(&self) -> bool {
        self.per_partition.load(Ordering::Relaxed)
    }

    fn partition_labels(&self, source: &str, target: &str, topic: &str, partition: i32) -> PartitionLabels {
        let partition = if self.per_partition() { partition.to_string() } else { String::new() };
        PartitionLabels { source: source.into(), target: target.into(), topic: topic.into(), partition }
    }

    fn new() -> Self {
        let mut m = Metrics {
            registry: Registry::default(),
            records: Family::default(),
            bytes: Family::default(),
            latency: Family::new_with_constructor(LatencyBuckets),
            age: Family::default(),
            lag: Family::default(),
            offset_syncs: Family::default(),
            flow_up: Family::default(),
            writable: Family::default(),
            copies_batches: Family::default(),
            slot_owned: Family::default(),
            control_tasks_up: Family::default(),
            throttled_ms: Family::default(),
            acls_synced: Family::default(),
            residency_dropped: Family::default(),
            topics_recreated: Family::default(),
            loop_guard_dropped: Family::default(),
            checkpoints: Family::default(),
            group_offset_syncs: Family::default(),
            checkpoint_latency: Family::default(),
            broker_outages: Family::default(),
            invalid_positions: Family::default(),
            per_partition: AtomicBool::new(true),
            flows: Mutex::default(),
        };
        let r = &mut m.registry;
        r.register("strait_records", "Records acknowledged by the target", m.records.clone());
        r.register("strait_bytes", "Bytes of the records acknowledged by the target", m.bytes.clone());
        r.register(
            "strait_replication_latency_ms",
            "Target acknowledgement time minus the record's timestamp (ms)",
            m.latency.clone(),
        );
        r.register("strait_record_age_ms", "Age of the last acknowledged record when acknowledged (ms)", m.age.clone());
        r.register(
            "strait_replication_lag_records",
            "Source high watermark minus the replicated position (records)",
            m.lag.clone(),
        );
        r.register("strait_offset_syncs", "MM2 offset syncs written", m.offset_syncs.clone());
        r.register("strait_flow_up", "1 while the flow runs, 0 otherwise", m.flow_up.clone());
        r.register(
            "strait_flow_writable",
            "1 while the flow runs and its target answered the last probe (what /ready says of the flow), 0 otherwise",
            m.writable.clone(),
        );
        r.register(
            "strait_flow_copies_batches",
            "1 when the flow copies whole batches, 0 when it copies records (copy, as taken)",
            m.copies_batches.clone(),
        );
        r.register(
            "strait_slot_owned",
            "1 for each slot of the flow this instance owns (a series only for owned slots)",
            m.slot_owned.clone(),
        );
        r.register(
            "strait_control_tasks_up",
            "1 while this instance runs the flow's heartbeats, checkpoints, topic config and ACL sync (the owner of slot 0)",
            m.control_tasks_up.clone(),
        );
        r.register(
            "strait_throttled_ms",
            "Time the flow's source waited to keep under max_bytes_per_second (ms)",
            m.throttled_ms.clone(),
        );
        r.register(
            "strait_acls_synced",
            "Topic ACL bindings created on the target by sync_topic_acls",
            m.acls_synced.clone(),
        );
        r.register("strait_residency_dropped", "Records dropped by the residency gate", m.residency_dropped.clone());
        r.register(
            "strait_source_topics_recreated",
            "Times a source topic was found deleted and created again (a new topic id): copied again from its log start",
            m.topics_recreated.clone(),
        );
        r.register("strait_loop_guard_dropped", "Records dropped by the loop guard", m.loop_guard_dropped.clone());
        r.register("strait_checkpoints", "MM2 checkpoints written", m.checkpoints.clone());
        r.register(
            "strait_checkpoint_latency_ms",
            "Time from creating the group partition's last checkpoint to the target's ack (ms), as MM2's checkpoint-latency-ms",
            m.checkpoint_latency.clone(),
        );
        r.register(
            "strait_group_offset_syncs",
            "Translated offsets committed into target consumer groups (partitions)",
            m.group_offset_syncs.clone(),
        );
        r.register(
            "strait_broker_outages",
            "Times a broker stopped answering Strait's fetches while the cluster's other brokers were still asked (one per outage)",
            m.broker_outages.clone(),
        );
        r.register(
            "strait_invalid_positions",
            "Saved positions found at start that cannot be true (undecodable, below zero, past the source's end): rebuilt from the last offset sync, or the flow stopped",
            m.invalid_positions.clone(),
        );
        m
    }

    /// The handles of one source partition of the flow `source` → `target`.
    pub fn partition(&self, source: &str, target: &str, topic: &str, partition: i32) -> PartitionMetrics {
        let labels = self.partition_labels(source, target, topic, partition);
        PartitionMetrics {
            records: self.records.get_or_create(&labels).clone(),
            bytes: self.bytes.get_or_create(&labels).clone(),
            latency: self.latency.get_or_create(&labels).clone(),
            age: self.age.get_or_create(&labels).clone(),
            offset_syncs: self.offset_syncs.get_or_create(&labels).clone(),
        }
    }

    /// The lag gauge of one source partition (`strait_replication_lag_records`), or of its topic
    /// when series are per topic (the caller then sets the topic's sum).
    pub fn lag(&self, source: &str, target: &str, topic: &str, partition: i32) -> Gauge {
        self.lag.get_or_create(&self.partition_labels(source, target, topic, partition)).clone()
    }

    /// Drops the lag series of `topic`/`partition` (another instance replicates it now).
    pub fn forget_lag(&self, source: &str, target: &str, topic: &str, partition: i32) {
        self.lag.remove(&self.partition_labels(source, target, topic, partition));
    }

    /// How often source `topic` was found recreated (`strait_source_topics_recreated_total`).
    pub fn topic_recreated(&self, source: &str, target: &str, topic: &str) -> Counter {
        let labels = TopicLabels { source: source.into(), target: target.into(), topic: topic.into() };
        self.topics_recreated.get_or_create(&labels).clone()
    }

    /// The residency drop counter of one source topic.
    pub fn residency_dropped(&self, source: &str, target: &str, topic: &str) -> Counter {
        let labels = TopicLabels { source: source.into(), target: target.into(), topic: topic.into() };
        self.residency_dropped.get_or_create(&labels).clone()
    }

    /// The loop guard drop counter of a flow.
    pub fn loop_guard_dropped(&self, source: &str, target: &str) -> Counter {
        self.loop_guard_dropped.get_or_create(&FlowLabels { source: source.into(), target: target.into() }).clone()
    }

    /// The checkpoint counter of a flow.
    pub fn checkpoints(&self, source: &str, target: &str) -> Counter {
        self.checkpoints.get_or_create(&FlowLabels { source: source.into(), target: target.into() }).clone()
    }

    /// Sets the checkpoint latency (ms) of `group` on target-side `topic`/`partition`.
    pub fn checkpoint_latency(&self, flow: (&str, &str), group: &str, topic: &str, partition: i32, ms: i64) {
        self.checkpoint_latency.get_or_create(&group_labels(flow, group, topic, partition)).set(ms);
    }

    /// Drops the checkpoint latency series of `group` on `topic`/`partition` (the group vanished).
    pub fn forget_checkpoint_latency(&self, flow: (&str, &str), group: &str, topic: &str, partition: i32) {
        self.checkpoint_latency.remove(&group_labels(flow, group, topic, partition));
    }

    /// The group offset sync counter of a flow.
    pub fn group_offset_syncs(&self, source: &str, target: &str) -> Counter {
        self.group_offset_syncs.get_or_create(&FlowLabels { source: source.into(), target: target.into() }).clone()
    }

    /// Records the slots of the flow `source` → `target` this instance owns now
    /// (`strait_slot_owned`): a series of 1 for each slot in `owned`, none for the others.
    pub fn set_slots_owned(&self, source: &str, target: &str, slots: u32, owned: &[u32]) {
        for slot in 0..slots {
            let labels = SlotLabels { source: source.into(), target: target.into(), slot: slot.to_string() };
            if owned.contains(&slot) {
                self.slot_owned.get_or_create(&labels).set(1);
            } else {
                self.slot_owned.remove(&labels);
            }
        }
    }

    /// Records whether this instance runs the flow's once-per-flow tasks (`strait_control_tasks_up`).
    pub fn set_control_tasks_up(&self, source: &str, target: &str, up: bool) {
        self.control_tasks_up
            .get_or_create(&FlowLabels { source: source.into(), target: target.into() })
            .set(i64::from(up));
    }

    /// The counter of the time the flow's source waited for `max_bytes_per_second` (ms,
    /// `strait_throttled_ms_total`).
    pub fn throttled_ms(&self, source: &str, target: &str) -> Counter {
        self.throttled_ms.get_or_create(&FlowLabels { source: source.into(), target: target.into() }).clone()
    }

    /// The counter of the outages of broker `broker` of cluster `cluster` (`strait_broker_outages_total`).
    pub fn broker_outages(&self, cluster: &str, broker: i32) -> Counter {
        self.broker_outages.get_or_create(&BrokerLabels { cluster: cluster.into(), broker: broker.to_string() }).clone()
    }

    /// The counter of saved positions of `topic` that could not be true (`strait_invalid_positions_total`).
    pub fn invalid_positions(&self, source: &str, target: &str, topic: &str) -> Counter {
        let labels = TopicLabels { source: source.into(), target: target.into(), topic: topic.into() };
        self.invalid_positions.get_or_create(&labels).clone()
    }

    /// The counter of topic ACL bindings the flow created on its target (`strait_acls_synced_total`).
    pub fn acls_synced(&self, source: &str, target: &str) -> Counter {
        self.acls_synced.get_or_create(&FlowLabels { source: source.into(), target: target.into() }).clone()
    }

    /// The registry in Prometheus' text format (OpenMetrics).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

mod ready;
#[cfg(test)]
mod tests;
