//! The slot's producers on the target and their settings: the record producer of both modes
//! (transactional in exactly-once mode, one per slot; in at-least-once mode one shared by the
//! slots an instance owns) and, in at-least-once mode, each slot's small transactional producer
//! of offset syncs and positions, which fences the slot.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::Producer;
use strait_connect::{ConnectError, ConnectResult};

use super::in_flight::InFlight;
use super::service::{DataProducer, ProduceService};
use crate::admin::LARGEST_BATCH_BYTES;
use crate::client_log::{ClientLog, LoggedConsumer};
use crate::config::{Compression, CopyKind, Flow};
use crate::kafka::{measure_round_trip, round_trip};

/// Producer settings of both modes: idempotence with acks=all keeps per-partition order and no
/// duplicates across retries; CreateTime timestamps are set per record. The codec is the flow's
/// `compression`.
pub const PRODUCER_SETTINGS: &[(&str, &str)] = &[
    ("enable.idempotence", "true"),
    ("acks", "all"),
    ("linger.ms", "5"),
    ("batch.size", BATCH_BYTES),
    // librdkafka's default (1,000,000) is below the broker's (1,048,588); let the target topic's
    // max.message.bytes decide, as for any Kafka client.
    ("message.max.bytes", LARGEST_BATCH_BYTES),
];

/// librdkafka's `batch.size` for records (bytes): a batch holds records of one partition up to it.
pub const BATCH_BYTES: &str = "1000000";

/// librdkafka's `queue.buffering.max.kbytes` of a flow's record producer (8 MiB), split between
/// its slots. It bounds the records held between put and ack, whatever the batch size: a full
/// queue holds the next record back until acks make room.
pub const PRODUCER_QUEUE_KBYTES: usize = 8_192;

/// Added in at-least-once mode.
pub const AT_LEAST_ONCE_SETTINGS: &[(&str, &str)] = &[
    // A batch that fails for good (say, too large for the target) stops the producer instead of
    // letting later batches of the partition through: no gap, no reordering on the target.
    // (Transactions get the same from aborting the batch.)
    ("enable.gapless.guarantee", "true"),
    ("message.timeout.ms", "300000"),
];

/// `transaction.timeout.ms` of the at-least-once state producer, whose transactions hold only a
/// batch's offset syncs and positions.
pub const STATE_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// Added for the at-least-once state producer: its few records are awaited at once, so waiting
/// `linger.ms` for more would only lengthen each commit, when no record is read.
///
/// Its requests are a few small records and the transaction's own (AddPartitionsToTxn, EndTxn),
/// answered in milliseconds by a live broker. One unanswered for 3 s went to a broker that
/// answers nothing (frozen, or cut off with its connection still open), which Kafka fences after
/// `broker.session.timeout.ms` (9 s by default), moving its partitions and coordinators: each
/// request and reconnection to it is given up after 3 s (retried, so nothing is lost) until the
/// client learns where they went. At librdkafka's defaults (`socket.timeout.ms` 60 s,
/// `socket.connection.setup.timeout.ms` 30 s) every partition's saved position waited for the
/// broker to be back (22.4 s of a 20 s freeze in `target_broker_down`; 6.7-13.6 s at 3 s).
/// A broker killed refuses connections at once; librdkafka's reconnect backoff (growing to
/// `reconnect.backoff.max.ms`, 10 s) then delayed finding the coordinator's new node: 18.8 s of
/// stall, 7.1-10.0 s with the backoff capped at 1 s.
pub const STATE_SETTINGS: &[(&str, &str)] = &[
    ("linger.ms", "0"),
    ("socket.timeout.ms", "3000"),
    ("socket.connection.setup.timeout.ms", "3000"),
    ("reconnect.backoff.max.ms", "1000"),
];

