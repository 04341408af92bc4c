//! The batch path's client (`strait_wire`, issue 27) on the three-broker cluster, the leader of
//! the partitions killed (SIGKILL) and restarted twice: batches produced meanwhile are each
//! appended once, in order, and every append's answer says where it is; batches fetched
//! meanwhile are each read once, in order, the fetch finding the new leader itself, and a fetch
//! that claims a leader epoch the log moved past is told where that epoch ended (KIP-320).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::records::Compression as Codec;
use kafka_protocol::records::RecordBatchDecoder;
use strait_testkit::multi::{self, Control};
use strait_wire::{Appended, ClientOptions, Cluster, Diverging, FetchAt, Outgoing, Producer};

use super::{create_led_by_one_node, fully_replicated, node, Turn, PARTITIONS, TURN};
use crate::support::*;
use crate::wire::encoded_batch;

/// Produce calls, each of one batch per partition of [`RECORDS`] records.
const CALLS: usize = 400;
const RECORDS: usize = 50;

/// One lz4 batch of [`RECORDS`] records per partition of `topic` for produce call `call`: the
/// records `p<partition>-<n>`, numbered on from the call before.
fn call_batches(topic: &str, call: usize) -> Vec<Outgoing> {
    (0..PARTITIONS)
        .map(|p| Outgoing {
            topic: topic.to_string(),
            partition: p,
            batch: encoded_batch(&format!("p{p}"), call * RECORDS, RECORDS, Codec::Lz4, false),
        })
        .collect()
}

/// This test's turn on the shared cluster, every node up and every partition replicated, and a
/// new topic named from `prefix` whose partitions are led by one node: (bootstrap, control, turn,
/// topic).
async fn whole_cluster_with_topic(prefix: &str) -> (String, Control, Turn, String) {
    let (three, control) = three_nodes();
    let turn = Turn { control: control.clone(), _turn: TURN.lock().await };
    turn.control.heal().expect("the three-node cluster is whole");
    fully_replicated(&three).await;
    let topic = unique(prefix);
    create_led_by_one_node(&three, &topic).await;
    (three, control, turn, topic)
}

/// How long a node stays down waiting for `while_down` progress before it is restarted anyway.
const DOWN_AT_MOST: Duration = Duration::from_secs(60);

