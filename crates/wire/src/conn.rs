//! One connection to one broker: TCP, TLS when asked, Kafka's framing (a 4-byte big-endian size,
//! then the header and body), the broker's API versions asked once at open (ApiVersions v3,
//! KIP-511), SASL authentication when asked ([`crate::sasl`]), and each request spoken at the
//! highest version both sides know.
//!
//! Requests are pipelined: [`Connection::send`] writes a request and returns its [`Answer`]
//! without waiting, so several can be in flight. A broker answers a connection's requests in the
//! order it read them, so a background task reading the answers hands each to the oldest request
//! waiting and checks that its correlation id is that request's. A connection that failed (an
//! I/O error, an answer out of order, a request timed out) is broken for good: every request
//! waiting on it fails, and its owner opens a new one.

use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiVersionsRequest, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::ResponseError;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use crate::connections::Connections;
use crate::error::WireError;
use crate::sasl::{authenticate, SaslConnection};
use crate::security::Security;

/// The largest answer accepted (bytes): a fetch answers at most its `max_bytes` (Kafka's
/// `fetch.max.bytes` default is 50 MiB), so a bigger frame is a broken stream.
const MAX_FRAME: usize = 256 << 20;
/// ApiVersions v3: the first with the client's software name, answered by every Kafka since 2.4.
const API_VERSIONS_VERSION: i16 = 3;

/// How connections are opened: the client id they give, how long a connect or a request waits
/// for its answer, how they are secured, and how many a [`crate::Cluster`] keeps per broker.
#[derive(Clone)]
pub struct ClientOptions {
    pub client_id: String,
    pub timeout: Duration,
    pub security: Security,
    pub connections: Connections,
}

impl ClientOptions {
    /// Plaintext connections without authentication, [`Connections::Auto`].
    pub fn plaintext(client_id: &str, timeout: Duration) -> Self {
        Self {
            client_id: client_id.to_string(),
            timeout,
            security: Security::default(),
            connections: Connections::Auto,
        }
    }
}

/// A TCP or TLS stream.
trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<S: AsyncRead + AsyncWrite + Send + Unpin> Stream for S {}
type BoxStream = Box<dyn Stream>;

/// A connection to one broker; clones share it.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

struct Inner {
    addr: String,
    client_id: StrBytes,
    timeout: Duration,
    /// API key → (min, max) version the broker speaks, set once at open.
    versions: OnceLock<HashMap<i16, (i16, i16)>>,
    /// How long the broker took to answer ApiVersions at open: a round trip.
    round_trip: OnceLock<Duration>,
    /// The write half and the last correlation id used, taken together so that requests are
    /// written, and queued for their answers, in one order.
    writer: tokio::sync::Mutex<(WriteHalf<BoxStream>, i32)>,
    waiting: Arc<Waiting>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// The requests written and not yet answered, oldest first, shared with the reading task.
struct Waiting {
    queue: Mutex<VecDeque<(i32, oneshot::Sender<Bytes>)>>,
    broken: AtomicBool,
    /// Why the connection broke, for the requests that were waiting on it.
    reason: Mutex<String>,
}

impl Waiting {
    /// Breaks the connection: every request waiting fails with `reason`.
    fn fail(&self, reason: String) {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if !self.broken.swap(true, Ordering::SeqCst) {
            *self.reason.lock().unwrap_or_else(|e| e.into_inner()) = reason;
        }
        queue.clear();
    }

