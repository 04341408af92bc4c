//! The one place that talks to the target's producer: queues records, applies backpressure
//! when librdkafka's queue is full, hands back acks in produce order, and (in exactly-once mode)
//! runs its transactions.
//!
//! Acks come from librdkafka's delivery callback (on the producer's polling thread) tagged with a
//! sequence number, not a future per record, and are appended to a list the sink swaps out
//! whole: per record, one push under a lock nobody else holds for long, no allocation and no
//! wake-up unless the sink is waiting.
//!
//! At-least-once, the slots an instance owns share one record producer (issue 26: one producer
//! per slot cost 2.7× the CPU per GB): each slot's service is a lane of it ([`ProduceService::join`]),
//! with its own records in flight and acks, routed back by the lane the delivery opaque carries.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext};
use tokio::sync::Notify;

use crate::config::ClusterConfig;
use crate::kafka::blocking;
use crate::producer::{delivery_outcome, PolledProducer};

/// A delivery report: the record's sequence number and its downstream offset or error.
type Ack = (usize, Result<i64, KafkaError>);

/// Delivery reports not yet taken by the sink, in arrival order.
#[derive(Default)]
struct Acks {
    received: Mutex<Vec<Ack>>,
    /// The sink is waiting for a report: the callback wakes it.
    waiting: AtomicBool,
    arrived: Notify,
}

impl Acks {
    fn received(&self) -> MutexGuard<'_, Vec<Ack>> {
        // Nothing panics while holding the lock; a poisoned list is still whole.
        self.received.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until a report may have arrived (it may also return early: callers check again).
    async fn arrival(&self) {
        let notified = self.arrived.notified();
        self.waiting.store(true, Ordering::SeqCst);
        // A report pushed before `waiting` was set is seen here; one pushed after sees `waiting`.
        if self.received().is_empty() {
            notified.await;
        }
        self.waiting.store(false, Ordering::SeqCst);
    }
}

/// Bits of a delivery opaque holding the record's sequence number in its lane (wrapping: a lane
/// never has more than [`MAX_TRACKED`] records in flight); the bits above hold the lane.
const SEQ_BITS: u32 = usize::BITS - 16;
const SEQ_MASK: usize = (1 << SEQ_BITS) - 1;
/// Lanes a producer can tell apart at once: ids are handed out round this many, so a lane id
/// comes back only after this many lanes more (acks of a dropped lane's records long arrived).
const LANES: usize = 1 << 16;

/// The lanes of a producer: each one's delivery reports, by lane id.
#[derive(Default)]
struct Lanes {
    by_id: HashMap<usize, Arc<Acks>>,
    next: usize,
}

/// Appends each delivery report to the list of the lane (the [`ProduceService`]) that sent it.
#[derive(Default)]
pub struct AckContext {
    lanes: Mutex<Lanes>,
}

impl AckContext {
    fn lanes(&self) -> MutexGuard<'_, Lanes> {
        // Nothing panics while holding the lock; a poisoned map is still whole.
        self.lanes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new lane reporting to `acks`: its id. `None` when [`LANES`] lanes are open.
    fn open(&self, acks: Arc<Acks>) -> Option<usize> {
        let mut lanes = self.lanes();
        if lanes.by_id.len() >= LANES {
            return None;
        }
        while lanes.by_id.contains_key(&lanes.next) {
            lanes.next = (lanes.next + 1) % LANES;
        }
        let id = lanes.next;
        lanes.next = (id + 1) % LANES;
        lanes.by_id.insert(id, acks);
        Some(id)
    }

    fn close(&self, lane: usize) {
        self.lanes().by_id.remove(&lane);
    }

    /// How many services send through the producer.
    fn open_lanes(&self) -> usize {
        self.lanes().by_id.len()
    }

    /// Hands the report of the record with delivery opaque `opaque` to its lane; a closed lane's
    /// reports are dropped (its records were given up with it).
    fn route(&self, opaque: usize, outcome: Result<i64, KafkaError>) {
        let lanes = self.lanes();
        let Some(acks) = lanes.by_id.get(&(opaque >> SEQ_BITS)) else { return };
        acks.received().push((opaque & SEQ_MASK, outcome));
        if acks.waiting.load(Ordering::SeqCst) {
            acks.arrived.notify_one();
        }
    }
}

impl ClientContext for AckContext {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        crate::client_log::log(level, fac, message)
    }

    fn error(&self, error: KafkaError, reason: &str) {
        crate::client_log::error(&error, reason)
    }
}

impl ProducerContext for AckContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: usize) {
        self.route(opaque, delivery_outcome(result));
    }
}

/// The target producer (idempotent, acks=all, polled by its own thread; transactional in
/// exactly-once mode).
pub type DataProducer = PolledProducer<AckContext>;

/// A produced record awaiting its ack, as the caller described it.
struct Pending<M> {
    meta: M,
    downstream: Option<i64>,
    failed: Option<KafkaError>,
}

