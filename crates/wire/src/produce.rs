//! An idempotent producer of whole record batches (KIP-98 idempotence, `acks=all`): each batch
//! goes to its partition's leader with this producer's id, epoch and next sequence, its records'
//! bytes as they came.
//!
//! Each leader's batches go over its connection as `crate::send` drives them. A batch that fails
//! with a retriable error (a leader that moved, a broker restarting, a lost connection) is sent
//! again with the same sequence after the metadata is refreshed, with its partition's later
//! batches, until the delivery timeout: the broker appends it once, and answers a resent batch
//! it already holds with its first offset.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use kafka_protocol::messages::InitProducerIdRequest;
use kafka_protocol::ResponseError;

use crate::cluster::Cluster;
use crate::error::WireError;
use crate::retry::doubling;
use crate::send::{drive, Appended, Lane, Outgoing};
use crate::transactional::Transactions;

/// InitProducerId v4 (KIP-588), answered by Kafka 2.7 on.
pub(crate) const INIT_PRODUCER_ID_VERSION: i16 = 4;
/// The first wait before a batch is sent again, doubled up to [`MAX_BACKOFF`].
const BACKOFF: Duration = Duration::from_millis(50);
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// An idempotent producer on one cluster; transactional when started by
/// [`Producer::init_transactional`].
pub struct Producer {
    pub(crate) cluster: Cluster,
    pub(crate) id: i64,
    pub(crate) epoch: i16,
    pub(crate) delivery_timeout: Duration,
    /// The next base sequence of each partition produced to.
    pub(crate) sequences: HashMap<(String, i32), i32>,
    /// Batches put off to a later round by a retriable error, since the start.
    pub(crate) retried: u64,
    /// Its transactional id and the open transaction, when transactional.
    pub(crate) transactions: Option<Transactions>,
}

impl Producer {
    /// Asks `cluster` for a producer id (InitProducerId without a transactional id, from any
    /// broker), retrying retriable errors until `delivery_timeout`; each batch later produced is
    /// retried as long. Errors: the last broker's error.
    pub async fn init(mut cluster: Cluster, delivery_timeout: Duration) -> Result<Self, WireError> {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(i32::MAX)
            .with_producer_id((-1).into())
            .with_producer_epoch(-1);
        let deadline = Instant::now() + delivery_timeout;
        let mut waits = doubling(BACKOFF, MAX_BACKOFF);
        loop {
            let mut failure = None;
            for broker in cluster.broker_ids() {
                let answer = match cluster.connection(broker).await {
                    Ok(conn) => conn
                        .call(&request, INIT_PRODUCER_ID_VERSION)
                        .await
                        .and_then(|a| conn.check(a.error_code, "InitProducerId").map(|()| a)),
                    Err(e) => Err(e),
                };
                match answer {
                    Ok(a) => {
                        let (id, epoch) = (a.producer_id.0, a.producer_epoch);
                        return Ok(Self {
                            cluster,
                            id,
                            epoch,
                            delivery_timeout,
                            sequences: HashMap::new(),
                            retried: 0,
                            transactions: None,
                        });
                    }
                    Err(e) if e.is_retriable() => failure = Some(e),
                    Err(e) => return Err(e),
                }
            }
            let failure = failure.unwrap_or(WireError::NoBroker);
            let wait = waits.next().unwrap_or(MAX_BACKOFF);
            if Instant::now() + wait > deadline {
                return Err(failure);
            }
            tokio::time::sleep(wait).await;
            cluster.refresh(&[]).await.ok();
        }
    }

    /// The producer id and epoch the batches carry.
    pub fn id(&self) -> (i64, i16) {
        (self.id, self.epoch)
    }

    /// Batches put off to a later round by a retriable error (a leader that moved, a lost
    /// connection) since the start, counted once per round they wait for.
    pub fn retried(&self) -> u64 {
        self.retried
    }

