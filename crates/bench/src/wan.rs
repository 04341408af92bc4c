//! `--wan`: catch-ups across an emulated long link ([`crate::link`]), in both placements of the
//! replicator: near the target, reading across the link (the far cluster is the source, MM2's
//! advice), and near the source, writing across it (the far cluster is the target); then, near
//! the source, across a link of 40 MB/s for all connections together with lz4-compressed sources,
//! where what crosses the link compressed decides. Each contender's records/s from its first
//! record and from its launch, its MB/s of records against the link's limit, the bytes the link
//! carried per byte of the source topics (the egress a region pair is billed for) and its CPU per
//! GB, into `results/wan.md`; returns the `RATIO wan …` line.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::catch_up::{self, CatchUp};
use crate::contenders::{Contender, Env};
use crate::link::{connection_limit_mb_per_s, DelayedLink, ONE_WAY, WINDOW};
use crate::load;
use crate::Bench;

/// Where the replicator runs, and so which cluster is far.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// Near the target: the source is far, records are read across the link.
    NearTarget,
    /// Near the source: the target is far, records are produced across the link.
    NearSource,
}

impl Placement {
    fn name(self) -> &'static str {
        match self {
            Placement::NearTarget => "near-target",
            Placement::NearSource => "near-source",
        }
    }
}

/// A link and the source topics it is tried with.
struct Scenario {
    name: &'static str,
    /// The link's limit per direction, all its connections together (MB/s); none: each
    /// connection's window is the only bound.
    cap_mb_per_s: Option<f64>,
    /// The codec the source topics' records were produced in.
    codec: &'static str,
    placements: &'static [Placement],
}

const SCENARIOS: [Scenario; 2] = [
    Scenario {
        name: "window",
        cap_mb_per_s: None,
        codec: "none",
        placements: &[Placement::NearTarget, Placement::NearSource],
    },
    Scenario { name: "40MB/s-lz4", cap_mb_per_s: Some(40.0), codec: "lz4", placements: &[Placement::NearSource] },
];

impl Scenario {
    /// What the link carries at most, all connections together: the cap, or one connection's
    /// window per round trip (MB/s).
    fn limit_mb_per_s(&self) -> f64 {
        self.cap_mb_per_s.unwrap_or_else(connection_limit_mb_per_s)
    }
}

/// The contenders of a WAN run, in run order, when `--only` names none.
pub const CONTENDERS: [Contender; 8] = [
    Contender::Strait,
    Contender::StraitDefault,
    Contender::StraitLz4,
    Contender::StraitBatches,
    Contender::StraitEos,
    Contender::Mm2Tuned,
    Contender::Mm2TunedLz4,
    Contender::RawHeader,
];

