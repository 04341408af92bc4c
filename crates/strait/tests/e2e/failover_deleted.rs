//! A planned failover whose flow's source topic is deleted while it waits for the copy to catch
//! up: the deleted topic's partitions leave the check (nothing of them is left to replicate) and
//! the group moves on the topic kept. Before, every check asked the deleted partitions' offsets
//! with the others', failed, and the failover stopped as if the source did not answer.

use std::process::Command;
use std::time::Duration;

use rdkafka::admin::AdminOptions;
use strait::config::Config;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_planned_failover_moves_the_groups_past_a_topic_deleted_while_it_waits() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("fodel");
    let (src, dst) = (format!("{p}s"), format!("{p}d"));
    let (kept, gone) = (format!("{p}-kept"), format!("{p}-gone"));
    let records = |n: usize| (0..n).map(|i| Rec::simple(0, &format!("r{i}"))).collect::<Vec<_>>();
    for topic in [&kept, &gone] {
        create_topic(&a, topic, 1, &[]).await;
        produce(&a, topic, &records(20)).await;
    }
    let config = two_cluster_config((&src, &a, ""), (&dst, &b, ""), &format!("topics = [\"{p}-.*\"]"), "");
    let flow = Config::parse(&config).unwrap().remove(0);
    let strait = Strait::start(&p, &config);
    wait_replicated(&flow, &kept, 1, 20, Duration::from_secs(60)).await;
    wait_replicated(&flow, &gone, 1, 20, Duration::from_secs(60)).await;
    assert!(strait.stop().success());
    // Records the stopped flow never copies: the failover waits on them.
    produce(&a, &gone, &records(10)).await;
    let group = format!("{p}-g");
    commit_group(&a, &group, &[(&kept, 0, 20), (&gone, 0, 15)]);

    let config_path = write_config(&format!("{p}-cli"), &config);
    let name = flow.name.clone();
    let failover = std::thread::spawn(move || {
        Command::new(env!("CARGO_BIN_EXE_strait"))
            .args(["failover", "--config"])
            .arg(&config_path)
            .args(["--flow", &name, "--mode", "planned", "--wait-ms", "60000", "--output", "json"])
            .output()
            .unwrap()
    });
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!failover.is_finished(), "the failover waits for the records of {gone} still to copy");
    let deleted = admin(&a).delete_topics(&[&gone], &AdminOptions::new()).await.expect("delete topic");
    deleted[0].as_ref().expect("topic deleted");
    let out = failover.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the failover completes once {gone} is gone: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    let partitions = report["partitions"].as_array().expect("partitions in the report");
    assert!(
        partitions.iter().all(|r| r["topic"] != gone.as_str()),
        "the deleted topic is left out of the check: {report:#}"
    );
    let remote = format!("{src}.{kept}");
    assert_eq!(committed(&b, &group, &remote, 1).get(&0), Some(&20), "the group moved on {remote}: {report:#}");
}
