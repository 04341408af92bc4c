//! An idempotent producer's batches on their way, kept across calls ([`Lanes`]): each
//! partition's in a lane of its own, in order; the lanes of each connection to a leader
//! ([`crate::Connections`]) driven by a task of their own ([`crate::send::drive`]), so a leader
//! that does not answer holds only the partitions it leads;
//! and the appends handed back as they come, as librdkafka's delivery reports are.
//!
//! A partition's first batch from the producer goes alone: the broker takes any sequence as a
//! producer's first in a partition, so were that batch refused, one sent behind it would still be
//! appended, ahead of it. Once one is appended, the broker refuses what follows a refused batch
//! (out of sequence).

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use backon::ExponentialBackoff;
use kafka_protocol::messages::TransactionalId;
use kafka_protocol::ResponseError;
use tokio::sync::mpsc;

use crate::batch::Batch;
use crate::cluster::Cluster;
use crate::conn::Connection;
use crate::connections::Route;
use crate::error::WireError;
use crate::retry::{doubling, BACKOFF, MAX_BACKOFF};
use crate::send::{drive, Appended, Driven, Lane};

/// How long a partition's topic may be missing from the cluster's answers before its batches are
/// refused rather than retried (a topic deleted under the producer): librdkafka's
/// `topic.metadata.propagation.max.ms` default, which gives a topic just created time to appear.
const MISSING_TOPIC_MAX: Duration = Duration::from_secs(30);

/// A batch queued: the token it was given, its bytes as sent, its base offset on the source (which
/// names it in an error) and when it was queued (its delivery timeout runs from then).
struct Queued {
    token: u64,
    batch: Batch,
    source_offset: i64,
    since: Instant,
}

/// One partition's batches still to append.
#[derive(Default)]
struct PartitionLane {
    queue: VecDeque<Queued>,
    /// Its batches are with a drive now.
    driving: bool,
    /// A batch of it was appended by this producer: its batches no longer go one at a time.
    proven: bool,
    /// Failures in a row, the waits after them, and when its batches go again after the last.
    failures: u32,
    waits: Option<ExponentialBackoff>,
    retry_at: Option<Instant>,
    last_error: String,
}

impl PartitionLane {
    fn failed(&mut self, reason: String, now: Instant) {
        self.failures += 1;
        let wait = self.waits.get_or_insert_with(|| doubling(BACKOFF, MAX_BACKOFF)).next().unwrap_or(MAX_BACKOFF);
        self.retry_at = Some(now + wait);
        self.last_error = reason;
    }
}

/// What a drive hands back: the lanes it was given, the token of each batch by index, and what
/// the leader did with them.
struct Finished {
    generation: u64,
    /// The leader's connection driven, and the connection opened for the drive, to keep.
    route: Route,
    opened: Option<Connection>,
    keys: Vec<(String, i32)>,
    tokens: Vec<u64>,
    driven: Driven,
}

/// The batches sent and not yet appended, and the appends not yet handed back.
pub(crate) struct Lanes {
    lanes: HashMap<(String, i32), PartitionLane>,
    next_token: u64,
    /// Bumped by [`Self::clear`]: a drive of an earlier generation is ignored when it ends.
    generation: u64,
    finished_tx: mpsc::UnboundedSender<Finished>,
    finished: mpsc::UnboundedReceiver<Finished>,
    /// Appends received, handed back by [`Self::take_appended`].
    appended: Vec<(u64, Appended)>,
    /// Bytes of the batches queued.
    bytes: usize,
    /// Batches put off by a retriable error, since the start.
    pub(crate) retried: u64,
}

impl Default for Lanes {
    fn default() -> Self {
        let (finished_tx, finished) = mpsc::unbounded_channel();
        Self {
            lanes: HashMap::new(),
            next_token: 0,
            generation: 0,
            finished_tx,
            finished,
            appended: Vec::new(),
            bytes: 0,
            retried: 0,
        }
    }
}

impl Lanes {
    /// Queues `batch` (its producer fields already written) for `topic`/`partition` behind the
    /// partition's earlier batches, returning its token. `source_offset` names it in an error.
    pub(crate) fn queue(&mut self, topic: &str, partition: i32, batch: Batch, source_offset: i64) -> u64 {
        let token = self.next_token;
        self.next_token += 1;
        self.bytes += batch.bytes().len();
        let lane = self.lanes.entry((topic.to_string(), partition)).or_default();
        lane.queue.push_back(Queued { token, batch, source_offset, since: Instant::now() });
        token
    }

