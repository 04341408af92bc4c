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

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rdkafka::{Offset, TopicPartitionList};
use strait_connect::{ConnectError, ConnectRecord, ConnectResult, SourceOffset};
use strait_wire::{Batch, Cluster, FetchAt, Fetched, OffsetSpec, ResponseError, WireError};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::records::TopicNames;
use crate::config::Flow;
use crate::kafka::{wire_cluster, wire_error};
use crate::record::ReplicatedRecord;

/// The most a partition answers per fetch (bytes), as Kafka's `max.partition.fetch.bytes`.
const PARTITION_MAX_BYTES: i32 = 1 << 20;
/// How long a leader holds a fetch with nothing to return, as the record path's `fetch.wait.max.ms`.
const FETCH_WAIT: Duration = Duration::from_millis(500);
/// Bytes fetched and not yet taken, above which fetching pauses; the flow's share, split between
/// its slots like the record path's prefetch.
const QUEUED_BYTES: usize = 32 << 20;
/// First and longest wait after a failed fetch.
const RETRY_MIN: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// Where an assigned partition is read.
struct Next {
    /// The next offset to fetch; `None`: its log start, to be asked.
    offset: Option<i64>,
    /// The leader epoch of the last batch fetched (-1 unknown), for KIP-320's divergence check.
    epoch: i32,
    /// The assignment this read belongs to.
    generation: u64,
    /// The offset after the last batch handed on (for an unassignment's positions).
    handed: Option<i64>,
}

/// A fetched batch waiting to be taken.
struct Queued {
    topic: String,
    partition: i32,
    generation: u64,
    /// The source offset of the batch's last record (a batch written anew without a compacted
    /// batch's gaps ends lower).
    last: i64,
    batch: Batch,
}

