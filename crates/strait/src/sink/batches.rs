//! The target side of `copy = "batches"`: whole source batches produced as they are (their
//! bytes, codec, timestamps and headers), through `strait-wire`'s idempotent producer, which
//! gives each its producer id, epoch and sequence and recomputes its CRC. Their acks feed what a
//! record's ack feeds on the record path: MM2's offset-sync rule, the partition metrics and the
//! last offset put, from which positions are saved as today.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use strait_connect::{ConnectError, ConnectResult, SourceOffset};
use strait_wire::{Appended, Batch, Outgoing, Producer};

use super::writer::Writer;
use crate::config::Flow;
use crate::kafka::{wire_cluster, wire_error};

/// How long a batch is retried before the flow stops naming it: as long as the record path's
/// producer keeps trying a record (its `message.timeout.ms` in at-least-once mode).
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(300);

/// A source batch on its way: where it came from (the source offset of its last record) and the
/// target topic.
pub struct Routed {
    pub source: SourceOffset,
    pub target: Arc<str>,
    pub batch: Batch,
}

/// The slot's batch producer on the target.
pub struct BatchWriter {
    producer: Producer,
    /// Source partitions this producer has appended a batch to.
    written: HashSet<(Arc<str>, i32)>,
}

impl BatchWriter {
    /// Connects to `flow`'s target with its own client (TLS and SASL from `[clusters.client]`)
    /// and gets a producer id. Errors: a setting the client refuses (invalid), refused
    /// credentials (denied), a target that does not answer (retriable).
    pub async fn start(flow: &Flow) -> ConnectResult<Self> {
        let what = format!("batch producer on target {}", flow.target.alias);
        let cluster = wire_cluster(&flow.target, "batch producer").await?;
        let producer = Producer::init(cluster, DELIVERY_TIMEOUT).await.map_err(|e| wire_error(what, e))?;
        Ok(Self { producer, written: HashSet::new() })
    }

    /// Produces `batches` (in order within each partition) and feeds each one's ack to `w`. A
    /// partition's first batch from this producer goes alone, ahead of the rest: the broker
    /// takes any sequence as a producer's first in a partition, so were it refused, a batch sent
    /// behind it would still be written, ahead of it (the record path's rule, `AtLeastOnce::hold`).
    /// Errors (never retriable: the producer's sequences are then unknown): a batch the target
    /// refused or did not take within 300 s, naming its target topic, partition and source
    /// offset; the batches before it may be written, and are again after a restart (positions
    /// are saved only after acks).
    pub async fn write(&mut self, w: &mut Writer, batches: Vec<Routed>) -> ConnectResult<()> {
        let (mut firsts, mut rest) = (Vec::new(), Vec::new());
        let mut seen = HashSet::new();
        for r in batches {
            let key = (r.source.topic.clone(), r.source.partition);
            if !self.written.contains(&key) && seen.insert(key) {
                firsts.push(r);
            } else {
                rest.push(r);
            }
        }
        for round in [firsts, rest] {
            if round.is_empty() {
                continue;
            }
            let out: Vec<Outgoing> = round
                .iter()
                .map(|r| Outgoing {
                    topic: r.target.to_string(),
                    partition: r.source.partition,
                    batch: r.batch.clone(),
                })
                .collect();
            let appended = self.producer.produce(&out).await.map_err(|e| {
                // The flow and slot are named by the runtime's caller.
                let context = format!("copying batches to {}", w.flow.target.alias);
                // Never retriable here: the producer's sequences are unknown after a failed call,
                // so the flow starts anew with a new producer.
                match wire_error(context, e) {
                    ConnectError::Retriable { context, cause } => ConnectError::Backend { context, cause },
                    e => e,
                }
            })?;
            for (r, a) in round.iter().zip(appended) {
                self.written.insert((r.source.topic.clone(), r.source.partition));
                acked(w, r, a);
            }
        }
        Ok(())
    }
}

/// What a batch's ack feeds: the offset syncs of its first and last record (the target gives a
/// batch's records consecutive offsets from its base; the last one's source offset is the
/// record's, a compacted batch written anew having closed its gaps), the partition's metrics,
/// and its last offset for the position saved after it.
fn acked(w: &mut Writer, r: &Routed, a: Appended) {
    let (topic, partition, b, last) = (&r.source.topic, r.source.partition, &r.batch, r.source.offset);
    w.syncs.acked(topic, partition, b.base_offset(), a.base_offset);
    let count = i64::from(b.record_count());
    if count > 1 {
        w.syncs.acked(topic, partition, last, a.base_offset + count - 1);
    }
    w.stats.acked_batch(topic, partition, count as u64, b.bytes().len(), b.max_timestamp());
    // No timestamp with the position: the last record's is inside the (compressed) batch. The
    // topic id saved with it finds a recreated topic instead.
    w.last.insert((topic.clone(), partition), (last, None));
}
