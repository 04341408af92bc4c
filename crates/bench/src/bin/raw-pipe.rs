//! `raw-pipe SOURCE TARGET PREFIX TOPIC...`: the benchmark's ceiling. Reads every partition of
//! the topics from the beginning and produces each record to the same partition of
//! `PREFIX<topic>` on the target, with the same producer settings as Strait but no renaming
//! policy, no offset syncs, no positions, no headers added. Runs until killed.

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        eprintln!("usage: raw-pipe SOURCE TARGET PREFIX TOPIC...");
        std::process::exit(2);
    }
    let (source, target, prefix, topics) = (&args[0], &args[1], &args[2], &args[3..]);
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", source)
        .set("group.id", "raw-pipe")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100")
        .set("queued.max.messages.kbytes", "65536")
        .create()
        .expect("consumer");
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", target)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("batch.size", "1000000")
        .set("queue.buffering.max.kbytes", "131072")
        .create()
        .expect("producer");
    let md = consumer.fetch_metadata(None, Duration::from_secs(10)).expect("metadata");
    let mut tpl = TopicPartitionList::new();
    for t in md.topics().iter().filter(|t| topics.iter().any(|n| n == t.name())) {
        for p in t.partitions() {
            tpl.add_partition_offset(t.name(), p.id(), Offset::Beginning).expect("assign");
        }
    }
    consumer.assign(&tpl).expect("assign");
    loop {
        let Some(m) = consumer.poll(Duration::from_millis(100)) else { continue };
        let m = m.expect("consume");
        let topic = format!("{prefix}{}", m.topic());
        let mut record = BaseRecord::<[u8], [u8]>::to(&topic).partition(m.partition());
        if let Some(k) = m.key() {
            record = record.key(k);
        }
        if let Some(v) = m.payload() {
            record = record.payload(v);
        }
        if let Some(ts) = m.timestamp().to_millis() {
            record = record.timestamp(ts);
        }
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err((e, _)) => panic!("produce failed: {e}"),
            }
        }
    }
}