/// How long a record waits before it is offered again to librdkafka's full queue. Retrying
/// soon keeps the queue full, so each partition has a full batch waiting when its request in
/// flight is acked; waiting instead for half the records in flight let partitions send partial
/// batches meanwhile: about 14 % more produce requests at 12 partitions, and more CPU per GB
/// (bench/FINDINGS.md, tenth round).
const QUEUE_FULL_RETRY: Duration = Duration::from_millis(1);

/// Records in flight tracked at most while the queue is full: twice librdkafka's default
/// `queue.buffering.max.messages` (100,000). More means that acks arrive behind one record still
/// unacknowledged (a partition whose leader does not answer, say): the sink then waits for it
/// rather than grow this list without bound.
const MAX_TRACKED: usize = 200_000;

/// Delivery errors that say the producer as a whole stopped (fenced, gap-less guarantee, purged,
/// or a transaction already doomed by another record: "erroneous state"), not that the record
/// itself was refused: the record at fault is another one.
const CONSEQUENCES: &[RDKafkaErrorCode] =
    &[RDKafkaErrorCode::Fatal, RDKafkaErrorCode::PurgeQueue, RDKafkaErrorCode::PurgeInflight, RDKafkaErrorCode::State];

fn own_fault(e: &KafkaError) -> bool {
    !e.rdkafka_error_code().is_some_and(|c| CONSEQUENCES.contains(&c))
}

