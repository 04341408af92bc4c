//! ListOffsets: where a partition's log starts, where a `read_committed` reader's end is (the last
//! stable offset), or the first offset at or after a time, asked of each partition's leader.

use std::collections::HashMap;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::ListOffsetsRequest;
use kafka_protocol::ResponseError;

use crate::cluster::Cluster;
use crate::error::WireError;
use crate::names::by_topic;

/// ListOffsets v7 (the first with the max-timestamp spec; Kafka 3.0), flexible since v6.
const LIST_OFFSETS_VERSION: i16 = 7;
/// `isolation_level` of `read_committed`: the latest offset is the last stable offset.
const READ_COMMITTED: i8 = 1;

/// What ListOffsets looks for in a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The last stable offset: the end of what a `read_committed` reader reads.
    Latest,
    /// The first offset whose record's timestamp is at or after this one (ms since the epoch).
    Timestamp(i64),
}

impl OffsetSpec {
    /// Kafka's encoding: -2 earliest, -1 latest, else the timestamp.
    fn timestamp(self) -> i64 {
        match self {
            Self::Earliest => -2,
            Self::Latest => -1,
            Self::Timestamp(ms) => ms,
        }
    }
}

/// A partition's offset as its leader answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub topic: String,
    pub partition: i32,
    /// The offset, or -1 when no record is at or after the timestamp asked; or the partition's
    /// error (a leader that moved: refresh and ask again).
    pub offset: Result<i64, ResponseError>,
}

impl Cluster {
    /// The offsets `spec` names in `partitions` (topic, partition), one request per leader, sent
    /// together, each naming the leader epoch known (KIP-320). Errors: [`WireError::NoLeader`]
    /// for a partition not refreshed; a leader not answering, after which the leaders are
    /// refreshed for the next call.
    pub async fn list_offsets(
        &mut self,
        partitions: &[(String, i32)],
        spec: OffsetSpec,
    ) -> Result<Vec<Listed>, WireError> {
        let mut by_leader: HashMap<i32, Vec<ListOffsetsPartition>> = HashMap::new();
        let mut topics_of: HashMap<i32, Vec<&str>> = HashMap::new();
        for (topic, partition) in partitions {
            let leader = self.known_leader(topic, *partition)?;
            by_leader.entry(leader.broker).or_default().push(
                ListOffsetsPartition::default()
                    .with_partition_index(*partition)
                    .with_current_leader_epoch(leader.epoch)
                    .with_timestamp(spec.timestamp()),
            );
            topics_of.entry(leader.broker).or_default().push(topic);
        }
        let timeout_ms = i32::try_from(self.timeout().as_millis()).unwrap_or(i32::MAX);
        let mut asking = Vec::with_capacity(by_leader.len());
        let mut failure = None;
        for (broker, wanted) in by_leader {
            let Some(conn) = self.connection_or_failure(broker, &mut failure).await else { continue };
            let topics = by_topic(topics_of[&broker].iter().copied().zip(wanted))
                .into_iter()
                .map(|(name, partitions)| ListOffsetsTopic::default().with_name(name).with_partitions(partitions))
                .collect();
            let request = ListOffsetsRequest::default()
                .with_replica_id((-1).into())
                .with_isolation_level(READ_COMMITTED)
                .with_timeout_ms(timeout_ms)
                .with_topics(topics);
            asking.push(async move { conn.call(&request, LIST_OFFSETS_VERSION).await });
        }
        let mut listed = Vec::with_capacity(partitions.len());
        for answer in futures::future::join_all(asking).await {
            let answer = match answer {
                Ok(answer) => answer,
                Err(e) => {
                    failure.get_or_insert(e);
                    continue;
                }
            };
            for topic in answer.topics {
                for p in topic.partitions {
                    let offset = match ResponseError::try_from_code(p.error_code) {
                        None => Ok(p.offset),
                        Some(error) => Err(error),
                    };
                    listed.push(Listed { topic: topic.name.0.to_string(), partition: p.partition_index, offset });
                }
            }
        }
        if let Some(e) = failure {
            let topics: Vec<String> = partitions.iter().map(|(t, _)| t.clone()).collect();
            self.refresh_moved(&topics).await;
            return Err(e);
        }
        Ok(listed)
    }
}
