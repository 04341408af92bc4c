//! KafkaSource: reads every partition of a flow's selected topics from the source cluster.
//!
//! Manual assignment (no consumer group, nothing written to the source), `read_committed` so
//! aborted transactions never reach the target, resuming from the positions saved on the target
//! ([`crate::positions`]), earliest where none. Topics and partitions that appear are picked up
//! at the next refresh (every `refresh_topics_interval_ms`).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Headers};
use rdkafka::{Message, Offset, TopicPartitionList};
use strait_connect::{ConnectError, ConnectRecord, ConnectResult, Header, Source, SourceOffset};

use crate::config::Flow;
use crate::kafka::{blocking, client_config};
use crate::positions::{PositionStore, Positions};

/// A source record as it travels to the target: where it was and its Kafka key and value.
/// Headers and the timestamp travel in the [`ConnectRecord`] around it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicatedRecord {
    /// Source topic.
    pub topic: Arc<str>,
    /// Source partition (the target partition is the same number).
    pub partition: i32,
    /// Upstream offset.
    pub offset: i64,
    /// Key bytes; `None` for a null key.
    pub key: Option<Vec<u8>>,
    /// Value bytes; `None` for a tombstone.
    pub value: Option<Vec<u8>>,
}

/// The [`Source`] of a flow.
pub struct KafkaSource {
    consumer: Arc<BaseConsumer>,
    /// Topic names shared by every record of the topic.
    names: HashMap<String, Arc<str>>,
    flow: Arc<Flow>,
    store: PositionStore,
    saved: Positions,
    assigned: HashSet<(String, i32)>,
    next_refresh: Instant,
}

impl KafkaSource {
    /// Connects to the source cluster and assigns every selected partition from its saved position
    /// (earliest when none). Errors: a backend error when the source cluster cannot be listed.
    pub async fn start(flow: Arc<Flow>, store: PositionStore, saved: Positions) -> ConnectResult<Self> {
        let consumer: BaseConsumer = client_config(
            &flow.source,
            &[
                ("group.id", &format!("strait-{}", flow.name)),
                ("enable.auto.commit", "false"),
                ("enable.auto.offset.store", "false"),
                ("auto.offset.reset", "earliest"),
                ("isolation.level", "read_committed"),
                ("enable.partition.eof", "false"),
                ("fetch.wait.max.ms", "100"),
                // Bounded prefetch: librdkafka counts these bytes compressed, so a highly
                // compressed source can inflate them many times once decoded.
                ("queued.max.messages.kbytes", "8192"),
                ("queued.min.messages", "20000"),
                // librdkafka waits this long before fetching again once the queue was full
                // (default 1 s: a stall per refill with a small queue).
                ("fetch.queue.backoff.ms", "10"),
            ],
        )
        .create()
        .map_err(|e| ConnectError::backend(format!("consumer for source {}", flow.source.alias), e))?;
        let mut source = Self {
            consumer: Arc::new(consumer),
            names: HashMap::new(),
            flow,
            store,
            saved,
            assigned: HashSet::new(),
            next_refresh: Instant::now(),
        };
        let topics = source.refresh().await?;
        tracing::info!(
            flow = %source.flow.name,
            source = %source.flow.source.bootstrap_servers,
            target = %source.flow.target.bootstrap_servers,
            topics = ?topics,
            "flow started"
        );
        Ok(source)
    }

    /// Lists the source's topics and assigns partitions not yet assigned. Returns the selected
    /// topic names.
    async fn refresh(&mut self) -> ConnectResult<BTreeSet<String>> {
        self.next_refresh = Instant::now() + self.flow.refresh_interval();
        let consumer = self.consumer.clone();
        let md = blocking(move || {
            consumer.fetch_metadata(None, Duration::from_secs(10)).map(|md| {
                md.topics()
                    .iter()
                    .filter(|t| t.error().is_none())
                    .map(|t| (t.name().to_string(), t.partitions().len()))
                    .collect::<Vec<_>>()
            })
        })
        .await
        .map_err(|e| ConnectError::backend(format!("list topics of source {}", self.flow.source.alias), e))?;
        let mut selected = BTreeSet::new();
        let mut new = TopicPartitionList::new();
        for (topic, partitions) in md {
            if !self.flow.replicates(&topic) {
                continue;
            }
            for p in 0..partitions as i32 {
                if self.assigned.contains(&(topic.clone(), p)) {
                    continue;
                }
                let offset = match self.saved.get(&(topic.clone(), p)) {
                    Some(o) => Offset::Offset(*o),
                    None => Offset::Beginning,
                };
                new.add_partition_offset(&topic, p, offset)
                    .map_err(|e| ConnectError::offset(format!("assign {topic} partition {p}"), e))?;
                self.assigned.insert((topic.clone(), p));
            }
            selected.insert(topic);
        }
        if new.count() > 0 {
            tracing::info!(flow = %self.flow.name, partitions = new.count(), "assigning new source partitions");
            self.consumer
                .incremental_assign(&new)
                .map_err(|e| ConnectError::backend("assign source partitions", e))?;
        }
        Ok(selected)
    }
}

