//! `--wan`: catch-ups across an emulated long link ([`crate::link`]), in both placements of the
//! replicator: near the target, reading across the link (the far cluster is the source, MM2's
//! advice), and near the source, writing across it (the far cluster is the target). Each
//! contender's records/s from its first record and from its launch, its MB/s against what one
//! connection can carry, and its CPU per GB, into `results/wan.md`; returns the `RATIO wan …` line.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::catch_up::{self, CatchUp};
use crate::contenders::{Contender, Env};
use crate::link::{connection_limit_mb_per_s, DelayedLink, ONE_WAY, WINDOW};
use crate::load;
use crate::Bench;

/// Where the replicator runs, and so which cluster is far.
#[derive(Clone, Copy)]
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

/// The contenders of a WAN run, in run order, when `--only` names none.
pub const CONTENDERS: [Contender; 5] =
    [Contender::Strait, Contender::StraitEos, Contender::Mm2Tuned, Contender::Mm2Default, Contender::RawHeader];

/// Runs both placements with `contenders` (each catch-up `repeat` times, interleaved, median
/// reported) over `records` records of 12 partitions. Panics (it is a benchmark) when a cluster
/// cannot start.
pub fn run(env: Env, contenders: &[Contender], records: usize, repeat: usize, out: &Path) -> String {
    let near = strait_testkit::start_clusters(1, &env.work.join("near")).expect("start the near cluster").remove(0);
    let (far, _link) =
        strait_testkit::start_cluster_behind(&env.work.join("far"), DelayedLink::start).expect("start the far cluster");
    let partitions = 6;
    let topics: Vec<String> = ["a", "b"].iter().map(|s| format!("wan-{s}")).collect();
    for setup in [&near.internal, &far.internal] {
        for t in &topics {
            load::create_topic(setup, t, partitions, &[]);
        }
        load::preload(setup, &topics, partitions, records, "none");
    }
    let mut bench =
        Bench { env, source: String::new(), target: String::new(), clients: (String::new(), String::new()), runs: 0 };
    let mut rows: Vec<(Placement, CatchUp)> = Vec::new();
    for placement in [Placement::NearTarget, Placement::NearSource] {
        let (source, target) = match placement {
            Placement::NearTarget => ((&far.internal, &far.bootstrap), (&near.internal, &near.bootstrap)),
            Placement::NearSource => ((&near.internal, &near.bootstrap), (&far.internal, &far.bootstrap)),
        };
        (bench.source, bench.target) = (source.0.clone(), target.0.clone());
        bench.clients = (source.1.clone(), target.1.clone());
        let mut runs: BTreeMap<&str, Vec<CatchUp>> = BTreeMap::new();
        for _ in 0..repeat {
            for &c in contenders {
                let run = bench.catch_up(c, placement.name(), &topics, partitions);
                runs.entry(c.name()).or_default().push(run);
            }
        }
        for &c in contenders {
            rows.push((placement, catch_up::median(runs.remove(c.name()).unwrap_or_default())));
        }
    }
    write(&rows, records, repeat, out)
}

/// `results/wan.md` and the RATIO line.
fn write(rows: &[(Placement, CatchUp)], records: usize, repeat: usize, out: &Path) -> String {
    let limit = connection_limit_mb_per_s();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Strait across a long link\n\nTwo single-node Apache Kafka 4.1.1 clusters on this machine (`nproc` = {}); one behind a relay that delivers every byte {} ms later each way and holds at most {} MiB in flight per direction of a connection (one connection carries at most {limit:.0} MB/s). {records} records of {} bytes over 12 partitions in 2 topics; each catch-up run {repeat} times, contenders interleaved, the median shown.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        ONE_WAY.as_millis(),
        WINDOW >> 20,
        load::RECORD_BYTES,
    );
    let _ = writeln!(md, "| placement | contender | records/s | from launch | MB/s | of one connection's limit | CPU s/GB | all records on target | runs, records/s |\n|---|---|---:|---:|---:|---:|---:|---|---|");
    for (p, c) in rows {
        let runs: Vec<String> = c.all_records_per_s.iter().map(|v| format!("{v:.0}")).collect();
        let _ = writeln!(
            md,
            "| {} | {} | {:.0} | {:.0} | {:.1} | {:.0} % | {:.1} | {} | {} |",
            p.name(),
            c.contender,
            c.records_per_s(),
            c.records_per_s_from_launch(),
            c.mb_per_s(),
            c.mb_per_s() / limit * 100.0,
            c.cpu_per_gb(),
            if c.complete { "yes" } else { "**NO**" },
            runs.join(", ")
        );
    }
    let find = |p: Placement, name: &str| rows.iter().find(|(q, c)| q.name() == p.name() && c.contender == name);
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "n/a".into(),
    };
    let mut line = String::from("RATIO wan");
    for p in [Placement::NearSource, Placement::NearTarget] {
        let strait = find(p, "strait").map(|(_, c)| c);
        let pipe = find(p, "raw-pipe+header").map(|(_, c)| c);
        let mm2 = find(p, "mm2-tuned").map(|(_, c)| c);
        let _ = write!(
            line,
            " {}: strait/raw+header throughput={} from_launch={}; strait/mm2 throughput={}; strait/link={};",
            p.name(),
            ratio(strait.map(CatchUp::records_per_s), pipe.map(CatchUp::records_per_s)),
            ratio(strait.map(CatchUp::records_per_s_from_launch), pipe.map(CatchUp::records_per_s_from_launch)),
            ratio(strait.map(CatchUp::records_per_s), mm2.map(CatchUp::records_per_s)),
            ratio(strait.map(CatchUp::mb_per_s), Some(limit)),
        );
    }
    let line = line.trim_end_matches(';').to_string();
    let _ = writeln!(md, "\n`{line}`");
    let _ = std::fs::write(out.join("wan.md"), &md);
    print!("{md}");
    line
}
