//! One catch-up run of a contender, as the report shows it, and the median of several.

use crate::load::RECORD_BYTES;

/// One catch-up run.
#[derive(Debug, Clone)]
pub struct CatchUp {
    pub contender: String,
    pub workload: String,
    pub records: i64,
    /// First record on the target to last record on the target.
    pub seconds: f64,
    /// Launch of the contender to last record on the target: its start-up included.
    pub from_launch_seconds: f64,
    pub cpu_seconds: f64,
    pub peak_rss_mb: f64,
    /// Every partition on the target holds exactly its source's count (in every run).
    pub complete: bool,
    /// The target topics' bytes on disk per byte of the source topics' once caught up
    /// ([`crate::load::bytes_on_disk`]): about 1 when batches keep their compression.
    pub target_bytes_per_source_byte: f64,
    /// Across an emulated long link ([`crate::wan`]): the bytes it carried during the run, both
    /// ways, per byte of the source topics on disk; NaN elsewhere.
    pub link_bytes_per_source_byte: f64,
    /// records/s of every run of this contender and workload, sorted (the row is the median).
    pub all_records_per_s: Vec<f64>,
}

impl CatchUp {
    pub fn records_per_s(&self) -> f64 {
        self.records as f64 / self.seconds
    }
    /// records/s from the contender's launch (start-up included).
    pub fn records_per_s_from_launch(&self) -> f64 {
        self.records as f64 / self.from_launch_seconds
    }
    pub fn mb_per_s(&self) -> f64 {
        self.records_per_s() * RECORD_BYTES as f64 / 1e6
    }
    pub fn cpu_per_gb(&self) -> f64 {
        self.cpu_seconds / (self.records as f64 * RECORD_BYTES as f64 / 1e9)
    }
}

/// The run with the median throughput, carrying every run's throughput and completeness.
pub fn median(mut runs: Vec<CatchUp>) -> CatchUp {
    runs.sort_by(|a, b| a.records_per_s().total_cmp(&b.records_per_s()));
    let all: Vec<f64> = runs.iter().map(CatchUp::records_per_s).collect();
    let complete = runs.iter().all(|r| r.complete);
    let mut mid = runs.swap_remove(runs.len() / 2);
    mid.all_records_per_s = all;
    mid.complete = complete;
    mid
}
