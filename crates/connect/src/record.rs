//! The record and offset shapes that move between a [`crate::Source`] and a [`crate::Sink`].

use std::sync::Arc;

/// One header: a name and a value that may be null. Order and repeats are meaningful.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Header name (UTF-8).
    pub key: String,
    /// Header value bytes; `None` is a null value, distinct from an empty one.
    pub value: Option<Vec<u8>>,
}

/// Where a record sits in its source: a (topic, partition) stream and the record's offset in it.
///
/// A source resumes from `offset + 1` of the last record whose position was saved.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceOffset {
    /// Source topic name; shared, so tagging every record with it costs no allocation.
    pub topic: Arc<str>,
    /// Source partition number.
    pub partition: i32,
    /// Offset of the record within the partition (records).
    pub offset: i64,
}

/// A record as the runtime moves it, in the spirit of Kafka Connect's `ConnectRecord`.
///
/// `K` and `V` are the connector's own key and value types; either may be absent (a record with
/// no value is a "no payload" record that sinks may skip). `size_bytes` is what the runtime
/// counts against its batch and memory bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRecord<K, V> {
    /// Optional key.
    pub key: Option<K>,
    /// Optional value.
    pub value: Option<V>,
    /// Record timestamp, ms since the Unix epoch, if the source had one.
    pub timestamp_ms: Option<i64>,
    /// Ordered headers; null values allowed.
    pub headers: Vec<Header>,
    /// Where the record came from.
    pub source_offset: SourceOffset,
    /// Approximate in-memory size (bytes), used for batch and backpressure limits.
    pub size_bytes: usize,
}
