//! Topic administration shared by the sink and the control tasks: create-if-absent (and
//! Strait's compacted state topics), partition counts, partition growth, and the topic configs
//! worth copying and setting them, and topic ACLs.

mod acls;
mod ffi;
mod incremental;
mod topic_ids;

pub use acls::{AclError, AclOperation, AclPattern, AclPermission, TopicAcl};
pub use topic_ids::topic_ids;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::{
    AdminClient, AdminOptions, ConfigSource, NewPartitions, NewTopic, OwnedResourceSpecifier, ResourceSpecifier,
    TopicReplication,
};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use regex::Regex;
use strait_mm2::CONFIG_PROPERTIES_EXCLUDE;

use crate::client_log::ClientLog;
use crate::config::ClusterConfig;
use crate::kafka::{blocking, topic_partition_counts, METADATA_TIMEOUT};

/// Admin requests wait this long for the controller.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// An admin client of one cluster.
pub struct Admin {
    client: Arc<AdminClient<ClientLog>>,
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
        Ok(Self {
            client: Arc::new(cluster.client_config(&[]).create_with_context(ClientLog)?),
            alias: cluster.alias.clone(),
        })
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

    /// The names of the cluster's topics. Errors: the cluster does not answer.
    pub async fn topic_names(&self) -> Result<Vec<String>, KafkaError> {
        let client = self.client.clone();
        blocking(move || topic_partition_counts(client.inner(), METADATA_TIMEOUT))
            .await
            .map(|topics| topics.into_iter().map(|(t, _)| t).collect())
    }

    /// Creates `topic` unless it exists. `configs` are topic-level settings; `rf` -1 means the
    /// broker default. Already existing is success. Errors: the broker's refusal (as
    /// [`KafkaError::AdminOp`], logged with the replication factor and configs asked for), or
    /// [`KafkaError::AdminOpCreation`] for a partition count above Kafka's `i32`.
    pub async fn create_topic(
        &self,
        topic: &str,
        partitions: usize,
        rf: i32,
        configs: &[(String, String)],
    ) -> Result<(), KafkaError> {
        let count = i32::try_from(partitions).map_err(|_| {
            KafkaError::AdminOpCreation(format!("topic {topic}: {partitions} partitions are more than Kafka allows"))
        })?;
        let mut new = NewTopic::new(topic, count, TopicReplication::Fixed(rf));
        for (k, v) in configs {
            new = new.set(k, v);
        }
        let results = self.client.create_topics([&new], &opts()).await?;
        for r in results {
            match r {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((t, code)) => {
                    // WARN: the caller decides whether this stops anything (a flow start retries it).
                    return Err(KafkaError::AdminOp(code)).inspect_err(|_| {
                        tracing::warn!(cluster = %self.alias, topic = %t, partitions, replication_factor = rf, configs = ?configs, "create topic failed: {code}")
                    });
                }
            }
        }
        Ok(())
    }

