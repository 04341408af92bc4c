//! Shared Kafka client plumbing: blocking calls off the async workers, small control-record
//! produces, cluster ids; reading state topics to their end ([`StateReader`], `read_committed`),
//! classifying start-up failures ([`classify_start`]), the watermarks of many partitions in one
//! request per broker ([`watermarks`]) and the lag in records a consumer can read, transaction
//! markers left out ([`LagReader`]) are its submodules.

mod checkpoints;
mod lag;
mod start_failure;
mod state_reader;
mod watermarks;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use self::checkpoints::read_checkpoints;
pub use self::lag::{Gap, LagReader};
pub use self::start_failure::{
    classify_start, connect_error, ends_read, is_denied, transaction_timeout_refused, StartFailure,
};
pub use self::state_reader::{read_to_end, KeyedRecord, RawRecord, StateReader};
pub use self::watermarks::{listed_watermarks, topic_partition_counts, watermarks, watermarks_in_lists, Watermarks};
use rdkafka::client::ClientContext;
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext};
use strait_connect::{ConnectError, ConnectResult};
use tokio::sync::oneshot;

use crate::client_log::{ClientLog, LoggedConsumer};
use crate::config::ClusterConfig;
use crate::producer::{delivery_outcome, PolledProducer};

/// Longest wait for a metadata or watermark answer.
pub const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the quickest of 3 metadata answers of `client` took once connected: a round trip to
/// the cluster, and the time to send its metadata (so a cluster of very many topics may count as
/// far). [`strait_wire::Connections::Auto`] decides on it. Blocking. Errors: the cluster does not
/// answer within [`METADATA_TIMEOUT`].
pub fn round_trip<C: ClientContext>(client: &rdkafka::client::Client<C>) -> Result<Duration, KafkaError> {
    // The first answer waits for the connection (its TLS and SASL too), the second may wait for
    // the one to the broker the first named: the quickest of 3 more.
    client.fetch_metadata(None, METADATA_TIMEOUT)?;
    let mut quickest = Duration::MAX;
    for _ in 0..3 {
        let asked = Instant::now();
        client.fetch_metadata(None, METADATA_TIMEOUT)?;
        quickest = quickest.min(asked.elapsed());
    }
    Ok(quickest)
}

/// `probe`'s [`round_trip`] to `cluster`, off the async workers. Errors: as [`connect_error`],
/// naming the cluster and its address.
pub async fn measure_round_trip(
    cluster: &ClusterConfig,
    probe: impl FnOnce() -> Result<Duration, KafkaError> + Send + 'static,
) -> ConnectResult<Duration> {
    blocking(probe).await.map_err(|e| {
        connect_error(
            format!("measure the round trip on cluster {} at {}", cluster.alias, cluster.bootstrap_servers),
            e,
        )
    })
}

/// Runs blocking librdkafka calls (metadata, watermarks, transactions) off the async workers.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    joined(tokio::task::spawn_blocking(f)).await
}

/// The value of a spawned `task`, once it ends; a panic of the task goes on in the caller.
pub async fn joined<T>(task: tokio::task::JoinHandle<T>) -> T {
    task.await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// Delivery reports of control records, each sent to the [`Ack`] its [`enqueue`] returned.
pub struct ControlAcks;

impl ClientContext for ControlAcks {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        crate::client_log::log(level, fac, message)
    }

    fn error(&self, error: KafkaError, reason: &str) {
        crate::client_log::error(&error, reason)
    }
}

impl ProducerContext for ControlAcks {
    type DeliveryOpaque = Box<oneshot::Sender<Result<i64, KafkaError>>>;

    fn delivery(&self, result: &DeliveryResult<'_>, ack: Self::DeliveryOpaque) {
        // Nobody awaiting the ack any more is fine: the record was written all the same.
        let _ = ack.send(delivery_outcome(result));
    }
}

/// A producer of small control records (heartbeats, checkpoints, offset syncs on the source),
/// shared by the flow's tasks.
pub type ControlProducer = Arc<PolledProducer<ControlAcks>>;

/// The outcome of an [`enqueue`]d record: its offset, or the produce error.
pub type Ack = oneshot::Receiver<Result<i64, KafkaError>>;

/// The producer heartbeats and checkpoints of a flow share: idempotent, acks=all.
/// Errors: invalid client config.
pub fn control_producer(target: &ClusterConfig) -> Result<ControlProducer, KafkaError> {
    let config = target.client_config(&[("enable.idempotence", "true"), ("acks", "all"), ("linger.ms", "5")]);
    PolledProducer::new(&config, ControlAcks).map(Arc::new)
}

