//! The Prometheus rules (`deploy/helm/strait/files/strait-rules.yaml`, unit-tested by
//! `deploy/prometheus/strait-rules.test.yaml`) against a running Strait: every metric the rules and
//! their unit tests name is one a real scrape exports (so a renamed metric fails here), and
//! `promtool` checks the rules and runs their unit tests.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::*;

/// The `strait_*` metric names `text` mentions (recording rules, `strait:...`, are not metrics).
fn metric_names(text: &str) -> Vec<String> {
    let mut names: Vec<String> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| w.starts_with("strait_"))
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// `promtool` with `args` in `dir`: its output; fails the test when it fails.
fn promtool(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool (Debian's prometheus package, which .ci/run installs)");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool {args:?}: {text}");
    text
}

#[tokio::test(flavor = "multi_thread")]
async fn alert_rules_name_exported_metrics() {
    let f = TopicFlow::new("rules", 2).await;
    produce(&f.a, &f.topic, &(0..100).map(|i| Rec::simple(i % 2, "v")).collect::<Vec<_>>()).await;
    let group = format!("{}-g", f.p);
    commit_group(&f.a, &group, &[(&f.topic, 0, 20), (&f.topic, 1, 20)]);
    let config = f.config(&format!(
        "groups = [\"{group}\"]\nemit_checkpoints_interval_ms = 1000\nrefresh_groups_interval_ms = 1000\n\
         progress_log_interval_ms = 500"
    ));
    let strait = Strait::start(&f.p, &config);
    // Every family the rules read has a series once records, syncs and checkpoints are written.
    let mut scrape = String::new();
    wait_until("records, offset syncs, checkpoints and lag exported", Duration::from_secs(60), || {
        scrape = http_get(&strait.metrics, "/metrics").map(|(_, body)| body).unwrap_or_default();
        [
            "strait_records_total",
            "strait_offset_syncs_total",
            "strait_checkpoints_total",
            "strait_replication_lag_records",
        ]
        .iter()
        .all(|name| scrape.lines().any(|l| l.starts_with(&format!("{name}{{"))))
    })
    .await;
    assert!(strait.stop().success());
    let exported: Vec<&str> =
        scrape.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split(['{', ' ']).next()).collect();
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let (rules, tests) = ("helm/strait/files/strait-rules.yaml", "prometheus/strait-rules.test.yaml");
    for file in [rules, tests] {
        let text = std::fs::read_to_string(deploy.join(file)).unwrap();
        let named = metric_names(&text);
        assert!(named.len() >= 6, "{file}: {named:?}");
        for name in named {
            assert!(exported.contains(&name.as_str()), "{file} names {name}, which Strait does not export:\n{scrape}");
        }
    }
    promtool(&deploy, &["check", "rules", rules]);
    let tested = promtool(&deploy.join("prometheus"), &["test", "rules", "strait-rules.test.yaml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}
