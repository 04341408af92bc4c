//! Replication policies, internal topics and default lists.

use strait_mm2::policy::ReplicationPolicy;
use strait_mm2::{
    checkpoints_topic, is_internal_topic, offset_syncs_topic, CONFIG_PROPERTIES_EXCLUDE, DEFAULT_GROUPS_EXCLUDE,
    DEFAULT_TOPICS_EXCLUDE, HEARTBEATS_TOPIC,
};

fn default_policy() -> ReplicationPolicy {
    ReplicationPolicy::default()
}

fn underscore() -> ReplicationPolicy {
    ReplicationPolicy::Default { separator: "_".into() }
}

fn identity() -> ReplicationPolicy {
    ReplicationPolicy::identity()
}

#[test]
fn constructors_and_separator() {
    assert_eq!(default_policy(), ReplicationPolicy::Default { separator: ".".into() });
    assert_eq!(identity(), ReplicationPolicy::Identity { separator: ".".into() });
    assert_eq!(default_policy().separator(), ".");
    assert_eq!(underscore().separator(), "_");
}

#[test]
fn remote_topic_table() {
    let cases = [
        (default_policy(), "us", "orders", "us.orders"),
        (default_policy(), "eu", "us.orders", "eu.us.orders"),
        (default_policy(), "us", "heartbeats", "us.heartbeats"),
        (underscore(), "us", "orders", "us_orders"),
        (underscore(), "eu", "us_orders", "eu_us_orders"),
        (identity(), "us", "orders", "orders"),
        (identity(), "us", "us.orders", "us.orders"),
        (identity(), "us", "heartbeats", "us.heartbeats"),
        (identity(), "eu", "us.heartbeats", "eu.us.heartbeats"),
        // MM2 `looksLikeHeartbeat` is a plain suffix test.
        (identity(), "us", "myheartbeats", "us.myheartbeats"),
        (ReplicationPolicy::Identity { separator: "_".into() }, "us", "heartbeats", "us_heartbeats"),
    ];
    for (policy, alias, topic, want) in cases {
        assert_eq!(policy.remote_topic(alias, topic), want, "{policy:?} {alias} {topic}");
    }
}

#[test]
fn topic_source_upstream_original_table() {
    // (policy, topic, topic_source, upstream_topic, original_topic)
    type Row = (ReplicationPolicy, &'static str, Option<&'static str>, Option<&'static str>, &'static str);
    let cases: Vec<Row> = vec![
        (default_policy(), "orders", None, None, "orders"),
        (default_policy(), "us.orders", Some("us"), Some("orders"), "orders"),
        (default_policy(), "a.b.t", Some("a"), Some("b.t"), "t"),
        (default_policy(), "eu.us.heartbeats", Some("eu"), Some("us.heartbeats"), "heartbeats"),
        (default_policy(), "us_orders", None, None, "us_orders"),
        // Java String.split semantics: trailing empty pieces do not count.
        (default_policy(), "us.", None, None, "us."),
        (default_policy(), "us..", None, None, "us.."),
        (default_policy(), ".", None, None, "."),
        (default_policy(), "", None, None, ""),
        (default_policy(), ".t", Some(""), Some("t"), "t"),
        (default_policy(), "a..t", Some("a"), Some(".t"), "t"),
        (underscore(), "a_b_t", Some("a"), Some("b_t"), "t"),
        (underscore(), "a.b.t", None, None, "a.b.t"),
        (identity(), "orders", None, None, "orders"),
        (identity(), "us.orders", None, None, "us.orders"),
        (identity(), "heartbeats", None, None, "heartbeats"),
        (identity(), "us.heartbeats", Some("us"), Some("heartbeats"), "heartbeats"),
        (identity(), "eu.us.heartbeats", Some("eu"), Some("us.heartbeats"), "heartbeats"),
        (ReplicationPolicy::Default { separator: String::new() }, "us.orders", None, None, "us.orders"),
    ];
    for (policy, topic, source, upstream, original) in cases {
        let ctx = format!("{policy:?} {topic:?}");
        assert_eq!(policy.topic_source(topic).as_deref(), source, "source {ctx}");
        assert_eq!(policy.upstream_topic(topic).as_deref(), upstream, "upstream {ctx}");
        assert_eq!(policy.original_topic(topic), original, "original {ctx}");
    }
}

#[test]
fn heartbeats_topic_table() {
    let cases = [
        (default_policy(), "heartbeats", true),
        (default_policy(), "us.heartbeats", true),
        (default_policy(), "eu.us.heartbeats", true),
        (default_policy(), "us.heartbeats.x", false),
        (default_policy(), "myheartbeats", false),
        (default_policy(), "orders", false),
        (underscore(), "us_heartbeats", true),
        (underscore(), "us.heartbeats", false),
        (identity(), "heartbeats", true),
        (identity(), "us.heartbeats", true),
        (identity(), "orders", false),
    ];
    assert_eq!(HEARTBEATS_TOPIC, "heartbeats");
    for (policy, topic, want) in cases {
        assert_eq!(policy.is_heartbeats_topic(topic), want, "{policy:?} {topic}");
    }
}

