//! The config's unit tests: parsing, defaults, bounds, errors naming the field.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use strait_mm2::ReplicationPolicy;

use super::cluster::unreadable;
use super::*;
use crate::residency::ResidencyConfig;

#[test]
fn secrets_never_show_in_debug_output() {
    let toml = |client: &str| {
        format!(
            "[[clusters]]\nalias = \"a\"\nbootstrap_servers = \"h:1\"\n[[clusters]]\nalias = \"b\"\n\
             bootstrap_servers = \"h:2\"\n[clusters.client]\n{client}\"sasl.username\" = \"strait\"\n\
             [[flows]]\nsource = \"a\"\ntarget = \"b\"\n"
        )
    };
    let flows =
        Config::parse(&toml("\"sasl.password\" = \"hunter2-pw\"\n\"ssl.key.password\" = \"k3y-pw\"\n")).unwrap();
    let shown = format!("{flows:?} {:#?}", flows[0].target);
    for secret in ["hunter2-pw", "k3y-pw"] {
        assert!(!shown.contains(secret), "{secret} shown: {shown}");
    }
    assert!(shown.contains("strait") && shown.contains("[redacted]"), "{shown}");
    // An OIDC client secret (librdkafka is built with OIDC support, `rdkafka`'s `curl`).
    let oidc = Config::parse(&toml("\"sasl.oauthbearer.client.secret\" = \"0auth-s3cret\"\n")).unwrap();
    let shown = format!("{oidc:?}");
    assert!(!shown.contains("0auth-s3cret") && shown.contains("[redacted]"), "{shown}");
}

const TWO_CLUSTERS: &str = "[[clusters]]\nalias = \"a\"\nbootstrap_servers = \"h:1\"\n[[clusters]]\nalias = \"b\"\nbootstrap_servers = \"h:2\"\n[[flows]]\nsource = \"a\"\ntarget = \"b\"\n";

/// The first ```toml block of README.md: the Quick start's config.
fn readme_quick_start() -> String {
    let readme = include_str!("../../../../README.md");
    let start = readme.find("```toml\n").expect("README has a toml example") + "```toml\n".len();
    let end = start + readme[start..].find("```").expect("closed block");
    readme[start..end].to_string()
}

#[test]
fn readme_quick_start_parses() {
    let flows = Config::parse(&readme_quick_start()).unwrap_or_else(|e| panic!("README's Quick start: {e}"));
    assert_eq!(flows.len(), 1);
    assert_eq!(flows[0].delivery(), Delivery::AtLeastOnce);
}

/// `deploy/strait.example.toml`, the complete example: two flows, one identity and exactly-once,
/// SCRAM on the source.
#[test]
fn the_complete_example_parses() {
    let flows = Config::parse(include_str!("../../../../deploy/strait.example.toml"))
        .unwrap_or_else(|e| panic!("deploy/strait.example.toml is not valid: {e}"));
    assert_eq!(flows.len(), 2);
    assert_eq!(flows[0].name, "eu-west->us-east");
    assert_eq!(flows[1].policy, ReplicationPolicy::Identity { separator: ".".into() });
    assert_eq!(flows[1].delivery(), Delivery::ExactlyOnce { transaction_timeout: Duration::from_secs(60) });
    assert_eq!(flows[0].source.client.get("sasl.mechanism").map(String::as_str), Some("SCRAM-SHA-512"));
}

#[test]
fn defaults_follow_the_docs() {
    let flow = &Config::parse(TWO_CLUSTERS).unwrap()[0];
    assert_eq!(flow.writing.offset_lag_max, 100);
    assert_eq!(flow.reading.refresh_topics_interval, Duration::from_secs(5));
    assert_eq!(flow.batching.commit_interval, Duration::from_secs(1));
    assert_eq!(flow.writing.offset_syncs_topic_location, SyncsLocation::Target);
    assert_eq!(flow.policy, ReplicationPolicy::Default { separator: ".".into() });
    assert_eq!(flow.delivery(), Delivery::AtLeastOnce);
    assert!(flow.topics.matches("orders"));
    assert!(
        !flow.topics.matches("x.internal")
            && !flow.topics.matches("a.replica")
            && !flow.topics.matches("__consumer_offsets")
    );
}

