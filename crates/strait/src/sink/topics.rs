//! Where a source topic goes on the target: the residency decision, the renamed topic, and the
//! target topic itself, created at first sight with the source's partition count and configs and
//! grown when the source grows.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use prometheus_client::metrics::counter::Counter;
use strait_connect::{ConnectError, ConnectResult};

use super::service::DataProducer;
use crate::admin::{config_changes, Admin, ADMIN_TIMEOUT};
use crate::config::Flow;
use crate::kafka::{await_producer_metadata, classify_start, StartFailure};
use crate::metrics::metrics;
use crate::residency::names_of;
use crate::retry::doubling;

/// How long a source topic's target topic that cannot be made ready is tried again before the flow
/// stops: as long as the data producer keeps trying a record (its `message.timeout.ms`, 300 s in
/// at-least-once mode).
const ROUTE_RETRY_FOR: Duration = Duration::from_secs(300);
/// First and longest wait between those tries.
const ROUTE_RETRY_MIN: Duration = Duration::from_millis(500);
const ROUTE_RETRY_MAX: Duration = Duration::from_secs(15);
/// Target topics [`TopicRouter::prepare`] makes ready at once. Each holds blocking threads and
/// metadata requests on both clusters: all of 2,000 topics at once timed their requests out and
/// starved the instance's other flows for minutes; 16 spread the round trips as well on loopback
/// and across an 80 ms link.
const PREPARE_AT_ONCE: usize = 16;

/// The decision for one source topic.
enum Route {
    /// Residency forbids the target; records are dropped. `dropped` counts them, as does the
    /// `strait_residency_dropped_total` counter.
    Denied { dropped: u64, counter: Counter },
    /// Replicated to `target` which has at least `partitions` partitions.
    Allowed { target: Arc<str>, partitions: usize },
}

/// Routes source topics to target topics for one flow.
pub struct TopicRouter {
    flow: Arc<Flow>,
    source: Admin,
    target: Admin,
    routes: HashMap<String, Route>,
    /// The last allowed route used: (source topic, target topic, its partitions). Records come
    /// in runs of one topic, so most records skip the map.
    last: Option<(Arc<str>, Arc<str>, usize)>,
}

impl TopicRouter {
    /// A router for `flow`. Errors: invalid client config for either cluster.
    pub fn new(flow: Arc<Flow>) -> ConnectResult<Self> {
        let source = Admin::new(&flow.source).map_err(|e| ConnectError::backend("source admin client", e))?;
        let target = Admin::new(&flow.target).map_err(|e| ConnectError::backend("target admin client", e))?;
        Ok(Self { flow, source, target, routes: HashMap::new(), last: None })
    }

    /// The target topic for a record of `topic`/`partition`, or `None` when residency drops it.
    /// Creates the target topic, or adds partitions, as needed, and waits until `producer` can
    /// write to the partition. Errors: a backend error naming the topic.
    pub async fn route(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        producer: &Arc<DataProducer>,
    ) -> ConnectResult<Option<&Arc<str>>> {
        let same = |(source, _, partitions): &(Arc<str>, Arc<str>, usize)| {
            Arc::ptr_eq(source, topic) && usize::try_from(partition).is_ok_and(|p| p < *partitions)
        };
        if !self.last.as_ref().is_some_and(same) && !self.decide(topic, partition, producer).await? {
            return Ok(None);
        }
        Ok(self.last.as_ref().map(|(_, target, _)| target))
    }

