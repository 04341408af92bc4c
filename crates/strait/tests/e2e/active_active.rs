use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::*;

/// Values of every record of `topic`, with how often each occurs.
fn values(bootstrap: &str, topic: &str) -> BTreeMap<Vec<u8>, usize> {
    let mut m = BTreeMap::new();
    for recs in read_all(bootstrap, topic, false).values() {
        for (_, r) in recs {
            *m.entry(r.value.clone().unwrap()).or_default() += 1;
        }
    }
    m
}

fn config(a_alias: &str, a: &str, b_alias: &str, b: &str, policy: &str, topics: &str) -> String {
    format!(
        r#"
[[clusters]]
alias = "{a_alias}"
bootstrap_servers = "{a}"
[[clusters]]
alias = "{b_alias}"
bootstrap_servers = "{b}"

[[flows]]
source = "{a_alias}"
target = "{b_alias}"
replication_policy = "{policy}"
refresh_topics_interval_ms = 1000
topics = ["{topics}"]

[[flows]]
source = "{b_alias}"
target = "{a_alias}"
replication_policy = "{policy}"
refresh_topics_interval_ms = 1000
topics = ["{topics}"]
"#
    )
}

async fn produce_on_both(a: &str, b: &str, topic: &str) -> (usize, usize) {
    create_topic(a, topic, 2, &[]).await;
    create_topic(b, topic, 2, &[]).await;
    produce(a, topic, &(0..500).map(|i| Rec::simple(i % 2, &format!("from-a-{i}"))).collect::<Vec<_>>()).await;
    produce(b, topic, &(0..300).map(|i| Rec::simple(i % 2, &format!("from-b-{i}"))).collect::<Vec<_>>()).await;
    (500, 300)
}

#[tokio::test(flavor = "multi_thread")]
async fn identity_active_active_never_echoes() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("aai");
    let topic = format!("{p}-t");
    let (na, nb) = produce_on_both(&a, &b, &topic).await;
    let strait = Strait::start(&p, &config(&format!("{p}a"), &a, &format!("{p}b"), &b, "identity", &format!("{p}-.*")));
    let total = (na + nb) as i64;
    wait_until("both sides hold both sides' records", Duration::from_secs(60), || {
        count(&a, &topic) == Some(total) && count(&b, &topic) == Some(total)
    })
    .await;
    // Several more refresh and commit cycles: an echo would show up as growth.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(strait.stop().success());
    for side in [&a, &b] {
        let v = values(side, &topic);
        assert_eq!(v.len(), na + nb, "every record present");
        assert!(v.values().all(|n| *n == 1), "every record exactly once");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn default_naming_active_active_never_echoes() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("aad");
    let (aa, ba) = (format!("{p}a"), format!("{p}b"));
    let topic = format!("{p}-t");
    let (na, nb) = produce_on_both(&a, &b, &topic).await;
    let strait = Strait::start(&p, &config(&aa, &a, &ba, &b, "default", &format!(".*{p}-.*")));
    let (on_b, on_a) = (format!("{aa}.{topic}"), format!("{ba}.{topic}"));
    wait_until("remote topics complete", Duration::from_secs(60), || {
        count(&b, &on_b) == Some(na as i64) && count(&a, &on_a) == Some(nb as i64)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(strait.stop().success());
    assert_eq!(count(&a, &topic), Some(na as i64), "A's own topic unchanged");
    assert_eq!(count(&b, &topic), Some(nb as i64), "B's own topic unchanged");
    assert!(!topic_exists(&a, &format!("{ba}.{aa}.{topic}")), "no echo back to A");
    assert!(!topic_exists(&b, &format!("{aa}.{ba}.{topic}")), "no echo back to B");
    assert!(values(&b, &on_b).values().all(|n| *n == 1));
    assert!(values(&a, &on_a).values().all(|n| *n == 1));
}

/// One config for both regions, each region's instance running its own flow
/// (`strait run --flow`): identity active/active through two processes, each record once on each
/// side, and each instance starts only the flow it was given.
#[tokio::test(flavor = "multi_thread")]
async fn one_config_serves_both_regions_with_run_flow() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("aaflow");
    let topic = format!("{p}-t");
    let (na, nb) = produce_on_both(&a, &b, &topic).await;
    let (a_alias, b_alias) = (format!("{p}a"), format!("{p}b"));
    let toml = config(&a_alias, &a, &b_alias, &b, "identity", &format!("{p}-.*"));
    let forward = format!("{a_alias}->{b_alias}");
    let reverse = format!("{b_alias}->{a_alias}");
    let log = "info,librdkafka=warn,rdkafka=warn";
    let near_b = Strait::launch(&format!("{p}-b"), &toml, log, &["--flow", &forward]);
    let near_a = Strait::launch(&format!("{p}-a"), &toml, log, &["--flow", &reverse]);
    let total = (na + nb) as i64;
    wait_until("both sides hold both sides' records", Duration::from_secs(60), || {
        count(&a, &topic) == Some(total) && count(&b, &topic) == Some(total)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    for (strait, runs, not) in [(near_b, &forward, &reverse), (near_a, &reverse, &forward)] {
        let logs = strait.logs();
        assert!(strait.stop().success(), "{logs}");
        assert!(logs.contains(&format!("flow={runs} ")), "runs {runs}: {logs}");
        assert!(!logs.contains(&format!("flow={not} ")), "never starts {not}: {logs}");
    }
    for side in [&a, &b] {
        let v = values(side, &topic);
        assert_eq!(v.len(), na + nb, "every record present");
        assert!(v.values().all(|n| *n == 1), "every record exactly once");
    }
}
