//! The lag of a partition in records a `read_committed` consumer can read, not in offsets.
//!
//! A source partition written transactionally (another flow's exactly-once output, the reverse
//! flow of an active/active pair above all) ends with a commit marker: a control record that
//! takes an offset and that no consumer ever reads. A flow's saved position is the offset after
//! the last record it copied, so the high watermark stays one offset past it for ever, and
//! `end - position` would show a lag of 1 on an idle flow. Aborted records are the same.
//!
//! The rule: a partition whose gap (`from` to `end`) is short is read from `from`, the way the
//! flow reads it. When the consumer's position reaches `end` without a record, nothing is left to
//! copy: lag 0. When a record comes, the lag is counted from it to `end` (markers after it still
//! count: exact at 0, an upper bound otherwise). A gap longer than [`READ_GAP`] offsets is not
//! read (a flow that far behind is catching up or copying a busy partition; its markers are a
//! small share of the gap), nor is one whose read makes no progress for [`STALL`]: both count
//! every offset in it. So a reading costs a small fetch per partition that is nearly caught up,
//! and nothing for the others.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::{Message, Offset, TopicPartitionList};

use super::ends_read;
use crate::client_log::{ClientLog, LoggedConsumer};
use crate::config::ClusterConfig;

/// Longest gap, in offsets, that is read; a longer one counts as that many records.
const READ_GAP: i64 = 100;
/// Longest a read waits without a record or its position moving.
const STALL: Duration = Duration::from_secs(2);
/// How long one poll waits.
const POLL: Duration = Duration::from_millis(20);

/// One partition's stretch of offsets not yet copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    /// Topic.
    pub topic: String,
    /// Partition number.
    pub partition: i32,
    /// Next offset the flow copies (at least the log start).
    pub from: i64,
    /// The partition's end offset (the last stable offset for a `read_committed` client).
    pub end: i64,
}

/// What a read of a gap saw first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// A record at this offset.
    Record(i64),
    /// The position reached the end without a record.
    End,
    /// Not read (too long), or no progress before [`STALL`].
    Unread,
}

/// The lag of `gap` in records, from what its read saw.
fn lag(gap: &Gap, seen: Seen) -> i64 {
    match seen {
        Seen::Record(offset) => (gap.end - offset.max(gap.from)).max(0),
        Seen::End => 0,
        Seen::Unread => (gap.end - gap.from).max(0),
    }
}

/// A `read_committed` consumer that measures lags by reading short gaps (never joins a group,
/// never commits).
pub struct LagReader {
    consumer: LoggedConsumer,
}

impl LagReader {
    /// A reader of `cluster`. Errors: invalid client config.
    pub fn new(cluster: &ClusterConfig) -> Result<Self, KafkaError> {
        let consumer = cluster
            .client_config(&[
                ("group.id", "strait-lag"),
                ("enable.auto.commit", "false"),
                ("isolation.level", "read_committed"),
                ("enable.partition.eof", "false"),
                // Bounds what one reading fetches: a batch or so per partition, 1 MiB at a time.
                ("max.partition.fetch.bytes", "65536"),
                ("fetch.max.bytes", "1048576"),
                ("queued.max.messages.kbytes", "1024"),
            ])
            .create_with_context(ClientLog)?;
        Ok(Self { consumer })
    }

    /// Its consumer, to ask the ends the gaps run to through the same client (`read_committed`,
    /// so an end is the last stable offset: [`crate::kafka::watermarks`]).
    pub fn consumer(&self) -> &LoggedConsumer {
        &self.consumer
    }

    /// The lag of each of `gaps`, in their order, in records (see the module's rule). Blocking:
    /// call from a blocking thread; takes one round trip per leader, at most 2 s more for a read
    /// that does not progress. Errors: the cluster refuses the read.
    pub fn lags(&self, gaps: &[Gap]) -> Result<Vec<i64>, KafkaError> {
        let mut seen: Vec<Option<Seen>> = gaps
            .iter()
            .map(|g| match g.end - g.from {
                ..=0 => Some(Seen::End),
                1..=READ_GAP => None,
                _ => Some(Seen::Unread),
            })
            .collect();
        let mut open: HashMap<(String, i32), usize> = HashMap::new();
        let mut tpl = TopicPartitionList::new();
        for (i, g) in gaps.iter().enumerate().filter(|(i, _)| seen[*i].is_none()) {
            open.insert((g.topic.clone(), g.partition), i);
            tpl.add_partition_offset(&g.topic, g.partition, Offset::Offset(g.from))?;
        }
        if !open.is_empty() {
            self.consumer.assign(&tpl)?;
            let read = self.read(gaps, &mut open, &mut seen);
            self.consumer.unassign()?;
            read?;
        }
        Ok(gaps.iter().zip(seen).map(|(g, s)| lag(g, s.unwrap_or(Seen::Unread))).collect())
    }

    /// Polls the assigned `open` gaps until each has a [`Seen`] or the read stalls.
    fn read(
        &self,
        gaps: &[Gap],
        open: &mut HashMap<(String, i32), usize>,
        seen: &mut [Option<Seen>],
    ) -> Result<(), KafkaError> {
        let mut positions: HashMap<usize, i64> = open.values().map(|i| (*i, gaps[*i].from)).collect();
        let mut progress = Instant::now();
        while !open.is_empty() && progress.elapsed() < STALL {
            match self.consumer.poll(POLL) {
                Some(Err(e)) if ends_read(&e) => return Err(e),
                Some(Ok(m)) => {
                    if let Some(i) = open.remove(&(m.topic().to_string(), m.partition())) {
                        seen[i] = Some(Seen::Record(m.offset()));
                        progress = Instant::now();
                    }
                }
                Some(Err(_)) | None => {}
            }
            // Past markers and aborted records only the consumer's position moves.
            let now = self.consumer.position()?;
            open.retain(|(topic, partition), i| {
                let i = *i;
                let Some(Offset::Offset(at)) = now.find_partition(topic, *partition).map(|e| e.offset()) else {
                    return true;
                };
                if at > positions[&i] {
                    positions.insert(i, at);
                    progress = Instant::now();
                }
                if at < gaps[i].end {
                    return true;
                }
                seen[i] = Some(Seen::End);
                false
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gap(from: i64, end: i64) -> Gap {
        Gap { topic: "t".into(), partition: 0, from, end }
    }

    #[test]
    fn a_trailing_commit_marker_is_no_lag() {
        assert_eq!(lag(&gap(10, 11), Seen::End), 0);
    }

    #[test]
    fn markers_before_the_first_record_do_not_count() {
        assert_eq!(lag(&gap(10, 20), Seen::Record(12)), 8);
    }

    #[test]
    fn a_record_written_after_the_end_was_read_leaves_no_lag() {
        assert_eq!(lag(&gap(10, 11), Seen::Record(11)), 0);
    }

    #[test]
    fn an_unread_gap_counts_every_offset() {
        assert_eq!(lag(&gap(10, 5_000), Seen::Unread), 4_990);
        assert_eq!(lag(&gap(10, 5), Seen::Unread), 0);
    }
}
