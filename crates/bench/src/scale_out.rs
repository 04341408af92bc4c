//! `--scale-out`: one flow's catch-up run by 1, 2 and 3 Strait instances sharing it
//! (`[flows.scale_out]`, 12 slots), on the same two clusters, in two series:
//! - uncapped: the instances share this machine's cores with the brokers, which bound the
//!   throughput here;
//! - capped: each instance in its own cgroup (v1 `cpu`) limited to [`CAP`] of a core, as if each
//!   ran on a small machine of its own, so the instances and not the brokers are the bound. This
//!   shows how throughput grows with instances where the brokers have room.
//!
//! The instances start together and the group needs a few seconds to settle, so the figures run
//! from the moment every instance owns its share of slots (and records flow) to the end:
//! records/s, CPU seconds per GB (all instances summed) and records/s per instance. Each count is
//! run `repeat` times, counts interleaved, and the median run (by throughput) reported. Writes
//! `bench/results/scale-out.md` and prints a last line `SCALE ...`.
//!
//! `--scale-out-vs-flow` ([`versus_flow`]): the cost of scale-out itself, one instance owning all
//! [`SLOTS`] slots against the same flow without scale-out, for each Strait build of
//! `STRAIT_BENCH_BINS` (`label=dir,...`; default the bench's own), interleaved; exactly-once
//! with `--exactly-once`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::contenders::{launch, launch_scaled_strait, Contender, Env};
use crate::load;
use crate::proc_stats::{cpu_seconds, peak_rss_mb};

const SLOTS: u32 = 12;
/// CPU share of one core each instance gets in the capped series.
const CAP: f64 = 0.1;
const PARTITIONS: i32 = 12;

/// One catch-up by `instances` instances.
struct Run {
    instances: usize,
    records: i64,
    /// First record to last, whole run.
    seconds: f64,
    /// Peak resident set (MB) of the largest instance.
    peak_rss_mb: f64,
    /// From the settled group to the last record.
    settled_records: i64,
    settled_seconds: f64,
    settled_cpu: f64,
    /// Seconds from the first record until the group settled.
    settle_after: f64,
}

impl Run {
    fn settled_rate(&self) -> f64 {
        self.settled_records as f64 / self.settled_seconds
    }
    fn cpu_per_gb(&self) -> f64 {
        self.settled_cpu / (self.settled_records as f64 * load::RECORD_BYTES as f64 / 1e9)
    }
}

/// How many slots an instance said it owns last, from its log.
fn owned(log: &Path) -> usize {
    strait_testkit::owned_slots(&std::fs::read_to_string(log).unwrap_or_default()).map_or(0, |s| s.len())
}

/// A cgroup (v1 `cpu`) limiting its processes to [`CAP`] of a core; removed on drop.
struct CpuCap(PathBuf);

impl CpuCap {
    /// `None` where this machine has no writable v1 cpu controller.
    fn new(name: &str) -> Option<Self> {
        let dir = PathBuf::from("/sys/fs/cgroup/cpu").join(name);
        std::fs::create_dir(&dir).ok()?;
        let cap = CpuCap(dir);
        std::fs::write(cap.0.join("cpu.cfs_period_us"), "100000").ok()?;
        std::fs::write(cap.0.join("cpu.cfs_quota_us"), format!("{}", (CAP * 100_000.0) as u64)).ok()?;
        Some(cap)
    }

    /// Moves process `pid` (every thread) into the cgroup.
    fn add(&self, pid: u32) {
        std::fs::write(self.0.join("cgroup.procs"), pid.to_string()).expect("move into the cgroup");
    }
}

