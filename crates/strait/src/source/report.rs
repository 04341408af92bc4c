//! The one place the resume decision's report ([`resume::Event`]) is logged and counted.

use crate::config::Flow;
use crate::metrics::metrics;
use crate::positions::POSITIONS_TOPIC;
use crate::resume::{Event, InvalidPosition};

/// Logs each of `report` for `flow`, and counts each topic recreated while Strait was stopped in
/// `strait_source_topics_recreated_total` and each position that cannot be true in
/// `strait_invalid_positions_total`.
pub(super) fn log(flow: &Flow, report: &[Event]) {
    for event in report {
        match event {
            Event::LostOnTarget { topic, partition, last_downstream, target_end } => {
                let remote = flow.policy.remote_topic(&flow.source.alias, topic);
                tracing::warn!(
                    flow = %flow.name, topic, partition, target_topic = remote, last_downstream, target_end,
                    "the target partition no longer holds the records replicated to it (deleted, truncated or rebuilt while Strait was stopped): copying it again from the source's start"
                );
            }
            Event::FromMm2 { partitions } => tracing::info!(
                flow = %flow.name, topic = %flow.mm2_offsets_topic(), partitions,
                "resuming source partitions Strait has no position for where MirrorMaker 2 stopped"
            ),
            Event::RecreatedWhileStopped { topic, old_id, new_id } => {
                tracing::warn!(
                    flow = %flow.name, topic, old_topic_id = %old_id.as_ref().map_or("", |i| &i.0),
                    new_topic_id = %new_id.as_ref().map_or("", |i| &i.0),
                    "the source topic was deleted and created again while Strait was stopped: its saved positions belong to the old topic, so the new one is replicated from its log start; records of the old topic after its saved positions, if any, were lost with it"
                );
                metrics().topic_recreated(&flow.source.alias, &flow.target.alias, topic).inc();
            }
            Event::TimestampChanged { topic, partition } => tracing::warn!(
                flow = %flow.name, topic, partition,
                "the record at the saved position changed: the topic was recreated; replicating it from the beginning"
            ),
            Event::SourceGap { gap, on_source_gap } => tracing::error!(
                flow = %flow.name, topic = gap.topic, partition = gap.partition, saved = gap.saved,
                log_start = gap.log_start, lost = gap.lost(), on_source_gap = ?on_source_gap,
                "records lost: the source deleted them (retention or delete-records) before they were replicated"
            ),
            Event::Latest { topic, partition, offset } => tracing::info!(
                flow = %flow.name, topic, partition, offset,
                "new topic: starting at its end (start_from = latest)"
            ),
            Event::InvalidPosition(bad) => invalid_position(flow, bad),
        }
    }
}

/// Logs a saved position that cannot be true (WARN with the evidence it was rebuilt from, ERROR
/// when there is none) and counts it in `strait_invalid_positions_total`.
fn invalid_position(flow: &Flow, bad: &InvalidPosition) {
    let InvalidPosition { topic, partition, record_offset, invalid, rebuilt } = bad;
    let (reason, record) = (invalid.to_string(), record_offset.map_or(-1, |o| o));
    metrics().invalid_positions(&flow.source.alias, &flow.target.alias, topic).inc();
    match rebuilt {
        Some(r) => tracing::warn!(
            flow = %flow.name, topic, partition, positions_topic = POSITIONS_TOPIC, record_offset = record, reason,
            last_sync_upstream = r.upstream, last_sync_downstream = r.downstream, resume_at = r.next_offset(),
            "a saved position cannot be true: rebuilt from the partition's last offset sync, whose record the target still holds; the records after it up to where the flow stopped are copied again"
        ),
        None => tracing::error!(
            flow = %flow.name, topic, partition, positions_topic = POSITIONS_TOPIC, record_offset = record, reason,
            "a saved position cannot be true and the target holds no offset sync of the partition to rebuild it from: stopping"
        ),
    }
}
