//! Strait's own source positions: a compacted topic on the target cluster, one record per
//! (flow, source topic, source partition) holding the next source offset to read.
//!
//! Keeping positions on the target means Strait needs no consumer group and no write access on the
//! source, and a position is saved on the cluster the data went to. Each position also keeps the
//! timestamp of the last replicated record, so a topic recreated under the same name while Strait
//! was stopped is recognised ([`crate::source`] checks it) instead of resumed mid-way.

use std::collections::HashMap;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde::{Deserialize, Serialize};
use strait_connect::{ConnectError, ConnectResult, SourceOffset};

use crate::admin::Admin;
use crate::config::ClusterConfig;
use crate::kafka::{acked, client_config, enqueue, read_to_end};

/// Name of the positions topic on every target cluster.
pub const POSITIONS_TOPIC: &str = "strait-positions.internal";

#[derive(Serialize, Deserialize)]
struct Key {
    flow: String,
    topic: String,
    partition: i32,
}

#[derive(Serialize, Deserialize)]
struct Value {
    next_offset: i64,
    #[serde(default)]
    last_timestamp: Option<i64>,
}

/// A saved position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Saved {
    /// Next source offset to read.
    pub next_offset: i64,
    /// Timestamp (ms) of the record at `next_offset - 1`, when known.
    pub last_timestamp: Option<i64>,
}

/// Reads and writes one flow's positions.
pub struct PositionStore {
    producer: FutureProducer,
    flow: String,
}

/// Saved position per (source topic, partition).
pub type Positions = HashMap<(String, i32), Saved>;

impl PositionStore {
    /// Ensures the positions topic on `target` and loads the flow's saved positions (the last
    /// record per key wins). Errors: backend errors if the topic cannot be created or read.
    pub async fn open(target: &ClusterConfig, flow: &str, rf: i32) -> ConnectResult<(Self, Positions)> {
        let admin = Admin::new(target).map_err(|e| ConnectError::backend("positions admin client", e))?;
        admin
            .create_topic(POSITIONS_TOPIC, 1, rf, &[("cleanup.policy".into(), "compact".into())])
            .await
            .map_err(|e| ConnectError::backend(format!("create {POSITIONS_TOPIC} on {}", target.alias), e))?;
        let producer: FutureProducer = client_config(target, &[("enable.idempotence", "true"), ("acks", "all"), ("linger.ms", "0")])
            .create()
            .map_err(|e| ConnectError::backend("positions producer", e))?;
        let records = read_to_end(target, POSITIONS_TOPIC)
            .await
            .map_err(|e| ConnectError::offset(format!("read {POSITIONS_TOPIC} on {}", target.alias), e))?;
        let mut positions = Positions::new();
        for (_, key, value) in records {
            let key = serde_json::from_slice::<Key>(&key).ok();
            let value = serde_json::from_slice::<Value>(&value).ok();
            if let (Some(k), Some(v)) = (key, value) {
                if k.flow == flow {
                    positions.insert((k.topic, k.partition), Saved { next_offset: v.next_offset, last_timestamp: v.last_timestamp });
                }
            }
        }
        Ok((Self { producer, flow: flow.to_string() }, positions))
    }

    /// Saves `positions` (last handled record per partition and its timestamp; the stored offset
    /// is `offset + 1`) and waits for the acks. Errors: an offset error naming the partition.
    pub async fn save(&self, positions: &[(SourceOffset, Option<i64>)]) -> ConnectResult<()> {
        let mut acks = Vec::with_capacity(positions.len());
        for (p, last_timestamp) in positions {
            let key = serde_json::to_vec(&Key { flow: self.flow.clone(), topic: p.topic.to_string(), partition: p.partition })
                .map_err(|e| ConnectError::conversion("position key", e))?;
            let value = serde_json::to_vec(&Value { next_offset: p.offset + 1, last_timestamp: *last_timestamp })
                .map_err(|e| ConnectError::conversion("position value", e))?;
            let record = FutureRecord::to(POSITIONS_TOPIC).partition(0).key(&key[..]).payload(&value[..]);
            let ack = enqueue(&self.producer, record).await;
            acks.push((p, ack));
        }
        for (p, ack) in acks {
            let written = match ack {
                Ok(ack) => acked(ack).await,
                Err(e) => Err(e),
            };
            written.map_err(|e| {
                ConnectError::offset(format!("save position of {} partition {} offset {}", p.topic, p.partition, p.offset), e)
            })?;
        }
        Ok(())
    }
}
