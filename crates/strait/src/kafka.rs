//! Shared Kafka client plumbing: client configs per cluster, blocking calls off the async
//! workers, small control-record produces, and reading state topics to their end.

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};

use crate::config::ClusterConfig;

/// librdkafka config for a cluster: bootstrap servers, then `base` settings, then the cluster's
/// own `client` overrides (which win, so an operator can tune anything).
pub fn client_config(cluster: &ClusterConfig, base: &[(&str, &str)]) -> ClientConfig {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", &cluster.bootstrap_servers);
    cfg.set("client.id", format!("strait-{}", cluster.alias));
    for (k, v) in base {
        cfg.set(*k, *v);
    }
    for (k, v) in &cluster.client {
        cfg.set(k, v);
    }
    cfg
}

/// Runs blocking librdkafka calls (metadata, watermarks) off the async workers.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(f).await {
        Ok(v) => v,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// Queues `record` on `producer`, sleeping briefly while librdkafka's queue is full, and returns
/// its ack future. For small control records (positions, offset syncs); the data path applies its
/// own backpressure. Errors: the produce error for anything but a full queue.
pub async fn enqueue(producer: &FutureProducer, mut record: FutureRecord<'_, [u8], [u8]>) -> Result<DeliveryFuture, KafkaError> {
    loop {
        match producer.send_result(record) {
            Ok(ack) => return Ok(ack),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// Awaits an ack from [`enqueue`]; the downstream offset on success.
pub async fn acked(ack: DeliveryFuture) -> Result<i64, KafkaError> {
    match ack.await {
        Ok(Ok(d)) => Ok(d.offset),
        Ok(Err((e, _))) => Err(e),
        Err(_) => Err(KafkaError::Canceled),
    }
}

/// A keyed record of a state topic: its offset, key and value bytes.
pub type RawRecord = (i64, Vec<u8>, Vec<u8>);

/// Every record of partition 0 of `topic` (Strait's state topics have one partition) with a key
/// and a value, from its beginning to the high watermark seen at the start. A missing or empty
/// topic gives nothing. For the small compacted state topics (positions, checkpoints).
/// Errors: the first client error, or no progress for 30 s.
pub async fn read_to_end(cluster: &ClusterConfig, topic: &str) -> Result<Vec<RawRecord>, KafkaError> {
    use rdkafka::consumer::BaseConsumer;
    let consumer: BaseConsumer =
        client_config(cluster, &[("group.id", "strait-state-reader"), ("enable.auto.commit", "false")]).create()?;
    let topic = topic.to_string();
    Ok(blocking(move || read_new_records(&consumer, &topic, None)).await?.0)
}

/// Records with a key and a value of partition 0 of `topic`, from `next` (or, when `None`,
/// assigning `consumer` at the beginning) to the current high watermark, and the next offset to
/// read. Blocking: call from a blocking thread. A topic that does not exist yet reads nothing.
pub fn read_new_records(
    consumer: &rdkafka::consumer::BaseConsumer,
    topic: &str,
    next: Option<i64>,
) -> Result<(Vec<RawRecord>, Option<i64>), KafkaError> {
    use rdkafka::consumer::Consumer;
    use rdkafka::{Message, Offset, TopicPartitionList};
    let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
    if !md.topics().iter().any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty()) {
        return Ok((Vec::new(), next));
    }
    let (low, high) = consumer.fetch_watermarks(topic, 0, Duration::from_secs(10))?;
    let mut position = match next {
        Some(n) => n,
        None => {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(topic, 0, Offset::Beginning)?;
            consumer.assign(&tpl)?;
            low
        }
    };
    let mut out = Vec::new();
    while position < high {
        match consumer.poll(Duration::from_secs(30)) {
            Some(Ok(m)) => {
                position = m.offset() + 1;
                if let (Some(k), Some(v)) = (m.key(), m.payload()) {
                    out.push((m.offset(), k.to_vec(), v.to_vec()));
                }
            }
            Some(Err(e)) => return Err(e),
            None => return Err(KafkaError::MessageConsumption(RDKafkaErrorCode::OperationTimedOut)),
        }
    }
    Ok((out, Some(position)))
}
