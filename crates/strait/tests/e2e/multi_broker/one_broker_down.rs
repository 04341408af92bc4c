//! A broker is only its own partitions: on a three-broker source, partitions 0–5 on nodes 1–2
//! and 6–11 on nodes 3–2, node 3 killed (SIGKILL) for 20 s and then frozen (SIGSTOP) for 20 s.
//! Kafka keeps 0–5 readable and growing the whole time; each flow (batches at-least-once and
//! exactly-once, records) must keep copying them within a few seconds of the source, and copy
//! every record of all 12 once node 3 is back.
//!
//! Before the batch reader fetched each leader on its own, a fetch round failing at node 3
//! dropped the answers of the others and was retried whole: the run saw all 12 target
//! partitions stop for 16 s when node 3 was killed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::FutureRecord;
use strait::config::{Config, Flow};
use strait_testkit::multi::Control;

use super::{fully_replicated, node, Turn, TURN};
use crate::support::*;

const PARTITIONS: i32 = 12;
/// Partitions 0 to this - 1 are led by node 1 (replicas 1, 2), the rest by node 3 (3, 2).
const HEALTHY: i32 = 6;
/// How long node 3 stays down or frozen.
const OUTAGE: Duration = Duration::from_secs(20);
/// The longest a healthy partition may wait behind its source during an outage: a commit
/// interval and a fetch wait, with room for a loaded machine.
const LONGEST_STALL: Duration = Duration::from_secs(5);

/// Produces to the healthy partitions, 20 records each every 50 ms, until `stop`.
async fn produce_healthy(source: String, topic: String, stop: Arc<AtomicBool>) {
    let p = producer_with(&source, &[("acks", "all"), ("linger.ms", "5")]);
    let mut seq = 0;
    while !stop.load(Ordering::SeqCst) {
        let mut acks = Vec::new();
        for partition in 0..HEALTHY {
            for i in 0..20 {
                let value = format!("p{partition}-{}", seq + i);
                let record = FutureRecord::<[u8], [u8]>::to(&topic).partition(partition).payload(value.as_bytes());
                acks.push(p.send_result(record).map_err(|(e, _)| e).expect("queued"));
            }
        }
        for ack in acks {
            ack.await.expect("ack").expect("produced to a healthy partition");
        }
        seq += 20;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A request to the three-node cluster's control about one node.
type NodeRequest = fn(&Control, i32) -> std::io::Result<()>;

/// One sample: each flow's saved positions of the healthy partitions and when they were all
/// read, then the source's end of each and when they were all read.
struct Sample {
    positions_at: Instant,
    positions: Vec<Vec<i64>>,
    ends_at: Instant,
    ends: Vec<i64>,
}

/// The end of `topic`/`partition` on `source`, asked again while a leader moves.
async fn end_of(source: &BaseConsumer, topic: &str, partition: i32) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match source.fetch_watermarks(topic, partition, Duration::from_secs(5)) {
            Ok((_, end)) => return end,
            Err(e) if Instant::now() > deadline => panic!("the end of {topic}/{partition}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

async fn sample(source: &BaseConsumer, topic: &str, flows: &[(&str, Flow)]) -> Sample {
    let mut positions = Vec::new();
    for (_, flow) in flows {
        let saved = strait::positions::load(&flow.target, &flow.name).await.unwrap_or_default();
        positions.push((0..HEALTHY).map(|p| saved.get(&(topic.to_string(), p)).map_or(0, |s| s.next_offset)).collect());
    }
    let positions_at = Instant::now();
    let mut ends = Vec::new();
    for p in 0..HEALTHY {
        ends.push(end_of(source, topic, p).await);
    }
    Sample { positions_at, positions, ends_at: Instant::now(), ends }
}

/// Per flow, the longest a healthy partition took to copy what its source held at a sample: from
/// when the ends were read to when positions past them were (a slow reading of either is not
/// counted as a stall).
fn longest_stalls(samples: &[Sample], flows: usize) -> Vec<Duration> {
    (0..flows)
        .map(|f| {
            let mut longest = Duration::ZERO;
            for (i, s) in samples.iter().enumerate() {
                for p in 0..HEALTHY as usize {
                    let caught_up = samples[i + 1..].iter().find(|later| later.positions[f][p] >= s.ends[p]);
                    let until =
                        caught_up.map_or_else(|| samples.last().unwrap().positions_at, |later| later.positions_at);
                    longest = longest.max(until.saturating_duration_since(s.ends_at));
                }
            }
            longest
        })
        .collect()
}

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
    let source: BaseConsumer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", &three)
        .set("group.id", "strait-test-watermarks")
        .create()
        .unwrap();
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
        let producing = tokio::spawn(produce_healthy(three.clone(), topic.clone(), stop.clone()));
        node(&control, 3, fault).await;
        let (start, mut samples) = (Instant::now(), Vec::new());
        while start.elapsed() < OUTAGE {
            samples.push(sample(&source, &topic, &flows).await);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Sampled on while node 3 comes back: what the source held at the outage's last samples
        // is copied after it too.
        let healing = {
            let control = control.clone();
            tokio::spawn(async move { node(&control, 3, heal).await })
        };
        let back = Instant::now();
        while !healing.is_finished() || back.elapsed() < Duration::from_secs(5) {
            samples.push(sample(&source, &topic, &flows).await);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        healing.await.unwrap();
        stop.store(true, Ordering::SeqCst);
        producing.await.unwrap();
        let stalls = longest_stalls(&samples[..], flows.len());
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
    let mut ends = BTreeMap::new();
    for topic in &topics {
        for p in 0..PARTITIONS {
            ends.insert((topic.clone(), p), end_of(&source, topic, p).await);
        }
    }
    let mut failures = Vec::new();
    for ((mode, flow), strait) in flows.iter().zip(straits) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let saved = strait::positions::load(&flow.target, &flow.name).await.unwrap_or_default();
            let behind: Vec<&(String, i32)> = ends
                .iter()
                .filter(|(tp, end)| saved.get(*tp).is_none_or(|s| s.next_offset < **end))
                .map(|(tp, _)| tp)
                .collect();
            if behind.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                failures.push(format!("{mode}: {behind:?} not copied to the end 120 s after node 3 came back"));
                break;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
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
