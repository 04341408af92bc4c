//! Cut-over from a running MirrorMaker 2 (Kafka's own, from Maven Central): MM2 copies a topic of
//! 3 partitions and 30,000 records and checkpoints a group, then stops; Strait, configured by
//! `strait import-mm2` from MM2's own properties, continues where MM2's source offsets say:
//! nothing is copied twice, new records arrive once, and the group's checkpoints go on in the same
//! topic without rewinding.

use std::time::{Duration, Instant};

use strait::config::Config;

use crate::support::*;

const PARTITIONS: i32 = 3;

/// One MirrorMaker 2 at a time: four of these tests start theirs at once otherwise, and on two
/// cores beside the clusters each took minutes to start (a CI run saw all four time out).
static ONE_MM2: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// MM2 dedicated-mode properties for `f`'s flow alone (single-broker replication factors, offsets
/// flushed every second, no ACL sync), then `extra`. Its plugins are found by
/// their ServiceLoader manifests (`plugin.discovery`), not by scanning every class of the
/// classpath, which took MM2 over a minute to start on a loaded machine.
fn mm2_properties(f: &TopicFlow, extra: &str) -> String {
    format!(
        "clusters = {s}, {d}\n{s}.bootstrap.servers = {a}\n{d}.bootstrap.servers = {b}\n{s}->{d}.enabled = true\n\
         {d}->{s}.enabled = false\n{s}->{d}.topics = {t}\nreplication.factor = 1\n\
         checkpoints.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n\
         offset-syncs.topic.replication.factor = 1\noffset.storage.replication.factor = 1\n\
         status.storage.replication.factor = 1\nconfig.storage.replication.factor = 1\n\
         offset.flush.interval.ms = 1000\nsync.topic.acls.enabled = false\n\
         plugin.discovery = service_load\n{extra}",
        s = f.src,
        d = f.dst,
        a = f.a,
        b = f.b,
        t = f.topic,
    )
}
const PER_PARTITION: i32 = 10_000;

