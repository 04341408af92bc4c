//! What every role of the sink shares: the slot's record producer, and what its acks feed (the
//! offset-sync rule, the partition metrics, the last record per partition), from which a batch's
//! offset syncs and position records are made.

use std::collections::HashMap;
use std::sync::Arc;

use rdkafka::error::KafkaError;
use rdkafka::producer::BaseRecord;
use strait_connect::{ConnectError, SourceOffset};
use strait_mm2::OffsetSync;

use super::errors::{produce_context, write_failure, Retry};
use super::in_flight::InFlight;
use super::service::{Failed, ProduceService};
use super::stats::SinkMetrics;
use super::syncs::OffsetSyncWriter;
use crate::config::Flow;
use crate::positions::{self, TopicIds};

/// A batch's position records: each position with the key and value of its record in the
/// positions topic.
pub type PositionRecords = Vec<(SourceOffset, Vec<u8>, Vec<u8>)>;

/// The slot's record producer and its ack bookkeeping.
pub struct Writer {
    pub flow: Arc<Flow>,
    /// The slot of the flow this sink writes ([`crate::slots`]).
    pub slot: u32,
    /// Writes records; in exactly-once mode also offset syncs and positions, in its transactions.
    pub service: ProduceService<InFlight>,
    pub syncs: OffsetSyncWriter,
    pub stats: SinkMetrics,
    /// The offset-syncs topic (`mm2-offset-syncs.<alias>.internal`).
    pub syncs_topic: String,
    /// Offset and timestamp (ms) of the last record put per source partition, saved with positions.
    pub last: HashMap<(Arc<str>, i32), (i64, Option<i64>)>,
    /// The id of each source topic, saved with its positions (set by the source).
    pub topic_ids: TopicIds,
}

/// An ack of a produced record: feeds the offset-sync rule and the partition's metrics.
fn record_acked(syncs: &mut OffsetSyncWriter, stats: &mut SinkMetrics, r: InFlight, downstream: i64) {
    if let InFlight::Record { topic, partition, upstream, bytes, timestamp } = r {
        syncs.acked(&topic, partition, upstream, downstream);
        stats.acked(&topic, partition, bytes, timestamp);
    }
}

impl Writer {
    /// Queues `record` ([`ProduceService::send`]), taking the acks that arrive meanwhile.
    pub async fn send(
        &mut self,
        record: BaseRecord<'_, [u8], [u8], usize>,
        meta: InFlight,
    ) -> Result<(), Failed<InFlight>> {
        let (syncs, stats) = (&mut self.syncs, &mut self.stats);
        self.service.send(record, meta, &mut |r, d| record_acked(syncs, stats, r, d)).await
    }

    /// Takes the acks already received ([`ProduceService::take_received_acks`]).
    // The error is the rare path, and the same type as the service's own (generic there).
    #[allow(clippy::result_large_err)]
    pub fn take_received_acks(&mut self) -> Result<(), Failed<InFlight>> {
        let (syncs, stats) = (&mut self.syncs, &mut self.stats);
        self.service.take_received_acks(&mut |r, d| record_acked(syncs, stats, r, d))
    }

    /// Waits for the ack of every record in flight ([`ProduceService::wait_acks`]).
    pub async fn await_acks(&mut self) -> Result<(), Failed<InFlight>> {
        let (syncs, stats) = (&mut self.syncs, &mut self.stats);
        self.service.wait_acks(0, &mut |r, d| record_acked(syncs, stats, r, d)).await
    }

    /// Counts an acknowledged record found after a failure ([`ProduceService::settle`]).
    pub fn acked(&mut self, r: InFlight, downstream: i64) {
        record_acked(&mut self.syncs, &mut self.stats, r, downstream);
    }

    /// The offset syncs to write with the batch (counted as written).
    pub fn take_syncs(&mut self) -> Vec<OffsetSync> {
        let syncs = self.syncs.take();
        self.stats.offset_syncs(&syncs);
        syncs
    }

    /// Each of `positions` with the key and value of its positions record: the timestamp of the
    /// record at it (when it was the last one put) and the target offset of the partition's last
    /// record written.
    pub fn position_records(&self, positions: &[SourceOffset]) -> PositionRecords {
        positions
            .iter()
            .map(|position| {
                let (topic, partition) = (&position.topic, position.partition);
                let ts = self
                    .last
                    .get(&(topic.clone(), partition))
                    .filter(|(o, _)| *o == position.offset)
                    .and_then(|(_, ts)| *ts);
                let (key, value) = positions::encode(
                    &self.flow.name,
                    position,
                    ts,
                    self.syncs.last_downstream(topic, partition),
                    self.topic_ids.get(topic),
                );
                (position.clone(), key, value)
            })
            .collect()
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
}
