//! The record that travels from [`crate::source::KafkaSource`] to [`crate::sink::TargetSink`].

use std::sync::Arc;

/// A source record as it travels to the target: where it was and its Kafka key and value.
/// Headers and the timestamp travel in the [`strait_connect::ConnectRecord`] around it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicatedRecord {
    /// Source topic.
    pub topic: Arc<str>,
    /// Source partition (the target partition is the same number).
    pub partition: i32,
    /// Upstream offset.
    pub offset: i64,
    /// Key bytes; `None` for a null key.
    pub key: Option<Vec<u8>>,
    /// Value bytes; `None` for a tombstone.
    pub value: Option<Vec<u8>>,
}
