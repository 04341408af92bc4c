//! Broker faults through real brokers, at-least-once: the target and then the source broker
//! killed (SIGKILL) and restarted on the same port and data, and a 75 s network cut between
//! Strait and the target (past the 60 s timeout of the state producer's transactions, which
//! stopped the flow before). Each time: nothing lost, the flow resumes by itself within 30 s of the
//! cluster coming back, duplicates counted and printed; and a topic first seen while the target
//! is cut off waits for it. (Exactly-once through target restarts: `exactly_once.rs`.)

use std::time::{Duration, Instant};

use strait::config::Config;

use crate::support::*;

const PARTITIONS: i32 = 3;
const PER_PARTITION: usize = 20_000;

/// A fresh folder for this test's own clusters.
/// An at-least-once flow from `a` to `b` over a new topic of [`PARTITIONS`] partitions, whose
/// sequenced records arrive in the background over about a minute.
async fn flow_with_records(prefix: &str, a: &str, b: &str) -> (String, String, String, tokio::task::JoinHandle<()>) {
    let p = unique(prefix);
    let (src, dst, topic) = (format!("{p}s"), format!("{p}d"), format!("{p}-t"));
    create_topic(a, &topic, PARTITIONS, &[]).await;
    let config = two_cluster_config(
        (&src, a, ""),
        (&dst, b, ""),
        &format!("topics = [\"{topic}\"]\ncommit_interval_ms = 300\nprogress_log_interval_ms = 1000"),
        "",
    );
    let producer = tokio::spawn(produce_sequenced(
        a.to_string(),
        topic.clone(),
        PARTITIONS,
        PER_PARTITION,
        120,
        Duration::from_millis(500),
    ));
    (p, format!("{src}.{topic}"), config, producer)
}

/// Waits until the target holds more than `before` records of `remote`: the flow resumed.
async fn resumes_within_30s(what: &str, b: &str, remote: &str, before: i64) {
    let back = Instant::now();
    wait_until(what, Duration::from_secs(30), || count(b, remote).unwrap_or(0) > before).await;
    eprintln!("{what}: resumed {:?} after the cluster came back", back.elapsed());
}

/// Every record is on the target (per partition: none missing); prints the duplicates.
async fn nothing_lost(strait: Strait, config: &str, b: &str, remote: &str, fault: &str) {
    let flow = Config::parse(config).unwrap().remove(0);
    let topic = remote.split_once('.').unwrap().1;
    wait_replicated(&flow, topic, PARTITIONS, PER_PARTITION, Duration::from_secs(120)).await;
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");
    let report = sequence_report(b, remote, PARTITIONS, PER_PARTITION);
    assert!(report.values().all(|s| s.missing == 0), "records lost: {report:?}\n{logs}");
    let duplicated: usize = report.values().map(|s| s.duplicated).sum();
    eprintln!("{fault}: 0 lost, {duplicated} duplicates of {} records", PARTITIONS as usize * PER_PARTITION);
}

