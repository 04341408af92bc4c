//! Replication through a three-broker cluster (RF 3, min ISR 2, unclean leader election off) in
//! the shape of Kafka's own replication system tests: 300,000 sequenced records produced with
//! `acks=all` while the leader of the partitions is bounced 5 times (SIGKILL, restart) on the
//! target and then on the source, and while all three target brokers are restarted one by one
//! with a controlled shutdown (SIGTERM). Each case runs an at-least-once, an exactly-once and
//! two batch-copying (`copy = "batches"`, at-least-once and exactly-once) flows side by side
//! through the same faults: no record lost in any, none duplicated exactly-once
//! (`read_committed`), and no ERROR line in Strait's log (a broker bounce is no failure of
//! Strait's). Lost, duplicated and time to resume are printed per case.
//!
//! The three-node cluster is shared (`scripts/test` starts it): the cases take turns on it and
//! leave every node up when they end, passed or failed.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::producer::{FutureRecord, Producer};
use strait::config::{Config, Flow};
use strait_testkit::multi::{self, Control};

use crate::support::*;

mod batches;
mod leaderless;
mod one_broker_down;
mod stalls;
mod start_while_down;
mod target_broker_down;
mod watermarks;

const PARTITIONS: i32 = 3;
const PER_PARTITION: usize = 100_000;
const BOUNCES: usize = 5;
/// Records produced per partition per round, between two waits for the acks.
const CHUNK: usize = 500;

/// Turns on the shared three-node cluster.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// This case's turn on the shared cluster; on drop, even in a panic, every node is brought back
/// (restarted, continued) before the next case's turn.
struct Turn {
    control: Control,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        if let Err(e) = self.control.heal() {
            eprintln!("three-node cluster not healed: {e}");
        }
    }
}

