//! The batch path's producer ([`strait_wire::Producer`], issue 27) on the three-broker cluster:
//! batches produced while the leader of their partitions is killed (SIGKILL) and restarted,
//! twice, are each appended once, in order, and every append's answer says where it is.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::records::Compression as Codec;
use strait_testkit::multi::{self, Control};
use strait_wire::{Appended, ClientOptions, Cluster, Outgoing, Producer};

use super::{create_led_by_one_node, fully_replicated, node, Turn, PARTITIONS, TURN};
use crate::support::*;
use crate::wire::encoded_batch;

/// Produce calls, each of one batch per partition of [`RECORDS`] records.
const CALLS: usize = 400;
const RECORDS: usize = 50;

#[tokio::test(flavor = "multi_thread")]
async fn batches_produced_while_their_leader_is_killed_twice_are_appended_once_in_order() {
    let (three, control) = three_nodes();
    let turn = Turn { control: control.clone(), _turn: TURN.lock().await };
    turn.control.heal().expect("the three-node cluster is whole");
    fully_replicated(&three).await;
    let topic = unique("mbbatches");
    create_led_by_one_node(&three, &topic).await;

    let cluster =
        Cluster::connect(&three, ClientOptions::plaintext("wire-test", Duration::from_secs(5))).await.expect("connect");
    let mut producer = Producer::init(cluster, Duration::from_secs(120)).await.expect("a producer id");
    let calls = Arc::new(AtomicUsize::new(0));
    let (done, name) = (calls.clone(), topic.clone());
    let producing = tokio::spawn(async move {
        let mut appended: BTreeMap<i32, Vec<Appended>> = BTreeMap::new();
        for call in 0..CALLS {
            let outgoing: Vec<Outgoing> = (0..PARTITIONS)
                .map(|p| Outgoing {
                    topic: name.clone(),
                    partition: p,
                    batch: encoded_batch(&format!("p{p}"), call * RECORDS, RECORDS, Codec::Lz4, false),
                })
                .collect();
            let answers = producer.produce(&outgoing).await.unwrap_or_else(|e| panic!("call {call}: {e}"));
            for (out, a) in outgoing.iter().zip(answers) {
                appended.entry(out.partition).or_default().push(a);
            }
            done.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        (appended, producer.retried())
    });

    let mut killed = Vec::new();
    for round in 1..=2 {
        let at = round * CALLS / 3;
        wait_until("the calls before the kill", Duration::from_secs(120), || calls.load(Ordering::SeqCst) >= at).await;
        let id = multi::leader(&three, &topic, 0).unwrap().expect("partition 0 has a leader");
        node(&control, id, Control::kill).await;
        // Some calls go to the next leader while this one is down.
        let resume = calls.load(Ordering::SeqCst) + 10;
        wait_until("calls while a node is down", Duration::from_secs(120), || calls.load(Ordering::SeqCst) >= resume)
            .await;
        node(&control, id, Control::restart).await;
        fully_replicated(&three).await;
        killed.push(id);
    }
    let (appended, retried) = producing.await.expect("the producing task");
    drop(turn);

    eprintln!("batches through two leader kills (nodes {killed:?}): {retried} batch rounds retried");
    assert!(retried > 0, "the kills made the producer retry");
    let report = sequence_report(&three, &topic, PARTITIONS, CALLS * RECORDS);
    for (p, seen) in &report {
        assert_eq!((seen.missing, seen.duplicated, seen.reordered), (0, 0, 0), "partition {p}: {seen:?}");
    }
    // Each answer's offset is where its batch's first record is: the batches lie end to end.
    for (p, answers) in &appended {
        let offsets: Vec<i64> = answers.iter().map(|a| a.base_offset).collect();
        let expected: Vec<i64> = (0..CALLS as i64).map(|c| c * RECORDS as i64).collect();
        assert_eq!(offsets, expected, "partition {p}: the answers' base offsets");
    }
}
