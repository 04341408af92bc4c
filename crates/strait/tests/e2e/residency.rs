use std::time::Duration;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn restricted_topic_never_reaches_a_target_outside_its_zones() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("res");
    let customers = format!("{p}-customers");
    let orders = format!("{p}-orders");
    for t in [&customers, &orders] {
        create_topic(&a, t, 3, &[]).await;
        produce(&a, t, &(0..300).map(|i| Rec::simple(i % 3, &format!("{t}-{i}"))).collect::<Vec<_>>()).await;
    }
    // Three flows from the same source cluster under different aliases, so target names differ:
    // to a [us] target, to an [eu] target, and to an [eu] target under default-deny (second file).
    let (su, us, se, eu) = (format!("{p}su"), format!("{p}us"), format!("{p}se"), format!("{p}eu"));
    let clusters = |deny: &str| {
        format!(
            r#"
[[clusters]]
alias = "{su}"
bootstrap_servers = "{a}"
[[clusters]]
alias = "{us}"
bootstrap_servers = "{b}"
zones = ["us"]
[[clusters]]
alias = "{se}"
bootstrap_servers = "{a}"
[[clusters]]
alias = "{eu}"
bootstrap_servers = "{b}"
zones = ["eu"]

[[flows]]
source = "{su}"
target = "{us}"
refresh_topics_interval_ms = 1000
topics = ["{p}-.*"]

[[flows]]
source = "{se}"
target = "{eu}"
refresh_topics_interval_ms = 1000
topics = ["{p}-.*"]

[residency]
default = "{deny}"
[[residency.policies]]
name = "gdpr"
topics = [".*-customers"]
allow_zones = ["eu"]
"#
        )
    };
    let strait = Strait::start(&p, &clusters("allow"));
    wait_until("orders reach us", Duration::from_secs(60), || count(&b, &format!("{su}.{orders}")) == Some(300)).await;
    wait_until("orders reach eu", Duration::from_secs(60), || count(&b, &format!("{se}.{orders}")) == Some(300)).await;
    wait_until("customers reach eu", Duration::from_secs(60), || count(&b, &format!("{se}.{customers}")) == Some(300))
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!topic_exists(&b, &format!("{su}.{customers}")), "restricted topic must not be created on the [us] target");
    let logs = strait.logs();
    assert!(strait.stop().success());
    let warnings = logs.lines().filter(|l| l.contains("residency: not replicating") && l.contains(&customers)).count();
    assert_eq!(warnings, 1, "withheld topic logged once, not per record:\n{logs}");

    // Default deny: only topics a policy names may move; the [eu] target accepts customers only.
    let (su2, us2, se2, eu2) = (format!("{p}su2"), format!("{p}us2"), format!("{p}se2"), format!("{p}eu2"));
    let deny = clusters("deny").replace(&su, &su2).replace(&us, &us2).replace(&se, &se2).replace(&eu, &eu2);
    let strait = Strait::start(&format!("{p}-deny"), &deny);
    wait_until("customers reach eu under default deny", Duration::from_secs(60), || {
        count(&b, &format!("{se2}.{customers}")) == Some(300)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(strait.stop().success());
    for t in [format!("{se2}.{orders}"), format!("{su2}.{orders}"), format!("{su2}.{customers}")] {
        assert!(!topic_exists(&b, &t), "{t} must not exist under default deny");
    }
}
