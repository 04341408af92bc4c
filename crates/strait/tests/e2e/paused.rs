//! An instance paused (SIGSTOP: a GC or VM pause, a stalled disk, a container frozen by its
//! orchestrator) long enough for the slot group to give its slots to another instance: when it
//! wakes it proves it still owns each slot before producing more, so it writes again at most the
//! batches in flight when it froze, not everything that arrived during the pause. With scale-out
//! the woken instance takes its share back; without, its twin keeps the flow and it stops.

use std::time::{Duration, Instant};

use strait::config::Config;

use crate::support::*;

const PARTITIONS: i32 = 6;
const PER_PARTITION: usize = 10_000;
const COMMIT_INTERVAL_MS: u64 = 500;
const PAUSE: Duration = Duration::from_secs(15);
/// Records arrive in this many rounds (one produce call each, a quarter of a second apart).
const ROUNDS: usize = 50;

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_instance_writes_at_most_its_last_batch_again() {
    paused("paused", true, "records").await;
}

/// Copying batches, the woken instance also reads its source's producer id registry again (a
/// read the pause cut off is asked again, not a failure of the flow).
#[tokio::test(flavor = "multi_thread")]
async fn a_paused_instance_copying_batches_writes_at_most_its_last_batch_again() {
    paused("pausedbat", true, "batches").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_instance_whose_twin_took_over_stops_without_copying_the_pause() {
    paused("twin", false, "records").await;
}

/// Instance `a` copies a flow (with `scale_out`: sharing its slots with `b`, started beside it;
/// without: alone, `b` its twin started during the pause) while records arrive for about 45 s;
/// `a` is paused for [`PAUSE`], longer than the session timeout (6 s), then continues. `copy`:
/// the flows' copy kind.
async fn paused(prefix: &str, scale_out: bool, copy: &str) {
    let f = TopicFlow::new(prefix, PARTITIONS).await;
    let config = f.config(&format!(
        "commit_interval_ms = {COMMIT_INTERVAL_MS}\ncopy = \"{copy}\"\n[flows.scale_out]\nenabled = {scale_out}\nslots = {}\nsession_timeout_ms = 6000",
        if scale_out { PARTITIONS } else { 1 }
    ));
    let flow = Config::parse(&config).unwrap().remove(0);
    let (a_bootstrap, topic) = (f.a.clone(), f.topic.clone());
    // Records keep arriving through the pause.
    let produced = Instant::now();
    let producer = tokio::spawn(async move {
        produce_sequenced(a_bootstrap, topic, PARTITIONS, PER_PARTITION, ROUNDS, Duration::from_millis(250)).await;
        produced.elapsed()
    });
    let start_b = || Strait::start(&format!("{}-b", f.p), &config);
    let a = Strait::start(&format!("{}-a", f.p), &config);
    let mut b = scale_out.then(start_b);
    let deadline = Instant::now() + Duration::from_secs(60);
    let paused_slots = loop {
        let (sa, sb) = (owned(&a).unwrap_or_default(), b.as_ref().and_then(owned).unwrap_or_default());
        if !sa.is_empty() && (!scale_out || !sb.is_empty()) && sa.union(&sb).count() == flow.slots() as usize {
            break sa;
        }
        assert!(Instant::now() < deadline, "slots not shared: {sa:?} {sb:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Paused once the backlog from before the start is copied: a batch holds a round or two.
    tokio::time::sleep(Duration::from_secs(6)).await;
    a.pause();
    let b = b.get_or_insert_with(start_b);
    tokio::time::sleep(PAUSE).await;
    let moved = owned(b).unwrap_or_default();
    a.resume();
    let woke = Instant::now();
    let production = producer.await.unwrap();
    wait_replicated(&flow, &f.topic, PARTITIONS, PER_PARTITION, Duration::from_secs(120)).await;
    let replicated = woke.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let logs = a.logs();
    if scale_out {
        assert!(a.stop().success(), "{logs}");
    } else {
        let logs = exits_with(a, 6, Duration::from_secs(30)).await;
        assert!(logs.contains("another instance"), "the woken instance says why it stopped: {logs}");
    }
    let b = b.logs();
    assert_eq!(
        moved.len(),
        flow.slots() as usize,
        "the paused instance's slots {paused_slots:?} moved: {moved:?}\n{b}"
    );

    let seen = sequence_report(&f.b, &f.remote, PARTITIONS, PER_PARTITION);
    let missing: usize = seen.values().map(|s| s.missing).sum();
    let duplicated: usize = seen.values().map(|s| s.duplicated).sum();
    // Two batches can be in flight at the pause (positions are saved while the next batch is
    // produced: README), and records come in rounds, so a batch of the paused instance holds the
    // rounds that reached its partitions within one commit interval (shorter than the time
    // between rounds): one or two. Four rounds bound it; before the proof, the whole pause (15
    // to 20 rounds) was copied again.
    let per_ms = (PARTITIONS as usize * PER_PARTITION) as f64 / production.as_millis().max(1) as f64;
    let share = paused_slots.len() as f64 / flow.slots() as f64;
    let batch = (per_ms * share * COMMIT_INTERVAL_MS as f64) as usize;
    let round = (PARTITIONS as usize * PER_PARTITION / ROUNDS) as f64 * share;
    eprintln!(
        "paused instance, scale-out {scale_out} ({PAUSE:?} paused, slots {paused_slots:?}, records produced over {production:?}): \
         {missing} lost, {duplicated} of {} duplicated (a batch of it is about {batch} on average, a round {round}, the pause about {}); all replicated {replicated:?} after the wake",
        PARTITIONS as usize * PER_PARTITION,
        (per_ms * share * PAUSE.as_millis() as f64) as usize
    );
    assert_eq!(missing, 0, "{seen:?}");
    assert!(
        duplicated as f64 <= 4.0 * round,
        "{duplicated} duplicated: more than the batches in flight at the pause: {seen:?}"
    );
}