    /// Creates a one-partition compacted state topic (offset syncs, positions, checkpoints,
    /// heartbeats: MM2 creates its internal topics so) unless it exists. An existing topic is not
    /// asked for again, so a user allowed to write it but not to create topics can use it.
    pub async fn create_state_topic(&self, topic: &str, rf: i32) -> Result<(), KafkaError> {
        if self.describe(topic).await?.is_some() {
            return Ok(());
        }
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

    /// The explicitly set configs (`DynamicTopic`, not sensitive) of each of `topics`, in one
    /// request, as name → value. A topic the cluster cannot describe (deleted meanwhile) is
    /// missing from the map. Errors: the request as a whole failed.
    pub async fn explicit_configs(&self, topics: &[String]) -> Result<HashMap<String, TopicConfigs>, KafkaError> {
        if topics.is_empty() {
            return Ok(HashMap::new());
        }
        let specifiers: Vec<ResourceSpecifier> = topics.iter().map(|t| ResourceSpecifier::Topic(t)).collect();
        let results = self.client.describe_configs(&specifiers, &opts()).await?;
        let mut out = HashMap::new();
        for resource in results.into_iter().flatten() {
            let OwnedResourceSpecifier::Topic(topic) = resource.specifier else { continue };
            let explicit = resource
                .entries
                .into_iter()
                .filter(|e| e.source == ConfigSource::DynamicTopic && !e.is_sensitive)
                .filter_map(|e| Some((e.name, e.value?)))
                .collect();
            out.insert(topic, explicit);
        }
        Ok(out)
    }

    /// The configs a target topic gets from its source `topic` ([`replicable`]).
    /// Errors: the source does not answer or cannot describe the topic.
    pub async fn replicable_configs(&self, topic: &str, exclude: &[Regex]) -> Result<TopicConfigs, KafkaError> {
        let mut all = self.explicit_configs(&[topic.to_string()]).await?;
        let explicit = all.remove(topic).ok_or(KafkaError::AdminOp(RDKafkaErrorCode::UnknownTopicOrPartition))?;
        Ok(replicable(explicit, exclude))
    }

    /// Sets `configs` on `topic` with IncrementalAlterConfigs: its other configs stay as they
    /// are. Errors: the broker refused a config (named in the log) or did not answer.
    pub async fn set_configs(&self, topic: &str, configs: Vec<(String, String)>) -> Result<(), KafkaError> {
        let client = self.client.clone();
        let topic = topic.to_string();
        blocking(move || incremental::set_topic_configs(&client, &topic, &configs, ADMIN_TIMEOUT)).await
    }

    /// Every TOPIC ACL binding of the cluster (DescribeAcls; needs `Describe` on the cluster).
    /// Errors: the broker's refusal (`SecurityDisabled` when it runs no authorizer) or a timeout.
    pub async fn topic_acls(&self) -> Result<Vec<TopicAcl>, AclError> {
        let client = self.client.clone();
        blocking(move || acls::describe_topic_acls(&client, ADMIN_TIMEOUT)).await
    }

    /// Whether the cluster runs an authorizer: its first broker's `authorizer.class.name` is set,
    /// or reading that config was refused (only an authorizer refuses). librdkafka 2.12 drops the
    /// error of a DescribeAcls response, so an empty [`Admin::topic_acls`] cannot tell a cluster
    /// without authorizer (`SECURITY_DISABLED`) from a missing `Describe` right; this can.
    /// Errors: the cluster does not answer, or another refusal.
    pub async fn runs_authorizer(&self) -> Result<bool, KafkaError> {
        let client = self.client.clone();
        let broker = blocking(move || client.inner().fetch_metadata(None, METADATA_TIMEOUT))
            .await?
            .brokers()
            .first()
            .map(|b| b.id())
            .ok_or(KafkaError::AdminOp(RDKafkaErrorCode::BrokerNotAvailable))?;
        let results = self.client.describe_configs(&[ResourceSpecifier::Broker(broker)], &opts()).await?;
        match results.into_iter().next() {
            Some(Ok(resource)) => Ok(resource
                .get("authorizer.class.name")
                .and_then(|e| e.value.as_deref())
                .is_some_and(|v| !v.is_empty())),
            Some(Err(RDKafkaErrorCode::ClusterAuthorizationFailed)) => Ok(true),
            Some(Err(code)) => Err(KafkaError::AdminOp(code)),
            None => Err(KafkaError::AdminOp(RDKafkaErrorCode::Fail)),
        }
    }

    /// Creates `acls` (CreateAcls; needs `Alter` on the cluster) and returns each one's outcome,
    /// in order; an existing binding is success. Errors: the request as a whole failed.
    pub async fn create_topic_acls(&self, acls: Vec<TopicAcl>) -> Result<Vec<Result<(), AclError>>, AclError> {
        let client = self.client.clone();
        blocking(move || acls::create_topic_acls(&client, &acls, ADMIN_TIMEOUT)).await
    }
}

/// Topic configs by name.
pub type TopicConfigs = BTreeMap<String, String>;

/// `max.message.bytes` of the target topics Strait creates or syncs, unless the source topic's
/// is larger: 100 MiB, the largest produce request a broker accepts by default
/// (`socket.request.max.bytes`). A record fits its source topic as the source's producer
/// compressed it, but Strait produces it uncompressed (compressing again would cost more CPU than
/// the whole copy), so it can be many times larger on the target: an 8 MB record that zstd
/// brought under a 5 MB limit must still fit the topic Strait made for it.
pub const LARGEST_BATCH_BYTES: &str = "104857600";

/// What a target topic takes of its source topic's `explicit` configs: all but MM2's exclude
/// list (`DefaultConfigPropertyFilter`) and the flow's `exclude` patterns, with
/// `max.message.bytes` raised to at least [`LARGEST_BATCH_BYTES`] unless `exclude` names it.
pub fn replicable(mut explicit: TopicConfigs, exclude: &[Regex]) -> TopicConfigs {
    const KEY: &str = "max.message.bytes";
    let floor: u64 = LARGEST_BATCH_BYTES.parse().expect("a number");
    if explicit.get(KEY).and_then(|v| v.parse::<u64>().ok()).is_none_or(|n| n < floor) {
        explicit.insert(KEY.into(), LARGEST_BATCH_BYTES.into());
    }
    // After the floor: an operator who excludes max.message.bytes keeps the target's own limit.
    explicit.retain(|k, _| !CONFIG_PROPERTIES_EXCLUDE.contains(&k.as_str()) && !exclude.iter().any(|r| r.is_match(k)));
    explicit
}

/// The configs of `wanted` (a source topic's [`replicable`] configs) that `current` (its target
/// topic's explicit configs) lacks or holds with another value, to set on the target topic.
pub fn config_changes(wanted: TopicConfigs, current: &TopicConfigs) -> Vec<(String, String)> {
    wanted.into_iter().filter(|(k, v)| current.get(k) != Some(v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs(kv: &[(&str, &str)]) -> TopicConfigs {
        kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn replicable_configs_drop_excluded_names_and_fit_any_record_strait_can_produce() {
        let source = configs(&[
            ("retention.ms", "1000"),
            ("max.message.bytes", "5242880"),
            ("min.insync.replicas", "2"),
            ("segment.bytes", "1000000"),
        ]);
        let exclude = [Regex::new("^(?:segment\\..*)$").unwrap()];
        assert_eq!(
            replicable(source, &exclude),
            configs(&[("max.message.bytes", LARGEST_BATCH_BYTES), ("retention.ms", "1000")])
        );
        assert_eq!(replicable(configs(&[]), &[]), configs(&[("max.message.bytes", LARGEST_BATCH_BYTES)]));
        let own_limit = [Regex::new("^(?:max\\.message\\.bytes)$").unwrap()];
        assert_eq!(replicable(configs(&[("max.message.bytes", "5242880")]), &own_limit), configs(&[]));
        let larger = configs(&[("max.message.bytes", "209715200")]);
        assert_eq!(replicable(larger.clone(), &[]), larger);
    }
}
