//! Start-up errors retrying cannot fix, through real brokers: each `strait run` stops by itself
//! within 30 s, exits 4 (a setting to change) and names the setting at fault, never retrying for ever and never
//! panicking (issue #23: a replication factor above the target's broker count was retried every
//! 15 s for ever). The shared test clusters have one broker each.

use std::time::{Duration, Instant};

use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::types::RDKafkaErrorCode;

use crate::support::*;

/// Creates `topic` on `bootstrap` with one partition, replication factor 1 and `configs`, as Strait
/// would; one that exists already is fine (the positions topic is shared by the tests).
async fn ensure_topic(bootstrap: &str, topic: &str, configs: &[(&str, &str)]) {
    let mut new = NewTopic::new(topic, 1, TopicReplication::Fixed(1));
    for (k, v) in configs {
        new = new.set(k, v);
    }
    let results = admin(bootstrap).create_topics([&new], &AdminOptions::new()).await.expect("create topics");
    match &results[0] {
        Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
        Err((t, code)) => panic!("create {t}: {code}"),
    }
}

/// How far a row's flow gets before the error: which of Strait's topics exist on the target.
#[derive(Clone, Copy)]
enum Reach {
    /// Nothing: the coordination topic is the first one created.
    Nothing,
    /// The coordination topic exists: the sink's state topics are created next.
    StateTopics,
    /// Every topic of Strait's own exists and the source topic has records: the target topic is
    /// created by the data path.
    TargetTopic,
    /// The data path's topics exist and the source topic has no record: slot 0's checkpoint
    /// task creates its topic.
    Checkpoints,
}

#[tokio::test(flavor = "multi_thread")]
async fn permanent_start_errors_stop_run_within_30_s_naming_the_setting() {
    let quiet = "emit_heartbeats = false\nemit_checkpoints = false";
    let rows: &[(&str, String, Reach, &str)] = &[
        (
            "replication factor above the target's brokers (coordination topic)",
            "replication_factor = 3".into(),
            Reach::Nothing,
            "replication_factor = 3",
        ),
        (
            "replication factor above the target's brokers (positions and offset-syncs topics)",
            "replication_factor = 2".into(),
            Reach::StateTopics,
            "replication_factor = 2",
        ),
        (
            "replication factor above the target's brokers (target topic)",
            format!("replication_factor = 3\n{quiet}"),
            Reach::TargetTopic,
            "replication_factor=3",
        ),
        (
            "replication factor above the target's brokers (checkpoints topic)",
            "replication_factor = 3\nemit_heartbeats = false".into(),
            Reach::Checkpoints,
            "replication_factor = 3",
        ),
        (
            "transaction timeout above the broker's transaction.max.timeout.ms",
            "delivery = \"exactly_once\"\ntransaction_timeout_ms = 1000000".into(),
            Reach::Nothing,
            "transaction_timeout_ms",
        ),
        (
            "session timeout below the broker's group.min.session.timeout.ms",
            "[flows.scale_out]\nenabled = true\nsession_timeout_ms = 1000".into(),
            Reach::Nothing,
            "session_timeout_ms",
        ),
    ];
    let mut failed = Vec::new();
    for (what, flow_extra, reach, names) in rows {
        let f = TopicFlow::new("starterr", 1).await;
        if !matches!(reach, Reach::Nothing) {
            ensure_topic(&f.b, &format!("strait-slots.{}.{}.internal", f.src, f.dst), &[]).await;
        }
        if matches!(reach, Reach::TargetTopic | Reach::Checkpoints) {
            let compact = [("cleanup.policy", "compact")];
            ensure_topic(&f.b, "strait-positions.internal", &compact).await;
            ensure_topic(&f.b, &format!("mm2-offset-syncs.{}.internal", f.src), &compact).await;
        }
        if matches!(reach, Reach::TargetTopic) {
            produce(&f.a, &f.topic, &[Rec::simple(0, "a"), Rec::simple(0, "b")]).await;
        }
        let started = Instant::now();
        let mut strait = Strait::start(&f.p, &f.config(flow_extra));
        while strait.is_running() && started.elapsed() < Duration::from_secs(30) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let (running, took, logs) = (strait.is_running(), started.elapsed(), strait.logs());
        let status = strait.stop();
        let problems: Vec<&str> = [
            (running, "still running after 30 s"),
            (status.code() != Some(4), "exit code not 4 (a setting to change)"),
            (!logs.contains(names), "does not name the setting"),
            (logs.contains("panicked"), "panicked"),
        ]
        .into_iter()
        .filter_map(|(bad, why)| bad.then_some(why))
        .collect();
        eprintln!("{what}: stopped after {took:?}; problems: {problems:?}");
        if !problems.is_empty() {
            failed.push(format!("{what} ({names:?}): {problems:?}\n{logs}"));
        }
    }
    assert!(failed.is_empty(), "{} of {} rows failed:\n{}", failed.len(), rows.len(), failed.join("\n\n"));
}
