//! MM2 `Heartbeat`: proof of life of a replication flow, and the record that lets
//! `MirrorClient.upstreamClusters` discover the topology.

use super::error::{DecodeError, EncodeError};
use super::wire::{string_size, Reader, Writer};

/// Version written in, and required from, the value's leading INT16.
const VALUE_VERSION: i16 = 0;

/// One heartbeat (MM2 class `Heartbeat`), written to the `heartbeats` topic on the target
/// cluster and replicated onward like a data topic.
///
/// Key: `source_alias` STRING, `target_alias` STRING.
/// Value: version INT16 (= 0), `timestamp_ms` INT64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    /// Alias of the cluster the flow reads from.
    pub source_alias: String,
    /// Alias of the cluster the flow writes to.
    pub target_alias: String,
    /// Emission time, milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
}

impl Heartbeat {
    /// Key bytes: source alias STRING, target alias STRING.
    ///
    /// # Errors
    /// [`EncodeError::StringTooLong`] if an alias exceeds 32767 UTF-8 bytes.
    pub fn try_encode_key(&self) -> Result<Vec<u8>, EncodeError> {
        let mut w = Writer::with_capacity(string_size(&self.source_alias) + string_size(&self.target_alias));
        w.string(&self.source_alias)?;
        w.string(&self.target_alias)?;
        Ok(w.finish())
    }

    /// Key bytes: source alias STRING, target alias STRING.
    ///
    /// # Panics
    /// If an alias exceeds 32767 UTF-8 bytes; see [`try_encode_key`](Self::try_encode_key).
    pub fn encode_key(&self) -> Vec<u8> {
        self.try_encode_key().expect("heartbeat cluster alias longer than 32767 bytes")
    }

    /// Value bytes (10): version INT16 = 0, timestamp INT64 (ms). Cannot fail.
    pub fn encode_value(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(10);
        w.i16(VALUE_VERSION);
        w.i64(self.timestamp_ms);
        w.finish()
    }

    /// Parses a record of a heartbeats topic.
    ///
    /// # Errors
    /// [`DecodeError::BadVersion`] if the value version is not 0; otherwise [`DecodeError`] for
    /// truncation, trailing bytes, negative string lengths or invalid UTF-8.
    pub fn decode(key: &[u8], value: &[u8]) -> Result<Self, DecodeError> {
        let mut k = Reader::new(key);
        let source_alias = k.string()?;
        let target_alias = k.string()?;
        k.finish()?;
        let mut v = Reader::new(value);
        let version = v.i16()?;
        if version != VALUE_VERSION {
            return Err(DecodeError::BadVersion(version));
        }
        let timestamp_ms = v.i64()?;
        v.finish()?;
        Ok(Self { source_alias, target_alias, timestamp_ms })
    }
}
