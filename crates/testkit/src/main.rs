//! `strait-testkit up COUNT ENV_FILE [DIR]`: starts COUNT Kafka clusters, writes
//! `STRAIT_TEST_BOOTSTRAP_<i>=host:port` lines (i from 1) to ENV_FILE once all are ready, then
//! holds them until SIGINT/SIGTERM and stops them. Used by `scripts/test`, `scripts/demo` and
//! `scripts/bench`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (count, env_file) = match (args.get(1).map(String::as_str), args.get(2), args.get(3)) {
        (Some("up"), Some(n), Some(f)) => match n.parse::<usize>() {
            Ok(n) if n > 0 => (n, PathBuf::from(f)),
            _ => return usage("COUNT must be a positive number"),
        },
        _ => return usage("missing arguments"),
    };
    let dir = args
        .get(4)
        .map(PathBuf::from)
        .unwrap_or_else(|| strait_testkit::repo_root().join(".cache/clusters"));
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
    }
    let clusters = match strait_testkit::start_clusters(count, &dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("strait-testkit: {e}");
            return ExitCode::FAILURE;
        }
    };
    let env: String = clusters
        .iter()
        .enumerate()
        .map(|(i, c)| format!("STRAIT_TEST_BOOTSTRAP_{}={}\n", i + 1, c.bootstrap))
        .collect();
    let tmp = env_file.with_extension("tmp");
    if let Err(e) = std::fs::write(&tmp, env).and_then(|_| std::fs::rename(&tmp, &env_file)) {
        eprintln!("strait-testkit: cannot write {}: {e}", env_file.display());
        return ExitCode::FAILURE;
    }
    for (i, c) in clusters.iter().enumerate() {
        eprintln!("strait-testkit: cluster {} at {} (pid {}, logs in {})", i + 1, c.bootstrap, c.pid(), c.dir.display());
    }
    while !STOP.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(clusters);
    ExitCode::SUCCESS
}

fn usage(why: &str) -> ExitCode {
    eprintln!("strait-testkit: {why}\nusage: strait-testkit up COUNT ENV_FILE [DIR]");
    ExitCode::FAILURE
}