/// How long a flush lets librdkafka send lingering records at once (see
/// [`ProduceService::flush`]) before it simply waits for their acks.
pub const COMMIT_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// A producer of `slot` of the flow; transactional (`strait-<source>-><target>/slot-<n>`) when
/// `transaction_timeout` is given, with `init_transactions` done, which fences the slot's previous
/// owner and completes its open transaction. Without, the at-least-once record producer.
/// Errors: the producer cannot be created; transactions the target refuses (a
/// [`ConnectError::Transaction`]), or cannot initialise yet (a [`ConnectError::Retriable`]).
pub async fn producer_service(
    flow: &Flow,
    slot: u32,
    transaction_timeout: Option<Duration>,
    extra: &[(&str, &str)],
) -> ConnectResult<ProduceService<InFlight>> {
    let timeout_ms = transaction_timeout.map(|t| t.as_millis().to_string());
    let transactional_id = flow.transactional_id(slot);
    // The queue is split between the flow's slots (see `Flow::slot_share`).
    let queue_kbytes = flow.slot_share(PRODUCER_QUEUE_KBYTES, 2_048).to_string();
    let transaction = timeout_ms.as_deref().map(|ms| (transactional_id.as_str(), ms));
    let settings = record_settings(flow, &queue_kbytes, transaction, extra);
    let service = ProduceService::new(&flow.target, &settings)
        .map_err(|e| ConnectError::backend(format!("producer for {}", flow.target.alias), e))?;
    if let Some(timeout) = transaction_timeout {
        service.transaction(move |p| p.init_transactions(timeout)).await.map_err(|e| {
            let context = format!("init transactions of {transactional_id} on {}", flow.target.alias);
            // A refusal (say, a timeout above the broker's transaction.max.timeout.ms) will
            // not change by retrying; an unreachable target will.
            match &e {
                KafkaError::Transaction(t) if !t.is_retriable() && t.code() != RDKafkaErrorCode::OperationTimedOut => {
                    ConnectError::transaction(context, e)
                }
                _ => ConnectError::retriable(context, e),
            }
        })?;
        tracing::info!(flow = %flow.name, transactional_id, "transactions initialised; the slot's previous owner is fenced");
    }
    Ok(service)
}

/// At-least-once: `slot`'s state producer of offset syncs and positions, transactional
/// ([`STATE_TRANSACTION_TIMEOUT`], [`STATE_SETTINGS`]), its `init_transactions` done, which fences
/// the slot's previous owner. Errors: as [`producer_service`].
pub async fn state_producer(flow: &Flow, slot: u32) -> ConnectResult<ProduceService<InFlight>> {
    producer_service(flow, slot, Some(STATE_TRANSACTION_TIMEOUT), STATE_SETTINGS).await
}

/// The at-least-once record producers the slots of a flow an instance owns share, each slot a
/// lane of each ([`ProduceService::join`]): one per connection to each target broker
/// (`connections_per_broker`), each partition's records always through the same one.
pub type RecordProducers = Arc<[Arc<DataProducer>]>;

/// The first of a flow's [`RecordProducers`]: idempotent and gap-less, with no
/// `transactional.id` (each slot's state producer fences the slot), and the flow's whole queue
/// (`queue.buffering.max.kbytes` [`PRODUCER_QUEUE_KBYTES`]), which bounds the records an
/// instance holds between put and ack, per producer. Errors: a backend error when the producer
/// cannot be created (invalid settings).
pub fn shared_record_producer(flow: &Flow) -> ConnectResult<Arc<DataProducer>> {
    let queue_kbytes = PRODUCER_QUEUE_KBYTES.to_string();
    ProduceService::<InFlight>::new_producer(&flow.target, &record_settings(flow, &queue_kbytes, None, &[]))
        .map_err(|e| ConnectError::backend(format!("record producer for {}", flow.target.alias), e))
}

