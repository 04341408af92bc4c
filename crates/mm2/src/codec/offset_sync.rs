//! MM2 `OffsetSync`: "upstream offset U of this source partition was written at downstream
//! offset D".

use super::error::{DecodeError, EncodeError};
use super::wire::{string_size, Reader, Writer};
use crate::offsets::{DownstreamOffset, UpstreamOffset};

/// One offset sync (MM2 class `OffsetSync`), written to `mm2-offset-syncs.<alias>.internal`.
///
/// Key: `topic` STRING (the **source** topic name, not the renamed one), `partition` INT32.
/// Value: `upstream` INT64, `downstream` INT64; there is no version field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetSync {
    /// Source topic name (as named on the source cluster).
    pub topic: String,
    /// Partition number, the same on both clusters.
    pub partition: i32,
    /// Offset of the record on the source cluster.
    pub upstream: UpstreamOffset,
    /// Offset the same record got on the target cluster.
    pub downstream: DownstreamOffset,
}

impl OffsetSync {
    /// Key bytes: topic STRING, partition INT32.
    ///
    /// # Errors
    /// [`EncodeError::StringTooLong`] if `topic` exceeds 32767 UTF-8 bytes.
    pub fn try_encode_key(&self) -> Result<Vec<u8>, EncodeError> {
        let mut w = Writer::with_capacity(string_size(&self.topic) + 4);
        w.string(&self.topic)?;
        w.i32(self.partition);
        Ok(w.finish())
    }

    /// Key bytes: topic STRING, partition INT32.
    ///
    /// # Panics
    /// If `topic` exceeds 32767 UTF-8 bytes (impossible for a real Kafka topic name); see
    /// [`try_encode_key`](Self::try_encode_key).
    pub fn encode_key(&self) -> Vec<u8> {
        self.try_encode_key().expect("offset sync topic longer than 32767 bytes")
    }

    /// Value bytes (16): upstream INT64, downstream INT64. Cannot fail.
    pub fn encode_value(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(16);
        w.i64(self.upstream.0);
        w.i64(self.downstream.0);
        w.finish()
    }

    /// Parses a record of the offset-syncs topic.
    ///
    /// # Errors
    /// [`DecodeError`] if either part is truncated, has trailing bytes, or the topic is not
    /// valid UTF-8 (or has a negative length).
    pub fn decode(key: &[u8], value: &[u8]) -> Result<Self, DecodeError> {
        let mut k = Reader::new(key);
        let topic = k.string()?;
        let partition = k.i32()?;
        k.finish()?;
        let mut v = Reader::new(value);
        let upstream = UpstreamOffset(v.i64()?);
        let downstream = DownstreamOffset(v.i64()?);
        v.finish()?;
        Ok(Self { topic, partition, upstream, downstream })
    }
}
