//! The target side of `copy = "batches"`: whole source batches produced as they are (their
//! bytes, codec, timestamps and headers), through `strait-wire`'s producer, which gives each its
//! producer id, epoch and sequence and recomputes its CRC. They are sent without waiting, each
//! leader's partitions on their own, and their acks, handed back as they come, feed what a
//! record's ack feeds on the record path: MM2's offset-sync rule, the partition metrics and the
//! position each partition's batches reached.
//!
//! At-least-once the producer is idempotent. Exactly-once it is the slot's transactional
//! producer (`transactional.id` `strait-<flow>/slot-<n>`, KIP-98): the batches, then the batch's
//! offset syncs and positions written as batches of their own ([`BatchWriter::write_state`]),
//! go in one transaction, which `exactly_once.rs` begins, commits and aborts through it.

use std::collections::BTreeMap;
use std::time::Duration;

use strait_connect::{ConnectError, ConnectResult, SourceOffset};
use strait_mm2::OffsetSync;
use strait_wire::{Appended, Batch, Outgoing, Producer, ResponseError, WireError};

use super::errors::Retry;
use super::lanes::{failure, Lanes, Routed};
use super::mm2_offsets::Mm2Offsets;
use super::producer_ids::{EchoGuard, Registrar, Verdict};
use super::producers::PRODUCER_QUEUE_KBYTES;
use super::state::{PositionRecords, TRANSACTION_RETRY_MAX, TRANSACTION_RETRY_MIN};
use crate::config::{Delivery, Flow};
use crate::kafka::{transaction_timeout_refused, wire_cluster, wire_error};
use crate::positions::POSITIONS_TOPIC;
use crate::retry::doubling;

/// How long a batch is retried before the flow stops naming it, at-least-once: as long as the
/// record path's producer keeps trying a record (its `message.timeout.ms`). Exactly-once it is
/// the transaction timeout, as for the record path's transactional producer.
pub(super) const DELIVERY_TIMEOUT: Duration = Duration::from_secs(300);

/// Offset syncs or positions per batch of them: a few hundred bytes each, so a batch stays far
/// below the state topics' `max.message.bytes` (1 MiB by default).
const STATE_RECORDS_PER_BATCH: usize = 1_000;

/// How long a put whose batches fill the producer queue waits for acks at a time.
const QUEUE_WAIT: Duration = Duration::from_millis(100);

/// A record's key and value, as bytes.
type KeyValue = (Vec<u8>, Vec<u8>);

/// The slot's batch producers on the target.
pub struct BatchWriter {
    /// The producers, one per origin set; the first holds the transactions.
    lanes: Lanes,
    /// Exactly-once with `write_mm2_offsets`: MM2's source offsets, written in each transaction
    /// with its positions, and the partition count of their topic.
    mm2_offsets: Option<(Mm2Offsets, u32)>,
    /// Drops the source's batches that came from the target, under every replication policy:
    /// names stop cycles only where every deployment names the clusters alike.
    guard: EchoGuard,
}

impl BatchWriter {
    /// Connects to `flow`'s target with its own client (TLS and SASL from `[clusters.client]`)
    /// and gets a producer id: exactly-once, the transactional id of `slot`, which fences the
    /// slot's previous owner and completes its open transaction before this returns (so the
    /// positions read afterwards are the last committed ones). Errors: a setting the client
    /// refuses (invalid), refused credentials (denied), a target that does not answer
    /// (retriable), transactions the target refuses (a transaction timeout above its
    /// `transaction.max.timeout.ms`: [`ConnectError::Transaction`]). `mm2_partitions`: the
    /// partition count of the MM2 offsets topic, with `write_mm2_offsets`. `(source_id,
    /// target_id)`: the clusters' ids, for the loop guard ([`super::producer_ids`]).
    pub async fn start(
        flow: &Flow,
        slot: u32,
        mm2_partitions: Option<u32>,
        (source_id, target_id): (&str, &str),
    ) -> ConnectResult<Self> {
        let registrar = async {
            let cluster = wire_cluster(&flow.target, "producer id registrar").await?;
            let producer = Producer::init(cluster, DELIVERY_TIMEOUT)
                .await
                .map_err(|e| wire_error(format!("producer id registrar on target {}", flow.target.alias), e))?;
            Ok(Registrar::new(producer))
        };
        let (producer, registrar, guard) =
            tokio::try_join!(Self::producer(flow, slot), registrar, EchoGuard::start(flow, target_id.to_string()))?;
        let mm2_offsets = Mm2Offsets::of(flow).zip(mm2_partitions);
        let lanes = Lanes::new(producer, registrar, source_id, DELIVERY_TIMEOUT);
        Ok(Self { lanes, mm2_offsets, guard })
    }

