//! Batch flows under the default replication policy, run by two deployments that call the same
//! two clusters by different aliases (issue 45). Names cannot stop the cycle then: A's topic
//! `t`, copied to B as `{a}.t`, has no alias of the flow back's target in its name, so the flow
//! back would copy it on as `{x}.{a}.t`, and so on, a prefix longer each time, until the broker
//! refuses the name; heartbeats topics, which every flow copies, would do it unasked. The record
//! path's header carries cluster ids and stops it; the batch path's producer-id registry must too.

use std::time::Duration;

use crate::support::*;

/// One deployment: clusters `{p}{s}` (at `source`) and `{p}{t}` (at `target`), one default-policy
/// batch flow between them taking every topic whose name ends in `topic`.
fn deployment(p: &str, (s, source): (&str, &str), (t, target): (&str, &str), topic: &str) -> String {
    format!(
        "[[clusters]]\nalias = \"{p}{s}\"\nbootstrap_servers = \"{source}\"\n[[clusters]]\nalias = \"{p}{t}\"\nbootstrap_servers = \"{target}\"\n\
         [[flows]]\nsource = \"{p}{s}\"\ntarget = \"{p}{t}\"\ncopy = \"batches\"\nrefresh_topics_interval_ms = 1000\n\
         emit_checkpoints = false\ntopics = [\".*{topic}\"]\n"
    )
}

/// Records in `topic` on `bootstrap` (0 when it does not exist).
fn stored(bootstrap: &str, topic: &str) -> i64 {
    count(bootstrap, topic).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn default_policy_batch_flows_under_different_aliases_copy_nothing_back() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("alias");
    let topic = format!("{p}-t");
    create_topic(&a, &topic, 2, &[]).await;
    create_topic(&b, &topic, 2, &[]).await;
    // One deployment calls A `{p}a` and B `{p}b`; the other calls B `{p}x` and A `{p}y`.
    let forth = Strait::start(&format!("{p}1"), &deployment(&p, ("a", &a), ("b", &b), &topic));
    let back = Strait::start(&format!("{p}2"), &deployment(&p, ("x", &b), ("y", &a), &topic));
    produce(&a, &topic, &(0..60).map(|i| Rec::simple(i % 2, &format!("a{i}"))).collect::<Vec<_>>()).await;
    produce(&b, &topic, &(0..40).map(|i| Rec::simple(i % 2, &format!("b{i}"))).collect::<Vec<_>>()).await;
    let (on_b, on_a) = (format!("{p}a.{topic}"), format!("{p}x.{topic}"));
    wait_until("each side's records copied", Duration::from_secs(60), || {
        stored(&b, &on_b) == 60 && stored(&a, &on_a) == 40
    })
    .await;
    // Long enough for several topic refreshes and heartbeats of both flows to go round.
    tokio::time::sleep(Duration::from_secs(8)).await;
    // The flow back dropped the 60 copies of A's records it found on B.
    let labels = format!("source=\"{p}x\",target=\"{p}y\"");
    let dropped = http_get(&back.metrics, "/metrics")
        .and_then(|(_, scrape)| sample(&scrape, "strait_loop_guard_dropped_total", &labels));
    let (forth_logs, back_logs) = (forth.logs(), back.logs());
    assert!(forth.stop().success(), "{forth_logs}");
    assert!(back.stop().success(), "{back_logs}");
    assert_eq!((stored(&b, &on_b), stored(&a, &on_a)), (60, 40), "each record copied once");
    for (bootstrap, echo) in [
        (&a, format!("{p}x.{p}a.{topic}")),
        (&b, format!("{p}a.{p}x.{topic}")),
        (&a, format!("{p}x.{p}a.heartbeats")),
        (&b, format!("{p}a.{p}x.heartbeats")),
    ] {
        assert_eq!(stored(bootstrap, &echo), 0, "{echo} came back: {forth_logs}\n{back_logs}");
    }
    assert!(dropped.is_some_and(|n| n >= 60.0), "{dropped:?}: {back_logs}");
}
