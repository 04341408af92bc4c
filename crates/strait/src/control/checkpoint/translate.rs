//! Group offset translation for one flow: the offset-syncs topic read into MM2's
//! `OffsetSyncStore`, and a group's committed source offsets turned into target offsets.
//! Shared by the checkpoint task and `strait translate-offsets`, so both give the same numbers.

use std::sync::Arc;

use rdkafka::error::KafkaError;
use serde::Serialize;
use strait_mm2::{OffsetSync, OffsetSyncStore, UpstreamOffset};

use super::groups::GroupClient;
use crate::config::Flow;
use crate::kafka::{blocking, StateReader};

/// One translated partition of a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Translation {
    /// Source topic name.
    pub source_topic: String,
    /// Target-side topic name (after the replication policy), as checkpoints carry it.
    pub target_topic: String,
    /// Partition (same on both sides).
    pub partition: i32,
    /// The group's committed offset on the source.
    pub upstream: i64,
    /// Translated offset on the target; `None` when no offset sync lies at or below `upstream`.
    pub downstream: Option<i64>,
    /// The commit's metadata string, carried into checkpoints.
    #[serde(skip)]
    pub metadata: String,
}

/// Reads a flow's offset syncs and translates group offsets with them.
pub struct Translator {
    flow: Arc<Flow>,
    reader: Arc<StateReader>,
    topic: String,
    /// Next offset of the syncs topic to read; `None` until assigned.
    next: Option<i64>,
    store: OffsetSyncStore,
}

impl Translator {
    /// A translator for `flow`; nothing is read until [`Translator::catch_up`].
    pub fn new(flow: Arc<Flow>) -> Result<Self, KafkaError> {
        let (cluster, topic) = flow.offset_syncs();
        // read_committed: syncs of an aborted exactly-once batch are never used.
        let reader = StateReader::new(cluster, "strait-offset-syncs-reader")?;
        // The checkpoint task reloads its checkpoints before translating and never emits a rewind,
        // and the CLI only reads, so both may keep the whole history while loading.
        Ok(Self { flow, reader: Arc::new(reader), topic, next: None, store: OffsetSyncStore::keeping_history() })
    }

    /// Reads the offset-syncs topic up to its current end. The first complete read makes the
    /// store ready (MM2 translates nothing before). A topic that does not exist yet counts as
    /// empty. Undecodable records are skipped with a warning, as MM2 does.
    pub async fn catch_up(&mut self) -> Result<(), KafkaError> {
        let reader = self.reader.clone();
        let topic = self.topic.clone();
        let next = self.next;
        let (records, next) = blocking(move || reader.read_new_records(&topic, next)).await?;
        self.next = next;
        for (offset, key, value) in records {
            match OffsetSync::decode(&key, &value) {
                Ok(sync) => self.store.apply(&sync),
                Err(e) => tracing::warn!(topic = %self.topic, offset, error = %e, "skipping undecodable offset sync"),
            }
        }
        if !self.store.is_ready() {
            self.store.mark_read_to_end();
        }
        Ok(())
    }

    /// The source partitions this flow replicates (one metadata request).
    pub async fn replicated_partitions(&self, source: &GroupClient) -> Result<Vec<(String, i32)>, KafkaError> {
        source.partitions(|t| self.flow.replicates(t)).await
    }

    /// Translates `group`'s committed offsets on `partitions` (from
    /// [`Translator::replicated_partitions`]).
    pub async fn translate_group(
        &self,
        source: &mut GroupClient,
        group: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<Translation>, KafkaError> {
        let committed = source.committed(group, partitions).await?;
        let mut out: Vec<Translation> = committed
            .into_iter()
            .map(|((topic, partition), (upstream, metadata))| Translation {
                target_topic: self.flow.policy.rename_for_checkpoint(
                    &topic,
                    &self.flow.source.alias,
                    &self.flow.target.alias,
                ),
                downstream: self.store.translate(&topic, partition, UpstreamOffset(upstream)).map(|d| d.0),
                source_topic: topic,
                partition,
                upstream,
                metadata,
            })
            .collect();
        out.sort_by(|a, b| (&a.source_topic, a.partition).cmp(&(&b.source_topic, b.partition)));
        Ok(out)
    }
}
