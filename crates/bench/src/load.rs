//! Load generation and target inspection: topics, preloading, a fixed-rate producer, counts
//! per partition, and end-to-end latencies.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Message, Timestamp};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};
use strait_wire::{ClientOptions, Connection};

/// Bytes on disk of `topics` on the cluster at `bootstrap`, summed over their partitions and log
/// dirs ([`Connection::partition_sizes`]). Each address of `bootstrap` is asked: the bench's
/// clusters are single brokers.
pub fn bytes_on_disk(bootstrap: &str, topics: &[String]) -> i64 {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
    runtime.block_on(async {
        let options = ClientOptions::plaintext("strait-bench", Duration::from_secs(30));
        let mut total = 0;
        for addr in bootstrap.split(',') {
            let conn = Connection::open(addr, &options).await.expect("a connection for DescribeLogDirs");
            total += conn.partition_sizes(&topics).await.expect("DescribeLogDirs").values().sum::<i64>();
        }
        total
    })
}

/// Record size used by every workload (bytes of value).
pub const RECORD_BYTES: usize = 512;

/// Deletes `topics` on `bootstrap` (a run's copies, so a full run does not fill the disk).
pub fn delete_topics(bootstrap: &str, topics: &[String]) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create().expect("admin");
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    for r in futures::executor::block_on(admin.delete_topics(&names, &AdminOptions::new())).expect("delete topics") {
        if let Err((t, e)) = r {
            eprintln!("could not delete {t}: {e}");
        }
    }
}

/// Creates `topic` with `partitions` and `configs` on `bootstrap`.
pub fn create_topic(bootstrap: &str, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create().expect("admin");
    let mut t = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (k, v) in configs {
        t = t.set(k, v);
    }
    for r in futures::executor::block_on(admin.create_topics([&t], &AdminOptions::new())).expect("create topics") {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((t, e)) => panic!("create {t}: {e}"),
        }
    }
}

fn producer(bootstrap: &str, compression: &str) -> ThreadedProducer<DefaultProducerContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "10")
        .set("batch.size", "1000000")
        .set("compression.type", compression)
        .set("queue.buffering.max.kbytes", "262144")
        .create()
        .expect("producer")
}

fn send(p: &ThreadedProducer<DefaultProducerContext>, mut record: BaseRecord<'_, [u8], [u8]>) {
    loop {
        match p.send(record) {
            Ok(()) => return,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                std::thread::sleep(Duration::from_millis(2));
            }
            Err((e, _)) => panic!("preload produce failed: {e}"),
        }
    }
}

/// A record value of [`RECORD_BYTES`]: half pseudo-random bytes, half repeated text, so it
/// compresses about 2:1 like typical event data (a constant value would compress 50:1).
fn value(i: usize, buf: &mut [u8]) {
    let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for (j, b) in buf.iter_mut().enumerate() {
        if j < RECORD_BYTES / 2 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        } else {
            const TEXT: &[u8] = b"{\"event\":\"page_view\",\"region\":\"eu-west\"} ";
            *b = TEXT[j % TEXT.len()];
        }
    }
}

/// Fills `topics` (round-robin over partitions) with `records` records of [`RECORD_BYTES`].
pub fn preload(bootstrap: &str, topics: &[String], partitions: i32, records: usize, compression: &str) {
    let p = producer(bootstrap, compression);
    let mut buf = vec![0u8; RECORD_BYTES];
    for i in 0..records {
        value(i, &mut buf);
        let value = &buf[..];
        let topic = &topics[i % topics.len()];
        let key = (i as u64).to_be_bytes();
        let part = ((i / topics.len()) % partitions as usize) as i32;
        send(&p, BaseRecord::to(topic).partition(part).key(&key[..]).payload(value));
    }
    p.flush(Duration::from_secs(300)).expect("preload flush");
}

