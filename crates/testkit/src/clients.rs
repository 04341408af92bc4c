//! Clients of the clusters `scripts/test` shares between tests, for the tests of every crate: the
//! clusters' addresses, names unique to a test (whose topics are deleted when its thread ends),
//! topics created, records produced and read back with rdkafka.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header as KHeader, Headers, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};

/// Bootstrap of shared cluster `n` (1-based), started by `scripts/test`.
pub fn cluster(n: usize) -> String {
    std::env::var(format!("STRAIT_TEST_BOOTSTRAP_{n}")).unwrap_or_else(|_| {
        panic!(
            "STRAIT_TEST_BOOTSTRAP_{n} is not set: run the broker tests with ./scripts/test, which starts the clusters"
        )
    })
}

/// A name unique to this test run: `prefix-<pid>-<n>`; safe as topic prefix and alias. When the
/// test's thread ends, the topics of the shared clusters named after it are deleted
/// (see `Cleanup`).
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let name = format!("{prefix}{}x{}", std::process::id() % 100_000, N.fetch_add(1, Ordering::SeqCst));
    CLEANUP.with(|c| c.0.borrow_mut().push(name.clone()));
    name
}

thread_local! {
    static CLEANUP: Cleanup = const { Cleanup(std::cell::RefCell::new(Vec::new())) };
}

/// The [`unique`] names a test thread made. Every flow replicates every heartbeats topic (MM2's
/// rule), and each test's aliases are new, so no cycle ever stops the copies: left in place, a
/// test's remote heartbeats topics are copied by every later test, and their number doubles with
/// each test running flows both ways (2,000 topics per shared single broker late in a run, which
/// then runs out of heap). So when the test's thread ends (after its `Strait`s are killed, even
/// when it panics), the topics of the shared clusters (the three-node one too) named `<name>…`
/// (not `<name><digit>…`, another name) are deleted.
struct Cleanup(std::cell::RefCell<Vec<String>>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let names = self.0.take();
        if names.is_empty() {
            return;
        }
        let ours = |topic: &str| {
            names.iter().any(|n| {
                topic.strip_prefix(n.as_str()).is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_digit()))
            })
        };
        let shared = [
            "STRAIT_TEST_BOOTSTRAP_1",
            "STRAIT_TEST_BOOTSTRAP_2",
            "STRAIT_TEST_BOOTSTRAP_3",
            "STRAIT_TEST_THREE_NODE_BOOTSTRAP",
        ];
        for var in shared {
            let Ok(bootstrap) = std::env::var(var) else { continue };
            let c: BaseConsumer = match ClientConfig::new().set("bootstrap.servers", &bootstrap).create() {
                Ok(c) => c,
                Err(_) => continue,
            };
            let Ok(md) = c.fetch_metadata(None, Duration::from_secs(10)) else { continue };
            let topics: Vec<&str> = md.topics().iter().map(|t| t.name()).filter(|t| ours(t)).collect();
            if !topics.is_empty() {
                let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
                let _ = futures::executor::block_on(admin(&bootstrap).delete_topics(&topics, &options));
            }
        }
    }
}

pub fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new().set("bootstrap.servers", bootstrap).create().expect("admin client")
}

pub async fn create_topic(bootstrap: &str, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    let mut t = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (k, v) in configs {
        t = t.set(k, v);
    }
    let r = admin(bootstrap).create_topics([&t], &AdminOptions::new()).await.expect("create topics");
    r[0].as_ref().expect("topic created");
}

pub async fn add_partitions(bootstrap: &str, topic: &str, total: usize) {
    let r = admin(bootstrap)
        .create_partitions([&NewPartitions::new(topic, total)], &AdminOptions::new())
        .await
        .expect("create partitions");
    r[0].as_ref().expect("partitions added");
}

/// A record to produce or as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    pub partition: i32,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: i64,
}

