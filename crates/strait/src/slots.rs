//! Sharing a flow between instances on Kafka's own group coordination, on the target cluster.
//!
//! A flow's source partitions are spread over S slots ([`slot_of`]). The coordination topic
//! `strait-slots.<source>.<target>.internal` has one partition per slot and stays empty; every
//! instance of the flow subscribes to it in the consumer group `strait-slots-<source>-><target>`
//! with the cooperative-sticky assignor, so the group coordinator decides which instance owns
//! which slot, and a member joining or leaving moves few slots. Each owned slot writes through
//! its own `transactional.id` ([`crate::config::Flow::transactional_id`]), whose
//! `init_transactions` fences the slot's previous owner: the group decides, fencing makes sure.
//! With scale-out off the flow has one slot, so a second instance finds it owned and is refused.
//! The slot count (scale-out turned on, `slots` raised) changes as a rolling change: the topic
//! grows once no instance with the old count is in the group ([`SlotGroup::join`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as sync_mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::TopicPartitionList;
use strait_connect::{ConnectError, ConnectResult};
use tokio::sync::mpsc;

use crate::admin::Admin;
use crate::config::Flow;
use crate::control::checkpoint::groups::GroupClient;
use crate::kafka::{connect_error, is_denied};

/// The slot (in `0..slots`) of source `topic`/`partition`: the topic's FNV-1a hash plus the
/// partition, so the partitions of one topic go round the slots evenly. Stable across versions
/// and instances: every instance must agree.
pub fn slot_of(topic: &str, partition: i32, slots: u32) -> u32 {
    let hash = topic.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    ((u64::from(hash) + partition.max(0) as u64) % u64::from(slots.max(1))) as u32
}

/// A change of the slots this instance owns.
pub enum SlotEvent {
    /// Slots the group gave this instance (possibly none).
    Assigned(Vec<u32>),
    /// Slots to give up; answer on the sender once each stopped (its last batch committed or
    /// aborted): the group waits for it before another instance takes them.
    Revoked(Vec<u32>, sync_mpsc::SyncSender<()>),
    /// The group refuses this instance for good (a session timeout the brokers do not allow, a
    /// missing ACL): no slot will ever come.
    Refused(ConnectError),
}

/// Passes the group's assignments on as [`SlotEvent`]s.
struct GroupContext {
    events: mpsc::UnboundedSender<SlotEvent>,
    /// The instance is leaving: revocations at close need no answer (its slots already stopped).
    leaving: Arc<AtomicBool>,
    flow: String,
}

impl ClientContext for GroupContext {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        crate::client_log::log(level, fac, message)
    }

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        crate::client_log::error(&error, reason)
    }
}

impl ConsumerContext for GroupContext {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(tpl) = rebalance {
            let slots = slots_in(tpl);
            if slots.is_empty() || self.leaving.load(Ordering::SeqCst) {
                return;
            }
            let (done, stopped) = sync_mpsc::sync_channel(1);
            // Blocks the group's polling thread, as the revocation must: the slots' last batches
            // are written before another instance may take them.
            if self.events.send(SlotEvent::Revoked(slots, done)).is_ok() {
                let _ = stopped.recv();
            }
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                let _ = self.events.send(SlotEvent::Assigned(slots_in(tpl)));
            }
            Rebalance::Error(e) => {
                tracing::warn!(flow = %self.flow, error = %e, "slot group rebalance failed; the group retries")
            }
            Rebalance::Revoke(_) => {}
        }
    }
}

/// The slots of an assignment: its partitions of the coordination topic (never negative).
fn slots_in(tpl: &TopicPartitionList) -> Vec<u32> {
    tpl.elements().iter().filter_map(|e| u32::try_from(e.partition()).ok()).collect()
}

/// How long [`join`](SlotGroup::join) and [`resize`] wait for a created or grown coordination
/// topic to show its partition count in the metadata the slot group will read: a group assigning
/// from older metadata gives the only instance no slot at all (a new topic not yet known, seen on
/// a three-broker target: the flow then stopped as if another instance ran it) or leaves new
/// slots without an owner until librdkafka's next metadata refresh.
const GROWN_METADATA_TIMEOUT: Duration = Duration::from_secs(30);

