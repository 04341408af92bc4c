//! Shared Kafka client plumbing: blocking calls off the async workers, small control-record
//! produces, cluster ids, and reading state topics to their end (`read_committed`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::client::{Client, ClientContext};
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{Message, Offset, TopicPartitionList};
use strait_connect::{ConnectError, ConnectResult};
use tokio::sync::oneshot;

use crate::client_log::{ClientLog, LoggedConsumer};
use crate::config::{ClusterConfig, Flow};
use crate::producer::{delivery_outcome, PolledProducer};

/// Longest wait for a metadata or watermark answer.
pub const METADATA_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a state-topic read may go without progress before it fails.
const READ_STALL_TIMEOUT: Duration = Duration::from_secs(30);

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

/// Every topic of the cluster `client` talks to with its partition count (partitions are
/// numbered from 0), waiting up to `timeout`; topics the metadata reports with an error are left
/// out. Blocking: call from a blocking thread.
pub fn topic_partition_counts<C: ClientContext>(
    client: &Client<C>,
    timeout: Duration,
) -> Result<Vec<(String, usize)>, KafkaError> {
    let md = client.fetch_metadata(None, timeout)?;
    Ok(md
        .topics()
        .iter()
        .filter(|t| t.error().is_none())
        .map(|t| (t.name().to_string(), t.partitions().len()))
        .collect())
}

/// Error codes that mean the cluster refuses Strait's credentials or lacks an ACL for it.
const DENIED: &[RDKafkaErrorCode] = &[
    RDKafkaErrorCode::Authentication,
    RDKafkaErrorCode::SaslAuthenticationFailed,
    RDKafkaErrorCode::UnsupportedSASLMechanism,
    RDKafkaErrorCode::IllegalSASLState,
    RDKafkaErrorCode::TopicAuthorizationFailed,
    RDKafkaErrorCode::GroupAuthorizationFailed,
    RDKafkaErrorCode::ClusterAuthorizationFailed,
    RDKafkaErrorCode::TransactionalIdAuthorizationFailed,
    RDKafkaErrorCode::DelegationTokenAuthorizationFailed,
];

/// Whether `code` means the cluster refuses Strait (credentials or a missing ACL).
pub fn is_denied(code: RDKafkaErrorCode) -> bool {
    DENIED.contains(&code)
}

/// The broker or librdkafka error code of `e`; rdkafka gives none for admin errors, though they
/// carry one.
fn code_of(e: &KafkaError) -> Option<RDKafkaErrorCode> {
    match e {
        KafkaError::AdminOp(code) => Some(*code),
        other => other.rdkafka_error_code(),
    }
}

/// `e` as a [`ConnectError`] for `context` (what was tried, on which cluster): [`ConnectError::Denied`]
/// for authentication and authorization failures, which retrying cannot fix, else
/// [`ConnectError::Backend`].
pub fn connect_error(context: impl Into<String>, e: KafkaError) -> ConnectError {
    match code_of(&e) {
        Some(code) if is_denied(code) => {
            ConnectError::denied(format!("{} (the cluster's ACLs do not allow it)", context.into()), e)
        }
        _ => ConnectError::backend(context, e),
    }
}

/// A failure to start part of a flow, classified by [`classify_start`].
#[derive(Debug)]
pub enum StartFailure {
    /// A later attempt may succeed: a cluster unreachable, a leader not available, a coordinator
    /// loading, a request timed out, anything not known to be permanent. Retried with backoff.
    Transient(ConnectError),
    /// Retrying cannot help until an operator acts: the flow stops with this error, whose context
    /// names the setting at fault where one is known.
    Permanent(ConnectError),
}

/// Classifies a failure to start part of `flow` (the slot group and its coordination topic, the
/// sink and its state and offset-syncs topics, the source, checkpoints), from its kind and the
/// Kafka error code found in its causes. Permanent: a kind that says so (refused transactions,
/// [`ConnectError::Denied`], a source gap, a slot conflict, fencing, [`ConnectError::Invalid`]);
/// a client librdkafka cannot create (a file it names cannot be read or parsed); authentication
/// or authorisation refused; a replication factor, partition count, topic name, topic config,
/// policy, session timeout or transaction timeout the broker refuses. The permanent ones found
/// by code come back as [`ConnectError::Invalid`] (or [`ConnectError::Denied`]) whose context
/// names the flow's setting. Everything else is transient.
pub fn classify_start(flow: &Flow, e: ConnectError) -> StartFailure {
    if matches!(e, ConnectError::Denied { .. } | ConnectError::Invalid { .. }) {
        // Already say what to fix.
        return StartFailure::Permanent(e);
    }
    let setting = kafka_cause(&e).and_then(|k| refused_setting(flow, k));
    match (setting, &e) {
        (Some(Refused::Denied(hint)), _) => StartFailure::Permanent(ConnectError::denied(hint, e)),
        (Some(Refused::Setting(hint)), _) => StartFailure::Permanent(ConnectError::invalid(hint, e)),
        (
            None,
            ConnectError::Transaction { .. }
            | ConnectError::Denied { .. }
            | ConnectError::DataLoss { .. }
            | ConnectError::Conflict { .. }
            | ConnectError::Fenced { .. }
            | ConnectError::Invalid { .. },
        ) => StartFailure::Permanent(e),
        (None, _) => StartFailure::Transient(e),
    }
}

