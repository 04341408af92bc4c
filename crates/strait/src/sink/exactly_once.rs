//! Exactly-once delivery (KIP-98 transactions, as MM2's KIP-618): each batch is one transaction
//! of the slot's transactional producer holding its records, offset syncs and positions, which
//! become visible together or not at all. Written once against the copy kind's target
//! ([`super::target::Target`]): the record producer, or with `copy = "batches"` the batch producer, holds the
//! transactions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use strait_connect::{ConnectResult, SourceOffset};
use strait_mm2::OffsetSync;

use super::errors::Retry;
use super::mm2_offsets::Mm2Offsets;
use super::producers::COMMIT_FLUSH_TIMEOUT;
use super::syncs::CompletedSyncs;
use super::target::Slot;
use super::writer::Writer;
use crate::config::Flow;

/// The exactly-once mode's state.
pub struct ExactlyOnce {
    /// `transaction.timeout.ms` of the record producer.
    transaction_timeout: Duration,
    /// A transaction is open (begun, not yet committed or aborted).
    in_transaction: bool,
    /// When the open (or last) transaction began.
    began: Option<Instant>,
    /// The producer was fenced because the target aborted a transaction that outlived
    /// `transaction_timeout_ms` (the target was unreachable): the next `begin` starts a new one.
    renew_producer: bool,
    /// Offset syncs written in the open transaction, while a caller drains them.
    uncommitted_syncs: Vec<OffsetSync>,
    /// Offset syncs whose transaction committed.
    completed: CompletedSyncs,
    /// MM2's source offsets, written in each transaction with its positions (`write_mm2_offsets`).
    mm2_offsets: Option<Mm2Offsets>,
}

impl ExactlyOnce {
    /// The state of a record producer with `transaction_timeout`, its transactions initialised,
    /// writing `mm2_offsets` with the positions when given.
    pub fn new(transaction_timeout: Duration, mm2_offsets: Option<Mm2Offsets>) -> Self {
        Self {
            transaction_timeout,
            in_transaction: false,
            began: None,
            renew_producer: false,
            uncommitted_syncs: Vec::new(),
            completed: CompletedSyncs::default(),
            mm2_offsets,
        }
    }

    /// How a failed write of the open (or last) transaction is classified ([`Retry::Replay`]).
    pub fn retry(&self) -> Retry {
        Retry::Replay { began: self.began, timeout: self.transaction_timeout }
    }

    /// What the target's transaction steps need of the slot ([`Slot`]).
    fn slot<'a>(&self, w: (&'a Arc<Flow>, u32, &'a str)) -> Slot<'a> {
        let (flow, slot, syncs_topic) = w;
        Slot { flow, slot, syncs_topic, timeout: self.transaction_timeout, retry: self.retry() }
    }

    /// [`strait_connect::Sink::begin`]: a new transaction, on a new producer if the target
    /// aborted the last one after its timeout.
    pub async fn begin(&mut self, w: &mut Writer) -> ConnectResult<()> {
        let at = self.slot((&w.flow, w.slot, &w.syncs_topic));
        w.target.begin(&at, self.renew_producer).await?;
        self.renew_producer = false;
        self.began = Some(Instant::now());
        self.in_transaction = true;
        Ok(())
    }

    /// [`strait_connect::Sink::flush`]: lingering records sent now, every ack awaited, then the
    /// offset syncs decided so far written into the open transaction.
    pub async fn flush(&mut self, w: &mut Writer) -> ConnectResult<()> {
        w.target.flush(COMMIT_FLUSH_TIMEOUT).await;
        self.write_state(w, &[]).await
    }

    /// [`strait_connect::Sink::commit`]: every ack awaited, the offset syncs and `positions`
    /// written into the open transaction, which is committed (its commit flushes the producer).
    pub async fn commit(&mut self, w: &mut Writer, positions: &[SourceOffset]) -> ConnectResult<()> {
        self.write_state(w, positions).await?;
        let at = self.slot((&w.flow, w.slot, &w.syncs_topic));
        w.target.commit(&at).await?;
        self.in_transaction = false;
        self.completed.extend(self.uncommitted_syncs.drain(..));
        Ok(())
    }

    /// Every ack awaited, then the offset syncs decided and `positions` sent into the open
    /// transaction and acknowledged.
    async fn write_state(&mut self, w: &mut Writer, positions: &[SourceOffset]) -> ConnectResult<()> {
        if let Err(unwritten) = w.await_acks(self.retry()).await {
            return Err(w.unwritten_error(unwritten, self.retry()));
        }
        let syncs = w.ledger.take_syncs();
        let positions = w.ledger.position_records(positions);
        if self.completed.is_on() {
            self.uncommitted_syncs.extend(syncs.iter().cloned());
        }
        let at = self.slot((&w.flow, w.slot, &w.syncs_topic));
        w.target.write_state(&at, (syncs, positions), self.mm2_offsets.as_ref()).await
    }

    /// Writes MM2's source offsets of `positions` alone in a transaction (with
    /// `write_mm2_offsets`: those [`super::mm2_offsets::at_start`] when the slot starts; nothing
    /// to do without the setting or positions). Errors: as [`Self::commit`]; a failed transaction
    /// is aborted.
    pub async fn write_mm2_offsets(&mut self, w: &mut Writer, positions: Vec<SourceOffset>) -> ConnectResult<()> {
        if self.mm2_offsets.is_none() || positions.is_empty() {
            return Ok(());
        }
        self.begin(w).await?;
        let at = self.slot((&w.flow, w.slot, &w.syncs_topic));
        let Some(mm2_offsets) = &self.mm2_offsets else { return Ok(()) };
        let written = match w.target.write_mm2_offsets(&at, &positions, mm2_offsets).await {
            Ok(()) => w.target.commit(&at).await,
            failed => failed,
        };
        if let Err(e) = written {
            self.abort(w).await?;
            return Err(e);
        }
        self.in_transaction = false;
        Ok(())
    }

    /// [`strait_connect::Sink::abort`]: aborts the open transaction (none open: nothing to do);
    /// acks of its records still to come are ignored, and offset syncs restart from the next
    /// record of each partition.
    pub async fn abort(&mut self, w: &mut Writer) -> ConnectResult<()> {
        let at = self.slot((&w.flow, w.slot, &w.syncs_topic));
        self.renew_producer |= w.target.abort(&at, self.in_transaction).await?;
        self.in_transaction = false;
        self.uncommitted_syncs.clear();
        w.target.forget_in_flight();
        w.ledger.syncs.reset();
        Ok(())
    }

    /// The offset syncs committed since the last call (for `TargetSink::drain_offset_syncs`).
    pub fn drain_offset_syncs(&mut self) -> Vec<OffsetSync> {
        self.completed.drain()
    }
}
