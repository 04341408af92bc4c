//! `max_bytes_per_second` through real brokers: a capped flow copies a backlog at the cap, and
//! its heartbeats and checkpoints keep their intervals meanwhile.

use std::time::{Duration, Instant};

use strait_mm2::Heartbeat;

use crate::support::*;

/// 200 MB of records (20,000 of 10,000 bytes) behind a 5 MB/s cap: copied in 40 s ± 15 %.
/// Meanwhile a consumer group on the source keeps committing as far as the copy got.
#[tokio::test(flavor = "multi_thread")]
async fn a_capped_flow_copies_a_backlog_at_the_cap_and_keeps_its_heartbeats_and_checkpoints() {
    const RECORDS: usize = 20_000;
    const CAP: u64 = 5_000_000;
    let f = TopicFlow::new("cap", 4).await;
    let value = "v".repeat(10_000);
    let records: Vec<Rec> = (0..RECORDS).map(|i| Rec::simple((i % 4) as i32, &value)).collect();
    produce(&f.a, &f.topic, &records).await;
    let settings =
        format!("max_bytes_per_second = {CAP}\nemit_checkpoints_interval_ms = 1000\nrefresh_groups_interval_ms = 1000");
    let strait = Strait::start(&f.p, &f.config(&settings));
    wait_until("the first records copied", Duration::from_secs(60), || count(&f.b, &f.remote).unwrap_or(0) > 0).await;
    let (began, began_ms) = (Instant::now(), now_ms());
    let group = format!("{}-g", f.p);
    let copying = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let committer = {
        let (a, b, topic, remote, group, copying) =
            (f.a.clone(), f.b.clone(), f.topic.clone(), f.remote.clone(), group.clone(), copying.clone());
        std::thread::spawn(move || {
            while copying.load(std::sync::atomic::Ordering::Relaxed) {
                // The group has read what the target holds: its checkpoints move with the copy.
                let copied: Vec<(i32, i64)> = (0..4).map(|p| (p, high_watermark(&b, &remote, p))).collect();
                let offsets: Vec<(&str, i32, i64)> = copied.iter().map(|(p, o)| (topic.as_str(), *p, *o)).collect();
                commit_group(&a, &group, &offsets);
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };
    wait_until("the backlog copied", Duration::from_secs(120), || count(&f.b, &f.remote) == Some(RECORDS as i64)).await;
    let took = began.elapsed();
    copying.store(false, std::sync::atomic::Ordering::Relaxed);
    committer.join().unwrap();
    let (ended_ms, scrape) = (now_ms(), http_get(&strait.metrics, "/metrics").map(|(_, b)| b).unwrap_or_default());
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");

    let bytes = (RECORDS * value.len()) as f64;
    let expected = Duration::from_secs_f64(bytes / CAP as f64);
    eprintln!("200 MB at a 5 MB/s cap: copied in {took:.1?} (expected {expected:.1?})");
    assert!(
        took > expected.mul_f64(0.85) && took < expected.mul_f64(1.15),
        "copied in {took:?}, expected {expected:?} ± 15 %"
    );
    let waited = sample(&scrape, "strait_throttled_ms_total", &format!("source=\"{}\",target=\"{}\"", f.src, f.dst));
    assert!(waited.is_some_and(|ms| ms > 10_000.0), "waits counted: {waited:?}");
    // Heartbeats (every 1 s by default) went on while the source waited.
    let beats = read_all(&f.b, "heartbeats", false)
        .into_values()
        .flatten()
        .filter_map(|(_, r)| Heartbeat::decode(r.key.as_deref()?, r.value.as_deref()?).ok())
        .filter(|h| h.source_alias == f.src && h.target_alias == f.dst)
        .filter(|h| (began_ms..=ended_ms).contains(&h.timestamp_ms))
        .count();
    let seconds = took.as_secs();
    assert!(beats as u64 >= seconds * 8 / 10, "{beats} heartbeats in {seconds} s");
    // Checkpoints (every 1 s) went on too: no gap between two of them over 3 s.
    let mut written: Vec<i64> = read_all(&f.b, &strait_mm2::checkpoints_topic(&f.src), false)
        .into_values()
        .flatten()
        .filter(|(_, r)| {
            r.key
                .as_deref()
                .and_then(|k| strait_mm2::Checkpoint::decode(k, r.value.as_deref()?).ok())
                .is_some_and(|c| c.group == group)
        })
        .map(|(_, r)| r.timestamp)
        .filter(|ts| (began_ms..=ended_ms).contains(ts))
        .collect();
    written.sort();
    let gap = written.windows(2).map(|w| w[1] - w[0]).max();
    eprintln!("{} checkpoints in {seconds} s, longest gap {gap:?} ms", written.len());
    assert!(written.len() as u64 >= seconds * 8 / 10, "{} checkpoints in {seconds} s", written.len());
    assert!(gap.is_some_and(|g| g <= 3_000), "longest gap between checkpoints: {gap:?} ms");
}

fn high_watermark(bootstrap: &str, topic: &str, partition: i32) -> i64 {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let c: BaseConsumer = rdkafka::ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    c.fetch_watermarks(topic, partition, Duration::from_secs(10)).map_or(0, |(_, high)| high)
}
