//! Heartbeats (MM2 `MirrorHeartbeatTask`): every `emit_heartbeats_interval_ms` a `Heartbeat`
//! (source alias, target alias, time in ms) to the `heartbeats` topic on the target, so
//! `MirrorClient` and operators can see the flow is alive. Heartbeats topics of the source are
//! replicated onward by the flow itself (`<source>.heartbeats`), which is how
//! `MirrorClient.upstreamClusters` discovers upstream clusters across hops.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rdkafka::error::KafkaError;
use rdkafka::producer::BaseRecord;
use strait_mm2::{Heartbeat, HEARTBEATS_TOPIC};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::admin::Admin;
use crate::config::Flow;
use crate::kafka::{acked, enqueue, ControlProducer};

/// Writes heartbeats for `flow` with `producer` until `cancel`. The topic (one partition,
/// compacted, as MM2 creates it) is ensured first; failures are logged and retried at the next tick.
pub async fn run_heartbeats(flow: Arc<Flow>, producer: ControlProducer, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(flow.emit_heartbeats_interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut topic_ready = false;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = beat(&flow, &producer, &mut topic_ready).await {
            tracing::warn!(flow = %flow.name, error = %e, "heartbeat failed; retrying at the next interval");
        }
    }
}

async fn beat(flow: &Flow, producer: &ControlProducer, topic_ready: &mut bool) -> Result<(), KafkaError> {
    if !*topic_ready {
        Admin::new(&flow.target)?.create_state_topic(HEARTBEATS_TOPIC, flow.replication_factor).await?;
        *topic_ready = true;
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let hb = Heartbeat {
        source_alias: flow.source.alias.clone(),
        target_alias: flow.target.alias.clone(),
        timestamp_ms: now,
    };
    let (key, value) = (hb.encode_key(), hb.encode_value());
    let ack =
        enqueue(producer, BaseRecord::to(HEARTBEATS_TOPIC).partition(0).key(&key[..]).payload(&value[..])).await?;
    acked(ack).await.map(|_| ())
}
