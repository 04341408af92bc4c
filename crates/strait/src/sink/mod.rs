//! TargetSink: the one writer of a flow's data path on the target. A source record is
//! loop-guarded, gated by residency, renamed and produced; produce acks become offset syncs; and
//! each commit writes the batch's offset syncs and source positions after its records — in one
//! Kafka transaction in exactly-once mode.
//!
//! One role per file, each looking only down: `records` (what a record becomes, then produced),
//! `at_least_once` and `exactly_once` (how a batch is made durable, one per delivery `mode`),
//! `state` (the at-least-once state transactions), `target` (what writes: the record producer,
//! or with `copy = "batches"` the batch producer of `batches`), `ledger` (what the acks feed),
//! `writer` (the two, shared by the roles), [`service`] (the record producer itself), `errors` and
//! `in_flight` (what failed, and how it is reported), `producers` (their settings),
//! `mm2_offsets` (MM2's source offsets beside the positions, with `write_mm2_offsets`).
//!
//! As a library ([`TargetSink::start`], [`Sink`]), with
//! [`KafkaSource`](crate::source::KafkaSource) as the source: see
//! `crates/strait/examples/replicate.rs`, which replicates between two clusters through the SPI
//! alone.

mod acks;
mod at_least_once;
mod batches;
pub mod copy_marks;
mod cuts;
mod errors;
mod exactly_once;
mod in_flight;
mod lanes;
mod ledger;
pub mod loop_guard;
mod mm2_offsets;
mod mode;
mod own_batches;
mod partitions;
pub mod producer_ids;
mod producers;
mod records;
pub mod service;
mod state;
pub mod stats;
pub mod syncs;
mod target;
pub mod topics;
mod writer;

use std::sync::Arc;

use async_trait::async_trait;
use strait_connect::{ConnectError, ConnectRecord, ConnectResult, Sink, SourceOffset};
use strait_mm2::{OffsetSync, ReplicationPolicy};

use crate::admin::Admin;
use crate::config::{ClusterConfig, CopyKind, Flow};
use crate::kafka::{cluster_id, connect_error};
use crate::positions::{TopicIds, POSITIONS_TOPIC};
use crate::record::ReplicatedRecord;
use ledger::Ledger;
use loop_guard::LoopGuard;
use mode::Mode;
use producer_ids::PRODUCER_IDS_TOPIC;
pub use producers::{
    record_producers, shared_record_producer, target_codec, RecordProducers, AT_LEAST_ONCE_SETTINGS,
    PRODUCER_QUEUE_KBYTES, PRODUCER_SETTINGS,
};
use records::RecordPath;
use target::Target;
use topics::TopicRouter;
use writer::Writer;

/// What [`TargetSink::start`] needs: the flow (both clusters and its settings, as
/// [`crate::config::Config::parse`] resolves them) and the slot of it the sink writes.
#[derive(Clone)]
pub struct SinkParams {
    /// The flow: source and target clusters, delivery mode, offset-sync and naming settings.
    pub flow: Arc<Flow>,
    /// The slot (`0..flow.slots`) whose partitions this sink writes ([`crate::slots`]); its
    /// `transactional.id` is `strait-<flow>/slot-<slot>`. 0 when scale-out is off.
    pub slot: u32,
}

/// What [`TargetSink::prepare`] learned and ensured for a flow's sinks: both cluster ids (the
/// loop guard's provenance) and the MM2 offsets topic's partition count (`None` without
/// `write_mm2_offsets`).
#[derive(Debug, Clone)]
pub struct TargetReady {
    target_id: String,
    source_id: String,
    mm2_partitions: Option<u32>,
}

impl TargetReady {
    /// The Kafka cluster ids of the flow's (source, target).
    pub fn cluster_ids(&self) -> (&str, &str) {
        (&self.source_id, &self.target_id)
    }
}

