//! Transactions of the batch producer (KIP-98), so a batch flow's records, offset syncs and
//! positions become visible together in exactly-once mode.
//!
//! This is the protocol Kafka's Java producer spoke before transactions v2 (KIP-890 part 2):
//! the transaction coordinator found by FindCoordinator, the producer id taken over by
//! InitProducerId (which fences the id's previous producer and completes its open transaction),
//! each partition added with AddPartitionsToTxn before its first batch of a transaction,
//! transactional batches in Produce v11, and EndTxn. Brokers that enable transactions v2 still
//! serve it: the versions a client speaks decide.
//!
//! An aborted transaction leaves the sequences of the batches it failed on unknown, so every
//! abort bumps the producer's epoch (InitProducerId naming the current id and epoch, KIP-360):
//! the coordinator refuses that bump to a producer another one fenced, and sequences restart at
//! 0 under the new epoch.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest,
};
use kafka_protocol::protocol::{Request, StrBytes};
use kafka_protocol::ResponseError;

use crate::cluster::Cluster;
use crate::error::WireError;
use crate::names::by_topic;
use crate::produce::{Producer, INIT_PRODUCER_ID_VERSION};
use crate::retry::doubling;
use crate::retry::MAX_BACKOFF;
use crate::send::Outgoing;
use crate::transactional::Transactions;

/// FindCoordinator v3: one key per request (v4 batches keys).
const FIND_COORDINATOR_VERSION: i16 = 3;
/// AddPartitionsToTxn v3: the last a client sends (v4 on is between brokers).
const ADD_PARTITIONS_VERSION: i16 = 3;
/// EndTxn v3: the last before transactions v2 (v5 ends a transaction with an epoch bump).
const END_TXN_VERSION: i16 = 3;
/// The coordinator type of a transactional id in FindCoordinator.
const TRANSACTION_COORDINATOR: i8 = 1;
/// The first wait before a coordinator call is repeated; `CONCURRENT_TRANSACTIONS` (the last
/// transaction's markers are still being written) usually clears within a few ms.
const COORDINATOR_BACKOFF: Duration = Duration::from_millis(20);

impl Producer {
    /// A transactional producer of `transactional_id` on `cluster`: the coordinator found and
    /// the id's producer id and epoch taken (InitProducerId), which fences the id's previous
    /// producer and completes (aborts) its open transaction before this returns. Its
    /// transactions last at most `transaction_timeout` (the coordinator aborts them after it);
    /// each call is retried while the coordinator is loading or moving, or the previous
    /// transaction's end is still being written, until `delivery_timeout`. Errors: the
    /// coordinator's refusal (`INVALID_TRANSACTION_TIMEOUT` above the broker's
    /// `transaction.max.timeout.ms`, `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`), or the last
    /// retriable error at the deadline.
    pub async fn init_transactional(
        cluster: Cluster,
        transactional_id: &str,
        transaction_timeout: Duration,
        delivery_timeout: Duration,
    ) -> Result<Self, WireError> {
        let mut producer = Self {
            cluster,
            id: -1,
            epoch: -1,
            delivery_timeout,
            sequences: Default::default(),
            lanes: Default::default(),
            transactions: Some(Transactions {
                id: transactional_id.to_string(),
                timeout_ms: i32::try_from(transaction_timeout.as_millis()).unwrap_or(i32::MAX),
                coordinator: None,
                open: false,
                added: HashSet::new(),
            }),
        };
        producer.take_producer_id(false).await?;
        Ok(producer)
    }

    /// Opens a transaction: the batches produced until [`Self::commit`] or [`Self::abort`]
    /// are part of it. Errors: [`WireError::Transaction`] on a producer that is not
    /// transactional, or whose transaction is already open.
    pub fn begin(&mut self) -> Result<(), WireError> {
        let t = self.transactional()?;
        if t.open {
            return Err(t.misuse("a transaction is already open"));
        }
        t.open = true;
        t.added.clear();
        Ok(())
    }

    /// Whether a transaction is open.
    pub fn in_transaction(&self) -> bool {
        self.transactions.as_ref().is_some_and(|t| t.open)
    }

