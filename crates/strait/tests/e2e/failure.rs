use std::time::Duration;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn unproducible_record_stops_the_flow_naming_topic_partition_offset() {
    unproducible_record_stops_the_flow("at_least_once").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unproducible_record_stops_an_exactly_once_flow_and_nothing_after_it_is_visible() {
    unproducible_record_stops_the_flow("exactly_once").await;
}

/// The operator keeps the target topic's own, smaller record size limit: config sync would
/// otherwise raise it to fit the source's records.
const KEEP_TARGET_LIMIT: &str = "sync_topic_configs_exclude = [\"max.message.bytes\"]";

/// These tests hold the record path to its promises (a record's offset named, librdkafka's
/// `batch.size`); `batches_limits` holds the batch path to its own.
const RECORDS: &str = "copy = \"records\"";

/// Records replicated (read_committed) to `remote`'s partition 0.
fn replicated(b: &str, remote: &str) -> usize {
    read_all(b, remote, false).get(&0).map_or(0, Vec::len)
}

async fn unproducible_record_stops_the_flow(delivery: &str) {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("fail");
    let (src, dst) = (format!("{p}s"), format!("{p}d"));
    let topic = format!("{p}-big");
    create_topic(&a, &topic, 1, &[("max.message.bytes", "2000000")]).await;
    // The target topic already exists and refuses records over 10 kB.
    create_topic(&b, &format!("{src}.{topic}"), 1, &[("max.message.bytes", "10000")]).await;
    let config = two_cluster_config(
        (&src, &a, ""),
        (&dst, &b, ""),
        &format!("topics = [\"{topic}\"]\ndelivery = \"{delivery}\"\n{KEEP_TARGET_LIMIT}\n{RECORDS}"),
        "",
    );
    // Five small records replicate; the sixth (offset 5) is too large for the target. Produced
    // after the first five are on the target, so it travels alone in its produce batch.
    produce(&a, &topic, &(0..5).map(|i| Rec::simple(0, &format!("small-{i}"))).collect::<Vec<_>>()).await;
    let first = Strait::start(&format!("{p}-first"), &config);
    let remote = format!("{src}.{topic}");
    wait_until("small records replicated", Duration::from_secs(60), || replicated(&b, &remote) == 5).await;
    assert!(first.stop().success());
    // The too-large record, then small ones that must not overtake it on the target. Over
    // batch.size (1 MB), so it travels in its own batch and the others in later ones. At each
    // start it is the first record the new producer sends to the partition.
    let mut rest = vec![Rec::simple(0, &"x".repeat(1_100_000))];
    rest.extend((0..100).map(|i| Rec::simple(0, &format!("after-{i}"))));
    produce(&a, &topic, &rest).await;
    for attempt in 0..3 {
        let mut strait = Strait::start(&format!("{p}-{attempt}"), &config);
        wait_until("strait stops on the bad record", Duration::from_secs(60), || !strait.is_running()).await;
        let log = strait.log.clone();
        let status = strait.stop();
        let logs = std::fs::read_to_string(&log).unwrap();
        assert!(!status.success(), "a flow that cannot produce exits non-zero");
        assert!(!logs.contains("panicked"), "a failed flow closes cleanly: {logs}");
        assert!(
            logs.contains(&format!("topic {topic} partition 0 offset 5")),
            "error names topic, partition and offset: {logs}"
        );
        // Never skipped: after a restart the same record stops the flow again. Neither it nor
        // anything after it is on the target: only the five records before it, once each.
        let target = read_all(&b, &format!("{src}.{topic}"), false);
        let values: Vec<String> =
            target[&0].iter().map(|(_, r)| String::from_utf8_lossy(r.value.as_deref().unwrap()).into_owned()).collect();
        assert_eq!(values, (0..5).map(|i| format!("small-{i}")).collect::<Vec<_>>(), "attempt {attempt}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn records_written_before_a_refused_one_are_not_written_again_at_restart() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("keep");
    let (src, dst) = (format!("{p}s"), format!("{p}d"));
    let (topic, other) = (format!("{p}-big"), format!("{p}-other"));
    create_topic(&a, &topic, 1, &[("max.message.bytes", "5000000")]).await;
    create_topic(&a, &other, 2, &[]).await;
    // The target topic exists with the broker's default size limit (about 1 MB).
    let remote = format!("{src}.{topic}");
    create_topic(&b, &remote, 1, &[]).await;
    // Ten small records, then one of 3 MB, all in one batch; another topic's records beside them.
    let mut recs: Vec<Rec> = (0..10).map(|i| Rec::simple(0, &format!("small-{i}"))).collect();
    recs.push(Rec::simple(0, &"x".repeat(3_000_000)));
    produce(&a, &topic, &recs).await;
    produce(&a, &other, &(0..40).map(|i| Rec::simple(i % 2, &format!("o{i}"))).collect::<Vec<_>>()).await;
    let config = two_cluster_config(
        (&src, &a, ""),
        (&dst, &b, ""),
        &format!("topics = [\"{p}-.*\"]\n{KEEP_TARGET_LIMIT}\n{RECORDS}"),
        "",
    );
    for attempt in 0..3 {
        let mut strait = Strait::start(&format!("{p}-{attempt}"), &config);
        wait_until("strait stops on the refused record", Duration::from_secs(60), || !strait.is_running()).await;
        let logs = strait.logs();
        assert!(!strait.stop().success(), "{logs}");
        assert!(logs.contains(&format!("topic {topic} partition 0 offset 10")), "names the refused record: {logs}");
        let on_target = read_all(&b, &remote, false);
        let values: Vec<String> = on_target[&0]
            .iter()
            .map(|(_, r)| String::from_utf8_lossy(r.value.as_deref().unwrap()).into_owned())
            .collect();
        assert_eq!(values, (0..10).map(|i| format!("small-{i}")).collect::<Vec<_>>(), "attempt {attempt}: each once");
    }
    // The other topic: whatever reached the target before the producer stopped is there once, and
    // its position is saved exactly that far, so restarts neither repeat it nor skip the rest.
    // (How much got there before the refusal depends on timing: records still queued behind the
    // refused one are not sent, and wait, unsaved, for the next start.)
    let other_remote = format!("{src}.{other}");
    let written = read_all(&b, &other_remote, false);
    let flow = strait::config::Config::parse(&config).unwrap().remove(0);
    let saved = strait::positions::load(&flow.target, &flow.name).await.unwrap();
    for partition in 0..2 {
        let values: Vec<Vec<u8>> = written
            .get(&partition)
            .map(|r| r.iter().map(|(_, r)| r.value.clone().unwrap()).collect())
            .unwrap_or_default();
        let distinct: std::collections::BTreeSet<&Vec<u8>> = values.iter().collect();
        assert_eq!(distinct.len(), values.len(), "partition {partition} of the other topic: each record once");
        let position = saved.get(&(other.clone(), partition)).map_or(0, |s| s.next_offset);
        assert_eq!(
            position,
            values.len() as i64,
            "partition {partition}: the position covers exactly what was written"
        );
    }
}

/// A failure that comes to light only in the drain SIGTERM starts still fails the run, naming
/// what could not be written: a stopping flow does not swallow its slot's error.
#[tokio::test(flavor = "multi_thread")]
async fn a_failure_found_while_stopping_exits_non_zero_naming_it() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("term");
    let (src, dst) = (format!("{p}s"), format!("{p}d"));
    let topic = format!("{p}-t");
    create_topic(&a, &topic, 1, &[]).await;
    produce(&a, &topic, &(0..3).map(|i| Rec::simple(0, &format!("r{i}"))).collect::<Vec<_>>()).await;
    // The flow's offset-syncs topic refuses every write; the records themselves are written.
    let syncs_topic = format!("mm2-offset-syncs.{src}.internal");
    create_topic(&b, &syncs_topic, 1, &[("cleanup.policy", "compact"), ("max.message.bytes", "50")]).await;
    // No commit before the stop: the first offset syncs are written in the drain's commit.
    let extra = format!("topics = [\"{topic}\"]\ncommit_interval_ms = 600000");
    let config = two_cluster_config((&src, &a, ""), (&dst, &b, ""), &extra, "");
    let mut strait = Strait::start(&format!("{p}-run"), &config);
    let remote = format!("{src}.{topic}");
    wait_until("records replicated", Duration::from_secs(60), || {
        read_all(&b, &remote, false).get(&0).map_or(0, Vec::len) == 3
    })
    .await;
    assert!(strait.is_running(), "nothing fails before the commit: {}", strait.logs());
    let logs = strait.log.clone();
    let status = strait.stop();
    let logs = std::fs::read_to_string(&logs).unwrap();
    assert!(!status.success(), "the drain failed, so the run fails: {logs}");
    assert!(logs.contains(&format!("could not be written to {syncs_topic}")), "names what failed: {logs}");
    // The failed state transaction was aborted, not left open: positions read back at once
    // (an open one holds every read_committed read of them, every flow's start on this target).
    let flow = strait::config::Config::parse(&config).unwrap().remove(0);
    let read = tokio::time::timeout(Duration::from_secs(20), strait::positions::load(&flow.target, &flow.name)).await;
    assert!(matches!(read, Ok(Ok(_))), "positions read back: {read:?}");
}

/// A target topic whose own limit is under librdkafka's batch.size refuses whole batches of small
/// records: the error says so and what to set, and the setting it names makes the flow work.
#[tokio::test(flavor = "multi_thread")]
async fn small_records_refused_as_a_batch_name_the_setting_that_lets_them_through() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("batch");
    let topic = format!("{p}-t");
    create_topic(&a, &topic, 1, &[]).await;
    let remote = format!("{p}s.{topic}");
    create_topic(&b, &remote, 1, &[("max.message.bytes", "20000")]).await;
    let records: Vec<Rec> = (0..2000).map(|i| Rec::simple(0, &format!("{i:0>200}"))).collect();
    produce(&a, &topic, &records).await;
    let config = |target_client: &str| {
        format!(
            "[[clusters]]\nalias = \"{p}s\"\nbootstrap_servers = \"{a}\"\n\n\
             [[clusters]]\nalias = \"{p}d\"\nbootstrap_servers = \"{b}\"\n{target_client}\n\
             [[flows]]\nsource = \"{p}s\"\ntarget = \"{p}d\"\ntopics = [\"{topic}\"]\n{KEEP_TARGET_LIMIT}\n{RECORDS}\n"
        )
    };
    let mut strait = Strait::start(&format!("{p}-default"), &config(""));
    wait_until("strait stops on the refused batch", Duration::from_secs(60), || !strait.is_running()).await;
    let logs = strait.logs();
    assert!(!strait.stop().success(), "{logs}");
    assert!(logs.contains(&format!("topic {topic} partition 0")), "names the partition: {logs}");
    assert!(logs.contains("set batch.size below it in the target cluster's client settings"), "{logs}");
    let mut strait = Strait::start(&format!("{p}-small"), &config("[clusters.client]\n\"batch.size\" = \"16000\""));
    wait_until("all records replicated", Duration::from_secs(60), || {
        read_all(&b, &remote, false).get(&0).map_or(0, Vec::len) >= 2000
    })
    .await;
    assert!(strait.is_running(), "{}", strait.logs());
    assert!(strait.stop().success());
    let values: Vec<Vec<u8>> = read_all(&b, &remote, false)[&0].iter().map(|(_, r)| r.value.clone().unwrap()).collect();
    assert_eq!(
        values,
        records.iter().map(|r| r.value.clone().unwrap()).collect::<Vec<_>>(),
        "each record once, in order"
    );
}

/// A record fits its source topic as the source's producer compressed it; Strait produces it
/// uncompressed, so the target topic it creates must take it all the same.
#[tokio::test(flavor = "multi_thread")]
async fn a_record_compressed_under_the_source_limit_fits_the_target_topic_strait_creates() {
    let f = TopicFlow::with_configs("zstd", 1, &[("max.message.bytes", "5242880")]).await;
    let (a, b) = (&f.a, &f.b);
    // 8 MB that zstd brings far below the 5 MB limit, between two small records.
    let big: String = (0..8_000_000).map(|i| char::from(b'a' + (i % 7) as u8)).collect();
    let records = [Rec::simple(0, "before"), Rec::simple(0, &big), Rec::simple(0, "after")];
    produce_with(a, &f.topic, &records, &[("compression.type", "zstd"), ("message.max.bytes", "20000000")]).await;
    let strait = Strait::start(&f.p, &f.config(""));
    wait_until("all three replicated", Duration::from_secs(60), || count(b, &f.remote) == Some(3)).await;
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");
    let target = read_all(b, &f.remote, false);
    let values: Vec<_> = target[&0].iter().map(|(_, r)| r.value.clone().unwrap()).collect();
    assert_eq!(values, vec![b"before".to_vec(), big.into_bytes(), b"after".to_vec()]);
}
