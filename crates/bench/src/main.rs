//! `strait-bench [--quick]`: Strait, MirrorMaker 2 (default and tuned) and a raw consume→produce
//! pipe, side by side on the same two real Kafka clusters, in one run.
//!
//! Workloads: (a) catch-up of preloaded records of 512 bytes over 12 partitions in 2 topics,
//! uncompressed; (b) the same with lz4, then zstd on the source (`--codecs` picks); (c) steady state at a fixed rate, measuring
//! end-to-end latency; (d) catch-ups over 240, 1,200 and 5,000 partitions against
//! `raw-pipe+header` ([`wide`]; `--quick` leaves out 5,000); (e) one instance owning every slot
//! against the same flow ([`scale_out::versus_flow`]); (f) the catch-ups across a long link
//! ([`wan`]). Each catch-up run checks that the target holds every record, per partition. Writes
//! `bench/results/latest.md` and `latest.png`, and prints a last line `RATIO strait/mm2 ...`
//! extended with `wide`, `scale_out`, `eos_visible_p99_ms` and `wan`. Each catch-up is run `--repeat N` times (default 3; 1 with `--quick`),
//! contenders interleaved, and the median run is reported.
//! `--only strait,raw-pipe` runs a subset of contenders (the report then lacks missing ratios).
//! `--catch-up-only` runs only the catch-ups (uncompressed, or `--codecs none,lz4,zstd`) and
//! prints each contender's median, and
//! `--steady-only` only the steady state and prints its latencies (visible too); neither writes a report (they
//! compare a change quickly). `--partitions N` sets the catch-up topics' partitions (each of 2
//! topics; default 6), to compare a change on a wide layout. `--soak MINUTES` runs only the
//! memory soak ([`soak`]); `--scale-out` only the 1/2/3-instance catch-ups ([`scale_out`]);
//! `--scale-out-vs-flow` one instance owning every slot against the flow without scale-out;
//! `--wan` only the catch-ups across an emulated long link ([`wan`]); `--wide` only the wide
//! catch-ups ([`wide`]);
//! `--at-rest-wide` only the CPU at rest with 12 and 1,200 partitions ([`at_rest`]).

mod at_rest;
mod catch_up;
mod contenders;
mod link;
mod load;
mod proc_stats;
mod report;
mod scale_out;
mod soak;
mod wan;
mod wide;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use catch_up::CatchUp;
use contenders::{launch, Contender, Env};
use proc_stats::{cpu_seconds, peak_rss_mb};
use report::{Latency, Results};

/// How long the steady-state rate runs before its latencies count: the replicator goes from idle
/// to the rate meanwhile (reported apart, as `ramp_p99_ms`).
pub(crate) const RAMP: Duration = Duration::from_secs(5);

/// After the steady-state rate stops, how long a replicator settles (last commits, acks) before
/// its CPU at rest is measured.
pub(crate) const SETTLE: Duration = Duration::from_secs(3);

/// How long a settled replicator's CPU is measured with nothing to copy: its cost at rest.
pub(crate) const IDLE: Duration = Duration::from_secs(10);

pub(crate) struct Bench {
    env: Env,
    /// Where the bench sets up and counts (a far cluster's internal listener, no link between).
    source: String,
    target: String,
    /// Where the contenders connect: the same clusters, across the long link when one is far.
    clients: (String, String),
    runs: usize,
}

impl Bench {
    fn tag(&mut self) -> String {
        self.runs += 1;
        format!("{}x{}", std::process::id() % 10_000, self.runs)
    }