#[test]
fn filters_match_whole_names() {
    let flow = &Config::parse(&format!("{TWO_CLUSTERS}topics = [\"ord.*\"]\n")).unwrap()[0];
    assert!(flow.topics.matches("orders"));
    assert!(!flow.topics.matches("old-orders"), "a regex must match the whole name, as in MM2");
}

#[test]
fn auto_compression_is_lz4_to_a_far_target_and_none_near() {
    let at = |ms| std::time::Duration::from_millis(ms);
    assert_eq!(Compression::Auto.resolve(at(80)), Compression::Lz4);
    assert_eq!(Compression::Auto.resolve(at(15)), Compression::Lz4);
    assert_eq!(Compression::Auto.resolve(at(14)), Compression::None);
    assert_eq!(Compression::Zstd.resolve(at(1)), Compression::Zstd);
    assert_eq!(Compression::None.resolve(at(80)), Compression::None);
    // Unresolved (a sink started on its own), it produces uncompressed, as before `auto`.
    assert_eq!(Compression::Auto.name(), "none");
    for codec in ["auto", "none"] {
        Config::parse(&format!("{TWO_CLUSTERS}copy = \"batches\"\ncompression = \"{codec}\"\n")).expect(codec);
    }
}

#[test]
fn copying_batches_is_refused_where_it_cannot_hold_naming_the_field() {
    // `auto` by default: batches, where nothing stands against them.
    let default = &Config::parse(TWO_CLUSTERS).unwrap()[0];
    assert_eq!(default.copy.kind, CopyKind::Batches, "{}", default.copy.why);
    assert!(default.copy.why.starts_with("copy = \"auto\" takes batches"), "{}", default.copy.why);
    let records = &Config::parse(&format!("{TWO_CLUSTERS}copy = \"records\"\n")).unwrap()[0];
    assert_eq!(records.copy.kind, CopyKind::Records);
    assert_eq!(Config::parse(TWO_CLUSTERS).unwrap()[0].writing.compression, Compression::Auto);
    let zstd = &Config::parse(&format!("{TWO_CLUSTERS}compression = \"zstd\"\n")).unwrap()[0];
    assert_eq!(zstd.writing.compression, Compression::Zstd);
    let flow = &Config::parse(&format!("{TWO_CLUSTERS}copy = \"batches\"\n")).unwrap()[0];
    assert_eq!(flow.copy.kind, CopyKind::Batches);
    Config::parse(&format!(
        "{TWO_CLUSTERS}copy = \"batches\"\ndelivery = \"exactly_once\"\nwrite_mm2_offsets = true\n"
    ))
    .expect("batches exactly once, MM2 offsets written");
    let auto = |extra: &str| Config::parse(&format!("{TWO_CLUSTERS}copy = \"auto\"\n{extra}")).unwrap().remove(0).copy;
    assert_eq!(auto("").kind, CopyKind::Batches, "auto takes batches where nothing forbids them");
    let lz4 = auto("compression = \"lz4\"\n");
    assert_eq!(lz4.kind, CopyKind::Records);
    assert!(lz4.why.contains("flows[0].compression"), "{}", lz4.why);
    let identity = format!("{TWO_CLUSTERS}copy = \"batches\"\nreplication_policy = \"identity\"\n");
    Config::parse(&identity).expect("batches under the identity policy: guarded by producer ids");
    let back = |copy: &str| format!("{identity}[[flows]]\nsource = \"b\"\ntarget = \"a\"\ncopy = \"{copy}\"\n");
    Config::parse(&back("batches")).expect("identity active/active of batch flows");
    let e = Config::parse(&back("records")).expect_err("a record flow back");
    assert_eq!(e.field, "flows[1].copy", "{e}");
    assert!(
        e.to_string().contains("flow b->a copies records and flow a->b, on a cycle with it, copies batches"),
        "{e}"
    );
    // `auto` takes what the flow back allows.
    let auto_back = identity.replace("copy = \"batches\"", "copy = \"auto\"");
    let flows =
        Config::parse(&format!("{auto_back}[[flows]]\nsource = \"b\"\ntarget = \"a\"\ncopy = \"records\"\n")).unwrap();
    assert_eq!(flows[0].copy.kind, CopyKind::Records, "auto against a record flow back");
    assert!(flows[0].copy.why.contains("flow b->a copies records on a cycle"), "{}", flows[0].copy.why);
    let flows =
        Config::parse(&format!("{auto_back}[[flows]]\nsource = \"b\"\ntarget = \"a\"\ncopy = \"auto\"\n")).unwrap();
    assert!(flows.iter().all(|f| f.copy.kind == CopyKind::Batches), "two auto flows take batches");
    // A ring A→B→C→A: one record flow makes the others' auto take records, and a batch flow
    // on it is refused; a flow off the ring (C→D) is free.
    let ring = |copies: [&str; 3]| {
        let mut c = String::new();
        for alias in ["a", "b", "c", "d"] {
            c += &format!("[[clusters]]\nalias = \"{alias}\"\nbootstrap_servers = \"h:1\"\n");
        }
        for ((source, target), copy) in [("a", "b"), ("b", "c"), ("c", "a")].into_iter().zip(copies) {
            c += &format!("[[flows]]\nsource = \"{source}\"\ntarget = \"{target}\"\nreplication_policy = \"identity\"\ncopy = \"{copy}\"\n");
        }
        c + "[[flows]]\nsource = \"c\"\ntarget = \"d\"\nreplication_policy = \"identity\"\ncopy = \"batches\"\n"
    };
    let flows = Config::parse(&ring(["auto", "auto", "records"])).unwrap();
    assert!(flows[..3].iter().all(|f| f.copy.kind == CopyKind::Records), "auto on a ring with a record flow");
    assert!(flows[0].copy.why.contains("flow c->a copies records on a cycle"), "{}", flows[0].copy.why);
    assert_eq!(flows[3].copy.kind, CopyKind::Batches, "off the ring");
    let e =
        Config::parse(&ring(["batches", "auto", "records"])).expect_err("a batch flow on a ring with a record flow");
    // b->c's auto took records (c->a copies records), which a->b's batches clash with.
    assert_eq!(e.field, "flows[1].copy", "{e}");
    Config::parse(&ring(["batches", "auto", "auto"])).expect("a ring of batch flows");
    // Exactly once, a ring's flows would pass on batches outside their transactions: auto takes
    // records, batches are refused naming `delivery`. The flow off the ring (C→D, at least once
    // here) may pass them on; exactly once, it is refused while B→C brings B's batches into C.
    let eos = |copies, off: &str| {
        let c = ring(copies).replace("copy = ", "delivery = \"exactly_once\"\ncopy = ");
        let last = c.rfind("delivery").unwrap();
        format!("{}{off}", &c[..last])
    };
    let flows = Config::parse(&eos(["auto", "auto", "auto"], "copy = \"batches\"\n")).unwrap();
    assert!(flows[..3].iter().all(|f| f.copy.kind == CopyKind::Records), "auto on an exactly-once ring");
    assert!(flows[0].copy.why.contains("exactly-once, and flow c->a brings batches"), "{}", flows[0].copy.why);
    let e = Config::parse(&eos(["batches"; 3], "copy = \"batches\"\n")).expect_err("an exactly-once ring");
    assert_eq!(e.field, "flows[0].delivery", "{e}");
    assert!(e.to_string().contains("flow c->a brings batches of c into its source"), "{e}");
    let off = "delivery = \"exactly_once\"\ncopy = \"batches\"\n";
    Config::parse(&eos(["records"; 3], off)).expect("C→D, exactly once, fed by record flows only");
    let mut ring_of_batches = ring(["batches"; 3]);
    ring_of_batches.insert_str(ring_of_batches.rfind("copy = ").unwrap(), "delivery = \"exactly_once\"\n");
    let e = Config::parse(&ring_of_batches).expect_err("C→D exactly once, B→C bringing batches");
    assert_eq!(e.field, "flows[3].delivery", "{e}");
    for (extra, field) in [
        ("copy = \"bytes\"", "flows[0].copy"),
        ("copy = \"batches\"\ncompression = \"lz4\"", "flows[0].compression"),
        ("compression = \"brotli\"", "flows[0].compression"),
    ] {
        let e = Config::parse(&format!("{TWO_CLUSTERS}{extra}\n")).expect_err(extra);
        assert_eq!(e.field, field, "{e}");
    }
    // A client setting the batch path's client cannot honour is named; librdkafka's own would be
    // taken by the record path.
    let kerberos = TWO_CLUSTERS.replace(
        "bootstrap_servers = \"h:2\"\n",
        "bootstrap_servers = \"h:2\"\nclient = { \"security.protocol\" = \"sasl_plaintext\", \"sasl.mechanisms\" = \"GSSAPI\" }\n",
    );
    Config::parse(&kerberos).expect("the record path takes GSSAPI");
    let e = Config::parse(&format!("{kerberos}copy = \"batches\"\n")).expect_err("GSSAPI with batches");
    assert_eq!(e.field, "clusters[1].client.\"sasl.mechanisms\"", "{e}");
    let auto = Config::parse(&format!("{kerberos}copy = \"auto\"\n")).expect("auto with GSSAPI").remove(0).copy;
    assert_eq!(auto.kind, CopyKind::Records);
    assert!(auto.why.contains("clusters[1].client.\"sasl.mechanisms\""), "{}", auto.why);
}

