//! Batch reads from the source consumer, through librdkafka's `rd_kafka_consume_batch_queue`,
//! which rdkafka does not wrap.
//!
//! rdkafka's `BaseConsumer::poll` returns one record per call, and per call librdkafka reads the
//! clock three times and rdkafka once more and allocates an event handle: about 6 % of Strait's CPU
//! in a catch-up (issue 11). A batch read pays that once per call.
//!
//! A batch read serves the consumer queue's other operations itself, and would drop librdkafka's
//! logs and client-wide errors (a refused login) arriving there. So the main queue, which rdkafka
//! forwards to the consumer queue, is unforwarded: the consumer queue holds records and partition
//! errors, and [`SourceReader::events`] serves the main queue (logs and errors) as rdkafka would.
//!
//! The slots of a flow an instance owns share one consumer ([`SharedConsumer`]; issue 26: one per
//! slot cost 2.7× the CPU per GB): each slot's [`SourceReader::lane`] has a queue of its own, to
//! which librdkafka forwards the records of the slot's partitions ([`SourceReader::route`]).
//! librdkafka clears a partition's forwarding when it stops fetching it (an unassignment), and
//! once an application forwarded it, does not forward it to the consumer queue again at the next
//! assignment: its records then wait in the partition's own queue. So a lane forwards its
//! partitions again after every assignment and every second ([`SourceReader::reroute`]), which
//! moves what waits there, in order.

mod message;

use std::ffi::{c_char, CStr};
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rdkafka::bindings as rdsys;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::{ClientContext, TopicPartitionList};
use rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR;

pub use self::message::KafkaMessage;
use crate::client_log::LoggedConsumer;

/// Records read per librdkafka call: enough to spread its per-call cost, few enough that a batch
/// overshoots the caller's byte bound by little.
const CHUNK: usize = 128;

/// A source consumer, read in batches by one or more [`SourceReader`]s.
pub struct SharedConsumer {
    // Queue handles first: dropped before the consumer they belong to.
    queue: Queue,
    main: Queue,
    consumer: Arc<LoggedConsumer>,
}

/// Reads in batches the records of the partitions of a [`SharedConsumer`] routed to it
/// ([`Self::lane`]).
pub struct SourceReader {
    // The queue first: dropped before the consumer it belongs to.
    queue: Queue,
    /// The partitions whose records go to its queue ([`Self::route`]).
    routed: Mutex<Vec<(String, i32)>>,
    shared: Arc<SharedConsumer>,
}

/// A librdkafka queue handle of the consumer.
struct Queue(NonNull<rdsys::rd_kafka_queue_t>);

// SAFETY: librdkafka's queues are thread-safe; the handle is only destroyed on drop.
unsafe impl Send for Queue {}
unsafe impl Sync for Queue {}

impl Drop for Queue {
    fn drop(&mut self) {
        // SAFETY: the handle came from `rd_kafka_queue_get_*` or `rd_kafka_queue_new`, which give
        // the caller one reference; a queue of its own is purged with it.
        unsafe { rdsys::rd_kafka_queue_destroy(self.0.as_ptr()) }
    }
}

impl Drop for SharedConsumer {
    fn drop(&mut self) {
        // rdkafka's forwarding back: librdkafka's teardown purges the main queue and, through the
        // forwarding, records still queued for the consumer. Left there, they would hold their
        // partitions, and the teardown would wait for them forever.
        // SAFETY: live queue handles.
        unsafe { rdsys::rd_kafka_queue_forward(self.main.0.as_ptr(), self.queue.0.as_ptr()) };
    }
}

impl Drop for SourceReader {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            tracing::warn!(error = %e, "source partitions of a stopped slot could not be unassigned");
        }
        // The lane's partitions go back to the consumer queue, which the teardown purges: records
        // fetched meanwhile never stay behind in a queue nobody holds.
        for (topic, partition) in std::mem::take(&mut *lock(&self.routed)).iter() {
            // SAFETY: live handles; the partition queue handle is released at once.
            unsafe { self.shared.forward(topic, *partition, self.shared.queue.0.as_ptr()) };
        }
    }
}