/// Changes the coordination topic of `flow` from `partitions` to `slots` partitions, a rolling
/// change: it grows (Kafka's CreatePartitions) only when the flow's slot group has no member,
/// since a member runs with the old count. Errors: a [`ConnectError::Conflict`] naming
/// `[flows.scale_out] slots` while instances with the old count are alive, or when the count
/// would shrink (Kafka cannot remove partitions); a [`ConnectError::Backend`] (retriable) when
/// the group cannot be described, the topic grown, or the new count is not seen in time.
async fn resize(flow: &Flow, admin: &Admin, partitions: usize, slots: usize) -> ConnectResult<()> {
    let (topic, group, cluster) = (flow.slots_topic(), flow.slots_group(), &flow.target.alias);
    let refused = |why: String| {
        ConnectError::conflict(
            format!("flow {}: [flows.scale_out] slots", flow.name),
            format!(
                "the flow has {slots} slot(s) but {topic} on {cluster} has {partitions} partition(s), the slots its \
                 instances use; {why}"
            ),
        )
    };
    if partitions > slots {
        return Err(refused(
            "the slot count cannot shrink (Kafka cannot remove partitions): stop every instance of the flow and delete \
             that topic (positions are kept per source partition, so nothing is copied twice)"
                .into(),
        ));
    }
    let what = format!("describe group {group} on cluster {cluster} (needs Describe on it)");
    let members = group_members(flow).await.map_err(|e| connect_error(&what, e))?;
    if members > 0 {
        return Err(refused(format!(
            "{members} instance(s) with that count still run (members of group {group}); the count grows when none \
             does: stop every instance of the flow, then start them with the new count"
        )));
    }
    let what = format!("grow topic {topic} on cluster {cluster} to {slots} partitions (needs Alter on it)");
    admin.add_partitions(&topic, slots).await.map_err(|e| connect_error(&what, e))?;
    await_partitions(admin, &topic, slots, &what).await?;
    tracing::info!(flow = %flow.name, %topic, from = partitions, to = slots, "no instance runs the flow with the old slot count: coordination topic grown to the new one");
    Ok(())
}

