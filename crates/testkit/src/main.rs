//! `strait-testkit`, the project's Kafka launcher and demo helper:
//! - `up COUNT ENV_FILE [DIR] [--three-node]`: starts COUNT Kafka clusters, writes
//!   `STRAIT_TEST_BOOTSTRAP_<i>=host:port` lines (i from 1) to ENV_FILE once all are ready, then
//!   holds them until SIGINT/SIGTERM and stops them. Used by `scripts/test` and `scripts/demo`.
//!   With `--three-node`, also a [`ThreeNodeCluster`] (`STRAIT_TEST_THREE_NODE_BOOTSTRAP`, every
//!   node's `host:port`), whose nodes tests kill, stop, pause and restart through
//!   [`strait_testkit::multi::Control`] at `STRAIT_TEST_THREE_NODE_CONTROL=host:port`.
//! - `sample BOOTSTRAP`: creates and fills the demo topics.
//! - `counts BOOTSTRAP [PREFIX]`: prints `topic count` per demo topic (`-` when absent).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use strait_testkit::multi::ThreeNodeCluster;
use strait_testkit::sample;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

const USAGE: &str =
    "usage: strait-testkit up COUNT ENV_FILE [DIR] [--three-node] | sample BOOTSTRAP | counts BOOTSTRAP [PREFIX]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["up", count, env_file, rest @ ..] => match count.parse::<usize>() {
            Ok(n) if n > 0 => {
                let three_node = rest.contains(&"--three-node");
                let dir = rest.iter().find(|a| !a.starts_with("--")).map(PathBuf::from);
                up(n, PathBuf::from(env_file), dir, three_node)
            }
            _ => Err("COUNT must be a positive number".to_string()),
        },
        ["sample", bootstrap] => sample::produce(bootstrap)
            .map(|()| {
                for (topic, partitions, records) in sample::TOPICS {
                    println!("wrote {records} records to {topic} ({partitions} partitions)");
                }
            })
            .map_err(|e| e.to_string()),
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

fn up(count: usize, env_file: PathBuf, dir: Option<PathBuf>, three_node: bool) -> Result<(), String> {
    let dir = dir.unwrap_or_else(|| strait_testkit::repo_root().join(".cache/clusters"));
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
    }
    // Launched first, so its nodes start while the single-node clusters do.
    let mut three = three_node.then(|| ThreeNodeCluster::launch(&dir)).transpose().map_err(|e| e.to_string())?;
    let clusters = strait_testkit::start_clusters(count, &dir).map_err(|e| e.to_string())?;
    let mut env: String = clusters
        .iter()
        .enumerate()
        .map(|(i, c)| format!("STRAIT_TEST_BOOTSTRAP_{}={}\n", i + 1, c.bootstrap))
        .collect();
    let control = match three.as_mut() {
        Some(three) => {
            three.wait_started().map_err(|e| e.to_string())?;
            let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
            let addr = listener.local_addr().map_err(|e| e.to_string())?;
            env.push_str(&format!(
                "STRAIT_TEST_THREE_NODE_BOOTSTRAP={}\nSTRAIT_TEST_THREE_NODE_CONTROL={addr}\n",
                three.bootstrap
            ));
            eprintln!("strait-testkit: three-node cluster at {} (control at {addr})", three.bootstrap);
            Some(listener)
        }
        None => None,
    };
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
        // Served on this thread, which spawned the nodes: a node restarted from a thread that
        // ends would die with it (PR_SET_PDEATHSIG).
        if let (Some(three), Some(listener)) = (three.as_mut(), control.as_ref()) {
            three.serve_pending(listener).map_err(|e| format!("three-node control listener: {e}"))?;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(three);
    drop(clusters);
    Ok(())
}
