//! Reading Strait's small state topics (positions, checkpoints) to their end, `read_committed`.

use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{Message, Offset, TopicPartitionList};

use super::{blocking, ends_read, watermarks, METADATA_TIMEOUT};
use crate::client_log::{ClientLog, LoggedConsumer};
use crate::config::ClusterConfig;

/// Longest a state-topic read may go without progress before it fails.
const READ_STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a state-topic read goes without progress before it says why it waits.
const STALL_WARNING: Duration = Duration::from_secs(5);

/// A keyed record of a state topic: its offset, key and value bytes.
pub type RawRecord = (i64, Vec<u8>, Vec<u8>);

/// A record with a key and maybe a value (`None`: a tombstone): (offset, key, value).
pub type KeyedRecord = (i64, Vec<u8>, Option<Vec<u8>>);

/// A [`KeyedRecord`] with its timestamp (ms), and the next offset to read.
type Read = (Vec<(KeyedRecord, Option<i64>)>, Option<i64>);

/// Every committed record of partition 0 of `topic` (Strait's state topics have one partition)
/// with a key and a value, from its beginning to the end seen at the start. A missing or empty
/// topic gives nothing. For the small compacted state topics (positions, checkpoints).
/// Errors: the first client error, or no progress for 30 s (a transaction of another writer left
/// open holds `read_committed` readers back until it ends).
pub async fn read_to_end(cluster: &ClusterConfig, topic: &str) -> Result<Vec<RawRecord>, KafkaError> {
    let reader = StateReader::new(cluster, "strait-state-reader")?;
    let topic = topic.to_string();
    Ok(blocking(move || reader.read_new_records(&topic, None)).await?.0)
}

/// Reads a state topic `read_committed`, so records of aborted or still open transactions are
/// never used, up to its real end: a second, `read_uncommitted` client gives the high watermark
/// (a `read_committed` one would give the last stable offset, stopping short of records that a
/// transaction still open at that moment would hide).
pub struct StateReader {
    consumer: LoggedConsumer,
    watermarks: LoggedConsumer,
}

impl StateReader {
    /// A reader of `cluster` with consumer group id `group` (never joined, never committed).
    /// Errors: invalid client config.
    pub fn new(cluster: &ClusterConfig, group: &str) -> Result<Self, KafkaError> {
        let client = |isolation| {
            cluster
                .client_config(&[("group.id", group), ("enable.auto.commit", "false"), ("isolation.level", isolation)])
                .create_with_context(ClientLog)
        };
        Ok(Self { consumer: client("read_committed")?, watermarks: client("read_uncommitted")? })
    }

    /// Records with a key and a value of partition 0 of `topic`, from `next` (or, when `None`,
    /// assigning the reader at the beginning) to the high watermark seen now, and the next offset
    /// to read. Transaction markers and aborted records are stepped over by the consumer's
    /// position. Blocking: call from a blocking thread. A topic that does not exist yet reads nothing.
    pub fn read_new_records(
        &self,
        topic: &str,
        next: Option<i64>,
    ) -> Result<(Vec<RawRecord>, Option<i64>), KafkaError> {
        if self.partition_count(topic)? == 0 {
            return Ok((Vec::new(), next));
        }
        let (records, next) = self.read(topic, 0, next)?;
        Ok((records.into_iter().filter_map(|((o, k, v), _)| Some((o, k, v?))).collect(), next))
    }

    /// Partitions of `topic`; 0 when it does not exist. Blocking.
    pub fn partition_count(&self, topic: &str) -> Result<i32, KafkaError> {
        let md = self.consumer.fetch_metadata(Some(topic), METADATA_TIMEOUT)?;
        Ok(md
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            // librdkafka counts a topic's partitions in a C int: the length fits.
            .map_or(0, |t| t.partitions().len() as i32))
    }

