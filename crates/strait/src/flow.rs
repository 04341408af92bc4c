//! Runs one flow on this instance: joins the flow's slot group on the target ([`crate::slots`])
//! and, for each slot the group gives it, drives a data path with the connector runtime — the
//! TargetSink (fencing the slot's previous owner), the positions it left ([`crate::resume`]),
//! then the source — retrying with backoff while a cluster is unreachable. A revoked slot drains
//! before the group hands it on. The slots share one source consumer (each reads its partitions
//! from a queue of its own) and, in at-least-once mode, one record producer (each keeps its own
//! fenced state producer). The owner of slot 0 also runs heartbeats, checkpoints
//! (sharing one control producer), and topic config and ACL sync.

mod backoff;
mod once_per_flow;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use strait_connect::{ConnectError, ConnectResult, ConnectorRuntime, RuntimeConfig, RuntimeState};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use self::backoff::{with_backoff, BACKOFF_MAX, BACKOFF_MIN};
use self::once_per_flow::{once_per_flow_failure, start_once_per_flow, stop_once_per_flow};
use crate::config::{CopyKind, Delivery, Flow};
use crate::metrics::metrics;
use crate::sink::copy_marks::Marker;
use crate::sink::{
    record_producers, shared_record_producer, target_codec, RecordProducers, SinkParams, TargetReady, TargetSink,
};
use crate::slots::{left_out, others_in_group, slot_of, stranded_after, SlotEvent, SlotGroup};
use crate::source::{source_consumer, source_consumers, KafkaSource, SourceConsumers};
use crate::watch::{run_watch, Committed};

/// Runs `flow` on this instance until `cancel` (then drains the slots it owns, leaves the slot
/// group and returns `Ok`, or the error of a slot that failed before or while draining) or it
/// fails.
///
/// Start-up failures are retried with doubling backoff (0.5 s up to 15 s), each logged, except
/// the permanent ones ([`crate::kafka::classify_start`]), which stop the flow at once naming the setting. Once running, an error that cannot be
/// retried stops the flow and is returned with the topic/partition/offset at fault. A slot taken
/// over by another instance is dropped with an info log when scale-out is on; with it off, the
/// flow runs on one instance only, and this one stops with a [`ConnectError::Fenced`] when
/// another instance owns the flow's slot.
pub async fn run_flow(flow: Arc<Flow>, cancel: CancellationToken) -> ConnectResult<()> {
    let up = |running: bool| metrics().set_flow_up(&flow.name, &flow.source.alias, &flow.target.alias, running);
    up(false);
    tracing::info!(flow = %flow.name, copy = flow.copy.kind.name(), why = %flow.copy.why, "copy kind");
    metrics().set_copy_batches(&flow.source.alias, &flow.target.alias, flow.copy.kind == CopyKind::Batches);
    // Invalid client settings do not heal: the flow stops at once, naming the client.
    let first = match flow.delivery() {
        Delivery::AtLeastOnce => Some(shared_record_producer(&flow)?),
        Delivery::ExactlyOnce { .. } => None,
    };
    let consumer = source_consumer(&flow)?;
    // Each is a few round trips to the target: across a long link, together, in one attempt.
    let start = || async {
        let records = async {
            match &first {
                Some(first) => record_producers(&flow, first.clone()).await.map(|(p, codec)| (Some(p), codec)),
                None => target_codec(&flow).await.map(|codec| (None, codec)),
            }
        };
        let consumers = source_consumers(&flow, consumer.clone());
        let (records, consumers, group, ready) =
            tokio::try_join!(records, consumers, SlotGroup::join(&flow), TargetSink::prepare(&flow))?;
        let marker = Marker::start(&flow, ready.cluster_ids()).await?;
        Ok((records, consumers, group, ready, marker))
    };
    let Some(((records, codec), consumers, (group, events), ready, marker)) =
        with_backoff(&flow, "flow", &cancel, start).await?
    else {
        return Ok(());
    };
    let marking = marker.map(|m| {
        let stop = CancellationToken::new();
        (stop.clone(), tokio::spawn(m.run(stop)))
    });
    // From here on the flow's `compression` is the codec its producers use (`auto` resolved).
    let flow = Arc::new(flow.with_compression(codec));
    let clients = Clients { consumers, records, ready: Arc::new(Mutex::new(Some(ready))) };
    up(true);
    let mut instance = Instance::new(flow.clone(), clients, &cancel);
    let mut member = Some((group, events));
    let run = loop {
        let Some((_, events)) = member.as_mut() else { break Ok(()) };
        match instance.run(events, &cancel).await {
            Ok(Ended::Stranded) => {}
            ended => break ended.map(|_| ()),
        }
        let (group, events) = member.take().expect("a membership");
        drop(events);
        group.leave().await;
        tracing::warn!(flow = %flow.name, group = %flow.slots_group(), "this instance has owned no slot for {:?} and the slot group counts no more members than slots: it was left out of the group; joining it again", stranded_after(&flow));
        match with_backoff(&flow, "slot group", &cancel, || SlotGroup::join(&flow)).await {
            Ok(joined) => member = joined,
            Err(e) => break Err(e),
        }
    };
    // A slot that failed while the flow was stopping (say on SIGTERM) still fails the flow.
    let result = run.and(instance.stop().await);
    if let Some((group, events)) = member {
        // Closed first: the group's revocations at leave need no answer.
        drop(events);
        group.leave().await;
    }
    if let Some((stop, marking)) = marking {
        stop.cancel();
        let _ = marking.await;
    }
    up(false);
    if result.is_ok() {
        tracing::info!(flow = %flow.name, "flow stopped after a final drain");
    }
    result
}

