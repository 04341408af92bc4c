//! TargetSink: the one writer of a flow's data path on the target. Here a source record is
//! loop-guarded, gated by residency, renamed and produced; produce acks become offset syncs; and
//! each commit writes the batch's offset syncs and source positions after its records — in one
//! Kafka transaction in exactly-once mode.

pub mod loop_guard;
mod partitions;
pub mod service;
mod state;
pub mod stats;
pub mod syncs;
pub mod topics;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header as KafkaHeader, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer};
use strait_connect::{ConnectError, ConnectRecord, ConnectResult, Sink, SourceOffset};
use strait_mm2::OffsetSync;

use crate::admin::{Admin, LARGEST_BATCH_BYTES};
use crate::config::{Delivery, Flow, SyncsLocation};
use crate::kafka::{cluster_id, connect_error, control_producer};
use crate::mm2_offsets;
use crate::positions::{self, Positions, TopicIds, POSITIONS_TOPIC};
use crate::record::ReplicatedRecord;
use loop_guard::{LoopGuard, PROVENANCE_HEADER};
use service::ProduceService;
use state::{State, StateTask, StateWriter};
use stats::SinkMetrics;
use syncs::OffsetSyncWriter;
use topics::TopicRouter;

/// Producer settings of both modes: idempotence with acks=all keeps per-partition order and no
/// duplicates across retries; CreateTime timestamps are set per record.
pub const PRODUCER_SETTINGS: &[(&str, &str)] = &[
    ("enable.idempotence", "true"),
    ("acks", "all"),
    ("linger.ms", "5"),
    ("batch.size", BATCH_BYTES),
    ("compression.type", "none"),
    // librdkafka's default (1,000,000) is below the broker's (1,048,588); let the target topic's
    // max.message.bytes decide, as for any Kafka client.
    ("message.max.bytes", LARGEST_BATCH_BYTES),
];

/// librdkafka's `batch.size` for records (bytes): a batch holds records of one partition up to it.
const BATCH_BYTES: &str = "1000000";

/// librdkafka's `queue.buffering.max.kbytes` of a flow's record producer (8 MiB), split between
/// its slots. It bounds the records held between put and ack, whatever the batch size: a full
/// queue holds the next record back until acks make room.
pub const PRODUCER_QUEUE_KBYTES: usize = 8_192;

/// Added in at-least-once mode.
pub const AT_LEAST_ONCE_SETTINGS: &[(&str, &str)] = &[
    // A batch that fails for good (say, too large for the target) stops the producer instead of
    // letting later batches of the partition through: no gap, no reordering on the target.
    // (Transactions get the same from aborting the batch.)
    ("enable.gapless.guarantee", "true"),
    ("message.timeout.ms", "300000"),
];

/// `transaction.timeout.ms` of the at-least-once state producer, whose transactions hold only a
/// batch's offset syncs and positions.
const STATE_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// Added for the at-least-once state producer: its few records are awaited at once, so waiting
/// `linger.ms` for more would only lengthen each commit, when no record is read.
const STATE_SETTINGS: &[(&str, &str)] = &[("linger.ms", "0")];

/// How long a commit lets librdkafka send lingering records at once (see
/// [`ProduceService::flush`]) before it simply waits for their acks.
const COMMIT_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a failed flow waits for the outcome of the records sent after the failed one, before
/// saving the positions of those written.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);

