//! A flow's checkpoints topic read back (MM2's `<source>.checkpoints.internal` on the target):
//! the one reader behind `strait status`, `strait failover` and the checkpoint task's restart.

use rdkafka::error::KafkaError;
use strait_mm2::Checkpoint;

use super::{blocking, StateReader};
use crate::config::Flow;

/// Every checkpoint on `flow`'s checkpoints topic, in write order, each with the time it was
/// written (ms since the epoch; `None` when the broker gave none). A record that does not decode
/// is skipped and logged at warn. An absent topic gives none. Errors: the target cannot be read.
pub async fn read_checkpoints(flow: &Flow) -> Result<Vec<(Checkpoint, Option<i64>)>, KafkaError> {
    let topic = flow.policy.checkpoints_topic(&flow.source.alias);
    let reader = StateReader::new(&flow.target, "strait-checkpoints-reader")?;
    let read = {
        let topic = topic.clone();
        blocking(move || reader.read_timestamped(&topic)).await?
    };
    let decoded = read.into_iter().filter_map(|((_, key, value), written)| match Checkpoint::decode(&key, &value) {
        Ok(c) => Some((c, written)),
        Err(e) => {
            tracing::warn!(topic, error = %e, "skipping undecodable checkpoint");
            None
        }
    });
    Ok(decoded.collect())
}
