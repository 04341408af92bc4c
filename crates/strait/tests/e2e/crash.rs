use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::*;

const RECORDS: usize = 100_000;

/// Through a SIGKILL mid-stream and a restart: nothing lost, and each partition in source order
/// but for one replay at the kill. The source's records come over 3 consumers and the target
/// takes them over 3 producers, one connection each (issue 43), each partition's through one of
/// each.
#[tokio::test(flavor = "multi_thread")]
async fn sigkill_mid_stream_then_restart_loses_nothing() {
    let f = TopicFlow::new("crash", 4).await;
    // The record path's consumers and producers (the batch path's SIGKILL: `batches.rs`).
    let config = f.config("commit_interval_ms = 200\ncopy = \"records\"");
    let on_target = format!("alias = \"{}\"\nbootstrap_servers = \"{}\"\n", f.dst, f.b);
    let on_source = format!("alias = \"{}\"\nbootstrap_servers = \"{}\"\n", f.src, f.a);
    let three = |on: &str| format!("{on}connections_per_broker = 3\n");
    let config = config.replace(&on_target, &three(&on_target)).replace(&on_source, &three(&on_source));
    assert_eq!(config.matches("connections_per_broker = 3").count(), 2, "{config}");
    let TopicFlow { a, b, p, topic, remote, .. } = f;
    let strait = Strait::start(&p, &config);
    // Produce while Strait replicates, in chunks, so the kill lands mid-stream.
    let (a2, t2) = (a.clone(), topic.clone());
    let producer = tokio::spawn(async move {
        for chunk in 0..50 {
            let recs: Vec<Rec> = (0..RECORDS / 50)
                .map(|i| {
                    let n = chunk * (RECORDS / 50) + i;
                    Rec::simple((n % 4) as i32, &format!("r{n}"))
                })
                .collect();
            produce(&a2, &t2, &recs).await;
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    });
    wait_until("a third replicated", Duration::from_secs(120), || {
        count(&b, &remote).unwrap_or(0) >= (RECORDS / 3) as i64
    })
    .await;
    strait.kill();
    let at_kill = count(&b, &remote).unwrap();
    producer.await.unwrap();
    assert!(at_kill < RECORDS as i64, "the kill must land mid-stream (target had {at_kill})");
    let strait = Strait::start(&format!("{p}-again"), &config);
    wait_until("every record replicated after restart", Duration::from_secs(180), || {
        count(&b, &remote).unwrap_or(0) >= RECORDS as i64
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let logs = strait.logs();
    assert!(strait.stop().success());
    assert!(logs.contains("record producers to the target") && logs.contains("producers=3"), "{logs}");
    assert!(logs.contains("source consumers") && logs.contains("consumers=3"), "{logs}");

    let mut seen: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    for (partition, recs) in read_all(&b, &remote, false) {
        let numbers: Vec<usize> = recs
            .iter()
            .map(|(_, r)| String::from_utf8_lossy(&r.value.clone().unwrap())[1..].parse().unwrap())
            .collect();
        // In order but where the restart went back to the last saved position, once.
        let rewinds = numbers.windows(2).filter(|w| w[1] <= w[0]).count();
        assert!(rewinds <= 1, "partition {partition}: {rewinds} steps back, not one replay");
        for (_, r) in recs {
            *seen.entry(r.value.clone().unwrap()).or_default() += 1;
        }
    }
    let missing: Vec<usize> = (0..RECORDS).filter(|n| !seen.contains_key(format!("r{n}").as_bytes())).collect();
    assert!(missing.is_empty(), "{} records lost, first {:?}", missing.len(), &missing[..missing.len().min(10)]);
    let duplicates: usize = seen.values().map(|n| n - 1).sum();
    eprintln!("crash test: killed with {at_kill} of {RECORDS} on the target; zero lost; {duplicates} duplicates after restart");
    assert_eq!(seen.len(), RECORDS, "no foreign records");
}

#[tokio::test(flavor = "multi_thread")]
async fn records_deleted_on_the_source_before_replication_are_reported_as_lost() {
    source_gap("continue").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_source_gap_stops_the_flow_with_on_source_gap_fail() {
    source_gap("fail").await;
}

async fn source_gap(on_source_gap: &str) {
    use rdkafka::admin::AdminOptions;
    use rdkafka::{Offset, TopicPartitionList};
    let f = TopicFlow::new("gap", 1).await;
    let config = f.config(&format!("on_source_gap = \"{on_source_gap}\""));
    let TopicFlow { a, b, p, topic, remote, .. } = f;
    produce(&a, &topic, &(0..100).map(|i| Rec::simple(0, &format!("first{i}"))).collect::<Vec<_>>()).await;
    let strait = Strait::start(&p, &config);
    wait_until("first records replicated", Duration::from_secs(60), || count(&b, &remote) == Some(100)).await;
    assert!(strait.stop().success());

    // While Strait is stopped, 50 more arrive and the source deletes 20 of them (as retention
    // would) before Strait could copy them.
    produce(&a, &topic, &(0..50).map(|i| Rec::simple(0, &format!("second{i}"))).collect::<Vec<_>>()).await;
    let mut before = TopicPartitionList::new();
    before.add_partition_offset(&topic, 0, Offset::Offset(120)).unwrap();
    admin(&a).delete_records(&before, &AdminOptions::new()).await.expect("delete records");

    let mut strait = Strait::start(&format!("{p}-again"), &config);
    let logs = if on_source_gap == "fail" {
        wait_until("the flow stops at the gap", Duration::from_secs(60), || !strait.is_running()).await;
        let logs = strait.logs();
        assert_eq!(strait.stop().code(), Some(5), "exits 5 (data loss): {logs}");
        assert!(logs.contains("data loss") && logs.contains("on_source_gap"), "{logs}");
        assert_eq!(count(&b, &remote), Some(100), "nothing past the gap copied");
        logs
    } else {
        wait_until("the rest replicated", Duration::from_secs(60), || count(&b, &remote) == Some(130)).await;
        let logs = strait.logs();
        assert!(strait.stop().success());
        logs
    };
    let line =
        logs.lines().find(|l| l.contains("records lost")).unwrap_or_else(|| panic!("the gap is reported: {logs}"));
    assert!(
        line.contains("ERROR") && line.contains(&format!("topic=\"{topic}\"")) && line.contains("lost=20"),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn target_topic_deleted_while_stopped_is_copied_again_not_resumed_past_a_hole() {
    use rdkafka::admin::AdminOptions;
    let f = TopicFlow::new("tdel", 2).await;
    let config = f.config("");
    let TopicFlow { a, b, p, topic, remote, .. } = f;
    produce(&a, &topic, &(0..60).map(|i| Rec::simple(i % 2, &format!("r{i}"))).collect::<Vec<_>>()).await;
    let strait = Strait::start(&p, &config);
    wait_until("replicated", Duration::from_secs(60), || count(&b, &remote) == Some(60)).await;
    assert!(strait.stop().success());

    admin(&b).delete_topics(&[&remote], &AdminOptions::new()).await.unwrap();
    wait_until("target topic deleted", Duration::from_secs(30), || !topic_exists(&b, &remote)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    produce(&a, &topic, &(60..70).map(|i| Rec::simple(i % 2, &format!("r{i}"))).collect::<Vec<_>>()).await;

    let strait = Strait::start(&format!("{p}-again"), &config);
    wait_until("every source record on the target again", Duration::from_secs(60), || count(&b, &remote) == Some(70))
        .await;
    let logs = strait.logs();
    assert!(strait.stop().success());
    assert_eq!(
        logs.lines()
            .filter(|l| l.contains("the target partition no longer holds the records replicated to it"))
            .count(),
        2,
        "each partition's hole is reported: {logs}"
    );
}

/// The target topic deleted while Strait runs: the record path's librdkafka, and the batch path's
/// client alike, give up on the partition after about 30 s (not the 5 min delivery timeout) and
/// the flow stops naming the record or batch; a restart sees that the target lost what was
/// written and copies the topic again from the source's start.
#[tokio::test(flavor = "multi_thread")]
async fn target_topic_deleted_while_running_stops_the_flow_then_a_restart_copies_it_again() {
    target_topic_deleted("records", "tdel").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn target_topic_deleted_under_a_batch_flow_stops_it_then_a_restart_copies_it_again() {
    target_topic_deleted("batches", "tdelb").await;
}

async fn target_topic_deleted(copy: &str, name: &str) {
    let f = TopicFlow::new(name, 1).await;
    let first = |i: i32| Rec::simple(0, &format!("a{i}"));
    produce(&f.a, &f.topic, &(0..10).map(first).collect::<Vec<_>>()).await;
    let config = f.config(&format!("copy = \"{copy}\""));
    let mut strait = Strait::start(&f.p, &config);
    wait_until("replicated", Duration::from_secs(60), || count(&f.b, &f.remote) == Some(10)).await;
    admin(&f.b).delete_topics(&[&f.remote], &rdkafka::admin::AdminOptions::new()).await.unwrap();
    produce(&f.a, &f.topic, &[Rec::simple(0, "b")]).await;
    let deleted = std::time::Instant::now();
    wait_until("the flow stops", Duration::from_secs(90), || !strait.is_running()).await;
    let logs = strait.logs();
    assert!(!strait.stop().success(), "exits non-zero: {logs}");
    let named = match copy {
        "records" => format!("topic {} partition 0 offset 10", f.topic),
        _ => format!("{}/0: the batch from source offset 10 was not produced: the cluster has had no topic", f.remote),
    };
    assert!(logs.contains(&named), "{named}: {logs}");
    eprintln!("stopped {:?} after the target topic was deleted", deleted.elapsed());

    let again = Strait::start(&format!("{}-again", f.p), &config);
    wait_until("copied again", Duration::from_secs(60), || count(&f.b, &f.remote) == Some(11)).await;
    assert!(again.stop().success());
}
