//! How a connection reaches its broker: plaintext, TLS, SASL or both, read from the same
//! librdkafka settings (`security.protocol`, `sasl.*`, `ssl.*`) as the rest of Strait's clients,
//! refusing, by key, what this client cannot honour.
//!
//! TLS and SCRAM's primitives (PBKDF2, HMAC, SHA-2, nonces) are OpenSSL's, the library
//! librdkafka uses for the same: the same CA files, certificates and keys load the same way.
//! OAUTHBEARER's tokens come as librdkafka gets them ([`crate::oauth`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode};
use openssl::x509::X509VerifyResult;
use tokio::net::TcpStream;
use tokio_openssl::SslStream;

use crate::error::WireError;
use crate::oauth::{OAuthBearer, OAUTHBEARER_KEYS};

/// How connections are secured. The default is plaintext without authentication.
#[derive(Clone, Default)]
pub struct Security {
    pub(crate) tls: Option<Arc<Tls>>,
    pub(crate) sasl: Option<Sasl>,
}

/// TLS as librdkafka's settings ask for it.
pub(crate) struct Tls {
    pub(crate) connector: SslConnector,
    /// Whether the broker's certificate must name the host connected to
    /// (`ssl.endpoint.identification.algorithm = https`, librdkafka's default).
    pub(crate) verify_hostname: bool,
}

/// A SASL mechanism this client speaks (KIP-43 PLAIN, KIP-84 SCRAM, KIP-255 OAUTHBEARER).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    OAuthBearer,
}

impl Mechanism {
    /// Its name in SaslHandshake.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
            Self::OAuthBearer => "OAUTHBEARER",
        }
    }
}

/// A SASL mechanism of a username and password.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PasswordMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

/// SASL credentials.
#[derive(Clone)]
pub(crate) enum Sasl {
    /// PLAIN or SCRAM: a username and password.
    Password { mechanism: PasswordMechanism, username: String, password: String },
    /// OAUTHBEARER: a token for each connection.
    Token(OAuthBearer),
}

impl Sasl {
    /// The mechanism these credentials are for.
    pub(crate) fn mechanism(&self) -> Mechanism {
        match self {
            Self::Password { mechanism: PasswordMechanism::Plain, .. } => Mechanism::Plain,
            Self::Password { mechanism: PasswordMechanism::ScramSha256, .. } => Mechanism::ScramSha256,
            Self::Password { mechanism: PasswordMechanism::ScramSha512, .. } => Mechanism::ScramSha512,
            Self::Token(_) => Mechanism::OAuthBearer,
        }
    }
}

/// A client setting this client cannot honour, named by its key.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct SettingError {
    pub key: String,
    pub reason: String,
}

/// The `ssl.*` settings read; any other `ssl.*` key is refused when TLS is on.
const TLS_KEYS: &[&str] = &[
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification",
];
/// The `sasl.*` settings read (with [`OAUTHBEARER_KEYS`]); any other `sasl.*` key is refused when
/// SASL is on.
const SASL_KEYS: &[&str] = &["sasl.mechanisms", "sasl.mechanism", "sasl.username", "sasl.password"];