#[test]
fn exactly_once_settings_are_checked() {
    for (extra, field) in [
        (
            "delivery = \"exactly_once\"\noffset_syncs_topic_location = \"source\"",
            "flows[0].offset_syncs_topic_location",
        ),
        ("delivery = \"exactly_once\"\ntransaction_timeout_ms = 1000", "flows[0].transaction_timeout_ms"),
        ("delivery = \"exactly-once\"", "flows[0].delivery"),
    ] {
        let e = Config::parse(&format!("{TWO_CLUSTERS}{extra}\n")).expect_err(extra);
        assert_eq!(e.field, field, "{e}");
    }
    let flow = &Config::parse(&format!("{TWO_CLUSTERS}delivery = \"exactly_once\"\ntransaction_timeout_ms = 9000\n"))
        .unwrap()[0];
    assert_eq!(flow.delivery(), Delivery::ExactlyOnce { transaction_timeout: Duration::from_secs(9) });
    assert_eq!(flow.transactional_id(0), "strait-a->b/slot-0");
}

#[test]
fn numeric_bounds_are_inclusive() {
    let edge = "commit_interval_ms = 31536000000\nemit_heartbeats_interval_ms = 1\nmax_batch_records = 100000000\n\
                max_batch_bytes = 17179869184\noffset_lag_max = 9223372036854775807\nreplication_factor = 32767\n\
                [flows.scale_out]\nenabled = true\nslots = 1000\nsession_timeout_ms = 3600000\n";
    let flow = &Config::parse(&format!("{TWO_CLUSTERS}{edge}")).unwrap()[0];
    assert_eq!((flow.slots(), flow.writing.replication_factor, flow.batching.max_batch_bytes), (1000, 32767, 16 << 30));
    assert_eq!(flow.batching.commit_interval, Duration::from_secs(365 * 24 * 3600));
    let e = Config::parse(&format!("{TWO_CLUSTERS}{}", edge.replace("slots = 1000", "slots = 1001"))).unwrap_err();
    assert_eq!(e.to_string(), "flows[0].scale_out.slots: 1001 is out of bounds: must be 1 to 1000 slots");
}

