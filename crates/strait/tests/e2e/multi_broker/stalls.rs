//! How long the healthy partitions of a topic wait behind their source while one broker of the
//! three-node cluster is out: records produced to them on and on, each flow's saved positions
//! and the source's ends sampled through the outage and the node's return, and the longest time a
//! healthy partition took to copy what its source held at a sample.
//!
//! Stalls are counted in time the machine ran: this machine has been seen to stop every process
//! at once for up to 10 s (a `sleep 1` loop in bash missing 9 ticks, its kernel counting no CPU or
//! I/O pressure), which no replicator can outrun; [`frozen_between`] takes those pauses out, and
//! each case prints how much it took.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::FutureRecord;
use strait::config::Flow;
use strait_testkit::multi::Control;

use super::node;
use crate::support::*;

/// The pauses of the whole machine seen so far: (when a 20 ms tick was due, when it came), for
/// ticks over 500 ms late. Watched from the first call on, by a thread of its own.
fn pauses() -> &'static Mutex<Vec<(Instant, Instant)>> {
    static PAUSES: OnceLock<Mutex<Vec<(Instant, Instant)>>> = OnceLock::new();
    PAUSES.get_or_init(|| {
        std::thread::spawn(|| loop {
            let due = Instant::now() + Duration::from_millis(20);
            std::thread::sleep(Duration::from_millis(20));
            let now = Instant::now();
            if now.saturating_duration_since(due) > Duration::from_millis(500) {
                pauses().lock().unwrap().push((due, now));
            }
        });
        Mutex::new(Vec::new())
    })
}

/// How long the machine stood still between `from` and `to` ([`pauses`]).
pub fn frozen_between(from: Instant, to: Instant) -> Duration {
    let pauses = pauses().lock().unwrap();
    pauses.iter().map(|&(a, b)| b.min(to).saturating_duration_since(a.max(from))).sum()
}

/// A request to the three-node cluster's control about one node.
pub type NodeRequest = fn(&Control, i32) -> std::io::Result<()>;

