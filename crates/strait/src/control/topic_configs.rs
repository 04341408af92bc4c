//! Topic config sync (MM2 `sync.topic.configs.enabled`, with KIP-894's incremental semantics):
//! every `sync_topic_configs_interval_ms`, the explicitly set configs of each replicated source
//! topic, minus MM2's exclude list and the flow's `sync_topic_configs_exclude`, are set on its
//! target topic with IncrementalAlterConfigs. Only differing values are sent; configs set only on
//! the target are left alone, and a config removed on the source keeps its target value (MM2
//! does the same). Target topics not yet created are left to the sink, which creates them with
//! the same configs; the sink also syncs a target topic that already exists before its first
//! write of the run (`sink::topics`), so a limit such as `max.message.bytes` is raised before a
//! batch meets it.

use std::sync::Arc;

use async_trait::async_trait;
use rdkafka::error::KafkaError;
use tokio_util::sync::CancellationToken;

use crate::admin::{config_changes, replicable, Admin};
use crate::config::Flow;
use crate::schedule::{self, Every, Periodic};

/// Syncs `flow`'s topic configs every interval until `cancel`; a failed round is logged and
/// tried again at the next one. Does nothing when the flow has sync turned off.
pub async fn run_topic_config_sync(flow: Arc<Flow>, cancel: CancellationToken) {
    let Some(interval) = flow.topic_configs.interval() else { return };
    let Some((source, target)) = super::admins(&flow, "topic config sync") else { return };
    let name = flow.name.clone();
    schedule::run(&name, ConfigSync { flow, interval, source, target }, cancel).await;
}

/// The topic config sync task's one round, every `sync_topic_configs_interval_ms`.
struct ConfigSync {
    flow: Arc<Flow>,
    interval: std::time::Duration,
    source: Admin,
    target: Admin,
}

#[async_trait]
impl Periodic for ConfigSync {
    fn rounds(&self) -> Vec<Every> {
        vec![Every::now_and_every("topic config sync", self.interval)]
    }

    async fn round(&mut self, _: usize) -> Result<(), String> {
        sync(&self.flow, &self.source, &self.target).await.map_err(|e| e.to_string())
    }
}

/// One round: describes every replicated source topic and its target topic (one request per
/// cluster) and sets the configs that differ.
async fn sync(flow: &Flow, source: &Admin, target: &Admin) -> Result<(), KafkaError> {
    let topics: Vec<String> = source.topic_names().await?.into_iter().filter(|t| flow.reaches_target(t)).collect();
    let remotes: Vec<String> = topics.iter().map(|t| flow.policy.remote_topic(&flow.source.alias, t)).collect();
    let mut on_source = source.explicit_configs(&topics).await?;
    let existing: Vec<String> = {
        let names = target.topic_names().await?;
        remotes.iter().filter(|r| names.contains(r)).cloned().collect()
    };
    let mut on_target = target.explicit_configs(&existing).await?;
    for (topic, remote) in topics.iter().zip(&remotes) {
        let (Some(wanted), Some(current)) = (on_source.remove(topic), on_target.remove(remote)) else { continue };
        let changes = config_changes(replicable(wanted, &flow.topic_configs.sync_topic_configs_exclude), &current);
        if changes.is_empty() {
            continue;
        }
        match target.set_configs(remote, changes.clone()).await {
            Ok(()) => {
                tracing::info!(flow = %flow.name, topic, target_topic = remote, configs = ?changes, "synced topic configs")
            }
            Err(e) => {
                tracing::warn!(flow = %flow.name, topic, target_topic = remote, configs = ?changes, error = %e, "could not sync topic configs")
            }
        }
    }
    Ok(())
}
