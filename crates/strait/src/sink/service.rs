//! The one place that talks to the target's producer: queues records, applies backpressure
//! when librdkafka's queue is full, hands back acks as they arrive (in produce order within a
//! partition, so a partition whose leader does not answer holds back no other's), and (in
//! exactly-once mode) runs its transactions.
//!
//! Acks come tagged with a sequence number from the delivery callback (`sink/acks.rs`).
//!
//! At-least-once, the slots an instance owns share the flow's record producers (issue 26: one
//! producer per slot cost 2.7× the CPU per GB): each slot's service is a lane of each
//! ([`ProduceService::join`]), with its own records in flight and acks, routed back by the lane
//! the delivery opaque carries. Across a long link there are several (`connections_per_broker`,
//! issue 43: one TCP connection carries one window per round trip), each partition's records
//! always through the same one, so they stay in order under its idempotence.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, Producer};

pub use super::acks::DataProducer;
use super::acks::{Ack, AckContext, Acks, LANES, SEQ_BITS, SEQ_MASK};
use crate::config::ClusterConfig;
use crate::kafka::blocking;
use crate::producer::PolledProducer;

/// A produced record awaiting its ack, as the caller described it.
struct Pending<M> {
    meta: M,
    downstream: Option<i64>,
    failed: Option<KafkaError>,
    /// Its ack was handed to the caller (`on_ack`).
    reported: bool,
}

impl<M> Pending<M> {
    fn new(meta: M) -> Self {
        Self { meta, downstream: None, failed: None, reported: false }
    }
}

/// How long a record waits before it is offered again to librdkafka's full queue. Retrying
/// soon keeps the queue full, so each partition has a full batch waiting when its request in
/// flight is acked; waiting instead for half the records in flight let partitions send partial
/// batches meanwhile: about 14 % more produce requests at 12 partitions, and more CPU per GB
/// (bench/FINDINGS.md, tenth round).
const QUEUE_FULL_RETRY: Duration = Duration::from_millis(1);

/// Records in flight tracked at most while the queue is full: twice librdkafka's default
/// `queue.buffering.max.messages` (100,000). More means that acks arrive behind one record still
/// unacknowledged (a partition whose leader does not answer, say): their acks are handed on, but
/// the sink then waits for that record rather than grow this list without bound.
const MAX_TRACKED: usize = 200_000;

/// Delivery errors that say the producer as a whole stopped (fenced, gap-less guarantee, purged,
/// or a transaction already doomed by another record: "erroneous state"), not that the record
/// itself was refused: the record at fault is another one.
const CONSEQUENCES: &[RDKafkaErrorCode] =
    &[RDKafkaErrorCode::Fatal, RDKafkaErrorCode::PurgeQueue, RDKafkaErrorCode::PurgeInflight, RDKafkaErrorCode::State];

fn own_fault(e: &KafkaError) -> bool {
    !e.rdkafka_error_code().is_some_and(|c| CONSEQUENCES.contains(&c))
}

/// A producer a service sends through, and the service's lane of it: the high bits of its
/// records' delivery opaques.
struct Joined {
    producer: Arc<DataProducer>,
    lane: usize,
}

/// A lane of one producer (its own, or one shared by the slots of an instance), or of each of
/// several, plus its records in flight, in produce order.
pub struct ProduceService<M> {
    /// Never empty; a transactional service has one.
    producers: Vec<Joined>,
    acks: Arc<Acks>,
    /// Reports taken from `acks`, not yet matched to their records.
    taken: VecDeque<Ack>,
    /// Records in flight; `in_flight[0]` has sequence number `first_seq`.
    in_flight: VecDeque<Pending<M>>,
    first_seq: usize,
    /// Records in flight whose delivery failed.
    failures: usize,
}

/// A record whose ack failed: its description and the error.
pub type Failed<M> = (M, KafkaError);

