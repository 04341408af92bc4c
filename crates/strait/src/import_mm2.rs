//! `strait import-mm2`: a Strait config from a MirrorMaker 2 dedicated-mode properties file
//! (`connect-mirror-maker.properties`): clusters and their security settings (under librdkafka's
//! names), enabled `A->B` flows and the MM2 settings Strait has, per flow or global as MM2 reads
//! them. Every key it cannot carry is returned with the reason, so nothing is dropped silently.

use std::collections::{BTreeMap, HashMap, HashSet};

use toml::{Table, Value};

/// The imported config and what could not be carried.
pub struct Imported {
    /// Strait's TOML.
    pub toml: String,
    /// (key, why it was not carried), sorted by key.
    pub dropped: Vec<(String, String)>,
    /// Differences of behaviour worth knowing (MM2 defaults Strait does not share).
    pub notes: Vec<String>,
}

/// MM2 flow settings Strait has: (MM2 key, Strait key, how the value converts).
const FLOW_SETTINGS: &[(&str, &str, Convert)] = &[
    ("topics", "topics", Convert::List),
    ("topics.exclude", "topics_exclude", Convert::List),
    ("topics.blacklist", "topics_exclude", Convert::List),
    ("groups", "groups", Convert::List),
    ("groups.exclude", "groups_exclude", Convert::List),
    ("groups.blacklist", "groups_exclude", Convert::List),
    ("replication.policy.class", "replication_policy", Convert::Policy),
    ("replication.policy.separator", "separator", Convert::Text),
    ("offset-syncs.topic.location", "offset_syncs_topic_location", Convert::Text),
    ("sync.group.offsets.enabled", "sync_group_offsets", Convert::Bool),
    ("sync.group.offsets.interval.seconds", "sync_group_offsets_interval_ms", Convert::SecondsToMs),
    ("emit.checkpoints.enabled", "emit_checkpoints", Convert::Bool),
    ("emit.checkpoints.interval.seconds", "emit_checkpoints_interval_ms", Convert::SecondsToMs),
    ("emit.heartbeats.enabled", "emit_heartbeats", Convert::Bool),
    ("emit.heartbeats.interval.seconds", "emit_heartbeats_interval_ms", Convert::SecondsToMs),
    ("offset.lag.max", "offset_lag_max", Convert::Integer),
    ("refresh.topics.interval.seconds", "refresh_topics_interval_ms", Convert::SecondsToMs),
    ("refresh.groups.interval.seconds", "refresh_groups_interval_ms", Convert::SecondsToMs),
    ("replication.factor", "replication_factor", Convert::Integer),
    ("sync.topic.configs.enabled", "sync_topic_configs", Convert::Bool),
    ("sync.topic.configs.interval.seconds", "sync_topic_configs_interval_ms", Convert::SecondsToMs),
    ("config.properties.exclude", "sync_topic_configs_exclude", Convert::List),
];

#[derive(Clone, Copy)]
enum Convert {
    List,
    Text,
    Bool,
    Integer,
    SecondsToMs,
    Policy,
}

/// Why a key that is not a Strait setting is left out.
fn reason(key: &str) -> &'static str {
    let last = key.rsplit_once("->").map_or(key, |(_, k)| k);
    let last = last.split_once('.').filter(|(alias, _)| !alias.contains('-')).map_or(last, |(_, k)| k);
    if key.ends_with("tasks.max") {
        "Strait has no Connect tasks: one flow reads every partition"
    } else if key.ends_with("topic.replication.factor") || key.ends_with("storage.replication.factor") {
        "Strait creates every topic with the flow's replication_factor"
    } else if [
        "offset.storage",
        "config.storage",
        "status.storage",
        "dedicated.mode",
        "listeners",
        "rest.",
        "converter",
    ]
    .iter()
    .any(|p| key.contains(p))
    {
        "a Kafka Connect setting: Strait does not run on Connect"
    } else if key.contains("sync.topic.acls") {
        "ACL sync is not supported"
    } else if [".producer.", ".consumer.", ".admin."].iter().any(|p| key.contains(p))
        || ["producer.", "consumer.", "admin."].iter().any(|p| last.starts_with(p))
    {
        "a Java client override: set the librdkafka equivalent in the cluster's [clusters.client] table"
    } else if key.contains("ssl.") {
        "a Java TLS store librdkafka cannot read: convert it to PEM (ssl.ca.location, ssl.certificate.location, ssl.key.location) or PKCS#12 (ssl.keystore.location)"
    } else {
        "not a setting Strait has"
    }
}

