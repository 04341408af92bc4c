//! What a flow writes beside its data, MM2-compatible: heartbeats and checkpoints (with group
//! offset sync), both through the flow's one control producer handed to them by [`crate::flow`],
//! and topic config and ACL sync, through the clusters' admin API.

pub mod checkpoint;
pub mod heartbeat;
pub mod topic_acls;
pub mod topic_configs;
