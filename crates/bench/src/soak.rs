//! `--soak MINUTES`: Strait alone replicates a fixed rate for MINUTES while consumer groups come
//! and go on the source (one new group every 10 s, each deleted a minute later, so checkpoint
//! state and per-group clients churn). Its resident memory is sampled each minute; the goal is
//! less than 10 % growth between minute 2 and the end. Writes `bench/results/soak.md` and prints
//! a last line `SOAK minutes=.. rate=.. rss_minute2_mb=.. rss_end_mb=.. growth=..%`.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use crate::contenders::{launch, Contender, Env};
use crate::load;

/// Records per second produced during the soak.
const RATE: u64 = 10_000;
const PARTITIONS: i32 = 12;

/// Resident set (MB) of a process now.
fn rss_mb(pid: u32) -> f64 {
    crate::proc_stats::memory_mb(pid, "VmRSS:")
}

/// Every 10 s a new group commits offsets on `topic` and the group made a minute before is
/// deleted, until `stop`.
fn churn_groups(bootstrap: &str, topic: &str, stop: &AtomicBool) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create().expect("admin");
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(30)));
    let mut n = 0usize;
    while !stop.load(Ordering::SeqCst) {
        let group = format!("soak-group-{n}");
        let member: BaseConsumer =
            ClientConfig::new().set("bootstrap.servers", bootstrap).set("group.id", &group).create().expect("member");
        let mut offsets = TopicPartitionList::new();
        for p in 0..PARTITIONS {
            offsets.add_partition_offset(topic, p, Offset::Offset(n as i64 * 100)).expect("offset");
        }
        if let Err(e) = member.commit(&offsets, CommitMode::Sync) {
            eprintln!("soak: commit for {group}: {e}");
        }
        drop(member);
        if n >= 6 {
            let old = format!("soak-group-{}", n - 6);
            if let Err(e) = futures::executor::block_on(admin.delete_groups(&[&old], &options)) {
                eprintln!("soak: delete {old}: {e}");
            }
        }
        n += 1;
        let next = Instant::now() + Duration::from_secs(10);
        while Instant::now() < next && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Runs the soak for `minutes` against `source` → `target`; returns the SOAK line.
pub fn run(env: &Env, source: &str, target: &str, minutes: u64, out: &Path) -> String {
    let tag = format!("soak{}", std::process::id() % 10_000);
    let topic = format!("soak-{tag}");
    load::create_topic(source, &topic, PARTITIONS, &[]);
    let running = launch(Contender::Strait, env, &tag, source, target, std::slice::from_ref(&topic));
    let pid = running.child.id();
    let stop = Arc::new(AtomicBool::new(false));
    let producer = std::thread::spawn({
        let (source, topic) = (source.to_string(), topic.clone());
        move || load::produce_at_rate(&source, &topic, RATE, Duration::from_secs(minutes * 60))
    });
    let churn = std::thread::spawn({
        let (source, topic, stop) = (source.to_string(), topic.clone(), stop.clone());
        move || churn_groups(&source, &topic, &stop)
    });
    let start = Instant::now();
    let mut samples = Vec::new();
    for minute in 1..=minutes {
        std::thread::sleep((start + Duration::from_secs(minute * 60)).saturating_duration_since(Instant::now()));
        let rss = rss_mb(pid);
        eprintln!("soak minute {minute}: RSS {rss:.1} MB");
        samples.push(rss);
    }
    stop.store(true, Ordering::SeqCst);
    let sent = producer.join().unwrap_or(0);
    let _ = churn.join();
    drop(running);
    let base = samples.get(1).copied().unwrap_or(f64::NAN);
    let end = samples.last().copied().unwrap_or(f64::NAN);
    let growth = (end - base) / base * 100.0;
    let line = format!(
        "SOAK minutes={minutes} rate={RATE} records={sent} rss_minute2_mb={base:.1} rss_end_mb={end:.1} growth={growth:.1}%"
    );
    let mut md = format!(
        "# Soak\n\nStrait (defaults, checkpoints on) replicating {RATE} records/s of 512 bytes over {PARTITIONS} \
         partitions for {minutes} minutes, while a consumer group is created on the source every 10 s and deleted \
         a minute later. RSS sampled each minute.\n\n| minute | RSS (MB) |\n|---|---|\n"
    );
    for (i, rss) in samples.iter().enumerate() {
        let _ = writeln!(md, "| {} | {rss:.1} |", i + 1);
    }
    let _ = writeln!(md, "\n`{line}` (goal: growth < 10 % between minute 2 and the end)");
    std::fs::write(out.join("soak.md"), md).expect("write soak.md");
    line
}