    fn reason(&self) -> String {
        self.reason.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The answer to one request sent with [`Connection::send`], to be awaited with [`Self::get`].
#[must_use = "an answer not awaited is dropped when it comes"]
pub struct Answer<R> {
    addr: String,
    api: &'static str,
    version: i16,
    timeout: Duration,
    waiting: Arc<Waiting>,
    answer: oneshot::Receiver<Bytes>,
    _response: PhantomData<fn() -> R>,
}

impl<R: Decodable + HeaderVersion> Answer<R> {
    /// The broker's answer (its error codes left to the caller), waited for at most the
    /// connection's timeout from now. Errors: [`WireError::Timeout`], after which the connection
    /// is broken; [`WireError::Io`] when it broke before the answer came; [`WireError::Protocol`]
    /// for an answer that does not decode.
    pub async fn get(self) -> Result<R, WireError> {
        let (addr, api) = (self.addr, self.api);
        let mut body = match tokio::time::timeout(self.timeout, self.answer).await {
            Ok(Ok(body)) => body,
            Ok(Err(_)) => {
                let source = std::io::Error::other(self.waiting.reason());
                return Err(WireError::Io { addr, source });
            }
            Err(_) => {
                self.waiting.fail(format!("no answer to {api} within {} ms", self.timeout.as_millis()));
                return Err(WireError::Timeout { addr, api, timeout: self.timeout });
            }
        };
        let protocol = |message: String| WireError::Protocol { addr: addr.clone(), api, message };
        ResponseHeader::decode(&mut body, R::header_version(self.version)).map_err(|e| protocol(e.to_string()))?;
        R::decode(&mut body, self.version).map_err(|e| protocol(e.to_string()))
    }
}

impl Connection {
    /// Connects to `addr` (`host:port`) with `options`: TCP, the TLS handshake if asked, the
    /// broker's API versions, then SASL authentication if asked; the connect, the handshake and
    /// the answer to every request each wait at most the options' timeout. Errors:
    /// [`WireError::Io`] or [`WireError::Timeout`] when the broker cannot be reached;
    /// [`WireError::Tls`] when the handshake fails (a certificate not trusted or not naming the
    /// host); [`WireError::Broker`] when it refuses ApiVersions; [`WireError::Authentication`].
    pub async fn open(addr: &str, options: &ClientOptions) -> Result<Self, WireError> {
        let timeout = options.timeout;
        let io = |source| WireError::Io { addr: addr.to_string(), source };
        let timed_out = |api| WireError::Timeout { addr: addr.to_string(), api, timeout };
        let tcp = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| timed_out("connect"))?
            .map_err(io)?;
        tcp.set_nodelay(true).map_err(io)?;
        let stream: BoxStream = match &options.security.tls {
            None => Box::new(tcp),
            Some(tls) => {
                let handshake = crate::security::tls_handshake(tls, addr, tcp);
                Box::new(tokio::time::timeout(timeout, handshake).await.map_err(|_| timed_out("the TLS handshake"))??)
            }
        };
        let (read, write) = tokio::io::split(stream);
        let waiting =
            Arc::new(Waiting { queue: Mutex::default(), broken: AtomicBool::new(false), reason: Mutex::default() });
        let reader = tokio::spawn(read_answers(read, waiting.clone()));
        let conn = Self {
            inner: Arc::new(Inner {
                addr: addr.to_string(),
                client_id: StrBytes::from_string(options.client_id.clone()),
                timeout,
                versions: OnceLock::new(),
                round_trip: OnceLock::new(),
                writer: tokio::sync::Mutex::new((write, 0)),
                waiting,
                reader,
            }),
        };
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("strait"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let asked = Instant::now();
        let answer = conn.send_at(&request, API_VERSIONS_VERSION).await?.get().await?;
        let _ = conn.inner.round_trip.set(asked.elapsed());
        conn.check(answer.error_code, "ApiVersions")?;
        let versions = answer.api_keys.iter().map(|k| (k.api_key, (k.min_version, k.max_version))).collect();
        let _ = conn.inner.versions.set(versions);
        if let Some(sasl) = &options.security.sasl {
            authenticate(&conn, sasl).await?;
        }
        Ok(conn)
    }

    /// The broker's `host:port`.
    pub fn addr(&self) -> &str {
        &self.inner.addr
    }

    /// How long the broker took to answer the first request (ApiVersions at open): a round trip
    /// and the broker's time to answer.
    pub fn round_trip(&self) -> Duration {
        self.inner.round_trip.get().copied().unwrap_or_default()
    }

    /// Whether it failed, so it must be replaced by a new one.
    pub fn is_broken(&self) -> bool {
        self.inner.waiting.broken.load(Ordering::SeqCst)
    }

    /// The version of `R` to speak: the highest the broker and this client (up to `cap`) both
    /// know. Errors: [`WireError::Unsupported`] when they share none.
    pub fn version<R: Request>(&self, cap: i16) -> Result<i16, WireError> {
        let (ours_min, ours_max) = (R::VERSIONS.min, R::VERSIONS.max.min(cap));
        let known = self.inner.versions.get().and_then(|v| v.get(&R::KEY));
        let (broker_min, broker_max) = known.copied().unwrap_or((0, -1));
        let version = ours_max.min(broker_max);
        if version < ours_min.max(broker_min) {
            return Err(WireError::Unsupported {
                addr: self.addr().to_string(),
                api: api_name::<R>(),
                broker_min,
                broker_max,
                ours_min,
                ours_max,
            });
        }
        Ok(version)
    }

    /// Sends `request` at [`Self::version`]`(cap)` and waits for the broker's answer: [`Self::send`]
    /// then [`Answer::get`].
    pub async fn call<R: Request>(&self, request: &R, cap: i16) -> Result<R::Response, WireError> {
        self.send(request, cap).await?.get().await
    }

    /// Writes `request` at [`Self::version`]`(cap)`, returning its answer to await while other
    /// requests go out. Errors: [`WireError::Unsupported`]; [`WireError::Protocol`] when it
    /// cannot be encoded; [`WireError::Io`] or [`WireError::Timeout`] when it cannot be written,
    /// after which the connection is broken.
    pub async fn send<R: Request>(&self, request: &R, cap: i16) -> Result<Answer<R::Response>, WireError> {
        let version = self.version::<R>(cap)?;
        self.send_at(request, version).await
    }

    /// `error_code` of an answer to `api` as an error naming this broker.
    pub fn check(&self, error_code: i16, api: &str) -> Result<(), WireError> {
        match ResponseError::try_from_code(error_code) {
            None => Ok(()),
            Some(error) => Err(WireError::Broker { context: format!("broker {}: {api}", self.addr()), error }),
        }
    }

    async fn send_at<R: Request>(&self, request: &R, version: i16) -> Result<Answer<R::Response>, WireError> {
        let inner = &self.inner;
        let (addr, api, timeout) = (inner.addr.clone(), api_name::<R>(), inner.timeout);
        let protocol = |message: String| WireError::Protocol { addr: addr.clone(), api, message };
        let mut writer = inner.writer.lock().await;
        let correlation_id = writer.1.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(inner.client_id.clone()));
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        header
            .encode(&mut frame, <R as HeaderVersion>::header_version(version))
            .map_err(|e| protocol(e.to_string()))?;
        request.encode(&mut frame, version).map_err(|e| protocol(e.to_string()))?;
        let size =
            i32::try_from(frame.len() - 4).map_err(|_| protocol(format!("a request of {} bytes", frame.len())))?;
        frame[..4].copy_from_slice(&size.to_be_bytes());

        let (tx, answer) = oneshot::channel();
        {
            // Checked under the queue's lock: a connection that breaks now fails this request too.
            let mut queue = inner.waiting.queue.lock().unwrap_or_else(|e| e.into_inner());
            if inner.waiting.broken.load(Ordering::SeqCst) {
                let source = std::io::Error::other(inner.waiting.reason());
                return Err(WireError::Io { addr, source });
            }
            queue.push_back((correlation_id, tx));
        }
        writer.1 = correlation_id;
        match tokio::time::timeout(timeout, writer.0.write_all(&frame)).await {
            Ok(Ok(())) => {}
            Ok(Err(source)) => {
                inner.waiting.fail(format!("writing {api}: {source}"));
                return Err(WireError::Io { addr, source });
            }
            Err(_) => {
                inner.waiting.fail(format!("{api} not written within {} ms", timeout.as_millis()));
                return Err(WireError::Timeout { addr, api, timeout });
            }
        }
        let waiting = inner.waiting.clone();
        Ok(Answer { addr, api, version, timeout, waiting, answer, _response: PhantomData })
    }
}

/// Reads answers until the connection fails, each handed to the oldest request waiting.
async fn read_answers(mut read: ReadHalf<BoxStream>, waiting: Arc<Waiting>) {
    let reason = loop {
        let body = match read_frame(&mut read).await {
            Ok(body) => body,
            Err(reason) => break reason,
        };
        // Every response header (v0 and v1) starts with the correlation id.
        let Some(id) = body.get(..4).map(|mut b| b.get_i32()) else { break "an answer without a header".into() };
        let next = waiting.queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
        match next {
            // The request's owner may have stopped waiting: its answer is dropped.
            Some((expected, tx)) if expected == id => drop(tx.send(body)),
            Some((expected, _)) => break format!("answer to request {id} where {expected} was next"),
            None => break format!("answer to request {id}, which was not asked"),
        }
    };
    waiting.fail(reason);
}

async fn read_frame(read: &mut ReadHalf<BoxStream>) -> Result<Bytes, String> {
    let size = read.read_i32().await.map_err(|e| format!("reading: {e}"))?;
    let size = usize::try_from(size).ok().filter(|s| *s <= MAX_FRAME).ok_or(format!("an answer of {size} bytes"))?;
    let mut body = BytesMut::zeroed(size);
    read.read_exact(&mut body).await.map_err(|e| format!("reading: {e}"))?;
    Ok(body.freeze())
}

/// `FetchRequest` for `kafka_protocol::messages::fetch_request::FetchRequest`.
fn api_name<R>() -> &'static str {
    std::any::type_name::<R>().rsplit("::").next().unwrap_or("request")
}

impl SaslConnection for Connection {
    fn addr(&self) -> &str {
        Connection::addr(self)
    }

    async fn call<R: Request>(&self, request: &R, cap: i16) -> Result<R::Response, WireError> {
        Connection::call(self, request, cap).await
    }
}