#[tokio::test(flavor = "multi_thread")]
async fn at_least_once_through_target_and_source_broker_restarts() {
    let mut clusters = strait_testkit::start_clusters(2, &dedicated_dir("restarts")).expect("dedicated clusters");
    let (mut source, mut target) = (clusters.remove(0), clusters.remove(0));
    let (a, b) = (source.bootstrap.clone(), target.bootstrap.clone());
    let (p, remote, config, producer) = flow_with_records("restarts", &a, &b).await;
    let metrics = free_addr();
    let strait = Strait::launch(&p, &config, "info", &["--metrics-addr", &metrics]);
    wait_until("replication under way", Duration::from_secs(60), || count(&b, &remote).unwrap_or(0) > 5_000).await;
    assert_eq!(http_get(&metrics, "/ready").map(|r| r.0), Some(200));
    target.kill().unwrap();
    // While the target is down: not ready, and the lag grows as records keep arriving.
    let lag = |scrape: &str| -> f64 {
        scrape
            .lines()
            .filter(|l| l.starts_with("strait_replication_lag_records{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    wait_until("/ready says 503 and the lag grows", Duration::from_secs(20), || {
        http_get(&metrics, "/ready").is_some_and(|r| r.0 == 503 && r.1.contains("target not answering"))
            && http_get(&metrics, "/metrics").is_some_and(|r| lag(&r.1) > 0.0)
    })
    .await;
    target.restart().expect("target broker restarts");
    let before = count(&b, &remote).unwrap();
    resumes_within_30s("target broker restart", &b, &remote, before).await;
    wait_until("/ready says 200 again", Duration::from_secs(30), || {
        http_get(&metrics, "/ready").is_some_and(|r| r.0 == 200)
    })
    .await;

    assert!(!producer.is_finished(), "records still arrive when the source goes down");
    source.kill().unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = count(&b, &remote).unwrap();
    source.restart().expect("source broker restarts");
    resumes_within_30s("source broker restart", &b, &remote, before).await;
    producer.await.unwrap();
    nothing_lost(strait, &config, &b, &remote, "broker restarts").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn at_least_once_through_a_75s_network_cut_to_the_target() {
    let (_target, proxy) = strait_testkit::start_cluster_behind_proxy(&dedicated_dir("cut")).expect("proxied cluster");
    let (a, b) = (cluster(1), format!("127.0.0.1:{}", proxy.port));
    let (p, remote, config, producer) = flow_with_records("cut", &a, &b).await;
    let strait = Strait::start(&p, &config);
    wait_until("replication under way", Duration::from_secs(60), || count(&b, &remote).unwrap_or(0) > 5_000).await;
    let before = count(&b, &remote).unwrap();
    // Cut off, the flow keeps running but can no longer write: `strait_flow_writable` (what an
    // alert on a dead mirror reads) says so within a probe or two, as `/ready` does.
    let labels = format!("source=\"{p}s\",target=\"{p}d\"");
    let scrape = || http_get(&strait.metrics, "/metrics").map(|(_, body)| body).unwrap_or_default();
    let writable = || sample(&scrape(), "strait_flow_writable", &labels);
    assert_eq!(writable(), Some(1.0), "writable before the cut");
    let cut = std::time::Instant::now();
    proxy.cut();
    wait_until("writable 0 while cut off", Duration::from_secs(30), || writable() == Some(0.0)).await;
    assert_eq!(sample(&scrape(), "strait_flow_up", &labels), Some(1.0), "the flow still runs");
    assert_eq!(http_get(&strait.metrics, "/ready").map(|r| r.0), Some(503));
    tokio::time::sleep(Duration::from_secs(75).saturating_sub(cut.elapsed())).await;
    proxy.heal();
    resumes_within_30s("75 s network cut", &b, &remote, before).await;
    wait_until("writable again", Duration::from_secs(30), || writable() == Some(1.0)).await;
    producer.await.unwrap();
    nothing_lost(strait, &config, &b, &remote, "network cut").await;
}

/// A source topic that appears while the target is cut off cannot get its target topic yet: its
/// records wait and the flow keeps trying (it stopped for good before), then copies them all once
/// the network heals. The source is a cluster of its own (on the shared one, other tests'
/// heartbeats arrive during the cut and hold the flow in its commit instead), and the slot
/// group's session outlasts the cut.
#[tokio::test(flavor = "multi_thread")]
async fn a_topic_first_seen_while_the_target_is_cut_off_is_copied_once_it_heals() {
    let (_target, proxy) =
        strait_testkit::start_cluster_behind_proxy(&dedicated_dir("newcut")).expect("proxied cluster");
    let source = strait_testkit::start_clusters(1, &dedicated_dir("newcut-source")).expect("source cluster").remove(0);
    let (a, b) = (source.bootstrap.clone(), format!("127.0.0.1:{}", proxy.port));
    let p = unique("newcut");
    let (first, second) = (format!("{p}-first"), format!("{p}-second"));
    create_topic(&a, &first, 1, &[]).await;
    let config = two_cluster_config(
        (&format!("{p}s"), &a, ""),
        (&format!("{p}d"), &b, ""),
        &format!(
            "topics = [\"{p}-.*\"]\ncommit_interval_ms = 300\nemit_heartbeats = false\nemit_checkpoints = false\n\
             [flows.scale_out]\nsession_timeout_ms = 60000"
        ),
        "",
    );
    let mut strait = Strait::start(&p, &config);
    produce(&a, &first, &[Rec::simple(0, "before the cut")]).await;
    wait_until("the first topic copied", Duration::from_secs(60), || count(&b, &format!("{p}s.{first}")) == Some(1))
        .await;
    // The flow's next flush waits for the state write of the one before: cut while the first
    // record's offset sync and position are being written, it would wait there until the heal
    // and never meet the new topic during the cut. So the cut comes after that write committed
    // (its offset sync visible read_committed) and a few flushes (300 ms apart) more.
    let syncs = strait_mm2::offset_syncs_topic(&format!("{p}s"));
    wait_until("the first record's offset sync committed", Duration::from_secs(60), || {
        topic_exists(&b, &syncs) && read_all(&b, &syncs, true).values().any(|s| !s.is_empty())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    proxy.cut();
    create_topic(&a, &second, 2, &[]).await;
    let records: Vec<Rec> = (0..1_000).map(|i| Rec::simple(i % 2, &format!("r{i}"))).collect();
    produce(&a, &second, &records).await;
    // Longer than a metadata request's timeout (10 s): the flow stopped within it before. And
    // the cut lasts until the flow has met the new topic's target unreachable (on a loaded machine
    // its first try can end after 25 s), so the copy after the heal is of a topic first seen
    // during the cut.
    tokio::time::sleep(Duration::from_secs(25)).await;
    let met = Instant::now() + Duration::from_secs(60);
    while !strait.logs().contains("the target topic cannot be made ready") {
        assert!(Instant::now() < met, "the new topic's target not found unreachable within 85 s: {}", strait.logs());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(strait.is_running(), "the flow keeps waiting for the target: {}", strait.logs());
    proxy.heal();
    let remote = format!("{p}s.{second}");
    wait_until("the new topic copied once the network heals", Duration::from_secs(60), || {
        count(&b, &remote).unwrap_or(0) >= 1_000
    })
    .await;
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");
    assert!(logs.contains("the target topic cannot be made ready"), "{logs}");
    let copied: std::collections::BTreeSet<Vec<u8>> =
        read_all(&b, &remote, false).into_values().flatten().filter_map(|(_, r)| r.value).collect();
    assert!((0..1_000).all(|i| copied.contains(format!("r{i}").as_bytes())), "every record of the new topic copied");
}
