//! The copy kind on the target side (`copy`): what writes a slot's data, hands its acks to the
//! [`Ledger`] and, exactly-once, holds its transactions. The record producer (librdkafka) is in
//! both kinds (topic metadata goes through it); with `copy = "batches"` the batch producer
//! (`batches.rs`) writes the data and holds the transactions instead. Both delivery modes
//! (`at_least_once.rs`, `exactly_once.rs`) are written once against the steps here: send, take or
//! wait for acks, begin, write the batch's state (offset syncs, positions, MM2's source offsets),
//! commit, abort. A third copy kind is one variant here.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseRecord, Producer};
use strait_connect::{ConnectError, ConnectResult, SourceOffset};
use strait_mm2::OffsetSync;
use strait_wire::Batch;

use super::batches::BatchWriter;
use super::errors::{produce_context, write_failure, Retry};
use super::in_flight::InFlight;
use super::lanes::Routed;
use super::ledger::Ledger;
use super::mm2_offsets::Mm2Offsets;
use super::producer_ids::Verdict;
use super::producers::{producer_service, RecordProducers};
use super::service::{DataProducer, Failed, ProduceService};
use super::state::{self, PositionRecords};
use crate::config::{CopyKind, Delivery, Flow};

/// How long one `abort_transaction` call waits for the records in flight. Each call purges the
/// records queued; a batch the target refused mid-transaction (a record over its size limit) has
/// later batches of the partition in flight, which librdkafka queues again for retry after their
/// responses: one long call waits on them until `message.timeout.ms`, while calls this short purge
/// them at the next round.
const ABORT_ROUND: Duration = Duration::from_secs(1);

/// What could not be written, as a target reports it.
pub enum Unwritten {
    /// A record, offset sync or position of the record producer, and librdkafka's error: named
    /// and classified by [`super::writer::Writer::produce_error`].
    Record(Failed<InFlight>),
    /// A whole batch, already named and classified.
    Batch(ConnectError),
}

impl From<Failed<InFlight>> for Unwritten {
    fn from(failed: Failed<InFlight>) -> Self {
        Self::Record(failed)
    }
}

/// What writes the slot's data.
pub enum Target {
    /// `copy = "records"`: the record producer writes the records, and exactly-once holds the
    /// slot's transactions (`transactional.id` `strait-<flow>/slot-<n>`).
    Records(ProduceService<InFlight>),
    /// `copy = "batches"`: the batch producer writes whole batches, and exactly-once holds the
    /// slot's transactions; the record producer, not transactional, serves topic metadata.
    /// (Boxed, being the larger.)
    Batches { records: ProduceService<InFlight>, batches: Box<BatchWriter> },
}

/// The slot a transaction step works for, and how its failure is classified.
pub struct Slot<'a> {
    pub flow: &'a Arc<Flow>,
    pub slot: u32,
    /// The offset-syncs topic.
    pub syncs_topic: &'a str,
    /// `transaction.timeout.ms` of the slot's transactional producer.
    pub timeout: Duration,
    pub retry: Retry,
}

impl Slot<'_> {
    /// The error of a failed call of `service`, described by `context`.
    fn failure(&self, service: &ProduceService<InFlight>, context: String, e: KafkaError) -> ConnectError {
        write_failure(self.flow, self.slot, service.fatal_error(), self.retry, context, e)
    }

    /// The error of a record of `service` that could not be written.
    fn produce_error(&self, service: &ProduceService<InFlight>, (what, e): Failed<InFlight>) -> ConnectError {
        let context = produce_context(self.flow, self.syncs_topic, what, &e);
        self.failure(service, context, e)
    }

    /// Runs a transactional call of the record producer, retrying while librdkafka says so
    /// ([`state::transaction_call`]), each attempt waiting up to `timeout`.
    async fn call(
        &self,
        service: &ProduceService<InFlight>,
        what: &str,
        timeout: Duration,
        call: impl Fn(&DataProducer, Duration) -> Result<(), KafkaError> + Send + Sync + Clone + 'static,
    ) -> ConnectResult<()> {
        let flow = &self.flow.name;
        state::transaction_call(service, flow, what, timeout, call)
            .await
            .map_err(|e| self.failure(service, format!("flow {flow}: {what}"), e))
    }
}

impl Target {
    /// The target of `flow`'s copy kind for `slot`: its record producer shares `shared` at
    /// at-least-once, is the slot's transactional producer exactly-once copying records, else
    /// its own. Errors: as [`producer_service`] and [`BatchWriter::start`].
    pub async fn start(
        flow: &Flow,
        slot: u32,
        mm2_partitions: Option<u32>,
        shared: Option<&RecordProducers>,
        ids: (&str, &str),
    ) -> ConnectResult<Self> {
        let records = async {
            match (flow.delivery(), shared) {
                (Delivery::AtLeastOnce, Some(records)) => ProduceService::join(records)
                    .map_err(|e| ConnectError::backend(format!("record producer for {}", flow.target.alias), e)),
                (Delivery::ExactlyOnce { transaction_timeout }, _) if flow.copy.kind == CopyKind::Records => {
                    producer_service(flow, slot, Some(transaction_timeout), &[]).await
                }
                _ => producer_service(flow, slot, None, &[]).await,
            }
        };
        Ok(match flow.copy.kind {
            CopyKind::Records => Self::Records(records.await?),
            CopyKind::Batches => {
                let (records, batches) =
                    tokio::try_join!(records, BatchWriter::start(flow, slot, mm2_partitions, ids))?;
                Self::Batches { records, batches: Box::new(batches) }
            }
        })
    }

