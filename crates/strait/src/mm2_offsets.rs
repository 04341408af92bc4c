//! MirrorMaker 2's own source offsets, for a cut-over from a running MM2: Kafka Connect keeps
//! them in its offsets topic on the target (`mm2-offsets.<source-alias>.internal` in MM2's
//! dedicated mode, `offset.storage.topic` of a Connect cluster). A source partition Strait has no
//! position for resumes where MM2 stopped ([`crate::resume`]), so records MM2 already copied are
//! not copied again.
//!
//! Layout (Connect's `JsonConverter` without schemas, MM2's `MirrorUtils`): key
//! `["<connector>",{"cluster":"<source-alias>","partition":<n>,"topic":"<topic>"}]`, value
//! `{"offset":<n>}` where `offset` is the last record MM2 replicated; MM2 resumes at `offset + 1`
//! (`MirrorSourceTask.initializeConsumer`). A later record of the same key replaces an earlier
//! one; a null value (an offset reset) removes it.
//!
//! [`encode`] writes the same bytes for the way back (`write_mm2_offsets`, see
//! `sink::mm2_offsets`): Connect keys its offsets by the key's bytes, so they must be MM2's own.

use rdkafka::error::KafkaError;
use serde::Serialize;
use serde_json::Value;
use strait_connect::SourceOffset;

use crate::config::Flow;
use crate::kafka::{blocking, StateReader};
use crate::positions::{Positions, Saved};

/// Name of MM2's source connector in dedicated mode (the class's simple name): the first element
/// of every key it writes.
pub const CONNECTOR: &str = "MirrorSourceConnector";

/// Partitions of a Connect offsets topic Strait creates: Connect's `offset.storage.partitions`
/// default, which MM2's dedicated mode keeps.
pub const PARTITIONS: usize = 25;

/// MM2's source partition (`MirrorUtils.wrapPartition`), fields in the order Connect's JSON has
/// them (a Java `HashMap` of these three keys iterates so).
#[derive(Serialize)]
struct WrappedPartition<'a> {
    cluster: &'a str,
    partition: i32,
    topic: &'a str,
}

/// MM2's source offset (`MirrorUtils.wrapOffset`): the last record replicated.
#[derive(Serialize)]
struct WrappedOffset {
    offset: i64,
}

/// Key and value of the Connect offset record saying that MM2's [`CONNECTOR`] replicating from
/// `source_alias` handled `position` (the last record of its partition): key
/// `["MirrorSourceConnector",{"cluster":"<alias>","partition":<n>,"topic":"<topic>"}]`, value
/// `{"offset":<position.offset>}`, compact JSON as Connect's `JsonConverter` writes it.
pub fn encode(source_alias: &str, position: &SourceOffset) -> (Vec<u8>, Vec<u8>) {
    let partition = WrappedPartition { cluster: source_alias, partition: position.partition, topic: &position.topic };
    // Serializing plain structs of strings and integers cannot fail.
    let key = serde_json::to_vec(&(CONNECTOR, partition)).unwrap_or_default();
    (key, serde_json::to_vec(&WrappedOffset { offset: position.offset }).unwrap_or_default())
}

/// The source partition a key names, if it is an MM2 source offset of `source_alias`.
fn partition_of(key: &[u8], source_alias: &str) -> Option<(String, i32)> {
    let key: Value = serde_json::from_slice(key).ok()?;
    let partition = key.as_array()?.get(1)?;
    (partition.get("cluster")?.as_str()? == source_alias).then_some(())?;
    let topic = partition.get("topic")?.as_str()?.to_string();
    Some((topic, i32::try_from(partition.get("partition")?.as_i64()?).ok()?))
}

/// The next offset MM2 would read after the offset record `value` (`None`: no offset).
fn next_offset(value: &[u8]) -> Option<i64> {
    let value: Value = serde_json::from_slice(value).ok()?;
    value.get("offset")?.as_i64().filter(|o| *o >= 0).map(|o| o + 1)
}

/// MM2's positions for `flow` from its `mm2_offsets_topic` on the target, as Strait positions
/// (no timestamp or downstream offset known). A missing topic gives none. Errors: the target
/// cannot be read.
pub async fn load(flow: &Flow) -> Result<Positions, KafkaError> {
    let reader = StateReader::new(&flow.target, "strait-mm2-offsets-reader")?;
    let (topic, alias) = (flow.mm2_offsets_topic().clone(), flow.source.alias.clone());
    blocking(move || {
        let mut out = Positions::new();
        for (_, key, value) in reader.read_partitions(&topic)? {
            let Some(source) = partition_of(&key, &alias) else { continue };
            match value.as_deref().and_then(next_offset) {
                Some(next) => {
                    out.insert(
                        source,
                        Saved { next_offset: next, last_timestamp: None, last_downstream: None, topic_id: None },
                    );
                }
                None => {
                    out.remove(&source);
                }
            }
        }
        Ok(out)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_offset_records_of_mm2() {
        let key = br#"["MirrorSourceConnector",{"cluster":"eu","partition":3,"topic":"orders"}]"#;
        assert_eq!(partition_of(key, "eu"), Some(("orders".to_string(), 3)));
        assert_eq!(partition_of(key, "us"), None, "another source cluster");
        assert_eq!(partition_of(br#"{"offset":1}"#, "eu"), None);
        assert_eq!(next_offset(br#"{"offset":41}"#), Some(42));
        assert_eq!(next_offset(br#"{"offset":-1}"#), None, "MM2's 'uncommitted'");
        assert_eq!(next_offset(b"not json"), None);
    }

    #[test]
    fn writes_what_mm2_writes_and_reads_it_back() {
        let at = SourceOffset { topic: "orders".into(), partition: 3, offset: 41 };
        let (key, value) = encode("eu", &at);
        assert_eq!(key, br#"["MirrorSourceConnector",{"cluster":"eu","partition":3,"topic":"orders"}]"#);
        assert_eq!(value, br#"{"offset":41}"#);
        assert_eq!(partition_of(&key, "eu"), Some(("orders".to_string(), 3)));
        assert_eq!(next_offset(&value), Some(42), "resumed after the last record copied, as a Strait position is");
        let (_, first) = encode("eu", &SourceOffset { topic: "orders".into(), partition: 0, offset: 0 });
        assert_eq!(next_offset(&first), Some(1));
    }
}
