//! Topic naming and filtering rules of MM2: replication policies (MM2
//! `DefaultReplicationPolicy` / `IdentityReplicationPolicy`), internal-topic names and
//! detection (`ReplicationPolicy.isInternalTopic`), cycle detection (`MirrorSourceConnector`
//! `isCycle`), and the default filter / config-sync exclusion lists.

mod names;
mod replication;

pub use names::{
    checkpoints_topic, is_internal_topic, offset_syncs_topic, CONFIG_PROPERTIES_EXCLUDE, DEFAULT_GROUPS_EXCLUDE,
    DEFAULT_SEPARATOR, DEFAULT_TOPICS_EXCLUDE, HEARTBEATS_TOPIC,
};
pub use replication::ReplicationPolicy;
