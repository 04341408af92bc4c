//! `delivery = "exactly_once"` through real brokers: a `read_committed` consumer on the target sees
//! each source record exactly once, in order, whatever happens to Strait or the target broker.
//! Records carry per-partition sequence numbers (`p<partition>-<seq>`), so a duplicate, a gap or
//! a reordering is seen.

use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::FutureRecord;
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use strait::config::{Config, Flow};

use crate::support::*;

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
/// the full 20 kills / 1,000,000 records. The source is read over 3 consumers (its
/// `connections_per_broker`, as across a long link: issue 43), each partition through one.
#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_survives_repeated_sigkill() {
    let b = cluster(2);
    let (kills, records) = (env_or("STRAIT_EOS_KILLS", 5), env_or("STRAIT_EOS_RECORDS", 200_000));
    const PARTITIONS: i32 = 6;
    let per_partition = records / PARTITIONS as usize;
    let started = Instant::now();
    // Records keep arriving during the first kills; the rest wait on the source.
    // A killed instance's group session must end before the next one owns the flow's slot.
    let Setup { p, topic, remote, config, flow, producer } = setup(
        "eoskill",
        &b,
        PARTITIONS,
        per_partition,
        40,
        Duration::from_millis(100),
        // The record path's lanes: one consumer per connection.
        "copy = \"records\"\n[flows.scale_out]\nsession_timeout_ms = 6000",
    )
    .await;
    let on_source = format!("bootstrap_servers = \"{}\"\n", cluster(1));
    let config = config.replacen(&on_source, &format!("{on_source}connections_per_broker = 3\n"), 1);
    assert!(config.contains("connections_per_broker = 3"), "{config}");
    let mut seed = std::process::id() as u64 * 2_654_435_761 + 1;
    for kill in 0..kills {
        let strait = Strait::start(&format!("{p}-{kill}"), &config);
        wait_until("the instance owns the flow", Duration::from_secs(60), || {
            owned(&strait).is_some_and(|s| !s.is_empty())
        })
        .await;
        let alive = Duration::from_millis(1_500 + next_random(&mut seed) % 3_000);
        tokio::time::sleep(alive).await;
        strait.kill();
    }
    producer.await.unwrap();
    let strait = Strait::start(&format!("{p}-last"), &config);
    wait_replicated(&flow, &topic, PARTITIONS, per_partition, Duration::from_secs(600)).await;
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");
    assert!(logs.contains("source consumers") && logs.contains("consumers=3"), "{logs}");
    let report = sequence_report(&b, &remote, PARTITIONS, per_partition);
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
    assert!(fenced.logs().contains("another instance runs this flow"), "{}", fenced.logs());
    assert!(survivor.stop().success());
    let report = sequence_report(&b, &remote, PARTITIONS, PER_PARTITION);
    assert!(report.values().all(|r| *r == Seen::default()), "per partition: {report:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_through_target_broker_restarts() {
    // The record path's promise: under `copy = "auto"` this flow would copy batches, whose
    // retries outlast a 12 s outage without an abort (the test below).
    through_target_broker_restarts("eosbroker", "copy = \"records\"", Duration::from_secs(12)).await;
}

/// A batch flow's abort (`copy = "batches"`) through an outage longer than the timeout of its
/// own retries: the coordinator is asked again until it answers, the flow goes on.
#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_batches_through_target_broker_restarts() {
    through_target_broker_restarts("eosbatbroker", "copy = \"batches\"", Duration::from_secs(25)).await;
}

/// A batch flow's commit that the target took just before it went down (a broker killed in its
/// EndTxn, as `exactly_once_through_target_broker_restarts` met by chance): the flow cannot know
/// whether it committed, so it asks the coordinator again until it answers, and a commit asked
/// again is answered as done. It aborted instead before: after the outage the coordinator refused
/// the abort of a committed transaction (`INVALID_TXN_STATE`) and the flow stopped.
#[tokio::test(flavor = "multi_thread")]
async fn a_batch_commit_the_target_took_as_it_went_down_is_asked_again() {
    let asked_again = "commit a batch transaction failed; asking the coordinator again";
    commit_taken_as_the_target_went_down("eoscommit", "batches", asked_again).await;
}

