//! `[[clusters]]`: a Kafka cluster's alias, bootstrap servers, zones and librdkafka client
//! settings, and the checks on them (aliases usable in topic names, settings Strait controls,
//! secrets never shown, files the clients read).

use std::collections::BTreeMap;

use rdkafka::config::ClientConfig;
use serde::{Deserialize, Serialize};

use super::kinds::ConnectionsPerBroker;
use crate::rules::{err, ConfigError};

/// One Kafka cluster. Its `Debug` output hides secret client settings ([`is_secret`]).
#[derive(Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Name used in flows, topic prefixes and MM2 internal topic names. Must not contain a flow's
    /// replication-policy separator.
    pub alias: String,
    /// Comma-separated `host:port` list (librdkafka `bootstrap.servers`).
    pub bootstrap_servers: String,
    /// Compliance zones the cluster's data lives in (e.g. `["eu"]`); checked by residency policies.
    /// Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    /// librdkafka properties added to every client of this cluster (security, timeouts...), as
    /// strings. Default: none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub client: BTreeMap<String, String>,
    /// Connections kept to each broker by the batch path's client, as a source by the record
    /// path's consumers, and as a target by the at-least-once record producers: `"auto"` or 1
    /// to 16 ([`ConnectionsPerBroker`]). Default `"auto"`.
    #[serde(default, skip_serializing_if = "ConnectionsPerBroker::is_auto")]
    pub connections_per_broker: ConnectionsPerBroker,
}

/// Whether the librdkafka property `key` holds a secret (passwords, private keys, OAuth client
/// secrets, JAAS-style configs): never printed, whatever the log level.
pub fn is_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["password", "secret", "ssl.key.pem", "ssl_key", "sasl.oauthbearer.config", "jaas"].iter().any(|s| key.contains(s))
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let client: BTreeMap<&str, &str> = self
            .client
            .iter()
            .map(|(k, v)| (k.as_str(), if is_secret(k) { "[redacted]" } else { v.as_str() }))
            .collect();
        f.debug_struct("ClusterConfig")
            .field("alias", &self.alias)
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("zones", &self.zones)
            .field("client", &client)
            .field("connections_per_broker", &self.connections_per_broker)
            .finish()
    }
}

impl ClusterConfig {
    /// `<role> cluster <alias> at <bootstrap servers>`, how errors and logs name it (`role`:
    /// "source" or "target").
    pub fn named(&self, role: &str) -> String {
        format!("{role} cluster {} at {}", self.alias, self.bootstrap_servers)
    }

    /// librdkafka config for a client of this cluster: bootstrap servers, then `base` settings,
    /// then the cluster's own `client` overrides (which win, so an operator can tune anything).
    pub fn client_config(&self, base: &[(&str, &str)]) -> ClientConfig {
        let mut cfg = ClientConfig::new();
        cfg.set("bootstrap.servers", &self.bootstrap_servers);
        cfg.set("client.id", format!("strait-{}", self.alias));
        for (k, v) in base {
            cfg.set(*k, *v);
        }
        for (k, v) in &self.client {
            cfg.set(k, v);
        }
        cfg
    }
}

/// librdkafka properties Strait sets itself: overriding them would silently change where a flow
/// starts, what it reads, or its delivery guarantee, so a cluster's `client` table may not hold them.
const STRAIT_CONTROLLED: &[&str] = &[
    "bootstrap.servers",
    "group.id",
    "auto.offset.reset",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "isolation.level",
    "enable.partition.eof",
    "enable.idempotence",
    "enable.gapless.guarantee",
    "acks",
    "transactional.id",
    "transaction.timeout.ms",
];

