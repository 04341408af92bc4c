//! An OIDC token endpoint for tests: it answers the client credentials grant (RFC 6749 4.4) of one
//! client, authenticated by HTTP Basic, with an unsecured JWT (`alg` `none`) naming a principal,
//! which a broker's default OAUTHBEARER validator takes; other credentials get 401. It counts the
//! tokens it gave.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use openssl::ssl::{SslAcceptor, SslFiletype, SslMethod};

/// A running token endpoint (its thread lives as long as the test process).
pub struct TokenEndpoint {
    /// `http://127.0.0.1:<port>/token`.
    pub url: String,
    issued: Arc<AtomicUsize>,
}

impl TokenEndpoint {
    /// Starts an endpoint for the client `client_id` with `client_secret`, whose tokens name
    /// `principal` (claim `sub`) and live 600 s; over HTTPS with the key and certificate of
    /// `keystore` (a PEM file holding both, as [`crate::secure::SecureCluster`]'s brokers use)
    /// when given. Errors: no port to listen on, or a keystore that does not load.
    pub fn start(client_id: &str, client_secret: &str, principal: &str, keystore: Option<&Path>) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let tls = keystore.map(acceptor).transpose()?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{}/token", listener.local_addr()?);
        let issued = Arc::new(AtomicUsize::new(0));
        let basic = format!("basic {}", STANDARD.encode(format!("{client_id}:{client_secret}")));
        let (counter, principal) = (issued.clone(), principal.to_string());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = match &tls {
                    Some(tls) => tls
                        .accept(stream)
                        .map_err(io::Error::other)
                        .and_then(|s| answer(s, &basic, &principal, &counter)),
                    None => answer(stream, &basic, &principal, &counter),
                };
            }
        });
        Ok(Self { url, issued })
    }

    /// Tokens given so far.
    pub fn issued(&self) -> usize {
        self.issued.load(Ordering::SeqCst)
    }
}

/// A TLS acceptor with the key and certificate of `keystore` (one PEM file).
fn acceptor(keystore: &Path) -> io::Result<SslAcceptor> {
    let mut builder = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).map_err(io::Error::other)?;
    builder.set_private_key_file(keystore, SslFiletype::PEM).map_err(io::Error::other)?;
    builder.set_certificate_chain_file(keystore).map_err(io::Error::other)?;
    Ok(builder.build())
}

/// Reads one request and answers it: a token when its `Authorization` is `basic` and its body
/// asks for the client credentials grant, else 401.
fn answer(stream: impl Read + Write, basic: &str, principal: &str, issued: &AtomicUsize) -> io::Result<()> {
    let mut reader = BufReader::new(stream);
    let (mut authorized, mut length) = (false, 0);
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end().to_ascii_lowercase();
        if line.is_empty() {
            break;
        }
        match line.split_once(':') {
            Some(("authorization", value)) => authorized = value.trim() == basic.to_ascii_lowercase(),
            Some(("content-length", value)) => length = value.trim().parse().unwrap_or(0),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let grant = String::from_utf8_lossy(&body).contains("grant_type=client_credentials");
    let (status, json) = if authorized && grant {
        issued.fetch_add(1, Ordering::SeqCst);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        let claims = format!(r#"{{"sub":"{principal}","iat":{now},"exp":{}}}"#, now + 600);
        let jwt = format!("{}.{}.", URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#), URL_SAFE_NO_PAD.encode(claims));
        ("200 OK", format!(r#"{{"access_token":"{jwt}","token_type":"bearer","expires_in":600}}"#))
    } else {
        ("401 Unauthorized", r#"{"error":"invalid_client"}"#.to_string())
    };
    write!(
        reader.get_mut(),
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}",
        json.len()
    )
}