/// A producer of `slot` of the flow; transactional (`strait-<source>-><target>/slot-<n>`) when
/// `transaction_timeout` is given, with `init_transactions` done, which fences the slot's previous
/// owner and completes its open transaction. Without, the at-least-once record producer.
/// Errors: the producer cannot be created; transactions the target refuses (a
/// [`ConnectError::Transaction`]), or cannot initialise yet (a [`ConnectError::Retriable`]).
async fn producer_service(
    flow: &Flow,
    slot: u32,
    transaction_timeout: Option<Duration>,
    extra: &[(&str, &str)],
) -> ConnectResult<ProduceService<InFlight>> {
    let timeout_ms = transaction_timeout.map(|t| t.as_millis().to_string());
    let transactional_id = flow.transactional_id(slot);
    // The queue is split between the flow's slots (see `Flow::slot_share`).
    let queue_kbytes = flow.slot_share(PRODUCER_QUEUE_KBYTES, 2_048).to_string();
    let mut settings = PRODUCER_SETTINGS.to_vec();
    settings.push(("queue.buffering.max.kbytes", &queue_kbytes));
    match &timeout_ms {
        None => settings.extend_from_slice(AT_LEAST_ONCE_SETTINGS),
        Some(ms) => settings.extend_from_slice(&[
            ("transactional.id", transactional_id.as_str()),
            ("transaction.timeout.ms", ms.as_str()),
            // librdkafka requires message.timeout.ms <= transaction.timeout.ms.
            ("message.timeout.ms", ms.as_str()),
        ]),
    }
    settings.extend_from_slice(extra);
    let service = ProduceService::new(&flow.target, &settings)
        .map_err(|e| ConnectError::backend(format!("producer for {}", flow.target.alias), e))?;
    if let Some(timeout) = transaction_timeout {
        service.transaction(move |p| p.init_transactions(timeout)).await.map_err(|e| {
            let context = format!("init transactions of {transactional_id} on {}", flow.target.alias);
            // A refusal (say, a timeout above the broker's transaction.max.timeout.ms) will
            // not change by retrying; an unreachable target will.
            match &e {
                KafkaError::Transaction(t) if !t.is_retriable() && t.code() != RDKafkaErrorCode::OperationTimedOut => {
                    ConnectError::transaction(context, e)
                }
                _ => ConnectError::retriable(context, e),
            }
        })?;
        tracing::info!(flow = %flow.name, transactional_id, "transactions initialised; the slot's previous owner is fenced");
    }
    Ok(service)
}

/// Errors that a later attempt may not meet: the broker or the network was briefly unavailable,
/// or leadership moved. In exactly-once mode the batch is aborted and replayed on these; any
/// other error (record too large, invalid record, authorization...) stops the flow naming the
/// record, rather than replaying a batch that can never succeed.
const TRANSIENT: &[RDKafkaErrorCode] = &[
    RDKafkaErrorCode::BrokerTransportFailure,
    RDKafkaErrorCode::MessageTimedOut,
    RDKafkaErrorCode::AllBrokersDown,
    RDKafkaErrorCode::OperationTimedOut,
    RDKafkaErrorCode::TimedOutQueue,
    RDKafkaErrorCode::PurgeQueue,
    RDKafkaErrorCode::PurgeInflight,
    RDKafkaErrorCode::Retry,
    RDKafkaErrorCode::WaitingForCoordinator,
    RDKafkaErrorCode::LeaderNotAvailable,
    RDKafkaErrorCode::NotLeaderForPartition,
    RDKafkaErrorCode::RequestTimedOut,
    RDKafkaErrorCode::NetworkException,
    RDKafkaErrorCode::CoordinatorLoadInProgress,
    RDKafkaErrorCode::CoordinatorNotAvailable,
    RDKafkaErrorCode::NotCoordinator,
    RDKafkaErrorCode::NotEnoughReplicas,
    RDKafkaErrorCode::NotEnoughReplicasAfterAppend,
    RDKafkaErrorCode::ConcurrentTransactions,
    RDKafkaErrorCode::KafkaStorageError,
    RDKafkaErrorCode::FencedLeaderEpoch,
    RDKafkaErrorCode::UnknownLeaderEpoch,
];

/// What the sink remembers of a produced record until its ack.
#[derive(Clone)]
enum InFlight {
    /// A replicated record: its source topic, partition, upstream offset, size (bytes) and
    /// timestamp (ms).
    Record { topic: Arc<str>, partition: i32, upstream: i64, bytes: usize, timestamp: Option<i64> },
    /// An offset sync of the batch.
    OffsetSync(OffsetSync),
    /// A source position of the batch.
    Position(SourceOffset),
    /// The record of a state transaction that proves the slot is still this instance's
    /// ([`state::StateWriter::prove_owner`]).
    OwnerProbe,
}