/// The [`Sink`] of a flow: writes [`ReplicatedRecord`]s, offset syncs (MM2's
/// `OffsetSyncWriter`, in MM2's format) and source positions to the target.
///
/// In at-least-once mode (`delivery = "at_least_once"`) [`Sink::commit`] is [`Sink::flush`];
/// in exactly-once mode (KIP-98 transactions) every `put` needs a [`Sink::begin`] first, and
/// [`Sink::commit`] makes records, offset syncs and positions visible at once.
pub struct TargetSink {
    /// What writes (the copy kind's target) and what its acks feed.
    writer: Writer,
    /// The delivery mode and its state.
    mode: Mode,
    records: RecordPath,
    /// Positions given to [`Sink::stage_positions`], saved at the next commit.
    staged: Vec<SourceOffset>,
}

impl TargetSink {
    /// Connects the target producers of `params.slot`, learns both cluster ids and ensures the
    /// positions topic and the offset-syncs topic (one partition, compacted; on the source
    /// cluster with `offset_syncs_location = "source"`, KIP-716). The slot's transactional
    /// producer's `init_transactions` runs in it: it fences the slot's previous owner and
    /// completes its open transaction, so the positions read after it returns (`read_committed`,
    /// [`crate::resume::load::stored`]) are the last committed ones. With `write_mm2_offsets`, it
    /// also ensures the MM2 offsets topic and writes the MM2 offsets of the slot's saved
    /// positions (`mm2_offsets::at_start`).
    ///
    /// Errors: [`ConnectError::Backend`] when a cluster cannot be reached, a producer created or a
    /// topic created; [`ConnectError::Offset`] when the positions or MM2 offsets cannot be read;
    /// [`ConnectError::Denied`] when an ACL forbids it;
    /// [`ConnectError::Transaction`] / [`ConnectError::Retriable`] when the target refuses, or
    /// cannot yet initialise, the slot's transactions.
    pub async fn start(params: SinkParams) -> Result<Self, ConnectError> {
        let ready = Self::prepare(&params.flow).await?;
        Self::start_ready(params, ready, None).await
    }

    /// The part of [`Self::start`] that no slot owns: both cluster ids, and the positions,
    /// offset-syncs and (with `write_mm2_offsets`) MM2 offsets topics, ensured. A flow does it
    /// while it joins its slot group, so across a long link it costs no time of its own.
    /// Errors: as [`Self::start`].
    pub async fn prepare(flow: &Flow) -> ConnectResult<TargetReady> {
        // Every step is a few round trips: across a long link, in sequence, they made seconds.
        let (syncs_cluster, syncs_topic) = flow.offset_syncs();
        let rf = flow.writing.replication_factor;
        let state_topic = |cluster: &ClusterConfig, topic: &str| {
            let what = format!("create topic {topic} on cluster {} at {}", cluster.alias, cluster.bootstrap_servers);
            let admin = Admin::new(cluster).map_err(|e| connect_error(&what, e));
            let topic = topic.to_string();
            async move { admin?.create_state_topic(&topic, rf).await.map_err(|e| connect_error(&what, e)) }
        };
        let producer_ids = async {
            // Identity flows of both kinds leave their copy-kind mark there (`copy_marks`).
            match (flow.copy.kind, &flow.policy) {
                (CopyKind::Batches, _) | (_, ReplicationPolicy::Identity { .. }) => {
                    state_topic(&flow.target, PRODUCER_IDS_TOPIC).await
                }
                (CopyKind::Records, ReplicationPolicy::Default { .. }) => Ok(()),
            }
        };
        let (target_id, source_id, (), (), (), mm2_partitions) = tokio::try_join!(
            cluster_id(&flow.target),
            cluster_id(&flow.source),
            state_topic(&flow.target, POSITIONS_TOPIC),
            state_topic(syncs_cluster, &syncs_topic),
            producer_ids,
            mm2_offsets::Mm2Offsets::ensure_topic(flow),
        )?;
        Ok(TargetReady { target_id, source_id, mm2_partitions })
    }