    /// Whether every batch queued is appended.
    pub(crate) fn is_empty(&self) -> bool {
        self.lanes.values().all(|l| l.queue.is_empty())
    }

    /// Bytes of the batches queued and not yet appended.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Drops every batch queued (a transaction aborted: their sequences start again); the drives
    /// under way are ignored when they end. Appends not yet handed back are dropped too.
    pub(crate) fn clear(&mut self) {
        self.generation += 1;
        for lane in self.lanes.values_mut() {
            lane.queue.clear();
            lane.driving = false;
            (lane.failures, lane.waits, lane.retry_at) = (0, None, None);
        }
        self.appended.clear();
        self.bytes = 0;
    }

    /// Keeps `appended` for the next [`Self::take_appended`], ahead of what comes since.
    pub(crate) fn hand_back(&mut self, mut appended: Vec<(u64, Appended)>) {
        appended.append(&mut self.appended);
        self.appended = appended;
    }

    /// The appends received since the last call, each partition's in order.
    pub(crate) fn take_appended(&mut self) -> Vec<(u64, Appended)> {
        std::mem::take(&mut self.appended)
    }

    /// Takes what the drives that ended answered, then sends every partition that waits for
    /// nothing (no drive under way, no backoff) to its leader, the partitions of each connection
    /// to a leader in a drive of their own, in a task that opens that connection when it has
    /// none. Never waits for an
    /// answer; it may wait for a metadata refresh.
    /// Errors: [`WireError::NotProduced`] for a batch refused, or not appended within
    /// `delivery_timeout` of being queued.
    pub(crate) async fn step(
        &mut self,
        cluster: &mut Cluster,
        transactional_id: Option<&TransactionalId>,
        delivery_timeout: Duration,
    ) -> Result<(), WireError> {
        while let Ok(finished) = self.finished.try_recv() {
            self.ended(cluster, finished)?;
        }
        let now = Instant::now();
        let mut ready = Vec::new();
        for (key, lane) in &self.lanes {
            let Some(front) = lane.queue.front() else { continue };
            if lane.driving {
                continue;
            }
            if now > front.since + delivery_timeout {
                let reason = format!("not appended within {} ms: {}", delivery_timeout.as_millis(), lane.last_error);
                return Err(not_produced(key, front.source_offset, reason, None));
            }
            if lane.retry_at.is_none_or(|at| at <= now) {
                ready.push(key.clone());
            }
        }
        if ready.is_empty() {
            return Ok(());
        }
        let stale: HashSet<&str> = (ready.iter())
            .filter(|k| self.lanes[*k].failures > 0 || cluster.leader(&k.0, k.1).is_none())
            .map(|k| k.0.as_str())
            .collect();
        if !stale.is_empty() {
            // A failed refresh leaves the old leaders: the next send fails or finds them moved.
            cluster.refresh(&stale.into_iter().collect::<Vec<_>>()).await.ok();
        }
        let mut by_route: HashMap<Route, Vec<(String, i32)>> = HashMap::new();
        for key in ready {
            match (cluster.leader(&key.0, key.1), cluster.missing_since(&key.0)) {
                (Some(leader), _) => by_route.entry(cluster.route(leader.broker, &key.0, key.1)).or_default().push(key),
                (None, Some(since)) if now > since + MISSING_TOPIC_MAX => {
                    let offset = self.lanes[&key].queue.front().map_or(-1, |b| b.source_offset);
                    let reason = format!(
                        "the cluster has had no topic {} for {} s (deleted while it was written?)",
                        key.0,
                        MISSING_TOPIC_MAX.as_secs()
                    );
                    return Err(not_produced(&key, offset, reason, Some(ResponseError::UnknownTopicOrPartition)));
                }
                (None, _) => self.put_off(&key, "no leader known".into(), now),
            }
        }
        for (route, keys) in by_route {
            let (conn, addr, options) = cluster.reach(route);
            let (lanes, batches, tokens) = self.hand_over(&keys);
            let (tx, generation, timeout) = (self.finished_tx.clone(), self.generation, cluster.timeout());
            let transactional_id = transactional_id.cloned();
            tokio::spawn(async move {
                // Opened here, not by the caller: a broker that does not answer (cut off, frozen)
                // holds only its own partitions.
                let (conn, opened) = match conn {
                    Some(conn) => (conn, false),
                    None => match Connection::open(&addr, &options).await {
                        Ok(conn) => (conn, true),
                        Err(e) => {
                            let retry = lanes.into_iter().map(|l| (l, e.to_string())).collect();
                            let driven = Driven { retry, ..Driven::default() };
                            let _ = tx.send(Finished { generation, route, opened: None, keys, tokens, driven });
                            return;
                        }
                    },
                };
                let driven = drive(conn.clone(), lanes, &batches, timeout, transactional_id.as_ref()).await;
                let opened = opened.then_some(conn);
                // The producer may be gone, and with it what the drive was for.
                let _ = tx.send(Finished { generation, route, opened, keys, tokens, driven });
            });
        }
        Ok(())
    }