#[tokio::test(flavor = "multi_thread")]
async fn strait_resumes_where_mirror_maker_2_stopped() {
    let f = TopicFlow::new("cut", PARTITIONS).await;
    let batch = |label: &str, n: i32| -> Vec<Rec> {
        (0..n).map(|i| Rec::simple(i % PARTITIONS, &format!("{label}{i}"))).collect()
    };
    produce(&f.a, &f.topic, &batch("mm2-", PARTITIONS * PER_PARTITION)).await;
    let group = format!("{}-app", f.p);
    let committed = |offset: i64| (0..PARTITIONS).map(|p| (f.topic.as_str(), p, offset)).collect::<Vec<_>>();
    commit_group(&f.a, &group, &committed(4_000));
    let props = mm2_properties(
        &f,
        &format!(
            "{}->{}.groups = {group}\nemit.checkpoints.interval.seconds = 1\nrefresh.groups.interval.seconds = 1\n",
            f.src, f.dst
        ),
    );
    let dir = std::env::temp_dir().join(format!("strait-tests-{}", std::process::id())).join(format!("{}-mm2", f.p));
    let _one_mm2 = ONE_MM2.lock().await;
    let mut mm2 = strait_testkit::start_mirror_maker(&dir, &props).expect("MirrorMaker 2 starts");
    // Strait's config comes from MM2's own properties.
    let imported = std::process::Command::new(env!("CARGO_BIN_EXE_strait"))
        .arg("import-mm2")
        .arg(dir.join("mm2.properties"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&imported.stderr);
    assert!(imported.status.success(), "{stderr}");
    assert!(stderr.contains("not carried: offset.flush.interval.ms"), "every key left out is listed: {stderr}");
    let config = String::from_utf8(imported.stdout).unwrap();
    let flow = Config::parse(&config).unwrap().remove(0);
    // MM2 copied everything, flushed its source offsets (every second here) and checkpointed.
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let offsets = strait::mm2_offsets::load(&flow).await.unwrap_or_default();
        let flushed = (0..PARTITIONS)
            .all(|p| offsets.get(&(f.topic.clone(), p)).is_some_and(|s| s.next_offset == PER_PARTITION as i64));
        let cps = checkpoints(&f.b, &f.src);
        let checkpointed = (0..PARTITIONS).all(|p| last_checkpoint(&cps, &group, &f.remote, p).is_some());
        if flushed && checkpointed {
            break;
        }
        assert!(Instant::now() < deadline, "MM2 did not finish: {offsets:?}; see {}", dir.display());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(count(&f.b, &f.remote), Some((PARTITIONS * PER_PARTITION) as i64));
    mm2.kill().unwrap();
    mm2.wait().unwrap();
    let by_mm2 = checkpoints(&f.b, &f.src);

    produce(&f.a, &f.topic, &batch("strait-", 1_000)).await;
    // The group moves into what Strait copies, so that its offset translates through Strait's own
    // offset syncs. An offset inside MM2's copy translates only as well as MM2's syncs were
    // dense: a CI run's MM2, loaded, wrote so few that 9,000 translated to 1 on two partitions,
    // below MM2's own checkpoints (2,021 and 1,011), so no checkpoint could be written, as MM2
    // would not write one either (MM2's `OffsetSyncStore`: precision falls with distance).
    let moved = i64::from(PER_PARTITION) + 200;
    commit_group(&f.a, &group, &committed(moved));
    let strait = Strait::start(&f.p, &config);
    wait_replicated(&flow, &f.topic, PARTITIONS, PER_PARTITION as usize + 333, Duration::from_secs(60)).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let cps = checkpoints(&f.b, &f.src);
        let last: Vec<_> = (0..PARTITIONS).map(|p| last_checkpoint(&cps, &group, &f.remote, p)).collect();
        if last.iter().all(|c| c.is_some_and(|(up, _)| up == moved)) {
            break;
        }
        if Instant::now() > deadline {
            // What Strait's own translation gives, to tell a missing translation from a missing
            // emission (a CI run once saw neither a checkpoint nor a warning).
            let translated = translate_cli(&write_config(&f.p, &config), &flow.name, &group);
            panic!(
                "no checkpoint at 9000: last {last:?}, translate-offsets {translated:?}; see {}",
                strait.log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");
    assert!(logs.contains("where MirrorMaker 2 stopped"), "{logs}");
    let values: Vec<String> = read_all(&f.b, &f.remote, false)
        .into_values()
        .flatten()
        .map(|(_, r)| String::from_utf8(r.value.unwrap()).unwrap())
        .collect();
    let distinct: std::collections::BTreeSet<&String> = values.iter().collect();
    assert_eq!(values.len(), distinct.len(), "no record copied twice");
    assert_eq!(values.len(), (PARTITIONS * PER_PARTITION + 1_000) as usize);
    assert_eq!(values.iter().filter(|v| v.starts_with("strait-")).count(), 1_000);
    // Checkpoints continue in MM2's topic, each partition's never behind MM2's last one.
    let after = checkpoints(&f.b, &f.src);
    for p in 0..PARTITIONS {
        let (mm2_up, mm2_down) = last_checkpoint(&by_mm2, &group, &f.remote, p).unwrap();
        let ours: Vec<(i64, i64)> = after
            .iter()
            .skip(by_mm2.len())
            .filter(|c| c.group == group && c.topic == f.remote && c.partition == p)
            .map(|c| (c.upstream.0, c.downstream.0))
            .collect();
        assert!(!ours.is_empty(), "Strait checkpointed partition {p}");
        assert!(
            ours.iter().all(|(up, down)| *up >= mm2_up && *down >= mm2_down),
            "no rewind: MM2 {mm2_up}/{mm2_down}, Strait {ours:?}"
        );
    }
}

/// The way back (`write_mm2_offsets`), at-least-once: see [`mirror_maker_2_takes_over`].
#[tokio::test(flavor = "multi_thread")]
async fn mirror_maker_2_resumes_where_strait_stopped() {
    mirror_maker_2_takes_over("back", "delivery = \"at_least_once\"").await;
}

/// The way back with exactly-once delivery, whose MM2 offsets travel in the records' transactions.
#[tokio::test(flavor = "multi_thread")]
async fn mirror_maker_2_resumes_where_exactly_once_strait_stopped() {
    mirror_maker_2_takes_over("backeos", "delivery = \"exactly_once\"").await;
}

/// The way back from an exactly-once flow copying batches, whose MM2 offsets the batch producer
/// writes in its transactions, naming the partition Kafka's Java producer would give each key.
#[tokio::test(flavor = "multi_thread")]
async fn mirror_maker_2_resumes_where_an_exactly_once_batch_flow_stopped() {
    mirror_maker_2_takes_over("backbat", "delivery = \"exactly_once\"\ncopy = \"batches\"").await;
}

/// The way back to MM2 (`write_mm2_offsets`), the flow's `settings` added. Strait copies 1,000
/// records per partition of a 3-partition topic with the setting off and stops; restarted with it
/// on, it copies 1,000 more of partitions 0 and 1 while partition 2 stays idle, and stops; 500 more
/// per partition are produced; Kafka's own MM2 (dedicated mode, the same aliases, the properties
/// docs/migrating-from-mm2.md gives) then copies exactly those 1,500: the target ends with each
/// source record once. Without the feature MM2 finds no offset for the partitions and starts at the
/// earliest offset (its consumer's default): the target would hold the 5,000 Strait copied twice (a
/// first form of this test, run so, ended with 13,500 records for 7,500), so the offsets Strait
/// left are asserted before MM2 starts and the count and duplicate asserts fail. Partition 2, idle
/// since the setting was turned on, needs the offsets a slot writes at its start. MM2's own offset
/// records must land in the partitions Strait's did (the same key bytes, the Java producer's
/// partitioner), or a later restart of MM2 could read a stale one.
async fn mirror_maker_2_takes_over(prefix: &str, settings: &str) {
    const BEFORE: i32 = 1_000;
    const DURING: i32 = 1_000;
    const BY_MM2: i32 = 500;
    let f = TopicFlow::new(prefix, PARTITIONS).await;
    let batch = |label: &str, n: i32, partitions: i32| -> Vec<Rec> {
        (0..n).map(|i| Rec::simple(i % partitions, &format!("{label}{i}"))).collect()
    };
    let config = |on: bool| f.config(&format!("write_mm2_offsets = {on}\n{settings}\ncommit_interval_ms = 500"));
    let flow = Config::parse(&config(true)).unwrap().remove(0);
    produce(&f.a, &f.topic, &batch("before-", PARTITIONS * BEFORE, PARTITIONS)).await;
    run_until(&f.p, &config(false), &flow, &f.topic, &[BEFORE as i64; 3]).await;
    produce(&f.a, &f.topic, &batch("during-", 2 * DURING, 2)).await;
    let (busy, idle) = ((BEFORE + DURING) as i64, BEFORE as i64);
    run_until(&f.p, &config(true), &flow, &f.topic, &[busy, busy, idle]).await;
    // What Strait left for MM2: the last record copied of each partition, read as the cut-over does.
    let left = strait::mm2_offsets::load(&flow).await.unwrap();
    let left: Vec<Option<i64>> =
        (0..PARTITIONS).map(|p| left.get(&(f.topic.clone(), p)).map(|s| s.next_offset)).collect();
    assert_eq!(left, vec![Some(busy), Some(busy), Some(idle)], "MM2 offsets Strait wrote");
    let mm2_topic = flow.mm2_offsets_topic();
    assert_eq!(partitions(&f.b, &mm2_topic), 25, "created as MM2 would");

    produce(&f.a, &f.topic, &batch("mm2-", PARTITIONS * BY_MM2, PARTITIONS)).await;
    let props = mm2_properties(&f, "offset-syncs.topic.location = target\n");
    let dir = std::env::temp_dir().join(format!("strait-tests-{}", std::process::id())).join(format!("{}-mm2", f.p));
    let _one_mm2 = ONE_MM2.lock().await;
    let mut mm2 = strait_testkit::start_mirror_maker(&dir, &props).expect("MirrorMaker 2 starts");
    // Done when MM2 flushed its offsets at the end of each partition: everything it copied is
    // then on the target (Connect flushes offsets only for acknowledged records).
    let ends = [busy + BY_MM2 as i64, busy + BY_MM2 as i64, idle + BY_MM2 as i64];
    let started = Instant::now();
    loop {
        let offsets = strait::mm2_offsets::load(&flow).await.unwrap_or_default();
        if (0..PARTITIONS).all(|p| offsets.get(&(f.topic.clone(), p)).map(|s| s.next_offset) == Some(ends[p as usize]))
        {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(180), "MM2 did not finish: {offsets:?}; see {}", dir.display());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("MM2 caught up {:.1} s after its start", started.elapsed().as_secs_f64());
    mm2.kill().unwrap();
    mm2.wait().unwrap();

    let values: Vec<String> = read_all(&f.b, &f.remote, false)
        .into_values()
        .flatten()
        .map(|(_, r)| String::from_utf8(r.value.unwrap()).unwrap())
        .collect();
    let distinct: std::collections::BTreeSet<&String> = values.iter().collect();
    assert_eq!(values.len(), (PARTITIONS * (BEFORE + BY_MM2) + 2 * DURING) as usize, "each source record once");
    assert_eq!(distinct.len(), values.len(), "no record copied twice");
    assert_eq!(values.iter().filter(|v| v.starts_with("mm2-")).count(), (PARTITIONS * BY_MM2) as usize);
    // Each source partition's offsets, Strait's and then MM2's, sit in one partition of the
    // offsets topic, in order.
    let mut by_key: std::collections::BTreeMap<Vec<u8>, Vec<(i32, String)>> = Default::default();
    for (partition, records) in read_all(&f.b, &mm2_topic, false) {
        for (_, r) in records {
            let value = String::from_utf8(r.value.unwrap_or_default()).unwrap();
            by_key.entry(r.key.unwrap()).or_default().push((partition, value));
        }
    }
    for p in 0..PARTITIONS {
        let key = strait::mm2_offsets::encode(
            &f.src,
            &strait_connect::SourceOffset { topic: f.topic.as_str().into(), partition: p, offset: 0 },
        )
        .0;
        let records = by_key.get(&key).unwrap_or_else(|| panic!("partition {p}'s offsets: {by_key:?}"));
        let places: std::collections::BTreeSet<i32> = records.iter().map(|(at, _)| *at).collect();
        assert_eq!(places.len(), 1, "partition {p}: MM2 wrote its offsets where Strait did: {records:?}");
        let values: Vec<&str> = records.iter().map(|(_, v)| v.as_str()).collect();
        let strait_last = format!("{{\"offset\":{}}}", left[p as usize].unwrap_or_default() - 1);
        let mm2_last = format!("{{\"offset\":{}}}", ends[p as usize] - 1);
        let at = values.iter().position(|v| *v == strait_last).unwrap_or_else(|| panic!("Strait's: {values:?}"));
        assert_eq!(values.last(), Some(&mm2_last.as_str()), "MM2's last: {values:?}");
        assert!(at < values.len() - 1, "MM2's after Strait's: {values:?}");
    }
}

/// Runs Strait on `config` until `flow`'s saved next offsets of `topic`'s partitions are `until`,
/// then stops it (SIGTERM), asserting a clean exit.
async fn run_until(name: &str, config: &str, flow: &strait::config::Flow, topic: &str, until: &[i64]) {
    let saved = || async {
        let saved = strait::positions::load(&flow.target, &flow.name).await.unwrap_or_default();
        (0..PARTITIONS).map(|p| saved.get(&(topic.to_string(), p)).map_or(0, |s| s.next_offset)).collect::<Vec<i64>>()
    };
    let strait = Strait::start(name, config);
    let deadline = Instant::now() + Duration::from_secs(60);
    while saved().await != until {
        assert!(Instant::now() < deadline, "Strait did not reach {until:?}: {:?}", saved().await);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");
}
