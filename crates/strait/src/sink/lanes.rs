//! The batch producers of a slot, one per origin set (issue 45). A producer id's registration
//! names the clusters whose data its batches carry ([`super::producer_ids`]), so a flow that
//! passes on batches another flow wrote on its source (a chain or ring, A→B→C) writes them with a
//! producer of their own, registered with their origins and its source, while the source's own
//! batches go through the slot's first producer (exactly-once, the transactional one, the only
//! one: a transaction belongs to one producer). Within a target partition the batches keep their
//! source order across producers: a producer's batches of a partition wait until those another
//! producer sent there before them are acknowledged.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use strait_connect::{ConnectError, ConnectResult, SourceOffset};
use strait_wire::{Appended, Batch, Outgoing, Producer, ResponseError, WireError};

use super::errors::{fenced, Retry};
use super::producer_ids::Registrar;
use crate::config::{Delivery, Flow};
use crate::kafka::{wire_cluster, wire_error};

/// A source batch on its way: where it came from (the source offset of its last record), the
/// target topic, and the clusters (ids, oldest first) whose data it carried before the source
/// (`None`: born on the source), which pick its producer.
pub struct Routed {
    pub source: SourceOffset,
    pub target: Arc<str>,
    pub batch: Batch,
    pub carried: Option<Arc<[String]>>,
}

/// What the slot's first producer carries before its source: nothing, its batches are born there.
const BORN_ON_SOURCE: Option<Arc<[String]>> = None;

/// One producer and the batches it has in flight.
struct Lane {
    /// The clusters (ids, oldest first) whose data its batches carried before the source;
    /// `None` for the slot's first producer.
    carried: Option<Arc<[String]>>,
    /// Its registration's origins: `carried`, then the source.
    origins: Vec<String>,
    producer: Producer,
    /// The batches sent and not yet acknowledged, by the producer's token.
    in_flight: HashMap<u64, Routed>,
}

/// The slot's batch producers on the target, the first made at start, the others when a batch
/// carrying their origins first comes.
pub struct Lanes {
    lanes: Vec<Lane>,
    /// The lane that sent last to each target partition.
    last: HashMap<(Arc<str>, i32), usize>,
    /// Batches acknowledged, not yet handed back by [`Self::acks`].
    acked: Vec<(Routed, Appended)>,
    registrar: Registrar,
    source_id: String,
    /// How long a batch is retried (the producers' delivery timeout).
    delivery_timeout: Duration,
}

impl Lanes {
    /// The lanes of a slot whose first producer is `first`, registering through `registrar`,
    /// copying from the cluster with id `source_id`.
    pub fn new(first: Producer, registrar: Registrar, source_id: &str, delivery_timeout: Duration) -> Self {
        let first = Lane {
            carried: BORN_ON_SOURCE,
            origins: vec![source_id.to_string()],
            producer: first,
            in_flight: HashMap::new(),
        };
        Self {
            lanes: vec![first],
            last: HashMap::new(),
            acked: Vec::new(),
            registrar,
            source_id: source_id.to_string(),
            delivery_timeout,
        }
    }

    /// The slot's first producer, which exactly-once holds the transactions.
    pub fn first(&mut self) -> &mut Producer {
        &mut self.lanes[0].producer
    }

