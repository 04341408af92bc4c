//! MirrorMaker 2's own Java classes (connect-mirror-client 4.1.1, Maven Central) read what
//! Strait writes and give the same answers as Strait. Needs the clusters of `scripts/test`.

#[path = "e2e/support.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use strait_mm2::{Checkpoint, DownstreamOffset, Heartbeat, OffsetSync, UpstreamOffset};
use strait_testkit::jvm::{golden_vectors, mm2_check};

use support::*;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn mm2_jvm_compat_golden_vectors_match_the_java_classes() {
    let java: BTreeMap<String, String> = golden_vectors().expect("Mm2Check golden").into_iter().collect();
    let hb = Heartbeat { source_alias: "us-east".into(), target_alias: "eu-west".into(), timestamp_ms: 100 };
    let cp = Checkpoint {
        group: "analytics".into(),
        topic: "orders".into(),
        partition: 7,
        upstream: UpstreamOffset(1000),
        downstream: DownstreamOffset(742),
        metadata: String::new(),
    };
    let os = OffsetSync {
        topic: "orders".into(),
        partition: 7,
        upstream: UpstreamOffset(1000),
        downstream: DownstreamOffset(742),
    };
    let ours = [
        ("heartbeat.key", hex(&hb.encode_key())),
        ("heartbeat.value", hex(&hb.encode_value())),
        ("checkpoint.key", hex(&cp.encode_key())),
        ("checkpoint.value", hex(&cp.encode_value())),
        ("offsetsync.key", hex(&os.encode_key())),
        ("offsetsync.value", hex(&os.encode_value())),
    ];
    for (name, bytes) in ours {
        assert_eq!(java.get(name), Some(&bytes), "{name}: Strait's bytes differ from MM2's");
    }
}

/// `decode` output: (ok, rejected) counts.
fn decode(bootstrap: &str, topic: &str, kind: &str) -> (usize, usize, String) {
    let out = mm2_check(&["decode", bootstrap, topic, kind]).expect("Mm2Check decode");
    let last = out.lines().last().unwrap_or_default().to_string();
    let parts: Vec<&str> = last.split_whitespace().collect();
    assert_eq!(parts.first(), Some(&"total"), "{out}");
    (parts[3].parse().unwrap(), parts[5].parse().unwrap(), out)
}

