//! Heartbeats (MM2 `MirrorHeartbeatTask`): every `emit_heartbeats_interval_ms` a `Heartbeat`
//! (source alias, target alias, time in ms) to the `heartbeats` topic on the target, so
//! `MirrorClient` and operators can see the flow is alive. Heartbeats topics of the source are
//! replicated onward by the flow itself (`<source>.heartbeats`), which is how
//! `MirrorClient.upstreamClusters` discovers upstream clusters across hops.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord};
use strait_mm2::{Heartbeat, HEARTBEATS_TOPIC};
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::admin::Admin;
use crate::config::Flow;
use crate::flow::stopped;
use crate::kafka::{acked, client_config, enqueue};

/// Writes heartbeats for `flow` until `shutdown`. The topic (one partition, compacted, as MM2
/// creates it) is ensured first; failures are logged and retried at the next tick.
pub async fn run_heartbeats(flow: Arc<Flow>, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(Duration::from_millis(flow.settings.emit_heartbeats_interval_ms));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut producer: Option<FutureProducer> = None;
    loop {
        tokio::select! {
            _ = stopped(&mut shutdown) => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = beat(&flow, &mut producer).await {
            tracing::warn!(flow = %flow.name, error = %e, "heartbeat failed; retrying at the next interval");
        }
    }
}

async fn beat(flow: &Flow, producer: &mut Option<FutureProducer>) -> Result<(), KafkaError> {
    let producer = match producer {
        Some(p) => p,
        None => {
            Admin::new(&flow.target)?
                .create_topic(HEARTBEATS_TOPIC, 1, flow.settings.replication_factor, &[("cleanup.policy".into(), "compact".into())])
                .await?;
            producer.insert(client_config(&flow.target, &[("acks", "all"), ("linger.ms", "0")]).create()?)
        }
    };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let hb = Heartbeat { source_alias: flow.source.alias.clone(), target_alias: flow.target.alias.clone(), timestamp_ms: now };
    let (key, value) = (hb.encode_key(), hb.encode_value());
    let ack = enqueue(producer, FutureRecord::to(HEARTBEATS_TOPIC).partition(0).key(&key[..]).payload(&value[..])).await?;
    acked(ack).await.map(|_| ())
}
