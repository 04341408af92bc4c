//! The command line with bad input: each invalid config exits non-zero naming the field (numeric
//! settings out of their documented bounds, client files that cannot be read, a client librdkafka
//! cannot create), and an unreachable cluster is retried with backoff and logged, never a panic.
//! No brokers needed.

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

/// A flow whose target cluster `eu` has `client` (TOML lines of its `[clusters.client]` table).
fn with_target_client(client: &str) -> String {
    format!("{CLUSTERS}[clusters.client]\n{client}\n[[flows]]\nsource = \"us\"\ntarget = \"eu\"\n")
}

/// `[flows.scale_out]` with `lines`.
fn with_scale_out(lines: &str) -> String {
    with_flow(&format!("[flows.scale_out]\nenabled = true\n{lines}"))
}

/// A file in this run's temp folder holding `text`: its path.
fn temp_file(name: &str, text: &str) -> String {
    let path = write(name, text).with_extension("pem");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A file `file` in this run's temp folder holding `text`: its path.
fn temp_named(file: &str, text: &str) -> String {
    let path = write("any", "").with_file_name(file);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

const MISSING: &str = "/nonexistent/strait/file.pem";

#[test]
fn valid_config_passes_validate() {
    let out = strait(&["validate", "--config", write("valid", &with_flow("")).to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    // `copy = "auto"`, the default, says what it takes and why.
    assert!(said.contains("copies batches (copy = \"auto\" takes batches"), "{said}");
    let records = write("valid-records", &with_flow("copy = \"records\"\n"));
    let said =
        String::from_utf8_lossy(&strait(&["validate", "--config", records.to_str().unwrap()]).stdout).to_string();
    assert!(said.contains("copies records (copy = \"records\")"), "{said}");
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
        // Numeric bounds (the config's doc comments state them).
        ("slots of 2^31", with_scale_out("slots = 2147483648"), "flows[0].scale_out.slots"),
        ("slots above the most", with_scale_out("slots = 1001"), "flows[0].scale_out.slots"),
        ("slots above u32", with_scale_out("slots = 4294967296"), "slots"),
        ("slots out of bounds with scale-out off", with_flow("[flows.scale_out]\nslots = 2147483648"), "flows[0].scale_out.slots"),
        ("session timeout above librdkafka's", with_scale_out("session_timeout_ms = 3600001"), "flows[0].scale_out.session_timeout_ms"),
        ("session timeout below 1 s", with_scale_out("session_timeout_ms = 999"), "flows[0].scale_out.session_timeout_ms"),
        ("commit interval of i64::MAX ms", with_flow("commit_interval_ms = 9223372036854775807"), "flows[0].commit_interval_ms"),
        ("refresh interval over a year", with_flow("refresh_topics_interval_ms = 31536000001"), "flows[0].refresh_topics_interval_ms"),
        ("progress interval of i64::MAX ms", with_flow("progress_log_interval_ms = 9223372036854775807"), "flows[0].progress_log_interval_ms"),
        ("topic config sync interval of i64::MAX ms", with_flow("sync_topic_configs_interval_ms = 9223372036854775807"), "flows[0].sync_topic_configs_interval_ms"),
        ("checkpoint interval of i64::MAX ms", with_flow("emit_checkpoints_interval_ms = 9223372036854775807"), "flows[0].emit_checkpoints_interval_ms"),
        ("group refresh interval of i64::MAX ms", with_flow("refresh_groups_interval_ms = 9223372036854775807"), "flows[0].refresh_groups_interval_ms"),
        ("group sync interval of i64::MAX ms", with_flow("sync_group_offsets_interval_ms = 9223372036854775807"), "flows[0].sync_group_offsets_interval_ms"),
        ("heartbeat interval of i64::MAX ms", with_flow("emit_heartbeats_interval_ms = 9223372036854775807"), "flows[0].emit_heartbeats_interval_ms"),
        ("zero heartbeat interval", with_flow("emit_heartbeats_interval_ms = 0"), "flows[0].emit_heartbeats_interval_ms"),
        ("transaction timeout of i64::MAX ms", with_flow("delivery = \"exactly_once\"\ntransaction_timeout_ms = 9223372036854775807"), "flows[0].transaction_timeout_ms"),
        ("transaction timeout below librdkafka's 1 s", with_flow("delivery = \"exactly_once\"\ncommit_interval_ms = 500\ntransaction_timeout_ms = 999"), "flows[0].transaction_timeout_ms"),
        ("zero batch records", with_flow("max_batch_records = 0"), "flows[0].max_batch_records"),
        ("batch records above the most", with_flow("max_batch_records = 100000001"), "flows[0].max_batch_records"),
        ("batch bytes above 16 GiB", with_flow("max_batch_bytes = 17179869185"), "flows[0].max_batch_bytes"),
        ("offset lag above i64", with_flow("offset_lag_max = 9223372036854775808"), "offset_lag_max"),
        ("replication factor above i16", with_flow("replication_factor = 32768"), "flows[0].replication_factor"),
        ("replication factor of 2^31", with_flow("replication_factor = 2147483648"), "replication_factor"),
        ("replication factor 0", with_flow("replication_factor = 0"), "flows[0].replication_factor"),
        ("replication factor -2", with_flow("replication_factor = -2"), "flows[0].replication_factor"),
        // Files named in client settings, checked before anything connects.
        ("missing CA file", with_target_client(&format!("\"security.protocol\" = \"ssl\"\n\"ssl.ca.location\" = \"{MISSING}\"")), "clusters[1].client.\"ssl.ca.location\""),
        ("missing client certificate", with_target_client(&format!("\"ssl.certificate.location\" = \"{MISSING}\"")), "clusters[1].client.\"ssl.certificate.location\""),
        ("missing client key", with_target_client(&format!("\"ssl.key.location\" = \"{MISSING}\"")), "clusters[1].client.\"ssl.key.location\""),
        ("missing keystore", with_target_client(&format!("\"ssl.keystore.location\" = \"{MISSING}\"")), "clusters[1].client.\"ssl.keystore.location\""),
        ("missing CRL", with_target_client(&format!("\"ssl.crl.location\" = \"{MISSING}\"")), "clusters[1].client.\"ssl.crl.location\""),
        ("missing Kerberos keytab", with_target_client(&format!("\"sasl.kerberos.keytab\" = \"{MISSING}\"")), "clusters[1].client.\"sasl.kerberos.keytab\""),
        ("client key is a directory", with_target_client("\"ssl.key.location\" = \"/tmp\""), "clusters[1].client.\"ssl.key.location\""),
    ];
    assert!(cases.len() >= 30);
    let rows = cases.len();
    let mut failed = Vec::new();
    for (what, text, field) in cases {
        let path = write(&what.replace(' ', "-"), &text);
        let mut wrong = Vec::new();
        for cmd in ["validate", "run"] {
            // A config `validate` passes would make `run` retry for ever: bounded here.
            let out = strait_within(&[cmd, "--config", path.to_str().unwrap()], Duration::from_secs(10));
            let stderr = String::from_utf8_lossy(&out.stderr);
            if out.status.code() != Some(2) || !stderr.contains(field) || stderr.contains("panicked") {
                wrong.push(format!("`strait {cmd}` must exit 2 naming {field:?}: {:?}, {stderr}", out.status));
            }
        }
        if !wrong.is_empty() {
            failed.push(format!("{what}: {}", wrong.join("; ")));
        }
    }
    assert!(failed.is_empty(), "{} of {rows} rows failed:\n{}", failed.len(), failed.join("\n"));
}

/// Settings only a client can refuse: `validate` passes them (the files exist), and `run` stops
/// within 30 s naming the setting instead of retrying for ever.
#[test]
fn clients_librdkafka_cannot_create_stop_run_naming_the_setting() {
    let garbage = temp_file("garbage", "not a certificate\n");
    let ssl = |key: &str| format!("\"security.protocol\" = \"ssl\"\n\"{key}\" = \"{garbage}\"");
    let cases = [
        ("unparsable CA file", with_target_client(&ssl("ssl.ca.location")), "ssl.ca.location"),
        (
            "unparsable client certificate",
            with_target_client(&ssl("ssl.certificate.location")),
            "ssl.certificate.location",
        ),
        ("unparsable client key", with_target_client(&ssl("ssl.key.location")), "ssl.key.location"),
    ];
    for (what, text, field) in cases {
        let path = write(&what.replace(' ', "-"), &text);
        let out = strait(&["validate", "--config", path.to_str().unwrap()]);
        assert!(out.status.success(), "{what}: only a client can tell: {}", String::from_utf8_lossy(&out.stderr));
        let started = Instant::now();
        let out = strait_within(&["run", "--config", path.to_str().unwrap()], Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.code().is_some_and(|c| c != 0), "{what}: `strait run` must exit non-zero: {stderr}");
        assert!(started.elapsed() < Duration::from_secs(30), "{what}: took {:?}", started.elapsed());
        assert!(stderr.contains(field), "{what}: error must name {field:?}; got: {stderr}");
        assert!(!stderr.contains("could not start; retrying"), "{what}: retried: {stderr}");
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    }
}

/// `strait <args>`, killed after `limit` (then its status is the kill's).
fn strait_within(args: &[&str], limit: Duration) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run strait");
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    child.wait_with_output().unwrap()
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
    let (source, target) = (format!("127.0.0.1:{}", port()), format!("127.0.0.1:{}", port()));
    let text = format!(
        "[[clusters]]\nalias = \"src\"\nbootstrap_servers = \"{source}\"\n[[clusters]]\nalias = \"dst\"\nbootstrap_servers = \"{target}\"\n[[flows]]\nsource = \"src\"\ntarget = \"dst\"\n",
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
    // The retry says which cluster does not answer (both here: the first step to fail names
    // its own), at which address, and what to check.
    let named = [format!("on cluster dst at {target}"), format!("on cluster src at {source}")];
    assert!(
        named.iter().any(|n| retries[0].contains(n.as_str())) && retries[0].contains("no broker answers"),
        "names the unreachable cluster and its address: {retries:?}"
    );
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    let logs = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "SIGTERM while retrying exits 0: {logs}");
    assert!(!logs.contains("panicked"), "{logs}");
}

/// `strait run --flow` names a flow the config does not have: exit 2, naming it and listing the
/// config's flows, before any cluster is asked.
#[test]
fn run_with_an_unknown_flow_exits_2_listing_the_flows() {
    let path = write("only-flow", &with_flow(""));
    let out = strait(&["run", "--config", path.to_str().unwrap(), "--flow", "eu->us"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--flow \"eu->us\" is not a flow of the config") && stderr.contains("'us->eu'"),
        "{stderr}"
    );
}

/// `strait run --help` documents `--flow`: repeatable, every flow without it.
#[test]
fn run_help_documents_flow() {
    let out = strait(&["run", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{help}");
    assert!(
        help.contains("--flow <FLOW>") && help.contains("repeat it") && help.contains("Default: every flow"),
        "{help}"
    );
}

/// `strait validate` of `config` with `env` set: its exit code and stderr.
fn validate_with_env(config: &std::path::Path, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["validate", "--config", config.to_str().unwrap()])
        .envs(env.iter().copied())
        .output()
        .expect("run strait");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn references_are_resolved_by_validate_and_a_missing_one_exits_2_naming_it() {
    let secret = "pw-never-shown-7f3a";
    let props = temp_named("credentials.properties", &format!("password = {secret}\n"));
    let var = format!("STRAIT_CLI_TEST_BOOTSTRAP_{}", std::process::id());
    let config = |key: &str| {
        with_target_client(&format!("\"sasl.username\" = \"strait\"\n\"sasl.password\" = \"${{file:{props}:{key}}}\""))
            .replace("127.0.0.1:9093", &format!("${{env:{var}}}"))
    };
    let valid = write("references", &config("password"));
    assert_eq!(validate_with_env(&valid, &[(&var, "127.0.0.1:9093")]).0, Some(0));

    let (code, stderr) = validate_with_env(&valid, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(&format!("clusters[1].bootstrap_servers: `${{env:{var}}}`: the environment variable")));
    let (code, stderr) = validate_with_env(&write("missing-key", &config("passwd")), &[(&var, "127.0.0.1:9093")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("clusters[1].client.\"sasl.password\"") && stderr.contains("has no key passwd"),
        "{stderr}"
    );
    assert!(!stderr.contains(secret), "{stderr}");
    // A referenced secret in a setting whose name does not say so, refused later: not shown.
    let misplaced = config("password").replace("\"sasl.password\"", "\"ssl.ca.location\"");
    let (code, stderr) = validate_with_env(&write("misplaced", &misplaced), &[(&var, "127.0.0.1:9093")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("ssl.ca.location") && !stderr.contains(secret), "{stderr}");
}

#[test]
fn an_imported_mm2_file_keeps_its_references_and_validates_with_them() {
    let creds = temp_named("mm2-creds.properties", "us.password = from-a-file\n");
    let properties = temp_named(
        "mm2.properties",
        &format!(
            "clusters = eu, us\nconfig.providers = vault\n\
             config.providers.vault.class = org.apache.kafka.common.config.provider.FileConfigProvider\n\
             eu.bootstrap.servers = eu:9092\nus.bootstrap.servers = us:9092\nus.security.protocol = SASL_PLAINTEXT\n\
             us.sasl.mechanism = PLAIN\n\
             us.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \
             username=\"mm2\" password=\"${{vault:{creds}:us.password}}\";\neu->us.enabled = true\n"
        ),
    );
    let out = strait(&["import-mm2", &properties]);
    let toml = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && toml.contains(&format!("${{file:{creds}:us.password}}")), "{toml}");
    assert!(!toml.contains("from-a-file"), "the import resolves nothing: {toml}");
    assert_eq!(validate_with_env(&write("imported", &toml), &[]), (Some(0), String::new()));
}