/// How [`Instance::run`] ended without a failure.
enum Ended {
    /// `cancel` fired.
    Cancelled,
    /// The instance owns no slot and its group left it out ([`left_out`]): it must join again.
    Stranded,
}

/// A slot's data path ended: (slot, generation). Its outcome is the task's result.
type SlotEnd = (u32, u64);

/// The clients the slots of this instance share.
#[derive(Clone)]
struct Clients {
    consumers: SourceConsumers,
    /// The record producers (at-least-once); none exactly-once, where each slot has its own
    /// transactional one.
    records: Option<RecordProducers>,
    /// The target made ready while the flow joined its slot group, for the first slot start;
    /// later starts (another slot, a restart) make it ready again.
    ready: Arc<Mutex<Option<TargetReady>>>,
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
    /// Since when the instance owns no slot (none at start).
    unowned_since: Option<Instant>,
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
            unowned_since: Some(Instant::now()),
        }
    }

    /// Follows the group's assignments until `cancel`, a failure, or the group leaves it out
    /// while it owns no slot ([`Ended::Stranded`], checked every 5 s after [`stranded_after`]).
    async fn run(
        &mut self,
        events: &mut mpsc::UnboundedReceiver<SlotEvent>,
        cancel: &CancellationToken,
    ) -> ConnectResult<Ended> {
        let mut check = tokio::time::interval(Duration::from_secs(5));
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return Ok(Ended::Cancelled),
                _ = check.tick() => {
                    let stranded = self.unowned_since.is_some_and(|t| t.elapsed() >= stranded_after(&self.flow));
                    if stranded && left_out(&self.flow).await {
                        return Ok(Ended::Stranded);
                    }
                }
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
                        self.log_owned();
                    }
                }
            }
        }
    }

    fn log_owned(&mut self) {
        let mut owned: Vec<u32> = self.slots.keys().copied().collect();
        owned.sort_unstable();
        self.unowned_since = match (owned.is_empty(), self.unowned_since) {
            (false, _) => None,
            (true, since) => Some(since.unwrap_or_else(Instant::now)),
        };
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

/// The sink first (on the target the flow made ready, through the shared record producers when
/// there are some), fencing the slot's previous owner; then the positions it left, where the source
/// starts, reading through the shared consumer; then the target topics of the partitions the
/// source was assigned, all at once.
async fn start(
    flow: Arc<Flow>,
    slot: u32,
    clients: &Clients,
    committed: Committed,
) -> ConnectResult<(KafkaSource, TargetSink)> {
    let params = SinkParams { flow: flow.clone(), slot };
    let made = clients.ready.lock().unwrap_or_else(|e| e.into_inner()).take();
    let ready = match made {
        Some(ready) => ready,
        None => TargetSink::prepare(&flow).await?,
    };
    let mut sink = TargetSink::start_ready(params, ready, clients.records.as_ref()).await?;
    let stored = crate::resume::load::stored(&flow, slot).await?;
    let source =
        KafkaSource::start_sharing(flow, slot, stored, committed, sink.topic_ids(), &clients.consumers).await?;
    sink.prepare_topics(&source.assigned_topics()).await?;
    Ok((source, sink))
}
