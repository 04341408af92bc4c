//! A flow that starts while one of its source partitions has no leader (its only replica's
//! broker down) copies the others, and that partition once its broker is back. Before, the batch
//! reader asked the log starts of all its new partitions in one request, which failed whole on
//! the leaderless one and was retried forever: found when a ring test's flow was assigned a
//! heartbeats topic that another test deleted, and copied nothing for 120 s.

use std::time::Duration;

use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use strait::config::Config;
use strait_testkit::multi::Control;

use super::{fully_replicated, node, Turn, TURN};
use crate::support::*;

const PARTITIONS: i32 = 3;
const PER_PARTITION: i32 = 100;
/// The node holding the lone replica of the topic that loses its leader.
const LONE: i32 = 3;

#[tokio::test(flavor = "multi_thread")]
async fn a_flow_starting_beside_a_leaderless_source_partition_copies_the_others() {
    let (three, control) = three_nodes();
    let turn = Turn { control: control.clone(), _turn: TURN.lock().await };
    turn.control.heal().expect("the three-node cluster is whole");
    fully_replicated(&three).await;
    let target = cluster(1);
    let p = unique("leaderless");
    let (lost, kept) = (format!("{p}-lost"), format!("{p}-kept"));
    let lone: Vec<&[i32]> = vec![&[LONE][..]];
    let elsewhere: Vec<&[i32]> = (0..PARTITIONS).map(|_| &[1, 2][..]).collect();
    let topics = [
        NewTopic::new(&lost, 1, TopicReplication::Variable(&lone)),
        NewTopic::new(&kept, PARTITIONS, TopicReplication::Variable(&elsewhere)),
    ];
    for created in admin(&three).create_topics(&topics, &AdminOptions::new()).await.expect("create topics") {
        created.expect("topic created");
    }
    produce(&three, &lost, &(0..10).map(|i| Rec::simple(0, &format!("l{i}"))).collect::<Vec<_>>()).await;
    let records: Vec<Rec> =
        (0..PARTITIONS * PER_PARTITION).map(|i| Rec::simple(i % PARTITIONS, &format!("k{i}"))).collect();
    produce(&three, &kept, &records).await;

    node(&control, LONE, Control::kill).await;
    let mut runs = Vec::new();
    for copy in ["batches", "records"] {
        let config = two_cluster_config(
            (&format!("{p}{copy}s"), &three, ""),
            (&format!("{p}{copy}d"), &target, ""),
            &format!("topics = [\"{lost}\", \"{kept}\"]\ncopy = \"{copy}\"\n"),
            "",
        );
        let flow = Config::parse(&config).unwrap().remove(0);
        runs.push((copy, flow, Strait::start(&format!("{p}-{copy}"), &config)));
    }
    for (copy, flow, strait) in &runs {
        let copied = tokio::time::timeout(
            Duration::from_secs(60),
            wait_replicated(flow, &kept, PARTITIONS, PER_PARTITION as usize, Duration::from_secs(90)),
        )
        .await;
        assert!(copied.is_ok(), "{copy}: the partitions with a leader not copied within 60 s\n{}", strait.logs());
    }
    node(&control, LONE, Control::restart).await;
    for (copy, flow, strait) in &runs {
        let copied = tokio::time::timeout(
            Duration::from_secs(90),
            wait_replicated(flow, &lost, 1, 10, Duration::from_secs(120)),
        )
        .await;
        assert!(copied.is_ok(), "{copy}: the partition not copied once its leader is back\n{}", strait.logs());
    }
    for (copy, _, strait) in runs {
        let logs = strait.logs();
        assert!(strait.stop().success(), "{copy}: exits cleanly\n{logs}");
    }
    drop(turn);
}
