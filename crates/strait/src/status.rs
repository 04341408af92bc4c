//! `strait status`: where each flow stands, read from the clusters alone (so it works whether or
//! not `strait run` is running): per source partition its log-start and end offsets, the position
//! Strait saved on the target and the lag in records; per consumer group the newest checkpoint of
//! each partition. A source cluster that does not answer (the moment a failover is for) leaves the
//! target's side: the saved positions and checkpoints, with the source's offsets unknown.

use std::collections::BTreeMap;

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use serde::Serialize;

use crate::config::Flow;
use crate::kafka::{
    blocking, listed_watermarks, read_checkpoints, topic_partition_counts, Gap, LagReader, METADATA_TIMEOUT,
};
use crate::positions::{self, Invalid};

/// One source partition of a flow.
#[derive(Debug, Serialize)]
pub struct PartitionStatus {
    /// `source->target`.
    pub flow: String,
    /// Source topic.
    pub topic: String,
    /// Partition number.
    pub partition: i32,
    /// First offset still on the source; `None` when the source does not answer.
    pub log_start: Option<i64>,
    /// Next offset to be written on the source (high watermark); `None` when the source does not
    /// answer.
    pub end: Option<i64>,
    /// Next source offset Strait will copy, as saved on the target; `None` before its first commit.
    pub position: Option<i64>,
    /// Records not yet replicated, as a `read_committed` consumer reads them from the position (or
    /// the log start when none) to `end`: transaction markers are not records, so a partition
    /// whose only offsets left are markers has lag 0 (`crate::kafka::LagReader`); `None` when the
    /// source does not answer or the position cannot be true.
    pub lag: Option<i64>,
    /// Why the saved position cannot be true (it does not decode, is below zero, or lies past the
    /// source's end: the flow rebuilds it at its next start, or stops, docs/operations.md);
    /// `None` when it can.
    pub invalid: Option<String>,
}

/// The newest checkpoint of one group partition.
#[derive(Debug, Serialize)]
pub struct CheckpointStatus {
    /// `source->target`.
    pub flow: String,
    /// Consumer group.
    pub group: String,
    /// Target-side topic, as checkpoints carry it.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The group's offset on the source.
    pub upstream: i64,
    /// Its translation on the target.
    pub downstream: i64,
}

/// What a flow copies, as its config resolves (`copy`).
#[derive(Debug, Serialize)]
pub struct FlowCopy {
    /// `source->target`.
    pub flow: String,
    /// `records` or `batches`.
    pub copy: &'static str,
    /// Why: the setting, or what `copy = "auto"` found.
    pub why: String,
}

impl FlowCopy {
    /// What `flow` copies and why.
    pub fn of(flow: &Flow) -> Self {
        Self { flow: flow.name.clone(), copy: flow.copy.kind.name(), why: flow.copy.why.clone() }
    }
}

/// `flow <name> copies <kind> (<why>)`, as `strait status` and `strait validate` print it.
impl std::fmt::Display for FlowCopy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "flow {} copies {} ({})", self.flow, self.copy, self.why)
    }
}

/// Everything `strait status` prints.
#[derive(Debug, Default, Serialize)]
pub struct Status {
    /// Per flow, what it copies.
    pub flows: Vec<FlowCopy>,
    /// Per flow and source partition.
    pub partitions: Vec<PartitionStatus>,
    /// Per flow, group and partition.
    pub checkpoints: Vec<CheckpointStatus>,
    /// Source clusters that did not answer, each naming the flow and the cluster.
    pub problems: Vec<String>,
}

/// The status of `flow`, added to `status`; a source that does not answer is in
/// [`Status::problems`], its partitions listed from the saved positions alone.
/// Errors: the target cluster does not answer.
pub async fn collect(flow: &Flow, status: &mut Status) -> Result<(), KafkaError> {
    status.flows.push(FlowCopy::of(flow));
    let loaded = positions::load_checked(&flow.target, &flow.name).await?;
    match source_rows(flow, &loaded).await {
        Ok(rows) => status.partitions.extend(rows),
        Err(e) => {
            status.problems.push(format!(
                "flow {}: {} does not answer ({e}): its offsets and the lag are unknown; positions are the target's",
                flow.name,
                flow.source.named("source")
            ));
            let valid = loaded.valid.iter().map(|(tp, s)| (tp, Some(s.next_offset), None));
            let invalid = loaded.invalid.iter().map(|(tp, (_, why))| (tp, None, Some(why.to_string())));
            let mut rows: Vec<PartitionStatus> = valid
                .chain(invalid)
                .filter(|((topic, _), _, _)| flow.reaches_target(topic))
                .map(|((topic, partition), position, invalid)| PartitionStatus {
                    flow: flow.name.clone(),
                    topic: topic.clone(),
                    partition: *partition,
                    log_start: None,
                    end: None,
                    position,
                    lag: None,
                    invalid,
                })
                .collect();
            rows.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
            status.partitions.extend(rows);
        }
    }
    let mut newest: BTreeMap<(String, String, i32), (i64, i64)> = BTreeMap::new();
    for (c, _) in read_checkpoints(flow).await? {
        newest.insert((c.group, c.topic, c.partition), (c.upstream.0, c.downstream.0));
    }
    status.checkpoints.extend(newest.into_iter().map(|((group, topic, partition), (upstream, downstream))| {
        CheckpointStatus { flow: flow.name.clone(), group, topic, partition, upstream, downstream }
    }));
    Ok(())
}

