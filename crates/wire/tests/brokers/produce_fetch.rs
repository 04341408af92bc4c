//! The batch path's client (`strait-wire`, issue 27) against real brokers: a raw
//! `read_committed` fetch returns the batches as the broker stores them, and the batches it
//! keeps are the records Kafka's own `read_committed` consumer reads; batches produced to
//! another cluster are stored byte for byte as fetched, but for the producer's fields, CRC and
//! offsets, in every codec and with a timestamp of 0.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::records::RecordBatchDecoder;
use strait_wire::batch::{Compression, Marker};
use strait_wire::{Appended, Batch, ClientOptions, Cluster, Connections, FetchAt, Fetched, Outgoing, Producer};

use crate::made::{encoded_batch, fetch_all, transactions, CODECS};
use crate::support::*;

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

    let mut cluster = Cluster::connect(&a, ClientOptions::plaintext("strait-wire-test", Duration::from_secs(10)))
        .await
        .expect("connect");
    cluster.refresh(&[&topic]).await.expect("metadata");
    assert!(cluster.leader(&topic, 0).is_some() && cluster.leader(&topic, 1).is_some(), "leaders known");
    // 512 bytes a partition per fetch (a few batches' worth): several fetches per partition, a
    // batch cut at the limit left for the next, and a batch larger than the limit still returned.
    let fetched = fetch_all(&mut cluster, &topic, 2, 512).await;
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

