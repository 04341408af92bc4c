//! Where each source partition starts: one pure decision, [`decide`], from the facts a flow
//! gathers — the positions saved on the target (Strait's, [`crate::positions`], and MirrorMaker
//! 2's, [`crate::mm2_offsets`]), the target check of Strait's, the source topic's evidence of
//! having been recreated (its id, KIP-516, and the timestamp of the record at the saved offset),
//! the source's watermarks, `start_from` and `on_source_gap` — to each partition's start and what
//! to report. No I/O here: [`load`] reads what the target holds, [`crate::source`] reads the
//! source (the partitions [`checks`] names), assigns the starts and logs the report.

mod invalid;
pub mod load;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};

use crate::config::{OnSourceGap, StartFrom};
use crate::positions::{Invalid, Positions, Saved};
use crate::topic_id::TopicId;
pub use invalid::{InvalidPosition, Rebuilt};

/// A source partition: (topic, partition).
pub type Partition = (String, i32);

/// The flow settings the decision follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Where a topic no position is saved for starts.
    pub start_from: StartFrom,
    /// What a saved position below the source's log start does.
    pub on_source_gap: OnSourceGap,
}

/// What the target holds about where a flow's partitions stopped, read at start once the slot's
/// previous owner is fenced ([`load::stored`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    /// Strait's saved positions of the flow (every slot's) that decode and are not below zero.
    pub strait: Positions,
    /// The flow's other saved positions: per partition, its record's offset in the positions
    /// topic and why it cannot be true.
    pub invalid: HashMap<Partition, (i64, Invalid)>,
    /// The last offset sync (upstream, downstream offset) of each of the starting slot's
    /// partitions with a saved position: the evidence an invalid one is rebuilt from.
    pub last_syncs: HashMap<Partition, (i64, i64)>,
    /// The target check: for each of the starting slot's partitions with a saved position, the
    /// end offset now of the target partition it is copied to (0 when the topic or partition is
    /// missing).
    pub target_ends: HashMap<Partition, i64>,
    /// MirrorMaker 2's positions for the flow (a cut-over from MM2), used where Strait has none.
    pub mm2: Positions,
}

impl Stored {
    /// Strait's position of `tp` says its last record was written at `last_downstream` of a
    /// target partition that now ends at or before it (deleted, truncated, rebuilt): the
    /// (last_downstream, target end).
    fn lost_on_target(&self, tp: &Partition) -> Option<(i64, i64)> {
        let last = self.strait.get(tp)?.last_downstream?;
        let end = *self.target_ends.get(tp)?;
        (end <= last).then_some((last, end))
    }

    /// The position `tp` resumes from, if any, and whether it is MM2's: Strait's unless the target
    /// lost its records, else MM2's.
    fn position(&self, tp: &Partition) -> Option<(&Saved, bool)> {
        match self.strait.get(tp) {
            Some(saved) if self.lost_on_target(tp).is_none() => Some((saved, false)),
            _ => self.mm2.get(tp).map(|saved| (saved, true)),
        }
    }
}

/// What the source says, before anything is read for the decision.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    /// Partitions assigned earlier in this run: their topics are known (new partitions of a
    /// known topic start at the log start whatever `start_from` says).
    pub assigned: &'a HashSet<Partition>,
    /// Topics deleted and created again while this run read them: no saved position of theirs
    /// applies ([`crate::source`]'s recreations).
    pub recreated_in_run: &'a HashSet<String>,
    /// The id of each topic now (KIP-516), where the cluster gave one.
    pub topic_ids: &'a HashMap<String, TopicId>,
}

/// What the source read for [`Checks`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Read {
    /// Among [`Checks::timestamps`], the partitions whose record at the offset now has another
    /// timestamp (one that could not be read back proves nothing and is left out).
    pub timestamp_changed: HashSet<Partition>,
    /// Log-start and end offsets of the [`Checks::watermarks`] partitions.
    pub watermarks: HashMap<Partition, (i64, i64)>,
}

/// A record whose timestamp is compared with the one saved with the position after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimestampCheck {
    /// The source topic.
    pub topic: String,
    /// The source partition.
    pub partition: i32,
    /// The offset of the record: the saved `next_offset - 1`.
    pub offset: i64,
    /// The timestamp (ms) saved for it.
    pub timestamp: i64,
}

/// What the source must read before [`decide`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checks {
    /// Partitions whose saved position has no topic id to compare (saved by an older Strait, or
    /// MM2's), or whose topic has none now: the record before the position is read back.
    pub timestamps: Vec<TimestampCheck>,
    /// Partitions whose log start (a position below it is a gap) or end (a `latest` start) matters.
    pub watermarks: Vec<Partition>,
}

/// Where a partition starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Its log start: no position, or one that does not apply (an earlier topic of the name).
    LogStart,
    /// This offset: a saved position, or the log start above a gap.
    At(i64),
    /// Its end, a new topic with `start_from = "latest"`: nothing is there to carry the position,
    /// so the start itself is saved at once (a restart must not skip what arrives meanwhile).
    End(i64),
    /// This offset, rebuilt in place of a saved position that cannot be true: saved at once, so
    /// the bad position is gone even before a record arrives.
    Rebuilt(i64),
}

