//! `import-mm2` on MM2 properties files: what is carried, what is listed as dropped, errors.

use super::*;

fn props(text: &str) -> HashMap<String, String> {
    java_properties::read(text.as_bytes()).unwrap()
}

#[test]
fn mm2_properties_become_a_valid_strait_config_and_the_rest_is_listed() {
    let imported = import(&props(
        "clusters = eu, us\n\
         eu.bootstrap.servers = kafka-eu:9092\n\
         us.bootstrap.servers = kafka-us:9092\n\
         eu->us.enabled = true\n\
         us->eu.enabled = false\n\
         eu->us.topics = orders.*, payments\n\
         topics.exclude = .*\\\\.tmp\n\
         replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n\
         emit.checkpoints.interval.seconds = 20\n\
         sync.group.offsets.enabled = true\n\
         us.security.protocol = SASL_SSL\n\
         us.sasl.mechanism = SCRAM-SHA-512\n\
         us.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username=\"strait\" password=\"pw\";\n\
         tasks.max = 4\n\
         checkpoints.topic.replication.factor = 1\n\
         us.producer.linger.ms = 20\n",
    ))
    .unwrap();
    let flows = crate::config::Config::parse(&imported.toml).unwrap_or_else(|e| panic!("{e}\n{}", imported.toml));
    assert_eq!(flows.len(), 1, "{}", imported.toml);
    let flow = &flows[0];
    assert_eq!(flow.name, "eu->us");
    assert!(flow.replicates("orders.x") && flow.replicates("payments") && !flow.replicates("orders.x.tmp"));
    assert_eq!(flow.policy.remote_topic("eu", "orders"), "orders", "identity policy");
    assert_eq!(flow.checkpoints.emit_checkpoints_interval, std::time::Duration::from_secs(20));
    assert!(flow.checkpoints.sync_group_offsets);
    assert_eq!(flow.target.client.get("sasl.username").map(String::as_str), Some("strait"));
    assert_eq!(flow.target.client.get("sasl.mechanisms").map(String::as_str), Some("SCRAM-SHA-512"));
    let dropped: Vec<&str> = imported.dropped.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(dropped, ["checkpoints.topic.replication.factor", "tasks.max", "us.producer.linger.ms"]);
    assert!(imported.dropped[2].1.contains("librdkafka"), "{:?}", imported.dropped);
    assert_eq!(
        flow.writing.offset_syncs_topic_location,
        crate::config::SyncsLocation::Source,
        "MM2's default place kept"
    );
    assert_eq!(imported.notes.len(), 1, "{:?}", imported.notes);
}

/// Each flow of `imported` by name.
fn flows(imported: &Imported) -> HashMap<String, crate::config::Flow> {
    let flows = crate::config::Config::parse(&imported.toml).unwrap_or_else(|e| panic!("{e}\n{}", imported.toml));
    flows.into_iter().map(|f| (f.name.clone(), f)).collect()
}

fn dropped(imported: &Imported) -> Vec<&str> {
    imported.dropped.iter().map(|(k, _)| k.as_str()).collect()
}

#[test]
fn kafka_docs_example() {
    let imported = import(&props(include_str!("../../tests/mm2-properties/docs-example.properties"))).unwrap();
    let flows = flows(&imported);
    let mut names: Vec<&String> = flows.keys().collect();
    names.sort();
    assert_eq!(names, ["A->B", "B->A"]);
    let ab = &flows["A->B"];
    assert_eq!(ab.source.bootstrap_servers, "a1.example:9092, a2.example:9092, a3.example:9092");
    assert_eq!(ab.writing.replication_factor, 1);
    assert!(ab.replicates("anything") && !ab.replicates("B.anything"), "cycle rule");
    assert_eq!(ab.writing.offset_syncs_topic_location, crate::config::SyncsLocation::Source);
    assert_eq!(
        dropped(&imported),
        [
            "checkpoints.topic.replication.factor",
            "config.storage.replication.factor",
            "heartbeats.topic.replication.factor",
            "offset-syncs.topic.replication.factor",
            "offset.storage.replication.factor",
            "status.storage.replication.factor"
        ]
    );
}

