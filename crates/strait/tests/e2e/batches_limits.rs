//! `copy = "batches"` against the target topic's limits: a batch larger than the target topic
//! takes stops the flow naming it, unless config sync raises the limit, which it does before the
//! flow's first write to a target topic that already exists.

use std::time::Duration;

use crate::support::*;

/// A batch larger than the target topic accepts (its limit excluded from config sync) stops the
/// flow, naming the partition and the batch's source offset, and nothing after it is written
/// ahead of it.
#[tokio::test(flavor = "multi_thread")]
async fn a_batch_the_target_refuses_stops_the_flow_naming_it() {
    let f = TopicFlow::new("batchbig", 1).await;
    create_topic(&f.b, &f.remote, 1, &[("max.message.bytes", "2000")]).await;
    let small = |from: i32| (from..from + 5).map(|i| Rec::simple(0, &format!("small-{i}"))).collect::<Vec<_>>();
    produce(&f.a, &f.topic, &small(0)).await;
    let big: Vec<Rec> = (0..40).map(|i| Rec::simple(0, &format!("{i:0>200}"))).collect();
    produce_with(&f.a, &f.topic, &big, &[("linger.ms", "100"), ("batch.size", "100000")]).await;
    produce(&f.a, &f.topic, &small(5)).await;
    let first_big =
        read_all(&f.a, &f.topic, false)[&0].iter().find(|(_, r)| r.value.as_ref().unwrap().len() == 200).unwrap().0;

    let flow = "copy = \"batches\"\ncommit_interval_ms = 300\nsync_topic_configs_exclude = [\"max.message.bytes\"]";
    let strait = Strait::start(&f.p, &f.config(flow));
    let logs = exits_with(strait, 1, Duration::from_secs(60)).await;
    let named = format!("{}/0: the batch from source offset {first_big} was not produced", f.remote);
    assert!(logs.contains(&named), "the error names the batch ({named}): {logs}");
    let copied: Vec<Vec<u8>> =
        read_all(&f.b, &f.remote, false)[&0].iter().filter_map(|(_, r)| r.value.clone()).collect();
    let before: Vec<Vec<u8>> = small(0).into_iter().filter_map(|r| r.value).collect();
    assert_eq!(copied, before, "the records before the refused batch, and none after it");
}

/// A target topic created beforehand with a small `max.message.bytes`: config sync raises it
/// to the source's (at least 100 MiB, MM2's floor) before the flow's first write, so the first
/// start copies every batch. Before, the first start exited 1 naming the refused batch and only
/// the next start copied it.
#[tokio::test(flavor = "multi_thread")]
async fn a_pre_created_target_topic_with_a_small_limit_takes_large_batches_at_the_first_start() {
    small_target_limit("at_least_once").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pre_created_target_topic_with_a_small_limit_takes_large_batches_at_the_first_start_exactly_once() {
    small_target_limit("exactly_once").await;
}

async fn small_target_limit(delivery: &str) {
    let f = TopicFlow::new("batchlimit", 1).await;
    create_topic(&f.b, &f.remote, 1, &[("max.message.bytes", "2000")]).await;
    let big: Vec<Rec> = (0..40).map(|i| Rec::simple(0, &format!("{i:0>200}"))).collect();
    produce_with(&f.a, &f.topic, &big, &[("linger.ms", "100"), ("batch.size", "100000")]).await;
    let config = f.config(&format!("copy = \"batches\"\ncommit_interval_ms = 300\ndelivery = \"{delivery}\""));
    let mut strait = Strait::start(&f.p, &config);
    let copied = wait_until("the large batch copied", Duration::from_secs(60), || {
        count(&f.b, &f.remote).is_some_and(|n| n >= 40) || !strait.is_running()
    });
    copied.await;
    let logs = strait.logs();
    assert!(strait.is_running(), "{delivery}: the flow runs on: {logs}");
    assert!(strait.stop().success(), "{logs}");
    assert!(logs.contains("synced topic configs before the first write"), "{logs}");
    let values: Vec<Vec<u8>> =
        read_all(&f.b, &f.remote, false)[&0].iter().filter_map(|(_, r)| r.value.clone()).collect();
    assert_eq!(values, big.iter().filter_map(|r| r.value.clone()).collect::<Vec<_>>(), "{delivery}: each record once");
}