/// Reads `username` and `password` out of a `PlainLoginModule` or `ScramLoginModule` JAAS line.
fn jaas_credentials(jaas: &str) -> Option<(String, String)> {
    if !(jaas.contains("PlainLoginModule") || jaas.contains("ScramLoginModule")) {
        return None;
    }
    let field = |name: &str| {
        let start = jaas.find(&format!("{name}=\""))? + name.len() + 2;
        Some(jaas[start..].split('"').next()?.to_string())
    };
    Some((field("username")?, field("password")?))
}

fn convert(key: &str, value: &str, how: Convert) -> Result<Value, String> {
    let bad = |what: &str| format!("{key} = {value:?}: {what}");
    Ok(match how {
        Convert::List => Value::Array(
            value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|s| Value::String(s.into())).collect(),
        ),
        Convert::Text => Value::String(value.trim().into()),
        Convert::Bool => Value::Boolean(value.trim().parse().map_err(|_| bad("not true or false"))?),
        Convert::Integer => Value::Integer(value.trim().parse().map_err(|_| bad("not an integer"))?),
        Convert::SecondsToMs => {
            Value::Integer(value.trim().parse::<i64>().map_err(|_| bad("not a number of seconds"))? * 1000)
        }
        Convert::Policy => Value::String(
            match value.trim().rsplit('.').next() {
                Some("DefaultReplicationPolicy") => "default",
                Some("IdentityReplicationPolicy") => "identity",
                _ => {
                    return Err(bad(
                        "only MM2's DefaultReplicationPolicy and IdentityReplicationPolicy exist in Strait",
                    ))
                }
            }
            .into(),
        ),
    })
}

