//! A planned failover's fence check (`strait failover --quiet-ms`): before any group moves, the
//! source topics the flow copies must take no new record for a while, the sign that their
//! producers have stopped (or moved to the target). A record written after the check would be
//! copied, but the groups' consumers, moved already, might read past it unseen on the source side
//! of an application that still writes there. Heartbeat topics are left out: replicators write
//! them, not applications.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::error::KafkaError;

use crate::client_log::{ClientLog, LoggedConsumer};
use crate::config::Flow;
use crate::kafka::{blocking, listed_watermarks, METADATA_TIMEOUT};

/// The source partitions of `partitions` (heartbeat topics aside) whose high watermark moved
/// during `quiet`, each with the records added (offsets, transaction markers included); empty
/// when every one was quiet. A partition whose topic is gone by the second reading is left out.
/// Errors: the source does not answer.
pub async fn grown(
    flow: &Flow,
    partitions: &[(String, i32)],
    quiet: Duration,
) -> Result<BTreeMap<(String, i32), i64>, KafkaError> {
    let reader: LoggedConsumer =
        flow.source.client_config(&[("group.id", "strait-failover-quiet")]).create_with_context(ClientLog)?;
    let reader = std::sync::Arc::new(reader);
    let watched: Vec<(String, i32)> =
        partitions.iter().filter(|(t, _)| !flow.policy.is_heartbeats_topic(t)).cloned().collect();
    let ends = |reader: std::sync::Arc<LoggedConsumer>, watched: Vec<(String, i32)>| {
        blocking(move || {
            let asked: Vec<(&str, i32)> = watched.iter().map(|(t, p)| (t.as_str(), *p)).collect();
            let marks = listed_watermarks(&*reader, &asked, METADATA_TIMEOUT)?;
            let listed = watched.into_iter().filter(|(t, p)| marks.has(t, *p));
            listed
                .map(|(t, p)| Ok::<_, KafkaError>(((t.clone(), p), marks.get(&t, p)?.1)))
                .collect::<Result<BTreeMap<_, _>, _>>()
        })
    };
    let before = ends(reader.clone(), watched.clone()).await?;
    tokio::time::sleep(quiet).await;
    let after = ends(reader, watched).await?;
    Ok(after
        .into_iter()
        .filter_map(|(key, end)| before.get(&key).map(|then| (key, end - then)).filter(|(_, added)| *added > 0))
        .collect())
}