#[test]
fn strimzi_style_with_tls_stores() {
    let imported = import(&props(include_str!("../../tests/mm2-properties/strimzi-style.properties"))).unwrap();
    let flows = flows(&imported);
    assert_eq!(flows.len(), 1);
    let f = &flows["source->target"];
    assert_eq!(f.policy.remote_topic("source", "orders.eu"), "orders.eu", "identity");
    assert!(f.replicates("orders.eu") && f.replicates("payments.x") && !f.replicates("orders-internal"));
    assert!(f.checkpoints.sync_group_offsets && f.groups.matches("billing") && !f.groups.matches("connect-x"));
    assert_eq!(f.writing.offset_syncs_topic_location, crate::config::SyncsLocation::Target);
    assert_eq!(f.checkpoints.sync_group_offsets_interval, std::time::Duration::from_secs(60));
    assert_eq!(f.reading.refresh_topics_interval, std::time::Duration::from_secs(600));
    assert_eq!(f.source.client.get("security.protocol").map(String::as_str), Some("SSL"));
    assert!(!f.source.client.contains_key("ssl.ca.location"), "a PKCS#12 truststore is not a CA file");
    let target = &f.target.client;
    assert_eq!(target.get("ssl.keystore.location").map(String::as_str), Some("/opt/kafka/user-certs/target.p12"));
    assert_eq!(target.get("ssl.ca.location").map(String::as_str), Some("/opt/kafka/cluster-ca-certs/target.crt"));
    let dropped = dropped(&imported);
    for key in [
        "source.ssl.truststore.type",
        "source.ssl.truststore.location",
        "source.ssl.truststore.password",
        "tasks.max",
        "key.converter",
        "value.converter",
    ] {
        assert!(dropped.contains(&key), "{key} listed: {dropped:?}");
    }
    assert!(imported.notes.is_empty(), "{:?}", imported.notes);
}

#[test]
fn sasl_ssl_with_several_flows() {
    let text = include_str!("../../tests/mm2-properties/sasl-ssl-several-flows.properties");
    let imported = import(&props(text)).unwrap();
    let flows = flows(&imported);
    assert_eq!(flows.len(), 3, "ap->eu is disabled");
    let (eu_us, us_eu, eu_ap) = (&flows["eu->us"], &flows["us->eu"], &flows["eu->ap"]);
    assert!(eu_us.replicates("orders") && eu_us.replicates("customers") && !eu_us.replicates("catalog"));
    assert!(us_eu.replicates("billing.x") && !us_eu.checkpoints.emit_checkpoints);
    assert!(eu_ap.replicates("catalog") && eu_ap.checkpoints.emit_checkpoints);
    assert!(matches!(eu_us.delivery(), crate::config::Delivery::ExactlyOnce { .. }), "exactly-once into us");
    assert_eq!(
        eu_us.writing.offset_syncs_topic_location,
        crate::config::SyncsLocation::Target,
        "exactly-once needs the target"
    );
    assert_eq!(eu_ap.writing.offset_syncs_topic_location, crate::config::SyncsLocation::Source);
    assert_eq!(eu_us.policy.remote_topic("eu", "orders"), "eu_orders", "separator");
    assert_eq!(eu_us.writing.offset_lag_max, 500);
    assert_eq!(eu_us.heartbeats.emit_heartbeats_interval, std::time::Duration::from_secs(5));
    assert!(eu_us.topic_configs.interval().is_none());
    for f in [eu_us, us_eu] {
        assert_eq!(f.source.client.get("sasl.username").map(String::as_str), Some("mm2"));
        assert_eq!(f.source.client.get("sasl.mechanisms").map(String::as_str), Some("SCRAM-SHA-512"));
        assert_eq!(f.source.client.get("ssl.ca.location").map(String::as_str), Some("/etc/kafka/ca.pem"));
    }
    let ap = &eu_ap.target.client;
    assert_eq!(ap.get("sasl.username").map(String::as_str), Some("mm2-ap"), "the cluster's own setting wins");
    assert_eq!(ap.get("sasl.password").map(String::as_str), Some("ap-secret"));
    assert!(dropped(&imported).is_empty(), "{:?}", imported.dropped);
}

