//! The one place the resume decision's report ([`resume::Event`]) is logged and counted.

use crate::config::Flow;
use crate::metrics::metrics;
use crate::resume::Event;

/// Logs each of `report` for `flow`, and counts each topic recreated while Strait was stopped in
/// `strait_source_topics_recreated_total`.
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
        }
    }
}
