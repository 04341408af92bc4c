//! Reads what the target holds about where a flow's partitions stopped ([`super::Stored`]): the
//! I/O before the decision, once per slot at start.

use std::collections::HashMap;

use rdkafka::error::KafkaError;
use strait_connect::{ConnectError, ConnectResult};

use super::{Partition, Stored};
use crate::client_log::{ClientLog, LoggedConsumer};
use crate::config::Flow;
use strait_mm2::OffsetSync;

use crate::kafka::{blocking, listed_watermarks, read_to_end, METADATA_TIMEOUT};
use crate::mm2_offsets;
use crate::positions::{self, POSITIONS_TOPIC};
use crate::slots::slot_of;

/// `flow`'s positions on its target: Strait's ([`positions::load_checked`], those that cannot be
/// true apart), the last offset sync of each of `slot`'s partitions with one of Strait's
/// positions (the evidence a position that cannot be true is rebuilt from), the target check
/// of those partitions ([`target_ends`]) and MirrorMaker 2's ([`mm2_offsets::load`]). Read after
/// the slot's transactional producer fenced its previous owner, so Strait's (`read_committed`)
/// are the last committed ones. Errors: an offset error naming the topic that cannot be read; a
/// backend error when the target does not answer the check.
pub async fn stored(flow: &Flow, slot: u32) -> ConnectResult<Stored> {
    // Reads that do not wait on each other go together: across a long link each is several
    // round trips.
    let positions = async {
        positions::load_checked(&flow.target, &flow.name)
            .await
            .map_err(|e| ConnectError::offset(format!("read {POSITIONS_TOPIC} on {}", flow.target.alias), e))
    };
    let mm2 = async {
        mm2_offsets::load(flow)
            .await
            .map_err(|e| ConnectError::offset(format!("read {} on {}", flow.mm2_offsets_topic(), flow.target.alias), e))
    };
    let (loaded, mm2) = tokio::try_join!(positions, mm2)?;
    let ours = |tp: &Partition| slot_of(&tp.0, tp.1, flow.slots()) == slot;
    let checked: Vec<Partition> =
        loaded.valid.keys().chain(loaded.invalid.keys()).filter(|tp| ours(tp)).cloned().collect();
    let (last_syncs, target_ends) = tokio::try_join!(last_syncs(flow, &checked), target_ends(flow, &checked))?;
    Ok(Stored { strait: loaded.valid, invalid: loaded.invalid, last_syncs, target_ends, mm2 })
}

/// The last offset sync (upstream, downstream) of each of `partitions` in the flow's offset
/// syncs topic (`read_committed`; undecodable records skipped). Errors: the topic cannot be read.
async fn last_syncs(flow: &Flow, partitions: &[Partition]) -> ConnectResult<HashMap<Partition, (i64, i64)>> {
    if partitions.is_empty() {
        return Ok(HashMap::new());
    }
    let (cluster, topic) = flow.offset_syncs();
    let records = read_to_end(cluster, &topic)
        .await
        .map_err(|e| ConnectError::offset(format!("read {topic} on {}", cluster.alias), e))?;
    let mut last = HashMap::new();
    for (_, key, value) in records {
        let Ok(sync) = OffsetSync::decode(&key, &value) else { continue };
        let tp = (sync.topic, sync.partition);
        if partitions.contains(&tp) {
            last.insert(tp, (sync.upstream.0, sync.downstream.0));
        }
    }
    Ok(last)
}

/// The target check: for each of `partitions` (the starting slot's with a saved position), the
/// end offset now of the target partition it is copied to (0 when the target topic or partition
/// is missing). A position is then lost on the target when the end is not after its last record
/// written (`last_downstream`), and an offset sync is evidence only while the end is after its
/// downstream offset ([`super::decide`]). One metadata request and one ListOffsets request per
/// target broker. Errors: the target does not answer.
pub async fn target_ends(flow: &Flow, partitions: &[Partition]) -> ConnectResult<HashMap<Partition, i64>> {
    let fail = |e| ConnectError::backend(format!("check the target topics of flow {}", flow.name), e);
    let written: Vec<(Partition, String)> =
        partitions.iter().map(|tp| (tp.clone(), flow.policy.remote_topic(&flow.source.alias, &tp.0))).collect();
    if written.is_empty() {
        return Ok(HashMap::new());
    }
    let target: LoggedConsumer = flow
        .target
        .client_config(&[])
        .create_with_context(ClientLog)
        .map_err(|e| ConnectError::backend("target client", e))?;
    blocking(move || {
        let asked: Vec<(&str, i32)> = written.iter().map(|((_, p), remote)| (remote.as_str(), *p)).collect();
        let marks = listed_watermarks(&target, &asked, METADATA_TIMEOUT)?;
        written
            .iter()
            .map(|((topic, partition), remote)| {
                let end = if marks.has(remote, *partition) { marks.get(remote, *partition)?.1 } else { 0 };
                Ok(((topic.clone(), *partition), end))
            })
            .collect::<Result<HashMap<_, _>, KafkaError>>()
    })
    .await
    .map_err(fail)
}