    /// The batch producer of [`Self::start`].
    async fn producer(flow: &Flow, slot: u32) -> ConnectResult<Producer> {
        let cluster = wire_cluster(&flow.target, "batch producer").await?;
        Ok(match flow.delivery() {
            Delivery::AtLeastOnce => Producer::init(cluster, DELIVERY_TIMEOUT)
                .await
                .map_err(|e| wire_error(format!("batch producer on target {}", flow.target.alias), e))?,
            Delivery::ExactlyOnce { transaction_timeout } => {
                let transactional_id = flow.transactional_id(slot);
                let p =
                    Producer::init_transactional(cluster, &transactional_id, transaction_timeout, transaction_timeout)
                        .await
                        .map_err(|e| {
                            let context = format!("init transactions of {transactional_id} on {}", flow.target.alias);
                            match e.broker_error() {
                                // A setting, as on the record path (`crate::kafka::classify_start`).
                                Some(ResponseError::InvalidTransactionTimeout) => ConnectError::invalid(
                                    format!("{context}: {}", transaction_timeout_refused(flow)),
                                    e,
                                ),
                                Some(error) if !e.is_retriable() => {
                                    ConnectError::transaction(context, error.to_string())
                                }
                                _ => wire_error(context, e),
                            }
                        })?;
                tracing::info!(flow = %flow.name, transactional_id, "batch transactions initialised; the slot's previous owner is fenced");
                p
            }
        })
    }

    /// What to do with a source batch ([`EchoGuard::verdict`]).
    pub async fn verdict(&mut self, flow: &Flow, batch: &Batch, reread: &mut bool) -> ConnectResult<Verdict> {
        self.guard.verdict(flow, batch, reread).await
    }

    /// Sends `batches` (in order within each partition, each through the producer of its
    /// origins, [`Lanes::send`]) without waiting for their acks, which [`Self::acks`] hands
    /// back; while more than the slot's share of the producer queue ([`PRODUCER_QUEUE_KBYTES`])
    /// waits for acks, it waits for some. Each leader's partitions go on their own, and a
    /// partition's first batch from a producer goes alone ahead of the rest (`strait-wire`'s
    /// lanes). Errors ([`failure`]): a batch the target refused or did not take within the
    /// delivery timeout, naming its target topic, partition and source offset; at-least-once
    /// never retriable (the producer's sequences are then unknown, and the batches before it are
    /// written again after a restart: positions are saved only after acks); exactly-once
    /// retriable when asking again may succeed (the transaction is aborted and replayed).
    pub async fn send(&mut self, at: (&Flow, u32), batches: Vec<Routed>, retry: Retry) -> ConnectResult<()> {
        self.lanes.send(at, batches, retry).await?;
        let most = at.0.slot_share(PRODUCER_QUEUE_KBYTES, 2_048) * 1024;
        while self.lanes.queued_bytes() > most {
            self.lanes.some_acks(at, QUEUE_WAIT, retry).await?;
        }
        Ok(())
    }

    /// The batches acknowledged since the last call ([`Lanes::acks`]). Errors: as [`Self::send`].
    pub async fn acks(&mut self, at: (&Flow, u32), wait: bool, retry: Retry) -> ConnectResult<Vec<(Routed, Appended)>> {
        self.lanes.acks(at, wait, retry).await
    }

    /// Forgets the batches in flight (exactly-once, an aborted transaction: their acks count for
    /// nothing; the abort drops them from the producer).
    pub fn forget_in_flight(&mut self) {
        self.lanes.forget_in_flight();
    }

    /// Exactly-once: opens a transaction, first taking the slot's transactional id over anew
    /// when `renew` (the target aborted the last transaction after its timeout, fencing this
    /// producer's epoch). Errors: as [`BatchWriter::start`].
    pub async fn begin(&mut self, flow: &Flow, renew: bool) -> ConnectResult<()> {
        let context = || format!("flow {}: begin a batch transaction", flow.name);
        if renew {
            tracing::warn!(flow = %flow.name, "the target aborted a transaction that outlived transaction_timeout_ms; taking the slot's transactional id over anew");
            self.lanes.first().renew().await.map_err(|e| wire_error(context(), e))?;
        }
        self.lanes.first().begin().map_err(|e| ConnectError::backend(context(), e))
    }