/// The same on the record path, whose commit call librdkafka wants repeated until it completes.
#[tokio::test(flavor = "multi_thread")]
async fn a_record_commit_the_target_took_as_it_went_down_is_asked_again() {
    commit_taken_as_the_target_went_down("eosreccommit", "records", "commit transaction failed; retrying").await;
}

/// An exactly-once flow copying `copy` whose target takes an EndTxn and then goes down for 15 s
/// before it answers (the testkit proxy's [`strait_testkit::TcpProxy::fail_after`]): every record
/// lands once, in order, the flow never stops, and its log says `asked_again`.
async fn commit_taken_as_the_target_went_down(prefix: &str, copy: &str, asked_again: &str) {
    let (_target, proxy) = strait_testkit::start_cluster_behind_proxy(&dedicated_dir(prefix)).expect("proxied cluster");
    let b = format!("127.0.0.1:{}", proxy.port);
    const PARTITIONS: i32 = 3;
    const PER_PARTITION: usize = 5_000;
    // The outage outlasts the commit's own retries (the transaction timeout, 8 s).
    let extra = format!("transaction_timeout_ms = 8000\ncopy = \"{copy}\"");
    let Setup { p, topic, remote, config, flow, producer } =
        setup(prefix, &b, PARTITIONS, PER_PARTITION, 50, Duration::from_millis(100), &extra).await;
    let strait = Strait::start(&p, &config);
    wait_until("replication under way", Duration::from_secs(60), || count(&b, &remote).unwrap_or(0) > 2_000).await;
    proxy.fail_after(ApiKey::EndTxn as i16, Duration::from_secs(15));
    wait_until("a commit taken as the target goes down", Duration::from_secs(60), || proxy.failed()).await;
    producer.await.unwrap();
    wait_replicated(&flow, &topic, PARTITIONS, PER_PARTITION, Duration::from_secs(120)).await;
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");
    assert!(logs.contains(asked_again), "{logs}");
    assert!(!logs.contains("InvalidTxnState") && !logs.contains("flow stopped on an error"), "{logs}");
    let report = sequence_report(&b, &remote, PARTITIONS, PER_PARTITION);
    assert!(report.values().all(|r| *r == Seen::default()), "per partition: {report:?}\n{logs}");
}

