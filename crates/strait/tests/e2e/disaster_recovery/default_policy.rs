//! Failback with the default replication policy: both topics of a group move home.

use std::time::Duration;

use super::*;

/// Failback with the default policy: `billing` read A's records on B from `<a>.t` and B's own
/// from `t`; the failover B->A moves the first home to A's `t` through A->B's offset syncs (B->A
/// does not carry `<a>.t` back) and the second to `<b>.t` on A.
#[tokio::test(flavor = "multi_thread")]
async fn a_default_policy_failback_moves_both_topics_home() {
    const LAG_MAX: i64 = 20;
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("dfb");
    let (aa, ba) = (format!("{p}a"), format!("{p}b"));
    let (topic, group) = (format!("{p}-t"), format!("{p}-billing"));
    let (on_b, on_a) = (format!("{aa}.{topic}"), format!("{ba}.{topic}"));
    create_topic(&a, &topic, PARTITIONS, &[]).await;
    create_topic(&b, &topic, PARTITIONS, &[]).await;
    produce_numbered(&a, &topic, "a", PARTITIONS, 300).await;
    produce_numbered(&b, &topic, "b", PARTITIONS, 100).await;
    let flow = |source: &str, target: &str| {
        format!(
            "[[flows]]\nsource = \"{source}\"\ntarget = \"{target}\"\ntopics = [\"{p}-.*\"]\noffset_lag_max = {LAG_MAX}\nrefresh_topics_interval_ms = 1000\n"
        )
    };
    let config = format!("{}{}{}", clusters_toml(&aa, &a, &ba, &b), flow(&aa, &ba), flow(&ba, &aa));
    let strait = Strait::start(&p, &config);
    wait_until("both flows copied", Duration::from_secs(60), || {
        count(&b, &on_b) == Some(900) && count(&a, &on_a) == Some(300)
    })
    .await;
    // On B, billing read every record of A and half of B's own.
    let read_half: Vec<(&str, i32, i64)> = (0..PARTITIONS).map(|part| (topic.as_str(), part, 50)).collect();
    commit_group(&b, &group, &read_half);
    commit_at_end(&b, &group, &on_b);

    let path = write_config(&format!("{p}-fb"), &config);
    let (code, report, stderr) = failover(&path, &format!("{ba}->{aa}"), &["--mode", "planned"]);
    assert_eq!(code, 0, "{stderr}\n{report:#}");
    eprintln!("default-policy failback:\n{report:#}");
    let moved = rows(&report, &group);
    let a_ends = end_offsets(&a, &topic);
    for part in 0..PARTITIONS {
        let home = moved.get(&(topic.clone(), part)).expect("A's topic moved home");
        assert_eq!(home["source_topic"].as_str(), Some(on_b.as_str()));
        assert_eq!(home["downstream"].as_i64(), Some(a_ends[&part]), "partition {part}: at A's end, exactly");
        assert!(moved.contains_key(&(on_a.clone(), part)), "B's topic moved to its copy on A");
    }
    assert_eq!(committed(&a, &group, &topic, PARTITIONS), a_ends, "billing resumes on A's own topic at its end");
    let billing = committed(&a, &group, &on_a, PARTITIONS);
    for (part, vs) in values(&a, &on_a) {
        let read: Vec<&String> = vs.iter().filter(|(o, _)| *o >= billing[&part]).map(|(_, v)| v).collect();
        let unread = vs.iter().filter(|(_, v)| parse_n(v) >= 50).count();
        let rereads = read.iter().filter(|v| parse_n(v) < 50).count();
        assert_eq!(read.len() - rereads, unread, "partition {part}: billing skipped records of B on A");
        assert!(rereads as i64 <= LAG_MAX, "partition {part}: {rereads} re-reads");
    }
    // New records on A's own topic reach billing there.
    produce_numbered(&a, &topic, "a2", PARTITIONS, 10).await;
    assert_eq!(read_from(&a, &topic, &committed(&a, &group, &topic, PARTITIONS)).len(), 30);
    assert!(strait.stop().success());
}
