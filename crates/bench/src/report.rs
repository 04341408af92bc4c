//! Results: the markdown table, the chart (drawn by `bench/chart.py` with matplotlib) and the
//! RATIO line.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::catch_up::CatchUp;
use crate::load::RECORD_BYTES;
use crate::{IDLE, RAMP, SETTLE};

/// One steady-state run.
#[derive(Debug, Clone)]
pub struct Latency {
    pub contender: String,
    pub rate: u64,
    pub records: usize,
    pub p50_ms: i64,
    pub p99_ms: i64,
    pub max_ms: i64,
    /// Send time to receipt by a `read_committed` consumer tailing the target (ms): what a
    /// downstream application sees; in exactly-once mode it includes the wait for the commit.
    pub visible_p50_ms: i64,
    pub visible_p99_ms: i64,
    /// p99 of the records sent in the first seconds of the rate, from idle (not in the others).
    pub ramp_p99_ms: i64,
    pub peak_rss_mb: f64,
    /// CPU (% of one core) once the rate stopped and the replicator settled: its cost at rest.
    pub idle_cpu_pct: f64,
}

/// Everything one bench run measured.
#[derive(Debug, Default)]
pub struct Results {
    pub quick: bool,
    pub records: usize,
    pub catch_up: Vec<CatchUp>,
    pub latency: Vec<Latency>,
    /// The wide catch-ups ([`crate::wide`]): Strait and `raw-pipe+header` at each width.
    pub wide: Vec<CatchUp>,
    /// One instance owning every slot against the same flow without scale-out, at-least-once:
    /// CPU s/GB ratio ([`crate::scale_out::versus_flow`]).
    pub scale_out_cpu_ratio: Option<f64>,
    /// The `RATIO wan …` line of [`crate::wan::run`].
    pub wan: Option<String>,
}

fn find<'a>(rows: &'a [CatchUp], contender: &str, workload: &str) -> Option<&'a CatchUp> {
    rows.iter().find(|r| r.contender == contender && r.workload == workload)
}

