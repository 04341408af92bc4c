//! SASL authentication of a new connection, after ApiVersions: SaslHandshake v1 naming the
//! mechanism, then its messages inside SaslAuthenticate requests (KIP-152). PLAIN sends one
//! message (RFC 4616); SCRAM-SHA-256/512 four (RFC 5802, KIP-84), checking the broker's
//! signature too; OAUTHBEARER one (RFC 7628, KIP-255), with a token made for the connection. Re-authentication (KIP-368) is not done: a broker with
//! `connections.max.reauth.ms` set closes the connection when it expires, and it is opened anew.

use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::{Request, StrBytes};
use openssl::base64;
use openssl::hash::MessageDigest;
use openssl::pkey::PKey;
use openssl::sign::Signer;

use crate::error::WireError;
use crate::security::{PasswordMechanism, Sasl};

/// What the exchange needs of a new connection (`crate::conn::Connection` is one): its broker's
/// address, and to call a request at the highest version both sides speak up to `cap`.
pub(crate) trait SaslConnection {
    fn addr(&self) -> &str;
    async fn call<R: Request>(&self, request: &R, cap: i16) -> Result<R::Response, WireError>;
}

/// Authenticates `conn` with `sasl`. Errors: [`WireError::Authentication`] when the broker
/// refuses the mechanism or the credentials, or its SCRAM answers do not check out; a failed
/// request's error.
pub(crate) async fn authenticate(conn: &impl SaslConnection, sasl: &Sasl) -> Result<(), WireError> {
    let refused = |message: String| WireError::Authentication {
        addr: conn.addr().to_string(),
        mechanism: sasl.mechanism().name(),
        message,
    };
    let handshake = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(sasl.mechanism().name()));
    let answer = conn.call(&handshake, 1).await?;
    if answer.error_code != 0 {
        let enabled: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
        return Err(refused(format!("the broker enables {}", enabled.join(", "))));
    }
    let exchange = |message: Vec<u8>| async move {
        let answer = conn.call(&SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(message)), 2).await?;
        if answer.error_code != 0 {
            let message = answer.error_message.map(|m| m.to_string()).unwrap_or_default();
            return Err(refused(message));
        }
        Ok(answer.auth_bytes)
    };
    let (mechanism, username, password) = match sasl {
        Sasl::Token(bearer) => {
            let answer = exchange(bearer.initial_response().await?).await?;
            if answer.is_empty() {
                return Ok(());
            }
            // A refused token is answered with an error (JSON, RFC 7628 3.2.2), which the client
            // acknowledges with %x01; the broker then fails the exchange.
            let json = String::from_utf8_lossy(&answer).into_owned();
            return Err(exchange(vec![1]).await.err().unwrap_or_else(|| refused(json)));
        }
        Sasl::Password { mechanism, username, password } => (mechanism, username, password),
    };
    let digest = match mechanism {
        PasswordMechanism::Plain => {
            exchange(format!("\0{username}\0{password}").into_bytes()).await?;
            return Ok(());
        }
        PasswordMechanism::ScramSha256 => MessageDigest::sha256(),
        PasswordMechanism::ScramSha512 => MessageDigest::sha512(),
    };
    let mut scram = Scram::new(digest, username, password).map_err(|e| refused(e.to_string()))?;
    let server_first = exchange(scram.client_first().into_bytes()).await?;
    let client_final = scram.client_final(&server_first).map_err(refused)?;
    let server_final = exchange(client_final.into_bytes()).await?;
    scram.check_server_final(&server_final).map_err(refused)
}

/// The client side of one SCRAM exchange.
struct Scram {
    digest: MessageDigest,
    password: String,
    /// `n=<user>,r=<client nonce>`.
    client_first_bare: String,
    nonce: String,
    /// The signature the broker must send back, once the client's final message is made.
    server_signature: Vec<u8>,
}

impl Scram {
    fn new(digest: MessageDigest, username: &str, password: &str) -> Result<Self, openssl::error::ErrorStack> {
        let mut random = [0u8; 24];
        openssl::rand::rand_bytes(&mut random)?;
        let nonce = base64::encode_block(&random);
        // RFC 5802 5.1: '=' and ',' in the name are escaped.
        let name = username.replace('=', "=3D").replace(',', "=2C");
        let client_first_bare = format!("n={name},r={nonce}");
        Ok(Self { digest, password: password.to_string(), client_first_bare, nonce, server_signature: Vec::new() })
    }

