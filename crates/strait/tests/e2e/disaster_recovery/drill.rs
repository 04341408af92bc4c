//! The runbook's drill, through its own commands (docs/disaster-recovery.md).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::*;

/// The drill in both delivery modes, one after the other on one pair of dedicated clusters (A is
/// killed in each; sharing the pair keeps the suite's load down).
#[tokio::test(flavor = "multi_thread")]
async fn drill_in_both_delivery_modes() {
    drills("drill", "records").await;
}

/// The drill with flows copying whole batches (issue 45): the loop guard of batches keeps the
/// failback from echoing.
#[tokio::test(flavor = "multi_thread")]
async fn drill_of_batch_flows_in_both_delivery_modes() {
    drills("drill-batches", "batches").await;
}

async fn drills(name: &str, copy: &str) {
    let mut clusters = strait_testkit::start_clusters(2, &dedicated_dir(name)).expect("dedicated clusters");
    let (mut cluster_a, cluster_b) = (clusters.remove(0), clusters.remove(0));
    for delivery in ["at_least_once", "exactly_once"] {
        drill((delivery, copy), &mut cluster_a, &cluster_b.bootstrap).await;
    }
}

/// Records born on A, per partition (50,001 in all).
const ON_A: usize = 16_667;
/// Records born on B during the outage, per partition (10,002 in all).
const ON_B: usize = 3_334;
/// What `billing` consumed on A before A was lost, per partition (30,000 in all).
const CONSUMED_ON_A: i64 = 10_000;
const LAG_MAX: i64 = 100;
/// `RUST_LOG` of the drill's instances.
const LOG: &str = "info,librdkafka=warn,rdkafka=warn";

