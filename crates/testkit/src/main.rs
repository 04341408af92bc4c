//! `strait-testkit`, the project's Kafka launcher and demo helper:
//! - `up COUNT ENV_FILE [DIR]`: starts COUNT Kafka clusters, writes
//!   `STRAIT_TEST_BOOTSTRAP_<i>=host:port` lines (i from 1) to ENV_FILE once all are ready, then
//!   holds them until SIGINT/SIGTERM and stops them. Used by `scripts/test` and `scripts/demo`.
//! - `sample BOOTSTRAP`: creates and fills the demo topics.
//! - `counts BOOTSTRAP [PREFIX]`: prints `topic count` per demo topic (`-` when absent).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use strait_testkit::sample;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

const USAGE: &str = "usage: strait-testkit up COUNT ENV_FILE [DIR] | sample BOOTSTRAP | counts BOOTSTRAP [PREFIX]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["up", count, env_file, rest @ ..] => match count.parse::<usize>() {
            Ok(n) if n > 0 => up(n, PathBuf::from(env_file), rest.first().map(PathBuf::from)),
            _ => Err("COUNT must be a positive number".to_string()),
        },
        ["sample", bootstrap] => sample::produce(bootstrap).map_err(|e| e.to_string()),
        ["counts", bootstrap, rest @ ..] => sample::counts(bootstrap, rest.first().copied().unwrap_or(""))
            .map(|counts| {
                for (topic, n) in counts {
                    println!("{topic} {}", n.map_or("-".to_string(), |n| n.to_string()));
                }
            })
            .map_err(|e| e.to_string()),
        _ => Err(USAGE.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strait-testkit: {e}");
            ExitCode::FAILURE
        }
    }
}

fn up(count: usize, env_file: PathBuf, dir: Option<PathBuf>) -> Result<(), String> {
    let dir = dir.unwrap_or_else(|| strait_testkit::repo_root().join(".cache/clusters"));
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
    }
    let clusters = strait_testkit::start_clusters(count, &dir).map_err(|e| e.to_string())?;
    let env: String = clusters
        .iter()
        .enumerate()
        .map(|(i, c)| format!("STRAIT_TEST_BOOTSTRAP_{}={}\n", i + 1, c.bootstrap))
        .collect();
    let tmp = env_file.with_extension("tmp");
    std::fs::write(&tmp, env)
        .and_then(|_| std::fs::rename(&tmp, &env_file))
        .map_err(|e| format!("cannot write {}: {e}", env_file.display()))?;
    for (i, c) in clusters.iter().enumerate() {
        eprintln!(
            "strait-testkit: cluster {} at {} (pid {}, logs in {})",
            i + 1,
            c.bootstrap,
            c.pid(),
            c.dir.display()
        );
    }
    while !STOP.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(clusters);
    Ok(())
}
