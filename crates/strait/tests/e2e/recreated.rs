//! A source topic deleted and created again under the same name gets a new topic id (KIP-516):
//! Strait copies the new topic from its log start, never resuming it at the old topic's offsets,
//! whether that happens while it runs or while it is stopped.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::admin::AdminOptions;
use strait::config::{Config, StartFrom};

use crate::support::*;

const PARTITIONS: i32 = 3;

/// `per_partition` records of generation `generation` to each partition, all with `timestamp`.
fn generation(generation: &str, per_partition: usize, timestamp: i64) -> Vec<Rec> {
    (0..per_partition)
        .flat_map(|s| (0..PARTITIONS).map(move |p| (p, s)))
        .map(|(p, s)| Rec { timestamp, ..Rec::simple(p, &format!("{generation}-p{p}-{s}")) })
        .collect()
}

/// Per partition of `remote`, the values copied of generation `name` that come after a value of
/// the same generation with a higher sequence number (the source's order broken).
fn out_of_order(b: &str, remote: &str, name: &str) -> usize {
    let mut broken = 0;
    for recs in read_all(b, remote, false).values() {
        let mut highest = -1;
        for (_, r) in recs {
            let value = String::from_utf8(r.value.clone().unwrap()).unwrap();
            let Some(s) = value.strip_prefix(&format!("{name}-")).and_then(|v| v.rsplit('-').next()) else { continue };
            let s: i64 = s.parse().unwrap();
            if s <= highest {
                broken += 1;
            }
            highest = highest.max(s);
        }
    }
    broken
}

/// How often each value of `remote` was copied (read_committed).
fn copies(b: &str, remote: &str) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for recs in read_all(b, remote, false).values() {
        for (_, r) in recs {
            *seen.entry(String::from_utf8(r.value.clone().unwrap()).unwrap()).or_default() += 1;
        }
    }
    seen
}

/// Deletes `topic` on `a`, waits until it is gone, and creates it again with [`PARTITIONS`].
async fn recreate(a: &str, topic: &str) {
    admin(a).delete_topics(&[topic], &AdminOptions::new()).await.unwrap();
    wait_until("topic deleted", Duration::from_secs(30), || !topic_exists(a, topic)).await;
    create_topic(a, topic, PARTITIONS, &[]).await;
}

