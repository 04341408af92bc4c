//! The fetch task of a slot's batch reading: fetches the assigned partitions from their
//! leaders, each leader on its own (`strait_wire::Cluster::fetch`), into the shared queue while
//! it has room; asks a partition's log start where it starts there; holds a partition whose
//! fetch or log start answered an error, or that has no leader, for a little while; logs a
//! leader's outage once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use strait_wire::{Cluster, FetchAt, FetchRound, OffsetSpec, ResponseError, WireError};
use tokio::sync::Notify;

use super::shared::{lock, Next, Queued, Shared};
use crate::kafka::wire_error;
use crate::metrics::metrics;
use crate::retry::doubling;

/// The most a partition answers per fetch (bytes), as Kafka's `max.partition.fetch.bytes`.
const PARTITION_MAX_BYTES: i32 = 1 << 20;
/// As much from a far source (`Cluster::is_far`): a fetch round waits a round trip, so 1 MiB a
/// partition caps 12 partitions at 12 MiB per 80 ms (150 MB/s). Not near: larger rounds from a
/// near source fill the queue in bursts and made it slower (bench/FINDINGS.md, issue 43).
const FAR_PARTITION_MAX_BYTES: i32 = 4 << 20;
/// How long a leader holds a fetch with nothing to return, as the record path's `fetch.wait.max.ms`.
const FETCH_WAIT: Duration = Duration::from_millis(500);
/// First and longest wait after a failed fetch, and before a partition whose fetch answered an
/// error is asked again.
const RETRY_MIN: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);
const HOLD_MAX: Duration = Duration::from_secs(1);

/// The fetch task's own state.
pub(super) struct Fetching {
    pub(super) flow: String,
    /// The source cluster's alias.
    pub(super) source: String,
    pub(super) cluster: Cluster,
    pub(super) shared: Arc<Mutex<Shared>>,
    pub(super) wake: Arc<Notify>,
    pub(super) arrived: Arc<Notify>,
    /// Bytes queued above which fetching pauses.
    pub(super) queue_limit: usize,
}