/// `first` ([`shared_record_producer`]) and as many more as the target's
/// `connections_per_broker` asks, and the codec they produce with: each `auto` setting resolved
/// from `first`'s [`round_trip`] (the count by [`strait_wire::Connections::per_broker`], the codec
/// by `codec_for`). `first`, made before the codec was known, is replaced when it differs.
/// Errors: as [`measure_round_trip`] when the target does not answer or refuses.
pub async fn record_producers(flow: &Flow, first: Arc<DataProducer>) -> ConnectResult<(RecordProducers, Compression)> {
    let connections = flow.target.connections_per_broker.wire();
    let auto = connections == strait_wire::Connections::Auto || flow.writing.compression == Compression::Auto;
    let round_trip = match auto {
        true => {
            let producer = first.clone();
            Some(measure_round_trip(&flow.target, move || round_trip(producer.client())).await?)
        }
        false => None,
    };
    let per_broker = connections.per_broker(round_trip.unwrap_or_default());
    let codec = codec_for(flow, round_trip);
    let resolved = flow.with_compression(codec);
    let mut producers = vec![first];
    if codec.name() != flow.writing.compression.name() {
        producers.clear();
    }
    while producers.len() < per_broker {
        producers.push(shared_record_producer(&resolved)?);
    }
    let round_trip_ms = round_trip.map(|t| t.as_millis() as u64);
    tracing::info!(flow = %flow.name, producers = per_broker, round_trip_ms, compression = codec.name(), "record producers to the target: one connection per broker each");
    Ok((producers.into(), codec))
}

/// The codec `flow`'s record path produces with, for exactly-once flows (which share no record
/// producer to measure with): `auto` resolved by `codec_for` from the [`round_trip`] of a
/// client of its own. Errors: as [`measure_round_trip`] when the target does not answer or refuses.
pub async fn target_codec(flow: &Flow) -> ConnectResult<Compression> {
    let set = codec_for(flow, None);
    if set != Compression::Auto {
        return Ok(set);
    }
    let client: LoggedConsumer = flow
        .target
        .client_config(&[])
        .create_with_context(ClientLog)
        .map_err(|e| ConnectError::backend(format!("client for cluster {}", flow.target.alias), e))?;
    let rtt = measure_round_trip(&flow.target, move || round_trip(client.client())).await?;
    let codec = codec_for(flow, Some(rtt));
    let round_trip_ms = rtt.as_millis() as u64;
    tracing::info!(flow = %flow.name, round_trip_ms, compression = codec.name(), "the record path's codec to the target");
    Ok(codec)
}

/// `flow`'s `compression` for a target whose quickest answer took `round_trip`
/// ([`Compression::resolve`]); `auto` while not measured. With `copy = "batches"` the record
/// producer only serves metadata: `auto` is `none`, and needs no measure.
fn codec_for(flow: &Flow, round_trip: Option<Duration>) -> Compression {
    match (flow.writing.compression, flow.copy.kind, round_trip) {
        (Compression::Auto, CopyKind::Batches, _) => Compression::None,
        (Compression::Auto, CopyKind::Records, None) => Compression::Auto,
        (codec, _, Some(rtt)) => codec.resolve(rtt),
        (codec, _, None) => codec,
    }
}

/// The settings of a producer of `flow`: transactional with `transaction` (its
/// `transactional.id` and `transaction.timeout.ms`), else at-least-once; then `extra`.
fn record_settings<'a>(
    flow: &Flow,
    queue_kbytes: &'a str,
    transaction: Option<(&'a str, &'a str)>,
    extra: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut settings = PRODUCER_SETTINGS.to_vec();
    settings.push(("queue.buffering.max.kbytes", queue_kbytes));
    settings.push(("compression.type", flow.writing.compression.name()));
    match transaction {
        None => settings.extend_from_slice(AT_LEAST_ONCE_SETTINGS),
        Some((id, ms)) => settings.extend_from_slice(&[
            ("transactional.id", id),
            ("transaction.timeout.ms", ms),
            // librdkafka requires message.timeout.ms <= transaction.timeout.ms.
            ("message.timeout.ms", ms),
        ]),
    }
    settings.extend_from_slice(extra);
    if flow.writing.write_mm2_offsets {
        settings.extend_from_slice(super::mm2_offsets::PRODUCER_SETTINGS);
    }
    settings
}
