//! What the target's acks feed, whichever copy kind wrote: MM2's offset-sync rule, the partition
//! metrics, the last record put and sent per partition, and the ended batches waiting for their
//! acks; from it a batch's offset syncs and position records are made. It holds no producer: the
//! [`super::target::Target`] writes and hands each ack here.

use std::collections::HashMap;
use std::sync::Arc;

use strait_connect::SourceOffset;
use strait_mm2::OffsetSync;
use strait_wire::{Appended, Batch};

use super::cuts::Cuts;
use super::in_flight::InFlight;
use super::lanes::Routed;
use super::partitions::PartitionMap;
use super::state::PositionRecords;
use super::stats::SinkMetrics;
use super::syncs::OffsetSyncWriter;
use crate::config::Flow;
use crate::positions::{self, TopicIds};

/// The slot's account of what was written and acknowledged.
pub struct Ledger {
    pub flow: Arc<Flow>,
    pub syncs: OffsetSyncWriter,
    pub stats: SinkMetrics,
    /// Offset and timestamp (ms) of the last record put per source partition, saved with positions.
    pub last: HashMap<(Arc<str>, i32), (i64, Option<i64>)>,
    /// The last whole batch sent per source partition, with its last record's source offset,
    /// until a position asks its timestamp (`timestamp_at`).
    last_batches: HashMap<(Arc<str>, i32), (i64, Batch)>,
    /// The id of each source topic, saved with its positions (set by the source).
    pub topic_ids: TopicIds,
    /// At-least-once batches ended, waiting for their acks.
    pub cuts: Cuts,
    /// Upstream offset of the last record (or last record of a whole batch) sent per source
    /// partition, which an ended batch's position of the partition waits for.
    pub sent: PartitionMap<i64>,
}

impl Ledger {
    /// An empty ledger of `flow`.
    pub fn new(flow: Arc<Flow>) -> Self {
        Self {
            syncs: OffsetSyncWriter::new(flow.writing.offset_lag_max),
            stats: SinkMetrics::new(&flow),
            last: HashMap::new(),
            last_batches: HashMap::new(),
            topic_ids: TopicIds::default(),
            cuts: Cuts::default(),
            sent: PartitionMap::default(),
            flow,
        }
    }

    /// A record of `meta` is sent: its partition's ended batches wait for it.
    pub fn record_sent(&mut self, meta: &InFlight) {
        if let InFlight::Record { topic, partition, upstream, .. } = meta {
            *self.sent.get_or_insert_with(topic, *partition, || *upstream) = *upstream;
        }
    }

    /// Whole batches are sent: each partition's ended batches wait for its last one.
    pub fn batches_sent(&mut self, routed: &[Routed]) {
        for r in routed {
            let (topic, partition) = (&r.source.topic, r.source.partition);
            *self.sent.get_or_insert_with(topic, partition, || r.source.offset) = r.source.offset;
            self.last_batches.insert((topic.clone(), partition), (r.source.offset, r.batch.clone()));
        }
    }

    /// An ack of a produced record: feeds the offset-sync rule, the partition's metrics and the
    /// batches waiting for it.
    pub fn record_acked(&mut self, r: &InFlight, downstream: i64) {
        if let InFlight::Record { topic, partition, upstream, bytes, timestamp } = r {
            self.syncs.acked(topic, *partition, *upstream, downstream);
            self.stats.acked(topic, *partition, *bytes, *timestamp);
            self.cuts.acked(topic, *partition, *upstream, &self.syncs);
        }
    }

    /// What a whole batch's ack feeds: the offset syncs of its records, every `offset_lag_max`
    /// of them and its last (the target gives a batch's records consecutive offsets from its
    /// base; of a compacted batch written anew, which closed its gaps, only the first and last
    /// record's source offsets are known), the partition's
    /// metrics, its last offset for the position saved after it, and the batches waiting for it.
    pub fn batch_acked(&mut self, routed: &Routed, a: Appended) {
        let (source, b) = (&routed.source, &routed.batch);
        let (topic, partition, last) = (&source.topic, source.partition, source.offset);
        let count = i64::from(b.record_count());
        // Records whose source offsets follow one another (no compaction gaps) sit on the target at
        // its base plus their place: fed every `offset_lag_max + 1` records, where MM2's rule puts
        // the record path's syncs, so a translated offset is never more than `offset_lag_max`
        // behind inside a batch.
        let linear = last - b.base_offset() + 1 == count;
        let lag_max = i64::try_from(self.flow.writing.offset_lag_max).unwrap_or(i64::MAX);
        let step = if linear { lag_max.saturating_add(1) } else { count.max(1) };
        let mut place = 0;
        while place < count - 1 {
            self.syncs.acked(topic, partition, b.base_offset() + place, a.base_offset + place);
            place = place.saturating_add(step);
        }
        self.syncs.acked(topic, partition, last, a.base_offset + count - 1);
        self.stats.acked_batch(topic, partition, count as u64, b.bytes().len(), b.max_timestamp());
        self.cuts.acked(topic, partition, last, &self.syncs);
    }

    /// The offset syncs to write with the batch (counted as written).
    pub fn take_syncs(&mut self) -> Vec<OffsetSync> {
        let syncs = self.syncs.take();
        self.stats.offset_syncs(&syncs);
        syncs
    }

    /// The timestamp (ms) of the record at `position`, when it was the last one put or the last
    /// of the last whole batch sent. A batch's is inside it (compressed): read here, once per
    /// partition and commit rather than per batch, and the batch let go (it may hold a whole
    /// fetch answer's buffer).
    fn timestamp_at(&mut self, position: &SourceOffset) -> Option<i64> {
        let key = (position.topic.clone(), position.partition);
        if let Some((offset, batch)) = self.last_batches.remove(&key) {
            self.last.insert(key.clone(), (offset, batch.last_timestamp().ok()));
        }
        self.last.get(&key).filter(|(o, _)| *o == position.offset).and_then(|(_, ts)| *ts)
    }

    /// Each of `positions` with the key and value of its positions record: the timestamp of the
    /// record at it (when it was the last one put) and the target offset of the partition's last
    /// record written.
    pub fn position_records(&mut self, positions: &[SourceOffset]) -> PositionRecords {
        positions
            .iter()
            .map(|position| {
                let downstream = self.syncs.last_downstream(&position.topic, position.partition);
                let timestamp = self.timestamp_at(position);
                self.position_record(position.clone(), timestamp, downstream)
            })
            .collect()
    }

    fn position_record(
        &self,
        position: SourceOffset,
        ts: Option<i64>,
        downstream: Option<i64>,
    ) -> (SourceOffset, Vec<u8>, Vec<u8>) {
        let topic_id = self.topic_ids.get(&position.topic);
        let (key, value) = positions::encode(&self.flow.name, &position, ts, downstream, topic_id);
        (position, key, value)
    }

    /// Ends an at-least-once batch at `positions` without waiting for its acks ([`Cuts::end`]):
    /// each position waits for its partition's last record sent.
    pub fn end_batch(&mut self, positions: &[SourceOffset]) {
        let positions = (positions.iter())
            .map(|p| (p.clone(), self.timestamp_at(p), self.sent.get(&p.topic, p.partition).copied()))
            .collect::<Vec<_>>();
        self.cuts.end(positions, &self.syncs);
    }

    /// The position records of the ended batches whose records are all acknowledged.
    pub fn reached_records(&mut self) -> PositionRecords {
        let reached = self.cuts.take_reached();
        reached.into_iter().map(|(position, ts, downstream)| self.position_record(position, ts, downstream)).collect()
    }
}
