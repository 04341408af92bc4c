//! Clusters whose client listener is SASL_SSL, for security tests: a CA and a broker certificate
//! made with `openssl` at start, users with SCRAM-SHA-512 and SCRAM-SHA-256 credentials created by
//! the storage tool when formatting and PLAIN passwords in the listener's JAAS config,
//! OAUTHBEARER validated by Kafka's default, unsecured validator (any user, by an unsigned JWT),
//! and optionally Kafka's `StandardAuthorizer`, with ACLs added through Kafka's own `AclCommand`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{java_command, kafka_libs, launch, wait_ready, KafkaCluster, Launch};

/// What the broker needs for its SASL_SSL listener.
pub(crate) struct Listener {
    /// Private key (PKCS#8) and certificate chain, PEM.
    keystore: PathBuf,
    /// Users (name, password), for every mechanism enabled.
    users: Vec<(String, String)>,
    /// Run the StandardAuthorizer (deny unless an ACL allows; `ANONYMOUS` on the internal
    /// listener is a super user).
    authorizer: bool,
}

impl Listener {
    /// Lines for `server.properties`.
    pub(crate) fn properties(&self) -> String {
        let scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;";
        let plain_users: String = self.users.iter().map(|(u, p)| format!(" user_{u}=\"{p}\"")).collect();
        let mut p = format!(
            "sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN,OAUTHBEARER\n\
             listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={scram}\n\
             listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config={scram}\n\
             listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required{plain_users};\n\
             listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n\
             ssl.keystore.type=PEM\n\
             ssl.keystore.location={}\n",
            self.keystore.display()
        );
        if self.authorizer {
            p.push_str("authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\nsuper.users=User:ANONYMOUS\n");
        }
        p
    }

    /// `--add-scram` arguments of the storage tool, one per user and SCRAM mechanism.
    pub(crate) fn scram_users(&self) -> Vec<String> {
        let credential = |(u, p): &(String, String)| {
            ["SCRAM-SHA-512", "SCRAM-SHA-256"].map(|m| format!("{m}=[name={u},password={p}]"))
        };
        self.users.iter().flat_map(credential).collect()
    }
}

/// A running cluster with a SASL_SSL client listener.
pub struct SecureCluster {
    /// The cluster; `bootstrap` is the SASL_SSL listener, `internal` the unauthenticated one.
    pub cluster: KafkaCluster,
    /// The CA certificate (PEM) clients trust.
    pub ca: PathBuf,
}

/// Runs `openssl` with `args` in `dir`. Errors: openssl missing or failing.
fn openssl(dir: &Path, args: &[&str]) -> io::Result<()> {
    let out = Command::new("openssl").current_dir(dir).args(args).output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!("openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr))));
    }
    Ok(())
}

/// A CA (`ca.pem`) and a broker key and certificate for 127.0.0.1 signed by it, joined into
/// `keystore.pem`, in `dir`. Returns (CA, keystore).
fn certificates(dir: &Path) -> io::Result<(PathBuf, PathBuf)> {
    fs::create_dir_all(dir)?;
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=strait-test-ca",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ],
    )?;
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "broker.key",
            "-out",
            "broker.csr",
        ],
    )?;
    fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n")?;
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "broker.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "broker.crt",
        ],
    )?;
    let keystore = dir.join("keystore.pem");
    fs::write(&keystore, [fs::read(dir.join("broker.key"))?, fs::read(dir.join("broker.crt"))?].concat())?;
    Ok((dir.join("ca.pem"), keystore))
}

/// Starts a cluster in `dir` whose client listener is SASL_SSL with SCRAM and PLAIN `users`
/// (name, password), under the StandardAuthorizer when `authorizer`. Errors as
/// [`crate::start_clusters`], or openssl failing.
pub fn start_secure_cluster(dir: &Path, users: &[(&str, &str)], authorizer: bool) -> io::Result<SecureCluster> {
    let libs = kafka_libs()?;
    let (ca, keystore) = certificates(&dir.join("tls"))?;
    let users = users.iter().map(|(u, p)| (u.to_string(), p.to_string())).collect();
    let how = Launch { secure: Some(Listener { keystore, users, authorizer }), ..Launch::default() };
    let mut cluster = launch(&libs, &dir.join("cluster"), how)?;
    wait_ready(&mut cluster)?;
    Ok(SecureCluster { cluster, ca })
}

