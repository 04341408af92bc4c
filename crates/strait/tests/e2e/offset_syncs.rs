use std::collections::BTreeMap;
use std::time::Duration;

use strait_mm2::OffsetSync;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn offset_syncs_decode_as_mm2_and_follow_the_emission_rule() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("sync");
    let (src, dst) = (format!("{p}s"), format!("{p}d"));
    let topic = format!("{p}-t");
    let remote = format!("{src}.{topic}");
    let lag_max = 10i64;
    create_topic(&a, &topic, 2, &[]).await;
    produce(&a, &topic, &(0..500).map(|i| Rec::simple(i % 2, &format!("v{i}"))).collect::<Vec<_>>()).await;
    let config = two_cluster_config(
        (&src, &a, ""),
        (&dst, &b, ""),
        &format!("topics = [\"{topic}\"]\noffset_lag_max = {lag_max}"),
        "",
    );
    let strait = Strait::start(&p, &config);
    wait_until("replicated", Duration::from_secs(60), || count(&b, &remote) == Some(500)).await;
    assert!(strait.stop().success());

    let syncs_topic = format!("mm2-offset-syncs.{src}.internal");
    let raw = read_all(&b, &syncs_topic, true);
    assert_eq!(raw.len(), 1, "single partition");
    let mut per_partition: BTreeMap<i32, Vec<OffsetSync>> = BTreeMap::new();
    for (_, r) in &raw[&0] {
        assert!(r.headers.is_empty(), "internal records carry no headers");
        let sync = OffsetSync::decode(r.key.as_deref().unwrap(), r.value.as_deref().unwrap()).expect("MM2 layout");
        // The flow also replicates the source's heartbeats topics, as MM2 does: its own and
        // those other flows on the shared cluster replicated there (`<alias>.heartbeats`).
        let heartbeats = sync.topic == "heartbeats" || sync.topic.ends_with(".heartbeats");
        assert!(sync.topic == topic || heartbeats, "key names the source topic: {sync:?}");
        if sync.topic != topic {
            continue;
        }
        per_partition.entry(sync.partition).or_default().push(sync);
    }
    let source = read_all(&a, &topic, false);
    let target = read_all(&b, &remote, false);
    for p in 0..2 {
        let syncs = &per_partition[&p];
        let (src_recs, dst_recs) = (&source[&p], &target[&p]);
        assert_eq!((syncs[0].upstream.0, syncs[0].downstream.0), (0, 0), "first record synced at once");
        let last = syncs.last().unwrap();
        assert_eq!(
            last.upstream.0,
            src_recs.last().unwrap().0,
            "quiet partition converges: last record synced on flush"
        );
        for s in syncs {
            let up = src_recs.iter().find(|(o, _)| *o == s.upstream.0).unwrap();
            let down = dst_recs.iter().find(|(o, _)| *o == s.downstream.0).unwrap();
            assert_eq!(up.1, down.1, "sync {s:?} pairs the same record");
        }
        for w in syncs.windows(2) {
            let gap = w[1].downstream.0 - w[0].downstream.0;
            assert!(gap > 0 && gap <= lag_max + 1, "consecutive syncs {w:?} at most offset_lag_max+1 apart");
        }
        assert!(syncs.len() as i64 >= 250 / (lag_max + 1), "partition {p}: {} syncs for 250 records", syncs.len());
    }
}
