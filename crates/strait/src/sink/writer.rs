//! What every role of the sink shares: the copy kind's [`Target`], which writes, and the
//! [`Ledger`] its acks feed, from which a batch's offset syncs and position records are made.

use std::sync::Arc;

use rdkafka::error::KafkaError;
use rdkafka::producer::BaseRecord;
use strait_connect::{ConnectError, ConnectResult};

use super::errors::{produce_context, write_failure, Retry};
use super::in_flight::InFlight;
use super::lanes::Routed;
use super::ledger::Ledger;
use super::service::Failed;
use super::target::{Target, Unwritten};
use crate::config::Flow;

/// The slot's target and the ledger of its acks.
pub struct Writer {
    pub flow: Arc<Flow>,
    /// The slot of the flow this sink writes ([`crate::slots`]).
    pub slot: u32,
    /// The offset-syncs topic (`mm2-offset-syncs.<alias>.internal`).
    pub syncs_topic: String,
    /// Writes the records or whole batches: the flow's copy kind.
    pub target: Target,
    /// What the acks feed.
    pub ledger: Ledger,
}

impl Writer {
    /// Queues `record` ([`Target::send_record`]), taking the acks that arrive meanwhile.
    pub async fn send(&mut self, record: BaseRecord<'_, [u8], [u8], usize>, meta: InFlight) -> Result<(), Unwritten> {
        self.ledger.record_sent(&meta);
        self.target.send_record(record, meta, &mut self.ledger).await.map_err(Unwritten::Record)
    }

    /// Sends the whole batches `routed` holds ([`Target::send_batches`]), each position of their
    /// partitions waiting for their acks, then takes the acks received. Errors: a flow not
    /// copying batches; as [`super::batches::BatchWriter::send`].
    pub async fn send_batches(&mut self, routed: Vec<Routed>, retry: Retry) -> ConnectResult<()> {
        self.ledger.batches_sent(&routed);
        self.target.send_batches((&self.flow, self.slot), routed, retry).await?;
        match self.take_received_acks(retry).await {
            Ok(()) => Ok(()),
            Err(Unwritten::Batch(e)) => Err(e),
            Err(Unwritten::Record(failed)) => Err(self.produce_error(failed, retry)),
        }
    }

    /// Takes the acks already received, of records and whole batches ([`Target::take_acks`]).
    /// Errors: what could not be written (a whole batch's classified by `retry`).
    pub async fn take_received_acks(&mut self, retry: Retry) -> Result<(), Unwritten> {
        self.target.take_acks((&self.flow, self.slot), retry, &mut self.ledger).await
    }

    /// Waits for the ack of every record and whole batch in flight ([`Target::wait_acks`]).
    /// Cancel-safe. Errors: as [`Self::take_received_acks`].
    pub async fn await_acks(&mut self, retry: Retry) -> Result<(), Unwritten> {
        self.target.wait_acks((&self.flow, self.slot), retry, &mut self.ledger).await
    }

    /// Waits for the acks of the first `sent` records sent (those after keep flowing).
    pub async fn await_acks_through(&mut self, sent: usize) -> Result<(), Failed<InFlight>> {
        self.target.wait_records_through(sent, &mut self.ledger).await
    }

    /// The error of a failed write described by `context` ([`write_failure`]).
    pub fn failure(&self, context: String, e: KafkaError, retry: Retry) -> ConnectError {
        write_failure(&self.flow, self.slot, self.target.records().fatal_error(), retry, context, e)
    }

    /// The error of a record, sync or position that could not be written.
    pub fn produce_error(&self, (what, e): Failed<InFlight>, retry: Retry) -> ConnectError {
        let context = produce_context(&self.flow, &self.syncs_topic, what, &e);
        self.failure(context, e, retry)
    }

    /// The error of what could not be written ([`Self::produce_error`] for a record).
    pub fn unwritten_error(&self, unwritten: Unwritten, retry: Retry) -> ConnectError {
        match unwritten {
            Unwritten::Record(failed) => self.produce_error(failed, retry),
            Unwritten::Batch(e) => e,
        }
    }
}
