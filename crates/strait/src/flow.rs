//! Runs one flow on this instance: joins the flow's slot group on the target ([`crate::slots`])
//! and, for each slot the group gives it, drives a data path with the connector runtime — the
//! TargetSink (fencing the slot's previous owner), the positions it left ([`crate::resume`]),
//! then the source — retrying with backoff while a cluster is unreachable. A revoked slot drains
//! before the group hands it on. The slots share one source consumer (each reads its partitions
//! from a queue of its own) and, in at-least-once mode, one record producer (each keeps its own
//! fenced state producer). The owner of slot 0 also runs heartbeats, checkpoints
//! (sharing one control producer), and topic config and ACL sync.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use strait_connect::{ConnectError, ConnectResult, ConnectorRuntime, RuntimeConfig, RuntimeState};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::config::{Delivery, Flow};
use crate::consume::SharedConsumer;
use crate::control::checkpoint::CheckpointTask;
use crate::control::heartbeat::{ensure_heartbeats_topic, run_heartbeats};
use crate::control::topic_acls::run_topic_acl_sync;
use crate::control::topic_configs::run_topic_config_sync;
use crate::kafka::{classify_start, connect_error, control_producer, StartFailure};
use crate::metrics::metrics;
use crate::sink::service::DataProducer;
use crate::sink::{shared_record_producer, SinkParams, TargetSink};
use crate::slots::{others_in_group, slot_of, SlotEvent, SlotGroup};
use crate::source::KafkaSource;
use crate::watch::{run_watch, Committed};

/// First wait before retrying a start; doubled per failure.
const BACKOFF_MIN: Duration = Duration::from_millis(500);
/// Longest wait between start attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(15);

/// Runs `flow` on this instance until `cancel` (then drains the slots it owns, leaves the slot
/// group and returns `Ok`, or the error of a slot that failed before or while draining) or it
/// fails.
///
/// Start-up failures are retried with doubling backoff (0.5 s up to 15 s), each logged, except
/// the permanent ones ([`classify_start`]), which stop the flow at once naming the setting. Once running, an error that cannot be
/// retried stops the flow and is returned with the topic/partition/offset at fault. A slot taken
/// over by another instance is dropped with an info log when scale-out is on; with it off, the
/// flow runs on one instance only, and this one stops with a [`ConnectError::Fenced`] when
/// another instance owns the flow's slot.
pub async fn run_flow(flow: Arc<Flow>, cancel: CancellationToken) -> ConnectResult<()> {
    let up = |running: bool| metrics().set_flow_up(&flow.name, &flow.source.alias, &flow.target.alias, running);
    up(false);
    // Invalid client settings do not heal: the flow stops at once, naming the client.
    let records = match flow.delivery() {
        Delivery::AtLeastOnce => Some(shared_record_producer(&flow)?),
        Delivery::ExactlyOnce { .. } => None,
    };
    let clients = Clients { consumer: KafkaSource::shared_consumer(&flow)?, records };
    let Some((group, mut events)) = with_backoff(&flow, "flow", &cancel, || SlotGroup::join(&flow)).await? else {
        return Ok(());
    };
    up(true);
    let mut instance = Instance::new(flow.clone(), clients, &cancel);
    let run = instance.run(&mut events, &cancel).await;
    // A slot that failed while the flow was stopping (say on SIGTERM) still fails the flow.
    let result = run.and(instance.stop().await);
    // Closed first: the group's revocations at leave need no answer.
    drop(events);
    group.leave().await;
    up(false);
    if result.is_ok() {
        tracing::info!(flow = %flow.name, "flow stopped after a final drain");
    }
    result
}

/// A slot's data path ended: (slot, generation). Its outcome is the task's result.
type SlotEnd = (u32, u64);

/// The clients the slots of this instance share.
#[derive(Clone)]
struct Clients {
    consumer: Arc<SharedConsumer>,
    /// The record producer (at-least-once); none exactly-once, where each slot has its own
    /// transactional one.
    records: Option<Arc<DataProducer>>,
}

