//! `strait import-mm2` of Strimzi's `KafkaMirrorMaker2` resource (YAML), in both shapes of its
//! API: `v1beta2` (`spec.clusters[]`, `mirrors[].sourceCluster`/`targetCluster`) and `v1`
//! (`spec.target`, `mirrors[].source`, Strimzi 1.0). The resource becomes the MM2 properties
//! Strimzi gives MM2 (each cluster's `bootstrap.servers`, its security from `tls` and
//! `authentication`, the connectors' `config`, the patterns as `topics` and `groups`), imported
//! as a properties file is ([`super::import`]). The Secrets it names become references to files
//! under a directory where each Secret is mounted (`<dir>/<secret name>/<key>`, [`SECRETS_DIR`]
//! by default, as the Helm chart mounts them): passwords as `${directory:...}`, certificates and
//! keys as paths librdkafka reads.

use std::collections::{BTreeMap, HashMap};

use serde::de::IgnoredAny;
use serde::Deserialize;

use super::{build, finish, Imported};

/// Where the imported config expects each Secret the resource names, mounted as a directory.
pub const SECRETS_DIR: &str = "/etc/strait/secrets";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Resource {
    api_version: String,
    kind: String,
    spec: Option<Spec>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    replicas: Option<u32>,
    /// `v1beta2`: every cluster, and which one Connect runs on (the target).
    #[serde(default)]
    clusters: Vec<Cluster>,
    connect_cluster: Option<String>,
    /// `v1`: the target cluster.
    target: Option<Cluster>,
    #[serde(default)]
    mirrors: Vec<Mirror>,
    /// `version`, `image`, `resources`, `template`... (Kubernetes and Connect concerns).
    #[serde(flatten)]
    other: BTreeMap<String, IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Cluster {
    alias: Option<String>,
    bootstrap_servers: String,
    tls: Option<Tls>,
    authentication: Option<Authentication>,
    #[serde(default)]
    config: BTreeMap<String, serde_json::Value>,
    /// `v1`'s target: Connect's source offsets topic, where MM2's positions are.
    offset_storage_topic: Option<String>,
    /// `v1`'s target: `groupId` and Connect's other topics.
    #[serde(flatten)]
    other: BTreeMap<String, IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Tls {
    #[serde(default)]
    trusted_certificates: Vec<SecretFile>,
}

/// A file of a Secret: `certificate` (or `pattern`, for several) in `secretName`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SecretFile {
    secret_name: String,
    certificate: Option<String>,
    pattern: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PasswordSecret {
    secret_name: String,
    password: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CertificateAndKey {
    secret_name: String,
    certificate: String,
    key: String,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
enum Authentication {
    #[serde(rename_all = "camelCase")]
    Tls { certificate_and_key: CertificateAndKey },
    #[serde(rename = "scram-sha-512", rename_all = "camelCase")]
    ScramSha512 { username: String, password_secret: PasswordSecret },
    #[serde(rename = "scram-sha-256", rename_all = "camelCase")]
    ScramSha256 { username: String, password_secret: PasswordSecret },
    #[serde(rename_all = "camelCase")]
    Plain { username: String, password_secret: PasswordSecret },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Mirror {
    /// `v1beta2`: aliases of `spec.clusters`.
    source_cluster: Option<String>,
    target_cluster: Option<String>,
    /// `v1`: the source cluster itself.
    source: Option<Cluster>,
    source_connector: Option<Connector>,
    checkpoint_connector: Option<Connector>,
    heartbeat_connector: Option<Connector>,
    topics_pattern: Option<String>,
    topics_exclude_pattern: Option<String>,
    topics_blacklist_pattern: Option<String>,
    groups_pattern: Option<String>,
    groups_exclude_pattern: Option<String>,
    groups_blacklist_pattern: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Connector {
    tasks_max: Option<u32>,
    #[serde(default)]
    config: BTreeMap<String, serde_json::Value>,
}

/// Imports a `KafkaMirrorMaker2` resource (`yaml`, one document), its Secrets expected under
/// `secrets_dir`; `spec.replicas` above 1 turns scale-out on for every flow, so that the
/// instances share them, and MM2's source offsets are read from Connect's offsets topic
/// (`mm2_offsets_topic`). Errors, naming the field: not YAML, not one `KafkaMirrorMaker2`, a
/// cluster without an alias or declared twice, a mirror or `connectCluster` naming an undeclared
/// cluster, two mirrors of one pair, an authentication Strait cannot carry (`oauth`, `custom`);
/// then as [`super::import`].
pub fn import_strimzi(yaml: &str, secrets_dir: &str) -> Result<Imported, String> {
    let resource: Resource =
        serde_saphyr::from_str(yaml).map_err(|e| format!("not one KafkaMirrorMaker2 resource: {e}"))?;
    if resource.kind != "KafkaMirrorMaker2" || !resource.api_version.starts_with("kafka.strimzi.io/") {
        return Err(format!(
            "{} {}: not a Strimzi KafkaMirrorMaker2 (give one resource)",
            resource.api_version, resource.kind
        ));
    }
    let spec = resource.spec.ok_or("spec: missing")?;
    let why = "a Kubernetes or Connect setting: see the Helm chart";
    let dropped = spec.other.keys().map(|k| (format!("spec.{k}"), why.into())).collect();
    let mut props = Properties { map: HashMap::new(), extra: BTreeMap::new(), dropped, secrets_dir };
    // The target: v1's own section, or v1beta2's cluster Connect runs on; MM2's source offsets
    // are in its Connect offsets topic (Strimzi's default name unless set).
    let mut declared = Vec::new();
    let (target, mut offsets) = match &spec.target {
        Some(t) => {
            let why = "Connect's own: Strait runs no Connect";
            props.dropped.extend(t.other.keys().map(|k| (format!("spec.target.{k}"), why.into())));
            declared.push(props.cluster(t.alias.as_deref().unwrap_or("target"), t, "spec.target")?);
            (declared[0].clone(), t.offset_storage_topic.clone())
        }
        None => {
            (spec.connect_cluster.clone().ok_or("spec.connectCluster: missing (or spec.target, the v1 shape)")?, None)
        }
    };
    for (i, cluster) in spec.clusters.iter().enumerate() {
        let field = format!("spec.clusters[{i}]");
        let alias = cluster.alias.as_deref().ok_or(format!("{field}.alias: missing"))?;
        if declared.iter().any(|a| a == alias) {
            return Err(format!("{field}.alias: {alias} is declared twice"));
        }
        if alias == target {
            let topic = cluster.config.get("offset.storage.topic").map(scalar);
            offsets = Some(topic.unwrap_or_else(|| "mirrormaker2-cluster-offsets".into()));
        }
        declared.push(props.cluster(alias, cluster, &field)?);
    }
    if !declared.contains(&target) {
        return Err(format!("spec.connectCluster: {target} is not one of spec.clusters"));
    }
    let mut names = Vec::new();
    for (i, mirror) in spec.mirrors.iter().enumerate() {
        let field = format!("spec.mirrors[{i}]");
        let source = match (&mirror.source, &mirror.source_cluster) {
            (Some(c), _) => {
                let alias = c.alias.as_deref().ok_or(format!("{field}.source.alias: missing"))?;
                let alias = props.cluster(alias, c, &format!("{field}.source"))?;
                declared.push(alias.clone());
                alias
            }
            (None, Some(alias)) if declared.contains(alias) => alias.clone(),
            (None, Some(alias)) => return Err(format!("{field}.sourceCluster: {alias} is not one of spec.clusters")),
            (None, None) => return Err(format!("{field}: names no source cluster")),
        };
        let target = mirror.target_cluster.clone().unwrap_or_else(|| target.clone());
        if !declared.contains(&target) {
            return Err(format!("{field}.targetCluster: {target} is not one of spec.clusters"));
        }
        let name = format!("{source}->{target}");
        if names.contains(&name) {
            return Err(format!("{field}: a second mirror {name}; give each pair one mirror"));
        }
        if mirror.source_connector.is_none() {
            let why = "no sourceConnector: Strimzi copies nothing for this mirror, so no flow";
            props.dropped.push((field, why.into()));
            continue;
        }
        props.mirror(&name, mirror, &field);
        names.push(name);
    }
    let mut unique = Vec::new();
    declared.retain(|a| {
        !unique.contains(a) && {
            unique.push(a.clone());
            true
        }
    });
    props.map.insert("clusters".into(), declared.join(", "));
    let mut built = build(&props.map, &props.extra)?;
    for flow in built.config.flows.iter_mut().filter(|f| f.routing.target == target) {
        flow.reading.mm2_offsets_topic = offsets.clone();
        if let Some(replicas) = spec.replicas.filter(|r| *r > 1) {
            flow.scale_out.enabled = true;
            flow.scale_out.slots = flow.scale_out.slots.max(replicas);
        }
    }
    finish(built, props.dropped)
}

/// The MM2 properties a resource makes, and the librdkafka settings no property carries.
struct Properties<'a> {
    map: HashMap<String, String>,
    extra: BTreeMap<String, BTreeMap<String, String>>,
    /// What the resource holds that Strait does not carry, with why.
    dropped: Vec<(String, String)>,
    secrets_dir: &'a str,
}

impl Properties<'_> {
    /// `<secrets_dir>/<secret>/<key>`.
    fn path(&self, secret: &str, key: &str) -> String {
        format!("{}/{secret}/{key}", self.secrets_dir)
    }

    /// Adds cluster `alias` (at `field`): its address, security and `config`. Returns the alias.
    fn cluster(&mut self, alias: &str, cluster: &Cluster, field: &str) -> Result<String, String> {
        let set =
            |map: &mut HashMap<String, String>, key: &str, value: String| map.insert(format!("{alias}.{key}"), value);
        set(&mut self.map, "bootstrap.servers", cluster.bootstrap_servers.clone());
        // Connect's offsets topic is read from the resource itself (`import_strimzi`).
        for (key, value) in cluster.config.iter().filter(|(k, _)| *k != "offset.storage.topic") {
            set(&mut self.map, key, scalar(value));
        }
        let tls = cluster.tls.is_some();
        let certificates = cluster.tls.as_ref().map_or(&[][..], |t| &t.trusted_certificates[..]);
        for i in 1..certificates.len() {
            let why = "librdkafka reads one CA file (ssl.ca.location): put every CA into the first one's file";
            self.dropped.push((format!("{field}.tls.trustedCertificates[{i}]"), why.into()));
        }
        if let Some(ca) = certificates.first() {
            // librdkafka reads one CA file; Strimzi's cluster CA Secret holds it as `ca.crt`.
            let file = ca.certificate.as_deref().or(ca.pattern.as_ref().map(|_| "ca.crt")).unwrap_or("ca.crt");
            let location = self.path(&ca.secret_name, file);
            set(&mut self.map, "ssl.truststore.type", "PEM".into());
            set(&mut self.map, "ssl.truststore.location", location);
        }
        let protocol = match (&cluster.authentication, tls) {
            (None, false) => None,
            // Mutual TLS is TLS, whether or not the resource says what to trust.
            (None, true) | (Some(Authentication::Tls { .. }), _) => Some("SSL"),
            (Some(_), true) => Some("SASL_SSL"),
            (Some(_), false) => Some("SASL_PLAINTEXT"),
        };
        if let Some(protocol) = protocol {
            set(&mut self.map, "security.protocol", protocol.into());
        }
        let (mechanism, module, username, secret) = match &cluster.authentication {
            None => return Ok(alias.to_string()),
            Some(Authentication::Tls { certificate_and_key: c }) => {
                let settings = [
                    ("ssl.certificate.location", self.path(&c.secret_name, &c.certificate)),
                    ("ssl.key.location", self.path(&c.secret_name, &c.key)),
                ];
                self.extra.entry(alias.to_string()).or_default().extend(settings.map(|(k, v)| (k.to_string(), v)));
                return Ok(alias.to_string());
            }
            Some(Authentication::ScramSha512 { username, password_secret }) => ("SCRAM-SHA-512", "scram.ScramLoginModule", username, password_secret),
            Some(Authentication::ScramSha256 { username, password_secret }) => ("SCRAM-SHA-256", "scram.ScramLoginModule", username, password_secret),
            Some(Authentication::Plain { username, password_secret }) => ("PLAIN", "plain.PlainLoginModule", username, password_secret),
            Some(Authentication::Other) => {
                return Err(format!("{field}.authentication: only tls, scram-sha-512, scram-sha-256 and plain can be carried; set sasl.* in [clusters.client] by hand"))
            }
        };
        let password = format!("${{directory:{}/{}:{}}}", self.secrets_dir, secret.secret_name, secret.password);
        set(&mut self.map, "sasl.mechanism", mechanism.into());
        let jaas = format!(
            "org.apache.kafka.common.security.{module} required username=\"{username}\" password=\"{password}\";"
        );
        set(&mut self.map, "sasl.jaas.config", jaas);
        Ok(alias.to_string())
    }

    /// Adds the flow `name` (`source->target`) of `mirror` (at `field`): enabled, its connectors'
    /// `config`, then its patterns (which win, as in Strimzi); checkpoints and heartbeats off
    /// where the mirror has no connector for them; `tasksMax` to `dropped`.
    fn mirror(&mut self, name: &str, mirror: &Mirror, field: &str) {
        self.map.insert(format!("{name}.enabled"), "true".into());
        let connectors = [
            ("sourceConnector", &mirror.source_connector, ""),
            ("checkpointConnector", &mirror.checkpoint_connector, "emit.checkpoints.enabled"),
            ("heartbeatConnector", &mirror.heartbeat_connector, "emit.heartbeats.enabled"),
        ];
        for (kind, connector, off) in connectors {
            let Some(connector) = connector else {
                if !off.is_empty() {
                    self.map.insert(format!("{name}.{off}"), "false".into());
                }
                continue;
            };
            for (key, value) in &connector.config {
                self.map.insert(format!("{name}.{key}"), scalar(value));
            }
            if connector.tasks_max.is_some() {
                let why = "Strait has no Connect tasks: one instance reads every partition, and spec.replicas share the flows (scale-out)";
                self.dropped.push((format!("{field}.{kind}.tasksMax"), why.into()));
            }
        }
        let patterns = [
            ("topics", &mirror.topics_pattern),
            ("topics.exclude", &mirror.topics_exclude_pattern),
            ("topics.exclude", &mirror.topics_blacklist_pattern),
            ("groups", &mirror.groups_pattern),
            ("groups.exclude", &mirror.groups_exclude_pattern),
            ("groups.exclude", &mirror.groups_blacklist_pattern),
        ];
        for (key, pattern) in patterns {
            if let Some(p) = pattern {
                self.map.insert(format!("{name}.{key}"), p.clone());
            }
        }
    }
}

/// A YAML scalar as MM2 reads it: text as is, numbers and booleans written out.
fn scalar(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests;