impl Fetching {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        lock(&self.shared)
    }

    pub(super) async fn run(mut self) {
        let mut retries = doubling(RETRY_MIN, RETRY_MAX);
        let wake = self.wake.clone();
        let partition_max_bytes = if self.cluster.is_far() { FAR_PARTITION_MAX_BYTES } else { PARTITION_MAX_BYTES };
        let mut failing = HashMap::new();
        loop {
            let woken = wake.notified();
            let (at, starts, held) = self.wanted();
            let round = async {
                if !starts.is_empty() {
                    self.list_starts(&starts).await?;
                    return Ok(None);
                }
                if at.is_empty() {
                    return Ok(Some(held));
                }
                let round = self.cluster.fetch(&at, FETCH_WAIT, partition_max_bytes).await?;
                self.take_fetched(round, &mut failing)?;
                Ok::<_, WireError>(None)
            };
            match round.await {
                Ok(None) => retries = doubling(RETRY_MIN, RETRY_MAX),
                // Nothing to fetch (none assigned, the queue full, or every partition held after
                // an error): until a change, or the first hold ends.
                Ok(Some(held)) => {
                    let _ = tokio::time::timeout_at(held.unwrap_or_else(far_future).into(), woken).await;
                }
                Err(e) if e.is_retriable() => {
                    let retry = retries.next().unwrap_or(RETRY_MAX);
                    tracing::warn!(flow = %self.flow, error = %e, retry_in_ms = retry.as_millis() as u64, "reading source batches failed; retrying");
                    tokio::time::sleep(retry).await;
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

    /// What to do next: the partitions to fetch (none while the queue is full), the partitions
    /// whose log start must be asked first, and when the first partition held after an error
    /// may be asked again.
    fn wanted(&self) -> (Vec<FetchAt>, Vec<(String, i32)>, Option<Instant>) {
        let shared = self.lock();
        let (mut at, mut starts, mut held) = (Vec::new(), Vec::new(), None::<Instant>);
        if shared.queued_bytes >= self.queue_limit {
            return (at, starts, held);
        }
        let now = Instant::now();
        for ((topic, partition), next) in &shared.partitions {
            if let Some(until) = next.held.as_ref().map(|(until, _)| *until).filter(|until| *until > now) {
                held = Some(held.map_or(until, |h| h.min(until)));
                continue;
            }
            match next.offset {
                None => starts.push((topic.clone(), *partition)),
                Some(offset) => at.push(FetchAt {
                    topic: topic.clone(),
                    topic_id: next.topic_id,
                    partition: *partition,
                    offset,
                    last_fetched_epoch: next.epoch,
                }),
            }
        }
        (at, starts, held)
    }

    fn assigned_topics(&self) -> Vec<String> {
        let mut topics: Vec<String> = self.lock().partitions.keys().map(|(t, _)| t.clone()).collect();
        topics.sort_unstable();
        topics.dedup();
        topics
    }

    /// Asks the log start of `partitions` and reads each from there. A partition without a
    /// leader after a metadata refresh (its topic deleted, or its leader not elected yet) or
    /// whose leader answers an error is held alone, as a failed fetch holds it, and its topic
    /// checked by the source's rules; the others go on. Errors: the refresh or the request failed.
    async fn list_starts(&mut self, partitions: &[(String, i32)]) -> Result<(), WireError> {
        let topics: Vec<&str> = partitions.iter().map(|(t, _)| t.as_str()).collect();
        if partitions.iter().any(|(t, p)| self.cluster.leader(t, *p).is_none()) {
            self.cluster.refresh(&topics).await?;
        }
        let (led, leaderless): (Vec<_>, Vec<_>) =
            partitions.iter().cloned().partition(|(t, p)| self.cluster.leader(t, *p).is_some());
        let listed = self.cluster.list_offsets(&led, OffsetSpec::Earliest).await?;
        // A leader that answers an error may have moved: the next ask goes to the one named now.
        let mut moved: Vec<String> = listed.iter().filter(|l| l.offset.is_err()).map(|l| l.topic.clone()).collect();
        moved.sort_unstable();
        moved.dedup();
        if !moved.is_empty() {
            self.cluster.refresh(&moved.iter().map(String::as_str).collect::<Vec<_>>()).await.ok();
        }
        let mut shared = self.lock();
        for (topic, partition) in leaderless {
            tracing::debug!(flow = %self.flow, %topic, partition, "no leader of a source partition to ask its log start; asking again");
            hold(&mut shared, (topic, partition));
        }
        for l in listed {
            match l.offset {
                Ok(start) => {
                    if let Some(next) = shared.partitions.get_mut(&(l.topic, l.partition)) {
                        next.offset.get_or_insert(start);
                    }
                }
                Err(error) => {
                    tracing::debug!(flow = %self.flow, topic = %l.topic, partition = l.partition, %error, "the log start of a source partition could not be had; asking again");
                    hold(&mut shared, (l.topic, l.partition));
                }
            }
        }
        let gone = shared.topic_gone;
        drop(shared);
        if gone {
            self.arrived.notify_one();
        }
        Ok(())
    }

    /// Queues the data batches of `round` whose partition is still read at the offset and under
    /// the topic id they answer, and moves each partition's offset past every batch fetched
    /// (control batches and aborted ones too). A broker whose request failed is logged once per
    /// outage (`failing`: since when), and again when it answers.
    fn take_fetched(&mut self, round: FetchRound, failing: &mut HashMap<i32, Instant>) -> Result<(), WireError> {
        for (broker, outcome) in round.brokers {
            self.broker_outcome(broker, outcome, failing);
        }
        let mut shared = self.lock();
        let mut queued = false;
        for f in round.fetched {
            let key = (f.topic.clone(), f.partition);
            let Some(next) = shared.partitions.get_mut(&key) else { continue };
            let offset = f.offset;
            let same_id = next.topic_id.is_nil() || f.topic_id.is_nil() || next.topic_id == f.topic_id;
            if next.offset != Some(offset) || !same_id {
                continue;
            }
            // Assigned without an id known: read on under the first one a fetch was answered by.
            if next.topic_id.is_nil() && f.error.is_none() {
                next.topic_id = f.topic_id;
            }
            let generation = next.generation;
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
                None => {
                    next.held = None;
                    next.end = Some(f.last_stable_offset);
                }
                Some(ResponseError::OffsetOutOfRange) => {
                    // Below the log start (retention): the rules checked the saved positions at
                    // assignment; what ran out of range since is read from the log start, as the
                    // record path's `auto.offset.reset = earliest`.
                    tracing::warn!(flow = %self.flow, topic = %f.topic, partition = f.partition, offset, log_start = f.log_start_offset,
                        "offset out of range on the source: reading on from the partition's log start");
                    next.offset = None;
                    continue;
                }
                // A moved leader (the cluster refreshed the leaders, the next fetch asks the new
                // one), or a topic id the leader does not know: the topic is gone, or the leader
                // has not heard of a new one yet. The source's rules are asked at once; the
                // partition waits a little before it is asked again.
                Some(error) => {
                    tracing::debug!(flow = %self.flow, topic = %f.topic, partition = f.partition, %error, "fetch of a source partition failed; asking again");
                    hold_next(next);
                    if f.topic_gone() {
                        shared.topic_gone = true;
                    }
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
        let gone = shared.topic_gone;
        drop(shared);
        if queued || gone {
            self.arrived.notify_one();
        }
        Ok(())
    }

    /// Logs a source broker's fetch failing (once per outage, at warn, counted in
    /// `strait_broker_outages_total`) and answering again.
    fn broker_outcome(&self, broker: i32, outcome: Result<(), WireError>, failing: &mut HashMap<i32, Instant>) {
        match outcome {
            Err(error) => {
                if let std::collections::hash_map::Entry::Vacant(outage) = failing.entry(broker) {
                    outage.insert(Instant::now());
                    tracing::warn!(flow = %self.flow, broker, %error, "a source broker does not answer fetches: its partitions wait (asked again with backoff), the other brokers' partitions go on");
                    metrics().broker_outages(&self.source, broker).inc();
                }
            }
            Ok(()) => {
                if let Some(since) = failing.remove(&broker) {
                    tracing::info!(flow = %self.flow, broker, after_ms = since.elapsed().as_millis() as u64, "the source broker answers fetches again");
                }
            }
        }
    }
}

/// Holds `next` after an error: not asked again for a doubling while (0.1 s to 1 s).
fn hold_next(next: &mut Next) {
    let (until, holds) = next.held.get_or_insert_with(|| (Instant::now(), doubling(RETRY_MIN, HOLD_MAX)));
    *until = Instant::now() + holds.next().unwrap_or(HOLD_MAX);
}

/// Holds the partition `key` ([`hold_next`]), and has the source's rules check its topic (it may
/// be gone).
fn hold(shared: &mut Shared, key: (String, i32)) {
    if let Some(next) = shared.partitions.get_mut(&key) {
        hold_next(next);
        shared.topic_gone = true;
    }
}

/// An instant no wait reaches (a wait for a wake-up only).
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400)
}
