//! Prometheus metrics of every flow (the counterparts of MM2's `kafka.connect.mirror` JMX beans),
//! kept in one process-wide registry and served by [`crate::http`]. Hot paths hold cloned metric
//! handles (atomics), so a record costs no registry lookup.

use std::collections::BTreeMap;
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
    residency_dropped: Family<TopicLabels, Counter>,
    loop_guard_dropped: Family<FlowLabels, Counter>,
    checkpoints: Family<FlowLabels, Counter>,
    /// Flow name → running, for `/ready`.
    flows: Mutex<BTreeMap<String, bool>>,
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

fn partition_labels(source: &str, target: &str, topic: &str, partition: i32) -> PartitionLabels {
    PartitionLabels {
        source: source.into(),
        target: target.into(),
        topic: topic.into(),
        partition: partition.to_string(),
    }
}

impl Metrics {
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
            residency_dropped: Family::default(),
            loop_guard_dropped: Family::default(),
            checkpoints: Family::default(),
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
        r.register("strait_residency_dropped", "Records dropped by the residency gate", m.residency_dropped.clone());
        r.register("strait_loop_guard_dropped", "Records dropped by the loop guard", m.loop_guard_dropped.clone());
        r.register("strait_checkpoints", "MM2 checkpoints written", m.checkpoints.clone());
        m
    }

    /// The handles of one source partition of the flow `source` → `target`.
    pub fn partition(&self, source: &str, target: &str, topic: &str, partition: i32) -> PartitionMetrics {
        let labels = partition_labels(source, target, topic, partition);
        PartitionMetrics {
            records: self.records.get_or_create(&labels).clone(),
            bytes: self.bytes.get_or_create(&labels).clone(),
            latency: self.latency.get_or_create(&labels).clone(),
            age: self.age.get_or_create(&labels).clone(),
            offset_syncs: self.offset_syncs.get_or_create(&labels).clone(),
        }
    }

    /// The lag gauge of one source partition (`strait_replication_lag_records`).
    pub fn lag(&self, source: &str, target: &str, topic: &str, partition: i32) -> Gauge {
        self.lag.get_or_create(&partition_labels(source, target, topic, partition)).clone()
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

    /// Records whether the flow `name` (`source` → `target`) runs (`strait_flow_up`, `/ready`).
    pub fn set_flow_up(&self, name: &str, source: &str, target: &str, up: bool) {
        self.flow_up.get_or_create(&FlowLabels { source: source.into(), target: target.into() }).set(i64::from(up));
        self.flows.lock().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), up);
    }

    /// The flows that are not running (empty when every flow runs), for `/ready`.
    pub fn flows_down(&self) -> Vec<String> {
        let flows = self.flows.lock().unwrap_or_else(|e| e.into_inner());
        flows.iter().filter(|(_, up)| !**up).map(|(name, _)| name.clone()).collect()
    }

    /// The registry in Prometheus' text format (OpenMetrics).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
