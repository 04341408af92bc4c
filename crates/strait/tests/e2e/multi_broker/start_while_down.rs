//! A flow starting again while one target broker is down: a slot lost and won back, a restart
//! in an outage. The broker's partitions move to the other two (RF 3), so everything the start
//! reads (saved positions, offset syncs) stays readable; the client only fails to connect to the
//! down node. Before, a state read took that connection failure (librdkafka's
//! `BrokerTransportFailure`, an event it goes on retrying past) for the end of the read: the start
//! failed every attempt until the node was back, and a target bounce in CI kept a flow whose slot
//! had moved from starting for 80 s.

use std::time::Duration;

use strait::config::Config;
use strait_testkit::multi::Control;

use super::{fully_replicated, node, Turn, TURN};
use crate::support::*;

const PARTITIONS: i32 = 3;
const PER_PARTITION: i32 = 200;
/// The node taken down: the second bootstrap address, which librdkafka tried first in each of
/// the starts that failed here (2 of 2 with node 2 down; 0 of 2 with node 3).
const DOWN: i32 = 2;

#[tokio::test(flavor = "multi_thread")]
async fn flows_restarted_while_a_target_broker_is_down_start_and_copy() {
    let (three, control) = three_nodes();
    let turn = Turn { control: control.clone(), _turn: TURN.lock().await };
    turn.control.heal().expect("the three-node cluster is whole");
    fully_replicated(&three).await;
    let source = cluster(1);
    let p = unique("startdown");
    let topic = format!("{p}-t");
    create_topic(&source, &topic, PARTITIONS, &[]).await;
    let batch = |from: i32| -> Vec<Rec> {
        (from..from + PARTITIONS * PER_PARTITION).map(|i| Rec::simple(i % PARTITIONS, &format!("r{i}"))).collect()
    };
    produce(&source, &topic, &batch(0)).await;

    // Each copy kind runs once with every node up, so its state (positions, offset syncs) exists.
    let kinds = ["records", "batches"];
    let mut flows = Vec::new();
    for (i, copy) in kinds.into_iter().enumerate() {
        let config = two_cluster_config(
            (&format!("{p}{i}s"), &source, ""),
            (&format!("{p}{i}d"), &three, ""),
            &format!("topics = [\"{topic}\"]\ncommit_interval_ms = 300\ncopy = \"{copy}\"\n"),
            "",
        );
        let flow = Config::parse(&config).unwrap().remove(0);
        let strait = Strait::start(&format!("{p}-{copy}-first"), &config);
        wait_replicated(&flow, &topic, PARTITIONS, PER_PARTITION as usize, Duration::from_secs(90)).await;
        assert!(strait.stop().success(), "{copy}: the first run exits cleanly");
        flows.push((copy, config, flow));
    }

    node(&control, DOWN, Control::kill).await;
    produce(&source, &topic, &batch(PARTITIONS * PER_PARTITION)).await;
    let restarted: Vec<_> =
        flows.iter().map(|(copy, config, _)| Strait::start(&format!("{p}-{copy}-again"), config)).collect();
    for ((copy, _, flow), strait) in flows.iter().zip(&restarted) {
        let copied = tokio::time::timeout(
            Duration::from_secs(60),
            wait_replicated(flow, &topic, PARTITIONS, 2 * PER_PARTITION as usize, Duration::from_secs(120)),
        )
        .await;
        assert!(copied.is_ok(), "{copy}: not copied within 60 s of starting with node {DOWN} down\n{}", strait.logs());
    }
    for ((copy, _, flow), strait) in flows.iter().zip(restarted) {
        let logs = strait.logs();
        assert!(strait.stop().success(), "{copy}: exits cleanly\n{logs}");
        let remote = format!("{}.{topic}", flow.source.alias);
        let held = count(&three, &remote).unwrap_or(0);
        assert!(held >= i64::from(2 * PARTITIONS * PER_PARTITION), "{copy}: the target holds {held} records\n{logs}");
        let failed: Vec<&str> = logs.lines().filter(|l| l.contains("flow could not start")).collect();
        eprintln!(
            "{copy}: started with node {DOWN} down after {} failed start attempts; {held} on the target",
            failed.len()
        );
        assert!(failed.is_empty(), "{copy}: a start failed on a broker the flow does not need:\n{}", failed.join("\n"));
    }
    drop(turn);
}
