//! Runs one flow: the one place that builds its clients — the TargetSink (which reads the saved
//! positions), the source (told where to start), and the control producer shared by heartbeats
//! and checkpoints — retrying with backoff while a cluster is unreachable, then drives source and
//! sink with the connector runtime until shutdown or failure.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use strait_connect::{ConnectError, ConnectResult, ConnectorRuntime, RuntimeConfig, RuntimeState};
use tokio_util::sync::CancellationToken;

use crate::config::Flow;
use crate::control::checkpoint::CheckpointTask;
use crate::control::heartbeat::run_heartbeats;
use crate::control::topic_configs::run_topic_config_sync;
use crate::kafka::control_producer;
use crate::metrics::metrics;
use crate::sink::TargetSink;
use crate::source::KafkaSource;
use crate::watch::{run_watch, Committed};

/// First wait before retrying a start; doubled per failure.
const BACKOFF_MIN: Duration = Duration::from_millis(500);
/// Longest wait between start attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(15);

/// Runs `flow` until `cancel` (then drains and returns `Ok`) or it fails.
///
/// Start-up failures (cluster unreachable, topic not creatable) are retried with doubling
/// backoff (0.5 s up to 15 s), each logged, except transactions the target refuses, a failed
/// authentication, a missing permission and a source gap the flow may not skip, which stop the
/// flow at once; once running, an error that cannot be retried stops the flow and is
/// returned with the topic/partition/offset at fault.
pub async fn run_flow(flow: Arc<Flow>, cancel: CancellationToken) -> ConnectResult<()> {
    // Refused transactions (a transaction timeout the broker does not allow), failed
    // authentication, missing permissions and a source gap with `on_source_gap = "fail"` stop the
    // flow; everything else at start (an unreachable cluster...) is retried.
    let refused = |e: &ConnectError| {
        matches!(e, ConnectError::Transaction { .. } | ConnectError::Denied { .. } | ConnectError::DataLoss { .. })
    };
    let up = |running: bool| metrics().set_flow_up(&flow.name, &flow.source.alias, &flow.target.alias, running);
    up(false);
    let committed = Committed::default();
    let Some((source, sink)) =
        with_backoff(&flow, "flow", &cancel, refused, || start(flow.clone(), committed.clone())).await?
    else {
        return Ok(());
    };
    up(true);
    let config = RuntimeConfig {
        max_batch_records: flow.max_batch_records,
        max_batch_bytes: flow.max_batch_bytes,
        max_batch_wait: flow.commit_interval,
        retry_backoff: BACKOFF_MIN,
        max_retry_backoff: BACKOFF_MAX,
        ..RuntimeConfig::default()
    };
    let (runtime, handle) = ConnectorRuntime::new(source, sink, config);
    // Side tasks stop with the flow, whether it is shut down or fails.
    let side_cancel = cancel.child_token();
    let mut side = tokio::task::JoinSet::new();
    side.spawn(run_topic_config_sync(flow.clone(), side_cancel.clone()));
    side.spawn(run_watch(flow.clone(), committed, side_cancel.clone()));
    if flow.emit_heartbeats || flow.emit_checkpoints || flow.sync_group_offsets {
        let producer = control_producer(&flow.target).map_err(|e| ConnectError::backend("control producer", e))?;
        if flow.emit_heartbeats {
            side.spawn(run_heartbeats(flow.clone(), producer.clone(), side_cancel.clone()));
        }
        if flow.emit_checkpoints || flow.sync_group_offsets {
            side.spawn(run_checkpoints(flow.clone(), producer, side_cancel.clone()));
        }
    }
    let stopper = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            cancel.cancelled().await;
            handle.shutdown();
        }
    });
    let state = runtime.run().await;
    up(false);
    stopper.abort();
    side_cancel.cancel();
    while side.join_next().await.is_some() {}
    match state {
        RuntimeState::Failed(e) => Err(ConnectError::backend(format!("flow {} failed", flow.name), e.to_string())),
        _ => {
            tracing::info!(flow = %flow.name, "flow stopped after a final drain");
            Ok(())
        }
    }
}

/// Calls `attempt` until it succeeds (`Ok(Some)`), `cancel` fires (`Ok(None)`) or it fails in a
/// way `permanent` says retrying cannot change (`Err`), waiting 0.5 s doubling to 15 s between
/// failures, each logged as a warning naming `what`.
async fn with_backoff<T, E: std::fmt::Display, F: Future<Output = Result<T, E>>>(
    flow: &Flow,
    what: &str,
    cancel: &CancellationToken,
    permanent: impl Fn(&E) -> bool,
    mut attempt: impl FnMut() -> F,
) -> Result<Option<T>, E> {
    let mut wait = BACKOFF_MIN;
    loop {
        let result = tokio::select! {
            r = attempt() => r,
            _ = cancel.cancelled() => return Ok(None),
        };
        match result {
            Ok(v) => return Ok(Some(v)),
            Err(e) if permanent(&e) => return Err(e),
            Err(e) => {
                tracing::warn!(flow = %flow.name, retry_in_ms = wait.as_millis() as u64, error = %e, "{what} could not start; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = cancel.cancelled() => return Ok(None),
                }
                wait = (wait * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// Starts the checkpoint task (retrying with backoff until the target answers) and runs it.
async fn run_checkpoints(flow: Arc<Flow>, producer: rdkafka::producer::FutureProducer, cancel: CancellationToken) {
    let started = with_backoff(
        &flow,
        "checkpoints",
        &cancel,
        |_| false,
        || CheckpointTask::start(flow.clone(), producer.clone()),
    )
    .await;
    if let Ok(Some(task)) = started {
        task.run(cancel).await;
    }
}

/// The sink first: it fences a previous instance (exactly-once) and reads the saved positions,
/// from which the source starts.
async fn start(flow: Arc<Flow>, committed: Committed) -> ConnectResult<(KafkaSource, TargetSink)> {
    let (sink, saved) = TargetSink::start(flow.clone()).await?;
    let source = KafkaSource::start(flow, saved, committed).await?;
    Ok((source, sink))
}