#[test]
fn client_files_must_be_readable() {
    assert_eq!(unreadable("ssl.ca.location", "probe"), None, "the system's CA stores");
    assert_eq!(unreadable("ssl.ca.location", "/tmp"), None, "a CA directory");
    assert_eq!(unreadable("ssl.ca.location", ""), None, "unset");
    let why = unreadable("ssl.key.location", "/tmp").unwrap();
    assert!(why.contains("is a directory"), "{why}");
    let why = unreadable("ssl.certificate.location", "/nonexistent/cert.pem").unwrap();
    assert!(why.contains("\"/nonexistent/cert.pem\"") && why.contains("No such file"), "{why}");
    let readable = std::env::temp_dir().join(format!("strait-config-{}.pem", std::process::id()));
    std::fs::write(&readable, "pem").unwrap();
    assert_eq!(unreadable("ssl.certificate.location", readable.to_str().unwrap()), None);
    std::fs::remove_file(readable).unwrap();
}

#[test]
fn scale_out_settings_are_read_and_checked() {
    let flow = &Config::parse(&format!("{TWO_CLUSTERS}[flows.scale_out]\nenabled = true\n")).unwrap()[0];
    assert_eq!(
        (flow.slots(), flow.scale_out.enabled, flow.scale_out.session_timeout),
        (12, true, Duration::from_secs(10))
    );
    assert_eq!(
        (flow.slots_group(), flow.slots_topic()),
        ("strait-slots-a->b".into(), "strait-slots.a.b.internal".into())
    );
    let flow = &Config::parse(&format!("{TWO_CLUSTERS}[flows.scale_out]\nslots = 5\n")).unwrap()[0];
    assert_eq!(flow.slots(), 1, "slots apply only with scale-out on");
    for (extra, field) in [
        ("enabled = true\nslots = 0", "flows[0].scale_out.slots"),
        ("session_timeout_ms = 0", "flows[0].scale_out.session_timeout_ms"),
        ("instances = 3", "flows[0].scale_out.instances"),
    ] {
        let e = Config::parse(&format!("{TWO_CLUSTERS}[flows.scale_out]\n{extra}\n")).expect_err(extra);
        assert_eq!(e.field, field, "{e}");
    }
    assert_eq!((flow.slots(), flow.scale_out.enabled), (1, false));
}

