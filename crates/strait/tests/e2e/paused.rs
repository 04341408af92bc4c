//! An instance paused (SIGSTOP: a GC or VM pause, a stalled disk, a container frozen by its
//! orchestrator) long enough for the slot group to move its slots to another instance: when it
//! wakes it proves it still owns each slot before producing more, so it writes again at most the
//! batches in flight when it froze, not everything that arrived during the pause.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use strait::config::Config;

use crate::support::*;

const PARTITIONS: i32 = 6;
const PER_PARTITION: usize = 20_000;
/// Records per second produced over all partitions (about 30 s of production).
const RATE: usize = 4_000;
const COMMIT_INTERVAL_MS: usize = 500;

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_instance_writes_at_most_its_last_batch_again() {
    let f = TopicFlow::new("paused", PARTITIONS).await;
    let config = f.config(&format!(
        "commit_interval_ms = {COMMIT_INTERVAL_MS}\n[flows.scale_out]\nenabled = true\nslots = {PARTITIONS}\nsession_timeout_ms = 6000"
    ));
    let flow = Config::parse(&config).unwrap().remove(0);
    let chunks = PARTITIONS as usize * PER_PARTITION / (RATE / 10);
    let producer = tokio::spawn(produce_sequenced(
        f.a.clone(),
        f.topic.clone(),
        PARTITIONS,
        PER_PARTITION,
        chunks,
        Duration::from_millis(100),
    ));
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
    let pause = Duration::from_secs(25);
    tokio::time::sleep(pause).await;
    let moved: BTreeSet<u32> = owned(&b).unwrap_or_default();
    a.resume();
    producer.await.unwrap();
    wait_replicated(&flow, &f.topic, PARTITIONS, PER_PARTITION, Duration::from_secs(120)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let logs = a.logs();
    assert!(a.stop().success(), "{logs}");
    assert!(b.stop().success());
    assert_eq!(moved.len(), PARTITIONS as usize, "the paused instance's slots {paused_slots:?} moved: {moved:?}");

    let seen = sequence_report(&f.b, &f.remote, PARTITIONS, PER_PARTITION);
    let missing: usize = seen.values().map(|s| s.missing).sum();
    let duplicated: usize = seen.values().map(|s| s.duplicated).sum();
    // The paused instance's partitions receive their share of RATE; one batch of theirs is what
    // arrives in one commit interval. Two can be in flight at the pause (positions are saved
    // while the next batch is produced); four leave room for a slow machine.
    let batch = RATE * paused_slots.len() / PARTITIONS as usize * COMMIT_INTERVAL_MS / 1_000;
    eprintln!(
        "paused instance ({:?} paused, slots {paused_slots:?}): {missing} lost, {duplicated} of {} duplicated (one batch of it is about {batch})",
        pause,
        PARTITIONS as usize * PER_PARTITION
    );
    assert_eq!(missing, 0, "{seen:?}");
    assert!(duplicated <= 4 * batch, "{duplicated} duplicated: more than the batch in flight at the pause ({batch})");
}