/// A slot's data path, running.
struct Running {
    /// Tells apart a slot started again from an earlier run of it whose end is still reported.
    generation: u64,
    cancel: CancellationToken,
    task: JoinHandle<ConnectResult<()>>,
}

/// What this instance runs of a flow: the data paths of its slots (slot 0's also runs the
/// once-per-flow tasks) and the lag watch of its partitions.
struct Instance {
    flow: Arc<Flow>,
    clients: Clients,
    committed: Committed,
    slots: HashMap<u32, Running>,
    generation: u64,
    /// Each slot's data path reports its end here.
    ended: (mpsc::UnboundedSender<SlotEnd>, mpsc::UnboundedReceiver<SlotEnd>),
    watch: (CancellationToken, JoinHandle<()>),
}

impl Instance {
    fn new(flow: Arc<Flow>, clients: Clients, cancel: &CancellationToken) -> Self {
        let committed = Committed::default();
        let watch_cancel = cancel.child_token();
        let watch = tokio::spawn(run_watch(flow.clone(), committed.clone(), watch_cancel.clone()));
        Self {
            flow,
            clients,
            committed,
            slots: HashMap::new(),
            generation: 0,
            ended: mpsc::unbounded_channel(),
            watch: (watch_cancel, watch),
        }
    }

    /// Follows the group's assignments until `cancel` or a failure.
    async fn run(
        &mut self,
        events: &mut mpsc::UnboundedReceiver<SlotEvent>,
        cancel: &CancellationToken,
    ) -> ConnectResult<()> {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                event = events.recv() => match event {
                    None => return Err(ConnectError::backend(format!("flow {}", self.flow.name), "the slot group's thread stopped")),
                    Some(SlotEvent::Assigned(slots)) => {
                        for slot in slots {
                            self.start_slot(slot);
                        }
                        if self.slots.is_empty() && !self.flow.scale_out.enabled {
                            if others_in_group(&self.flow).await {
                                return Err(ConnectError::fenced(
                                    format!("flow {}", self.flow.name),
                                    format!(
                                        "another instance runs this flow (it owns the flow's slot in group {} on {}); \
                                         set [flows.scale_out] enabled = true on every instance to share the flow",
                                        self.flow.slots_group(), self.flow.target.alias
                                    ),
                                ));
                            }
                            // Alone in the group, the assignment came from metadata without the
                            // coordination topic: the next one gives the slot.
                            tracing::warn!(flow = %self.flow.name, group = %self.flow.slots_group(), "the slot group gave this instance no slot while no other instance is in it; waiting for the next assignment");
                        }
                        self.log_owned();
                    }
                    Some(SlotEvent::Refused(e)) => return Err(e),
                    Some(SlotEvent::Revoked(slots, done)) => {
                        let mut stopped = Ok(());
                        for slot in slots {
                            stopped = stopped.and(self.stop_slot(slot).await);
                        }
                        let _ = done.send(());
                        // A slot that failed as it was revoked fails the flow: never restarted
                        // here unnoticed.
                        stopped?;
                        self.log_owned();
                    }
                },
                Some((slot, generation)) = self.ended.1.recv() => {
                    if self.slots.get(&slot).map(|r| r.generation) == Some(generation) {
                        self.stop_slot(slot).await?;
                    }
                }
            }
        }
    }

    fn log_owned(&self) {
        let mut owned: Vec<u32> = self.slots.keys().copied().collect();
        owned.sort_unstable();
        tracing::info!(flow = %self.flow.name, slots = ?owned, of = self.flow.slots(), "slots owned by this instance");
        metrics().set_slots_owned(&self.flow.source.alias, &self.flow.target.alias, self.flow.slots(), &owned);
    }

    fn start_slot(&mut self, slot: u32) {
        if self.slots.contains_key(&slot) {
            return;
        }
        self.generation += 1;
        let (generation, cancel) = (self.generation, CancellationToken::new());
        let (flow, committed, ended) = (self.flow.clone(), self.committed.clone(), self.ended.0.clone());
        let (token, clients) = (cancel.clone(), self.clients.clone());
        let task = tokio::spawn(async move {
            let outcome = run_slot(flow, slot, clients, committed, token).await;
            let _ = ended.send((slot, generation));
            outcome
        });
        self.slots.insert(slot, Running { generation, cancel, task });
    }

    /// Stops `slot`'s data path (its last batch written) and forgets its partitions. Errors: how
    /// the data path failed, if it did (before or while stopping), except a slot taken over by
    /// another instance with scale-out on, which is dropped with an info log.
    async fn stop_slot(&mut self, slot: u32) -> ConnectResult<()> {
        let Some(running) = self.slots.remove(&slot) else { return Ok(()) };
        running.cancel.cancel();
        let outcome = running.task.await.unwrap_or_else(|e| {
            Err(ConnectError::backend(
                format!("flow {} slot {slot}", self.flow.name),
                format!("the data path ended: {e}"),
            ))
        });
        let slots = self.flow.slots();
        self.committed.forget(|topic, partition| slot_of(topic, partition, slots) == slot);
        tracing::info!(flow = %self.flow.name, slot, "slot stopped");
        match outcome {
            Err(e @ ConnectError::Fenced { .. }) if self.flow.scale_out.enabled => {
                tracing::info!(flow = %self.flow.name, slot, reason = %e, "slot taken over by another instance; dropping it");
                Ok(())
            }
            outcome => outcome,
        }
    }

    /// Drains every owned slot and stops the watch. Errors: the first slot's failure.
    async fn stop(&mut self) -> ConnectResult<()> {
        let owned: Vec<u32> = self.slots.keys().copied().collect();
        let mut stopped = Ok(());
        for slot in owned {
            stopped = stopped.and(self.stop_slot(slot).await);
        }
        self.watch.0.cancel();
        let _ = (&mut self.watch.1).await;
        stopped
    }
}

