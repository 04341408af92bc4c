//! `copy = "records"` on the source side: the slot's lanes of librdkafka's consumers (one, or
//! several across a long link), which read by topic name; the records of a poll taken from them
//! up to the batch's bounds, each holding its message (no copy of key and value) and one shared
//! copy of its topic name.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::{Offset, TopicPartitionList};
use strait_connect::{ConnectError, ConnectRecord, ConnectResult, Header, SourceOffset};
use strait_wire::connection_of;

use crate::config::Flow;
use crate::consume::{KafkaMessage, SourceReader};
use crate::kafka::{blocking, connect_error, is_denied};
use crate::record::ReplicatedRecord;

/// How often a slot forwards its partitions to its queues again ([`SourceReader::reroute`]).
const REROUTE_INTERVAL: Duration = Duration::from_secs(1);

/// With several consumers, how long a wait for the first record listens on one lane before the
/// next: a record arriving at another lane waits at most this per other lane.
const WAIT_SLICE: Duration = Duration::from_millis(5);

/// The slot's lanes of the source consumers (one each, [`super::SourceConsumers`]), reading its
/// partitions' records; each partition is read by one of them ([`strait_wire::connection_of`]),
/// so its records stay in order.
pub(super) struct RecordLane {
    lanes: Vec<Arc<SourceReader>>,
    /// When the partitions are next forwarded to this slot's queues again.
    next_reroute: Instant,
    /// The lane a poll takes from first, turning so that no lane's records wait behind another's.
    first: AtomicUsize,
}

impl RecordLane {
    /// Reads through `lanes` (at least one).
    pub(super) fn new(lanes: Vec<Arc<SourceReader>>) -> Self {
        Self { lanes, next_reroute: Instant::now() + REROUTE_INTERVAL, first: AtomicUsize::new(0) }
    }

    /// Forwards the partitions to this slot's queues again, once a second: librdkafka drops a
    /// partition's forwarding when it re-creates its fetch state.
    pub(super) fn tick(&mut self) {
        if Instant::now() >= self.next_reroute {
            self.lanes.iter().for_each(|lane| lane.reroute());
            self.next_reroute = Instant::now() + REROUTE_INTERVAL;
        }
    }

    /// `tpl`'s partitions (with their offsets) by the lane that reads them; lanes without any
    /// left out.
    fn split(&self, tpl: &TopicPartitionList) -> Result<Vec<(Arc<SourceReader>, TopicPartitionList)>, KafkaError> {
        let mut parts: Vec<TopicPartitionList> = self.lanes.iter().map(|_| TopicPartitionList::new()).collect();
        for e in tpl.elements() {
            let lane = connection_of(e.topic(), e.partition(), self.lanes.len());
            parts[lane].add_partition_offset(e.topic(), e.partition(), e.offset())?;
        }
        Ok(self.lanes.iter().cloned().zip(parts).filter(|(_, part)| part.count() > 0).collect())
    }

    /// Reads `tpl`'s partitions from their offsets, their records routed to this slot's queues.
    pub(super) fn assign(&self, tpl: &TopicPartitionList) -> ConnectResult<()> {
        let route = |e| ConnectError::backend("route source partitions to the slot", e);
        for (lane, part) in self.split(tpl).map_err(route)? {
            lane.route(&part).map_err(route)?;
            lane.consumer()
                .incremental_assign(&part)
                .map_err(|e| ConnectError::backend("assign source partitions", e))?;
            lane.route(&part).map_err(route)?;
        }
        Ok(())
    }

    /// Reads `tpl`'s partitions again from their offsets; librdkafka drops what it prefetched.
    pub(super) async fn rewind(&self, tpl: TopicPartitionList, flow: &str) -> ConnectResult<()> {
        let parts = self.split(&tpl);
        blocking(move || {
            for (lane, part) in parts? {
                let mut all = part.clone();
                all.set_all_offsets(Offset::Invalid)?;
                lane.consumer().incremental_unassign(&all)?;
                lane.route(&part)?;
                lane.consumer().incremental_assign(&part)?;
                lane.route(&part)?;
            }
            Ok::<_, KafkaError>(())
        })
        .await
        .map_err(|e| ConnectError::backend(format!("rewind the source of flow {flow}"), e))
    }

