//! What an operator watches of a running flow, read every few seconds: the replication lag
//! (source end offsets asked of the source cluster, one request per broker, against the positions the flow committed,
//! so it keeps growing while the target is down and nothing commits; counted in records a
//! `read_committed` consumer can read, so transaction markers, the reverse flow's commit markers
//! of an exactly-once active/active pair above all, are no lag: `crate::kafka::LagReader`), a "catching up" line every
//! `progress_log_interval_ms` while behind, and whether the target answers (for `/ready`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use prometheus_client::metrics::gauge::Gauge;
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use tokio_util::sync::CancellationToken;

use crate::client_log::{ClientLog, LoggedConsumer};
use crate::config::Flow;
use crate::kafka::{blocking, listed_watermarks, Gap, LagReader, METADATA_TIMEOUT};
use crate::metrics::metrics;
use crate::schedule::{self, Every, Periodic};

/// Longest time between two readings.
const LAG_INTERVAL: Duration = Duration::from_secs(5);
/// How long the target may take to answer a metadata request before it counts as down.
const TARGET_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The next source offset of each assigned partition as committed (`None`: assigned at the log
/// start, nothing committed yet). Written by the source, read by [`run_watch`].
#[derive(Clone, Default)]
pub struct Committed(Arc<Mutex<NextOffsets>>);

/// Next offset per (topic, partition); `None`: the log start.
type NextOffsets = HashMap<(String, i32), Option<i64>>;

impl Committed {
    /// Records that `topic`/`partition` continues at `next` (`None`: at the log start).
    pub fn set(&self, topic: &str, partition: i32, next: Option<i64>) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).insert((topic.to_string(), partition), next);
    }

    /// Forgets the partitions `moved` says another instance replicates now.
    pub fn forget(&self, moved: impl Fn(&str, i32) -> bool) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).retain(|(t, p), _| !moved(t, *p));
    }

    fn snapshot(&self) -> Vec<((String, i32), Option<i64>)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(k, v)| (k.clone(), *v)).collect()
    }
}

/// Watches `flow` until `cancel`: sets its lag gauges, logs its progress while behind and
/// records whether its target answers. A cluster that does not answer is read again next time.
pub async fn run_watch(flow: Arc<Flow>, committed: Committed, cancel: CancellationToken) {
    let clients = LagReader::new(&flow.source)
        .and_then(|r| Ok((r, flow.target.client_config(&[]).create_with_context(ClientLog)?)));
    let (reader, target): (Arc<LagReader>, Arc<LoggedConsumer>) = match clients {
        Ok((r, t)) => (Arc::new(r), Arc::new(t)),
        Err(e) => return tracing::error!(flow = %flow.name, error = %e, "lag readings cannot start"),
    };
    let name = flow.name.clone();
    let watch =
        Watch { flow, committed, reader, target, gauges: HashMap::new(), last_log: Instant::now(), nexts_then: None };
    schedule::run(&name, watch, cancel).await;
}

/// The watch's clients and what it carries from one reading to the next.
struct Watch {
    flow: Arc<Flow>,
    committed: Committed,
    reader: Arc<LagReader>,
    target: Arc<LoggedConsumer>,
    gauges: HashMap<(String, i32), Gauge>,
    /// When progress was last logged.
    last_log: Instant,
    /// The next offsets of the reading progress was last logged at.
    nexts_then: Option<HashMap<(String, i32), i64>>,
}

#[async_trait]
impl Periodic for Watch {
    fn rounds(&self) -> Vec<Every> {
        vec![Every::now_and_every("lag reading", LAG_INTERVAL.min(self.flow.reading.progress_log_interval))]
    }

