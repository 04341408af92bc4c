//! How an acknowledged record becomes an offset sync (MM2 `OffsetSyncWriter`): MM2's emission
//! rule per source partition, delayed syncs promoted on every flush, written in MM2's bytes to
//! the offset-syncs topic.

use std::collections::HashMap;
use std::sync::Arc;
use rdkafka::producer::{FutureProducer, FutureRecord};
use strait_connect::{ConnectError, ConnectResult};
use crate::kafka::{acked, enqueue};
use strait_mm2::{DownstreamOffset, Emit, OffsetSync, PartitionState, UpstreamOffset};

/// Offset syncs of one flow.
pub struct OffsetSyncWriter {
    producer: FutureProducer,
    /// `mm2-offset-syncs.<alias>.internal`, on the target or the source cluster.
    topic: String,
    offset_lag_max: u64,
    states: HashMap<(Arc<str>, i32), PartitionState>,
    /// Syncs decided but not yet written.
    pending: Vec<OffsetSync>,
    /// Syncs written since the last [`OffsetSyncWriter::drain`].
    written: Vec<OffsetSync>,
}

impl OffsetSyncWriter {
    /// A writer producing to `topic` with `producer` (which must be idempotent, acks=all).
    pub fn new(producer: FutureProducer, topic: String, offset_lag_max: u64) -> Self {
        Self { producer, topic, offset_lag_max, states: HashMap::new(), pending: Vec::new(), written: Vec::new() }
    }

    /// Feeds one acknowledged record: `topic`/`partition` are the **source** names.
    pub fn acked(&mut self, topic: &Arc<str>, partition: i32, upstream: i64, downstream: i64) {
        let state = self.states.entry((topic.clone(), partition)).or_default();
        let (up, down) = (UpstreamOffset(upstream), DownstreamOffset(downstream));
        if state.update(up, down, self.offset_lag_max) == Emit::Now {
            self.pending.push(OffsetSync { topic: topic.to_string(), partition, upstream: up, downstream: down });
        }
    }

    /// Promotes every delayed sync, writes all pending syncs and waits for their acks.
    /// Errors: a backend error naming the sync that could not be written.
    pub async fn flush(&mut self) -> ConnectResult<()> {
        for ((topic, partition), state) in &mut self.states {
            if let Some((upstream, downstream)) = state.take_delayed() {
                self.pending.push(OffsetSync { topic: topic.to_string(), partition: *partition, upstream, downstream });
            }
        }
        let mut acks = Vec::with_capacity(self.pending.len());
        for sync in &self.pending {
            let (key, value) = (sync.encode_key(), sync.encode_value());
            let record = FutureRecord::to(&self.topic).partition(0).key(&key[..]).payload(&value[..]);
            acks.push(enqueue(&self.producer, record).await);
        }
        for (sync, ack) in self.pending.iter().zip(acks) {
            let written = match ack {
                Ok(ack) => acked(ack).await,
                Err(e) => Err(e),
            };
            written.map_err(|e| {
                ConnectError::backend(
                    format!(
                        "write offset sync {} partition {} {}->{} to {}",
                        sync.topic, sync.partition, sync.upstream.0, sync.downstream.0, self.topic
                    ),
                    e,
                )
            })?;
        }
        self.written.append(&mut self.pending);
        Ok(())
    }

    /// Returns and clears the syncs written since the last call.
    pub fn drain(&mut self) -> Vec<OffsetSync> {
        std::mem::take(&mut self.written)
    }
}