impl SecureCluster {
    /// librdkafka settings of a client of this cluster by OAUTHBEARER with tokens from the OIDC
    /// `endpoint` (`sasl.oauthbearer.method = oidc`) for `client_id` with `client_secret`; an
    /// `https` endpoint's certificate checked against `endpoint_ca` (`https.ca.location`).
    pub fn oidc_settings(
        &self,
        endpoint: &str,
        (client_id, client_secret): (&str, &str),
        endpoint_ca: Option<&Path>,
    ) -> Vec<(String, String)> {
        let mut settings = owned(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanisms", "OAUTHBEARER"),
            ("sasl.oauthbearer.method", "oidc"),
            ("sasl.oauthbearer.token.endpoint.url", endpoint),
            ("sasl.oauthbearer.client.id", client_id),
            ("sasl.oauthbearer.client.secret", client_secret),
            ("ssl.ca.location", &self.ca.display().to_string()),
        ]);
        if let Some(ca) = endpoint_ca {
            settings.push(("https.ca.location".into(), ca.display().to_string()));
        }
        settings
    }

    /// The brokers' key and certificate for 127.0.0.1 (one PEM file), signed by [`Self::ca`]:
    /// for a test server clients should trust as they trust the brokers.
    pub fn keystore(&self) -> PathBuf {
        self.ca.with_file_name("keystore.pem")
    }

    /// librdkafka settings of a client of this cluster as `user`, by OAUTHBEARER with
    /// librdkafka's unsecured JWT, which the broker's default validator takes.
    pub fn oauthbearer_settings(&self, user: &str) -> Vec<(String, String)> {
        owned(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanisms", "OAUTHBEARER"),
            ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
            ("sasl.oauthbearer.config", &format!("principal={user} lifeSeconds=600")),
            ("ssl.ca.location", &self.ca.display().to_string()),
        ])
    }

    /// librdkafka settings of a client of this cluster as `user` with `password`, by SCRAM-SHA-512.
    pub fn client_settings(&self, user: &str, password: &str) -> Vec<(String, String)> {
        owned(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanisms", "SCRAM-SHA-512"),
            ("sasl.username", user),
            ("sasl.password", password),
            ("ssl.ca.location", &self.ca.display().to_string()),
        ])
    }

    /// Adds an ACL with Kafka's `AclCommand` (`--add` then `args`, e.g.
    /// `["--allow-principal", "User:strait", "--operation", "Read", "--topic", "*"]`), through the
    /// internal listener. Errors: the command fails.
    pub fn allow(&self, args: &[&str]) -> io::Result<()> {
        self.acl_command(&[&["--add", "--force"][..], args].concat()).map(drop)
    }

    /// What Kafka's `AclCommand --list` prints for `args` (e.g. `["--topic", "orders"]`; none:
    /// every ACL), through the internal listener: a `Current ACLs for resource` line per resource
    /// (`ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`), then one
    /// `(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)` line per binding.
    /// Errors: the command fails.
    pub fn list_acls(&self, args: &[&str]) -> io::Result<String> {
        self.acl_command(&[&["--list"][..], args].concat())
    }

    /// Runs `AclCommand` with `args` against the internal listener; returns its stdout.
    fn acl_command(&self, args: &[&str]) -> io::Result<String> {
        let out = java_command(&kafka_libs()?, &self.cluster.dir, &[crate::HEAP])
            .arg("org.apache.kafka.tools.AclCommand")
            .args(["--bootstrap-server", &self.cluster.internal])
            .args(args)
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "AclCommand {args:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// Settings as owned pairs.
fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}