#[tokio::test(flavor = "multi_thread")]
async fn batches_produced_to_another_cluster_are_stored_as_fetched_but_for_producer_fields_crc_and_offsets() {
    let (a, b) = (cluster(1), cluster(2));
    let (source, target) = (unique("rawcopys"), unique("rawcopyt"));
    create_topic(&a, &source, 4, &[]).await;
    create_topic(&b, &target, 4, &[]).await;
    // Partition p in codec p: records batched by librdkafka, then batches of kafka-protocol's
    // encoder whose first record is stamped 0 (librdkafka sends 0 as "now"), then librdkafka's.
    let mut to_source = Producer::init(
        Cluster::connect(&a, ClientOptions::plaintext("wire-test", Duration::from_secs(10))).await.unwrap(),
        Duration::from_secs(60),
    )
    .await
    .expect("a producer id from the source");
    for (p, (name, codec)) in CODECS.iter().enumerate() {
        let p = p as i32;
        let records = |range: std::ops::Range<i32>| -> Vec<Rec> {
            range
                .map(|i| {
                    let mut r = Rec::simple(p, &format!("{name}-{i}"));
                    r.key = Some(format!("k{i}").into_bytes());
                    r.headers = vec![("h".into(), Some(vec![i as u8])), ("empty".into(), None)];
                    r
                })
                .collect()
        };
        let settings = [("compression.type", *name), ("linger.ms", "5"), ("batch.size", "4000")];
        produce_with(&a, &source, &records(0..600), &settings).await;
        let encoded: Vec<Outgoing> = (0..3)
            .map(|i| Outgoing {
                topic: source.clone(),
                partition: p,
                batch: encoded_batch(&format!("{name}-enc"), i * 20, 20, *codec, true),
            })
            .collect();
        to_source.produce(&encoded).await.expect("encoded batches produced to the source");
        produce_with(&a, &source, &records(600..1_200), &settings).await;
    }

    let mut from_source =
        Cluster::connect(&a, ClientOptions::plaintext("wire-test", Duration::from_secs(10))).await.unwrap();
    from_source.refresh(&[&source]).await.unwrap();
    let fetched = fetch_all(&mut from_source, &source, 4, 64 << 10).await;
    let source_batches: BTreeMap<i32, Vec<Batch>> =
        fetched.iter().map(|(p, fs)| (*p, fs.iter().flat_map(|f| f.committed()).cloned().collect())).collect();

    // To the target and back over 3 connections to its broker (issue 43): each partition's
    // batches on one of them, in order, its sequences running on.
    let three = ClientOptions {
        connections: Connections::PerBroker(3),
        ..ClientOptions::plaintext("wire-test", Duration::from_secs(10))
    };
    let mut to_target = Producer::init(Cluster::connect(&b, three.clone()).await.unwrap(), Duration::from_secs(60))
        .await
        .expect("a producer id from the target");
    // Interleaved across partitions, in calls of 25 batches: each call keeps several requests in
    // flight, and a partition's sequence runs on from one call to the next.
    let longest = source_batches.values().map(Vec::len).max().unwrap();
    let outgoing: Vec<Outgoing> = (0..longest)
        .flat_map(|i| source_batches.iter().filter_map(move |(p, bs)| bs.get(i).map(|b| (*p, b.clone()))))
        .map(|(p, batch)| Outgoing { topic: target.clone(), partition: p, batch })
        .collect();
    let mut appended: BTreeMap<i32, Vec<Appended>> = BTreeMap::new();
    for chunk in outgoing.chunks(25) {
        for (out, a) in chunk.iter().zip(to_target.produce(chunk).await.expect("produced to the target")) {
            appended.entry(out.partition).or_default().push(a);
        }
    }

    let mut from_target = Cluster::connect(&b, three).await.unwrap();
    from_target.refresh(&[&target]).await.unwrap();
    let stored = fetch_all(&mut from_target, &target, 4, 64 << 10).await;
    assert_eq!(from_target.connections_open(), 3, "the 4 partitions fetched over 3 connections to the broker");
    let (producer_id, producer_epoch) = to_target.id();
    for (p, (name, _)) in CODECS.iter().enumerate() {
        let p = p as i32;
        let sources = &source_batches[&p];
        let targets: Vec<&Batch> = stored[&p].iter().flat_map(|f| &f.batches).collect();
        assert!(sources.len() > 10, "{name}: partition {p} has batches of both makers ({})", sources.len());
        assert_eq!(targets.len(), sources.len(), "{name}: one target batch per source batch");
        let mut sequence = 0;
        for ((s, t), a) in sources.iter().zip(&targets).zip(&appended[&p]) {
            assert!(t.crc_matches(), "{name}: {t:?} intact");
            assert_eq!(t.bytes()[61..], s.bytes()[61..], "{name}: the records' bytes as fetched ({s:?})");
            assert_eq!(
                (t.attributes(), t.base_timestamp(), t.max_timestamp(), t.last_offset_delta(), t.record_count()),
                (s.attributes(), s.base_timestamp(), s.max_timestamp(), s.last_offset_delta(), s.record_count()),
                "{name}: the header's own fields as fetched"
            );
            assert_eq!(
                (t.producer_id(), t.producer_epoch(), t.base_sequence()),
                (producer_id, producer_epoch, sequence),
                "{name}: the target producer's fields"
            );
            assert_eq!(t.base_offset(), a.base_offset, "{name}: the append answered where the batch is");
            sequence += t.last_offset_delta() + 1;
        }

        // What a consumer reads from both is the same, the timestamps of 0 included.
        // Keys, values, headers and timestamps: everything but the offsets.
        let read = |bootstrap: &str, topic: &str| -> Vec<Rec> {
            read_all(bootstrap, topic, true)[&p].iter().map(|(_, r)| r.clone()).collect()
        };
        let (from, to) = (read(&a, &source), read(&b, &target));
        assert_eq!(from.len(), 1_200 + 60, "{name}: every record read from the source");
        assert_eq!(to, from, "{name}: the target reads as the source");
        assert_eq!(to.iter().filter(|r| r.timestamp == 0).count(), 3, "{name}: the three timestamps of 0 kept");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fetch_session_answers_only_partitions_with_news_and_starts_over_when_the_broker_lost_it() {
    let a = cluster(1);
    let topic = unique("session");
    let partitions = 40;
    create_topic(&a, &topic, partitions, &[]).await;
    produce(&a, &topic, &(0..400).map(|i| Rec::simple(i % partitions, &format!("v{i}"))).collect::<Vec<_>>()).await;
    let options = ClientOptions::plaintext("wire-session-test", Duration::from_secs(10));
    let mut cluster = Cluster::connect(&a, options.clone()).await.unwrap();
    cluster.refresh(&[&topic]).await.unwrap();
    let broker = cluster.leader(&topic, 0).unwrap().broker;
    let mut next: BTreeMap<i32, i64> = (0..partitions).map(|p| (p, 0)).collect();
    let fetch = async |cluster: &mut Cluster, next: &mut BTreeMap<i32, i64>, wait_ms: u64| {
        let at: Vec<FetchAt> = next
            .iter()
            .map(|(p, o)| FetchAt {
                topic: topic.clone(),
                topic_id: Default::default(),
                partition: *p,
                offset: *o,
                last_fetched_epoch: -1,
            })
            .collect();
        let fetched = cluster.fetch(&at, Duration::from_millis(wait_ms), 1 << 20).await.expect("fetch").fetched;
        for f in &fetched {
            assert_eq!(f.error, None, "{topic}/{}", f.partition);
            if let Some(last) = f.batches.last() {
                next.insert(f.partition, last.last_offset() + 1);
            }
        }
        fetched
    };

    // The first fetch is full, opening the session: every partition answers.
    let first = fetch(&mut cluster, &mut next, 500).await;
    assert_eq!(first.len(), partitions as usize, "a full fetch answers every partition");
    assert!(cluster.session(broker).is_some(), "the broker opened a session");
    let records =
        |fetched: &[Fetched]| -> i32 { fetched.iter().flat_map(|f| &f.batches).map(|b| b.record_count()).sum() };
    let mut read = records(&first);
    while read < 400 {
        read += records(&fetch(&mut cluster, &mut next, 500).await);
    }
    assert_eq!(read, 400, "every record read once");

    // Idle: the partitions' offsets moved to the end and nothing is new, so nothing answers.
    fetch(&mut cluster, &mut next, 100).await;
    let idle = fetch(&mut cluster, &mut next, 100).await;
    assert!(
        idle.is_empty(),
        "an idle incremental fetch answers no partition: {:?}",
        idle.iter().map(|f| f.partition).collect::<Vec<_>>()
    );

    // News on one partition: only it answers, with its records.
    produce(&a, &topic, &(0..5).map(|i| Rec::simple(7, &format!("late{i}"))).collect::<Vec<_>>()).await;
    let news = fetch(&mut cluster, &mut next, 2_000).await;
    assert_eq!(news.iter().map(|f| f.partition).collect::<Vec<_>>(), [7], "only the partition with news answers");
    assert_eq!(records(&news), 5);

    // Another client takes the session's next epoch, as when an answer was lost: the broker
    // refuses the epoch this client sends, which answers nothing and starts over with a full fetch.
    let (id, epoch) = cluster.session(broker).unwrap();
    let thief = strait_wire::Connection::open(&a, &options).await.unwrap();
    let stolen = kafka_protocol::messages::FetchRequest::default()
        .with_max_wait_ms(0)
        .with_session_id(id)
        .with_session_epoch(epoch)
        .with_isolation_level(1);
    // At the session's version: a session opened by topic ids (Fetch v13) refuses one by names.
    let answer = thief.call(&stolen, 13).await.unwrap();
    assert_eq!((answer.error_code, answer.session_id), (0, id), "the other client's fetch took the epoch");
    let refused = fetch(&mut cluster, &mut next, 100).await;
    assert!(refused.is_empty() && cluster.session(broker).is_none(), "the refused epoch reset the session");
    let full = fetch(&mut cluster, &mut next, 100).await;
    assert_eq!(full.len(), partitions as usize, "the fetch after is full again");
    assert!(
        records(&full) == 0 && cluster.session(broker).is_some_and(|(new, _)| new != id),
        "a new session, nothing read twice"
    );
}
