//! At-least-once delivery (MM2's default): records go through the idempotent, gap-less record
//! producer; a batch's offset syncs and positions through the slot's own small transactional
//! producer, written in the background while the next batch is produced ([`super::state`]).
//! Here too: a partition's first record travels alone, a slot proves it is still this instance's
//! after a stall, and a failed record saves the positions of those written before it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strait_connect::{ConnectError, ConnectRecord, ConnectResult, SourceOffset};
use strait_mm2::OffsetSync;

use super::errors::Retry;
use super::in_flight::InFlight;
use super::producers::{state_producer, COMMIT_FLUSH_TIMEOUT, STATE_TRANSACTION_TIMEOUT};
use super::state::{State, StateTask, StateWriter};
use super::target::Unwritten;
use super::writer::Writer;
use crate::config::{ClusterConfig, Flow, SyncsLocation};
use crate::kafka::control_producer;
use crate::record::ReplicatedRecord;

/// How long a failed flow waits for the outcome of the records sent after the failed one, before
/// saving the positions of those written.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a flow with nothing to read waits for the acks of the batches it ended before saving
/// what they reached: long enough for a healthy target to answer, short enough that a partition
/// whose leader does not answer costs the others little.
const ACK_WAIT: Duration = Duration::from_millis(100);

/// The at-least-once mode's state.
pub struct AtLeastOnce {
    /// The slot's writer of offset syncs and positions.
    state: StateTask,
    /// A gap between two calls of the data path longer than this (half the slot group's session
    /// timeout) may be a pause (SIGSTOP, a GC or VM pause, a frozen container) long enough for
    /// the group to have moved the slot: its heartbeats stopped with the process.
    stall_bound: Duration,
    /// When `put` or `flush` last returned, or the state producer started (in `TargetSink::start`).
    /// The positions are read after that: a slow read counts as a stall, so the first `put` then
    /// proves ownership (one transaction more, never one less).
    last_call: Instant,
    /// A `put` or `flush` took longer than `stall_bound`, or began that long after the last one
    /// returned (the instance may have been paused): the next `put` proves the slot is still
    /// this instance's.
    must_prove: bool,
    /// Source partitions whose first record from this producer is in flight, not yet
    /// acknowledged, with its sequence number. Their next records wait for it ([`Self::hold`]).
    unproven: HashMap<(Arc<str>, i32), usize>,
    /// Records of those partitions, held until that first record is acknowledged.
    held: VecDeque<ConnectRecord<(), ReplicatedRecord>>,
    /// Records sent up to and including the last of those first records (for
    /// [`Self::releasable`]).
    firsts_upto: usize,
}

impl AtLeastOnce {
    /// Starts the slot's state producer (`init_transactions` fences the slot's previous owner),
    /// and for offset syncs kept on the source cluster (`syncs_cluster`), a producer there.
    /// Errors: as [`producer_service`]; a producer that cannot be created.
    pub async fn start(
        flow: &Arc<Flow>,
        slot: u32,
        syncs_cluster: &ClusterConfig,
        syncs_topic: &str,
    ) -> ConnectResult<Self> {
        let service = state_producer(flow, slot).await?;
        let source_syncs = match flow.writing.offset_syncs_topic_location {
            SyncsLocation::Target => None,
            SyncsLocation::Source => Some(
                control_producer(syncs_cluster)
                    .map_err(|e| ConnectError::backend("offset-syncs producer for the source", e))?,
            ),
        };
        let writer = StateWriter::new(
            service,
            source_syncs,
            flow.clone(),
            slot,
            syncs_topic.to_owned(),
            STATE_TRANSACTION_TIMEOUT,
        );
        Ok(Self {
            state: StateTask::new(writer),
            stall_bound: flow.scale_out.session_timeout / 2,
            last_call: Instant::now(),
            must_prove: false,
            unproven: HashMap::new(),
            held: VecDeque::new(),
            firsts_upto: 0,
        })
    }

    /// Notes that a `put` or `flush` begins, returning when: a flush too can be the first call
    /// after a pause (its batch began before it), and the put after it must still prove.
    pub fn entered(&mut self) -> Instant {
        self.must_prove |= self.last_call.elapsed() > self.stall_bound;
        Instant::now()
    }

    /// Notes that a `put` or `flush` that began at `started` returned.
    pub fn returned(&mut self, started: Instant) {
        self.must_prove |= started.elapsed() > self.stall_bound;
        self.last_call = Instant::now();
    }

