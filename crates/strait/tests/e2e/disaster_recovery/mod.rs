//! `strait failover` through real brokers: a planned failover while producers run (guarded by
//! `--quiet-ms`, it refuses until they stop), and the disaster-recovery drill (region A lost,
//! groups moved to B, A back, failback with nothing truncated, nothing copied twice and no
//! echo), in both delivery modes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::*;

mod default_policy;
mod drill;

/// Partitions of the drills' topics.
const PARTITIONS: i32 = 3;

/// The `[[clusters]]` tables of A and B.
fn clusters_toml(a_alias: &str, a: &str, b_alias: &str, b: &str) -> String {
    format!(
        "[[clusters]]\nalias = \"{a_alias}\"\nbootstrap_servers = \"{a}\"\n\n[[clusters]]\nalias = \"{b_alias}\"\nbootstrap_servers = \"{b}\"\n\n"
    )
}

/// `strait failover --config <config> --flow <flow> --output json <args>`: exit code and report.
fn failover(config: &Path, flow: &str, args: &[&str]) -> (i32, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["failover", "--config"])
        .arg(config)
        .args(["--flow", flow, "--output", "json"])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let report = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code().unwrap_or(-1), report, stderr)
}

/// The report's rows of `group`: (topic, partition) → the row.
fn rows<'a>(report: &'a serde_json::Value, group: &str) -> BTreeMap<(String, i32), &'a serde_json::Value> {
    let g = report["groups"].as_array().unwrap().iter().find(|g| g["group"] == group).expect("group in the report");
    g["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| ((r["topic"].as_str().unwrap().to_string(), r["partition"].as_i64().unwrap() as i32), r))
        .collect()
}

/// Values of `topic` per partition, in offset order, with their offsets.
fn values(bootstrap: &str, topic: &str) -> BTreeMap<i32, Vec<(i64, String)>> {
    read_all(bootstrap, topic, false)
        .into_iter()
        .map(|(p, recs)| {
            (p, recs.into_iter().map(|(o, r)| (o, String::from_utf8(r.value.unwrap()).unwrap())).collect())
        })
        .collect()
}

/// Values a consumer reads from `from` (per partition) to the end.
fn read_from(bootstrap: &str, topic: &str, from: &BTreeMap<i32, i64>) -> Vec<String> {
    values(bootstrap, topic)
        .into_iter()
        .flat_map(|(p, vs)| {
            let start = from.get(&p).copied().unwrap_or(0);
            vs.into_iter().filter(move |(o, _)| *o >= start).map(|(_, v)| v)
        })
        .collect()
}

/// The high watermark of each partition of `topic` (partitions not known yet left out).
fn ends(bootstrap: &str, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let c: BaseConsumer = rdkafka::ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    (0..partitions).filter_map(|p| Some((p, c.fetch_watermarks(topic, p, Duration::from_secs(10)).ok()?.1))).collect()
}

/// `origin-<partition>-<n>`, padded to 50 bytes: `n` is its offset on the cluster it was born on.
fn value(origin: &str, partition: i32, n: usize) -> String {
    format!("{origin}-{partition}-{n:07}-{}", "x".repeat(30))
}