#[test]
fn errors_name_the_key() {
    assert!(import(&props("a.bootstrap.servers = x\n")).err().unwrap().starts_with("clusters"));
    assert!(import(&props("clusters = a\n")).err().unwrap().starts_with("a.bootstrap.servers"));
    let bad = "clusters = a, b\na.bootstrap.servers = x\nb.bootstrap.servers = y\na->b.enabled = true\nreplication.policy.class = com.acme.Custom\n";
    assert!(import(&props(bad)).err().unwrap().starts_with("replication.policy.class"));
}

#[test]
fn acl_sync_is_carried() {
    let imported = import(&props(
        "clusters = eu, us\neu.bootstrap.servers = a:9092\nus.bootstrap.servers = b:9092\neu->us.enabled = true\n\
         sync.topic.acls.enabled = true\neu->us.sync.topic.acls.interval.seconds = 60\n",
    ))
    .unwrap();
    let flow = &flows(&imported)["eu->us"];
    assert_eq!(flow.topic_acls.interval(), Some(std::time::Duration::from_secs(60)), "{}", imported.toml);
    assert!(dropped(&imported).is_empty(), "{:?}", imported.dropped);
}

#[test]
fn config_provider_references_stay_references_under_strait_names() {
    let text = "clusters = eu, us\n\
        config.providers = secrets, vars, mounted\n\
        config.providers.secrets.class = org.apache.kafka.common.config.provider.FileConfigProvider\n\
        config.providers.vars.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n\
        config.providers.mounted.class = org.apache.kafka.common.config.provider.DirectoryConfigProvider\n\
        config.providers.mounted.param.allowed.paths = /mnt\n\
        eu.bootstrap.servers = ${vars:EU_BOOTSTRAP}\n\
        us.bootstrap.servers = kafka-us:9094\n\
        us.security.protocol = SASL_SSL\n\
        us.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \
            username=\"${mounted:/mnt/us:user}\" password=\"${secrets:/etc/mm2/creds.properties:us.password}\";\n\
        eu->us.enabled = true\n\
        eu->us.topics = orders-${literal}\n";
    let imported = import(&props(text)).unwrap();
    let config: toml::Table = imported.toml.parse().unwrap();
    let clusters = config["clusters"].as_array().unwrap();
    assert_eq!(clusters[0]["bootstrap_servers"].as_str(), Some("${env:EU_BOOTSTRAP}"), "{}", imported.toml);
    let us = clusters[1]["client"].as_table().unwrap();
    assert_eq!(us["sasl.username"].as_str(), Some("${directory:/mnt/us:user}"));
    assert_eq!(us["sasl.password"].as_str(), Some("${file:/etc/mm2/creds.properties:us.password}"));
    assert!(imported.toml.contains("orders-${literal}"), "not a reference: left as written");
    assert_eq!(dropped(&imported), ["config.providers.mounted.param.allowed.paths"]);
    assert!(imported.dropped[0].1.contains("take none"), "{:?}", imported.dropped);

    let vault = "clusters = a\na.bootstrap.servers = x\nconfig.providers = vault\n\
                 config.providers.vault.class = com.example.VaultConfigProvider\n";
    assert!(import(&props(vault)).err().unwrap().starts_with("config.providers.vault.class"));
}

#[test]
fn a_flow_setting_ending_in_enabled_is_not_a_flow() {
    let imported = import(&props(
        "clusters = eu, us\neu.bootstrap.servers = a:9092\nus.bootstrap.servers = b:9092\neu->us.enabled = true\n\
         eu->us.sync.group.offsets.enabled = true\neu->us.emit.heartbeats.enabled = false\n",
    ))
    .unwrap();
    let flows = flows(&imported);
    assert_eq!(flows.len(), 1, "{}", imported.toml);
    assert!(flows["eu->us"].checkpoints.sync_group_offsets && !flows["eu->us"].heartbeats.emit_heartbeats);
}

#[test]
fn booleans_ignore_case_as_kafka_does_and_a_bad_one_is_named() {
    let text = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n\
                B->A.enabled = True\nsync.group.offsets.enabled = TRUE\n";
    let imported = import(&props(text)).unwrap();
    let flows = flows(&imported);
    assert_eq!(flows.len(), 2, "{}", imported.toml);
    assert!(flows["B->A"].checkpoints.sync_group_offsets);
    let bad = text.replace("B->A.enabled = True", "B->A.enabled = yes");
    assert!(import(&props(&bad)).err().unwrap().starts_with("B->A.enabled = \"yes\""));
}
