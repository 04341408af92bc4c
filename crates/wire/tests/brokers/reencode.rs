//! The batches the batch path cannot forward as they are (issue 27, point 2), through real
//! brokers: the batch a resume starts inside and a `LogAppendTime` source's batches are written
//! anew, in the same codec, so a `CreateTime` target holds exactly the records a consumer of the
//! source reads from the position on, their times included; a batch larger than the target
//! accepts is refused, named by topic, partition and source offset.

use std::time::Duration;

use kafka_protocol::records::Compression as Codec;
use strait_wire::batch::Compression;
use strait_wire::{Batch, ClientOptions, Cluster, Outgoing, Producer, WireError};

use crate::made::{encoded_batch, fetch_all};
use crate::support::*;

async fn producer_to(bootstrap: &str, topics: &[&str]) -> Producer {
    let mut cluster =
        Cluster::connect(bootstrap, ClientOptions::plaintext("wire-reencode-test", Duration::from_secs(10)))
            .await
            .expect("connect");
    cluster.refresh(topics).await.expect("metadata");
    Producer::init(cluster, Duration::from_secs(30)).await.expect("producer")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_a_resume_starts_inside_and_log_append_time_batches_are_written_anew_and_too_large_ones_named() {
    let (a, b) = (cluster(1), cluster(2));
    let (source, target, small) = (unique("reencs"), unique("reenct"), unique("reencsmall"));
    create_topic(&a, &source, 1, &[("message.timestamp.type", "LogAppendTime")]).await;
    create_topic(&b, &target, 1, &[]).await;
    create_topic(&b, &small, 1, &[("max.message.bytes", "2000")]).await;
    // Stamped an hour ago by their producer: the source broker's append time replaces that.
    let an_hour_ago = now_ms() - 3_600_000;
    let records: Vec<Rec> = (0..300)
        .map(|i| Rec {
            partition: 0,
            key: Some(format!("k{i}").into_bytes()),
            value: Some(format!("value-{i}").into_bytes()),
            headers: vec![("n".into(), Some(i.to_string().into_bytes()))],
            timestamp: an_hour_ago,
        })
        .collect();
    produce_with(&a, &source, &records, &[("compression.type", "zstd"), ("linger.ms", "50")]).await;

    let mut from = Cluster::connect(&a, ClientOptions::plaintext("wire-reencode-test", Duration::from_secs(10)))
        .await
        .expect("connect");
    from.refresh(&[&source]).await.expect("metadata");
    let batches: Vec<Batch> =
        fetch_all(&mut from, &source, 1, 1 << 20).await[&0].iter().flat_map(|f| f.committed()).cloned().collect();
    assert!(batches.iter().all(Batch::is_log_append_time), "the source broker stamps its batches");
    // A resume from inside a batch: its records before the position are already copied.
    let inside = batches.iter().find(|b| b.record_count() > 2).expect("a batch of several records");
    let position = inside.base_offset() + 1;
    let outgoing: Vec<Outgoing> = batches
        .iter()
        .filter(|b| b.last_offset() >= position)
        .map(|b| {
            assert!(b.reencode_reason(position).is_some(), "{b:?}: LogAppendTime or before the position");
            let batch = b.records_from(position).expect("written anew").expect("records from the position");
            assert_eq!(batch.compression(), Some(Compression::Zstd), "the codec kept");
            Outgoing { topic: target.clone(), partition: 0, batch }
        })
        .collect();
    producer_to(&b, &[&target]).await.produce(&outgoing).await.expect("produced");

    let from_position: Vec<Rec> = read_all(&a, &source, true)[&0]
        .iter()
        .filter(|(offset, _)| *offset >= position)
        .map(|(_, r)| r.clone())
        .collect();
    let copied: Vec<Rec> = read_all(&b, &target, true)[&0].iter().map(|(_, r)| r.clone()).collect();
    assert_eq!(copied.len(), 300 - position as usize, "every record from the position, none before");
    assert!(from_position.iter().all(|r| r.timestamp > an_hour_ago + 1_000_000), "the source reads its append times");
    assert_eq!(copied, from_position, "keys, values, headers and the source's append times, record for record");

    // Larger than the target topic takes: refused at once, named.
    let big = encoded_batch("big", 0, 200, Codec::None, false);
    assert!(big.bytes().len() > 2_000);
    let refused =
        producer_to(&b, &[&small]).await.produce(&[Outgoing { topic: small.clone(), partition: 0, batch: big }]).await;
    match refused {
        Err(WireError::NotProduced { topic, partition: 0, offset: 0, reason, error }) if topic == small => {
            assert!(reason.contains("refused"), "{reason}");
            assert_eq!(error, Some(strait_wire::ResponseError::MessageTooLarge), "the broker's error kept");
        }
        other => panic!("a batch over max.message.bytes must be refused, named: {other:?}"),
    }
}
