//! What every role of the sink shares: the slot's record producer, and what its acks feed (the
//! offset-sync rule, the partition metrics, the last record per partition), from which a batch's
//! offset syncs and position records are made.

use std::collections::HashMap;
use std::sync::Arc;

use rdkafka::error::KafkaError;
use rdkafka::producer::BaseRecord;
use strait_connect::{ConnectError, ConnectResult, SourceOffset};
use strait_mm2::OffsetSync;
use strait_wire::{Appended, Batch};

use super::batches::Routed;
use super::cuts::Cuts;
use super::errors::{produce_context, write_failure, Retry};
use super::in_flight::InFlight;
use super::partitions::PartitionMap;
use super::service::{Failed, ProduceService};
use super::state::PositionRecords;
use super::stats::SinkMetrics;
use super::syncs::OffsetSyncWriter;
use super::target::Target;
use crate::config::Flow;
use crate::positions::{self, TopicIds};

/// The slot's record producer and its ack bookkeeping.
pub struct Writer {
    pub flow: Arc<Flow>,
    /// The slot of the flow this sink writes ([`crate::slots`]).
    pub slot: u32,
    /// Writes records; in exactly-once mode also offset syncs and positions, in its transactions.
    pub service: ProduceService<InFlight>,
    /// What writes the data besides the record producer: the flow's copy kind ([`Target`]).
    pub target: Target,
    pub syncs: OffsetSyncWriter,
    pub stats: SinkMetrics,
    /// The offset-syncs topic (`mm2-offset-syncs.<alias>.internal`).
    pub syncs_topic: String,
    /// Offset and timestamp (ms) of the last record put per source partition, saved with positions.
    pub last: HashMap<(Arc<str>, i32), (i64, Option<i64>)>,
    /// The id of each source topic, saved with its positions (set by the source).
    pub topic_ids: TopicIds,
    /// At-least-once batches ended, waiting for their acks.
    pub cuts: Cuts,
    /// Upstream offset of the last record sent per source partition (record path), which an
    /// ended batch's position of the partition waits for.
    pub sent: PartitionMap<i64>,
}

/// An ack of a produced record: feeds the offset-sync rule, the partition's metrics and the
/// batches waiting for it.
fn record_acked(syncs: &mut OffsetSyncWriter, stats: &mut SinkMetrics, cuts: &mut Cuts, r: &InFlight, downstream: i64) {
    if let InFlight::Record { topic, partition, upstream, bytes, timestamp } = r {
        syncs.acked(topic, *partition, *upstream, downstream);
        stats.acked(topic, *partition, *bytes, *timestamp);
        cuts.acked(topic, *partition, *upstream, syncs);
    }
}

impl Writer {
    /// Queues `record` ([`ProduceService::send`]), taking the acks that arrive meanwhile.
    pub async fn send(
        &mut self,
        record: BaseRecord<'_, [u8], [u8], usize>,
        meta: InFlight,
    ) -> Result<(), Failed<InFlight>> {
        if let InFlight::Record { topic, partition, upstream, .. } = &meta {
            *self.sent.get_or_insert_with(topic, *partition, || *upstream) = *upstream;
        }
        let (syncs, stats, cuts) = (&mut self.syncs, &mut self.stats, &mut self.cuts);
        self.service.send(record, meta, &mut |r, d| record_acked(syncs, stats, cuts, r, d)).await
    }

    /// Takes the acks already received ([`ProduceService::take_received_acks`]).
    // The error is the rare path, and the same type as the service's own (generic there).
    #[allow(clippy::result_large_err)]
    pub fn take_received_acks(&mut self) -> Result<(), Failed<InFlight>> {
        let (syncs, stats, cuts) = (&mut self.syncs, &mut self.stats, &mut self.cuts);
        self.service.take_received_acks(&mut |r, d| record_acked(syncs, stats, cuts, r, d))
    }

    /// Waits for the ack of every record in flight ([`ProduceService::wait_acks`]).
    pub async fn await_acks(&mut self) -> Result<(), Failed<InFlight>> {
        let (syncs, stats, cuts) = (&mut self.syncs, &mut self.stats, &mut self.cuts);
        self.service.wait_acks(0, &mut |r, d| record_acked(syncs, stats, cuts, r, d)).await
    }

    /// Waits for the acks of the first `sent` records sent (those after keep flowing).
    pub async fn await_acks_through(&mut self, sent: usize) -> Result<(), Failed<InFlight>> {
        let remaining = self.service.sent().saturating_sub(sent);
        let (syncs, stats, cuts) = (&mut self.syncs, &mut self.stats, &mut self.cuts);
        self.service.wait_acks(remaining, &mut |r, d| record_acked(syncs, stats, cuts, r, d)).await
    }

