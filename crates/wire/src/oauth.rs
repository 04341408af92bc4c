//! SASL OAUTHBEARER (KIP-255) with librdkafka's unsecured JWT: the token librdkafka makes itself
//! when `enable.sasl.oauthbearer.unsecure.jwt` is true, from `sasl.oauthbearer.config`, for
//! brokers that validate with Kafka's `OAuthBearerUnsecuredValidatorCallbackHandler` (their
//! default). A token is made for each connection, so none outlives its `lifeSeconds`. The client's
//! message is RFC 7628's: `n,,` `\x01auth=Bearer <token>` `\x01` then each SASL extension as
//! `key=value\x01`, then `\x01`.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use openssl::base64;

use crate::security::SettingError;

/// The OAUTHBEARER settings read besides `sasl.mechanism(s)`.
pub(crate) const OAUTHBEARER_KEYS: &[&str] = &["sasl.oauthbearer.config", "sasl.oauthbearer.method"];

/// librdkafka's `enable.sasl.oauthbearer.unsecure.jwt`: the only token source this client has.
const UNSECURED_KEY: &str = "enable.sasl.oauthbearer.unsecure.jwt";

/// An unsecured JWT's claims and SASL extensions, as `sasl.oauthbearer.config` gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnsecuredJwt {
    /// `principal`, in the claim `principalClaimName` (default `sub`).
    principal: (String, String),
    /// `scope` (comma-separated), in the claim `scopeClaimName` (default `scope`); none: no claim.
    scope: (String, Vec<String>),
    /// `lifeSeconds` (default 3600): `exp` is the token's making time plus it.
    life: Duration,
    /// `extension_<name>=<value>`, sent as SASL extensions.
    extensions: Vec<(String, String)>,
}

impl UnsecuredJwt {
    /// From librdkafka settings: `enable.sasl.oauthbearer.unsecure.jwt` must be true, and
    /// `sasl.oauthbearer.method` unset or `default`. Errors: a [`SettingError`] naming the key:
    /// another token source (OIDC, or a refresh callback, which Strait's config cannot set),
    /// a `sasl.oauthbearer.config` entry that is not `name=value`, unknown, or without
    /// `principal`, a `lifeSeconds` that is not a number of seconds.
    pub(crate) fn from_settings(settings: &BTreeMap<String, String>) -> Result<Self, SettingError> {
        let refuse = |key: &str, reason: &str| SettingError { key: key.to_string(), reason: reason.to_string() };
        if let Some(method) = settings.get("sasl.oauthbearer.method").filter(|m| !m.eq_ignore_ascii_case("default")) {
            let reason = format!("{method}: the batch path makes librdkafka's unsecured JWT only; copy = \"records\" takes what librdkafka does");
            return Err(refuse("sasl.oauthbearer.method", &reason));
        }
        if !settings.get(UNSECURED_KEY).is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Err(refuse(UNSECURED_KEY, "the batch path's OAUTHBEARER token is librdkafka's unsecured JWT, which needs this set to true; copy = \"records\" takes what librdkafka does"));
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
        Ok(Self { principal, scope, life, extensions })
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

    /// The client's first and only message, with a token made at `now`.
    pub(crate) fn initial_response(&self, now: SystemTime) -> Vec<u8> {
        let mut message = format!("n,,\x01auth=Bearer {}\x01", self.token(now));
        for (name, value) in &self.extensions {
            message.push_str(&format!("{name}={value}\x01"));
        }
        message.push('\x01');
        message.into_bytes()
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
        let jwt =
            UnsecuredJwt::from_settings(&settings(&[(UNSECURED_KEY, "true"), ("sasl.oauthbearer.config", config)]))
                .unwrap();
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let message = String::from_utf8(jwt.initial_response(now)).unwrap();
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
        let key = |pairs: &[(&str, &str)]| UnsecuredJwt::from_settings(&settings(pairs)).unwrap_err().key;
        assert_eq!(key(&[("sasl.oauthbearer.config", "principal=a")]), UNSECURED_KEY);
        let oidc = [(UNSECURED_KEY, "true"), ("sasl.oauthbearer.method", "oidc")];
        assert_eq!(key(&oidc), "sasl.oauthbearer.method");
        for config in ["scope=x", "principal", "principal=a lifeSeconds=soon", "principal=a audience=b"] {
            assert_eq!(key(&[(UNSECURED_KEY, "true"), ("sasl.oauthbearer.config", config)]), "sasl.oauthbearer.config");
        }
    }
}
