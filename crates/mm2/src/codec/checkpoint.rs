//! MM2 `Checkpoint`: a consumer group's committed source offset and its translation.

use super::error::{DecodeError, EncodeError};
use super::wire::{string_size, Reader, Writer};
use crate::offsets::{DownstreamOffset, UpstreamOffset};

/// Version written in, and required from, the value's leading INT16.
const VALUE_VERSION: i16 = 0;

/// One checkpoint (MM2 class `Checkpoint`), written to `<source-alias>.checkpoints.internal` on
/// the target cluster.
///
/// Key: `group` STRING, `topic` STRING, `partition` INT32.
/// Value: version INT16 (= 0), `upstream` INT64, `downstream` INT64, `metadata` STRING.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Consumer group id.
    pub group: String,
    /// Topic name **as seen on the target cluster** (e.g. `us.orders` under the default policy;
    /// see [`ReplicationPolicy::rename_for_checkpoint`](crate::ReplicationPolicy::rename_for_checkpoint)).
    pub topic: String,
    /// Partition number, the same on both clusters.
    pub partition: i32,
    /// The group's committed offset on the source cluster.
    pub upstream: UpstreamOffset,
    /// That offset translated to the target partition.
    pub downstream: DownstreamOffset,
    /// The commit metadata string of the source group offset (often empty).
    pub metadata: String,
}

impl Checkpoint {
    /// Key bytes: group STRING, topic STRING, partition INT32.
    ///
    /// # Errors
    /// [`EncodeError::StringTooLong`] if `group` or `topic` exceeds 32767 UTF-8 bytes.
    pub fn try_encode_key(&self) -> Result<Vec<u8>, EncodeError> {
        let mut w = Writer::with_capacity(string_size(&self.group) + string_size(&self.topic) + 4);
        w.string(&self.group)?;
        w.string(&self.topic)?;
        w.i32(self.partition);
        Ok(w.finish())
    }

    /// Key bytes: group STRING, topic STRING, partition INT32.
    ///
    /// # Panics
    /// If `group` or `topic` exceeds 32767 UTF-8 bytes; see [`try_encode_key`](Self::try_encode_key).
    pub fn encode_key(&self) -> Vec<u8> {
        self.try_encode_key().expect("checkpoint group or topic longer than 32767 bytes")
    }

    /// Value bytes: version INT16 = 0, upstream INT64, downstream INT64, metadata STRING.
    ///
    /// # Errors
    /// [`EncodeError::StringTooLong`] if `metadata` exceeds 32767 UTF-8 bytes.
    pub fn try_encode_value(&self) -> Result<Vec<u8>, EncodeError> {
        let mut w = Writer::with_capacity(2 + 16 + string_size(&self.metadata));
        w.i16(VALUE_VERSION);
        w.i64(self.upstream.0);
        w.i64(self.downstream.0);
        w.string(&self.metadata)?;
        Ok(w.finish())
    }

    /// Value bytes: version INT16 = 0, upstream INT64, downstream INT64, metadata STRING.
    ///
    /// # Panics
    /// If `metadata` exceeds 32767 UTF-8 bytes (only possible if the source broker's
    /// `offset.metadata.max.bytes` was raised); see [`try_encode_value`](Self::try_encode_value).
    pub fn encode_value(&self) -> Vec<u8> {
        self.try_encode_value().expect("checkpoint metadata longer than 32767 bytes")
    }

    /// Parses a record of a checkpoints topic.
    ///
    /// # Errors
    /// [`DecodeError::BadVersion`] if the value version is not 0 (checked as soon as the two
    /// version bytes are present); otherwise [`DecodeError`] for truncation, trailing bytes,
    /// negative string lengths or invalid UTF-8 in either part.
    pub fn decode(key: &[u8], value: &[u8]) -> Result<Self, DecodeError> {
        let mut k = Reader::new(key);
        let group = k.string()?;
        let topic = k.string()?;
        let partition = k.i32()?;
        k.finish()?;
        let mut v = Reader::new(value);
        let version = v.i16()?;
        if version != VALUE_VERSION {
            return Err(DecodeError::BadVersion(version));
        }
        let upstream = UpstreamOffset(v.i64()?);
        let downstream = DownstreamOffset(v.i64()?);
        let metadata = v.string()?;
        v.finish()?;
        Ok(Self { group, topic, partition, upstream, downstream, metadata })
    }
}
