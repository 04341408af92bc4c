//! Several instances of one flow through real brokers: they share its slots through a consumer
//! group on the target, a killed instance's slots move to the others, a new instance takes some
//! over, and a second instance of a flow without scale-out is refused. Records carry
//! per-partition sequence numbers, so a duplicate or a gap is seen.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strait::config::Config;
use strait::positions::TopicIds;
use strait::sink::{SinkParams, TargetSink};
use strait::slots::slot_of;
use strait::source::{source_consumer, source_consumers, KafkaSource};
use strait::watch::Committed;
use strait_connect::Source;

use crate::support::*;

const SLOTS: u32 = 12;
const SESSION_TIMEOUT: Duration = Duration::from_secs(6);

/// Waits until `instances` own every slot between them, each slot once, every instance at least
/// one; returns each one's slots.
async fn wait_shared(what: &str, instances: &[&Strait], timeout: Duration) -> Vec<BTreeSet<u32>> {
    let deadline = Instant::now() + timeout;
    loop {
        let sets: Vec<BTreeSet<u32>> = instances.iter().map(|s| owned(s).unwrap_or_default()).collect();
        let union: BTreeSet<u32> = sets.iter().flatten().copied().collect();
        let total: usize = sets.iter().map(BTreeSet::len).sum();
        if union.len() == SLOTS as usize && total == SLOTS as usize && sets.iter().all(|s| !s.is_empty()) {
            return sets;
        }
        assert!(Instant::now() < deadline, "{what}: slots not shared within {timeout:?}: {sets:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The config of `f`'s flow with `flow_extra`, resolved, and a background producer of
/// `per_partition` sequenced records per partition (`chunks` rounds, `pause` apart).
fn sequenced_flow(
    f: &TopicFlow,
    flow_extra: &str,
    (partitions, per_partition): (i32, usize),
    (chunks, pause): (usize, Duration),
) -> (String, strait::config::Flow, tokio::task::JoinHandle<()>) {
    let config = f.config(flow_extra);
    let flow = Config::parse(&config).unwrap().remove(0);
    let producer =
        tokio::spawn(produce_sequenced(f.a.clone(), f.topic.clone(), partitions, per_partition, chunks, pause));
    (config, flow, producer)
}

/// 3 instances share a flow of 24 partitions while records arrive; one is SIGKILLed, then a 4th
/// starts. Returns per partition what the target holds, and the partitions of the killed
/// instance's slots.
async fn share_kill_and_grow(prefix: &str, delivery: &str) -> (Vec<(i32, Seen)>, BTreeSet<i32>) {
    const PARTITIONS: i32 = 24;
    const PER_PARTITION: usize = 2_500;
    let f = TopicFlow::new(prefix, PARTITIONS).await;
    let extra = format!(
        "commit_interval_ms = 300\n{delivery}\n[flows.scale_out]\nenabled = true\nslots = {SLOTS}\nsession_timeout_ms = {}",
        SESSION_TIMEOUT.as_millis()
    );
    let (config, flow, producer) =
        sequenced_flow(&f, &extra, (PARTITIONS, PER_PARTITION), (60, Duration::from_millis(250)));
    let mut instances: Vec<Strait> = (0..3).map(|i| Strait::start(&format!("{}-{i}", f.p), &config)).collect();
    let shared = wait_shared("3 instances", &instances.iter().collect::<Vec<_>>(), Duration::from_secs(90)).await;
    eprintln!("{prefix}: 3 instances own {shared:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;

    let killed = instances.remove(0);
    let killed_slots = owned(&killed).unwrap();
    killed.kill();
    let at = Instant::now();
    wait_shared("after the kill", &instances.iter().collect::<Vec<_>>(), Duration::from_secs(60)).await;
    let moved_in = at.elapsed();
    eprintln!(
        "{prefix}: the killed instance's slots {killed_slots:?} moved to the others in {:.1} s (session timeout {} s)",
        moved_in.as_secs_f64(),
        SESSION_TIMEOUT.as_secs()
    );
    assert!(moved_in < SESSION_TIMEOUT + Duration::from_secs(15), "moved in {moved_in:?}");

    instances.push(Strait::start(&format!("{}-3", f.p), &config));
    let shared = wait_shared("with a 4th", &instances.iter().collect::<Vec<_>>(), Duration::from_secs(60)).await;
    eprintln!("{prefix}: after the 4th joined: {shared:?}");
    // Heartbeats, checkpoints and config sync run on exactly one instance: the owner of slot 0.
    let once = || instances.iter().zip(&shared).all(|(s, slots)| runs_control_tasks(s) == Some(slots.contains(&0)));
    wait_until("only the owner of slot 0 runs the once-per-flow tasks", Duration::from_secs(30), once).await;

    producer.await.unwrap();
    wait_replicated(&flow, &f.topic, PARTITIONS, PER_PARTITION, Duration::from_secs(180)).await;
    for s in instances {
        let logs = s.logs();
        assert!(s.stop().success(), "{logs}");
    }
    let report = sequence_report(&f.b, &f.remote, PARTITIONS, PER_PARTITION);
    let killed_partitions = (0..PARTITIONS).filter(|p| killed_slots.contains(&slot_of(&f.topic, *p, SLOTS))).collect();
    (report.into_iter().collect(), killed_partitions)
}

#[tokio::test(flavor = "multi_thread")]
async fn at_least_once_instances_share_a_flow_through_a_kill_and_a_new_member() {
    let (report, killed) = share_kill_and_grow("scalealo", "").await;
    let duplicated: usize = report.iter().map(|(_, s)| s.duplicated).sum();
    eprintln!("at-least-once: {duplicated} duplicates, all in the killed instance's partitions {killed:?}");
    for (p, seen) in &report {
        assert_eq!((seen.missing, seen.reordered), (0, 0), "partition {p}: {seen:?}");
        // A graceful hand-over (the 4th joining) commits before it returns: only the killed
        // instance's in-flight batches may be written twice.
        if !killed.contains(p) {
            assert_eq!(seen.duplicated, 0, "partition {p} was never on the killed instance: {seen:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_instances_share_a_flow_through_a_kill_and_a_new_member() {
    let (report, _) =
        share_kill_and_grow("scaleeos", "delivery = \"exactly_once\"\ntransaction_timeout_ms = 10000").await;
    for (p, seen) in &report {
        assert_eq!(*seen, Seen::default(), "partition {p} (read_committed)");
    }
}

/// Issue 26: an instance owning 4 slots ran 4 record producers, one per slot (×2.7 the CPU per GB
/// of the flow without scale-out at 12 slots). Now its slots share one: the target's broker
/// (DescribeProducers, through Kafka's Admin) knows one producer for all 8 partitions, which span
/// the 4 slots; each slot's state producer still fences it, and the records arrive once each.
#[tokio::test(flavor = "multi_thread")]
async fn an_instance_owning_several_slots_writes_their_records_through_one_producer() {
    const PARTITIONS: i32 = 8;
    const PER_PARTITION: usize = 500;
    let f = TopicFlow::new("oneproducer", PARTITIONS).await;
    // The record producer's sharing; batches go through each slot's batch producer.
    let extra = "commit_interval_ms = 300\ncopy = \"records\"\n[flows.scale_out]\nenabled = true\nslots = 4";
    let (config, flow, producer) =
        sequenced_flow(&f, extra, (PARTITIONS, PER_PARTITION), (5, Duration::from_millis(200)));
    let slots: BTreeSet<u32> = (0..PARTITIONS).map(|p| slot_of(&f.topic, p, 4)).collect();
    assert_eq!(slots.len(), 4, "the partitions span every slot");
    let instance = Strait::start(&format!("{}-1", f.p), &config);
    wait_until("the instance owns all 4 slots", Duration::from_secs(60), || {
        owned(&instance).is_some_and(|s| s.len() == 4)
    })
    .await;
    producer.await.unwrap();
    wait_replicated(&flow, &f.topic, PARTITIONS, PER_PARTITION, Duration::from_secs(120)).await;
    let listed = strait_testkit::jvm::mm2_check(&["producers", &f.b, &f.remote]).expect("DescribeProducers");
    let mut partitions = BTreeSet::new();
    let mut ids = BTreeSet::new();
    for line in listed.lines().filter_map(|l| l.strip_prefix("producer ")) {
        let (partition, id) = line.split_once(' ').expect("producer <partition> <id>");
        partitions.insert(partition.parse::<i32>().unwrap());
        ids.insert(id.parse::<i64>().unwrap());
    }
    assert_eq!(partitions.len(), PARTITIONS as usize, "every target partition has its writer: {listed}");
    assert_eq!(ids.len(), 1, "one record producer for the instance's 4 slots, the broker says: {listed}");
    let logs = instance.logs();
    assert!(instance.stop().success(), "{logs}");
    let report = sequence_report(&f.b, &f.remote, PARTITIONS, PER_PARTITION);
    assert!(report.values().all(|s| *s == Seen::default()), "per partition: {report:?}");
}

/// Polls `source` until it returned `want` records of `topic` (or `within` passed): how many it
/// returned per partition. (The source also reads `heartbeats`, which other tests' flows write.)
async fn read_per_partition(
    source: &mut KafkaSource,
    topic: &str,
    want: usize,
    within: Duration,
) -> BTreeMap<i32, usize> {
    let (mut per_partition, mut got) = (BTreeMap::new(), 0);
    let deadline = Instant::now() + within;
    while got < want && Instant::now() < deadline {
        for r in source.poll(1_000, 1 << 20, Duration::from_millis(200)).await.unwrap() {
            if &*r.source_offset.topic == topic {
                *per_partition.entry(r.source_offset.partition).or_insert(0) += 1;
                got += 1;
            }
        }
    }
    per_partition
}

/// Issue 26: the slots an instance owns read through shared source consumers (before, one each),
/// each slot its own partitions from queues of its own. Two slots on two consumers (the source's
/// `connections_per_broker = 2`, as across a long link, issue 43) each get exactly their
/// partitions' records; once one closes (its slot revoked), the other still reads what arrives
/// after (closing no longer unassigns the whole consumer).
#[tokio::test(flavor = "multi_thread")]
async fn slots_sharing_one_consumer_each_read_only_their_own_partitions() {
    const PARTITIONS: i32 = 6;
    let f = TopicFlow::new("oneconsumer", PARTITIONS).await;
    let on_source = format!("alias = \"{}\"\nbootstrap_servers = \"{}\"\n", f.src, f.a);
    let config = f
        .config("copy = \"records\"\n[flows.scale_out]\nenabled = true\nslots = 2")
        .replace(&on_source, &format!("{on_source}connections_per_broker = 2\n"));
    let flow = Arc::new(Config::parse(&config).unwrap().remove(0));
    let round = |value: &str| {
        (0..PARTITIONS).flat_map(|p| (0..10).map(move |_| p)).map(|p| Rec::simple(p, value)).collect::<Vec<_>>()
    };
    produce(&f.a, &f.topic, &round("first")).await;
    // The state topics the sources' positions are read from.
    drop(TargetSink::start(SinkParams { flow: flow.clone(), slot: 0 }).await.unwrap());
    let consumers = source_consumers(&flow, source_consumer(&flow).unwrap()).await.unwrap();
    assert_eq!(consumers.len(), 2);
    let mut sources = Vec::new();
    for slot in 0..2 {
        let stored = strait::resume::load::stored(&flow, slot).await.unwrap();
        let source = KafkaSource::start_sharing(
            flow.clone(),
            slot,
            stored,
            Committed::default(),
            TopicIds::default(),
            &consumers,
        );
        sources.push(source.await.unwrap());
    }
    let of_slot = |slot: u32| -> BTreeMap<i32, usize> {
        (0..PARTITIONS).filter(|p| slot_of(&f.topic, *p, 2) == slot).map(|p| (p, 10)).collect()
    };
    assert!(!of_slot(0).is_empty() && !of_slot(1).is_empty(), "the partitions span both slots");
    for (slot, source) in (0..2).zip(sources.iter_mut()) {
        let want = of_slot(slot).len() * 10;
        assert_eq!(
            read_per_partition(source, &f.topic, want, Duration::from_secs(30)).await,
            of_slot(slot),
            "slot {slot} reads its partitions only"
        );
    }
    let mut closed = sources.remove(0);
    closed.close().await.unwrap();
    drop(closed);
    produce(&f.a, &f.topic, &round("second")).await;
    let want = of_slot(1).len() * 10;
    assert_eq!(
        read_per_partition(&mut sources[0], &f.topic, want, Duration::from_secs(30)).await,
        of_slot(1),
        "slot 1 reads on after slot 0 closed"
    );
    // Nothing of slot 0's partitions comes late.
    assert!(read_per_partition(&mut sources[0], &f.topic, 1, Duration::from_secs(3)).await.is_empty());
}

/// The case: two `strait run` of one flow without scale-out doubled every record. Now the
/// second is refused, says why, and exits non-zero; the target holds each record once.
#[tokio::test(flavor = "multi_thread")]
async fn a_second_instance_of_a_flow_without_scale_out_is_refused() {
    const PARTITIONS: i32 = 6;
    const PER_PARTITION: usize = 2_000;
    let f = TopicFlow::new("single", PARTITIONS).await;
    let (config, flow, producer) =
        sequenced_flow(&f, "commit_interval_ms = 300", (PARTITIONS, PER_PARTITION), (20, Duration::from_millis(300)));
    let first = Strait::start(&format!("{}-1", f.p), &config);
    wait_until("the first instance owns the flow", Duration::from_secs(60), || {
        owned(&first).is_some_and(|s| s.len() == 1)
    })
    .await;
    let logs = exits_with(Strait::start(&format!("{}-2", f.p), &config), 6, Duration::from_secs(60)).await;
    assert!(logs.contains("another instance runs this flow"), "{logs}");
    producer.await.unwrap();
    wait_replicated(&flow, &f.topic, PARTITIONS, PER_PARTITION, Duration::from_secs(120)).await;
    assert!(first.stop().success());
    let report = sequence_report(&f.b, &f.remote, PARTITIONS, PER_PARTITION);
    assert!(report.values().all(|s| *s == Seen::default()), "per partition: {report:?}");
}

/// Instances must agree on the slot count: one with another count than the coordination topic's
/// is refused naming the setting, and the running one goes on alone.
#[tokio::test(flavor = "multi_thread")]
async fn an_instance_with_another_slot_count_is_refused() {
    let f = TopicFlow::new("slotcount", 2).await;
    let scaled = |slots: u32| f.config(&format!("[flows.scale_out]\nenabled = true\nslots = {slots}"));
    let first = Strait::start(&format!("{}-1", f.p), &scaled(4));
    wait_until("the first instance owns all 4 slots", Duration::from_secs(60), || {
        owned(&first).is_some_and(|s| s.len() == 4)
    })
    .await;
    let logs = exits_with(Strait::start(&format!("{}-2", f.p), &scaled(3)), 4, Duration::from_secs(60)).await;
    assert!(logs.contains("[flows.scale_out] slots") && logs.contains("has 4 partition(s)"), "{logs}");
    produce(&f.a, &f.topic, &[Rec::simple(0, "after"), Rec::simple(1, "after")]).await;
    wait_until("the first instance still replicates", Duration::from_secs(60), || count(&f.b, &f.remote) == Some(2))
        .await;
    assert!(first.stop().success());
}

/// The case: scale-out turned on for a flow that ran before was refused until every
/// instance stopped and the coordination topic was deleted by hand. Now the flow runs without
/// scale-out, stops while records arrive, and starts again with `slots = 4`: the topic grows to 4
/// partitions, the instance owns the 4 slots and goes on from the saved positions (a graceful
/// stop commits its last batch, so nothing is lost or written twice).
#[tokio::test(flavor = "multi_thread")]
async fn scale_out_turned_on_for_a_flow_that_ran_before_grows_its_slots() {
    const PARTITIONS: i32 = 8;
    const PER_PARTITION: usize = 2_000;
    let f = TopicFlow::new("grow", PARTITIONS).await;
    let scaled_config = f.config("commit_interval_ms = 300\n[flows.scale_out]\nenabled = true\nslots = 4");
    let (config, _, producer) =
        sequenced_flow(&f, "commit_interval_ms = 300", (PARTITIONS, PER_PARTITION), (40, Duration::from_millis(250)));
    let first = Strait::start(&format!("{}-1", f.p), &config);
    wait_until("the flow copies without scale-out", Duration::from_secs(60), || {
        count(&f.b, &f.remote).is_some_and(|n| n > 0)
    })
    .await;
    assert_eq!(partitions(&f.b, &format!("strait-slots.{}.{}.internal", f.src, f.dst)), 1);
    assert!(first.stop().success());
    let copied_before = count(&f.b, &f.remote).unwrap_or(0);
    let scaled = Strait::start(&format!("{}-2", f.p), &scaled_config);
    wait_until("the scaled instance owns the 4 slots", Duration::from_secs(60), || {
        owned(&scaled).is_some_and(|s| s.len() == 4)
    })
    .await;
    assert_eq!(partitions(&f.b, &format!("strait-slots.{}.{}.internal", f.src, f.dst)), 4);
    producer.await.unwrap();
    let flow = Config::parse(&scaled_config).unwrap().remove(0);
    wait_replicated(&flow, &f.topic, PARTITIONS, PER_PARTITION, Duration::from_secs(120)).await;
    let logs = scaled.logs();
    assert!(scaled.stop().success(), "{logs}");
    assert!(logs.contains("coordination topic grown to the new one"), "{logs}");
    let report = sequence_report(&f.b, &f.remote, PARTITIONS, PER_PARTITION);
    eprintln!(
        "{copied_before} of {} records copied before the stop; after the restart with 4 slots: {report:?}",
        PARTITIONS as usize * PER_PARTITION
    );
    assert!(copied_before < (PARTITIONS as usize * PER_PARTITION) as i64, "stopped while records still arrived");
    assert!(report.values().all(|s| *s == Seen::default()), "per partition: {report:?}");
}

/// While an instance with the old slot count (here: scale-out off, one slot) runs, one with
/// scale-out on is refused naming the setting and the instances still running; the running one
/// goes on alone and the coordination topic keeps its count.
#[tokio::test(flavor = "multi_thread")]
async fn scale_out_turned_on_while_an_old_instance_runs_is_refused() {
    let f = TopicFlow::new("growrun", 2).await;
    let first = Strait::start(&format!("{}-1", f.p), &f.config(""));
    wait_until("the first instance owns the flow", Duration::from_secs(60), || {
        owned(&first).is_some_and(|s| s.len() == 1)
    })
    .await;
    let scaled = Strait::start(&format!("{}-2", f.p), &f.config("[flows.scale_out]\nenabled = true\nslots = 4"));
    let logs = exits_with(scaled, 4, Duration::from_secs(60)).await;
    assert!(
        logs.contains("[flows.scale_out] slots")
            && logs.contains("has 1 partition(s)")
            && logs.contains("1 instance(s) with that count still run"),
        "{logs}"
    );
    assert_eq!(partitions(&f.b, &format!("strait-slots.{}.{}.internal", f.src, f.dst)), 1);
    produce(&f.a, &f.topic, &[Rec::simple(0, "after"), Rec::simple(1, "after")]).await;
    wait_until("the first instance still replicates", Duration::from_secs(60), || count(&f.b, &f.remote) == Some(2))
        .await;
    assert!(first.stop().success());
}

/// A session timeout the target's brokers refuse (below `group.min.session.timeout.ms`) stops the
/// flow naming the setting, instead of standing by for a slot that never comes.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_timeout_the_brokers_refuse_stops_the_flow_naming_it() {
    let f = TopicFlow::new("session", 1).await;
    let strait = Strait::start(&f.p, &f.config("[flows.scale_out]\nsession_timeout_ms = 1000"));
    let logs = exits_with(strait, 4, Duration::from_secs(60)).await;
    assert!(logs.contains("[flows.scale_out] session_timeout_ms") && logs.contains("do not allow 1000 ms"), "{logs}");
}
