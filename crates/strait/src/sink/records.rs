//! What a source record becomes on the target: loop guard → residency and renaming (the
//! [`TopicRouter`], which also makes the target topic ready) → the record built with its
//! headers and timestamp → produced by the slot's record producer.

use std::collections::HashMap;
use std::sync::Arc;

use rdkafka::message::{Header as KafkaHeader, OwnedHeaders};
use rdkafka::producer::BaseRecord;
use strait_connect::{ConnectRecord, ConnectResult, Header, SourceOffset};

use super::in_flight::InFlight;
use super::loop_guard::{LoopGuard, PROVENANCE_HEADER};
use super::mode::Mode;
use super::topics::TopicRouter;
use super::writer::Writer;
use crate::config::Flow;
use crate::record::ReplicatedRecord;

/// The record path of one slot's sink, and what it counts of the records it did not copy as is.
pub struct RecordPath {
    router: TopicRouter,
    guard: LoopGuard,
    loop_drops: u64,
    /// Records per source topic whose timestamp 0 became the produce time (librdkafka reads a
    /// timestamp of 0 as "now" and offers no way to send 0 itself).
    zero_timestamps: HashMap<Arc<str>, u64>,
}

impl RecordPath {
    pub fn new(router: TopicRouter, guard: LoopGuard) -> Self {
        Self { router, guard, loop_drops: 0, zero_timestamps: HashMap::new() }
    }

    /// [`strait_connect::Sink::put`]'s work: each record through the loop guard, residency and
    /// renaming, then produced. Records without a value (no payload) are skipped. Errors: the
    /// target topic cannot be made ready; a record that could not be written
    /// ([`Mode::stop_on`]).
    pub async fn put(
        &mut self,
        w: &mut Writer,
        mode: &mut Mode,
        batch: Vec<ConnectRecord<(), ReplicatedRecord>>,
    ) -> ConnectResult<()> {
        let loop_guard_dropped = w.stats.loop_guard_dropped.clone();
        if let Err(failed) = w.take_received_acks() {
            return Err(mode.stop_on(w, failed).await);
        }
        let mut previous: Option<(Arc<str>, i32, i64, Option<i64>)> = None;
        // The current run's partition has no record acknowledged yet from this producer.
        let mut unproven_run = false;
        for record in batch {
            let ConnectRecord { value, timestamp_ms, mut headers, source_offset, size_bytes, .. } = record;
            let Some(body) = value else { continue };
            let SourceOffset { topic, partition, offset } = source_offset;
            // Records of a partition come in runs: remember the last of each run for positions.
            match &mut previous {
                Some(p) if p.1 == partition && Arc::ptr_eq(&p.0, &topic) => (p.2, p.3) = (offset, timestamp_ms),
                _ => {
                    let run = (topic.clone(), partition, offset, timestamp_ms);
                    if let Some((topic, partition, offset, ts)) = previous.replace(run) {
                        w.last.insert((topic, partition), (offset, ts));
                    }
                    unproven_run = match mode {
                        Mode::AtLeastOnce(_) => w.syncs.last_downstream(&topic, partition).is_none(),
                        // A refused record aborts the whole transaction.
                        Mode::ExactlyOnce(_) => false,
                    };
                }
            }
            let Some(provenance) = self.guard.pass(&mut headers) else {
                self.loop_drops += 1;
                loop_guard_dropped.inc();
                continue;
            };
            // Residency, renaming and the target topic's existence, decided once per topic.
            let Some(target) = self.router.route(&topic, partition, w.service.producer()).await? else {
                continue;
            };
            if let (true, Mode::AtLeastOnce(alo)) = (unproven_run, &mut *mode) {
                let alone = alo.first_record_alone(w, &topic, partition).await;
                match alone {
                    Ok(still_first) => unproven_run = still_first,
                    Err(failed) => return Err(mode.stop_on(w, failed).await),
                }
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
            let meta =
                InFlight::Record { topic, partition, upstream: offset, bytes: size_bytes, timestamp: timestamp_ms };
            if let Err(failed) = w.send(out, meta).await {
                return Err(mode.stop_on(w, failed).await);
            }
        }
        if let Some((topic, partition, offset, ts)) = previous {
            w.last.insert((topic, partition), (offset, ts));
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