/// Waits until the metadata shows `topic` with `partitions` partitions ([`GROWN_METADATA_TIMEOUT`]
/// at most). Errors: a backend error naming `what` when it cannot be asked or is not seen in time.
async fn await_partitions(admin: &Admin, topic: &str, partitions: usize, what: &str) -> ConnectResult<()> {
    let deadline = tokio::time::Instant::now() + GROWN_METADATA_TIMEOUT;
    while admin.describe(topic).await.map_err(|e| connect_error(what, e))?.map(|t| t.partitions) != Some(partitions) {
        if tokio::time::Instant::now() >= deadline {
            return Err(ConnectError::backend(
                what.to_string(),
                format!("the metadata did not show {partitions} partitions within {GROWN_METADATA_TIMEOUT:?}"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Whether `flow`'s slot group has a member besides this instance (which has joined it): the
/// instance that owns the slot when this one was given none. Also true when the group cannot
/// be described, so the caller refuses to run beside an instance it cannot rule out.
pub async fn others_in_group(flow: &Flow) -> bool {
    group_members(flow).await.map_or(true, |m| m > 1)
}

/// The members of `flow`'s slot group (0 when it does not exist). Errors: the group cannot be
/// described.
async fn group_members(flow: &Flow) -> Result<usize, rdkafka::error::KafkaError> {
    let groups = GroupClient::new(&flow.target)?;
    Ok(groups.describe(&flow.slots_group()).await?.map_or(0, |g| g.members))
}

/// How long an instance may own no slot before [`left_out`] is asked: three session timeouts,
/// at least 30 s, so a rebalance under way is never taken for a lost membership.
pub fn stranded_after(flow: &Flow) -> Duration {
    (flow.scale_out.session_timeout * 3).max(Duration::from_secs(30))
}

/// Whether this instance, owning no slot, was left out of `flow`'s slot group: the group counts
/// no more members than slots, so the cooperative-sticky assignor would give every member one,
/// and this instance is not among them. librdkafka can lose its session (the target's
/// coordinator unanswering for a session timeout, seen when a whole machine stalled for 8 s) and
/// then never join again; a new membership is the way back. False when the group cannot be
/// described: asked again later.
pub async fn left_out(flow: &Flow) -> bool {
    group_members(flow).await.is_ok_and(|m| m <= flow.slots() as usize)
}

/// Membership of this instance in the flow's slot group; polled by its own thread.
pub struct SlotGroup {
    leaving: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SlotGroup {
    /// Ensures the coordination topic (one partition per slot) and joins the flow's group. The
    /// returned receiver gets the slots this instance is given and must give up. Errors: the
    /// target cannot be reached or the topic created (retriable by the caller); a
    /// [`ConnectError::Conflict`] when the topic has another slot count than the flow's and
    /// `resize` cannot change it.
    pub async fn join(flow: &Flow) -> ConnectResult<(Self, mpsc::UnboundedReceiver<SlotEvent>)> {
        let topic = flow.slots_topic();
        let what =
            format!("create topic {topic} on cluster {} at {}", flow.target.alias, flow.target.bootstrap_servers);
        let admin = Admin::new(&flow.target).map_err(|e| connect_error(&what, e))?;
        let existing = admin.describe(&topic).await.map_err(|e| connect_error(&what, e))?;
        let slots = usize::try_from(flow.slots()).map_err(|e| ConnectError::backend("the slot count", e))?;
        match existing {
            None => {
                admin
                    .create_topic(&topic, slots, flow.writing.replication_factor, &[])
                    .await
                    .map_err(|e| connect_error(&what, e))?;
                await_partitions(&admin, &topic, slots, &what).await?;
            }
            Some(info) if info.partitions != slots => resize(flow, &admin, info.partitions, slots).await?,
            Some(_) => {}
        }
        let session_ms = flow.scale_out.session_timeout.as_millis().to_string();
        let heartbeat_ms = (flow.scale_out.session_timeout.as_millis() / 5).max(100).to_string();
        let (events, received) = mpsc::unbounded_channel();
        let leaving = Arc::new(AtomicBool::new(false));
        let context = GroupContext { events: events.clone(), leaving: leaving.clone(), flow: flow.name.clone() };
        let consumer: BaseConsumer<GroupContext> = flow
            .target
            .client_config(&[
                ("group.id", &flow.slots_group()),
                ("partition.assignment.strategy", "cooperative-sticky"),
                ("session.timeout.ms", &session_ms),
                ("heartbeat.interval.ms", &heartbeat_ms),
                ("enable.auto.commit", "false"),
                ("auto.offset.reset", "latest"),
            ])
            .create_with_context(context)
            .map_err(|e| ConnectError::backend(format!("slot group consumer on {}", flow.target.alias), e))?;
        consumer.subscribe(&[&topic]).map_err(|e| connect_error(format!("join group {}", flow.slots_group()), e))?;
        let (stop, name) = (leaving.clone(), flow.name.clone());
        let (refused, session) = (events.clone(), flow.scale_out.session_timeout.as_millis());
        let group = flow.slots_group();
        let thread = std::thread::Builder::new()
            .name("strait-slots".into())
            .spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    // Nothing is ever written to the topic: polling serves the group's heartbeats
                    // and rebalances. Transport errors are librdkafka's to retry.
                    let Some(Err(e)) = consumer.poll(Duration::from_millis(200)) else { continue };
                    let refusal = match e.rdkafka_error_code() {
                        Some(RDKafkaErrorCode::InvalidSessionTimeout) => Some(ConnectError::conflict(
                            format!("flow {name}: [flows.scale_out] session_timeout_ms"),
                            format!(
                                "the target's brokers do not allow {session} ms (their group.min.session.timeout.ms and \
                                 group.max.session.timeout.ms bound it; 6,000 and 1,800,000 by default)"
                            ),
                        )),
                        Some(code) if is_denied(code) => Some(connect_error(format!("join group {group}"), e.clone())),
                        _ => None,
                    };
                    match refusal {
                        Some(refusal) => {
                            let _ = refused.send(SlotEvent::Refused(refusal));
                            break;
                        }
                        None => tracing::debug!(flow = %name, error = %e, "slot group"),
                    }
                }
                // Dropping the consumer leaves the group at once: the others rebalance without
                // waiting for the session timeout.
                drop(consumer);
            })
            .map_err(|e| ConnectError::backend("start the slot group thread", e))?;
        tracing::info!(flow = %flow.name, group = %flow.slots_group(), slots = flow.slots(), "joined the flow's slot group");
        Ok((Self { leaving, thread: Some(thread) }, received))
    }

    /// Leaves the group (after this instance's slots stopped).
    pub async fn leave(mut self) {
        self.leaving.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

impl Drop for SlotGroup {
    fn drop(&mut self) {
        self.leaving.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_stable_and_spread_a_topic_evenly() {
        // Pinned: instances of different versions must agree.
        assert_eq!(slot_of("orders", 0, 12), slot_of("orders", 12, 12));
        assert_eq!(slot_of("orders", 5, 1), 0);
        let mut per_slot = [0; 12];
        for p in 0..24 {
            per_slot[slot_of("clicks", p, 12) as usize] += 1;
        }
        assert_eq!(per_slot, [2; 12]);
        assert_eq!(slot_of("a", 0, 1_000_000), 0xe40c292c_u32 % 1_000_000);
    }
}
