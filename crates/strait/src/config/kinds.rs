//! The enumerated values of flow settings, as written in TOML (`snake_case`/`lowercase` names).

use serde::{Deserialize, Serialize};

/// Delivery guarantee of a flow (`delivery`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryKind {
    /// Every record at least once: a crash replays at most the last two batches.
    #[default]
    AtLeastOnce,
    /// Each batch's records, offset syncs and positions in one Kafka transaction: a
    /// `read_committed` consumer on the target sees each source record exactly once.
    ExactlyOnce,
}

/// Where a topic with no saved position starts (`start_from`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StartFrom {
    /// At the log start: copy the topic's history (MM2's behaviour).
    #[default]
    Earliest,
    /// At the end the first time the topic is seen: copy only records written after that.
    Latest,
}

/// What a flow does when a saved position lies below the source partition's log start (records
/// deleted by retention or delete-records before they were copied; `on_source_gap`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnSourceGap {
    /// Log an error with the number of records lost and continue at the log start.
    #[default]
    Continue,
    /// Log the same error and stop the flow at start; nothing past the gap is copied.
    Fail,
}

/// MM2's naming choice for replicated topics (`replication_policy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    /// `<source-alias><separator><topic>` (MM2 `DefaultReplicationPolicy`).
    #[default]
    Default,
    /// Topic names unchanged (MM2 `IdentityReplicationPolicy`).
    Identity,
}

/// Where offset syncs are written (KIP-716 `offset-syncs.topic.location`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncsLocation {
    /// `mm2-offset-syncs.<source-alias>.internal` on the target; Strait writes nothing to the source.
    #[default]
    Target,
    /// `mm2-offset-syncs.<target-alias>.internal` on the source, as MM2 does by default.
    Source,
}

/// What a flow copies (`copy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CopyKind {
    /// Each record read, its headers rewritten (the provenance header), produced anew through
    /// librdkafka.
    #[default]
    Records,
    /// The source's record batches as the broker stores them, still compressed, their bytes,
    /// timestamps and headers unchanged (issue 27, after KIP-712): a fraction of the CPU, and the
    /// target stores what the source does. No provenance header (a batch cannot take one without
    /// being written anew): the default replication policy's name-based cycle rule stops loops
    /// instead, so the identity policy is refused. Exactly-once, the batch producer holds the
    /// slot's transactions.
    Batches,
}
