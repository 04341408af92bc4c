//! `raw-pipe [--headers] [-c KEY=VALUE]... [-p KEY=VALUE]... SOURCE TARGET PREFIX TOPIC...`: the
//! benchmark's ceiling. Reads every partition of the topics from the beginning and produces each
//! record to the same partition of `PREFIX<topic>` on the target: no renaming policy, no offset
//! syncs, no positions, no metrics. Runs until killed.
//!
//! An independent baseline: rdkafka's own loop (`BaseConsumer::poll`, one record per call, and a
//! `BaseProducer` polled by the same loop), and nothing of Strait's code. `-c` and `-p` set
//! librdkafka properties of the consumer and producer over the pipe's defaults: the benchmark
//! passes Strait's own settings by value for `raw-pipe+header`, so it asks of librdkafka what
//! Strait asks. `--headers` reads each record's headers and writes them on with a 22-byte
//! provenance header added, as any replicator must (and Strait's loop guard does); without it
//! headers are dropped, and librdkafka's cost of parsing them (an allocation even for a record
//! without any) is skipped. The allocator is jemalloc, as Strait's; the benchmark gives it
//! Strait's options through `MALLOC_CONF`.

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord};
use rdkafka::{Offset, TopicPartitionList};

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const CONSUMER: &[(&str, &str)] = &[
    ("group.id", "raw-pipe"),
    ("enable.auto.commit", "false"),
    ("fetch.wait.max.ms", "100"),
    ("queued.max.messages.kbytes", "65536"),
];

const PRODUCER: &[(&str, &str)] = &[
    ("enable.idempotence", "true"),
    ("acks", "all"),
    ("linger.ms", "5"),
    ("batch.size", "1000000"),
    ("queue.buffering.max.kbytes", "131072"),
];

/// The provenance header written with `--headers`: a loop guard's name and a cluster id's size.
const PROVENANCE: (&str, &[u8]) = ("strait.provenance", b"Fq1lVdAjQ5-0sbP-XmWQrA");

const USAGE: &str = "usage: raw-pipe [--headers] [-c KEY=VALUE]... [-p KEY=VALUE]... SOURCE TARGET PREFIX TOPIC...";

/// What the command line asks.
struct Args {
    headers: bool,
    consumer: ClientConfig,
    producer: ClientConfig,
    prefix: String,
    topics: Vec<String>,
}

fn parse() -> Result<Args, String> {
    let (mut consumer, mut producer) = (ClientConfig::new(), ClientConfig::new());
    for (k, v) in CONSUMER {
        consumer.set(*k, *v);
    }
    for (k, v) in PRODUCER {
        producer.set(*k, *v);
    }
    let (mut headers, mut rest) = (false, Vec::new());
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let config = match arg.as_str() {
            "--headers" => {
                headers = true;
                continue;
            }
            "-c" => &mut consumer,
            "-p" => &mut producer,
            _ => {
                rest.push(arg);
                continue;
            }
        };
        let setting = args.next().ok_or(format!("{arg} needs KEY=VALUE"))?;
        let (k, v) = setting.split_once('=').ok_or(format!("{arg} {setting}: not KEY=VALUE"))?;
        config.set(k, v);
    }
    let [source, target, prefix, topics @ ..] = &rest[..] else { return Err(USAGE.into()) };
    if topics.is_empty() {
        return Err(USAGE.into());
    }
    consumer.set("bootstrap.servers", source);
    producer.set("bootstrap.servers", target);
    Ok(Args { headers, consumer, producer, prefix: prefix.clone(), topics: topics.to_vec() })
}

fn main() {
    let args = parse().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    });
    let consumer: BaseConsumer = args.consumer.create().expect("consumer");
    let producer: BaseProducer = args.producer.create().expect("producer");
    let md = consumer.fetch_metadata(None, Duration::from_secs(10)).expect("metadata");
    let mut tpl = TopicPartitionList::new();
    for t in md.topics().iter().filter(|t| args.topics.iter().any(|n| n == t.name())) {
        for p in t.partitions() {
            tpl.add_partition_offset(t.name(), p.id(), Offset::Beginning).expect("assign");
        }
    }
    consumer.assign(&tpl).expect("assign");
    loop {
        // Delivery reports served between records, as rdkafka's examples do.
        producer.poll(Duration::ZERO);
        let Some(m) = consumer.poll(Duration::from_millis(100)) else { continue };
        let m = m.expect("consume");
        let topic = format!("{}{}", args.prefix, m.topic());
        let mut record = BaseRecord::to(&topic).partition(m.partition());
        if let Some(k) = m.key() {
            record = record.key(k);
        }
        if let Some(v) = m.payload() {
            record = record.payload(v);
        }
        if let Some(ts) = m.timestamp().to_millis() {
            record = record.timestamp(ts);
        }
        if args.headers {
            let source = m.headers();
            let count = source.map_or(0, |h| h.count());
            let mut headers = OwnedHeaders::new_with_capacity(count + 1);
            for h in source.iter().flat_map(|h| h.iter()) {
                headers = headers.insert(Header { key: h.key, value: h.value });
            }
            let (key, value) = PROVENANCE;
            record = record.headers(headers.insert(Header { key, value: Some(value) }));
        }
        send(&producer, record);
    }
}

/// Produces `record`, serving delivery reports while librdkafka's queue is full. Panics on any
/// other error.
fn send(producer: &BaseProducer, mut record: BaseRecord<'_, [u8], [u8]>) {
    loop {
        match producer.send(record) {
            Ok(()) => return,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                producer.poll(Duration::from_millis(1));
            }
            Err((e, _)) => panic!("produce failed: {e}"),
        }
    }
}
