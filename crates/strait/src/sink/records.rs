//! What a source record becomes on the target: loop guard → residency and renaming (the
//! [`TopicRouter`], which also makes the target topic ready) → the record built with its
//! headers and timestamp → produced by the slot's record producer (exactly-once with
//! `copy = "batches"`, written as batches by the batch producer: `own_batches.rs`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use rdkafka::message::{Header as KafkaHeader, OwnedHeaders};
use rdkafka::producer::BaseRecord;
use strait_connect::{ConnectRecord, ConnectResult, Header, SourceOffset};
use strait_mm2::ReplicationPolicy;

use super::in_flight::InFlight;
use super::lanes::Routed;
use super::loop_guard::{LoopGuard, PROVENANCE_HEADER};
use super::mode::Mode;
use super::own_batches::OwnBatches;
use super::producer_ids::Verdict;
use super::topics::TopicRouter;
use super::writer::Writer;
use crate::config::{CopyKind, Delivery, Flow};
use crate::record::ReplicatedRecord;

/// Where [`RecordPath::put`] is in its batch.
#[derive(Default)]
struct Run {
    /// The partition of the current run of records, with its last record's offset and
    /// timestamp (ms), saved into [`Writer::last`] when the run ends.
    previous: Option<(Arc<str>, i32, i64, Option<i64>)>,
    /// At-least-once: no record of the run's partition is written yet from this producer, nor
    /// in flight: its next record sent is its first.
    unproven: bool,
    /// Whether the source's producer id registry was read again since the put's batches were
    /// fetched ([`super::producer_ids::EchoGuard::verdict`]).
    registry_read: bool,
}

impl Run {
    /// Saves the last run's last record into [`Writer::last`].
    fn end(self, w: &mut Writer) {
        if let Some((topic, partition, offset, ts)) = self.previous {
            w.ledger.last.insert((topic, partition), (offset, ts));
        }
    }
}

/// The record path of one slot's sink, and what it counts of the records it did not copy as is.
pub struct RecordPath {
    router: TopicRouter,
    guard: LoopGuard,
    loop_drops: u64,
    /// Exactly-once with `copy = "batches"`: the records given, on their way to be batches.
    own: OwnBatches,
    /// Records per source topic whose timestamp 0 became the produce time (librdkafka reads a
    /// timestamp of 0 as "now" and offers no way to send 0 itself).
    zero_timestamps: HashMap<Arc<str>, u64>,
}

impl RecordPath {
    /// The path through `router` and `guard` (whole batches through the writer's batch
    /// producer, with `copy = "batches"`).
    pub fn new(router: TopicRouter, guard: LoopGuard) -> Self {
        Self { router, guard, loop_drops: 0, own: OwnBatches::default(), zero_timestamps: HashMap::new() }
    }

    /// Makes the target topics of `topics` ready together ([`TopicRouter::prepare`]).
    pub async fn prepare(&mut self, w: &Writer, topics: &[(String, i32)]) -> ConnectResult<()> {
        self.router.prepare(topics, w.target.records().producer()).await
    }

    /// [`strait_connect::Sink::put`]'s work: each record through the loop guard, residency and
    /// renaming, then produced. Records without a value (no payload) are skipped. At-least-once,
    /// the records of a partition whose first record from this producer is in flight are held
    /// ([`super::at_least_once::AtLeastOnce::hold`]) and sent, in order, once it is
    /// acknowledged: at a later put, or at the batch's end ([`Self::release_all`]).
    /// Errors: the target topic cannot be made ready; a record that could not be written
    /// ([`Mode::stop_on`]).
    pub async fn put(
        &mut self,
        w: &mut Writer,
        mode: &mut Mode,
        batch: Vec<ConnectRecord<(), ReplicatedRecord>>,
    ) -> ConnectResult<()> {
        if let Err(unwritten) = w.take_received_acks(mode.retry()).await {
            return Err(mode.stop_on(w, unwritten).await);
        }
        let mut run = Run::default();
        self.release(w, mode, false, &mut run).await?;
        let mut routed = Vec::new();
        for record in batch {
            if let Some(ReplicatedRecord::Batch(_)) = &record.value {
                routed.extend(self.own.end(&w.flow)?);
                self.route_batch(w, record, &mut routed, &mut run.registry_read).await?;
                continue;
            }
            if let (Mode::ExactlyOnce(_), CopyKind::Batches) = (&*mode, w.flow.copy.kind) {
                routed.extend(self.own_batch(w, record).await?);
                continue;
            }
            write_batches(w, mode, &mut routed).await?;
            if let Mode::AtLeastOnce(alo) = &mut *mode {
                if alo.awaits_first(&record.source_offset) {
                    alo.hold(record);
                    continue;
                }
            }
            self.put_one(w, mode, record, &mut run).await?;
        }
        routed.extend(self.own.end(&w.flow)?);
        write_batches(w, mode, &mut routed).await?;
        run.end(w);
        Ok(())
    }