    /// Sends `batches` (in order within each partition) without waiting for their acks, each
    /// through the lane of what it carried ([`Routed::carried`]), each producer's id registered
    /// before its first batch. Errors: a producer that cannot be made (as the first one's
    /// start); exactly-once, a batch that carried other clusters' data
    /// ([`relayed_exactly_once`]); a failed send or wait for acks ([`failure`]).
    pub async fn send(&mut self, (flow, slot): (&Flow, u32), batches: Vec<Routed>, retry: Retry) -> ConnectResult<()> {
        let mut rest = batches.into_iter().peekable();
        while let Some(head) = rest.next() {
            if head.carried.is_some() && matches!(flow.delivery(), Delivery::ExactlyOnce { .. }) {
                return Err(relayed_exactly_once(flow, &head));
            }
            let lane = self.lane(flow, &head.carried).await?;
            let mut run = vec![head];
            while let Some(r) = rest.next_if(|r| r.carried == run[0].carried) {
                run.push(r);
            }
            self.after_others(lane, &run).await.map_err(|(what, e)| failure(flow, slot, what, e, retry))?;
            let Lane { origins, producer, in_flight, .. } = &mut self.lanes[lane];
            self.registrar.ensure(flow, producer.id().0, origins).await?;
            let out: Vec<Outgoing> = (run.iter())
                .map(|r| Outgoing {
                    topic: r.target.to_string(),
                    partition: r.source.partition,
                    batch: r.batch.clone(),
                })
                .collect();
            let first = producer.send(&out).await.map_err(|e| failure(flow, slot, copying(flow), e, retry))?;
            for r in &run {
                self.last.insert((r.target.clone(), r.source.partition), lane);
            }
            in_flight.extend((first..).zip(run));
        }
        Ok(())
    }

    /// The lane of batches that carried `carried`, made (its producer started) when none is
    /// yet. Errors: as the first producer's start.
    async fn lane(&mut self, flow: &Flow, carried: &Option<Arc<[String]>>) -> ConnectResult<usize> {
        if let Some(i) = self.lanes.iter().position(|l| &l.carried == carried) {
            return Ok(i);
        }
        let carried_ids = carried.as_deref().unwrap_or_default();
        let origins: Vec<String> = carried_ids.iter().chain([&self.source_id]).cloned().collect();
        let what = format!("producer of batches carrying clusters {}", origins.join(", "));
        let cluster = wire_cluster(&flow.target, &what).await?;
        let producer = Producer::init(cluster, self.delivery_timeout)
            .await
            .map_err(|e| wire_error(format!("{what} on target {}", flow.target.alias), e))?;
        tracing::info!(flow = %flow.name, origins = origins.join(","), "a producer for batches relayed from further up a chain or ring");
        self.lanes.push(Lane { carried: carried.clone(), origins, producer, in_flight: HashMap::new() });
        Ok(self.lanes.len() - 1)
    }

    /// Waits for the acks of every other lane that has batches in flight to a partition of
    /// `run`, so the target appends the partition's batches in their source order.
    async fn after_others(&mut self, lane: usize, run: &[Routed]) -> Result<(), (String, WireError)> {
        for r in run {
            let key = (r.target.clone(), r.source.partition);
            let Some(&other) = self.last.get(&key) else { continue };
            let pending = |l: &Lane| l.in_flight.values().any(|p| p.target == key.0 && p.source.partition == key.1);
            if other != lane && pending(&self.lanes[other]) {
                let appended = self.lanes[other].producer.all_appended().await;
                self.received(other, appended).map_err(|e| (format!("ordering {} partition {}", key.0, key.1), e))?;
            }
        }
        Ok(())
    }

    /// Bytes queued in every producer, not yet acknowledged.
    pub fn queued_bytes(&self) -> usize {
        self.lanes.iter().map(|l| l.producer.queued_bytes()).sum()
    }

    /// Waits up to `cap` for some acks of the fullest producer. Errors: as [`Self::send`].
    pub async fn some_acks(&mut self, (flow, slot): (&Flow, u32), cap: Duration, retry: Retry) -> ConnectResult<()> {
        let fullest = (0..self.lanes.len()).max_by_key(|&i| self.lanes[i].producer.queued_bytes()).unwrap_or(0);
        let appended = self.lanes[fullest].producer.some_appended(cap).await;
        self.received(fullest, appended).map_err(|e| failure(flow, slot, copying(flow), e, retry))
    }