/// Produces to partitions `partitions`, 20 records each every 50 ms, until `stop`.
pub async fn produce_to(source: String, topic: String, partitions: std::ops::Range<i32>, stop: Arc<AtomicBool>) {
    let p = producer_with(&source, &[("acks", "all"), ("linger.ms", "5")]);
    let mut seq = 0;
    while !stop.load(Ordering::SeqCst) {
        let mut acks = Vec::new();
        for partition in partitions.clone() {
            for i in 0..20 {
                let value = format!("p{partition}-{}", seq + i);
                let record = FutureRecord::<[u8], [u8]>::to(&topic).partition(partition).payload(value.as_bytes());
                acks.push(p.send_result(record).map_err(|(e, _)| e).expect("queued"));
            }
        }
        for ack in acks {
            ack.await.expect("ack").expect("produced to the source");
        }
        seq += 20;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// librdkafka settings of the test's own readers: a request or a new connection to a node that
/// does not answer (frozen) is given up after 3 s and another node asked, so the samples measure
/// Strait's stalls, not the readers' (librdkafka's defaults wait 60 s and 30 s).
const QUICK_GIVE_UP: [(&str, &str); 2] =
    [("socket.timeout.ms", "3000"), ("socket.connection.setup.timeout.ms", "3000")];

/// The longest a sample waits for a flow's saved positions.
const POSITIONS_READ: Duration = Duration::from_secs(2);

/// A consumer of `cluster` for [`end_of`].
pub fn ends_reader(cluster: &str) -> BaseConsumer {
    let mut config = rdkafka::config::ClientConfig::new();
    config.set("bootstrap.servers", cluster).set("group.id", "strait-test-watermarks");
    for (key, value) in QUICK_GIVE_UP {
        config.set(key, value);
    }
    config.create().unwrap()
}

/// The end of `topic`/`partition` on `source`, asked again while a leader moves.
pub async fn end_of(source: &BaseConsumer, topic: &str, partition: i32) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match source.fetch_watermarks(topic, partition, Duration::from_secs(5)) {
            Ok((_, end)) => return end,
            Err(e) if Instant::now() > deadline => panic!("the end of {topic}/{partition}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// One sample: each flow's saved positions of the healthy partitions (and the ends of its remote
/// topic's) and when they were all read, then the source's end of each and when they were all read.
struct Sample {
    copied_at: Instant,
    positions: Vec<Vec<i64>>,
    remote_ends: Vec<Vec<i64>>,
    ends_at: Instant,
    ends: Vec<i64>,
}

/// The topic whose partitions `0..healthy` stay served while a node is out, and the flows
/// copying it.
pub struct Watched<'a> {
    pub source: &'a BaseConsumer,
    pub topic: &'a str,
    pub flows: &'a [(&'a str, Flow)],
    pub healthy: i32,
    /// A reader of the target and each flow's remote topic, whose ends are sampled too: what
    /// reached the target, whether or not its positions are saved (records, at-least-once, where
    /// a remote offset is a record copied).
    pub remote: Option<(&'a BaseConsumer, Vec<String>)>,
}

/// Per flow, the longest stall of a healthy partition: of its saved positions, and of its
/// remote topic's end (empty without [`Watched::remote`]).
pub struct Stalls {
    pub positions: Vec<Duration>,
    pub copies: Vec<Duration>,
}

impl Watched<'_> {
    /// A sample; a flow's positions not read within [`POSITIONS_READ`] (their topic's leader
    /// out) are taken as not moved since the `last` sample, so the samples keep their pace.
    async fn sample(&self, last: Option<&Sample>) -> Sample {
        let mut positions = Vec::new();
        for (f, (_, flow)) in self.flows.iter().enumerate() {
            let mut target = flow.target.clone();
            target.client.extend(QUICK_GIVE_UP.map(|(k, v)| (k.to_string(), v.to_string())));
            let read = tokio::time::timeout(POSITIONS_READ, strait::positions::load(&target, &flow.name)).await;
            let saved: Vec<i64> = match read {
                Ok(Ok(saved)) => {
                    let of = |p: i32| saved.get(&(self.topic.to_string(), p)).map_or(0, |s| s.next_offset);
                    (0..self.healthy).map(of).collect()
                }
                _ => last.map_or_else(|| vec![0; self.healthy as usize], |l| l.positions[f].clone()),
            };
            positions.push(saved);
        }
        let mut remote_ends = Vec::new();
        if let Some((target, remotes)) = &self.remote {
            for remote in remotes {
                let mut ends = Vec::new();
                for p in 0..self.healthy {
                    ends.push(end_of(target, remote, p).await);
                }
                remote_ends.push(ends);
            }
        }
        let copied_at = Instant::now();
        let mut ends = Vec::new();
        for p in 0..self.healthy {
            ends.push(end_of(self.source, self.topic, p).await);
        }
        Sample { copied_at, positions, remote_ends, ends_at: Instant::now(), ends }
    }

    /// Applies `fault` to node `id` for `outage`, then `heal`, sampling throughout and for 5 s
    /// after: per flow, the longest stall of a healthy partition (from when the source's ends
    /// were read to when the copy was past them; a slow reading of either is no stall).
    pub async fn outage(
        &self,
        control: &Control,
        id: i32,
        (fault, heal): (NodeRequest, NodeRequest),
        outage: Duration,
    ) -> Stalls {
        let _ = pauses();
        node(control, id, fault).await;
        let (start, mut samples) = (Instant::now(), Vec::new());
        while start.elapsed() < outage {
            samples.push(self.sample(samples.last()).await);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Sampled on while the node comes back: what the source held at the outage's last
        // samples is copied after it too.
        let healing = {
            let control = control.clone();
            tokio::spawn(async move { node(&control, id, heal).await })
        };
        let back = Instant::now();
        while !healing.is_finished() || back.elapsed() < Duration::from_secs(5) {
            samples.push(self.sample(samples.last()).await);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        healing.await.unwrap();
        let frozen = frozen_between(start, Instant::now());
        if !frozen.is_zero() {
            eprintln!(
                "node {id} out: the machine stood still {:.1} s of it, not counted as stall",
                frozen.as_secs_f64()
            );
        }
        let flows = 0..self.flows.len();
        Stalls {
            positions: flows.clone().map(|f| self.longest_stall(&samples, |s| &s.positions[f])).collect(),
            copies: match self.remote {
                Some(_) => flows.map(|f| self.longest_stall(&samples, |s| &s.remote_ends[f])).collect(),
                None => Vec::new(),
            },
        }
    }

    fn longest_stall(&self, samples: &[Sample], copied: impl Fn(&Sample) -> &Vec<i64>) -> Duration {
        let mut longest = Duration::ZERO;
        for (i, s) in samples.iter().enumerate() {
            for p in 0..self.healthy as usize {
                let caught_up = samples[i + 1..].iter().find(|later| copied(later)[p] >= s.ends[p]);
                let until = caught_up.map_or_else(|| samples.last().unwrap().copied_at, |later| later.copied_at);
                let stall = until.saturating_duration_since(s.ends_at);
                longest = longest.max(stall.saturating_sub(frozen_between(s.ends_at, until)));
            }
        }
        longest
    }
}

/// The source's end of every partition of `topics` (`partitions` each).
pub async fn ends(source: &BaseConsumer, topics: &[String], partitions: i32) -> BTreeMap<(String, i32), i64> {
    let mut ends = BTreeMap::new();
    for topic in topics {
        for p in 0..partitions {
            ends.insert((topic.clone(), p), end_of(source, topic, p).await);
        }
    }
    ends
}

/// Waits up to 120 s for `flow`'s saved positions to reach `ends`: the partitions still behind
/// then, named in a failure.
pub async fn copied_to(mode: &str, flow: &Flow, ends: &BTreeMap<(String, i32), i64>) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let saved = strait::positions::load(&flow.target, &flow.name).await.unwrap_or_default();
        let behind: Vec<&(String, i32)> = ends
            .iter()
            .filter(|(tp, end)| saved.get(*tp).is_none_or(|s| s.next_offset < **end))
            .map(|(tp, _)| tp)
            .collect();
        if behind.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{mode}: {behind:?} not copied to the end 120 s after the node came back"));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// What Strait logged that explains a stall, for a failure message: its own lines at INFO and
/// above (librdkafka's connection failures to the node that is out left aside), the last 40.
pub fn log_excerpt(logs: &str) -> String {
    let kept: Vec<&str> = logs
        .lines()
        .filter(|l| !l.contains(" DEBUG ") && !l.contains("Connect to") && !l.contains("Global error"))
        .collect();
    kept[kept.len().saturating_sub(40)..].join("\n")
}
