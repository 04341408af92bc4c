//! A broker is only its own partitions: on a three-broker source, partitions 0–5 on nodes 1–2
//! and 6–11 on nodes 3–2, node 3 killed (SIGKILL) for 20 s and then frozen (SIGSTOP) for 20 s.
//! Kafka keeps 0–5 readable and growing the whole time; each flow (batches at-least-once and
//! exactly-once, records) must keep copying them within a few seconds of the source, and copy
//! every record of all 12 once node 3 is back.
//!
//! Before the batch reader fetched each leader on its own, a fetch round failing at node 3
//! dropped the answers of the others and was retried whole: the run saw all 12 target
//! partitions stop for 16 s when node 3 was killed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use strait::config::Config;
use strait_testkit::multi::Control;

use super::stalls::{self, produce_to, NodeRequest, Watched};
use super::{fully_replicated, Turn, TURN};
use crate::support::*;

const PARTITIONS: i32 = 12;
/// Partitions 0 to this - 1 are led by node 1 (replicas 1, 2), the rest by node 3 (3, 2).
const HEALTHY: i32 = 6;
/// How long node 3 stays down or frozen.
const OUTAGE: Duration = Duration::from_secs(20);
/// The longest a healthy partition may wait behind its source during an outage: a commit
/// interval and a fetch wait, with room for a loaded machine.
const LONGEST_STALL: Duration = Duration::from_secs(5);

/// Creates `topic` with partitions 0-5 on nodes 1-2 and the rest on nodes 3-2 (node 3 their
/// leader), and puts 50 records in each partition.
async fn create_split(three: &str, topic: &str) {
    let replicas: Vec<&[i32]> = (0..PARTITIONS).map(|p| if p < HEALTHY { &[1, 2][..] } else { &[3, 2][..] }).collect();
    let new = NewTopic::new(topic, PARTITIONS, TopicReplication::Variable(&replicas));
    let created = admin(three).create_topics([&new], &AdminOptions::new()).await.expect("create topic");
    created[0].as_ref().expect("topic created");
    let records: Vec<Rec> = (0..PARTITIONS * 50).map(|i| Rec::simple(i % PARTITIONS, &format!("pre{i}"))).collect();
    produce(three, topic, &records).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_source_broker_down_or_frozen_never_stalls_the_partitions_led_by_others() {
    let (three, control) = three_nodes();
    let turn = Turn { control: control.clone(), _turn: TURN.lock().await };
    turn.control.heal().expect("the three-node cluster is whole");
    fully_replicated(&three).await;
    let target = cluster(1);
    let p = unique("onedown");
    let modes = [
        ("batches", "copy = \"batches\"\n"),
        ("batches exactly-once", "copy = \"batches\"\ndelivery = \"exactly_once\"\n"),
        ("records", ""),
    ];
    let mut flows = Vec::new();
    let mut straits = Vec::new();
    for (i, (mode, extra)) in modes.into_iter().enumerate() {
        let (src, dst) = (format!("{p}{i}s"), format!("{p}{i}d"));
        let config = two_cluster_config(
            (&src, &three, ""),
            (&dst, &target, ""),
            &format!("topics = [\"{p}-.*\"]\ncommit_interval_ms = 300\n{extra}"),
            "",
        );
        flows.push((mode, Config::parse(&config).unwrap().remove(0)));
        straits.push(Strait::start(&format!("{p}-{i}"), &config));
    }
    let source = stalls::ends_reader(&three);
    let mut report = Vec::new();
    let faults: [(&str, NodeRequest, NodeRequest); 2] =
        [("killed", Control::kill, Control::restart), ("frozen", Control::pause, Control::resume)];
    let mut topics = Vec::new();
    for (what, fault, heal) in faults {
        // A topic of its own: node 3 leads 6-11 from its creation (after an outage, their
        // leadership stays with node 2).
        fully_replicated(&three).await;
        let topic = format!("{p}-{what}");
        create_split(&three, &topic).await;
        for (_, flow) in &flows {
            wait_replicated(flow, &topic, PARTITIONS, 50, Duration::from_secs(90)).await;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let producing = tokio::spawn(produce_to(three.clone(), topic.clone(), 0..HEALTHY, stop.clone()));
        let watched = Watched { source: &source, topic: &topic, flows: &flows, healthy: HEALTHY, remote: None };
        let stalls = watched.outage(&control, 3, (fault, heal), OUTAGE).await.positions;
        stop.store(true, Ordering::SeqCst);
        producing.await.unwrap();
        for ((mode, _), stall) in flows.iter().zip(&stalls) {
            eprintln!(
                "node 3 {what} for {OUTAGE:?}, {mode}: longest stall of a partition led by node 1: {:.1} s",
                stall.as_secs_f64()
            );
        }
        report.push((what, stalls));
        topics.push(topic);
    }
    fully_replicated(&three).await;

    // Every record of all 12 partitions of both topics is copied once node 3 is back.
    let ends = stalls::ends(&source, &topics, PARTITIONS).await;
    let mut failures = Vec::new();
    for ((mode, flow), strait) in flows.iter().zip(straits) {
        if let Err(failure) = stalls::copied_to(mode, flow, &ends).await {
            failures.push(failure);
        }
        let logs = strait.logs();
        assert!(strait.stop().success(), "{mode}: strait exits cleanly\n{logs}");
        if mode.starts_with("batches") && !logs.contains("a source broker does not answer fetches") {
            failures.push(format!("{mode}: no WARN for node 3's outage\n{logs}"));
        }
    }
    drop(turn);
    for (what, stalls) in &report {
        for ((mode, _), stall) in flows.iter().zip(stalls) {
            if *stall > LONGEST_STALL {
                failures.push(format!("{mode}, node 3 {what}: partitions 0-5 stalled {stall:?} behind the source"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
