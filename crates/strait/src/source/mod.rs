//! KafkaSource: reads the partitions of a flow's selected topics in one slot of the flow (all
//! of them with one slot) from the source cluster.
//!
//! Manual assignment (no consumer group, nothing written to the source), `read_committed` so
//! aborted transactions never reach the target, each partition read where [`crate::resume`]
//! decides from the positions stored on the target and what the source says (`assign`). It
//! saves nothing itself: a start with no record to carry it (`start_from = "latest"`) is handed
//! to the runtime to save ([`Source::positions_without_records`]).
//! Topics and partitions that appear are picked up at the next refresh (every
//! `refresh_topics_interval_ms`), which also compares each topic's id (KIP-516) with the one its
//! partitions were assigned under: a topic deleted and created again is copied from its log
//! start (`recreation`).

mod assign;
mod batches;
mod consumers;
mod reader;
mod records;
mod recreate;
mod recreation;
mod report;
mod throttle;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use prometheus_client::metrics::counter::Counter;
use rdkafka::error::KafkaError;
use rdkafka::{Offset, TopicPartitionList};
use strait_connect::{ConnectError, ConnectRecord, ConnectResult, Source, SourceOffset};
use tokio::task::JoinHandle;

use crate::config::Flow;
use crate::consume::SourceReader;
use crate::metrics::metrics;
use crate::positions::TopicIds;
use crate::record::ReplicatedRecord;
use crate::resume::Stored;
use crate::topic_id::TopicId;
use crate::watch::Committed;
pub use consumers::{source_consumer, source_consumers, SourceConsumers};
use reader::PartitionReader;
use records::TopicNames;
use recreation::Recreations;
use throttle::Throttle;

/// The [`Source`] of a flow.
pub struct KafkaSource {
    /// The first source consumer's lane: metadata and offsets (with `copy = "records"` the
    /// records come through it and the other consumers' lanes, in [`Self::partitions`]).
    reader: Arc<SourceReader>,
    /// What reads the partitions: the flow's copy kind.
    partitions: PartitionReader,
    /// The flow's slot whose partitions this source reads ([`crate::slots`]).
    slot: u32,
    /// Topic names shared by every record of the topic.
    names: TopicNames,
    flow: Arc<Flow>,
    /// The positions stored on the target at start, for [`crate::resume::decide`].
    stored: Stored,
    assigned: HashSet<(String, i32)>,
    /// Topics already logged as not replicated.
    skipped: HashSet<String>,
    /// Where a rewind restarts each assigned partition: after its last acknowledged record, or
    /// where it was assigned.
    resume: HashMap<(Arc<str>, i32), Offset>,
    /// Partitions started at their end (`start_from = "latest"`) whose start is not yet saved:
    /// the start offset each. Handed to the runtime as positions without records so the start is
    /// saved even before a record arrives, and a restart does not skip what was written in between.
    unsaved_starts: HashMap<(Arc<str>, i32), i64>,
    /// The next [`Source::positions_without_records`] hands [`Self::unsaved_starts`] over (after
    /// a refresh or a rewind).
    emit_starts: bool,
    /// The committed position of each assigned partition, read by [`crate::watch`].
    committed: Committed,
    /// The id each topic's partitions were assigned under, shared with the sink, which saves it
    /// with their positions.
    ids: TopicIds,
    /// Topics deleted and created again while this source ran.
    recreations: Recreations,
    next_refresh: Instant,
    /// The source's topic list being fetched for the next refresh, off the poll path: a metadata
    /// round trip inline would hold up every record arriving meanwhile.
    listing: Option<JoinHandle<Listed>>,
    /// `max_bytes_per_second`, this slot's share, with its wait counter.
    throttle: Option<(Throttle, Counter)>,
}

/// The source's topics, each with its partition count and, for the topics the flow replicates,
/// its id when the cluster gave one.
type Listed = Result<Vec<(String, usize, Option<TopicId>)>, KafkaError>;