impl<M: Clone> ProduceService<M> {
    /// A producer for `cluster` with `settings` (cluster overrides win), for services to
    /// [`Self::join`]. Errors: invalid config.
    pub fn new_producer(cluster: &ClusterConfig, settings: &[(&str, &str)]) -> Result<Arc<DataProducer>, KafkaError> {
        Ok(Arc::new(PolledProducer::new(&cluster.client_config(settings), AckContext::default())?))
    }

    /// A service with a producer of its own ([`Self::new_producer`]). Errors: invalid config.
    pub fn new(cluster: &ClusterConfig, settings: &[(&str, &str)]) -> Result<Self, KafkaError> {
        Self::join(&[Self::new_producer(cluster, settings)?])
    }

    /// A service sending through `producers` (at least one) beside the others that joined them,
    /// each with its own records in flight and acks; a partition's records always go through the
    /// same one. Errors: a producer has `LANES` (65,536) services already.
    pub fn join(producers: &[Arc<DataProducer>]) -> Result<Self, KafkaError> {
        let mut service = Self {
            producers: Vec::with_capacity(producers.len()),
            acks: Arc::new(Acks::default()),
            taken: VecDeque::new(),
            in_flight: VecDeque::new(),
            first_seq: 0,
            failures: 0,
        };
        for producer in producers {
            // On failure, dropping `service` closes the lanes opened so far.
            let lane = producer.context().open(service.acks.clone()).ok_or_else(|| {
                KafkaError::ClientCreation(format!("a producer serves at most {LANES} slots at once"))
            })?;
            service.producers.push(Joined { producer: producer.clone(), lane });
        }
        Ok(service)
    }

    /// Records given to the producer so far (acknowledged or not).
    pub fn sent(&self) -> usize {
        self.first_seq + self.in_flight.len()
    }

    /// Whether the record with sequence number `seq` (see [`Self::sent`]) is acknowledged, as far
    /// as the acks taken tell.
    pub fn is_acked(&self, seq: usize) -> bool {
        seq < self.first_seq || self.index_of(seq).is_some_and(|i| self.in_flight[i].downstream.is_some())
    }

    /// The (first) producer, for metadata checks.
    pub fn producer(&self) -> &Arc<DataProducer> {
        &self.producers[0].producer
    }

    /// The index of the producer `topic`/`partition`'s records go through, as the batch path picks
    /// a connection ([`strait_wire::connection_of`]); a record without a partition goes through
    /// the first.
    fn pick(&self, topic: &str, partition: Option<i32>) -> usize {
        match partition {
            Some(p) if self.producers.len() > 1 => strait_wire::connection_of(topic, p, self.producers.len()),
            _ => 0,
        }
    }

    /// Forgets every record in flight (after an aborted transaction): their acks, still to come,
    /// are ignored.
    pub fn forget_in_flight(&mut self) {
        self.first_seq += self.in_flight.len();
        self.in_flight.clear();
        self.failures = 0;
    }