/// `mutex`'s guard; nothing panics while holding it, so a poisoned list is still whole.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl SharedConsumer {
    /// `consumer` (created with a `group.id`, so that rdkafka forwarded the main queue to the
    /// consumer queue), read in batches from now on: its main queue is unforwarded, and served
    /// by [`SourceReader::events`]. `BaseConsumer::poll` must not be called on it any more.
    /// Errors: a consumer without a group.id (it has no consumer queue).
    pub fn new(consumer: LoggedConsumer) -> Result<Arc<Self>, KafkaError> {
        let rk = consumer.client().native_ptr();
        // SAFETY: `rk` is a live consumer handle; each call returns a new queue reference or null.
        let (queue, main) = unsafe { (rdsys::rd_kafka_queue_get_consumer(rk), rdsys::rd_kafka_queue_get_main(rk)) };
        let (Some(queue), Some(main)) = (NonNull::new(queue).map(Queue), NonNull::new(main).map(Queue)) else {
            return Err(KafkaError::ClientCreation("the consumer has no consumer queue (no group.id)".into()));
        };
        // SAFETY: a live queue handle; forwarding to null stops forwarding.
        unsafe { rdsys::rd_kafka_queue_forward(main.0.as_ptr(), ptr::null_mut()) };
        Ok(Arc::new(Self { queue, main, consumer: Arc::new(consumer) }))
    }

    /// The consumer, for metadata.
    pub fn consumer(&self) -> &Arc<LoggedConsumer> {
        &self.consumer
    }

    /// Forwards the records of `topic`/`partition` to `to`.
    ///
    /// # Safety
    /// `to` is a live queue of this consumer.
    unsafe fn forward(&self, topic: &str, partition: i32, to: *mut rdsys::rd_kafka_queue_t) -> bool {
        let Ok(name) = std::ffi::CString::new(topic) else { return false };
        let rk = self.consumer.client().native_ptr();
        let Some(from) = NonNull::new(rdsys::rd_kafka_queue_get_partition(rk, name.as_ptr(), partition)) else {
            return false;
        };
        rdsys::rd_kafka_queue_forward(from.as_ptr(), to);
        rdsys::rd_kafka_queue_destroy(from.as_ptr());
        true
    }
}

impl SourceReader {
    /// A reader of `shared` with a queue of its own, holding only the records of the partitions
    /// routed to it ([`Self::route`]); dropped, it unassigns them. Errors: librdkafka gave no queue.
    pub fn lane(shared: &Arc<SharedConsumer>) -> Result<Self, KafkaError> {
        // SAFETY: a live consumer handle; the call returns a new queue of ours or null.
        let queue = unsafe { rdsys::rd_kafka_queue_new(shared.consumer.client().native_ptr()) };
        let queue = NonNull::new(queue).map(Queue).ok_or_else(|| KafkaError::ClientCreation("no queue".into()))?;
        Ok(Self { queue, routed: Mutex::new(Vec::new()), shared: shared.clone() })
    }

    /// Sends the records of the partitions of `tpl` to this lane's queue. Call it before they
    /// are assigned, so that none goes to the consumer queue (where no lane reads), and again
    /// after (see the module docs); a reader of every record needs none. Errors: a partition
    /// librdkafka has no queue for (a topic name with a NUL byte).
    pub fn route(&self, tpl: &TopicPartitionList) -> Result<(), KafkaError> {
        let mut routed = lock(&self.routed);
        for e in tpl.elements() {
            // SAFETY: the lane's live queue.
            if !unsafe { self.shared.forward(e.topic(), e.partition(), self.queue.0.as_ptr()) } {
                return Err(KafkaError::ClientCreation(format!(
                    "no queue for {} partition {}",
                    e.topic(),
                    e.partition()
                )));
            }
            let key = (e.topic().to_string(), e.partition());
            if !routed.contains(&key) {
                routed.push(key);
            }
        }
        Ok(())
    }

    /// Forwards every partition routed to this lane again: the records of one whose forwarding
    /// librdkafka cleared at a stop still pending when it was last routed come to the lane.
    pub fn reroute(&self) {
        for (topic, partition) in lock(&self.routed).iter() {
            // SAFETY: the lane's live queue. Each partition was forwarded once, so it has a queue.
            unsafe { self.shared.forward(topic, *partition, self.queue.0.as_ptr()) };
        }
    }

    /// The consumer, for assignments and metadata.
    pub fn consumer(&self) -> &Arc<LoggedConsumer> {
        &self.shared.consumer
    }

    /// Unassigns the partitions of this lane still assigned. Errors: librdkafka refused the
    /// unassignment.
    pub fn release(&self) -> Result<(), KafkaError> {
        let assigned = self.shared.consumer.assignment()?;
        let mut tpl = TopicPartitionList::new();
        for (topic, partition) in lock(&self.routed).iter() {
            if assigned.find_partition(topic, *partition).is_some() {
                tpl.add_partition(topic, *partition);
            }
        }
        if tpl.count() == 0 {
            return Ok(());
        }
        self.shared.consumer.incremental_unassign(&tpl)
    }