impl Security {
    /// From librdkafka client settings (`[clusters.client]`): `security.protocol` (`plaintext`,
    /// `ssl`, `sasl_plaintext`, `sasl_ssl`; default plaintext); with SASL, `sasl.mechanisms` (or
    /// `sasl.mechanism`) `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512` with `sasl.username` and
    /// `sasl.password`, or `OAUTHBEARER` with tokens from OIDC or librdkafka's unsecured JWT
    /// (as librdkafka's settings ask); with TLS, `ssl.ca.location` (a PEM file or a directory; default or
    /// `probe`: the system's), `ssl.certificate.location` + `ssl.key.location` (+
    /// `ssl.key.password`) for a client certificate, `ssl.endpoint.identification.algorithm`
    /// (`https` or `none`), `enable.ssl.certificate.verification`. Settings of the layer not in
    /// use are ignored, as librdkafka does; other keys are librdkafka's tuning and are not read.
    /// Errors: a [`SettingError`] naming the first key not honoured: an unknown protocol or
    /// mechanism (GSSAPI: librdkafka's default mechanism, so SASL needs one set), OAUTHBEARER
    /// without a token source, another `ssl.*`/`sasl.*` key in use, a missing username or password, a file
    /// that does not load.
    pub fn from_client_settings(settings: &BTreeMap<String, String>) -> Result<Self, SettingError> {
        let refuse = |key: &str, reason: String| SettingError { key: key.to_string(), reason };
        let protocol = settings.get("security.protocol").map(|p| p.to_ascii_lowercase());
        let (tls, sasl) = match protocol.as_deref().unwrap_or("plaintext") {
            "plaintext" => (false, false),
            "ssl" => (true, false),
            "sasl_plaintext" => (false, true),
            "sasl_ssl" => (true, true),
            other => {
                return Err(refuse(
                    "security.protocol",
                    format!("{other:?} is not plaintext, ssl, sasl_plaintext or sasl_ssl"),
                ))
            }
        };
        for key in settings.keys() {
            let unread = |prefix: &str, known: &[&str]| key.starts_with(prefix) && !known.contains(&key.as_str());
            if (tls && (unread("ssl.", TLS_KEYS) || unread("enable.ssl.", TLS_KEYS)))
                || (sasl && unread("sasl.", &[SASL_KEYS, OAUTHBEARER_KEYS].concat()))
            {
                return Err(refuse(key, "not supported by the batch path's client".into()));
            }
        }
        let mut security = Self::default();
        if sasl {
            let key = if settings.contains_key("sasl.mechanisms") { "sasl.mechanisms" } else { "sasl.mechanism" };
            let mechanism = match settings.get(key).map(|m| m.to_ascii_uppercase()).as_deref() {
                Some("PLAIN") => Some(PasswordMechanism::Plain),
                Some("SCRAM-SHA-256") => Some(PasswordMechanism::ScramSha256),
                Some("SCRAM-SHA-512") => Some(PasswordMechanism::ScramSha512),
                Some("OAUTHBEARER") => None,
                other => {
                    let named = other.unwrap_or("GSSAPI (librdkafka's default)");
                    return Err(refuse(
                        key,
                        format!("{named}: the batch path speaks PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER"),
                    ));
                }
            };
            let get = |key: &str| settings.get(key).cloned().ok_or_else(|| refuse(key, "required with SASL".into()));
            security.sasl = Some(match mechanism {
                None => Sasl::Token(OAuthBearer::from_settings(settings)?),
                Some(mechanism) => {
                    Sasl::Password { mechanism, username: get("sasl.username")?, password: get("sasl.password")? }
                }
            });
        }
        if tls {
            security.tls = Some(Arc::new(tls_of(settings)?));
        }
        Ok(security)
    }

    /// Whether connections use TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The SASL mechanism connections authenticate with, if any.
    pub fn mechanism(&self) -> Option<Mechanism> {
        self.sasl.as_ref().map(Sasl::mechanism)
    }
}

fn tls_of(settings: &BTreeMap<String, String>) -> Result<Tls, SettingError> {
    let refuse = |key: &str, reason: String| SettingError { key: key.to_string(), reason };
    let openssl = |key: &'static str| move |e: openssl::error::ErrorStack| refuse(key, e.to_string());
    let mut builder = SslConnector::builder(SslMethod::tls_client()).map_err(openssl("security.protocol"))?;
    match settings.get("ssl.ca.location").map(String::as_str) {
        None | Some("probe") => builder.set_default_verify_paths().map_err(openssl("ssl.ca.location"))?,
        Some(dir) if Path::new(dir).is_dir() => {
            builder.load_verify_locations(None, Some(Path::new(dir))).map_err(openssl("ssl.ca.location"))?
        }
        Some(file) => builder.set_ca_file(file).map_err(openssl("ssl.ca.location"))?,
    }
    match (settings.get("ssl.certificate.location"), settings.get("ssl.key.location")) {
        (None, None) => {}
        (Some(cert), Some(key)) => {
            builder.set_certificate_chain_file(cert).map_err(openssl("ssl.certificate.location"))?;
            let pem = std::fs::read(key).map_err(|e| refuse("ssl.key.location", format!("{key}: {e}")))?;
            let private = match settings.get("ssl.key.password") {
                Some(pass) => openssl::pkey::PKey::private_key_from_pem_passphrase(&pem, pass.as_bytes()),
                None => openssl::pkey::PKey::private_key_from_pem(&pem),
            };
            let private = private.map_err(openssl("ssl.key.location"))?;
            builder.set_private_key(&private).map_err(openssl("ssl.key.location"))?;
            builder.check_private_key().map_err(openssl("ssl.key.location"))?;
        }
        (Some(_), None) => return Err(refuse("ssl.key.location", "required with ssl.certificate.location".into())),
        (None, Some(_)) => return Err(refuse("ssl.certificate.location", "required with ssl.key.location".into())),
    }
    let verify = match settings.get("enable.ssl.certificate.verification").map(String::as_str) {
        None | Some("true") => true,
        Some("false") => false,
        Some(other) => {
            return Err(refuse("enable.ssl.certificate.verification", format!("{other:?} is not true or false")))
        }
    };
    if !verify {
        builder.set_verify(SslVerifyMode::NONE);
    }
    let verify_hostname = match settings.get("ssl.endpoint.identification.algorithm").map(|a| a.to_ascii_lowercase()) {
        None => true,
        Some(a) if a == "https" => true,
        Some(a) if a == "none" => false,
        Some(other) => {
            return Err(refuse("ssl.endpoint.identification.algorithm", format!("{other:?} is not https or none")))
        }
    };
    Ok(Tls { connector: builder.build(), verify_hostname: verify && verify_hostname })
}

