//! Delivery reports of the target's record producer, routed to the lane that sent each record.
//! librdkafka's delivery callback (on the producer's polling thread) gets a record's delivery
//! opaque, which carries its lane and its sequence number in that lane, not a future per record;
//! the report is appended to the lane's list, which its [`super::service::ProduceService`] swaps
//! out whole: per record, one push under a lock nobody else holds for long, no allocation and no
//! wake-up unless the service is waiting.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rdkafka::client::ClientContext;
use rdkafka::error::KafkaError;
use rdkafka::producer::{DeliveryResult, ProducerContext};
use tokio::sync::Notify;

use crate::producer::{delivery_outcome, PolledProducer};

/// A delivery report: the record's sequence number and its downstream offset or error.
pub type Ack = (usize, Result<i64, KafkaError>);

/// Delivery reports not yet taken by the sink, in arrival order.
#[derive(Default)]
pub struct Acks {
    received: Mutex<Vec<Ack>>,
    /// The sink is waiting for a report: the callback wakes it.
    waiting: AtomicBool,
    arrived: Notify,
}

impl Acks {
    /// The reports received and not yet taken.
    pub fn received(&self) -> MutexGuard<'_, Vec<Ack>> {
        // Nothing panics while holding the lock; a poisoned list is still whole.
        self.received.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until a report may have arrived (it may also return early: callers check again).
    pub async fn arrival(&self) {
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
/// never has more than `MAX_TRACKED` records in flight); the bits above hold the lane.
pub const SEQ_BITS: u32 = usize::BITS - 16;
pub const SEQ_MASK: usize = (1 << SEQ_BITS) - 1;
/// Lanes a producer can tell apart at once: ids are handed out round this many, so a lane id
/// comes back only after this many lanes more (acks of a dropped lane's records long arrived).
pub const LANES: usize = 1 << 16;

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
    pub fn open(&self, acks: Arc<Acks>) -> Option<usize> {
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

    /// Closes `lane`: its reports go nowhere from now on.
    pub fn close(&self, lane: usize) {
        self.lanes().by_id.remove(&lane);
    }

    /// How many services send through the producer.
    pub fn open_lanes(&self) -> usize {
        self.lanes().by_id.len()
    }

    /// Hands the report of the record with delivery opaque `opaque` to its lane; a closed lane's
    /// reports are dropped (its records were given up with it).
    pub fn route(&self, opaque: usize, outcome: Result<i64, KafkaError>) {
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
