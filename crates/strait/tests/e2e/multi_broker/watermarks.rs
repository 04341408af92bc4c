//! [`strait::kafka::watermarks`] on the three-broker cluster: the log-start and end offsets of
//! partitions led by all three brokers, asked in one ListOffsets request per broker for the ends
//! and one for the starts, equal those `fetch_watermarks` gives partition by partition (empty
//! partitions, records deleted from the front, a transaction left open, `read_committed` as
//! Strait's clients read); asked in several lists at once ([`strait::kafka::watermarks_in_lists`])
//! they are the same; a partition of a missing topic is an error.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::producer::{FutureRecord, Producer};
use rdkafka::statistics::Statistics;
use rdkafka::{Offset, TopicPartitionList};

use crate::support::*;

const PARTITIONS: i32 = 12;

/// Counts the ListOffsets requests the client has sent, from its statistics.
#[derive(Default)]
struct ListOffsetsCount(AtomicI64);

impl ClientContext for ListOffsetsCount {
    fn stats(&self, statistics: Statistics) {
        let sent = statistics.brokers.values().filter_map(|b| b.req.get("ListOffsets")).sum();
        self.0.store(sent, Ordering::SeqCst);
    }
}

impl ConsumerContext for ListOffsetsCount {}

/// ListOffsets requests `consumer` has sent so far (statistics are served while polling).
fn list_offsets_sent(consumer: &BaseConsumer<ListOffsetsCount>) -> i64 {
    for _ in 0..5 {
        consumer.poll(Duration::from_millis(100));
    }
    consumer.context().0.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread")]
async fn watermarks_of_every_partition_in_one_request_per_broker_equal_fetch_watermarks() {
    let (three, _control) = three_nodes();
    // No node is bounced meanwhile by another case.
    let _turn = super::TURN.lock().await;
    let topic = unique("watermarks");
    let new = NewTopic::new(&topic, PARTITIONS, TopicReplication::Fixed(3));
    let created = admin(&three).create_topics([&new], &AdminOptions::new()).await.expect("create topic");
    created[0].as_ref().expect("topic created");
    // Partition p holds 2p records (partition 0 none).
    let p = producer_with(&three, &[("acks", "all")]);
    for partition in 1..PARTITIONS {
        for i in 0..2 * partition {
            let value = format!("{partition}-{i}");
            p.send(
                FutureRecord::<[u8], [u8]>::to(&topic).partition(partition).payload(value.as_bytes()),
                Duration::from_secs(30),
            )
            .await
            .expect("produced");
        }
    }
    // Partitions 1..=4 lose their first record: their log start is 1.
    let mut front = TopicPartitionList::new();
    for partition in 1..=4 {
        front.add_partition_offset(&topic, partition, Offset::Offset(1)).expect("partition");
    }
    admin(&three).delete_records(&front, &AdminOptions::new()).await.expect("delete records");
    // A transaction left open in partition 5: its last stable offset stops before it.
    let open = producer_with(&three, &[("transactional.id", &unique("watermarks-open"))]);
    open.init_transactions(Duration::from_secs(30)).expect("init transactions");
    open.begin_transaction().expect("begin");
    open.send(FutureRecord::<[u8], [u8]>::to(&topic).partition(5).payload(&b"open"[..]), Duration::from_secs(30))
        .await
        .expect("produced in the open transaction");

    let consumer: BaseConsumer<ListOffsetsCount> = ClientConfig::new()
        .set("bootstrap.servers", &three)
        .set("isolation.level", "read_committed")
        .set("statistics.interval.ms", "100")
        .create_with_context(ListOffsetsCount::default())
        .expect("consumer");
    let metadata = consumer.fetch_metadata(Some(&topic), Duration::from_secs(10)).expect("metadata");
    let leaders: BTreeSet<i32> = metadata.topics()[0].partitions().iter().map(|p| p.leader()).collect();
    assert_eq!(leaders.len(), 3, "the partitions are led by all three brokers: {leaders:?}");

    let before = list_offsets_sent(&consumer);
    let asked: Vec<(&str, i32)> = (0..PARTITIONS).map(|p| (topic.as_str(), p)).collect();
    let marks = strait::kafka::watermarks(&consumer, asked, Duration::from_secs(10)).expect("watermarks");
    let by_helper = list_offsets_sent(&consumer) - before;
    let mut expected = Vec::new();
    for partition in 0..PARTITIONS {
        let one = consumer.fetch_watermarks(&topic, partition, Duration::from_secs(10)).expect("fetch_watermarks");
        assert_eq!(marks.get(&topic, partition).expect("asked"), one, "{topic}/{partition}");
        expected.push(one);
    }
    let one_by_one = list_offsets_sent(&consumer) - before - by_helper;
    // 14 partitions of two topics in lists of 4: four lists at once, one holding partitions of both.
    let other = unique("watermarks-other");
    let new = NewTopic::new(&other, 2, TopicReplication::Fixed(3));
    admin(&three).create_topics([&new], &AdminOptions::new()).await.expect("create topic")[0]
        .as_ref()
        .expect("topic created");
    p.send(FutureRecord::<[u8], [u8]>::to(&other).partition(1).payload(&b"one"[..]), Duration::from_secs(30))
        .await
        .expect("produced");
    let in_lists: Vec<(&str, i32)> =
        (0..PARTITIONS).map(|p| (topic.as_str(), p)).chain([(other.as_str(), 0), (other.as_str(), 1)]).collect();
    let listed = strait::kafka::watermarks_in_lists(&consumer, in_lists, Duration::from_secs(10), 4).expect("in lists");
    for (partition, one) in expected.iter().enumerate() {
        assert_eq!(listed.get(&topic, partition as i32).expect("asked"), *one, "{topic}/{partition} in lists of 4");
    }
    assert_eq!(listed.get(&other, 0).expect("asked"), (0, 0));
    assert_eq!(listed.get(&other, 1).expect("asked"), (0, 1));
    eprintln!(
        "ListOffsets requests for {PARTITIONS} partitions on 3 brokers: {by_helper} at once, {one_by_one} one by one"
    );
    // The cases that make the two readings differ if the helper read something else.
    assert_eq!(expected[0], (0, 0));
    assert_eq!(expected[3], (1, 6));
    assert_eq!(expected[5], (0, 10), "the open transaction's record is past the last stable offset");
    assert_eq!(expected[11], (0, 22));
    assert!(by_helper <= 2 * 3, "{by_helper} ListOffsets requests for 12 partitions on 3 brokers");
    assert!(one_by_one >= 2 * i64::from(PARTITIONS), "fetch_watermarks sent {one_by_one}");

    let missing = unique("watermarks-missing");
    let err =
        strait::kafka::watermarks(&consumer, [(missing.as_str(), 0), (topic.as_str(), 0)], Duration::from_secs(10));
    assert!(err.is_err(), "a partition of a missing topic is an error: {err:?}");
    open.abort_transaction(Duration::from_secs(30)).expect("abort");
}