    /// Commits the open transaction (EndTxn; none when nothing was produced in it): its batches
    /// become visible to `read_committed` consumers. Errors: [`WireError::Transaction`] while a
    /// batch sent is not yet appended ([`Self::all_appended`]); fenced ([`WireError::is_fenced`]),
    /// or the coordinator's last error at the deadline; the transaction is then still open, to
    /// abort.
    pub async fn commit(&mut self) -> Result<(), WireError> {
        if !self.lanes.is_empty() {
            return Err(self.transactional()?.misuse("a commit before every batch sent is appended"));
        }
        self.end(true).await
    }

    /// Aborts the open transaction (EndTxn, when anything was produced in it), then bumps the
    /// producer's epoch (KIP-360) so sequences restart at 0: a batch that failed in it may or
    /// may not have been appended. Errors: fenced ([`WireError::is_fenced`]: another producer
    /// took the id over, or the coordinator aborted the transaction after its timeout), or the
    /// coordinator's last error at the deadline.
    pub async fn abort(&mut self) -> Result<(), WireError> {
        let open = self.transactional()?.open;
        if open {
            self.end(false).await?;
        }
        self.take_producer_id(true).await
    }

    /// Takes the transactional id over anew, as [`Self::init_transactional`] did: for a producer
    /// whose transaction the coordinator aborted after its timeout, which fenced its epoch. It
    /// fences any other producer of the id. Errors: as [`Self::init_transactional`].
    pub async fn renew(&mut self) -> Result<(), WireError> {
        self.transactional()?.open = false;
        self.take_producer_id(false).await
    }

    /// Adds to the open transaction the partitions of `batches` not yet in it. Errors:
    /// [`WireError::Transaction`] with no transaction open; the coordinator's refusal (fenced,
    /// not authorized) or its last error at the deadline.
    pub(crate) async fn add_partitions(&mut self, batches: &[Outgoing]) -> Result<(), WireError> {
        let t = self.transactional()?;
        if !t.open {
            return Err(t.misuse("a produce outside a transaction"));
        }
        let mut new: Vec<(&str, i32)> = Vec::new();
        for out in batches {
            let key = (out.topic.clone(), out.partition);
            if !t.added.contains(&key) && !new.contains(&(out.topic.as_str(), out.partition)) {
                new.push((out.topic.as_str(), out.partition));
            }
        }
        if new.is_empty() {
            return Ok(());
        }
        let topics = by_topic(new.iter().copied())
            .into_iter()
            .map(|(name, partitions)| AddPartitionsToTxnTopic::default().with_name(name).with_partitions(partitions))
            .collect();
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(t.request_id())
            .with_v3_and_below_producer_id(self.id.into())
            .with_v3_and_below_producer_epoch(self.epoch)
            .with_v3_and_below_topics(topics);
        self.coordinator_request(&request, ADD_PARTITIONS_VERSION, "AddPartitionsToTxn", partitions_error).await?;
        let t = self.transactional()?;
        t.added.extend(new.into_iter().map(|(topic, p)| (topic.to_string(), p)));
        Ok(())
    }

    /// Ends the open transaction, committing or aborting it (EndTxn when it holds anything).
    async fn end(&mut self, committed: bool) -> Result<(), WireError> {
        let t = self.transactional()?;
        if !t.open {
            return Err(t.misuse("no transaction is open"));
        }
        if !t.added.is_empty() {
            let request = EndTxnRequest::default()
                .with_transactional_id(t.request_id())
                .with_producer_id(self.id.into())
                .with_producer_epoch(self.epoch)
                .with_committed(committed);
            self.coordinator_request(&request, END_TXN_VERSION, "EndTxn", |a| a.error_code).await?;
        }
        let t = self.transactional()?;
        t.open = false;
        t.added.clear();
        Ok(())
    }

