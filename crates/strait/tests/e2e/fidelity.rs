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
