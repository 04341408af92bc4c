//! How an acknowledged record becomes an offset sync (MM2 `OffsetSyncWriter`): MM2's emission
//! rule per source partition, delayed syncs promoted at every commit. The sink writes what
//! [`OffsetSyncWriter::take`] returns, in MM2's bytes, with the batch's positions.

use std::collections::HashMap;
use std::sync::Arc;

use strait_mm2::{DownstreamOffset, Emit, OffsetSync, PartitionState, UpstreamOffset};

/// Offset-sync decisions of one flow.
pub struct OffsetSyncWriter {
    offset_lag_max: u64,
    states: HashMap<(Arc<str>, i32), PartitionState>,
    /// Syncs decided but not yet written.
    pending: Vec<OffsetSync>,
}

impl OffsetSyncWriter {
    /// A writer with MM2's `offset.lag.max` = `offset_lag_max` (records).
    pub fn new(offset_lag_max: u64) -> Self {
        Self { offset_lag_max, states: HashMap::new(), pending: Vec::new() }
    }

    /// Feeds one acknowledged record: `topic`/`partition` are the **source** names.
    pub fn acked(&mut self, topic: &Arc<str>, partition: i32, upstream: i64, downstream: i64) {
        let state = self.states.entry((topic.clone(), partition)).or_default();
        let (up, down) = (UpstreamOffset(upstream), DownstreamOffset(downstream));
        if state.update(up, down, self.offset_lag_max) == Emit::Now {
            self.pending.push(OffsetSync { topic: topic.to_string(), partition, upstream: up, downstream: down });
        }
    }

    /// Promotes every delayed sync and returns every sync to write now, in decision order.
    pub fn take(&mut self) -> Vec<OffsetSync> {
        for ((topic, partition), state) in &mut self.states {
            if let Some((upstream, downstream)) = state.take_delayed() {
                self.pending.push(OffsetSync { topic: topic.to_string(), partition: *partition, upstream, downstream });
            }
        }
        std::mem::take(&mut self.pending)
    }

    /// Forgets every partition's state after an aborted transaction: the aborted records were
    /// never written, so the next record of each partition syncs afresh.
    pub fn reset(&mut self) {
        self.states.clear();
        self.pending.clear();
    }
}
