//! Listing the source's topics (off the poll path, every `refresh_topics_interval_ms`) and
//! assigning the partitions a listing brings: the facts the resume decision needs are read
//! from the source ([`resume::checks`]), the decision made ([`resume::decide`]), its report
//! logged ([`super::report`]) and the partitions assigned where it says.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::{Message, Offset, TopicPartitionList};
use strait_connect::{ConnectError, ConnectResult};
use tokio::task::JoinHandle;

use super::{report, KafkaSource, Listed, CONSUMER_SETTINGS};
use crate::admin::topic_ids;
use crate::client_log::{ClientLog, LoggedConsumer};
use crate::config::Skip;
use crate::kafka::{blocking, joined, topic_partition_counts, watermarks, METADATA_TIMEOUT};
use crate::positions::POSITIONS_TOPIC;
use crate::resume::{self, Partition, Read, Rules, Start, Stop, TimestampCheck};
use crate::slots::slot_of;
use crate::topic_id::TopicId;

impl KafkaSource {
    /// Lists the source's topics and assigns partitions not yet assigned. Returns the selected
    /// topic names.
    pub(super) async fn refresh(&mut self) -> ConnectResult<BTreeSet<String>> {
        let listed = joined(self.list_topics()).await;
        self.assign_listed(listed).await
    }

    /// Starts listing the source's topics on a blocking thread; the next refresh is due one
    /// `refresh_topics_interval_ms` from now.
    pub(super) fn list_topics(&mut self) -> JoinHandle<Listed> {
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
    pub(super) async fn refresh_in_background(&mut self) {
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
    /// assigned, each where [`resume::decide`] says, and takes off the consumer the partitions of
    /// a topic whose id changed (deleted and created again: [`Self::begin_recreation`]). Returns
    /// the selected topic names. Errors: the listing's error; watermarks unreadable; a source gap
    /// with `on_source_gap = "fail"` (a data-loss error naming topic and partition).
    pub(super) async fn assign_listed(&mut self, listed: Listed) -> ConnectResult<BTreeSet<String>> {
        let md = listed
            .map_err(|e| ConnectError::backend(format!("list topics of source {}", self.flow.source.alias), e))?;
        let mut selected = BTreeSet::new();
        let mut fresh = Vec::new();
        let mut ids = HashMap::new();
        let listed: HashSet<String> = md.iter().map(|(t, _, _)| t.clone()).collect();
        self.pause_vanished(&listed).await;
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
        if fresh.is_empty() {
            return Ok(selected);
        }
        let rules = Rules { start_from: self.flow.reading.start_from, on_source_gap: self.flow.reading.on_source_gap };
        let source = resume::Source {
            assigned: &self.assigned,
            recreated_in_run: self.recreations.recreated(),
            topic_ids: &ids,
        };
        let checks = resume::checks(&rules, &self.stored, &source, &fresh);
        let read = Read {
            timestamp_changed: self.timestamp_changed(checks.timestamps).await,
            watermarks: self.watermarks(checks.watermarks).await?,
        };
        let plan = resume::decide(&rules, &self.stored, &source, &read, &fresh);
        report::log(&self.flow, &plan.report);
        match plan.stop {
            Some(Stop::Gap(gap)) => {
                return Err(ConnectError::data_loss(
                    format!(
                        "{} partition {}: {} records deleted on the source before they were replicated",
                        gap.topic,
                        gap.partition,
                        gap.lost()
                    ),
                    "on_source_gap = \"fail\": stopping instead of continuing at the log start",
                ))
            }
            // Permanent: starting again reads the same record; an operator must fix it.
            Some(Stop::Invalid(bad)) => {
                let record = bad.record_offset.map_or(String::new(), |o| format!(" (its record at offset {o})"));
                return Err(ConnectError::invalid(
                    format!("{} partition {}: the saved position in {POSITIONS_TOPIC}{record}", bad.topic, bad.partition),
                    format!("{}, and no offset sync of the partition on the target to rebuild it from: fix or delete the position record, then start again", bad.invalid),
                ));
            }
            None => {}
        }
        let mut new = TopicPartitionList::new();
        for ((topic, p), start) in &plan.starts {
            new.add_partition_offset(topic, *p, offset_of(*start))
                .map_err(|e| ConnectError::offset(format!("assign {topic} partition {p}"), e))?;
        }
        tracing::info!(flow = %self.flow.name, partitions = new.count(), "assigning new source partitions");
        self.partitions.assign(&new, |topic| ids.get(topic).and_then(TopicId::uuid))?;
        // Only once assigned: a failed assign is tried again at the next refresh.
        for ((topic, p), start) in plan.starts {
            let name = self.names.get(&topic);
            if let Start::End(end) | Start::Rebuilt(end) = start {
                self.unsaved_starts.insert((name.clone(), p), end);
                self.emit_starts = true;
            }
            if let Some(id) = ids.get(&topic) {
                self.ids.set(&name, id.clone());
            }
            let offset = offset_of(start);
            self.committed.set(&topic, p, if let Offset::Offset(o) = offset { Some(o) } else { None });
            self.resume.insert((name, p), offset);
            self.assigned.insert((topic, p));
        }
        Ok(selected)
    }

    /// Among `checks`, the partitions whose record at the checked offset now has another
    /// timestamp than the one saved: the topic was deleted and recreated while Strait was
    /// stopped, and resuming at the saved offset would skip records. A record that cannot be read
    /// back (compacted, expired, a shorter topic) proves nothing and the position is kept
    /// (librdkafka resets out-of-range positions to the beginning).
    async fn timestamp_changed(&self, checks: Vec<TimestampCheck>) -> HashSet<Partition> {
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
            for c in &checks {
                if tpl.add_partition_offset(&c.topic, c.partition, Offset::Offset(c.offset)).is_err() {
                    return HashSet::new();
                }
            }
            if reader.assign(&tpl).is_err() {
                return HashSet::new();
            }
            let mut pending: HashMap<Partition, (i64, i64)> =
                checks.into_iter().map(|c| ((c.topic, c.partition), (c.offset, c.timestamp))).collect();
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

    /// The log-start and end offsets of each of `partitions` (one request per broker, off the
    /// async workers). Errors: a backend error when the source does not answer.
    async fn watermarks(&self, partitions: Vec<Partition>) -> ConnectResult<HashMap<Partition, (i64, i64)>> {
        let consumer = self.reader.consumer().clone();
        blocking(move || {
            let marks = watermarks(&consumer, partitions.iter().map(|(t, p)| (t.as_str(), *p)), METADATA_TIMEOUT)?;
            partitions
                .into_iter()
                .map(|(t, p)| marks.get(&t, p).map(|w| ((t, p), w)))
                .collect::<Result<HashMap<_, _>, _>>()
        })
        .await
        .map_err(|e| ConnectError::backend(format!("offsets of source {}", self.flow.source.alias), e))
    }
}

/// librdkafka's offset for `start`.
fn offset_of(start: Start) -> Offset {
    match start {
        Start::LogStart => Offset::Beginning,
        Start::At(o) | Start::End(o) | Start::Rebuilt(o) => Offset::Offset(o),
    }
}