    /// Stops reading `partitions` of `topic` (resumed, should they have been paused); returns the
    /// offset after the last record handed out of each it knows.
    pub(super) async fn unassign(&self, topic: &str, partitions: &[i32]) -> Result<HashMap<i32, i64>, KafkaError> {
        let mut tpl = TopicPartitionList::new();
        for p in partitions {
            tpl.add_partition(topic, *p);
        }
        let parts = self.split(&tpl)?;
        let read = blocking(move || {
            let mut read = Vec::new();
            for (lane, part) in parts {
                read.push(lane.consumer().position()?);
                lane.consumer().incremental_unassign(&part)?;
                lane.consumer().resume(&part)?;
            }
            Ok::<_, KafkaError>(read)
        })
        .await?;
        let at = |p: &i32| {
            read.iter().find_map(|positions| match positions.find_partition(topic, *p).map(|e| e.offset()) {
                Some(Offset::Offset(next)) => Some((*p, next)),
                _ => None,
            })
        };
        Ok(partitions.iter().filter_map(at).collect())
    }

    /// Pauses the partitions of `pause` and resumes those of `resume`.
    pub(super) async fn pause(&self, pause: TopicPartitionList, resume: TopicPartitionList) -> Result<(), KafkaError> {
        let (pause, resume) = (self.split(&pause)?, self.split(&resume)?);
        blocking(move || {
            for (lane, part) in pause {
                lane.consumer().pause(&part)?;
            }
            for (lane, part) in resume {
                lane.consumer().resume(&part)?;
            }
            Ok(())
        })
        .await
    }

    /// Unassigns this slot's partitions (the consumers may be shared with other slots).
    pub(super) async fn release(&self) -> ConnectResult<()> {
        let lanes = self.lanes.clone();
        blocking(move || lanes.iter().try_for_each(|lane| lane.release()))
            .await
            .map_err(|e| ConnectError::backend("unassign source partitions", e))
    }

    /// The records of a poll (at most `max_records`, about `max_bytes`) and their bytes. What is
    /// already fetched is taken on this thread, without waiting, from each lane in turn; only
    /// when nothing is, one blocking call waits up to `timeout` for the first record (then takes
    /// the rest the same way): no hand-over to another thread while records flow. Errors: a
    /// refusal (missing ACL, refused credentials); the records read before it are dropped, to be
    /// read again at the next start.
    pub(super) async fn read(
        &self,
        names: &mut TopicNames,
        max_records: usize,
        max_bytes: usize,
        timeout: Duration,
        flow: &Arc<Flow>,
    ) -> ConnectResult<(Vec<ConnectRecord<(), ReplicatedRecord>>, usize)> {
        let mut batch = Drained { records: Vec::new(), bytes: 0, denied: None };
        let turn = self.first.fetch_add(1, Ordering::Relaxed) % self.lanes.len();
        batch.drain_all(&self.lanes, turn, names, (max_records, max_bytes), &flow.name);
        if batch.records.is_empty() && batch.denied.is_none() {
            let (lanes, flow) = (self.lanes.clone(), flow.clone());
            let mut taken = std::mem::take(names);
            (batch, *names) = blocking(move || {
                batch.wait(&lanes, &mut taken, (max_records, max_bytes), timeout, &flow.name);
                (batch, taken)
            })
            .await;
        }
        match batch.denied {
            Some(e) => Err(connect_error(format!("read source cluster {}", flow.source.alias), e)),
            None => Ok((batch.records, batch.bytes)),
        }
    }
}

/// One shared name per topic for the records of a flow.
#[derive(Default)]
pub(super) struct TopicNames {
    by_name: HashMap<String, Arc<str>>,
    /// The name last asked for: records come in runs of one partition, so most skip the map.
    last: Option<Arc<str>>,
}

impl TopicNames {
    pub(super) fn get(&mut self, topic: &str) -> Arc<str> {
        if let Some(last) = self.last.as_ref().filter(|l| ***l == *topic) {
            return last.clone();
        }
        let name = match self.by_name.get(topic) {
            Some(t) => t.clone(),
            None => self.by_name.entry(topic.to_string()).or_insert_with(|| Arc::from(topic)).clone(),
        };
        self.last = Some(name.clone());
        name
    }
}

/// Records taken from the consumer for one poll.
struct Drained {
    records: Vec<ConnectRecord<(), ReplicatedRecord>>,
    bytes: usize,
    /// The consumer reported a refusal (missing ACL, refused credentials): no retry helps.
    denied: Option<KafkaError>,
}

