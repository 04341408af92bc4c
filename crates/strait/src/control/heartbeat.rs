//! Heartbeats (MM2 `MirrorHeartbeatTask`): every `emit_heartbeats_interval_ms` a `Heartbeat`
//! (source alias, target alias, time in ms) to the `heartbeats` topic on the target, so
//! `MirrorClient` and operators can see the flow is alive. Heartbeats topics of the source are
//! replicated onward by the flow itself (`<source>.heartbeats`), which is how
//! `MirrorClient.upstreamClusters` discovers upstream clusters across hops.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use rdkafka::error::KafkaError;
use rdkafka::producer::BaseRecord;
use strait_mm2::{Heartbeat, HEARTBEATS_TOPIC};
use tokio_util::sync::CancellationToken;

use crate::admin::Admin;
use crate::config::Flow;
use crate::kafka::{acked, enqueue, ControlProducer};
use crate::schedule::{self, Every, Periodic};

/// Creates the `heartbeats` topic on `flow`'s target (one partition, compacted, as MM2 creates
/// it) unless it exists. Errors: the target refuses or does not answer.
pub async fn ensure_heartbeats_topic(flow: &Flow) -> Result<(), KafkaError> {
    Admin::new(&flow.target)?.create_state_topic(HEARTBEATS_TOPIC, flow.writing.replication_factor).await
}

/// Writes heartbeats for `flow` with `producer` until `cancel`, once the topic exists
/// ([`ensure_heartbeats_topic`]); failures are logged and retried at the next tick.
pub async fn run_heartbeats(flow: Arc<Flow>, producer: ControlProducer, cancel: CancellationToken) {
    let name = flow.name.clone();
    schedule::run(&name, Heartbeats { flow, producer }, cancel).await;
}

/// The heartbeat task's one round, every `emit_heartbeats_interval_ms`.
struct Heartbeats {
    flow: Arc<Flow>,
    producer: ControlProducer,
}

#[async_trait]
impl Periodic for Heartbeats {
    fn rounds(&self) -> Vec<Every> {
        vec![Every::now_and_every("heartbeat", self.flow.heartbeats.emit_heartbeats_interval)]
    }

    async fn round(&mut self, _: usize) -> Result<(), String> {
        beat(&self.flow, &self.producer).await.map_err(|e| e.to_string())
    }
}

async fn beat(flow: &Flow, producer: &ControlProducer) -> Result<(), KafkaError> {
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