/// A control request, off the async workers (a restart waits for the node).
async fn node(control: &Control, id: i32, request: fn(&Control, i32) -> io::Result<()>) {
    let control = control.clone();
    tokio::task::spawn_blocking(move || request(&control, id)).await.unwrap().unwrap_or_else(|e| panic!("{e}"));
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Source,
    Target,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fault {
    /// SIGKILL the leader of the partitions, restart it: [`BOUNCES`] times.
    LeaderBounce,
    /// SIGTERM each node in turn (controlled shutdown), restart it.
    RollingRestart,
}

/// A topic of [`PARTITIONS`] partitions all with replicas `[1, 2, 3]`: one node leads them all,
/// and the next leader after a bounce is the same for all of them.
async fn create_led_by_one_node(bootstrap: &str, topic: &str) {
    let replicas: Vec<&[i32]> = (0..PARTITIONS).map(|_| &multi::NODE_IDS[..]).collect();
    let t = NewTopic::new(topic, PARTITIONS, TopicReplication::Variable(&replicas));
    let r = admin(bootstrap).create_topics([&t], &rdkafka::admin::AdminOptions::new()).await.expect("create topics");
    r[0].as_ref().expect("topic created");
}

/// Produces sequences `seqs` of every partition (`p<partition>-<seq>`) with `acks=all`, in
/// chunks of [`CHUNK`] per partition 100 ms apart; `sent` counts the records handed to the
/// producer (acked or not).
async fn produce_round(bootstrap: String, topic: String, seqs: std::ops::Range<usize>, sent: Arc<AtomicUsize>) {
    let p = producer_with(&bootstrap, &[("acks", "all")]);
    let starts: Vec<usize> = seqs.clone().step_by(CHUNK).collect();
    for start in starts {
        let mut acks = Vec::new();
        for s in start..(start + CHUNK).min(seqs.end) {
            for partition in 0..PARTITIONS {
                let value = format!("p{partition}-{s}");
                let mut record = FutureRecord::<[u8], [u8]>::to(&topic).partition(partition).payload(value.as_bytes());
                loop {
                    match p.send_result(record) {
                        Ok(ack) => {
                            sent.fetch_add(1, Ordering::SeqCst);
                            break acks.push(ack);
                        }
                        Err((_, back)) => {
                            record = back;
                            p.poll(Duration::from_millis(10));
                        }
                    }
                }
            }
        }
        for ack in acks {
            ack.await.expect("ack").expect("produced with acks=all");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    p.flush(Duration::from_secs(30)).expect("flush");
}

/// Waits until every node of the cluster is back in every ISR.
async fn fully_replicated(bootstrap: &str) {
    wait_until("every partition fully replicated", Duration::from_secs(120), || {
        multi::fully_replicated(bootstrap).unwrap_or(false)
    })
    .await;
}

/// One flow of the case: its mode, config and remote topic.
struct Replica {
    mode: &'static str,
    flow: Flow,
    remote: String,
    strait: Strait,
}

/// Runs `fault` on `side` with an at-least-once, an exactly-once and a batch flow side by side; asserts
/// nothing lost, no duplicate exactly-once, no ERROR log line; prints the counts.
async fn case(name: &str, side: Side, fault: Fault) {
    let (three, control) = three_nodes();
    let turn = Turn { control: control.clone(), _turn: TURN.lock().await };
    turn.control.heal().expect("the three-node cluster is whole");
    fully_replicated(&three).await;
    let started = Instant::now();
    let (source, target) = match side {
        Side::Source => (three.clone(), cluster(1)),
        Side::Target => (cluster(1), three.clone()),
    };
    let p = unique("mb");
    let topic = format!("{p}-t");
    match side {
        Side::Source => create_led_by_one_node(&source, &topic).await,
        Side::Target => create_topic(&source, &topic, PARTITIONS, &[]).await,
    }
    let mut replicas = Vec::new();
    let modes = [
        ("at-least-once", "copy = \"records\"\n"),
        ("exactly-once", "copy = \"records\"\ndelivery = \"exactly_once\"\n"),
        ("batches", "copy = \"batches\"\n"),
        ("batches exactly-once", "copy = \"batches\"\ndelivery = \"exactly_once\"\n"),
    ];
    for (i, (mode, delivery)) in modes.into_iter().enumerate() {
        let (src, dst) = (format!("{p}{i}s"), format!("{p}{i}d"));
        let remote = format!("{src}.{topic}");
        if side == Side::Target {
            create_led_by_one_node(&target, &remote).await;
        }
        let config = two_cluster_config(
            (&src, &source, ""),
            (&dst, &target, ""),
            &format!("topics = [\"{topic}\"]\ncommit_interval_ms = 300\n{delivery}"),
            "",
        );
        let flow = Config::parse(&config).unwrap().remove(0);
        let strait = Strait::start(&format!("{p}-{i}"), &config);
        replicas.push(Replica { mode, flow, remote, strait });
    }
    // The partitions whose leader is bounced.
    let led = if side == Side::Source { topic.clone() } else { replicas[0].remote.clone() };

    let rounds = if fault == Fault::LeaderBounce { BOUNCES } else { multi::NODE_IDS.len() };
    let sent = Arc::new(AtomicUsize::new(0));
    // A first chunk before any fault, the rest in rounds of one fault each.
    produce_round(source.clone(), topic.clone(), 0..CHUNK, sent.clone()).await;
    // Faults start once both flows run steadily: records copied, and every source topic they
    // replicate (MM2 replicates `heartbeats` too) routed to its target topic. (A flow meeting a
    // new source topic while a broker is down can fail for good: see the report of issue 23.)
    let heartbeats = topic_exists(&source, "heartbeats");
    for r in &replicas {
        let src = r.remote.split_once('.').unwrap().0;
        wait_until("replication under way", Duration::from_secs(60), || {
            count(&target, &r.remote).is_some_and(|n| n > 0)
                && (!heartbeats || topic_exists(&target, &format!("{src}.heartbeats")))
        })
        .await;
    }

    let mut resumed: Vec<Vec<f64>> = vec![Vec::new(); replicas.len()];
    for round in 0..rounds {
        fully_replicated(&three).await;
        let share = |r: usize| CHUNK + r * (PER_PARTITION - CHUNK) / rounds;
        let seqs = share(round)..share(round + 1);
        // The fault comes a third into the round's records: some are produced after it.
        let third = sent.load(Ordering::SeqCst) + seqs.len() * PARTITIONS as usize / 3;
        let producer = tokio::spawn(produce_round(source.clone(), topic.clone(), seqs, sent.clone()));
        wait_until("a third of the round produced", Duration::from_secs(60), || sent.load(Ordering::SeqCst) >= third)
            .await;
        let id = match fault {
            Fault::LeaderBounce => {
                multi::leader(&three, &led, 0).unwrap().unwrap_or_else(|| panic!("{led}/0 has a leader"))
            }
            Fault::RollingRestart => multi::NODE_IDS[round],
        };
        // At most this many records exist before the fault: once the target holds more, it holds
        // one produced after it, and the flow resumed.
        let before = sent.load(Ordering::SeqCst);
        let fault_at = Instant::now();
        match fault {
            Fault::LeaderBounce => node(&control, id, Control::kill).await,
            Fault::RollingRestart => node(&control, id, Control::stop).await,
        }
        let mut waiting: Vec<usize> = (0..replicas.len()).collect();
        while !waiting.is_empty() {
            assert!(
                fault_at.elapsed() < Duration::from_secs(90),
                "{name}: flows {waiting:?} (0 at-least-once, 1 exactly-once, 2 batches, 3 batches exactly-once) not resumed within 90 s of node {id} going down: {before} records sent to the source then, {} now; the target holds {:?}",
                sent.load(Ordering::SeqCst),
                replicas.iter().map(|r| count(&target, &r.remote)).collect::<Vec<_>>()
            );
            waiting.retain(|&i| {
                let back = count(&target, &replicas[i].remote).is_some_and(|n| n > before as i64);
                if back {
                    resumed[i].push(fault_at.elapsed().as_secs_f64());
                }
                !back
            });
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        node(&control, id, Control::restart).await;
        producer.await.unwrap();
        eprintln!(
            "{name}: round {round}: node {id} down and back, {:.1} s into the case",
            started.elapsed().as_secs_f64()
        );
    }
    fully_replicated(&three).await;

    let mut failures = Vec::new();
    for Replica { mode, flow, remote, strait } in replicas {
        wait_replicated(&flow, &topic, PARTITIONS, PER_PARTITION, Duration::from_secs(180)).await;
        let logs = strait.logs();
        assert!(strait.stop().success(), "{name} {mode}: strait exits cleanly\n{logs}");
        let report = sequence_report(&target, &remote, PARTITIONS, PER_PARTITION);
        let lost: usize = report.values().map(|s| s.missing).sum();
        let duplicated: usize = report.values().map(|s| s.duplicated).sum();
        let reordered: usize = report.values().map(|s| s.reordered).sum();
        // Lines logged at ERROR (the level after the timestamp), not librdkafka's ERROR facility
        // logged at WARN (a heartbeats topic another test deleted, say).
        let errors: Vec<&str> = logs.lines().filter(|l| l.split_whitespace().nth(1) == Some("ERROR")).collect();
        let times = resumed.remove(0).iter().map(|t| format!("{t:.1}")).collect::<Vec<_>>().join(", ");
        eprintln!(
            "multi-broker {name}, {mode}: {} records, {lost} lost, {duplicated} duplicated, {reordered} out of order, resumed [{times}] s after each fault, {} ERROR log lines, {} WARN lines",
            PER_PARTITION * PARTITIONS as usize,
            errors.len(),
            logs.lines().filter(|l| l.contains(" WARN ")).count(),
        );
        if lost > 0 {
            failures.push(format!("{mode}: {lost} records lost: {report:?}"));
        }
        if mode.ends_with("exactly-once") && duplicated > 0 {
            failures.push(format!("{mode}: {duplicated} duplicated: {report:?}"));
        }
        if !errors.is_empty() {
            failures.push(format!("{mode}: ERROR log lines:\n{}", errors.join("\n")));
        }
    }
    eprintln!("multi-broker {name}: {:.1} s", started.elapsed().as_secs_f64());
    drop(turn);
    assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn target_leader_bounced_5_times_in_every_mode() {
    case("target leader bounced 5 times", Side::Target, Fault::LeaderBounce).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn source_leader_bounced_5_times_in_every_mode() {
    case("source leader bounced 5 times", Side::Source, Fault::LeaderBounce).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn target_rolling_restart_with_controlled_shutdown_in_every_mode() {
    case("target rolling restart (SIGTERM)", Side::Target, Fault::RollingRestart).await;
}