/// Writes `latest.md` and `latest.png` (when matplotlib is available) into `dir`; returns the
/// RATIO line (strait against tuned MM2, uncompressed catch-up).
pub fn write(r: &Results, dir: &Path) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Strait benchmark{}\n", if r.quick { " (--quick)" } else { "" });
    let _ = writeln!(
        md,
        "Two single-node Apache Kafka 4.1.1 clusters on this machine (`nproc` = {}), one run, contenders one after another against fresh target topics. {} records of {RECORD_BYTES} bytes over 12 partitions in 2 topics per catch-up workload.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        r.records
    );
    let _ = writeln!(md, "## Catch-up (median run; every run's records/s in the last column)\n\n| contender | workload | records/s | MB/s | CPU s/GB | peak RSS MB | target bytes per source byte | all records on target | runs, records/s |\n|---|---|---:|---:|---:|---:|---:|---|---|");
    for c in r.catch_up.iter().chain(&r.wide) {
        let runs: Vec<String> = c.all_records_per_s.iter().map(|v| format!("{v:.0}")).collect();
        let _ = writeln!(
            md,
            "| {} | {} | {:.0} | {:.1} | {:.1} | {:.0} | {:.2} | {} | {} |",
            c.contender,
            c.workload,
            c.records_per_s(),
            c.mb_per_s(),
            c.cpu_per_gb(),
            c.peak_rss_mb,
            c.target_bytes_per_source_byte,
            if c.complete { "yes" } else { "**NO**" },
            runs.join(", ")
        );
    }
    let (ramp, settle, idle) = (RAMP.as_secs(), SETTLE.as_secs(), IDLE.as_secs());
    let _ = writeln!(md, "\n## Steady state (end-to-end latency: target append time minus send time; visible: receipt by a read_committed consumer tailing the target minus send time; records sent in the first {ramp} s at the rate, from idle, are left out and their p99 shown apart; idle: CPU over {idle} s once the rate stopped and {settle} s passed, nothing left to copy)\n\n| contender | rate rec/s | records | p50 ms | p99 ms | max ms | visible p50 ms | visible p99 ms | first {ramp} s p99 ms | peak RSS MB | idle CPU % of a core |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for l in &r.latency {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.2} |",
            l.contender,
            l.rate,
            l.records,
            l.p50_ms,
            l.p99_ms,
            l.max_ms,
            l.visible_p50_ms,
            l.visible_p99_ms,
            l.ramp_p99_ms,
            l.peak_rss_mb,
            l.idle_cpu_pct
        );
    }
    let lat = |c: &str| r.latency.iter().find(|l| l.contender == c);
    let (strait, mm2, raw) = (
        find(&r.catch_up, "strait", "catch-up"),
        find(&r.catch_up, "mm2-tuned", "catch-up"),
        find(&r.catch_up, "raw-pipe", "catch-up"),
    );
    let div = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b != 0.0 => format!("{:.2}", a / b),
        _ => "n/a".into(),
    };
    let eos = find(&r.catch_up, "strait-eos", "catch-up");
    let floor = find(&r.catch_up, "raw-pipe+header", "catch-up");
    let ratio = format!(
        "RATIO strait/mm2 throughput={} rss={} latency_p99={} cpu_per_gb={}; strait/raw throughput={} cpu_per_gb={} latency_p99={}; strait-eos/strait throughput={} cpu_per_gb={}; strait/raw+header throughput={} cpu_per_gb={} latency_p99={}",
        div(strait.map(CatchUp::records_per_s), mm2.map(CatchUp::records_per_s)),
        div(strait.map(|c| c.peak_rss_mb), mm2.map(|c| c.peak_rss_mb)),
        div(lat("strait").map(|l| l.p99_ms as f64), lat("mm2-tuned").map(|l| l.p99_ms as f64)),
        div(strait.map(CatchUp::cpu_per_gb), mm2.map(CatchUp::cpu_per_gb)),
        div(strait.map(CatchUp::records_per_s), raw.map(CatchUp::records_per_s)),
        div(strait.map(CatchUp::cpu_per_gb), raw.map(CatchUp::cpu_per_gb)),
        div(lat("strait").map(|l| l.p99_ms as f64), lat("raw-pipe").map(|l| l.p99_ms as f64)),
        div(eos.map(CatchUp::records_per_s), strait.map(CatchUp::records_per_s)),
        div(eos.map(CatchUp::cpu_per_gb), strait.map(CatchUp::cpu_per_gb)),
        div(strait.map(CatchUp::records_per_s), floor.map(CatchUp::records_per_s)),
        div(strait.map(CatchUp::cpu_per_gb), floor.map(CatchUp::cpu_per_gb)),
        div(lat("strait").map(|l| l.p99_ms as f64), lat("raw-pipe+header").map(|l| l.p99_ms as f64)),
    );
    // Issue 27's goals: against the raw pipe on each codec, against the record path uncompressed.
    let mut batches = String::new();
    for workload in ["catch-up", "catch-up-lz4", "catch-up-zstd"] {
        let (Some(b), raw) = (find(&r.catch_up, "strait-batches", workload), find(&r.catch_up, "raw-pipe", workload))
        else {
            continue;
        };
        let _ = write!(
            batches,
            "; {workload} strait-batches/raw throughput={} cpu_per_gb={} target_bytes_per_source_byte={:.2}",
            div(Some(b.records_per_s()), raw.map(CatchUp::records_per_s)),
            div(Some(b.cpu_per_gb()), raw.map(CatchUp::cpu_per_gb)),
            b.target_bytes_per_source_byte,
        );
        if let Some(eos) = find(&r.catch_up, "strait-batches-eos", workload) {
            let _ = write!(
                batches,
                " strait-batches-eos/strait-batches throughput={} cpu_per_gb={}",
                div(Some(eos.records_per_s()), Some(b.records_per_s())),
                div(Some(eos.cpu_per_gb()), Some(b.cpu_per_gb())),
            );
        }
        if workload == "catch-up" {
            let _ = write!(
                batches,
                " strait-batches/strait throughput={} cpu_per_gb={}",
                div(Some(b.records_per_s()), strait.map(CatchUp::records_per_s)),
                div(Some(b.cpu_per_gb()), strait.map(CatchUp::cpu_per_gb)),
            );
        }
    }
    // What a flow with no setting does (issue 45: `copy = "auto"` by default).
    if let Some(d) = find(&r.catch_up, "strait-default", "catch-up") {
        let _ = write!(
            batches,
            "; strait-default/mm2 throughput={} cpu_per_gb={} rss={} latency_p99={}; strait-default/strait-batches throughput={} cpu_per_gb={}",
            div(Some(d.records_per_s()), mm2.map(CatchUp::records_per_s)),
            div(Some(d.cpu_per_gb()), mm2.map(CatchUp::cpu_per_gb)),
            div(Some(d.peak_rss_mb), mm2.map(|c| c.peak_rss_mb)),
            div(lat("strait-default").map(|l| l.p99_ms as f64), lat("mm2-tuned").map(|l| l.p99_ms as f64)),
            div(Some(d.records_per_s()), find(&r.catch_up, "strait-batches", "catch-up").map(CatchUp::records_per_s)),
            div(Some(d.cpu_per_gb()), find(&r.catch_up, "strait-batches", "catch-up").map(CatchUp::cpu_per_gb)),
        );
    }
    let ratio = format!("{ratio}{batches}");
    let mut wide = String::new();
    for width in crate::wide::WIDTHS {
        let workload = crate::wide::workload(width);
        let (Some(strait), pipe) = (find(&r.wide, "strait", &workload), find(&r.wide, "raw-pipe+header", &workload))
        else {
            continue;
        };
        let _ = write!(
            wide,
            "; wide {width} partitions strait/raw+header throughput={} cpu_per_gb={} rss_mb={:.0}",
            div(Some(strait.records_per_s()), pipe.map(CatchUp::records_per_s)),
            div(Some(strait.cpu_per_gb()), pipe.map(CatchUp::cpu_per_gb)),
            strait.peak_rss_mb,
        );
    }
    let ratio = format!(
        "{ratio}{wide}; scale_out scaled/flow cpu_per_gb={}; eos_visible_p99_ms={}; {}",
        r.scale_out_cpu_ratio.map_or("n/a".into(), |x| format!("{x:.2}")),
        lat("strait-eos").map_or("n/a".into(), |l| l.visible_p99_ms.to_string()),
        r.wan.as_deref().map_or("wan n/a", |w| w.trim_start_matches("RATIO ")),
    );
    let _ = writeln!(md, "\n## Ratios (strait against MM2 tuned, uncompressed catch-up; then wide layouts (240, 1,200, 5,000 partitions), scale-out, exactly-once visible latency, across a long link)\n\n`{ratio}`\n");
    if let Ok(findings) = std::fs::read_to_string(strait_testkit::repo_root().join("bench/FINDINGS.md")) {
        md.push_str(&findings);
    }
    let _ = std::fs::write(dir.join("latest.md"), &md);

    // The chart: throughput and peak RSS per contender (uncompressed catch-up).
    let mut csv = String::from("contender,records_per_s,peak_rss_mb\n");
    for c in r.catch_up.iter().filter(|c| c.workload == "catch-up") {
        let _ = writeln!(csv, "{},{:.0},{:.1}", c.contender, c.records_per_s(), c.peak_rss_mb);
    }
    let csv_path = dir.join("latest.csv");
    let _ = std::fs::write(&csv_path, csv);
    let python = std::env::var("STRAIT_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let chart = Command::new(python)
        .arg(strait_testkit::repo_root().join("bench/chart.py"))
        .arg(&csv_path)
        .arg(dir.join("latest.png"))
        .status();
    if !matches!(chart, Ok(s) if s.success()) {
        eprintln!("chart not drawn (needs matplotlib; scripts/bench installs it)");
    }
    print!("{md}");
    ratio
}
