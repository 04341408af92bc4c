//! How an acknowledged record becomes an offset sync (MM2 `OffsetSyncWriter`): MM2's emission
//! rule per source partition, delayed syncs promoted at every commit. The sink writes what
//! [`OffsetSyncWriter::take`] returns, in MM2's bytes, with the batch's positions.

use std::sync::Arc;

use strait_mm2::{DownstreamOffset, Emit, OffsetSync, PartitionState, UpstreamOffset};

use super::partitions::PartitionMap;

/// Per source partition: MM2's emission state and the last record acknowledged, upstream and
/// downstream (kept with positions, so a target that lost records is noticed at start).
struct Partition {
    state: PartitionState,
    last_upstream: i64,
    last_downstream: i64,
}

/// Offset-sync decisions of one flow.
pub struct OffsetSyncWriter {
    offset_lag_max: u64,
    states: PartitionMap<Partition>,
    /// Syncs decided but not yet written.
    pending: Vec<OffsetSync>,
}

impl OffsetSyncWriter {
    /// A writer with MM2's `offset.lag.max` = `offset_lag_max` (records).
    pub fn new(offset_lag_max: u64) -> Self {
        Self { offset_lag_max, states: PartitionMap::default(), pending: Vec::new() }
    }

    /// Feeds one acknowledged record: `topic`/`partition` are the **source** names.
    pub fn acked(&mut self, topic: &Arc<str>, partition: i32, upstream: i64, downstream: i64) {
        let entry = self.states.get_or_insert_with(topic, partition, || Partition {
            state: PartitionState::new(),
            last_upstream: upstream,
            last_downstream: downstream,
        });
        entry.last_upstream = upstream;
        entry.last_downstream = downstream;
        let (up, down) = (UpstreamOffset(upstream), DownstreamOffset(downstream));
        if entry.state.update(up, down, self.offset_lag_max) == Emit::Now {
            self.pending.push(OffsetSync { topic: topic.to_string(), partition, upstream: up, downstream: down });
        }
    }

    /// Promotes every delayed sync and returns every sync to write now, in decision order.
    pub fn take(&mut self) -> Vec<OffsetSync> {
        for (topic, partition, entry) in self.states.iter_mut() {
            if let Some((upstream, downstream)) = entry.state.take_delayed() {
                self.pending.push(OffsetSync { topic: topic.to_string(), partition, upstream, downstream });
            }
        }
        std::mem::take(&mut self.pending)
    }

    /// The downstream offset of the last record of source `topic`/`partition` acknowledged.
    pub fn last_downstream(&self, topic: &Arc<str>, partition: i32) -> Option<i64> {
        self.states.get(topic, partition).map(|e| e.last_downstream)
    }

    /// The upstream offset of the last record of source `topic`/`partition` acknowledged.
    pub fn last_upstream(&self, topic: &Arc<str>, partition: i32) -> Option<i64> {
        self.states.get(topic, partition).map(|e| e.last_upstream)
    }

    /// Every source partition's last acknowledged record: (topic, partition, upstream offset).
    pub fn acknowledged(&self) -> impl Iterator<Item = (&Arc<str>, i32, i64)> {
        self.states.iter().map(|(t, p, e)| (t, p, e.last_upstream))
    }

    /// Forgets every partition's emission state after an aborted transaction: the aborted records
    /// were never written, so the next record of each partition syncs afresh. (A last downstream
    /// offset of an aborted record stays: it is below every record written after it.)
    pub fn reset(&mut self) {
        for (_, _, entry) in self.states.iter_mut() {
            entry.state = PartitionState::new();
        }
        self.pending.clear();
    }
}

/// Offset syncs written to their topic, kept for a caller that drains them
/// (`TargetSink::drain_offset_syncs`): off until its first drain, so a sink nobody
/// drains (`strait run`) keeps none; after it, they are held until the next drain.
#[derive(Default)]
pub struct CompletedSyncs {
    kept: Option<Vec<OffsetSync>>,
}

impl CompletedSyncs {
    /// Whether a caller drains them, so written syncs are kept.
    pub fn is_on(&self) -> bool {
        self.kept.is_some()
    }

    /// `syncs` were written: kept if a caller drains them.
    pub fn extend(&mut self, syncs: impl IntoIterator<Item = OffsetSync>) {
        if let Some(kept) = &mut self.kept {
            kept.extend(syncs);
        }
    }

    /// Every sync written since the last call, in write order (none at the first call, which
    /// turns keeping on).
    pub fn drain(&mut self) -> Vec<OffsetSync> {
        std::mem::take(self.kept.get_or_insert_with(Vec::new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strait_mm2::{DownstreamOffset, UpstreamOffset};

    fn sync(upstream: i64) -> OffsetSync {
        OffsetSync {
            topic: "t".into(),
            partition: 0,
            upstream: UpstreamOffset(upstream),
            downstream: DownstreamOffset(upstream),
        }
    }

    #[test]
    fn completed_syncs_are_kept_only_after_a_first_drain() {
        let mut completed = CompletedSyncs::default();
        completed.extend([sync(0), sync(1)]);
        assert!(!completed.is_on());
        assert!(completed.drain().is_empty(), "nothing kept before the first drain");
        assert!(completed.is_on());
        completed.extend([sync(2)]);
        completed.extend([sync(3)]);
        assert_eq!(completed.drain(), vec![sync(2), sync(3)], "kept in write order once drained");
        assert!(completed.drain().is_empty(), "a drain clears them");
    }
}