    /// Runs a blocking transactional call of the producer (`init_transactions`,
    /// `commit_transaction`...) off the async workers.
    pub async fn transaction<T: Send + 'static>(
        &self,
        call: impl FnOnce(&DataProducer) -> Result<T, KafkaError> + Send + 'static,
    ) -> Result<T, KafkaError> {
        let producer = self.producer().clone();
        blocking(move || call(&producer)).await
    }

    /// Sends the batches lingering in librdkafka's queue now and waits up to `timeout` for every
    /// record's delivery report (librdkafka's `rd_kafka_flush`, which skips `linger.ms` while it
    /// runs): a commit waits for every ack anyway, so lingering would only lengthen it. The
    /// reports still arrive through `wait_acks`. A timeout is not an error: `wait_acks` goes on
    /// waiting. Producers shared with other services are not flushed (the flush would wait for
    /// theirs too, which keep coming): the acks then come after `linger.ms` (5 ms).
    pub async fn flush(&self, timeout: Duration) {
        if self.producers.iter().any(|j| j.producer.context().open_lanes() > 1) {
            return;
        }
        let producers: Vec<Arc<DataProducer>> = self.producers.iter().map(|j| j.producer.clone()).collect();
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        blocking(move || {
            for producer in producers {
                // SAFETY: the pointer is the live producer's, kept alive by the `Arc` moved in;
                // librdkafka allows flushing from any thread.
                unsafe { rdkafka::bindings::rd_kafka_flush(producer.client().native_ptr(), ms) };
            }
        })
        .await;
    }

    /// A producer's fatal error, if one has one (for instance fenced by a newer instance).
    pub fn fatal_error(&self) -> Option<(RDKafkaErrorCode, String)> {
        self.producers.iter().find_map(|j| j.producer.client().fatal_error())
    }

    /// Queues `record` described by `meta`. While librdkafka's queue is full, takes the acks
    /// received and retries every `QUEUE_FULL_RETRY` (waiting for the oldest records' acks
    /// once more than `MAX_TRACKED` are in flight), passing each acknowledged record to
    /// `on_ack` as its ack arrives (see [`Self::wait_acks`]). Errors: a final produce error
    /// (for this record or one whose ack arrived meanwhile).
    pub async fn send(
        &mut self,
        mut record: BaseRecord<'_, [u8], [u8], usize>,
        meta: M,
        on_ack: &mut impl FnMut(&M, i64),
    ) -> Result<(), Failed<M>> {
        let k = self.pick(record.topic, record.partition);
        let seq = (self.first_seq + self.in_flight.len()) & SEQ_MASK;
        record = record.delivery_opaque((self.producers[k].lane << SEQ_BITS) | seq);
        loop {
            match self.producers[k].producer.send(record) {
                Ok(()) => {
                    self.in_flight.push_back(Pending::new(meta));
                    return Ok(());
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    self.take_received_acks(on_ack)?;
                    if self.in_flight.len() > MAX_TRACKED {
                        self.wait_acks(MAX_TRACKED / 2, on_ack).await?;
                    } else {
                        tokio::time::sleep(QUEUE_FULL_RETRY).await;
                    }
                }
                // The producer already stopped as a whole: a record in flight is at fault.
                Err((e, _)) if !own_fault(&e) && !self.in_flight.is_empty() => {
                    self.wait_acks(0, on_ack).await?;
                    return Err((meta, e));
                }
                Err((e, _)) => return Err((meta, e)),
            }
        }
    }

    /// Waits until at most `remaining` records are in flight (a record leaves once it and every
    /// record sent before it are acknowledged), passing each acknowledged record to `on_ack` as
    /// its ack arrives: in produce order within a partition, while a record of another partition
    /// sent before it may still wait. Once a record failed, acks are no longer handed on (see
    /// [`Self::settle`]). Errors: the failed record at fault — the first, in produce
    /// order, refused for a reason of its own; when the producer stopped as a whole, every record
    /// in flight fails, so the others' outcomes are awaited to find it. After an error the records
    /// stay in flight, for [`Self::settle`] or [`Self::forget_in_flight`].
    pub async fn wait_acks(&mut self, remaining: usize, on_ack: &mut impl FnMut(&M, i64)) -> Result<(), Failed<M>> {
        while self.in_flight.len() > remaining {
            match self.next_ack() {
                Some((seq, outcome)) => self.take_ack(seq, outcome, on_ack)?,
                None => self.acks.arrival().await,
            }
        }
        Ok(())
    }

    /// Takes the acks already received, without waiting, like [`Self::wait_acks`]: called as
    /// records are sent, it keeps the records in flight few, so their bookkeeping stays in the
    /// CPU's cache. Errors: as [`Self::wait_acks`].
    pub fn take_received_acks(&mut self, on_ack: &mut impl FnMut(&M, i64)) -> Result<(), Failed<M>> {
        while let Some((seq, outcome)) = self.next_ack() {
            self.take_ack(seq, outcome, on_ack)?;
        }
        Ok(())
    }

    /// The oldest report not yet matched; when none is taken, swaps in every report received
    /// (the two lists trade their allocations).
    fn next_ack(&mut self) -> Option<Ack> {
        if self.taken.is_empty() {
            let mut list = Vec::from(std::mem::take(&mut self.taken));
            std::mem::swap(&mut list, &mut *self.acks.received());
            self.taken = list.into();
        }
        self.taken.pop_front()
    }

    fn take_ack(
        &mut self,
        seq: usize,
        outcome: Result<i64, KafkaError>,
        on_ack: &mut impl FnMut(&M, i64),
    ) -> Result<(), Failed<M>> {
        let Some(index) = self.index_of(seq) else { return Ok(()) };
        match outcome {
            Ok(offset) => {
                let p = &mut self.in_flight[index];
                p.downstream = Some(offset);
                if self.failures == 0 {
                    on_ack(&p.meta, offset);
                    p.reported = true;
                }
            }
            Err(e) => {
                let own = own_fault(&e);
                self.in_flight[index].failed = Some(e);
                self.failures += 1;
                if own {
                    return Err(self.report_failure());
                }
            }
        }
        if self.failures > 0 {
            if self.in_flight.iter().all(|p| p.downstream.is_some() || p.failed.is_some()) {
                return Err(self.report_failure());
            }
            return Ok(());
        }
        while self.in_flight.front().is_some_and(|p| p.reported) {
            self.in_flight.pop_front();
            self.first_seq += 1;
        }
        Ok(())
    }

    /// After a failure: waits up to `timeout` for the outcome of every record still in flight
    /// and returns those whose ack was not handed on yet, in produce order (the failed one
    /// included), with their downstream offset when acknowledged (`None`: refused, or no outcome
    /// in time). Nothing is in flight afterwards.
    pub async fn settle(&mut self, timeout: Duration) -> Vec<(M, Option<i64>)> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut open = self.in_flight.iter().filter(|p| p.downstream.is_none() && p.failed.is_none()).count();
        while open > 0 {
            match self.next_ack() {
                Some((seq, outcome)) => {
                    let Some(p) = self.index_of(seq).map(|i| &mut self.in_flight[i]) else { continue };
                    if p.downstream.is_none() && p.failed.is_none() {
                        open -= 1;
                    }
                    match outcome {
                        Ok(offset) => p.downstream = Some(offset),
                        Err(e) => p.failed = Some(e),
                    }
                }
                None => {
                    if tokio::time::timeout_at(deadline, self.acks.arrival()).await.is_err() {
                        break;
                    }
                }
            }
        }
        self.first_seq += self.in_flight.len();
        self.failures = 0;
        self.in_flight.drain(..).filter(|p| !p.reported).map(|p| (p.meta, p.downstream)).collect()
    }

    /// The index in `in_flight` of the record with sequence number `seq`; `None` for a record
    /// already given up on (after a failure), whose ack is ignored.
    fn index_of(&self, seq: usize) -> Option<usize> {
        Some(seq.wrapping_sub(self.first_seq) & SEQ_MASK).filter(|i| *i < self.in_flight.len())
    }

    /// The record at fault — the first, in produce order, refused for a reason of its own, else
    /// the first refused — with its error. Every record stays in flight for [`Self::settle`] or
    /// [`Self::forget_in_flight`]: one sent before it may still await its ack, and dropping it
    /// here would lose that ack.
    fn report_failure(&self) -> Failed<M> {
        // `min_by_key` keeps the first of equals: the first own fault, else the first failure.
        let (p, e) = (self.in_flight.iter())
            .filter_map(|p| Some((p, p.failed.as_ref()?)))
            .min_by_key(|(_, e)| !own_fault(e))
            .expect("called once a record failed");
        (p.meta.clone(), e.clone())
    }
}

impl<M> Drop for ProduceService<M> {
    fn drop(&mut self) {
        for Joined { producer, lane } in &self.producers {
            producer.context().close(*lane);
        }
    }
}

#[cfg(test)]
mod tests;
