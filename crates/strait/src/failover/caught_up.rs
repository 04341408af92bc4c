//! A planned failover's wait: until every source partition the moved groups use is replicated.
//!
//! A partition counts as replicated when no committed record lies between the flow's saved
//! position and the source's high watermark. Transaction markers and aborted records sit there
//! whenever the source is written transactionally (another flow's exactly-once output, say), so
//! the gap is read `read_committed` rather than trusted as a record count.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;

use crate::client_log::{ClientLog, LoggedConsumer};
use crate::config::Flow;
use crate::kafka::{blocking, ends_read, listed_watermarks, METADATA_TIMEOUT};
use crate::positions::{self, Positions};

/// Longest gap read to count its committed records; a larger gap counts as that many records.
const COUNTED_GAP: i64 = 10_000;
/// Longest a gap read waits for a record or for the position to move (an open transaction on the
/// source holds `read_committed` readers back until it ends).
const GAP_STALL: Duration = Duration::from_secs(2);
/// Pause between two checks of the lag.
const RECHECK: Duration = Duration::from_millis(500);

/// One source partition, as a planned failover sees it.
#[derive(Debug, Clone, Serialize)]
pub struct Lag {
    /// First offset still on the source.
    pub log_start: i64,
    /// The source's high watermark.
    pub end: i64,
    /// Next source offset Strait will copy, as saved on the target; `None` before its first save.
    pub position: Option<i64>,
    /// Timestamp (ms) of the last record copied, when known.
    pub last_replicated_timestamp_ms: Option<i64>,
    /// Committed source records not yet replicated (an upper bound when the gap could not be read).
    pub unreplicated: i64,
}

/// Which cluster of a flow an error came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Source,
    Target,
}

/// Checks `partitions` of `flow`'s source every 500 ms until none has a record left to replicate
/// or `wait` has passed; returns the last check and the saved positions it used. A partition
/// whose topic the source no longer lists (deleted meanwhile) is left out of the check.
/// Errors: a cluster does not answer, with the side it is on.
pub async fn wait(
    flow: &Flow,
    partitions: &BTreeSet<(String, i32)>,
    wait: Duration,
) -> Result<(BTreeMap<(String, i32), Lag>, Positions), (Side, KafkaError)> {
    let deadline = Instant::now() + wait;
    let reader: LoggedConsumer = flow
        .source
        .client_config(&[
            ("group.id", "strait-failover"),
            ("enable.auto.commit", "false"),
            ("isolation.level", "read_committed"),
            ("enable.partition.eof", "false"),
        ])
        .create_with_context(ClientLog)
        .map_err(|e| (Side::Source, e))?;
    let reader = std::sync::Arc::new(reader);
    loop {
        let saved = positions::load(&flow.target, &flow.name).await.map_err(|e| (Side::Target, e))?;
        let (reader2, wanted, known) = (reader.clone(), partitions.clone(), saved.clone());
        let lags = blocking(move || check(&reader2, &wanted, &known)).await.map_err(|e| (Side::Source, e))?;
        if lags.values().all(|l| l.unreplicated == 0) || Instant::now() >= deadline {
            return Ok((lags, saved));
        }
        tokio::time::sleep(RECHECK).await;
    }
}

fn check(
    reader: &LoggedConsumer,
    partitions: &BTreeSet<(String, i32)>,
    saved: &Positions,
) -> Result<BTreeMap<(String, i32), Lag>, KafkaError> {
    // A topic deleted while the failover waits has nothing left to replicate: its partitions are
    // left out of the answer, and so of the check.
    let asked: Vec<(&str, i32)> = partitions.iter().map(|(t, p)| (t.as_str(), *p)).collect();
    let marks = listed_watermarks(reader, &asked, METADATA_TIMEOUT)?;
    let partitions = partitions.iter().filter(|(t, p)| marks.has(t, *p));
    let mut out = BTreeMap::new();
    for (topic, partition) in partitions {
        let (log_start, end) = marks.get(topic, *partition)?;
        let position = saved.get(&(topic.clone(), *partition));
        let from = position.map_or(log_start, |s| s.next_offset).max(log_start);
        let gap = (end - from).max(0);
        let unreplicated = if gap == 0 || gap > COUNTED_GAP {
            gap
        } else {
            committed_records(reader, topic, *partition, from, end)?.unwrap_or(gap)
        };
        out.insert(
            (topic.clone(), *partition),
            Lag {
                log_start,
                end,
                position: position.map(|s| s.next_offset),
                last_replicated_timestamp_ms: position.and_then(|s| s.last_timestamp),
                unreplicated,
            },
        );
    }
    Ok(out)
}

/// Committed records of `topic`/`partition` in `[from, end)`, or `None` when the read stalled
/// before reaching `end`. Blocking.
fn committed_records(
    reader: &LoggedConsumer,
    topic: &str,
    partition: i32,
    from: i64,
    end: i64,
) -> Result<Option<i64>, KafkaError> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(from))?;
    reader.assign(&tpl)?;
    let (mut records, mut position, mut progress) = (0, from, Instant::now());
    while position < end {
        match reader.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                use rdkafka::Message;
                if m.offset() < end {
                    records += 1;
                }
                position = m.offset() + 1;
                progress = Instant::now();
            }
            Some(Err(e)) if ends_read(&e) => return Err(e),
            Some(Err(_)) | None => {
                // Past markers and aborted records only the consumer's position moves.
                let now = reader.position()?.find_partition(topic, partition).map(|e| e.offset());
                if let Some(Offset::Offset(p)) = now {
                    if p > position {
                        position = p;
                        progress = Instant::now();
                    }
                }
                if progress.elapsed() > GAP_STALL {
                    return Ok(None);
                }
            }
        }
    }
    Ok(Some(records))
}
