//! `--scale-out`: one flow's catch-up run by 1, 2 and 3 Strait instances sharing it
//! (`[flows.scale_out]`, 12 slots), on the same two clusters. The instances start together and
//! the group needs a few seconds to settle, so besides the whole run the figures are taken from
//! the moment every instance owns its share of slots to the end: records/s, CPU seconds per GB
//! (all instances summed) and records/s per instance. Each count is run `repeat` times, counts
//! interleaved, and the median run (by settled throughput) reported. Writes
//! `bench/results/scale-out.md` and prints a last line `SCALE instances=1,2,3 records_per_s=..`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::contenders::{launch_scaled_strait, Env};
use crate::{cpu_seconds, load};

const SLOTS: u32 = 12;
const PARTITIONS: i32 = 12;

/// One catch-up by `instances` instances.
struct Run {
    instances: usize,
    records: i64,
    /// First record to last, whole run.
    seconds: f64,
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

/// The slots each instance said it owns last, from its log.
fn owned(log: &Path) -> usize {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .rev()
        .find(|l| l.contains("slots owned by this instance"))
        .and_then(|l| {
            l.split("slots=[").nth(1)?.split(']').next().map(|s| s.split(',').filter(|x| !x.trim().is_empty()).count())
        })
        .unwrap_or(0)
}

fn catch_up(env: &Env, source: &str, target: &str, topics: &[String], tag: &str, instances: usize) -> Run {
    let src = load::inspector(source);
    let total: i64 = load::counts(&src, topics).values().sum();
    let targets: Vec<String> = topics.iter().map(|t| format!("s{tag}.{t}")).collect();
    let dst = load::inspector(target);
    let running: Vec<(crate::contenders::Running, PathBuf)> =
        (0..instances).map(|i| launch_scaled_strait(env, tag, i, SLOTS, source, target, topics)).collect();
    let pids: Vec<u32> = running.iter().map(|(r, _)| r.child.id()).collect();
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
        if settled.is_none() && running.iter().all(|(_, log)| owned(log) == share) {
            settled = Some((Instant::now(), got, cpu()));
        }
        if got >= total {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (done, cpu_end) = (Instant::now(), cpu());
    drop(running);
    assert_eq!(got, total, "{instances} instance(s): the target holds {got} of {total} records");
    let first = first.unwrap_or(done);
    // A group that settled only after the end (cannot happen with 1 instance): the whole run.
    let (at, records_then, cpu_then) = settled.unwrap_or((first, 0, 0.0));
    let run = Run {
        instances,
        records: total,
        seconds: (done - first).as_secs_f64(),
        settled_records: total - records_then,
        settled_seconds: (done - at).as_secs_f64(),
        settled_cpu: cpu_end - cpu_then,
        settle_after: at.saturating_duration_since(first).as_secs_f64(),
    };
    eprintln!(
        "scale-out {instances} instance(s): {:.0} records/s settled ({:.0} whole run), {:.2} CPU s/GB, settled {:.1} s after the first record",
        run.settled_rate(),
        run.records as f64 / run.seconds,
        run.cpu_per_gb(),
        run.settle_after
    );
    run
}

/// Runs the scale-out catch-ups of `records` records and writes the report to `dir`; returns the
/// SCALE line.
pub fn run(env: &Env, source: &str, target: &str, records: usize, repeat: usize, dir: &Path) -> String {
    let topics: Vec<String> = ["a", "b"].iter().map(|s| format!("scale-{s}")).collect();
    for t in &topics {
        load::create_topic(source, t, PARTITIONS, &[]);
    }
    load::preload(source, &topics, PARTITIONS, records, "none");
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(), Vec::new(), Vec::new()];
    for round in 0..repeat {
        for n in 1..=3 {
            runs[n - 1].push(catch_up(
                env,
                source,
                target,
                &topics,
                &format!("{}x{round}n{n}", std::process::id() % 10_000),
                n,
            ));
        }
    }
    let medians: Vec<Run> = runs
        .into_iter()
        .map(|mut r| {
            r.sort_by(|a, b| a.settled_rate().total_cmp(&b.settled_rate()));
            r.remove(r.len() / 2)
        })
        .collect();
    let mut md = format!(
        "# Scale-out catch-up\n\n{records} uncompressed records of 512 bytes over {} partitions in 2 topics, one flow with \
         {SLOTS} slots run by 1, 2 and 3 instances on this one machine (the brokers share its cores). Median of {repeat} \
         run(s) each. \"Settled\" figures run from the moment each instance owns its share of the slots to the last \
         record; CPU sums every instance.\n\n\
         | instances | records/s settled | records/s whole run | per instance (settled) | CPU s/GB settled | group settled after (s) |\n\
         |---|---|---|---|---|---|\n",
        2 * PARTITIONS
    );
    for r in &medians {
        let _ = writeln!(
            md,
            "| {} | {:.0} | {:.0} | {:.0} | {:.2} | {:.1} |",
            r.instances,
            r.settled_rate(),
            r.records as f64 / r.seconds,
            r.settled_rate() / r.instances as f64,
            r.cpu_per_gb(),
            r.settle_after
        );
    }
    let _ = std::fs::write(dir.join("scale-out.md"), &md);
    eprintln!("{md}");
    let join = |f: &dyn Fn(&Run) -> String| medians.iter().map(f).collect::<Vec<_>>().join(",");
    format!(
        "SCALE instances=1,2,3 records_per_s={} per_instance={} cpu_per_gb={}",
        join(&|r| format!("{:.0}", r.settled_rate())),
        join(&|r| format!("{:.0}", r.settled_rate() / r.instances as f64)),
        join(&|r| format!("{:.2}", r.cpu_per_gb()))
    )
}