    /// InitProducerId for the transactional id: a new epoch (or producer id), sequences from 0.
    /// `bump`: name the current id and epoch (KIP-360), which the coordinator refuses with
    /// `PRODUCER_FENCED` once another producer took the id over; else take it over.
    async fn take_producer_id(&mut self, bump: bool) -> Result<(), WireError> {
        let (id, epoch) = if bump { (self.id, self.epoch) } else { (-1, -1) };
        let t = self.transactional()?;
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(t.request_id()))
            .with_transaction_timeout_ms(t.timeout_ms)
            .with_producer_id(id.into())
            .with_producer_epoch(epoch);
        let answer =
            self.coordinator_request(&request, INIT_PRODUCER_ID_VERSION, "InitProducerId", |a| a.error_code).await?;
        (self.id, self.epoch) = (answer.producer_id.0, answer.producer_epoch);
        self.sequences.clear();
        self.lanes.clear();
        Ok(())
    }

    /// The transaction state. Errors: [`WireError::Transaction`] on an idempotent producer.
    fn transactional(&mut self) -> Result<&mut Transactions, WireError> {
        self.transactions.as_mut().ok_or_else(|| WireError::Transaction {
            transactional_id: String::new(),
            message: "the producer is not transactional".into(),
        })
    }

    /// Sends `request` to the transaction coordinator and returns its answer once
    /// `error_of` finds no error in it. The coordinator is found again when it moved or is not
    /// reachable; a call the coordinator cannot take yet (loading, the last transaction still
    /// ending: `CONCURRENT_TRANSACTIONS`) or a retriable error is repeated with a doubling
    /// backoff until the delivery timeout. Errors: the coordinator's refusal, or the last error
    /// at the deadline.
    async fn coordinator_request<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        api: &'static str,
        error_of: impl Fn(&R::Response) -> i16,
    ) -> Result<R::Response, WireError> {
        let deadline = Instant::now() + self.delivery_timeout;
        let mut waits = doubling(COORDINATOR_BACKOFF, MAX_BACKOFF);
        loop {
            let failure = match self.coordinator_call(request, version, api, &error_of).await {
                Ok(answer) => return Ok(answer),
                Err(e) => e,
            };
            let moved = matches!(
                failure.broker_error(),
                Some(ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable)
            ) || matches!(failure, WireError::Io { .. } | WireError::Timeout { .. });
            let wait = waits.next().unwrap_or(MAX_BACKOFF);
            if !failure.is_coordinator_retriable() || Instant::now() + wait > deadline {
                return Err(failure);
            }
            if moved {
                self.transactional()?.coordinator = None;
                // A failed refresh leaves the old brokers: the next round fails or finds them.
                self.cluster.refresh(&[]).await.ok();
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// One attempt of [`Self::coordinator_request`], the coordinator found first when not known.
    async fn coordinator_call<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        api: &'static str,
        error_of: &impl Fn(&R::Response) -> i16,
    ) -> Result<R::Response, WireError> {
        let coordinator = match self.transactional()?.coordinator {
            Some(broker) => broker,
            None => self.find_coordinator().await?,
        };
        let conn = self.cluster.connection(coordinator).await?;
        let answer = conn.call(request, version).await?;
        let transactional_id = &self.transactional()?.id;
        conn.check(error_of(&answer), &format!("{api} of transactional id {transactional_id}"))?;
        Ok(answer)
    }

    /// Asks a broker for the transaction coordinator of the id (FindCoordinator) and keeps it.
    async fn find_coordinator(&mut self) -> Result<i32, WireError> {
        let t = self.transactional()?;
        let request = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_string(t.id.clone()))
            .with_key_type(TRANSACTION_COORDINATOR);
        let mut failure = None;
        for broker in self.cluster.broker_ids() {
            let Some(conn) = self.cluster.connection_or_failure(broker, &mut failure).await else { continue };
            let answer = match conn.call(&request, FIND_COORDINATOR_VERSION).await {
                Ok(answer) => answer,
                Err(e) => {
                    failure.get_or_insert(e);
                    continue;
                }
            };
            conn.check(answer.error_code, "FindCoordinator")?;
            let coordinator = answer.node_id.0;
            if !self.cluster.broker_ids().contains(&coordinator) {
                // A broker newer than the metadata.
                self.cluster.refresh(&[]).await?;
            }
            self.transactional()?.coordinator = Some(coordinator);
            return Ok(coordinator);
        }
        Err(failure.unwrap_or(WireError::NoBroker))
    }
}

/// The error of an AddPartitionsToTxn v3 answer: the first partition's own error, before the
/// `OPERATION_NOT_ATTEMPTED` of the partitions the broker left alone because of it.
fn partitions_error(answer: &AddPartitionsToTxnResponse) -> i16 {
    let codes = answer.results_by_topic_v3_and_below.iter().flat_map(|t| t.results_by_partition.iter());
    let mut not_attempted = 0;
    for p in codes {
        match ResponseError::try_from_code(p.partition_error_code) {
            None => {}
            Some(ResponseError::OperationNotAttempted) => not_attempted = p.partition_error_code,
            Some(_) => return p.partition_error_code,
        }
    }
    not_attempted
}