/// The TLS handshake over `tcp` to `addr` (`host:port`), the certificate checked against the
/// host when asked. Errors: [`WireError::Tls`] with OpenSSL's reason and the certificate check's.
pub(crate) async fn tls_handshake(tls: &Tls, addr: &str, tcp: TcpStream) -> Result<SslStream<TcpStream>, WireError> {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host).trim_start_matches('[').trim_end_matches(']');
    let failed = |message: String| WireError::Tls { addr: addr.to_string(), message };
    let ssl = tls
        .connector
        .configure()
        .and_then(|c| c.verify_hostname(tls.verify_hostname).into_ssl(host))
        .map_err(|e| failed(e.to_string()))?;
    let mut stream = SslStream::new(ssl, tcp).map_err(|e| failed(e.to_string()))?;
    if let Err(e) = Pin::new(&mut stream).connect().await {
        let verified = stream.ssl().verify_result();
        let check =
            if verified == X509VerifyResult::OK { String::new() } else { format!(" ({})", verified.error_string()) };
        return Err(failed(format!("{e}{check}")));
    }
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn refused(pairs: &[(&str, &str)]) -> SettingError {
        Security::from_client_settings(&settings(pairs)).err().expect("refused")
    }

    #[test]
    fn plaintext_by_default_and_other_layers_settings_ignored() {
        let s =
            Security::from_client_settings(&settings(&[("linger.ms", "5"), ("ssl.keystore.location", "x")])).unwrap();
        assert!(!s.is_tls());
        assert_eq!(s.mechanism(), None);
    }

    #[test]
    fn sasl_reads_the_mechanism_under_either_name() {
        let both = [("sasl.username", "u"), ("sasl.password", "p")];
        for (key, mech, want) in [
            ("sasl.mechanisms", "SCRAM-SHA-512", Mechanism::ScramSha512),
            ("sasl.mechanism", "scram-sha-256", Mechanism::ScramSha256),
            ("sasl.mechanisms", "PLAIN", Mechanism::Plain),
        ] {
            let pairs = [&[("security.protocol", "SASL_PLAINTEXT"), (key, mech)][..], &both].concat();
            assert_eq!(Security::from_client_settings(&settings(&pairs)).unwrap().mechanism(), Some(want));
        }
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_by_key() {
        let e = refused(&[("security.protocol", "sasl_plaintext"), ("sasl.username", "u"), ("sasl.password", "p")]);
        assert_eq!(e.key, "sasl.mechanism");
        assert!(e.reason.contains("GSSAPI"), "{e}");
        let e = refused(&[("security.protocol", "sasl_ssl"), ("sasl.mechanisms", "OAUTHBEARER")]);
        assert_eq!(e.key, "enable.sasl.oauthbearer.unsecure.jwt", "OAUTHBEARER without librdkafka's unsecured JWT");
        let e =
            refused(&[("security.protocol", "sasl_plaintext"), ("sasl.mechanisms", "PLAIN"), ("sasl.username", "u")]);
        assert_eq!(e.key, "sasl.password");
        let e = refused(&[("security.protocol", "ssl"), ("ssl.keystore.location", "/k.p12")]);
        assert_eq!(e.key, "ssl.keystore.location");
        let e = refused(&[
            ("security.protocol", "sasl_plaintext"),
            ("sasl.kerberos.keytab", "/k"),
            ("sasl.mechanisms", "PLAIN"),
        ]);
        assert_eq!(e.key, "sasl.kerberos.keytab");
        assert_eq!(refused(&[("security.protocol", "tls")]).key, "security.protocol");
        let e = refused(&[("security.protocol", "ssl"), ("ssl.ca.location", "/no/such/ca.pem")]);
        assert_eq!(e.key, "ssl.ca.location");
        let e = refused(&[("security.protocol", "ssl"), ("ssl.certificate.location", "/c.pem")]);
        assert_eq!(e.key, "ssl.key.location");
    }
}
