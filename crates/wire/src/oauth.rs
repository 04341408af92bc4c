//! SASL OAUTHBEARER (KIP-255) with the tokens librdkafka gets: with `sasl.oauthbearer.method =
//! oidc`, from an OIDC provider ([`crate::oidc`]); else librdkafka's unsecured JWT, which it makes
//! itself when `enable.sasl.oauthbearer.unsecure.jwt` is true, from `sasl.oauthbearer.config`, for
//! brokers that validate with Kafka's `OAuthBearerUnsecuredValidatorCallbackHandler` (their
//! default), made here for each connection so none outlives its `lifeSeconds`. The client's
//! message is RFC 7628's: `n,,` `\x01auth=Bearer <token>` `\x01` then each SASL extension as
//! `key=value\x01`, then `\x01`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use openssl::base64;

use crate::error::WireError;
use crate::oidc::Oidc;
use crate::security::SettingError;

/// The OAUTHBEARER settings read besides `sasl.mechanism(s)`.
pub(crate) const OAUTHBEARER_KEYS: &[&str] = &[
    "sasl.oauthbearer.config",
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.extensions",
];

/// OAUTHBEARER credentials: where tokens come from, and the SASL extensions sent with them.
#[derive(Clone)]
pub(crate) struct OAuthBearer {
    tokens: Tokens,
    extensions: Vec<(String, String)>,
}

#[derive(Clone)]
enum Tokens {
    Unsecured(UnsecuredJwt),
    Oidc(Arc<Oidc>),
}

impl OAuthBearer {
    /// From librdkafka settings: `sasl.oauthbearer.method` `oidc` ([`Oidc::shared`],
    /// extensions from `sasl.oauthbearer.extensions`, `name=value,…`), or unset or `default`
    /// ([`UnsecuredJwt::from_settings`]). Errors: a [`SettingError`] naming the key.
    pub(crate) fn from_settings(settings: &BTreeMap<String, String>) -> Result<Self, SettingError> {
        let method = settings.get("sasl.oauthbearer.method").map(|m| m.to_ascii_lowercase());
        match method.as_deref() {
            None | Some("default") => {
                let (jwt, extensions) = UnsecuredJwt::from_settings(settings)?;
                Ok(Self { tokens: Tokens::Unsecured(jwt), extensions })
            }
            Some("oidc") => {
                let key = "sasl.oauthbearer.extensions";
                let listed = settings.get(key).map(String::as_str).unwrap_or_default().split(',');
                let extensions = (listed.filter(|e| !e.is_empty()))
                    .map(|e| e.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| SettingError { key: key.into(), reason: "not name=value,…".into() })?;
                Ok(Self { tokens: Tokens::Oidc(Oidc::shared(settings)?), extensions })
            }
            Some(other) => Err(SettingError {
                key: "sasl.oauthbearer.method".into(),
                reason: format!("{other:?} is not default or oidc"),
            }),
        }
    }

    /// The client's first and only message, with a token valid now. Errors: an OIDC token that
    /// could not be had ([`Oidc::token`]).
    pub(crate) async fn initial_response(&self) -> Result<Vec<u8>, WireError> {
        let token = match &self.tokens {
            Tokens::Unsecured(jwt) => jwt.token(SystemTime::now()),
            Tokens::Oidc(oidc) => oidc.token().await?,
        };
        let mut message = format!("n,,\x01auth=Bearer {token}\x01");
        for (name, value) in &self.extensions {
            message.push_str(&format!("{name}={value}\x01"));
        }
        message.push('\x01');
        Ok(message.into_bytes())
    }
}

/// librdkafka's `enable.sasl.oauthbearer.unsecure.jwt`: the only token source this client has.
const UNSECURED_KEY: &str = "enable.sasl.oauthbearer.unsecure.jwt";

/// An unsecured JWT's claims, as `sasl.oauthbearer.config` gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnsecuredJwt {
    /// `principal`, in the claim `principalClaimName` (default `sub`).
    principal: (String, String),
    /// `scope` (comma-separated), in the claim `scopeClaimName` (default `scope`); none: no claim.
    scope: (String, Vec<String>),
    /// `lifeSeconds` (default 3600): `exp` is the token's making time plus it.
    life: Duration,
}