/// Every source partition `flow` copies, with the source's offsets (one request per broker) and
/// the lag in records a `read_committed` consumer can read ([`LagReader`]: a trailing commit
/// marker is no lag). Errors: the source does not answer.
async fn source_rows(flow: &Flow, loaded: &positions::Loaded) -> Result<Vec<PartitionStatus>, KafkaError> {
    let reader = LagReader::new(&flow.source)?;
    let (name, reached, loaded) = (flow.name.clone(), flow.clone(), loaded.clone());
    blocking(move || {
        let consumer = reader.consumer();
        let copied: Vec<(String, i32)> = topic_partition_counts(consumer.client(), METADATA_TIMEOUT)?
            .into_iter()
            .filter(|(topic, _)| reached.reaches_target(topic))
            .flat_map(|(topic, partitions)| {
                (0..partitions).filter_map(move |p| Some((topic.clone(), i32::try_from(p).ok()?)))
            })
            .collect();
        let asked: Vec<(&str, i32)> = copied.iter().map(|(t, p)| (t.as_str(), *p)).collect();
        let marks = listed_watermarks(consumer, &asked, METADATA_TIMEOUT)?;
        // A topic deleted since the listing has no row.
        let copied: Vec<(String, i32)> = copied.into_iter().filter(|(t, p)| marks.has(t, *p)).collect();
        let mut rows = Vec::with_capacity(copied.len());
        // Each gap read, and the row its lag goes to.
        let (mut gaps, mut gap_rows) = (Vec::new(), Vec::new());
        for (topic, partition) in copied {
            let (log_start, end) = marks.get(&topic, partition)?;
            let tp = (topic.clone(), partition);
            let position = loaded.valid.get(&tp).map(|s| s.next_offset);
            let invalid = match (loaded.invalid.get(&tp), position) {
                (Some((_, why)), _) => Some(why.clone()),
                (None, Some(next_offset)) if next_offset > end => Some(Invalid::PastEnd { next_offset, end }),
                _ => None,
            };
            if invalid.is_none() {
                let from = position.unwrap_or(log_start).max(log_start);
                gaps.push(Gap { topic: topic.clone(), partition, from, end });
                gap_rows.push(rows.len());
            }
            rows.push(PartitionStatus {
                flow: name.clone(),
                topic,
                partition,
                log_start: Some(log_start),
                end: Some(end),
                position,
                lag: None,
                invalid: invalid.map(|why| why.to_string()),
            });
        }
        for (row, lag) in gap_rows.into_iter().zip(reader.lags(&gaps)?) {
            rows[row].lag = Some(lag);
        }
        rows.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok::<_, KafkaError>(rows)
    })
    .await
}

impl Status {
    /// Aligned text tables.
    pub fn text(&self) -> String {
        let mut out = format!(
            "{:<24} {:<32} {:>9} {:>12} {:>12} {:>12} {:>10}\n",
            "FLOW", "TOPIC", "PARTITION", "LOG_START", "END", "POSITION", "LAG"
        );
        let opt = |o: Option<i64>| o.map_or("-".to_string(), |v| v.to_string());
        for p in &self.partitions {
            let position = if p.invalid.is_some() { "invalid".to_string() } else { opt(p.position) };
            out += &format!(
                "{:<24} {:<32} {:>9} {:>12} {:>12} {:>12} {:>10}\n",
                p.flow,
                p.topic,
                p.partition,
                opt(p.log_start),
                opt(p.end),
                position,
                opt(p.lag)
            );
        }
        let total: i64 = self.partitions.iter().filter_map(|p| p.lag).sum();
        let unknown = self.partitions.iter().filter(|p| p.lag.is_none()).count();
        out += &format!("total lag: {total} records");
        if unknown > 0 {
            out += &format!(
                " (unknown for {unknown} partitions: their source does not answer, or their position is invalid)"
            );
        }
        out += "\n";
        for f in &self.flows {
            out += &format!("{f}\n");
        }
        for p in self.partitions.iter().filter(|p| p.invalid.is_some()) {
            let why = p.invalid.as_deref().unwrap_or_default();
            out += &format!(
                "invalid position: flow {} {}/{}: {why}; the next start rebuilds it from the last offset sync, or stops\n",
                p.flow, p.topic, p.partition
            );
        }
        if !self.checkpoints.is_empty() {
            out += &format!(
                "\n{:<24} {:<24} {:<32} {:>9} {:>12} {:>12}\n",
                "FLOW", "GROUP", "TOPIC", "PARTITION", "UPSTREAM", "DOWNSTREAM"
            );
            for c in &self.checkpoints {
                out += &format!(
                    "{:<24} {:<24} {:<32} {:>9} {:>12} {:>12}\n",
                    c.flow, c.group, c.topic, c.partition, c.upstream, c.downstream
                );
            }
        }
        out
    }
}
