//! MirrorMaker 2 rules with no I/O.
//!
//! This crate holds the parts of Strait that must agree bit-for-bit with Apache Kafka's
//! MirrorMaker 2 (`connect/mirror` and `connect/mirror-client`):
//!
//! - [`codec`]: the key/value byte layouts of the MM2 internal records
//!   ([`OffsetSync`], [`Checkpoint`], [`Heartbeat`]);
//! - [`policy`]: topic naming ([`ReplicationPolicy`]), internal-topic names and the default
//!   filters;
//! - [`emission`]: when a data record must produce an offset sync ([`PartitionState`]);
//! - [`store`]: translating group offsets through the offset syncs ([`OffsetSyncStore`]);
//! - [`checkpoint_rule`]: which translations become checkpoints ([`should_emit_checkpoint`]);
//! - [`offsets`]: the [`UpstreamOffset`] / [`DownstreamOffset`] newtypes used everywhere;
//! - [`partitioner`]: the partition Kafka's Java producer gives a keyed record (murmur2), where
//!   Connect's offsets topic, read by MM2, holds each key.
//!
//! Nothing here touches the network, the clock or the file system; callers feed values in and
//! get values out.
//!
//! ```
//! use strait_mm2::{Emit, OffsetSync, PartitionState, ReplicationPolicy};
//! use strait_mm2::{DownstreamOffset, UpstreamOffset};
//!
//! let policy = ReplicationPolicy::default();
//! assert_eq!(policy.remote_topic("us", "orders"), "us.orders");
//! assert!(policy.is_cycle("us.orders", "us"));
//!
//! let mut state = PartitionState::new();
//! let (up, down) = (UpstreamOffset(1000), DownstreamOffset(742));
//! assert_eq!(state.update(up, down, 100), Emit::Now);
//! let sync = OffsetSync { topic: "orders".into(), partition: 7, upstream: up, downstream: down };
//! let (key, value) = (sync.encode_key(), sync.encode_value());
//! assert_eq!(OffsetSync::decode(&key, &value), Ok(sync));
//! ```

#![warn(missing_docs)]

pub mod checkpoint_rule;
pub mod codec;
pub mod emission;
pub mod offsets;
pub mod partitioner;
pub mod policy;
pub mod store;

pub use checkpoint_rule::should_emit_checkpoint;
pub use codec::{Checkpoint, DecodeError, EncodeError, Heartbeat, OffsetSync, MAX_STRING_BYTES};
pub use emission::{Emit, PartitionState, DEFAULT_OFFSET_LAG_MAX};
pub use offsets::{DownstreamOffset, UpstreamOffset};
pub use partitioner::partition_for_key;
pub use policy::{
    checkpoints_topic, is_internal_topic, offset_syncs_topic, ReplicationPolicy, CONFIG_PROPERTIES_EXCLUDE,
    DEFAULT_GROUPS_EXCLUDE, DEFAULT_SEPARATOR, DEFAULT_TOPICS_EXCLUDE, HEARTBEATS_TOPIC,
};
pub use store::{through_sync, OffsetSyncStore, SYNC_HISTORY_SLOTS};
