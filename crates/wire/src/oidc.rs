//! OAUTHBEARER tokens from an OIDC provider by the client credentials grant (RFC 6749 4.4), as
//! librdkafka gets them with `sasl.oauthbearer.method = oidc`: a POST to
//! `sasl.oauthbearer.token.endpoint.url` with `grant_type=client_credentials` (and `scope`, from
//! `sasl.oauthbearer.scope`), authenticated by HTTP Basic with `sasl.oauthbearer.client.id` and
//! `sasl.oauthbearer.client.secret`; the answer's `access_token`, a JWT, is used until 80 % of its
//! life (its `exp`) has passed, then fetched again, as librdkafka refreshes it.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use openssl::base64;
use tokio::sync::Mutex;

use crate::error::WireError;
use crate::security::SettingError;

/// How long the token endpoint is given to answer.
const ENDPOINT_TIMEOUT: Duration = Duration::from_secs(30);

/// A client of the token endpoint, and the token it holds.
pub(crate) struct Oidc {
    http: reqwest::Client,
    endpoint: String,
    client_id: String,
    client_secret: String,
    scope: Option<String>,
    /// The token and when to fetch the next one.
    token: Mutex<Option<(String, SystemTime)>>,
}

impl Oidc {
    /// From librdkafka settings (module doc). Errors: a [`SettingError`] naming a missing
    /// client id, secret or endpoint, or an HTTP client that cannot be made.
    pub(crate) fn from_settings(settings: &BTreeMap<String, String>) -> Result<Self, SettingError> {
        let get = |key: &str| {
            let required =
                || SettingError { key: key.to_string(), reason: "required with sasl.oauthbearer.method = oidc".into() };
            settings.get(key).cloned().ok_or_else(required)
        };
        let http = reqwest::Client::builder()
            .timeout(ENDPOINT_TIMEOUT)
            .build()
            .map_err(|e| SettingError { key: "sasl.oauthbearer.token.endpoint.url".into(), reason: e.to_string() })?;
        Ok(Self {
            http,
            endpoint: get("sasl.oauthbearer.token.endpoint.url")?,
            client_id: get("sasl.oauthbearer.client.id")?,
            client_secret: get("sasl.oauthbearer.client.secret")?,
            scope: settings.get("sasl.oauthbearer.scope").cloned(),
            token: Mutex::new(None),
        })
    }

    /// A token valid now: the one held, or a new one from the endpoint. Errors
    /// ([`WireError::TokenEndpoint`]): retriable when the endpoint cannot be reached, does not
    /// answer in time, or answers 5xx or 429 (as librdkafka retries its refresh); not when it
    /// refuses the client (another 4xx) or answers without a JWT `access_token` that has an `exp`.
    pub(crate) async fn token(&self) -> Result<String, WireError> {
        let mut held = self.token.lock().await;
        if let Some((token, refresh_at)) = &*held {
            if SystemTime::now() < *refresh_at {
                return Ok(token.clone());
            }
        }
        let failed = |retriable: bool| {
            move |message: String| WireError::TokenEndpoint { url: self.endpoint.clone(), message, retriable }
        };
        let mut form = vec![("grant_type", "client_credentials")];
        if let Some(scope) = &self.scope {
            form.push(("scope", scope));
        }
        let answer = (self.http.post(&self.endpoint))
            .basic_auth(&self.client_id, Some(&self.client_secret))
            .header("Accept", "application/json")
            .form(&form)
            .send()
            .await
            .map_err(|e| failed(true)(e.to_string()))?;
        let status = answer.status();
        let body = answer.bytes().await.map_err(|e| failed(true)(e.to_string()))?;
        if !status.is_success() {
            let retriable = status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS;
            return Err(failed(retriable)(format!("{status}: {}", String::from_utf8_lossy(&body))));
        }
        let json: serde_json::Value = serde_json::from_slice(&body).map_err(|e| failed(false)(e.to_string()))?;
        let token =
            json["access_token"].as_str().ok_or_else(|| failed(false)("no access_token in its answer".into()))?;
        let refresh_at = refresh_time(token, SystemTime::now()).map_err(failed(false))?;
        *held = Some((token.to_string(), refresh_at));
        Ok(token.to_string())
    }
}

/// When a token fetched at `now` is fetched again: 80 % of the way to its `exp` (a JWT claim,
/// seconds since the epoch). Errors: not a JWT, or no numeric `exp`.
fn refresh_time(token: &str, now: SystemTime) -> Result<SystemTime, String> {
    let not_jwt = || "its access_token is not a JWT with an exp claim".to_string();
    let claims = token.split('.').nth(1).ok_or_else(not_jwt)?;
    let mut b64 = claims.replace('-', "+").replace('_', "/");
    b64.push_str(&"=".repeat((4 - b64.len() % 4) % 4));
    let claims: serde_json::Value =
        serde_json::from_slice(&base64::decode_block(&b64).map_err(|_| not_jwt())?).map_err(|_| not_jwt())?;
    // Clamped to what a time can hold: a JWT's `exp` is any JSON number.
    let exp = claims["exp"].as_f64().ok_or_else(not_jwt)?.clamp(0.0, f64::from(u32::MAX));
    let exp = UNIX_EPOCH + Duration::from_secs_f64(exp);
    let life = exp.duration_since(now).unwrap_or_default();
    Ok(now + life.mul_f64(0.8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_fetched_again_at_80_percent_of_its_life() {
        let claims = base64::encode_block(br#"{"sub":"a","exp":1100}"#);
        let token = format!("e30.{}.", claims.trim_end_matches('='));
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        assert_eq!(refresh_time(&token, now).unwrap(), UNIX_EPOCH + Duration::from_secs(1_080));
        assert!(refresh_time("opaque", now).is_err(), "not a JWT");
        let far = format!("e30.{}.", base64::encode_block(br#"{"exp":1e300}"#).trim_end_matches('='));
        assert!(refresh_time(&far, now).is_ok(), "an exp past any time is held, not a panic");
    }

    #[tokio::test]
    async fn an_endpoint_that_does_not_answer_is_asked_again_later() {
        let settings: BTreeMap<String, String> = [
            ("sasl.oauthbearer.token.endpoint.url", "http://127.0.0.1:1/token"),
            ("sasl.oauthbearer.client.id", "c"),
            ("sasl.oauthbearer.client.secret", "s"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let e = Oidc::from_settings(&settings).unwrap().token().await.unwrap_err();
        assert!(e.is_retriable(), "{e}");
    }
}
