//! The record that travels from [`crate::source::KafkaSource`] to [`crate::sink::TargetSink`].

use crate::consume::KafkaMessage;

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
    /// A whole record batch as the source stores it (`copy = "batches"`), still compressed: the
    /// record's source offset is the batch's last offset. It has no key or value of its own.
    Batch(strait_wire::Batch),
}

impl ReplicatedRecord {
    /// Key bytes; `None` for a null key (and for a batch).
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            ReplicatedRecord::Owned { key, .. } => key.as_deref(),
            ReplicatedRecord::Kafka(m) => m.key(),
            ReplicatedRecord::Batch(_) => None,
        }
    }

    /// Value bytes; `None` for a tombstone (and for a batch).
    pub fn value(&self) -> Option<&[u8]> {
        match self {
            ReplicatedRecord::Owned { value, .. } => value.as_deref(),
            ReplicatedRecord::Kafka(m) => m.payload(),
            ReplicatedRecord::Batch(_) => None,
        }
    }
}
