//! Byte-exact active/active (issue 45): two identity-policy flows copying batches in opposite
//! directions, with lz4 records written on both clusters while both run. Each cluster ends with
//! every record of both once (no echo: the loop guard of batches drops what a flow's producer
//! wrote, by its producer id registered in `strait-producer-ids.internal`), and the batches born
//! on one cluster are stored on the other byte for byte.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use strait_wire::{Batch, ClientOptions, Cluster};

use crate::support::*;
use crate::wire::fetch_all;

/// The registry topic (`strait::sink::producer_ids::PRODUCER_IDS_TOPIC`).
const REGISTRY: &str = "strait-producer-ids.internal";
pub(crate) const PARTITIONS: i32 = 2;
/// Rounds of records written on each side while the flows run.
const ROUNDS: usize = 5;
const PER_ROUND: usize = 200;

/// Flows A→B copying batches and B→A as `back_copy` says (`batches` or `auto`).
fn config(p: &str, a: &str, b: &str, topic: &str, delivery: &str, back_copy: &str) -> String {
    let flow = |source: &str, target: &str| {
        let copy = if source.ends_with('b') { back_copy } else { "batches" };
        format!(
            "[[flows]]\nsource = \"{source}\"\ntarget = \"{target}\"\nreplication_policy = \"identity\"\ncopy = \"{copy}\"\ndelivery = \"{delivery}\"\nrefresh_topics_interval_ms = 1000\ntopics = [\"{topic}\"]\n"
        )
    };
    format!(
        "[[clusters]]\nalias = \"{p}a\"\nbootstrap_servers = \"{a}\"\n[[clusters]]\nalias = \"{p}b\"\nbootstrap_servers = \"{b}\"\n{}{}",
        flow(&format!("{p}a"), &format!("{p}b")),
        flow(&format!("{p}b"), &format!("{p}a"))
    )
}

/// Values of every record of `topic` on `bootstrap`, with how often each occurs.
pub(crate) fn values(bootstrap: &str, topic: &str) -> BTreeMap<Vec<u8>, usize> {
    let mut m = BTreeMap::new();
    for (_, r) in read_all(bootstrap, topic, false).into_values().flatten() {
        *m.entry(r.value.unwrap_or_default()).or_default() += 1;
    }
    m
}

