//! What the tests of the batch path make and read through real brokers, shared by this crate's
//! tests and Strait's (`strait/tests/e2e`, which includes this file): transactions written with
//! rdkafka, batches encoded by kafka-protocol's encoder, a topic fetched to its end.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{Compression as Codec, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer as _, ThreadedProducer};
use strait_wire::{Batch, Cluster, FetchAt, Fetched};

use crate::support::now_ms;

/// Three transactions of 20 records per partition of `topic` (2 partitions): committed,
/// aborted, committed.
pub(crate) fn transactions(bootstrap: &str, topic: &str) {
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", topic)
        .set("compression.type", "lz4")
        .create()
        .unwrap();
    p.init_transactions(Duration::from_secs(30)).unwrap();
    for (tx, outcome) in ["committed", "aborted", "committed"].iter().enumerate() {
        p.begin_transaction().unwrap();
        for i in 0..40 {
            let value = format!("tx{tx}-{i}-{outcome}");
            p.send(BaseRecord::<[u8], [u8]>::to(topic).partition(i % 2).payload(value.as_bytes())).unwrap();
        }
        // librdkafka's abort purges what it has not sent: flush so the aborted records are in
        // the log, as a replicator meets them.
        p.flush(Duration::from_secs(30)).unwrap();
        match *outcome {
            "aborted" => p.abort_transaction(Duration::from_secs(30)).unwrap(),
            _ => p.commit_transaction(Duration::from_secs(30)).unwrap(),
        }
    }
}

/// Every fetch of `topic`'s `partitions` from offset 0 to the last stable offset, at most
/// `partition_max_bytes` per partition per fetch, each next fetch after the last whole batch.
pub(crate) async fn fetch_all(
    cluster: &mut Cluster,
    topic: &str,
    partitions: i32,
    partition_max_bytes: i32,
) -> BTreeMap<i32, Vec<Fetched>> {
    let mut next: BTreeMap<i32, i64> = (0..partitions).map(|p| (p, 0)).collect();
    let mut fetches: BTreeMap<i32, Vec<Fetched>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !next.is_empty() {
        assert!(Instant::now() < deadline, "{topic}: not fetched to the end in 60 s, at {next:?}");
        let at: Vec<FetchAt> = next
            .iter()
            .map(|(p, o)| FetchAt {
                topic: topic.to_string(),
                topic_id: Default::default(),
                partition: *p,
                offset: *o,
                last_fetched_epoch: -1,
            })
            .collect();
        for f in cluster.fetch(&at, Duration::from_millis(200), partition_max_bytes).await.expect("fetch").fetched {
            assert_eq!(f.error, None, "{topic}/{}", f.partition);
            let p = f.partition;
            if let Some(last) = f.batches.last() {
                next.insert(p, last.last_offset() + 1);
            }
            if next[&p] >= f.last_stable_offset {
                next.remove(&p);
            }
            fetches.entry(p).or_default().push(f);
        }
    }
    fetches
}

/// One v2 batch of `count` records `"{prefix}-{first + i}"` made by kafka-protocol's encoder,
/// each with a key and a header; with `zero_timestamp` the first record is stamped 0.
pub(crate) fn encoded_batch(prefix: &str, first: usize, count: usize, codec: Codec, zero_timestamp: bool) -> Batch {
    let records: Vec<Record> = (0..count)
        .map(|i| {
            let mut headers = IndexMap::new();
            headers.insert("n".to_string().into(), Some(Bytes::from(i.to_string())));
            Record {
                transactional: false,
                control: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // kafka-protocol's encoder keeps in one batch records whose sequence follows their offset.
                sequence: i as i32,
                timestamp: if zero_timestamp && i == 0 { 0 } else { now_ms() },
                key: Some(Bytes::from(format!("k{}", first + i))),
                value: Some(Bytes::from(format!("{prefix}-{}", first + i))),
                headers,
                delete_horizon: false,
            }
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, &records, &RecordEncodeOptions { version: 2, compression: codec })
        .expect("encode a batch");
    Batch::new(buf.freeze()).expect("one batch")
}

pub(crate) const CODECS: [(&str, Codec); 4] =
    [("gzip", Codec::Gzip), ("snappy", Codec::Snappy), ("lz4", Codec::Lz4), ("zstd", Codec::Zstd)];