/// A row of the report: the scenario, the placement and the median run.
type Row = (&'static Scenario, Placement, CatchUp);

/// Runs every scenario with `contenders` (each catch-up `repeat` times, interleaved, median
/// reported) over `records` records of 12 partitions. Panics (it is a benchmark) when a cluster
/// cannot start.
pub fn run(env: Env, contenders: &[Contender], records: usize, repeat: usize, out: &Path) -> String {
    let near = strait_testkit::start_clusters(1, &env.work.join("near")).expect("start the near cluster").remove(0);
    let (far, link) =
        strait_testkit::start_cluster_behind(&env.work.join("far"), DelayedLink::start).expect("start the far cluster");
    let partitions = 6;
    let mut bench =
        Bench { env, source: String::new(), target: String::new(), clients: (String::new(), String::new()), runs: 0 };
    let mut rows: Vec<Row> = Vec::new();
    for scenario in &SCENARIOS {
        let topics: Vec<String> = ["a", "b"].iter().map(|s| format!("wan-{}-{s}", scenario.codec)).collect();
        for (p, setup) in [(Placement::NearSource, &near.internal), (Placement::NearTarget, &far.internal)] {
            if scenario.placements.contains(&p) {
                for t in &topics {
                    load::create_topic(setup, t, partitions, &[]);
                }
                load::preload(setup, &topics, partitions, records, scenario.codec);
            }
        }
        link.set_cap(scenario.cap_mb_per_s.map(|mb| mb * 1e6));
        for &placement in scenario.placements {
            let (source, target) = match placement {
                Placement::NearTarget => ((&far.internal, &far.bootstrap), (&near.internal, &near.bootstrap)),
                Placement::NearSource => ((&near.internal, &near.bootstrap), (&far.internal, &far.bootstrap)),
            };
            (bench.source, bench.target) = (source.0.clone(), target.0.clone());
            bench.clients = (source.1.clone(), target.1.clone());
            let source_bytes = load::bytes_on_disk(&bench.source, &topics) as f64;
            let mut runs: BTreeMap<&str, Vec<CatchUp>> = BTreeMap::new();
            for _ in 0..repeat {
                for &c in contenders {
                    let before = link.carried();
                    let mut run = bench.catch_up(c, placement.name(), &topics, partitions);
                    run.link_bytes_per_source_byte = (link.carried() - before) as f64 / source_bytes;
                    runs.entry(c.name()).or_default().push(run);
                }
            }
            for &c in contenders {
                rows.push((scenario, placement, catch_up::median(runs.remove(c.name()).unwrap_or_default())));
            }
        }
    }
    write(&rows, records, repeat, out)
}

/// `results/wan.md` and the RATIO line.
fn write(rows: &[Row], records: usize, repeat: usize, out: &Path) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Strait across a long link\n\nTwo single-node Apache Kafka 4.1.1 clusters on this machine (`nproc` = {}); one behind a relay that delivers every byte {} ms later each way and holds at most {} MiB in flight per direction of a connection (one connection carries at most {:.0} MB/s). {records} records of {} bytes (half random, half repeated JSON-like text) over 12 partitions in 2 topics; each catch-up run {repeat} times, contenders interleaved, the median shown.\n\n- `window`: no limit but each connection's window; the sources uncompressed.\n- `40MB/s-lz4`: the link carries at most 40 MB/s each way, all connections together; the sources' records produced with lz4. MB/s counts records' bytes, uncompressed, so a contender that sends them compressed can pass 100 % of the link.\n\n\"link bytes per source byte\": what the relay carried during the run, both ways, per byte of the source topics on disk.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        ONE_WAY.as_millis(),
        WINDOW >> 20,
        connection_limit_mb_per_s(),
        load::RECORD_BYTES,
    );
    let _ = writeln!(md, "| link | placement | contender | records/s | from launch | MB/s | of the link's limit | link bytes per source byte | CPU s/GB | all records on target | runs, records/s |\n|---|---|---|---:|---:|---:|---:|---:|---:|---|---|");
    for (s, p, c) in rows {
        let runs: Vec<String> = c.all_records_per_s.iter().map(|v| format!("{v:.0}")).collect();
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.0} | {:.0} | {:.1} | {:.0} % | {:.2} | {:.1} | {} | {} |",
            s.name,
            p.name(),
            c.contender,
            c.records_per_s(),
            c.records_per_s_from_launch(),
            c.mb_per_s(),
            c.mb_per_s() / s.limit_mb_per_s() * 100.0,
            c.link_bytes_per_source_byte,
            c.cpu_per_gb(),
            if c.complete { "yes" } else { "**NO**" },
            runs.join(", ")
        );
    }
    let line = ratio_line(rows);
    let _ = writeln!(md, "\n`{line}`");
    let _ = std::fs::write(out.join("wan.md"), &md);
    print!("{md}");
    line
}

/// `RATIO wan …`: per scenario and placement, each copy path against MM2 tuned and the pipe; on
/// the capped link, records/s against what it carries uncompressed and the bytes it carried.
fn ratio_line(rows: &[Row]) -> String {
    let find = |s: &Scenario, p: Placement, name: &str| {
        rows.iter().find(|(t, q, c)| t.name == s.name && *q == p && c.contender == name).map(|(_, _, c)| c)
    };
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "n/a".into(),
    };
    let rate = |c: Option<&CatchUp>| c.map(CatchUp::records_per_s);
    let mut line = String::from("RATIO wan");
    for s in &SCENARIOS {
        for &p in s.placements {
            let [strait, default, batches, mm2, pipe] =
                ["strait", "strait-default", "strait-batches", "mm2-tuned", "raw-pipe+header"].map(|n| find(s, p, n));
            let _ = write!(
                line,
                " {} {}: strait/mm2={} default/mm2={} batches/mm2={} strait/raw+header={} batches/raw+header={} from_launch strait/raw+header={}",
                s.name,
                p.name(),
                ratio(rate(strait), rate(mm2)),
                ratio(rate(default), rate(mm2)),
                ratio(rate(batches), rate(mm2)),
                ratio(rate(strait), rate(pipe)),
                ratio(rate(batches), rate(pipe)),
                ratio(strait.map(CatchUp::records_per_s_from_launch), pipe.map(CatchUp::records_per_s_from_launch)),
            );
            if let Some(cap) = s.cap_mb_per_s {
                let uncompressed = cap * 1e6 / load::RECORD_BYTES as f64;
                for name in ["strait", "strait-default", "strait-lz4", "strait-batches", "mm2-tuned-lz4"] {
                    if let Some(c) = find(s, p, name) {
                        let _ = write!(
                            line,
                            " {name}/link_uncompressed={:.2} {name}_link_bytes={:.2}",
                            c.records_per_s() / uncompressed,
                            c.link_bytes_per_source_byte
                        );
                    }
                }
            }
            line.push(';');
        }
    }
    line.trim_end_matches(';').to_string()
}
