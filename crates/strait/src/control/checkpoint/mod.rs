//! MM2-compatible checkpoints (MM2 `MirrorCheckpointTask`): for each flow, translate the source
//! consumer groups' committed offsets and write `Checkpoint` records to
//! `<source-alias>.checkpoints.internal` on the target; optionally commit the translated offsets
//! into target groups that are absent or empty (`sync_group_offsets`).

pub mod groups;
pub mod translate;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use prometheus_client::metrics::counter::Counter;
use rdkafka::error::KafkaError;
use rdkafka::producer::BaseRecord;
use strait_mm2::{should_emit_checkpoint, Checkpoint, DownstreamOffset, UpstreamOffset};
use tokio_util::sync::CancellationToken;

use crate::admin::Admin;
use crate::config::Flow;
use crate::kafka::{acked, enqueue, read_checkpoints, ControlProducer};
use crate::metrics::metrics;
use crate::schedule::{self, Every, Periodic};
use groups::GroupClient;
use translate::{Translation, Translator};

/// Last checkpoint per (group, target-side topic, partition).
type Emitted = HashMap<(String, String, i32), (UpstreamOffset, DownstreamOffset)>;

/// The checkpoint and group-sync loop of one flow.
pub struct CheckpointTask {
    flow: Arc<Flow>,
    translator: Translator,
    source_groups: GroupClient,
    target_groups: GroupClient,
    producer: ControlProducer,
    topic: String,
    emitted: Emitted,
    groups: Vec<String>,
    /// Latest translations per group, for group offset sync.
    latest: HashMap<String, Vec<Translation>>,
    /// Active target groups already logged as skipped.
    skipped: HashSet<String>,
    /// `strait_checkpoints_total` of the flow.
    written: Counter,
    /// `strait_group_offset_syncs_total` of the flow.
    synced: Counter,
}

impl CheckpointTask {
    /// Ensures the checkpoints topic (one partition, compacted) on the target and reloads the last
    /// checkpoint per (group, topic, partition) from it, so a restart never emits a rewind.
    /// Checkpoints are written with `producer`, the flow's control producer.
    /// Errors: the target cannot be reached or the topic cannot be created or read.
    pub async fn start(flow: Arc<Flow>, producer: ControlProducer) -> Result<Self, KafkaError> {
        let topic = flow.policy.checkpoints_topic(&flow.source.alias);
        Admin::new(&flow.target)?.create_state_topic(&topic, flow.writing.replication_factor).await?;
        let mut emitted = Emitted::new();
        for (c, _) in read_checkpoints(&flow).await? {
            emitted.insert((c.group, c.topic, c.partition), (c.upstream, c.downstream));
        }
        Ok(Self {
            translator: Translator::new(flow.clone())?,
            source_groups: GroupClient::new(&flow.source)?,
            target_groups: GroupClient::new(&flow.target)?,
            producer,
            topic,
            emitted,
            groups: Vec::new(),
            latest: HashMap::new(),
            skipped: HashSet::new(),
            written: metrics().checkpoints(&flow.source.alias, &flow.target.alias),
            synced: metrics().group_offset_syncs(&flow.source.alias, &flow.target.alias),
            flow,
        })
    }

    /// Runs until `cancel`: checkpoints every `emit_checkpoints_interval_ms`, groups re-listed
    /// every `refresh_groups_interval_ms`, group offsets synced every
    /// `sync_group_offsets_interval_ms` when enabled. A failed cycle is logged and retried at the
    /// next tick; it never stops replication.
    pub async fn run(self, cancel: CancellationToken) {
        let name = self.flow.name.clone();
        schedule::run(&name, self, cancel).await;
    }

    async fn refresh_groups(&mut self) -> Result<(), KafkaError> {
        let mut names: Vec<String> = self
            .source_groups
            .list(None)
            .await?
            .into_iter()
            .map(|g| g.name)
            .filter(|g| self.flow.groups.matches(g))
            .collect();
        names.sort();
        if names != self.groups {
            tracing::info!(flow = %self.flow.name, groups = ?names, "checkpointing consumer groups");
            self.groups = names;
            self.forget_vanished_groups().await;
        }
        Ok(())
    }

    /// Drops what is kept per group (clients, last checkpoints, translations) for groups no
    /// longer listed, so memory follows the groups that exist, not every group ever seen. A group
    /// that comes back starts afresh, as after a restart.
    async fn forget_vanished_groups(&mut self) {
        let current: HashSet<String> = self.groups.iter().cloned().collect();
        let keep = |g: &str| current.contains(g);
        self.source_groups.forget_groups(keep).await;
        self.target_groups.forget_groups(keep).await;
        let flow = (self.flow.source.alias.as_str(), self.flow.target.alias.as_str());
        self.emitted.retain(|(g, topic, partition), _| {
            if !keep(g) {
                metrics().forget_checkpoint_latency(flow, g, topic, *partition);
            }
            keep(g)
        });
        self.latest.retain(|g, _| keep(g));
        self.skipped.retain(|g| keep(g));
    }

