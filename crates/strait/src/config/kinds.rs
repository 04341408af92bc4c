//! The enumerated values of flow settings, as written in TOML (`snake_case`/`lowercase` names).

use std::time::Duration;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

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

/// What a flow copies, as taken ([`CopyChoice`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyKind {
    /// Each record read, its headers rewritten (the provenance header), produced anew through
    /// librdkafka.
    Records,
    /// The source's record batches as the broker stores them, still compressed, their bytes,
    /// timestamps and headers unchanged (issue 27, after KIP-712): a fraction of the CPU, and the
    /// target stores what the source does. No provenance header (a batch cannot take one without
    /// being written anew): the default replication policy's names stop loops, and under the
    /// identity policy the batch's producer id does (`crate::sink::producer_ids`, issue 45).
    /// Exactly-once, the batch producer holds the slot's transactions.
    Batches,
}

impl CopyKind {
    /// The setting's value: `records` or `batches`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Records => "records",
            Self::Batches => "batches",
        }
    }
}

/// The `copy` setting: a kind, or `auto` (issue 45, the default), which takes batches where
/// every condition of the batch path holds and records otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CopySetting {
    Records,
    Batches,
    #[default]
    Auto,
}

/// The copy kind a flow takes and why, from its `copy` setting and, for `auto`, the flow's other
/// settings (`crate::config::Config::resolve`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyChoice {
    pub kind: CopyKind,
    /// Why, for the log at start: the setting, or what `auto` found.
    pub why: String,
}

impl CopyChoice {
    /// The choice `setting` makes before the flow's clusters and opposite flow are looked at:
    /// `auto` takes batches until a condition says otherwise.
    pub fn of(setting: CopySetting) -> Self {
        match setting {
            CopySetting::Records => Self { kind: CopyKind::Records, why: "copy = \"records\"".into() },
            CopySetting::Batches => Self { kind: CopyKind::Batches, why: "copy = \"batches\"".into() },
            CopySetting::Auto => Self::records_unless(None),
        }
    }

    /// `copy = "auto"`: records because of `reason`, or batches when there is none.
    pub fn records_unless(reason: Option<String>) -> Self {
        match reason {
            Some(reason) => Self { kind: CopyKind::Records, why: format!("copy = \"auto\" takes records: {reason}") },
            None => Self {
                kind: CopyKind::Batches,
                why: "copy = \"auto\" takes batches: the clients, the policy and the flows allow them".into(),
            },
        }
    }
}

/// The codec the record path produces with (`compression`; librdkafka's `compression.type`).
/// Across a long or billed link a codec sends the source's compressed bytes compressed again
/// (MM2's producer defaults to `none`; its users set `producer.compression.type`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// `lz4` to a target whose answers take 15 ms or more ([`strait_wire::is_far`])
    /// (another region: the link is the limit and may be billed per byte), else `none`
    /// ([`Compression::resolve`]; issue 43).
    #[default]
    Auto,
    /// Records go uncompressed: no CPU spent on it, the most bytes on the link.
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// The codec for a target whose quickest metadata answer took `round_trip`: `auto` resolved
    /// (lz4 far, none near), any other as set.
    pub fn resolve(self, round_trip: Duration) -> Self {
        match self {
            Compression::Auto if strait_wire::is_far(round_trip) => Compression::Lz4,
            Compression::Auto => Compression::None,
            codec => codec,
        }
    }

    /// The codec's name, as TOML, librdkafka and Kafka's `compression.type` write it; `auto`
    /// not yet resolved (a sink started on its own, outside `strait run`) produces as `none`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::Auto | Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// Connections Strait keeps to each broker of a cluster (`connections_per_broker`, issue 43): the
/// batch path's client's, as a source the record path's consumers, and as a target the
/// at-least-once record producers (one connection each). Across a long link one TCP connection
/// carries at most its window per round trip, several carry that each. A partition's requests
/// always go through the same one, so order, idempotence and transactions are as with one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ConnectionsPerBroker {
    /// `"auto"`: 4 when the cluster's first answers take 15 ms or more (another region), else 1.
    #[default]
    Auto,
    /// 1 to 16.
    Fixed(u16),
}

impl ConnectionsPerBroker {
    /// Whether it is the default, `auto` (left out when a config is written).
    pub fn is_auto(&self) -> bool {
        *self == ConnectionsPerBroker::Auto
    }

    /// The setting as `strait-wire` takes it, whose [`strait_wire::Connections::per_broker`]
    /// decides the count for the batch path and the record producers alike.
    pub fn wire(self) -> strait_wire::Connections {
        match self {
            ConnectionsPerBroker::Auto => strait_wire::Connections::Auto,
            ConnectionsPerBroker::Fixed(n) => strait_wire::Connections::PerBroker(n),
        }
    }
}

impl<'de> Deserialize<'de> for ConnectionsPerBroker {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Text(String),
            Count(i64),
        }
        match Written::deserialize(d)? {
            Written::Text(t) if t == "auto" => Ok(ConnectionsPerBroker::Auto),
            Written::Count(n) if (1..=16).contains(&n) => Ok(ConnectionsPerBroker::Fixed(n as u16)),
            _ => Err(D::Error::custom("must be \"auto\" or 1 to 16")),
        }
    }
}

impl Serialize for ConnectionsPerBroker {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ConnectionsPerBroker::Auto => s.serialize_str("auto"),
            ConnectionsPerBroker::Fixed(n) => s.serialize_u16(*n),
        }
    }
}