    /// [`Self::start`] on a target made ready by [`Self::prepare`]; in at-least-once mode the
    /// records are written through `shared` when given ([`record_producers`], which the other
    /// slots this instance owns share; exactly-once, each slot's records need their own
    /// transactional producer, and `shared` is not used). Errors: as [`Self::start`].
    pub async fn start_ready(
        params: SinkParams,
        ready: TargetReady,
        shared: Option<&RecordProducers>,
    ) -> Result<Self, ConnectError> {
        let SinkParams { flow, slot } = params;
        let TargetReady { target_id, source_id, mm2_partitions } = ready;
        let (syncs_cluster, syncs_topic) = flow.offset_syncs();
        // Every producer holding the slot's transactional id has fenced the previous owner
        // before the positions are read.
        let (target, mut mode) = tokio::try_join!(
            Target::start(&flow, slot, mm2_partitions, shared, (&source_id, &target_id)),
            Mode::start(&flow, slot, syncs_cluster, &syncs_topic),
        )?;
        let mm2_offsets_at_start = mm2_offsets::at_start(&flow, slot).await?;
        let records = RecordPath::new(TopicRouter::new(flow.clone())?, LoopGuard::new(source_id, target_id));
        let mut writer = Writer { ledger: Ledger::new(flow.clone()), syncs_topic, flow, slot, target };
        mode.write_mm2_offsets(&mut writer, mm2_offsets_at_start).await?;
        Ok(Self { writer, mode, records, staged: Vec::new() })
    }

    /// Makes the target topics of `topics` ready before their first records: each is a source
    /// topic with the highest partition (0-based) that will be written, as the source was
    /// assigned them. Their requests run together, so a far target (a long link) costs one round
    /// of round trips for all, not one per topic. Topics residency forbids are left alone; a
    /// topic not prepared is made ready at its first record as before. Errors: as [`Sink::put`]
    /// when a target topic cannot be made ready.
    pub async fn prepare_topics(&mut self, topics: &[(String, i32)]) -> ConnectResult<()> {
        self.records.prepare(&self.writer, topics).await
    }

    /// The source topic ids this sink saves with positions: the source of the same slot sets them
    /// ([`crate::source::KafkaSource::start`]).
    pub fn topic_ids(&self) -> TopicIds {
        self.writer.ledger.topic_ids.clone()
    }

    /// Returns and clears the offset syncs written since the last call, in write order: those
    /// of committed batches (exactly-once), or whose state transaction is known committed
    /// (at-least-once: up to the last flush's once the next flush or `close` returned). Bounded:
    /// syncs are kept only once a caller drains them, so the first call turns keeping on and
    /// returns none, and a sink never drained (as in `strait run`) keeps none.
    pub fn drain_offset_syncs(&mut self) -> Vec<OffsetSync> {
        match &mut self.mode {
            Mode::AtLeastOnce(alo) => alo.drain_offset_syncs(),
            Mode::ExactlyOnce(eos) => eos.drain_offset_syncs(),
        }
    }
}

#[async_trait]
impl Sink<(), ReplicatedRecord> for TargetSink {
    /// Produces each record (loop guard, residency, renaming, the target topic made ready);
    /// records without a value are skipped. At-least-once, after a stall of more than half the
    /// session timeout, first proves the slot is still this instance's. Errors: a record that
    /// cannot be produced stops the partition, naming topic/partition/offset. Exactly-once, a
    /// flow copying batches writes records through its batch producer, which holds its
    /// transactions, as batches of their own; one naming a header key twice stops the partition
    /// ([`ConnectError::Invalid`]).
    async fn put(&mut self, batch: Vec<ConnectRecord<(), ReplicatedRecord>>) -> ConnectResult<()> {
        let started = self.mode.entered();
        if let Mode::AtLeastOnce(alo) = &mut self.mode {
            alo.prove_owner_after_a_stall(&self.writer.flow, self.writer.slot).await?;
        }
        let put = self.records.put(&mut self.writer, &mut self.mode, batch).await;
        self.mode.returned(started);
        put
    }

    /// Sends lingering records now and awaits every record's ack, then writes the offset syncs
    /// decided (and at-least-once, the staged positions). At-least-once, it starts the slot's
    /// state transaction in the background and returns: the next flush, or `close`, waits for it
    /// and returns its error. Exactly-once, the syncs go into the open transaction.
    async fn flush(&mut self) -> ConnectResult<()> {
        self.records.release_all(&mut self.writer, &mut self.mode).await?;
        match &mut self.mode {
            Mode::AtLeastOnce(alo) => {
                let started = alo.entered();
                let positions = std::mem::take(&mut self.staged);
                let flushed = alo.flush(&mut self.writer, &positions).await;
                alo.returned(started);
                flushed
            }
            Mode::ExactlyOnce(eos) => eos.flush(&mut self.writer).await,
        }
    }

