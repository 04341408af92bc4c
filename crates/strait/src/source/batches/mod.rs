//! The source side of `copy = "batches"`: a slot's partitions read as the broker stores them
//! (`strait-wire`: `read_committed` fetches in sessions, KIP-227), each data batch handed on
//! whole and still compressed. [`super::KafkaSource`] keeps its rules (which partitions, where
//! each starts, recreated topics, gaps, the throttle); this replaces only its consumer's reading.
//!
//! A background task fetches the assigned partitions into a queue bounded in bytes, and
//! [`BatchReader::drain`] takes from it. Each assignment of a partition gets a new generation: the
//! batches fetched for an older one (before a rewind, an unassignment) are dropped, never handed
//! on. A batch that starts before the partition's position (the first after a resume starts
//! inside it), a `LogAppendTime` batch and a compacted batch (gaps between its offsets, which a
//! broker refuses in a produce) are written anew from the position ([`strait_wire::reencode`]),
//! so no record is handed on twice, a `CreateTime` target keeps the source's times, and
//! compacted topics copy.
//!
//! Each partition is read under the id its topic had when it was assigned (Fetch v13, KIP-516):
//! once the topic is deleted, and perhaps created again under its name, its leader answers an
//! unknown id instead of the new topic's records at the old offsets, and the source's rules
//! are asked at once ([`BatchReader::take_topic_gone`]) to take the new topic from its start.
//! Each leader is fetched on its own (`strait_wire::Cluster::fetch`): one that fails or is slow
//! holds only its own partitions.

mod fetching;
mod shared;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rdkafka::{Offset, TopicPartitionList};
use strait_connect::{ConnectError, ConnectRecord, ConnectResult, SourceOffset};
use strait_wire::Uuid;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::records::TopicNames;
use crate::config::Flow;
use crate::kafka::wire_cluster;
use crate::record::ReplicatedRecord;
use fetching::Fetching;
pub(super) use shared::Left;
use shared::{lock, Next, Shared};

/// Bytes fetched and not yet taken, above which fetching pauses; the flow's share, split between
/// its slots like the record path's prefetch.
const QUEUED_BYTES: usize = 32 << 20;

/// A slot's batch reading: the fetch task and the queue it fills.
pub(super) struct BatchReader {
    shared: Arc<Mutex<Shared>>,
    /// Wakes the task: the assignment changed, or the queue has room again.
    wake: Arc<Notify>,
    /// Wakes a drain waiting for batches.
    arrived: Arc<Notify>,
    task: JoinHandle<()>,
}

impl BatchReader {
    /// Connects to `flow`'s source with its own client (TLS and SASL from `[clusters.client]`)
    /// and starts the fetch task, with nothing assigned, fetching while fewer than
    /// `queued_bytes` bytes wait to be taken ([`Self::queue_share`]). Errors: a setting the client refuses (invalid), a source that does
    /// not answer (retriable).
    pub(super) async fn start(flow: &Flow, queued_bytes: usize) -> ConnectResult<Self> {
        let cluster = wire_cluster(&flow.source, "batch reader").await?;
        let (shared, wake, arrived) =
            (Arc::<Mutex<Shared>>::default(), Arc::new(Notify::new()), Arc::new(Notify::new()));
        let fetching = Fetching {
            flow: flow.name.clone(),
            source: flow.source.alias.clone(),
            cluster,
            shared: shared.clone(),
            wake: wake.clone(),
            arrived: arrived.clone(),
            queue_limit: queued_bytes,
        };
        Ok(Self { shared, wake, arrived, task: tokio::spawn(fetching.run()) })
    }

    /// The bytes of the queue bound for `flow` (its slots' share of [`QUEUED_BYTES`]).
    pub(super) fn queue_share(flow: &Flow) -> usize {
        flow.slot_share(QUEUED_BYTES, 1 << 20)
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        lock(&self.shared)
    }

