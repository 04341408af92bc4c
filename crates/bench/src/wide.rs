//! `--wide`: catch-ups over wide layouts (issue 26, point 2). For each of [`WIDTHS`] partitions, two
//! source topics of half as many partitions each are preloaded with the run's records (2,000,000
//! of 512 bytes; 200,000 with `--quick`, which leaves out the widest), then Strait and
//! `raw-pipe+header` (the client library's floor with Strait's settings, its target topics made
//! before it starts) copy them, interleaved `--repeat` times; the median run of each is kept.
//! The source topics are deleted after their width, so one broker never holds two layouts.
//! Prints a line per width: `WIDE partitions=N strait/raw+header throughput=… cpu_per_gb=…
//! strait_rss_mb=…`; in a full run the rows go to the report and the RATIO line.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::catch_up::{self, CatchUp};
use crate::contenders::Contender;
use crate::{load, Bench};

/// Partitions of the wide catch-ups, in all (two topics of half as many each).
pub const WIDTHS: [i32; 3] = [240, 1_200, 5_000];

/// The workload name of the catch-up over `width` partitions.
pub fn workload(width: i32) -> String {
    format!("catch-up-{width}-partitions")
}

/// The median catch-up of Strait and of `raw-pipe+header` at each of `widths`, `records` records,
/// `repeat` interleaved runs each.
pub fn run(bench: &mut Bench, widths: &[i32], records: usize, repeat: usize) -> Vec<CatchUp> {
    let mut rows = Vec::new();
    for &width in widths {
        let per_topic = width / 2;
        let topics: Vec<String> = ["a", "b"].iter().map(|s| format!("wide{width}-{s}")).collect();
        for t in &topics {
            load::create_topic(&bench.source, t, per_topic, &[]);
        }
        let t0 = Instant::now();
        load::preload(&bench.source, &topics, per_topic, records, "none");
        eprintln!("preloaded {records} records over {width} partitions in {:?}", t0.elapsed());
        let name = workload(width);
        let mut runs: BTreeMap<&str, Vec<CatchUp>> = BTreeMap::new();
        for _ in 0..repeat {
            for c in [Contender::Strait, Contender::RawHeader] {
                runs.entry(c.name()).or_default().push(bench.catch_up(c, &name, &topics, per_topic));
            }
        }
        load::delete_topics(&bench.source, &topics);
        let (strait, pipe) = (
            catch_up::median(runs.remove("strait").unwrap_or_default()),
            catch_up::median(runs.remove("raw-pipe+header").unwrap_or_default()),
        );
        println!(
            "WIDE partitions={width} strait/raw+header throughput={:.2} cpu_per_gb={:.2} strait_rss_mb={:.0}",
            strait.records_per_s() / pipe.records_per_s(),
            strait.cpu_per_gb() / pipe.cpu_per_gb(),
            strait.peak_rss_mb
        );
        rows.extend([strait, pipe]);
    }
    rows
}
