//! Helpers for tests through real brokers: the shared clusters started by `scripts/test`,
//! unique names, producing and reading records, and running the `strait` binary.
//! Shared by the `e2e` and `mm2_jvm_compat` test targets, each using a part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rdkafka::admin::AdminOptions;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

pub use strait_testkit::clients::*;

/// The shared three-broker cluster started by `scripts/test` when a `multi_broker` test is
/// selected: its bootstrap (every node) and the control of its nodes.
pub fn three_nodes() -> (String, strait_testkit::multi::Control) {
    let var = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!("{name} is not set: run the multi-broker tests with ./scripts/test, which starts the three-node cluster")
        })
    };
    let control = strait_testkit::multi::Control { addr: var("STRAIT_TEST_THREE_NODE_CONTROL") };
    (var("STRAIT_TEST_THREE_NODE_BOOTSTRAP"), control)
}

/// A fresh directory for clusters a test starts for itself (to kill or restart them).
pub fn dedicated_dir(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("strait-tests-{}", std::process::id())).join(unique(name))
}

pub fn partitions(bootstrap: &str, topic: &str) -> usize {
    let c: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    let md = c.fetch_metadata(Some(topic), Duration::from_secs(10)).unwrap();
    md.topics().iter().find(|t| t.name() == topic && t.error().is_none()).map_or(0, |t| t.partitions().len())
}

pub fn list_topics(bootstrap: &str) -> Vec<String> {
    let c: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    let md = c.fetch_metadata(None, Duration::from_secs(10)).unwrap();
    md.topics().iter().map(|t| t.name().to_string()).collect()
}

pub fn topic_exists(bootstrap: &str, topic: &str) -> bool {
    list_topics(bootstrap).iter().any(|t| t == topic)
}

/// Polls `cond` every 200 ms until true; panics with `what` after `timeout`.
pub async fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A `strait run` process, serving its metrics on `metrics` (`host:port`); killed (SIGKILL) on drop.
pub struct Strait {
    child: Child,
    pub log: PathBuf,
    pub metrics: String,
}