    /// The slow path of [`Self::route`]: whether records of `topic`/`partition` are replicated,
    /// making its route the last one when they are.
    async fn decide(&mut self, topic: &Arc<str>, partition: i32, producer: &Arc<DataProducer>) -> ConnectResult<bool> {
        let name: &str = topic;
        let index = usize::try_from(partition)
            .map_err(|e| ConnectError::conversion(format!("source topic {name}: partition {partition}"), e))?;
        match self.routes.get_mut(name) {
            Some(Route::Denied { dropped, counter }) => {
                *dropped += 1;
                counter.inc();
                return Ok(false);
            }
            Some(Route::Allowed { target, partitions }) if index < *partitions => {
                self.last = Some((topic.clone(), target.clone(), *partitions));
                return Ok(true);
            }
            _ => {}
        }
        if let Err(reason) = self.flow.residency.check(&names_of(name, self.flow.policy.separator())) {
            tracing::warn!(flow = %self.flow.name, topic = name, "residency: not replicating this topic: {reason}");
            let counter = metrics().residency_dropped(&self.flow.source.alias, &self.flow.target.alias, name);
            counter.inc();
            self.routes.insert(name.to_string(), Route::Denied { dropped: 1, counter });
            return Ok(false);
        }
        let target = self.flow.policy.remote_topic(&self.flow.source.alias, name);
        let partitions = self.ready_target(name, &target, index, producer).await?;
        let target: Arc<str> = target.into();
        self.routes.insert(name.to_string(), Route::Allowed { target: target.clone(), partitions });
        self.last = Some((topic.clone(), target, partitions));
        Ok(true)
    }

    /// Makes the target topics of `topics` (each a source topic with the highest partition to be
    /// written) ready, 16 at a time (`PREPARE_AT_ONCE`): at start, instead of one topic's round
    /// trips after another as their first records arrive, which across a long link (80 ms) cost
    /// seconds per topic. Topics residency forbids, or already routed, are left to
    /// [`Self::route`]. Errors: as `Self::ready_target` (a permanent failure, or a transient one
    /// past its retries).
    pub async fn prepare(&mut self, topics: &[(String, i32)], producer: &Arc<DataProducer>) -> ConnectResult<()> {
        let separator = self.flow.policy.separator();
        let allowed: Vec<(&str, String, usize)> = topics
            .iter()
            .filter(|(t, _)| !self.routes.contains_key(t) && self.flow.residency.check(&names_of(t, separator)).is_ok())
            .filter_map(|(t, p)| {
                Some((t.as_str(), self.flow.policy.remote_topic(&self.flow.source.alias, t), usize::try_from(*p).ok()?))
            })
            .collect();
        // Collected first: a stream holding the closure would not be `Send` across the await.
        let readies: Vec<_> =
            allowed.iter().map(|(topic, target, index)| self.ready_target(topic, target, *index, producer)).collect();
        let ready: Vec<_> = futures::stream::iter(readies).buffered(PREPARE_AT_ONCE).collect().await;
        for ((topic, target, _), partitions) in allowed.into_iter().zip(ready) {
            let route = Route::Allowed { target: target.into(), partitions: partitions? };
            self.routes.insert(topic.to_string(), route);
        }
        Ok(())
    }

