use std::time::{Duration, Instant};

use crate::support::*;

/// Topics on B whose name contains `p`.
fn topics_with(bootstrap: &str, p: &str) -> Vec<String> {
    let mut v: Vec<String> = list_topics(bootstrap).into_iter().filter(|t| t.contains(p)).collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn include_exclude_naming_and_internal_topics() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("sel");
    let (s1, d1, s2, d2) = (format!("{p}s1"), format!("{p}d1"), format!("{p}s2"), format!("{p}d2"));
    let names = [
        format!("{d1}.{p}-cyc"),
        format!("{p}-keep"),
        format!("{p}-skip"),
        format!("{p}-x.internal"),
        format!("{p}-x-internal"),
        format!("{p}-y.replica"),
        format!("__{p}-hidden"),
        format!("{p}-id"),
    ];
    for t in &names {
        create_topic(&a, t, 2, &[]).await;
        produce(&a, t, &(0..20).map(|i| Rec::simple(i % 2, &format!("{t}-{i}"))).collect::<Vec<_>>()).await;
    }
    let config = format!(
        r#"
[[clusters]]
alias = "{s1}"
bootstrap_servers = "{a}"
[[clusters]]
alias = "{d1}"
bootstrap_servers = "{b}"
[[clusters]]
alias = "{s2}"
bootstrap_servers = "{a}"
[[clusters]]
alias = "{d2}"
bootstrap_servers = "{b}"

[[flows]]
source = "{s1}"
target = "{d1}"
refresh_topics_interval_ms = 1000
topics = ["{p}-(keep|skip|x.*)", "__{p}.*", "{d1}\\.{p}-cyc"]
topics_exclude = ["{p}-skip"]

[[flows]]
source = "{s2}"
target = "{d2}"
refresh_topics_interval_ms = 1000
replication_policy = "identity"
topics = ["{p}-(id|y.replica)"]
"#
    );
    let strait = Strait::start(&p, &config);
    let keep = format!("{s1}.{p}-keep");
    let id = format!("{p}-id");
    wait_until("default-named topic replicated", Duration::from_secs(60), || count(&b, &keep) == Some(20)).await;
    wait_until("identity-named topic replicated", Duration::from_secs(60), || count(&b, &id) == Some(20)).await;
    // Give the flows a few more refreshes to wrongly pick up anything else.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let logs = strait.logs();
    assert!(strait.stop().success());
    // Every topic the patterns asked for but the flow will not copy is logged once with its reason.
    for (topic, reason) in [
        (format!("{p}-skip"), "a topics_exclude pattern names it"),
        (format!("{p}-x.internal"), "an internal topic"),
        (format!("{p}-x-internal"), "an internal topic"),
        (format!("__{p}-hidden"), "an internal topic"),
        (format!("{d1}.{p}-cyc"), "it came from the target cluster"),
    ] {
        let lines: Vec<&str> = logs
            .lines()
            .filter(|l| l.contains("not replicating this topic") && l.contains(&format!("topic=\"{topic}\"")))
            .collect();
        assert_eq!(lines.len(), 1, "{topic}: logged once: {lines:?}");
        assert!(lines[0].contains(reason) && lines[0].contains("INFO"), "{topic}: {}", lines[0]);
    }
    let data_topics: Vec<String> = topics_with(&b, &p)
        .into_iter()
        .filter(|t| {
            !t.starts_with("mm2-offset-syncs.")
                && !t.starts_with("strait-slots.")
                && !t.ends_with(".heartbeats")
                && !t.ends_with(".checkpoints.internal")
        })
        .collect();
    // `-skip` is excluded by the flow, `.replica` by MM2's default excludes (flow 2 keeps them),
    // `.internal`, `-internal` and `__` topics are internal whatever the filters say.
    assert_eq!(data_topics, vec![id, keep], "only the selected topics exist on the target");
}

/// `start_from = "latest"`: a new topic's history is not copied, only what is written after the
/// flow first saw it. That start is saved at once, so a restart before any new record arrived
/// does not skip the records written while Strait was stopped; a partition added later starts at
/// earliest.
#[tokio::test(flavor = "multi_thread")]
async fn start_from_latest_skips_history_but_nothing_written_after_the_first_start() {
    let f = TopicFlow::new("latest", 2).await;
    let records = |label: &str, n: i32, partitions: i32| -> Vec<Rec> {
        (0..n).map(|i| Rec::simple(i % partitions, &format!("{label}-{i}"))).collect()
    };
    produce(&f.a, &f.topic, &records("old", 10, 2)).await;
    let config = f.config("start_from = \"latest\"");
    let flow = strait::config::Config::parse(&config).unwrap().remove(0);
    let first = Strait::start(&format!("{}-1", f.p), &config);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let saved = strait::positions::load(&flow.target, &flow.name).await.unwrap_or_default();
        if (0..2).all(|p| saved.get(&(f.topic.clone(), p)).is_some_and(|s| s.next_offset == 5)) {
            break;
        }
        assert!(Instant::now() < deadline, "start positions not saved: {saved:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(first.stop().success());
    produce(&f.a, &f.topic, &records("stopped", 4, 2)).await;
    let second = Strait::start(&format!("{}-2", f.p), &config);
    produce(&f.a, &f.topic, &records("running", 4, 2)).await;
    add_partitions(&f.a, &f.topic, 3).await;
    produce(&f.a, &f.topic, &[Rec::simple(2, "added-0"), Rec::simple(2, "added-1")]).await;
    wait_until("new records replicated", Duration::from_secs(60), || count(&f.b, &f.remote) == Some(10)).await;
    assert!(second.stop().success());
    let mut values: Vec<String> = read_all(&f.b, &f.remote, false)
        .into_values()
        .flatten()
        .map(|(_, r)| String::from_utf8(r.value.unwrap()).unwrap())
        .collect();
    values.sort();
    let mut expected: Vec<String> =
        ["stopped", "running"].iter().flat_map(|l| (0..4).map(move |i| format!("{l}-{i}"))).collect();
    expected.extend(["added-0".to_string(), "added-1".to_string()]);
    expected.sort();
    assert_eq!(values, expected, "history skipped, nothing written after the first start lost");
}

/// `--log-format json`: every line on stderr is one JSON object, tracing's fields as keys.
#[tokio::test(flavor = "multi_thread")]
async fn json_logs_are_one_object_per_line_with_fields_as_keys() {
    let f = TopicFlow::new("json", 1).await;
    produce(&f.a, &f.topic, &[Rec::simple(0, "x")]).await;
    let strait = Strait::launch(&f.p, &f.config(""), "info", &["--log-format", "json"]);
    wait_until("replicated", Duration::from_secs(60), || count(&f.b, &f.remote) == Some(1)).await;
    let logs = strait.logs();
    assert!(strait.stop().success(), "{logs}");
    let lines: Vec<serde_json::Value> =
        logs.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect();
    let started = lines.iter().find(|l| l["message"] == "flow started").expect("a flow started line");
    assert_eq!(started["level"], "INFO");
    assert_eq!(started["flow"], format!("{}->{}", f.src, f.dst));
    assert!(started["timestamp"].is_string(), "{started}");
}