impl UnsecuredJwt {
    /// From librdkafka settings, with its `extension_<name>=<value>` entries as SASL extensions:
    /// `enable.sasl.oauthbearer.unsecure.jwt` must be true. Errors: a [`SettingError`] naming
    /// the key: no token source (librdkafka's other is a refresh callback, which Strait's config
    /// cannot set), a `sasl.oauthbearer.config` entry that is not `name=value`, unknown, or
    /// without `principal`, a `lifeSeconds` that is not a number of seconds.
    fn from_settings(settings: &BTreeMap<String, String>) -> Result<(Self, Vec<(String, String)>), SettingError> {
        let refuse = |key: &str, reason: &str| SettingError { key: key.to_string(), reason: reason.to_string() };
        if !settings.get(UNSECURED_KEY).is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Err(refuse(UNSECURED_KEY, "OAUTHBEARER tokens come from sasl.oauthbearer.method = \"oidc\" or from librdkafka's unsecured JWT, which needs this set to true"));
        }
        let key = "sasl.oauthbearer.config";
        let (mut principal, mut scope) = ((String::from("sub"), None), (String::from("scope"), Vec::new()));
        let (mut life, mut extensions) = (Duration::from_secs(3600), Vec::new());
        for entry in settings.get(key).map(String::as_str).unwrap_or_default().split_whitespace() {
            let (name, value) =
                entry.split_once('=').ok_or_else(|| refuse(key, &format!("{entry:?} is not name=value")))?;
            match name {
                "principal" => principal.1 = Some(value.to_string()),
                "principalClaimName" => principal.0 = value.to_string(),
                "scope" => scope.1 = value.split(',').filter(|s| !s.is_empty()).map(String::from).collect(),
                "scopeClaimName" => scope.0 = value.to_string(),
                "lifeSeconds" => {
                    let seconds = value.parse().map_err(|_| refuse(key, "lifeSeconds is not a number of seconds"))?;
                    life = Duration::from_secs(seconds);
                }
                _ => match name.strip_prefix("extension_") {
                    Some(extension) => extensions.push((extension.to_string(), value.to_string())),
                    None => {
                        return Err(refuse(key, &format!("{name} is not one of librdkafka's unsecured JWT settings")))
                    }
                },
            }
        }
        let principal = (principal.0, principal.1.ok_or_else(|| refuse(key, "principal=<name> is required"))?);
        Ok((Self { principal, scope, life }, extensions))
    }

    /// The JWT, made at `now`: `base64url(header).base64url(claims).` (no signature).
    fn token(&self, now: SystemTime) -> String {
        let iat = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
        let mut claims = serde_json::Map::new();
        claims.insert(self.principal.0.clone(), self.principal.1.clone().into());
        claims.insert("iat".into(), iat.into());
        claims.insert("exp".into(), (iat + self.life.as_secs_f64()).into());
        if !self.scope.1.is_empty() {
            claims.insert(self.scope.0.clone(), self.scope.1.clone().into());
        }
        let part = |json: &serde_json::Value| base64url(json.to_string().as_bytes());
        format!("{}.{}.", part(&serde_json::json!({"alg": "none"})), part(&claims.into()))
    }
}

/// Base64url without padding (RFC 7515's encoding of a JWT's parts).
fn base64url(bytes: &[u8]) -> String {
    let standard = base64::encode_block(bytes);
    standard.trim_end_matches('=').replace('+', "-").replace('/', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn decoded(part: &str) -> serde_json::Value {
        let mut b64 = part.replace('-', "+").replace('_', "/");
        b64.push_str(&"=".repeat((4 - b64.len() % 4) % 4));
        serde_json::from_slice(&base64::decode_block(&b64).unwrap()).unwrap()
    }

    #[test]
    fn the_unsecured_token_carries_librdkafkas_claims_and_extensions() {
        let config = "principal=alice scope=read,write lifeSeconds=60 extension_traceId=x1";
        let bearer =
            OAuthBearer::from_settings(&settings(&[(UNSECURED_KEY, "true"), ("sasl.oauthbearer.config", config)]))
                .unwrap();
        let message = String::from_utf8(futures::executor::block_on(bearer.initial_response()).unwrap()).unwrap();
        let token = message.strip_prefix("n,,\x01auth=Bearer ").unwrap().split('\x01').next().unwrap();
        assert!(message.ends_with("\x01traceId=x1\x01\x01"), "{message:?}");
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3, "{token}");
        assert_eq!(parts[2], "", "unsigned");
        assert_eq!(decoded(parts[0]), serde_json::json!({"alg": "none"}));
        let claims = decoded(parts[1]);
        assert_eq!(claims["sub"], "alice");
        assert_eq!(claims["scope"], serde_json::json!(["read", "write"]));
        assert_eq!(claims["exp"].as_f64().unwrap() - claims["iat"].as_f64().unwrap(), 60.0);
    }

    #[test]
    fn other_token_sources_and_bad_entries_are_refused_by_key() {
        let key = |pairs: &[(&str, &str)]| OAuthBearer::from_settings(&settings(pairs)).err().unwrap().key;
        assert_eq!(key(&[("sasl.oauthbearer.config", "principal=a")]), UNSECURED_KEY);
        assert_eq!(key(&[("sasl.oauthbearer.method", "oidc")]), "sasl.oauthbearer.token.endpoint.url");
        assert_eq!(key(&[("sasl.oauthbearer.method", "aws")]), "sasl.oauthbearer.method");
        for config in ["scope=x", "principal", "principal=a lifeSeconds=soon", "principal=a audience=b"] {
            assert_eq!(key(&[(UNSECURED_KEY, "true"), ("sasl.oauthbearer.config", config)]), "sasl.oauthbearer.config");
        }
    }
}