#[derive(Default)]
struct Shared {
    partitions: HashMap<(String, i32), Next>,
    queue: VecDeque<Queued>,
    queued_bytes: usize,
    generations: u64,
    /// A failure retrying cannot mend (refused credentials, a batch that cannot be read), for
    /// the next drain to return.
    failed: Option<ConnectError>,
}

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
        self.shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads each partition of `tpl` from its offset (`Beginning`: the log start), dropping what
    /// was fetched for it before. Errors: an offset other than those.
    pub(super) fn assign(&self, tpl: &TopicPartitionList) -> ConnectResult<()> {
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
            let next = Next { offset, epoch: -1, generation: shared.generations, handed: offset };
            shared.partitions.insert((e.topic().to_string(), e.partition()), next);
        }
        drop(shared);
        self.wake.notify_one();
        Ok(())
    }

    /// Stops reading `partitions` of `topic`; returns, for each that had a batch handed on, the
    /// offset after it (where its reading stood, as a consumer's position).
    pub(super) fn unassign(&self, topic: &str, partitions: &[i32]) -> HashMap<i32, i64> {
        let mut shared = self.lock();
        let mut read = HashMap::new();
        for p in partitions {
            if let Some(next) = shared.partitions.remove(&(topic.to_string(), *p)) {
                if let Some(handed) = next.handed {
                    read.insert(*p, handed);
                }
            }
        }
        read
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

/// The fetch task's own state.
struct Fetching {
    flow: String,
    cluster: Cluster,
    shared: Arc<Mutex<Shared>>,
    wake: Arc<Notify>,
    arrived: Arc<Notify>,
    /// Bytes queued above which fetching pauses.
    queue_limit: usize,
}

/// One partition's fetch as asked: its assignment's generation with it.
type Asked = HashMap<(String, i32), (i64, u64)>;

impl Fetching {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn run(mut self) {
        let mut retry = RETRY_MIN;
        let wake = self.wake.clone();
        loop {
            let woken = wake.notified();
            let (at, asked, starts) = self.wanted();
            let round = async {
                if !starts.is_empty() {
                    self.list_starts(&starts).await?;
                    return Ok(true);
                }
                if at.is_empty() {
                    return Ok(false);
                }
                self.ensure_leaders(&at).await?;
                let fetched = self.cluster.fetch(&at, FETCH_WAIT, PARTITION_MAX_BYTES).await?;
                self.take_fetched(fetched, &asked)?;
                Ok::<_, WireError>(true)
            };
            match round.await {
                Ok(true) => retry = RETRY_MIN,
                // Nothing to fetch (none assigned, or the queue is full): until a change.
                Ok(false) => woken.await,
                Err(e) if e.is_retriable() => {
                    tracing::warn!(flow = %self.flow, error = %e, retry_in_ms = retry.as_millis() as u64, "fetching source batches failed; retrying");
                    tokio::time::sleep(retry).await;
                    retry = (retry * 2).min(RETRY_MAX);
                    let topics = self.assigned_topics();
                    let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
                    self.cluster.refresh(&topics).await.ok();
                }
                Err(e) => {
                    let e = wire_error(format!("read source batches of flow {}", self.flow), e);
                    self.lock().failed = Some(e);
                    self.arrived.notify_one();
                    tokio::time::sleep(RETRY_MAX).await;
                }
            }
        }
    }

    /// What to do next: the partitions to fetch (none while the queue is full) with what each
    /// asks, and the partitions whose log start must be asked first.
    fn wanted(&self) -> (Vec<FetchAt>, Asked, Vec<(String, i32)>) {
        let shared = self.lock();
        let (mut at, mut asked, mut starts) = (Vec::new(), HashMap::new(), Vec::new());
        if shared.queued_bytes >= self.queue_limit {
            return (at, asked, starts);
        }
        for ((topic, partition), next) in &shared.partitions {
            match next.offset {
                None => starts.push((topic.clone(), *partition)),
                Some(offset) => {
                    at.push(FetchAt {
                        topic: topic.clone(),
                        partition: *partition,
                        offset,
                        last_fetched_epoch: next.epoch,
                    });
                    asked.insert((topic.clone(), *partition), (offset, next.generation));
                }
            }
        }
        (at, asked, starts)
    }

    fn assigned_topics(&self) -> Vec<String> {
        let mut topics: Vec<String> = self.lock().partitions.keys().map(|(t, _)| t.clone()).collect();
        topics.sort_unstable();
        topics.dedup();
        topics
    }

    /// Refreshes the leaders when one of `at` has none known (a partition just assigned).
    async fn ensure_leaders(&mut self, at: &[FetchAt]) -> Result<(), WireError> {
        if at.iter().all(|a| self.cluster.leader(&a.topic, a.partition).is_some()) {
            return Ok(());
        }
        let topics = self.assigned_topics();
        self.cluster.refresh(&topics.iter().map(String::as_str).collect::<Vec<_>>()).await?;
        match at.iter().find(|a| self.cluster.leader(&a.topic, a.partition).is_none()) {
            Some(a) => Err(WireError::NoLeader { topic: a.topic.clone(), partition: a.partition }),
            None => Ok(()),
        }
    }

    /// Asks the log start of `partitions` and reads each from there.
    async fn list_starts(&mut self, partitions: &[(String, i32)]) -> Result<(), WireError> {
        let topics: Vec<&str> = partitions.iter().map(|(t, _)| t.as_str()).collect();
        if partitions.iter().any(|(t, p)| self.cluster.leader(t, *p).is_none()) {
            self.cluster.refresh(&topics).await?;
        }
        let listed = self.cluster.list_offsets(partitions, OffsetSpec::Earliest).await?;
        let mut shared = self.lock();
        for l in listed {
            match l.offset {
                Ok(start) => {
                    if let Some(next) = shared.partitions.get_mut(&(l.topic, l.partition)) {
                        next.offset.get_or_insert(start);
                    }
                }
                Err(error) => {
                    return Err(WireError::Broker {
                        context: format!("log start of {}/{}", l.topic, l.partition),
                        error,
                    })
                }
            }
        }
        Ok(())
    }

    /// Queues the data batches of `fetched` whose partition is still read as `asked`, and moves
    /// each partition's offset past every batch fetched (control batches and aborted ones too).
    fn take_fetched(&mut self, fetched: Vec<Fetched>, asked: &Asked) -> Result<(), WireError> {
        let mut shared = self.lock();
        let mut queued = false;
        for f in fetched {
            let key = (f.topic.clone(), f.partition);
            let Some(&(offset, generation)) = asked.get(&key) else { continue };
            let Some(next) = shared.partitions.get_mut(&key) else { continue };
            if next.generation != generation || next.offset != Some(offset) {
                continue;
            }
            if let Some(d) = f.diverging {
                // An unclean leader election cut the log below what was read, or the topic was
                // deleted and created again (the topic refresh then names it): read on where the
                // leader's log goes on (what was read past it is not in the source any more).
                tracing::warn!(flow = %self.flow, topic = %f.topic, partition = f.partition, from = offset, to = d.end_offset,
                    "the source partition's log diverged from what was read (an unclean leader election, or the topic deleted and created again): reading on from where its leader's log goes on");
                (next.offset, next.epoch) = (Some(d.end_offset.min(offset)), d.epoch);
                continue;
            }
            match f.error {
                None => {}
                Some(ResponseError::OffsetOutOfRange) => {
                    // Below the log start (retention): the rules checked the saved positions at
                    // assignment; what ran out of range since is read from the log start, as the
                    // record path's `auto.offset.reset = earliest`.
                    tracing::warn!(flow = %self.flow, topic = %f.topic, partition = f.partition, offset, log_start = f.log_start_offset,
                        "offset out of range on the source: reading on from the partition's log start");
                    next.offset = None;
                    continue;
                }
                // A moved leader: the cluster refreshed the leaders, the next fetch asks the new one.
                Some(error) => {
                    tracing::debug!(flow = %self.flow, topic = %f.topic, partition = f.partition, %error, "fetch of a source partition failed; asking again");
                    continue;
                }
            }
            let Some(last) = f.batches.last() else { continue };
            (next.offset, next.epoch) = (Some(last.last_offset() + 1), last.partition_leader_epoch());
            for b in f.committed() {
                if b.last_offset() < offset {
                    continue;
                }
                let last = b.last_offset();
                let batch = match b.reencode_reason(offset) {
                    None => b.clone(),
                    Some(_) => match b.records_from(offset) {
                        Ok(Some(b)) => b,
                        Ok(None) => continue,
                        Err(source) => {
                            return Err(WireError::Batch { topic: f.topic.clone(), partition: f.partition, source })
                        }
                    },
                };
                shared.queued_bytes += batch.bytes().len();
                shared.queue.push_back(Queued {
                    topic: f.topic.clone(),
                    partition: f.partition,
                    generation,
                    last,
                    batch,
                });
                queued = true;
            }
        }
        drop(shared);
        if queued {
            self.arrived.notify_one();
        }
        Ok(())
    }
}