/// Record count per (topic, partition): high minus low watermark. Missing topics count 0.
/// Asked in one ListOffsets per broker ([`strait::kafka::watermarks`]): at 5,000 partitions,
/// two requests per partition every 100 ms loaded the broker under test. While a partition has no
/// leader yet (a topic just made) that answer fails, and the partitions are asked one by one.
pub fn counts(consumer: &BaseConsumer, topics: &[String]) -> BTreeMap<(String, i32), i64> {
    let mut out = BTreeMap::new();
    let Ok(md) = consumer.fetch_metadata(None, Duration::from_secs(10)) else { return out };
    let partitions: Vec<(&str, i32)> = md
        .topics()
        .iter()
        .filter(|t| topics.iter().any(|n| n == t.name()))
        .flat_map(|t| t.partitions().iter().map(move |p| (t.name(), p.id())))
        .collect();
    let marks = strait::kafka::watermarks(consumer, partitions.iter().copied(), Duration::from_secs(10));
    for (topic, partition) in partitions {
        let marked = match &marks {
            Ok(marks) => marks.get(topic, partition),
            Err(_) => consumer.fetch_watermarks(topic, partition, Duration::from_secs(10)),
        };
        if let Ok((lo, hi)) = marked {
            out.insert((topic.to_string(), partition), hi - lo);
        }
    }
    out
}

/// A consumer for metadata and watermarks.
pub fn inspector(bootstrap: &str) -> BaseConsumer {
    ClientConfig::new().set("bootstrap.servers", bootstrap).set("group.id", "strait-bench").create().expect("consumer")
}

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Produces `rate` records/s for `duration` to `topic`, each value starting with its send time
/// (ms, big-endian). Returns how many were sent.
pub fn produce_at_rate(bootstrap: &str, topic: &str, rate: u64, duration: Duration) -> usize {
    let p = producer(bootstrap, "none");
    let total = (rate as f64 * duration.as_secs_f64()) as usize;
    let start = Instant::now();
    let mut value = vec![b'x'; RECORD_BYTES];
    for i in 0..total {
        let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        value[..8].copy_from_slice(&now_ms().to_be_bytes());
        send(&p, BaseRecord::to(topic).payload(&value[..]));
    }
    p.flush(Duration::from_secs(60)).expect("flush");
    total
}

/// Every record of `topic`: (send time in its value, its LogAppendTime on the target minus that
/// send time), in ms.
pub fn latencies(bootstrap: &str, topic: &str, expected: usize) -> Vec<(i64, i64)> {
    let c = inspector(bootstrap);
    let md = c.fetch_metadata(Some(topic), Duration::from_secs(10)).expect("metadata");
    let mut tpl = TopicPartitionList::new();
    for p in md.topics()[0].partitions() {
        tpl.add_partition_offset(topic, p.id(), Offset::Beginning).expect("assign");
    }
    c.assign(&tpl).expect("assign");
    let mut out = Vec::with_capacity(expected);
    let deadline = Instant::now() + Duration::from_secs(120);
    while out.len() < expected && Instant::now() < deadline {
        let Some(Ok(m)) = c.poll(Duration::from_millis(500)) else { continue };
        if let (Timestamp::LogAppendTime(t), Some(v)) = (m.timestamp(), m.payload()) {
            if v.len() >= 8 {
                let sent = i64::from_be_bytes(v[..8].try_into().expect("8 bytes"));
                out.push((sent, t - sent));
            }
        }
    }
    out
}