/// The [`Sink`] of a flow: writes [`ReplicatedRecord`]s, offset syncs and positions to the target.
pub struct TargetSink {
    flow: Arc<Flow>,
    /// The slot of the flow this sink writes ([`crate::slots`]).
    slot: u32,
    /// Writes records; in exactly-once mode also offset syncs and positions, in its transactions.
    service: ProduceService<InFlight>,
    /// At-least-once mode: the slot's writer of offset syncs and positions ([`state`]).
    state: Option<StateTask>,
    router: TopicRouter,
    guard: LoopGuard,
    syncs: OffsetSyncWriter,
    /// `mm2-offset-syncs.<alias>.internal`.
    syncs_topic: String,
    /// `transaction.timeout.ms`, in exactly-once mode.
    transaction_timeout: Option<Duration>,
    /// A transaction is open (begun, not yet committed or aborted).
    in_transaction: bool,
    /// When the open (or last) transaction began.
    transaction_began: Option<Instant>,
    /// The producer was fenced because the target aborted a transaction that outlived
    /// `transaction_timeout_ms` (the target was unreachable): the next `begin` starts a new one.
    renew_producer: bool,
    /// Offset and timestamp (ms) of the last record put per source partition, saved with positions.
    last: HashMap<(Arc<str>, i32), (i64, Option<i64>)>,
    /// The id of each source topic, saved with its positions (set by the source).
    topic_ids: TopicIds,
    /// At-least-once mode: when `put` or `commit` last returned. A longer gap than
    /// [`stall_bound`] means this instance may have been paused long enough to lose its slot.
    last_call: Instant,
    /// At-least-once mode: a `put` or `commit` took longer than [`stall_bound`], or began that
    /// long after the last one returned (the instance may have been paused): the next `put`
    /// proves the slot is still this instance's.
    must_prove: bool,
    /// At-least-once mode: source partitions whose first record from this producer is in flight,
    /// not yet acknowledged. Their next record waits for it (see [`Self::put`]).
    unproven: HashSet<(Arc<str>, i32)>,
    loop_drops: u64,
    stats: SinkMetrics,
    /// Records per source topic whose timestamp 0 became the produce time (librdkafka reads a
    /// timestamp of 0 as "now" and offers no way to send 0 itself).
    zero_timestamps: HashMap<Arc<str>, u64>,
}