/// The Kafka client error underneath `e`, if any (through nested [`ConnectError`]s).
fn kafka_cause(e: &ConnectError) -> Option<&KafkaError> {
    let cause = e.cause();
    cause.downcast_ref::<KafkaError>().or_else(|| cause.downcast_ref::<ConnectError>().and_then(kafka_cause))
}

/// What a permanent Kafka error is about.
enum Refused {
    /// Credentials or ACLs.
    Denied(String),
    /// A setting of the flow or of a cluster's client table, named.
    Setting(String),
}

/// The setting a Kafka error refuses for good, or `None` when the error may pass.
fn refused_setting(flow: &Flow, e: &KafkaError) -> Option<Refused> {
    use RDKafkaErrorCode as C;
    let (name, target, rf) = (&flow.name, &flow.target.alias, flow.writing.replication_factor);
    let setting = |s: String| Some(Refused::Setting(s));
    if let KafkaError::ClientCreation(_) = e {
        // librdkafka names the property (`ssl.ca.location failed: ...`) in the error itself.
        return setting(format!(
            "flow {name}: a [clusters.client] setting of {} or {target}: librdkafka cannot create a client \
             with it (a file it names cannot be read or parsed, or a value is refused)",
            flow.source.alias
        ));
    }
    if let KafkaError::AdminOpCreation(why) = e {
        return setting(format!("flow {name}: {why}"));
    }
    match code_of(e)? {
        code if is_denied(code) => Some(Refused::Denied(format!(
            "flow {name}: the cluster refuses Strait's credentials or lacks an ACL for it (check the sasl.* and \
             ssl.* settings of its [clusters.client] table and its ACLs)"
        ))),
        C::InvalidReplicationFactor | C::InvalidReplicaAssignment => setting(format!(
            "flow {name}: replication_factor = {rf}{}: the target {target} cannot place that many replicas \
             (at most its broker count)",
            if rf == -1 { " (the broker's default.replication.factor)" } else { "" }
        )),
        C::InvalidConfig | C::PolicyViolation => setting(format!(
            "flow {name}: a topic config the target {target} refuses: replication_factor = {rf}, or a config \
             copied from the source topic (leave it out with sync_topic_configs_exclude)"
        )),
        C::InvalidPartitions => setting(format!(
            "flow {name}: a partition count the target {target} refuses ([flows.scale_out] slots = {}, or the \
             source topic's partitions)",
            flow.slots()
        )),
        C::InvalidTopic => setting(format!(
            "flow {name}: a topic name the target {target} refuses (too long or not allowed once renamed: check \
             the cluster aliases, separator and replication_policy)"
        )),
        C::InvalidSessionTimeout => setting(format!(
            "flow {name}: [flows.scale_out] session_timeout_ms = {} is outside the target's \
             group.min.session.timeout.ms and group.max.session.timeout.ms",
            flow.scale_out.session_timeout.as_millis()
        )),
        C::InvalidTransactionTimeout => setting(format!(
            "flow {name}: transaction_timeout_ms is above the target's transaction.max.timeout.ms (15 min by \
             default)"
        )),
        _ => None,
    }
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

/// A keyed record of a state topic: its offset, key and value bytes.
pub type RawRecord = (i64, Vec<u8>, Vec<u8>);

/// A record with a key and maybe a value (`None`: a tombstone): (offset, key, value).
pub type KeyedRecord = (i64, Vec<u8>, Option<Vec<u8>>);

/// Every committed record of partition 0 of `topic` (Strait's state topics have one partition)
/// with a key and a value, from its beginning to the end seen at the start. A missing or empty
/// topic gives nothing. For the small compacted state topics (positions, checkpoints).
/// Errors: the first client error, or no progress for 30 s (a transaction of another writer left
/// open holds `read_committed` readers back until it ends).
pub async fn read_to_end(cluster: &ClusterConfig, topic: &str) -> Result<Vec<RawRecord>, KafkaError> {
    let reader = StateReader::new(cluster, "strait-state-reader")?;
    let topic = topic.to_string();
    Ok(blocking(move || reader.read_new_records(&topic, None)).await?.0)
}

/// Reads a state topic `read_committed`, so records of aborted or still open transactions are
/// never used, up to its real end: a second, `read_uncommitted` client gives the high watermark
/// (a `read_committed` one would give the last stable offset, stopping short of records that a
/// transaction still open at that moment would hide).
pub struct StateReader {
    consumer: LoggedConsumer,
    watermarks: LoggedConsumer,
}

impl StateReader {
    /// A reader of `cluster` with consumer group id `group` (never joined, never committed).
    /// Errors: invalid client config.
    pub fn new(cluster: &ClusterConfig, group: &str) -> Result<Self, KafkaError> {
        let client = |isolation| {
            cluster
                .client_config(&[("group.id", group), ("enable.auto.commit", "false"), ("isolation.level", isolation)])
                .create_with_context(ClientLog)
        };
        Ok(Self { consumer: client("read_committed")?, watermarks: client("read_uncommitted")? })
    }

    /// Records with a key and a value of partition 0 of `topic`, from `next` (or, when `None`,
    /// assigning the reader at the beginning) to the high watermark seen now, and the next offset
    /// to read. Transaction markers and aborted records are stepped over by the consumer's
    /// position. Blocking: call from a blocking thread. A topic that does not exist yet reads nothing.
    pub fn read_new_records(
        &self,
        topic: &str,
        next: Option<i64>,
    ) -> Result<(Vec<RawRecord>, Option<i64>), KafkaError> {
        if self.partition_count(topic)? == 0 {
            return Ok((Vec::new(), next));
        }
        let (records, next) = self.read(topic, 0, next)?;
        Ok((records.into_iter().filter_map(|(o, k, v)| Some((o, k, v?))).collect(), next))
    }

    /// Partitions of `topic`; 0 when it does not exist. Blocking.
    pub fn partition_count(&self, topic: &str) -> Result<i32, KafkaError> {
        let md = self.consumer.fetch_metadata(Some(topic), METADATA_TIMEOUT)?;
        Ok(md
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            // librdkafka counts a topic's partitions in a C int: the length fits.
            .map_or(0, |t| t.partitions().len() as i32))
    }

    /// Every keyed record of `topic` partition `partition`, tombstones (`None` values) included,
    /// from its beginning to the high watermark seen now. Blocking.
    pub fn read_partition(&self, topic: &str, partition: i32) -> Result<Vec<KeyedRecord>, KafkaError> {
        Ok(self.read(topic, partition, None)?.0)
    }

    fn read(
        &self,
        topic: &str,
        partition: i32,
        next: Option<i64>,
    ) -> Result<(Vec<KeyedRecord>, Option<i64>), KafkaError> {
        let consumer = &self.consumer;
        let (low, high) = self.watermarks.fetch_watermarks(topic, partition, METADATA_TIMEOUT)?;
        let mut position = match next {
            Some(n) => n,
            None => {
                let mut tpl = TopicPartitionList::new();
                tpl.add_partition_offset(topic, partition, Offset::Beginning)?;
                consumer.assign(&tpl)?;
                low
            }
        };
        let mut out = Vec::new();
        let mut progress = Instant::now();
        while position < high {
            match consumer.poll(Duration::from_millis(200)) {
                Some(Ok(m)) => {
                    position = m.offset() + 1;
                    progress = Instant::now();
                    if let Some(k) = m.key() {
                        out.push((m.offset(), k.to_vec(), m.payload().map(<[u8]>::to_vec)));
                    }
                }
                Some(Err(e)) => return Err(e),
                None => {
                    // Past a commit marker or an aborted transaction no record arrives: the
                    // consumer's position tells how far it got.
                    let fetched = consumer.position()?.find_partition(topic, partition).map(|e| e.offset());
                    if let Some(Offset::Offset(p)) = fetched {
                        if p > position {
                            position = p;
                            progress = Instant::now();
                        }
                    }
                    if position < high && progress.elapsed() > READ_STALL_TIMEOUT {
                        return Err(KafkaError::MessageConsumption(RDKafkaErrorCode::OperationTimedOut));
                    }
                }
            }
        }
        Ok((out, Some(position)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use RDKafkaErrorCode as C;

    fn flow() -> Flow {
        let toml = "[[clusters]]\nalias = \"a\"\nbootstrap_servers = \"h:1\"\n[[clusters]]\nalias = \"b\"\n\
                    bootstrap_servers = \"h:2\"\n[[flows]]\nsource = \"a\"\ntarget = \"b\"\nreplication_factor = 3\n\
                    [flows.scale_out]\nenabled = true\nslots = 4\nsession_timeout_ms = 1000\n";
        Config::parse(toml).unwrap().remove(0)
    }

    #[test]
    fn start_failures_are_permanent_only_when_retrying_cannot_help() {
        let admin = |code| ConnectError::backend("create topic t on cluster b", KafkaError::AdminOp(code));
        let metadata = |code| ConnectError::backend("list topics", KafkaError::MetadataFetch(code));
        // (failure, permanent, what the stopping error must name)
        let cases: Vec<(ConnectError, bool, &str)> = vec![
            (admin(C::InvalidReplicationFactor), true, "replication_factor = 3"),
            (admin(C::InvalidReplicaAssignment), true, "replication_factor = 3"),
            (admin(C::InvalidConfig), true, "sync_topic_configs_exclude"),
            (admin(C::PolicyViolation), true, "a topic config the target b refuses"),
            (admin(C::InvalidPartitions), true, "[flows.scale_out] slots = 4"),
            (admin(C::InvalidTopic), true, "replication_policy"),
            (admin(C::ClusterAuthorizationFailed), true, "ACL"),
            (admin(C::TopicAuthorizationFailed), true, "ACL"),
            (metadata(C::SaslAuthenticationFailed), true, "credentials"),
            (metadata(C::UnsupportedSASLMechanism), true, "sasl.*"),
            (ConnectError::backend("join", KafkaError::Global(C::GroupAuthorizationFailed)), true, "ACL"),
            (ConnectError::backend("connect", KafkaError::Global(C::Authentication)), true, "credentials"),
            (
                ConnectError::backend("join", KafkaError::Global(C::InvalidSessionTimeout)),
                true,
                "session_timeout_ms = 1000",
            ),
            (
                ConnectError::transaction("init", KafkaError::Global(C::InvalidTransactionTimeout)),
                true,
                "transaction_timeout_ms",
            ),
            (
                ConnectError::backend(
                    "producer for b",
                    KafkaError::ClientCreation("ssl.ca.location failed: no certificate or crl found".into()),
                ),
                true,
                "ssl.ca.location failed",
            ),
            (
                admin_creation("topic t: 4294967295 partitions are more than Kafka allows"),
                true,
                "more than Kafka allows",
            ),
            // Nested: the code is found under the outer error.
            (ConnectError::backend("start", admin(C::InvalidReplicationFactor)), true, "replication_factor = 3"),
            // Kinds that are permanent whatever their cause.
            (ConnectError::conflict("flow a->b: [flows.scale_out] slots", "4 vs 6"), true, "slots"),
            (ConnectError::denied("cluster b refused Strait's credentials", "login"), true, "credentials"),
            (ConnectError::data_loss("orders 0", "gap"), true, "orders 0"),
            (ConnectError::fenced("slot 0", "another instance"), true, "another instance"),
            (ConnectError::transaction("init transactions", "refused"), true, "init transactions"),
            (ConnectError::invalid("flow a->b: replication_factor", "x"), true, "replication_factor"),
            // Transient: may pass on a later attempt.
            (metadata(C::BrokerTransportFailure), false, "list topics"),
            (metadata(C::AllBrokersDown), false, "list topics"),
            (metadata(C::OperationTimedOut), false, "list topics"),
            (admin(C::LeaderNotAvailable), false, "create topic"),
            (admin(C::CoordinatorLoadInProgress), false, "create topic"),
            (admin(C::NotCoordinator), false, "create topic"),
            (admin(C::NotController), false, "create topic"),
            (admin(C::RequestTimedOut), false, "create topic"),
            (admin(C::UnknownTopicOrPartition), false, "create topic"),
            (admin(C::ThrottlingQuotaExceeded), false, "create topic"),
            (
                ConnectError::offset("read positions", KafkaError::MessageConsumption(C::OperationTimedOut)),
                false,
                "read positions",
            ),
            (ConnectError::backend("connect to cluster b", "no cluster id within 10s"), false, "no cluster id"),
            (
                ConnectError::retriable("init transactions", KafkaError::Global(C::CoordinatorNotAvailable)),
                false,
                "init",
            ),
        ];
        assert!(cases.len() >= 30);
        let flow = flow();
        for (failure, permanent, names) in cases {
            let shown = failure.to_string();
            match classify_start(&flow, failure) {
                StartFailure::Permanent(e) => {
                    assert!(permanent, "{shown}: must be retried, not stop the flow ({e})");
                    assert!(e.to_string().contains(names), "{shown}: the error must name {names:?}: {e}");
                }
                StartFailure::Transient(e) => {
                    assert!(!permanent, "{shown}: must stop the flow, not be retried");
                    assert_eq!(e.to_string(), shown, "a transient failure is retried as it is");
                }
            }
        }
    }

    fn admin_creation(why: &str) -> ConnectError {
        ConnectError::backend("create topic", KafkaError::AdminOpCreation(why.into()))
    }
}
