//! A source topic deleted while the flow runs (and not created again) stays assigned, paused,
//! until it is listed again. The lag readings asked its offsets with every other partition's, so
//! each reading failed from then on: every lag gauge of the flow froze, the deleted topic's
//! included, for as long as the flow ran. Only the partitions the source lists are read now: the
//! deleted topic's series goes, and the others keep being read.

use std::time::Duration;

use rdkafka::admin::AdminOptions;
use strait::config::Config;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_deleted_source_topic_does_not_freeze_the_flows_lag_readings() {
    let (source, target) = (cluster(1), cluster(2));
    let p = unique("dellag");
    let (kept, deleted) = (format!("{p}-kept"), format!("{p}-gone"));
    for topic in [&kept, &deleted] {
        create_topic(&source, topic, 2, &[]).await;
        let records: Vec<Rec> = (0..40).map(|i| Rec::simple(i % 2, &format!("{topic}-{i}"))).collect();
        produce(&source, topic, &records).await;
    }
    let (src, dst) = (format!("{p}s"), format!("{p}d"));
    let config = two_cluster_config(
        (&src, &source, ""),
        (&dst, &target, ""),
        &format!("topics = [\"{p}-.*\"]\nprogress_log_interval_ms = 1000\n"),
        "",
    );
    let flow = Config::parse(&config).unwrap().remove(0);
    let strait = Strait::start(&p, &config);
    for topic in [&kept, &deleted] {
        wait_replicated(&flow, topic, 2, 20, Duration::from_secs(60)).await;
    }
    let gauge = |topic: &str, partition: i32| {
        let labels = format!("source=\"{src}\",target=\"{dst}\",topic=\"{topic}\",partition=\"{partition}\"");
        http_get(&strait.metrics, "/metrics")
            .and_then(|(_, scrape)| sample(&scrape, "strait_replication_lag_records", &labels))
    };
    wait_until("both topics' lag gauges read 0", Duration::from_secs(30), || {
        (0..2).all(|part| gauge(&kept, part) == Some(0.0) && gauge(&deleted, part) == Some(0.0))
    })
    .await;

    admin(&source).delete_topics(&[&deleted], &AdminOptions::new()).await.unwrap();
    // Readings go on: the deleted topic's series is dropped, the kept one's is still read.
    wait_until("the deleted topic's lag series dropped by a later reading", Duration::from_secs(30), || {
        (0..2).all(|part| gauge(&deleted, part).is_none())
    })
    .await;
    for part in 0..2 {
        assert_eq!(gauge(&kept, part), Some(0.0), "{kept} partition {part}: lag after the other topic's deletion");
    }
    let logs = strait.logs();
    assert!(strait.stop().success(), "strait exits cleanly\n{logs}");
}
