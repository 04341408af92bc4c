//! The command line with bad input: each invalid config exits non-zero naming the field, and an
//! unreachable cluster is retried with backoff and logged, never a panic. No brokers needed.

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn strait(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_strait")).args(args).output().expect("run strait")
}

fn write(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("strait-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

const CLUSTERS: &str = r#"
[[clusters]]
alias = "us"
bootstrap_servers = "127.0.0.1:9092"
[[clusters]]
alias = "eu"
bootstrap_servers = "127.0.0.1:9093"
"#;

fn with_flow(flow: &str) -> String {
    format!("{CLUSTERS}\n[[flows]]\nsource = \"us\"\ntarget = \"eu\"\n{flow}\n")
}

#[test]
fn valid_config_passes_validate() {
    let out = strait(&["validate", "--config", write("valid", &with_flow("")).to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn invalid_configs_exit_non_zero_naming_the_field() {
    let cases: Vec<(&str, String, &str)> = vec![
        ("unknown top-level key", format!("{}\nmirrors = 1\n", with_flow("")), "mirrors"),
        ("unknown cluster key", with_flow("").replace("bootstrap_servers = \"127.0.0.1:9092\"", "bootstrap_servers = \"x:1\"\nbootstrap = \"y\""), "bootstrap"),
        ("unknown flow key", with_flow("topic = [\"a\"]"), "topic"),
        ("unknown alias", with_flow("").replace("target = \"eu\"", "target = \"apac\""), "flows[0].target"),
        ("source equals target", with_flow("").replace("target = \"eu\"", "target = \"us\""), "flows[0].target"),
        ("duplicate flow", format!("{}\n[[flows]]\nsource = \"us\"\ntarget = \"eu\"\n", with_flow("")), "flows[1]"),
        ("alias with separator", with_flow("").replace("alias = \"us\"", "alias = \"us.east\"").replace("source = \"us\"", "source = \"us.east\""), "flows[0].source"),
        ("bad regex", with_flow("topics = [\"ok\", \"(unclosed\"]"), "flows[0].topics[1]"),
        ("zero interval", with_flow("refresh_topics_interval_ms = 0"), "flows[0].refresh_topics_interval_ms"),
        ("negative lag", with_flow("offset_lag_max = -1"), "offset_lag_max"),
        ("unknown policy", with_flow("replication_policy = \"mirror\""), "replication_policy"),
        ("duplicate alias", format!("{CLUSTERS}\n[[clusters]]\nalias = \"us\"\nbootstrap_servers = \"h:1\"\n[[flows]]\nsource = \"us\"\ntarget = \"eu\"\n"), "clusters[2].alias"),
        ("bad residency regex", format!("{}\n[[residency.policies]]\nname = \"gdpr\"\ntopics = [\"[\"]\nallow_zones = [\"eu\"]\n", with_flow("")), "residency.policies[0].topics[0]"),
        ("bad residency default", format!("{}\n[residency]\ndefault = \"maybe\"\n", with_flow("")), "default"),
        ("no flows", CLUSTERS.to_string(), "flows"),
        ("empty topic list", with_flow("topics = []"), "flows[0].topics"),
        ("alias not usable in topic names", with_flow("").replace("alias = \"eu\"", "alias = \"e u\"").replace("target = \"eu\"", "target = \"e u\""), "clusters[1].alias"),
        ("unknown librdkafka property", with_flow("").replace("alias = \"eu\"", "alias = \"eu\"\nclient = { \"bogus.prop\" = \"1\" }"), "clusters[1].client"),
        ("client key Strait controls", with_flow("").replace("alias = \"eu\"", "alias = \"eu\"\nclient = { \"auto.offset.reset\" = \"latest\" }"), "clusters[1].client.\"auto.offset.reset\""),
        ("unknown delivery", with_flow("delivery = \"exactly-once\""), "delivery"),
        ("exactly-once with offset syncs on the source", with_flow("delivery = \"exactly_once\"\noffset_syncs_topic_location = \"source\""), "flows[0].offset_syncs_topic_location"),
        ("transaction timeout within the commit interval", with_flow("delivery = \"exactly_once\"\ntransaction_timeout_ms = 500"), "flows[0].transaction_timeout_ms"),
        ("blank bootstrap list", with_flow("").replace("127.0.0.1:9093", " , "), "clusters[1].bootstrap_servers"),
        ("zone both allowed and denied", format!("{}\n[[residency.policies]]\nname = \"p\"\ntopics = [\"x\"]\nallow_zones = [\"eu\"]\ndeny_zones = [\"eu\"]\n", with_flow("")), "residency.policies[0].deny_zones"),
    ];
    assert!(cases.len() >= 8);
    for (what, text, field) in cases {
        let path = write(&what.replace(' ', "-"), &text);
        for cmd in ["validate", "run"] {
            let out = strait(&[cmd, "--config", path.to_str().unwrap()]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{what}: `strait {cmd}` must exit 2; stderr: {stderr}");
            assert!(stderr.contains(field), "{what}: error must name {field:?}; got: {stderr}");
            assert!(!stderr.contains("panicked"), "{what}: {stderr}");
        }
    }
}

#[test]
fn missing_config_file_is_named() {
    let out = strait(&["validate", "--config", "/nonexistent/strait.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/strait.toml"));
}

#[test]
fn unreachable_cluster_is_retried_with_backoff_then_stops_cleanly() {
    // Ports that were free a moment ago: nothing listens there.
    let port = || TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let text = format!(
        "[[clusters]]\nalias = \"src\"\nbootstrap_servers = \"127.0.0.1:{}\"\n[[clusters]]\nalias = \"dst\"\nbootstrap_servers = \"127.0.0.1:{}\"\n[[flows]]\nsource = \"src\"\ntarget = \"dst\"\n",
        port(),
        port()
    );
    let path = write("unreachable", &text);
    let log = path.with_extension("log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["run", "--config", path.to_str().unwrap()])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    let retries = loop {
        assert!(
            child.try_wait().unwrap().is_none(),
            "strait exited instead of retrying: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        let logs = std::fs::read_to_string(&log).unwrap();
        let retries: Vec<String> =
            logs.lines().filter(|l| l.contains("flow could not start; retrying")).map(String::from).collect();
        if retries.len() >= 2 {
            break retries;
        }
        assert!(Instant::now() < deadline, "fewer than 2 logged retries in 40 s: {logs}");
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(
        retries[0].contains("retry_in_ms=500") && retries[1].contains("retry_in_ms=1000"),
        "backoff doubles: {retries:?}"
    );
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    let logs = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "SIGTERM while retrying exits 0: {logs}");
    assert!(!logs.contains("panicked"), "{logs}");
}