/// A `[[flows]]` table from `source` to `target`, identity naming, over `topic`, with `delivery`
/// and `copy`.
fn flow_toml(source: &str, target: &str, topic: &str, (delivery, copy): (&str, &str), extra: &str) -> String {
    format!(
        "[[flows]]\nsource = \"{source}\"\ntarget = \"{target}\"\nreplication_policy = \"identity\"\n\
         topics = [\"{topic}\"]\ndelivery = \"{delivery}\"\ncopy = \"{copy}\"\noffset_lag_max = {LAG_MAX}\n\
         refresh_topics_interval_ms = 1000\nemit_checkpoints_interval_ms = 1000\nrefresh_groups_interval_ms = 1000\n{extra}\n"
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

/// `strait status --config <config> --output json`: exit code, the report, stderr.
fn status(config: &Path) -> (i32, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["status", "--output", "json", "--config"])
        .arg(config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let report = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code().unwrap_or(-1), report, stderr)
}

/// The rows of `strait status` for `topic`: (flow, partition) → the row.
fn status_rows(status: &serde_json::Value, topic: &str) -> BTreeMap<(String, i64), serde_json::Value> {
    let rows = status["partitions"].as_array().cloned().unwrap_or_default();
    rows.into_iter()
        .filter(|r| r["topic"] == topic)
        .map(|r| ((r["flow"].as_str().unwrap_or_default().to_string(), r["partition"].as_i64().unwrap_or(-1)), r))
        .collect()
}

/// The runbook's drill (docs/disaster-recovery.md) with `delivery` and `copy`, through its commands: one
/// config holding A->B and B->A (identity), each region's instance running its own flow with
/// `strait run --flow`; A lost while records are still being copied; the flow A->B stopped,
/// `strait status`, then `strait failover --flow 'A->B'` moves `billing` to B; B takes writes;
/// A comes back; both instances run; `strait status` shows lag 0 for both flows; a planned
/// `strait failover --flow 'B->A'` moves `billing` home.
async fn drill((delivery, copy): (&str, &str), cluster_a: &mut strait_testkit::KafkaCluster, b: &str) {
    let (a, b) = (cluster_a.bootstrap.clone(), b.to_string());
    let p = unique("dr");
    let (aa, ba) = (format!("{p}a"), format!("{p}b"));
    let (topic, group) = (format!("{p}-orders"), format!("{p}-billing"));
    create_topic(&a, &topic, PARTITIONS, &[]).await;
    produce_numbered(&a, &topic, "a", PARTITIONS, ON_A).await;
    let consumed: Vec<(&str, i32, i64)> = (0..PARTITIONS).map(|part| (topic.as_str(), part, CONSUMED_ON_A)).collect();
    commit_group(&a, &group, &consumed);

    // The runbook's one config: both flows; A->B capped at 100 KB/s (2,000 records/s) at first,
    // so region A is lost with records still to copy.
    let (forward, reverse) = (format!("{aa}->{ba}"), format!("{ba}->{aa}"));
    let strait_toml = |cap: &str| {
        format!(
            "{}{}{}",
            clusters_toml(&aa, &a, &ba, &b),
            flow_toml(&aa, &ba, &topic, (delivery, copy), cap),
            flow_toml(&ba, &aa, &topic, (delivery, copy), "")
        )
    };
    let config = write_config(&format!("{p}-strait"), &strait_toml(""));
    // 1. Both flows run from day one, each in the region it writes to.
    let capped = strait_toml("max_bytes_per_second = 100000");
    let near_b = Strait::launch(&format!("{p}-b1"), &capped, LOG, &["--flow", &forward]);
    let near_a = Strait::launch(&format!("{p}-a1"), &capped, LOG, &["--flow", &reverse]);
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
    // Region A is lost: its broker and the instance running there.
    cluster_a.kill().unwrap();
    near_a.kill();

    // Unplanned failover, 1: stop the flow A->B.
    let logs = near_b.logs();
    let stopped = near_b.stop();
    eprintln!("{delivery} {copy}: strait stopped with {stopped} after A was lost");
    // `strait status` prints the target's side of A->B and names what it cannot read, exit 1.
    let (code, report, stderr) = status(&config);
    assert_eq!(code, 1, "{stderr}\n{report:#}");
    let rows_down = status_rows(&report, &topic);
    assert_eq!(rows_down.len(), PARTITIONS as usize, "A->B's rows from the target alone: {report:#}\n{stderr}");
    for ((flow, part), row) in &rows_down {
        assert_eq!(flow, &forward);
        assert!(row["position"].as_i64().is_some() && row["end"].is_null() && row["lag"].is_null(), "{part}: {row}");
    }
    for named in
        [format!("flow {forward}: source cluster {aa} at {a}"), format!("flow {reverse}: target cluster {aa} at {a}")]
    {
        assert!(stderr.contains(&named), "names {named}: {stderr}");
    }

    // 2. `strait failover --flow 'A->B'`: A does not answer, so the target alone decides.
    let (code, report, stderr) = failover(&config, &forward, &["--source-timeout-ms", "3000"]);
    assert_eq!(code, 0, "{stderr}\n{report:#}\n{logs}");
    assert_eq!(report["mode"], "unplanned");
    eprintln!("{delivery} {copy}: unplanned failover report:\n{report:#}");
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
        "{delivery} {copy}: RPO printed: last replicated {replicated:?} (next offsets), checkpoint age {age:?} ms; \
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
        eprintln!(
            "{delivery} {copy}: partition {part}: billing resumes on B at {} ({rereads} re-reads)",
            billing_b[&part]
        );
    }

    // 3-4. The recovery point read (above), region B takes the writes; billing consumes
    // everything there.
    produce_numbered(&b, &topic, "b", PARTITIONS, ON_B).await;
    seen_by_billing.extend(read_from(&b, &topic, &billing_b));
    commit_at_end(&b, &group, &topic);

    // Failback, 1: A is back; both instances run their flows: B->A carries only what was born on
    // B, A->B what B never got.
    cluster_a.restart().expect("A restarts");
    let near_b = Strait::launch(&format!("{p}-b2"), &strait_toml(""), LOG, &["--flow", &forward]);
    let near_a = Strait::launch(&format!("{p}-a2"), &strait_toml(""), LOG, &["--flow", &reverse]);
    // 2. Wait until `strait status` shows lag 0 for both flows' data topic.
    let mut last = (0, serde_json::Value::Null, String::new());
    let settled = tokio::time::timeout(Duration::from_secs(180), async {
        loop {
            let (code, report, stderr) = status(&config);
            let rows = status_rows(&report, &topic);
            let caught_up = code == 0
                && rows.len() == 2 * PARTITIONS as usize
                && rows.values().all(|r| r["lag"].as_i64() == Some(0));
            last = (code, report, stderr);
            if caught_up {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
    .await;
    let (code, report, stderr) = &last;
    let lags: Vec<_> = status_rows(report, &topic).into_iter().map(|(k, r)| (k, r["lag"].clone())).collect();
    eprintln!("{delivery} {copy}: strait status after failback (exit {code}): lags {lags:?}");
    assert!(settled.is_ok(), "strait status never showed lag 0 for both flows: exit {code}, {lags:?}\n{stderr}");
    let all = 3 * (ON_A + ON_B);
    assert_eq!(occurrences(&a, &topic).len(), all, "lag 0: A holds every record");
    assert_eq!(occurrences(&b, &topic).len(), all, "lag 0: B holds every record");
    // billing, still on B, reads the divergent records A->B brought; then its consumers stop.
    let divergent = read_from(&b, &topic, &committed(&b, &group, &topic, PARTITIONS));
    assert_eq!(divergent.len() as i64, true_rpo, "the records B never got arrive once each");
    assert!(divergent.iter().all(|v| v.starts_with("a-")));
    seen_by_billing.extend(divergent);
    commit_at_end(&b, &group, &topic);

    // 5. Planned failover home.
    let (code, report, stderr) = failover(&config, &reverse, &["--mode", "planned", "--wait-ms", "60000"]);
    assert_eq!(code, 0, "{stderr}\n{report:#}\n{}", near_a.logs());
    eprintln!("{delivery} {copy}: planned failback report:\n{report:#}");
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
    for instance in [near_b, near_a] {
        let logs = instance.logs();
        assert!(instance.stop().success(), "{logs}");
    }

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
        "{delivery} {copy}: drill done: {} records on each cluster, each once; {true_rpo} divergent records copied back",
        all + 300
    );
}
