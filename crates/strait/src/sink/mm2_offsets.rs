//! `write_mm2_offsets`: the way back to MirrorMaker 2. Wherever a batch's positions are saved,
//! MM2's source offsets for the same source partitions go with them, to the flow's
//! `mm2_offsets_topic` on the target in Kafka Connect's bytes ([`crate::mm2_offsets::encode`]),
//! so a dedicated MM2 started on the same aliases resumes where Strait stopped. They travel in
//! the positions' transaction: at-least-once, the state transaction written once the records are
//! acknowledged; exactly-once, the batch's own transaction, with its records. Positions are saved
//! only for partitions that had records, so when a slot starts it first writes, in a transaction
//! of its own, the MM2 offsets of all its saved positions ([`at_start`]): an idle partition, or
//! one copied while the setting was off, resumes in MM2 where Strait stopped too, and an aborted
//! transaction's offsets, which MM2 (reading `read_uncommitted`) would take, are superseded.
//!
//! Connect keeps the last value per key while reading every partition of its offsets topic, and
//! its `KafkaOffsetBackingStore` sends without a partition, so the Java producer's murmur2 of the
//! key picks it. A key must land where MM2 writes it, or an older MM2 offset in another partition
//! could win: librdkafka's `murmur2_random` partitioner is that hash for keyed records.

use rdkafka::producer::BaseRecord;
use strait_connect::{ConnectError, ConnectResult, SourceOffset};

use super::in_flight::InFlight;
use super::service::{Failed, ProduceService};
use crate::admin::Admin;
use crate::config::Flow;
use crate::kafka::connect_error;
use crate::mm2_offsets::{self, encode, PARTITIONS};
use crate::positions::{self, POSITIONS_TOPIC};
use crate::slots::slot_of;

/// Added to the settings of a flow's producers when `write_mm2_offsets` is on: MM2 offset records
/// are sent without a partition, to go where the Java producer puts them. Every other record
/// Strait produces names its partition, so this changes nothing else.
pub const PRODUCER_SETTINGS: &[(&str, &str)] = &[("partitioner", "murmur2_random")];

/// Writes a flow's MM2 source offsets.
pub struct Mm2Offsets {
    /// The flow's `mm2_offsets_topic` on the target.
    topic: String,
    /// The source cluster's alias, as MM2's keys name it.
    source_alias: String,
}

impl Mm2Offsets {
    /// The writer of `flow`'s MM2 offsets; `None` unless `write_mm2_offsets` is on.
    pub fn of(flow: &Flow) -> Option<Self> {
        flow.writing
            .write_mm2_offsets
            .then(|| Self { topic: flow.mm2_offsets_topic(), source_alias: flow.source.alias.clone() })
    }

    /// With `write_mm2_offsets`, creates the MM2 offsets topic on the target unless it exists,
    /// as Connect's `KafkaOffsetBackingStore` does: compacted (MM2 refuses to start on another
    /// cleanup policy), 25 partitions (MM2's `offset.storage.partitions`), the flow's
    /// `replication_factor` like its other internal topics. An existing topic is used as it is.
    /// Returns its partition count (none without the setting), which the batch path's producer,
    /// naming every partition itself, needs. Errors: the target cannot be reached, or refuses
    /// the topic (a backend error naming it).
    pub async fn ensure_topic(flow: &Flow) -> ConnectResult<Option<u32>> {
        let Some(this) = Self::of(flow) else { return Ok(None) };
        let target = &flow.target;
        let what = format!("create topic {} on cluster {} at {}", this.topic, target.alias, target.bootstrap_servers);
        let admin = Admin::new(target).map_err(|e| connect_error(&what, e))?;
        if let Some(existing) = admin.describe(&this.topic).await.map_err(|e| connect_error(&what, e))? {
            return Ok(Some(existing.partitions as u32));
        }
        let configs = [("cleanup.policy".to_string(), "compact".to_string())];
        admin
            .create_topic(&this.topic, PARTITIONS, flow.writing.replication_factor, &configs)
            .await
            .map_err(|e| connect_error(&what, e))?;
        Ok(Some(PARTITIONS as u32))
    }

    /// The MM2 offset record of `position` for a producer that names its partition (the batch
    /// path's): the offsets topic, the partition Kafka's Java producer gives its key among
    /// `partitions` (murmur2, [`strait_mm2::partition_for_key`]), its key and its value.
    pub fn keyed(&self, position: &SourceOffset, partitions: u32) -> (&str, i32, Vec<u8>, Vec<u8>) {
        let (key, value) = encode(&self.source_alias, position);
        (&self.topic, strait_mm2::partition_for_key(&key, partitions), key, value)
    }

    /// Queues on `writer` the MM2 offset record of each of `positions` (each the last record
    /// handled of its partition, which is what MM2's offset names). The caller awaits the acks.
    /// Errors: a record that could not be queued.
    pub async fn send(
        &self,
        writer: &mut ProduceService<InFlight>,
        positions: &[SourceOffset],
    ) -> Result<(), Failed<InFlight>> {
        for position in positions {
            let (key, value) = encode(&self.source_alias, position);
            let record = BaseRecord::with_opaque_to(&self.topic, 0).key(&key[..]).payload(&value[..]);
            writer.send(record, InFlight::Mm2Offset(position.clone()), &mut |_, _| {}).await?;
        }
        Ok(())
    }
}

/// With `write_mm2_offsets`, the saved positions of `slot`'s partitions, as the last record
/// handled of each, but those where MM2's committed offset is ahead (MM2 ran after Strait: its
/// offset stays); empty when the setting is off. Read after the slot's producers fenced its
/// previous owner, so nothing moves them meanwhile. Errors: an offset error naming the topic that
/// cannot be read.
pub async fn at_start(flow: &Flow, slot: u32) -> ConnectResult<Vec<SourceOffset>> {
    if !flow.writing.write_mm2_offsets {
        return Ok(Vec::new());
    }
    let read = |topic: String| move |e| ConnectError::offset(format!("read {topic} on {}", flow.target.alias), e);
    let strait = positions::load(&flow.target, &flow.name).await.map_err(read(POSITIONS_TOPIC.to_string()))?;
    let mm2 = mm2_offsets::load(flow).await.map_err(read(flow.mm2_offsets_topic()))?;
    let mut positions: Vec<SourceOffset> = strait
        .into_iter()
        .filter(|(tp, saved)| {
            saved.next_offset > 0
                && slot_of(&tp.0, tp.1, flow.slots()) == slot
                && mm2.get(tp).is_none_or(|m| m.next_offset <= saved.next_offset)
        })
        .map(|((topic, partition), saved)| SourceOffset {
            topic: topic.into(),
            partition,
            offset: saved.next_offset - 1,
        })
        .collect();
    positions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    Ok(positions)
}