    /// Counts an acknowledged record found after a failure ([`ProduceService::settle`]).
    pub fn acked(&mut self, r: &InFlight, downstream: i64) {
        record_acked(&mut self.syncs, &mut self.stats, &mut self.cuts, r, downstream);
    }

    /// The offset syncs to write with the batch (counted as written).
    pub fn take_syncs(&mut self) -> Vec<OffsetSync> {
        let syncs = self.syncs.take();
        self.stats.offset_syncs(&syncs);
        syncs
    }

    /// The timestamp (ms) of the record at `position`, when it was the last one put.
    fn timestamp_at(&self, position: &SourceOffset) -> Option<i64> {
        let key = (position.topic.clone(), position.partition);
        self.last.get(&key).filter(|(o, _)| *o == position.offset).and_then(|(_, ts)| *ts)
    }

    /// Each of `positions` with the key and value of its positions record: the timestamp of the
    /// record at it (when it was the last one put) and the target offset of the partition's last
    /// record written.
    pub fn position_records(&self, positions: &[SourceOffset]) -> PositionRecords {
        positions
            .iter()
            .map(|position| {
                let downstream = self.syncs.last_downstream(&position.topic, position.partition);
                self.position_record(position.clone(), self.timestamp_at(position), downstream)
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
            .collect();
        self.cuts.end(positions, &self.syncs);
    }

    /// The position records of the ended batches whose records are all acknowledged.
    pub fn reached_records(&mut self) -> PositionRecords {
        let reached = self.cuts.take_reached();
        reached.into_iter().map(|(position, ts, downstream)| self.position_record(position, ts, downstream)).collect()
    }

    /// The error of a failed write described by `context` ([`write_failure`]).
    pub fn failure(&self, context: String, e: KafkaError, retry: Retry) -> ConnectError {
        write_failure(&self.flow, self.slot, self.service.fatal_error(), retry, context, e)
    }

    /// The error of a record, sync or position that could not be written.
    pub fn produce_error(&self, (what, e): Failed<InFlight>, retry: Retry) -> ConnectError {
        let context = produce_context(&self.flow, &self.syncs_topic, what, &e);
        self.failure(context, e, retry)
    }

    /// Sends the batches `routed` holds through the slot's batch producer ([`Target::send_batches`]),
    /// each position of their partitions waiting for their acks, then takes the acks received.
    /// Errors: a flow not copying batches; as [`super::batches::BatchWriter::send`].
    pub async fn send_batches(&mut self, routed: Vec<Routed>, retry: Retry) -> ConnectResult<()> {
        for r in &routed {
            let (topic, partition) = (&r.source.topic, r.source.partition);
            *self.sent.get_or_insert_with(topic, partition, || r.source.offset) = r.source.offset;
        }
        self.target.send_batches((&self.flow, self.slot), routed, retry).await?;
        self.batch_acks(false, retry).await
    }

    /// Takes the acks of whole batches received, or with `wait` waits for every batch sent
    /// ([`Target::batch_acks`]), each feeding the offset-sync rule, the partition's metrics and
    /// its position ([`Self::batch_acked`]). Cancel-safe. Errors: as [`Self::send_batches`].
    pub async fn batch_acks(&mut self, wait: bool, retry: Retry) -> ConnectResult<()> {
        for (r, a) in self.target.batch_acks((&self.flow, self.slot), wait, retry).await? {
            self.batch_acked(&r.source, &r.batch, a);
        }
        Ok(())
    }

    /// What a batch's ack feeds: the offset syncs of its first and last record (the target gives a
    /// batch's records consecutive offsets from its base; the last one's source offset is the
    /// record's, a compacted batch written anew having closed its gaps), the partition's metrics,
    /// and its last offset for the position saved after it.
    fn batch_acked(&mut self, source: &SourceOffset, b: &Batch, a: Appended) {
        let (topic, partition, last) = (&source.topic, source.partition, source.offset);
        self.syncs.acked(topic, partition, b.base_offset(), a.base_offset);
        let count = i64::from(b.record_count());
        if count > 1 {
            self.syncs.acked(topic, partition, last, a.base_offset + count - 1);
        }
        self.stats.acked_batch(topic, partition, count as u64, b.bytes().len(), b.max_timestamp());
        // No timestamp with the position: the last record's is inside the (compressed) batch. The
        // topic id saved with it finds a recreated topic instead.
        self.last.insert((topic.clone(), partition), (last, None));
        self.cuts.acked(topic, partition, last, &self.syncs);
    }
}
