//! Where a batch's offset syncs and source positions are written, after its records.
//!
//! Exactly-once: into the slot's open transaction, with the records (`exactly_once.rs`).
//! At-least-once: by a [`StateWriter`], in a transaction of the slot's own small transactional
//! producer, so a fenced previous owner can never move them. It writes in a task of its own while
//! the next batch is read and produced: a commit waits for its records' acks only, not for the
//! state transaction's round trips, which would otherwise stall every record arriving meanwhile.

use std::sync::Arc;
use std::time::{Duration, Instant};

use backon::ExponentialBackoff;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseRecord, Producer};
use strait_connect::{ConnectError, ConnectResult, SourceOffset};
use strait_mm2::OffsetSync;
use tokio::task::JoinHandle;

use super::errors::{write_failure, Retry};
use super::in_flight::{describe, InFlight};
use super::mm2_offsets::Mm2Offsets;
use super::producers::state_producer;
use super::service::{DataProducer, Failed, ProduceService};
use super::syncs::CompletedSyncs;
use crate::config::Flow;
use crate::kafka::{acked, enqueue, joined, ControlProducer};
use crate::positions::POSITIONS_TOPIC;
use crate::retry::doubling;

/// First and longest wait between attempts of a retriable transactional call.
pub const TRANSACTION_RETRY_MIN: Duration = Duration::from_millis(200);
pub const TRANSACTION_RETRY_MAX: Duration = Duration::from_secs(5);

/// A batch's position records: each position with the key and value of its record in the
/// positions topic.
pub type PositionRecords = Vec<(SourceOffset, Vec<u8>, Vec<u8>)>;

/// A batch's state: the offset syncs decided, and its position records.
#[derive(Clone)]
pub struct State {
    pub syncs: Vec<OffsetSync>,
    pub positions: PositionRecords,
}

/// Queues `syncs` (to `syncs_topic` on the target), `positions` and, with `mm2_offsets`, MM2's
/// source offsets of the same positions on `writer` and waits for every ack. Errors: the first
/// that failed.
pub async fn send(
    writer: &mut ProduceService<InFlight>,
    syncs_topic: &str,
    syncs: Vec<OffsetSync>,
    positions: PositionRecords,
    mm2_offsets: Option<&Mm2Offsets>,
) -> Result<(), Failed<InFlight>> {
    for sync in syncs {
        let (key, value) = (sync.encode_key(), sync.encode_value());
        let record = BaseRecord::with_opaque_to(syncs_topic, 0).partition(0).key(&key[..]).payload(&value[..]);
        writer.send(record, InFlight::OffsetSync(sync), &mut |_, _| {}).await?;
    }
    if let Some(mm2_offsets) = mm2_offsets {
        let offsets: Vec<SourceOffset> = positions.iter().map(|(position, _, _)| position.clone()).collect();
        mm2_offsets.send(writer, &offsets).await?;
    }
    for (position, key, value) in positions {
        let record = BaseRecord::with_opaque_to(POSITIONS_TOPIC, 0).partition(0).key(&key[..]).payload(&value[..]);
        writer.send(record, InFlight::Position(position), &mut |_, _| {}).await?;
    }
    writer.wait_acks(0, &mut |_, _| {}).await
}