/// The rows of each `## ` section of `doc`: (key, default cell) from `| \`key\` | type | default |`.
fn documented(doc: &str) -> BTreeMap<String, Vec<(String, String)>> {
    let mut sections: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut section = None;
    for line in doc.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            section = Some(heading.trim_matches('`').to_string());
            sections.entry(heading.trim_matches('`').to_string()).or_default();
        } else if let (Some(s), Some(row)) = (&section, line.strip_prefix("| `")) {
            let cells: Vec<&str> = row.split(" | ").collect();
            let key = cells[0].trim_end_matches('`').to_string();
            sections.get_mut(s).expect("section").push((key, cells.get(2).unwrap_or(&"").to_string()));
        }
    }
    sections
}

/// What `docs/configuration.md` gets wrong about the config types: keys a type has and the doc
/// lacks, keys the doc lists that no type has, sections no type has, and defaults (a TOML value
/// in backticks, or `required`) that differ from the type's `Default`.
fn reference_problems(doc: &str) -> Vec<String> {
    use serde_aux::serde_introspection::serde_introspect as keys;
    let table = |v: toml::Table| Some(v);
    let defaults = |t: Result<toml::Table, toml::ser::Error>| table(t.expect("defaults serialise"));
    let types: Vec<(&str, Vec<&str>, Option<toml::Table>)> = vec![
        ("Top level", keys::<Config<toml::Table>>().to_vec(), None),
        ("[[clusters]]", keys::<ClusterConfig>().to_vec(), None),
        ("[[flows]]", flow_keys(), defaults(toml::Table::try_from(FlowConfig::new("a", "b")))),
        ("[flows.scale_out]", keys::<ScaleOut>().to_vec(), defaults(toml::Table::try_from(ScaleOut::default()))),
        ("[residency]", keys::<ResidencyConfig>().to_vec(), None),
        ("[[residency.policies]]", keys::<crate::residency::ResidencyPolicy>().to_vec(), None),
        ("[metrics]", keys::<MetricsConfig>().to_vec(), defaults(toml::Table::try_from(MetricsConfig::default()))),
    ];
    let mut doc = documented(doc);
    let mut problems = Vec::new();
    for (section, keys, defaults) in types {
        let rows = doc.remove(section).unwrap_or_default();
        let listed: BTreeSet<&str> = rows.iter().map(|(k, _)| k.as_str()).collect();
        let keys: BTreeSet<&str> = keys.into_iter().collect();
        problems.extend(keys.difference(&listed).map(|k| format!("{section} `{k}`: not documented")));
        problems.extend(listed.difference(&keys).map(|k| format!("{section} `{k}`: documented, but no such key")));
        for (key, cell) in rows.iter().filter(|_| defaults.is_some()) {
            let default = defaults.as_ref().and_then(|d| d.get(key)).filter(|v| !v.is_table());
            let written = cell.strip_prefix('`').and_then(|c| c.strip_suffix('`'));
            let parsed = written.and_then(|w| toml::from_str::<toml::Table>(&format!("v = {w}")).ok());
            match (default, parsed.as_ref().and_then(|p| p.get("v"))) {
                (Some(d), Some(p)) if d != p => {
                    problems.push(format!("{section} `{key}`: default {p} documented, {d} in the type"))
                }
                (Some(d), None) if cell != "required" => {
                    problems.push(format!("{section} `{key}`: default {d} not documented as `{d}`"))
                }
                _ => {}
            }
        }
    }
    problems.extend(doc.into_keys().map(|s| format!("section {s}: no config type has it")));
    problems
}

