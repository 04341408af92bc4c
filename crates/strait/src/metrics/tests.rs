//! The metrics against what reads them.

use super::*;

/// Every metric the Grafana dashboard in `deploy/` queries is one Strait exports.
#[test]
fn the_dashboard_queries_only_exported_metrics() {
    let m = Metrics::new();
    // A family is encoded once it has a series.
    m.partition("a", "b", "t", 0).latency.observe(1.0);
    m.lag("a", "b", "t", 0).set(0);
    m.residency_dropped("a", "b", "t").inc();
    m.loop_guard_dropped("a", "b").inc();
    m.checkpoints("a", "b").inc();
    m.group_offset_syncs("a", "b").inc();
    m.checkpoint_latency(("a", "b"), "g", "a.t", 0, 1);
    m.set_flow_up("a->b", "a", "b", true);
    let exported = m.encode();
    let dashboard: serde_json::Value =
        serde_json::from_str(include_str!("../../../../deploy/grafana-dashboard.json")).expect("dashboard JSON");
    let mut queried = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            let names =
                expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| w.starts_with("strait_"));
            queried.extend(names.map(|n| ["_bucket", "_total"].iter().fold(n, |n, s| n.strip_suffix(s).unwrap_or(n))));
        }
    }
    assert!(queried.len() >= 10, "{queried:?}");
    for family in queried {
        assert!(exported.contains(&format!("# TYPE {family} ")), "the dashboard queries {family}: not exported");
    }
}

/// A flow runs through a target outage; it is writable, and ready, only while its target answers.
#[test]
fn a_flow_is_writable_while_it_runs_and_its_target_answers() {
    let m = Metrics::new();
    let writable = |m: &Metrics| {
        let line = m.encode().lines().find(|l| l.starts_with("strait_flow_writable{")).map(str::to_string);
        line.and_then(|l| l.rsplit(' ').next().map(str::to_string))
    };
    m.set_flow_up("a->b", "a", "b", true);
    assert_eq!(writable(&m).as_deref(), Some("1"));
    m.set_target_answers("a->b", "a", "b", false);
    assert_eq!(writable(&m).as_deref(), Some("0"));
    assert_eq!(m.flows_down(), ["a->b (target not answering)"]);
    assert!(m.encode().contains("strait_flow_up{source=\"a\",target=\"b\"} 1"), "still running");
    m.set_target_answers("a->b", "a", "b", true);
    assert_eq!(writable(&m).as_deref(), Some("1"));
    m.set_flow_up("a->b", "a", "b", false);
    assert_eq!(writable(&m).as_deref(), Some("0"));
    assert_eq!(m.flows_down(), ["a->b (not running)"]);
}