/// Runs a transactional call of `service`'s producer (each attempt waits up to `timeout`),
/// calling it again while librdkafka says the error is retriable — say, the target is down —
/// with a doubling backoff (0.2 s to 5 s), each attempt logged: librdkafka requires the same call
/// to be repeated until it completes. Errors: the first error that is not retriable.
pub async fn transaction_call(
    service: &ProduceService<InFlight>,
    flow: &str,
    what: &str,
    timeout: Duration,
    call: impl Fn(&DataProducer, Duration) -> Result<(), KafkaError> + Send + Sync + Clone + 'static,
) -> Result<(), KafkaError> {
    let mut waits = doubling(TRANSACTION_RETRY_MIN, TRANSACTION_RETRY_MAX);
    loop {
        let call = call.clone();
        match service.transaction(move |p| call(p, timeout)).await {
            Ok(()) => return Ok(()),
            Err(KafkaError::Transaction(e)) if e.is_retriable() => {
                let wait = waits.next().unwrap_or(TRANSACTION_RETRY_MAX);
                tracing::warn!(flow, error = %e, retry_in_ms = wait.as_millis() as u64, "{what} failed; retrying");
                tokio::time::sleep(wait).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// What one state transaction holds.
#[derive(Clone)]
enum Body {
    /// A batch's offset syncs and positions ([`StateWriter::write`]).
    State(State),
    /// The ownership proof ([`StateWriter::prove_owner`]).
    Probe,
    /// MM2's source offsets alone ([`StateWriter::write_mm2_offsets`]).
    Mm2Offsets(Vec<SourceOffset>),
}

/// At-least-once: the slot's transactional producer of offset syncs and positions.
pub struct StateWriter {
    service: ProduceService<InFlight>,
    /// Producer for offset syncs kept on the source cluster (KIP-716 `source`).
    source_syncs: Option<ControlProducer>,
    flow: Arc<Flow>,
    slot: u32,
    syncs_topic: String,
    /// `transaction.timeout.ms` of `service`.
    timeout: Duration,
    /// MM2's source offsets, written with the positions (`write_mm2_offsets`).
    mm2_offsets: Option<Mm2Offsets>,
}

impl StateWriter {
    /// A writer through `service` (transactions initialised), with `source_syncs` when offset
    /// syncs live on the source cluster.
    pub fn new(
        service: ProduceService<InFlight>,
        source_syncs: Option<ControlProducer>,
        flow: Arc<Flow>,
        slot: u32,
        syncs_topic: String,
        timeout: Duration,
    ) -> Self {
        let mm2_offsets = Mm2Offsets::of(&flow);
        Self { service, source_syncs, flow, slot, syncs_topic, timeout, mm2_offsets }
    }

    /// Writes `state` in one transaction and waits until it is committed; a transaction that
    /// fails is aborted. Errors: fenced by a newer owner of the slot ([`ConnectError::Fenced`]);
    /// else a backend error naming what could not be written.
    pub async fn write(&mut self, state: State) -> ConnectResult<()> {
        self.transaction(Body::State(state)).await
    }

    /// Writes MM2's source offsets of `positions` alone in one transaction (with
    /// `write_mm2_offsets`: those [`super::mm2_offsets::at_start`] when the slot starts; nothing to
    /// do without the setting or positions). Errors: as [`Self::write`].
    pub async fn write_mm2_offsets(&mut self, positions: Vec<SourceOffset>) -> ConnectResult<()> {
        if self.mm2_offsets.is_none() || positions.is_empty() {
            return Ok(());
        }
        self.transaction(Body::Mm2Offsets(positions)).await
    }

    /// Proves the slot is still this instance's before it produces more, after a stall long
    /// enough for another instance to have taken it over: one state transaction holding a
    /// tombstone in the positions topic under a key no position has (`{"flow":…,"slot":…}`,
    /// which [`crate::positions::load`] ignores). The transaction coordinator refuses it once
    /// another instance started the slot's `transactional.id` (KIP-98 fencing). Errors:
    /// [`ConnectError::Fenced`] when another instance took the slot over; else a backend error.
    pub async fn prove_owner(&mut self) -> ConnectResult<()> {
        self.transaction(Body::Probe).await
    }

    /// One state transaction holding `body`, written again until it commits while the target is
    /// only unreachable: its records are values a later one simply repeats (the last offset sync
    /// and position of each partition), so a retry loses and duplicates nothing, and the state
    /// producer's timeout (`STATE_TRANSACTION_TIMEOUT`, 60 s) no longer stops a flow whose
    /// records wait up to `message.timeout.ms` (300 s). A transaction the target aborted after
    /// that timeout leaves the producer fenced or failed: a new one takes the slot's
    /// `transactional.id` over anew. Errors: fenced by a newer owner within the timeout; any error
    /// a retry cannot cure, naming what could not be written.
    async fn transaction(&mut self, body: Body) -> ConnectResult<()> {
        let mut waits = doubling(TRANSACTION_RETRY_MIN, TRANSACTION_RETRY_MAX);
        loop {
            let began = Instant::now();
            let Err(e) = self.attempt(body.clone(), began).await else { return Ok(()) };
            if !e.is_retriable() {
                return Err(e);
            }
            self.back_off(&mut waits, "state transaction failed; writing it again", &e).await;
            if self.service.fatal_error().is_some() {
                tracing::warn!(flow = %self.flow.name, slot = self.slot, "the target aborted a state transaction that outlived its timeout; taking the slot's transactional id over anew");
            }
            while self.service.fatal_error().is_some() {
                match state_producer(&self.flow, self.slot).await {
                    Ok(service) => self.service = service,
                    // The target unreachable again: the failed producer stays, and this loop tries anew.
                    Err(e) if e.is_retriable() => {
                        self.back_off(&mut waits, "new state producer not started; retrying", &e).await
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }

    /// Waits the next of `waits` after `error`, logging `what` happened.
    async fn back_off(&self, waits: &mut ExponentialBackoff, what: &str, error: &ConnectError) {
        let wait = waits.next().unwrap_or(TRANSACTION_RETRY_MAX);
        tracing::warn!(flow = %self.flow.name, slot = self.slot, %error, retry_in_ms = wait.as_millis() as u64, "{what}");
        tokio::time::sleep(wait).await;
    }

    /// One attempt at the transaction holding `body`, begun at `began`; aborted if it fails.
    /// Errors: classified as [`write_failure`] does for a transaction of `self.timeout`.
    async fn attempt(&mut self, body: Body, began: Instant) -> ConnectResult<()> {
        let name = self.flow.name.clone();
        let retry = Retry::Replay { began: Some(began), timeout: self.timeout };
        let begin = |p: &DataProducer, _| p.begin_transaction();
        if let Err(e) = transaction_call(&self.service, &name, "begin state transaction", self.timeout, begin).await {
            return Err(self.classify(retry, format!("flow {name}: begin state transaction"), e));
        }
        let written = match body {
            Body::State(state) => self.write_in_transaction(state).await,
            Body::Probe => self.probe_in_transaction().await,
            Body::Mm2Offsets(positions) => self.mm2_offsets_in_transaction(positions).await,
        };
        let written = written.map_err(|(context, e)| self.classify(retry, context, e));
        if written.is_err() && self.service.fatal_error().is_none() {
            // Left open, the transaction would hold back every read_committed read of the
            // positions topic (every flow's start on this target) until the target times it out.
            let abort = |p: &DataProducer, timeout| p.abort_transaction(timeout);
            if let Err(e) = transaction_call(&self.service, &name, "abort state transaction", self.timeout, abort).await
            {
                tracing::warn!(flow = %name, error = %e, "the failed state transaction could not be aborted; the target aborts it after its timeout");
            }
            self.service.forget_in_flight();
        }
        written
    }

    /// The body of [`Self::write`]'s transaction: the offset syncs and positions, then the commit.
    /// Errors: what could not be written, and why.
    async fn write_in_transaction(&mut self, state: State) -> Result<(), (String, KafkaError)> {
        let mut syncs = state.syncs;
        if let Some(producer) = &self.source_syncs {
            write_to_source(producer, &self.syncs_topic, &syncs).await.map_err(|(what, e)| self.named(what, e))?;
            syncs.clear();
        }
        send(&mut self.service, &self.syncs_topic, syncs, state.positions, self.mm2_offsets.as_ref())
            .await
            .map_err(|(what, e)| self.named(what, e))?;
        self.commit().await
    }

    /// The body of [`Self::prove_owner`]'s transaction: the tombstone, then the commit.
    async fn probe_in_transaction(&mut self) -> Result<(), (String, KafkaError)> {
        let key = serde_json::json!({ "flow": self.flow.name, "slot": self.slot }).to_string();
        let record = BaseRecord::<[u8], [u8], _>::with_opaque_to(POSITIONS_TOPIC, 0).partition(0).key(key.as_bytes());
        let sent = match self.service.send(record, InFlight::OwnerProbe, &mut |_, _| {}).await {
            Ok(()) => self.service.wait_acks(0, &mut |_, _| {}).await,
            failed => failed,
        };
        sent.map_err(|(what, e)| self.named(what, e))?;
        self.commit().await
    }

    /// The body of [`Self::write_mm2_offsets`]'s transaction: the MM2 offsets, then the commit.
    async fn mm2_offsets_in_transaction(&mut self, positions: Vec<SourceOffset>) -> Result<(), (String, KafkaError)> {
        let sent = match &self.mm2_offsets {
            Some(mm2_offsets) => match mm2_offsets.send(&mut self.service, &positions).await {
                Ok(()) => self.service.wait_acks(0, &mut |_, _| {}).await,
                failed => failed,
            },
            None => Ok(()),
        };
        sent.map_err(|(what, e)| self.named(what, e))?;
        self.commit().await
    }

    /// Commits the open state transaction.
    async fn commit(&mut self) -> Result<(), (String, KafkaError)> {
        let name = self.flow.name.clone();
        transaction_call(&self.service, &name, "commit state transaction", self.timeout, |p, timeout| {
            p.commit_transaction(timeout)
        })
        .await
        .map_err(|e| (format!("flow {name}: commit state transaction"), e))
    }

    /// The error of a failed call of this writer's transaction, as [`write_failure`] gives it.
    fn classify(&self, retry: Retry, context: String, e: KafkaError) -> ConnectError {
        write_failure(&self.flow, self.slot, self.service.fatal_error(), retry, context, e)
    }

    /// The failure of `what` with its description.
    fn named(&self, what: InFlight, e: KafkaError) -> (String, KafkaError) {
        (describe(&self.flow, &self.syncs_topic, what), e)
    }
}

/// Writes offset syncs to the source cluster and waits for their acks (KIP-716 `source`).
async fn write_to_source(
    producer: &ControlProducer,
    syncs_topic: &str,
    syncs: &[OffsetSync],
) -> Result<(), (InFlight, KafkaError)> {
    let mut acks = Vec::with_capacity(syncs.len());
    for sync in syncs {
        let (key, value) = (sync.encode_key(), sync.encode_value());
        let record = BaseRecord::to(syncs_topic).partition(0).key(&key[..]).payload(&value[..]);
        acks.push(enqueue(producer, record).await);
    }
    for (sync, ack) in syncs.iter().zip(acks) {
        let written = match ack {
            Ok(ack) => acked(ack).await,
            Err(e) => Err(e),
        };
        written.map_err(|e| (InFlight::OffsetSync(sync.clone()), e))?;
    }
    Ok(())
}

/// The [`StateWriter`], idle or writing the last commit's state in its own task.
pub struct StateTask {
    idle: Option<StateWriter>,
    busy: Option<JoinHandle<(StateWriter, ConnectResult<()>)>>,
    /// The offset syncs of the write under way, once a caller drains them (`completed` is on).
    writing: Vec<OffsetSync>,
    /// Offset syncs whose state transaction committed.
    completed: CompletedSyncs,
}

impl StateTask {
    pub fn new(writer: StateWriter) -> Self {
        Self { idle: Some(writer), busy: None, writing: Vec::new(), completed: CompletedSyncs::default() }
    }

    /// The writer, once the write under way (if any) is done. Errors: that write's error.
    pub async fn ready(&mut self) -> ConnectResult<&mut StateWriter> {
        if let Some(task) = self.busy.take() {
            let (writer, written) = joined(task).await;
            self.idle = Some(writer);
            let syncs = std::mem::take(&mut self.writing);
            written?;
            self.completed.extend(syncs);
        }
        Ok(self.idle.as_mut().expect("an idle writer once no write is under way"))
    }

    /// Whether a write is under way.
    pub fn writing(&self) -> bool {
        self.busy.as_ref().is_some_and(|task| !task.is_finished())
    }

    /// Starts writing `state` once the write under way (if any) is done; states are written in
    /// order. Errors: the previous write's error.
    pub async fn write_in_background(&mut self, state: State) -> ConnectResult<()> {
        self.ready().await?;
        let mut writer = self.idle.take().expect("ready leaves the writer idle");
        if self.completed.is_on() {
            self.writing = state.syncs.clone();
        }
        self.busy = Some(tokio::spawn(async move {
            let written = writer.write(state).await;
            (writer, written)
        }));
        Ok(())
    }

    /// The offset syncs written since the last call ([`CompletedSyncs::drain`]); those of a write
    /// under way come once it is known done (the next flush, or close).
    pub fn drain_completed(&mut self) -> Vec<OffsetSync> {
        self.completed.drain()
    }
}
