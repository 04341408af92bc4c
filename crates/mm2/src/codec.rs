//! Byte layouts of the MM2 internal records (MM2 classes `OffsetSync`, `Checkpoint`,
//! `Heartbeat` in `connect/mirror-client`).
//!
//! Layout rules shared by all three (Kafka protocol primitive types, no tags, no framing):
//! `INT16`/`INT32`/`INT64` are big-endian two's complement; `STRING` is an `INT16` byte length
//! followed by that many UTF-8 bytes, never null, at most [`MAX_STRING_BYTES`] bytes.
//!
//! | record | key | value |
//! |---|---|---|
//! | [`OffsetSync`] | topic STRING, partition INT32 | upstream INT64, downstream INT64 (no version) |
//! | [`Checkpoint`] | group STRING, topic STRING, partition INT32 | version INT16 = 0, upstream INT64, downstream INT64, metadata STRING |
//! | [`Heartbeat`] | source alias STRING, target alias STRING | version INT16 = 0, timestamp INT64 (ms) |
//!
//! Decoding is strict: truncated input, bytes left over after the last field, invalid UTF-8,
//! a negative string length and (for checkpoints and heartbeats) a value version other than 0
//! are all errors ([`DecodeError`]). MM2 readers skip such records with a warning; callers
//! should do the same.
//!
//! Encoding: `try_encode_key` / `try_encode_value` return [`EncodeError`] when a string is
//! longer than [`MAX_STRING_BYTES`]; `encode_key` / `encode_value` are the infallible
//! shorthands and **panic** in that case. Topic names (≤ 249 bytes), group ids and cluster
//! aliases can never be that long in practice; checkpoint `metadata` is bounded by the broker's
//! `offset.metadata.max.bytes` (default 4096), so use [`Checkpoint::try_encode_value`] if that
//! limit may have been raised.

mod checkpoint;
mod error;
mod heartbeat;
mod offset_sync;
mod wire;

pub use checkpoint::Checkpoint;
pub use error::{DecodeError, EncodeError};
pub use heartbeat::Heartbeat;
pub use offset_sync::OffsetSync;
pub use wire::MAX_STRING_BYTES;