/// How long the once-per-flow tasks may take to finish their cycle when slot 0 stops, before they
/// are dropped (a call to an unreachable cluster can take longer).
const ONCE_PER_FLOW_STOP: Duration = Duration::from_secs(5);

/// The once-per-flow tasks slot 0 runs; each ends in `Err` only when it cannot start for good
/// (a permanent start error, [`classify_start`]), which stops the flow.
type OncePerFlow = (CancellationToken, JoinSet<ConnectResult<()>>);

/// Heartbeats, checkpoints, topic config and ACL sync: run by the owner of slot 0 only, once its data
/// path started (so both clusters answered and accepted Strait's credentials).
fn start_once_per_flow(flow: &Arc<Flow>) -> OncePerFlow {
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
async fn once_per_flow_failure(tasks: &mut Option<OncePerFlow>) -> ConnectError {
    if let Some((_, tasks)) = tasks {
        while let Some(ended) = tasks.join_next().await {
            if let Ok(Err(e)) = ended {
                return e;
            }
        }
    }
    std::future::pending().await
}

async fn stop_once_per_flow(flow: &Flow, (cancel, mut tasks): OncePerFlow) {
    cancel.cancel();
    let finished = tokio::time::timeout(ONCE_PER_FLOW_STOP, async { while tasks.join_next().await.is_some() {} }).await;
    if finished.is_err() {
        tasks.shutdown().await;
    }
    tracing::info!(flow = %flow.name, "slot 0 given up: heartbeats, checkpoints, topic config and ACL sync stopped here");
    metrics().set_control_tasks_up(&flow.source.alias, &flow.target.alias, false);
}

/// Runs the data path of `slot` until `cancel` (then drains and returns `Ok`) or it fails.
async fn run_slot(
    flow: Arc<Flow>,
    slot: u32,
    clients: Clients,
    committed: Committed,
    cancel: CancellationToken,
) -> ConnectResult<()> {
    let start = || start(flow.clone(), slot, &clients, committed.clone());
    let Some((source, sink)) = with_backoff(&flow, "flow", &cancel, start).await? else {
        return Ok(());
    };
    let config = RuntimeConfig {
        // Batches are split between the flow's slots too, bounding an instance's memory.
        max_batch_records: flow.slot_share(flow.batching.max_batch_records, 1_000),
        max_batch_bytes: flow.slot_share(flow.batching.max_batch_bytes, 1 << 20),
        max_batch_wait: flow.batching.commit_interval,
        retry_backoff: BACKOFF_MIN,
        max_retry_backoff: BACKOFF_MAX,
        ..RuntimeConfig::default()
    };
    let mut once_per_flow = (slot == 0).then(|| start_once_per_flow(&flow));
    let (runtime, handle) = ConnectorRuntime::new(source, sink, config);
    // A once-per-flow task that cannot start for good stops the flow: the data path drains first.
    let run = runtime.run();
    tokio::pin!(run);
    let (mut refused, mut stopping) = (None, false);
    let state = loop {
        tokio::select! {
            state = &mut run => break state,
            _ = cancel.cancelled(), if !stopping => {
                handle.shutdown();
                stopping = true;
            }
            e = once_per_flow_failure(&mut once_per_flow), if refused.is_none() => {
                handle.shutdown();
                refused = Some(e);
            }
        }
    };
    // The last handle: the runtime's error is then this function's alone, moved out with its kind.
    drop(handle);
    if let Some(tasks) = once_per_flow {
        stop_once_per_flow(&flow, tasks).await;
    }
    if let Some(e) = refused {
        return Err(e);
    }
    match state {
        RuntimeState::Failed(e) => {
            let e = Arc::try_unwrap(e)
                .unwrap_or_else(|shared| ConnectError::of_kind(shared.kind(), "the data path", shared.to_string()));
            Err(e.within(format_args!("flow {} slot {slot}", flow.name)))
        }
        _ => Ok(()),
    }
}

/// Calls `attempt` until it succeeds (`Ok(Some)`), `cancel` fires (`Ok(None)`) or it fails in a
/// way retrying cannot change ([`StartFailure::Permanent`] of [`classify_start`]: `Err`, naming
/// the setting), waiting 0.5 s doubling to 15 s between transient failures, each logged as a
/// warning naming `what`.
async fn with_backoff<T, F: Future<Output = ConnectResult<T>>>(
    flow: &Flow,
    what: &str,
    cancel: &CancellationToken,
    mut attempt: impl FnMut() -> F,
) -> ConnectResult<Option<T>> {
    let mut wait = BACKOFF_MIN;
    loop {
        let result = tokio::select! {
            r = attempt() => r,
            _ = cancel.cancelled() => return Ok(None),
        };
        let e = match result {
            Ok(v) => return Ok(Some(v)),
            Err(e) => match classify_start(flow, e) {
                StartFailure::Permanent(e) => return Err(e),
                StartFailure::Transient(e) => e,
            },
        };
        // At most BACKOFF_MAX: the milliseconds fit.
        tracing::warn!(flow = %flow.name, retry_in_ms = wait.as_millis() as u64, error = %e, "{what} could not start; retrying");
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = cancel.cancelled() => return Ok(None),
        }
        wait = (wait * 2).min(BACKOFF_MAX);
    }
}

/// Ensures the heartbeats topic (retrying with backoff while the target does not answer), then
/// writes heartbeats until `cancel`. Errors: a permanent start error ([`classify_start`]), which
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
/// the target cannot meet: [`classify_start`]), which stops the flow.
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

/// The sink first (through the shared record producer, when there is one), fencing the slot's
/// previous owner; then the positions it left, where the source starts, reading through the
/// shared consumer; then the target topics of the partitions the source was assigned, all at once.
async fn start(
    flow: Arc<Flow>,
    slot: u32,
    clients: &Clients,
    committed: Committed,
) -> ConnectResult<(KafkaSource, TargetSink)> {
    let params = SinkParams { flow: flow.clone(), slot };
    let mut sink = match &clients.records {
        Some(records) => TargetSink::start_sharing(params, records).await?,
        None => TargetSink::start(params).await?,
    };
    let stored = crate::resume::load::stored(&flow, slot).await?;
    let source = KafkaSource::start_sharing(flow, slot, stored, committed, sink.topic_ids(), &clients.consumer).await?;
    sink.prepare_topics(&source.assigned_topics()).await?;
    Ok((source, sink))
}