/// Writes `rounds` rounds of `per_round` lz4 records (`from-<name>-<round>-<i>`, over two
/// partitions) on each of `sides`, 0.7 s apart, while flows copy them.
pub(crate) async fn write_rounds(sides: &[(&str, &str)], topic: &str, rounds: usize, per_round: usize) {
    let lz4 = [("compression.type", "lz4"), ("linger.ms", "5"), ("batch.size", "4000")];
    for round in 0..rounds {
        for (side, name) in sides {
            let recs: Vec<Rec> =
                (0..per_round).map(|i| Rec::simple((i % 2) as i32, &format!("from-{name}-{round}-{i}"))).collect();
            produce_with(side, topic, &recs, &lz4).await;
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
}

/// Records of `topic` on `bootstrap`: read (`read_committed`), not offsets, as exactly-once
/// leaves transaction markers.
pub(crate) fn held(bootstrap: &str, topic: &str) -> i64 {
    read_all(bootstrap, topic, false).values().map(|r| r.len() as i64).sum()
}

/// The producer ids registered on `bootstrap`, each with its flow and origins (cluster ids).
pub(crate) fn registry(bootstrap: &str) -> Vec<(i64, String, Vec<String>)> {
    // Copy-kind marks (`flow:` keys) are not producer ids.
    let entries = read_all(bootstrap, REGISTRY, true).into_values().flatten();
    let entries = entries.filter(|(_, r)| !r.key.as_deref().unwrap_or_default().starts_with(b"flow:"));
    (entries.map(|(_, r)| {
        let v: serde_json::Value = serde_json::from_slice(r.value.as_deref().unwrap_or_default()).unwrap();
        let origins = v["origins"].as_array().unwrap().iter().map(|o| o.as_str().unwrap().to_string()).collect();
        (String::from_utf8(r.key.unwrap()).unwrap().parse().unwrap(), v["flow"].as_str().unwrap().to_string(), origins)
    }))
    .collect()
}

/// The producer ids registered on `bootstrap` by flow `flow`.
fn registered(bootstrap: &str, flow: &str) -> BTreeSet<i64> {
    registry(bootstrap).into_iter().filter(|(_, f, _)| f == flow).map(|(id, ..)| id).collect()
}

/// Each partition's committed data batches of `topic` on `bootstrap`, in log order.
pub(crate) async fn batches(bootstrap: &str, topic: &str) -> BTreeMap<i32, Vec<Batch>> {
    let mut cluster = Cluster::connect(bootstrap, ClientOptions::plaintext("aa-batches-test", Duration::from_secs(10)))
        .await
        .unwrap();
    cluster.refresh(&[topic]).await.unwrap();
    let fetched = fetch_all(&mut cluster, topic, PARTITIONS, 1 << 20).await;
    fetched.into_iter().map(|(p, f)| (p, f.iter().flat_map(|f| f.committed()).cloned().collect())).collect()
}

/// A batch as the copy must keep it: its codec and timestamp attributes (the transactional bit
/// aside), timestamps, record count and records' bytes (compressed).
pub(crate) fn kept(b: &Batch) -> (i16, i64, i64, i32, Vec<u8>) {
    (b.attributes() & !(1 << 4), b.base_timestamp(), b.max_timestamp(), b.record_count(), b.bytes()[61..].to_vec())
}

async fn identity_active_active_of_batches(delivery: &str, back_copy: &str) {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("aabat");
    let topic = format!("{p}-t");
    create_topic(&a, &topic, PARTITIONS, &[]).await;
    create_topic(&b, &topic, PARTITIONS, &[]).await;
    let strait = Strait::start(&p, &config(&p, &a, &b, &topic, delivery, back_copy));
    write_rounds(&[(&a, "a"), (&b, "b")], &topic, ROUNDS, PER_ROUND).await;
    let total = (2 * ROUNDS * PER_ROUND) as i64;
    wait_until("both clusters hold both clusters' records", Duration::from_secs(90), || {
        held(&a, &topic) >= total && held(&b, &topic) >= total
    })
    .await;
    // Several more fetch and commit rounds: an echo would show up as growth.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let logs = strait.logs();
    let copies_batches = format!("strait_flow_copies_batches{{source=\"{p}b\",target=\"{p}a\"}} 1");
    let scrape = http_get(&strait.metrics, "/metrics").map(|(_, s)| s).unwrap_or_default();
    assert!(scrape.contains(&copies_batches), "{copies_batches}: {scrape}");
    assert!(strait.stop().success(), "{logs}");
    let said = format!("copy=\"batches\" why=copy = \"{back_copy}\"");
    assert!(logs.contains(&format!("flow={p}b->{p}a {said}")), "B→A says what it copies and why: {logs}");
    for side in [&a, &b] {
        let v = values(side, &topic);
        assert_eq!(v.len() as i64, total, "every record on {side}: {logs}");
        assert!(v.values().all(|n| *n == 1), "every record once on {side}");
    }
    // The batches born on A (its applications' producers) are B's batches written by the flow
    // A→B, in order and byte for byte; likewise from B to A.
    for ((from, from_name), (to, to_name)) in [((&a, "a"), (&b, "b")), ((&b, "b"), (&a, "a"))] {
        let flows = registered(to, &format!("{p}{from_name}->{p}{to_name}"));
        assert!(!flows.is_empty(), "the flow {from_name}->{to_name} registered its producer id");
        let mine = registered(from, &format!("{p}{to_name}->{p}{from_name}"));
        let (born, copied) = (batches(from, &topic).await, batches(to, &topic).await);
        for partition in 0..PARTITIONS {
            let born: Vec<_> = born[&partition].iter().filter(|b| !mine.contains(&b.producer_id())).map(kept).collect();
            let copied: Vec<_> =
                copied[&partition].iter().filter(|b| flows.contains(&b.producer_id())).map(kept).collect();
            assert!(!born.is_empty(), "records born on {from_name} in partition {partition}");
            assert!(born == copied, "{from_name}'s batches of partition {partition} stored as they are on {to_name}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn identity_active_active_of_batch_flows_never_echoes_at_least_once() {
    // `auto` on one side: it takes batches, as the flow back copies batches too.
    identity_active_active_of_batches("at_least_once", "auto").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn identity_active_active_of_batch_flows_never_echoes_exactly_once() {
    identity_active_active_of_batches("exactly_once", "batches").await;
}