impl Drained {
    /// Takes records from `reader` until `max_records` or `max_bytes` is reached or none is
    /// left, waiting up to `wait` for the first one. The consumer's errors are served first.
    fn drain(
        &mut self,
        reader: &SourceReader,
        names: &mut TopicNames,
        max_records: usize,
        max_bytes: usize,
        mut wait: Duration,
        flow: &str,
    ) {
        let mut read = Vec::new();
        for e in reader.events() {
            self.failed(e, flow);
        }
        while self.denied.is_none() && self.records.len() < max_records && self.bytes < max_bytes {
            // As many records as the bytes left hold at the average size so far (one record
            // first): large records overshoot `max_bytes` by about one, not by a whole read.
            let want = match self.records.len() {
                0 => 1,
                n => (max_records - n).min((max_bytes - self.bytes).div_ceil((self.bytes / n).max(64))),
            };
            if reader.read(want, wait, &mut read) == 0 {
                break;
            }
            for m in read.drain(..) {
                match m {
                    Ok(m) => {
                        let r = to_record(m, names);
                        self.bytes += r.size_bytes;
                        self.records.push(r);
                    }
                    Err(e) => self.failed(e, flow),
                }
            }
            wait = Duration::ZERO;
        }
    }

    /// Takes what `lanes` hold, from lane `from` on in turn, without waiting, up to the bounds
    /// (records, bytes).
    fn drain_all(
        &mut self,
        lanes: &[Arc<SourceReader>],
        from: usize,
        names: &mut TopicNames,
        bounds: (usize, usize),
        flow: &str,
    ) {
        for lane in lanes.iter().cycle().skip(from).take(lanes.len()) {
            if self.denied.is_some() || self.records.len() >= bounds.0 || self.bytes >= bounds.1 {
                return;
            }
            self.drain(lane, names, bounds.0, bounds.1, Duration::ZERO, flow);
        }
    }

    /// Waits up to `timeout` for a first record of `lanes`, then takes what they hold. One lane
    /// is waited on alone; several, in turns of [`WAIT_SLICE`] each (librdkafka waits on one
    /// queue, and a consumer's queues cannot be forwarded to another consumer's).
    fn wait(
        &mut self,
        lanes: &[Arc<SourceReader>],
        names: &mut TopicNames,
        bounds: (usize, usize),
        timeout: Duration,
        flow: &str,
    ) {
        if let [lane] = lanes {
            return self.drain(lane, names, bounds.0, bounds.1, timeout, flow);
        }
        let deadline = Instant::now() + timeout;
        loop {
            for lane in lanes {
                let left = deadline.saturating_duration_since(Instant::now());
                self.drain(lane, names, bounds.0, bounds.1, left.min(WAIT_SLICE), flow);
                if !self.records.is_empty() || self.denied.is_some() {
                    return self.drain_all(lanes, 0, names, bounds, flow);
                }
            }
            if Instant::now() >= deadline {
                return;
            }
        }
    }

    /// Notes a refusal (no retry helps); logs any other error, which librdkafka retries itself.
    fn failed(&mut self, e: KafkaError, flow: &str) {
        if e.rdkafka_error_code().is_some_and(is_denied) {
            self.denied.get_or_insert(e);
        } else {
            crate::client_log::consumer_error(flow, &e);
        }
    }
}

/// The record of `m`, holding the message itself (no copy of key and value); its headers are
/// copied, as the loop guard edits them.
fn to_record(m: KafkaMessage, names: &mut TopicNames) -> ConnectRecord<(), ReplicatedRecord> {
    let mut headers = Vec::new();
    m.for_each_header(|key, value| headers.push(Header { key: key.to_string(), value: value.map(<[u8]>::to_vec) }));
    let size_bytes = 64
        + m.key().map_or(0, <[u8]>::len)
        + m.payload().map_or(0, <[u8]>::len)
        + headers.iter().map(|h| h.key.len() + h.value.as_ref().map_or(0, Vec::len)).sum::<usize>();
    let topic = names.get(&m.topic());
    let (partition, offset, timestamp_ms) = (m.partition(), m.offset(), m.timestamp_ms());
    ConnectRecord {
        key: None,
        value: Some(ReplicatedRecord::Kafka(m)),
        timestamp_ms,
        headers,
        source_offset: SourceOffset { topic, partition, offset },
        size_bytes,
    }
}
