//! A ring of batch flows (issue 45): A→B, B→C and C→A under the identity policy, copying whole
//! batches, with lz4 records written on all three clusters while the flows run. Each flow passes
//! on what the flow before it wrote through a producer of its own, registered with the batches'
//! origins and its source, and drops what came from its target: each cluster ends with every
//! record of all three once, in the order of the cluster it was copied from, and a batch born on A
//! reaches C, two flows on, byte for byte.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::batches_active_active::{batches, held, kept, registry, values, write_rounds, PARTITIONS};
use crate::support::*;

const ROUNDS: usize = 4;
const PER_ROUND: usize = 150;

/// The ring's config: clusters `<p>a`, `<p>b`, `<p>c` and a flow from each to the next.
fn config(p: &str, bootstraps: [&str; 3], topic: &str) -> String {
    let names = ["a", "b", "c"].map(|n| format!("{p}{n}"));
    let mut c = String::new();
    for (alias, bootstrap) in names.iter().zip(bootstraps) {
        c += &format!("[[clusters]]\nalias = \"{alias}\"\nbootstrap_servers = \"{bootstrap}\"\n");
    }
    for i in 0..3 {
        let (source, target) = (&names[i], &names[(i + 1) % 3]);
        c += &format!(
            "[[flows]]\nsource = \"{source}\"\ntarget = \"{target}\"\nreplication_policy = \"identity\"\ncopy = \"batches\"\nrefresh_topics_interval_ms = 1000\ntopics = [\"{topic}\"]\n"
        );
    }
    c
}

#[tokio::test(flavor = "multi_thread")]
async fn a_ring_of_three_batch_flows_holds_each_record_once_on_each_cluster() {
    let clusters = [cluster(1), cluster(2), cluster(3)];
    let [a, b, c] = [&clusters[0], &clusters[1], &clusters[2]];
    let p = unique("ring");
    let topic = format!("{p}-t");
    for side in &clusters {
        create_topic(side, &topic, PARTITIONS, &[]).await;
    }
    let strait = Strait::start(&p, &config(&p, [a, b, c], &topic));
    write_rounds(&[(a, "a"), (b, "b"), (c, "c")], &topic, ROUNDS, PER_ROUND).await;
    let total = (3 * ROUNDS * PER_ROUND) as i64;
    wait_until("every cluster holds the ring's records", Duration::from_secs(120), || {
        clusters.iter().all(|side| held(side, &topic) >= total)
    })
    .await;
    // Several more rounds: a record going round again would show up as growth.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");
    for side in &clusters {
        let v = values(side, &topic);
        assert_eq!(v.len() as i64, total, "every record on {side}: {logs}");
        assert!(v.values().all(|n| *n == 1), "every record once on {side}: {logs}");
    }
    // On B, the flow A→B wrote A's own batches and those C→A wrote on A through two producers,
    // and kept their order across them: each partition holds them as A does.
    let not_from = |side: &str, name: &str, partition: i32| -> Vec<Vec<u8>> {
        let records = read_all(side, &topic, false).remove(&partition).unwrap_or_default();
        let values = records.into_iter().map(|(_, r)| r.value.unwrap_or_default());
        values.filter(|v| !v.starts_with(format!("from-{name}-").as_bytes())).collect()
    };
    for partition in 0..PARTITIONS {
        let (on_a, on_b) = (not_from(a, "b", partition), not_from(b, "b", partition));
        assert!(on_a.iter().any(|v| v.starts_with(b"from-c-")), "C's records reached A");
        assert!(on_a == on_b, "partition {partition}: A's and C's records in A's order on B");
    }
    // On C, the flow B→C wrote A's batches with a producer registered with two origins (A, B);
    // they are A's own batches (not the flow C→A's), in order and byte for byte.
    let relayed: BTreeSet<i64> = (registry(c).into_iter())
        .filter(|(_, flow, origins)| *flow == format!("{p}b->{p}c") && origins.len() == 2)
        .map(|(id, ..)| id)
        .collect();
    assert!(!relayed.is_empty(), "B→C registered a producer for A's batches: {logs}");
    let on_a: BTreeSet<i64> =
        registry(a).into_iter().filter(|(_, flow, _)| *flow == format!("{p}c->{p}a")).map(|(id, ..)| id).collect();
    let (born, copied) = (batches(a, &topic).await, batches(c, &topic).await);
    for partition in 0..PARTITIONS {
        let born: Vec<_> = born[&partition].iter().filter(|b| !on_a.contains(&b.producer_id())).map(kept).collect();
        let copied: Vec<_> =
            copied[&partition].iter().filter(|b| relayed.contains(&b.producer_id())).map(kept).collect();
        assert!(!born.is_empty(), "records born on A in partition {partition}");
        assert!(born == copied, "A's batches of partition {partition} stored as they are on C, two flows on");
    }
}