    /// Waits until a drive ends, or at most until the next lane's backoff ends (`cap` when none
    /// waits), and takes what it answered. Errors: as [`Self::step`].
    pub(crate) async fn wait(&mut self, cluster: &mut Cluster, cap: Duration) -> Result<(), WireError> {
        let now = Instant::now();
        let next = (self.lanes.values())
            .filter(|l| !l.driving && !l.queue.is_empty())
            .filter_map(|l| l.retry_at)
            .min()
            .unwrap_or(now + cap)
            .max(now);
        match tokio::time::timeout_at(next.into(), self.finished.recv()).await {
            Ok(Some(finished)) => self.ended(cluster, finished),
            _ => Ok(()),
        }
    }

    /// The lanes of `keys` as a drive takes them (a partition not yet proven gives only its first
    /// batch), with their batches and the token of each, the lanes marked as driven.
    fn hand_over(&mut self, keys: &[(String, i32)]) -> (Vec<Lane>, Vec<Batch>, Vec<u64>) {
        let (mut lanes, mut batches, mut tokens) = (Vec::new(), Vec::new(), Vec::new());
        for key in keys {
            let lane = self.lanes.get_mut(key).expect("a lane queued");
            lane.driving = true;
            let take = if lane.proven { lane.queue.len() } else { 1 };
            let mut queue = VecDeque::new();
            for q in lane.queue.iter().take(take) {
                queue.push_back(batches.len());
                batches.push(q.batch.clone());
                tokens.push(q.token);
            }
            lanes.push(Lane { topic: key.0.clone(), partition: key.1, queue });
        }
        (lanes, batches, tokens)
    }

    /// A partition whose batches could not go: sent again after its backoff.
    fn put_off(&mut self, key: &(String, i32), reason: String, now: Instant) {
        if let Some(lane) = self.lanes.get_mut(key) {
            self.retried += lane.queue.len() as u64;
            lane.failed(reason, now);
        }
    }

    /// Takes what a drive answered: its appends, its lanes to send again.
    fn ended(&mut self, cluster: &mut Cluster, finished: Finished) -> Result<(), WireError> {
        if let Some(conn) = finished.opened {
            cluster.keep(finished.route, conn);
        }
        if finished.generation != self.generation {
            return Ok(());
        }
        let Finished { keys, tokens, driven, .. } = finished;
        let done: HashSet<u64> = driven.appended.iter().map(|(i, _)| tokens[*i]).collect();
        self.appended.extend(driven.appended.iter().map(|(i, a)| (tokens[*i], *a)));
        for key in &keys {
            let Some(lane) = self.lanes.get_mut(key) else { continue };
            lane.driving = false;
            let before = lane.queue.len();
            lane.queue.retain(|q| {
                let keep = !done.contains(&q.token);
                if !keep {
                    self.bytes -= q.batch.bytes().len();
                }
                keep
            });
            if lane.queue.len() < before {
                (lane.proven, lane.failures, lane.waits, lane.retry_at) = (true, 0, None, None);
            }
        }
        if let Some((lane, reason, error)) = driven.refused {
            let token = tokens[lane.queue[0]];
            let key = lane.key();
            let offset = self.lanes[&key].queue.iter().find(|q| q.token == token).map_or(-1, |q| q.source_offset);
            return Err(not_produced(&key, offset, reason, error));
        }
        let now = Instant::now();
        for (lane, reason) in driven.retry {
            self.put_off(&lane.key(), reason, now);
        }
        Ok(())
    }
}

fn not_produced(
    (topic, partition): &(String, i32),
    offset: i64,
    reason: String,
    error: Option<kafka_protocol::ResponseError>,
) -> WireError {
    WireError::NotProduced { topic: topic.clone(), partition: *partition, offset, reason, error }
}
