//! `--at-rest-wide [--against DIR[,DIR…]] [--repeat N]`: Strait's cost at rest, nothing to copy, on a
//! narrow and a wide layout: 4 topics × 3 partitions (12) and 400 × 3 (1,200), two records in
//! every partition so the flow has replicated something and keeps positions. Each run starts a fresh
//! flow (new aliases, new target topics), waits until it has copied those records, lets it settle
//! for [`SETTLE`], then measures its CPU over [`MEASURE`] while `/metrics` is scraped every
//! [`SCRAPE`] as Prometheus would; its resident set at the end. With `--against DIR[,DIR…]` the
//! `strait` binary in each DIR (the code before a change) runs too, interleaved with this one.
//! Then `/metrics` is read [`SCRAPES`] times in a row to weigh one answer (CPU ms, the cost at rest
//! meanwhile taken off). Medians of `--repeat` runs. Prints one line per binary, this one's last:
//! `AT_REST partitions=12 cpu_pct=… ; partitions=1200 cpu_pct=… rss_mb=… metrics_lines=…
//! scrape_cpu_ms=…` (the last three of the wide layout). Each run's line on stderr also splits its
//! CPU by thread name (librdkafka's `rdk:broker…`, tokio's workers, …).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;

use crate::contenders::{launch_strait, Env};
use crate::load;
use crate::proc_stats::{cpu_seconds, memory_mb, thread_cpu_seconds};

/// Partitions of every topic.
const PARTITIONS: i32 = 3;
/// Topics of the narrow and the wide layout.
const LAYOUTS: [usize; 2] = [4, 400];
/// Topics of each layout given records: the first ones, up to this many (Strait creates a target
/// topic, and per-partition series, at a partition's first record).
const WITH_RECORDS: usize = 400;
/// Records per partition of a topic with records.
const RECORDS: usize = 2;
/// From the last record copied to the start of the measurement.
const SETTLE: Duration = Duration::from_secs(15);
/// How long the CPU at rest is measured.
const MEASURE: Duration = Duration::from_secs(30);
/// How often `/metrics` is read while measuring.
const SCRAPE: Duration = Duration::from_secs(15);

/// One measured run.
struct Rest {
    cpu_pct: f64,
    rss_mb: f64,
    metrics_lines: usize,
    /// CPU ms of one `/metrics` answer, from [`SCRAPES`] in a row after the measurement.
    scrape_cpu_ms: f64,
}

/// `/metrics` read in a row to weigh one answer.
const SCRAPES: u32 = 10;

/// The name prefix of the source topics of the layout of `topics` topics.
fn prefix(topics: usize) -> String {
    format!("rest{topics}-")
}

/// Creates `topics` of [`PARTITIONS`] partitions in one request; existing ones are kept.
fn create_topics(bootstrap: &str, topics: &[String]) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create().expect("admin");
    let new: Vec<NewTopic> = topics.iter().map(|t| NewTopic::new(t, PARTITIONS, TopicReplication::Fixed(1))).collect();
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(120)));
    for r in futures::executor::block_on(admin.create_topics(&new, &options)).expect("create topics") {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((t, e)) => panic!("create {t}: {e}"),
        }
    }
}

/// [`RECORDS`] records to every partition of the first [`WITH_RECORDS`] of `topics`.
fn produce(bootstrap: &str, topics: &[String]) {
    let p: ThreadedProducer<DefaultProducerContext> =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create().expect("producer");
    for topic in topics.iter().take(WITH_RECORDS) {
        for partition in 0..PARTITIONS {
            for i in 0..RECORDS {
                let value = format!("{topic}-{partition}-{i}");
                p.send(BaseRecord::<[u8], [u8]>::to(topic).partition(partition).payload(value.as_bytes()))
                    .map_err(|(e, _)| e)
                    .expect("produce");
            }
        }
    }
    p.flush(Duration::from_secs(60)).expect("flush");
}

/// A port free now on 127.0.0.1.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port()
}

/// Lines of the text `/metrics` at `port` answers (0 when it does not answer).
fn scrape(port: u16) -> usize {
    let mut body = String::new();
    let read = TcpStream::connect(("127.0.0.1", port)).and_then(|mut s| {
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
        s.read_to_string(&mut body)
    });
    match read {
        Ok(_) => body.split_once("\r\n\r\n").map_or(0, |(_, b)| b.lines().count()),
        Err(e) => {
            eprintln!("/metrics at {port}: {e}");
            0
        }
    }
}

