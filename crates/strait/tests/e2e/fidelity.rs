use std::time::Duration;

use crate::support::*;

fn record(i: usize, partition: i32) -> Rec {
    let mut headers = vec![("seq".to_string(), Some(i.to_string().into_bytes()))];
    if i.is_multiple_of(3) {
        headers.push(("dup".into(), Some(b"one".to_vec())));
        headers.push(("dup".into(), Some(b"two".to_vec())));
    }
    if i.is_multiple_of(5) {
        headers.push(("null-valued".into(), None));
    }
    Rec {
        partition,
        key: if i.is_multiple_of(4) { None } else { Some(format!("key-{}", i % 50).into_bytes()) },
        value: if i.is_multiple_of(7) { None } else { Some(format!("value-{i}-{}", "x".repeat(i % 100)).into_bytes()) },
        headers,
        timestamp: 1_600_000_000_000 + i as i64 * 1000,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_record_arrives_identical_in_order_per_partition() {
    let (a, b) = (cluster(1), cluster(2));
    let (src, dst) = (unique("fidsrc"), unique("fiddst"));
    let topics = [(format!("{src}-one"), 1), (format!("{src}-three"), 3), (format!("{src}-eight"), 8)];
    let mut i = 0;
    for (topic, parts) in &topics {
        create_topic(&a, topic, *parts, &[]).await;
        let recs: Vec<Rec> = (0..3_334)
            .map(|_| {
                i += 1;
                record(i, (i % *parts as usize) as i32)
            })
            .collect();
        produce(&a, topic, &recs).await;
    }
    assert!(i >= 10_000);
    let strait = Strait::start(
        &src,
        &two_cluster_config((&src, &a, ""), (&dst, &b, ""), &format!("topics = [\"{src}-.*\"]"), ""),
    );
    for (topic, _) in &topics {
        let remote = format!("{src}.{topic}");
        wait_until(&format!("{remote} complete"), Duration::from_secs(90), || count(&b, &remote) == count(&a, topic))
            .await;
    }
    assert!(strait.stop().success(), "strait run exits 0 after SIGTERM");
    for (topic, parts) in &topics {
        let source = read_all(&a, topic, false);
        let target = read_all(&b, &format!("{src}.{topic}"), false);
        assert_eq!(target.len(), *parts as usize, "{topic}: same partition count");
        for (p, recs) in &source {
            let s: Vec<&Rec> = recs.iter().map(|(_, r)| r).collect();
            let t: Vec<&Rec> = target[p].iter().map(|(_, r)| r).collect();
            assert_eq!(s.len(), t.len(), "{topic} partition {p}: record count");
            for (n, (x, y)) in s.iter().zip(&t).enumerate() {
                assert_eq!(x, y, "{topic} partition {p} record #{n}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn timestamp_zero_is_never_changed_silently() {
    let (a, b) = (cluster(1), cluster(2));
    let (src, dst) = (unique("ts0src"), unique("ts0dst"));
    let topic = format!("{src}-t");
    create_topic(&a, &topic, 1, &[]).await;
    // Kafka's Java producer can write CreateTime 0; librdkafka (Strait's client) reads 0 as "now".
    for (ts, value) in [("0", "zero-a"), ("1600000000000", "kept"), ("0", "zero-b")] {
        strait_testkit::jvm::mm2_check(&["produce", &a, &topic, "0", ts, value]).expect("Java producer");
    }
    let config = two_cluster_config((&src, &a, ""), (&dst, &b, ""), &format!("topics = [\"{topic}\"]"), "");
    let strait = Strait::start(&src, &config);
    let remote = format!("{src}.{topic}");
    wait_until("replicated", Duration::from_secs(60), || count(&b, &remote) == Some(3)).await;
    let log = strait.log.clone();
    assert!(strait.stop().success());
    let logs = std::fs::read_to_string(log).unwrap();
    let target: Vec<(String, i64)> = read_all(&b, &remote, false)
        .remove(&0)
        .unwrap()
        .into_iter()
        .map(|(_, r)| (String::from_utf8(r.value.unwrap()).unwrap(), r.timestamp))
        .collect();
    assert_eq!(target[1], ("kept".to_string(), 1_600_000_000_000), "other timestamps are kept exactly");
    if target[0].1 != 0 {
        // Not kept: it must be said where, and counted.
        assert!(
            logs.contains("a record with timestamp 0 is written with the produce time")
                && logs.contains(&format!("topic={topic} partition=0 offset=0")),
            "{logs}"
        );
        assert!(
            logs.contains("records whose timestamp 0 became the produce time") && logs.contains("records=2"),
            "{logs}"
        );
    }
}

/// `compression = "zstd"`: the record path writes zstd batches to a target topic that keeps the
/// producer's codec (Kafka's default `compression.type = producer`), every record identical; the
/// source's were uncompressed.
#[tokio::test(flavor = "multi_thread")]
async fn the_record_path_produces_in_the_flows_codec() {
    let (a, b) = (cluster(1), cluster(2));
    let (src, dst) = (unique("zsrc"), unique("zdst"));
    let topic = format!("{src}-t");
    create_topic(&a, &topic, 2, &[]).await;
    produce(&a, &topic, &(0..2_000).map(|i| record(i, (i % 2) as i32)).collect::<Vec<_>>()).await;
    let flow = format!("topics = [\"{topic}\"]\ncompression = \"zstd\"");
    let strait = Strait::start(&src, &two_cluster_config((&src, &a, ""), (&dst, &b, ""), &flow, ""));
    let remote = format!("{src}.{topic}");
    wait_until("replicated", Duration::from_secs(60), || count(&b, &remote) == Some(2_000)).await;
    assert!(strait.stop().success(), "strait run exits 0 after SIGTERM");
    assert_eq!(codecs(a.clone(), topic.clone()).await, [("Some(None)".to_string(), 2_000)].into(), "the source's");
    // librdkafka sends a batch that compression would not shrink (a lone small record) as it is.
    let target = codecs(b.clone(), remote.clone()).await;
    assert!(target.get("Some(Zstd)").is_some_and(|n| *n >= 1_900), "the target's records, per codec: {target:?}");
    identical(&a, &topic, &b, &remote, 2);
}

/// `compression = "auto"` (the default): lz4 to a target in another region, here behind a proxy
/// that holds each chunk 10 ms each way (answers take 20 ms or more), at-least-once and
/// exactly-once, and none to a near one (loopback, unless the machine is so loaded that even the
/// quickest of 3 answers took 15 ms: then lz4, as the log's round trip says); every record
/// identical either way.
#[tokio::test(flavor = "multi_thread")]
async fn auto_compression_is_lz4_to_a_far_target_and_none_to_a_near_one() {
    let (_far, proxy) =
        strait_testkit::start_cluster_behind_proxy(&dedicated_dir("farcodec")).expect("proxied cluster");
    proxy.set_delay(Duration::from_millis(10));
    let (a, near, far) = (cluster(1), cluster(2), format!("127.0.0.1:{}", proxy.port));
    let topic = unique("autot");
    create_topic(&a, &topic, 2, &[]).await;
    produce(&a, &topic, &(0..2_000).map(|i| record(i, (i % 2) as i32)).collect::<Vec<_>>()).await;
    let eos = "delivery = \"exactly_once\"";
    for (target, far, delivery) in [(&near, false, ""), (&far, true, ""), (&far, true, eos)] {
        // Each case under a source alias of its own, so a remote topic of its own.
        let (src, dst) = (unique("autosrc"), unique("autodst"));
        let remote = format!("{src}.{topic}");
        // The record path's codec (the batch path keeps the source's).
        let flow = format!("topics = [\"{topic}\"]\ncopy = \"records\"\n{delivery}");
        let config = two_cluster_config((&src, &a, ""), (&dst, target, ""), &flow, "");
        let strait = Strait::start(&dst, &config);
        let parsed = strait::config::Config::parse(&config).unwrap().remove(0);
        wait_replicated(&parsed, &topic, 2, 1_000, Duration::from_secs(90)).await;
        let logs = strait.logs();
        assert!(strait.stop().success(), "strait run exits 0 after SIGTERM\n{logs}");
        let line = logs.lines().find(|l| l.contains(" compression=")).expect("the codec's line");
        let field = |name: &str| line.split(&format!(" {name}=")).nth(1).and_then(|v| v.split(' ').next()).unwrap();
        let round_trip: u64 = field("round_trip_ms").parse().unwrap();
        assert!(!far || round_trip >= 20, "the proxy holds each answer 20 ms: {line}");
        let lz4 = round_trip >= 15;
        assert_eq!(field("compression"), if lz4 { "\"lz4\"" } else { "\"none\"" }, "{line}");
        let codecs = codecs(target.clone(), remote.clone()).await;
        let want = if lz4 { "Some(Lz4)" } else { "Some(None)" };
        assert!(codecs.get(want).is_some_and(|n| *n >= 1_900), "the target's records, per codec: {codecs:?}");
        identical(&a, &topic, target, &remote, 2);
    }
}

/// Records per codec of the batches of `topic`'s partitions 0 and 1.
async fn codecs(bootstrap: String, topic: String) -> std::collections::BTreeMap<String, i32> {
    let options = strait_wire::ClientOptions::plaintext("codec-test", Duration::from_secs(10));
    let mut cluster = strait_wire::Cluster::connect(&bootstrap, options).await.unwrap();
    cluster.refresh(&[topic.as_str()]).await.unwrap();
    let mut records = std::collections::BTreeMap::new();
    for b in
        crate::wire::fetch_all(&mut cluster, &topic, 2, 1 << 20).await.values().flatten().flat_map(|f| f.committed())
    {
        *records.entry(format!("{:?}", b.compression())).or_insert(0) += b.record_count();
    }
    records
}

/// Every record of `topic`'s `partitions` on `a` is on `remote` on `b`, identical and in order.
fn identical(a: &str, topic: &str, b: &str, remote: &str, partitions: i32) {
    let (source, target) = (read_all(a, topic, false), read_all(b, remote, false));
    for p in 0..partitions {
        let records = |all: &std::collections::BTreeMap<i32, Vec<(i64, Rec)>>| -> Vec<Rec> {
            all[&p].iter().map(|(_, r)| r.clone()).collect()
        };
        assert_eq!(records(&target), records(&source), "partition {p}: every record identical, in order");
    }
}