#[test]
fn reference_documents_every_key() {
    let problems = reference_problems(include_str!("../../../../docs/configuration.md"));
    assert!(problems.is_empty(), "docs/configuration.md and the config types differ:\n{}", problems.join("\n"));
}

#[test]
fn reference_check_catches_an_undocumented_or_unknown_key() {
    let doc = include_str!("../../../../docs/configuration.md");
    let without = doc.replace("| `max_batch_bytes` |", "| `max_batch_bites` |");
    let problems = reference_problems(&without);
    assert!(problems.contains(&"[[flows]] `max_batch_bytes`: not documented".to_string()), "{problems:?}");
    assert!(problems.contains(&"[[flows]] `max_batch_bites`: documented, but no such key".to_string()), "{problems:?}");
    let wrong_default =
        doc.replace("| `commit_interval_ms` | integer | `1000` |", "| `commit_interval_ms` | integer | `2000` |");
    assert_eq!(reference_problems(&wrong_default).len(), 1, "the default is checked");
}

#[test]
fn an_unknown_flow_key_is_named_with_the_closest_known_one() {
    let e = Config::parse(&format!("{TWO_CLUSTERS}topcis = [\"orders.*\"]\n")).unwrap_err();
    assert_eq!(e.field, "flows[0].topcis", "{e}");
    assert!(e.to_string().contains("did you mean `topics`?"), "{e}");
    let e = Config::parse(&format!("{TWO_CLUSTERS}mirrors = 1\n")).unwrap_err();
    assert!(
        e.to_string().contains("no such key (a [[flows]] table takes `source`"),
        "no guess when nothing is close: {e}"
    );
}

#[test]
fn connections_per_broker_is_auto_or_1_to_16_naming_the_field() {
    let on_b = |value: &str| {
        TWO_CLUSTERS.replace(
            "bootstrap_servers = \"h:2\"\n",
            &format!("bootstrap_servers = \"h:2\"\nconnections_per_broker = {value}\n"),
        )
    };
    assert_eq!(Config::parse(TWO_CLUSTERS).unwrap()[0].target.connections_per_broker, ConnectionsPerBroker::Auto);
    assert_eq!(Config::parse(&on_b("\"auto\"")).unwrap()[0].target.connections_per_broker, ConnectionsPerBroker::Auto);
    assert_eq!(Config::parse(&on_b("16")).unwrap()[0].target.connections_per_broker, ConnectionsPerBroker::Fixed(16));
    for bad in ["0", "17", "-1", "\"many\""] {
        let e = Config::parse(&on_b(bad)).expect_err(bad);
        assert_eq!(e.field, "clusters[1].connections_per_broker", "{bad}: {e}");
        assert!(e.to_string().contains("\"auto\" or 1 to 16"), "{bad}: {e}");
    }
}