    /// Replicates the preloaded `topics` with `contender` and measures the catch-up.
    pub(crate) fn catch_up(
        &mut self,
        contender: Contender,
        workload: &str,
        topics: &[String],
        partitions: i32,
    ) -> CatchUp {
        let tag = self.tag();
        let targets: Vec<String> = topics.iter().map(|t| contender.target_topic(&tag, t)).collect();
        if matches!(contender, Contender::Raw | Contender::RawHeader | Contender::BatchPipe | Contender::Mm2Eos) {
            for t in &targets {
                load::create_topic(&self.target, t, partitions, &[]);
            }
        }
        let src = load::inspector(&self.source);
        let expected = load::counts(&src, topics);
        let total: i64 = expected.values().sum();
        let dst = load::inspector(&self.target);
        let started = Instant::now();
        let running = launch(contender, &self.env, &tag, &self.clients.0, &self.clients.1, topics);
        let pid = running.child.id();
        let mut first = None;
        let deadline = started + Duration::from_secs(1200);
        let mut got = 0;
        // Replicated records per (target topic, partition). Transaction markers count in the
        // watermarks, so exactly-once contenders are counted as a read_committed consumer sees them.
        let mut counter = (contender == Contender::Mm2Eos).then(|| load::CommittedCounter::new(&self.target, &targets));
        let mut replicated = |dst: &rdkafka::consumer::BaseConsumer| match (contender, counter.as_mut()) {
            (Contender::StraitEos | Contender::StraitBatchesEos, _) => {
                load::committed_positions(&self.target, &format!("s{tag}->t{tag}"))
                    .into_iter()
                    .map(|((t, p), n)| ((contender.target_topic(&tag, &t), p), n))
                    // Not the source's `heartbeats` (always replicated; MM2 writes one there).
                    .filter(|((t, _), _)| targets.contains(t))
                    .collect()
            }
            (_, Some(counter)) => counter.poll(Duration::from_millis(500)).clone(),
            _ => load::counts(dst, &targets),
        };
        let exactly_once = matches!(contender, Contender::StraitEos | Contender::StraitBatchesEos | Contender::Mm2Eos);
        while Instant::now() < deadline {
            // The copy starts with the first record appended. An exactly-once contender's records
            // count only once committed, and reading its positions takes up to seconds: until its
            // first record, only the target's watermarks are read (read first, they put the start
            // up to one such read late: a quick catch-up once came out at 540 billion records/s).
            if first.is_none() && exactly_once {
                if load::counts(&dst, &targets).values().sum::<i64>() == 0 {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
                first = Some(Instant::now());
            }
            got = replicated(&dst).values().sum::<i64>();
            if first.is_none() && got > 0 {
                first = Some(Instant::now());
            }
            if got >= total {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let done = Instant::now();
        let (cpu, rss) = (cpu_seconds(pid), peak_rss_mb(pid));
        let per_partition = replicated(&dst);
        let on_disk =
            load::bytes_on_disk(&self.target, &targets) as f64 / load::bytes_on_disk(&self.source, topics) as f64;
        let complete =
            expected.iter().all(|((t, p), n)| per_partition.get(&(contender.target_topic(&tag, t), *p)) == Some(n));
        drop(running);
        load::delete_topics(&self.target, &targets);
        let seconds = first.map_or(f64::NAN, |f| (done - f).as_secs_f64());
        let from_launch_seconds = (done - started).as_secs_f64();
        let result = CatchUp {
            contender: contender.name().into(),
            workload: workload.into(),
            records: total,
            seconds,
            from_launch_seconds,
            cpu_seconds: cpu,
            peak_rss_mb: rss,
            complete,
            target_bytes_per_source_byte: on_disk,
            link_bytes_per_source_byte: f64::NAN,
            all_records_per_s: Vec::new(),
        };
        eprintln!(
            "{} {}: {:.0} records/s, {:.1} CPU s, {:.0} MB peak RSS, {on_disk:.2} target bytes per source byte, complete {} (target had {got})",
            result.contender,
            result.workload,
            result.records_per_s(),
            cpu,
            rss,
            complete
        );
        result
    }

    /// Steady state: a fixed-rate producer while `contender` replicates; latency percentiles of
    /// the records sent after the first [`RAMP`], and the p99 of those sent during it.
    fn latency(&mut self, contender: Contender, rate: u64, duration: Duration) -> Latency {
        let tag = self.tag();
        let topic = format!("lat-{tag}");
        load::create_topic(&self.source, &topic, 6, &[]);
        let target = contender.target_topic(&tag, &topic);
        load::create_topic(&self.target, &target, 6, &[("message.timestamp.type", "LogAppendTime")]);
        let (source_at, target_at) = &self.clients;
        let running = launch(contender, &self.env, &tag, source_at, target_at, std::slice::from_ref(&topic));
        let pid = running.child.id();
        // Warm-up: wait until the contender replicates a first record.
        let dst = load::inspector(&self.target);
        let warmup = load::produce_at_rate(&self.source, &topic, 100, Duration::from_millis(100));
        let until = Instant::now() + Duration::from_secs(120);
        while load::counts(&dst, std::slice::from_ref(&target)).values().sum::<i64>() < warmup as i64
            && Instant::now() < until
        {
            std::thread::sleep(Duration::from_millis(100));
        }
        // The rate starts from idle: records sent in the first RAMP are reported apart, since
        // a steady state is what follows.
        let expected = (rate as f64 * (RAMP + duration).as_secs_f64()) as usize;
        let tail =
            load::visible_latencies(&self.target, &target, warmup + expected, duration + Duration::from_secs(120));
        let steady_from = load::now_ms() + RAMP.as_millis() as i64;
        let sent = load::produce_at_rate(&self.source, &topic, rate, RAMP + duration);
        let appended = load::latencies(&self.target, &target, warmup + sent);
        let visible = tail.join().unwrap_or_default();
        let rss = peak_rss_mb(pid);
        std::thread::sleep(SETTLE);
        let cpu_before = cpu_seconds(pid);
        std::thread::sleep(IDLE);
        let idle_cpu_pct = (cpu_seconds(pid) - cpu_before) / IDLE.as_secs_f64() * 100.0;
        drop(running);
        load::delete_topics(&self.target, std::slice::from_ref(&target));
        let ramp_start = steady_from - RAMP.as_millis() as i64;
        let split = |l: &[(i64, i64)], from: i64, to: i64| {
            let mut out: Vec<i64> = l.iter().filter(|(s, _)| (from..to).contains(s)).map(|(_, l)| *l).collect();
            out.sort_unstable();
            out
        };
        let (lat, visible, ramp) = (
            split(&appended, steady_from, i64::MAX),
            split(&visible, steady_from, i64::MAX),
            split(&appended, ramp_start, steady_from),
        );
        let pct = |l: &[i64], q: f64| l.get(((l.len() as f64 - 1.0) * q) as usize).copied().unwrap_or(-1);
        let result = Latency {
            contender: contender.name().into(),
            rate,
            records: lat.len(),
            p50_ms: pct(&lat, 0.5),
            p99_ms: pct(&lat, 0.99),
            max_ms: lat.last().copied().unwrap_or(-1),
            visible_p50_ms: pct(&visible, 0.5),
            visible_p99_ms: pct(&visible, 0.99),
            ramp_p99_ms: pct(&ramp, 0.99),
            peak_rss_mb: rss,
            idle_cpu_pct,
        };
        eprintln!("{result:?}");
        result
    }
}

/// The value after `flag` in `args`, if the flag is there.
fn flag<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.windows(2).find(|w| w[0] == flag).map(|w| w[1].as_str())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only: Vec<String> =
        flag(&args, "--only").map(|v| v.split(',').map(str::to_string).collect()).unwrap_or_default();
    let repeat: usize =
        flag(&args, "--repeat").and_then(|v| v.parse().ok()).unwrap_or(if quick { 1 } else { 3 }).max(1);
    let soak_minutes: Option<u64> = flag(&args, "--soak").map(|v| {
        v.parse().ok().filter(|m| *m >= 2).unwrap_or_else(|| panic!("--soak takes whole minutes, at least 2"))
    });
    let partitions: i32 = flag(&args, "--partitions")
        .map(|v| v.parse().ok().filter(|n| *n > 0).unwrap_or_else(|| panic!("--partitions takes a count")))
        .unwrap_or(6);
    let contenders: Vec<Contender> = if only.is_empty() {
        Contender::LOOPBACK.to_vec()
    } else {
        Contender::ALL.into_iter().filter(|c| only.iter().any(|o| o == c.name())).collect()
    };
    let root = strait_testkit::repo_root();
    let work = root.join(".cache/bench");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("work dir");
    let env = Env {
        bin: PathBuf::from(
            std::env::var("STRAIT_BENCH_BIN").unwrap_or_else(|_| root.join("target/release").display().to_string()),
        ),
        work: work.clone(),
    };
    let out = root.join("bench/results");
    std::fs::create_dir_all(&out).expect("results dir");
    if args.iter().any(|a| a == "--wan") {
        let records = if quick { 200_000 } else { 600_000 };
        let contenders: Vec<Contender> = if only.is_empty() { wan::CONTENDERS.to_vec() } else { contenders };
        println!("{}", wan::run(env, &contenders, records, repeat, &out));
        return;
    }
    let clusters = strait_testkit::start_clusters(2, &work.join("clusters")).expect("start Kafka clusters");
    let mut bench = Bench {
        env,
        source: clusters[0].bootstrap.clone(),
        target: clusters[1].bootstrap.clone(),
        clients: (clusters[0].bootstrap.clone(), clusters[1].bootstrap.clone()),
        runs: 0,
    };
    if let Some(minutes) = soak_minutes {
        println!("{}", soak::run(&bench.env, &bench.source, &bench.target, minutes, &out));
        return;
    }
    if args.iter().any(|a| a == "--at-rest-wide") {
        let against: Vec<PathBuf> =
            flag(&args, "--against").map_or(Vec::new(), |v| v.split(',').map(PathBuf::from).collect());
        println!("{}", at_rest::run(&bench.env, &bench.source, &bench.target, &against, repeat));
        return;
    }
    let records = if quick { 200_000 } else { 2_000_000 };
    let widths = if quick { &wide::WIDTHS[..2] } else { &wide::WIDTHS[..] };
    if args.iter().any(|a| a == "--wide") {
        wide::run(&mut bench, widths, records, repeat);
        return;
    }
    if args.iter().any(|a| a == "--scale-out-vs-flow") {
        let records = if quick { 600_000 } else { 2_000_000 };
        let eos = args.iter().any(|a| a == "--exactly-once");
        let clusters = (bench.source.as_str(), bench.target.as_str());
        println!("{}", scale_out::versus_flow(&bench.env, clusters, (records, repeat), eos, &out).0);
        return;
    }
    if args.iter().any(|a| a == "--scale-out") {
        let records = if quick { 400_000 } else { 4_000_000 };
        println!("{}", scale_out::run(&bench.env, &bench.source, &bench.target, records, repeat, &out));
        return;
    }
    let mut results = Results { quick, records, ..Results::default() };

    let catch_up_only = args.iter().any(|a| a == "--catch-up-only");
    let steady_only = args.iter().any(|a| a == "--steady-only");
    // Catch-ups of data preloaded with each codec (`--codecs none,lz4,zstd`; the full run's
    // default; `--catch-up-only` alone: uncompressed).
    let codecs: Vec<String> = match flag(&args, "--codecs") {
        Some(list) => list.split(',').map(str::to_string).collect(),
        None if catch_up_only => vec!["none".into()],
        None => ["none", "lz4", "zstd"].map(String::from).to_vec(),
    };
    let workloads: Vec<(String, &str)> = match steady_only {
        true => Vec::new(),
        false => codecs
            .iter()
            .map(|c| (if c == "none" { "catch-up".to_string() } else { format!("catch-up-{c}") }, c.as_str()))
            .collect(),
    };
    let workloads: Vec<(&str, &str)> = workloads.iter().map(|(n, c)| (n.as_str(), *c)).collect();
    let mut topics_of = BTreeMap::new();
    for &(name, compression) in &workloads {
        let topics: Vec<String> = ["a", "b"].iter().map(|s| format!("{name}-{s}")).collect();
        for t in &topics {
            load::create_topic(&bench.source, t, partitions, &[("compression.type", "producer")]);
        }
        let t0 = Instant::now();
        load::preload(&bench.source, &topics, partitions, records, compression);
        eprintln!("preloaded {records} records into {topics:?} ({compression}) in {:?}", t0.elapsed());
        topics_of.insert(name, topics);
    }
    for &(name, _) in &workloads {
        let mut runs: BTreeMap<&str, Vec<CatchUp>> = BTreeMap::new();
        for _ in 0..repeat {
            for &c in &contenders {
                runs.entry(c.name()).or_default().push(bench.catch_up(c, name, &topics_of[name], partitions));
            }
        }
        for &c in &contenders {
            results.catch_up.push(catch_up::median(runs.remove(c.name()).unwrap_or_default()));
        }
    }
    if catch_up_only {
        for c in &results.catch_up {
            println!(
                "{} {}: {:.0} records/s, {:.2} CPU s/GB, {:.0} MB peak RSS, {:.2} target bytes per source byte (median of {repeat})",
                c.contender,
                c.workload,
                c.records_per_s(),
                c.cpu_per_gb(),
                c.peak_rss_mb,
                c.target_bytes_per_source_byte
            );
        }
        return;
    }
    let (rate, duration) = if quick { (5_000, Duration::from_secs(10)) } else { (20_000, Duration::from_secs(60)) };
    for &c in &contenders {
        results.latency.push(bench.latency(c, rate, duration));
    }
    if steady_only {
        for l in &results.latency {
            println!(
                "{}: p50 {} ms, p99 {} ms, max {} ms, visible p50 {} ms, p99 {} ms at {} records/s; idle {:.2} % of a core",
                l.contender, l.p50_ms, l.p99_ms, l.max_ms, l.visible_p50_ms, l.visible_p99_ms, l.rate, l.idle_cpu_pct
            );
        }
        return;
    }
    // Wide layouts, read against the pipe with Strait's client settings in the same conditions
    // (at 240 partitions the figure swings with the machine: bench/FINDINGS.md, ninth round).
    results.wide = wide::run(&mut bench, widths, records, repeat);

    // One instance owning every slot against the same flow (point 3 of issue 26).
    let versus = (bench.source.as_str(), bench.target.as_str());
    let versus_records = if quick { 200_000 } else { 600_000 };
    results.scale_out_cpu_ratio =
        Some(scale_out::versus_flow(&bench.env, versus, (versus_records, repeat), false, &out).1);
    drop(clusters);
    // Across a long link, on clusters of its own (one behind the relay).
    let wan_records = if quick { 200_000 } else { 600_000 };
    results.wan = Some(wan::run(bench.env, &wan::CONTENDERS, wan_records, repeat, &out));
    let ratio = report::write(&results, &out);
    println!("{ratio}");
}
