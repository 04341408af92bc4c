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
    assert!(import_strimzi("clusters = a\n", SECRETS_DIR).err().unwrap().starts_with("not one KafkaMirrorMaker2"));
}

#[test]
fn mm2_source_offsets_are_read_where_strimzi_keeps_them() {
    let flow = |yaml: &str| imported(yaml).0["flows"].as_array().unwrap()[0].as_table().unwrap().clone();
    let v1beta2 = flow(include_str!("../../../tests/mm2-strimzi/v1beta2-scram.yaml"));
    assert_eq!(v1beta2["mm2_offsets_topic"].as_str(), Some("mirrormaker2-cluster-offsets"), "Strimzi's default");
    let v1 = flow(include_str!("../../../tests/mm2-strimzi/v1-tls.yaml"));
    assert_eq!(v1["mm2_offsets_topic"].as_str(), Some("my-mm2-offsets"));
    assert_eq!(v1["emit_heartbeats"].as_bool(), Some(false), "v1 runs no heartbeat connector");
    let set = include_str!("../../../tests/mm2-strimzi/v1beta2-scram.yaml")
        .replace("config.storage.replication.factor: -1", "offset.storage.topic: mm2-offsets-b");
    assert_eq!(flow(&set)["mm2_offsets_topic"].as_str(), Some("mm2-offsets-b"));
}

/// The v1beta2 example with `from` replaced by `to`: its import, or why it is refused.
fn edited(from: &str, to: &str) -> Result<Imported, String> {
    let yaml = include_str!("../../../tests/mm2-strimzi/v1beta2-scram.yaml");
    assert!(yaml.contains(from), "{from}");
    import_strimzi(&yaml.replacen(from, to, 1), SECRETS_DIR)
}

#[test]
fn a_resource_strimzi_would_refuse_is_refused_naming_the_field() {
    let cases = [
        ("sourceCluster: \"cluster-a\"", "sourceCluster: \"cluster-x\"", "spec.mirrors[0].sourceCluster: cluster-x"),
        ("targetCluster: \"cluster-b\"", "targetCluster: \"cluster-y\"", "spec.mirrors[0].targetCluster: cluster-y"),
        ("connectCluster: \"cluster-b\"", "connectCluster: \"cluster-z\"", "spec.connectCluster: cluster-z"),
        ("alias: \"cluster-b\"", "alias: \"cluster-a\"", "spec.clusters[1].alias: cluster-a is declared twice"),
    ];
    for (from, to, want) in cases {
        let e = edited(from, to).err().unwrap_or_else(|| panic!("{to}: imported"));
        assert!(e.starts_with(want), "{to}: {e}");
    }
    let list = "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaMirrorMaker2List\nitems: []\n";
    assert!(import_strimzi(list, SECRETS_DIR).err().unwrap().contains("give one resource"));
}

#[test]
fn patterns_win_connectors_decide_and_every_ca_is_accounted_for() {
    let config = "        replication.factor: 3\n        topics: \"from-config.*\"\n";
    let with_topics: toml::Table = edited("        replication.factor: 3\n", config).unwrap().toml.parse().unwrap();
    assert_eq!(with_topics["flows"][0]["topics"][0].as_str(), Some("orders.*"), "topicsPattern wins, as in Strimzi");

    let no_checkpoints = edited("    checkpointConnector:\n", "    otherConnector:\n").unwrap();
    let config: toml::Table = no_checkpoints.toml.parse().unwrap();
    assert_eq!(config["flows"][0]["emit_checkpoints"].as_bool(), Some(false), "no checkpoint connector");
    let no_source = edited("    sourceConnector:\n", "    otherSourceConnector:\n").unwrap();
    assert!(!no_source.toml.contains("[[flows]]"), "{}", no_source.toml);
    assert!(no_source.dropped.iter().any(|(k, why)| k == "spec.mirrors[0]" && why.contains("no sourceConnector")));

    let two_cas = "          certificate: ca.crt\n        - secretName: other-ca\n          certificate: other.crt\n";
    let cas = edited("          certificate: ca.crt\n", two_cas).unwrap();
    assert!(cas.dropped.iter().any(|(k, _)| k == "spec.clusters[0].tls.trustedCertificates[1]"));

    let yaml = include_str!("../../../tests/mm2-strimzi/v1-tls.yaml");
    let trust =
        "      tls:\n        trustedCertificates:\n          - secretName: cluster-a-cluster-ca-cert\n            \
                 certificate: ca.crt\n      authentication:\n        type: tls\n";
    assert!(yaml.contains(trust));
    let (config, _) = imported(&yaml.replace(trust, "      authentication:\n        type: tls\n"));
    assert_eq!(client(&clusters(&config)["cluster-a"], "security.protocol"), Some("SSL"), "mutual TLS is TLS");
}