/// An exactly-once flow (`extra` added to its settings) while its target broker is SIGKILLed
/// twice: a 2 s outage, then one of `long_outage`, longer than the transaction timeout (8 s).
/// Every record lands exactly once, and the long outage aborted a batch.
async fn through_target_broker_restarts(prefix: &str, extra: &str, long_outage: Duration) {
    let dir = std::env::temp_dir().join(format!("strait-tests-{}", std::process::id())).join(unique("broker"));
    let mut target = strait_testkit::start_clusters(1, &dir).expect("dedicated target cluster").remove(0);
    let b = target.bootstrap.clone();
    const PARTITIONS: i32 = 3;
    const PER_PARTITION: usize = 20_000;
    // A short transaction timeout, so records produced into the long outage time out and their
    // batch must be aborted and replayed.
    let Setup { p, topic, remote, config, flow, producer } = setup(
        prefix,
        &b,
        PARTITIONS,
        PER_PARTITION,
        100,
        Duration::from_millis(200),
        &format!("transaction_timeout_ms = 8000\n{extra}"),
    )
    .await;
    let strait = Strait::start(&p, &config);
    // SIGKILL, not a clean shutdown: transactions are left open on the broker. First a short
    // outage (librdkafka retries inside the transaction), then one longer than the timeout.
    for (outage, replicated_before) in [(Duration::from_secs(2), 5_000), (long_outage, 25_000)] {
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
    let report = sequence_report(&b, &remote, PARTITIONS, PER_PARTITION);
    assert!(report.values().all(|r| *r == Seen::default()), "per partition: {report:?}\n{logs}");
    assert!(
        logs.contains("batch aborted; rewinding the source and retrying"),
        "the long outage aborts a batch: {logs}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_timeout_the_target_refuses_stops_the_flow_at_once() {
    transaction_timeout_refused("records").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_timeout_the_target_refuses_stops_a_batch_flow_at_once() {
    transaction_timeout_refused("batches").await;
}

async fn transaction_timeout_refused(copy: &str) {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("eostmo");
    let (src, dst) = (format!("{p}s"), format!("{p}d"));
    // Above the broker's transaction.max.timeout.ms (15 min by default): no retry can help.
    let config = two_cluster_config(
        (&src, &a, ""),
        (&dst, &b, ""),
        &format!("delivery = \"exactly_once\"\ntransaction_timeout_ms = 100000000\ncopy = \"{copy}\""),
        "",
    );
    let mut strait = Strait::start(&p, &config);
    wait_until("strait stops by itself", Duration::from_secs(60), || !strait.is_running()).await;
    let logs = strait.logs();
    assert_eq!(strait.stop().code(), Some(4), "exits 4 (a setting to change): {logs}");
    assert!(logs.contains("init transactions of strait-") && logs.contains("flow stopped on an error"), "{logs}");
    assert!(logs.contains("transaction_timeout_ms is above"), "names the setting: {logs}");
    assert!(!logs.contains("could not start; retrying"), "not retried: {logs}");
}

/// When the next record of value `value` reaches `tail` (`None` after `timeout`).
fn seen(tail: &BaseConsumer, value: &str, timeout: Duration) -> Option<Instant> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Some(Ok(m)) = tail.poll(Duration::from_millis(5)) {
            if m.payload() == Some(value.as_bytes()) {
                return Some(Instant::now());
            }
        }
    }
    None
}

/// With the default `commit_interval_ms` (1 s), a record written to a source at rest is visible
/// to a `read_committed` consumer of the target within the runtime's floor (20 ms) plus a commit,
/// not at the interval: the median of 7 records, each written once the last was seen, is under
/// 700 ms. Before, every record took over 1 s (its batch began with it and committed at the
/// interval; 1.03-1.39 s measured); now 60-116 ms alone, 142-621 ms beside the other
/// exactly-once tests, on a loaded 2-core machine with debug builds.
#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_records_of_a_source_at_rest_are_visible_well_before_commit_interval() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("eosvis");
    let (src, dst) = (format!("{p}s"), format!("{p}d"));
    let topic = format!("{p}-t");
    create_topic(&a, &topic, 1, &[]).await;
    let config = two_cluster_config(
        (&src, &a, ""),
        (&dst, &b, ""),
        &format!("topics = [\"{topic}\"]\ndelivery = \"exactly_once\""),
        "",
    );
    let strait = Strait::start(&p, &config);
    let remote = format!("{src}.{topic}");
    let source = producer(&a);
    let send = |value: String| {
        let (source, topic) = (source.clone(), topic.clone());
        async move {
            let record = FutureRecord::<(), String>::to(&topic).partition(0).payload(&value);
            source.send(record, Duration::from_secs(10)).await.expect("produced");
        }
    };
    send("warm-up".into()).await;
    wait_until("the remote topic", Duration::from_secs(60), || topic_exists(&b, &remote)).await;
    let tail: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &b)
        .set("group.id", "strait-test-tail")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("fetch.wait.max.ms", "10")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&remote, 0, Offset::Beginning).expect("partition");
    tail.assign(&tpl).expect("assign");
    let warm = tokio::task::block_in_place(|| seen(&tail, "warm-up", Duration::from_secs(60)));
    assert!(warm.is_some(), "the first record replicated: {}", strait.logs());
    let mut latencies = Vec::new();
    for n in 0..7 {
        // At rest: the runtime polls an empty source meanwhile.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let value = format!("probe-{n}");
        let sent = Instant::now();
        send(value.clone()).await;
        let at = tokio::task::block_in_place(|| seen(&tail, &value, Duration::from_secs(30)));
        latencies.push(at.map(|at| at - sent).unwrap_or(Duration::MAX));
    }
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");
    eprintln!("exactly-once visible latency of records from a source at rest: {latencies:?}");
    latencies.sort_unstable();
    assert!(latencies[3] < Duration::from_millis(700), "median under 700 ms: {latencies:?}");
}