impl TargetSink {
    /// Connects the target producers of `slot`, learns both cluster ids, ensures the positions
    /// and offset-syncs topics (one partition, compacted) and returns the sink with the flow's
    /// saved positions, from which the source starts. The slot's transactional producer's
    /// `init_transactions` runs first: it fences the slot's previous owner and completes its open
    /// transaction, so the positions read next (`read_committed`) are the last committed ones.
    /// Errors: a backend error if a cluster cannot be reached or a topic created or read.
    pub async fn start(flow: Arc<Flow>, slot: u32) -> ConnectResult<(Self, Positions)> {
        let target_id = cluster_id(&flow.target).await?;
        let source_id = cluster_id(&flow.source).await?;
        let (syncs_cluster, syncs_topic) = flow.offset_syncs();
        let rf = flow.writing.replication_factor;
        for (cluster, topic) in [(&flow.target, POSITIONS_TOPIC), (syncs_cluster, syncs_topic.as_str())] {
            let what =
                format!("create topic {topic} on cluster {} (needs Create on it unless it exists)", cluster.alias);
            let admin = Admin::new(cluster).map_err(|e| connect_error(&what, e))?;
            admin.create_state_topic(topic, rf).await.map_err(|e| connect_error(&what, e))?;
        }
        let transaction_timeout = match flow.delivery() {
            Delivery::AtLeastOnce => None,
            Delivery::ExactlyOnce { transaction_timeout } => Some(transaction_timeout),
        };
        let service = producer_service(&flow, slot, transaction_timeout, &[]).await?;
        let state = match transaction_timeout {
            None => {
                let service = producer_service(&flow, slot, Some(STATE_TRANSACTION_TIMEOUT), STATE_SETTINGS).await?;
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
                    syncs_topic.clone(),
                    STATE_TRANSACTION_TIMEOUT,
                );
                Some(StateTask::new(writer))
            }
            Some(_) => None,
        };
        let saved = positions::load(&flow.target, &flow.name)
            .await
            .map_err(|e| ConnectError::offset(format!("read {POSITIONS_TOPIC} on {}", flow.target.alias), e))?;
        let mut saved = topics::forget_positions_lost_on_target(&flow, saved).await?;
        let from_mm2 = mm2_offsets::load(&flow).await.map_err(|e| {
            ConnectError::offset(format!("read {} on {}", flow.mm2_offsets_topic(), flow.target.alias), e)
        })?;
        let before = saved.len();
        for (partition, position) in from_mm2 {
            saved.entry(partition).or_insert(position);
        }
        if saved.len() > before {
            tracing::info!(
                flow = %flow.name, topic = %flow.mm2_offsets_topic(), partitions = saved.len() - before,
                "resuming source partitions Strait has no position for where MirrorMaker 2 stopped"
            );
        }
        let sink = Self {
            router: TopicRouter::new(flow.clone())?,
            guard: LoopGuard::new(source_id, target_id),
            syncs: OffsetSyncWriter::new(flow.writing.offset_lag_max),
            syncs_topic,
            transaction_timeout,
            in_transaction: false,
            transaction_began: None,
            renew_producer: false,
            last: HashMap::new(),
            last_call: Instant::now(),
            must_prove: false,
            topic_ids: TopicIds::default(),
            unproven: HashSet::new(),
            stats: SinkMetrics::new(&flow),
            flow,
            slot,
            service,
            state,
            loop_drops: 0,
            zero_timestamps: HashMap::new(),
        };
        Ok((sink, saved))
    }

    /// The source topic ids this sink saves with positions: the source of the same slot sets them
    /// ([`crate::source::KafkaSource::start`]).
    pub fn topic_ids(&self) -> TopicIds {
        self.topic_ids.clone()
    }

    /// A [`ConnectError`] for a failed write described by `context`: a fenced producer stops
    /// the flow saying so; a [`TRANSIENT`] error is retriable in exactly-once mode (the batch is
    /// aborted and replayed); anything else, and every error in at-least-once mode (librdkafka
    /// already retried until `message.timeout.ms`), stops the flow naming the record.
    fn failure(&self, context: String, e: KafkaError) -> ConnectError {
        if let Some((code, reason)) = self.service.fatal_error() {
            if state::is_fenced(code) && self.outlived_transaction_timeout() {
                // The target aborted our own transaction (it stayed open past the timeout while
                // the target was unreachable), which bumps the producer epoch: a new producer
                // takes over and the batch is replayed. Another instance can only fence a
                // transaction younger than the timeout: that case stops below.
                return ConnectError::retriable(
                    format!("{context}: the target aborted the transaction after transaction_timeout_ms"),
                    reason,
                );
            }
            if state::is_fenced(code) {
                // Not the record's fault: the whole producer is out.
                return state::fenced(&self.flow, self.slot, reason);
            }
            return ConnectError::backend(format!("{context}: the producer failed for good"), reason);
        }
        let transient = match &e {
            KafkaError::Transaction(t) => t.is_retriable() || t.txn_requires_abort(),
            _ => e.rdkafka_error_code().is_some_and(|c| TRANSIENT.contains(&c)),
        };
        if self.transaction_timeout.is_some() && transient {
            ConnectError::retriable(context, e)
        } else {
            ConnectError::backend(context, e)
        }
    }

    fn produce_error(&self, (what, e): (InFlight, KafkaError)) -> ConnectError {
        let record = matches!(what, InFlight::Record { .. });
        let mut context = state::describe(&self.flow, &self.syncs_topic, what);
        if record && e.rdkafka_error_code().is_some_and(|c| !TRANSIENT.contains(&c)) {
            // librdkafka gives every record of a refused batch the batch's error.
            context
                .push_str(" (the first record of the batch the target refused; the one at fault may be a later one)");
        }
        if e.rdkafka_error_code() == Some(RDKafkaErrorCode::MessageSizeTooLarge) {
            // The broker checks whole batches, and librdkafka does not split a refused one (the
            // Java producer does): a small record can be refused with the records around it.
            let batch_size = self.flow.target.client.get("batch.size").map_or(BATCH_BYTES, String::as_str);
            context.push_str(&format!(
                " (the target refused its batch, up to batch.size = {batch_size} bytes of records, as over the \
                 topic's max.message.bytes: raise that limit, or if the record itself is under it, set batch.size \
                 below it in the target cluster's client settings)"
            ));
        }
        self.failure(context, e)
    }

    /// The error for a record that could not be written. In at-least-once mode the positions of
    /// every record acknowledged, in every partition, are saved first, by the state producer (the
    /// data producer may have stopped for good); see [`Self::count_written_in_flight`]. So a restart
    /// replays only from the failed record on. A failure to save them is logged; the records are
    /// then replayed, not lost.
    async fn stop_on(&mut self, failed: (InFlight, KafkaError)) -> ConnectError {
        // (In exactly-once mode the batch is aborted whole: nothing to count.)
        if self.state.is_some() {
            self.count_written_in_flight(&failed.0).await;
        }
        let positions = self.state.is_some().then(|| {
            let acknowledged: Vec<_> = self
                .syncs
                .acknowledged()
                .map(|(topic, partition, offset)| SourceOffset { topic: topic.clone(), partition, offset })
                .collect();
            self.position_records(&acknowledged)
        });
        if let (Some(positions), Some(task)) = (positions, self.state.as_mut()) {
            let partitions = positions.len();
            let saved = match task.ready().await {
                Ok(writer) => writer.write(State { syncs: Vec::new(), positions }).await,
                Err(e) => Err(e),
            };
            match saved {
                Ok(()) => {
                    tracing::info!(flow = %self.flow.name, partitions, "saved the positions of the records written before the failure")
                }
                Err(e) => {
                    tracing::error!(flow = %self.flow.name, error = %e, "positions of the records written before the failure could not be saved; they will be written again at restart")
                }
            }
        }
        self.produce_error(failed)
    }

    /// Records sent around the `failed` one may have been written (other partitions, and its
    /// own before it), their acks still to come: waits up to [`SETTLE_TIMEOUT`] for the outcome
    /// of every record in flight and counts each acknowledged one, so a restart does not write it
    /// again. A partition stops counting at its first record without an ack, and the failed
    /// record's partition at the failed record, so no position passes an unwritten record.
    async fn count_written_in_flight(&mut self, failed: &InFlight) {
        let mut stopped: HashSet<(Arc<str>, i32)> = HashSet::new();
        for (r, downstream) in self.service.settle(SETTLE_TIMEOUT).await {
            if let InFlight::Record { topic, partition, upstream, .. } = &r {
                let key = (topic.clone(), *partition);
                let from_failed = matches!(failed, InFlight::Record { topic: t, partition: p, upstream: u, .. }
                    if t == topic && p == partition && u <= upstream);
                match downstream {
                    Some(d) if !from_failed && !stopped.contains(&key) => {
                        record_acked(&mut self.syncs, &mut self.stats, r, d)
                    }
                    _ => {
                        stopped.insert(key);
                    }
                }
            }
        }
    }

    /// Each of `positions` with the key and value of its positions record: the timestamp of the
    /// record at it (when it was the last one put) and the target offset of the partition's last
    /// record written.
    fn position_records(&self, positions: &[SourceOffset]) -> Vec<(SourceOffset, Vec<u8>, Vec<u8>)> {
        positions
            .iter()
            .map(|position| {
                let (topic, partition) = (&position.topic, position.partition);
                let ts = self
                    .last
                    .get(&(topic.clone(), partition))
                    .filter(|(o, _)| *o == position.offset)
                    .and_then(|(_, ts)| *ts);
                let (key, value) = positions::encode(
                    &self.flow.name,
                    position,
                    ts,
                    self.syncs.last_downstream(topic, partition),
                    self.topic_ids.get(topic),
                );
                (position.clone(), key, value)
            })
            .collect()
    }

    /// Whether the open transaction began longer than `transaction_timeout_ms` ago, so the
    /// target aborts it on its own.
    fn outlived_transaction_timeout(&self) -> bool {
        match (self.transaction_began, self.transaction_timeout) {
            (Some(began), Some(timeout)) => began.elapsed() >= timeout,
            _ => false,
        }
    }

    /// Runs a transactional call of the record producer (exactly-once mode), retrying while
    /// librdkafka says so ([`state::transaction_call`]). Errors through [`TargetSink::failure`].
    async fn transaction_call(
        &self,
        what: &str,
        call: impl Fn(&service::DataProducer, Duration) -> Result<(), KafkaError> + Send + Sync + Clone + 'static,
    ) -> ConnectResult<()> {
        let timeout = self.transaction_timeout.unwrap_or(STATE_TRANSACTION_TIMEOUT);
        state::transaction_call(&self.service, &self.flow.name, what, timeout, call)
            .await
            .map_err(|e| self.failure(format!("flow {}: {what}", self.flow.name), e))
    }
}