    /// A reading that fails is logged at debug only (the source or target down is reported
    /// elsewhere), and read again next time.
    async fn round(&mut self, _: usize) -> Result<(), String> {
        let flow = self.flow.clone();
        let probe = self.target.clone();
        let answers = blocking(move || probe.fetch_metadata(None, TARGET_PROBE_TIMEOUT).is_ok()).await;
        metrics().set_target_answers(&flow.name, &flow.source.alias, &flow.target.alias, answers);
        let mut positions = self.committed.snapshot();
        let reader = self.reader.clone();
        let read = blocking(move || {
            // A topic deleted on the source stays assigned (paused) until it is listed again:
            // its partitions are left out of the reading (their gauges dropped), not the reading
            // failed, every time.
            let asked: Vec<(&str, i32)> = positions.iter().map(|((t, p), _)| (t.as_str(), *p)).collect();
            let marks = listed_watermarks(reader.consumer(), &asked, METADATA_TIMEOUT)?;
            positions.retain(|((topic, partition), _)| marks.has(topic, *partition));
            let gaps = positions
                .into_iter()
                .map(|((topic, partition), next)| {
                    let (low, end) = marks.get(&topic, partition)?;
                    Ok(Gap { topic, partition, from: next.unwrap_or(low).max(low), end })
                })
                .collect::<Result<Vec<_>, KafkaError>>()?;
            let lags = reader.lags(&gaps)?;
            Ok::<_, KafkaError>(
                gaps.into_iter().zip(lags).map(|(g, lag)| ((g.topic, g.partition), lag, g.from)).collect::<Vec<_>>(),
            )
        })
        .await;
        match read {
            Ok(readings) => self.record(readings),
            Err(e) => tracing::debug!(flow = %flow.name, error = %e, "lag reading failed; retrying at the next one"),
        }
        Ok(())
    }
}

impl Watch {
    /// Sets the lag gauges from `readings` (each partition's lag and next offset) and logs
    /// progress once per `progress_log_interval_ms` while behind.
    fn record(&mut self, readings: Vec<((String, i32), i64, i64)>) {
        let flow = &self.flow;
        let mut total_lag = 0;
        let mut nexts = HashMap::with_capacity(readings.len());
        // Per topic when series are aggregated: every partition of a topic shares one gauge.
        let per_partition = metrics().per_partition();
        let mut lags: HashMap<(String, i32), i64> = HashMap::new();
        for ((topic, partition), lag, next) in readings {
            total_lag += lag;
            nexts.insert((topic.clone(), partition), next);
            *lags.entry((topic, if per_partition { partition } else { 0 })).or_default() += lag;
        }
        let (source, target) = (&flow.source.alias, &flow.target.alias);
        // Partitions another instance replicates now are its to report.
        self.gauges.retain(|(topic, partition), _| {
            let kept = lags.contains_key(&(topic.clone(), *partition));
            if !kept {
                metrics().forget_lag(source, target, topic, *partition);
            }
            kept
        });
        for ((topic, partition), lag) in lags {
            self.gauges
                .entry((topic.clone(), partition))
                .or_insert_with(|| metrics().lag(source, target, &topic, partition))
                .set(lag);
        }
        let elapsed = self.last_log.elapsed();
        if elapsed >= flow.reading.progress_log_interval {
            if let (true, Some(then)) = (total_lag > 0, &self.nexts_then) {
                let rate = (copied_since(then, &nexts) as f64 / elapsed.as_secs_f64()).round() as u64;
                tracing::info!(flow = %flow.name, records_per_s = rate, lag = total_lag, "catching up");
            }
            (self.last_log, self.nexts_then) = (Instant::now(), Some(nexts));
        } else if self.nexts_then.is_none() {
            self.nexts_then = Some(nexts);
        }
    }
}

/// Records committed between two readings of each partition's next offset, counting only the
/// partitions read both times: a partition assigned in between starts at its saved position, and
/// counting that from 0 made the first "catching up" line report millions of records per second.
fn copied_since(then: &HashMap<(String, i32), i64>, now: &HashMap<(String, i32), i64>) -> i64 {
    now.iter().filter_map(|(key, next)| then.get(key).map(|before| (next - before).max(0))).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nexts(entries: &[(&str, i32, i64)]) -> HashMap<(String, i32), i64> {
        entries.iter().map(|(t, p, n)| ((t.to_string(), *p), *n)).collect()
    }

    #[test]
    fn a_partition_assigned_between_readings_counts_nothing_yet() {
        let then = nexts(&[("a", 0, 100)]);
        let now = nexts(&[("a", 0, 150), ("a", 1, 2_000_000)]);
        assert_eq!(copied_since(&then, &now), 50);
    }

    #[test]
    fn a_partition_that_moved_back_counts_zero_not_negative() {
        let then = nexts(&[("a", 0, 100), ("b", 0, 10)]);
        let now = nexts(&[("a", 0, 40), ("b", 0, 30)]);
        assert_eq!(copied_since(&then, &now), 20);
    }
}
