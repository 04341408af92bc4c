//! Strimzi resources of both API versions, written as Strimzi's documentation shows them.

use std::collections::HashMap;

use super::*;

/// The imported config as TOML, and the keys left out.
fn imported(yaml: &str) -> (toml::Table, Vec<String>) {
    let imported = import_strimzi(yaml, "/mnt/secrets").unwrap_or_else(|e| panic!("{e}"));
    (imported.toml.parse().unwrap(), imported.dropped.into_iter().map(|(k, _)| k).collect())
}

/// Each cluster's table by alias.
fn clusters(config: &toml::Table) -> HashMap<String, toml::Table> {
    let list = config["clusters"].as_array().unwrap();
    list.iter().map(|c| (c["alias"].as_str().unwrap().to_string(), c.as_table().unwrap().clone())).collect()
}

fn client<'a>(cluster: &'a toml::Table, key: &str) -> Option<&'a str> {
    cluster.get("client")?.get(key)?.as_str()
}

#[test]
fn v1beta2_with_scram_and_trusted_cas() {
    let (config, dropped) = imported(include_str!("../../../tests/mm2-strimzi/v1beta2-scram.yaml"));
    let clusters = clusters(&config);
    let (a, b) = (&clusters["cluster-a"], &clusters["cluster-b"]);
    assert_eq!(a["bootstrap_servers"].as_str(), Some("cluster-a-kafka-bootstrap:9093"));
    assert_eq!(client(a, "security.protocol"), Some("SASL_SSL"));
    assert_eq!(client(a, "sasl.mechanisms"), Some("SCRAM-SHA-512"));
    assert_eq!(client(a, "sasl.username"), Some("mm2-user-a"));
    assert_eq!(client(a, "sasl.password"), Some("${directory:/mnt/secrets/mm2-user-a:password}"));
    assert_eq!(client(a, "ssl.ca.location"), Some("/mnt/secrets/cluster-a-cluster-ca-cert/ca.crt"));
    assert_eq!(client(b, "ssl.ca.location"), Some("/mnt/secrets/cluster-b-cluster-ca-cert/ca.crt"), "pattern");
    assert_eq!(client(b, "sasl.password"), Some("${directory:/mnt/secrets/mm2-user-b:password}"));

    let flows = config["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 1);
    let flow = &flows[0];
    assert_eq!((flow["source"].as_str(), flow["target"].as_str()), (Some("cluster-a"), Some("cluster-b")));
    let topics: Vec<&str> = flow["topics"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert_eq!(topics, ["orders.*", "payments"]);
    assert_eq!(flow["topics_exclude"][0].as_str(), Some(".*[\\-\\.]internal"));
    assert_eq!(flow["replication_factor"].as_integer(), Some(3));
    assert_eq!(flow["sync_group_offsets"].as_bool(), Some(true));
    assert_eq!(flow["emit_checkpoints_interval_ms"].as_integer(), Some(20_000));
    assert_eq!(flow["scale_out"]["enabled"].as_bool(), Some(true), "2 replicas share the flow");
    for key in [
        "cluster-b.config.storage.replication.factor",
        "cluster-a->cluster-b.offset-syncs.topic.replication.factor",
        "spec.mirrors[0].sourceConnector.tasksMax",
        "spec.resources",
        "spec.version",
    ] {
        assert!(dropped.contains(&key.to_string()), "{key} listed: {dropped:?}");
    }
}

#[test]
fn v1_with_target_and_inline_sources() {
    let (config, dropped) = imported(include_str!("../../../tests/mm2-strimzi/v1-tls.yaml"));
    let clusters = clusters(&config);
    let (a, b) = (&clusters["cluster-a"], &clusters["cluster-b"]);
    assert_eq!(client(a, "security.protocol"), Some("SSL"), "mutual TLS");
    assert_eq!(client(a, "ssl.certificate.location"), Some("/mnt/secrets/mm2-user-a/user.crt"));
    assert_eq!(client(a, "ssl.key.location"), Some("/mnt/secrets/mm2-user-a/user.key"));
    assert_eq!(client(b, "security.protocol"), Some("SASL_SSL"));
    assert_eq!(client(b, "sasl.username"), Some("mm2-user-b"));
    let flow = &config["flows"].as_array().unwrap()[0];
    assert_eq!((flow["source"].as_str(), flow["target"].as_str()), (Some("cluster-a"), Some("cluster-b")));
    assert_eq!(flow["replication_policy"].as_str(), Some("identity"));
    assert_eq!(flow["groups"][0].as_str(), Some("billing.*"));
    assert!(flow.get("scale_out").is_none(), "one replica");
    for key in ["spec.target.groupId", "spec.target.configStorageTopic", "spec.mirrors[0].sourceConnector.tasksMax"] {
        assert!(dropped.contains(&key.to_string()), "{key} listed: {dropped:?}");
    }
}

#[test]
fn what_cannot_be_carried_is_named() {
    let oauth = include_str!("../../../tests/mm2-strimzi/v1-tls.yaml").replace("type: tls", "type: oauth");
    let e = import_strimzi(&oauth, SECRETS_DIR).err().unwrap();
    assert!(e.starts_with("spec.mirrors[0].source.authentication: only tls"), "{e}");
    let e =
        import_strimzi("apiVersion: kafka.strimzi.io/v1\nkind: KafkaConnect\nspec: {}\n", SECRETS_DIR).err().unwrap();
    assert!(e.contains("not a Strimzi KafkaMirrorMaker2"), "{e}");
    assert!(import_strimzi("clusters = a\n", SECRETS_DIR).err().unwrap().starts_with("not a KafkaMirrorMaker2"));
}