    /// Exactly-once: writes `syncs` (to `syncs_topic`, partition 0), `positions` (to the
    /// positions topic, partition 0) and, with `write_mm2_offsets`, MM2's source offsets of
    /// `mm2_positions` (each to the partition Kafka's Java producer gives its key) into the open
    /// transaction, as batches of records of their own, and waits for their acks. Errors: as
    /// [`Self::commit`].
    pub async fn write_state(
        &mut self,
        (flow, slot): (&Flow, u32),
        syncs_topic: &str,
        syncs: &[OffsetSync],
        positions: &PositionRecords,
        mm2_positions: &[SourceOffset],
        retry: Retry,
    ) -> ConnectResult<()> {
        // Each partition's records in the order given.
        let mut records: BTreeMap<(&str, i32), Vec<KeyValue>> = BTreeMap::new();
        for sync in syncs {
            records.entry((syncs_topic, 0)).or_default().push((sync.encode_key(), sync.encode_value()));
        }
        for (_, key, value) in positions {
            records.entry((POSITIONS_TOPIC, 0)).or_default().push((key.clone(), value.clone()));
        }
        if let Some((mm2_offsets, partitions)) = &self.mm2_offsets {
            for position in mm2_positions {
                let (topic, partition, key, value) = mm2_offsets.keyed(position, *partitions);
                records.entry((topic, partition)).or_default().push((key, value));
            }
        }
        let now = now_ms();
        let mut out = Vec::new();
        for ((topic, partition), records) in &records {
            for chunk in records.chunks(STATE_RECORDS_PER_BATCH) {
                let records: Vec<_> = chunk.iter().map(|(k, v)| (Some(&k[..]), Some(&v[..]))).collect();
                let batch = Batch::of_records(&records, now).map_err(|e| {
                    ConnectError::backend(format!("flow {}: offset syncs and positions as a batch", flow.name), e)
                })?;
                out.push(Outgoing { topic: topic.to_string(), partition: *partition, batch });
            }
        }
        if out.is_empty() {
            return Ok(());
        }
        let context = || format!("flow {}: writing offset syncs and positions on {}", flow.name, flow.target.alias);
        self.lanes.first().produce(&out).await.map(|_| ()).map_err(|e| failure(flow, slot, context(), e, retry))
    }

    /// Exactly-once: commits the open transaction, asking a coordinator that cannot answer
    /// again until it does ([`Self::end`]): a commit the target took before it went down is one
    /// the flow cannot tell from one it never saw, and asked again the coordinator answers it as
    /// done (a transaction it already committed) or commits it. Errors ([`failure`]): fenced by
    /// another instance ([`ConnectError::Fenced`]); retriable when the target aborted the
    /// transaction after its timeout (it is then replayed on a renewed producer); the
    /// coordinator's refusal.
    pub async fn commit(&mut self, (flow, slot): (&Flow, u32), retry: Retry) -> ConnectResult<()> {
        let context = format!("flow {}: commit a batch transaction", flow.name);
        self.end((flow, slot), true).await.map_err(|e| failure(flow, slot, context, e, retry))
    }

    /// Exactly-once: aborts the open transaction and bumps the producer's epoch (sequences
    /// restart), asking a coordinator that cannot answer again until it does ([`Self::end`]):
    /// only its answer says the transaction will not commit, so the batch is never replayed on a
    /// guess. Returns whether the producer must take the id over anew at the next begin: the
    /// target aborted the transaction itself after its timeout ([`Retry::outlived`]), which
    /// fenced this epoch. Errors: fenced by another instance; the coordinator's refusal.
    pub async fn abort(&mut self, (flow, slot): (&Flow, u32), retry: Retry) -> ConnectResult<bool> {
        match self.end((flow, slot), false).await {
            Ok(()) => Ok(false),
            Err(e) if e.is_fenced() && retry.outlived() => Ok(true),
            Err(e) => Err(failure(flow, slot, format!("flow {}: abort a batch transaction", flow.name), e, retry)),
        }
    }

    /// Commits (`commit`) or aborts the open transaction. A coordinator that cannot answer (the
    /// target down, restarting, loading; the producer's own retries ran out) is asked again
    /// with a doubling backoff (0.2 s to 5 s) until it does, as the record path asks librdkafka.
    /// Errors: the coordinator's answer (fenced, or a refusal).
    async fn end(&mut self, (flow, slot): (&Flow, u32), commit: bool) -> Result<(), WireError> {
        let what = if commit { "commit" } else { "abort" };
        let mut waits = doubling(TRANSACTION_RETRY_MIN, TRANSACTION_RETRY_MAX);
        loop {
            let producer = self.lanes.first();
            let ended = if commit { producer.commit().await } else { producer.abort().await };
            let e = match ended {
                Ok(()) => return Ok(()),
                Err(e) if e.is_fenced() || !e.is_coordinator_retriable() => return Err(e),
                Err(e) => e,
            };
            let wait = waits.next().unwrap_or(TRANSACTION_RETRY_MAX);
            tracing::warn!(flow = %flow.name, slot, error = %e, retry_in_ms = wait.as_millis() as u64, "flow {}: {what} a batch transaction failed; asking the coordinator again", flow.name);
            tokio::time::sleep(wait).await;
        }
    }
}

/// The time now in ms since the epoch, the create time of the offset syncs and positions.
pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
