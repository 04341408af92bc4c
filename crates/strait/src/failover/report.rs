//! What `strait failover` prints: per group and partition what was committed, per source
//! partition what was replicated (the recovery point), and every problem.

use serde::Serialize;

use super::caught_up::Lag;
use super::plan::Action;
use crate::config::Flow;
use crate::positions::Saved;

/// The outcome of one failover of one flow.
#[derive(Debug, Serialize)]
pub struct Report {
    /// `source->target`.
    pub flow: String,
    /// How the failover ran: `planned` or `unplanned`.
    pub mode: Ran,
    /// Per consumer group.
    pub groups: Vec<GroupReport>,
    /// Per source partition: how far it was replicated.
    pub partitions: Vec<PartitionReport>,
    /// What kept a group from moving; empty when every group moved.
    pub problems: Vec<String>,
}

/// How a failover ran: [`super::Mode::Auto`] decides one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ran {
    /// The source answered: the groups' offsets read there, once their partitions were copied.
    Planned,
    /// The source was not asked, or did not answer: the checkpoints on the target decide.
    Unplanned,
}

impl std::fmt::Display for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Planned => "planned",
            Self::Unplanned => "unplanned",
        })
    }
}

/// One consumer group.
#[derive(Debug, Serialize)]
pub struct GroupReport {
    /// Group id (the same on both clusters).
    pub group: String,
    /// True when its offsets were committed on the target (or it was already at or ahead of them).
    pub moved: bool,
    /// Unplanned: ms since the group's newest checkpoint was written; its consumers may have
    /// committed on the source after that (an upper bound is this plus the checkpoint interval).
    pub checkpoint_age_ms: Option<i64>,
    /// Per partition.
    pub partitions: Vec<GroupPartition>,
}

/// One partition of a group.
#[derive(Debug, Serialize)]
pub struct GroupPartition {
    /// Source topic, when known (planned).
    pub source_topic: Option<String>,
    /// Target-side topic (after the replication policy).
    pub topic: String,
    /// Partition (the same on both clusters).
    pub partition: i32,
    /// The group's offset on the source: committed (planned) or as last checkpointed (unplanned).
    pub upstream: i64,
    /// Its translation on the target; `None` when no offset sync covers it.
    pub downstream: Option<i64>,
    /// The group's offset on the target before the failover, if it had one.
    pub target_before: Option<i64>,
    /// What was done.
    pub action: Action,
    /// Planned: source records of the partition not replicated (0 once caught up).
    pub unreplicated: Option<i64>,
}

impl GroupPartition {
    /// A row not yet decided (`action` is set by the commit step).
    pub fn new(topic: String, partition: i32, upstream: i64, downstream: Option<i64>) -> Self {
        Self {
            source_topic: None,
            topic,
            partition,
            upstream,
            downstream,
            target_before: None,
            action: Action::NoTranslation,
            unreplicated: None,
        }
    }
}

/// How far one source partition was replicated.
#[derive(Debug, Serialize)]
pub struct PartitionReport {
    /// Source topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The offset of the last source record replicated (saved next offset - 1); `None` before
    /// Strait saved a position.
    pub last_replicated_offset: Option<i64>,
    /// Timestamp (ms since the epoch) of that record, when known.
    pub last_replicated_timestamp_ms: Option<i64>,
    /// Unplanned: ms from that timestamp to the failover; a lower bound of the data-loss window
    /// when producers kept writing until the source was lost.
    pub age_ms: Option<i64>,
    /// Planned: the source's high watermark.
    pub end: Option<i64>,
    /// Planned: committed source records not replicated.
    pub unreplicated: Option<i64>,
}

impl PartitionReport {
    pub(super) fn planned(topic: &str, partition: i32, lag: &Lag) -> Self {
        Self {
            topic: topic.to_string(),
            partition,
            last_replicated_offset: lag.position.map(|p| p - 1),
            last_replicated_timestamp_ms: lag.last_replicated_timestamp_ms,
            age_ms: None,
            end: Some(lag.end),
            unreplicated: Some(lag.unreplicated),
        }
    }

    pub(super) fn unplanned(topic: &str, partition: i32, saved: &Saved, now_ms: i64) -> Self {
        Self {
            topic: topic.to_string(),
            partition,
            last_replicated_offset: Some(saved.next_offset - 1),
            last_replicated_timestamp_ms: saved.last_timestamp,
            age_ms: saved.last_timestamp.map(|ts| (now_ms - ts).max(0)),
            end: None,
            unreplicated: None,
        }
    }
}

impl Report {
    pub(super) fn new(flow: &Flow, mode: Ran) -> Self {
        Self { flow: flow.name.clone(), mode, groups: Vec::new(), partitions: Vec::new(), problems: Vec::new() }
    }

    /// Aligned text with the JSON report's names: the groups' partitions, the source partitions,
    /// then the problems.
    pub fn text(&self) -> String {
        let opt = |o: Option<i64>| o.map_or("-".to_string(), |v| v.to_string());
        let mut out = format!("{} failover of flow {}\n\n", self.mode, self.flow);
        out += &format!(
            "{:<24} {:<32} {:>9} {:>12} {:>12} {:>13} {:<14} {:>12}\n",
            "GROUP", "TOPIC", "PARTITION", "UPSTREAM", "DOWNSTREAM", "TARGET_BEFORE", "ACTION", "UNREPLICATED"
        );
        for g in &self.groups {
            for r in &g.partitions {
                out += &format!(
                    "{:<24} {:<32} {:>9} {:>12} {:>12} {:>13} {:<14} {:>12}\n",
                    g.group,
                    r.topic,
                    r.partition,
                    r.upstream,
                    opt(r.downstream),
                    opt(r.target_before),
                    r.action.name(),
                    opt(r.unreplicated)
                );
            }
            if let Some(age) = g.checkpoint_age_ms {
                out += &format!("{:<24} checkpoint_age_ms {age}\n", g.group);
            }
        }
        out += &format!(
            "\n{:<32} {:>9} {:>22} {:>28} {:>10} {:>12} {:>12}\n",
            "SOURCE_TOPIC",
            "PARTITION",
            "LAST_REPLICATED_OFFSET",
            "LAST_REPLICATED_TIMESTAMP_MS",
            "AGE_MS",
            "END",
            "UNREPLICATED"
        );
        for p in &self.partitions {
            out += &format!(
                "{:<32} {:>9} {:>22} {:>28} {:>10} {:>12} {:>12}\n",
                p.topic,
                p.partition,
                opt(p.last_replicated_offset),
                opt(p.last_replicated_timestamp_ms),
                opt(p.age_ms),
                opt(p.end),
                opt(p.unreplicated)
            );
        }
        let moved = self.groups.iter().filter(|g| g.moved).count();
        out += &format!("\n{moved} of {} groups moved\n", self.groups.len());
        for p in &self.problems {
            out += &format!("problem: {p}\n");
        }
        out
    }
}
