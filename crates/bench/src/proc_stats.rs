//! What `/proc` tells of a contender's process: its CPU seconds (whole, and per thread name) and
//! its memory.

use std::collections::BTreeMap;

/// CPU seconds (user + system) of a process, from `/proc/<pid>/stat`.
pub fn cpu_seconds(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(0.0, |stat| stat_cpu_seconds(&stat))
}

/// CPU seconds (user + system) of a `/proc/.../stat` line.
fn stat_cpu_seconds(stat: &str) -> f64 {
    // Fields after the command name, which ends with ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 =
        f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0) + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// CPU seconds of process `pid`'s threads, summed by thread name without its trailing digits
/// (`rdk:broker1` and `rdk:broker2` count as `rdk:broker`).
pub fn thread_cpu_seconds(pid: u32) -> BTreeMap<String, f64> {
    let mut by_name = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return by_name };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
        let name = stat.split_once('(').and_then(|(_, r)| r.rsplit_once(')')).map_or("?", |(n, _)| n);
        let name = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-');
        *by_name.entry(name.to_string()).or_insert(0.0) += stat_cpu_seconds(&stat);
    }
    by_name
}

/// A memory figure of a process in MB: `field` (`VmHWM:` peak, `VmRSS:` now) of
/// `/proc/<pid>/status`; 0 when the process is gone.
pub fn memory_mb(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Peak resident set (MB) of a process.
pub fn peak_rss_mb(pid: u32) -> f64 {
    memory_mb(pid, "VmHWM:")
}