impl Drop for CpuCap {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn catch_up(
    env: &Env,
    (source, target): (&str, &str),
    topics: &[String],
    tag: &str,
    instances: usize,
    capped: bool,
) -> Run {
    let src = load::inspector(source);
    let total: i64 = load::counts(&src, topics).values().sum();
    let targets: Vec<String> = topics.iter().map(|t| format!("s{tag}.{t}")).collect();
    let dst = load::inspector(target);
    let running: Vec<(crate::contenders::Running, PathBuf)> =
        (0..instances).map(|i| launch_scaled_strait(env, tag, i, SLOTS, source, target, topics, "")).collect();
    let pids: Vec<u32> = running.iter().map(|(r, _)| r.child.id()).collect();
    // Kept until the instances are gone: a cgroup with processes cannot be removed.
    let _caps: Vec<CpuCap> = if capped {
        pids.iter()
            .enumerate()
            .map(|(i, pid)| {
                let cap = CpuCap::new(&format!("strait-bench-{tag}-{i}")).expect("cpu cgroup");
                cap.add(*pid);
                cap
            })
            .collect()
    } else {
        Vec::new()
    };
    let cpu = || pids.iter().map(|p| cpu_seconds(*p)).sum::<f64>();
    let share = SLOTS as usize / instances;
    let deadline = Instant::now() + Duration::from_secs(1200);
    let (mut first, mut settled) = (None, None::<(Instant, i64, f64)>);
    let mut got = 0;
    while Instant::now() < deadline {
        got = load::counts(&dst, &targets).values().sum::<i64>();
        if got > 0 && first.is_none() {
            first = Some(Instant::now());
        }
        if settled.is_none() && got > 0 && running.iter().all(|(_, log)| owned(log) == share) {
            settled = Some((Instant::now(), got, cpu()));
        }
        if got >= total {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (done, cpu_end) = (Instant::now(), cpu());
    let peak_rss_mb = pids.iter().map(|p| peak_rss_mb(*p)).fold(0.0, f64::max);
    drop(running);
    assert_eq!(got, total, "{instances} instance(s): the target holds {got} of {total} records");
    let first = first.unwrap_or(done);
    // A group that settled only after the end (cannot happen with 1 instance): the whole run.
    let (at, records_then, cpu_then) = settled.unwrap_or((first, 0, 0.0));
    let run = Run {
        instances,
        records: total,
        seconds: (done - first).as_secs_f64(),
        peak_rss_mb,
        settled_records: total - records_then,
        settled_seconds: (done - at).as_secs_f64(),
        settled_cpu: cpu_end - cpu_then,
        settle_after: at.saturating_duration_since(first).as_secs_f64(),
    };
    eprintln!(
        "scale-out {instances} instance(s){}: {:.0} records/s settled ({:.0} whole run), {:.2} CPU s/GB, settled {:.1} s after the first record",
        if capped { " capped" } else { "" },
        run.settled_rate(),
        run.records as f64 / run.seconds,
        run.cpu_per_gb(),
        run.settle_after
    );
    run
}

/// 1, 2 and 3 instances, `repeat` times each, interleaved; the median run of each count.
fn series(env: &Env, clusters: (&str, &str), topics: &[String], repeat: usize, capped: bool) -> Vec<Run> {
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(), Vec::new(), Vec::new()];
    for round in 0..repeat {
        for n in 1..=3 {
            let tag = format!("{}x{round}n{n}{}", std::process::id() % 10_000, if capped { "c" } else { "" });
            runs[n - 1].push(catch_up(env, clusters, topics, &tag, n, capped));
        }
    }
    runs.into_iter()
        .map(|mut r| {
            r.sort_by(|a, b| a.settled_rate().total_cmp(&b.settled_rate()));
            r.remove(r.len() / 2)
        })
        .collect()
}

fn table(md: &mut String, runs: &[Run]) {
    md.push_str(
        "| instances | records/s | per instance | CPU s/GB (all instances) | whole-run records/s | group settled after (s) | peak RSS per instance (MB) |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for r in runs {
        let _ = writeln!(
            md,
            "| {} | {:.0} | {:.0} | {:.2} | {:.0} | {:.1} | {:.0} |",
            r.instances,
            r.settled_rate(),
            r.settled_rate() / r.instances as f64,
            r.cpu_per_gb(),
            r.records as f64 / r.seconds,
            r.settle_after,
            r.peak_rss_mb
        );
    }
}

/// Runs both series over `records` preloaded records (the capped one over a quarter of them, at
/// its lower rate) and writes the report to `dir`; returns the SCALE line.
pub fn run(env: &Env, source: &str, target: &str, records: usize, repeat: usize, dir: &Path) -> String {
    let preload = |name: &str, records: usize| -> Vec<String> {
        let topics: Vec<String> = ["a", "b"].iter().map(|s| format!("{name}-{s}")).collect();
        for t in &topics {
            load::create_topic(source, t, PARTITIONS, &[]);
        }
        load::preload(source, &topics, PARTITIONS, records, "none");
        topics
    };
    let uncapped = series(env, (source, target), &preload("scale", records), repeat, false);
    let capped = CpuCap::new(&format!("strait-bench-probe-{}", std::process::id()))
        .map(|_| series(env, (source, target), &preload("scale-capped", records / 4), repeat, true));
    let mut md = format!(
        "# Scale-out catch-up\n\nOne flow over {} partitions in 2 topics (uncompressed records of 512 bytes), {SLOTS} \
         slots, run by 1, 2 and 3 instances on this one machine; median of {repeat} run(s) each. Figures run from the \
         moment every instance owns its share of the slots and records flow, to the last record.\n\n\
         ## Uncapped ({records} records)\n\nThe instances share the machine's cores with both clusters' brokers, which \
         bound the throughput here.\n\n",
        2 * PARTITIONS
    );
    table(&mut md, &uncapped);
    match &capped {
        Some(runs) => {
            let _ = write!(
                md,
                "\n## Each instance capped at {CAP} of a core ({} records)\n\nEach instance in its own cgroup, as if on \
                 a small machine of its own: the instances, not the brokers, are the bound.\n\n",
                records / 4
            );
            table(&mut md, runs);
        }
        None => md.push_str("\nNo writable cgroup v1 cpu controller here: the capped series was not run.\n"),
    }
    let _ = std::fs::write(dir.join("scale-out.md"), &md);
    eprintln!("{md}");
    let line = |runs: &[Run]| {
        let join = |f: &dyn Fn(&Run) -> String| runs.iter().map(f).collect::<Vec<_>>().join(",");
        format!(
            "records_per_s={} per_instance={} cpu_per_gb={}",
            join(&|r| format!("{:.0}", r.settled_rate())),
            join(&|r| format!("{:.0}", r.settled_rate() / r.instances as f64)),
            join(&|r| format!("{:.2}", r.cpu_per_gb()))
        )
    };
    format!(
        "SCALE instances=1,2,3 uncapped {}; capped_{CAP}_core {}",
        line(&uncapped),
        capped.as_deref().map_or("not run".into(), line)
    )
}

/// One instance's catch-up of `topics` (scale-out with [`SLOTS`] slots, or a plain flow), from the
/// first record on the target to the last: (records/s, CPU s/GB). The target topics are deleted
/// after.
fn one_instance(
    env: &Env,
    (source, target): (&str, &str),
    topics: &[String],
    tag: &str,
    (scaled, exactly_once): (bool, bool),
) -> (f64, f64) {
    let total: i64 = load::counts(&load::inspector(source), topics).values().sum();
    let targets: Vec<String> = topics.iter().map(|t| format!("s{tag}.{t}")).collect();
    let dst = load::inspector(target);
    let running = match (scaled, exactly_once) {
        (true, eos) => {
            let delivery = if eos { "delivery = \"exactly_once\"\n" } else { "" };
            launch_scaled_strait(env, tag, 0, SLOTS, source, target, topics, delivery).0
        }
        (false, false) => launch(Contender::Strait, env, tag, source, target, topics),
        (false, true) => launch(Contender::StraitEos, env, tag, source, target, topics),
    };
    let pid = running.child.id();
    let deadline = Instant::now() + Duration::from_secs(600);
    let (mut first, mut got) = (None, 0);
    while Instant::now() < deadline && got < total {
        got = load::counts(&dst, &targets).values().sum::<i64>();
        if got > 0 && first.is_none() {
            first = Some((Instant::now(), got, cpu_seconds(pid)));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let (done, cpu_end) = (Instant::now(), cpu_seconds(pid));
    drop(running);
    load::delete_topics(target, &targets);
    // Exactly-once, the end offsets count the transaction markers too (one per partition and
    // commit): a few hundred in a million, so the run ends as early as that.
    assert!(got >= total, "{tag}: the target holds {got} of {total} records");
    let (at, then, cpu_then) = first.expect("a record arrived");
    let records = (total - then) as f64;
    (records / (done - at).as_secs_f64(), (cpu_end - cpu_then) / (records * load::RECORD_BYTES as f64 / 1e9))
}

/// For each build of `STRAIT_BENCH_BINS` (`label=dir,...`; default this bench's build, `strait`):
/// one instance owning all [`SLOTS`] slots and the same flow without scale-out (both
/// at-least-once, or both exactly-once with `exactly_once`), over `records`
/// preloaded records in 2 topics of [`PARTITIONS`] partitions, `repeat` rounds with every
/// build and mode interleaved; prints each run and writes `scale-out-vs-flow-<mode>.md` to `dir` with the
/// medians. Returns the line `SCALE_VS_FLOW <label> scaled=<CPU s/GB> flow=<CPU s/GB>
/// ratio=<scaled/flow> ...` and the first build's ratio.
pub fn versus_flow(
    env: &Env,
    (source, target): (&str, &str),
    (records, repeat): (usize, usize),
    exactly_once: bool,
    dir: &Path,
) -> (String, f64) {
    let builds: Vec<(String, PathBuf)> = match std::env::var("STRAIT_BENCH_BINS") {
        Ok(list) => list
            .split(',')
            .map(|b| {
                let (label, bin) = b.split_once('=').expect("STRAIT_BENCH_BINS: label=dir,...");
                (label.to_string(), PathBuf::from(bin))
            })
            .collect(),
        Err(_) => vec![("strait".into(), env.bin.clone())],
    };
    let topics: Vec<String> = ["a", "b"].iter().map(|s| format!("versus-{s}")).collect();
    for t in &topics {
        load::create_topic(source, t, PARTITIONS, &[]);
    }
    load::preload(source, &topics, PARTITIONS, records, "none");
    // Per build and mode (scaled, flow): (records/s, CPU s/GB) of each round.
    let mut runs: Vec<[Vec<(f64, f64)>; 2]> = builds.iter().map(|_| [Vec::new(), Vec::new()]).collect();
    for round in 0..repeat {
        for (b, (label, bin)) in builds.iter().enumerate() {
            let env = Env { bin: bin.clone(), work: env.work.clone() };
            for (m, scaled) in [true, false].into_iter().enumerate() {
                let tag = format!("{}v{round}b{b}m{m}", std::process::id() % 10_000);
                let run = one_instance(&env, (source, target), &topics, &tag, (scaled, exactly_once));
                eprintln!(
                    "versus round {round} {label} {}: {:.0} records/s, {:.2} CPU s/GB",
                    if scaled { "scale-out 1 instance" } else { "flow" },
                    run.0,
                    run.1
                );
                runs[b][m].push(run);
            }
        }
    }
    let median = |v: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| {
        let mut x: Vec<f64> = v.iter().map(f).collect();
        x.sort_by(f64::total_cmp);
        x[x.len() / 2]
    };
    let mode = if exactly_once { "exactly-once" } else { "at-least-once" };
    let mut md = format!(
        "# Scale-out against one flow\n\nOne instance owning all {SLOTS} slots against the same flow without scale-out \
         ({mode}): \
         {records} uncompressed records of 512 bytes in 2 topics of {PARTITIONS} partitions, from the first record on \
         the target to the last; median of {repeat} interleaved round(s).\n\n\
         | build | scale-out records/s | scale-out CPU s/GB | flow records/s | flow CPU s/GB | CPU ratio |\n|---|---|---|---|---|---|\n"
    );
    let mut line = format!("SCALE_VS_FLOW {mode}");
    let mut first = None;
    for ((label, _), [scaled, flow]) in builds.iter().zip(&runs) {
        let (sc, fc) = (median(scaled, |r| r.1), median(flow, |r| r.1));
        first.get_or_insert(sc / fc);
        let _ = writeln!(
            md,
            "| {label} | {:.0} | {sc:.2} | {:.0} | {fc:.2} | {:.2} |",
            median(scaled, |r| r.0),
            median(flow, |r| r.0),
            sc / fc
        );
        let _ = write!(line, " {label} scaled={sc:.2} flow={fc:.2} ratio={:.2}", sc / fc);
    }
    let _ = std::fs::write(dir.join(format!("scale-out-vs-flow-{mode}.md")), &md);
    eprintln!("{md}");
    (line, first.unwrap_or(f64::NAN))
}
