//! `strait failover`: moves consumer groups from a flow's source cluster to its target cluster,
//! committing their translated offsets into the same groups on the target, and says how much was
//! not replicated (the recovery point).
//!
//! - **Planned** (the source answers): waits until every source partition the groups use is
//!   replicated, then translates each group's committed source offsets (the offset syncs, as MM2's
//!   `RemoteClusterUtils.translateOffsets` does, and exactly at the head from the saved position).
//! - **Unplanned** (the source does not answer within a bound, or is declared lost): the target
//!   alone decides: each group's newest checkpoint (MM2 `MirrorCheckpointTask`'s records) gives its
//!   offsets; the saved positions give, per partition, the last replicated source offset and the
//!   timestamp of its record.
//!
//! Either way a group with active members on the target is skipped (the broker would refuse the
//! commit, and moving it under running consumers would surprise them) and a target group that is
//! ahead is never rewound.

mod back;
mod caught_up;
mod history;
pub mod plan;
mod quiet;
mod report;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rdkafka::error::KafkaError;
use strait_connect::ConnectError;

use crate::config::{ClusterConfig, Flow};
use crate::control::checkpoint::groups::{GroupClient, GroupListing};
use crate::control::checkpoint::translate::Translator;
use crate::kafka::{connect_error, read_checkpoints};
use crate::positions::{self, Positions};
use crate::rules::NameFilter;
pub use caught_up::Lag;
use history::SyncHistory;
use plan::Action;
pub use report::{GroupPartition, GroupReport, PartitionReport, Ran, Report};

/// How the source cluster is treated (`strait failover --mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Planned when the source answers within `source_timeout`, else unplanned.
    Auto,
    /// The source must answer; an error otherwise.
    Planned,
    /// The source is not asked (lost, or not to be trusted).
    Unplanned,
}

/// What `strait failover` is asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// Groups to move; `None`: the flow's `groups`.
    pub groups: Option<NameFilter>,
    /// Planned: longest wait for the lag of the groups' partitions to reach 0.
    pub wait: Duration,
    /// Longest the source may take to list its groups before it counts as lost (`Mode::Auto`).
    pub source_timeout: Duration,
    /// Planned, unplanned, or decided by whether the source answers.
    pub mode: Mode,
    /// Planned: how long the flow's source topics must take no new record before any group
    /// moves (`--quiet-ms`, the producers' fence); `None`: not checked.
    pub quiet: Option<Duration>,
}

/// Moves the groups of `flow` to its target cluster as `options` say and reports what was done,
/// per group and partition. `reverse`, the flow from `flow`'s target to its source if the config
/// has one, moves home (planned) the offsets of topics it wrote that `flow` does not carry back
/// (the default policy's `A.orders` on B, see `back`). What leaves a group unmoved (active on
/// either cluster, a commit refused, records left to copy after `options.wait`) is in
/// [`Report::problems`], its rows marked [`Action::Skipped`].
/// Errors: a cluster that must answer does not, named with its role, alias and address (the
/// source only in planned mode).
pub async fn failover(flow: Arc<Flow>, reverse: Option<Arc<Flow>>, options: &Options) -> Result<Report, ConnectError> {
    let on_source = on(&flow.source, "source");
    let source = GroupClient::new(&flow.source).map_err(&on_source)?;
    let listing = match options.mode {
        Mode::Unplanned => None,
        Mode::Planned => Some(source.list(None).await.map_err(|e| {
            connect_error(
                format!("{} does not list its groups (lost? then --mode unplanned)", flow.source.named("source")),
                e,
            )
        })?),
        Mode::Auto => match tokio::time::timeout(options.source_timeout, source.list(None)).await {
            Ok(Ok(groups)) => Some(groups),
            Ok(Err(e)) => {
                tracing::warn!(flow = %flow.name, error = %e, "{}: unplanned failover", not_answering(&flow.source));
                None
            }
            Err(_) => {
                let timeout = options.source_timeout;
                tracing::warn!(flow = %flow.name, ?timeout, "{}: unplanned failover", not_answering(&flow.source));
                None
            }
        },
    };
    let filter = options.groups.as_ref().unwrap_or(&flow.groups);
    let mut report = match listing {
        Some(groups) => {
            let groups = groups.into_iter().filter(|g| filter.matches(&g.name)).collect();
            planned(flow.clone(), reverse, source, groups, (options.wait, options.quiet)).await?
        }
        None => {
            if options.quiet.is_some() {
                tracing::warn!(flow = %flow.name, "--quiet-ms not checked: the failover runs unplanned, without the source");
            }
            unplanned(flow.clone(), filter).await?
        }
    };
    if report.groups.is_empty() && report.problems.is_empty() {
        let from = match report.mode {
            Ran::Planned => "with offsets on the source",
            Ran::Unplanned => "checkpointed on the target",
        };
        report.problems.push(format!("no consumer group {from} matches the groups asked for: nothing moved"));
    }
    Ok(report)
}

