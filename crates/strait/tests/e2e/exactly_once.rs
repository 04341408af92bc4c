//! `delivery = "exactly_once"` through real brokers: a `read_committed` consumer on the target sees
//! each source record exactly once, in order, whatever happens to Strait or the target broker.
//! Records carry per-partition sequence numbers (`p<partition>-<seq>`), so a duplicate, a gap or
//! a reordering is seen.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use strait::config::{Config, Flow};

use crate::support::*;

/// Produces `per_partition` sequenced records to each of `partitions` partitions of `topic`,
/// in `chunks` rounds with `pause` between them (so Strait replicates while records arrive).
async fn produce_sequenced(
    bootstrap: String,
    topic: String,
    partitions: i32,
    per_partition: usize,
    chunks: usize,
    pause: Duration,
) {
    let per_chunk = per_partition.div_ceil(chunks);
    for chunk in 0..chunks {
        let seqs = chunk * per_chunk..((chunk + 1) * per_chunk).min(per_partition);
        let recs: Vec<Rec> =
            seqs.flat_map(|s| (0..partitions).map(move |p| Rec::simple(p, &format!("p{p}-{s}")))).collect();
        produce(&bootstrap, &topic, &recs).await;
        tokio::time::sleep(pause).await;
    }
}

/// What a read_committed consumer of one partition saw against sequences `0..per_partition`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Seen {
    /// Records seen more than once (each extra copy counts).
    duplicated: usize,
    /// Sequences never seen.
    missing: usize,
    /// First copies that do not follow the previous first copy's sequence.
    reordered: usize,
}

/// Per partition of `remote` on `bootstrap` (read_committed), what was seen.
fn exactly_once_report(bootstrap: &str, remote: &str, partitions: i32, per_partition: usize) -> BTreeMap<i32, Seen> {
    let all = read_all_within(bootstrap, remote, false, Duration::from_secs(300));
    (0..partitions)
        .map(|p| {
            let seqs: Vec<usize> = all
                .get(&p)
                .map(|recs| {
                    recs.iter()
                        .map(|(_, r)| {
                            let v = String::from_utf8(r.value.clone().unwrap()).unwrap();
                            let (part, seq) = v[1..].split_once('-').unwrap();
                            assert_eq!(part.parse::<i32>().unwrap(), p, "record {v} in partition {p}");
                            seq.parse().unwrap()
                        })
                        .collect()
                })
                .unwrap_or_default();
            let mut first = std::collections::BTreeSet::new();
            let (mut duplicated, mut reordered, mut previous) = (0, 0, None);
            for s in seqs {
                if !first.insert(s) {
                    duplicated += 1;
                    continue;
                }
                if previous.is_some_and(|prev| s != prev + 1) || (previous.is_none() && s != 0) {
                    reordered += 1;
                }
                previous = Some(s);
            }
            let missing = (0..per_partition).filter(|s| !first.contains(s)).count();
            (p, Seen { duplicated, missing, reordered })
        })
        .collect()
}

