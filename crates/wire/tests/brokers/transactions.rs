//! The batch producer's transactions (`strait-wire`, issue 27 point 3) against a real broker:
//! batches, and records of Strait's own written as a batch, are visible to `read_committed`
//! readers once committed and never when aborted; a new producer of the same transactional id
//! aborts the old one's open transaction and fences it (its commit and its epoch bump are
//! refused); a producer whose transaction outlived its timeout is fenced by the coordinator
//! and takes the id over anew.

use std::time::Duration;

use kafka_protocol::records::Compression as Codec;
use strait_wire::{Batch, ClientOptions, Cluster, Outgoing, Producer};

use crate::made::encoded_batch;
use crate::support::*;

async fn transactional(bootstrap: &str, id: &str, timeout: Duration) -> Producer {
    let cluster = Cluster::connect(bootstrap, ClientOptions::plaintext("wire-tx-test", Duration::from_secs(10)))
        .await
        .expect("connect");
    Producer::init_transactional(cluster, id, timeout, Duration::from_secs(60)).await.expect("transactions initialised")
}

/// A batch of 10 records `<tag>-<i>` of partition `p`, lz4.
fn batch(topic: &str, p: i32, tag: &str) -> Outgoing {
    Outgoing { topic: topic.to_string(), partition: p, batch: encoded_batch(tag, 0, 10, Codec::Lz4, false) }
}

/// The values `read_committed` reads from each partition of `topic` (2 partitions).
fn committed_values(bootstrap: &str, topic: &str) -> Vec<Vec<String>> {
    let all = read_all(bootstrap, topic, true);
    (0..2)
        .map(|p| all[&p].iter().map(|(_, r)| String::from_utf8(r.value.clone().unwrap_or_default()).unwrap()).collect())
        .collect()
}

fn values(tag: &str) -> Vec<String> {
    (0..10).map(|i| format!("{tag}-{i}")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn transactional_batches_show_once_committed_and_a_new_producer_of_the_id_fences_the_old() {
    let a = cluster(1);
    let topic = unique("wiretx");
    create_topic(&a, &topic, 2, &[]).await;
    let id = format!("{topic}-producer");
    let mut first = transactional(&a, &id, Duration::from_secs(60)).await;

    // Committed: batches of both partitions and a batch of own records.
    first.begin().unwrap();
    first.produce(&[batch(&topic, 0, "c1"), batch(&topic, 1, "c1")]).await.expect("produced in a transaction");
    let own = Batch::of_records(&[(Some(b"k"), Some(b"own-0"))], now_ms()).unwrap();
    first.produce(&[Outgoing { topic: topic.clone(), partition: 1, batch: own }]).await.unwrap();
    first.commit().await.expect("committed");
    // Aborted: never visible; the abort bumps the epoch.
    let epoch = first.id().1;
    first.begin().unwrap();
    first.produce(&[batch(&topic, 0, "a1")]).await.unwrap();
    first.abort().await.expect("aborted");
    assert_eq!(first.id().1, epoch + 1, "an abort bumps the producer's epoch");
    // A transaction with nothing in it ends without a call.
    first.begin().unwrap();
    first.commit().await.expect("an empty transaction");
    assert!(first.produce(&[batch(&topic, 0, "none")]).await.is_err(), "a produce outside a transaction is refused");
    first.begin().unwrap();
    first.produce(&[batch(&topic, 0, "c2")]).await.expect("produced after the abort, sequences from 0");
    first.commit().await.unwrap();

    // Left open, then a second producer of the id takes over: the open transaction is aborted.
    first.begin().unwrap();
    first.produce(&[batch(&topic, 1, "open")]).await.unwrap();
    let mut second = transactional(&a, &id, Duration::from_secs(60)).await;
    let e = first.commit().await.expect_err("the fenced producer's commit is refused");
    assert!(e.is_fenced(), "fenced: {e}");
    let e = first.abort().await.expect_err("the fenced producer cannot bump its epoch");
    assert!(e.is_fenced(), "fenced: {e}");
    second.begin().unwrap();
    second.produce(&[batch(&topic, 1, "c3")]).await.unwrap();
    second.commit().await.unwrap();

    let mut p0 = values("c1");
    p0.extend(values("c2"));
    let mut p1 = values("c1");
    p1.push("own-0".into());
    p1.extend(values("c3"));
    assert_eq!(committed_values(&a, &topic), vec![p0, p1], "read_committed reads the committed transactions only");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_that_outlives_its_timeout_is_aborted_and_the_producer_renewed_goes_on() {
    let a = cluster(1);
    let topic = unique("wiretxto");
    create_topic(&a, &topic, 2, &[]).await;
    let mut p = transactional(&a, &format!("{topic}-producer"), Duration::from_secs(2)).await;
    p.begin().unwrap();
    p.produce(&[batch(&topic, 0, "late")]).await.unwrap();
    // The coordinator looks for timed-out transactions every 10 s (Kafka's default).
    let mut refused = None;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let count = count(&a, &topic).unwrap_or(0);
        // The abort marker follows the 10 records once the coordinator aborted it.
        if count > 10 {
            refused = Some(p.commit().await.expect_err("a commit after the coordinator's abort"));
            break;
        }
    }
    let e = refused.expect("the coordinator aborted the transaction within 30 s");
    assert!(e.is_fenced(), "fenced by the coordinator's abort: {e}");
    p.renew().await.expect("the id taken over anew");
    p.begin().unwrap();
    p.produce(&[batch(&topic, 0, "after")]).await.unwrap();
    p.commit().await.unwrap();
    assert_eq!(committed_values(&a, &topic), vec![values("after"), vec![]]);
}
