//! A source topic found deleted and created again while the flow reads it (a new topic id,
//! KIP-516): its partitions taken off the reader at once, the records read from the old topic
//! committed first ([`super::recreation::Recreations`]), then the new topic from its log start.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use rdkafka::{Offset, TopicPartitionList};
use strait_connect::ConnectResult;

use super::reader::Unassigned;
use super::KafkaSource;
use crate::metrics::metrics;
use crate::topic_id::TopicId;

impl KafkaSource {
    /// `topic` has a new id: it was deleted and created again while this source read it, and its
    /// assigned partitions may already be reading the new topic at the old topic's offsets,
    /// skipping its first records. They are taken off the consumer at once; once every record of
    /// them already read is committed (their positions saved with the old id,
    /// [`Self::finish_recreations`]) the new topic is assigned from its log start. Logged at warn
    /// with both ids and the old topic's records never read (with `copy = "batches"`: its end as
    /// last fetched by its id against where it was read; else its lag at the last reading), and
    /// counted in `strait_source_topics_recreated_total`. Errors: the partitions cannot be
    /// unassigned.
    pub(super) async fn begin_recreation(&mut self, topic: &str, old: TopicId, new: TopicId) -> ConnectResult<()> {
        let partitions: Vec<i32> = self.assigned.iter().filter(|(t, _)| t == topic).map(|(_, p)| *p).collect();
        // The position is the offset after the last record handed to Strait, which reads nothing
        // of these partitions once they are unassigned. A reader by id knows where each
        // partition's old topic ended.
        let Unassigned { handed: read, ends } = self.partitions.unassign(topic, &partitions).await?;
        let name = self.names.get(topic);
        let (flow, source, target) = (&self.flow.name, &self.flow.source.alias, &self.flow.target.alias);
        let mut uncommitted = HashMap::new();
        let (mut lost, mut by_lag) = (0, false);
        for p in partitions {
            let committed = match self.resume.remove(&(name.clone(), p)) {
                Some(Offset::Offset(o)) => o,
                _ => -1,
            };
            let next = read.get(&p).copied();
            if let Some(next) = next.filter(|n| *n > committed) {
                uncommitted.insert(p, next);
            }
            match ends.get(&p) {
                // Read by id: every record of the old topic up to its end is read or committed.
                Some(end) => lost += (end - next.unwrap_or(committed).max(committed)).max(0),
                // Per-topic series (no per-partition ones) hold the topic's sum in each partition's.
                None if metrics().per_partition() || !by_lag => {
                    by_lag = true;
                    lost += metrics().lag(source, target, topic, p).get().max(0);
                }
                None => {}
            }
            self.assigned.remove(&(topic.to_string(), p));
            self.unsaved_starts.remove(&(name.clone(), p));
        }
        let measured =
            if by_lag { "the lag at its last reading (by name)" } else { "its end as last fetched by its id" };
        tracing::warn!(
            flow = %flow, topic, old_topic_id = %old, new_topic_id = %new, records_lost = lost, measured,
            "the source topic was deleted and created again: replicating the new topic from its log start once the records read from the old one are committed; the old topic's records never read before it was deleted are lost"
        );
        metrics().topic_recreated(source, target, topic).inc();
        self.recreations.begin(topic, new, uncommitted);
        self.finish_recreations();
        Ok(())
    }

    /// Puts the new id of each recreated topic whose old records are all committed in force, and
    /// lists the source at once so its partitions are assigned from the log start.
    pub(super) fn finish_recreations(&mut self) {
        for (topic, id) in self.recreations.take_drained() {
            tracing::info!(flow = %self.flow.name, topic, topic_id = %id, "the recreated topic's partitions are assigned again, from its log start");
            let name = self.names.get(&topic);
            self.ids.set(&name, id);
            self.next_refresh = Instant::now();
        }
    }

    /// With `copy = "records"` (whose consumer reads by name): pauses the partitions of each
    /// assigned topic missing from `listed`, so a topic deleted and created again is not read at
    /// the old topic's offsets before a listing shows its new id; resumes them when the topic is
    /// listed again (the next step, [`Self::begin_recreation`], takes them off for good when its
    /// id changed). A pause or resume that fails is logged; the next listing tries again.
    pub(super) async fn pause_vanished(&mut self, listed: &HashSet<String>) {
        if !self.partitions.reads_by_name() {
            // Fetched by topic id: a vanished topic's partitions answer an unknown id.
            return;
        }
        let assigned: HashSet<String> = self.assigned.iter().map(|(t, _)| t.clone()).collect();
        let mut pause = TopicPartitionList::new();
        let mut resume = TopicPartitionList::new();
        for topic in &assigned {
            let tpl = if !listed.contains(topic) && self.recreations.vanished(topic) {
                tracing::info!(flow = %self.flow.name, topic, "the source topic is no longer listed (deleted?): its partitions are paused until it is listed again; one created again under its name is copied from its log start");
                &mut pause
            } else if listed.contains(topic) && self.recreations.listed_again(topic) {
                &mut resume
            } else {
                continue;
            };
            for (t, p) in self.assigned.iter().filter(|(t, _)| t == topic) {
                tpl.add_partition(t, *p);
            }
        }
        if pause.count() + resume.count() == 0 {
            return;
        }
        let paused: Vec<String> = pause.elements().iter().map(|e| e.topic().to_string()).collect();
        let done = self.partitions.pause(pause, resume).await;
        if let Err(e) = done {
            tracing::warn!(flow = %self.flow.name, error = %e, "pausing or resuming the partitions of a vanished source topic failed; the next listing tries again");
            for topic in paused {
                self.recreations.listed_again(&topic);
            }
        }
    }
}