    /// Every keyed record of every partition of `topic`, tombstones (`None` values) included,
    /// partition by partition from 0, each from its beginning to the high watermark seen now (all
    /// asked at once, one request per broker). A missing topic gives nothing. Blocking.
    pub fn read_partitions(&self, topic: &str) -> Result<Vec<KeyedRecord>, KafkaError> {
        let partitions = self.partition_count(topic)?;
        let marks = watermarks(&self.watermarks, (0..partitions).map(|p| (topic, p)), METADATA_TIMEOUT)?;
        let mut out = Vec::new();
        for partition in 0..partitions {
            let read = self.read_within(topic, partition, None, marks.get(topic, partition)?)?;
            out.extend(read.0.into_iter().map(|(r, _)| r));
        }
        Ok(out)
    }

    /// Like [`StateReader::read_new_records`] from the beginning of partition 0, each record with
    /// its timestamp (ms since the epoch; `None` when the broker gave none). Blocking.
    pub fn read_timestamped(&self, topic: &str) -> Result<Vec<(RawRecord, Option<i64>)>, KafkaError> {
        if self.partition_count(topic)? == 0 {
            return Ok(Vec::new());
        }
        let records = self.read(topic, 0, None)?.0;
        Ok(records.into_iter().filter_map(|((o, k, v), ts)| Some(((o, k, v?), ts))).collect())
    }

    /// Says why a read stands at `position` below `high`: the `read_committed` client's end is
    /// the last stable offset, which an open transaction holds back.
    fn warn_stalled(&self, topic: &str, partition: i32, position: i64, high: i64) {
        match self.consumer.fetch_watermarks(topic, partition, METADATA_TIMEOUT) {
            Ok((_, stable)) if stable <= position => tracing::warn!(
                topic,
                partition,
                position,
                stable,
                end = high,
                "a state topic read waits on an open transaction: another exactly-once flow writing to it \
                 stopped mid-transaction (killed?); the read goes on once that flow's restart ends it, or \
                 the target aborts it at its transaction timeout"
            ),
            _ => tracing::warn!(topic, partition, position, end = high, "a state topic read makes no progress"),
        }
    }

    fn read(&self, topic: &str, partition: i32, next: Option<i64>) -> Result<Read, KafkaError> {
        let marks = self.watermarks.fetch_watermarks(topic, partition, METADATA_TIMEOUT)?;
        self.read_within(topic, partition, next, marks)
    }

    /// Reads `topic`/`partition` from `next` (`None`: its beginning) to `high`, `low` being its
    /// log start.
    fn read_within(
        &self,
        topic: &str,
        partition: i32,
        next: Option<i64>,
        (low, high): (i64, i64),
    ) -> Result<Read, KafkaError> {
        let consumer = &self.consumer;
        let mut position = match next {
            Some(n) => n,
            None => {
                let mut tpl = TopicPartitionList::new();
                tpl.add_partition_offset(topic, partition, Offset::Beginning)?;
                consumer.assign(&tpl)?;
                low
            }
        };
        let mut out = Vec::new();
        let (mut progress, mut warned) = (Instant::now(), false);
        while position < high {
            match consumer.poll(Duration::from_millis(200)) {
                Some(Ok(m)) => {
                    position = m.offset() + 1;
                    progress = Instant::now();
                    if let Some(k) = m.key() {
                        let record = (m.offset(), k.to_vec(), m.payload().map(<[u8]>::to_vec));
                        out.push((record, m.timestamp().to_millis()));
                    }
                }
                Some(Err(e)) if ends_read(&e) => return Err(e),
                Some(Err(_)) | None => {
                    // Past a commit marker or an aborted transaction no record arrives: the
                    // consumer's position tells how far it got.
                    let fetched = consumer.position()?.find_partition(topic, partition).map(|e| e.offset());
                    if let Some(Offset::Offset(p)) = fetched {
                        if p > position {
                            position = p;
                            progress = Instant::now();
                        }
                    }
                    if position < high && !warned && progress.elapsed() > STALL_WARNING {
                        warned = true;
                        self.warn_stalled(topic, partition, position, high);
                    }
                    if position < high && progress.elapsed() > READ_STALL_TIMEOUT {
                        return Err(KafkaError::MessageConsumption(RDKafkaErrorCode::OperationTimedOut));
                    }
                }
            }
        }
        Ok((out, Some(position)))
    }
}