    /// Exactly-once, a record given to a flow copying batches: through the loop guard,
    /// residency and renaming, then held to be written as a batch ([`OwnBatches`]). Returns the
    /// batch of the run it ended. Errors: as [`Self::put`].
    async fn own_batch(
        &mut self,
        w: &mut Writer,
        mut record: ConnectRecord<(), ReplicatedRecord>,
    ) -> ConnectResult<Option<Routed>> {
        if record.value.is_none() {
            return Ok(None);
        }
        let Some(provenance) = self.guard.pass(&mut record.headers).map(Cow::into_owned) else {
            self.loop_drops += 1;
            w.ledger.stats.loop_guard_dropped.inc();
            return Ok(None);
        };
        let SourceOffset { topic, partition, .. } = &record.source_offset;
        let Some(target) = self.router.route(topic, *partition, w.target.records().producer()).await? else {
            return Ok(None);
        };
        let target = target.clone();
        self.own.add(&w.flow, record, provenance, target)
    }

    /// A whole batch of [`Self::put`]: dropped when it came from the target (the loop guard of
    /// batches, [`super::producer_ids`]), else residency and renaming decided for its topic,
    /// then queued in `routed` for [`write_batches`], with the clusters whose data it carried.
    /// Errors: as [`Self::put`].
    async fn route_batch(
        &mut self,
        w: &mut Writer,
        record: ConnectRecord<(), ReplicatedRecord>,
        routed: &mut Vec<Routed>,
        registry_read: &mut bool,
    ) -> ConnectResult<()> {
        let ConnectRecord { value: Some(ReplicatedRecord::Batch(batch)), source_offset, .. } = record else {
            return Ok(());
        };
        let carried = match w.target.batch_verdict(&w.flow, &batch, registry_read).await? {
            // Exactly once, a relayed batch whose topic name holds its source's alias (every topic
            // under the default policy, heartbeats topics under every policy: MM2's rule) goes with
            // the source's own (one transaction, one producer): names stop its longer cycles, and
            // the registry has already dropped what came from the target.
            Verdict::Copy(Some(_))
                if matches!(w.flow.delivery(), Delivery::ExactlyOnce { .. })
                    && (matches!(w.flow.policy, ReplicationPolicy::Default { .. })
                        || w.flow.policy.is_heartbeats_topic(&source_offset.topic)) =>
            {
                None
            }
            Verdict::Copy(carried) => carried,
            Verdict::Echo => {
                self.loop_drops += batch.record_count() as u64;
                w.ledger.stats.loop_guard_dropped.inc_by(batch.record_count() as u64);
                return Ok(());
            }
        };
        let producer = w.target.records().producer();
        if let Some(target) = self.router.route(&source_offset.topic, source_offset.partition, producer).await? {
            routed.push(Routed { source: source_offset, target: target.clone(), batch, carried });
        }
        Ok(())
    }

    /// Sends every record held, once the first records they wait for are acknowledged: a
    /// batch's end, whose positions cover them. Errors: as [`Self::put`].
    pub async fn release_all(&mut self, w: &mut Writer, mode: &mut Mode) -> ConnectResult<()> {
        let mut run = Run::default();
        self.release(w, mode, true, &mut run).await?;
        run.end(w);
        Ok(())
    }

    /// Sends the held records that may go ([`super::at_least_once::AtLeastOnce::releasable`]).
    async fn release(&mut self, w: &mut Writer, mode: &mut Mode, wait: bool, run: &mut Run) -> ConnectResult<()> {
        let Mode::AtLeastOnce(alo) = &mut *mode else { return Ok(()) };
        let released = match alo.releasable(w, wait).await {
            Ok(released) => released,
            Err(failed) => return Err(mode.stop_on(w, failed).await),
        };
        for record in released {
            self.put_one(w, mode, record, run).await?;
        }
        Ok(())
    }

