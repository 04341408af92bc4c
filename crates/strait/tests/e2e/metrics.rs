//! The operator endpoint through real brokers: `/metrics` in Prometheus' text format with the
//! per-partition counters, lag and latency, `/health` and `/ready`.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn metrics_health_and_ready_through_real_brokers() {
    metrics_health_and_ready("records").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_health_and_ready_copying_batches() {
    metrics_health_and_ready("batches").await;
}

/// The endpoint of a flow copying `copy` (`records` or `batches`) a backlog of 200,000 records.
async fn metrics_health_and_ready(copy: &str) {
    const PER_PARTITION: usize = 100_000;
    let f = TopicFlow::new(&format!("metrics-{copy}"), 2).await;
    let records: Vec<Rec> = (0..2 * PER_PARTITION).map(|i| Rec::simple((i % 2) as i32, "v")).collect();
    produce(&f.a, &f.topic, &records).await;
    let addr = free_addr();
    let config = f.config(&format!("progress_log_interval_ms = 200\ncopy = \"{copy}\""));
    let strait = Strait::launch(&f.p, &config, "info", &["--metrics-addr", &addr]);
    let partition =
        |p: i32| format!("source=\"{}\",target=\"{}\",topic=\"{}\",partition=\"{p}\"", f.src, f.dst, f.topic);
    // While the backlog is copied, the lag shows records not yet replicated; then it drops to 0.
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut max_lag, mut last) = (0.0f64, String::new());
    loop {
        if let Some((200, scrape)) = http_get(&addr, "/metrics") {
            max_lag = max_lag.max(sample(&scrape, "strait_replication_lag_records", &partition(0)).unwrap_or(0.0));
            let done =
                (0..2).all(|p| sample(&scrape, "strait_records_total", &partition(p)) == Some(PER_PARTITION as f64));
            last = scrape;
            if done {
                break;
            }
        }
        assert!(Instant::now() < deadline, "records_total never reached {PER_PARTITION}: {last}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(max_lag > 0.0, "lag seen while catching up");
    // The lag is read every 200 ms here (every 5 s by default): it reaches 0 once caught up.
    // Records count at their ack, offset syncs at the commit after it (up to
    // `commit_interval_ms` later), so the syncs are read from a scrape taken after both.
    wait_until("lag 0 and offset syncs written once caught up", Duration::from_secs(10), || {
        http_get(&addr, "/metrics").is_some_and(|(_, scrape)| {
            let settled = (0..2).all(|p| {
                sample(&scrape, "strait_replication_lag_records", &partition(p)) == Some(0.0)
                    && sample(&scrape, "strait_offset_syncs_total", &partition(p)).is_some_and(|n| n >= 1.0)
            });
            last = scrape;
            settled
        })
    })
    .await;
    for p in 0..2 {
        // The record path observes each record's latency, the batch path each batch's (its newest
        // record's): a backlog fetched in batches of many records.
        let observed = sample(&last, "strait_replication_latency_ms_count", &partition(p)).unwrap_or(0.0);
        match copy {
            "records" => assert_eq!(observed, PER_PARTITION as f64, "{last}"),
            _ => assert!((1.0..PER_PARTITION as f64 / 10.0).contains(&observed), "{observed} batches: {last}"),
        }
        assert!(sample(&last, "strait_bytes_total", &partition(p)).unwrap() >= PER_PARTITION as f64, "{last}");
    }
    assert_eq!(sample(&last, "strait_flow_up", &format!("source=\"{}\",target=\"{}\"", f.src, f.dst)), Some(1.0));
    assert_eq!(http_get(&addr, "/health").map(|r| r.0), Some(200));
    assert_eq!(http_get(&addr, "/ready").map(|r| r.0), Some(200));
    eprintln!("max lag seen on partition 0 while catching up: {max_lag}");
    let logs = strait.logs();
    assert!(strait.stop().success());
    let progress =
        logs.lines().find(|l| l.contains("catching up")).unwrap_or_else(|| panic!("a progress line: {logs}"));
    assert!(progress.contains("records_per_s=") && progress.contains("lag="), "{progress}");
}

/// `strait status` reads where a flow stands from the clusters alone, with Strait stopped.
#[tokio::test(flavor = "multi_thread")]
async fn status_shows_positions_lag_and_checkpoints_without_strait_running() {
    let f = TopicFlow::new("status", 2).await;
    produce(&f.a, &f.topic, &(0..100).map(|i| Rec::simple(i % 2, "v")).collect::<Vec<_>>()).await;
    let group = format!("{}-g", f.p);
    commit_group(&f.a, &group, &[(&f.topic, 0, 20), (&f.topic, 1, 20)]);
    let config = f.config(&format!(
        "groups = [\"{group}\"]\nemit_checkpoints_interval_ms = 1000\nrefresh_groups_interval_ms = 1000"
    ));
    let addr = free_addr();
    let strait = Strait::launch(&f.p, &config, "info", &["--metrics-addr", &addr]);
    wait_until("replicated and checkpointed", Duration::from_secs(60), || {
        count(&f.b, &f.remote) == Some(100)
            && last_checkpoint(&checkpoints(&f.b, &f.src), &group, &f.remote, 1).is_some()
    })
    .await;
    // MM2's checkpoint-latency-ms and the checkpoint count, per group partition and per flow.
    // Both are set once the checkpoint's ack is handled, which may follow its being readable.
    let group_partition =
        format!("source=\"{}\",target=\"{}\",group=\"{group}\",topic=\"{}\",partition=\"1\"", f.src, f.dst, f.remote);
    let flow = format!("source=\"{}\",target=\"{}\"", f.src, f.dst);
    wait_until("checkpoint latency and count served", Duration::from_secs(10), || {
        http_get(&addr, "/metrics").is_some_and(|(_, scrape)| {
            sample(&scrape, "strait_checkpoint_latency_ms", &group_partition).is_some_and(|ms| ms >= 0.0)
                && sample(&scrape, "strait_checkpoints_total", &flow).is_some_and(|n| n >= 2.0)
        })
    })
    .await;
    assert!(strait.stop().success());
    produce(&f.a, &f.topic, &(0..10).map(|_| Rec::simple(0, "later")).collect::<Vec<_>>()).await;

    let path = write_config(&format!("{}-status", f.p), &config);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["status", "--output", "json", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = |p: i64| {
        status["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["topic"] == f.topic.as_str() && r["partition"] == p)
            .cloned()
    };
    let (p0, p1) = (row(0).expect("partition 0"), row(1).expect("partition 1"));
    assert_eq!(
        (p0["end"].as_i64(), p0["position"].as_i64(), p0["lag"].as_i64()),
        (Some(60), Some(50), Some(10)),
        "{status}"
    );
    assert_eq!(
        (p1["end"].as_i64(), p1["position"].as_i64(), p1["lag"].as_i64()),
        (Some(50), Some(50), Some(0)),
        "{status}"
    );
    let checkpoint =
        status["checkpoints"].as_array().unwrap().iter().find(|c| c["group"] == group.as_str() && c["partition"] == 0);
    assert_eq!(checkpoint.and_then(|c| c["upstream"].as_i64()), Some(20), "{status}");

    // The source lost (nothing listens at its address): the target's side is still printed.
    let lost = free_addr();
    let path = write_config(&format!("{}-status-lost", f.p), &config.replacen(&f.a, &lost, 1));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["status", "--output", "json", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("source cluster {} at {lost} does not answer", f.src)), "{stderr}");
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows: Vec<_> =
        status["partitions"].as_array().unwrap().iter().filter(|r| r["topic"] == f.topic.as_str()).collect();
    assert_eq!(rows.len(), 2, "{status}");
    for r in rows {
        assert_eq!((r["position"].as_i64(), r["end"].as_i64(), r["lag"].as_i64()), (Some(50), None, None), "{status}");
    }
    let checkpoint =
        status["checkpoints"].as_array().unwrap().iter().find(|c| c["group"] == group.as_str() && c["partition"] == 0);
    assert_eq!(checkpoint.and_then(|c| c["upstream"].as_i64()), Some(20), "{status}");
}

/// The page at `/` rendered by a real headless browser (its script reads `/metrics`).
fn rendered_status_page(addr: &str) -> String {
    let out = std::process::Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=4000", "--dump-dom"])
        .arg(format!("http://{addr}/"))
        .output()
        .expect("chromium (scripts/test installs it when missing)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The status page once it shows `records` records (a loaded machine may need a few renders:
/// the page's fetch is real time, the browser's budget virtual).
fn status_page_showing(addr: &str, topic: &str, records: i64) -> String {
    let mut dom = String::new();
    for _ in 0..5 {
        dom = rendered_status_page(addr);
        if cell(&dom, topic, "records") == Some(records) {
            break;
        }
    }
    dom
}

/// The number in the `<td class="{class}">` of `topic`'s row of `dom` (heartbeats topics of the
/// shared clusters have rows too).
fn cell(dom: &str, topic: &str, class: &str) -> Option<i64> {
    let row = &dom[dom.find(&format!("data-topic=\"{topic}\""))?..];
    let open = format!("<td class=\"{class}\">");
    let start = row.find(&open)? + open.len();
    row[start..].split('<').next()?.trim().parse().ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn status_page_in_a_headless_browser_shows_the_flow_and_follows_new_records() {
    let f = TopicFlow::new("page", 1).await;
    produce(&f.a, &f.topic, &(0..100).map(|_| Rec::simple(0, "v")).collect::<Vec<_>>()).await;
    let addr = free_addr();
    let strait = Strait::launch(&f.p, &f.config("progress_log_interval_ms = 500"), "info", &["--metrics-addr", &addr]);
    wait_until("replicated", Duration::from_secs(60), || count(&f.b, &f.remote) == Some(100)).await;
    let labels = format!("source=\"{}\",target=\"{}\",topic=\"{}\",partition=\"0\"", f.src, f.dst, f.topic);
    let acknowledged = |n: f64| {
        http_get(&addr, "/metrics").is_some_and(|(_, m)| sample(&m, "strait_records_total", &labels) == Some(n))
    };
    wait_until("the batch committed", Duration::from_secs(30), || acknowledged(100.0)).await;
    let first = status_page_showing(&addr, &f.topic, 100);
    assert!(first.contains(&format!("{} -&gt; {}", f.src, f.dst)) && first.contains("running"), "{first}");
    assert!(first.contains(&format!("data-topic=\"{}\"", f.topic)), "{first}");
    assert_eq!(cell(&first, &f.topic, "records"), Some(100), "{first}");
    assert!(cell(&first, &f.topic, "lag").is_some(), "{first}");
    produce(&f.a, &f.topic, &(0..50).map(|_| Rec::simple(0, "w")).collect::<Vec<_>>()).await;
    wait_until("the new records committed", Duration::from_secs(60), || acknowledged(150.0)).await;
    let second = status_page_showing(&addr, &f.topic, 150);
    assert_eq!(cell(&second, &f.topic, "records"), Some(150), "the page follows new records: {second}");
    assert!(strait.stop().success());
}

/// `[metrics] per_partition = false`: one series per topic, summed over its partitions.
#[tokio::test(flavor = "multi_thread")]
async fn metrics_per_topic_sum_the_partitions() {
    let f = TopicFlow::new("pertopic", 3).await;
    produce(&f.a, &f.topic, &(0..30).map(|i| Rec::simple(i % 3, "v")).collect::<Vec<_>>()).await;
    let addr = free_addr();
    let config = format!("{}\n[metrics]\nper_partition = false\n", f.config("progress_log_interval_ms = 500"));
    let strait = Strait::launch(&f.p, &config, "info", &["--metrics-addr", &addr]);
    let topic = format!("source=\"{}\",target=\"{}\",topic=\"{}\",partition=\"\"", f.src, f.dst, f.topic);
    wait_until("per-topic records and lag", Duration::from_secs(60), || {
        http_get(&addr, "/metrics").is_some_and(|(_, m)| {
            sample(&m, "strait_records_total", &topic) == Some(30.0)
                && sample(&m, "strait_replication_lag_records", &topic) == Some(0.0)
        })
    })
    .await;
    let scrape = http_get(&addr, "/metrics").unwrap().1;
    assert!(!scrape.contains("partition=\"0\""), "no per-partition series: {scrape}");
    assert!(strait.stop().success());
}

/// A restarted flow's "catching up" lines count only the records copied since the line before:
/// the first line once counted the saved positions of partitions assigned after the first lag
/// reading (millions of records per second with the whole backlog still to copy).
#[tokio::test(flavor = "multi_thread")]
async fn progress_lines_after_a_restart_count_only_records_copied() {
    const FIRST: usize = 200_000;
    const SECOND: usize = 100_000;
    let f = TopicFlow::new("progress", 2).await;
    let config = f.config("progress_log_interval_ms = 200");
    let records = |n: usize| (0..n).map(|i| Rec::simple((i % 2) as i32, "v")).collect::<Vec<_>>();
    produce(&f.a, &f.topic, &records(FIRST)).await;
    let strait = Strait::launch(&f.p, &config, "info", &[]);
    wait_until("first backlog copied", Duration::from_secs(120), || count(&f.b, &f.remote) == Some(FIRST as i64)).await;
    let log = strait.log.clone();
    assert!(strait.stop().success());
    // Both runs append to one log file: the first run's lines (its own copy) are skipped.
    let first_run_log = std::fs::read_to_string(&log).unwrap().len();
    produce(&f.a, &f.topic, &records(SECOND)).await;
    let strait = Strait::launch(&f.p, &config, "info", &[]);
    wait_until("second backlog copied", Duration::from_secs(120), || {
        count(&f.b, &f.remote) == Some((FIRST + SECOND) as i64)
    })
    .await;
    let logs = strait.logs().split_off(first_run_log);
    assert!(strait.stop().success());
    // Each line's rate is over at least the 200 ms interval: rate × 0.2 s never exceeds what
    // was copied in it, so the lines together cannot claim more than this run copied.
    let rates: Vec<u64> = logs
        .lines()
        .filter(|l| l.contains("catching up"))
        .filter_map(|l| l.split("records_per_s=").nth(1)?.split_whitespace().next()?.parse().ok())
        .collect();
    let claimed = rates.iter().sum::<u64>() as f64 * 0.2;
    assert!(claimed <= (SECOND + 1_000) as f64, "progress lines claim {claimed} records copied of {SECOND}: {rates:?}");
}

/// Connections to local `port` the server has accepted: ESTABLISHED lines of `/proc/net/tcp`
/// with that local port and a socket inode (a connection still in the listener's backlog has
/// none: no process holds it yet), counted once per peer address (the kernel lists the table in
/// chunks, so a socket can appear twice while connections open and close).
fn held_by_server(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let peers: std::collections::HashSet<&str> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port =
                fields.get(1).and_then(|a| a.rsplit(':').next()).and_then(|p| u16::from_str_radix(p, 16).ok());
            let held = local_port == Some(port)
                && fields.get(3) == Some(&"01")
                && fields.get(9).is_some_and(|inode| *inode != "0");
            held.then(|| fields.get(2).copied()).flatten()
        })
        .collect();
    peers.len()
}

/// Reads `stream` until the server closes it (EOF or reset), until `since + limit` at most;
/// returns how long after `since` it was closed, `None` if it was still open.
fn closed_by_server(stream: &mut TcpStream, since: Instant, limit: Duration) -> Option<Duration> {
    let mut buf = [0u8; 4096];
    loop {
        let left = limit.checked_sub(since.elapsed()).filter(|d| !d.is_zero())?;
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buf) {
            Ok(0) => return Some(since.elapsed()),
            Ok(_) => {} // hyper's 408 to a timed-out head
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return None,
            Err(_) => return Some(since.elapsed()),
        }
    }
}

/// The case: 200 silent TCP connections to the metrics endpoint stayed open for ever.
/// Now the server holds `MAX_CONNECTIONS` of them at a time, no more (the others wait in the
/// backlog), closes each once `REQUEST_HEAD_TIMEOUT` passes without a request, closes a
/// kept-alive connection idle that long after its response, and `/metrics` is answered while
/// the cap is reached, once the silent connections ahead of it have timed out.
#[tokio::test(flavor = "multi_thread")]
async fn metrics_endpoint_closes_silent_and_idle_connections_and_caps_them() {
    use strait::http::server::{MAX_CONNECTIONS, REQUEST_HEAD_TIMEOUT};
    const SILENT: usize = 200;
    const MARGIN: Duration = Duration::from_secs(3);
    let f = TopicFlow::new("httpcap", 1).await;
    let addr = free_addr();
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    let strait = Strait::launch(&f.p, &f.config(""), "info", &["--metrics-addr", &addr]);
    wait_until("/health answers", Duration::from_secs(30), || http_get(&addr, "/health").is_some_and(|r| r.0 == 200))
        .await;

    // A kept-alive connection, idle after its response, is closed after the head timeout.
    let mut kept = TcpStream::connect(&addr).unwrap();
    kept.write_all(b"GET /health HTTP/1.1\r\nHost: strait\r\n\r\n").unwrap();
    kept.set_read_timeout(Some(MARGIN)).unwrap();
    let mut response = Vec::new();
    while !response.ends_with(b"ok\n") {
        let mut buf = [0u8; 1024];
        let n = kept.read(&mut buf).expect("a response");
        assert!(n > 0, "closed before the response: {}", String::from_utf8_lossy(&response));
        response.extend_from_slice(&buf[..n]);
    }
    let idle = closed_by_server(&mut kept, Instant::now(), REQUEST_HEAD_TIMEOUT + MARGIN);
    eprintln!("kept-alive connection closed {idle:?} after its response");
    let idle = idle.expect("an idle kept-alive connection is closed");
    assert!(idle + Duration::from_millis(500) >= REQUEST_HEAD_TIMEOUT, "kept alive until the timeout: {idle:?}");

    // Silent connections: the server holds the cap, round after round (one round of
    // MAX_CONNECTIONS per timeout), and /metrics, queued behind them all, waits its turn.
    let rounds = u32::try_from(SILENT.div_ceil(MAX_CONNECTIONS)).unwrap();
    let bound = REQUEST_HEAD_TIMEOUT * rounds + MARGIN;
    let opened = Instant::now();
    let silent: Vec<TcpStream> =
        (0..SILENT).map(|_| TcpStream::connect(&addr).expect("connected (accepted or in the backlog)")).collect();
    // Read mid-round, away from the moments a round closes and the next is accepted: the
    // kernel's table is not listed at one instant.
    let sampler = std::thread::spawn(move || {
        (0..rounds - 1)
            .map(|round| {
                let mid_round = REQUEST_HEAD_TIMEOUT * round + REQUEST_HEAD_TIMEOUT / 2;
                std::thread::sleep(mid_round.saturating_sub(opened.elapsed()));
                held_by_server(port)
            })
            .collect::<Vec<usize>>()
    });
    let scrape = std::thread::spawn({
        let addr = addr.clone();
        move || {
            let mut stream = TcpStream::connect(&addr).unwrap();
            stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: strait\r\nConnection: close\r\n\r\n").unwrap();
            stream.set_read_timeout(Some(bound)).unwrap();
            let mut response = Vec::new();
            let read = stream.read_to_end(&mut response);
            (read.is_ok(), String::from_utf8_lossy(&response).into_owned(), opened.elapsed())
        }
    });
    let closes: Vec<Option<Duration>> = silent
        .into_iter()
        .map(|mut s| std::thread::spawn(move || closed_by_server(&mut s, opened, bound)))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    let (read, response, scraped_in) = scrape.join().unwrap();
    let held = sampler.join().unwrap();
    let open = closes.iter().filter(|c| c.is_none()).count();
    let (first, last) = (closes.iter().flatten().min().copied(), closes.iter().flatten().max().copied());
    eprintln!(
        "{SILENT} silent connections: held by the server mid-round {held:?}, first closed after {first:?}, last after \
         {last:?}, {open} still open; /metrics answered after {scraped_in:?}"
    );
    assert!(held.iter().all(|n| *n == MAX_CONNECTIONS), "the server holds its cap, no more: {held:?}");
    assert_eq!(open, 0, "every silent connection is closed within {bound:?}");
    let first = first.unwrap();
    assert!(
        first + Duration::from_millis(500) >= REQUEST_HEAD_TIMEOUT && first <= REQUEST_HEAD_TIMEOUT + MARGIN,
        "{first:?}"
    );
    assert!(read && response.starts_with("HTTP/1.1 200") && response.contains("strait_flow_up"), "{response}");
    assert_eq!(http_get(&addr, "/health").map(|r| r.0), Some(200), "served again once the silent ones are gone");
    assert!(strait.stop().success());
}