/// One run of the `strait` in `bin` over `topics`: copies their records, settles, measures.
fn measure(env: &Env, bin: &Path, tag: &str, (source, target): (&str, &str), topics: &[String]) -> Rest {
    let env = Env { bin: bin.to_path_buf(), work: env.work.clone() };
    let port = free_port();
    let pattern = [format!("{}.*", prefix(topics.len()))];
    let extra = format!("\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n");
    let targets: Vec<String> = topics.iter().take(WITH_RECORDS).map(|t| format!("s{tag}.{t}")).collect();
    let expected = (targets.len() * RECORDS) as i64 * i64::from(PARTITIONS);
    let running = launch_strait(&env, tag, (source, target), &pattern, &extra);
    let pid = running.child.id();
    let dst = load::inspector(target);
    let deadline = Instant::now() + Duration::from_secs(300);
    let copied = loop {
        let got: i64 = load::counts(&dst, &targets).values().sum();
        if got >= expected || Instant::now() >= deadline {
            break got;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(copied, expected, "strait ({}) copied {copied} of {expected} records of {pattern:?}", bin.display());
    std::thread::sleep(SETTLE);
    let (before, threads_before, start) = (cpu_seconds(pid), thread_cpu_seconds(pid), Instant::now());
    let mut metrics_lines = 0;
    while start.elapsed() < MEASURE {
        metrics_lines = metrics_lines.max(scrape(port));
        std::thread::sleep(SCRAPE.min(MEASURE.saturating_sub(start.elapsed())));
    }
    let cpu_pct = (cpu_seconds(pid) - before) / start.elapsed().as_secs_f64() * 100.0;
    // Where it goes, by thread: % of a core, the largest first.
    let mut threads: Vec<(String, f64)> = thread_cpu_seconds(pid)
        .into_iter()
        .map(|(name, s)| {
            let pct = (s - threads_before.get(&name).copied().unwrap_or(0.0)) / start.elapsed().as_secs_f64() * 100.0;
            (name, pct)
        })
        .filter(|(_, pct)| *pct > 0.0)
        .collect();
    threads.sort_by(|a, b| b.1.total_cmp(&a.1));
    let threads: Vec<String> = threads.iter().map(|(name, pct)| format!("{name} {pct:.2}")).collect();
    let rss_mb = memory_mb(pid, "VmRSS:");
    let (before, start) = (cpu_seconds(pid), Instant::now());
    for _ in 0..SCRAPES {
        scrape(port);
    }
    // Less the process's cost at rest meanwhile.
    let rest = cpu_pct / 100.0 * start.elapsed().as_secs_f64();
    let scrape_cpu_ms = ((cpu_seconds(pid) - before - rest) * 1000.0 / f64::from(SCRAPES)).max(0.0);
    drop(running);
    load::delete_topics(target, &targets);
    eprintln!(
        "at rest: {} {} partitions: {cpu_pct:.2} % of a core ({}), {rss_mb:.0} MB RSS, /metrics {metrics_lines} lines, {scrape_cpu_ms:.1} CPU ms each",
        bin.display(),
        topics.len() * PARTITIONS as usize,
        threads.join(", ")
    );
    Rest { cpu_pct, rss_mb, metrics_lines, scrape_cpu_ms }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Runs the at-rest measurement of `env`'s binary (and of those in `against`, interleaved),
/// `repeat` times each; returns the lines to print, `env`'s last.
pub fn run(env: &Env, source: &str, target: &str, against: &[PathBuf], repeat: usize) -> String {
    let mut bins: Vec<(String, PathBuf)> =
        against.iter().map(|b| (format!("AT_REST_AGAINST {}", b.display()), b.clone())).collect();
    bins.push(("AT_REST".into(), env.bin.clone()));
    let mut runs: BTreeMap<(usize, usize), Vec<Rest>> = BTreeMap::new();
    for n in LAYOUTS {
        let topics: Vec<String> = (0..n).map(|t| format!("{}{t:03}", prefix(n))).collect();
        let t0 = Instant::now();
        create_topics(source, &topics);
        produce(source, &topics);
        eprintln!("at rest: {} topics × {PARTITIONS} partitions ready in {:?}", topics.len(), t0.elapsed());
        for round in 0..repeat {
            for (b, (_, bin)) in bins.iter().enumerate() {
                let tag = format!("{}r{n}x{round}b{b}", std::process::id() % 10_000);
                runs.entry((b, n)).or_default().push(measure(env, bin, &tag, (source, target), &topics));
            }
        }
    }
    let mut out = Vec::new();
    for (b, (label, _)) in bins.iter().enumerate() {
        let cpu = |n| median(runs.get(&(b, n)).map_or(Vec::new(), |r| r.iter().map(|r| r.cpu_pct).collect()));
        let wide = runs.get(&(b, LAYOUTS[1])).map_or(&[][..], Vec::as_slice);
        out.push(format!(
            "{label} partitions={} cpu_pct={:.2} ; partitions={} cpu_pct={:.2} rss_mb={:.0} metrics_lines={} scrape_cpu_ms={:.1}",
            LAYOUTS[0] * PARTITIONS as usize,
            cpu(LAYOUTS[0]),
            LAYOUTS[1] * PARTITIONS as usize,
            cpu(LAYOUTS[1]),
            median(wide.iter().map(|r| r.rss_mb).collect()),
            wide.iter().map(|r| r.metrics_lines).max().unwrap_or(0),
            median(wide.iter().map(|r| r.scrape_cpu_ms).collect()),
        ));
    }
    out.join("\n")
}