    /// The batches acknowledged since the last call, with where each was appended, each
    /// partition's in order: those received (`wait` false) or, waiting for them, every batch
    /// sent. Cancel-safe: acks of a call given up come with the next. Errors: as [`Self::send`].
    pub async fn acks(
        &mut self,
        (flow, slot): (&Flow, u32),
        wait: bool,
        retry: Retry,
    ) -> ConnectResult<Vec<(Routed, Appended)>> {
        for lane in 0..self.lanes.len() {
            let producer = &mut self.lanes[lane].producer;
            let appended = match wait {
                true => producer.all_appended().await,
                false => producer.appended().await,
            };
            self.received(lane, appended).map_err(|e| failure(flow, slot, copying(flow), e, retry))?;
        }
        Ok(std::mem::take(&mut self.acked))
    }

    /// Keeps the batches of `appended`, from `lane`, for [`Self::acks`].
    fn received(&mut self, lane: usize, appended: Result<Vec<(u64, Appended)>, WireError>) -> Result<(), WireError> {
        for (token, a) in appended? {
            if let Some(r) = self.lanes[lane].in_flight.remove(&token) {
                self.acked.push((r, a));
            }
        }
        Ok(())
    }

    /// Forgets the batches in flight (exactly-once, an aborted transaction: their acks count for
    /// nothing; the abort drops them from the producer).
    pub fn forget_in_flight(&mut self) {
        for lane in &mut self.lanes {
            lane.in_flight.clear();
        }
        self.last.clear();
        self.acked.clear();
    }
}

/// What a failed send or ack of data batches was doing.
fn copying(flow: &Flow) -> String {
    format!("copying batches to {}", flow.target.alias)
}

/// The error of a batch `r` that carried other clusters' data, exactly-once.
fn relayed_exactly_once(flow: &Flow, r: &Routed) -> ConnectError {
    let carried = r.carried.as_deref().unwrap_or_default().join(", ");
    ConnectError::invalid(
        format!(
            "flow {}: the batch of {} partition {} ending at offset {}",
            flow.name, r.source.topic, r.source.partition, r.source.offset
        ),
        format!("it carries the data of clusters {carried}, passed on by another batch flow (a chain or ring under the identity policy): exactly-once, one transaction holds one producer's batches, so only at-least-once batch flows pass batches on; delivery = \"at_least_once\", or copy = \"records\", which guards by header"),
    )
}

/// The error of a failed call of the batch producer, described by `context`. At-least-once
/// ([`Retry::Never`]) never retriable: the producer's sequences are unknown after a failed
/// produce, so the flow starts anew with a new producer rather than the runtime retrying the
/// batch on the same one. Exactly-once: fenced by another instance stops the slot
/// ([`fenced`]), unless the transaction outlived its timeout (the target aborted it); a
/// batch not taken in time, or a broker error Kafka marks retriable, is retriable (the abort
/// bumps the epoch, so sequences restart); a refusal (too large, invalid, not authorized)
/// stops the flow naming the batch.
pub(super) fn failure(flow: &Flow, slot: u32, context: String, e: WireError, retry: Retry) -> ConnectError {
    match retry {
        Retry::Never => match wire_error(context, e) {
            ConnectError::Retriable { context, cause } => ConnectError::Backend { context, cause },
            e => e,
        },
        Retry::Replay { .. } if e.is_fenced() => match retry.outlived() {
            true => ConnectError::retriable(context, e),
            false => fenced(flow, slot, e.to_string()),
        },
        Retry::Replay { .. } => match &e {
            // A target topic gone for good is no passing error: the flow stops, and its next
            // start copies the topic again.
            WireError::NotProduced { error: Some(ResponseError::UnknownTopicOrPartition), .. } => {
                wire_error(context, e)
            }
            WireError::NotProduced { error, .. } if error.is_none_or(|e| e.is_retriable()) => {
                ConnectError::retriable(context, e)
            }
            _ => wire_error(context, e),
        },
    }
}