    /// Serves the consumer's logs and errors as rdkafka does, through its context (to `tracing`
    /// by [`crate::client_log`]: WARN at most, deduplicated), and returns its client-wide errors
    /// (broker connections, a refused login), without waiting.
    pub fn events(&self) -> Vec<KafkaError> {
        let mut errors = vec![];
        loop {
            // SAFETY: a live queue handle; the event returned is ours to destroy.
            let event = unsafe { rdsys::rd_kafka_queue_poll(self.shared.main.0.as_ptr(), 0) };
            if event.is_null() {
                return errors;
            }
            // SAFETY: `event` is a live event until destroyed below.
            unsafe {
                match rdsys::rd_kafka_event_type(event) {
                    rdsys::RD_KAFKA_EVENT_LOG => self.log(event),
                    rdsys::RD_KAFKA_EVENT_ERROR => {
                        let code = rdsys::rd_kafka_event_error(event);
                        if code != RD_KAFKA_RESP_ERR_NO_ERROR {
                            let reason = CStr::from_ptr(rdsys::rd_kafka_event_error_string(event)).to_string_lossy();
                            self.shared.consumer.context().error(KafkaError::Global(code.into()), reason.trim());
                            errors.push(if rdsys::rd_kafka_event_error_is_fatal(event) != 0 {
                                KafkaError::MessageConsumptionFatal(code.into())
                            } else {
                                KafkaError::MessageConsumption(code.into())
                            });
                        }
                    }
                    // Nothing else is asked for: no group rebalances or commits, no statistics.
                    _ => {}
                }
                rdsys::rd_kafka_event_destroy(event);
            }
        }
    }

    /// # Safety
    /// `event` is a live log event.
    unsafe fn log(&self, event: *mut rdsys::rd_kafka_event_t) {
        let (mut fac, mut text, mut level): (*const c_char, *const c_char, i32) = (ptr::null(), ptr::null(), 0);
        if rdsys::rd_kafka_event_log(event, &mut fac, &mut text, &mut level) == 0 {
            let level = match level {
                0 => RDKafkaLogLevel::Emerg,
                1 => RDKafkaLogLevel::Alert,
                2 => RDKafkaLogLevel::Critical,
                3 => RDKafkaLogLevel::Error,
                4 => RDKafkaLogLevel::Warning,
                5 => RDKafkaLogLevel::Notice,
                6 => RDKafkaLogLevel::Info,
                _ => RDKafkaLogLevel::Debug,
            };
            let (fac, text) = (CStr::from_ptr(fac).to_string_lossy(), CStr::from_ptr(text).to_string_lossy());
            self.shared.consumer.context().log(level, fac.trim(), text.trim());
        }
    }

    /// Appends up to `max` records (or a partition's error) to `out`, waiting up to `wait` for
    /// the first; returns how many were appended. Records of a partition come in offset order.
    pub fn read(&self, max: usize, wait: Duration, out: &mut Vec<Result<KafkaMessage, KafkaError>>) -> usize {
        let mut buf: [*mut rdsys::rd_kafka_message_t; CHUNK] = [ptr::null_mut(); CHUNK];
        let want = max.min(CHUNK);
        let wait_ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: a live queue handle and a buffer of `want` slots.
        let mut n = unsafe { rdsys::rd_kafka_consume_batch_queue(self.queue.0.as_ptr(), 0, buf.as_mut_ptr(), want) };
        if n == 0 && wait_ms > 0 {
            // A batch read with a timeout returns when its slots are full or the time is out, so
            // wait for the first record alone, then take what else is there.
            // SAFETY: as above, one slot, then the slots left.
            n = unsafe { rdsys::rd_kafka_consume_batch_queue(self.queue.0.as_ptr(), wait_ms, buf.as_mut_ptr(), 1) };
            if n == 1 && want > 1 {
                let more = unsafe {
                    rdsys::rd_kafka_consume_batch_queue(self.queue.0.as_ptr(), 0, buf[1..].as_mut_ptr(), want - 1)
                };
                n += more.max(0);
            }
        }
        let n = usize::try_from(n).unwrap_or(0);
        for &m in &buf[..n] {
            // SAFETY: librdkafka returned `n` live messages, each handed over once here.
            out.push(unsafe { KafkaMessage::take(m, &self.shared.consumer) });
        }
        n
    }
}