    /// The record producer: topic metadata, and copying records the records.
    pub fn records(&self) -> &ProduceService<InFlight> {
        match self {
            Self::Records(records) | Self::Batches { records, .. } => records,
        }
    }

    /// Queues `record` ([`ProduceService::send`]), the acks that arrive meanwhile to `ledger`.
    pub async fn send_record(
        &mut self,
        record: BaseRecord<'_, [u8], [u8], usize>,
        meta: InFlight,
        ledger: &mut Ledger,
    ) -> Result<(), Failed<InFlight>> {
        let records = self.records_mut();
        records.send(record, meta, &mut |r, d| ledger.record_acked(r, d)).await
    }

    /// What to do with a source batch ([`BatchWriter::verdict`]); a flow copying records never
    /// gets one, and copies it.
    pub async fn batch_verdict(&mut self, flow: &Flow, batch: &Batch, reread: &mut bool) -> ConnectResult<Verdict> {
        match self {
            Self::Batches { batches, .. } => batches.verdict(flow, batch, reread).await,
            Self::Records(_) => Ok(Verdict::Copy(None)),
        }
    }

    /// Sends whole batches through the batch producer without waiting for their acks
    /// ([`BatchWriter::send`]). Errors: a flow copying records (`copy = "records"`) given batches;
    /// as [`BatchWriter::send`].
    pub async fn send_batches(&mut self, at: (&Flow, u32), routed: Vec<Routed>, retry: Retry) -> ConnectResult<()> {
        match self {
            Self::Batches { batches, .. } => batches.send(at, routed, retry).await,
            Self::Records(_) => {
                let first = routed.first().map(|r| format!(" of {} partition {}", r.source.topic, r.source.partition));
                Err(ConnectError::invalid(
                    format!("flow {}: a whole batch{}", at.0.name, first.unwrap_or_default()),
                    "the flow copies records (copy = \"records\"); batches need copy = \"batches\"",
                ))
            }
        }
    }

    /// Hands `ledger` the acks received, of records and whole batches. Errors: what could not be
    /// written (a whole batch's classified by `retry`).
    pub async fn take_acks(&mut self, at: (&Flow, u32), retry: Retry, ledger: &mut Ledger) -> Result<(), Unwritten> {
        self.records_mut().take_received_acks(&mut |r, d| ledger.record_acked(r, d))?;
        self.batch_acks(at, false, retry, ledger).await
    }

    /// Waits for the ack of every record and whole batch in flight, each handed to `ledger`.
    /// Cancel-safe. Errors: as [`Self::take_acks`].
    pub async fn wait_acks(&mut self, at: (&Flow, u32), retry: Retry, ledger: &mut Ledger) -> Result<(), Unwritten> {
        self.records_mut().wait_acks(0, &mut |r, d| ledger.record_acked(r, d)).await?;
        self.batch_acks(at, true, retry, ledger).await
    }

    /// Waits for the acks of the first `sent` records sent (those after keep flowing).
    pub async fn wait_records_through(&mut self, sent: usize, ledger: &mut Ledger) -> Result<(), Failed<InFlight>> {
        let records = self.records_mut();
        let remaining = records.sent().saturating_sub(sent);
        records.wait_acks(remaining, &mut |r, d| ledger.record_acked(r, d)).await
    }

    /// The whole batches acknowledged, handed to `ledger`: those received, or with `wait` every
    /// one sent ([`BatchWriter::acks`]).
    async fn batch_acks(
        &mut self,
        at: (&Flow, u32),
        wait: bool,
        retry: Retry,
        ledger: &mut Ledger,
    ) -> Result<(), Unwritten> {
        let Self::Batches { batches, .. } = self else { return Ok(()) };
        for (r, a) in batches.acks(at, wait, retry).await.map_err(Unwritten::Batch)? {
            ledger.batch_acked(&r, a);
        }
        Ok(())
    }

    /// Sends what lingers in the record producer now, waiting up to `timeout`.
    pub async fn flush(&self, timeout: Duration) {
        self.records().flush(timeout).await;
    }

    /// Forgets what is in flight (exactly-once, an aborted transaction: its acks count for
    /// nothing).
    pub fn forget_in_flight(&mut self) {
        if let Self::Batches { batches, .. } = self {
            batches.forget_in_flight();
        }
        self.records_mut().forget_in_flight();
    }