/// Kills (SIGKILL) the leader of `topic`'s partition 0 once `progress` reaches a third of `total`,
/// then two thirds, each time restarting it after `progress` moved on by `while_down`, or after
/// [`DOWN_AT_MOST`] (the partitions' leaders and ISRs are then printed: a cluster that could not
/// take the records with a node down, or a client that did not move on). Returns the nodes
/// killed, each with whether progress was made while it was down. A task that failed sets
/// `progress` to `usize::MAX`, which ends every wait.
async fn kill_the_leader_twice(
    three: &str,
    control: &Control,
    topic: &str,
    progress: &AtomicUsize,
    total: usize,
    while_down: usize,
) -> Vec<(i32, bool)> {
    let mut killed = Vec::new();
    for round in 1..=2 {
        let at = round * total / 3;
        wait_until("progress before the kill", Duration::from_secs(120), || progress.load(Ordering::SeqCst) >= at)
            .await;
        let id = multi::leader(three, topic, 0).unwrap().expect("partition 0 has a leader");
        node(control, id, Control::kill).await;
        let resume = progress.load(Ordering::SeqCst).saturating_add(while_down);
        let down = std::time::Instant::now();
        while progress.load(Ordering::SeqCst) < resume && down.elapsed() < DOWN_AT_MOST {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let moved_on = progress.load(Ordering::SeqCst) >= resume;
        if !moved_on {
            eprintln!(
                "node {id} down {} s without progress ({} of {resume}); partitions: {:?}",
                DOWN_AT_MOST.as_secs(),
                progress.load(Ordering::SeqCst),
                multi::partitions(three, topic)
            );
        }
        node(control, id, Control::restart).await;
        fully_replicated(three).await;
        killed.push((id, moved_on));
    }
    killed
}

#[tokio::test(flavor = "multi_thread")]
async fn batches_produced_while_their_leader_is_killed_twice_are_appended_once_in_order() {
    let (three, control, turn, topic) = whole_cluster_with_topic("mbbatches").await;

    let cluster =
        Cluster::connect(&three, ClientOptions::plaintext("wire-test", Duration::from_secs(5))).await.expect("connect");
    let mut producer = Producer::init(cluster, Duration::from_secs(120)).await.expect("a producer id");
    let calls = Arc::new(AtomicUsize::new(0));
    let (done, name) = (calls.clone(), topic.clone());
    let producing = tokio::spawn(async move {
        let mut appended: BTreeMap<i32, Vec<Appended>> = BTreeMap::new();
        for call in 0..CALLS {
            let outgoing = call_batches(&name, call);
            let answers = match producer.produce(&outgoing).await {
                Ok(answers) => answers,
                Err(e) => {
                    // Past every wait for progress, so the failure itself is reported.
                    done.store(usize::MAX, Ordering::SeqCst);
                    panic!("call {call}: {e}");
                }
            };
            for (out, a) in outgoing.iter().zip(answers) {
                appended.entry(out.partition).or_default().push(a);
            }
            done.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        (appended, producer.retried())
    });

    // Some calls go to the next leader while one is down.
    let killed = kill_the_leader_twice(&three, &control, &topic, &calls, CALLS, 10).await;
    let (appended, retried) = producing.await.expect("the producing task");
    drop(turn);

    eprintln!(
        "batches through two leader kills (nodes, moved on while down: {killed:?}): {retried} batch rounds retried"
    );
    assert!(retried > 0, "the kills made the producer retry");
    assert!(killed.iter().any(|(_, moved_on)| *moved_on), "the producer moved on to a new leader while one was down");
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

/// Batches per partition the fetch test reads, one per fetch.
const FETCHED_BATCHES: usize = 300;

#[tokio::test(flavor = "multi_thread")]
async fn batches_fetched_while_their_leader_is_killed_twice_are_read_once_in_order() {
    let (three, control, turn, topic) = whole_cluster_with_topic("mbfetch").await;
    let options = ClientOptions::plaintext("wire-test", Duration::from_secs(5));
    let mut producer =
        Producer::init(Cluster::connect(&three, options.clone()).await.expect("connect"), Duration::from_secs(60))
            .await
            .expect("a producer id");
    for call in 0..FETCHED_BATCHES {
        producer.produce(&call_batches(&topic, call)).await.expect("produced");
    }

    let mut cluster = Cluster::connect(&three, options).await.expect("connect");
    cluster.refresh(&[&topic]).await.expect("metadata");
    let read = Arc::new(AtomicUsize::new(0));
    let (progress, name) = (read.clone(), topic.clone());
    let fetching = tokio::spawn(async move {
        let mut next: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 0)).collect();
        // The leader epoch of the last batch read: each fetch names it, and the leader checks its
        // log did not diverge from what was read (KIP-320).
        let mut epochs: BTreeMap<i32, i32> = BTreeMap::new();
        let mut values: BTreeMap<i32, Vec<String>> = BTreeMap::new();
        let (mut failed, mut moved) = (0, 0);
        let end = (FETCHED_BATCHES * RECORDS) as i64;
        while next.values().any(|o| *o < end) {
            let at: Vec<FetchAt> = next
                .iter()
                .filter(|(_, o)| **o < end)
                .map(|(p, o)| FetchAt {
                    topic: name.clone(),
                    topic_id: Default::default(),
                    partition: *p,
                    offset: *o,
                    last_fetched_epoch: epochs.get(p).copied().unwrap_or(-1),
                })
                .collect();
            // One byte a partition: one whole batch each fetch, so the reads span the kills.
            match cluster.fetch(&at, Duration::from_millis(200), 1).await {
                Err(e) => panic!("a fetch failed for good: {e}"),
                Ok(round) => {
                    failed += round.brokers.iter().filter(|(_, r)| r.is_err()).count();
                    for f in round.fetched {
                        assert_eq!(f.diverging, None, "partition {}: no unclean election here", f.partition);
                        // An answer of a leader asked before the partition moved to another.
                        if next.get(&f.partition) != Some(&f.offset) {
                            continue;
                        }
                        if f.error.is_some() {
                            moved += 1;
                            continue;
                        }
                        for b in f.committed() {
                            let set = RecordBatchDecoder::decode(&mut b.bytes().clone()).expect("a batch");
                            let seen = values.entry(f.partition).or_default();
                            seen.extend(
                                set.records
                                    .iter()
                                    .map(|r| String::from_utf8_lossy(r.value.as_ref().unwrap()).into_owned()),
                            );
                            next.insert(f.partition, b.last_offset() + 1);
                            epochs.insert(f.partition, b.partition_leader_epoch());
                        }
                    }
                }
            }
            progress.store(next.values().map(|o| *o as usize).sum::<usize>() / RECORDS, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        (cluster, epochs, values, failed, moved)
    });

    let total = FETCHED_BATCHES * PARTITIONS as usize;
    let killed = kill_the_leader_twice(&three, &control, &topic, &read, total, 30).await;
    let (mut cluster, epochs, values, failed, moved) = fetching.await.expect("the fetching task");

    // A batch appended under the leader of now, then a fetch inside it that claims to have read
    // it under the epoch of the first leader: the leader answers where that epoch's log ends.
    producer.produce(&call_batches(&topic, FETCHED_BATCHES)).await.expect("produced after the kills");
    cluster.refresh(&[&topic]).await.expect("metadata");
    let (first_epoch, end) = (epochs[&0], (FETCHED_BATCHES * RECORDS) as i64);
    let inside = FetchAt {
        topic: topic.clone(),
        topic_id: Default::default(),
        partition: 0,
        offset: end + 1,
        last_fetched_epoch: first_epoch,
    };
    // Requests of the reading above may still be out to other leaders: asked until this one answers.
    let mut answered = Vec::new();
    for _ in 0..20 {
        answered = cluster
            .fetch(std::slice::from_ref(&inside), Duration::from_millis(100), 1 << 20)
            .await
            .expect("fetch")
            .fetched;
        if answered.iter().any(|f| f.partition == 0 && f.offset == inside.offset) {
            break;
        }
    }
    drop(turn);
    let diverging = answered.iter().filter(|f| f.partition == 0).find_map(|f| f.diverging);
    assert_eq!(diverging, Some(Diverging { epoch: first_epoch, end_offset: end }), "{answered:?}");

    eprintln!("fetched through two leader kills (nodes, moved on while down: {killed:?}): {failed} fetches failed, {moved} partitions answered a moved leader");
    assert!(killed.iter().any(|(_, moved_on)| *moved_on), "the fetch moved on to a new leader while one was down");
    assert!(failed + moved > 0, "the kills reached the fetches");
    for p in 0..PARTITIONS {
        let expected: Vec<String> = (0..FETCHED_BATCHES * RECORDS).map(|i| format!("p{p}-{i}")).collect();
        let got = values.get(&p).cloned().unwrap_or_default();
        assert_eq!(got.len(), expected.len(), "partition {p}: every record read once");
        assert!(got == expected, "partition {p}: read in order, none twice");
    }
}