    /// One record of [`Self::put`].
    async fn put_one(
        &mut self,
        w: &mut Writer,
        mode: &mut Mode,
        record: ConnectRecord<(), ReplicatedRecord>,
        run: &mut Run,
    ) -> ConnectResult<()> {
        let ConnectRecord { value, timestamp_ms, mut headers, source_offset, size_bytes, .. } = record;
        let Some(body) = value else { return Ok(()) };
        let SourceOffset { topic, partition, offset } = source_offset;
        // Records of a partition come in runs: remember the last of each run for positions.
        match &mut run.previous {
            Some(p) if p.1 == partition && Arc::ptr_eq(&p.0, &topic) => (p.2, p.3) = (offset, timestamp_ms),
            _ => {
                let next = (topic.clone(), partition, offset, timestamp_ms);
                if let Some((topic, partition, offset, ts)) = run.previous.replace(next) {
                    w.ledger.last.insert((topic, partition), (offset, ts));
                }
                run.unproven = match mode {
                    Mode::AtLeastOnce(_) => w.ledger.syncs.last_downstream(&topic, partition).is_none(),
                    // A refused record aborts the whole transaction.
                    Mode::ExactlyOnce(_) => false,
                };
            }
        }
        let Some(provenance) = self.guard.pass(&mut headers) else {
            self.loop_drops += 1;
            w.ledger.stats.loop_guard_dropped.inc();
            return Ok(());
        };
        // Residency, renaming and the target topic's existence, decided once per topic.
        let Some(target) = self.router.route(&topic, partition, w.target.records().producer()).await? else {
            return Ok(());
        };
        if let (true, Mode::AtLeastOnce(alo)) = (run.unproven, &mut *mode) {
            // The partition's first record: the rest of the batch's records of it are held.
            alo.sending_first(w, &topic, partition);
            run.unproven = false;
        }
        if timestamp_ms == Some(0) {
            let count = self.zero_timestamps.entry(topic.clone()).or_default();
            if *count == 0 {
                tracing::warn!(flow = %w.flow.name, %topic, partition, offset,
                    "a record with timestamp 0 is written with the produce time: librdkafka cannot send timestamp 0 (counted; totals at stop)");
            }
            *count += 1;
        }
        let out = build(target, partition, &headers, &provenance, &body, timestamp_ms);
        let meta = InFlight::Record { topic, partition, upstream: offset, bytes: size_bytes, timestamp: timestamp_ms };
        if let Err(unwritten) = w.send(out, meta).await {
            return Err(mode.stop_on(w, unwritten).await);
        }
        Ok(())
    }

    /// Logs what the path withheld or changed (residency, loop guard, timestamp 0), at close.
    pub fn log_totals(&self, flow: &Flow) {
        for (topic, dropped) in self.router.residency_drops() {
            tracing::info!(flow = %flow.name, topic, dropped, "records withheld by residency");
        }
        for (topic, records) in &self.zero_timestamps {
            tracing::info!(flow = %flow.name, %topic, records, "records whose timestamp 0 became the produce time");
        }
        if self.loop_drops > 0 {
            tracing::info!(flow = %flow.name, dropped = self.loop_drops, "records dropped by the loop guard");
        }
    }
}

/// Sends the batches `routed` holds, if any ([`Writer::send_batches`]), a failure
/// classified by `mode`.
async fn write_batches(w: &mut Writer, mode: &Mode, routed: &mut Vec<Routed>) -> ConnectResult<()> {
    if routed.is_empty() {
        return Ok(());
    }
    w.send_batches(std::mem::take(routed), mode.retry()).await
}

/// The target record of `body` for `target`/`partition`: the source headers in order, then the
/// provenance header; the key and value when present; the source timestamp (ms) when known.
fn build<'a>(
    target: &'a str,
    partition: i32,
    headers: &[Header],
    provenance: &[u8],
    body: &'a ReplicatedRecord,
    timestamp_ms: Option<i64>,
) -> BaseRecord<'a, [u8], [u8], usize> {
    let mut out_headers = OwnedHeaders::new_with_capacity(headers.len() + 1);
    for h in headers {
        out_headers = out_headers.insert(KafkaHeader { key: &h.key, value: h.value.as_deref() });
    }
    out_headers = out_headers.insert(KafkaHeader { key: PROVENANCE_HEADER, value: Some(provenance) });
    let mut out = BaseRecord::<[u8], [u8], usize>::with_opaque_to(target, 0).partition(partition).headers(out_headers);
    if let Some(k) = body.key() {
        out = out.key(k);
    }
    if let Some(v) = body.value() {
        out = out.payload(v);
    }
    if let Some(ts) = timestamp_ms {
        out = out.timestamp(ts);
    }
    out
}
