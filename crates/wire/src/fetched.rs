//! What a fetch asks and answers, per partition: [`FetchAt`] in, [`Fetched`] out, and the rule of
//! a `read_committed` reader over the answer ([`Fetched::committed`]).

use std::collections::HashSet;

use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use crate::batch::Batch;
use crate::batch::{self, Marker};
use crate::error::WireError;

/// A partition to fetch, from `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchAt {
    pub topic: String,
    /// The id of the topic this partition is read under (KIP-516): a fetch names the topic by
    /// it (Fetch v13+), so once the topic is deleted, and perhaps created again under the same
    /// name, the leader answers [`ResponseError::UnknownTopicId`] instead of the new topic's
    /// records at the old topic's offsets. Nil: the id the cluster's metadata gives at the fetch.
    pub topic_id: Uuid,
    pub partition: i32,
    pub offset: i64,
    /// The leader epoch of the last batch read before `offset` (its
    /// [`Batch::partition_leader_epoch`]), or -1 when none was: with it, the leader says when its
    /// log diverged from what was read ([`Fetched::diverging`], KIP-320).
    pub last_fetched_epoch: i32,
}

/// Where the leader's log diverged from the one a partition was read from (after an unclean
/// leader election): the records read from `end_offset` on are not in the leader's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Diverging {
    /// The largest epoch of the leader's log not above the one the fetch named.
    pub epoch: i32,
    /// Where that epoch ends in the leader's log: the offset to read on from.
    pub end_offset: i64,
}

/// A transaction the leader lists as aborted in the fetched range: `producer_id`'s records from
/// `first_offset` up to its abort marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aborted {
    pub producer_id: i64,
    pub first_offset: i64,
}

/// What a fetch returned for one partition.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub topic: String,
    /// The topic id the partition was asked under (nil when the broker was asked by name).
    pub topic_id: Uuid,
    pub partition: i32,
    /// The offset this answer is for: the one asked in the request it answers.
    pub offset: i64,
    /// The partition's error (a leader that moved, an offset out of range, a topic id the leader
    /// does not know); no batches with it.
    pub error: Option<ResponseError>,
    pub high_watermark: i64,
    /// The end of what a `read_committed` consumer reads: batches stop before it.
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// The leader's log diverged from what was read before the offset asked (KIP-320); no
    /// batches with it.
    pub diverging: Option<Diverging>,
    pub aborted: Vec<Aborted>,
    /// The whole batches fetched, in log order: the first may start before the offset asked (a
    /// batch is returned whole).
    pub batches: Vec<Batch>,
}

impl Fetched {
    /// One partition of a Fetch answer, asked under `topic` (`topic_id`) at `offset`. Errors:
    /// [`WireError::Batch`] when its records do not split into batches.
    pub(crate) fn of_answer(topic: &str, topic_id: Uuid, offset: i64, p: PartitionData) -> Result<Self, WireError> {
        let batches = match p.records {
            Some(records) => batch::split(records).map_err(|source| WireError::Batch {
                topic: topic.to_string(),
                partition: p.partition_index,
                source,
            })?,
            None => Vec::new(),
        };
        Ok(Self {
            topic: topic.to_string(),
            topic_id,
            partition: p.partition_index,
            offset,
            error: ResponseError::try_from_code(p.error_code),
            high_watermark: p.high_watermark,
            last_stable_offset: p.last_stable_offset,
            log_start_offset: p.log_start_offset,
            diverging: (p.diverging_epoch.epoch >= 0)
                .then_some(Diverging { epoch: p.diverging_epoch.epoch, end_offset: p.diverging_epoch.end_offset }),
            aborted: p
                .aborted_transactions
                .unwrap_or_default()
                .iter()
                .map(|a| Aborted { producer_id: a.producer_id.0, first_offset: a.first_offset })
                .collect(),
            batches,
        })
    }

    /// The data batches a `read_committed` consumer reads, in log order: without control
    /// batches, and without the batches of each aborted transaction from its first offset up to
    /// its producer's abort marker (the rule of Kafka's Java consumer).
    pub fn committed(&self) -> Vec<&Batch> {
        let mut aborted = self.aborted.clone();
        aborted.sort_by_key(|a| a.first_offset);
        let (mut next, mut open) = (aborted.iter().peekable(), HashSet::new());
        let mut kept = Vec::with_capacity(self.batches.len());
        for b in &self.batches {
            while let Some(a) = next.next_if(|a| a.first_offset <= b.last_offset()) {
                open.insert(a.producer_id);
            }
            if b.is_control() {
                if b.marker() == Some(Marker::Abort) {
                    open.remove(&b.producer_id());
                }
            } else if !(b.is_transactional() && open.contains(&b.producer_id())) {
                kept.push(b);
            }
        }
        kept
    }

    /// Whether the partition's topic is gone under the id it was asked by: deleted, and perhaps
    /// created again under its name with another id (KIP-516).
    pub fn topic_gone(&self) -> bool {
        self.error == Some(ResponseError::UnknownTopicId)
    }
}
