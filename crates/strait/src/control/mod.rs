//! What a flow writes beside its data, MM2-compatible: heartbeats and checkpoints (with group
//! offset sync). Both write through the flow's one control producer, handed to them by
//! [`crate::flow`].

pub mod checkpoint;
pub mod heartbeat;
