//! At-least-once batches ended by [`strait_connect::Sink::commit_behind`] whose records are not
//! all acknowledged yet, per source partition. A batch's position of a partition waits for the ack
//! of the partition's last record put before the batch ended; it then takes the partition's
//! downstream offset at that ack (not later: a position's `last_downstream` is its own record's,
//! which a failover relies on), and is saved with the next state write. So the next batch's
//! records flow while this one's acks come back, instead of the producer draining at every
//! commit (across a long link, a round trip and a queue's worth of idle link per batch); and a
//! partition whose target leader does not answer holds back only its own positions, never those
//! of partitions led by other brokers (issue 41).
//!
//! Acks of one partition come in produce order (the idempotent producer writes a partition's
//! batches in sequence, and reports them as the broker takes them), so a partition's positions
//! are reached in order too.

use std::collections::VecDeque;
use std::sync::Arc;

use strait_connect::SourceOffset;

use super::partitions::PartitionMap;
use super::syncs::OffsetSyncWriter;

/// A position of an ended batch, once its records are acknowledged: the position, the timestamp
/// (ms) of the record at it when it was the last one put, and the partition's downstream offset
/// at its last record's ack.
pub type Reached = (SourceOffset, Option<i64>, Option<i64>);

/// One partition's position of an ended batch, waiting for the ack of the record at `needs`
/// (the upstream offset of the partition's last record put before the batch ended).
struct Waiting {
    needs: i64,
    position: SourceOffset,
    timestamp: Option<i64>,
}

/// The batches ended and not yet saved, per source partition, oldest first.
#[derive(Default)]
pub struct Cuts {
    waiting: PartitionMap<VecDeque<Waiting>>,
    /// Positions waiting, over every partition.
    count: usize,
    reached: Vec<Reached>,
}

impl Cuts {
    /// Ends a batch at `positions`, each with the timestamp of the record at it and the upstream
    /// offset of its partition's last record put (`None`: none put). A position whose record is
    /// acknowledged already, or that has none, is reached at once.
    pub fn end(&mut self, positions: Vec<(SourceOffset, Option<i64>, Option<i64>)>, syncs: &OffsetSyncWriter) {
        for (position, timestamp, needs) in positions {
            let (topic, partition) = (position.topic.clone(), position.partition);
            let queue = self.waiting.get_or_insert_with(&topic, partition, VecDeque::new);
            let acked = syncs.last_upstream(&topic, partition);
            match needs {
                Some(needs) if queue.back().is_some() || acked.is_none_or(|a| a < needs) => {
                    queue.push_back(Waiting { needs, position, timestamp });
                    self.count += 1;
                }
                _ => self.reached.push((position, timestamp, syncs.last_downstream(&topic, partition))),
            }
        }
    }

    /// The record of `topic`/`partition` at `upstream` is acknowledged (after `syncs` took it):
    /// the partition's positions that waited for it, or for a record before it, are reached.
    pub fn acked(&mut self, topic: &Arc<str>, partition: i32, upstream: i64, syncs: &OffsetSyncWriter) {
        if self.count == 0 {
            return;
        }
        let queue = self.waiting.get_or_insert_with(topic, partition, VecDeque::new);
        while queue.front().is_some_and(|w| w.needs <= upstream) {
            let Some(w) = queue.pop_front() else { break };
            self.count -= 1;
            self.reached.push((w.position, w.timestamp, syncs.last_downstream(topic, partition)));
        }
    }

    /// Every record sent is acknowledged (a flush awaited them all): every batch ended is complete.
    pub fn all_acked(&mut self, syncs: &OffsetSyncWriter) {
        for (topic, partition, queue) in self.waiting.iter_mut() {
            let downstream = syncs.last_downstream(topic, partition);
            self.reached.extend(queue.drain(..).map(|w| (w.position, w.timestamp, downstream)));
        }
        self.count = 0;
    }

    /// Forgets the batches not yet saved, after a record failed: their positions may pass it.
    /// (The positions of every record acknowledged are saved apart, `AtLeastOnce::stop_on`.)
    pub fn discard(&mut self) {
        for (_, _, queue) in self.waiting.iter_mut() {
            queue.clear();
        }
        self.count = 0;
        self.reached.clear();
    }

    /// Whether a batch ended is not yet saved: waiting for acks, or its positions not yet
    /// taken (a state write was under way when it completed).
    pub fn behind(&self) -> bool {
        self.count > 0 || !self.reached.is_empty()
    }

    /// The positions reached, oldest first per partition, to save now.
    pub fn take_reached(&mut self) -> Vec<Reached> {
        std::mem::take(&mut self.reached)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(topic: &Arc<str>, partition: i32, offset: i64) -> SourceOffset {
        SourceOffset { topic: topic.clone(), partition, offset }
    }

    #[test]
    fn a_partition_waiting_for_its_ack_holds_back_only_its_own_positions() {
        let t: Arc<str> = Arc::from("t");
        let mut syncs = OffsetSyncWriter::new(100);
        let mut cuts = Cuts::default();
        // Partitions 0 and 1 each put records 0..=9; the batch ends at 10 on both.
        cuts.end(vec![(at(&t, 0, 10), None, Some(9)), (at(&t, 1, 10), None, Some(9))], &syncs);
        assert!(cuts.behind());
        // Partition 1's records are acknowledged; partition 0's leader does not answer.
        for upstream in 0..10 {
            syncs.acked(&t, 1, upstream, 100 + upstream);
            cuts.acked(&t, 1, upstream, &syncs);
        }
        let reached = cuts.take_reached();
        assert_eq!(reached, vec![(at(&t, 1, 10), None, Some(109))]);
        assert!(cuts.behind(), "partition 0 still waits");
        // A second batch: partition 1 moves on alone; partition 0's position queues behind.
        cuts.end(vec![(at(&t, 0, 12), None, Some(11)), (at(&t, 1, 15), None, Some(14))], &syncs);
        for upstream in 10..15 {
            syncs.acked(&t, 1, upstream, 100 + upstream);
            cuts.acked(&t, 1, upstream, &syncs);
        }
        assert_eq!(cuts.take_reached(), vec![(at(&t, 1, 15), None, Some(114))]);
        // Partition 0's leader answers: both its positions, in order, each at its own ack.
        for upstream in 0..12 {
            syncs.acked(&t, 0, upstream, upstream);
            cuts.acked(&t, 0, upstream, &syncs);
        }
        assert_eq!(cuts.take_reached(), vec![(at(&t, 0, 10), None, Some(9)), (at(&t, 0, 12), None, Some(11))]);
        assert!(!cuts.behind());
    }

    #[test]
    fn a_position_without_records_in_flight_is_reached_at_once() {
        let t: Arc<str> = Arc::from("t");
        let mut syncs = OffsetSyncWriter::new(100);
        syncs.acked(&t, 0, 4, 40);
        let mut cuts = Cuts::default();
        // Partition 0's last record put (4) is acknowledged, partition 1 put none (a position
        // past filtered records or markers).
        cuts.end(vec![(at(&t, 0, 7), Some(1), Some(4)), (at(&t, 1, 3), None, None)], &syncs);
        assert_eq!(cuts.take_reached(), vec![(at(&t, 0, 7), Some(1), Some(40)), (at(&t, 1, 3), None, None)]);
        assert!(!cuts.behind());
    }
}
