//! Topic administration shared by the sink and the control tasks: create-if-absent (and
//! Strait's compacted state topics), partition counts, partition growth and the topic configs
//! worth copying.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::{
    AdminClient, AdminOptions, ConfigSource, NewPartitions, NewTopic, ResourceSpecifier, TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use strait_mm2::CONFIG_PROPERTIES_EXCLUDE;

use crate::config::ClusterConfig;
use crate::kafka::{blocking, METADATA_TIMEOUT};

/// Admin requests wait this long for the controller.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// An admin client of one cluster.
pub struct Admin {
    client: Arc<AdminClient<DefaultClientContext>>,
    /// The cluster's alias, for messages.
    pub alias: String,
}

/// What a cluster knows of one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Number of partitions.
    pub partitions: usize,
}

fn opts() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT)).request_timeout(Some(ADMIN_TIMEOUT))
}

impl Admin {
    /// An admin client for `cluster`. Errors only on invalid client config; connecting is lazy.
    pub fn new(cluster: &ClusterConfig) -> Result<Self, KafkaError> {
        Ok(Self { client: Arc::new(cluster.client_config(&[]).create()?), alias: cluster.alias.clone() })
    }

    /// Partition count of `topic`, or `None` if the cluster has no such topic.
    pub async fn describe(&self, topic: &str) -> Result<Option<TopicInfo>, KafkaError> {
        let client = self.client.clone();
        let topic = topic.to_string();
        blocking(move || {
            let md = client.inner().fetch_metadata(Some(&topic), METADATA_TIMEOUT)?;
            Ok(md.topics().iter().find(|t| t.name() == topic).and_then(|t| match t.error() {
                None if !t.partitions().is_empty() => Some(TopicInfo { partitions: t.partitions().len() }),
                _ => None,
            }))
        })
        .await
    }

    /// The high watermark (next offset to be written) of `topic` partition `partition`.
    pub async fn high_watermark(&self, topic: &str, partition: i32) -> Result<i64, KafkaError> {
        let client = self.client.clone();
        let topic = topic.to_string();
        blocking(move || client.inner().fetch_watermarks(&topic, partition, METADATA_TIMEOUT).map(|(_, high)| high))
            .await
    }

    /// Creates `topic` unless it exists. `configs` are topic-level settings; `rf` -1 means the
    /// broker default. Already existing is success.
    pub async fn create_topic(
        &self,
        topic: &str,
        partitions: usize,
        rf: i32,
        configs: &[(String, String)],
    ) -> Result<(), KafkaError> {
        let mut new = NewTopic::new(topic, partitions as i32, TopicReplication::Fixed(rf));
        for (k, v) in configs {
            new = new.set(k, v);
        }
        let results = self.client.create_topics([&new], &opts()).await?;
        for r in results {
            match r {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((t, code)) => {
                    return Err(KafkaError::AdminOp(code)).inspect_err(
                        |_| tracing::error!(cluster = %self.alias, topic = %t, "create topic failed: {code}"),
                    )
                }
            }
        }
        Ok(())
    }

    /// Creates a one-partition compacted state topic (offset syncs, positions, checkpoints,
    /// heartbeats: MM2 creates its internal topics so) unless it exists.
    pub async fn create_state_topic(&self, topic: &str, rf: i32) -> Result<(), KafkaError> {
        self.create_topic(topic, 1, rf, &[("cleanup.policy".into(), "compact".into())]).await
    }

    /// Grows `topic` to `partitions` partitions. A count already reached is success.
    pub async fn add_partitions(&self, topic: &str, partitions: usize) -> Result<(), KafkaError> {
        let results = self.client.create_partitions([&NewPartitions::new(topic, partitions)], &opts()).await?;
        for r in results {
            match r {
                Ok(_) | Err((_, RDKafkaErrorCode::InvalidPartitions)) => {}
                Err((_, code)) => return Err(KafkaError::AdminOp(code)),
            }
        }
        Ok(())
    }

    /// The topic's explicitly set configs (source `DynamicTopic`), minus MM2's exclude list,
    /// as `(name, value)` pairs sorted by name.
    pub async fn replicable_configs(&self, topic: &str) -> Result<Vec<(String, String)>, KafkaError> {
        let results = self.client.describe_configs([&ResourceSpecifier::Topic(topic)], &opts()).await?;
        let mut out = Vec::new();
        for r in results {
            let resource = r.map_err(KafkaError::AdminOp)?;
            for e in resource.entries {
                if e.source == ConfigSource::DynamicTopic
                    && !e.is_sensitive
                    && !CONFIG_PROPERTIES_EXCLUDE.contains(&e.name.as_str())
                {
                    if let Some(v) = e.value {
                        out.push((e.name, v));
                    }
                }
            }
        }
        out.sort();
        Ok(out)
    }
}
