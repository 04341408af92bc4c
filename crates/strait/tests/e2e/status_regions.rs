//! A region down: `strait status` with a config holding a flow whose target does not answer
//! reports every other flow on stdout and names the one it cannot read (cluster, address), with
//! exit 1 (before, it exited 1 at the first such flow with nothing on stdout); `strait failover`
//! names the cluster that does not answer, its role and address.

use std::process::Command;
use std::time::Duration;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn status_reports_every_flow_it_can_and_names_the_ones_it_cannot() {
    let (a, b) = (cluster(1), cluster(2));
    let p = unique("stregion");
    let topic = format!("{p}-t");
    create_topic(&a, &topic, 2, &[]).await;
    // A target region that is down: nothing listens there.
    let down = free_addr();
    let toml = format!(
        r#"
[[clusters]]
alias = "{p}a"
bootstrap_servers = "{a}"
[[clusters]]
alias = "{p}b"
bootstrap_servers = "{b}"
[[clusters]]
alias = "{p}c"
bootstrap_servers = "{down}"

[[flows]]
source = "{p}a"
target = "{p}c"
topics = ["{p}-.*"]

[[flows]]
source = "{p}a"
target = "{p}b"
topics = ["{p}-.*"]
"#
    );
    let path = write_config(&p, &toml);
    let out = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["status", "--output", "json", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the flows it could read, as JSON");
    let rows: Vec<(&str, &str)> = status["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["flow"].as_str().unwrap(), r["topic"].as_str().unwrap()))
        .collect();
    let healthy = format!("{p}a->{p}b");
    assert!(rows.iter().all(|(flow, _)| *flow == healthy), "only the healthy flow's rows: {rows:?}");
    assert_eq!(rows.iter().filter(|(_, t)| *t == topic).count(), 2, "both partitions of its topic: {rows:?}");
    let named = format!("flow {p}a->{p}c: target cluster {p}c at {down} does not answer");
    assert!(stderr.contains(&named), "names the flow it cannot read ({named}): {stderr}");
}

/// A planned failover whose target does not answer fails naming the target cluster, its role
/// and address. Before, it said "reading the lag of flow ... (source and target clusters)".
#[tokio::test(flavor = "multi_thread")]
async fn a_failover_whose_target_does_not_answer_names_it() {
    let f = TopicFlow::new("fotarget", 1).await;
    let down = free_addr();
    let toml =
        f.config("").replace(&format!("bootstrap_servers = \"{}\"", f.b), &format!("bootstrap_servers = \"{down}\""));
    let path = write_config(&f.p, &toml);
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["failover", "--mode", "planned", "--wait-ms", "1000", "--config"])
        .arg(&path)
        .args(["--flow", &format!("{}->{}", f.src, f.dst)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let named = format!("target cluster {} at {down}", f.dst);
    assert!(stderr.contains(&named), "names the target ({named}) after {:?}: {stderr}", started.elapsed());
}

/// A failover that finds its source down names it (cluster, address) where it turns unplanned.
/// Before, it said "the source cluster does not answer: unplanned failover" and nothing more.
#[tokio::test(flavor = "multi_thread")]
async fn a_failover_whose_source_does_not_answer_names_it() {
    let f = TopicFlow::new("fosource", 1).await;
    let down = free_addr();
    let toml =
        f.config("").replace(&format!("bootstrap_servers = \"{}\"", f.a), &format!("bootstrap_servers = \"{down}\""));
    let path = write_config(&f.p, &toml);
    let out = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["failover", "--source-timeout-ms", "2000", "--config"])
        .arg(&path)
        .args(["--flow", &format!("{}->{}", f.src, f.dst)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let named = format!("source cluster {} at {down} does not answer: unplanned failover", f.src);
    assert!(stderr.contains(&named), "names the source ({named}): {stderr}");
}

/// An unplanned failover never asks the lost source: with `offset_syncs_topic_location =
/// "source"` the offset syncs went with it, and the group moves by its newest checkpoint.
/// Before, reading those syncs failed the whole failover, blamed on the target cluster.
#[tokio::test(flavor = "multi_thread")]
async fn an_unplanned_failover_with_offset_syncs_on_the_lost_source_moves_by_checkpoints() {
    let f = TopicFlow::new("fosyncsrc", 1).await;
    let group = format!("{}-g", f.p);
    produce(&f.a, &f.topic, &(0..100).map(|i| Rec::simple(0, &format!("v{i}"))).collect::<Vec<_>>()).await;
    commit_group(&f.a, &group, &[(&f.topic, 0, 60)]);
    let settings = "offset_syncs_topic_location = \"source\"\nemit_checkpoints_interval_ms = 1000\nrefresh_groups_interval_ms = 1000";
    let strait = Strait::start(&f.p, &f.config(settings));
    let checkpoint = || last_checkpoint(&checkpoints(&f.b, &f.src), &group, &f.remote, 0);
    wait_until("a checkpoint of the group at 60", Duration::from_secs(60), || {
        checkpoint().is_some_and(|(up, _)| up == 60)
    })
    .await;
    assert!(strait.stop().success());
    let (_, downstream) = checkpoint().unwrap();
    let down = free_addr();
    let lost = f
        .config(settings)
        .replace(&format!("bootstrap_servers = \"{}\"", f.a), &format!("bootstrap_servers = \"{down}\""));
    let path = write_config(&format!("{}-lost", f.p), &lost);
    let out = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["failover", "--mode", "unplanned", "--config"])
        .arg(&path)
        .args(["--flow", &format!("{}->{}", f.src, f.dst)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(committed(&f.b, &group, &f.remote, 1).get(&0), Some(&downstream), "moved by the checkpoint: {stderr}");
}

/// With a region down, `strait status` reads the flows at once: the down cluster costs one
/// timeout (10 s), not one per flow. Before, the two flows of A took 20.8 s one after the other.
#[tokio::test(flavor = "multi_thread")]
async fn status_with_a_region_down_waits_one_timeout_for_all_its_flows() {
    let b = cluster(2);
    let p = unique("stonce");
    let down = free_addr();
    let toml = format!(
        "[[clusters]]\nalias = \"{p}a\"\nbootstrap_servers = \"{down}\"\n[[clusters]]\nalias = \"{p}b\"\n\
         bootstrap_servers = \"{b}\"\n[[flows]]\nsource = \"{p}a\"\ntarget = \"{p}b\"\n\
         [[flows]]\nsource = \"{p}b\"\ntarget = \"{p}a\"\n"
    );
    let path = write_config(&p, &toml);
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_strait")).args(["status", "--config"]).arg(&path).output().unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for named in [
        format!("flow {p}a->{p}b: source cluster {p}a at {down}"),
        format!("flow {p}b->{p}a: target cluster {p}a at {down}"),
    ] {
        assert!(stderr.contains(&named), "names {named}: {stderr}");
    }
    eprintln!("strait status with a region down took {took:?}");
    assert!(took < Duration::from_secs(16), "one timeout for both flows, took {took:?}");
}