#[test]
fn is_cycle_table() {
    // (policy, topic, target alias, cycle?)
    let cases = [
        (default_policy(), "orders", "us", false),
        (default_policy(), "us.orders", "us", true),
        (default_policy(), "us.orders", "eu", false),
        (default_policy(), "eu.us.orders", "us", true),
        (default_policy(), "eu.us.orders", "eu", true),
        (default_policy(), "eu.us.orders", "ap", false),
        (default_policy(), "ap.eu.us.orders", "us", true),
        (default_policy(), "us.heartbeats", "us", true),
        (default_policy(), "us_orders", "us", false),
        (underscore(), "eu_us_orders", "us", true),
        (underscore(), "eu_us_orders", "ap", false),
        (underscore(), "eu.us.orders", "us", false),
        // Identity: only heartbeats carry provenance in their names.
        (identity(), "us.orders", "us", false),
        (identity(), "orders", "us", false),
        (identity(), "eu.us.heartbeats", "us", true),
        (identity(), "eu.us.heartbeats", "ap", false),
    ];
    for (policy, topic, target, want) in cases {
        assert_eq!(policy.is_cycle(topic, target), want, "{policy:?} {topic} -> {target}");
    }
}

#[test]
fn rename_for_checkpoint_table() {
    // (policy, source topic, source alias, target alias, checkpoint topic)
    let cases = [
        (default_policy(), "orders", "us", "eu", "us.orders"),
        (default_policy(), "eu.orders", "us", "eu", "orders"),
        (default_policy(), "ap.orders", "us", "eu", "us.ap.orders"),
        (underscore(), "orders", "us", "eu", "us_orders"),
        (identity(), "orders", "us", "eu", "orders"),
    ];
    for (policy, topic, source, target, want) in cases {
        assert_eq!(policy.rename_for_checkpoint(topic, source, target), want, "{policy:?} {topic}");
    }
}

#[test]
fn internal_topic_names() {
    assert_eq!(offset_syncs_topic("eu-west"), "mm2-offset-syncs.eu-west.internal");
    assert_eq!(checkpoints_topic("us-east"), "us-east.checkpoints.internal");
    assert_eq!(default_policy().offset_syncs_topic("eu"), offset_syncs_topic("eu"));
    assert_eq!(default_policy().checkpoints_topic("us"), checkpoints_topic("us"));
    assert_eq!(identity().checkpoints_topic("us"), checkpoints_topic("us"));
    assert_eq!(underscore().offset_syncs_topic("eu"), "mm2-offset-syncs_eu_internal");
    assert_eq!(underscore().checkpoints_topic("us"), "us_checkpoints_internal");
    assert!(default_policy().is_checkpoints_topic("us.checkpoints.internal"));
    assert!(!default_policy().is_checkpoints_topic("us_checkpoints_internal"));
    assert!(underscore().is_checkpoints_topic("us_checkpoints_internal"));
}

#[test]
fn internal_topic_table() {
    let cases = [
        ("mm2-offset-syncs.eu.internal", true),
        ("us.checkpoints.internal", true),
        ("connect-offsets-internal", true),
        ("mm2-configs.us.internal", true),
        ("__consumer_offsets", true),
        ("__transaction_state", true),
        (".hidden", true),
        ("orders", false),
        ("us.orders", false),
        ("heartbeats", false),
        ("us.heartbeats", false),
        ("internal", false),
        ("orders_internal", false),
        ("_single_underscore", false),
        ("orders.internal.backup", false),
    ];
    for (topic, want) in cases {
        assert_eq!(is_internal_topic(topic), want, "{topic}");
        assert_eq!(default_policy().is_internal_topic(topic), want, "policy {topic}");
    }
    assert!(underscore().is_internal_topic("mm2-offset-syncs_eu_internal"));
    assert!(underscore().is_internal_topic("us_checkpoints_internal"));
    assert!(!underscore().is_internal_topic("us_orders"));
}

#[test]
fn default_lists() {
    assert_eq!(DEFAULT_TOPICS_EXCLUDE, [".*[\\-\\.]internal", ".*\\.replica", "__.*"]);
    assert_eq!(DEFAULT_GROUPS_EXCLUDE, ["console-consumer-.*", "connect-.*", "__.*"]);
    assert_eq!(
        CONFIG_PROPERTIES_EXCLUDE,
        [
            "follower.replication.throttled.replicas",
            "leader.replication.throttled.replicas",
            "message.timestamp.difference.max.ms",
            "message.timestamp.type",
            "unclean.leader.election.enable",
            "min.insync.replicas",
        ]
    );
}
