//! KafkaSource: reads the partitions of a flow's selected topics in one slot of the flow (all
//! of them with one slot) from the source cluster.
//!
//! Manual assignment (no consumer group, nothing written to the source), `read_committed` so
//! aborted transactions never reach the target, starting from the positions it is given (read by
//! the sink from the target, [`crate::positions`]); where none, at the start of the partition, or
//! at its end for a new topic with `start_from = "latest"`. It saves nothing itself.
//! Topics and partitions that appear are picked up at the next refresh (every
//! `refresh_topics_interval_ms`), which also compares each topic's id (KIP-516) with the one its
//! partitions were assigned under: a topic deleted and created again is copied from its log
//! start ([`recreation`]).

mod recreation;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::{Message, Offset, TopicPartitionList};
use strait_connect::{ConnectError, ConnectRecord, ConnectResult, Header, Source, SourceOffset};
use tokio::task::JoinHandle;

use crate::admin::{topic_ids, TopicId};
use crate::client_log::{ClientLog, LoggedConsumer};
use crate::config::{Flow, OnSourceGap, Skip, StartFrom};
use crate::consume::{KafkaMessage, SourceReader};
use crate::kafka::{blocking, connect_error, is_denied, joined, topic_partition_counts, METADATA_TIMEOUT};
use crate::metrics::metrics;
use crate::positions::{Positions, TopicIds};
use crate::record::ReplicatedRecord;
use crate::slots::slot_of;
use crate::watch::Committed;
use recreation::Recreations;

/// The [`Source`] of a flow.
pub struct KafkaSource {
    reader: Arc<SourceReader>,
    /// The flow's slot whose partitions this source reads ([`crate::slots`]).
    slot: u32,
    /// Topic names shared by every record of the topic.
    names: TopicNames,
    flow: Arc<Flow>,
    saved: Positions,
    assigned: HashSet<(String, i32)>,
    /// Topics already logged as not replicated.
    skipped: HashSet<String>,
    /// Where a rewind restarts each assigned partition: after its last acknowledged record, or
    /// where it was assigned.
    resume: HashMap<(Arc<str>, i32), Offset>,
    /// Partitions started at their end (`start_from = "latest"`) whose start is not yet saved:
    /// the start offset each. Handed to the sink as no-payload records so the start is saved even
    /// before a record arrives, and a restart does not skip what was written in between.
    unsaved_starts: HashMap<(Arc<str>, i32), i64>,
    /// The next poll hands [`Self::unsaved_starts`] over (after a refresh or a rewind).
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
    ("fetch.wait.max.ms", "100"),
    // Bounded prefetch: librdkafka counts these bytes compressed, so a highly compressed source
    // can inflate them many times once decoded. (A flow's consumers divide these between slots.)
    ("queued.max.messages.kbytes", "8192"),
    ("queued.min.messages", "20000"),
    // librdkafka waits this long before fetching again once the queue was full (default 1 s: a
    // stall per refill with a small queue).
    ("fetch.queue.backoff.ms", "10"),
];