/// Records deleted on the source before they were replicated: a saved position below the log start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    /// The source topic.
    pub topic: String,
    /// The source partition.
    pub partition: i32,
    /// The saved next offset.
    pub saved: i64,
    /// The source partition's log start, above it.
    pub log_start: i64,
}

impl Gap {
    /// Records lost: between the saved position and the log start.
    pub fn lost(&self) -> i64 {
        self.log_start - self.saved
    }
}

/// What to log and count, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// WARN: the target partition no longer holds the records replicated to it; copied again
    /// from the source's start.
    LostOnTarget { topic: String, partition: i32, last_downstream: i64, target_end: i64 },
    /// INFO: this many partitions resume where MirrorMaker 2 stopped.
    FromMm2 { partitions: usize },
    /// WARN, and `strait_source_topics_recreated_total`: the topic's id changed while Strait was
    /// stopped; the new topic is copied from its log start.
    RecreatedWhileStopped { topic: String, old_id: Option<TopicId>, new_id: Option<TopicId> },
    /// WARN: the record before the saved position has another timestamp: the topic was recreated.
    TimestampChanged { topic: String, partition: i32 },
    /// ERROR: records lost on the source.
    SourceGap { gap: Gap, on_source_gap: OnSourceGap },
    /// INFO: a new topic's partition starts at its end (`start_from = "latest"`).
    Latest { topic: String, partition: i32, offset: i64 },
    /// WARN, and `strait_invalid_positions_total`: a saved position that cannot be true, rebuilt
    /// from the last offset sync; ERROR when there is none and the flow stops.
    InvalidPosition(InvalidPosition),
}

/// Why the flow stops instead of assigning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// `on_source_gap = "fail"` and a gap.
    Gap(Gap),
    /// A saved position that cannot be true, with no evidence to rebuild it from.
    Invalid(InvalidPosition),
}

/// The decision for the partitions about to be assigned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Each partition's start, in the order given.
    pub starts: Vec<(Partition, Start)>,
    /// What to log and count, in order ([`crate::source`] logs it).
    pub report: Vec<Event>,
    /// The flow stops instead of assigning: `on_source_gap = "fail"` and a gap, or a position
    /// that cannot be true and cannot be rebuilt (the first; each is in the report).
    pub stop: Option<Stop>,
}

/// What the rules ask of the topics of the partitions about to be assigned, found once.
struct Topics<'a> {
    /// Topics the flow copied before: with a partition that has a position (even one whose
    /// records the target lost: they are copied again from the start), assigned in this run, or
    /// recreated in this run (the new topic's records all came after the flow began). Their
    /// partitions without a position start at the log start whatever `start_from` says.
    known: HashSet<&'a str>,
    /// Topics of which a partition about to be assigned has a saved id other than the id now:
    /// deleted and created again while Strait was stopped, so none of their positions applies.
    recreated_while_stopped: HashSet<&'a str>,
}

impl<'a> Topics<'a> {
    fn of(stored: &'a Stored, source: &'a Source, fresh: &'a [Partition]) -> Self {
        let copied = stored.strait.keys().chain(stored.mm2.keys()).chain(source.assigned.iter());
        let known = copied.map(|tp| tp.0.as_str()).chain(source.recreated_in_run.iter().map(String::as_str));
        let recreated = fresh.iter().filter(|tp| saved_other_id(stored, source, tp).is_some());
        Self { known: known.collect(), recreated_while_stopped: recreated.map(|tp| tp.0.as_str()).collect() }
    }

    /// Whether `tp` starts at its end if it has no position: `latest`, and its topic is new.
    fn new_topic(&self, rules: &Rules, tp: &Partition) -> bool {
        rules.start_from == StartFrom::Latest && !self.known.contains(tp.0.as_str())
    }
}

/// The saved id of `tp` when it differs from its topic's id now.
fn saved_other_id<'a>(stored: &'a Stored, source: &Source, tp: &Partition) -> Option<&'a TopicId> {
    let (saved, _) = stored.position(tp)?;
    let (old, new) = (saved.topic_id.as_ref()?, source.topic_ids.get(&tp.0)?);
    (old != new).then_some(old)
}

