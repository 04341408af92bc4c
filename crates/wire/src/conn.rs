//! One plaintext connection to one broker: Kafka's framing (a 4-byte big-endian size, then the
//! header and body), correlation ids checked, the broker's API versions asked once at open
//! (ApiVersions v3, KIP-511) and each request spoken at the highest version both sides know.
//! One request at a time; a connection that failed mid-request is not used again.

use std::collections::HashMap;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{ApiVersionsRequest, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::ResponseError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::WireError;

/// The largest answer accepted (bytes): a fetch answers at most its `max_bytes` (Kafka's
/// `fetch.max.bytes` default is 50 MiB), so a bigger frame is a broken stream.
const MAX_FRAME: usize = 256 << 20;
/// ApiVersions v3: the first with the client's software name, answered by every Kafka since 2.4.
const API_VERSIONS_VERSION: i16 = 3;

/// A connection to one broker.
pub struct Connection {
    addr: String,
    stream: TcpStream,
    client_id: StrBytes,
    timeout: Duration,
    correlation_id: i32,
    /// API key → (min, max) version the broker speaks.
    versions: HashMap<i16, (i16, i16)>,
    /// A request failed mid-way: the stream may hold a late answer.
    broken: bool,
}

impl Connection {
    /// Connects to `addr` (`host:port`) as `client_id` and asks the broker's API versions; each
    /// step, and every later request, waits at most `timeout`. Errors: [`WireError::Io`] or
    /// [`WireError::Timeout`] when the broker cannot be reached; [`WireError::Broker`] when it
    /// refuses ApiVersions.
    pub async fn open(addr: &str, client_id: &str, timeout: Duration) -> Result<Self, WireError> {
        let io = |source| WireError::Io { addr: addr.to_string(), source };
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| WireError::Timeout { addr: addr.to_string(), api: "connect", timeout })?
            .map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        let mut conn = Self {
            addr: addr.to_string(),
            stream,
            client_id: StrBytes::from_string(client_id.to_string()),
            timeout,
            correlation_id: 0,
            versions: HashMap::new(),
            broken: false,
        };
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("strait"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let answer = conn.call_at(&request, API_VERSIONS_VERSION).await?;
        conn.check(answer.error_code, "ApiVersions")?;
        conn.versions = answer.api_keys.iter().map(|k| (k.api_key, (k.min_version, k.max_version))).collect();
        Ok(conn)
    }

    /// The broker's `host:port`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Whether a request failed mid-way on it, so it must be replaced by a new one.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// The version of `R` to speak: the highest the broker and this client (up to `cap`) both
    /// know. Errors: [`WireError::Unsupported`] when they share none.
    pub fn version<R: Request>(&self, cap: i16) -> Result<i16, WireError> {
        let (ours_min, ours_max) = (R::VERSIONS.min, R::VERSIONS.max.min(cap));
        let (broker_min, broker_max) = self.versions.get(&R::KEY).copied().unwrap_or((0, -1));
        let version = ours_max.min(broker_max);
        if version < ours_min.max(broker_min) {
            return Err(WireError::Unsupported {
                addr: self.addr.clone(),
                api: api_name::<R>(),
                broker_min,
                broker_max,
                ours_min,
                ours_max,
            });
        }
        Ok(version)
    }

    /// Sends `request` at [`Self::version`]`(cap)` and returns the broker's answer (its error
    /// codes left to the caller). Errors: [`WireError::Unsupported`]; [`WireError::Io`],
    /// [`WireError::Timeout`] or [`WireError::Protocol`], after which the connection is broken.
    pub async fn call<R: Request>(&mut self, request: &R, cap: i16) -> Result<R::Response, WireError> {
        let version = self.version::<R>(cap)?;
        self.call_at(request, version).await
    }

    /// `error_code` of an answer to `api` as an error naming this broker.
    pub fn check(&self, error_code: i16, api: &str) -> Result<(), WireError> {
        match ResponseError::try_from_code(error_code) {
            None => Ok(()),
            Some(error) => Err(WireError::Broker { context: format!("broker {}: {api}", self.addr), error }),
        }
    }

    async fn call_at<R: Request>(&mut self, request: &R, version: i16) -> Result<R::Response, WireError> {
        if self.broken {
            let source = std::io::Error::other("the connection failed during an earlier request");
            return Err(WireError::Io { addr: self.addr.clone(), source });
        }
        let (api, timeout) = (api_name::<R>(), self.timeout);
        let answer = match tokio::time::timeout(timeout, self.exchange(request, version, api)).await {
            Ok(answer) => answer,
            Err(_) => Err(WireError::Timeout { addr: self.addr.clone(), api, timeout }),
        };
        self.broken = answer.is_err();
        answer
    }

    async fn exchange<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        api: &'static str,
    ) -> Result<R::Response, WireError> {
        let addr = &self.addr;
        let protocol = |message: String| WireError::Protocol { addr: addr.clone(), api, message };
        let io = |source| WireError::Io { addr: addr.clone(), source };
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        header
            .encode(&mut frame, <R as HeaderVersion>::header_version(version))
            .map_err(|e| protocol(e.to_string()))?;
        request.encode(&mut frame, version).map_err(|e| protocol(e.to_string()))?;
        let size =
            i32::try_from(frame.len() - 4).map_err(|_| protocol(format!("a request of {} bytes", frame.len())))?;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        self.stream.write_all(&frame).await.map_err(io)?;

        let size = self.stream.read_i32().await.map_err(io)?;
        let size = usize::try_from(size)
            .ok()
            .filter(|s| *s <= MAX_FRAME)
            .ok_or_else(|| protocol(format!("an answer of {size} bytes")))?;
        let mut body = BytesMut::zeroed(size);
        self.stream.read_exact(&mut body).await.map_err(io)?;
        let mut body = body.freeze();
        let header = ResponseHeader::decode(&mut body, <R::Response as HeaderVersion>::header_version(version))
            .map_err(|e| protocol(e.to_string()))?;
        if header.correlation_id != self.correlation_id {
            return Err(protocol(format!(
                "answer to request {} where {} was asked",
                header.correlation_id, self.correlation_id
            )));
        }
        R::Response::decode(&mut body, version).map_err(|e| protocol(e.to_string()))
    }
}

/// `FetchRequest` for `kafka_protocol::messages::fetch_request::FetchRequest`.
fn api_name<R>() -> &'static str {
    std::any::type_name::<R>().rsplit("::").next().unwrap_or("request")
}