/// Tails `topic` (`read_committed`) from its start until `expected` records arrived or
/// `timeout` passed, in a thread; the join handle gives each record's send time (in its value)
/// and its receive time minus that send time (ms). Start it before producing.
pub fn visible_latencies(
    bootstrap: &str,
    topic: &str,
    expected: usize,
    timeout: Duration,
) -> std::thread::JoinHandle<Vec<(i64, i64)>> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "strait-bench-tail")
        .set("isolation.level", "read_committed")
        .set("fetch.wait.max.ms", "10")
        .create()
        .expect("consumer");
    let topic = topic.to_string();
    std::thread::spawn(move || {
        let md = c.fetch_metadata(Some(&topic), Duration::from_secs(10)).expect("metadata");
        let mut tpl = TopicPartitionList::new();
        for p in md.topics()[0].partitions() {
            tpl.add_partition_offset(&topic, p.id(), Offset::Beginning).expect("assign");
        }
        c.assign(&tpl).expect("assign");
        let mut out = Vec::with_capacity(expected);
        let deadline = Instant::now() + timeout;
        while out.len() < expected && Instant::now() < deadline {
            let Some(Ok(m)) = c.poll(Duration::from_millis(100)) else { continue };
            if let Some(v) = m.payload().filter(|v| v.len() >= 8) {
                let sent = i64::from_be_bytes(v[..8].try_into().expect("8 bytes"));
                out.push((sent, now_ms() - sent));
            }
        }
        out
    })
}

/// Records a Strait flow has committed per (source topic, partition): the `next_offset` of its
/// newest position in `strait-positions.internal`, read `read_committed`. In exactly-once mode
/// the target's watermarks also count transaction markers, so completion is read here instead.
pub fn committed_positions(bootstrap: &str, flow: &str) -> BTreeMap<(String, i32), i64> {
    const TOPIC: &str = "strait-positions.internal";
    let mut out = BTreeMap::new();
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "strait-bench")
        .set("isolation.level", "read_committed")
        .create()
        .expect("consumer");
    let Ok((_, high)) = consumer.fetch_watermarks(TOPIC, 0, Duration::from_secs(10)) else { return out };
    let mut tpl = TopicPartitionList::new();
    if tpl.add_partition_offset(TOPIC, 0, Offset::Beginning).is_err() || consumer.assign(&tpl).is_err() {
        return out;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let parse = |b: Option<&[u8]>| b.and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok());
                if let (Some(k), Some(v)) = (parse(m.key()), parse(m.payload())) {
                    if k["flow"] == flow {
                        if let (Some(t), Some(p), Some(n)) =
                            (k["topic"].as_str(), k["partition"].as_i64(), v["next_offset"].as_i64())
                        {
                            out.insert((t.to_string(), p as i32), n);
                        }
                    }
                }
            }
            Some(Err(_)) => break,
            // Past the last record (or its commit marker): done.
            None => {
                let at = consumer.position().ok().and_then(|tpl| tpl.find_partition(TOPIC, 0).map(|e| e.offset()));
                if matches!(at, Some(Offset::Offset(o)) if o >= high) {
                    break;
                }
            }
        }
    }
    out
}

/// Counts the records of some target topics as a `read_committed` consumer sees them, tailing
/// from their start: for replicators whose transaction markers also count in the watermarks and
/// that keep no positions Strait could read (MirrorMaker 2 in exactly-once mode).
pub struct CommittedCounter {
    consumer: BaseConsumer,
    counts: BTreeMap<(String, i32), i64>,
}

impl CommittedCounter {
    /// Tails every partition of `topics` (which must exist) on `bootstrap`.
    pub fn new(bootstrap: &str, topics: &[String]) -> Self {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", "strait-bench-count")
            .set("isolation.level", "read_committed")
            .create()
            .expect("consumer");
        let mut tpl = TopicPartitionList::new();
        for (topic, partition) in counts(&consumer, topics).into_keys() {
            tpl.add_partition_offset(&topic, partition, Offset::Beginning).expect("assign");
        }
        consumer.assign(&tpl).expect("assign");
        Self { consumer, counts: BTreeMap::new() }
    }

    /// Reads what arrived for up to `time`; returns the counts so far.
    pub fn poll(&mut self, time: Duration) -> &BTreeMap<(String, i32), i64> {
        let until = Instant::now() + time;
        while Instant::now() < until {
            match self.consumer.poll(Duration::from_millis(20)) {
                Some(Ok(m)) => *self.counts.entry((m.topic().to_string(), m.partition())).or_default() += 1,
                _ => break,
            }
        }
        &self.counts
    }
}