pub fn write_config(name: &str, toml: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("strait-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, toml).unwrap();
    path
}

impl Strait {
    pub fn start(name: &str, toml: &str) -> Self {
        let log_filter =
            std::env::var("STRAIT_TEST_RUST_LOG").unwrap_or_else(|_| "info,librdkafka=warn,rdkafka=warn".into());
        Self::start_logging(name, toml, &log_filter)
    }

    /// [`Strait::start`] with `RUST_LOG=log_filter`.
    pub fn start_logging(name: &str, toml: &str, log_filter: &str) -> Self {
        Self::launch(name, toml, log_filter, &[])
    }

    /// `strait run --config <toml> <args>` with `RUST_LOG=log_filter`, and `--metrics-addr` on a
    /// free port unless `args` give one.
    pub fn launch(name: &str, toml: &str, log_filter: &str, args: &[&str]) -> Self {
        Self::launch_with_env(name, toml, log_filter, args, &[])
    }

    /// [`Strait::launch`] with environment variables `env` set for the process.
    pub fn launch_with_env(name: &str, toml: &str, log_filter: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let given = args.iter().position(|a| *a == "--metrics-addr").and_then(|i| args.get(i + 1));
        let metrics = given.map_or_else(free_addr, |a| a.to_string());
        let mut all = args.to_vec();
        if given.is_none() {
            all.extend(["--metrics-addr", metrics.as_str()]);
        }
        let config = write_config(name, toml);
        let log = config.with_extension("log");
        let out = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_strait"))
            .arg("run")
            .arg("--config")
            .arg(&config)
            .args(&all)
            .env("RUST_LOG", log_filter)
            .envs(env.iter().copied())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn strait");
        Strait { child, log, metrics }
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Threads of the running process (`Threads:` of `/proc/<pid>/status`).
    pub fn threads(&self) -> usize {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("Threads:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// SIGTERM, then wait up to 60 s for a clean exit.
    pub fn stop(mut self) -> ExitStatus {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "strait did not stop after SIGTERM; log: {}", self.logs());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Freezes the process (SIGSTOP), as a GC or VM pause or a frozen container would.
    pub fn pause(&self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGSTOP) };
    }

    /// Lets a [`Strait::pause`]d process run again (SIGCONT).
    pub fn resume(&self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGCONT) };
    }

    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

/// A test's end stops its instances as an operator would (SIGTERM, up to 10 s, then SIGKILL):
/// a SIGKILL would leave an exactly-once flow's transaction open on the shared target, holding
/// every other test's `read_committed` reads of its state topics for up to a transaction timeout.
impl Drop for Strait {
    fn drop(&mut self) {
        // Signalled only while not reaped: a reaped pid may belong to another process by now.
        if let Ok(None) = self.child.try_wait() {
            let pid = self.child.id() as i32;
            // A paused instance (SIGSTOP) must run again to take the SIGTERM.
            unsafe {
                libc::kill(pid, libc::SIGCONT);
                libc::kill(pid, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The slots an instance owns now, from its `strait_slot_owned` series; `None` while its metrics
/// do not answer.
pub fn owned(strait: &Strait) -> Option<std::collections::BTreeSet<u32>> {
    let (_, scrape) = http_get(&strait.metrics, "/metrics")?;
    let slot = |l: &str| l.split("slot=\"").nth(1)?.split('"').next()?.parse().ok();
    Some(scrape.lines().filter(|l| l.starts_with("strait_slot_owned{") && l.ends_with(" 1")).filter_map(slot).collect())
}

/// Whether an instance runs its flow's heartbeats, checkpoints and topic config sync now
/// (`strait_control_tasks_up`); `None` while its metrics do not answer.
pub fn runs_control_tasks(strait: &Strait) -> Option<bool> {
    let (_, scrape) = http_get(&strait.metrics, "/metrics")?;
    Some(scrape.lines().any(|l| l.starts_with("strait_control_tasks_up{") && l.ends_with(" 1")))
}

/// Waits up to `timeout` for `strait` to stop by itself, asserts it exits with `code` (by the
/// error's kind, as `strait run --help` lists them: 3 denied, 4 a setting to change, 5 data loss,
/// 6 another instance runs the flow) and returns its log.
pub async fn exits_with(mut strait: Strait, code: i32, timeout: Duration) -> String {
    wait_until("strait stops by itself", timeout, || !strait.is_running()).await;
    let logs = strait.logs();
    assert_eq!(strait.stop().code(), Some(code), "exit code: {logs}");
    logs
}

/// A two-cluster config: `src` → `dst` with one flow, `flow_extra` TOML lines added to the flow,
/// and `extra` appended (e.g. a `[residency]` table).
pub fn two_cluster_config(src: (&str, &str, &str), dst: (&str, &str, &str), flow_extra: &str, extra: &str) -> String {
    format!(
        r#"
[[clusters]]
alias = "{}"
bootstrap_servers = "{}"
zones = [{}]

[[clusters]]
alias = "{}"
bootstrap_servers = "{}"
zones = [{}]

[[flows]]
source = "{}"
target = "{}"
refresh_topics_interval_ms = 1000
{flow_extra}

{extra}
"#,
        src.0, src.1, src.2, dst.0, dst.1, dst.2, src.0, dst.0
    )
}

/// A flow from shared cluster 1 (`a`) to shared cluster 2 (`b`) with unique aliases `<p>s` →
/// `<p>d`, over a fresh source topic `<p>-t` (`remote` on the target, default naming).
pub struct TopicFlow {
    pub a: String,
    pub b: String,
    pub p: String,
    pub src: String,
    pub dst: String,
    pub topic: String,
    pub remote: String,
}

impl TopicFlow {
    /// Names from `prefix`; creates the source topic with `partitions` partitions.
    pub async fn new(prefix: &str, partitions: i32) -> Self {
        Self::with_configs(prefix, partitions, &[]).await
    }

    /// [`TopicFlow::new`] with the source topic created with `configs`.
    pub async fn with_configs(prefix: &str, partitions: i32, configs: &[(&str, &str)]) -> Self {
        let (a, b, p) = (cluster(1), cluster(2), unique(prefix));
        let (src, dst, topic) = (format!("{p}s"), format!("{p}d"), format!("{p}-t"));
        create_topic(&a, &topic, partitions, configs).await;
        let remote = format!("{src}.{topic}");
        TopicFlow { a, b, p, src, dst, topic, remote }
    }

    /// The config of the flow, replicating only the topic, with `flow_extra` TOML lines.
    pub fn config(&self, flow_extra: &str) -> String {
        let settings = format!("topics = [\"{}\"]\n{flow_extra}", self.topic);
        two_cluster_config((&self.src, &self.a, ""), (&self.dst, &self.b, ""), &settings, "")
    }
}

/// Replaces every explicitly set config of `topic` with `configs` (the legacy AlterConfigs).
pub async fn replace_topic_configs(bootstrap: &str, topic: &str, configs: &[(&str, &str)]) {
    use rdkafka::admin::{AlterConfig, ResourceSpecifier};
    let mut alter = AlterConfig::new(ResourceSpecifier::Topic(topic));
    for (k, v) in configs {
        alter = alter.set(k, v);
    }
    let results = admin(bootstrap).alter_configs([&alter], &AdminOptions::new()).await.unwrap();
    for r in results {
        r.expect("configs replaced");
    }
}

/// Explicitly set configs of `topic`.
pub async fn describe_topic_configs(bootstrap: &str, topic: &str) -> BTreeMap<String, String> {
    use rdkafka::admin::{ConfigSource, ResourceSpecifier};
    let r = admin(bootstrap).describe_configs([&ResourceSpecifier::Topic(topic)], &AdminOptions::new()).await.unwrap();
    let res = r.into_iter().next().unwrap().unwrap();
    res.entries
        .into_iter()
        .filter(|e| e.source == ConfigSource::DynamicTopic)
        .filter_map(|e| Some((e.name, e.value?)))
        .collect()
}

/// Commits `offsets` (topic, partition, offset) for `group` on `bootstrap` from outside the group.
pub fn commit_group(bootstrap: &str, group: &str, offsets: &[(&str, i32, i64)]) {
    use rdkafka::consumer::CommitMode;
    let c: BaseConsumer =
        ClientConfig::new().set("bootstrap.servers", bootstrap).set("group.id", group).create().unwrap();
    let mut tpl = TopicPartitionList::new();
    for (t, p, o) in offsets {
        tpl.add_partition_offset(t, *p, Offset::Offset(*o)).unwrap();
    }
    c.commit(&tpl, CommitMode::Sync).expect("commit group offsets");
}

/// `group`'s committed offsets on `topic` partitions `0..partitions` (absent = not listed).
pub fn committed(bootstrap: &str, group: &str, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
    let c: BaseConsumer =
        ClientConfig::new().set("bootstrap.servers", bootstrap).set("group.id", group).create().unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let got = c.committed_offsets(tpl, Duration::from_secs(10)).unwrap();
    got.elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((e.partition(), o)),
            _ => None,
        })
        .collect()
}

/// Every checkpoint in `<src>.checkpoints.internal` on `bootstrap`, in topic order.
pub fn checkpoints(bootstrap: &str, src: &str) -> Vec<strait_mm2::Checkpoint> {
    let topic = strait_mm2::checkpoints_topic(src);
    if !topic_exists(bootstrap, &topic) {
        return Vec::new();
    }
    read_all(bootstrap, &topic, true)
        .remove(&0)
        .unwrap_or_default()
        .into_iter()
        .map(|(_, r)| {
            strait_mm2::Checkpoint::decode(r.key.as_deref().unwrap(), r.value.as_deref().unwrap())
                .expect("MM2 checkpoint layout")
        })
        .collect()
}

/// The newest checkpoint of (group, target-side topic, partition).
pub fn last_checkpoint(cps: &[strait_mm2::Checkpoint], group: &str, topic: &str, partition: i32) -> Option<(i64, i64)> {
    cps.iter()
        .rev()
        .find(|c| c.group == group && c.topic == topic && c.partition == partition)
        .map(|c| (c.upstream.0, c.downstream.0))
}

/// `strait translate-offsets --output json`: (target topic, partition) → (upstream, downstream).
pub fn translate_cli(config: &std::path::Path, flow: &str, group: &str) -> BTreeMap<(String, i32), (i64, Option<i64>)> {
    let out = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["translate-offsets", "--config"])
        .arg(config)
        .args(["--flow", flow, "--group", group, "--output", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "translate-offsets failed: {}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    rows.iter()
        .map(|r| {
            (
                (r["target_topic"].as_str().unwrap().to_string(), r["partition"].as_i64().unwrap() as i32),
                (r["upstream"].as_i64().unwrap(), r["downstream"].as_i64()),
            )
        })
        .collect()
}

/// Produces `per_partition` sequenced records to each of `partitions` partitions of `topic`,
/// in `chunks` rounds with `pause` between them (so Strait replicates while records arrive).
pub async fn produce_sequenced(
    bootstrap: String,
    topic: String,
    partitions: i32,
    per_partition: usize,
    chunks: usize,
    pause: Duration,
) {
    let per_chunk = per_partition.div_ceil(chunks);
    for chunk in 0..chunks {
        let seqs = chunk * per_chunk..((chunk + 1) * per_chunk).min(per_partition);
        let recs: Vec<Rec> =
            seqs.flat_map(|s| (0..partitions).map(move |p| Rec::simple(p, &format!("p{p}-{s}")))).collect();
        produce(&bootstrap, &topic, &recs).await;
        tokio::time::sleep(pause).await;
    }
}

/// What a read_committed consumer of one partition saw against sequences `0..per_partition`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// Records seen more than once (each extra copy counts).
    pub duplicated: usize,
    /// Sequences never seen.
    pub missing: usize,
    /// First copies that do not follow the previous first copy's sequence.
    pub reordered: usize,
}

/// Per partition of `remote` on `bootstrap` (read_committed), what was seen of the records of
/// [`produce_sequenced`].
pub fn sequence_report(bootstrap: &str, remote: &str, partitions: i32, per_partition: usize) -> BTreeMap<i32, Seen> {
    let all = read_all_within(bootstrap, remote, false, Duration::from_secs(300));
    (0..partitions)
        .map(|p| {
            let seqs: Vec<usize> = all
                .get(&p)
                .map(|recs| {
                    recs.iter()
                        .map(|(_, r)| {
                            let v = String::from_utf8(r.value.clone().unwrap()).unwrap();
                            let (part, seq) = v[1..].split_once('-').unwrap();
                            assert_eq!(part.parse::<i32>().unwrap(), p, "record {v} in partition {p}");
                            seq.parse().unwrap()
                        })
                        .collect()
                })
                .unwrap_or_default();
            let mut first = std::collections::BTreeSet::new();
            let (mut duplicated, mut reordered, mut previous) = (0, 0, None);
            for s in seqs {
                if !first.insert(s) {
                    duplicated += 1;
                    continue;
                }
                if previous.is_some_and(|prev| s != prev + 1) || (previous.is_none() && s != 0) {
                    reordered += 1;
                }
                previous = Some(s);
            }
            let missing = (0..per_partition).filter(|s| !first.contains(s)).count();
            (p, Seen { duplicated, missing, reordered })
        })
        .collect()
}

/// Waits until `flow`'s committed positions reach `per_partition` in every partition of `topic`.
pub async fn wait_replicated(
    flow: &strait::config::Flow,
    topic: &str,
    partitions: i32,
    per_partition: usize,
    timeout: Duration,
) {
    let deadline = Instant::now() + timeout;
    loop {
        let saved = strait::positions::load(&flow.target, &flow.name).await.unwrap_or_default();
        let done = (0..partitions)
            .all(|p| saved.get(&(topic.to_string(), p)).is_some_and(|s| s.next_offset >= per_partition as i64));
        if done {
            return;
        }
        assert!(Instant::now() < deadline, "not replicated within {timeout:?}: {saved:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// `GET path` on `addr`: (status code, body).
pub fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()))
}

/// The value of the sample `name{labels}` in a scrape, if present.
pub fn sample(scrape: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = format!("{name}{{{labels}}} ");
    scrape.lines().find_map(|l| l.strip_prefix(&prefix)).and_then(|v| v.trim().parse().ok())
}

/// A free loopback `host:port` for Strait's metrics endpoint.
pub fn free_addr() -> String {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    probe.local_addr().unwrap().to_string()
}

/// A `[[clusters]]` entry for the secure `cluster` as user `strait` with `password`.
pub fn secure_cluster_toml(alias: &str, cluster: &strait_testkit::secure::SecureCluster, password: &str) -> String {
    cluster_toml_with(alias, cluster, &cluster.client_settings("strait", password))
}

/// A `[[clusters]]` entry for `cluster`'s SASL_SSL listener with the client `settings`.
pub fn cluster_toml_with(
    alias: &str,
    cluster: &strait_testkit::secure::SecureCluster,
    settings: &[(String, String)],
) -> String {
    let mut toml = format!(
        "[[clusters]]\nalias = \"{alias}\"\nbootstrap_servers = \"{}\"\n[clusters.client]\n",
        cluster.cluster.bootstrap
    );
    for (k, v) in settings {
        toml.push_str(&format!("\"{k}\" = \"{v}\"\n"));
    }
    toml
}