/// An ack of a produced record: feeds the offset-sync rule and the partition's metrics.
fn record_acked(syncs: &mut OffsetSyncWriter, stats: &mut SinkMetrics, r: InFlight, downstream: i64) {
    if let InFlight::Record { topic, partition, upstream, bytes, timestamp } = r {
        syncs.acked(&topic, partition, upstream, downstream);
        stats.acked(&topic, partition, bytes, timestamp);
    }
}

/// A gap between two calls of the data path longer than this fraction of the slot group's
/// session timeout may be a pause (SIGSTOP, a GC or VM pause, a frozen container) long enough for
/// the group to have moved the slot: its heartbeats stopped with the process.
fn stall_bound(flow: &Flow) -> Duration {
    flow.scale_out.session_timeout / 2
}

impl TargetSink {
    /// At-least-once mode, after a gap since the last `put` or `commit` longer than
    /// [`stall_bound`], or such a call that took longer: proves the slot is still this
    /// instance's before anything more is produced, so an instance that wakes from a pause after
    /// another took its slot over stops with [`ConnectError::Fenced`] instead of copying
    /// everything that arrived meanwhile again. (Exactly-once needs no proof: a fenced producer's
    /// transaction never commits.) Only the batches in flight when the pause began can then be
    /// written twice. An idle flow proves it once, at its next record; a slow commit, at the put
    /// after it.
    async fn prove_owner_after_a_stall(&mut self) -> ConnectResult<()> {
        let must_prove = self.must_prove;
        let Some(task) = self.state.as_mut().filter(|_| must_prove) else { return Ok(()) };
        tracing::debug!(
            flow = %self.flow.name, slot = self.slot,
            "a gap of more than half the session timeout (idle, slow, or this instance was paused): checking that the slot is still this instance's before producing more"
        );
        task.ready().await?.prove_owner().await?;
        self.must_prove = false;
        Ok(())
    }

