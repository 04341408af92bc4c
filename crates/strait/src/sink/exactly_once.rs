//! Exactly-once delivery (KIP-98 transactions, as MM2's KIP-618): each batch is one transaction
//! of the slot's transactional producer holding its records, offset syncs and positions, which
//! become visible together or not at all. The producer is the record producer, or with
//! `copy = "batches"` the batch producer (`batches.rs`), which then writes the offset syncs and
//! positions too.

use std::time::{Duration, Instant};

use rdkafka::error::KafkaError;
use rdkafka::producer::Producer;
use strait_connect::{ConnectResult, SourceOffset};
use strait_mm2::OffsetSync;

use super::errors::Retry;
use super::mm2_offsets::Mm2Offsets;
use super::producers::{producer_service, COMMIT_FLUSH_TIMEOUT};
use super::service::DataProducer;
use super::state;
use super::syncs::CompletedSyncs;
use super::writer::Writer;

/// How long one `abort_transaction` call waits for the records in flight. Each call purges the
/// records queued; a batch the target refused mid-transaction (a record over its size limit) has
/// later batches of the partition in flight, which librdkafka queues again for retry after their
/// responses: one long call waits on them until `message.timeout.ms`, while calls this short purge
/// them at the next round.
const ABORT_ROUND: Duration = Duration::from_secs(1);

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

    /// [`strait_connect::Sink::begin`]: a new transaction, on a new producer if the target
    /// aborted the last one after its timeout.
    pub async fn begin(&mut self, w: &mut Writer) -> ConnectResult<()> {
        if let Some(batches) = &mut w.batches {
            batches.begin(&w.flow, self.renew_producer).await?;
            self.renew_producer = false;
            self.began = Some(Instant::now());
            self.in_transaction = true;
            return Ok(());
        }
        if self.renew_producer {
            tracing::warn!(flow = %w.flow.name, "the target aborted a transaction that outlived transaction_timeout_ms; starting a new transactional producer");
            w.service = producer_service(&w.flow, w.slot, Some(self.transaction_timeout), &[]).await?;
            self.renew_producer = false;
        }
        self.transaction_call(w, "begin transaction", |p, _| p.begin_transaction()).await?;
        self.began = Some(Instant::now());
        self.in_transaction = true;
        Ok(())
    }

    /// [`strait_connect::Sink::flush`]: lingering records sent now, every ack awaited, then the
    /// offset syncs decided so far written into the open transaction.
    pub async fn flush(&mut self, w: &mut Writer) -> ConnectResult<()> {
        w.service.flush(COMMIT_FLUSH_TIMEOUT).await;
        self.write_state(w, &[]).await
    }

    /// [`strait_connect::Sink::commit`]: every ack awaited, the offset syncs and `positions`
    /// written into the open transaction, which is committed (its commit flushes the producer).
    pub async fn commit(&mut self, w: &mut Writer, positions: &[SourceOffset]) -> ConnectResult<()> {
        self.write_state(w, positions).await?;
        if let Some(batches) = &mut w.batches {
            batches.commit((&w.flow, w.slot), self.retry()).await?;
        } else {
            self.transaction_call(w, "commit transaction", |p, timeout| p.commit_transaction(timeout)).await?;
        }
        self.in_transaction = false;
        self.completed.extend(self.uncommitted_syncs.drain(..));
        Ok(())
    }

    /// Every ack awaited, then the offset syncs decided and `positions` sent into the open
    /// transaction and acknowledged.
    async fn write_state(&mut self, w: &mut Writer, positions: &[SourceOffset]) -> ConnectResult<()> {
        if let Err(failed) = w.await_acks().await {
            return Err(w.produce_error(failed, self.retry()));
        }
        let syncs = w.take_syncs();
        let positions = w.position_records(positions);
        if self.completed.is_on() {
            self.uncommitted_syncs.extend(syncs.iter().cloned());
        }
        if let Some(batches) = &mut w.batches {
            let mm2_positions: Vec<SourceOffset> = positions.iter().map(|(p, _, _)| p.clone()).collect();
            let ctx = (&*w.flow, w.slot);
            return batches.write_state(ctx, &w.syncs_topic, &syncs, &positions, &mm2_positions, self.retry()).await;
        }
        if let Err(failed) =
            state::send(&mut w.service, &w.syncs_topic, syncs, positions, self.mm2_offsets.as_ref()).await
        {
            return Err(w.produce_error(failed, self.retry()));
        }
        Ok(())
    }

    /// Writes MM2's source offsets of `positions` alone in a transaction of the record producer
    /// (with `write_mm2_offsets`: those [`super::mm2_offsets::at_start`] when the slot starts; nothing
    /// to do without the setting or positions). Errors: as [`Self::commit`]; a failed transaction
    /// is aborted.
    pub async fn write_mm2_offsets(&mut self, w: &mut Writer, positions: Vec<SourceOffset>) -> ConnectResult<()> {
        if self.mm2_offsets.is_none() || positions.is_empty() {
            return Ok(());
        }
        self.begin(w).await?;
        if let Some(batches) = &mut w.batches {
            let (ctx, retry) = ((&*w.flow, w.slot), self.retry());
            let written = match batches.write_state(ctx, &w.syncs_topic, &[], &Vec::new(), &positions, retry).await {
                Ok(()) => batches.commit(ctx, retry).await,
                failed => failed,
            };
            if let Err(e) = written {
                self.abort(w).await?;
                return Err(e);
            }
            self.in_transaction = false;
            return Ok(());
        }
        let sent = match &self.mm2_offsets {
            Some(mm2_offsets) => match mm2_offsets.send(&mut w.service, &positions).await {
                Ok(()) => w.await_acks().await,
                failed => failed,
            },
            None => Ok(()),
        };
        if let Err(failed) = sent {
            let e = w.produce_error(failed, self.retry());
            self.abort(w).await?;
            return Err(e);
        }
        self.transaction_call(w, "commit transaction", |p, timeout| p.commit_transaction(timeout)).await?;
        self.in_transaction = false;
        Ok(())
    }

    /// [`strait_connect::Sink::abort`]: aborts the open transaction (none open: nothing to do);
    /// acks of its records still to come are ignored, and offset syncs restart from the next
    /// record of each partition.
    pub async fn abort(&mut self, w: &mut Writer) -> ConnectResult<()> {
        if let Some(batches) = &mut w.batches {
            if self.in_transaction {
                self.renew_producer |= batches.abort((&w.flow, w.slot), self.retry()).await?;
            }
        // A producer that failed for good (fenced) cannot abort; the target aborts its transaction.
        } else if self.in_transaction && w.service.fatal_error().is_none() {
            let aborted =
                state::transaction_call(&w.service, &w.flow.name, "abort transaction", ABORT_ROUND, |p, t| {
                    p.abort_transaction(t)
                })
                .await
                .map_err(|e| w.failure(format!("flow {}: abort transaction", w.flow.name), e, self.retry()));
            // The target may abort the timed-out transaction itself while we try (fencing us).
            if aborted.is_err() && !(w.service.fatal_error().is_some() && self.retry().outlived()) {
                return aborted;
            }
        }
        if w.batches.is_none() && w.service.fatal_error().is_some() && self.retry().outlived() {
            self.renew_producer = true;
        }
        self.in_transaction = false;
        self.uncommitted_syncs.clear();
        w.service.forget_in_flight();
        w.syncs.reset();
        Ok(())
    }

    /// The offset syncs committed since the last call (for `TargetSink::drain_offset_syncs`).
    pub fn drain_offset_syncs(&mut self) -> Vec<OffsetSync> {
        self.completed.drain()
    }

    /// Runs a transactional call of the record producer, retrying while librdkafka says so
    /// ([`state::transaction_call`]). Errors through [`Writer::failure`].
    async fn transaction_call(
        &self,
        w: &Writer,
        what: &str,
        call: impl Fn(&DataProducer, Duration) -> Result<(), KafkaError> + Send + Sync + Clone + 'static,
    ) -> ConnectResult<()> {
        state::transaction_call(&w.service, &w.flow.name, what, self.transaction_timeout, call)
            .await
            .map_err(|e| w.failure(format!("flow {}: {what}", w.flow.name), e, self.retry()))
    }
}
