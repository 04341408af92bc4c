//! The record that travels from [`crate::source::KafkaSource`] to [`crate::sink::TargetSink`].

use std::fmt;
use std::sync::Arc;

use rdkafka::consumer::BaseConsumer;
use rdkafka::message::{BorrowedMessage, Message};

/// Key and value of a source record as it travels to the target. Where it was (source topic,
/// partition, upstream offset) is the [`strait_connect::ConnectRecord`]'s `source_offset`; headers
/// and the timestamp travel in that record too.
#[derive(Debug)]
pub enum ReplicatedRecord {
    /// Bytes of their own (records built by hand).
    Owned {
        /// `None` for a null key.
        key: Option<Vec<u8>>,
        /// `None` for a tombstone.
        value: Option<Vec<u8>>,
    },
    /// The source consumer's own message, held until the record is dropped: the bytes are not
    /// copied on the way, only once by librdkafka when the record is produced.
    Kafka(KafkaMessage),
}

impl ReplicatedRecord {
    /// Key bytes; `None` for a null key.
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            ReplicatedRecord::Owned { key, .. } => key.as_deref(),
            ReplicatedRecord::Kafka(m) => m.message.key(),
        }
    }

    /// Value bytes; `None` for a tombstone.
    pub fn value(&self) -> Option<&[u8]> {
        match self {
            ReplicatedRecord::Owned { value, .. } => value.as_deref(),
            ReplicatedRecord::Kafka(m) => m.message.payload(),
        }
    }
}

/// A message polled from a source consumer, kept with (and dropped before) that consumer.
pub struct KafkaMessage {
    // Declared first, so dropped first: librdkafka's message must go before its consumer.
    message: BorrowedMessage<'static>,
    _consumer: Arc<BaseConsumer>,
}

impl KafkaMessage {
    /// Holds `message`, polled from `consumer`, beyond the poll call.
    pub fn new(message: BorrowedMessage<'_>, consumer: Arc<BaseConsumer>) -> Self {
        // SAFETY: only the lifetime changes. A polled message borrows its consumer, which the
        // `Arc` beside it keeps alive until after the message is dropped (field order); the
        // message itself is librdkafka's, freed by its own drop, on any thread (it is `Send`).
        let message = unsafe { std::mem::transmute::<BorrowedMessage<'_>, BorrowedMessage<'static>>(message) };
        Self { message, _consumer: consumer }
    }
}

impl fmt::Debug for KafkaMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "KafkaMessage({} partition {} offset {})",
            self.message.topic(),
            self.message.partition(),
            self.message.offset()
        )
    }
}
