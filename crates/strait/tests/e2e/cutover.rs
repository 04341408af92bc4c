//! Cut-over from a running MirrorMaker 2 (Kafka's own, from Maven Central): Strait, configured by
//! `strait import-mm2` from MM2's own properties and started after MM2 stopped, resumes where
//! MM2's source offsets say instead of copying every partition again.

use std::time::{Duration, Instant};

use strait::config::Config;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn strait_resumes_where_mirror_maker_2_stopped() {
    const PARTITIONS: i32 = 2;
    let f = TopicFlow::new("cut", PARTITIONS).await;
    let batch = |label: &str, n: i32| -> Vec<Rec> {
        (0..n).map(|i| Rec::simple(i % PARTITIONS, &format!("{label}{i}"))).collect()
    };
    produce(&f.a, &f.topic, &batch("mm2-", 100)).await;
    let props = format!(
        "clusters = {s}, {d}\n{s}.bootstrap.servers = {a}\n{d}.bootstrap.servers = {b}\n{s}->{d}.enabled = true\n\
         {d}->{s}.enabled = false\n{s}->{d}.topics = {t}\nreplication.factor = 1\n\
         checkpoints.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n\
         offset-syncs.topic.replication.factor = 1\noffset.storage.replication.factor = 1\n\
         status.storage.replication.factor = 1\nconfig.storage.replication.factor = 1\n\
         offset.flush.interval.ms = 1000\nsync.topic.acls.enabled = false\n",
        s = f.src,
        d = f.dst,
        a = f.a,
        b = f.b,
        t = f.topic
    );
    let dir = std::env::temp_dir().join(format!("strait-tests-{}", std::process::id())).join(format!("{}-mm2", f.p));
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
    // MM2 copied the first 100 and flushed its source offsets (every second here).
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let offsets = strait::mm2_offsets::load(&flow).await.unwrap_or_default();
        if (0..PARTITIONS).all(|p| offsets.get(&(f.topic.clone(), p)).is_some_and(|s| s.next_offset == 50)) {
            break;
        }
        assert!(Instant::now() < deadline, "MM2 offsets not flushed: {offsets:?}; see {}", dir.display());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(count(&f.b, &f.remote), Some(100));
    mm2.kill().unwrap();
    mm2.wait().unwrap();

    produce(&f.a, &f.topic, &batch("strait-", 60)).await;
    let strait = Strait::start(&f.p, &config);
    wait_replicated(&flow, &f.topic, PARTITIONS, 80, Duration::from_secs(60)).await;
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");
    assert!(logs.contains("where MirrorMaker 2 stopped"), "{logs}");
    let values: Vec<String> = read_all(&f.b, &f.remote, false)
        .into_values()
        .flatten()
        .map(|(_, r)| String::from_utf8(r.value.unwrap()).unwrap())
        .collect();
    assert_eq!(values.len(), 160, "nothing MM2 copied is copied again");
    assert_eq!(values.iter().filter(|v| v.starts_with("strait-")).count(), 60);
}
