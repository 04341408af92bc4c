//! `strait failover` through real brokers: a planned failover while producers run, and the
//! disaster-recovery drill (region A lost, groups moved to B, A back, failback with nothing
//! truncated, nothing copied twice and no echo), in both delivery modes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::*;

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
    produce(bootstrap, topic, &recs).await;
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
    tokio::time::sleep(Duration::from_millis(500)).await;
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

/// The drill in both delivery modes, one after the other on one pair of dedicated clusters (A is
/// killed in each; sharing the pair keeps the suite's load down).
#[tokio::test(flavor = "multi_thread")]
async fn drill_in_both_delivery_modes() {
    let mut clusters = strait_testkit::start_clusters(2, &dedicated_dir("drill")).expect("dedicated clusters");
    let (mut cluster_a, cluster_b) = (clusters.remove(0), clusters.remove(0));
    for delivery in ["at_least_once", "exactly_once"] {
        drill(delivery, &mut cluster_a, &cluster_b.bootstrap).await;
    }
}

const PARTITIONS: i32 = 3;
/// Records born on A, per partition (50,001 in all).
const ON_A: usize = 16_667;
/// Records born on B during the outage, per partition (10,002 in all).
const ON_B: usize = 3_334;
/// What `billing` consumed on A before A was lost, per partition (30,000 in all).
const CONSUMED_ON_A: i64 = 10_000;
const LAG_MAX: i64 = 100;

/// A `[[flows]]` table from `source` to `target`, identity naming, over `topic`.
fn flow_toml(source: &str, target: &str, topic: &str, delivery: &str, extra: &str) -> String {
    format!(
        "[[flows]]\nsource = \"{source}\"\ntarget = \"{target}\"\nreplication_policy = \"identity\"\n\
         topics = [\"{topic}\"]\ndelivery = \"{delivery}\"\noffset_lag_max = {LAG_MAX}\n\
         refresh_topics_interval_ms = 1000\nemit_checkpoints_interval_ms = 1000\nrefresh_groups_interval_ms = 1000\n{extra}\n"
    )
}

fn clusters_toml(a_alias: &str, a: &str, b_alias: &str, b: &str) -> String {
    format!(
        "[[clusters]]\nalias = \"{a_alias}\"\nbootstrap_servers = \"{a}\"\n\n[[clusters]]\nalias = \"{b_alias}\"\nbootstrap_servers = \"{b}\"\n\n"
    )
}

/// Every value of `topic` on `bootstrap` with how often it occurs.
fn occurrences(bootstrap: &str, topic: &str) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for (_, v) in values(bootstrap, topic).into_values().flatten() {
        *m.entry(v).or_default() += 1;
    }
    m
}