    /// [`Self::ensure_target`], then waits until `producer` sees partition `index` of `target`;
    /// returns its partition count. A failure retrying may mend (a cluster that does not answer,
    /// a leader moving: [`classify_start`]) is tried again with backoff, 0.5 s doubling to 15 s,
    /// each logged, for up to [`ROUTE_RETRY_FOR`]: the topic's records wait meanwhile, as they
    /// would in the producer. Errors: a permanent failure (naming the setting), or a transient one
    /// that lasted [`ROUTE_RETRY_FOR`].
    async fn ready_target(
        &self,
        topic: &str,
        target: &str,
        index: usize,
        producer: &Arc<DataProducer>,
    ) -> ConnectResult<usize> {
        let (deadline, mut waits) = (Instant::now() + ROUTE_RETRY_FOR, doubling(ROUTE_RETRY_MIN, ROUTE_RETRY_MAX));
        loop {
            let wait = waits.next().unwrap_or(ROUTE_RETRY_MAX);
            let ready = async {
                let partitions = self.ensure_target(topic, target, index).await?;
                await_producer_metadata(producer, target, index + 1, ADMIN_TIMEOUT).await.map_err(|e| {
                    ConnectError::backend(format!("target topic {target} partition {index} not visible"), e)
                })?;
                Ok(partitions)
            };
            let e = match ready.await.map_err(|e| classify_start(&self.flow, e)) {
                Ok(partitions) => return Ok(partitions),
                Err(StartFailure::Permanent(e)) => return Err(e),
                Err(StartFailure::Transient(e)) if Instant::now() + wait >= deadline => return Err(e),
                Err(StartFailure::Transient(e)) => e,
            };
            tracing::warn!(
                flow = %self.flow.name, topic, target, retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX), error = %e,
                "the target topic cannot be made ready (a cluster does not answer, or a leader moves); its records wait, retrying"
            );
            tokio::time::sleep(wait).await;
        }
    }

    /// Creates or grows `target` to the source's partition count (at least `partition` + 1), and
    /// syncs the configs of one that already existed ([`Self::sync_configs`]); returns the count.
    async fn ensure_target(&self, topic: &str, target: &str, partition: usize) -> ConnectResult<usize> {
        let fail =
            |what: &str, e| ConnectError::backend(format!("{what} (source topic {topic}, target topic {target})"), e);
        let source_partitions = self
            .source
            .describe(topic)
            .await
            .map_err(|e| fail("describe source topic", e))?
            .map_or(0, |t| t.partitions)
            .max(partition + 1);
        let described = self.target.describe(target).await.map_err(|e| fail("describe target topic", e))?;
        let sync_existing = described.is_some() && self.flow.topic_configs.interval().is_some();
        match described {
            None => {
                let configs: Vec<(String, String)> = self
                    .source
                    .replicable_configs(topic, &self.flow.topic_configs.sync_topic_configs_exclude)
                    .await
                    .map_err(|e| fail("read source topic configs", e))?
                    .into_iter()
                    .collect();
                self.target
                    .create_topic(target, source_partitions, self.flow.writing.replication_factor, &configs)
                    .await
                    .map_err(|e| fail("create target topic", e))?;
                tracing::info!(flow = %self.flow.name, topic, target, partitions = source_partitions, configs = ?configs, "created target topic");
            }
            Some(t) if t.partitions < source_partitions => {
                self.target
                    .add_partitions(target, source_partitions)
                    .await
                    .map_err(|e| fail("add target partitions", e))?;
                tracing::info!(flow = %self.flow.name, topic, target, from = t.partitions, to = source_partitions, "added target partitions");
            }
            Some(_) => {}
        }
        if sync_existing {
            self.sync_configs(topic, target).await;
        }
        Ok(source_partitions)
    }

    /// With topic config sync on, sets the source topic's configs that an existing `target`
    /// topic lacks before the flow's first write to it (a pre-created target topic with a small
    /// `max.message.bytes` would refuse the first large batch while the periodic sync had yet to
    /// run). A failure is logged and left to the periodic sync, as its own failures are.
    async fn sync_configs(&self, topic: &str, target: &str) {
        let exclude = &self.flow.topic_configs.sync_topic_configs_exclude;
        let changes = async {
            let wanted = self.source.replicable_configs(topic, exclude).await?;
            let current = self.target.explicit_configs(&[target.to_string()]).await?.remove(target).unwrap_or_default();
            let changes = config_changes(wanted, &current);
            if !changes.is_empty() {
                self.target.set_configs(target, changes.clone()).await?;
            }
            Ok::<_, rdkafka::error::KafkaError>(changes)
        };
        match changes.await {
            Ok(changes) if changes.is_empty() => {}
            Ok(changes) => {
                tracing::info!(flow = %self.flow.name, topic, target_topic = target, configs = ?changes, "synced topic configs before the first write")
            }
            Err(e) => {
                tracing::warn!(flow = %self.flow.name, topic, target_topic = target, error = %e, "could not sync topic configs before the first write; the periodic sync tries again")
            }
        }
    }

    /// Records dropped by residency so far, per source topic.
    pub fn residency_drops(&self) -> impl Iterator<Item = (&str, u64)> {
        self.routes.iter().filter_map(|(t, r)| match r {
            Route::Denied { dropped, .. } => Some((t.as_str(), *dropped)),
            Route::Allowed { .. } => None,
        })
    }
}