    /// After a gap since the last `put` or `flush` longer than the stall bound, or such a call
    /// that took longer: proves the slot is still this instance's before anything more is
    /// produced, so an instance that wakes from a pause after another took its slot over stops
    /// with [`ConnectError::Fenced`] instead of copying everything that arrived meanwhile again.
    /// (Exactly-once needs no proof: a fenced producer's transaction never commits.) Only the
    /// batches in flight when the pause began can then be written twice. An idle flow proves it
    /// once, at its next record; a slow commit, at the put after it.
    pub async fn prove_owner_after_a_stall(&mut self, flow: &Flow, slot: u32) -> ConnectResult<()> {
        if !self.must_prove {
            return Ok(());
        }
        tracing::debug!(
            flow = %flow.name, slot,
            "a gap of more than half the session timeout (idle, slow, or this instance was paused): checking that the slot is still this instance's before producing more"
        );
        self.state.ready().await?.prove_owner().await?;
        self.must_prove = false;
        Ok(())
    }

    /// Whether a record of `at`'s partition must be held ([`Self::hold`]): the partition's
    /// first record from this producer is in flight, not yet acknowledged. A partition's first
    /// record travels alone: the broker takes any sequence number as a producer's first in a
    /// partition, so were that record refused (too large, say), a batch sent behind it would
    /// still be written — ahead of it, and again at every restart, its position never saved.
    /// Once one record is written, the broker refuses what follows a refused batch (out of
    /// sequence), and the gap-less producer stops.
    pub fn awaits_first(&self, at: &SourceOffset) -> bool {
        !self.unproven.is_empty() && self.unproven.contains_key(&(at.topic.clone(), at.partition))
    }

    /// Holds `record` until its partition's first record is acknowledged; the records of other
    /// partitions keep flowing meanwhile, so each partition's first costs no wait of its own.
    pub fn hold(&mut self, record: ConnectRecord<(), ReplicatedRecord>) {
        self.held.push_back(record);
    }

    /// Whether records are held ([`Self::hold`]).
    pub fn holds_records(&self) -> bool {
        !self.held.is_empty()
    }

    /// Notes that `topic`/`partition`'s first record is the next one `w` sends.
    pub fn sending_first(&mut self, w: &Writer, topic: &Arc<str>, partition: i32) {
        let seq = w.target.records().sent();
        self.unproven.insert((topic.clone(), partition), seq);
        self.firsts_upto = self.firsts_upto.max(seq + 1);
    }

    /// The records held whose partition's first record is now acknowledged (with `wait`, once
    /// every first in flight is: a batch's end sends every record held), in the order they came.
    /// Errors: a record in flight that failed.
    pub async fn releasable(
        &mut self,
        w: &mut Writer,
        wait: bool,
    ) -> Result<Vec<ConnectRecord<(), ReplicatedRecord>>, Unwritten> {
        if self.held.is_empty() {
            return Ok(Vec::new());
        }
        if wait {
            w.await_acks_through(self.firsts_upto).await?;
        }
        self.unproven.retain(|_, seq| !w.target.records().is_acked(*seq));
        let (mut released, mut kept) = (Vec::new(), VecDeque::new());
        for record in std::mem::take(&mut self.held) {
            if self.awaits_first(&record.source_offset) {
                kept.push_back(record);
            } else {
                released.push(record);
            }
        }
        self.held = kept;
        Ok(released)
    }

    /// [`strait_connect::Sink::flush`] (and commit): every ack awaited, then the batch's offset
    /// syncs and `positions` written by the state task in the background; the next flush, or
    /// close, waits for it and returns its error.
    pub async fn flush(&mut self, w: &mut Writer, positions: &[SourceOffset]) -> ConnectResult<()> {
        w.target.flush(COMMIT_FLUSH_TIMEOUT).await;
        if let Err(unwritten) = w.await_acks(Retry::Never).await {
            return Err(self.stop_on(w, unwritten).await);
        }
        self.save_all(w, positions).await
    }

    /// Every record acknowledged: saves every batch ended, `positions`, and every offset sync
    /// decided (the delayed ones promoted).
    async fn save_all(&mut self, w: &mut Writer, positions: &[SourceOffset]) -> ConnectResult<()> {
        w.ledger.cuts.all_acked(&w.ledger.syncs);
        let mut records = w.ledger.reached_records();
        records.extend(w.ledger.position_records(positions));
        let syncs = w.ledger.take_syncs();
        self.state.write_in_background(State { syncs, positions: records }).await
    }

    /// [`strait_connect::Sink::commit_behind`]: ends the batch at `positions` without waiting
    /// for its acks, and starts saving the batches ended before whose records are all
    /// acknowledged, unless a state write is still under way (they then go with the next).
    /// Errors: a record whose ack failed; the previous state write's error.
    pub async fn end_batch(&mut self, w: &mut Writer, positions: &[SourceOffset]) -> ConnectResult<()> {
        if let Err(unwritten) = w.take_received_acks(Retry::Never).await {
            return Err(self.stop_on(w, unwritten).await);
        }
        w.ledger.end_batch(positions);
        self.save_reached(w).await
    }

