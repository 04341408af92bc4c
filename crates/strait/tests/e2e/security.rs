//! Security through real brokers: two clusters with SASL_SSL listeners (certificates made at test
//! time, SCRAM-SHA-512 users, OAUTHBEARER by unsecured JWT), the source under an authorizer that
//! grants Strait's user only Read/Describe on topics and groups and DescribeConfigs on topics.

use std::time::Duration;

use strait_testkit::oidc::TokenEndpoint;
use strait_testkit::secure::{start_secure_cluster, SecureCluster};

use crate::support::*;

const SOURCE_PASSWORD: &str = "src-pw-4b1d";
const TARGET_PASSWORD: &str = "dst-pw-9c2e";
const OIDC_SECRET: &str = "oidc-secret-7f3a";

/// Runs a config that must stop the flow by itself, denied (exit code 3); returns its log.
async fn refused(name: &str, config: &str) -> String {
    exits_with(Strait::start(name, config), 3, Duration::from_secs(30)).await
}

#[tokio::test(flavor = "multi_thread")]
async fn sasl_ssl_with_least_privilege_on_the_source() {
    let dir = std::env::temp_dir().join(format!("strait-tests-{}", std::process::id())).join(unique("secure"));
    // Started from this thread: a broker dies with the thread that started it.
    let source = start_secure_cluster(&dir.join("a"), &[("strait", SOURCE_PASSWORD)], true).expect("source cluster");
    let target = start_secure_cluster(&dir.join("b"), &[("strait", TARGET_PASSWORD)], false).expect("target cluster");
    let strait_user = ["--allow-principal", "User:strait"];
    let read_topics =
        ["--operation", "Read", "--operation", "Describe", "--operation", "DescribeConfigs", "--topic", "*"];
    source.allow(&[&strait_user[..], &read_topics].concat()).unwrap();
    source
        .allow(&[&strait_user[..], &["--operation", "Read", "--operation", "Describe", "--group", "*"]].concat())
        .unwrap();

    // Test data goes in through the brokers' internal listeners.
    let (a, b) = (source.cluster.internal.clone(), target.cluster.internal.clone());
    let p = unique("sec");
    let (src, dst, topic) = (format!("{p}s"), format!("{p}d"), format!("{p}-t"));
    create_topic(&a, &topic, 2, &[]).await;
    produce(&a, &topic, &(0..100).map(|i| Rec::simple(i % 2, &format!("r{i}"))).collect::<Vec<_>>()).await;
    commit_group(&a, &format!("{p}-app"), &[(&topic, 0, 50), (&topic, 1, 50)]);
    let clusters = |source_password: &str| {
        format!(
            "{}{}",
            secure_cluster_toml(&src, &source, source_password),
            secure_cluster_toml(&dst, &target, TARGET_PASSWORD)
        )
    };
    let flow = |extra: &str| {
        format!(
            "[[flows]]\nsource = \"{src}\"\ntarget = \"{dst}\"\ntopics = [\"{topic}\"]\ngroups = [\"{p}-.*\"]\n\
             emit_checkpoints_interval_ms = 1000\nrefresh_groups_interval_ms = 1000\n{extra}"
        )
    };
    let before: Vec<String> = list_topics(&a);

    // Replication and checkpoints with read-only rights on the source, every log line on, the
    // source's address and both passwords given by reference as a Kubernetes Secret would:
    // mounted files (`directory`), a properties file (`file`) and an environment variable.
    let secrets = dir.join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("source-bootstrap"), &source.cluster.bootstrap).unwrap();
    std::fs::write(secrets.join("target.properties"), format!("password = {TARGET_PASSWORD}\n")).unwrap();
    let by_reference = format!(
        "{}{}",
        secure_cluster_toml(&src, &source, "${env:STRAIT_TEST_SOURCE_PASSWORD}")
            .replace(&source.cluster.bootstrap, &format!("${{directory:{}:source-bootstrap}}", secrets.display())),
        secure_cluster_toml(&dst, &target, &format!("${{file:{}/target.properties:password}}", secrets.display()))
    );
    assert!(!by_reference.contains(SOURCE_PASSWORD) && !by_reference.contains(TARGET_PASSWORD));
    assert!(!by_reference.contains(&source.cluster.bootstrap));
    let env = [("STRAIT_TEST_SOURCE_PASSWORD", SOURCE_PASSWORD)];
    let strait = Strait::launch_with_env(&p, &format!("{by_reference}{}", flow("")), "trace", &[], &env);
    let remote = format!("{src}.{topic}");
    wait_until("replicated over SASL_SSL", Duration::from_secs(60), || count(&b, &remote) == Some(100)).await;
    wait_until("checkpoints written", Duration::from_secs(60), || {
        let cps = checkpoints(&b, &src);
        (0..2).all(|partition| last_checkpoint(&cps, &format!("{p}-app"), &remote, partition).is_some())
    })
    .await;
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");
    assert!(logs.contains("TRACE"), "trace logging was on");
    for secret in [SOURCE_PASSWORD, TARGET_PASSWORD] {
        assert!(!logs.contains(secret), "a password is in the log");
    }
    assert_eq!(list_topics(&a), before, "nothing created on the source");

    // `copy = "auto"` with a client setting the batch path's client does not read (a Kerberos
    // one, which librdkafka takes and SCRAM leaves unused) copies records, and says why.
    produce(&a, &topic, &(100..150).map(|i| Rec::simple(i % 2, &format!("r{i}"))).collect::<Vec<_>>()).await;
    let kerberos = clusters(SOURCE_PASSWORD).replacen(
        "[clusters.client]\n",
        "[clusters.client]\n\"sasl.kerberos.service.name\" = \"kafka\"\n",
        1,
    );
    let strait = Strait::start(&format!("{p}-auto"), &format!("{kerberos}{}", flow("copy = \"auto\"")));
    wait_until("replicated by copy = auto", Duration::from_secs(60), || count(&b, &remote) == Some(150)).await;
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");
    let why = r#"copy="records" why=copy = "auto" takes records: clusters[0].client."sasl.kerberos.service.name""#;
    assert!(logs.contains(why), "{why}: {logs}");

    // OAUTHBEARER with librdkafka's unsecured JWT, as the user the source's ACLs name: `auto`
    // copies batches, whose client makes the token for each connection.
    produce(&a, &topic, &(150..200).map(|i| Rec::simple(i % 2, &format!("r{i}"))).collect::<Vec<_>>()).await;
    let oauth = format!(
        "{}{}",
        cluster_toml_with(&src, &source, &source.oauthbearer_settings("strait")),
        cluster_toml_with(&dst, &target, &target.oauthbearer_settings("strait"))
    );
    let strait = Strait::start(&format!("{p}-oauth"), &format!("{oauth}{}", flow("copy = \"auto\"")));
    wait_until("replicated by OAUTHBEARER", Duration::from_secs(60), || count(&b, &remote) == Some(200)).await;
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");
    assert!(logs.contains(r#"copy="batches" why=copy = "auto""#), "auto took batches over OAUTHBEARER: {logs}");

    // OAUTHBEARER with tokens from an OIDC provider (the client credentials grant), for
    // librdkafka's clients and the batch path's alike: `auto` copies batches, the secret never
    // in the log.
    produce(&a, &topic, &(200..250).map(|i| Rec::simple(i % 2, &format!("r{i}"))).collect::<Vec<_>>()).await;
    // Over HTTPS, its certificate signed by a private CA (`https.ca.location`).
    let endpoint = TokenEndpoint::start("strait-client", OIDC_SECRET, "strait", Some(&source.keystore())).unwrap();
    assert!(endpoint.url.starts_with("https://"), "{}", endpoint.url);
    let client = ("strait-client", OIDC_SECRET);
    let oidc = |cluster: &SecureCluster| cluster.oidc_settings(&endpoint.url, client, Some(&source.ca));
    let oidc = format!(
        "{}{}",
        cluster_toml_with(&src, &source, &oidc(&source)),
        cluster_toml_with(&dst, &target, &oidc(&target))
    );
    let strait = Strait::start(&format!("{p}-oidc"), &format!("{oidc}{}", flow("copy = \"auto\"")));
    wait_until("replicated by OAUTHBEARER from OIDC", Duration::from_secs(60), || count(&b, &remote) == Some(250))
        .await;
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");
    assert!(logs.contains(r#"copy="batches" why=copy = "auto""#), "auto took batches over OIDC: {logs}");
    assert!(endpoint.issued() >= 2, "each client got its tokens from the endpoint: {}", endpoint.issued());
    assert!(!logs.contains(OIDC_SECRET), "the client secret is in the log");

    // A wrong password stops the flow at once, naming the cluster.
    let logs = refused(&format!("{p}-pw"), &format!("{}{}", clusters("wrong-password"), flow(""))).await;
    assert!(logs.contains(&format!("cluster {src} (")) && logs.contains("refused Strait's credentials"), "{logs}");
    assert!(!logs.contains("could not start; retrying"), "not retried: {logs}");

    // Offset syncs on the source need rights Strait does not have there: stopped at start, naming them.
    let logs = refused(
        &format!("{p}-syncs"),
        &format!("{}{}", clusters(SOURCE_PASSWORD), flow("offset_syncs_topic_location = \"source\"")),
    )
    .await;
    assert!(
        logs.contains(&format!("create topic mm2-offset-syncs.{dst}.internal on cluster {src}"))
            && logs.contains("ACLs do not allow it"),
        "{logs}"
    );
}
