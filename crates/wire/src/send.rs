//! Batches sent to one leader over its connection: each partition's batches in a lane of their
//! own, one batch per partition in each Produce request (v3 on), up to [`MAX_IN_FLIGHT`]
//! requests unanswered (the limit under which a broker's duplicate check covers every batch
//! resent), and what the leader answered for each.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TransactionalId};
use kafka_protocol::ResponseError;

use crate::batch::Batch;
use crate::conn::{Answer, Connection};
use crate::names::by_topic;

/// Requests unanswered on one connection, as Kafka's idempotent producers allow at most.
pub const MAX_IN_FLIGHT: usize = 5;
/// Produce v11: the last version before the implicit partition adds of transactions v2
/// (KIP-890, v12) and topic ids (v13).
const PRODUCE_VERSION: i16 = 11;
/// A request takes the next batch of further partitions while it is smaller than this (bytes).
const REQUEST_BYTES: usize = 4 << 20;

/// A batch to produce: `batch` as fetched from the source, to `topic`/`partition` of the target.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub topic: String,
    pub partition: i32,
    pub batch: Batch,
}

/// Where a batch was appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The target offset of its first record.
    pub base_offset: i64,
    /// The broker's append time (ms) when the target topic uses `LogAppendTime`, else -1.
    pub log_append_time_ms: i64,
}

/// One partition's batches still to append: indexes into the batches given, in order.
pub struct Lane {
    pub topic: String,
    pub partition: i32,
    pub queue: VecDeque<usize>,
}

impl Lane {
    pub fn key(&self) -> (String, i32) {
        (self.topic.clone(), self.partition)
    }
}

/// What one leader's connection did with its lanes.
#[derive(Default)]
pub struct Driven {
    pub appended: Vec<(usize, Appended)>,
    /// Lanes with batches left, each with the error that stopped it.
    pub retry: Vec<(Lane, String)>,
    /// A lane whose first batch the broker refused for good, and the broker's error.
    pub refused: Option<(Lane, String, Option<ResponseError>)>,
}

/// A request sent and its members: (lane, batch index) pairs, one per partition.
type InFlight = (Answer<ProduceResponse>, Vec<(usize, usize)>);

/// Sends `lanes`' batches over `conn`, a partition's next batch in each next request, up to
/// [`MAX_IN_FLIGHT`] unanswered, until every batch is answered or the lane stops.
pub async fn drive(
    conn: Connection,
    mut lanes: Vec<Lane>,
    batches: &[Batch],
    timeout: Duration,
    transactional_id: Option<&TransactionalId>,
) -> Driven {
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let mut driven = Driven::default();
    let mut sent = vec![0usize; lanes.len()];
    let mut stopped: Vec<Option<String>> = vec![None; lanes.len()];
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    let mut throttled_until = Instant::now();
    let mut broken: Option<String> = None;
    loop {
        while broken.is_none() && in_flight.len() < MAX_IN_FLIGHT {
            let mut members = Vec::new();
            let mut bytes = 0;
            for (l, lane) in lanes.iter().enumerate() {
                if stopped[l].is_none() && sent[l] < lane.queue.len() && (members.is_empty() || bytes < REQUEST_BYTES) {
                    let i = lane.queue[sent[l]];
                    bytes += batches[i].bytes().len();
                    members.push((l, i));
                    sent[l] += 1;
                }
            }
            if members.is_empty() {
                break;
            }
            tokio::time::sleep_until(throttled_until.into()).await;
            let request = produce_request(&lanes, &members, batches, timeout_ms, transactional_id);
            match conn.send(&request, PRODUCE_VERSION).await {
                Ok(answer) => in_flight.push_back((answer, members)),
                Err(e) => broken = Some(e.to_string()),
            }
        }
        let Some((answer, members)) = in_flight.pop_front() else { break };
        let answer = match answer.get().await {
            Ok(answer) => answer,
            Err(e) => {
                broken.get_or_insert(e.to_string());
                continue;
            }
        };
        if answer.throttle_time_ms > 0 {
            // KIP-219: the broker answered at once and holds the connection's next requests.
            throttled_until = Instant::now() + Duration::from_millis(answer.throttle_time_ms as u64);
        }
        let answered: HashMap<(&str, i32), _> = answer
            .responses
            .iter()
            .flat_map(|t| t.partition_responses.iter().map(move |p| ((t.name.0.as_str(), p.index), p)))
            .collect();
        for (l, i) in members {
            let lane = &lanes[l];
            let Some(p) = answered.get(&(lane.topic.as_str(), lane.partition)) else {
                stopped[l].get_or_insert_with(|| "the answer left the partition out".into());
                continue;
            };
            match ResponseError::try_from_code(p.error_code) {
                None => driven
                    .appended
                    .push((i, Appended { base_offset: p.base_offset, log_append_time_ms: p.log_append_time_ms })),
                // Out of order after an earlier batch of the lane failed: that batch was not
                // appended, so neither was this one; both go again.
                Some(ResponseError::OutOfOrderSequenceNumber) if stopped[l].is_some() => {}
                Some(error) if error.is_retriable() => {
                    stopped[l].get_or_insert_with(|| format!("broker {}: {error}", conn.addr()));
                }
                Some(error) => {
                    let detail = p.error_message.as_ref().map(|m| format!(" ({})", m.as_str())).unwrap_or_default();
                    let reason = format!("broker {} refused it: {error}{detail}", conn.addr());
                    let mut lane = lanes.swap_remove(l);
                    lane.queue = [i].into();
                    driven.refused = Some((lane, reason, Some(error)));
                    return driven;
                }
            }
        }
    }
    let done: HashSet<usize> = driven.appended.iter().map(|(i, _)| *i).collect();
    for (l, mut lane) in lanes.into_iter().enumerate() {
        lane.queue.retain(|i| !done.contains(i));
        if !lane.queue.is_empty() {
            let reason = stopped[l].take().or_else(|| broken.clone()).unwrap_or_else(|| "not answered".into());
            driven.retry.push((lane, reason));
        }
    }
    driven
}

/// The Produce request of `members` (lane, batch index), one batch per partition, naming the
/// producer's transactional id when it has one.
fn produce_request(
    lanes: &[Lane],
    members: &[(usize, usize)],
    batches: &[Batch],
    timeout_ms: i32,
    transactional_id: Option<&TransactionalId>,
) -> ProduceRequest {
    let partitions = members.iter().map(|&(l, i)| {
        let lane = &lanes[l];
        let partition =
            PartitionProduceData::default().with_index(lane.partition).with_records(Some(batches[i].bytes().clone()));
        (lane.topic.as_str(), partition)
    });
    let topics = by_topic(partitions)
        .into_iter()
        .map(|(name, partitions)| TopicProduceData::default().with_name(name).with_partition_data(partitions))
        .collect();
    ProduceRequest::default()
        .with_transactional_id(transactional_id.cloned())
        .with_acks(-1)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(topics)
}
