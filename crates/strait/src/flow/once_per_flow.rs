//! What the owner of a flow's slot 0 runs once per flow beside its data path: heartbeats,
//! checkpoints (sharing one control producer), topic config and ACL sync.

use std::sync::Arc;
use std::time::Duration;

use strait_connect::{ConnectError, ConnectResult};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::backoff::with_backoff;
use crate::config::Flow;
use crate::control::checkpoint::CheckpointTask;
use crate::control::heartbeat::{ensure_heartbeats_topic, run_heartbeats};
use crate::control::topic_acls::run_topic_acl_sync;
use crate::control::topic_configs::run_topic_config_sync;
use crate::kafka::{connect_error, control_producer};
use crate::metrics::metrics;

/// How long the once-per-flow tasks may take to finish their cycle when slot 0 stops, before they
/// are dropped (a call to an unreachable cluster can take longer).
const ONCE_PER_FLOW_STOP: Duration = Duration::from_secs(5);

/// The once-per-flow tasks slot 0 runs; each ends in `Err` only when it cannot start for good
/// (a permanent start error, `crate::kafka::classify_start`), which stops the flow.
pub type OncePerFlow = (CancellationToken, JoinSet<ConnectResult<()>>);

/// Heartbeats, checkpoints, topic config and ACL sync: run by the owner of slot 0 only, once its data
/// path started (so both clusters answered and accepted Strait's credentials).
pub fn start_once_per_flow(flow: &Arc<Flow>) -> OncePerFlow {
    tracing::info!(flow = %flow.name, "slot 0 owned: heartbeats, checkpoints, topic config and ACL sync run here");
    metrics().set_control_tasks_up(&flow.source.alias, &flow.target.alias, true);
    let (cancel, mut tasks) = (CancellationToken::new(), JoinSet::new());
    let (sync_flow, sync_cancel) = (flow.clone(), cancel.clone());
    tasks.spawn(async move {
        run_topic_config_sync(sync_flow, sync_cancel).await;
        Ok(())
    });
    let (acl_flow, acl_cancel) = (flow.clone(), cancel.clone());
    tasks.spawn(async move {
        run_topic_acl_sync(acl_flow, acl_cancel).await;
        Ok(())
    });
    if flow.heartbeats.emit_heartbeats || flow.checkpoints.emit_checkpoints || flow.checkpoints.sync_group_offsets {
        match control_producer(&flow.target) {
            Ok(producer) => {
                if flow.heartbeats.emit_heartbeats {
                    tasks.spawn(start_heartbeats(flow.clone(), producer.clone(), cancel.clone()));
                }
                if flow.checkpoints.emit_checkpoints || flow.checkpoints.sync_group_offsets {
                    tasks.spawn(run_checkpoints(flow.clone(), producer, cancel.clone()));
                }
            }
            Err(e) => tracing::error!(flow = %flow.name, error = %e, "control producer: no heartbeats or checkpoints"),
        }
    }
    (cancel, tasks)
}

/// The first permanent failure of the once-per-flow tasks; never, while none fails (or without
/// them).
pub async fn once_per_flow_failure(tasks: &mut Option<OncePerFlow>) -> ConnectError {
    if let Some((_, tasks)) = tasks {
        while let Some(ended) = tasks.join_next().await {
            if let Ok(Err(e)) = ended {
                return e;
            }
        }
    }
    std::future::pending().await
}

pub async fn stop_once_per_flow(flow: &Flow, (cancel, mut tasks): OncePerFlow) {
    cancel.cancel();
    let finished = tokio::time::timeout(ONCE_PER_FLOW_STOP, async { while tasks.join_next().await.is_some() {} }).await;
    if finished.is_err() {
        tasks.shutdown().await;
    }
    tracing::info!(flow = %flow.name, "slot 0 given up: heartbeats, checkpoints, topic config and ACL sync stopped here");
    metrics().set_control_tasks_up(&flow.source.alias, &flow.target.alias, false);
}

/// Ensures the heartbeats topic (retrying with backoff while the target does not answer), then
/// writes heartbeats until `cancel`. Errors: a permanent start error (`crate::kafka::classify_start`), which
/// stops the flow.
async fn start_heartbeats(
    flow: Arc<Flow>,
    producer: crate::kafka::ControlProducer,
    cancel: CancellationToken,
) -> ConnectResult<()> {
    let ensure = || async {
        ensure_heartbeats_topic(&flow)
            .await
            .map_err(|e| connect_error(format!("create the heartbeats topic of flow {}", flow.name), e))
    };
    if with_backoff(&flow, "heartbeats", &cancel, ensure).await?.is_some() {
        run_heartbeats(flow, producer, cancel).await;
    }
    Ok(())
}

/// Starts the checkpoint task (retrying with backoff while the clusters do not answer) and runs
/// it until `cancel`. Errors: a permanent start error (say, a missing ACL, a replication factor
/// the target cannot meet: `crate::kafka::classify_start`), which stops the flow.
async fn run_checkpoints(
    flow: Arc<Flow>,
    producer: crate::kafka::ControlProducer,
    cancel: CancellationToken,
) -> ConnectResult<()> {
    let start = || async {
        CheckpointTask::start(flow.clone(), producer.clone())
            .await
            .map_err(|e| connect_error(format!("start checkpoints of flow {}", flow.name), e))
    };
    if let Some(task) = with_backoff(&flow, "checkpoints", &cancel, start).await? {
        task.run(cancel).await;
    }
    Ok(())
}