/// "source cluster `alias` at `address` does not answer", for the source that decides an
/// unplanned failover.
fn not_answering(source: &ClusterConfig) -> String {
    format!("{} does not answer", source.named("source"))
}

/// Names `cluster`, one of `flow`'s two, in an error from it, with its role in `flow`.
fn on_cluster_of<'a>(flow: &Flow, cluster: &'a ClusterConfig) -> impl Fn(KafkaError) -> ConnectError + 'a {
    on(cluster, if cluster.alias == flow.source.alias { "source" } else { "target" })
}

/// Names `cluster` (its `role`, alias and address) in an error from it.
fn on<'a>(cluster: &'a ClusterConfig, role: &'a str) -> impl Fn(KafkaError) -> ConnectError + 'a {
    move |e| connect_error(cluster.named(role), e)
}

async fn planned(
    flow: Arc<Flow>,
    reverse: Option<Arc<Flow>>,
    mut source: GroupClient,
    groups: Vec<GroupListing>,
    (wait, quiet): (Duration, Option<Duration>),
) -> Result<Report, ConnectError> {
    let (on_source, on_target) = (on(&flow.source, "source"), on(&flow.target, "target"));
    let mut translator = Translator::new(flow.clone()).map_err(&on_target)?;
    let partitions = translator.replicated_partitions(&source).await.map_err(&on_source)?;
    let mut used = BTreeSet::new();
    for group in &groups {
        used.extend(source.committed(&group.name, &partitions).await.map_err(&on_source)?.into_keys());
    }
    let loud = match quiet {
        Some(quiet) => quiet::grown(&flow, &partitions, quiet).await.map_err(&on_source)?,
        None => BTreeMap::new(),
    };
    let (lags, saved) = caught_up::wait(&flow, &used, wait).await.map_err(|(side, e)| match side {
        caught_up::Side::Source => on_source(e),
        caught_up::Side::Target => on_target(e),
    })?;
    let mut report = Report::new(&flow, Ran::Planned);
    let behind: i64 = lags.values().map(|l| l.unreplicated).sum();
    for ((topic, partition), lag) in &lags {
        report.partitions.push(PartitionReport::planned(topic, *partition, lag));
    }
    if behind > 0 {
        report.problems.push(format!(
            "{behind} source records still not replicated after {} ms: no group moved (wait longer \
             with --wait-ms, or move the groups to what is replicated with --mode unplanned)",
            wait.as_millis()
        ));
    }
    if !loud.is_empty() {
        let written: Vec<String> = loud.iter().map(|((t, p), n)| format!("{t}-{p} (+{n})")).collect();
        report.problems.push(format!(
            "source topics not quiet: records were written during the {} ms asked for, on {}: no group \
             moved (stop the producers, or point them at the target, and run again)",
            quiet.unwrap_or_default().as_millis(),
            written.join(", ")
        ));
    }
    // Read after the wait: the groups' last commits and the offset syncs of the last batches.
    translator.catch_up().await.map_err(&on_target)?;
    let history = SyncHistory::load(&flow).await.map_err(on_cluster_of(&flow, flow.offset_syncs().0))?;
    let back = match &reverse {
        Some(reverse) => Some(back::Back::load(&flow, reverse).await?),
        None => None,
    };
    let mut target = GroupClient::new(&flow.target).map_err(&on_target)?;
    for group in groups {
        let name = &group.name;
        let translations = translator.translate_group(&mut source, name, &partitions).await.map_err(&on_source)?;
        let mut rows: Vec<GroupPartition> = translations
            .into_iter()
            .map(|t| {
                let key = (t.source_topic.clone(), t.partition);
                let finest = history.translate(&t.target_topic, t.partition, t.upstream).max(t.downstream);
                let downstream = plan::translate_at_head(t.upstream, finest, saved.get(&key));
                let mut row = GroupPartition::new(t.target_topic, t.partition, t.upstream, downstream);
                row.source_topic = Some(t.source_topic);
                row.unreplicated = lags.get(&key).map(|l| l.unreplicated);
                row
            })
            .collect();
        if let Some(back) = &back {
            rows.extend(back.rows(&mut source, name).await.map_err(&on_source)?);
        }
        if rows.is_empty() {
            continue; // no offsets on the flow's topics: nothing to move
        }
        let held = if behind > 0 || !loud.is_empty() {
            Some(None)
        } else if !group.is_inactive() {
            Some(Some(format!(
                "group {name}: active on the source (members: {}, state {}): its consumers still commit there; \
                 stop them, then run again",
                group.members, group.state
            )))
        } else {
            None
        };
        let moved = match held {
            Some(problem) => {
                report.problems.extend(problem);
                skipped(name, rows, None)
            }
            None => move_group((&mut target, &flow.target), name, rows, None, &mut report.problems)
                .await
                .map_err(&on_target)?,
        };
        report.groups.push(moved);
    }
    Ok(report)
}

