//! `copy = "batches"` (issue 27) end to end through `strait run`: the target stores the
//! source's batches byte for byte (but for the producer's fields, CRC and offsets) in every
//! codec, timestamps of 0 kept; the offset syncs map a source record to the same record on the
//! target; a SIGKILL mid-stream loses nothing and writes again only the batches after the last
//! saved position; source transactions are copied as a `read_committed` consumer reads them.
//! The target topic's limits: `batches_limits.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer as _, ThreadedProducer};
use rdkafka::{Message, Offset, TopicPartitionList};
use strait_mm2::OffsetSync;
use strait_wire::{Batch, ClientOptions, Cluster, Connection, Outgoing, Producer};

use crate::support::*;
use crate::wire::{encoded_batch, fetch_all, CODECS};

/// Per codec: records and batches written again after a SIGKILL, and the source and target
/// partitions' bytes on disk (the target's without its transaction markers).
type Replays = BTreeMap<&'static str, (usize, usize, (i64, i64))>;

/// The transactional bit of a batch's attributes.
const TRANSACTIONAL: i16 = 1 << 4;

/// Records `range` of partition `p` (codec `name`): keyed, with headers, one of them null.
fn records(p: i32, name: &str, range: std::ops::Range<i32>) -> Vec<Rec> {
    range
        .map(|i| {
            let mut r = Rec::simple(p, &format!("{name}-{i}"));
            r.key = Some(format!("k{i}").into_bytes());
            r.headers = vec![("h".into(), Some(vec![i as u8])), ("null".into(), None)];
            r
        })
        .collect()
}

/// Produces `range` of every partition in its codec, in librdkafka's batches.
async fn produce_all(a: &str, topic: &str, range: std::ops::Range<i32>) {
    for (p, (name, _)) in CODECS.iter().enumerate() {
        let settings = [("compression.type", *name), ("linger.ms", "5"), ("batch.size", "4000")];
        produce_with(a, topic, &records(p as i32, name, range.clone()), &settings).await;
    }
}