    /// Notes that a `put` or `commit` begins, returning when: a commit too can be the first call
    /// after a pause (its batch began before it), and the put after it must still prove.
    fn entered(&mut self) -> Instant {
        self.must_prove |= self.last_call.elapsed() > stall_bound(&self.flow);
        Instant::now()
    }

    /// Notes that a `put` or `commit` that began at `started` returned.
    fn returned(&mut self, started: Instant) {
        self.must_prove |= started.elapsed() > stall_bound(&self.flow);
        self.last_call = Instant::now();
    }

    /// [`Sink::commit`]'s work: every ack awaited, then the batch's offset syncs and positions.
    async fn commit_batch(&mut self, positions: &[SourceOffset]) -> ConnectResult<()> {
        if self.state.is_some() {
            // (In exactly-once mode the transaction's commit flushes.)
            self.service.flush(COMMIT_FLUSH_TIMEOUT).await;
        }
        let (syncs, stats) = (&mut self.syncs, &mut self.stats);
        let mut on_ack = |r: InFlight, downstream: i64| record_acked(syncs, stats, r, downstream);
        if let Err(failed) = self.service.wait_acks(0, &mut on_ack).await {
            return Err(self.stop_on(failed).await);
        }
        let syncs = self.syncs.take();
        self.stats.offset_syncs(&syncs);
        let positions = self.position_records(positions);
        match &mut self.state {
            Some(task) => task.write_in_background(State { syncs, positions }).await,
            None => {
                if let Err(failed) = state::send(&mut self.service, &self.syncs_topic, syncs, positions).await {
                    return Err(self.produce_error(failed));
                }
                self.transaction_call("commit transaction", |p, timeout| p.commit_transaction(timeout)).await?;
                self.in_transaction = false;
                Ok(())
            }
        }
    }