/// Waits until `flow`'s committed positions reach `per_partition` in every partition of `topic`.
async fn wait_replicated(flow: &Flow, topic: &str, partitions: i32, per_partition: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let saved = strait::positions::load(&flow.target, &flow.name).await.unwrap_or_default();
        let done = (0..partitions)
            .all(|p| saved.get(&(topic.to_string(), p)).is_some_and(|s| s.next_offset >= per_partition as i64));
        if done {
            return;
        }
        assert!(Instant::now() < deadline, "not replicated within {timeout:?}: {saved:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// An exactly-once flow from the shared cluster 1 to `target` (with `extra` flow settings) over a new source
/// topic of `partitions` partitions, whose records arrive in the background (`chunks` rounds,
/// `pause` apart).
struct Setup {
    p: String,
    topic: String,
    remote: String,
    config: String,
    flow: Flow,
    producer: tokio::task::JoinHandle<()>,
}

async fn setup(
    prefix: &str,
    target: &str,
    partitions: i32,
    per_partition: usize,
    chunks: usize,
    pause: Duration,
    extra: &str,
) -> Setup {
    let source = &cluster(1);
    let p = unique(prefix);
    let (src, dst) = (format!("{p}s"), format!("{p}d"));
    let topic = format!("{p}-t");
    create_topic(source, &topic, partitions, &[]).await;
    let config = two_cluster_config(
        (&src, source, ""),
        (&dst, target, ""),
        &format!("topics = [\"{topic}\"]\ndelivery = \"exactly_once\"\ncommit_interval_ms = 300\n{extra}"),
        "",
    );
    let flow = Config::parse(&config).unwrap().remove(0);
    let producer =
        tokio::spawn(produce_sequenced(source.to_string(), topic.clone(), partitions, per_partition, chunks, pause));
    Setup { remote: format!("{src}.{topic}"), p, topic, config, flow, producer }
}

/// A small xorshift generator: random kill moments without a dependency.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `STRAIT_EOS_KILLS` (default 5) SIGKILLs at random moments while `STRAIT_EOS_RECORDS` (default
/// 200,000) records over 6 partitions are produced and replicated; `scripts/eos-kill-test` runs
/// the full 20 kills / 1,000,000 records.
#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_survives_repeated_sigkill() {
    let b = cluster(2);
    let (kills, records) = (env_or("STRAIT_EOS_KILLS", 5), env_or("STRAIT_EOS_RECORDS", 200_000));
    const PARTITIONS: i32 = 6;
    let per_partition = records / PARTITIONS as usize;
    let started = Instant::now();
    // Records keep arriving during the first kills; the rest wait on the source.
    let Setup { p, topic, remote, config, flow, producer } =
        setup("eoskill", &b, PARTITIONS, per_partition, 40, Duration::from_millis(100), "").await;
    let mut seed = std::process::id() as u64 * 2_654_435_761 + 1;
    for kill in 0..kills {
        let strait = Strait::start(&format!("{p}-{kill}"), &config);
        let alive = Duration::from_millis(1_500 + next_random(&mut seed) % 3_000);
        tokio::time::sleep(alive).await;
        strait.kill();
    }
    producer.await.unwrap();
    let strait = Strait::start(&format!("{p}-last"), &config);
    wait_replicated(&flow, &topic, PARTITIONS, per_partition, Duration::from_secs(600)).await;
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");
    let report = exactly_once_report(&b, &remote, PARTITIONS, per_partition);
    let total = report.values().fold(Seen::default(), |t, s| Seen {
        duplicated: t.duplicated + s.duplicated,
        missing: t.missing + s.missing,
        reordered: t.reordered + s.reordered,
    });
    eprintln!(
        "exactly-once kill test: {kills} SIGKILLs, {} records over {PARTITIONS} partitions, {} duplicated, {} missing, {} out of order, wall time {:.1} s",
        per_partition * PARTITIONS as usize,
        total.duplicated,
        total.missing,
        total.reordered,
        started.elapsed().as_secs_f64()
    );
    assert_eq!(total, Seen::default(), "per partition: {report:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_exactly_once_instances_of_one_flow_never_duplicate() {
    let b = cluster(2);
    const PARTITIONS: i32 = 3;
    const PER_PARTITION: usize = 10_000;
    let Setup { p, topic, remote, config, flow, producer } =
        setup("eostwo", &b, PARTITIONS, PER_PARTITION, 20, Duration::from_millis(200), "").await;
    let mut first = Strait::start(&format!("{p}-1"), &config);
    let mut second = Strait::start(&format!("{p}-2"), &config);
    producer.await.unwrap();
    wait_replicated(&flow, &topic, PARTITIONS, PER_PARTITION, Duration::from_secs(120)).await;
    let (first_running, second_running) = (first.is_running(), second.is_running());
    assert!(
        first_running != second_running,
        "exactly one instance keeps running (first {first_running}, second {second_running})"
    );
    let (fenced, survivor) = if first_running { (second, first) } else { (first, second) };
    assert!(fenced.logs().contains("fenced by another instance of this flow"), "{}", fenced.logs());
    assert!(survivor.stop().success());
    let report = exactly_once_report(&b, &remote, PARTITIONS, PER_PARTITION);
    assert!(report.values().all(|r| *r == Seen::default()), "per partition: {report:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_through_target_broker_restarts() {
    let dir = std::env::temp_dir().join(format!("strait-tests-{}", std::process::id())).join(unique("broker"));
    let mut target = strait_testkit::start_clusters(1, &dir).expect("dedicated target cluster").remove(0);
    let b = target.bootstrap.clone();
    const PARTITIONS: i32 = 3;
    const PER_PARTITION: usize = 20_000;
    // A short transaction timeout, so records produced into the long outage time out and their
    // batch must be aborted and replayed.
    let Setup { p, topic, remote, config, flow, producer } = setup(
        "eosbroker",
        &b,
        PARTITIONS,
        PER_PARTITION,
        100,
        Duration::from_millis(200),
        "transaction_timeout_ms = 8000",
    )
    .await;
    let strait = Strait::start(&p, &config);
    // SIGKILL, not a clean shutdown: transactions are left open on the broker. First a short
    // outage (librdkafka retries inside the transaction), then one longer than the timeout.
    for (outage, replicated_before) in [(Duration::from_secs(2), 5_000), (Duration::from_secs(12), 25_000)] {
        wait_until("replication under way", Duration::from_secs(60), || {
            count(&b, &remote).unwrap_or(0) > replicated_before
        })
        .await;
        target.kill().unwrap();
        tokio::time::sleep(outage).await;
        target.restart().expect("target broker restarts");
    }
    producer.await.unwrap();
    wait_replicated(&flow, &topic, PARTITIONS, PER_PARTITION, Duration::from_secs(180)).await;
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");
    let report = exactly_once_report(&b, &remote, PARTITIONS, PER_PARTITION);
    assert!(report.values().all(|r| *r == Seen::default()), "per partition: {report:?}\n{logs}");
    assert!(
        logs.contains("batch aborted; rewinding the source and retrying"),
        "the long outage aborts a batch: {logs}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_timeout_the_target_refuses_stops_the_flow_at_once() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("eostmo");
    let (src, dst) = (format!("{p}s"), format!("{p}d"));
    // Above the broker's transaction.max.timeout.ms (15 min by default): no retry can help.
    let config = two_cluster_config(
        (&src, &a, ""),
        (&dst, &b, ""),
        "delivery = \"exactly_once\"\ntransaction_timeout_ms = 100000000",
        "",
    );
    let mut strait = Strait::start(&p, &config);
    wait_until("strait stops by itself", Duration::from_secs(60), || !strait.is_running()).await;
    let logs = strait.logs();
    assert!(!strait.stop().success(), "exits non-zero: {logs}");
    assert!(logs.contains("init transactions of strait-") && logs.contains("flow stopped on an error"), "{logs}");
    assert!(!logs.contains("could not start; retrying"), "not retried: {logs}");
}
