use std::time::{Duration, Instant};

use crate::support::*;

fn flow_settings(topics: &str) -> String {
    format!("topics = [\"{topics}\"]\nemit_checkpoints_interval_ms = 1000\nrefresh_groups_interval_ms = 1000\ngroups = [\".*\"]")
}

#[tokio::test(flavor = "multi_thread")]
async fn checkpoints_follow_mm2_rules_and_survive_restart() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("cp");
    let (src, dst) = (format!("{p}s"), format!("{p}d"));
    let (busy, quiet) = (format!("{p}-busy"), format!("{p}-quiet"));
    create_topic(&a, &busy, 2, &[]).await;
    create_topic(&a, &quiet, 1, &[]).await;
    produce(&a, &busy, &(0..1000).map(|i| Rec::simple(i % 2, &format!("b{i}"))).collect::<Vec<_>>()).await;
    produce(&a, &quiet, &(0..30).map(|i| Rec::simple(0, &format!("q{i}"))).collect::<Vec<_>>()).await;
    let g = |n: &str| format!("{p}-{n}");
    commit_group(&a, &g("zero"), &[(&busy, 0, 0)]);
    commit_group(&a, &g("quiet"), &[(&quiet, 0, 30)]);
    commit_group(&a, &g("lag"), &[(&busy, 1, 5)]);
    commit_group(&a, &g("mid"), &[(&busy, 0, 300)]);
    let config = two_cluster_config((&src, &a, ""), (&dst, &b, ""), &flow_settings(&format!("{p}-.*")), "");
    let started = Instant::now();
    let strait = Strait::start(&p, &config);
    let (rbusy, rquiet) = (format!("{src}.{busy}"), format!("{src}.{quiet}"));
    wait_until("checkpoints for every group", Duration::from_secs(60), || {
        let cps = checkpoints(&b, &src);
        last_checkpoint(&cps, &g("quiet"), &rquiet, 0) == Some((30, 30))
            && [("zero", 0), ("lag", 1), ("mid", 0)]
                .iter()
                .all(|(n, part)| last_checkpoint(&cps, &g(n), &rbusy, *part).is_some())
    })
    .await;
    eprintln!("quiet topic checkpoint reached its end offset {:?} after start", started.elapsed());
    let cps = checkpoints(&b, &src);
    assert_eq!(last_checkpoint(&cps, &g("zero"), &rbusy, 0), Some((0, 0)), "offset 0 checkpoints to 0");
    let (up, down) = last_checkpoint(&cps, &g("lag"), &rbusy, 1).unwrap();
    assert_eq!(up, 5);
    assert!((0..=5).contains(&down), "a lagging group translates at or before its position: {down}");
    let (up, down) = last_checkpoint(&cps, &g("mid"), &rbusy, 0).unwrap();
    assert_eq!(up, 300);
    assert!((300 - 100..=300).contains(&down), "within offset_lag_max behind, never ahead: {down}");
    // The CLI prints the numbers the checkpoints carry.
    let config_path = write_config(&format!("{p}-cli"), &config);
    let cli = translate_cli(&config_path, &format!("{src}->{dst}"), &g("mid"));
    assert_eq!(cli.get(&(rbusy.clone(), 0)), Some(&(300, Some(down))));

    // Restart: the reloaded checkpoints are never rewound, and new ones come at once.
    assert!(strait.stop().success());
    let before = checkpoints(&b, &src).len();
    commit_group(&a, &g("mid"), &[(&busy, 0, 500)]);
    let strait = Strait::start(&format!("{p}-again"), &config);
    let restarted = Instant::now();
    wait_until("checkpoint after restart", Duration::from_secs(30), || {
        last_checkpoint(&checkpoints(&b, &src), &g("mid"), &rbusy, 0) == Some((500, 500))
    })
    .await;
    eprintln!("first new checkpoint {:?} after restart", restarted.elapsed());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(strait.stop().success());
    let all = checkpoints(&b, &src);
    for c in &all[before..] {
        let prior =
            all[..before].iter().rev().find(|o| o.group == c.group && o.topic == c.topic && o.partition == c.partition);
        if let Some(o) = prior {
            assert!(
                c.downstream >= o.downstream || c.upstream < o.upstream,
                "checkpoint went backwards after restart: {o:?} then {c:?}"
            );
            assert!(c != o, "restart re-emitted an unchanged checkpoint {c:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn group_offsets_sync_only_into_absent_or_empty_target_groups() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("gs");
    let (src, dst) = (format!("{p}s"), format!("{p}d"));
    let topic = format!("{p}-t");
    let remote = format!("{src}.{topic}");
    create_topic(&a, &topic, 2, &[]).await;
    produce(&a, &topic, &(0..400).map(|i| Rec::simple(i % 2, &format!("v{i}"))).collect::<Vec<_>>()).await;
    let g = |n: &str| format!("{p}-{n}");
    for n in ["absent", "empty", "active"] {
        commit_group(&a, &g(n), &[(&topic, 0, 150), (&topic, 1, 120)]);
    }
    // The remote topic exists before Strait starts, so target groups can be prepared.
    create_topic(&b, &remote, 2, &[]).await;
    // An empty target group: partition 0 committed behind, partition 1 never committed (the
    // broker answers -1 for it, which counts as missing).
    commit_group(&b, &g("empty"), &[(&remote, 0, 3)]);
    let active = std::thread::spawn({
        let (b, remote, group) = (b.clone(), remote.clone(), g("active"));
        move || {
            use rdkafka::consumer::{BaseConsumer, Consumer};
            let c: BaseConsumer = rdkafka::config::ClientConfig::new()
                .set("bootstrap.servers", &b)
                .set("group.id", &group)
                .set("enable.auto.commit", "false")
                .create()
                .unwrap();
            c.subscribe(&[&remote]).unwrap();
            let until = Instant::now() + Duration::from_secs(25);
            while Instant::now() < until {
                let _ = c.poll(Duration::from_millis(100));
            }
        }
    });
    let settings =
        format!("{}\nsync_group_offsets = true\nsync_group_offsets_interval_ms = 1000", flow_settings(&topic));
    let config = two_cluster_config((&src, &a, ""), (&dst, &b, ""), &settings, "");
    let strait = Strait::start(&p, &config);
    let config_path = write_config(&format!("{p}-cli"), &config);
    let expected = |group: &str| -> std::collections::BTreeMap<i32, i64> {
        translate_cli(&config_path, &format!("{src}->{dst}"), group)
            .into_iter()
            .filter_map(|((_, part), (_, d))| Some((part, d?)))
            .collect()
    };
    wait_until("absent and empty groups synced", Duration::from_secs(60), || {
        let want = expected(&g("absent"));
        want.len() == 2
            && committed(&b, &g("absent"), &remote, 2) == want
            && committed(&b, &g("empty"), &remote, 2) == want
    })
    .await;
    let want = expected(&g("absent"));
    assert!(want[&0] <= 150 && want[&0] >= 50, "translated, not copied: {want:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(committed(&b, &g("active"), &remote, 2).is_empty(), "an active target group is left alone");
    let logs = strait.logs();
    assert_eq!(
        logs.lines().filter(|l| l.contains("target group is active") && l.contains(&g("active"))).count(),
        1,
        "logged once"
    );
    assert!(strait.stop().success());
    active.join().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn offset_syncs_on_the_source_still_translate() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("loc");
    let (src, dst) = (format!("{p}s"), format!("{p}d"));
    let topic = format!("{p}-t");
    create_topic(&a, &topic, 1, &[]).await;
    produce(&a, &topic, &(0..250).map(|i| Rec::simple(0, &format!("v{i}"))).collect::<Vec<_>>()).await;
    commit_group(&a, &format!("{p}-g"), &[(&topic, 0, 250)]);
    let settings = format!("{}\noffset_syncs_topic_location = \"source\"", flow_settings(&topic));
    let config = two_cluster_config((&src, &a, ""), (&dst, &b, ""), &settings, "");
    let strait = Strait::start(&p, &config);
    wait_until("checkpoint", Duration::from_secs(60), || {
        last_checkpoint(&checkpoints(&b, &src), &format!("{p}-g"), &format!("{src}.{topic}"), 0) == Some((250, 250))
    })
    .await;
    assert!(strait.stop().success());
    let on_source = format!("mm2-offset-syncs.{dst}.internal");
    assert!(count(&a, &on_source).unwrap_or(0) > 0, "{on_source} written on the source");
    assert!(!topic_exists(&b, &format!("mm2-offset-syncs.{src}.internal")), "nothing on the target");
}

/// Checkpointing keeps a client per group (librdkafka reads a group's offsets only as that group);
/// when groups vanish from the source their clients and state must go, or memory and threads grow
/// with every group ever seen.
#[tokio::test(flavor = "multi_thread")]
async fn clients_of_vanished_groups_are_closed() {
    const GROUPS: usize = 20;
    let f = TopicFlow::new("cpgone", 1).await;
    produce(&f.a, &f.topic, &(0..10).map(|i| Rec::simple(0, &format!("r{i}"))).collect::<Vec<_>>()).await;
    let groups: Vec<String> = (0..GROUPS).map(|i| format!("{}-g{i}", f.p)).collect();
    for g in &groups {
        commit_group(&f.a, g, &[(&f.topic, 0, 5)]);
    }
    let metrics = free_addr();
    let strait = Strait::launch(
        &f.p,
        &f.config(&format!(
            "groups = [\"{}-g.*\"]\nrefresh_groups_interval_ms = 500\nemit_checkpoints_interval_ms = 500\nsync_group_offsets = true\nsync_group_offsets_interval_ms = 500",
            f.p
        )),
        "info",
        &["--metrics-addr", &metrics],
    );
    wait_until("every group's offsets synced to the target", Duration::from_secs(60), || {
        groups.iter().all(|g| committed(&f.b, g, &f.remote, 1).contains_key(&0))
    })
    .await;
    // The counter follows the commit it counts, so it is read until it catches up.
    let flow = format!("source=\"{}\",target=\"{}\"", f.src, f.dst);
    wait_until("a group offset sync per group counted", Duration::from_secs(10), || {
        let scrape = http_get(&metrics, "/metrics").expect("metrics served").1;
        sample(&scrape, "strait_group_offset_syncs_total", &flow).is_some_and(|n| n >= GROUPS as f64)
    })
    .await;
    let with_groups = strait.threads();
    let source = admin(&f.a);
    let names: Vec<&str> = groups.iter().map(String::as_str).collect();
    let timeout = rdkafka::admin::AdminOptions::new().request_timeout(Some(Duration::from_secs(30)));
    for r in source.delete_groups(&names, &timeout).await.unwrap() {
        r.expect("group deleted");
    }
    // Two clients per group (source and target), each with at least 3 librdkafka threads (main,
    // bootstrap broker, the broker itself).
    wait_until("the vanished groups' clients closed", Duration::from_secs(30), || {
        strait.threads() + 3 * 2 * GROUPS <= with_groups
    })
    .await;
    eprintln!("threads: {with_groups} with {GROUPS} groups, {} after they vanished", strait.threads());
    assert!(strait.stop().success());
}

/// Every offset sync of `topic` (source name) partition 0 on `<src>`'s offset-syncs topic on the
/// target, read into MM2's store as the checkpoint task keeps it (history kept, read to end).
fn sync_store(b: &str, src: &str, topic: &str) -> (strait_mm2::OffsetSyncStore, Vec<i64>) {
    let mut store = strait_mm2::OffsetSyncStore::keeping_history();
    let mut upstreams = Vec::new();
    for (_, r) in read_all(b, &strait_mm2::offset_syncs_topic(src), true).remove(&0).unwrap_or_default() {
        let sync = strait_mm2::OffsetSync::decode(r.key.as_deref().unwrap(), r.value.as_deref().unwrap())
            .expect("MM2 offset sync layout");
        if sync.topic == topic && sync.partition == 0 {
            upstreams.push(sync.upstream.0);
            store.apply(&sync);
        }
    }
    store.mark_read_to_end();
    (store, upstreams)
}

/// The walk of issue 25: a group far behind the head of its partition (committed at 480 while
/// the copy was past 2000) kept its first checkpoint while it moved on by a thousand records.
/// That is MM2's rule, not a stall: MM2's `OffsetSyncStore` keeps 64 syncs per partition spaced
/// exponentially back from the newest, so every offset between two remembered syncs translates
/// to the same downstream offset, and `MirrorCheckpointTask.checkpointIsMoreRecent` writes a
/// checkpoint only when the downstream offset advances (or the upstream one rewinds). The
/// downstream offset is all a checkpoint's readers resume from (MM2's
/// `Checkpoint.offsetAndMetadata()`, group offset sync), so a pair with the same downstream
/// offset and a larger upstream one tells them nothing new. This pins both halves: no checkpoint
/// while the translation stays, one as soon as it advances, while another group on the same
/// partition keeps being checkpointed.
#[tokio::test(flavor = "multi_thread")]
async fn checkpoint_of_a_far_behind_group_moves_only_when_its_translation_does() {
    const RECORDS: i64 = 3000;
    let f = TopicFlow::new("cpfar", 1).await;
    produce(&f.a, &f.topic, &(0..RECORDS).map(|i| Rec::simple(0, &format!("r{i}"))).collect::<Vec<_>>()).await;
    let strait = Strait::start(
        &f.p,
        &f.config(&format!(
            "groups = [\"{}-.*\"]\nemit_checkpoints_interval_ms = 1000\nrefresh_groups_interval_ms = 1000",
            f.p
        )),
    );
    // Every record copied and the last one synced: the syncs, and so the translations, are final.
    wait_until("the copy and its last offset sync", Duration::from_secs(90), || {
        count(&f.b, &f.remote) == Some(RECORDS) && sync_store(&f.b, &f.src, &f.topic).1.last() == Some(&(RECORDS - 1))
    })
    .await;
    let (store, upstreams) = sync_store(&f.b, &f.src, &f.topic);
    let translate = |g: i64| store.translate(&f.topic, 0, strait_mm2::UpstreamOffset(g)).map(|d| d.0);
    // The remembered syncs, newest first; `next` is the oldest one newer than the group.
    let mut slots: Vec<(i64, i64)> =
        store.history(&f.topic, 0).expect("syncs of the partition").iter().map(|(u, d)| (u.0, d.0)).collect();
    slots.dedup();
    // A cycle reads the groups in name order: `near` before `far`.
    let (g, near) = (format!("{}-b-far", f.p), format!("{}-a-near", f.p));
    let first = 480;
    let next = slots.iter().rev().find(|(u, _)| *u > first).copied().expect("a remembered sync above 480");
    let moved = next.0 - 1;
    eprintln!("{} syncs, remembered {slots:?}; group at {first} then {moved} then {}", upstreams.len(), next.0);
    assert!(moved - first >= 500, "the group moves on by hundreds of records before its translation does: {slots:?}");
    assert!(upstreams.iter().any(|u| (first + 1..=moved).contains(u)), "syncs exist between the two offsets");
    assert_eq!(translate(moved), translate(first), "both offsets translate from the same remembered sync");

    commit_group(&f.a, &g, &[(&f.topic, 0, first)]);
    commit_group(&f.a, &near, &[(&f.topic, 0, 2000)]);
    let down = translate(first).expect("480 translates");
    let remote = f.remote.clone();
    wait_until("first checkpoints", Duration::from_secs(30), || {
        let cps = checkpoints(&f.b, &f.src);
        last_checkpoint(&cps, &g, &remote, 0) == Some((first, down))
            && last_checkpoint(&cps, &near, &remote, 0).is_some()
    })
    .await;

    // The group moves on; its translation does not. The other group, committed after it and
    // read before it in a cycle: its new checkpoint proves that cycle read the move.
    commit_group(&f.a, &g, &[(&f.topic, 0, moved)]);
    commit_group(&f.a, &near, &[(&f.topic, 0, RECORDS)]);
    let near_end = translate(RECORDS).expect("the end translates");
    wait_until("the near group's new checkpoint", Duration::from_secs(30), || {
        last_checkpoint(&checkpoints(&f.b, &f.src), &near, &remote, 0) == Some((RECORDS, near_end))
    })
    .await;
    // And two more checkpoint intervals.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let cps = checkpoints(&f.b, &f.src);
    assert_eq!(
        last_checkpoint(&cps, &g, &remote, 0),
        Some((first, down)),
        "no checkpoint for an unchanged translation"
    );
    assert_eq!(cps.iter().filter(|c| c.group == g).count(), 1, "written once: {cps:?}");
    let config_path = write_config(&format!("{}-cli", f.p), &f.config(""));
    let flow = format!("{}->{}", f.src, f.dst);
    assert_eq!(translate_cli(&config_path, &flow, &g).get(&(remote.clone(), 0)), Some(&(moved, Some(down))));

    // One offset further the translation reaches the next sync: checkpointed at once.
    commit_group(&f.a, &g, &[(&f.topic, 0, next.0)]);
    wait_until("the far group's checkpoint once its translation advances", Duration::from_secs(30), || {
        last_checkpoint(&checkpoints(&f.b, &f.src), &g, &remote, 0) == Some((next.0, next.1))
    })
    .await;
    assert!(next.1 > down);
    assert!(strait.stop().success());
}