    /// Waits up to `timeout` for the outcome of every record in flight, after a failure
    /// ([`ProduceService::settle`]).
    pub async fn settle_records(&mut self, timeout: Duration) -> Vec<(InFlight, Option<i64>)> {
        self.records_mut().settle(timeout).await
    }

    fn records_mut(&mut self) -> &mut ProduceService<InFlight> {
        match self {
            Self::Records(records) | Self::Batches { records, .. } => records,
        }
    }

    /// Exactly-once: opens a transaction, on a new producer first when `renew` (the target
    /// aborted the last one after its timeout, fencing the producer). Errors: the producer
    /// cannot be created or its transactions initialised; a failed begin.
    pub async fn begin(&mut self, at: &Slot<'_>, renew: bool) -> ConnectResult<()> {
        match self {
            Self::Batches { batches, .. } => batches.begin(at.flow, renew).await,
            Self::Records(service) => {
                if renew {
                    tracing::warn!(flow = %at.flow.name, "the target aborted a transaction that outlived transaction_timeout_ms; starting a new transactional producer");
                    *service = producer_service(at.flow, at.slot, Some(at.timeout), &[]).await?;
                }
                at.call(service, "begin transaction", at.timeout, |p, _| p.begin_transaction()).await
            }
        }
    }

    /// Exactly-once: writes `syncs`, `positions` and, with `mm2_offsets`, MM2's source offsets of
    /// the positions into the open transaction, and waits for their acks. Errors: a record that
    /// could not be written, classified by `at.retry`.
    pub async fn write_state(
        &mut self,
        at: &Slot<'_>,
        (syncs, positions): (Vec<OffsetSync>, PositionRecords),
        mm2_offsets: Option<&Mm2Offsets>,
    ) -> ConnectResult<()> {
        match self {
            Self::Batches { batches, .. } => {
                let mm2_positions: Vec<SourceOffset> = positions.iter().map(|(p, _, _)| p.clone()).collect();
                let ctx = (&**at.flow, at.slot);
                batches.write_state(ctx, at.syncs_topic, &syncs, &positions, &mm2_positions, at.retry).await
            }
            Self::Records(service) => match state::send(service, at.syncs_topic, syncs, positions, mm2_offsets).await {
                Ok(()) => Ok(()),
                Err(failed) => Err(at.produce_error(service, failed)),
            },
        }
    }

    /// Exactly-once: writes MM2's source offsets of `positions` alone into the open transaction
    /// and waits for their acks. Errors: as [`Self::write_state`].
    pub async fn write_mm2_offsets(
        &mut self,
        at: &Slot<'_>,
        positions: &[SourceOffset],
        mm2_offsets: &Mm2Offsets,
    ) -> ConnectResult<()> {
        match self {
            Self::Batches { batches, .. } => {
                let ctx = (&**at.flow, at.slot);
                batches.write_state(ctx, at.syncs_topic, &[], &Vec::new(), positions, at.retry).await
            }
            Self::Records(service) => {
                let sent = match mm2_offsets.send(service, positions).await {
                    Ok(()) => service.wait_acks(0, &mut |_, _| {}).await,
                    failed => failed,
                };
                sent.map_err(|failed| at.produce_error(service, failed))
            }
        }
    }

    /// Exactly-once: commits the open transaction. Errors: fenced by another instance; retriable
    /// when the target is unreachable or aborted the transaction after its timeout.
    pub async fn commit(&mut self, at: &Slot<'_>) -> ConnectResult<()> {
        match self {
            Self::Batches { batches, .. } => batches.commit((at.flow, at.slot), at.retry).await,
            Self::Records(service) => {
                at.call(service, "commit transaction", at.timeout, |p, timeout| p.commit_transaction(timeout)).await
            }
        }
    }

    /// Exactly-once: aborts the open transaction (`open`; none: nothing to abort). Returns
    /// whether the next begin needs a new producer: the target aborted the transaction itself
    /// after its timeout, fencing this one. Errors: fenced by another instance; a refusal.
    pub async fn abort(&mut self, at: &Slot<'_>, open: bool) -> ConnectResult<bool> {
        match self {
            Self::Batches { batches, .. } if open => batches.abort((at.flow, at.slot), at.retry).await,
            Self::Batches { .. } => Ok(false),
            Self::Records(service) => {
                // A producer that failed for good (fenced) cannot abort; the target aborts its
                // transaction.
                if open && service.fatal_error().is_none() {
                    let aborted =
                        at.call(service, "abort transaction", ABORT_ROUND, |p, t| p.abort_transaction(t)).await;
                    // The target may abort the timed-out transaction itself while we try (fencing us).
                    if aborted.is_err() && !(service.fatal_error().is_some() && at.retry.outlived()) {
                        return aborted.map(|()| false);
                    }
                }
                Ok(service.fatal_error().is_some() && at.retry.outlived())
            }
        }
    }
}
