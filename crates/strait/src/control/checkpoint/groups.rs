//! Consumer groups of one cluster: listing them, their state, their committed offsets, and
//! committing offsets on behalf of a group that has no active members.
//!
//! Reading and committing go through a consumer configured with the group's id that never
//! subscribes, so it never joins the group (the broker accepts its commits only while the group
//! has no members, which is exactly MM2's rule for group offset sync).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::{Offset, TopicPartitionList};

use crate::client_log::{ClientLog, LoggedConsumer};
use crate::config::ClusterConfig;
use crate::kafka::{blocking, topic_partition_counts};

const TIMEOUT: Duration = Duration::from_secs(15);

/// A group as the cluster lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    /// Group id.
    pub name: String,
    /// Classic group state: `Empty`, `Stable`, `PreparingRebalance`, `CompletingRebalance`, `Dead`.
    pub state: String,
    /// Number of active members.
    pub members: usize,
}

impl GroupListing {
    /// True when no consumer is active in the group (MM2 syncs offsets only into such groups).
    pub fn is_inactive(&self) -> bool {
        self.members == 0 && matches!(self.state.as_str(), "Empty" | "Dead" | "")
    }
}

/// A committed group offset: (topic, partition) → (offset, metadata).
pub type Committed = HashMap<(String, i32), (i64, String)>;

/// Group operations on one cluster.
pub struct GroupClient {
    cluster: ClusterConfig,
    lister: Arc<LoggedConsumer>,
    members: HashMap<String, Arc<LoggedConsumer>>,
}

impl GroupClient {
    /// A client for `cluster`. Errors only on invalid client config.
    pub fn new(cluster: &ClusterConfig) -> Result<Self, KafkaError> {
        let lister = cluster.client_config(&[]).create_with_context(ClientLog)?;
        Ok(Self { cluster: cluster.clone(), lister: Arc::new(lister), members: HashMap::new() })
    }

    /// Every group the cluster lists (`group` = one group only).
    pub async fn list(&self, group: Option<&str>) -> Result<Vec<GroupListing>, KafkaError> {
        let lister = self.lister.clone();
        let group = group.map(str::to_string);
        blocking(move || {
            let list = lister.fetch_group_list(group.as_deref(), TIMEOUT)?;
            Ok(list
                .groups()
                .iter()
                .map(|g| GroupListing {
                    name: g.name().to_string(),
                    state: g.state().to_string(),
                    members: g.members().len(),
                })
                .collect())
        })
        .await
    }

    /// The group's listing, or `None` when the cluster does not know it (or it is `Dead`).
    pub async fn describe(&self, group: &str) -> Result<Option<GroupListing>, KafkaError> {
        Ok(self.list(Some(group)).await?.into_iter().find(|g| g.name == group && g.state != "Dead"))
    }

    fn member(&mut self, group: &str) -> Result<Arc<LoggedConsumer>, KafkaError> {
        if let Some(c) = self.members.get(group) {
            return Ok(c.clone());
        }
        let c: Arc<LoggedConsumer> = Arc::new(
            self.cluster
                .client_config(&[("group.id", group), ("enable.auto.commit", "false")])
                .create_with_context(ClientLog)?,
        );
        self.members.insert(group.to_string(), c.clone());
        Ok(c)
    }

    /// Closes the clients of groups `keep` rejects (groups that vanished from the listing), so
    /// clients do not accumulate with group churn.
    pub async fn forget_groups(&mut self, keep: impl Fn(&str) -> bool) {
        let (kept, gone): (HashMap<_, _>, HashMap<_, _>) = self.members.drain().partition(|(g, _)| keep(g));
        self.members = kept;
        if !gone.is_empty() {
            // Closing a librdkafka client joins its threads: off the async workers.
            blocking(move || drop(gone)).await;
        }
    }

    /// The group's committed offsets among `partitions`; partitions without a commit (or with
    /// a negative offset, which counts as missing) are left out.
    pub async fn committed(&mut self, group: &str, partitions: &[(String, i32)]) -> Result<Committed, KafkaError> {
        if partitions.is_empty() {
            return Ok(Committed::new());
        }
        let member = self.member(group)?;
        let mut tpl = TopicPartitionList::new();
        for (t, p) in partitions {
            tpl.add_partition(t, *p);
        }
        blocking(move || {
            let got = member.committed_offsets(tpl, TIMEOUT)?;
            Ok(got
                .elements()
                .iter()
                .filter_map(|e| match e.offset() {
                    Offset::Offset(o) if o >= 0 => {
                        Some(((e.topic().to_string(), e.partition()), (o, e.metadata().to_string())))
                    }
                    _ => None,
                })
                .collect())
        })
        .await
    }

    /// Commits `offsets` for `group`. Errors when the broker refuses (e.g. the group became active).
    pub async fn commit(&mut self, group: &str, offsets: &[((String, i32), i64)]) -> Result<(), KafkaError> {
        let member = self.member(group)?;
        let mut tpl = TopicPartitionList::new();
        for ((t, p), o) in offsets {
            tpl.add_partition_offset(t, *p, Offset::Offset(*o))?;
        }
        blocking(move || member.commit(&tpl, CommitMode::Sync)).await
    }

    /// Every (topic, partition) of the topics `keep` accepts.
    pub async fn partitions(&self, keep: impl Fn(&str) -> bool) -> Result<Vec<(String, i32)>, KafkaError> {
        let lister = self.lister.clone();
        let md = blocking(move || topic_partition_counts(lister.client(), TIMEOUT)).await?;
        Ok(md
            .into_iter()
            .filter(|(t, _)| keep(t))
            .flat_map(|(t, partitions)| {
                (0..partitions).filter_map(|p| i32::try_from(p).ok()).map(move |p| (t.clone(), p))
            })
            .collect())
    }
}
