//! Strait's own source positions: a compacted topic on the target cluster, one record per
//! (flow, source topic, source partition) holding the next source offset to read. The
//! [`crate::sink::TargetSink`] writes them after (or, in exactly-once mode, in the same
//! transaction as) the records they cover; this module is their format and their reader.
//!
//! Keeping positions on the target means Strait needs no consumer group and no write access on the
//! source, and a position is saved on the cluster the data went to. Each position also keeps the
//! id of the source topic (KIP-516) its offset belongs to, and the timestamp of the last
//! replicated record, so a topic recreated under the same name is recognised ([`crate::resume`]
//! decides from both) instead of resumed mid-way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rdkafka::error::KafkaError;
use serde::{Deserialize, Serialize};
use strait_connect::SourceOffset;

use crate::config::ClusterConfig;
use crate::kafka::read_to_end;
use crate::topic_id::TopicId;

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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_downstream: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    topic_id: Option<TopicId>,
}

/// A saved position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    /// Next source offset to read.
    pub next_offset: i64,
    /// Timestamp (ms) of the record at `next_offset - 1`, when known.
    pub last_timestamp: Option<i64>,
    /// Target offset of the last record of the partition written to the target, when known: the
    /// target partition must end after it.
    pub last_downstream: Option<i64>,
    /// Id of the source topic `next_offset` belongs to, when known (positions saved before ids
    /// were kept, or taken from MirrorMaker 2's offsets, have none).
    pub topic_id: Option<TopicId>,
}

/// Saved position per (source topic, partition).
pub type Positions = HashMap<(String, i32), Saved>;

/// Key and value of the positions record saying that `flow` handled `position` of the source
/// topic whose id is `topic_id` (the last record of its partition, whose timestamp was
/// `last_timestamp` ms; the last record written to the target sits at `last_downstream`): the
/// stored next offset is `position.offset + 1`. JSON, so operators can read it with any console
/// consumer.
pub fn encode(
    flow: &str,
    position: &SourceOffset,
    last_timestamp: Option<i64>,
    last_downstream: Option<i64>,
    topic_id: Option<TopicId>,
) -> (Vec<u8>, Vec<u8>) {
    let key = Key { flow: flow.to_string(), topic: position.topic.to_string(), partition: position.partition };
    let value = Value { next_offset: position.offset + 1, last_timestamp, last_downstream, topic_id };
    // Serializing plain structs of strings and integers cannot fail.
    (serde_json::to_vec(&key).unwrap_or_default(), serde_json::to_vec(&value).unwrap_or_default())
}

/// `flow`'s saved positions on `target` (the last record per key wins), read `read_committed`: a
/// position written in an aborted or still open transaction is never used. Records that are not
/// positions are ignored, and so are positions that cannot be true ([`load_checked`] names them).
/// Errors: the topic cannot be read.
pub async fn load(target: &ClusterConfig, flow: &str) -> Result<Positions, KafkaError> {
    Ok(load_checked(target, flow).await?.valid)
}

/// Why a saved position cannot be true.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    /// The last record under the partition's key does not decode as a position.
    Undecodable,
    /// Its next offset is below zero.
    Negative(i64),
    /// Its next offset lies past the source partition's end (as the resume decision reads it).
    PastEnd { next_offset: i64, end: i64 },
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Undecodable => f.write_str("the value does not decode as a position"),
            Self::Negative(next) => write!(f, "next offset {next} is below zero"),
            Self::PastEnd { next_offset, end } => {
                write!(f, "next offset {next_offset} lies past the source partition's end {end}")
            }
        }
    }
}

/// A flow's saved positions as [`load_checked`] reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loaded {
    /// The positions that decode and are not below zero.
    pub valid: Positions,
    /// The others: per partition, the offset of its last record in [`POSITIONS_TOPIC`] and why
    /// it cannot be true.
    pub invalid: HashMap<(String, i32), (i64, Invalid)>,
}

/// [`load`], keeping the positions that cannot be true apart: a partition whose last record's
/// value does not decode, or holds a negative next offset. Errors: the topic cannot be read.
pub async fn load_checked(target: &ClusterConfig, flow: &str) -> Result<Loaded, KafkaError> {
    let mut loaded = Loaded::default();
    for (offset, key, value) in read_to_end(target, POSITIONS_TOPIC).await? {
        let Ok(k) = serde_json::from_slice::<Key>(&key) else { continue };
        if k.flow != flow {
            continue;
        }
        let tp = (k.topic, k.partition);
        let invalid = match serde_json::from_slice::<Value>(&value) {
            Ok(v) if v.next_offset >= 0 => {
                let saved = Saved {
                    next_offset: v.next_offset,
                    last_timestamp: v.last_timestamp,
                    last_downstream: v.last_downstream,
                    topic_id: v.topic_id,
                };
                loaded.invalid.remove(&tp);
                loaded.valid.insert(tp, saved);
                continue;
            }
            Ok(v) => Invalid::Negative(v.next_offset),
            Err(_) => Invalid::Undecodable,
        };
        loaded.valid.remove(&tp);
        loaded.invalid.insert(tp, (offset, invalid));
    }
    Ok(loaded)
}

/// The id of each source topic whose records a flow's slot is copying: set by the source when it
/// assigns a topic's partitions, read by the sink when it saves their positions. A recreated
/// topic's new id is set only once every record of the old topic read is committed, so each
/// position carries the id of the topic its offset belongs to.
#[derive(Clone, Default)]
pub struct TopicIds(Arc<Mutex<HashMap<Arc<str>, TopicId>>>);

impl TopicIds {
    /// The id in force for `topic`, if known.
    pub fn get(&self, topic: &str) -> Option<TopicId> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).get(topic).cloned()
    }

    /// Makes `id` the id of `topic`.
    pub fn set(&self, topic: &Arc<str>, id: TopicId) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(topic.clone(), id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_the_next_offset_and_keeps_the_format() {
        let at = SourceOffset { topic: "orders".into(), partition: 3, offset: 41 };
        let (k, v) = encode("a->b", &at, Some(7), None, None);
        assert_eq!(k, br#"{"flow":"a->b","topic":"orders","partition":3}"#);
        assert_eq!(v, br#"{"next_offset":42,"last_timestamp":7}"#);
        let (_, v) = encode("a->b", &at, None, Some(9), None);
        assert_eq!(v, br#"{"next_offset":42,"last_timestamp":null,"last_downstream":9}"#);
        let id = TopicId("Dm5aXb3nQ9-tH9t1jq4b1Q".into());
        let (_, v) = encode("a->b", &at, Some(7), Some(9), Some(id.clone()));
        assert_eq!(
            v,
            br#"{"next_offset":42,"last_timestamp":7,"last_downstream":9,"topic_id":"Dm5aXb3nQ9-tH9t1jq4b1Q"}"#
        );
        let read: Value = serde_json::from_slice(&v).unwrap();
        assert_eq!(read.topic_id, Some(id));
        let old: Value = serde_json::from_slice(br#"{"next_offset":42,"last_timestamp":7}"#).unwrap();
        assert_eq!(old.topic_id, None);
    }
}
