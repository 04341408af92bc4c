//! OAUTHBEARER tokens from an OIDC provider by the client credentials grant (RFC 6749 4.4), as
//! librdkafka gets them with `sasl.oauthbearer.method = oidc`: a POST to
//! `sasl.oauthbearer.token.endpoint.url` with `grant_type=client_credentials` (and `scope`, from
//! `sasl.oauthbearer.scope`), authenticated by HTTP Basic with `sasl.oauthbearer.client.id` and
//! `sasl.oauthbearer.client.secret`; the answer's `access_token`, a JWT, is used until 80 % of its
//! life (its `exp`) has passed, then fetched again, as librdkafka refreshes it. An `https`
//! endpoint's certificate must chain to the system's CAs or to `https.ca.location` /
//! `https.ca.pem`, librdkafka's keys for it.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, OnceLock, Weak};
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

/// The CA certificates the token endpoint's certificate may chain to besides the system's, as
/// librdkafka reads them: `https.ca.location` (a PEM file, a directory of them, or `probe`: the
/// system's only) or `https.ca.pem` (PEM text), not both. Errors: a [`SettingError`] naming the
/// key whose certificates do not load.
fn https_ca(settings: &BTreeMap<String, String>) -> Result<Vec<reqwest::Certificate>, SettingError> {
    let refuse = |key: &str, reason: String| SettingError { key: key.to_string(), reason };
    let bundle =
        |key: &str, pem: &[u8]| reqwest::Certificate::from_pem_bundle(pem).map_err(|e| refuse(key, e.to_string()));
    let read =
        |path: &Path| std::fs::read(path).map_err(|e| refuse("https.ca.location", format!("{}: {e}", path.display())));
    match (settings.get("https.ca.location").map(String::as_str), settings.get("https.ca.pem")) {
        (Some(_), Some(_)) => Err(refuse("https.ca.pem", "mutually exclusive with https.ca.location".into())),
        (None | Some("probe"), None) => Ok(Vec::new()),
        (None, Some(pem)) => bundle("https.ca.pem", pem.as_bytes()),
        (Some(dir), None) if Path::new(dir).is_dir() => {
            let entries = std::fs::read_dir(dir).map_err(|e| refuse("https.ca.location", format!("{dir}: {e}")))?;
            let mut all = Vec::new();
            for entry in entries.flatten().filter(|e| e.path().is_file()) {
                all.extend(bundle("https.ca.location", &read(&entry.path())?)?);
            }
            Ok(all)
        }
        (Some(file), None) => bundle("https.ca.location", &read(Path::new(file))?),
    }
}

/// The clients built from the same settings, alive: every connection of every client of a
/// cluster config (fetcher, producers, registrar) shares one token, as a librdkafka client does.
type Shared = std::sync::Mutex<HashMap<Vec<(String, String)>, Weak<Oidc>>>;

static SHARED: OnceLock<Shared> = OnceLock::new();

impl Oidc {
    /// The client of these settings ([`Oidc::from_settings`]): the one a live client of the same
    /// token settings (`sasl.oauthbearer.*`, `https.*`) holds, or a new one. Errors: as
    /// [`Oidc::from_settings`].
    pub(crate) fn shared(settings: &BTreeMap<String, String>) -> Result<Arc<Self>, SettingError> {
        let key: Vec<(String, String)> = (settings.iter())
            .filter(|(k, _)| k.starts_with("sasl.oauthbearer.") || k.starts_with("https."))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut shared = SHARED.get_or_init(Shared::default).lock().unwrap_or_else(|e| e.into_inner());
        if let Some(oidc) = shared.get(&key).and_then(Weak::upgrade) {
            return Ok(oidc);
        }
        shared.retain(|_, held| held.strong_count() > 0);
        let oidc = Arc::new(Self::from_settings(settings)?);
        shared.insert(key, Arc::downgrade(&oidc));
        Ok(oidc)
    }

    /// From librdkafka settings (module doc). Errors: a [`SettingError`] naming a missing
    /// client id, secret or endpoint, or an HTTP client that cannot be made.
    pub(crate) fn from_settings(settings: &BTreeMap<String, String>) -> Result<Self, SettingError> {
        let get = |key: &str| {
            let required =
                || SettingError { key: key.to_string(), reason: "required with sasl.oauthbearer.method = oidc".into() };
            settings.get(key).cloned().ok_or_else(required)
        };
        let mut http = reqwest::Client::builder().timeout(ENDPOINT_TIMEOUT);
        for ca in https_ca(settings)? {
            http = http.add_root_certificate(ca);
        }
        let http = http
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

    #[test]
    fn clients_of_the_same_token_settings_share_one_token() {
        let settings = |secret: &str| -> BTreeMap<String, String> {
            [
                ("sasl.oauthbearer.token.endpoint.url", "http://127.0.0.1:1/token"),
                ("sasl.oauthbearer.client.id", "shared"),
                ("sasl.oauthbearer.client.secret", secret),
                ("bootstrap.servers", "b:9092"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
        };
        let first = Oidc::shared(&settings("s1")).unwrap();
        let mut other_cluster = settings("s1");
        other_cluster.insert("bootstrap.servers".into(), "c:9092".into());
        assert!(Arc::ptr_eq(&first, &Oidc::shared(&other_cluster).unwrap()), "same token settings");
        assert!(!Arc::ptr_eq(&first, &Oidc::shared(&settings("s2")).unwrap()), "another secret");
    }

    #[test]
    fn the_endpoint_s_ca_is_read_as_librdkafka_reads_it() {
        let ca = |pairs: &[(&str, &str)]| {
            https_ca(&pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()).map(|c| c.len())
        };
        assert_eq!(ca(&[]).unwrap(), 0, "the system's CAs only");
        assert_eq!(ca(&[("https.ca.location", "probe")]).unwrap(), 0);
        assert_eq!(ca(&[("https.ca.location", "/no/such/ca.pem")]).unwrap_err().key, "https.ca.location");
        let both = ca(&[("https.ca.location", "/ca.pem"), ("https.ca.pem", "x")]).unwrap_err();
        assert_eq!(both.key, "https.ca.pem");
    }
}