    async fn emit_checkpoints(&mut self) -> Result<(), KafkaError> {
        self.translator.catch_up().await?;
        let partitions = self.translator.replicated_partitions(&self.source_groups).await?;
        let created = std::time::Instant::now();
        let mut records = Vec::new();
        for group in self.groups.clone() {
            let translations = self.translator.translate_group(&mut self.source_groups, &group, &partitions).await?;
            // With `emit_checkpoints = false` the translations still feed group offset sync.
            for t in translations.iter().filter(|_| self.flow.checkpoints.emit_checkpoints) {
                let Some(down) = t.downstream else { continue };
                let (up, down) = (UpstreamOffset(t.upstream), DownstreamOffset(down));
                let key = (group.clone(), t.target_topic.clone(), t.partition);
                // MM2's rule: written only when the downstream offset advances (or the group
                // rewinds). A group far behind the head keeps translating to the same offset
                // while it moves (the store's syncs thin out exponentially with age), so its
                // checkpoint stays until it nears a remembered sync.
                if !should_emit_checkpoint(self.emitted.get(&key).copied(), up, down) {
                    continue;
                }
                let checkpoint = Checkpoint {
                    group: group.clone(),
                    topic: t.target_topic.clone(),
                    partition: t.partition,
                    upstream: up,
                    downstream: down,
                    metadata: t.metadata.clone(),
                };
                match checkpoint.try_encode_value() {
                    Ok(value) => records.push((key, (up, down), checkpoint.encode_key(), value)),
                    Err(e) => {
                        tracing::warn!(group, topic = %t.target_topic, partition = t.partition, error = %e, "checkpoint not encodable; skipped")
                    }
                }
            }
            self.latest.insert(group, translations);
        }
        let mut acks = Vec::with_capacity(records.len());
        for (_, _, key, value) in &records {
            acks.push(
                enqueue(&self.producer, BaseRecord::to(&self.topic).partition(0).key(&key[..]).payload(&value[..]))
                    .await?,
            );
        }
        let flow = (self.flow.source.alias.as_str(), self.flow.target.alias.as_str());
        for ((key, up_down, _, _), ack) in records.into_iter().zip(acks) {
            acked(ack).await?;
            // MM2's checkpoint-latency-ms: from creating the checkpoint to its ack.
            metrics().checkpoint_latency(flow, &key.0, &key.1, key.2, created.elapsed().as_millis() as i64);
            self.emitted.insert(key, up_down);
            self.written.inc();
        }
        Ok(())
    }

    /// MM2's group offset sync: only into target groups that are absent or empty, only forward,
    /// a missing target offset (or -1) counting as behind.
    async fn sync_group_offsets(&mut self) -> Result<(), KafkaError> {
        for (group, translations) in &self.latest {
            match self.target_groups.describe(group).await? {
                Some(g) if !g.is_inactive() => {
                    if self.skipped.insert(group.clone()) {
                        tracing::info!(flow = %self.flow.name, group, state = %g.state, "target group is active; not syncing its offsets");
                    }
                    continue;
                }
                _ => {
                    self.skipped.remove(group);
                }
            }
            let partitions: Vec<(String, i32)> =
                translations.iter().map(|t| (t.target_topic.clone(), t.partition)).collect();
            let current = self.target_groups.committed(group, &partitions).await?;
            let forward: Vec<((String, i32), i64)> = translations
                .iter()
                .filter_map(|t| {
                    let down = t.downstream?;
                    let key = (t.target_topic.clone(), t.partition);
                    match current.get(&key) {
                        Some((now, _)) if *now >= down => None,
                        _ => Some((key, down)),
                    }
                })
                .collect();
            if !forward.is_empty() {
                self.target_groups.commit(group, &forward).await?;
                self.synced.inc_by(forward.len() as u64);
                tracing::debug!(flow = %self.flow.name, group, partitions = forward.len(), "synced group offsets");
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Periodic for CheckpointTask {
    /// The consumer groups listed again, checkpoints emitted, and (with `sync_group_offsets`)
    /// group offsets synced, each at its interval; the sync's first round one interval in.
    fn rounds(&self) -> Vec<Every> {
        let c = &self.flow.checkpoints;
        let mut rounds = vec![
            Every::now_and_every("consumer group refresh", c.refresh_groups_interval),
            Every::now_and_every("checkpoint emission", c.emit_checkpoints_interval),
        ];
        if c.sync_group_offsets {
            let every = c.sync_group_offsets_interval;
            rounds.push(Every { name: "group offset sync", interval: every, first: every });
        }
        rounds
    }

    async fn round(&mut self, index: usize) -> Result<(), String> {
        let done = match index {
            0 => self.refresh_groups().await,
            1 => self.emit_checkpoints().await,
            _ => self.sync_group_offsets().await,
        };
        done.map_err(|e| e.to_string())
    }
}
