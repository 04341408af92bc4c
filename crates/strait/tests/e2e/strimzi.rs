//! Strimzi's `KafkaMirrorMaker2` resource, in both API versions, imported by `strait
//! import-mm2` and run against the test clusters: each replicates its pattern's topics, with the
//! connectors' settings carried (the identity policy of the `v1` one).

use std::time::Duration;

use strait::config::Config;

use crate::support::*;

/// A `v1beta2` resource (`spec.clusters`, `mirrors[].sourceCluster`) from `src` at `a` to `dst`
/// at `b`, mirroring the topics that match `topics`.
fn v1beta2((src, a): (&str, &str), (dst, b): (&str, &str), topics: &str) -> String {
    format!(
        "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaMirrorMaker2\nmetadata:\n  name: mm2\nspec:\n  version: 4.1.0\n  \
         replicas: 1\n  connectCluster: \"{dst}\"\n  clusters:\n  - alias: \"{src}\"\n    bootstrapServers: {a}\n  \
         - alias: \"{dst}\"\n    bootstrapServers: {b}\n    config:\n      config.storage.replication.factor: -1\n  \
         mirrors:\n  - sourceCluster: \"{src}\"\n    targetCluster: \"{dst}\"\n    sourceConnector:\n      tasksMax: 2\n      \
         config:\n        replication.factor: 1\n        sync.topic.acls.enabled: \"false\"\n    checkpointConnector:\n      \
         config:\n        emit.checkpoints.interval.seconds: 1\n    topicsPattern: \"{topics}\"\n    groupsPattern: \".*\"\n"
    )
}

/// The same mirror as a `v1` resource (`spec.target`, `mirrors[].source`), with the identity
/// replication policy.
fn v1((src, a): (&str, &str), (dst, b): (&str, &str), topics: &str) -> String {
    format!(
        "apiVersion: kafka.strimzi.io/v1\nkind: KafkaMirrorMaker2\nmetadata:\n  name: mm2\nspec:\n  version: 4.1.0\n  \
         replicas: 1\n  target:\n    alias: \"{dst}\"\n    bootstrapServers: {b}\n    groupId: mm2-group\n    \
         configStorageTopic: mm2-config\n    statusStorageTopic: mm2-status\n    offsetStorageTopic: mm2-offsets\n  \
         mirrors:\n  - source:\n      alias: \"{src}\"\n      bootstrapServers: {a}\n    sourceConnector:\n      \
         config:\n        replication.policy.class: org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n    \
         topicsPattern: \"{topics}\"\n"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn resources_of_both_versions_import_and_replicate() {
    let (a, b) = (cluster(1), cluster(2));
    for (version, identity) in [("v1beta2", false), ("v1", true)] {
        let p = unique(&format!("strimzi-{version}"));
        let (src, dst) = (format!("{p}s"), format!("{p}d"));
        let (topic, other) = (format!("{p}-orders"), format!("{p}-other"));
        for t in [&topic, &other] {
            create_topic(&a, t, 2, &[]).await;
            produce(&a, t, &(0..50).map(|i| Rec::simple(i % 2, &format!("{t}-{i}"))).collect::<Vec<_>>()).await;
        }
        let pattern = format!("{p}-ord.*");
        let yaml = match version {
            "v1beta2" => v1beta2((&src, &a), (&dst, &b), &pattern),
            _ => v1((&src, &a), (&dst, &b), &pattern),
        };
        let resource = write_config(&p, "").with_extension("yaml");
        std::fs::write(&resource, yaml).unwrap();
        let out =
            std::process::Command::new(env!("CARGO_BIN_EXE_strait")).arg("import-mm2").arg(&resource).output().unwrap();
        let (toml, stderr) =
            (String::from_utf8(out.stdout).unwrap(), String::from_utf8_lossy(&out.stderr).into_owned());
        assert!(out.status.success(), "{version}: {stderr}");
        assert!(
            stderr.contains("not carried: spec.version"),
            "{version}: the resource's own fields are listed: {stderr}"
        );
        eprintln!("{version} imported as:\n{toml}");
        let flow = Config::parse(&toml).unwrap_or_else(|e| panic!("{version}: {e}\n{toml}")).remove(0);
        assert_eq!((flow.source.alias.as_str(), flow.target.alias.as_str()), (src.as_str(), dst.as_str()));

        let strait = Strait::start(&p, &toml);
        let remote = if identity { topic.clone() } else { format!("{src}.{topic}") };
        wait_until(&format!("{version}: replicated"), Duration::from_secs(60), || count(&b, &remote) == Some(50)).await;
        produce(&a, &topic, &(50..80).map(|i| Rec::simple(i % 2, &format!("{topic}-{i}"))).collect::<Vec<_>>()).await;
        wait_until(&format!("{version}: new records"), Duration::from_secs(60), || count(&b, &remote) == Some(80))
            .await;
        let not_matched = if identity { other.clone() } else { format!("{src}.{other}") };
        assert!(!topic_exists(&b, &not_matched), "{version}: a topic outside topicsPattern was copied");
        let logs = strait.logs();
        assert!(strait.stop().success(), "{logs}");
    }
}
