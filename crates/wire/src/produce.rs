//! An idempotent producer of whole record batches (KIP-98 idempotence, `acks=all`): each batch
//! goes to its partition's leader with this producer's id, epoch and next sequence, its records'
//! bytes as they came.
//!
//! Each leader's batches go over its connection as `crate::send` drives them. A batch that fails
//! with a retriable error (a leader that moved, a broker restarting, a lost connection) is sent
//! again with the same sequence after the metadata is refreshed, with its partition's later
//! batches, until the delivery timeout: the broker appends it once, and answers a resent batch
//! it already holds with its first offset.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kafka_protocol::messages::InitProducerIdRequest;
use kafka_protocol::ResponseError;

use crate::cluster::Cluster;
use crate::error::WireError;
use crate::lanes::Lanes;
use crate::retry::{doubling, BACKOFF, MAX_BACKOFF};
use crate::send::{Appended, Outgoing};
use crate::transactional::Transactions;

/// InitProducerId v4 (KIP-588), answered by Kafka 2.7 on.
pub(crate) const INIT_PRODUCER_ID_VERSION: i16 = 4;

/// An idempotent producer on one cluster; transactional when started by
/// [`Producer::init_transactional`].
pub struct Producer {
    pub(crate) cluster: Cluster,
    pub(crate) id: i64,
    pub(crate) epoch: i16,
    pub(crate) delivery_timeout: Duration,
    /// The next base sequence of each partition produced to.
    pub(crate) sequences: HashMap<(String, i32), i32>,
    /// The batches sent and not yet appended, each partition's in order.
    pub(crate) lanes: Lanes,
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
                            lanes: Lanes::default(),
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
        self.lanes.retried
    }

    /// Queues `batches` to be produced, in order within each partition behind the batches
    /// already queued, and sends what can go ([`Self::appended`]); returns the token of the first,
    /// the others' following in order (one more each). Each batch gets this producer's id and
    /// epoch, its partition's next sequence, the transactional bit set when the producer is
    /// transactional (cleared otherwise) and its CRC32C recomputed; all else is its bytes as
    /// fetched. A transactional producer first adds the partitions new to the open transaction
    /// (AddPartitionsToTxn). Errors: as [`Self::appended`]; transactional,
    /// [`WireError::Transaction`] outside a transaction, and the errors of adding the partitions
    /// ([`Producer::begin`]).
    pub async fn send(&mut self, batches: &[Outgoing]) -> Result<u64, WireError> {
        let transactional = self.transactions.is_some();
        if transactional {
            self.add_partitions(batches).await?;
        }
        let mut first = None;
        for out in batches {
            let sequence = self.sequences.entry((out.topic.clone(), out.partition)).or_insert(0);
            let batch = out.batch.for_producer(self.id, self.epoch, *sequence, transactional);
            *sequence = next_sequence(*sequence, out.batch.last_offset_delta() + 1);
            let token = self.lanes.queue(&out.topic, out.partition, batch, out.batch.base_offset());
            first.get_or_insert(token);
        }
        self.step().await?;
        Ok(first.unwrap_or_default())
    }

    /// The batches appended since the last call, as (token, where), each partition's in the
    /// order sent; the batches that can go are sent (a leader's partitions in a request stream
    /// of their own, so a leader that does not answer holds only its own). Never waits for an
    /// answer. Errors: [`WireError::NotProduced`] naming the topic, partition and source offset
    /// of a batch the target refuses (too large, invalid, a fenced producer) or that was not
    /// appended within the delivery timeout of being sent; the producer's sequences are then
    /// unknown and a new producer must be started (transactional: [`Producer::abort`] bumps its
    /// epoch).
    pub async fn appended(&mut self) -> Result<Vec<(u64, Appended)>, WireError> {
        self.step().await?;
        Ok(self.lanes.take_appended())
    }

    /// [`Self::appended`], waiting until every batch sent is appended. Cancel-safe: the appends of
    /// a call given up are handed back by the next. Errors: as [`Self::appended`].
    pub async fn all_appended(&mut self) -> Result<Vec<(u64, Appended)>, WireError> {
        self.step().await?;
        while !self.lanes.is_empty() {
            self.lanes.wait(&mut self.cluster, MAX_BACKOFF).await?;
            self.step().await?;
        }
        Ok(self.lanes.take_appended())
    }

    /// [`Self::appended`], waiting first until some batch is appended or a partition may be sent
    /// again (at most `cap`). Errors: as [`Self::appended`].
    pub async fn some_appended(&mut self, cap: Duration) -> Result<Vec<(u64, Appended)>, WireError> {
        self.step().await?;
        if !self.lanes.is_empty() {
            self.lanes.wait(&mut self.cluster, cap).await?;
        }
        self.appended().await
    }

    /// Bytes of the batches sent and not yet appended.
    pub fn queued_bytes(&self) -> usize {
        self.lanes.bytes()
    }

    /// Produces `batches` ([`Self::send`]) and waits until each is appended
    /// ([`Self::all_appended`]), returning where, in the order given; the appends of batches
    /// sent before are handed back by the next [`Self::appended`]. Errors: as those two.
    pub async fn produce(&mut self, batches: &[Outgoing]) -> Result<Vec<Appended>, WireError> {
        let first = self.send(batches).await?;
        let mut mine: Vec<Option<Appended>> = vec![None; batches.len()];
        let mut others = Vec::new();
        for (token, a) in self.all_appended().await? {
            match token.checked_sub(first).and_then(|i| mine.get_mut(i as usize)) {
                Some(slot) => *slot = Some(a),
                None => others.push((token, a)),
            }
        }
        self.lanes.hand_back(others);
        (mine.into_iter().zip(batches))
            .map(|(a, out)| a.ok_or_else(|| not_produced(out, "not answered".into(), None)))
            .collect()
    }

    /// Takes what the drives answered and sends what can go ([`Lanes::step`]).
    async fn step(&mut self) -> Result<(), WireError> {
        let transactional_id = self.transactions.as_ref().map(Transactions::request_id);
        self.lanes.step(&mut self.cluster, transactional_id.as_ref(), self.delivery_timeout).await
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
