//! `raw-pipe [--as-strait] SOURCE TARGET PREFIX TOPIC...`: the benchmark's ceiling. Reads every
//! partition of the topics from the beginning and produces each record to the same partition of
//! `PREFIX<topic>` on the target: no renaming policy, no offset syncs, no positions, no metrics.
//! Runs until killed.
//!
//! Plain, it has the producer settings Strait's records are produced with and a large prefetch.
//! With `--as-strait` it asks of librdkafka exactly what Strait asks: Strait's consumer and
//! producer settings (bounded prefetch, `read_committed`, gap-less idempotence); it reads in
//! batches through Strait's [`strait::consume::SourceReader`], and reads each record's headers
//! and writes them on with the header Strait's loop guard adds (`strait.provenance`, a 22-byte
//! cluster id), built the same way. The plain pipe is rdkafka's own loop (`BaseConsumer::poll`, one
//! record per call) and drops headers, which no replicator may do, and skips librdkafka's cost of
//! reading them: it parses them on first access, an allocation even for a record without any. The
//! gap between the `--as-strait` pipe and Strait is Strait's own work.

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext};
use rdkafka::{Offset, TopicPartitionList};
use strait::client_log::{ClientLog, LoggedConsumer};
use strait::consume::SourceReader;
use strait::producer::PolledProducer;

// The allocator Strait runs with, so the pipe stays the floor of the same process setup.
strait::process_allocator!();

const CONSUMER: &[(&str, &str)] =
    &[("enable.auto.commit", "false"), ("fetch.wait.max.ms", "100"), ("queued.max.messages.kbytes", "65536")];

const PRODUCER: &[(&str, &str)] = &[
    ("enable.idempotence", "true"),
    ("acks", "all"),
    ("linger.ms", "5"),
    ("batch.size", "1000000"),
    ("queue.buffering.max.kbytes", "131072"),
];

/// librdkafka settings, as lists applied in order.
type Settings<'a> = &'a [&'a [(&'a str, &'a str)]];

fn config(bootstrap: &str, settings: Settings<'_>) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (k, v) in settings.iter().copied().flatten() {
        config.set(*k, *v);
    }
    config
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let as_strait = args.first().is_some_and(|a| a == "--as-strait");
    if as_strait {
        args.remove(0);
    }
    if args.len() < 4 {
        eprintln!("usage: raw-pipe [--as-strait] SOURCE TARGET PREFIX TOPIC...");
        std::process::exit(2);
    }
    let (source, target, prefix, topics) = (&args[0], &args[1], &args[2], &args[3..]);
    // Strait's at-least-once record producer settings beyond `strait::sink`'s own lists: the
    // producer queue of a flow with one slot.
    let queue_kbytes = strait::sink::PRODUCER_QUEUE_KBYTES.to_string();
    let queue_as_strait = [("queue.buffering.max.kbytes", queue_kbytes.as_str())];
    let (consumer, producer): (Settings, Settings) = if as_strait {
        (
            &[strait::source::CONSUMER_SETTINGS],
            &[strait::sink::PRODUCER_SETTINGS, strait::sink::AT_LEAST_ONCE_SETTINGS, &queue_as_strait],
        )
    } else {
        (&[CONSUMER], &[PRODUCER])
    };
    // Strait's consumer context (its log forwarding), which `SourceReader` takes.
    let consumer: LoggedConsumer =
        config(source, consumer).set("group.id", "raw-pipe").create_with_context(ClientLog).expect("consumer");
    // Strait's producer wrapper: delivery reports served without `ThreadedProducer`'s busy wait.
    let producer = PolledProducer::new(&config(target, producer), DefaultProducerContext).expect("producer");
    let md = consumer.fetch_metadata(None, Duration::from_secs(10)).expect("metadata");
    let mut tpl = TopicPartitionList::new();
    for t in md.topics().iter().filter(|t| topics.iter().any(|n| n == t.name())) {
        for p in t.partitions() {
            tpl.add_partition_offset(t.name(), p.id(), Offset::Beginning).expect("assign");
        }
    }
    consumer.assign(&tpl).expect("assign");
    if as_strait {
        as_strait_loop(&SourceReader::new(consumer).expect("reader"), &producer, prefix);
    }
    loop {
        let Some(m) = consumer.poll(Duration::from_millis(100)) else { continue };
        let m = m.expect("consume");
        let topic = format!("{prefix}{}", m.topic());
        send(&producer, record_to(&topic, m.partition(), m.key(), m.payload(), m.timestamp().to_millis()));
    }
}

/// The `--as-strait` loop: Strait's batch reads, each record's headers read and written on with
/// the loop guard's.
fn as_strait_loop(reader: &SourceReader, producer: &PolledProducer<DefaultProducerContext>, prefix: &str) -> ! {
    let provenance: &[u8] = b"Fq1lVdAjQ5-0sbP-XmWQrA";
    let mut read = Vec::new();
    loop {
        for e in reader.events() {
            eprintln!("consumer error: {e}");
        }
        reader.read(usize::MAX, Duration::from_millis(100), &mut read);
        for m in read.drain(..) {
            let m = m.expect("consume");
            let topic = format!("{prefix}{}", m.topic());
            // As Strait's source and sink do: copied out, then written on with the loop guard's.
            let mut source = Vec::new();
            m.for_each_header(|key, value| source.push((key.to_string(), value.map(<[u8]>::to_vec))));
            let mut headers = OwnedHeaders::new_with_capacity(source.len() + 1);
            for (key, value) in &source {
                headers = headers.insert(Header { key, value: value.as_deref() });
            }
            let headers = headers.insert(Header { key: "strait.provenance", value: Some(provenance) });
            send(producer, record_to(&topic, m.partition(), m.key(), m.payload(), m.timestamp_ms()).headers(headers));
        }
    }
}

/// The record to produce to `partition` of `topic`; `None` leaves key, value or timestamp unset.
fn record_to<'a>(
    topic: &'a str,
    partition: i32,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    timestamp_ms: Option<i64>,
) -> BaseRecord<'a, [u8], [u8]> {
    let mut record = BaseRecord::to(topic).partition(partition);
    if let Some(k) = key {
        record = record.key(k);
    }
    if let Some(v) = value {
        record = record.payload(v);
    }
    if let Some(ts) = timestamp_ms {
        record = record.timestamp(ts);
    }
    record
}

/// Produces `record`, sleeping while librdkafka's queue is full. Panics on any other error.
fn send(producer: &PolledProducer<DefaultProducerContext>, mut record: BaseRecord<'_, [u8], [u8]>) {
    loop {
        match producer.send(record) {
            Ok(()) => return,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err((e, _)) => panic!("produce failed: {e}"),
        }
    }
}
