//! The batch path's client asks a partition's offsets (ListOffsets) through a real broker: the log
//! start, the last stable offset (an open transaction holds it back), the offset of a time; and
//! after records are deleted from the front, a fetch from below the new start answers
//! `OffsetOutOfRange` with the start to resume from.

use std::time::Duration;

use kafka_protocol::ResponseError;
use rdkafka::admin::AdminOptions;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer as _, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};
use strait_wire::{ClientOptions, Cluster, FetchAt, Listed, OffsetSpec};

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn offsets_are_listed_at_the_start_the_stable_end_and_a_time_and_a_fetch_below_the_start_says_where_it_is() {
    let a = cluster(1);
    let topic = unique("wireoffsets");
    create_topic(&a, &topic, 1, &[]).await;
    let (first, later) = (now_ms() - 60_000, now_ms() - 30_000);
    let stamped = |range: std::ops::Range<i32>, timestamp: i64| -> Vec<Rec> {
        range.map(|i| Rec { timestamp, ..Rec::simple(0, &format!("v{i}")) }).collect()
    };
    produce(&a, &topic, &stamped(0..100, first)).await;
    produce(&a, &topic, &stamped(100..150, later)).await;
    // An open transaction after them: the stable end stays at 150 while it is open.
    let open: ThreadedProducer<DefaultProducerContext> =
        ClientConfig::new().set("bootstrap.servers", &a).set("transactional.id", &topic).create().unwrap();
    open.init_transactions(Duration::from_secs(30)).unwrap();
    open.begin_transaction().unwrap();
    open.send(BaseRecord::<[u8], [u8]>::to(&topic).partition(0).payload(b"open")).unwrap();
    open.flush(Duration::from_secs(30)).unwrap();

    let mut cluster = Cluster::connect(&a, ClientOptions::plaintext("wire-offsets-test", Duration::from_secs(10)))
        .await
        .expect("connect");
    cluster.refresh(&[&topic]).await.expect("metadata");
    let partition = [(topic.clone(), 0)];
    let offset = async |cluster: &mut Cluster, spec| -> Result<i64, ResponseError> {
        let listed: Vec<Listed> = cluster.list_offsets(&partition, spec).await.expect("list offsets");
        assert_eq!(listed.len(), 1, "{listed:?}");
        listed[0].offset
    };
    assert_eq!(offset(&mut cluster, OffsetSpec::Earliest).await, Ok(0));
    assert_eq!(offset(&mut cluster, OffsetSpec::Latest).await, Ok(150), "the stable end, before the open transaction");
    assert_eq!(offset(&mut cluster, OffsetSpec::Timestamp(later)).await, Ok(100), "the first record of that time");
    assert_eq!(offset(&mut cluster, OffsetSpec::Timestamp(now_ms() + 60_000)).await, Ok(-1), "none that late");
    open.abort_transaction(Duration::from_secs(30)).unwrap();

    // Records deleted from the front, as retention does: a fetch from below the start is out of
    // range and says where the log starts now.
    let mut front = TopicPartitionList::new();
    front.add_partition_offset(&topic, 0, Offset::Offset(120)).unwrap();
    admin(&a).delete_records(&front, &AdminOptions::new()).await.expect("delete records");
    assert_eq!(offset(&mut cluster, OffsetSpec::Earliest).await, Ok(120));
    let below = [FetchAt {
        topic: topic.clone(),
        topic_id: Default::default(),
        partition: 0,
        offset: 10,
        last_fetched_epoch: -1,
    }];
    let fetched = cluster.fetch(&below, Duration::from_millis(100), 1 << 20).await.expect("fetch").fetched;
    assert_eq!(fetched.len(), 1);
    assert_eq!(fetched[0].error, Some(ResponseError::OffsetOutOfRange));
    assert!(fetched[0].batches.is_empty());
}