/// Imports `props` (an MM2 properties file, read). Errors: no `clusters`, a cluster without
/// `bootstrap.servers`, or a value that does not convert, naming the key.
pub fn import(props: &HashMap<String, String>) -> Result<Imported, String> {
    let mut used: HashSet<String> = HashSet::new();
    let mut notes = Vec::new();
    let get = |key: &str, used: &mut HashSet<String>| {
        let v = props.get(key)?;
        used.insert(key.to_string());
        Some(v.clone())
    };
    let aliases: Vec<String> = get("clusters", &mut used)
        .ok_or("clusters: missing (MM2's list of cluster aliases)")?
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let mut clusters = Vec::new();
    for alias in &aliases {
        let mut cluster = Table::new();
        cluster.insert("alias".into(), Value::String(alias.clone()));
        let servers = get(&format!("{alias}.bootstrap.servers"), &mut used)
            .ok_or_else(|| format!("{alias}.bootstrap.servers: missing"))?;
        cluster.insert("bootstrap_servers".into(), Value::String(servers));
        // A cluster's own setting wins over the global one, as in MM2.
        let setting =
            |name: &str, used: &mut HashSet<String>| get(&format!("{alias}.{name}"), used).or_else(|| get(name, used));
        let mut client = Table::new();
        if let Some(v) = setting("security.protocol", &mut used) {
            client.insert("security.protocol".into(), Value::String(v));
        }
        if let Some(v) = setting("sasl.mechanism", &mut used) {
            client.insert("sasl.mechanisms".into(), Value::String(v));
        }
        if let Some(jaas) = setting("sasl.jaas.config", &mut used) {
            let (user, password) = jaas_credentials(&jaas).ok_or_else(|| {
                format!("{alias}.sasl.jaas.config: only PlainLoginModule and ScramLoginModule with username and password can be carried")
            })?;
            client.insert("sasl.username".into(), Value::String(user));
            client.insert("sasl.password".into(), Value::String(password));
        }
        if let Some(v) = setting("ssl.endpoint.identification.algorithm", &mut used) {
            let v = if v.trim().is_empty() { "none".to_string() } else { v };
            client.insert("ssl.endpoint.identification.algorithm".into(), Value::String(v));
        }
        // Stores librdkafka cannot read stay unused, so they are listed with the reason.
        let store_type = |name: &str| {
            props.get(&format!("{alias}.{name}")).or_else(|| props.get(name)).map(|t| t.trim().to_ascii_uppercase())
        };
        if store_type("ssl.truststore.type").as_deref() == Some("PEM") {
            setting("ssl.truststore.type", &mut used);
            if let Some(v) = setting("ssl.truststore.location", &mut used) {
                client.insert("ssl.ca.location".into(), Value::String(v));
            }
        }
        if store_type("ssl.keystore.type").as_deref() == Some("PKCS12") {
            setting("ssl.keystore.type", &mut used);
            for name in ["ssl.keystore.location", "ssl.keystore.password"] {
                if let Some(v) = setting(name, &mut used) {
                    client.insert(name.into(), Value::String(v));
                }
            }
        }
        if let Some(v) = setting("ssl.key.password", &mut used) {
            client.insert("ssl.key.password".into(), Value::String(v));
        }
        if !client.is_empty() {
            cluster.insert("client".into(), Value::Table(client));
        }
        clusters.push(Value::Table(cluster));
    }
    let mut flows = Vec::new();
    let mut enabled: Vec<(String, String)> = props
        .iter()
        .filter_map(|(k, v)| {
            let (source, target) = k.strip_suffix(".enabled")?.split_once("->")?;
            used.insert(k.clone());
            (v.trim() == "true").then(|| (source.to_string(), target.to_string()))
        })
        .collect();
    enabled.sort();
    for (source, target) in enabled {
        let mut flow = Table::new();
        flow.insert("source".into(), Value::String(source.clone()));
        flow.insert("target".into(), Value::String(target.clone()));
        for &(mm2, strait, how) in FLOW_SETTINGS {
            let flow_key = format!("{source}->{target}.{mm2}");
            let value = get(&flow_key, &mut used)
                .map(|v| (flow_key, v))
                .or_else(|| get(mm2, &mut used).map(|v| (mm2.to_string(), v)));
            if let Some((key, value)) = value {
                flow.insert(strait.into(), convert(&key, &value, how)?);
            }
        }
        let eos = get(&format!("{target}.exactly.once.source.support"), &mut used)
            .or_else(|| get("exactly.once.source.support", &mut used))
            .is_some_and(|v| v.trim() == "enabled");
        if eos {
            flow.insert("delivery".into(), Value::String("exactly_once".into()));
        }
        if !flow.contains_key("offset_syncs_topic_location") {
            // MM2's default place: Strait goes on reading and writing the syncs MM2 left there,
            // so group offsets MM2 replicated still translate after the cut-over.
            let location = if eos { "target" } else { "source" };
            flow.insert("offset_syncs_topic_location".into(), Value::String(location.into()));
            notes.push(if eos {
                format!("{source}->{target}: offset syncs go to the target (exactly-once writes them in its transactions), not to the source where MM2 kept them by default; group offsets MM2 replicated will translate once Strait's own syncs cover them")
            } else {
                format!("{source}->{target}: offset syncs stay on the source, MM2's default, so the syncs MM2 wrote keep translating group offsets (Strait's own default, \"target\", writes nothing to the source)")
            });
        }
        flows.push(Value::Table(flow));
    }
    let mut root = Table::new();
    root.insert("clusters".into(), Value::Array(clusters));
    root.insert("flows".into(), Value::Array(flows));
    let toml = toml::to_string(&root).map_err(|e| format!("cannot write TOML: {e}"))?;
    let dropped: BTreeMap<String, String> =
        props.keys().filter(|k| !used.contains(*k)).map(|k| (k.clone(), reason(k).to_string())).collect();
    Ok(Imported { toml, dropped: dropped.into_iter().collect(), notes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(text: &str) -> HashMap<String, String> {
        java_properties::read(text.as_bytes()).unwrap()
    }

    #[test]
    fn mm2_properties_become_a_valid_strait_config_and_the_rest_is_listed() {
        let imported = import(&props(
            "clusters = eu, us\n\
             eu.bootstrap.servers = kafka-eu:9092\n\
             us.bootstrap.servers = kafka-us:9092\n\
             eu->us.enabled = true\n\
             us->eu.enabled = false\n\
             eu->us.topics = orders.*, payments\n\
             topics.exclude = .*\\\\.tmp\n\
             replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n\
             emit.checkpoints.interval.seconds = 20\n\
             sync.group.offsets.enabled = true\n\
             us.security.protocol = SASL_SSL\n\
             us.sasl.mechanism = SCRAM-SHA-512\n\
             us.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username=\"strait\" password=\"pw\";\n\
             tasks.max = 4\n\
             checkpoints.topic.replication.factor = 1\n\
             us.producer.linger.ms = 20\n",
        ))
        .unwrap();
        let flows = crate::config::Config::parse(&imported.toml).unwrap_or_else(|e| panic!("{e}\n{}", imported.toml));
        assert_eq!(flows.len(), 1, "{}", imported.toml);
        let flow = &flows[0];
        assert_eq!(flow.name, "eu->us");
        assert!(flow.replicates("orders.x") && flow.replicates("payments") && !flow.replicates("orders.x.tmp"));
        assert_eq!(flow.policy.remote_topic("eu", "orders"), "orders", "identity policy");
        assert_eq!(flow.checkpoints.emit_checkpoints_interval, std::time::Duration::from_secs(20));
        assert!(flow.checkpoints.sync_group_offsets);
        assert_eq!(flow.target.client.get("sasl.username").map(String::as_str), Some("strait"));
        assert_eq!(flow.target.client.get("sasl.mechanisms").map(String::as_str), Some("SCRAM-SHA-512"));
        let dropped: Vec<&str> = imported.dropped.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(dropped, ["checkpoints.topic.replication.factor", "tasks.max", "us.producer.linger.ms"]);
        assert!(imported.dropped[2].1.contains("librdkafka"), "{:?}", imported.dropped);
        assert_eq!(
            flow.writing.offset_syncs_topic_location,
            crate::config::SyncsLocation::Source,
            "MM2's default place kept"
        );
        assert_eq!(imported.notes.len(), 1, "{:?}", imported.notes);
    }

    /// Each flow of `imported` by name.
    fn flows(imported: &Imported) -> HashMap<String, crate::config::Flow> {
        let flows = crate::config::Config::parse(&imported.toml).unwrap_or_else(|e| panic!("{e}\n{}", imported.toml));
        flows.into_iter().map(|f| (f.name.clone(), f)).collect()
    }

    fn dropped(imported: &Imported) -> Vec<&str> {
        imported.dropped.iter().map(|(k, _)| k.as_str()).collect()
    }

    #[test]
    fn kafka_docs_example() {
        let imported = import(&props(include_str!("../tests/mm2-properties/docs-example.properties"))).unwrap();
        let flows = flows(&imported);
        let mut names: Vec<&String> = flows.keys().collect();
        names.sort();
        assert_eq!(names, ["A->B", "B->A"]);
        let ab = &flows["A->B"];
        assert_eq!(ab.source.bootstrap_servers, "a1.example:9092, a2.example:9092, a3.example:9092");
        assert_eq!(ab.writing.replication_factor, 1);
        assert!(ab.replicates("anything") && !ab.replicates("B.anything"), "cycle rule");
        assert_eq!(ab.writing.offset_syncs_topic_location, crate::config::SyncsLocation::Source);
        assert_eq!(
            dropped(&imported),
            [
                "checkpoints.topic.replication.factor",
                "config.storage.replication.factor",
                "heartbeats.topic.replication.factor",
                "offset-syncs.topic.replication.factor",
                "offset.storage.replication.factor",
                "status.storage.replication.factor"
            ]
        );
    }

    #[test]
    fn strimzi_style_with_tls_stores() {
        let imported = import(&props(include_str!("../tests/mm2-properties/strimzi-style.properties"))).unwrap();
        let flows = flows(&imported);
        assert_eq!(flows.len(), 1);
        let f = &flows["source->target"];
        assert_eq!(f.policy.remote_topic("source", "orders.eu"), "orders.eu", "identity");
        assert!(f.replicates("orders.eu") && f.replicates("payments.x") && !f.replicates("orders-internal"));
        assert!(f.checkpoints.sync_group_offsets && f.groups.matches("billing") && !f.groups.matches("connect-x"));
        assert_eq!(f.writing.offset_syncs_topic_location, crate::config::SyncsLocation::Target);
        assert_eq!(f.checkpoints.sync_group_offsets_interval, std::time::Duration::from_secs(60));
        assert_eq!(f.reading.refresh_topics_interval, std::time::Duration::from_secs(600));
        assert_eq!(f.source.client.get("security.protocol").map(String::as_str), Some("SSL"));
        assert!(!f.source.client.contains_key("ssl.ca.location"), "a PKCS#12 truststore is not a CA file");
        let target = &f.target.client;
        assert_eq!(target.get("ssl.keystore.location").map(String::as_str), Some("/opt/kafka/user-certs/target.p12"));
        assert_eq!(target.get("ssl.ca.location").map(String::as_str), Some("/opt/kafka/cluster-ca-certs/target.crt"));
        let dropped = dropped(&imported);
        for key in [
            "source.ssl.truststore.type",
            "source.ssl.truststore.location",
            "source.ssl.truststore.password",
            "tasks.max",
            "key.converter",
            "value.converter",
        ] {
            assert!(dropped.contains(&key), "{key} listed: {dropped:?}");
        }
        assert!(imported.notes.is_empty(), "{:?}", imported.notes);
    }

    #[test]
    fn sasl_ssl_with_several_flows() {
        let text = include_str!("../tests/mm2-properties/sasl-ssl-several-flows.properties");
        let imported = import(&props(text)).unwrap();
        let flows = flows(&imported);
        assert_eq!(flows.len(), 3, "ap->eu is disabled");
        let (eu_us, us_eu, eu_ap) = (&flows["eu->us"], &flows["us->eu"], &flows["eu->ap"]);
        assert!(eu_us.replicates("orders") && eu_us.replicates("customers") && !eu_us.replicates("catalog"));
        assert!(us_eu.replicates("billing.x") && !us_eu.checkpoints.emit_checkpoints);
        assert!(eu_ap.replicates("catalog") && eu_ap.checkpoints.emit_checkpoints);
        assert!(matches!(eu_us.delivery(), crate::config::Delivery::ExactlyOnce { .. }), "exactly-once into us");
        assert_eq!(
            eu_us.writing.offset_syncs_topic_location,
            crate::config::SyncsLocation::Target,
            "exactly-once needs the target"
        );
        assert_eq!(eu_ap.writing.offset_syncs_topic_location, crate::config::SyncsLocation::Source);
        assert_eq!(eu_us.policy.remote_topic("eu", "orders"), "eu_orders", "separator");
        assert_eq!(eu_us.writing.offset_lag_max, 500);
        assert_eq!(eu_us.heartbeats.emit_heartbeats_interval, std::time::Duration::from_secs(5));
        assert!(eu_us.topic_configs.interval().is_none());
        for f in [eu_us, us_eu] {
            assert_eq!(f.source.client.get("sasl.username").map(String::as_str), Some("mm2"));
            assert_eq!(f.source.client.get("sasl.mechanisms").map(String::as_str), Some("SCRAM-SHA-512"));
            assert_eq!(f.source.client.get("ssl.ca.location").map(String::as_str), Some("/etc/kafka/ca.pem"));
        }
        let ap = &eu_ap.target.client;
        assert_eq!(ap.get("sasl.username").map(String::as_str), Some("mm2-ap"), "the cluster's own setting wins");
        assert_eq!(ap.get("sasl.password").map(String::as_str), Some("ap-secret"));
        assert!(dropped(&imported).is_empty(), "{:?}", imported.dropped);
    }

    #[test]
    fn errors_name_the_key() {
        assert!(import(&props("a.bootstrap.servers = x\n")).err().unwrap().starts_with("clusters"));
        assert!(import(&props("clusters = a\n")).err().unwrap().starts_with("a.bootstrap.servers"));
        let bad = "clusters = a, b\na.bootstrap.servers = x\nb.bootstrap.servers = y\na->b.enabled = true\nreplication.policy.class = com.acme.Custom\n";
        assert!(import(&props(bad)).err().unwrap().starts_with("replication.policy.class"));
    }
}
