//! Producers whose delivery reports a thread of their own serves, as rdkafka's `ThreadedProducer`
//! does, without its busy wait. `BaseProducer::poll` (rdkafka 0.39) rounds the time left in a
//! round down to whole milliseconds, so every 100 ms round of `ThreadedProducer` ends with up to
//! 1 ms of zero-timeout polls: about 1 % of a core per producer, idle or not. Here a round asks
//! for 50 µs more than whole milliseconds: its last wait ends past the round's end.

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rdkafka::config::{ClientConfig, FromClientConfigAndContext};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, DeliveryResult, ProducerContext};

/// One polling round: `ThreadedProducer`'s 100 ms, plus 50 µs, which the kernel's default timer
/// slack (50 µs) makes the whole-millisecond wait overshoot.
const ROUND: Duration = Duration::from_micros(100_050);

/// A `BaseProducer` (reached through `Deref`) with a thread serving its delivery reports,
/// stopped and joined on drop (within one round, 100 ms).
pub struct PolledProducer<C: ProducerContext + 'static> {
    producer: Arc<BaseProducer<C>>,
    stop: Arc<AtomicBool>,
    poller: Option<JoinHandle<()>>,
}

impl<C: ProducerContext + 'static> PolledProducer<C> {
    /// A producer from `config` reporting deliveries to `context`. Errors: invalid config; no
    /// thread could be started.
    pub fn new(config: &ClientConfig, context: C) -> KafkaResult<Self> {
        let producer = Arc::new(BaseProducer::from_config_and_context(config, context)?);
        let stop = Arc::new(AtomicBool::new(false));
        let poller = {
            let (producer, stop) = (producer.clone(), stop.clone());
            std::thread::Builder::new()
                .name("strait-producer".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        producer.poll(ROUND);
                    }
                })
                .map_err(|e| KafkaError::ClientCreation(format!("producer polling thread: {e}")))?
        };
        Ok(Self { producer, stop, poller: Some(poller) })
    }
}

/// A delivery report as the record's downstream offset, or its produce error.
pub fn delivery_outcome(result: &DeliveryResult<'_>) -> Result<i64, KafkaError> {
    match result {
        Ok(m) => Ok(m.offset()),
        Err((e, _)) => Err(e.clone()),
    }
}

impl<C: ProducerContext + 'static> Deref for PolledProducer<C> {
    type Target = BaseProducer<C>;

    fn deref(&self) -> &BaseProducer<C> {
        &self.producer
    }
}

impl<C: ProducerContext + 'static> Drop for PolledProducer<C> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(poller) = self.poller.take() {
            // A panic in a delivery callback already reported itself; the producer goes anyway.
            let _ = poller.join();
        }
    }
}
