//! Offset newtypes, so an upstream (source-cluster) offset can never be passed where a
//! downstream (target-cluster) offset is expected.
//!
//! Both wrap a Kafka record offset (`INT64`, records counted from the start of the partition).
//! MM2 uses `-1` for "unknown / none"; these types do not forbid it, but the APIs in this crate
//! use `Option` instead wherever a value may be absent.

use std::fmt;

/// A record offset in a partition of the **source** cluster (MM2 `upstreamOffset`).
///
/// Unit: records (Kafka offset). Ordered like the wrapped `i64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UpstreamOffset(pub i64);

/// A record offset in the replicated partition on the **target** cluster (MM2 `offset` /
/// `downstreamOffset`).
///
/// Unit: records (Kafka offset). Ordered like the wrapped `i64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DownstreamOffset(pub i64);

impl fmt::Display for UpstreamOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for DownstreamOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
