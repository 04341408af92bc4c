use std::time::{Duration, Instant};

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn new_topics_and_partitions_are_picked_up() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("disc");
    let (src, dst) = (format!("{p}s"), format!("{p}d"));
    let first = format!("{p}-first");
    create_topic(&a, &first, 1, &[("retention.ms", "86400000"), ("cleanup.policy", "compact,delete")]).await;
    produce(&a, &first, &(0..10).map(|i| Rec { key: Some(vec![i as u8]), ..Rec::simple(0, "x") }).collect::<Vec<_>>())
        .await;
    // Default refresh interval (5 s): a new topic must still arrive within 10 s.
    let mut config = two_cluster_config((&src, &a, ""), (&dst, &b, ""), &format!("topics = [\"{p}-.*\"]"), "");
    config = config.replace("refresh_topics_interval_ms = 1000\n", "");
    let strait = Strait::start(&p, &config);
    wait_until("first topic", Duration::from_secs(60), || count(&b, &format!("{src}.{first}")) == Some(10)).await;
    let configs = describe_topic_configs(&b, &format!("{src}.{first}")).await;
    assert_eq!(configs.get("retention.ms").map(String::as_str), Some("86400000"), "topic configs copied");
    assert_eq!(configs.get("cleanup.policy").map(String::as_str), Some("compact,delete"));

    let second = format!("{p}-second");
    create_topic(&a, &second, 2, &[]).await;
    let started = Instant::now();
    produce(&a, &second, &(0..20).map(|i| Rec::simple(i % 2, "y")).collect::<Vec<_>>()).await;
    wait_until("new topic within 10 s", Duration::from_secs(10), || count(&b, &format!("{src}.{second}")) == Some(20))
        .await;
    eprintln!("new topic replicated {:?} after creation", started.elapsed());

    add_partitions(&a, &first, 3).await;
    produce(
        &a,
        &first,
        &[
            Rec { key: Some(b"k1".to_vec()), ..Rec::simple(1, "p1") },
            Rec { key: Some(b"k2".to_vec()), ..Rec::simple(2, "p2") },
        ],
    )
    .await;
    wait_until("added partitions replicated", Duration::from_secs(30), || {
        count(&b, &format!("{src}.{first}")) == Some(12)
    })
    .await;
    assert_eq!(partitions(&b, &format!("{src}.{first}")), 3);
    assert!(strait.stop().success());
    let target = read_all(&b, &format!("{src}.{first}"), false);
    assert_eq!(target[&2][0].1.value.as_deref(), Some(&b"p2"[..]), "same partition on the target");
}

/// Every selected source topic's target topic is made at start, all together, before any record
/// of it arrives (across a long link, one topic after another at its first record cost seconds
/// each); a topic with records is copied as before.
#[tokio::test(flavor = "multi_thread")]
async fn target_topics_are_made_at_start_before_their_first_record() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("prep");
    let (src, dst) = (format!("{p}s"), format!("{p}d"));
    let empty: Vec<String> = (0..3).map(|i| format!("{p}-empty{i}")).collect();
    for (i, topic) in empty.iter().enumerate() {
        create_topic(&a, topic, i as i32 + 1, &[]).await;
    }
    let busy = format!("{p}-busy");
    create_topic(&a, &busy, 2, &[]).await;
    produce(&a, &busy, &(0..10).map(|i| Rec::simple(i % 2, "x")).collect::<Vec<_>>()).await;
    let config = two_cluster_config((&src, &a, ""), (&dst, &b, ""), &format!("topics = [\"{p}-.*\"]"), "");
    let strait = Strait::start(&p, &config);
    wait_until("the busy topic copied", Duration::from_secs(60), || count(&b, &format!("{src}.{busy}")) == Some(10))
        .await;
    for (i, topic) in empty.iter().enumerate() {
        let remote = format!("{src}.{topic}");
        assert_eq!(partitions(&b, &remote), i + 1, "{remote} made with its source's partitions, though empty");
        assert_eq!(count(&b, &remote), Some(0));
    }
    assert!(strait.stop().success());
}

/// Topic config sync (KIP-894): a later change of a source topic's configs reaches the target
/// topic, minus MM2's exclude list and the flow's own, while a config set only on the target stays.
#[tokio::test(flavor = "multi_thread")]
async fn source_topic_config_changes_reach_the_target_and_target_overrides_stay() {
    let f = TopicFlow::with_configs("cfgsync", 1, &[("retention.ms", "86400000")]).await;
    produce(&f.a, &f.topic, &[Rec::simple(0, "x")]).await;
    let config = f.config("sync_topic_configs_interval_ms = 1000\nsync_topic_configs_exclude = [\"segment\\\\..*\"]");
    let strait = Strait::start(&f.p, &config);
    wait_until("replicated", Duration::from_secs(60), || count(&f.b, &f.remote) == Some(1)).await;
    // An operator's override on the target only.
    let mut target: Vec<(String, String)> = describe_topic_configs(&f.b, &f.remote).await.into_iter().collect();
    target.push(("delete.retention.ms".into(), "1234".into()));
    let target: Vec<(&str, &str)> = target.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    replace_topic_configs(&f.b, &f.remote, &target).await;
    replace_topic_configs(
        &f.a,
        &f.topic,
        &[("retention.ms", "3600000"), ("min.insync.replicas", "1"), ("segment.bytes", "2000000")],
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let synced = loop {
        let configs = describe_topic_configs(&f.b, &f.remote).await;
        if configs.get("retention.ms").map(String::as_str) == Some("3600000") {
            break configs;
        }
        assert!(Instant::now() < deadline, "retention.ms not synced within 30 s: {configs:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let logs = strait.logs();
    assert!(strait.stop().success());
    assert_eq!(synced.get("delete.retention.ms").map(String::as_str), Some("1234"), "target override kept: {synced:?}");
    assert!(!synced.contains_key("min.insync.replicas"), "MM2's exclude list: {synced:?}");
    assert!(!synced.contains_key("segment.bytes"), "the flow's exclude list: {synced:?}");
    assert_eq!(synced.get("max.message.bytes").map(String::as_str), Some("104857600"), "{synced:?}");
    assert!(logs.contains("synced topic configs"), "{logs}");
}