/// Checks every cluster and indexes them by alias. Errors name `clusters[i].<field>`: an alias
/// empty, not usable in topic names or repeated; no bootstrap server; a client setting Strait
/// controls, or one librdkafka refuses (a secret's value never shown).
pub fn by_alias(clusters: &[ClusterConfig]) -> Result<BTreeMap<String, &ClusterConfig>, ConfigError> {
    let mut aliases = BTreeMap::new();
    for (i, c) in clusters.iter().enumerate() {
        let field = format!("clusters[{i}]");
        if c.alias.trim().is_empty() {
            return Err(err(format!("{field}.alias"), "must not be empty"));
        }
        if !c.alias.chars().all(|ch| ch.is_ascii_alphanumeric() || "._-".contains(ch)) || c.alias.len() > 100 {
            return Err(err(
                format!("{field}.alias"),
                format!("{:?} must be at most 100 of [a-zA-Z0-9._-]: it becomes part of topic names", c.alias),
            ));
        }
        if c.bootstrap_servers.split(',').all(|h| h.trim().is_empty()) {
            return Err(err(format!("{field}.bootstrap_servers"), "must list at least one host:port"));
        }
        if let Some(key) = c.client.keys().find(|k| STRAIT_CONTROLLED.contains(&k.as_str())) {
            return Err(err(
                format!("{field}.client.\"{key}\""),
                "Strait sets this itself (where it reads from, what it commits, how it fences); remove it",
            ));
        }
        if let Err(e) = c.client_config(&[]).create_native_config() {
            // librdkafka's message quotes the value it rejects: never a secret's.
            let mut message = e.to_string();
            for (_, v) in c.client.iter().filter(|(k, v)| is_secret(k) && !v.is_empty()) {
                message = message.replace(v.as_str(), "[redacted]");
            }
            return Err(err(format!("{field}.client"), format!("librdkafka rejects these settings: {message}")));
        }
        if aliases.insert(c.alias.clone(), c).is_some() {
            return Err(err(format!("{field}.alias"), format!("duplicate cluster alias {:?}", c.alias)));
        }
    }
    Ok(aliases)
}

/// Every file named in a cluster's client settings ([`FILE_SETTINGS`]) can be read. Errors:
/// `clusters[i].client."<key>"` with the path and the OS error.
pub fn check_client_files(clusters: &[ClusterConfig]) -> Result<(), ConfigError> {
    for (i, c) in clusters.iter().enumerate() {
        for (key, path) in c.client.iter().filter(|(k, _)| FILE_SETTINGS.contains(&k.as_str())) {
            if let Some(why) = unreadable(key, path) {
                return Err(err(format!("clusters[{i}].client.\"{key}\""), why));
            }
        }
    }
    Ok(())
}

/// The client settings of cluster `alias` are ones the batch path's own client honours
/// ([`strait_wire::Security::from_client_settings`]: TLS, SASL PLAIN and SCRAM), for a flow with
/// `copy = "batches"`. Errors: `clusters[i].client."<key>"` with the reason.
pub fn check_batch_client(clusters: &[ClusterConfig], alias: &str) -> Result<(), ConfigError> {
    let Some((i, c)) = clusters.iter().enumerate().find(|(_, c)| c.alias == alias) else { return Ok(()) };
    strait_wire::Security::from_client_settings(&c.client).map(|_| ()).map_err(|e| {
        err(
            format!("clusters[{i}].client.\"{}\"", e.key),
            format!("{} (copy = \"batches\" reads it with its own client)", e.reason),
        )
    })
}

/// librdkafka client properties naming a file Strait's clients read (or the kinit command, for
/// the keytab); checked readable by [`check_client_files`]. `ssl.ca.location` and `https.ca.location`
/// may name a directory, or be `probe` (the system's CA stores).
const FILE_SETTINGS: &[&str] = &[
    "ssl.ca.location",
    "https.ca.location",
    "ssl.crl.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.keystore.location",
    "ssl.engine.location",
    "sasl.kerberos.keytab",
    "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.file",
    "sasl.oauthbearer.assertion.jwt.template.file",
];

/// Why the file `path` named by client property `key` cannot be used, or `None` when it can be read.
pub(super) fn unreadable(key: &str, path: &str) -> Option<String> {
    let ca = key.ends_with("ca.location");
    if path.is_empty() || (ca && path == "probe") {
        return None;
    }
    let readable = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() && ca => std::fs::read_dir(path).map(|_| ()),
        Ok(m) if m.is_dir() => return Some(format!("{path:?} is a directory, not a file")),
        Ok(_) => std::fs::File::open(path).map(|_| ()),
        Err(e) => Err(e),
    };
    readable.err().map(|e| format!("cannot read {path:?}: {e}"))
}