/// librdkafka settings of the source consumer (and of the position check's reader).
pub const CONSUMER_SETTINGS: &[(&str, &str)] = &[
    ("enable.auto.commit", "false"),
    ("enable.auto.offset.store", "false"),
    ("auto.offset.reset", "earliest"),
    ("isolation.level", "read_committed"),
    ("enable.partition.eof", "false"),
    // How long the broker holds a fetch with nothing to return (it answers at the first byte, so
    // latency does not hang on it). librdkafka's default: each idle fetch names every assigned
    // partition, and at 1,200 partitions 100 ms cost twice the CPU at rest, and broker heap.
    ("fetch.wait.max.ms", "500"),
    // Bounded prefetch: librdkafka counts these bytes compressed, so a highly compressed source
    // can inflate them many times once decoded. (A flow's consumers divide these between slots.)
    ("queued.max.messages.kbytes", "8192"),
    ("queued.min.messages", "20000"),
    // librdkafka waits this long before fetching again once the queue was full (default 1 s: a
    // stall per refill with a small queue).
    ("fetch.queue.backoff.ms", "10"),
];

impl KafkaSource {
    /// Connects to the source cluster and assigns every selected partition of `slot` where
    /// [`crate::resume::decide`] says from the positions `stored` on the target
    /// ([`crate::resume::load::stored`]); assigned and committed positions are recorded in
    /// `committed`, and the id of each assigned topic in `ids` (the sink's,
    /// [`crate::sink::TargetSink::topic_ids`]). Errors: a backend error when the source cluster
    /// cannot be listed; a data-loss error for a source gap with `on_source_gap = "fail"`.
    pub async fn start(
        flow: Arc<Flow>,
        slot: u32,
        stored: Stored,
        committed: Committed,
        ids: TopicIds,
    ) -> ConnectResult<Self> {
        let consumers = source_consumers(&flow, source_consumer(&flow)?).await?;
        Self::start_sharing(flow, slot, stored, committed, ids, &consumers).await
    }

    /// [`Self::start`], reading through `consumers` ([`source_consumers`]) beside the other
    /// slots this instance owns: the records of this slot's partitions come to queues of its own,
    /// one per consumer. Errors: as [`Self::start`].
    pub async fn start_sharing(
        flow: Arc<Flow>,
        slot: u32,
        stored: Stored,
        committed: Committed,
        ids: TopicIds,
        consumers: &SourceConsumers,
    ) -> ConnectResult<Self> {
        let lanes = consumers
            .iter()
            .map(|c| SourceReader::lane(c).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ConnectError::backend(format!("consumer for source {}", flow.source.alias), e))?;
        // The flow's cap, split between its slots as its batches are.
        let throttle = flow.reading.max_bytes_per_second.map(|cap| {
            let total = usize::try_from(cap.get()).unwrap_or(usize::MAX);
            let share = u64::try_from(flow.slot_share(total, 1)).unwrap_or(u64::MAX);
            (Throttle::new(share, Instant::now()), metrics().throttled_ms(&flow.source.alias, &flow.target.alias))
        });
        let reader = lanes[0].clone();
        let partitions = PartitionReader::start(&flow, lanes).await?;
        let mut source = Self {
            reader,
            partitions,
            slot,
            names: TopicNames::default(),
            flow,
            stored,
            assigned: HashSet::new(),
            skipped: HashSet::new(),
            resume: HashMap::new(),
            unsaved_starts: HashMap::new(),
            emit_starts: false,
            committed,
            ids,
            recreations: Recreations::default(),
            next_refresh: Instant::now(),
            listing: None,
            throttle,
        };
        let topics = source.refresh().await?;
        tracing::info!(
            flow = %source.flow.name,
            slot = source.slot,
            source = %source.flow.source.bootstrap_servers,
            target = %source.flow.target.bootstrap_servers,
            topics = ?topics,
            "flow started"
        );
        Ok(source)
    }