    /// `n,,` (no channel binding, no authorization id) then the bare message.
    fn client_first(&self) -> String {
        format!("n,,{}", self.client_first_bare)
    }

    /// The final message answering `server_first` (`r=<nonce>,s=<salt>,i=<iterations>`), with
    /// the client's proof. Errors: an answer that is not SCRAM's, a nonce that does not extend
    /// the client's.
    fn client_final(&mut self, server_first: &[u8]) -> Result<String, String> {
        let text = std::str::from_utf8(server_first).map_err(|_| "a server-first message that is not UTF-8")?;
        let field = |name: char| {
            text.split(',')
                .find_map(|f| f.strip_prefix(name).and_then(|f| f.strip_prefix('=')))
                .ok_or(format!("the server-first message has no {name}= ({text})"))
        };
        let nonce = field('r')?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("the broker's nonce does not extend the client's".into());
        }
        let salt = base64::decode_block(field('s')?).map_err(|e| format!("the salt: {e}"))?;
        let iterations: usize = field('i')?.parse().map_err(|e| format!("the iteration count: {e}"))?;
        let crypto = |e: openssl::error::ErrorStack| e.to_string();
        let mut salted = vec![0u8; self.digest.size()];
        openssl::pkcs5::pbkdf2_hmac(self.password.as_bytes(), &salt, iterations, self.digest, &mut salted)
            .map_err(crypto)?;
        let client_key = self.hmac(&salted, b"Client Key").map_err(crypto)?;
        let stored_key = openssl::hash::hash(self.digest, &client_key).map_err(crypto)?;
        // `biws` is base64 of `n,,`, the client-first message's header.
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let signature = self.hmac(&stored_key, auth_message.as_bytes()).map_err(crypto)?;
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
        let server_key = self.hmac(&salted, b"Server Key").map_err(crypto)?;
        self.server_signature = self.hmac(&server_key, auth_message.as_bytes()).map_err(crypto)?;
        Ok(format!("{without_proof},p={}", base64::encode_block(&proof)))
    }

    /// Checks the broker's `v=<signature>`. Errors: `e=<error>` or another signature.
    fn check_server_final(&self, server_final: &[u8]) -> Result<(), String> {
        let text = String::from_utf8_lossy(server_final);
        match text.strip_prefix("v=").map(base64::decode_block) {
            Some(Ok(signature)) if signature == self.server_signature => Ok(()),
            Some(_) => {
                Err("the broker's SCRAM signature does not match: not the broker the credentials are for".into())
            }
            None => Err(format!("the broker ended SCRAM with {text}")),
        }
    }

    fn hmac(&self, key: &[u8], data: &[u8]) -> Result<Vec<u8>, openssl::error::ErrorStack> {
        let key = PKey::hmac(key)?;
        let mut signer = Signer::new(self.digest, &key)?;
        signer.update(data)?;
        signer.sign_to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's SCRAM-SHA-256 example, its client nonce put in.
    #[test]
    fn the_rfc_7677_exchange_gives_its_proof_and_checks_its_signature() {
        let mut scram = Scram::new(MessageDigest::sha256(), "user", "pencil").unwrap();
        scram.nonce = "rOprNGfwEbeRWgbNEkqO".into();
        scram.client_first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO".into();
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        assert_eq!(
            scram.client_final(server_first).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        scram.check_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=").unwrap();
        assert!(scram.check_server_final(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=").is_err());
        assert!(scram.check_server_final(b"e=invalid-proof").unwrap_err().contains("invalid-proof"));
    }

    #[test]
    fn a_nonce_the_broker_did_not_extend_is_refused() {
        let mut scram = Scram::new(MessageDigest::sha512(), "u,=", "p").unwrap();
        assert!(scram.client_first().starts_with("n,,n=u=2C=3D,r="));
        let server_first = format!("r={},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", scram.nonce);
        assert!(scram.client_final(server_first.as_bytes()).unwrap_err().contains("nonce"));
        assert!(scram.client_final(b"r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096").unwrap_err().contains("nonce"));
    }
}