/// Queues `record` on `producer`, sleeping briefly while librdkafka's queue is full, and returns
/// its [`Ack`]. For small control records (heartbeats, checkpoints, offset syncs on the
/// source); the data path applies its own backpressure. Errors: the produce error for anything
/// but a full queue.
pub async fn enqueue(producer: &ControlProducer, record: BaseRecord<'_, [u8], [u8]>) -> Result<Ack, KafkaError> {
    let (tx, ack) = oneshot::channel();
    let BaseRecord { topic, partition, payload, key, timestamp, headers, .. } = record;
    let mut record = BaseRecord { topic, partition, payload, key, timestamp, headers, delivery_opaque: Box::new(tx) };
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(ack),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// Awaits an [`Ack`] from [`enqueue`]; the downstream offset on success.
pub async fn acked(ack: Ack) -> Result<i64, KafkaError> {
    ack.await.unwrap_or(Err(KafkaError::Canceled))
}

/// The Kafka cluster id of `cluster`, waiting up to 10 s. Errors: [`ConnectError::Denied`] naming
/// the cluster when it refuses Strait's credentials (a wrong password fails at once instead of
/// being retried), else [`ConnectError::Backend`] when the cluster does not answer.
pub async fn cluster_id(cluster: &ClusterConfig) -> ConnectResult<String> {
    let (alias, servers) = (cluster.alias.clone(), cluster.bootstrap_servers.clone());
    let client: LoggedConsumer = cluster
        .client_config(&[])
        .create_with_context(ClientLog)
        .map_err(|e| ConnectError::backend(format!("client for cluster {alias}"), e))?;
    blocking(move || {
        let deadline = Instant::now() + METADATA_TIMEOUT;
        loop {
            if let Some(id) = client.client().fetch_cluster_id(Duration::from_secs(1)) {
                return Ok(id);
            }
            // librdkafka reports a refused login as an error event, then keeps retrying.
            while let Some(event) = client.poll(Duration::ZERO) {
                match event {
                    Err(e) if e.rdkafka_error_code().is_some_and(is_denied) => {
                        let context = format!(
                            "cluster {alias} ({servers}) refused Strait's credentials (check the sasl.* and ssl.* settings of its client table)"
                        );
                        return Err(ConnectError::denied(context, e));
                    }
                    _ => {}
                }
            }
            if Instant::now() >= deadline {
                return Err(ConnectError::backend(
                    format!("connect to cluster {alias}"),
                    format!("no cluster id from {servers} within {METADATA_TIMEOUT:?}"),
                ));
            }
        }
    })
    .await
}

/// Waits until `producer`'s metadata shows `topic` with at least `partitions` partitions, so a
/// record produced right after creating the topic (or adding partitions) is not refused as
/// "unknown partition". Errors after `timeout`.
pub async fn await_producer_metadata<C>(
    producer: &Arc<PolledProducer<C>>,
    topic: &str,
    partitions: usize,
    timeout: Duration,
) -> Result<(), KafkaError>
where
    C: ProducerContext + 'static,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let producer = producer.clone();
        let name = topic.to_string();
        let seen = blocking(move || {
            producer.client().fetch_metadata(Some(&name), Duration::from_secs(5)).map(|md| {
                md.topics().iter().find(|t| t.name() == name && t.error().is_none()).map_or(0, |t| t.partitions().len())
            })
        })
        .await;
        match seen {
            Ok(n) if n >= partitions => return Ok(()),
            Err(e) if tokio::time::Instant::now() >= deadline => return Err(e),
            _ if tokio::time::Instant::now() >= deadline => {
                return Err(KafkaError::MetadataFetch(RDKafkaErrorCode::UnknownPartition))
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// A `strait-wire` failure (the batch path's client) as the connector's error: refused
/// credentials and TLS as denied, a transient failure as retriable, the rest as backend errors.
pub fn wire_error(context: String, e: strait_wire::WireError) -> ConnectError {
    use strait_wire::WireError;
    match e {
        WireError::Authentication { .. }
        | WireError::Tls { .. }
        | WireError::TokenEndpoint { retriable: false, .. } => ConnectError::denied(context, e),
        e if e.is_retriable() => ConnectError::retriable(context, e),
        e => ConnectError::backend(context, e),
    }
}

/// How long a connect or a request of the batch path's client waits for its answer.
const WIRE_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The batch path's client of `cluster` (`strait-wire`), its TLS and SASL from the cluster's
/// `[clusters.client]` settings, connected and its brokers known; `what` names the use in
/// errors. Errors: a setting the client refuses (invalid), refused credentials or TLS (denied),
/// a cluster that does not answer (retriable).
pub async fn wire_cluster(cluster: &ClusterConfig, what: &str) -> ConnectResult<strait_wire::Cluster> {
    let security = strait_wire::Security::from_client_settings(&cluster.client)
        .map_err(|e| ConnectError::invalid(format!("clusters {} client \"{}\"", cluster.alias, e.key), e.reason))?;
    let options = strait_wire::ClientOptions {
        client_id: format!("strait-{}", cluster.alias),
        timeout: WIRE_REQUEST_TIMEOUT,
        security,
        connections: cluster.connections_per_broker.wire(),
    };
    let connected = strait_wire::Cluster::connect(&cluster.bootstrap_servers, options)
        .await
        .map_err(|e| wire_error(format!("{what} on cluster {}", cluster.alias), e))?;
    tracing::info!(cluster = %cluster.alias, what, connections_per_broker = connected.connections_per_broker(), setting = ?cluster.connections_per_broker, "batch path client connected");
    Ok(connected)
}
