//! The copy kind on the source side (`copy`): what reads a slot's partitions. Both kinds take
//! the resume decision's starts and offer assign / unassign / read / rewind / release; the
//! source around them (listing, resume, recreation, throttle) is written once. A third kind is
//! one variant here and its module.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::error::KafkaError;
use rdkafka::TopicPartitionList;
use strait_connect::{ConnectError, ConnectRecord, ConnectResult};
use strait_wire::Uuid;

use super::batches::BatchReader;
use super::records::{RecordLane, TopicNames};
use crate::config::{CopyKind, Flow};
use crate::consume::SourceReader;
use crate::record::ReplicatedRecord;

/// Records a poll returns, with their bytes.
pub(super) type Read = (Vec<ConnectRecord<(), ReplicatedRecord>>, usize);

/// Where an unassigned partition stood: the offset after the last record handed out, and with
/// `copy = "batches"` the end of its log as last fetched by its topic id.
#[derive(Default)]
pub(super) struct Unassigned {
    pub(super) handed: HashMap<i32, i64>,
    pub(super) ends: HashMap<i32, i64>,
}

/// What reads the partitions of a slot.
pub(super) enum PartitionReader {
    /// `copy = "records"`: the slot's lanes of librdkafka's consumers, by topic name.
    Records(RecordLane),
    /// `copy = "batches"`: whole batches fetched by topic id (KIP-516) through `strait-wire`.
    Batches(BatchReader),
}

impl PartitionReader {
    /// The reader of `flow`'s copy kind; records are read through `lanes`, one per source
    /// consumer. Errors: as [`BatchReader::start`].
    pub(super) async fn start(flow: &Flow, lanes: Vec<Arc<SourceReader>>) -> ConnectResult<Self> {
        Ok(match flow.copy.kind {
            CopyKind::Records => Self::Records(RecordLane::new(lanes)),
            CopyKind::Batches => Self::Batches(BatchReader::start(flow, BatchReader::queue_share(flow)).await?),
        })
    }

    /// Called at each poll. Returns whether the source should be listed now: a leader no longer
    /// knew the id a partition is read under (a topic deleted, perhaps created again).
    pub(super) fn tick(&mut self) -> bool {
        match self {
            Self::Records(lane) => {
                lane.tick();
                false
            }
            Self::Batches(batches) => batches.take_topic_gone(),
        }
    }

    /// Whether partitions are read by topic name, so a topic deleted and created again under it
    /// would be read at the old topic's offsets unless paused ([`Self::pause`]).
    pub(super) fn reads_by_name(&self) -> bool {
        matches!(self, Self::Records(_))
    }

    /// Reads `tpl`'s partitions from their offsets, under the id `id_of` gives each topic.
    /// Errors: the client refuses the assignment; an offset the reader does not take.
    pub(super) fn assign(&self, tpl: &TopicPartitionList, id_of: impl Fn(&str) -> Option<Uuid>) -> ConnectResult<()> {
        match self {
            Self::Records(lane) => lane.assign(tpl),
            Self::Batches(batches) => batches.assign(tpl, id_of),
        }
    }

    /// Reads `tpl`'s partitions again from their offsets, dropping what was fetched.
    /// Errors: as [`Self::assign`].
    pub(super) async fn rewind(
        &self,
        tpl: TopicPartitionList,
        id_of: impl Fn(&str) -> Option<Uuid>,
        flow: &str,
    ) -> ConnectResult<()> {
        match self {
            Self::Records(lane) => lane.rewind(tpl, flow).await,
            Self::Batches(batches) => batches.assign(&tpl, id_of),
        }
    }

    /// Stops reading `partitions` of `topic`. Errors: the consumer refuses.
    pub(super) async fn unassign(&self, topic: &str, partitions: &[i32]) -> ConnectResult<Unassigned> {
        match self {
            Self::Records(lane) => {
                let handed = lane.unassign(topic, partitions).await.map_err(|e| {
                    ConnectError::backend(format!("unassign the partitions of recreated topic {topic}"), e)
                })?;
                Ok(Unassigned { handed, ends: HashMap::new() })
            }
            Self::Batches(batches) => {
                let left = batches.unassign(topic, partitions);
                let ends = left.iter().filter_map(|(p, l)| Some((*p, l.end?))).collect();
                let handed = left.into_iter().filter_map(|(p, l)| Some((p, l.handed?))).collect();
                Ok(Unassigned { handed, ends })
            }
        }
    }

    /// Pauses the partitions of `pause`, resumes those of `resume` (only a reader by name
    /// needs to: [`Self::reads_by_name`]). Errors: the consumer refuses.
    pub(super) async fn pause(&self, pause: TopicPartitionList, resume: TopicPartitionList) -> Result<(), KafkaError> {
        match self {
            Self::Records(lane) => lane.pause(pause, resume).await,
            Self::Batches(_) => Ok(()),
        }
    }

    /// Up to `max_records` records (batches count one each) and about `max_bytes`, waiting up
    /// to `timeout` for the first. Errors: a refusal or failure no retry of the client mends.
    pub(super) async fn read(
        &self,
        names: &mut TopicNames,
        max_records: usize,
        max_bytes: usize,
        timeout: Duration,
        flow: &Arc<Flow>,
    ) -> ConnectResult<Read> {
        match self {
            Self::Records(lane) => lane.read(names, max_records, max_bytes, timeout, flow).await,
            Self::Batches(batches) => batches.drain(names, max_records, max_bytes, timeout).await,
        }
    }

    /// Stops reading every partition of this slot. Errors: the consumer refuses.
    pub(super) async fn release(&self) -> ConnectResult<()> {
        match self {
            Self::Records(lane) => lane.release().await,
            Self::Batches(batches) => {
                batches.release();
                Ok(())
            }
        }
    }
}