fn to_record(m: &BorrowedMessage<'_>, names: &mut HashMap<String, Arc<str>>) -> ConnectRecord<(), ReplicatedRecord> {
    let key = m.key().map(<[u8]>::to_vec);
    let value = m.payload().map(<[u8]>::to_vec);
    let headers: Vec<Header> = m
        .headers()
        .map(|hs| {
            hs.iter()
                .map(|h| Header { key: h.key.to_string(), value: h.value.map(<[u8]>::to_vec) })
                .collect()
        })
        .unwrap_or_default();
    let size_bytes = 64
        + key.as_ref().map_or(0, Vec::len)
        + value.as_ref().map_or(0, Vec::len)
        + headers.iter().map(|h| h.key.len() + h.value.as_ref().map_or(0, Vec::len)).sum::<usize>();
    let topic = match names.get(m.topic()) {
        Some(t) => t.clone(),
        None => names.entry(m.topic().to_string()).or_insert_with(|| Arc::from(m.topic())).clone(),
    };
    ConnectRecord {
        key: None,
        value: Some(ReplicatedRecord { topic: topic.clone(), partition: m.partition(), offset: m.offset(), key, value }),
        timestamp_ms: m.timestamp().to_millis(),
        headers,
        source_offset: SourceOffset { topic, partition: m.partition(), offset: m.offset() },
        size_bytes,
    }
}

#[async_trait]
impl Source<(), ReplicatedRecord> for KafkaSource {
    async fn poll(
        &mut self,
        max_records: usize,
        max_bytes: usize,
        timeout: Duration,
    ) -> ConnectResult<Vec<ConnectRecord<(), ReplicatedRecord>>> {
        if Instant::now() >= self.next_refresh {
            // A source that cannot be listed right now keeps replicating what it has.
            if let Err(e) = self.refresh().await {
                tracing::warn!(flow = %self.flow.name, error = %e, "topic refresh failed; will retry");
            }
        }
        // One blocking call per batch: wait up to `timeout` for the first record, then take
        // what is already fetched, without waiting, up to the limits.
        let consumer = self.consumer.clone();
        let mut names = std::mem::take(&mut self.names);
        let flow = self.flow.name.clone();
        let (out, names) = blocking(move || {
            let mut out = Vec::new();
            let mut bytes = 0;
            let mut wait = timeout;
            while out.len() < max_records && bytes < max_bytes {
                match consumer.poll(wait) {
                    None => break,
                    Some(Ok(m)) => {
                        let r = to_record(&m, &mut names);
                        bytes += r.size_bytes;
                        out.push(r);
                    }
                    // librdkafka reports transient broker errors here and keeps retrying itself.
                    Some(Err(e)) => tracing::warn!(flow = %flow, error = %e, "source consumer error"),
                }
                wait = Duration::ZERO;
            }
            (out, names)
        })
        .await;
        self.names = names;
        Ok(out)
    }

    async fn checkpoint(&mut self, positions: &[SourceOffset]) -> ConnectResult<()> {
        self.store.save(positions).await
    }

    async fn seek(&mut self, position: &SourceOffset) -> ConnectResult<()> {
        let consumer = self.consumer.clone();
        let p = position.clone();
        blocking(move || consumer.seek(&p.topic, p.partition, Offset::Offset(p.offset), Duration::from_secs(10)))
            .await
            .map_err(|e| ConnectError::offset(format!("seek {} partition {} to {}", position.topic, position.partition, position.offset), e))
    }

    /// Nothing to release: the consumer keeps no per-record state once a record is polled.
    async fn acknowledge(&mut self, _positions: &[SourceOffset]) -> ConnectResult<()> {
        Ok(())
    }

    async fn close(&mut self) -> ConnectResult<()> {
        self.consumer.unassign().map_err(|e| ConnectError::backend("unassign source partitions", e))
    }
}
