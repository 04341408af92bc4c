//! The batch path's client (`strait-wire`, issue 27) against a real broker: a raw
//! `read_committed` fetch returns the batches as the broker stores them, and the batches it
//! keeps are the records Kafka's own `read_committed` consumer reads.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::records::RecordBatchDecoder;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use strait_wire::batch::{Compression, Marker};
use strait_wire::{Batch, Cluster, FetchAt, Fetched};

use crate::support::*;

/// Three transactions of 20 records per partition of `topic` (2 partitions): committed,
/// aborted, committed.
fn transactions(bootstrap: &str, topic: &str) {
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

/// Every fetch of `topic`'s 2 partitions from offset 0 to the last stable offset, at most
/// `partition_max_bytes` per partition per fetch, each next fetch after the last whole batch.
async fn fetch_all(cluster: &mut Cluster, topic: &str, partition_max_bytes: i32) -> BTreeMap<i32, Vec<Fetched>> {
    let mut next: BTreeMap<i32, i64> = (0..2).map(|p| (p, 0)).collect();
    let mut fetches: BTreeMap<i32, Vec<Fetched>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !next.is_empty() {
        assert!(Instant::now() < deadline, "{topic}: not fetched to the end in 60 s, at {next:?}");
        let at: Vec<FetchAt> =
            next.iter().map(|(p, o)| FetchAt { topic: topic.to_string(), partition: *p, offset: *o }).collect();
        for f in cluster.fetch(&at, Duration::from_millis(200), partition_max_bytes).await.expect("fetch") {
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

fn values(batch: &Batch) -> Vec<Vec<u8>> {
    let mut bytes = batch.bytes().clone();
    let set = RecordBatchDecoder::decode(&mut bytes).expect("a batch kafka-protocol decodes, its CRC checked");
    set.records.into_iter().map(|r| r.value.map(|v| v.to_vec()).unwrap_or_default()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_raw_fetch_returns_the_stored_batches_and_keeps_what_read_committed_reads() {
    let a = cluster(1);
    let topic = unique("rawfetch");
    create_topic(&a, &topic, 2, &[]).await;
    let lz4 = [("compression.type", "lz4"), ("linger.ms", "20")];
    let plain =
        |range: std::ops::Range<i32>| -> Vec<Rec> { range.map(|i| Rec::simple(i % 2, &format!("v{i}"))).collect() };
    produce_with(&a, &topic, &plain(0..1_000), &lz4).await;
    let (bootstrap, tx_topic) = (a.clone(), topic.clone());
    tokio::task::spawn_blocking(move || transactions(&bootstrap, &tx_topic)).await.unwrap();
    produce_with(&a, &topic, &plain(1_000..1_100), &lz4).await;

    let mut cluster = Cluster::connect(&a, "strait-wire-test", Duration::from_secs(10)).await.expect("connect");
    cluster.refresh(&[&topic]).await.expect("metadata");
    assert!(cluster.leader(&topic, 0).is_some() && cluster.leader(&topic, 1).is_some(), "leaders known");
    // 512 bytes a partition per fetch (a few batches' worth): several fetches per partition, a
    // batch cut at the limit left for the next, and a batch larger than the limit still returned.
    let fetched = fetch_all(&mut cluster, &topic, 512).await;
    let consumed = read_all(&a, &topic, true);

    for p in 0..2 {
        let fetches = &fetched[&p];
        assert!(fetches.len() > 1, "partition {p}: the log took several fetches ({})", fetches.len());
        let batches: Vec<&Batch> = fetches.iter().flat_map(|f| &f.batches).collect();
        let mut next = 0;
        for b in &batches {
            assert!(b.crc_matches(), "partition {p}: {b:?} intact");
            assert_eq!(b.base_offset(), next, "partition {p}: batches follow each other");
            next = b.last_offset() + 1;
        }
        assert_eq!(next, fetches.last().unwrap().high_watermark, "partition {p}: fetched to the end");

        let data: Vec<&&Batch> = batches.iter().filter(|b| !b.is_control()).collect();
        assert!(data.iter().all(|b| b.compression() == Some(Compression::Lz4)), "partition {p}: lz4 as produced");
        let markers: Vec<Marker> = batches.iter().filter_map(|b| b.marker()).collect();
        assert_eq!(
            markers,
            [Marker::Commit, Marker::Abort, Marker::Commit],
            "partition {p}: the transactions' markers"
        );
        let producer =
            data.iter().find(|b| b.is_transactional()).map(|b| b.producer_id()).expect("transactional batches");
        let aborted: Vec<i64> = fetches.iter().flat_map(|f| &f.aborted).map(|a| a.producer_id).collect();
        assert!(!aborted.is_empty() && aborted.iter().all(|id| *id == producer), "partition {p}: aborted {aborted:?}");

        // What the batches kept hold, record for record, is what Kafka's read_committed reads.
        let kept: Vec<Vec<u8>> = fetches.iter().flat_map(|f| f.committed()).flat_map(values).collect();
        let read: Vec<Vec<u8>> = consumed[&p].iter().map(|(_, r)| r.value.clone().unwrap()).collect();
        assert_eq!(read.len(), 500 + 40 + 50, "partition {p}: plain, committed, plain records read");
        assert!(read.iter().all(|v| !v.ends_with(b"aborted")), "partition {p}: no aborted record read");
        assert_eq!(kept, read, "partition {p}: the kept batches hold what read_committed reads");
    }
}