    /// Each assigned topic with its highest assigned partition (for
    /// [`crate::sink::TargetSink::prepare_topics`]).
    pub fn assigned_topics(&self) -> Vec<(String, i32)> {
        let mut highest: HashMap<&str, i32> = HashMap::new();
        for (topic, partition) in &self.assigned {
            let p = highest.entry(topic).or_insert(*partition);
            *p = (*p).max(*partition);
        }
        highest.into_iter().map(|(t, p)| (t.to_string(), p)).collect()
    }
}

#[async_trait]
impl Source<(), ReplicatedRecord> for KafkaSource {
    async fn poll(
        &mut self,
        max_records: usize,
        max_bytes: usize,
        timeout: Duration,
    ) -> ConnectResult<Vec<ConnectRecord<(), ReplicatedRecord>>> {
        self.refresh_in_background().await;
        if self.recreations.any_draining() {
            self.finish_recreations();
        }
        // A leader no longer knows the id a partition is read under: list the source now, so a
        // topic created again is taken from its start without waiting for the next refresh.
        if self.partitions.tick() {
            self.next_refresh = self.next_refresh.min(Instant::now());
        }
        let (mut timeout, mut max_bytes) = (timeout, max_bytes);
        if let Some((throttle, waited)) = &self.throttle {
            // Within the poll's timeout, so the batch still commits on time.
            let wait = throttle.wait(Instant::now()).min(timeout);
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
                waited.inc_by(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX));
                if wait == timeout {
                    return Ok(Vec::new());
                }
                timeout -= wait;
            }
            max_bytes = max_bytes.min(throttle.burst());
        }
        let (records, bytes) =
            self.partitions.read(&mut self.names, max_records, max_bytes, timeout, &self.flow).await?;
        if let Some((throttle, _)) = &mut self.throttle {
            throttle.spend(bytes, Instant::now());
        }
        Ok(records)
    }

    /// The start of each partition started at its end (`start_from = "latest"`) and not yet
    /// saved, once after each refresh or rewind: a position stands at the offset before the start.
    fn positions_without_records(&mut self) -> Vec<SourceOffset> {
        if !std::mem::take(&mut self.emit_starts) {
            return Vec::new();
        }
        let starts = self.unsaved_starts.iter();
        starts
            .map(|((topic, partition), start)| SourceOffset {
                topic: topic.clone(),
                partition: *partition,
                offset: start - 1,
            })
            .collect()
    }

    async fn acknowledge(&mut self, positions: &[SourceOffset]) -> ConnectResult<()> {
        for p in positions {
            let key = (p.topic.clone(), p.partition);
            if self.recreations.is_draining(&p.topic) {
                // The last records of the old topic, whose partitions are no longer assigned.
                self.recreations.committed(&p.topic, p.partition, p.offset + 1);
                continue;
            }
            self.unsaved_starts.remove(&key);
            self.committed.set(&p.topic, p.partition, Some(p.offset + 1));
            self.resume.insert(key, Offset::Offset(p.offset + 1));
        }
        Ok(())
    }

    /// Re-assigns every partition at its resume point; librdkafka drops what it had prefetched.
    async fn rewind(&mut self) -> ConnectResult<()> {
        self.emit_starts = !self.unsaved_starts.is_empty();
        self.recreations.rewound();
        let mut tpl = TopicPartitionList::new();
        for ((topic, partition), offset) in &self.resume {
            tpl.add_partition_offset(topic, *partition, *offset)
                .map_err(|e| ConnectError::offset(format!("rewind {topic} partition {partition}"), e))?;
        }
        let ids = &self.ids;
        self.partitions.rewind(tpl, |topic| ids.get(topic).and_then(|id| id.uuid()), &self.flow.name).await
    }

    /// Unassigns this slot's partitions (the consumer may be shared with other slots).
    async fn close(&mut self) -> ConnectResult<()> {
        self.partitions.release().await
    }
}
