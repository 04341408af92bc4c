//! Mixed copy kinds across separate deployments (issue 45): an identity record flow A→B run by
//! one strait and an identity batch flow B→A run by another would echo each other's records (a
//! batch carries no provenance header; a record flow's producer ids are not registered). Each
//! leaves a mark in `strait-producer-ids.internal` on its target; whichever starts second reads
//! the other's and refuses (exit 4), naming it, and a clean stop clears a mark.

use std::time::Duration;

use crate::batches_active_active::{held, write_rounds};
use crate::support::*;

/// One deployment's config: clusters `{p}a` and `{p}b`, one identity flow `source`→`target`.
fn deployment(p: &str, (a, b): (&str, &str), (source, target): (&str, &str), copy: &str, topic: &str) -> String {
    format!(
        "[[clusters]]\nalias = \"{p}a\"\nbootstrap_servers = \"{a}\"\n[[clusters]]\nalias = \"{p}b\"\nbootstrap_servers = \"{b}\"\n\
         [[flows]]\nsource = \"{p}{source}\"\ntarget = \"{p}{target}\"\nreplication_policy = \"identity\"\ncopy = \"{copy}\"\n\
         refresh_topics_interval_ms = 1000\nemit_checkpoints = false\ntopics = [\"{topic}\"]\n"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_record_flow_and_a_batch_flow_back_in_separate_deployments_refuse_each_other() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("marks");
    let topic = format!("{p}-t");
    create_topic(&a, &topic, 2, &[]).await;
    create_topic(&b, &topic, 2, &[]).await;
    let records = deployment(&p, (&a, &b), ("a", "b"), "records", &topic);
    let batches = deployment(&p, (&a, &b), ("b", "a"), "batches", &topic);

    // The record flow runs first: the batch flow back refuses to start, naming it.
    let first = Strait::start(&format!("{p}r"), &records);
    write_rounds(&[(&a, "a")], &topic, 1, 10).await;
    wait_until("the record flow copies A's records", Duration::from_secs(60), || held(&b, &topic) >= 10).await;
    let logs = exits_with(Strait::start(&format!("{p}x"), &batches), 4, Duration::from_secs(60)).await;
    let named = format!("flow {p}a->{p}b (on {p}b: its mark in strait-producer-ids.internal was written");
    assert!(logs.contains(&format!("flow {p}b->{p}a copies batches")) && logs.contains(&named), "{logs}");
    assert!(logs.contains(&format!("copies records back under it, and both take topic {topic}")), "{logs}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(held(&a, &topic), 10, "nothing came back to A");
    // The refused flow left no mark behind: the record flow starts again at once.
    assert!(first.stop().success());
    let first = Strait::start(&format!("{p}r"), &records);
    wait_until("the record flow runs again", Duration::from_secs(60), || {
        first.logs().matches(&format!("flow started flow={p}a->{p}b")).count() >= 2
    })
    .await;
    assert!(!first.logs().contains("copies batches back"), "{}", first.logs());

    // A clean stop clears the record flow's mark: the batch flow starts, and now the record flow
    // refuses in turn.
    assert!(first.stop().success());
    let second = Strait::start(&format!("{p}y"), &batches);
    write_rounds(&[(&b, "b")], &topic, 1, 10).await;
    wait_until("the batch flow copies B's records", Duration::from_secs(60), || held(&a, &topic) >= 20).await;
    let logs = exits_with(Strait::start(&format!("{p}z"), &records), 4, Duration::from_secs(60)).await;
    assert!(
        logs.contains(&format!("flow {p}a->{p}b copies records")) && logs.contains("copies batches back"),
        "{logs}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let logs = second.logs();
    assert!(second.stop().success(), "{logs}");
    assert_eq!((held(&a, &topic), held(&b, &topic)), (20, 20), "each cluster holds each record once: {logs}");
}
