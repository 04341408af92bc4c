//! What a request through this crate can fail with, naming the broker (`host:port`) it went to.

use std::time::Duration;

use kafka_protocol::ResponseError;

use crate::batch::BatchError;

/// A failed request or an answer that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The connection failed or closed.
    #[error("broker {addr}: {source}")]
    Io {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// An OAUTHBEARER token could not be had from the OIDC token endpoint at `url`: retriable
    /// when it did not answer, or answered 5xx or 429.
    #[error("OAUTHBEARER token endpoint {url}: {message}")]
    TokenEndpoint { url: String, message: String, retriable: bool },
    /// No answer within the request timeout.
    #[error("broker {addr}: no answer to {api} within {} ms", .timeout.as_millis())]
    Timeout { addr: String, api: &'static str, timeout: Duration },
    /// A request could not be encoded, or an answer decoded (a broker speaking another version
    /// than it said, or a frame cut short).
    #[error("broker {addr}: {api}: {message}")]
    Protocol { addr: String, api: &'static str, message: String },
    /// The TLS handshake failed: the broker's certificate is not trusted or does not name the
    /// host, or the broker does not speak TLS there.
    #[error("broker {addr}: TLS: {message}")]
    Tls { addr: String, message: String },
    /// The broker refused the SASL mechanism or the credentials, or its SCRAM answers do not
    /// check out.
    #[error("broker {addr}: SASL {mechanism} authentication failed: {message}")]
    Authentication { addr: String, mechanism: &'static str, message: String },
    /// The broker and this client share no version of an API.
    #[error(
        "broker {addr}: {api} versions {broker_min}..{broker_max} offered, this client speaks {ours_min}..{ours_max}"
    )]
    Unsupported { addr: String, api: &'static str, broker_min: i16, broker_max: i16, ours_min: i16, ours_max: i16 },
    /// The broker answered with an error code (for the request, or for the topic/partition named).
    #[error("{context}: {error}")]
    Broker { context: String, error: ResponseError },
    /// A fetched partition's records hold a batch that cannot be forwarded.
    #[error("{topic}/{partition}: {source}")]
    Batch {
        topic: String,
        partition: i32,
        #[source]
        source: BatchError,
    },
    /// A partition asked for has no known leader: its topic does not exist, or metadata has not
    /// been refreshed since it was created.
    #[error("{topic}/{partition}: no leader known")]
    NoLeader { topic: String, partition: i32 },
    /// No broker is known to send a request to: none given, or none in the metadata.
    #[error("no broker known to ask")]
    NoBroker,
    /// A batch the target refused for good, or did not append within the delivery timeout;
    /// `offset` is the batch's base offset on the source, `error` the broker's refusal.
    #[error("{topic}/{partition}: the batch from source offset {offset} was not produced: {reason}")]
    NotProduced { topic: String, partition: i32, offset: i64, reason: String, error: Option<ResponseError> },
    /// A transactional call the producer's state does not allow (a produce outside a
    /// transaction, a transaction begun twice).
    #[error("transactional id {transactional_id}: {message}")]
    Transaction { transactional_id: String, message: String },
}

impl WireError {
    /// Whether asking again (after a metadata refresh, for a leader that moved) may succeed: a
    /// lost connection, a timeout, or a broker error Kafka marks retriable; never a TLS or SASL
    /// failure, which asking again repeats.
    pub fn is_retriable(&self) -> bool {
        match self {
            Self::Io { .. } | Self::Timeout { .. } | Self::NoLeader { .. } | Self::NoBroker => true,
            Self::Broker { error, .. } => error.is_retriable(),
            Self::TokenEndpoint { retriable, .. } => *retriable,
            Self::Protocol { .. }
            | Self::Unsupported { .. }
            | Self::Tls { .. }
            | Self::Authentication { .. }
            | Self::Batch { .. }
            | Self::NotProduced { .. }
            | Self::Transaction { .. } => false,
        }
    }

    /// Whether asking the transaction coordinator again may succeed: a retriable error, or one
    /// it gives while it loads its state or still ends the last transaction
    /// (`COORDINATOR_LOAD_IN_PROGRESS`, `CONCURRENT_TRANSACTIONS`).
    pub fn is_coordinator_retriable(&self) -> bool {
        self.is_retriable()
            || matches!(
                self.broker_error(),
                Some(ResponseError::ConcurrentTransactions | ResponseError::CoordinatorLoadInProgress)
            )
    }

    /// Whether a newer producer of the same transactional id fenced this one, or the
    /// transaction coordinator bumped its epoch when it aborted a transaction that outlived its
    /// timeout (`PRODUCER_FENCED`, `INVALID_PRODUCER_EPOCH`): the producer can write no more
    /// with its epoch.
    pub fn is_fenced(&self) -> bool {
        let fenced =
            |e: &ResponseError| matches!(e, ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch);
        match self {
            Self::Broker { error, .. } => fenced(error),
            Self::NotProduced { error: Some(error), .. } => fenced(error),
            _ => false,
        }
    }

    /// The broker's error code, when the broker refused (for the request or a partition).
    pub fn broker_error(&self) -> Option<ResponseError> {
        match self {
            Self::Broker { error, .. } | Self::NotProduced { error: Some(error), .. } => Some(*error),
            _ => None,
        }
    }
}