    /// [`Sink::put`]'s work: each record through the loop guard, residency and renaming, then
    /// produced.
    async fn put_records(&mut self, batch: Vec<ConnectRecord<(), ReplicatedRecord>>) -> ConnectResult<()> {
        let loop_guard_dropped = self.stats.loop_guard_dropped.clone();
        if let Err(failed) =
            self.service.take_received_acks(&mut |r, d| record_acked(&mut self.syncs, &mut self.stats, r, d))
        {
            return Err(self.stop_on(failed).await);
        }
        let mut previous: Option<(Arc<str>, i32, i64, Option<i64>)> = None;
        // The current run's partition has no record acknowledged yet from this producer.
        let mut unproven_run = false;
        for record in batch {
            let ConnectRecord { value, timestamp_ms, mut headers, source_offset, size_bytes, .. } = record;
            let Some(body) = value else { continue };
            let SourceOffset { topic, partition, offset } = source_offset;
            // Records of a partition come in runs: remember the last of each run for positions.
            match &mut previous {
                Some(p) if p.1 == partition && Arc::ptr_eq(&p.0, &topic) => (p.2, p.3) = (offset, timestamp_ms),
                _ => {
                    let run = (topic.clone(), partition, offset, timestamp_ms);
                    if let Some((topic, partition, offset, ts)) = previous.replace(run) {
                        self.last.insert((topic, partition), (offset, ts));
                    }
                    unproven_run = self.state.is_some() && self.syncs.last_downstream(&topic, partition).is_none();
                }
            }
            let Some(provenance) = self.guard.pass(&mut headers) else {
                self.loop_drops += 1;
                loop_guard_dropped.inc();
                continue;
            };
            // Residency, renaming and the target topic's existence, decided once per topic.
            let Some(target) = self.router.route(&topic, partition, self.service.producer()).await? else {
                continue;
            };
            if unproven_run {
                // At-least-once: a partition's first record from this producer travels alone.
                // The broker takes any sequence number as a producer's first in a partition, so
                // were that record refused (too large, say), a batch sent behind it would still
                // be written — ahead of it, and again at every restart, its position never
                // saved. Once one record is written, the broker refuses what follows a refused
                // batch (out of sequence), and the gap-less producer stops.
                let key = (topic.clone(), partition);
                if self.unproven.contains(&key) {
                    self.service.flush(COMMIT_FLUSH_TIMEOUT).await;
                    let drained = self
                        .service
                        .wait_acks(0, &mut |r, d| record_acked(&mut self.syncs, &mut self.stats, r, d))
                        .await;
                    if let Err(failed) = drained {
                        return Err(self.stop_on(failed).await);
                    }
                    // Every first record in flight is now written.
                    self.unproven.clear();
                    unproven_run = self.syncs.last_downstream(&topic, partition).is_none();
                }
                if unproven_run {
                    self.unproven.insert(key);
                }
            }
            let mut out_headers = OwnedHeaders::new_with_capacity(headers.len() + 1);
            for h in &headers {
                out_headers = out_headers.insert(KafkaHeader { key: &h.key, value: h.value.as_deref() });
            }
            out_headers = out_headers.insert(KafkaHeader { key: PROVENANCE_HEADER, value: Some(&*provenance) });
            let mut out =
                BaseRecord::<[u8], [u8], usize>::with_opaque_to(target, 0).partition(partition).headers(out_headers);
            if let Some(k) = body.key() {
                out = out.key(k);
            }
            if let Some(v) = body.value() {
                out = out.payload(v);
            }
            if let Some(ts) = timestamp_ms {
                out = out.timestamp(ts);
                if ts == 0 {
                    let count = self.zero_timestamps.entry(topic.clone()).or_default();
                    if *count == 0 {
                        tracing::warn!(flow = %self.flow.name, %topic, partition, offset,
                            "a record with timestamp 0 is written with the produce time: librdkafka cannot send timestamp 0 (counted; totals at stop)");
                    }
                    *count += 1;
                }
            }
            let meta =
                InFlight::Record { topic, partition, upstream: offset, bytes: size_bytes, timestamp: timestamp_ms };
            let sent =
                self.service.send(out, meta, &mut |r, d| record_acked(&mut self.syncs, &mut self.stats, r, d)).await;
            if let Err(failed) = sent {
                return Err(self.stop_on(failed).await);
            }
        }
        if let Some((topic, partition, offset, ts)) = previous {
            self.last.insert((topic, partition), (offset, ts));
        }
        Ok(())
    }
}