    /// Reads each partition of `tpl` from its offset (`Beginning`: the log start), under the id
    /// `id_of` gives its topic (none: the id the source's metadata gives), dropping what was
    /// fetched for it before. Errors: an offset other than those.
    pub(super) fn assign(&self, tpl: &TopicPartitionList, id_of: impl Fn(&str) -> Option<Uuid>) -> ConnectResult<()> {
        let mut shared = self.lock();
        for e in tpl.elements() {
            let offset = match e.offset() {
                Offset::Beginning => None,
                Offset::Offset(o) => Some(o),
                other => {
                    return Err(ConnectError::offset(
                        format!("assign {} partition {}", e.topic(), e.partition()),
                        format!("{other:?} is not a start the batch reader takes"),
                    ))
                }
            };
            shared.generations += 1;
            let (generation, topic_id) = (shared.generations, id_of(e.topic()).unwrap_or_default());
            let next = Next { offset, epoch: -1, generation, handed: offset, topic_id, end: None, held: None };
            shared.partitions.insert((e.topic().to_string(), e.partition()), next);
        }
        drop(shared);
        self.wake.notify_one();
        Ok(())
    }

    /// Stops reading `partitions` of `topic`; returns where each stood.
    pub(super) fn unassign(&self, topic: &str, partitions: &[i32]) -> HashMap<i32, Left> {
        let mut shared = self.lock();
        let left = partitions.iter().filter_map(|p| {
            let next = shared.partitions.remove(&(topic.to_string(), *p))?;
            Some((*p, Left { handed: next.handed, end: next.end }))
        });
        left.collect()
    }

    /// Whether a leader answered, since the last call, that the id a partition's topic is read
    /// under is unknown: the topic was deleted, perhaps created again.
    pub(super) fn take_topic_gone(&self) -> bool {
        std::mem::take(&mut self.lock().topic_gone)
    }

    /// Stops reading every partition.
    pub(super) fn release(&self) {
        let mut shared = self.lock();
        shared.partitions.clear();
        shared.queue.clear();
        shared.queued_bytes = 0;
    }

    /// Takes fetched batches, in fetch order, until `max_records` batches or `max_bytes` bytes
    /// (at least one batch), waiting up to `wait` for the first. Each becomes a record whose
    /// source offset is the batch's last offset (a position after it resumes at the next batch)
    /// and whose size is the batch's bytes. Errors: a failure the fetch task cannot mend.
    pub(super) async fn drain(
        &self,
        names: &mut TopicNames,
        max_records: usize,
        max_bytes: usize,
        wait: Duration,
    ) -> ConnectResult<(Vec<ConnectRecord<(), ReplicatedRecord>>, usize)> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let arrival = self.arrived.notified();
            let (records, bytes) = self.take(names, max_records, max_bytes)?;
            if !records.is_empty() || tokio::time::Instant::now() >= deadline {
                return Ok((records, bytes));
            }
            if tokio::time::timeout_at(deadline, arrival).await.is_err() {
                return Ok((Vec::new(), 0));
            }
        }
    }

    fn take(
        &self,
        names: &mut TopicNames,
        max_records: usize,
        max_bytes: usize,
    ) -> ConnectResult<(Vec<ConnectRecord<(), ReplicatedRecord>>, usize)> {
        let mut shared = self.lock();
        if let Some(e) = shared.failed.take() {
            return Err(e);
        }
        let (mut records, mut bytes) = (Vec::new(), 0);
        while records.len() < max_records && (records.is_empty() || bytes < max_bytes) {
            let Some(q) = shared.queue.pop_front() else { break };
            let size = q.batch.bytes().len();
            shared.queued_bytes -= size;
            let Some(next) = shared.partitions.get_mut(&(q.topic.clone(), q.partition)) else { continue };
            if next.generation != q.generation {
                continue;
            }
            next.handed = Some(q.last + 1);
            bytes += size;
            records.push(ConnectRecord {
                key: None,
                timestamp_ms: Some(q.batch.max_timestamp()),
                headers: Vec::new(),
                source_offset: SourceOffset { topic: names.get(&q.topic), partition: q.partition, offset: q.last },
                size_bytes: size,
                value: Some(ReplicatedRecord::Batch(q.batch)),
            });
        }
        drop(shared);
        self.wake.notify_one();
        Ok((records, bytes))
    }
}

impl Drop for BatchReader {
    fn drop(&mut self) {
        self.task.abort();
    }
}
