//! How a failed write becomes a [`ConnectError`]: fenced (another instance owns the slot),
//! retriable (exactly-once replays the batch) or final (the flow stops naming the record).

use std::time::{Duration, Instant};

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use strait_connect::ConnectError;

use super::in_flight::{describe, InFlight};
use super::producers::BATCH_BYTES;
use crate::config::Flow;

/// Errors that a later attempt may not meet: the broker or the network was briefly unavailable,
/// or leadership moved. In exactly-once mode the batch is aborted and replayed on these; any
/// other error (record too large, invalid record, authorization...) stops the flow naming the
/// record, rather than replaying a batch that can never succeed.
const TRANSIENT: &[RDKafkaErrorCode] = &[
    RDKafkaErrorCode::BrokerTransportFailure,
    RDKafkaErrorCode::MessageTimedOut,
    RDKafkaErrorCode::AllBrokersDown,
    RDKafkaErrorCode::OperationTimedOut,
    RDKafkaErrorCode::TimedOutQueue,
    RDKafkaErrorCode::PurgeQueue,
    RDKafkaErrorCode::PurgeInflight,
    RDKafkaErrorCode::Retry,
    RDKafkaErrorCode::WaitingForCoordinator,
    RDKafkaErrorCode::LeaderNotAvailable,
    RDKafkaErrorCode::NotLeaderForPartition,
    RDKafkaErrorCode::RequestTimedOut,
    RDKafkaErrorCode::NetworkException,
    RDKafkaErrorCode::CoordinatorLoadInProgress,
    RDKafkaErrorCode::CoordinatorNotAvailable,
    RDKafkaErrorCode::NotCoordinator,
    RDKafkaErrorCode::NotEnoughReplicas,
    RDKafkaErrorCode::NotEnoughReplicasAfterAppend,
    RDKafkaErrorCode::ConcurrentTransactions,
    RDKafkaErrorCode::KafkaStorageError,
    RDKafkaErrorCode::FencedLeaderEpoch,
    RDKafkaErrorCode::UnknownLeaderEpoch,
];

/// What the delivery mode changes in how a write error is classified.
#[derive(Debug, Clone, Copy)]
pub enum Retry {
    /// At-least-once: librdkafka already retried until `message.timeout.ms`; every error is final.
    Never,
    /// Exactly-once: a transient error aborts and replays the batch. `began`: when the open (or
    /// last) transaction began; `timeout`: `transaction_timeout_ms`.
    Replay { began: Option<Instant>, timeout: Duration },
}

impl Retry {
    /// Whether the transaction is older than its timeout now, so the target aborts it on its
    /// own (bumping the producer's epoch). Read when an error is classified, not when the call
    /// that failed began: a call to an unreachable target can wait the whole timeout out.
    pub fn outlived(&self) -> bool {
        matches!(self, Retry::Replay { began: Some(began), timeout } if began.elapsed() >= *timeout)
    }
}

/// Whether a producer's fatal error says another producer of its `transactional.id` fenced it.
pub fn is_fenced(code: RDKafkaErrorCode) -> bool {
    matches!(code, RDKafkaErrorCode::Fenced | RDKafkaErrorCode::ProducerFenced | RDKafkaErrorCode::InvalidProducerEpoch)
}

/// The error of a slot whose transactional producer was fenced.
pub fn fenced(flow: &Flow, slot: u32, reason: String) -> ConnectError {
    ConnectError::fenced(
        format!(
            "flow {} slot {slot}: another instance took it over (transactional.id {}), or its transaction \
             outlived transaction_timeout_ms and was aborted by the target",
            flow.name,
            flow.transactional_id(slot)
        ),
        reason,
    )
}

/// A [`ConnectError`] for a failed write of `slot` described by `context`, given the producer's
/// fatal error if it has one: a producer failed by a transaction that outlived its timeout is
/// retriable (a new producer replays it); a fenced producer stops the flow saying so; a [`TRANSIENT`] error
/// is retriable with [`Retry::Replay`] (exactly-once, whose batch is aborted and replayed, and the
/// at-least-once state transaction, written again); anything else, and every error with
/// [`Retry::Never`] (at-least-once records), stops the flow naming the record.
pub fn write_failure(
    flow: &Flow,
    slot: u32,
    fatal: Option<(RDKafkaErrorCode, String)>,
    retry: Retry,
    context: String,
    e: KafkaError,
) -> ConnectError {
    if let Some((code, reason)) = fatal {
        if retry.outlived() {
            // The target aborted our own transaction (it stayed open past the timeout while
            // the target was unreachable), which bumps the producer epoch: the producer's next
            // call is fenced, or refused as INVALID_TXN_STATE when it was an abort. A new
            // producer takes over and the batch is replayed. Another instance can only fence a
            // transaction younger than the timeout: that case stops below.
            return ConnectError::retriable(
                format!("{context}: the target aborted the transaction after transaction_timeout_ms"),
                reason,
            );
        }
        if is_fenced(code) {
            // Not the record's fault: the whole producer is out.
            return fenced(flow, slot, reason);
        }
        return ConnectError::backend(format!("{context}: the producer failed for good"), reason);
    }
    let transient = match &e {
        KafkaError::Transaction(t) => t.is_retriable() || t.txn_requires_abort(),
        _ => e.rdkafka_error_code().is_some_and(|c| TRANSIENT.contains(&c)),
    };
    match retry {
        Retry::Replay { .. } if transient => ConnectError::retriable(context, e),
        _ => ConnectError::backend(context, e),
    }
}

/// The context of an error for `what`, which could not be written: [`describe`], and for a
/// refused record, what librdkafka's batching means for finding the one at fault.
pub fn produce_context(flow: &Flow, syncs_topic: &str, what: InFlight, e: &KafkaError) -> String {
    let record = matches!(what, InFlight::Record { .. });
    let mut context = describe(flow, syncs_topic, what);
    if record && e.rdkafka_error_code().is_some_and(|c| !TRANSIENT.contains(&c)) {
        // librdkafka gives every record of a refused batch the batch's error.
        context.push_str(" (the first record of the batch the target refused; the one at fault may be a later one)");
    }
    if e.rdkafka_error_code() == Some(RDKafkaErrorCode::MessageSizeTooLarge) {
        // The broker checks whole batches, and librdkafka does not split a refused one (the
        // Java producer does): a small record can be refused with the records around it.
        let batch_size = flow.target.client.get("batch.size").map_or(BATCH_BYTES, String::as_str);
        context.push_str(&format!(
            " (the target refused its batch, up to batch.size = {batch_size} bytes of records, as over the \
             topic's max.message.bytes: raise that limit, or if the record itself is under it, set batch.size \
             below it in the target cluster's client settings)"
        ));
    }
    context
}
