//! At-least-once batches ended by [`strait_connect::Sink::commit_behind`] whose records are not
//! all acknowledged yet. Each waits for the ack of the last record sent before it; its positions
//! then take the partitions' downstream offsets as they stood at that ack (not later: a
//! position's `last_downstream` is its own record's, which a failover relies on), and are saved
//! with the next state write. So the next batch's records flow while this one's acks come back,
//! instead of the producer draining at every commit: across a long link, a round trip and a
//! queue's worth of idle link per batch.

use std::collections::VecDeque;

use strait_connect::SourceOffset;

use super::syncs::OffsetSyncWriter;

/// A position of an ended batch, once its records are acknowledged: the position, the timestamp
/// (ms) of the record at it when it was the last one put, and the partition's downstream offset
/// at its last record's ack.
pub type Reached = (SourceOffset, Option<i64>, Option<i64>);

/// One ended batch waiting for its acks.
struct Cut {
    /// Acks needed: every record sent before the batch ended.
    upto: usize,
    positions: Vec<(SourceOffset, Option<i64>)>,
}

/// The batches ended and not yet saved, oldest first.
#[derive(Default)]
pub struct Cuts {
    /// Acks taken so far (they come in produce order, one per record sent).
    acked: usize,
    waiting: VecDeque<Cut>,
    reached: Vec<Reached>,
}

impl Cuts {
    /// Ends a batch whose records are the first `sent` the producer was given, with `positions`
    /// (each with the timestamp of the record at it). Completes at once when all are acked.
    pub fn end(&mut self, sent: usize, positions: Vec<(SourceOffset, Option<i64>)>, syncs: &OffsetSyncWriter) {
        self.waiting.push_back(Cut { upto: sent, positions });
        self.complete(syncs);
    }

    /// One more ack taken (after `syncs` took it).
    pub fn acked(&mut self, syncs: &OffsetSyncWriter) {
        self.acked += 1;
        if self.waiting.front().is_some_and(|c| c.upto <= self.acked) {
            self.complete(syncs);
        }
    }

    /// Every record sent is acknowledged (a flush awaited them all): every batch ended is complete.
    pub fn all_acked(&mut self, syncs: &OffsetSyncWriter) {
        self.acked = self.acked.max(self.waiting.back().map_or(0, |c| c.upto));
        self.complete(syncs);
    }

    fn complete(&mut self, syncs: &OffsetSyncWriter) {
        while self.waiting.front().is_some_and(|c| c.upto <= self.acked) {
            let Some(cut) = self.waiting.pop_front() else { break };
            self.reached.extend(cut.positions.into_iter().map(|(position, ts)| {
                let downstream = syncs.last_downstream(&position.topic, position.partition);
                (position, ts, downstream)
            }));
        }
    }

    /// Forgets the batches not yet saved, after a record failed: their positions may pass it.
    /// (The positions of every record acknowledged are saved apart, `AtLeastOnce::stop_on`.)
    pub fn discard(&mut self) {
        self.waiting.clear();
        self.reached.clear();
    }

    /// Whether a batch ended is not yet saved: waiting for acks, or its positions not yet
    /// taken (a state write was under way when it completed).
    pub fn behind(&self) -> bool {
        !self.waiting.is_empty() || !self.reached.is_empty()
    }

    /// The positions of the completed batches, oldest first, to save now.
    pub fn take_reached(&mut self) -> Vec<Reached> {
        std::mem::take(&mut self.reached)
    }
}
