//! Reads what the target holds about where a flow's partitions stopped ([`super::Stored`]): the
//! I/O before the decision, once per slot at start.

use std::collections::HashMap;

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use strait_connect::{ConnectError, ConnectResult};

use super::{Partition, Stored};
use crate::client_log::{ClientLog, LoggedConsumer};
use crate::config::Flow;
use crate::kafka::{blocking, topic_partition_counts, watermarks, METADATA_TIMEOUT};
use crate::mm2_offsets;
use crate::positions::{self, Positions, POSITIONS_TOPIC};
use crate::slots::slot_of;

/// `flow`'s positions on its target: Strait's ([`positions::load`]), the target check of those of
/// `slot`'s partitions ([`target_ends`]) and MirrorMaker 2's ([`mm2_offsets::load`]). Read after the slot's
/// transactional producer fenced its previous owner, so Strait's (`read_committed`) are the last
/// committed ones. Errors: an offset error naming the topic that cannot be read; a backend error
/// when the target does not answer the check.
pub async fn stored(flow: &Flow, slot: u32) -> ConnectResult<Stored> {
    let strait = positions::load(&flow.target, &flow.name)
        .await
        .map_err(|e| ConnectError::offset(format!("read {POSITIONS_TOPIC} on {}", flow.target.alias), e))?;
    let target_ends = target_ends(flow, slot, &strait).await?;
    let mm2 = mm2_offsets::load(flow)
        .await
        .map_err(|e| ConnectError::offset(format!("read {} on {}", flow.mm2_offsets_topic(), flow.target.alias), e))?;
    Ok(Stored { strait, target_ends, mm2 })
}

/// The target check: for each of `saved` of `slot`'s partitions (the only ones it starts) with a
/// last record written to the target (`last_downstream`), the end offset now of the target partition it was written to (0 when the
/// target topic or partition is missing). A position is then lost on the target when the end is
/// not after that record ([`super::decide`]). Positions without a written record (all dropped by
/// residency or the loop guard) are not checked. One metadata request and one ListOffsets request
/// per target broker. Errors: the target does not answer.
pub async fn target_ends(flow: &Flow, slot: u32, saved: &Positions) -> ConnectResult<HashMap<Partition, i64>> {
    let fail = |e| ConnectError::backend(format!("check the target topics of flow {}", flow.name), e);
    let ours = |tp: &Partition| slot_of(&tp.0, tp.1, flow.slots()) == slot;
    let written: Vec<(Partition, String)> = saved
        .iter()
        .filter(|(tp, s)| s.last_downstream.is_some() && ours(tp))
        .map(|(tp, _)| (tp.clone(), flow.policy.remote_topic(&flow.source.alias, &tp.0)))
        .collect();
    if written.is_empty() {
        return Ok(HashMap::new());
    }
    let target: LoggedConsumer = flow
        .target
        .client_config(&[])
        .create_with_context(ClientLog)
        .map_err(|e| ConnectError::backend("target client", e))?;
    blocking(move || {
        let counts: HashMap<String, usize> =
            topic_partition_counts(target.client(), METADATA_TIMEOUT)?.into_iter().collect();
        let exists = |remote: &str, partition: i32| {
            counts.get(remote).is_some_and(|n| usize::try_from(partition).is_ok_and(|p| p < *n))
        };
        let present = written.iter().filter(|((_, p), remote)| exists(remote, *p)).map(|((_, p), r)| (r.as_str(), *p));
        let marks = watermarks(&target, present, METADATA_TIMEOUT)?;
        written
            .iter()
            .map(|((topic, partition), remote)| {
                let end = if exists(remote, *partition) { marks.get(remote, *partition)?.1 } else { 0 };
                Ok(((topic.clone(), *partition), end))
            })
            .collect::<Result<HashMap<_, _>, KafkaError>>()
    })
    .await
    .map_err(fail)
}
