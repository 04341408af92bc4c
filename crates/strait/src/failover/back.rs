//! Moving a group home along the other flow: with the default replication policy, the records a
//! group read on B from `A.orders` came from A's `orders` by the flow A->B, which the flow B->A
//! does not carry back (they would loop). Their offsets go back through A->B's offset syncs: a
//! group at offset X of `A.orders` on B resumes on A's `orders` at the first record it has not
//! read. With the identity policy both flows share the topic names and B->A translates them.

use std::collections::BTreeMap;
use std::sync::Arc;

use rdkafka::error::KafkaError;

use strait_connect::ConnectError;

use super::history::SyncHistory;
use super::on_cluster_of;
use super::report::GroupPartition;
use crate::config::Flow;
use crate::control::checkpoint::groups::GroupClient;
use crate::positions::{self, Positions};

/// The flow A->B (`reverse`) read for moving groups from B to A (`flow`).
pub struct Back {
    /// Topics on B written by `reverse` and not carried by `flow`: B's name → A's name.
    topics: BTreeMap<String, String>,
    /// `(B topic, partition)` of every such topic.
    partitions: Vec<(String, i32)>,
    saved: Positions,
    history: SyncHistory,
}

impl Back {
    /// Reads `reverse`'s saved positions and offset syncs. Errors: a cluster cannot be read,
    /// named with its role in `flow`.
    pub async fn load(flow: &Flow, reverse: &Arc<Flow>) -> Result<Self, ConnectError> {
        let saved =
            positions::load(&reverse.target, &reverse.name).await.map_err(on_cluster_of(flow, &reverse.target))?;
        let mut topics = BTreeMap::new();
        let mut partitions = Vec::new();
        for (topic, partition) in saved.keys() {
            let on_b = reverse.policy.remote_topic(&reverse.source.alias, topic);
            if flow.replicates(&on_b) {
                continue; // the identity policy: `flow` translates it
            }
            topics.insert(on_b.clone(), topic.clone());
            partitions.push((on_b, *partition));
        }
        partitions.sort();
        let history = SyncHistory::load(reverse).await.map_err(on_cluster_of(flow, reverse.offset_syncs().0))?;
        Ok(Self { topics, partitions, saved, history })
    }

    /// `group`'s rows for the topics `reverse` wrote on B, from its committed offsets there.
    /// Errors: B cannot be read.
    pub async fn rows(&self, source: &mut GroupClient, group: &str) -> Result<Vec<GroupPartition>, KafkaError> {
        let committed = source.committed(group, &self.partitions).await?;
        let mut rows = Vec::new();
        for ((on_b, partition), (offset, _)) in committed {
            let Some(on_a) = self.topics.get(&on_b) else { continue };
            let from_syncs = self.history.translate_back(&on_b, partition, offset);
            // Past the last record A->B wrote (a commit marker may follow it): resume at A's next
            // record to copy, exactly.
            let at_head = self
                .saved
                .get(&(on_a.clone(), partition))
                .filter(|s| s.last_downstream.is_some_and(|d| d < offset))
                .map(|s| s.next_offset);
            let mut row = GroupPartition::new(on_a.clone(), partition, offset, from_syncs.max(at_head));
            row.source_topic = Some(on_b);
            rows.push(row);
        }
        rows.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(rows)
    }
}