/// How `copied` is made of `source` (both in log order): `source` whole, once the `repeated`
/// items at the end of its first `upto` come again (a replay from the last saved position).
/// `None` when it is not of that shape: something lost, reordered or repeated elsewhere.
fn replayed<T: PartialEq>(source: &[T], copied: &[T]) -> Option<usize> {
    if copied.len() < source.len() {
        return None;
    }
    let repeated = copied.len() - source.len();
    // The replay starts where the copy runs into a record it already had.
    let upto = (0..source.len()).find(|&x| copied[x] != source[x]).unwrap_or(source.len());
    (upto >= repeated && copied[..upto] == source[..upto] && copied[upto..] == source[upto - repeated..])
        .then_some(repeated)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batches_flow_stores_the_source_batches_as_they_are_and_a_sigkill_replays_only_unsaved_ones() {
    let (replays, logs) = copy_through_a_sigkill("batches", "", "").await;
    println!("records and batches written again after the SIGKILL, per codec: {replays:?}");
    assert!(logs.contains("flow started"), "{logs}");
}

/// Exactly-once, the batches, offset syncs and positions of a commit are one transaction of
/// the batch producer: through the same SIGKILL, a `read_committed` reader of the target finds
/// every source record and every source batch exactly once (at-least-once replays the batches
/// after the last saved position), each target partition takes its source's bytes on disk
/// within 2 %, and the restart took the slot's transactional id over before reading positions.
/// Its client keeps 3 connections to each broker (issue 43), each partition on one of them.
#[tokio::test(flavor = "multi_thread")]
async fn an_exactly_once_batches_flow_writes_nothing_twice_through_a_sigkill() {
    let three = "connections_per_broker = 3\n";
    let (replays, logs) = copy_through_a_sigkill("batcheos", "delivery = \"exactly_once\"", three).await;
    println!("records and batches written again after the SIGKILL, per codec: {replays:?}");
    assert!(replays.values().all(|r| (r.0, r.1) == (0, 0)), "exactly once: nothing written twice, {replays:?}");
    // The same batches take the same bytes: nothing else is on the target's disk but the markers.
    for (codec, (_, _, (source, target))) in &replays {
        let ratio = *target as f64 / *source as f64;
        assert!(
            (0.98..=1.02).contains(&ratio),
            "{codec}: the target takes {target} bytes on disk, the source {source}"
        );
    }
    assert!(logs.contains("batch transactions initialised"), "{logs}");
    assert!(logs.contains("batch path client connected") && logs.contains("connections_per_broker=3"), "{logs}");
}

/// What a batch stores apart from its producer's fields, CRC and offsets: attributes (the
/// transactional bit, a producer field too, left out), first and last timestamp, record count,
/// and the records' bytes.
type Stored = (i16, i64, i64, i32, Vec<u8>);

fn stored(batches: &[Batch]) -> Vec<Stored> {
    batches
        .iter()
        .map(|b| {
            (
                b.attributes() & !TRANSACTIONAL,
                b.base_timestamp(),
                b.max_timestamp(),
                b.record_count(),
                b.bytes()[61..].to_vec(),
            )
        })
        .collect()
}

/// Partition `p`'s data batches of `fetched`, as a `read_committed` reader keeps them.
fn committed(fetched: &BTreeMap<i32, Vec<strait_wire::Fetched>>, p: i32) -> Vec<Batch> {
    fetched[&p].iter().flat_map(|f| f.committed()).cloned().collect()
}

/// Partition `p`'s records of `all` ([`read_all`]), in log order.
fn records_of(all: &BTreeMap<i32, Vec<(i64, Rec)>>, p: i32) -> Vec<Rec> {
    all[&p].iter().map(|(_, r)| r.clone()).collect()
}

/// Every fetch of `topic`'s `partitions` from `bootstrap`, to the last stable offset.
async fn fetched(bootstrap: &str, topic: &str, partitions: i32) -> BTreeMap<i32, Vec<strait_wire::Fetched>> {
    let mut cluster =
        Cluster::connect(bootstrap, ClientOptions::plaintext("batches-test", Duration::from_secs(10))).await.unwrap();
    cluster.refresh(&[topic]).await.unwrap();
    fetch_all(&mut cluster, topic, partitions, 1 << 20).await
}

/// A flow switched from records to batches and back at restarts copies each record once. The
/// records flow, slowed by `max_bytes_per_second`, stops between a source batch's records; the
/// batch flow writes that batch anew from the saved position, in its codec, and forwards the
/// batches after it as they are; a records flow after it goes on where the batches ended.
#[tokio::test(flavor = "multi_thread")]
async fn a_flow_switched_between_records_and_batches_at_restarts_copies_each_record_once() {
    let f = TopicFlow::new("batchswitch", 4).await;
    produce_all(&f.a, &f.topic, 0..600).await;
    let settings = "commit_interval_ms = 300\nemit_checkpoints = false";
    // About 150 records a second in reads of about 40: a clean stop saves positions inside batches.
    let records =
        Strait::start(&f.p, &f.config(&format!("copy = \"records\"\n{settings}\nmax_bytes_per_second = 5000")));
    wait_until("some records copied", Duration::from_secs(60), || count(&f.b, &f.remote).unwrap_or(0) >= 300).await;
    let logs = records.logs();
    assert!(records.stop().success(), "{logs}");
    // The target started empty, so each partition's end is where the records flow stopped.
    let target = read_all(&f.b, &f.remote, false);
    let positions: Vec<i64> = (0..4).map(|p| target.get(&p).map_or(0, |r| r.len() as i64)).collect();
    let source_batches = fetched(&f.a, &f.topic, 4).await;
    let inside: BTreeMap<i32, Batch> = (0..4)
        .filter_map(|p| {
            let at = positions[p as usize];
            committed(&source_batches, p)
                .into_iter()
                .find(|b| b.base_offset() < at && at <= b.last_offset())
                .map(|b| (p, b))
        })
        .collect();
    println!("records flow stopped at {positions:?}, inside a source batch on partitions {:?}", inside.keys());
    assert!(!inside.is_empty(), "the records flow stopped inside a source batch: positions {positions:?}");

    let batches = Strait::start(&f.p, &f.config(&format!("copy = \"batches\"\n{settings}")));
    wait_until("the rest copied as batches", Duration::from_secs(60), || count(&f.b, &f.remote) == Some(4 * 600)).await;
    let logs = batches.logs();
    assert!(batches.stop().success(), "{logs}");
    let target_batches = fetched(&f.b, &f.remote, 4).await;
    for p in 0..4 {
        let at = positions[p as usize];
        // Offsets on the target are the source's: it started empty and nothing was written twice.
        let after = |bs: Vec<Batch>| -> Vec<Batch> { bs.into_iter().filter(|b| b.last_offset() >= at).collect() };
        let (from, to) = (after(committed(&source_batches, p)), after(committed(&target_batches, p)));
        let whole = match inside.get(&p) {
            Some(split) => {
                assert_eq!(to[0].base_offset(), at, "partition {p}: the batch resumed inside starts at the position");
                assert_eq!(i64::from(to[0].record_count()), split.last_offset() - at + 1, "partition {p}: its rest");
                assert_eq!(to[0].compression(), split.compression(), "partition {p}: in its codec");
                1
            }
            None => 0,
        };
        assert_eq!(stored(&to[whole..]), stored(&from[whole..]), "partition {p}: the batches after it as they are");
    }

    produce_all(&f.a, &f.topic, 600..900).await;
    let records = Strait::start(&f.p, &f.config(&format!("copy = \"records\"\n{settings}")));
    wait_until("the new records copied as records", Duration::from_secs(60), || {
        count(&f.b, &f.remote) == Some(4 * 900)
    })
    .await;
    let logs = records.logs();
    assert!(records.stop().success(), "{logs}");
    let (source, target) = (read_all(&f.a, &f.topic, false), read_all(&f.b, &f.remote, false));
    for p in 0..4 {
        assert_eq!(
            records_of(&target, p),
            records_of(&source, p),
            "partition {p}: every record once, keys, values, headers and times"
        );
    }
}

/// A batch flow (`flow_extra` added to its settings, `clusters_extra` to both clusters') over
/// four partitions, one per codec,
/// SIGKILLed while records arrive and started again; checks that the target holds the source's
/// records and batches as they are, but for a replay at the kill, and that every offset sync
/// maps a record to itself. Returns per codec the records and batches written again and the
/// bytes on disk of source and target partition, and the restarted run's logs.
async fn copy_through_a_sigkill(prefix: &str, flow_extra: &str, clusters_extra: &str) -> (Replays, String) {
    let f = TopicFlow::new(prefix, 4).await;
    // Partition p in codec p: librdkafka's batches, then three of kafka-protocol's encoder whose
    // first record is stamped 0 (librdkafka sends 0 as "now"), then librdkafka's again.
    produce_all(&f.a, &f.topic, 0..600).await;
    let mut to_source = Producer::init(
        Cluster::connect(&f.a, ClientOptions::plaintext("batches-test", Duration::from_secs(10))).await.unwrap(),
        Duration::from_secs(60),
    )
    .await
    .expect("a producer id from the source");
    for (p, (name, codec)) in CODECS.iter().enumerate() {
        let encoded: Vec<Outgoing> = (0..3)
            .map(|i| Outgoing {
                topic: f.topic.clone(),
                partition: p as i32,
                batch: encoded_batch(&format!("{name}-enc"), i * 20, 20, *codec, true),
            })
            .collect();
        to_source.produce(&encoded).await.expect("encoded batches produced to the source");
    }
    produce_all(&f.a, &f.topic, 600..1_200).await;

    let config = f
        .config(&format!("copy = \"batches\"\ncommit_interval_ms = 300\nemit_checkpoints = false\n{flow_extra}"))
        .replace("zones = []\n", &format!("zones = []\n{clusters_extra}"));
    let strait = Strait::start(&f.p, &config);
    wait_until("the first records copied", Duration::from_secs(60), || {
        count(&f.b, &f.remote).unwrap_or(0) >= 4 * 1_260
    })
    .await;
    // More arrive while it runs; it is killed in the middle of them.
    let (a, topic) = (f.a.clone(), f.topic.clone());
    let more = tokio::spawn(async move {
        for round in 0..8 {
            produce_all(&a, &topic, 1_200 + round * 300..1_500 + round * 300).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    wait_until("copying the records arriving", Duration::from_secs(60), || {
        count(&f.b, &f.remote).unwrap_or(0) >= 4 * (1_260 + 600)
    })
    .await;
    let first_logs = strait.logs();
    strait.kill();
    more.await.unwrap();
    let strait = Strait::start(&f.p, &config);
    let total = 4 * (1_260 + 2_400);
    wait_until("every record copied after the restart", Duration::from_secs(90), || {
        count(&f.b, &f.remote).unwrap_or(0) >= total
    })
    .await;
    // A commit interval and more, for the restarted copy to settle.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let logs = strait.logs();

    let (source, target) = (read_all(&f.a, &f.topic, true), read_all(&f.b, &f.remote, true));
    let (source_batches, target_batches) = (fetched(&f.a, &f.topic, 4).await, fetched(&f.b, &f.remote, 4).await);
    // Each partition's bytes on disk, source and target (single-broker clusters).
    let options = ClientOptions::plaintext("batches-test", Duration::from_secs(10));
    let size = |bootstrap: String, topic: String| {
        let options = options.clone();
        async move {
            let conn = Connection::open(&bootstrap, &options).await.unwrap();
            let sizes = conn.partition_sizes(&[&topic]).await.unwrap();
            (0..4).map(|p| sizes.get(&(topic.clone(), p)).copied().unwrap_or(0)).collect::<Vec<i64>>()
        }
    };
    let (on_source, on_target) = (size(f.a.clone(), f.topic.clone()).await, size(f.b.clone(), f.remote.clone()).await);
    let disk: BTreeMap<i32, (i64, i64)> = (0..4).map(|p| (p, (on_source[p as usize], on_target[p as usize]))).collect();
    let mut replays = BTreeMap::new();
    for (p, (name, _)) in CODECS.iter().enumerate() {
        let p = p as i32;
        // Keys, values, headers and timestamps (0 included): every record once, and again only
        // a replay of the last batches before the kill.
        let (from, to) = (records_of(&source, p), records_of(&target, p));
        assert_eq!(from.len(), 1_260 + 2_400, "{name}: the source holds what was produced");
        let repeated = replayed(&from, &to).unwrap_or_else(|| {
            panic!("{name}: the target holds {} records, not the source's {} with one replay at the kill; logs: {first_logs}\n{logs}", to.len(), from.len())
        });
        assert!(to.iter().filter(|r| r.timestamp == 0).count() >= 3, "{name}: timestamps of 0 kept");

        // The batches as stored: the same bytes after the producer fields, CRC and offsets.
        let (from, to) = (committed(&source_batches, p), committed(&target_batches, p));
        assert!(from.len() > 20, "{name}: partition {p} has many batches ({})", from.len());
        let batches_repeated = replayed(&stored(&from), &stored(&to)).unwrap_or_else(|| {
            panic!("{name}: the target's {} batches are not the source's {} as they are", to.len(), from.len())
        });
        assert!(to.iter().all(Batch::crc_matches), "{name}: every target batch intact");
        // Exactly-once, the target also holds its transactions' markers (control batches).
        let markers: usize = target_batches[&p]
            .iter()
            .flat_map(|f| f.batches.iter().filter(|b| b.is_control()).map(|b| b.bytes().len()))
            .sum();
        replays.insert(*name, (repeated, batches_repeated, (disk[&p].0, disk[&p].1 - markers as i64)));

        // Each offset sync maps a source record to the same record on the target.
        let at = |all: &BTreeMap<i32, Vec<(i64, Rec)>>, offset: i64| {
            all[&p].iter().find(|(o, _)| *o == offset).map(|(_, r)| r.clone())
        };
        let syncs: Vec<OffsetSync> = read_all(&f.b, &format!("mm2-offset-syncs.{}.internal", f.src), true)
            .remove(&0)
            .unwrap()
            .into_iter()
            .map(|(_, r)| OffsetSync::decode(r.key.as_deref().unwrap(), r.value.as_deref().unwrap()).unwrap())
            .filter(|s| s.topic == f.topic && s.partition == p)
            .collect();
        assert!(!syncs.is_empty(), "{name}: offset syncs written");
        for s in &syncs {
            let (up, down) = (at(&source, s.upstream.0), at(&target, s.downstream.0));
            assert!(
                up.is_some() && up == down,
                "{name}: sync {} -> {} maps a record to itself",
                s.upstream.0,
                s.downstream.0
            );
        }
    }
    (replays, logs)
}

/// Source transactions through a batch flow: the committed ones are copied, the aborted one
/// never is (its batches are dropped, not just hidden by markers: the target holds no marker),
/// and records after an open transaction wait until it commits, as a `read_committed`
/// consumer's would.
#[tokio::test(flavor = "multi_thread")]
async fn a_batches_flow_copies_committed_transactions_only_and_waits_behind_an_open_one() {
    let f = TopicFlow::new("batchtx", 2).await;
    crate::wire::transactions(&f.a, &f.topic);
    let open: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &f.a)
        .set("transactional.id", format!("{}-open", f.topic))
        .set("compression.type", "zstd")
        .create()
        .unwrap();
    open.init_transactions(Duration::from_secs(30)).unwrap();
    open.begin_transaction().unwrap();
    for i in 0..10 {
        let value = format!("open-{i}");
        open.send(BaseRecord::<[u8], [u8]>::to(&f.topic).partition(0).payload(value.as_bytes())).unwrap();
    }
    open.flush(Duration::from_secs(30)).unwrap();
    produce(&f.a, &f.topic, &(0..5).map(|i| Rec::simple(0, &format!("after-{i}"))).collect::<Vec<_>>()).await;

    let strait = Strait::start(&f.p, &f.config("copy = \"batches\"\ncommit_interval_ms = 300"));
    // Two committed transactions of 20 records per partition.
    wait_until("the committed transactions copied", Duration::from_secs(60), || count(&f.b, &f.remote) == Some(80))
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(count(&f.b, &f.remote), Some(80), "nothing past the open transaction: {}", strait.logs());
    open.commit_transaction(Duration::from_secs(30)).unwrap();
    wait_until("the rest copied once it commits", Duration::from_secs(60), || count(&f.b, &f.remote) == Some(95)).await;

    // Read uncommitted: the target holds only what the source committed, in its order.
    let values = |bootstrap: &str, topic: &str, p: i32| -> Vec<Vec<u8>> {
        read_all(bootstrap, topic, false)[&p].iter().filter_map(|(_, r)| r.value.clone()).collect()
    };
    let raw: Vec<Vec<u8>> = fetch_uncommitted(&f.b, &f.remote).await;
    assert!(!raw.iter().any(|v| v.ends_with(b"aborted")), "no aborted record on the target, even uncommitted");
    assert_eq!(raw.len(), 95, "and no control batch: every offset a record");
    for p in 0..2 {
        assert_eq!(values(&f.b, &f.remote, p), values(&f.a, &f.topic, p), "partition {p} reads as the source");
    }
    assert!(strait.stop().success());
}

/// Every record value of `topic` (2 partitions) read `read_uncommitted`.
async fn fetch_uncommitted(bootstrap: &str, topic: &str) -> Vec<Vec<u8>> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "strait-test-uncommitted")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_uncommitted")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    let mut ends = BTreeMap::new();
    for p in 0..2 {
        tpl.add_partition_offset(topic, p, Offset::Beginning).unwrap();
        ends.insert(p, c.fetch_watermarks(topic, p, Duration::from_secs(10)).unwrap().1);
    }
    c.assign(&tpl).unwrap();
    let (mut values, mut seen) = (Vec::new(), BTreeMap::new());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while ends.iter().any(|(p, end)| seen.get(p).copied().unwrap_or(0) < *end) {
        assert!(std::time::Instant::now() < deadline, "{topic} read uncommitted in 30 s");
        if let Some(Ok(m)) = c.poll(Duration::from_millis(200)) {
            seen.insert(m.partition(), m.offset() + 1);
            values.push(m.payload().unwrap_or_default().to_vec());
        }
    }
    values
}

/// A compacted source topic once the log cleaner took records out of its batches: gaps between
/// a batch's offsets, which a broker refuses in a produce (`InvalidRecord`). Such a batch is
/// written anew without them, and the target holds what a consumer of the source reads.
#[tokio::test(flavor = "multi_thread")]
async fn a_compacted_source_topic_is_copied_once_its_batches_have_gaps() {
    let compacted = [
        ("cleanup.policy", "compact"),
        ("segment.ms", "100"),
        ("min.cleanable.dirty.ratio", "0.001"),
        ("min.compaction.lag.ms", "0"),
    ];
    let f = TopicFlow::with_configs("batchcompact", 1, &compacted).await;
    let keyed = |keys: &[usize], tag: &str| -> Vec<Rec> {
        keys.iter()
            .map(|k| {
                let mut r = Rec::simple(0, &format!("{tag}-{k}"));
                r.key = Some(format!("k{k}").into_bytes());
                r
            })
            .collect()
    };
    let one_batch = [("linger.ms", "50"), ("compression.type", "lz4")];
    // Every second key of the first batch comes again in the second: the cleaner keeps the
    // others, with holes between them. Each write after 100 ms rolls the segment before it.
    produce_with(&f.a, &f.topic, &keyed(&(0..10).collect::<Vec<_>>(), "old"), &one_batch).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    produce_with(&f.a, &f.topic, &keyed(&[0, 2, 4, 6, 8], "new"), &one_batch).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    produce(&f.a, &f.topic, &keyed(&[99], "last")).await;
    let mut source =
        Cluster::connect(&f.a, ClientOptions::plaintext("batches-test", Duration::from_secs(10))).await.unwrap();
    source.refresh(&[&f.topic]).await.unwrap();
    let mut gapped = false;
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while !gapped {
        assert!(std::time::Instant::now() < deadline, "the log cleaner compacted {} within 90 s", f.topic);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let fetched = fetch_all(&mut source, &f.topic, 1, 1 << 20).await;
        gapped = fetched[&0].iter().flat_map(|f| f.committed()).any(|b| b.record_count() != b.last_offset_delta() + 1);
    }

    let strait = Strait::start(&f.p, &f.config("copy = \"batches\"\ncommit_interval_ms = 300"));
    wait_until("the compacted topic copied", Duration::from_secs(60), || count(&f.b, &f.remote) == Some(11)).await;
    let recs = |bootstrap: &str, topic: &str| -> Vec<Rec> {
        read_all(bootstrap, topic, false)[&0].iter().map(|(_, r)| r.clone()).collect()
    };
    assert_eq!(recs(&f.b, &f.remote), recs(&f.a, &f.topic), "the target reads as the compacted source");
    assert!(strait.stop().success());
}