/// A lane of a producer (its own, or one shared by the slots of an instance) plus its records
/// in flight, in produce order.
pub struct ProduceService<M> {
    producer: Arc<DataProducer>,
    /// This service's lane of the producer: the high bits of its records' delivery opaques.
    lane: usize,
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
        Self::join(&Self::new_producer(cluster, settings)?)
    }

    /// A service sending through `producer` beside the others that joined it, each with its own
    /// records in flight and acks. Errors: the producer has `LANES` (65,536) services already.
    pub fn join(producer: &Arc<DataProducer>) -> Result<Self, KafkaError> {
        let acks = Arc::new(Acks::default());
        let lane = producer
            .context()
            .open(acks.clone())
            .ok_or_else(|| KafkaError::ClientCreation(format!("a producer serves at most {LANES} slots at once")))?;
        Ok(Self {
            producer: producer.clone(),
            lane,
            acks,
            taken: VecDeque::new(),
            in_flight: VecDeque::new(),
            first_seq: 0,
            failures: 0,
        })
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

    /// The producer, for metadata checks.
    pub fn producer(&self) -> &Arc<DataProducer> {
        &self.producer
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
        let producer = self.producer.clone();
        blocking(move || call(&producer)).await
    }

    /// Sends the batches lingering in librdkafka's queue now and waits up to `timeout` for every
    /// record's delivery report (librdkafka's `rd_kafka_flush`, which skips `linger.ms` while it
    /// runs): a commit waits for every ack anyway, so lingering would only lengthen it. The
    /// reports still arrive through `wait_acks`. A timeout is not an error: `wait_acks` goes on
    /// waiting. A producer shared with other services is not flushed (the flush would wait for
    /// theirs too, which keep coming): the acks then come after `linger.ms` (5 ms).
    pub async fn flush(&self, timeout: Duration) {
        if self.producer.context().open_lanes() > 1 {
            return;
        }
        let producer = self.producer.clone();
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: the pointer is the live producer's, kept alive by the `Arc` moved in; librdkafka
        // allows flushing from any thread.
        blocking(move || unsafe { rdkafka::bindings::rd_kafka_flush(producer.client().native_ptr(), ms) }).await;
    }

    /// The producer's fatal error, if it has one (for instance fenced by a newer instance).
    pub fn fatal_error(&self) -> Option<(RDKafkaErrorCode, String)> {
        self.producer.client().fatal_error()
    }

    /// Queues `record` described by `meta`. While librdkafka's queue is full, takes the acks
    /// received and retries every `QUEUE_FULL_RETRY` (waiting for the oldest records' acks
    /// once more than `MAX_TRACKED` are in flight), passing each acknowledged record to
    /// `on_ack` in produce order. Errors: a final produce error (for this record or one whose ack
    /// arrived meanwhile).
    pub async fn send(
        &mut self,
        mut record: BaseRecord<'_, [u8], [u8], usize>,
        meta: M,
        on_ack: &mut impl FnMut(M, i64),
    ) -> Result<(), Failed<M>> {
        record = record.delivery_opaque((self.lane << SEQ_BITS) | ((self.first_seq + self.in_flight.len()) & SEQ_MASK));
        loop {
            match self.producer.send(record) {
                Ok(()) => {
                    self.in_flight.push_back(Pending { meta, downstream: None, failed: None });
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

    /// Waits until at most `remaining` records are in flight, passing acknowledged records to
    /// `on_ack` in produce order. Errors: the failed record at fault — the first, in produce
    /// order, refused for a reason of its own; when the producer stopped as a whole, every record
    /// in flight fails, so the others' outcomes are awaited to find it. After an error the records
    /// stay in flight, for [`Self::settle`] or [`Self::forget_in_flight`].
    pub async fn wait_acks(&mut self, remaining: usize, on_ack: &mut impl FnMut(M, i64)) -> Result<(), Failed<M>> {
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
    pub fn take_received_acks(&mut self, on_ack: &mut impl FnMut(M, i64)) -> Result<(), Failed<M>> {
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
        on_ack: &mut impl FnMut(M, i64),
    ) -> Result<(), Failed<M>> {
        let Some(index) = self.index_of(seq) else { return Ok(()) };
        match outcome {
            Ok(offset) => self.in_flight[index].downstream = Some(offset),
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
        while self.in_flight.front().is_some_and(|p| p.downstream.is_some()) {
            self.pop_acked(on_ack);
        }
        Ok(())
    }

    /// After a failure: waits up to `timeout` for the outcome of every record still in flight
    /// and returns them all in produce order (the failed one included), with their downstream
    /// offset when acknowledged (`None`: refused, or no outcome in time). Nothing is in flight
    /// afterwards.
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
        self.in_flight.drain(..).map(|p| (p.meta, p.downstream)).collect()
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

    fn pop_acked(&mut self, on_ack: &mut impl FnMut(M, i64)) {
        if let Some(p) = self.in_flight.pop_front() {
            self.first_seq += 1;
            if let Some(offset) = p.downstream {
                on_ack(p.meta, offset);
            }
        }
    }
}

impl<M> Drop for ProduceService<M> {
    fn drop(&mut self) {
        self.producer.context().close(self.lane);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A service with `records` in flight (sequence numbers 0..records, described by the same
    /// number) whose producer never connects: reports are pushed by hand, in any order.
    fn service(records: u32) -> ProduceService<u32> {
        let cluster = ClusterConfig {
            alias: "t".into(),
            bootstrap_servers: "127.0.0.1:1".into(),
            zones: Vec::new(),
            client: Default::default(),
        };
        let mut service = ProduceService::new(&cluster, &[]).unwrap();
        service.in_flight.extend((0..records).map(|meta| Pending { meta, downstream: None, failed: None }));
        service
    }

    #[tokio::test]
    async fn an_ack_reported_after_a_later_records_refusal_is_kept() {
        let mut service = service(3);
        // Record 1 is refused; the ack of record 0, sent before it, arrives after the refusal
        // (one produce response holds many partitions' outcomes, in no set order).
        let refused = KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge);
        service.acks.received().extend([(1, Err(refused)), (0, Ok(100)), (2, Ok(200))]);
        let mut acked = Vec::new();
        let (at_fault, _) = service.take_received_acks(&mut |meta, offset| acked.push((meta, offset))).unwrap_err();
        assert_eq!(at_fault, 1);
        assert!(acked.is_empty(), "nothing is acknowledged in order before the refusal is seen");
        let outcomes = service.settle(Duration::from_secs(5)).await;
        assert_eq!(outcomes, vec![(0, Some(100)), (1, None), (2, Some(200))]);
    }

    #[tokio::test]
    async fn services_sharing_a_producer_get_only_their_own_acks() {
        let mut a = service(2);
        let mut b = ProduceService::<u32>::join(a.producer()).unwrap();
        b.in_flight.extend((0..2).map(|meta| Pending { meta: 10 + meta, downstream: None, failed: None }));
        let producer = a.producer().clone();
        let context = producer.context();
        // Both lanes have records with sequence numbers 0 and 1: the lane bits tell them apart.
        let (lane_a, lane_b) = (a.lane << SEQ_BITS, b.lane << SEQ_BITS);
        context.route(lane_b | 1, Ok(501));
        context.route(lane_a, Ok(100));
        context.route(lane_b, Ok(500));
        let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
        a.take_received_acks(&mut |m, o| got_a.push((m, o))).unwrap();
        b.take_received_acks(&mut |m, o| got_b.push((m, o))).unwrap();
        assert_eq!(got_a, vec![(0, 100)]);
        assert_eq!(got_b, vec![(10, 500), (11, 501)]);
        // A closed lane's reports go nowhere, and its id is not handed out again at once.
        let closed = b.lane;
        drop(b);
        context.route(closed << SEQ_BITS, Ok(7));
        let c = ProduceService::<u32>::join(a.producer()).unwrap();
        assert_ne!(c.lane, closed);
        assert!(c.acks.received().is_empty());
    }

    #[test]
    fn sequence_numbers_wrap_within_their_bits() {
        let mut s = service(0);
        s.first_seq = SEQ_MASK;
        s.in_flight.extend((0..2).map(|meta| Pending { meta, downstream: None, failed: None }));
        // The second record's sequence number wrapped to 0 in the opaque.
        assert_eq!(s.index_of(SEQ_MASK), Some(0));
        assert_eq!(s.index_of(0), Some(1));
        assert_eq!(s.index_of(1), None);
    }
}