    fn supports_transactions(&self) -> bool {
        matches!(self.mode, Mode::ExactlyOnce(_))
    }

    async fn begin(&mut self) -> ConnectResult<()> {
        match &mut self.mode {
            Mode::AtLeastOnce(_) => Ok(()),
            Mode::ExactlyOnce(eos) => eos.begin(&mut self.writer).await,
        }
    }

    fn stage_positions(&mut self, positions: &[SourceOffset]) {
        self.staged = positions.to_vec();
    }

    /// Awaits every record's ack, then writes the batch's offset syncs and the staged positions.
    /// Exactly-once, it commits the transaction holding all three. At-least-once, this is
    /// [`Sink::flush`].
    async fn commit(&mut self) -> ConnectResult<()> {
        match &mut self.mode {
            Mode::AtLeastOnce(_) => self.flush().await,
            Mode::ExactlyOnce(eos) => {
                let positions = std::mem::take(&mut self.staged);
                eos.commit(&mut self.writer, &positions).await
            }
        }
    }

    /// At-least-once: ends the batch without waiting for its acks; its offset syncs and the
    /// staged positions are saved once every record of it is acknowledged, in the background
    /// (`sink/cuts.rs`), while the next batch's records flow. [`Sink::flush`] makes everything durable.
    /// Exactly-once: [`Sink::commit`].
    async fn commit_behind(&mut self) -> ConnectResult<()> {
        self.records.release_all(&mut self.writer, &mut self.mode).await?;
        match &mut self.mode {
            Mode::AtLeastOnce(alo) => {
                let started = alo.entered();
                let positions = std::mem::take(&mut self.staged);
                let ended = alo.end_batch(&mut self.writer, &positions).await;
                alo.returned(started);
                ended
            }
            Mode::ExactlyOnce(_) => self.commit().await,
        }
    }

    /// At-least-once: waits briefly for the acks of the batches ended behind, then saves the
    /// positions of each partition whose records are acknowledged (`sink/cuts.rs`), in the
    /// background; a partition whose target leader does not answer keeps only its own back.
    /// Exactly-once: [`Sink::flush`].
    async fn save_acknowledged(&mut self) -> ConnectResult<()> {
        self.records.release_all(&mut self.writer, &mut self.mode).await?;
        match &mut self.mode {
            Mode::AtLeastOnce(alo) => {
                let started = alo.entered();
                let saved = alo.save_acknowledged(&mut self.writer).await;
                alo.returned(started);
                saved
            }
            Mode::ExactlyOnce(eos) => eos.flush(&mut self.writer).await,
        }
    }

    fn behind(&self) -> bool {
        match &self.mode {
            Mode::AtLeastOnce(alo) => alo.holds_records() || self.writer.ledger.cuts.behind(),
            Mode::ExactlyOnce(_) => false,
        }
    }

    /// Exactly-once: aborts the open transaction (none open: nothing to do); acks of its records
    /// still to come are ignored, and offset syncs restart from the next record of each
    /// partition. Either mode drops the staged positions.
    async fn abort(&mut self) -> ConnectResult<()> {
        self.staged.clear();
        match &mut self.mode {
            Mode::AtLeastOnce(_) => Ok(()),
            Mode::ExactlyOnce(eos) => eos.abort(&mut self.writer).await,
        }
    }

    /// Logs what the record path withheld, then (at-least-once) saves the batches ended by
    /// [`Sink::commit_behind`] and waits for the last state write.
    async fn close(&mut self) -> ConnectResult<()> {
        self.records.log_totals(&self.writer.flow);
        match &mut self.mode {
            Mode::AtLeastOnce(alo) => {
                if self.writer.ledger.cuts.behind() {
                    alo.flush(&mut self.writer, &[]).await?;
                }
                alo.close().await
            }
            Mode::ExactlyOnce(_) => Ok(()),
        }
    }
}
