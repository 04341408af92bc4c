//! Every offset sync of a flow, for the finest translation a failover can give.
//!
//! MM2's `OffsetSyncStore` (used for checkpoints) keeps 64 syncs per partition, spaced
//! exponentially back from the newest: a group far behind the head translates up to twice its
//! distance from the head too early. A failover happens once, so it can afford to read every sync
//! still on the offset-syncs topic and use the newest one at or below the group's offset: the
//! group then re-reads at most the records between two syncs (`offset_lag_max`, or one commit's
//! worth). Same rule as MM2's translation ([`through_sync`]: the sync's downstream offset, plus one
//! when the group is past the synced record), so it never skips a record.

use std::collections::HashMap;

use rdkafka::error::KafkaError;
use strait_mm2::{through_sync, OffsetSync};

use crate::config::Flow;
use crate::kafka::read_to_end;

/// Per target-side topic and partition, the syncs since the last rewind, by upstream offset.
#[derive(Debug, Default)]
pub struct SyncHistory(HashMap<(String, i32), Vec<(i64, i64)>>);

impl SyncHistory {
    /// Reads `flow`'s offset-syncs topic to its end. Errors: the topic cannot be read.
    pub async fn load(flow: &Flow) -> Result<Self, KafkaError> {
        let (cluster, topic) = flow.offset_syncs();
        let mut history = Self::default();
        for (_, key, value) in read_to_end(cluster, &topic).await? {
            if let Ok(sync) = OffsetSync::decode(&key, &value) {
                let (src, dst) = (&flow.source.alias, &flow.target.alias);
                history.apply(flow.policy.rename_for_checkpoint(&sync.topic, src, dst), &sync);
            }
        }
        Ok(history)
    }

    /// Adds `sync` of target-side topic `topic`. A sync behind the previous one, upstream or
    /// downstream (the source topic or the target topic was recreated or truncated), starts the
    /// partition's history afresh: older syncs describe records that may be gone.
    fn apply(&mut self, topic: String, sync: &OffsetSync) {
        let syncs = self.0.entry((topic, sync.partition)).or_default();
        let (up, down) = (sync.upstream.0, sync.downstream.0);
        if syncs.last().is_some_and(|(u, d)| up < *u || down < *d) {
            syncs.clear();
        }
        syncs.push((up, down));
    }

    /// The source offset of a group at `downstream` on target-side `topic`/`partition`: the
    /// first source record it has not read, from the newest sync at or below `downstream` (its
    /// upstream offset when the group is at the synced record, plus one when past it). For
    /// moving a group back along the flow it was copied by. `None` when no sync lies at or below.
    pub fn translate_back(&self, topic: &str, partition: i32, downstream: i64) -> Option<i64> {
        let syncs = self.0.get(&(topic.to_string(), partition))?;
        let below = syncs.partition_point(|(_, d)| *d <= downstream);
        let (u, d) = syncs.get(below.checked_sub(1)?)?;
        through_sync((*d, *u), downstream)
    }

    /// The target offset of a group at `upstream` on target-side `topic`/`partition`, from the
    /// newest sync at or below it: its downstream offset, plus one when the group is past it.
    /// `None` when no sync lies at or below `upstream`.
    pub fn translate(&self, topic: &str, partition: i32, upstream: i64) -> Option<i64> {
        let syncs = self.0.get(&(topic.to_string(), partition))?;
        let below = syncs.partition_point(|(u, _)| *u <= upstream);
        let (u, d) = syncs.get(below.checked_sub(1)?)?;
        through_sync((*u, *d), upstream)
    }
}

#[cfg(test)]
mod tests {
    use strait_mm2::{DownstreamOffset, UpstreamOffset};

    use super::*;

    fn sync(upstream: i64, downstream: i64) -> OffsetSync {
        OffsetSync {
            topic: "t".into(),
            partition: 0,
            upstream: UpstreamOffset(upstream),
            downstream: DownstreamOffset(downstream),
        }
    }

    #[test]
    fn the_newest_sync_at_or_below_the_group_decides() {
        let mut h = SyncHistory::default();
        for up in (0..=1_000).step_by(100) {
            h.apply("t".into(), &sync(up, up + 5));
        }
        // MM2's store would answer 513 for 600 (its slot at 512), re-reading 87 more records.
        assert_eq!(h.translate("t", 0, 600), Some(605));
        assert_eq!(h.translate("t", 0, 650), Some(606));
        assert_eq!(h.translate("t", 0, 5_000), Some(1_006));
        assert_eq!(h.translate("t", 0, -1), None);
        assert_eq!(h.translate("t", 1, 600), None);
        assert_eq!(h.translate("u", 0, 600), None);
    }

    #[test]
    fn back_along_the_flow_the_first_unread_source_record() {
        let mut h = SyncHistory::default();
        for up in (0..=1_000).step_by(100) {
            h.apply("t".into(), &sync(up, up / 2));
        }
        // At the synced record: exactly its source offset; past it: the next one (re-reads).
        assert_eq!(h.translate_back("t", 0, 250), Some(500));
        assert_eq!(h.translate_back("t", 0, 260), Some(501));
        assert_eq!(h.translate_back("t", 0, 9_999), Some(1_001));
        assert_eq!(h.translate_back("t", 0, -1), None);
        assert_eq!(h.translate_back("t", 2, 250), None);
    }

    #[test]
    fn a_rewind_forgets_the_older_syncs() {
        let mut h = SyncHistory::default();
        h.apply("t".into(), &sync(0, 0));
        h.apply("t".into(), &sync(500, 500));
        // The source topic was recreated: offset 400 is a different record now.
        h.apply("t".into(), &sync(0, 501));
        assert_eq!(h.translate("t", 0, 450), Some(502));
        // The target topic was recreated: downstream 501 is gone.
        h.apply("t".into(), &sync(100, 3));
        assert_eq!(h.translate("t", 0, 450), Some(4));
        assert_eq!(h.translate("t", 0, 50), None);
    }
}