/// A group's report when it is not moved: its rows as computed, marked [`Action::Skipped`].
fn skipped(group: &str, mut rows: Vec<GroupPartition>, checkpoint_age_ms: Option<i64>) -> GroupReport {
    for row in &mut rows {
        row.action = Action::Skipped;
    }
    GroupReport { group: group.to_string(), moved: false, checkpoint_age_ms, partitions: rows }
}

/// A group's newest checkpoint per target-side (topic, partition): (upstream, downstream).
type Newest = BTreeMap<(String, i32), (i64, i64)>;

async fn unplanned(flow: Arc<Flow>, filter: &NameFilter) -> Result<Report, ConnectError> {
    let on_target = on(&flow.target, "target");
    let checkpoints = read_checkpoints(&flow).await.map_err(&on_target)?;
    // The newest checkpoint per group partition, and when each group was last checkpointed.
    let mut newest: BTreeMap<String, Newest> = BTreeMap::new();
    let mut written: BTreeMap<String, i64> = BTreeMap::new();
    for (c, timestamp) in checkpoints {
        if !filter.matches(&c.group) {
            continue;
        }
        if let Some(ts) = timestamp {
            let last = written.entry(c.group.clone()).or_insert(ts);
            *last = (*last).max(ts);
        }
        newest.entry(c.group).or_default().insert((c.topic, c.partition), (c.upstream.0, c.downstream.0));
    }
    let saved: Positions = positions::load(&flow.target, &flow.name).await.map_err(&on_target)?;
    let mut report = Report::new(&flow, Ran::Unplanned);
    let now = now_ms();
    for ((topic, partition), s) in &saved {
        report.partitions.push(PartitionReport::unplanned(topic, *partition, s, now));
    }
    report.partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    // The source is not asked: offset syncs written there (`offset_syncs_topic_location =
    // "source"`) went with it, and the checkpoints alone place the groups.
    let history = if flow.offset_syncs().0.alias == flow.source.alias {
        SyncHistory::default()
    } else {
        SyncHistory::load(&flow).await.map_err(&on_target)?
    };
    let (src, dst) = (&flow.source.alias, &flow.target.alias);
    let source_topic: BTreeMap<String, &String> =
        saved.keys().map(|(t, _)| (flow.policy.rename_for_checkpoint(t, src, dst), t)).collect();
    let mut target = GroupClient::new(&flow.target).map_err(&on_target)?;
    for (group, partitions) in newest {
        let rows = partitions
            .into_iter()
            .map(|((topic, partition), (upstream, downstream))| {
                // Syncs written after the checkpoint may place the group more finely.
                let finest = history.translate(&topic, partition, upstream).max(Some(downstream));
                let from = source_topic.get(&topic).map(|t| (*t).clone());
                let position = from.as_ref().and_then(|t| saved.get(&(t.clone(), partition)));
                let downstream = plan::translate_at_head(upstream, finest, position);
                let mut row = GroupPartition::new(topic, partition, upstream, downstream);
                row.source_topic = from;
                row
            })
            .collect();
        let age = written.get(&group).map(|ts| (now - ts).max(0));
        let moved = move_group((&mut target, &flow.target), &group, rows, age, &mut report.problems)
            .await
            .map_err(&on_target)?;
        report.groups.push(moved);
    }
    Ok(report)
}

/// Commits `rows` of `group` on the target (`target`, a client of `cluster`) where they move it
/// forward, unless the group has active members there; a refused commit is a problem naming the
/// cluster. Errors: the target cannot be read.
async fn move_group(
    (target, cluster): (&mut GroupClient, &ClusterConfig),
    group: &str,
    mut rows: Vec<GroupPartition>,
    checkpoint_age_ms: Option<i64>,
    problems: &mut Vec<String>,
) -> Result<GroupReport, KafkaError> {
    let keys: Vec<(String, i32)> = rows.iter().map(|r| (r.topic.clone(), r.partition)).collect();
    let current = target.committed(group, &keys).await?;
    for row in &mut rows {
        row.target_before = current.get(&(row.topic.clone(), row.partition)).map(|(o, _)| *o);
    }
    if let Some(g) = target.describe(group).await?.filter(|g| !g.is_inactive()) {
        problems.push(format!(
            "group {group}: active on the target (members: {}, state {}): not moved; stop its consumers there and run again",
            g.members, g.state
        ));
        return Ok(skipped(group, rows, checkpoint_age_ms));
    }
    let mut commits = Vec::new();
    for row in &mut rows {
        row.action = plan::decide(row.downstream, row.target_before);
        if let (Action::Commit, Some(down)) = (row.action, row.downstream) {
            commits.push(((row.topic.clone(), row.partition), down));
        }
    }
    if !commits.is_empty() {
        if let Err(e) = target.commit(group, &commits).await {
            problems.push(format!("group {group}: {} refused the commit: {e}", cluster.named("target")));
            return Ok(skipped(group, rows, checkpoint_age_ms));
        }
    }
    Ok(GroupReport { group: group.to_string(), moved: true, checkpoint_age_ms, partitions: rows })
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