    /// [`strait_connect::Sink::save_acknowledged`]: waits up to [`ACK_WAIT`] for every ack (of
    /// records, then of whole batches).
    /// All in, it saves as a flush does (the delayed offset syncs too, so a quiet partition's
    /// last record is synced); else the positions reached so far, as [`Self::end_batch`] does.
    /// Errors: a record whose ack failed; the previous state write's error.
    pub async fn save_acknowledged(&mut self, w: &mut Writer) -> ConnectResult<()> {
        match tokio::time::timeout(ACK_WAIT, w.await_acks(Retry::Never)).await {
            Ok(Err(unwritten)) => Err(self.stop_on(w, unwritten).await),
            Ok(Ok(())) => self.save_all(w, &[]).await,
            Err(_) => self.save_reached(w).await,
        }
    }

    /// Starts saving the positions reached and the offset syncs decided, unless a state write
    /// is still under way (they then go with the next).
    async fn save_reached(&mut self, w: &mut Writer) -> ConnectResult<()> {
        if self.state.writing() {
            return Ok(());
        }
        let records = w.ledger.reached_records();
        if records.is_empty() {
            return Ok(());
        }
        let syncs = w.ledger.take_syncs();
        self.state.write_in_background(State { syncs, positions: records }).await
    }

    /// The error for a record or whole batch that could not be written. The positions of every
    /// record or batch acknowledged, in every partition, are saved first, by the state producer
    /// (the data producer may have stopped for good); see [`Self::count_written_in_flight`]. So a
    /// restart replays only from the failed one on. A failure to save them is logged; the
    /// records are then replayed, not lost.
    pub async fn stop_on(&mut self, w: &mut Writer, unwritten: Unwritten) -> ConnectError {
        if let Unwritten::Record((failed, _)) = &unwritten {
            self.count_written_in_flight(w, failed).await;
        }
        w.ledger.cuts.discard();
        self.held.clear();
        let acknowledged: Vec<_> = (w.ledger.syncs.acknowledged())
            .map(|(topic, partition, offset)| SourceOffset { topic: topic.clone(), partition, offset })
            .collect();
        let positions = w.ledger.position_records(&acknowledged);
        let partitions = positions.len();
        let saved = match self.state.ready().await {
            Ok(writer) => writer.write(State { syncs: Vec::new(), positions }).await,
            Err(e) => Err(e),
        };
        match saved {
            Ok(()) => {
                tracing::info!(flow = %w.flow.name, partitions, "saved the positions of the records written before the failure")
            }
            Err(e) => {
                tracing::error!(flow = %w.flow.name, error = %e, "positions of the records written before the failure could not be saved; they will be written again at restart")
            }
        }
        w.unwritten_error(unwritten, Retry::Never)
    }

    /// Records sent around the `failed` one may have been written (other partitions, and its
    /// own before it), their acks still to come: waits up to [`SETTLE_TIMEOUT`] for the outcome
    /// of every record in flight and counts each acknowledged one, so a restart does not write it
    /// again. A partition stops counting at its first record without an ack, and the failed
    /// record's partition at the failed record, so no position passes an unwritten record.
    async fn count_written_in_flight(&mut self, w: &mut Writer, failed: &InFlight) {
        let mut stopped: HashSet<(Arc<str>, i32)> = HashSet::new();
        for (r, downstream) in w.target.settle_records(SETTLE_TIMEOUT).await {
            if let InFlight::Record { topic, partition, upstream, .. } = &r {
                let key = (topic.clone(), *partition);
                let from_failed = matches!(failed, InFlight::Record { topic: t, partition: p, upstream: u, .. }
                    if t == topic && p == partition && u <= upstream);
                match downstream {
                    Some(d) if !from_failed && !stopped.contains(&key) => w.ledger.record_acked(&r, d),
                    _ => {
                        stopped.insert(key);
                    }
                }
            }
        }
    }

    /// Writes MM2's source offsets of `positions` in a state transaction of their own
    /// ([`StateWriter::write_mm2_offsets`]). Errors: as that write, or the previous one's.
    pub async fn write_mm2_offsets(&mut self, positions: Vec<SourceOffset>) -> ConnectResult<()> {
        self.state.ready().await?.write_mm2_offsets(positions).await
    }

    /// The offset syncs written since the last call (for `TargetSink::drain_offset_syncs`).
    pub fn drain_offset_syncs(&mut self) -> Vec<OffsetSync> {
        self.state.drain_completed()
    }

    /// Waits for the state still being written. Errors: that write's error.
    pub async fn close(&mut self) -> ConnectResult<()> {
        self.state.ready().await.map(|_| ())
    }
}
