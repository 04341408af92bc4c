//! The lag of an idle exactly-once active/active pair (identity naming, one config, one instance
//! per region with `--flow`, as docs/disaster-recovery.md runs it): every partition of both flows
//! ends with the other flow's commit marker, an offset no consumer reads. `strait status`, the
//! lag metric and the progress log's readings count records, so the pair shows lag 0 once everything is
//! copied. Before, every partition stayed at lag 1 for ever and "catching up" was logged every
//! `progress_log_interval_ms`.

use std::process::Command;
use std::time::Duration;

use crate::support::*;

const PARTITIONS: i32 = 3;

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_exactly_once_active_active_pair_shows_lag_0() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("idlelag");
    let (aa, ba) = (format!("{p}a"), format!("{p}b"));
    let topic = format!("{p}-t");
    create_topic(&a, &topic, PARTITIONS, &[]).await;
    create_topic(&b, &topic, PARTITIONS, &[]).await;
    let flow = |source: &str, target: &str| {
        format!(
            "[[flows]]\nsource = \"{source}\"\ntarget = \"{target}\"\nreplication_policy = \"identity\"\n\
             delivery = \"exactly_once\"\ntopics = [\"{p}-.*\"]\nrefresh_topics_interval_ms = 1000\n\
             progress_log_interval_ms = 1000\n"
        )
    };
    let toml = format!(
        "[[clusters]]\nalias = \"{aa}\"\nbootstrap_servers = \"{a}\"\n[[clusters]]\nalias = \"{ba}\"\n\
         bootstrap_servers = \"{b}\"\n{}{}",
        flow(&aa, &ba),
        flow(&ba, &aa)
    );
    let (forward, reverse) = (format!("{aa}->{ba}"), format!("{ba}->{aa}"));
    let log = "info,librdkafka=warn,rdkafka=warn";
    let near_b = Strait::launch(&format!("{p}-b"), &toml, log, &["--flow", &forward]);
    let near_a = Strait::launch(&format!("{p}-a"), &toml, log, &["--flow", &reverse]);
    let per_side = 300;
    let on =
        |origin: &str| (0..per_side).map(|i| Rec::simple(i % PARTITIONS, &format!("{origin}-{i}"))).collect::<Vec<_>>();
    produce(&a, &topic, &on("a")).await;
    produce(&b, &topic, &on("b")).await;
    // Records, not offsets: the commit markers take offsets too.
    let records = |bootstrap: &str| read_all(bootstrap, &topic, false).values().map(Vec::len).sum::<usize>();
    wait_until("both sides hold both sides' records", Duration::from_secs(60), || {
        records(&a) == 2 * per_side as usize && records(&b) == 2 * per_side as usize
    })
    .await;

    let config = write_config(&format!("{p}-status"), &toml);
    let lags = || {
        let out = Command::new(env!("CARGO_BIN_EXE_strait"))
            .args(["status", "--output", "json", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let rows = status["partitions"].as_array().cloned().unwrap_or_default();
        let lags: Vec<(String, i64, Option<i64>)> = rows
            .iter()
            .filter(|r| r["topic"] == topic.as_str())
            .map(|r| {
                (
                    r["flow"].as_str().unwrap_or_default().to_string(),
                    r["partition"].as_i64().unwrap_or(-1),
                    r["lag"].as_i64(),
                )
            })
            .collect();
        (out.status.code(), lags)
    };
    let gauge = |strait: &Strait, source: &str, target: &str, partition: i32| {
        let labels = format!("source=\"{source}\",target=\"{target}\",topic=\"{topic}\",partition=\"{partition}\"");
        http_get(&strait.metrics, "/metrics")
            .and_then(|(_, scrape)| sample(&scrape, "strait_replication_lag_records", &labels))
    };
    let mut last = (None, Vec::new(), Vec::new());
    // Before, lag 1 for ever; 60 s leaves room for a loaded CI machine's slow status calls.
    let settled = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let (code, rows) = lags();
            let gauges: Vec<Option<f64>> = (0..PARTITIONS)
                .flat_map(|part| [gauge(&near_b, &aa, &ba, part), gauge(&near_a, &ba, &aa, part)])
                .collect();
            let done = code == Some(0)
                && rows.len() == 2 * PARTITIONS as usize
                && rows.iter().all(|(_, _, lag)| *lag == Some(0))
                && gauges.iter().all(|g| *g == Some(0.0));
            last = (code, rows, gauges);
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    eprintln!("strait status (exit, [flow, partition, lag]) and the lag gauges, last seen: {last:?}");
    assert!(settled.is_ok(), "an idle pair shows lag 0 in status and the metric within 60 s; last: {last:?}");

    // Idle now: the readings behind the progress log stay at 0 through three progress
    // intervals. (The log line itself sums every partition of the flow, and the heartbeats
    // topics the other tests write on these shared clusters are always replicated, so it may
    // show their copying; the gauges of this pair's own topic may not.)
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        for part in 0..PARTITIONS {
            let (forward_lag, reverse_lag) = (gauge(&near_b, &aa, &ba, part), gauge(&near_a, &ba, &aa, part));
            assert_eq!(forward_lag, Some(0.0), "flow {forward} partition {part}: lag while idle");
            assert_eq!(reverse_lag, Some(0.0), "flow {reverse} partition {part}: lag while idle");
        }
    }
    for strait in [near_b, near_a] {
        let logs = strait.logs();
        assert!(strait.stop().success(), "{logs}");
    }
}