#[async_trait]
impl Sink<(), ReplicatedRecord> for TargetSink {
    async fn put(&mut self, batch: Vec<ConnectRecord<(), ReplicatedRecord>>) -> ConnectResult<()> {
        let started = self.entered();
        self.prove_owner_after_a_stall().await?;
        let put = self.put_records(batch).await;
        self.returned(started);
        put
    }

    /// Awaits every record's ack, then writes the batch's offset syncs and `positions`. In
    /// exactly-once mode it commits the transaction holding all three. In at-least-once mode it
    /// starts the slot's state transaction in the background and returns: the next commit, or
    /// `close`, waits for it and returns its error.
    async fn commit(&mut self, positions: &[SourceOffset]) -> ConnectResult<()> {
        let started = self.entered();
        let committed = self.commit_batch(positions).await;
        self.returned(started);
        committed
    }

    fn supports_transactions(&self) -> bool {
        self.transaction_timeout.is_some()
    }

    async fn begin(&mut self) -> ConnectResult<()> {
        if self.transaction_timeout.is_some() {
            if self.renew_producer {
                tracing::warn!(flow = %self.flow.name, "the target aborted a transaction that outlived transaction_timeout_ms; starting a new transactional producer");
                self.service = producer_service(&self.flow, self.slot, self.transaction_timeout, &[]).await?;
                self.renew_producer = false;
            }
            self.transaction_call("begin transaction", |p, _| p.begin_transaction()).await?;
            self.transaction_began = Some(Instant::now());
            self.in_transaction = true;
        }
        Ok(())
    }

    /// Aborts the open transaction (none open: nothing to do); acks of its records still to come
    /// are ignored, and offset syncs restart from the next record of each partition.
    async fn abort(&mut self) -> ConnectResult<()> {
        if self.transaction_timeout.is_none() {
            return Err(ConnectError::transaction("abort", "an at-least-once sink has no transactions"));
        }
        // A producer that failed for good (fenced) cannot abort; the target aborts its transaction.
        if self.in_transaction && self.service.fatal_error().is_none() {
            let aborted = self.transaction_call("abort transaction", |p, timeout| p.abort_transaction(timeout)).await;
            // The target may abort the timed-out transaction itself while we try (fencing us).
            if aborted.is_err() && !(self.service.fatal_error().is_some() && self.outlived_transaction_timeout()) {
                return aborted;
            }
        }
        if self.service.fatal_error().is_some() && self.outlived_transaction_timeout() {
            self.renew_producer = true;
        }
        self.in_transaction = false;
        self.service.forget_in_flight();
        self.syncs.reset();
        Ok(())
    }

    async fn close(&mut self) -> ConnectResult<()> {
        for (topic, dropped) in self.router.residency_drops() {
            tracing::info!(flow = %self.flow.name, topic, dropped, "records withheld by residency");
        }
        for (topic, records) in &self.zero_timestamps {
            tracing::info!(flow = %self.flow.name, %topic, records, "records whose timestamp 0 became the produce time");
        }
        if self.loop_drops > 0 {
            tracing::info!(flow = %self.flow.name, dropped = self.loop_drops, "records dropped by the loop guard");
        }
        // The last commit's state is still being written.
        match &mut self.state {
            Some(task) => task.ready().await.map(|_| ()),
            None => Ok(()),
        }
    }
}
