//! An instance paused (SIGSTOP: a GC or VM pause, a stalled disk, a container frozen by its
//! orchestrator) long enough for the slot group to move its slots to another instance: when it
//! wakes it proves it still owns each slot before producing more, so it writes again at most the
//! batches in flight when it froze, not everything that arrived during the pause.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use strait::config::Config;

use crate::support::*;

const PARTITIONS: i32 = 6;
const PER_PARTITION: usize = 10_000;
const COMMIT_INTERVAL_MS: u64 = 500;

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_instance_writes_at_most_its_last_batch_again() {
    let f = TopicFlow::new("paused", PARTITIONS).await;
    let config = f.config(&format!(
        "commit_interval_ms = {COMMIT_INTERVAL_MS}\n[flows.scale_out]\nenabled = true\nslots = {PARTITIONS}\nsession_timeout_ms = 6000"
    ));
    let flow = Config::parse(&config).unwrap().remove(0);
    let (a_bootstrap, topic) = (f.a.clone(), f.topic.clone());
    // 50 rounds a quarter of a second apart: records keep arriving through the pause.
    let produced = Instant::now();
    let producer = tokio::spawn(async move {
        produce_sequenced(a_bootstrap, topic, PARTITIONS, PER_PARTITION, 50, Duration::from_millis(250)).await;
        produced.elapsed()
    });
    let (a, b) = (Strait::start(&format!("{}-a", f.p), &config), Strait::start(&format!("{}-b", f.p), &config));
    let deadline = Instant::now() + Duration::from_secs(60);
    let paused_slots = loop {
        let (sa, sb) = (owned(&a).unwrap_or_default(), owned(&b).unwrap_or_default());
        if !sa.is_empty() && !sb.is_empty() && sa.union(&sb).count() == PARTITIONS as usize {
            break sa;
        }
        assert!(Instant::now() < deadline, "slots not shared: {sa:?} {sb:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    a.pause();
    let pause = Duration::from_secs(15);
    tokio::time::sleep(pause).await;
    let moved: BTreeSet<u32> = owned(&b).unwrap_or_default();
    a.resume();
    let woke = Instant::now();
    let production = producer.await.unwrap();
    wait_replicated(&flow, &f.topic, PARTITIONS, PER_PARTITION, Duration::from_secs(120)).await;
    eprintln!("paused instance: every record replicated {:?} after the wake", woke.elapsed());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let logs = a.logs();
    assert!(a.stop().success(), "{logs}");
    assert!(b.stop().success());
    assert_eq!(moved.len(), PARTITIONS as usize, "the paused instance's slots {paused_slots:?} moved: {moved:?}");

    let seen = sequence_report(&f.b, &f.remote, PARTITIONS, PER_PARTITION);
    let missing: usize = seen.values().map(|s| s.missing).sum();
    let duplicated: usize = seen.values().map(|s| s.duplicated).sum();
    // One batch of the paused instance's partitions is what they receive in one commit interval.
    // Two can be in flight at the pause (positions are saved while the next batch is produced);
    // four leave room for a slow machine. Before the proof, the whole pause was copied again.
    let per_ms = (PARTITIONS as usize * PER_PARTITION) as f64 / production.as_millis().max(1) as f64;
    let share = paused_slots.len() as f64 / PARTITIONS as f64;
    let batch = (per_ms * share * COMMIT_INTERVAL_MS as f64) as usize;
    eprintln!(
        "paused instance ({pause:?} paused, slots {paused_slots:?}, records produced over {production:?}): {missing} lost, {duplicated} of {} duplicated (one batch of it is about {batch}, the pause about {})",
        PARTITIONS as usize * PER_PARTITION,
        (per_ms * share * pause.as_millis() as f64) as usize
    );
    assert_eq!(missing, 0, "{seen:?}");
    assert!(duplicated <= 4 * batch, "{duplicated} duplicated: more than the batch in flight at the pause ({batch})");
}