async fn produce_numbered(bootstrap: &str, topic: &str, origin: &str, partitions: i32, per_partition: usize) {
    let recs: Vec<Rec> = (0..per_partition)
        .flat_map(|n| (0..partitions).map(move |p| (p, n)))
        .map(|(p, n)| Rec::simple(p, &value(origin, p, n)))
        .collect();
    // Batches of about 300 records: a batch flow's throttle pays by whole source batches, and
    // the drills lose a region with records still to copy.
    produce_with(bootstrap, topic, &recs, &[("batch.size", "16384")]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_planned_failover_while_producers_run_moves_the_group_once_replicated() {
    const LAG_MAX: i64 = 50;
    let f = TopicFlow::new("pfo", 3).await;
    let group = format!("{}-g", f.p);
    produce_numbered(&f.a, &f.topic, "a", 3, 1_000).await;
    // The group consumed 600 records per partition on the source.
    commit_group(&f.a, &group, &[(&f.topic, 0, 600), (&f.topic, 1, 600), (&f.topic, 2, 600)]);
    // A second group whose target copy is ahead on partition 0 and has consumers on the target.
    let (ahead, active) = (format!("{}-ahead", f.p), format!("{}-active", f.p));
    commit_group(&f.a, &ahead, &[(&f.topic, 0, 100), (&f.topic, 1, 100)]);
    commit_group(&f.a, &active, &[(&f.topic, 0, 100)]);
    // The cap keeps Strait behind the producers until they stop.
    let settings = format!("offset_lag_max = {LAG_MAX}\nmax_bytes_per_second = 200000");
    let strait = Strait::start(&f.p, &f.config(&settings));
    wait_until("the first records copied", Duration::from_secs(60), || count(&f.b, &f.remote).unwrap_or(0) > 0).await;
    commit_group(&f.b, &ahead, &[(&f.remote, 0, 900)]);

    // Producers keep writing (450 KB/s) while the failover waits; they stop after 3 s.
    let (a, topic) = (f.a.clone(), f.topic.clone());
    let producers = tokio::spawn(async move {
        for round in 0..15 {
            let recs: Vec<Rec> =
                (0..90).map(|i| Rec::simple(i % 3, &format!("late-{round}-{i}-{}", "y".repeat(1000)))).collect();
            produce(&a, &topic, &recs).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let config = write_config(&format!("{}-cli", f.p), &f.config(""));
    let flow = format!("{}->{}", f.src, f.dst);
    let groups = format!("{}-(g|ahead)", f.p);
    let run = tokio::task::spawn_blocking(move || {
        failover(&config, &flow, &["--mode", "planned", "--groups", &groups, "--wait-ms", "60000"])
    });
    // A failover guarded by the producers' fence sees them still writing and moves nothing.
    let (code, loud, stderr) = failover(
        &write_config(&format!("{}-cliq", f.p), &f.config("")),
        &format!("{}->{}", f.src, f.dst),
        &["--mode", "planned", "--groups", &group, "--quiet-ms", "1000", "--wait-ms", "1"],
    );
    assert_eq!(code, 1, "{stderr}\n{loud:#}");
    assert!(stderr.contains("source topics not quiet") && stderr.contains(&format!("{}-", f.topic)), "{stderr}");
    assert!(rows(&loud, &group).values().all(|r| r["action"] == "skipped"), "{loud:#}");
    assert!(committed(&f.b, &group, &f.remote, 3).is_empty(), "nothing committed while producers write");
    assert!(!run.is_finished(), "the failover waits while records are being copied");
    // Meanwhile a failover that may not wait moves nothing, and says what it would have done.
    let (code, early, stderr) = failover(
        &write_config(&format!("{}-cli0", f.p), &f.config("")),
        &format!("{}->{}", f.src, f.dst),
        &["--mode", "planned", "--groups", &group, "--wait-ms", "1"],
    );
    assert_eq!(code, 1, "{stderr}\n{early:#}");
    assert!(stderr.contains("still not replicated"), "{stderr}");
    let early_rows = rows(&early, &group);
    assert!(early_rows.values().all(|r| r["action"] == "skipped" && r["upstream"] == 600), "{early:#}");
    assert!(committed(&f.b, &group, &f.remote, 3).is_empty(), "nothing committed before the copy caught up");
    producers.await.unwrap();
    let (code, report, stderr) = run.await.unwrap();
    assert_eq!(code, 0, "{stderr}\n{report:#}");
    assert_eq!(report["mode"], "planned");
    eprintln!("planned failover:\n{report:#}");
    let total: i64 = report["partitions"].as_array().unwrap().iter().map(|p| p["end"].as_i64().unwrap()).sum();
    assert_eq!(total, 3 * 1_000 + 15 * 90, "every partition's end, producers stopped");
    assert!(report["partitions"].as_array().unwrap().iter().all(|p| p["unreplicated"] == 0));

    // Producers stopped: the fence holds, and a guarded failover of the group goes through.
    let config_q = write_config(&format!("{}-cliq2", f.p), &f.config(""));
    let (code, quiet, stderr) =
        failover(&config_q, &format!("{}->{}", f.src, f.dst), &["--groups", &group, "--quiet-ms", "1000"]);
    assert_eq!(code, 0, "{stderr}\n{quiet:#}");
    assert!(!stderr.contains("not quiet"), "{stderr}");
    // The group resumes on the target from what was committed: nothing skipped, re-reads bounded.
    let on_target = committed(&f.b, &group, &f.remote, 3);
    let moved = rows(&report, &group);
    for part in 0..3 {
        let row = moved[&(f.remote.clone(), part)];
        assert_eq!(row["action"], "commit");
        assert_eq!(row["unreplicated"], 0);
        assert_eq!(Some(on_target[&part]), row["downstream"].as_i64(), "partition {part} committed as reported");
    }
    let read: BTreeSet<String> = read_from(&f.b, &f.remote, &on_target).into_iter().collect();
    let source = values(&f.a, &f.topic);
    for (part, vs) in &source {
        let unconsumed: Vec<&String> = vs.iter().filter(|(o, _)| *o >= 600).map(|(_, v)| v).collect();
        let skipped = unconsumed.iter().filter(|v| !read.contains(**v)).count();
        assert_eq!(skipped, 0, "partition {part}: {skipped} records skipped");
        let rereads = vs.iter().filter(|(o, v)| *o < 600 && read.contains(v)).count() as i64;
        assert!(rereads <= LAG_MAX, "partition {part}: {rereads} re-reads");
    }
    // Never rewound: the target copy of `ahead` stays at 900 on partition 0, moves on partition 1.
    let ahead_rows = rows(&report, &ahead);
    assert_eq!(ahead_rows[&(f.remote.clone(), 0)]["action"], "keep_ahead");
    assert_eq!(committed(&f.b, &ahead, &f.remote, 3).get(&0), Some(&900));
    assert_eq!(ahead_rows[&(f.remote.clone(), 1)]["action"], "commit");

    // A group with a consumer on the target is not moved, and the command says so (exit 1).
    let member = consumer_in_group(&f.b, &active, &f.remote);
    let config = write_config(&format!("{}-cli2", f.p), &f.config(""));
    let (code, report, stderr) =
        failover(&config, &format!("{}->{}", f.src, f.dst), &["--groups", &active, "--wait-ms", "20000"]);
    drop(member);
    assert_eq!(code, 1, "{stderr}\n{report:#}");
    assert!(stderr.contains(&format!("group {active}: active on the target (members: 1")), "{stderr}");
    assert_eq!(rows(&report, &active)[&(f.remote.clone(), 0)]["action"], "skipped");
    assert!(committed(&f.b, &active, &f.remote, 3).is_empty(), "nothing committed for the active group");
    // Nor is a group whose consumers still run on the source.
    let member = consumer_in_group(&f.a, &active, &f.topic);
    let (code, report, stderr) =
        failover(&config, &format!("{}->{}", f.src, f.dst), &["--groups", &active, "--wait-ms", "20000"]);
    drop(member);
    assert_eq!(code, 1, "{stderr}\n{report:#}");
    assert!(stderr.contains(&format!("group {active}: active on the source (members: 1")), "{stderr}");
    assert!(committed(&f.b, &active, &f.remote, 3).is_empty(), "nothing committed for the group active on the source");
    assert!(strait.stop().success());
}

/// A consumer subscribed to `topic` in `group` on `bootstrap`, polled until it has joined.
fn consumer_in_group(bootstrap: &str, group: &str, topic: &str) -> rdkafka::consumer::BaseConsumer {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let c: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    c.subscribe(&[topic]).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while c.assignment().map_or(0, |a| a.count()) == 0 {
        assert!(std::time::Instant::now() < deadline, "consumer joined {group}");
        let _ = c.poll(Duration::from_millis(100));
    }
    c
}

/// `n` of a [`value`].
fn parse_n(value: &str) -> i64 {
    value.split('-').nth(2).and_then(|n| n.parse().ok()).unwrap_or(-1)
}

fn end_offsets(bootstrap: &str, topic: &str) -> BTreeMap<i32, i64> {
    ends(bootstrap, topic, PARTITIONS)
}

/// Commits `group` at the end of every partition of `topic`: its consumers read everything.
fn commit_at_end(bootstrap: &str, group: &str, topic: &str) {
    let ends: Vec<(&str, i32, i64)> = end_offsets(bootstrap, topic).into_iter().map(|(p, o)| (topic, p, o)).collect();
    commit_group(bootstrap, group, &ends);
}