    /// Produces `batches`, in order within each partition, and returns where each was appended,
    /// in the order given. Each batch gets this producer's id and epoch, its partition's next
    /// sequence, the transactional bit set when the producer is transactional (cleared
    /// otherwise) and its CRC32C recomputed; all else is its bytes as fetched. A transactional
    /// producer first adds the partitions new to the open transaction (AddPartitionsToTxn).
    /// Errors: [`WireError::NotProduced`] naming the topic, partition and source offset of a
    /// batch the target refuses (too large, invalid, a fenced producer) or that was not
    /// appended within the delivery timeout; the producer's sequences are then unknown and a
    /// new producer must be started (transactional: [`Producer::abort`] bumps its epoch).
    /// Transactional, [`WireError::Transaction`] outside a transaction, and the errors of
    /// adding the partitions ([`Producer::begin`]).
    pub async fn produce(&mut self, batches: &[Outgoing]) -> Result<Vec<Appended>, WireError> {
        let transactional = self.transactions.is_some();
        if transactional {
            self.add_partitions(batches).await?;
        }
        let transactional_id = self.transactions.as_ref().map(Transactions::request_id);
        let mut lanes: Vec<Lane> = Vec::new();
        let mut lane_of: HashMap<(&str, i32), usize> = HashMap::new();
        let mut rewritten = Vec::with_capacity(batches.len());
        for (i, out) in batches.iter().enumerate() {
            let key = (out.topic.clone(), out.partition);
            let sequence = self.sequences.entry(key).or_insert(0);
            rewritten.push(out.batch.for_producer(self.id, self.epoch, *sequence, transactional));
            *sequence = next_sequence(*sequence, out.batch.last_offset_delta() + 1);
            let l = *lane_of.entry((&out.topic, out.partition)).or_insert_with(|| {
                lanes.push(Lane { topic: out.topic.clone(), partition: out.partition, queue: VecDeque::new() });
                lanes.len() - 1
            });
            lanes[l].queue.push_back(i);
        }
        let unknown: HashSet<&str> = lanes
            .iter()
            .filter(|l| self.cluster.leader(&l.topic, l.partition).is_none())
            .map(|l| l.topic.as_str())
            .collect();
        if !unknown.is_empty() {
            // Not fatal: a partition still without a leader waits a round and is asked again.
            self.cluster.refresh(&unknown.into_iter().collect::<Vec<_>>()).await.ok();
        }
        let mut appended: Vec<Option<Appended>> = vec![None; batches.len()];
        let deadline = Instant::now() + self.delivery_timeout;
        let mut waits = doubling(BACKOFF, MAX_BACKOFF);
        while !lanes.is_empty() {
            let mut by_leader: HashMap<i32, Vec<Lane>> = HashMap::new();
            let mut waiting = Vec::new();
            let mut last_error: HashMap<(String, i32), String> = HashMap::new();
            for lane in lanes {
                match self.cluster.leader(&lane.topic, lane.partition) {
                    Some(leader) => by_leader.entry(leader.broker).or_default().push(lane),
                    None => {
                        last_error.insert(lane.key(), "no leader known".into());
                        waiting.push(lane);
                    }
                }
            }
            let mut driving = Vec::new();
            for (broker, lanes) in by_leader {
                match self.cluster.connection(broker).await {
                    Ok(conn) => {
                        driving.push(drive(conn, lanes, &rewritten, self.cluster.timeout(), transactional_id.as_ref()))
                    }
                    Err(e) => {
                        for lane in lanes {
                            last_error.insert(lane.key(), e.to_string());
                            waiting.push(lane);
                        }
                    }
                }
            }
            for driven in futures::future::join_all(driving).await {
                for (i, a) in driven.appended {
                    appended[i] = Some(a);
                }
                if let Some((lane, reason, error)) = driven.refused {
                    let i = lane.queue[0];
                    return Err(not_produced(&batches[i], reason, error));
                }
                for (lane, reason) in driven.retry {
                    last_error.insert(lane.key(), reason);
                    waiting.push(lane);
                }
            }
            for lane in &mut waiting {
                lane.queue.retain(|i| appended[*i].is_none());
            }
            waiting.retain(|l| !l.queue.is_empty());
            lanes = waiting;
            if lanes.is_empty() {
                break;
            }
            let wait = waits.next().unwrap_or(MAX_BACKOFF);
            if Instant::now() + wait > deadline {
                let lane = &lanes[0];
                let reason = last_error.remove(&lane.key()).unwrap_or_default();
                let reason = format!("not appended within {} ms: {reason}", self.delivery_timeout.as_millis());
                return Err(not_produced(&batches[lane.queue[0]], reason, None));
            }
            self.retried += lanes.iter().map(|l| l.queue.len() as u64).sum::<u64>();
            tokio::time::sleep(wait).await;
            let topics: HashSet<&str> = lanes.iter().map(|l| l.topic.as_str()).collect();
            // A failed refresh leaves the old leaders: the next round fails or finds them moved.
            self.cluster.refresh(&topics.into_iter().collect::<Vec<_>>()).await.ok();
        }
        // Every lane ended empty, so every batch has its append.
        appended
            .into_iter()
            .zip(batches)
            .map(|(a, out)| a.ok_or_else(|| not_produced(out, "not answered".into(), None)))
            .collect()
    }
}

fn not_produced(out: &Outgoing, reason: String, error: Option<ResponseError>) -> WireError {
    WireError::NotProduced {
        topic: out.topic.clone(),
        partition: out.partition,
        offset: out.batch.base_offset(),
        reason,
        error,
    }
}

/// `sequence` advanced by `by` records, wrapping from `i32::MAX` to 0 as Kafka's sequences do.
fn next_sequence(sequence: i32, by: i32) -> i32 {
    if sequence > i32::MAX - by {
        by - (i32::MAX - sequence) - 1
    } else {
        sequence + by
    }
}

#[cfg(test)]
mod tests {
    use super::next_sequence;

    #[test]
    fn sequences_wrap_to_zero_past_the_largest() {
        assert_eq!(next_sequence(0, 5), 5);
        assert_eq!(next_sequence(i32::MAX - 5, 5), i32::MAX);
        assert_eq!(next_sequence(i32::MAX - 4, 5), 0);
        assert_eq!(next_sequence(i32::MAX, 3), 2);
    }
}
