//! Runs one flow: connects its source and TargetSink (retrying with backoff while a cluster is
//! unreachable), then drives them with the connector runtime until shutdown or failure.

use std::sync::Arc;
use std::time::Duration;

use strait_connect::{ConnectError, ConnectResult, ConnectorRuntime, RuntimeConfig, RuntimeState};
use tokio::sync::watch;

use crate::checkpoint::CheckpointTask;
use crate::config::Flow;
use crate::heartbeat::run_heartbeats;
use crate::positions::PositionStore;
use crate::sink::TargetSink;
use crate::source::KafkaSource;

const BACKOFF_MIN: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(15);

/// Runs `flow` until `shutdown` turns true (then drains and returns `Ok`) or it fails.
///
/// Start-up failures (cluster unreachable, topic not creatable) are retried with doubling
/// backoff (0.5 s up to 15 s), each logged; once running, an error stops the flow and is returned
/// with the topic/partition/offset at fault.
pub async fn run_flow(flow: Arc<Flow>, mut shutdown: watch::Receiver<bool>) -> ConnectResult<()> {
    let mut wait = BACKOFF_MIN;
    let (source, sink) = loop {
        let started = tokio::select! {
            r = start(flow.clone()) => r,
            _ = stopped(&mut shutdown) => return Ok(()),
        };
        match started {
            Ok(parts) => break parts,
            Err(e) => {
                tracing::warn!(flow = %flow.name, retry_in_ms = wait.as_millis() as u64, error = %e, "flow could not start; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stopped(&mut shutdown) => return Ok(()),
                }
                wait = (wait * 2).min(BACKOFF_MAX);
            }
        }
    };
    let settings = &flow.settings;
    let config = RuntimeConfig {
        max_batch_records: settings.max_batch_records as usize,
        max_batch_bytes: settings.max_batch_bytes as usize,
        max_batch_wait: Duration::from_millis(settings.commit_interval_ms),
        ..RuntimeConfig::default()
    };
    let (runtime, handle) = ConnectorRuntime::new(source, sink, config);
    // Side tasks stop with the flow, whether it is shut down or fails.
    let (stop_side, side_shutdown) = watch::channel(false);
    let mut side = tokio::task::JoinSet::new();
    if settings.emit_heartbeats {
        side.spawn(run_heartbeats(flow.clone(), side_shutdown.clone()));
    }
    if settings.emit_checkpoints || settings.sync_group_offsets {
        side.spawn(run_checkpoints(flow.clone(), side_shutdown));
    }
    let stopper = tokio::spawn(async move {
        stopped(&mut shutdown).await;
        handle.shutdown();
    });
    let state = runtime.run().await;
    stopper.abort();
    stop_side.send_replace(true);
    while side.join_next().await.is_some() {}
    match state {
        RuntimeState::Failed(e) => Err(ConnectError::backend(format!("flow {} failed", flow.name), e.to_string())),
        _ => {
            tracing::info!(flow = %flow.name, "flow stopped after a final drain");
            Ok(())
        }
    }
}

/// Resolves once `shutdown` turns true (or its sender is gone).
pub async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}

/// Starts the checkpoint task (retrying with backoff until the target answers) and runs it.
async fn run_checkpoints(flow: Arc<Flow>, mut shutdown: watch::Receiver<bool>) {
    let mut wait = BACKOFF_MIN;
    loop {
        let started = tokio::select! {
            r = CheckpointTask::start(flow.clone()) => r,
            _ = stopped(&mut shutdown) => return,
        };
        match started {
            Ok(task) => return task.run(shutdown).await,
            Err(e) => {
                tracing::warn!(flow = %flow.name, retry_in_ms = wait.as_millis() as u64, error = %e, "checkpoints could not start; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stopped(&mut shutdown) => return,
                }
                wait = (wait * 2).min(BACKOFF_MAX);
            }
        }
    }
}

async fn start(flow: Arc<Flow>) -> ConnectResult<(KafkaSource, TargetSink)> {
    let sink = TargetSink::start(flow.clone()).await?;
    let (store, saved) = PositionStore::open(&flow.target, &flow.name, flow.settings.replication_factor).await?;
    let source = KafkaSource::start(flow, store, saved).await?;
    Ok((source, sink))
}