#[tokio::test(flavor = "multi_thread")]
async fn mm2_jvm_compat_java_client_reads_what_strait_writes() {
    java_client_reads_what_strait_writes("delivery = \"at_least_once\"").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mm2_jvm_compat_java_client_reads_what_strait_writes_exactly_once() {
    java_client_reads_what_strait_writes("delivery = \"exactly_once\"").await;
}

/// A flow copying whole batches (issue 27) syncs from each batch's first and last record.
#[tokio::test(flavor = "multi_thread")]
async fn mm2_jvm_compat_java_client_reads_what_a_batch_flow_writes() {
    java_client_reads_what_strait_writes("copy = \"batches\"").await;
}

/// Exactly-once, a batch flow's offset syncs go in its transactions as batches of Strait's own.
#[tokio::test(flavor = "multi_thread")]
async fn mm2_jvm_compat_java_client_reads_what_an_exactly_once_batch_flow_writes() {
    java_client_reads_what_strait_writes("copy = \"batches\"\ndelivery = \"exactly_once\"").await;
}

/// Active/active with the flow `settings`; MM2's Java classes decode every offset sync,
/// checkpoint and heartbeat, and translate as Strait does, to an offset from which the target
/// holds the record at the group's position (a failover skips nothing).
async fn java_client_reads_what_strait_writes(settings: &str) {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("jvm");
    let (aa, ba) = (format!("{p}a"), format!("{p}b"));
    let topic = format!("{p}-t");
    let remote = format!("{aa}.{topic}");
    let group = format!("{p}-g");
    create_topic(&a, &topic, 2, &[]).await;
    produce(&a, &topic, &(0..600).map(|i| Rec::simple(i % 2, &format!("v{i}"))).collect::<Vec<_>>()).await;
    commit_group(&a, &group, &[(&topic, 0, 170), (&topic, 1, 300)]);
    let flow = |s: &str, t: &str| {
        format!(
            "[[flows]]\nsource = \"{s}\"\ntarget = \"{t}\"\n{settings}\ntopics = [\"{p}-.*\"]\nrefresh_topics_interval_ms = 1000\nemit_checkpoints_interval_ms = 1000\nrefresh_groups_interval_ms = 1000\nsync_group_offsets = true\nsync_group_offsets_interval_ms = 1000\n"
        )
    };
    // Active/active, so each side has a heartbeats topic that the other replicates as
    // `<alias>.heartbeats`: that is how MirrorClient discovers upstream clusters.
    let config = format!(
        "[[clusters]]\nalias = \"{aa}\"\nbootstrap_servers = \"{a}\"\n[[clusters]]\nalias = \"{ba}\"\nbootstrap_servers = \"{b}\"\n{}\n{}",
        flow(&aa, &ba),
        flow(&ba, &aa)
    );
    let strait = Strait::start(&p, &config);
    let config_path = write_config(&format!("{p}-cli"), &config);
    let cli = || -> BTreeMap<(String, i32), i64> {
        translate_cli(&config_path, &format!("{aa}->{ba}"), &group)
            .into_iter()
            .filter_map(|(k, (_, d))| Some((k, d?)))
            .collect()
    };
    wait_until("checkpoints and group sync caught up, upstream heartbeats replicated", Duration::from_secs(90), || {
        let cps = checkpoints(&b, &aa);
        let want = cli();
        want.len() == 2
            && want.iter().all(|((t, part), d)| last_checkpoint(&cps, &group, t, *part).map(|c| c.1) == Some(*d))
            && committed(&b, &group, &remote, 2)
                .into_iter()
                .map(|(part, o)| ((remote.clone(), part), o))
                .collect::<BTreeMap<_, _>>()
                == want
            && count(&b, &format!("{aa}.heartbeats")).unwrap_or(0) > 0
    })
    .await;
    assert!(strait.stop().success());

    for (topic, kind) in [
        (format!("mm2-offset-syncs.{aa}.internal"), "offsetsync"),
        (format!("{aa}.checkpoints.internal"), "checkpoint"),
        ("heartbeats".to_string(), "heartbeat"),
    ] {
        let (ok, rejected, out) = decode(&b, &topic, kind);
        assert!(ok > 0 && rejected == 0, "{topic}: MM2 must decode every record:\n{out}");
    }

    let java: BTreeMap<(String, i32), i64> = mm2_check(&["translate", &b, &aa, &group])
        .expect("RemoteClusterUtils.translateOffsets")
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.first() == Some(&"offset")).then(|| ((f[1].to_string(), f[2].parse().unwrap()), f[3].parse().unwrap()))
        })
        .collect();
    let cli = cli();
    let synced: BTreeMap<(String, i32), i64> =
        committed(&b, &group, &remote, 2).into_iter().map(|(part, o)| ((remote.clone(), part), o)).collect();
    assert_eq!(java.len(), 2, "{java:?}");
    assert_eq!(java, cli, "RemoteClusterUtils.translateOffsets == strait translate-offsets");
    assert_eq!(java, synced, "RemoteClusterUtils.translateOffsets == group offset sync");
    // The group's next record on the source, from the translated offset on on the target.
    for (part, position) in [(0, 170), (1, 300)] {
        let next =
            read_all(&a, &topic, false)[&part].iter().find(|(o, _)| *o == position).map(|(_, r)| r.value.clone());
        let from = java[&(remote.clone(), part)];
        let after: Vec<Option<Vec<u8>>> = read_all(&b, &remote, false)[&part]
            .iter()
            .filter(|(o, _)| *o >= from)
            .map(|(_, r)| r.value.clone())
            .collect();
        assert!(
            next.is_none_or(|v| after.contains(&v)),
            "partition {part}: read from {from} on, the target holds the group's next record"
        );
    }

    let client = mm2_check(&["client", &b]).expect("MirrorClient");
    for line in [
        format!("upstream {aa}"),
        format!("heartbeats {aa}.heartbeats"),
        format!("checkpoints {aa}.checkpoints.internal"),
    ] {
        assert!(client.lines().any(|l| l == line), "MirrorClient must report `{line}`:\n{client}");
    }
}