/// Asserts every record of generation `name` (`per_partition` per partition) was copied; returns
/// its duplicates.
fn all_copied(seen: &BTreeMap<String, usize>, name: &str, per_partition: usize) -> usize {
    let expected: Vec<String> =
        (0..per_partition).flat_map(|s| (0..PARTITIONS).map(move |p| format!("{name}-p{p}-{s}"))).collect();
    let missing: Vec<&String> = expected.iter().filter(|v| !seen.contains_key(*v)).collect();
    assert!(
        missing.is_empty(),
        "{} records of {name} lost, first {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    expected.iter().map(|v| seen[v] - 1).sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_topic_recreated_while_running_is_copied_from_its_start() {
    recreated_while_running("at_least_once", "").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_topic_recreated_while_running_exactly_once_is_copied_from_its_start() {
    recreated_while_running("exactly_once", "").await;
}

/// With `start_from = "latest"` too: the new topic is not a new topic to the flow (its records all
/// came after the flow began), so it starts at its log start, not its end.
#[tokio::test(flavor = "multi_thread")]
async fn a_topic_recreated_while_running_with_start_from_latest_is_copied_from_its_start() {
    recreated_while_running("at_least_once", "start_from = \"latest\"").await;
}

/// The case a new user found: 5,000 records copied, the topic deleted and created again while
/// Strait runs, then 15,000 new records at once, so the old positions (1,666 per partition) lie
/// inside the new topic before Strait looks at it again: before topic ids, its first 4,998
/// records were taken as copied. Strait is frozen (SIGSTOP) meanwhile, so its consumer cannot
/// see the new topic before its records are there (a race it may otherwise win).
/// With `copy = "batches"`, each partition is fetched by its topic's id (KIP-516): the new
/// topic's records are never read at the old topic's offsets, so each is copied once and in the
/// source's order, and the warning counts no lost record when every old one was copied. Before
/// fetches by id, this case copied 7,000 of 15,000 new records twice and broke all 3 partitions'
/// order (new records 1,667–4,999 first, then 0–4,999 again).
#[tokio::test(flavor = "multi_thread")]
async fn a_topic_recreated_under_a_batches_flow_is_copied_once_and_in_order() {
    recreated_batches("at_least_once").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_topic_recreated_under_an_exactly_once_batches_flow_is_copied_once_and_in_order() {
    recreated_batches("exactly_once").await;
}

async fn recreated_batches(delivery: &str) {
    let (duplicates, out_of_order, logs) = recreated_while_running(delivery, "copy = \"batches\"").await;
    assert_eq!((duplicates, out_of_order), (0, 0), "each new record once and in order ({delivery}): {logs}");
    assert!(logs.contains("records_lost=0 measured=\"its end as last fetched by its id\""), "{logs}");
}

/// Deleted while a records flow runs, created again a few seconds later, then 15,000 records at
/// once: the consumer reads by name, so the partitions are paused as soon as a listing misses
/// the topic, and the new topic is copied once and in order from its start. (Frozen across the
/// re-creation, as above, a records flow still reads the new topic's first records before the
/// listing that finds its new id: docs/operations.md.)
#[tokio::test(flavor = "multi_thread")]
async fn a_topic_recreated_under_a_records_flow_is_copied_once_and_in_order() {
    for delivery in ["at_least_once", "exactly_once"] {
        let f = TopicFlow::new("recrec", PARTITIONS).await;
        let config = f.config(&format!("delivery = \"{delivery}\"\ncommit_interval_ms = 300\ncopy = \"records\""));
        let flow = Config::parse(&config).unwrap().remove(0);
        let strait = Strait::start(&format!("{}-{delivery}", f.p), &config);
        produce(&f.a, &f.topic, &generation("old", 5_000 / PARTITIONS as usize, now_ms())).await;
        wait_replicated(&flow, &f.topic, PARTITIONS, 5_000 / PARTITIONS as usize, Duration::from_secs(60)).await;
        admin(&f.a).delete_topics(&[&f.topic], &AdminOptions::new()).await.unwrap();
        wait_until("topic deleted", Duration::from_secs(30), || !topic_exists(&f.a, &f.topic)).await;
        // Longer than a listing (refresh_topics_interval_ms = 1000 in the tests).
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        create_topic(&f.a, &f.topic, PARTITIONS, &[]).await;
        produce(&f.a, &f.topic, &generation("new", 5_000, now_ms())).await;
        wait_until("the new topic copied whole", Duration::from_secs(120), || {
            let seen = copies(&f.b, &f.remote);
            (0..5_000).all(|s| (0..PARTITIONS).all(|p| seen.contains_key(&format!("new-p{p}-{s}"))))
        })
        .await;
        let logs = strait.logs();
        assert!(strait.stop().success(), "{logs}");
        let seen = copies(&f.b, &f.remote);
        let (old, new) = (all_copied(&seen, "old", 5_000 / PARTITIONS as usize), all_copied(&seen, "new", 5_000));
        let out_of_order = out_of_order(&f.b, &f.remote, "new");
        eprintln!("recreated under a records flow ({delivery}): {new} of 15,000 new records copied twice, {out_of_order} out of order, {old} old ones");
        assert_eq!((old, new, out_of_order), (0, 0, 0), "{delivery}: each record once and in order: {logs}");
        assert!(logs.contains("its partitions are paused until it is listed again"), "{logs}");
    }
}

/// Returns how many of the new records were copied twice and out of order, and the logs.
async fn recreated_while_running(delivery: &str, extra: &str) -> (usize, usize, String) {
    let f = TopicFlow::new("recrun", PARTITIONS).await;
    let config = f.config(&format!("delivery = \"{delivery}\"\ncommit_interval_ms = 300\n{extra}"));
    let flow = Config::parse(&config).unwrap().remove(0);
    let addr = free_addr();
    let strait = Strait::launch(&f.p, &config, "info,librdkafka=warn,rdkafka=warn", &["--metrics-addr", &addr]);
    if flow.reading.start_from == StartFrom::Latest {
        // Started at the empty topic's end before the first record is produced.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let saved = strait::positions::load(&flow.target, &flow.name).await.unwrap_or_default();
            if (0..PARTITIONS).all(|p| saved.contains_key(&(f.topic.clone(), p))) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "start positions not saved: {saved:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    produce(&f.a, &f.topic, &generation("old", 5_000 / PARTITIONS as usize, now_ms())).await;
    wait_replicated(&flow, &f.topic, PARTITIONS, 5_000 / PARTITIONS as usize, Duration::from_secs(60)).await;

    strait.pause();
    recreate(&f.a, &f.topic).await;
    produce(&f.a, &f.topic, &generation("new", 5_000, now_ms())).await;
    strait.resume();
    let started = std::time::Instant::now();
    wait_until("the new topic copied whole", Duration::from_secs(120), || {
        let seen = copies(&f.b, &f.remote);
        (0..5_000).all(|s| (0..PARTITIONS).all(|p| seen.contains_key(&format!("new-p{p}-{s}"))))
    })
    .await;
    let resumed = started.elapsed();
    let scrape = http_get(&addr, "/metrics").map(|(_, body)| body).unwrap_or_default();
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");

    let seen = copies(&f.b, &f.remote);
    let old_duplicates = all_copied(&seen, "old", 5_000 / PARTITIONS as usize);
    let duplicates = all_copied(&seen, "new", 5_000);
    let out_of_order = out_of_order(&f.b, &f.remote, "new");
    eprintln!(
        "recreated while running ({delivery}, {extra}): 0 of 15,000 new records lost, {duplicates} copied twice, \
         {out_of_order} out of order, all copied {resumed:?} after the last was produced; old generation {old_duplicates} duplicates"
    );
    assert_eq!(old_duplicates, 0, "records of the old topic are never copied again");
    assert!(logs.contains("the source topic was deleted and created again"), "{logs}");
    let labels = format!("source=\"{}\",target=\"{}\",topic=\"{}\"", f.src, f.dst, f.topic);
    assert_eq!(sample(&scrape, "strait_source_topics_recreated_total", &labels), Some(1.0), "{scrape}");
    (duplicates, out_of_order, logs)
}

/// Recreated while Strait is stopped, with records of the same timestamps as the old ones (so the
/// saved timestamp cannot tell the topics apart) and far more of them than the saved position.
#[tokio::test(flavor = "multi_thread")]
async fn a_topic_recreated_while_stopped_is_copied_from_its_start() {
    let f = TopicFlow::new("recr", PARTITIONS).await;
    let config = f.config("");
    let flow = Config::parse(&config).unwrap().remove(0);
    let timestamp = now_ms();
    produce(&f.a, &f.topic, &generation("old", 50, timestamp)).await;
    let strait = Strait::start(&f.p, &config);
    wait_replicated(&flow, &f.topic, PARTITIONS, 50, Duration::from_secs(60)).await;
    assert!(strait.stop().success());

    recreate(&f.a, &f.topic).await;
    produce(&f.a, &f.topic, &generation("new", 2_000, timestamp)).await;

    let strait = Strait::start(&format!("{}-again", f.p), &config);
    wait_replicated(&flow, &f.topic, PARTITIONS, 2_000, Duration::from_secs(60)).await;
    let logs = strait.logs();
    assert!(strait.stop().success());
    assert!(logs.contains("deleted and created again while Strait was stopped"), "{logs}");
    let seen = copies(&f.b, &f.remote);
    assert_eq!(all_copied(&seen, "new", 2_000), 0, "each record of the new topic copied once");
    assert_eq!(all_copied(&seen, "old", 50), 0);
}
