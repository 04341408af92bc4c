//! The sink's side of the metrics: per source partition, records and bytes the target
//! acknowledged, replication latency and record age at the ack, and offset syncs written.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use strait_mm2::OffsetSync;

use super::partitions::PartitionMap;
use crate::config::Flow;
use crate::metrics::{metrics, PartitionMetrics};

/// Metric handles of one flow's sink, created once per partition.
pub struct SinkMetrics {
    source: String,
    target: String,
    partitions: PartitionMap<PartitionMetrics>,
    /// `strait_loop_guard_dropped_total` of the flow.
    pub loop_guard_dropped: Counter,
}

impl SinkMetrics {
    /// The handles of `flow`.
    pub fn new(flow: &Flow) -> Self {
        let (source, target) = (flow.source.alias.clone(), flow.target.alias.clone());
        let loop_guard_dropped = metrics().loop_guard_dropped(&source, &target);
        Self { source, target, partitions: PartitionMap::default(), loop_guard_dropped }
    }

    fn partition(&mut self, topic: &Arc<str>, partition: i32) -> &PartitionMetrics {
        let (source, target) = (&self.source, &self.target);
        self.partitions.get_or_insert_with(topic, partition, || metrics().partition(source, target, topic, partition))
    }

    /// The target acknowledged a record of `bytes` with timestamp `timestamp_ms`.
    pub fn acked(&mut self, topic: &Arc<str>, partition: i32, bytes: usize, timestamp_ms: Option<i64>) {
        let m = self.partition(topic, partition);
        m.records.inc();
        m.bytes.inc_by(bytes as u64);
        if let Some(ts) = timestamp_ms.filter(|ts| *ts > 0) {
            let age = (coarse_now_ms() - ts).max(0);
            m.latency.observe(age as f64);
            m.age.set(age);
        }
    }

    /// The target acknowledged a batch of `records` records and `bytes` bytes (as stored,
    /// compressed or not) whose newest timestamp is `max_timestamp_ms`.
    pub fn acked_batch(&mut self, topic: &Arc<str>, partition: i32, records: u64, bytes: usize, max_timestamp_ms: i64) {
        let m = self.partition(topic, partition);
        m.records.inc_by(records);
        m.bytes.inc_by(bytes as u64);
        if max_timestamp_ms > 0 {
            let age = (coarse_now_ms() - max_timestamp_ms).max(0);
            m.latency.observe(age as f64);
            m.age.set(age);
        }
    }

    /// `syncs` were written.
    pub fn offset_syncs(&mut self, syncs: &[OffsetSync]) {
        for s in syncs {
            let topic: Arc<str> = s.topic.as_str().into();
            self.partition(&topic, s.partition).offset_syncs.inc();
        }
    }
}

/// Wall-clock time in ms from the kernel's coarse clock (a few ms resolution, enough for a
/// latency in ms), read per record: the precise clock cost more than the rest of the ack.
fn coarse_now_ms() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_REALTIME_COARSE exists on every Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
}
