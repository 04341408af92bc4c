//! Exactly-once, records given to a sink that copies batches (a library's own source, say): the
//! slot's transactions are its batch producer's, so the records go through it as batches of
//! their own ([`strait_wire::own`]), one per run of a source partition's records whose offsets
//! follow one another, after the loop guard, residency and renaming of the record path. They
//! keep their headers (the provenance header added), keys, values and timestamps (0 included).

use std::sync::Arc;

use strait_connect::{ConnectError, ConnectRecord, ConnectResult, SourceOffset};
use strait_wire::{Batch, OwnRecord};

use super::batches::now_ms;
use super::lanes::Routed;
use super::loop_guard::PROVENANCE_HEADER;
use crate::config::Flow;
use crate::record::ReplicatedRecord;

/// Bytes (keys, values, headers) a run holds before it is written: well below the 1 MiB a
/// topic's `max.message.bytes` allows by default.
const RUN_BYTES: usize = 512 * 1024;

/// A record of a run, with the provenance header value to write with it.
struct Held {
    record: ConnectRecord<(), ReplicatedRecord>,
    provenance: Vec<u8>,
}

/// One source partition's records waiting to be written as one batch to `target`.
struct Run {
    target: Arc<str>,
    held: Vec<Held>,
    bytes: usize,
}

impl Run {
    /// Whether `record`, bound for `target`, follows this run's last record.
    fn follows(&self, target: &Arc<str>, at: &SourceOffset) -> bool {
        let Some(last) = self.held.last().map(|h| &h.record.source_offset) else { return false };
        self.target == *target
            && last.topic == at.topic
            && last.partition == at.partition
            && last.offset + 1 == at.offset
            && self.bytes < RUN_BYTES
    }

    /// The run as a batch whose offsets are its records' source offsets, on its way to the
    /// target. Errors: [`ConnectError::Invalid`] naming the flow, topic, partition and offset of
    /// a record that cannot be encoded (a header key twice).
    fn into_routed(self, flow: &Flow) -> ConnectResult<Routed> {
        let first = self.held[0].record.source_offset.clone();
        let now = now_ms();
        let records: Vec<OwnRecord> = self
            .held
            .iter()
            .map(|Held { record, provenance }| {
                let body = record.value.as_ref();
                let mut headers: Vec<(&str, Option<&[u8]>)> =
                    record.headers.iter().map(|h| (h.key.as_str(), h.value.as_deref())).collect();
                headers.push((PROVENANCE_HEADER, Some(&provenance[..])));
                OwnRecord {
                    key: body.and_then(ReplicatedRecord::key),
                    value: body.and_then(ReplicatedRecord::value),
                    headers,
                    timestamp_ms: record.timestamp_ms.unwrap_or(now),
                }
            })
            .collect();
        let batch = Batch::of_own(first.offset, &records).map_err(|e| {
            ConnectError::invalid(
                format!("flow {}: records of {} partition {}", flow.name, first.topic, first.partition),
                format!("{e}; a flow copying batches writes records as batches (copy = \"records\" writes them as they are)"),
            )
        })?;
        let source = self.held.last().map(|h| h.record.source_offset.clone()).unwrap_or(first);
        Ok(Routed { source, target: self.target, batch, carried: None })
    }
}

/// The records of a put not yet written as batches: at most one run.
#[derive(Default)]
pub struct OwnBatches {
    run: Option<Run>,
}

impl OwnBatches {
    /// Adds `record` (bound for `target`, with its `provenance` header value) to the run, or
    /// starts a new one; returns the run it ended, as a batch. Errors: as [`Self::end`].
    pub fn add(
        &mut self,
        flow: &Flow,
        record: ConnectRecord<(), ReplicatedRecord>,
        provenance: Vec<u8>,
        target: Arc<str>,
    ) -> ConnectResult<Option<Routed>> {
        let ended = match &self.run {
            Some(run) if run.follows(&target, &record.source_offset) => None,
            _ => self.end(flow)?,
        };
        let run = self.run.get_or_insert_with(|| Run { target, held: Vec::new(), bytes: 0 });
        let body = record.value.as_ref();
        run.bytes += body.and_then(ReplicatedRecord::key).map_or(0, <[u8]>::len)
            + body.and_then(ReplicatedRecord::value).map_or(0, <[u8]>::len)
            + record.headers.iter().map(|h| h.key.len() + h.value.as_ref().map_or(0, Vec::len)).sum::<usize>();
        run.held.push(Held { record, provenance });
        Ok(ended)
    }

    /// The run held, as a batch. Errors: [`ConnectError::Invalid`] when a record of it cannot be
    /// encoded (a header key twice), naming where it came from.
    pub fn end(&mut self, flow: &Flow) -> ConnectResult<Option<Routed>> {
        self.run.take().map(|run| run.into_routed(flow)).transpose()
    }
}