/// What the source must read for `fresh`, the partitions about to be assigned: the timestamps
/// before saved positions without ids to compare, and the watermarks of partitions resuming from
/// a position or starting at the end of a new topic.
pub fn checks(rules: &Rules, stored: &Stored, source: &Source, fresh: &[Partition]) -> Checks {
    let mut checks = Checks::default();
    let topics = Topics::of(stored, source, fresh);
    for tp in fresh {
        let in_run = source.recreated_in_run.contains(&tp.0);
        match stored.position(tp) {
            Some((saved, _)) if !in_run => {
                let unchecked = saved.topic_id.is_none() || !source.topic_ids.contains_key(&tp.0);
                if let (true, Some(timestamp)) = (unchecked, saved.last_timestamp) {
                    if saved.next_offset >= 1 {
                        let (topic, partition, offset) = (tp.0.clone(), tp.1, saved.next_offset - 1);
                        checks.timestamps.push(TimestampCheck { topic, partition, offset, timestamp });
                    }
                }
                if !topics.recreated_while_stopped.contains(tp.0.as_str()) {
                    checks.watermarks.push(tp.clone());
                }
            }
            Some(_) => {}
            None if topics.new_topic(rules, tp) || stored.invalid.contains_key(tp) => {
                checks.watermarks.push(tp.clone())
            }
            None => {}
        }
    }
    checks
}

/// Where each of `fresh` starts, and what to report. In order: a position applies only to the
/// topic it was saved from (the same id; saved without one, the same timestamp at its offset;
/// never after the topic was recreated in this run), else the partition starts at its log start.
/// Strait's position applies unless the target lost the records it covers; MM2's where Strait
/// has none. A position that cannot be true (undecodable, below zero, past the source's end) is
/// rebuilt from the partition's last offset sync, or the flow stops ([`InvalidPosition`]). A position
/// below the log start is a gap: resumed at the log start, or the flow
/// stops (`on_source_gap`). Without a position a partition starts at its log start, or at its
/// end when its topic is new to the flow and `start_from = "latest"`.
pub fn decide(rules: &Rules, stored: &Stored, source: &Source, read: &Read, fresh: &[Partition]) -> Plan {
    let mut plan = Plan::default();
    let topics = Topics::of(stored, source, fresh);
    let in_run = |tp: &Partition| source.recreated_in_run.contains(&tp.0);
    for tp in fresh.iter().filter(|tp| !in_run(tp)) {
        if let Some((last_downstream, target_end)) = stored.lost_on_target(tp) {
            let (topic, partition) = (tp.0.clone(), tp.1);
            plan.report.push(Event::LostOnTarget { topic, partition, last_downstream, target_end });
        }
    }
    let from_mm2 = fresh.iter().filter(|tp| !in_run(tp) && stored.position(tp).is_some_and(|(_, mm2)| mm2)).count();
    if from_mm2 > 0 {
        plan.report.push(Event::FromMm2 { partitions: from_mm2 });
    }
    let mut reported = HashSet::new();
    for tp in fresh.iter().filter(|tp| !in_run(tp)) {
        if topics.recreated_while_stopped.contains(tp.0.as_str()) && reported.insert(tp.0.as_str()) {
            let old_id = fresh.iter().filter(|o| o.0 == tp.0).find_map(|o| saved_other_id(stored, source, o)).cloned();
            let new_id = source.topic_ids.get(&tp.0).cloned();
            plan.report.push(Event::RecreatedWhileStopped { topic: tp.0.clone(), old_id, new_id });
        }
    }
    let mut latest = Vec::new();
    for tp in fresh {
        let (topic, partition) = (tp.0.clone(), tp.1);
        let bad = (!in_run(tp) && !topics.recreated_while_stopped.contains(tp.0.as_str()))
            .then(|| invalid::invalid(stored, read, tp))
            .flatten();
        if let Some(bad) = bad {
            let (start, event) = invalid::rebuild(stored, read, tp, bad);
            if start.is_none() {
                plan.stop.get_or_insert(Stop::Invalid(event.clone()));
            }
            plan.report.push(Event::InvalidPosition(event));
            plan.starts.push((tp.clone(), start.unwrap_or(Start::LogStart)));
            continue;
        }
        let start = match stored.position(tp) {
            Some(_) if read.timestamp_changed.contains(tp) && !in_run(tp) => {
                plan.report.push(Event::TimestampChanged { topic, partition });
                Start::LogStart
            }
            Some(_) if in_run(tp) || topics.recreated_while_stopped.contains(tp.0.as_str()) => Start::LogStart,
            Some((saved, _)) => match read.watermarks.get(tp) {
                Some(&(log_start, _)) if log_start > saved.next_offset => {
                    let gap = Gap { topic, partition, saved: saved.next_offset, log_start };
                    let on_source_gap = rules.on_source_gap;
                    plan.report.push(Event::SourceGap { gap: gap.clone(), on_source_gap });
                    if on_source_gap == OnSourceGap::Fail {
                        plan.stop.get_or_insert(Stop::Gap(gap));
                    }
                    Start::At(log_start)
                }
                _ => Start::At(saved.next_offset),
            },
            None => match read.watermarks.get(tp) {
                Some(&(_, end)) if topics.new_topic(rules, tp) => {
                    latest.push(Event::Latest { topic, partition, offset: end });
                    Start::End(end)
                }
                _ => Start::LogStart,
            },
        };
        plan.starts.push((tp.clone(), start));
    }
    plan.report.extend(latest);
    plan
}