impl KafkaSource {
    /// Connects to the source cluster and assigns every selected partition of `slot` from its
    /// position in `saved` (earliest when none, or when the position belongs to an earlier topic
    /// of the name); assigned and committed positions are recorded in `committed`, and the id of
    /// each assigned topic in `ids` (the sink's, [`crate::sink::TargetSink::topic_ids`]).
    /// Errors: a backend error when the source cluster cannot be listed.
    pub async fn start(
        flow: Arc<Flow>,
        slot: u32,
        saved: Positions,
        committed: Committed,
        ids: TopicIds,
    ) -> ConnectResult<Self> {
        // The prefetch is split between the flow's slots (see `Flow::slot_share`).
        let prefetch = (flow.slot_share(8192, 1024).to_string(), flow.slot_share(20_000, 1_000).to_string());
        let mut settings = CONSUMER_SETTINGS.to_vec();
        settings.extend([
            ("queued.max.messages.kbytes", prefetch.0.as_str()),
            ("queued.min.messages", prefetch.1.as_str()),
        ]);
        let reader = flow
            .source
            .client_config(&settings)
            .set("group.id", format!("strait-{}", flow.name))
            .create_with_context(ClientLog)
            .and_then(SourceReader::new)
            .map_err(|e| ConnectError::backend(format!("consumer for source {}", flow.source.alias), e))?;
        let mut source = Self {
            reader: Arc::new(reader),
            slot,
            names: TopicNames::default(),
            flow,
            saved,
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

    /// Among `partitions` about to be assigned from a saved position without a topic id (saved
    /// by an older Strait, or MirrorMaker 2's), those whose record at `next_offset - 1` now has
    /// another timestamp than the one saved: the topic was deleted and recreated while Strait was
    /// stopped, and resuming at the saved offset would skip records. A record that cannot be read
    /// back (compacted, expired, a shorter topic) proves nothing and the position is kept
    /// (librdkafka resets out-of-range positions to the beginning).
    async fn timestamp_changed(&self, partitions: &[(String, i32)]) -> HashSet<(String, i32)> {
        let checks: Vec<(String, i32, i64, i64)> = partitions
            .iter()
            .filter_map(|(t, p)| {
                let saved = self.saved.get(&(t.clone(), *p))?;
                Some((t.clone(), *p, saved.next_offset - 1, saved.last_timestamp?)).filter(|c| c.2 >= 0)
            })
            .collect();
        if checks.is_empty() {
            return HashSet::new();
        }
        let reader = self
            .flow
            .source
            .client_config(CONSUMER_SETTINGS)
            .set("group.id", "strait-position-check")
            .create_with_context::<_, LoggedConsumer>(ClientLog);
        let Ok(reader) = reader else { return HashSet::new() };
        blocking(move || {
            let mut tpl = TopicPartitionList::new();
            for (t, p, o, _) in &checks {
                if tpl.add_partition_offset(t, *p, Offset::Offset(*o)).is_err() {
                    return HashSet::new();
                }
            }
            if reader.assign(&tpl).is_err() {
                return HashSet::new();
            }
            let mut pending: HashMap<(String, i32), (i64, i64)> =
                checks.into_iter().map(|(t, p, o, ts)| ((t, p), (o, ts))).collect();
            let mut changed = HashSet::new();
            let deadline = Instant::now() + Duration::from_secs(10);
            while !pending.is_empty() && Instant::now() < deadline {
                let Some(Ok(m)) = reader.poll(Duration::from_millis(200)) else { continue };
                let key = (m.topic().to_string(), m.partition());
                if let Some((offset, ts)) = pending.remove(&key) {
                    if m.offset() == offset && m.timestamp().to_millis() != Some(ts) {
                        changed.insert(key);
                    }
                }
            }
            changed
        })
        .await
    }

    /// The log-start and end offsets of each of `partitions` (one watermark query each, off the
    /// async workers). Errors: a backend error when the source does not answer.
    async fn watermarks(&self, partitions: Vec<(String, i32)>) -> ConnectResult<HashMap<(String, i32), (i64, i64)>> {
        let consumer = self.reader.consumer().clone();
        blocking(move || {
            partitions
                .into_iter()
                .map(|(t, p)| consumer.fetch_watermarks(&t, p, METADATA_TIMEOUT).map(|w| ((t, p), w)))
                .collect::<Result<HashMap<_, _>, _>>()
        })
        .await
        .map_err(|e| ConnectError::backend(format!("offsets of source {}", self.flow.source.alias), e))
    }

    /// Whether `topic` is already replicated: a partition of it has a saved position or was
    /// assigned in this run. Its new partitions then start at earliest whatever `start_from` says.
    fn known(&self, topic: &str) -> bool {
        self.saved.keys().chain(self.assigned.iter()).any(|(t, _)| t == topic)
    }

    /// Lists the source's topics and assigns partitions not yet assigned. Returns the selected
    /// topic names.
    async fn refresh(&mut self) -> ConnectResult<BTreeSet<String>> {
        let listed = joined(self.list_topics()).await;
        self.assign_listed(listed).await
    }

    /// Starts listing the source's topics on a blocking thread; the next refresh is due one
    /// `refresh_topics_interval_ms` from now.
    fn list_topics(&mut self) -> JoinHandle<Listed> {
        self.next_refresh = Instant::now() + self.flow.reading.refresh_topics_interval;
        let (reader, flow) = (self.reader.clone(), self.flow.clone());
        tokio::task::spawn_blocking(move || {
            let client = reader.consumer().client();
            let topics = topic_partition_counts(client, METADATA_TIMEOUT)?;
            let replicated: Vec<String> =
                topics.iter().filter(|(t, _)| flow.not_replicated(t).is_none()).map(|(t, _)| t.clone()).collect();
            // Without ids (an old broker, a failed request) recreated topics are still found at
            // start by the timestamp check, not while running.
            let mut ids = topic_ids(client, &replicated, METADATA_TIMEOUT).unwrap_or_else(|e| {
                tracing::warn!(flow = %flow.name, error = %e, "topic ids of the source unknown at this refresh");
                HashMap::new()
            });
            Ok(topics
                .into_iter()
                .map(|(t, n)| {
                    let id = ids.remove(&t);
                    (t, n, id)
                })
                .collect())
        })
    }

    /// Starts listing the source's topics in the background when a refresh is due, and applies
    /// the list once it arrived. A source that cannot be listed right now keeps replicating what
    /// it has (logged; tried again at the next refresh).
    async fn refresh_in_background(&mut self) {
        if self.listing.is_none() && Instant::now() >= self.next_refresh {
            self.listing = Some(self.list_topics());
        }
        let Some(listing) = self.listing.take_if(|l| l.is_finished()) else { return };
        let listed = joined(listing).await;
        if let Err(e) = self.assign_listed(listed).await {
            tracing::warn!(flow = %self.flow.name, error = %e, "topic refresh failed; will retry");
        }
    }

    /// Assigns the partitions of `listed` (each topic with its partition count and id) not yet
    /// assigned, and takes off the consumer the partitions of a topic whose id changed (deleted
    /// and created again: [`Self::begin_recreation`]). Returns the selected topic names.
    /// Errors: the listing's error; start offsets unreadable.
    async fn assign_listed(&mut self, listed: Listed) -> ConnectResult<BTreeSet<String>> {
        let md = listed
            .map_err(|e| ConnectError::backend(format!("list topics of source {}", self.flow.source.alias), e))?;
        let mut selected = BTreeSet::new();
        let mut fresh = Vec::new();
        let mut ids = HashMap::new();
        for (topic, partitions, id) in md {
            if let Some(reason) = self.flow.not_replicated(&topic) {
                // Each decision once per run: at info when the user's patterns asked for the topic.
                if self.skipped.insert(topic.clone()) {
                    if reason == Skip::NotSelected {
                        tracing::debug!(flow = %self.flow.name, topic, %reason, "not replicating this topic");
                    } else {
                        tracing::info!(flow = %self.flow.name, topic, %reason, "not replicating this topic");
                    }
                }
                continue;
            }
            selected.insert(topic.clone());
            if self.recreations.is_draining(&topic) {
                continue;
            }
            if let (Some(new), Some(old)) = (&id, self.ids.get(&topic)) {
                if *new != old && self.assigned.iter().any(|(t, _)| *t == topic) {
                    self.begin_recreation(&topic, old, new.clone()).await?;
                    continue;
                }
            }
            fresh.extend(
                (0..partitions)
                    .filter_map(|p| i32::try_from(p).ok())
                    .filter(|p| slot_of(&topic, *p, self.flow.slots()) == self.slot)
                    .filter(|p| !self.assigned.contains(&(topic.clone(), *p)))
                    .map(|p| (topic.clone(), p)),
            );
            if let Some(id) = id {
                ids.insert(topic, id);
            }
        }
        // A saved position applies to the topic it was saved from: the same id, or (saved
        // without one) the same timestamp at its offset.
        let recreated_while_stopped: HashSet<String> = fresh
            .iter()
            .filter(|(t, p)| {
                let saved = self.saved.get(&(t.clone(), *p)).and_then(|s| s.topic_id.as_ref());
                matches!((saved, ids.get(t)), (Some(old), Some(new)) if old != new)
            })
            .map(|(t, _)| t.clone())
            .collect();
        let unchecked: Vec<(String, i32)> = fresh
            .iter()
            .filter(|(t, p)| {
                !self.recreations.is_recreated(t)
                    && (self.saved.get(&(t.clone(), *p)).is_some_and(|s| s.topic_id.is_none()) || !ids.contains_key(t))
            })
            .cloned()
            .collect();
        let changed = self.timestamp_changed(&unchecked).await;
        let applies = |tp: &(String, i32)| {
            !self.recreations.is_recreated(&tp.0) && !recreated_while_stopped.contains(&tp.0) && !changed.contains(tp)
        };
        let latest = self.flow.reading.start_from == StartFrom::Latest;
        let unknown: HashSet<String> =
            fresh.iter().filter(|(t, _)| latest && !self.known(t)).map(|(t, _)| t.clone()).collect();
        let queried: Vec<(String, i32)> = fresh
            .iter()
            .filter(|tp| (self.saved.contains_key(*tp) && applies(tp)) || unknown.contains(&tp.0))
            .cloned()
            .collect();
        let watermarks = self.watermarks(queried).await?;
        for topic in &recreated_while_stopped {
            let old = fresh.iter().find_map(|(t, p)| self.saved.get(&(t.clone(), *p)).filter(|_| t == topic));
            tracing::warn!(
                flow = %self.flow.name, topic, old_topic_id = %old.and_then(|s| s.topic_id.as_ref()).map_or("", |i| &i.0),
                new_topic_id = %ids.get(topic).map_or("", |i| &i.0),
                "the source topic was deleted and created again while Strait was stopped: its saved positions belong to the old topic, so the new one is replicated from its log start; records of the old topic after its saved positions, if any, were lost with it"
            );
            metrics().topic_recreated(&self.flow.source.alias, &self.flow.target.alias, topic).inc();
        }
        let mut new = TopicPartitionList::new();
        let mut starts = Vec::with_capacity(fresh.len());
        for (topic, p) in fresh {
            let offset = match self.saved.get(&(topic.clone(), p)) {
                Some(_) if changed.contains(&(topic.clone(), p)) => {
                    tracing::warn!(flow = %self.flow.name, topic, partition = p, "the record at the saved position changed: the topic was recreated; replicating it from the beginning");
                    Offset::Beginning
                }
                Some(_) if !applies(&(topic.clone(), p)) => Offset::Beginning,
                Some(saved) => match watermarks.get(&(topic.clone(), p)) {
                    Some(&(log_start, _)) if log_start > saved.next_offset => {
                        let lost = log_start - saved.next_offset;
                        tracing::error!(
                            flow = %self.flow.name, topic, partition = p, saved = saved.next_offset, log_start, lost,
                            on_source_gap = ?self.flow.reading.on_source_gap,
                            "records lost: the source deleted them (retention or delete-records) before they were replicated"
                        );
                        if self.flow.reading.on_source_gap == OnSourceGap::Fail {
                            return Err(ConnectError::data_loss(
                                format!("{topic} partition {p}: {lost} records deleted on the source before they were replicated"),
                                "on_source_gap = \"fail\": stopping instead of continuing at the log start",
                            ));
                        }
                        Offset::Offset(log_start)
                    }
                    _ => Offset::Offset(saved.next_offset),
                },
                None => match watermarks.get(&(topic.clone(), p)) {
                    Some(&(_, end)) if unknown.contains(&topic) => Offset::Offset(end),
                    _ => Offset::Beginning,
                },
            };
            new.add_partition_offset(&topic, p, offset)
                .map_err(|e| ConnectError::offset(format!("assign {topic} partition {p}"), e))?;
            starts.push((topic, p, offset));
        }
        if new.count() > 0 {
            tracing::info!(flow = %self.flow.name, partitions = new.count(), "assigning new source partitions");
            self.reader
                .consumer()
                .incremental_assign(&new)
                .map_err(|e| ConnectError::backend("assign source partitions", e))?;
        }
        // Only once assigned: a failed assign is tried again at the next refresh.
        for (topic, p, offset) in starts {
            let name = self.names.get(&topic);
            if let (true, Offset::Offset(end)) = (unknown.contains(&topic), offset) {
                tracing::info!(flow = %self.flow.name, topic, partition = p, offset = end, "new topic: starting at its end (start_from = latest)");
                self.unsaved_starts.insert((name.clone(), p), end);
                self.emit_starts = true;
            }
            if let Some(id) = ids.get(&topic) {
                self.ids.set(&name, id.clone());
            }
            self.committed.set(&topic, p, if let Offset::Offset(o) = offset { Some(o) } else { None });
            self.resume.insert((name, p), offset);
            self.assigned.insert((topic, p));
        }
        Ok(selected)
    }

    /// `topic` has a new id: it was deleted and created again while this source read it, and its
    /// assigned partitions may already be reading the new topic at the old topic's offsets,
    /// skipping its first records. They are taken off the consumer at once; once every record of
    /// them already read is committed (their positions saved with the old id,
    /// [`Self::finish_recreations`]) the new topic is assigned from its log start. Logged at warn
    /// with both ids and the lag of the old topic at the last reading (its records never copied),
    /// and counted in `strait_source_topics_recreated_total`. Errors: the partitions cannot be
    /// unassigned.
    async fn begin_recreation(&mut self, topic: &str, old: TopicId, new: TopicId) -> ConnectResult<()> {
        let partitions: Vec<i32> = self.assigned.iter().filter(|(t, _)| t == topic).map(|(_, p)| *p).collect();
        let mut tpl = TopicPartitionList::new();
        for p in &partitions {
            tpl.add_partition(topic, *p);
        }
        let consumer = self.reader.consumer().clone();
        // The position is the offset after the last record handed to Strait, which reads nothing
        // of these partitions once they are unassigned.
        let read = blocking(move || {
            let read = consumer.position()?;
            consumer.incremental_unassign(&tpl)?;
            Ok::<_, KafkaError>(read)
        })
        .await
        .map_err(|e| ConnectError::backend(format!("unassign the partitions of recreated topic {topic}"), e))?;
        let name = self.names.get(topic);
        let (flow, source, target) = (&self.flow.name, &self.flow.source.alias, &self.flow.target.alias);
        let mut uncommitted = HashMap::new();
        let mut unreplicated = 0;
        for p in partitions {
            let committed = match self.resume.remove(&(name.clone(), p)) {
                Some(Offset::Offset(o)) => o,
                _ => -1,
            };
            if let Some(Offset::Offset(next)) = read.find_partition(topic, p).map(|e| e.offset()) {
                if next > committed {
                    uncommitted.insert(p, next);
                }
            }
            // Per-topic series (no per-partition ones) hold the topic's sum in each partition's.
            if metrics().per_partition() || unreplicated == 0 {
                unreplicated += metrics().lag(source, target, topic, p).get().max(0);
            }
            self.assigned.remove(&(topic.to_string(), p));
            self.unsaved_starts.remove(&(name.clone(), p));
        }
        tracing::warn!(
            flow = %flow, topic, old_topic_id = %old, new_topic_id = %new, unreplicated_at_last_lag_reading = unreplicated,
            "the source topic was deleted and created again: replicating the new topic from its log start once the records read from the old one are committed; the old topic's records not yet replicated when it was deleted (its lag at the last reading) are lost"
        );
        metrics().topic_recreated(source, target, topic).inc();
        self.recreations.begin(topic, new, uncommitted);
        self.finish_recreations();
        Ok(())
    }

    /// Puts the new id of each recreated topic whose old records are all committed in force, and
    /// lists the source at once so its partitions are assigned from the log start.
    fn finish_recreations(&mut self) {
        for (topic, id) in self.recreations.take_drained() {
            tracing::info!(flow = %self.flow.name, topic, topic_id = %id, "the recreated topic's partitions are assigned again, from its log start");
            let name = self.names.get(&topic);
            self.ids.set(&name, id);
            self.next_refresh = Instant::now();
        }
    }
}

/// The one shared copy of a topic name.
/// One shared name per topic for the records of a flow.
#[derive(Default)]
struct TopicNames {
    by_name: HashMap<String, Arc<str>>,
    /// The name last asked for: records come in runs of one partition, so most skip the map.
    last: Option<Arc<str>>,
}

impl TopicNames {
    fn get(&mut self, topic: &str) -> Arc<str> {
        if let Some(last) = self.last.as_ref().filter(|l| ***l == *topic) {
            return last.clone();
        }
        let name = match self.by_name.get(topic) {
            Some(t) => t.clone(),
            None => self.by_name.entry(topic.to_string()).or_insert_with(|| Arc::from(topic)).clone(),
        };
        self.last = Some(name.clone());
        name
    }
}

/// Records taken from the consumer for one poll.
struct Drained {
    records: Vec<ConnectRecord<(), ReplicatedRecord>>,
    bytes: usize,
    /// The consumer reported a refusal (missing ACL, refused credentials): no retry helps.
    denied: Option<KafkaError>,
}

impl Drained {
    /// Takes records from `reader` until `max_records` or `max_bytes` is reached or none is
    /// left, waiting up to `wait` for the first one. The consumer's errors are served first.
    fn drain(
        &mut self,
        reader: &SourceReader,
        names: &mut TopicNames,
        max_records: usize,
        max_bytes: usize,
        mut wait: Duration,
        flow: &str,
    ) {
        let mut read = Vec::new();
        for e in reader.events() {
            self.failed(e, flow);
        }
        while self.denied.is_none() && self.records.len() < max_records && self.bytes < max_bytes {
            // As many records as the bytes left hold at the average size so far (one record
            // first): large records overshoot `max_bytes` by about one, not by a whole read.
            let want = match self.records.len() {
                0 => 1,
                n => (max_records - n).min((max_bytes - self.bytes).div_ceil((self.bytes / n).max(64))),
            };
            if reader.read(want, wait, &mut read) == 0 {
                break;
            }
            for m in read.drain(..) {
                match m {
                    Ok(m) => {
                        let r = to_record(m, names);
                        self.bytes += r.size_bytes;
                        self.records.push(r);
                    }
                    Err(e) => self.failed(e, flow),
                }
            }
            wait = Duration::ZERO;
        }
    }

    /// Notes a refusal (no retry helps); logs any other error, which librdkafka retries itself.
    fn failed(&mut self, e: KafkaError, flow: &str) {
        if e.rdkafka_error_code().is_some_and(is_denied) {
            self.denied.get_or_insert(e);
        } else {
            crate::client_log::consumer_error(flow, &e);
        }
    }
}

/// No-payload records that carry the start offset of each of `starts` as a position (the
/// position of a record is its offset + 1, so each stands at the offset before the start).
fn start_records(starts: &HashMap<(Arc<str>, i32), i64>) -> Vec<ConnectRecord<(), ReplicatedRecord>> {
    starts
        .iter()
        .map(|((topic, partition), start)| ConnectRecord {
            key: None,
            value: None,
            timestamp_ms: None,
            headers: vec![],
            source_offset: SourceOffset { topic: topic.clone(), partition: *partition, offset: start - 1 },
            size_bytes: 64,
        })
        .collect()
}

/// The record of `m`, holding the message itself (no copy of key and value); its headers are
/// copied, as the loop guard edits them.
fn to_record(m: KafkaMessage, names: &mut TopicNames) -> ConnectRecord<(), ReplicatedRecord> {
    let mut headers = Vec::new();
    m.for_each_header(|key, value| headers.push(Header { key: key.to_string(), value: value.map(<[u8]>::to_vec) }));
    let size_bytes = 64
        + m.key().map_or(0, <[u8]>::len)
        + m.payload().map_or(0, <[u8]>::len)
        + headers.iter().map(|h| h.key.len() + h.value.as_ref().map_or(0, Vec::len)).sum::<usize>();
    let topic = names.get(&m.topic());
    let (partition, offset, timestamp_ms) = (m.partition(), m.offset(), m.timestamp_ms());
    ConnectRecord {
        key: None,
        value: Some(ReplicatedRecord::Kafka(m)),
        timestamp_ms,
        headers,
        source_offset: SourceOffset { topic, partition, offset },
        size_bytes,
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
        let starts = if std::mem::take(&mut self.emit_starts) { start_records(&self.unsaved_starts) } else { vec![] };
        // What is already fetched is taken on this thread, without waiting; only when nothing
        // is, one blocking call waits up to `timeout` for the first record (then takes the rest
        // the same way): no hand-over to another thread while records flow.
        let mut batch = Drained { records: starts, bytes: 0, denied: None };
        batch.drain(&self.reader, &mut self.names, max_records, max_bytes, Duration::ZERO, &self.flow.name);
        if batch.records.is_empty() && batch.denied.is_none() {
            let reader = self.reader.clone();
            let mut names = std::mem::take(&mut self.names);
            let flow = self.flow.name.clone();
            (batch, self.names) = blocking(move || {
                batch.drain(&reader, &mut names, max_records, max_bytes, timeout, &flow);
                (batch, names)
            })
            .await;
        }
        match batch.denied {
            // Records read before the refusal are dropped: they are read again at the next start.
            Some(e) => Err(connect_error(format!("read source cluster {}", self.flow.source.alias), e)),
            None => Ok(batch.records),
        }
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
        let reader = self.reader.clone();
        blocking(move || {
            let mut all = tpl.clone();
            all.set_all_offsets(Offset::Invalid)?;
            reader.consumer().incremental_unassign(&all)?;
            reader.consumer().incremental_assign(&tpl)
        })
        .await
        .map_err(|e| ConnectError::backend(format!("rewind the source of flow {}", self.flow.name), e))
    }

    async fn close(&mut self) -> ConnectResult<()> {
        self.reader.consumer().unassign().map_err(|e| ConnectError::backend("unassign source partitions", e))
    }
}