/// The drill with `delivery`: A->B identity; A lost while records are still being copied;
/// an unplanned failover moves `billing` to B; B takes writes; A comes back; both flows run; a
/// planned failover B->A moves `billing` home.
async fn drill(delivery: &str, cluster_a: &mut strait_testkit::KafkaCluster, b: &str) {
    let (a, b) = (cluster_a.bootstrap.clone(), b.to_string());
    let p = unique("dr");
    let (aa, ba) = (format!("{p}a"), format!("{p}b"));
    let (topic, group) = (format!("{p}-orders"), format!("{p}-billing"));
    create_topic(&a, &topic, PARTITIONS, &[]).await;
    produce_numbered(&a, &topic, "a", PARTITIONS, ON_A).await;
    let consumed: Vec<(&str, i32, i64)> = (0..PARTITIONS).map(|part| (topic.as_str(), part, CONSUMED_ON_A)).collect();
    commit_group(&a, &group, &consumed);

    // 1. A->B, capped at 100 KB/s (2,000 records/s) so region A is lost with records still to copy.
    let forward = |extra: &str| flow_toml(&aa, &ba, &topic, delivery, extra);
    let clusters = clusters_toml(&aa, &a, &ba, &b);
    let strait = Strait::start(&format!("{p}-1"), &format!("{clusters}{}", forward("max_bytes_per_second = 100000")));
    // Every partition copied past billing's offset (syncs and a checkpoint for it), not all copied.
    wait_until("every partition on B past billing's offset", Duration::from_secs(120), || {
        let cps = checkpoints(&b, &aa);
        let ends = end_offsets(&b, &topic);
        ends.len() == PARTITIONS as usize
            && ends.values().all(|end| *end > CONSUMED_ON_A + LAG_MAX)
            && (0..PARTITIONS)
                .all(|part| last_checkpoint(&cps, &group, &topic, part).is_some_and(|(up, _)| up == CONSUMED_ON_A))
    })
    .await;
    cluster_a.kill().unwrap();
    let logs = strait.logs();
    let stopped = strait.stop();
    eprintln!("{delivery}: strait stopped with {stopped} after A was lost");

    // 2. Unplanned failover: the target alone decides.
    let config1 = write_config(&format!("{p}-fo1"), &format!("{clusters}{}", forward("")));
    let (code, report, stderr) = failover(&config1, &format!("{aa}->{ba}"), &["--source-timeout-ms", "3000"]);
    assert_eq!(code, 0, "{stderr}\n{report:#}\n{logs}");
    assert_eq!(report["mode"], "unplanned");
    eprintln!("{delivery}: unplanned failover report:\n{report:#}");
    let on_b = values(&b, &topic);
    let mut replicated = BTreeMap::new();
    // (Heartbeats topics are copied too: only the drill's topic is counted here.)
    for row in report["partitions"].as_array().unwrap().iter().filter(|r| r["topic"] == topic.as_str()) {
        let part = row["partition"].as_i64().unwrap() as i32;
        let last = row["last_replicated_offset"].as_i64().unwrap();
        assert!(row["last_replicated_timestamp_ms"].as_i64().is_some() && row["age_ms"].as_i64().is_some());
        // What the command says reached B is what B holds: A's offsets 0..=last.
        let held: Vec<&String> = on_b[&part].iter().map(|(_, v)| v).collect();
        assert_eq!(held.len() as i64, last + 1, "partition {part}: B holds A's records up to {last}");
        assert_eq!(held.last().map(|v| v.as_str()), Some(value("a", part, last as usize).as_str()));
        replicated.insert(part, last + 1);
    }
    assert_eq!(replicated.len(), PARTITIONS as usize);
    let age = report["groups"][0]["checkpoint_age_ms"].as_i64();
    let true_rpo: i64 = replicated.values().map(|r| ON_A as i64 - r).sum();
    eprintln!(
        "{delivery}: RPO printed: last replicated {replicated:?} (next offsets), checkpoint age {age:?} ms; \
         true RPO: {true_rpo} of {} records not on B",
        ON_A * 3
    );
    assert!(true_rpo > 0, "A was lost with records still to copy");

    // billing resumes on B from the committed offsets: nothing skipped, re-reads bounded.
    let billing_b = committed(&b, &group, &topic, PARTITIONS);
    let rows_b = rows(&report, &group);
    let mut seen_by_billing: BTreeSet<String> = BTreeSet::new();
    for part in 0..PARTITIONS {
        assert_eq!(Some(billing_b[&part]), rows_b[&(topic.clone(), part)]["downstream"].as_i64());
        let read: Vec<&String> = on_b[&part].iter().filter(|(o, _)| *o >= billing_b[&part]).map(|(_, v)| v).collect();
        let unconsumed = on_b[&part].iter().filter(|(_, v)| parse_n(v) >= CONSUMED_ON_A).count();
        let rereads = read.iter().filter(|v| parse_n(v) < CONSUMED_ON_A).count() as i64;
        assert_eq!(read.len() as i64 - rereads, unconsumed as i64, "partition {part}: billing skipped records on B");
        assert!(rereads <= LAG_MAX, "partition {part}: {rereads} re-reads");
        eprintln!("{delivery}: partition {part}: billing resumes on B at {} ({rereads} re-reads)", billing_b[&part]);
    }

    // 3. Region B takes the writes; billing consumes everything there.
    produce_numbered(&b, &topic, "b", PARTITIONS, ON_B).await;
    seen_by_billing.extend(read_from(&b, &topic, &billing_b));
    commit_at_end(&b, &group, &topic);

    // 4. A comes back; both flows run: B->A carries only what was born on B, A->B what B never got.
    cluster_a.restart().expect("A restarts");
    let both = format!("{clusters}{}{}", forward(""), flow_toml(&ba, &aa, &topic, delivery, ""));
    let strait = Strait::start(&format!("{p}-2"), &both);
    let all = 3 * (ON_A + ON_B);
    wait_until("both clusters hold every record", Duration::from_secs(180), || {
        occurrences(&a, &topic).len() == all && occurrences(&b, &topic).len() == all
    })
    .await;
    // billing, still on B, reads the divergent records A->B brought; then its consumers stop.
    let divergent = read_from(&b, &topic, &committed(&b, &group, &topic, PARTITIONS));
    assert_eq!(divergent.len() as i64, true_rpo, "the records B never got arrive once each");
    assert!(divergent.iter().all(|v| v.starts_with("a-")));
    seen_by_billing.extend(divergent);
    commit_at_end(&b, &group, &topic);

    // 5. Planned failover home.
    let config2 = write_config(&format!("{p}-fo2"), &both);
    let (code, report, stderr) =
        failover(&config2, &format!("{ba}->{aa}"), &["--mode", "planned", "--wait-ms", "60000"]);
    assert_eq!(code, 0, "{stderr}\n{report:#}\n{}", strait.logs());
    eprintln!("{delivery}: planned failback report:\n{report:#}");
    assert!(report["partitions"].as_array().unwrap().iter().all(|p| p["unreplicated"] == 0));
    let billing_a = committed(&a, &group, &topic, PARTITIONS);
    let a_ends = end_offsets(&a, &topic);
    // billing consumed everything on B: on A it resumes after the last record, exactly (in
    // exactly-once mode a commit marker may follow that record).
    for part in 0..PARTITIONS {
        assert!(billing_a[&part] <= a_ends[&part], "partition {part}: billing past A's end");
    }
    assert_eq!(read_from(&a, &topic, &billing_a), Vec::<String>::new(), "billing re-reads nothing on A");
    // New records on A reach billing there, and reach B once.
    produce_numbered(&a, &topic, "a2", PARTITIONS, 100).await;
    let read_on_a = read_from(&a, &topic, &billing_a);
    assert_eq!(read_on_a.len(), 300, "billing reads exactly the records written after failback");
    wait_until("the new records on B", Duration::from_secs(60), || occurrences(&b, &topic).len() == all + 300).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(strait.stop().success());

    // 6. Both clusters hold the same records, each exactly once: nothing copied twice, no echo.
    let (on_a, on_b) = (occurrences(&a, &topic), occurrences(&b, &topic));
    assert_eq!(on_a.len(), all + 300);
    assert!(on_a.values().all(|n| *n == 1), "a record reached A twice");
    assert!(on_b.values().all(|n| *n == 1), "a record reached B twice");
    assert_eq!(on_a.keys().collect::<Vec<_>>(), on_b.keys().collect::<Vec<_>>(), "A and B hold the same records");
    // billing saw every record born on A after its first 10,000 per partition and every one born on B.
    let missed = on_a
        .keys()
        .filter(|v| v.starts_with("b-") || (v.starts_with("a-") && parse_n(v) >= CONSUMED_ON_A))
        .filter(|v| !seen_by_billing.contains(*v))
        .count();
    assert_eq!(missed, 0, "billing skipped {missed} records across the drill");
    eprintln!(
        "{delivery}: drill done: {} records on each cluster, each once; {true_rpo} divergent records copied back",
        all + 300
    );
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

/// Failback with the default policy: `billing` read A's records on B from `<a>.t` and B's own
/// from `t`; the failover B->A moves the first home to A's `t` through A->B's offset syncs (B->A
/// does not carry `<a>.t` back) and the second to `<b>.t` on A.
#[tokio::test(flavor = "multi_thread")]
async fn a_default_policy_failback_moves_both_topics_home() {
    const LAG_MAX: i64 = 20;
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("dfb");
    let (aa, ba) = (format!("{p}a"), format!("{p}b"));
    let (topic, group) = (format!("{p}-t"), format!("{p}-billing"));
    let (on_b, on_a) = (format!("{aa}.{topic}"), format!("{ba}.{topic}"));
    create_topic(&a, &topic, PARTITIONS, &[]).await;
    create_topic(&b, &topic, PARTITIONS, &[]).await;
    produce_numbered(&a, &topic, "a", PARTITIONS, 300).await;
    produce_numbered(&b, &topic, "b", PARTITIONS, 100).await;
    let flow = |source: &str, target: &str| {
        format!(
            "[[flows]]\nsource = \"{source}\"\ntarget = \"{target}\"\ntopics = [\"{p}-.*\"]\noffset_lag_max = {LAG_MAX}\nrefresh_topics_interval_ms = 1000\n"
        )
    };
    let config = format!("{}{}{}", clusters_toml(&aa, &a, &ba, &b), flow(&aa, &ba), flow(&ba, &aa));
    let strait = Strait::start(&p, &config);
    wait_until("both flows copied", Duration::from_secs(60), || {
        count(&b, &on_b) == Some(900) && count(&a, &on_a) == Some(300)
    })
    .await;
    // On B, billing read every record of A and half of B's own.
    let read_half: Vec<(&str, i32, i64)> = (0..PARTITIONS).map(|part| (topic.as_str(), part, 50)).collect();
    commit_group(&b, &group, &read_half);
    commit_at_end(&b, &group, &on_b);

    let path = write_config(&format!("{p}-fb"), &config);
    let (code, report, stderr) = failover(&path, &format!("{ba}->{aa}"), &["--mode", "planned"]);
    assert_eq!(code, 0, "{stderr}\n{report:#}");
    eprintln!("default-policy failback:\n{report:#}");
    let moved = rows(&report, &group);
    let a_ends = end_offsets(&a, &topic);
    for part in 0..PARTITIONS {
        let home = moved.get(&(topic.clone(), part)).expect("A's topic moved home");
        assert_eq!(home["source_topic"].as_str(), Some(on_b.as_str()));
        assert_eq!(home["downstream"].as_i64(), Some(a_ends[&part]), "partition {part}: at A's end, exactly");
        assert!(moved.contains_key(&(on_a.clone(), part)), "B's topic moved to its copy on A");
    }
    assert_eq!(committed(&a, &group, &topic, PARTITIONS), a_ends, "billing resumes on A's own topic at its end");
    let billing = committed(&a, &group, &on_a, PARTITIONS);
    for (part, vs) in values(&a, &on_a) {
        let read: Vec<&String> = vs.iter().filter(|(o, _)| *o >= billing[&part]).map(|(_, v)| v).collect();
        let unread = vs.iter().filter(|(_, v)| parse_n(v) >= 50).count();
        let rereads = read.iter().filter(|v| parse_n(v) < 50).count();
        assert_eq!(read.len() - rereads, unread, "partition {part}: billing skipped records of B on A");
        assert!(rereads as i64 <= LAG_MAX, "partition {part}: {rereads} re-reads");
    }
    // New records on A's own topic reach billing there.
    produce_numbered(&a, &topic, "a2", PARTITIONS, 10).await;
    assert_eq!(read_from(&a, &topic, &committed(&a, &group, &topic, PARTITIONS)).len(), 30);
    assert!(strait.stop().success());
}
