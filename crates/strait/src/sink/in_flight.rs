//! What the sink remembers of each record it produced until the target acknowledges it, and how
//! one that failed is named in an error. A leaf: every writer of the sink tags its records with
//! it.

use std::sync::Arc;

use strait_connect::SourceOffset;
use strait_mm2::OffsetSync;

use crate::config::Flow;
use crate::positions::POSITIONS_TOPIC;

/// What the sink remembers of a produced record until its ack.
#[derive(Clone)]
pub enum InFlight {
    /// A replicated record: its source topic, partition, upstream offset, size (bytes) and
    /// timestamp (ms).
    Record { topic: Arc<str>, partition: i32, upstream: i64, bytes: usize, timestamp: Option<i64> },
    /// An offset sync of the batch.
    OffsetSync(OffsetSync),
    /// A source position of the batch.
    Position(SourceOffset),
    /// MM2's source offset of a position of the batch (`write_mm2_offsets`).
    Mm2Offset(SourceOffset),
    /// The record of a state transaction that proves the slot is still this instance's
    /// (`StateWriter::prove_owner`).
    OwnerProbe,
}

/// What failed to be written, for an error message: `flow <name> topic <t> partition <p> offset
/// <o>` for a record, the sync or position otherwise.
pub fn describe(flow: &Flow, syncs_topic: &str, what: InFlight) -> String {
    let (name, target) = (&flow.name, &flow.target.alias);
    match what {
        InFlight::Record { topic, partition, upstream, bytes, .. } => format!(
            "flow {name} topic {topic} partition {partition} offset {upstream}: record of {bytes} bytes could not be produced to {target}"
        ),
        InFlight::OffsetSync(s) => format!(
            "flow {name}: offset sync {} partition {} {}->{} could not be written to {syncs_topic}",
            s.topic, s.partition, s.upstream.0, s.downstream.0
        ),
        InFlight::Position(p) => format!(
            "flow {name}: position of {} partition {} offset {} could not be saved to {POSITIONS_TOPIC}",
            p.topic, p.partition, p.offset
        ),
        InFlight::Mm2Offset(p) => format!(
            "flow {name}: MM2 source offset of {} partition {} offset {} could not be written to {}",
            p.topic,
            p.partition,
            p.offset,
            flow.mm2_offsets_topic()
        ),
        InFlight::OwnerProbe => {
            format!("flow {name}: the state transaction proving this instance owns its slot failed on {target}")
        }
    }
}
