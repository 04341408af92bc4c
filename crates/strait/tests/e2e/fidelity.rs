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