impl Rec {
    pub fn simple(partition: i32, value: &str) -> Self {
        Rec { partition, key: None, value: Some(value.as_bytes().to_vec()), headers: vec![], timestamp: now_ms() }
    }
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

pub fn producer(bootstrap: &str) -> FutureProducer {
    producer_with(bootstrap, &[])
}

/// A producer with `settings` added to the test defaults.
pub fn producer_with(bootstrap: &str, settings: &[(&str, &str)]) -> FutureProducer {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("message.max.bytes", "10000000");
    for (k, v) in settings {
        config.set(*k, *v);
    }
    config.create().expect("producer")
}

/// Produces `records` in order and waits for every ack.
pub async fn produce(bootstrap: &str, topic: &str, records: &[Rec]) {
    produce_with(bootstrap, topic, records, &[]).await
}

/// [`produce`] with producer `settings` (say, a compression codec).
pub async fn produce_with(bootstrap: &str, topic: &str, records: &[Rec], settings: &[(&str, &str)]) {
    let p = producer_with(bootstrap, settings);
    let mut acks = Vec::with_capacity(records.len());
    for r in records {
        let mut hs = OwnedHeaders::new();
        for (k, v) in &r.headers {
            hs = hs.insert(KHeader { key: k, value: v.as_deref() });
        }
        let mut fr = FutureRecord::<[u8], [u8]>::to(topic).partition(r.partition).timestamp(r.timestamp).headers(hs);
        if let Some(k) = &r.key {
            fr = fr.key(k);
        }
        if let Some(v) = &r.value {
            fr = fr.payload(v);
        }
        loop {
            match p.send_result(fr) {
                Ok(a) => {
                    acks.push(a);
                    break;
                }
                Err((_, back)) => {
                    fr = back;
                    p.poll(Duration::from_millis(10));
                }
            }
        }
    }
    for a in acks {
        a.await.expect("ack").expect("produced");
    }
    p.flush(Duration::from_secs(10)).expect("flush");
}

/// Every record of every partition of `topic`, read to the high watermark. Headers named
/// `strait.provenance` are dropped unless `keep_provenance`.
pub fn read_all(bootstrap: &str, topic: &str, keep_provenance: bool) -> BTreeMap<i32, Vec<(i64, Rec)>> {
    read_all_within(bootstrap, topic, keep_provenance, Duration::from_secs(60))
}

/// [`read_all`] with a deadline of `timeout`, for large topics. Reads `read_committed`
/// (librdkafka's default).
pub fn read_all_within(
    bootstrap: &str,
    topic: &str,
    keep_provenance: bool,
    timeout: Duration,
) -> BTreeMap<i32, Vec<(i64, Rec)>> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "strait-test-reader")
        // Never commits: a reader's offsets would make its group one a failover moves (tests
        // that fail over every group of a shared cluster).
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create()
        .unwrap();
    let md = c.fetch_metadata(Some(topic), Duration::from_secs(10)).unwrap();
    let parts = md.topics()[0].partitions().len() as i32;
    let mut out = BTreeMap::new();
    let mut tpl = TopicPartitionList::new();
    let mut highs = BTreeMap::new();
    for p in 0..parts {
        let (_, high) = c.fetch_watermarks(topic, p, Duration::from_secs(10)).unwrap();
        highs.insert(p, high);
        out.insert(p, Vec::new());
        tpl.add_partition_offset(topic, p, Offset::Beginning).unwrap();
    }
    c.assign(&tpl).unwrap();
    let deadline = Instant::now() + timeout;
    loop {
        assert!(Instant::now() < deadline, "reading {topic} timed out");
        match c.poll(Duration::from_millis(300)) {
            Some(m) => {
                let m = m.expect("consume");
                let headers = m
                    .headers()
                    .map(|hs| {
                        hs.iter()
                            .filter(|h| keep_provenance || h.key != "strait.provenance")
                            .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                            .collect()
                    })
                    .unwrap_or_default();
                let rec = Rec {
                    partition: m.partition(),
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec),
                    headers,
                    timestamp: m.timestamp().to_millis().unwrap_or(-1),
                };
                out.get_mut(&m.partition()).unwrap().push((m.offset(), rec));
            }
            // Done when every partition's position reached the high watermark seen at the start
            // (positions move past transaction markers, which are never delivered).
            None => {
                let pos = c.position().unwrap();
                let unreached: Vec<(i32, i64)> = highs
                    .iter()
                    .filter(|(p, h)| {
                        **h != 0 && !matches!(pos.find_partition(topic, **p).map(|e| e.offset()), Some(Offset::Offset(o)) if o >= **h)
                    })
                    .map(|(p, h)| (*p, *h))
                    .collect();
                if unreached.is_empty() {
                    break;
                }
                // A partition emptied from the front (retention, deleted records) never gives a
                // position: say so rather than time out.
                for (p, h) in unreached {
                    let (low, _) = c.fetch_watermarks(topic, p, Duration::from_secs(10)).unwrap();
                    let next = out[&p].last().map_or(0, |(o, _)| o + 1);
                    assert!(low <= next || low < h, "{topic}/{p}: records below {low} deleted before they were read");
                }
            }
        }
    }
    out
}

/// Record count of `topic` (sum of high - low watermarks), or `None` if it does not exist.
pub fn count(bootstrap: &str, topic: &str) -> Option<i64> {
    let c: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    let md = c.fetch_metadata(Some(topic), Duration::from_secs(10)).ok()?;
    let t = md.topics().iter().find(|t| t.name() == topic && t.error().is_none())?;
    let mut n = 0;
    for p in t.partitions() {
        let (lo, hi) = c.fetch_watermarks(topic, p.id(), Duration::from_secs(10)).ok()?;
        n += hi - lo;
    }
    Some(n)
}
