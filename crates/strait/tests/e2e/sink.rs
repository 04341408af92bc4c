//! TargetSink used directly, as a connector runtime would: put, flush, drain_offset_syncs, close.

use std::sync::Arc;

use strait::config::Config;
use strait::sink::TargetSink;
use strait::source::ReplicatedRecord;
use strait_connect::{ConnectRecord, Header, Sink, SourceOffset};
use strait_mm2::OffsetSync;

use crate::support::*;

fn record(topic: &Arc<str>, offset: i64, value: Option<&str>) -> ConnectRecord<(), ReplicatedRecord> {
    ConnectRecord {
        key: None,
        value: value.map(|v| ReplicatedRecord {
            topic: topic.clone(),
            partition: 0,
            offset,
            key: Some(format!("k{offset}").into_bytes()),
            value: Some(v.as_bytes().to_vec()),
        }),
        timestamp_ms: Some(1_700_000_000_000 + offset),
        headers: vec![Header { key: "h".into(), value: None }],
        source_offset: SourceOffset { topic: topic.clone(), partition: 0, offset },
        size_bytes: 100,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn target_sink_put_flush_drain_offset_syncs_close() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("sink");
    let (src, dst) = (format!("{p}s"), format!("{p}d"));
    let topic: Arc<str> = Arc::from(format!("{p}-t").as_str());
    create_topic(&a, &topic, 1, &[]).await;
    let toml = two_cluster_config((&src, &a, ""), (&dst, &b, ""), "offset_lag_max = 3", "");
    let flow = Arc::new(Config::parse(&toml).unwrap().flows().unwrap().remove(0));
    let mut sink = TargetSink::start(flow).await.expect("sink starts against real brokers");
    assert!(!sink.supports_transactions(), "at-least-once sink");

    // Offsets 0..=9 with a record without payload at 5 (skipped, so upstream 6 follows a gap).
    let batch: Vec<_> = (0..10).map(|o| record(&topic, o, (o != 5).then_some("v"))).collect();
    sink.put(batch).await.unwrap();
    sink.flush().await.unwrap();
    let syncs = sink.drain_offset_syncs();
    assert!(sink.drain_offset_syncs().is_empty(), "drain clears");
    let pairs: Vec<(i64, i64)> = syncs.iter().map(|s| (s.upstream.0, s.downstream.0)).collect();
    // MM2's rule with offset_lag_max 3: first record, lag reached at down 4, the gap at up 6,
    // and the last record promoted on flush.
    assert_eq!(pairs, vec![(0, 0), (4, 4), (6, 5), (9, 8)]);
    assert!(syncs.iter().all(|s| s.topic == *topic && s.partition == 0));

    let remote = format!("{src}.{topic}");
    let on_target = read_all(&b, &remote, true).remove(&0).unwrap();
    assert_eq!(on_target.len(), 9, "the record without payload is skipped");
    let (_, first) = &on_target[0];
    assert_eq!(first.key.as_deref(), Some(&b"k0"[..]));
    assert_eq!(first.timestamp, 1_700_000_000_000);
    assert_eq!(first.headers[0], ("h".to_string(), None), "headers kept, null value included");
    assert_eq!(first.headers[1].0, "strait.provenance", "provenance header added last");

    let written: Vec<OffsetSync> = read_all(&b, &format!("mm2-offset-syncs.{src}.internal"), true)
        .remove(&0)
        .unwrap()
        .into_iter()
        .map(|(_, r)| OffsetSync::decode(r.key.as_deref().unwrap(), r.value.as_deref().unwrap()).unwrap())
        .filter(|s| s.topic == *topic)
        .collect();
    assert_eq!(written, syncs, "drained syncs are the ones written");
    sink.close().await.unwrap();
}
