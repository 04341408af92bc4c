//! Sample data for the demo: a few topics with keyed records, and per-topic record counts.

use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

/// Demo topics: (name, partitions, records).
pub const TOPICS: &[(&str, i32, usize)] = &[("orders", 3, 20_000), ("clicks", 6, 50_000), ("customers", 2, 5_000)];

/// Creates the demo topics on `bootstrap` and fills them. Errors: any client error.
pub fn produce(bootstrap: &str) -> Result<(), KafkaError> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let topics: Vec<NewTopic> =
        TOPICS.iter().map(|(t, p, _)| NewTopic::new(t, *p, TopicReplication::Fixed(1))).collect();
    for r in futures::executor::block_on(admin.create_topics(&topics, &AdminOptions::new()))? {
        r.map_err(|(_, code)| KafkaError::AdminOp(code))?;
    }
    let producer: ThreadedProducer<DefaultProducerContext> =
        ClientConfig::new().set("bootstrap.servers", bootstrap).set("linger.ms", "20").create()?;
    for (topic, _, n) in TOPICS {
        for i in 0..*n {
            let key = format!("{topic}-key-{}", i % 1000);
            let value = format!("{{\"topic\":\"{topic}\",\"seq\":{i}}}");
            let mut record = BaseRecord::to(topic).key(&key).payload(&value);
            loop {
                match producer.send(record) {
                    Ok(()) => break,
                    Err((_, back)) => {
                        record = back;
                        producer.poll(Duration::from_millis(10));
                    }
                }
            }
        }
    }
    producer.flush(Duration::from_secs(60))
}

/// Record count (high minus low watermark, summed over partitions) of each demo topic and its
/// `<prefix>`-renamed copy, as `(topic, count or None when absent)`. A topic created a moment ago
/// may have no leader yet: such answers are asked again for up to 30 s. Errors: the last client
/// error once that time is up.
pub fn counts(bootstrap: &str, prefix: &str) -> Result<Vec<(String, Option<i64>)>, KafkaError> {
    let consumer: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match counts_once(&consumer, prefix) {
            Err(e) if leaderless(&e) && Instant::now() < deadline => std::thread::sleep(Duration::from_millis(250)),
            done => return done,
        }
    }
}

/// Whether the error is one a partition without an elected leader gives.
fn leaderless(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::NotLeaderForPartition
                | RDKafkaErrorCode::LeaderNotAvailable
                | RDKafkaErrorCode::UnknownTopicOrPartition
                | RDKafkaErrorCode::UnknownPartition
        )
    )
}

fn counts_once(consumer: &BaseConsumer, prefix: &str) -> Result<Vec<(String, Option<i64>)>, KafkaError> {
    let md = consumer.fetch_metadata(None, Duration::from_secs(10))?;
    let mut out = Vec::new();
    for (topic, _, _) in TOPICS {
        let name = format!("{prefix}{topic}");
        let count = match md.topics().iter().find(|t| t.name() == name) {
            None => None,
            Some(t) => {
                let mut n = 0;
                for p in t.partitions() {
                    let (lo, hi) = consumer.fetch_watermarks(&name, p.id(), Duration::from_secs(10))?;
                    n += hi - lo;
                }
                Some(n)
            }
        };
        out.push((name, count));
    }
    Ok(out)
}
