//! The loop guard of whole batches (issue 45): a batch cannot take a provenance header without
//! being written anew, but it carries the producer id the target cluster gave the flow that
//! wrote it. Every batch flow registers each producer id it obtains, before that id's first
//! batch, in [`PRODUCER_IDS_TOPIC`] on its target, with the ids of the clusters whose data the
//! producer writes (its origins, as the record path's provenance header lists them). A batch flow
//! reading a batch looks its producer id up in its source's registry and drops the batch when its
//! origins include the flow's target cluster: it came from there. Under every replication
//! policy: the default policy's names stop cycles only where every deployment calls each cluster
//! by the same alias, and heartbeats topics, which every flow copies, would otherwise pass back
//! and forth between deployments that do not, a prefix longer each time.
//!
//! Why a registry lookup can be trusted: a registration is acknowledged (`acks=all`) before any
//! batch with its id exists, so a reader that does not know an id re-reads the registry to its end
//! after it fetched the batch, and an id still missing then is no flow's: a producer of the
//! source's own applications. Kafka never gives a producer id twice within a cluster (the
//! controller hands out blocks of a counter kept in its metadata log, KIP-730): an epoch bump
//! (KIP-360) keeps the id, and a producer whose id expired (`producer.id.expiration.ms`,
//! `transactional.id.expiration.ms`) or whose epoch ran out gets a new id, which its flow
//! registers before its next batch. So an id, once known, means the same forever: both answers
//! are cached.
//!
//! A record flow's producer ids are not registered (librdkafka does not give them): an unknown
//! id whose first batch carries the provenance header is a record flow's, judged as its source's.
//!
//! A chain or ring of batch flows (A→B→C→A) passes batches on: B→C writes the batches A→B
//! wrote on B with a producer of their own, registered with origins A and B, and its source's
//! own batches with another, registered with B alone (`super::lanes`), so C→A drops the first
//! and copies the second.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use strait_connect::{ConnectError, ConnectResult};
use strait_wire::{Batch, Outgoing, Producer};

use super::batches::{now_ms, DELIVERY_TIMEOUT};
use super::loop_guard::PROVENANCE_HEADER;
use super::state::{TRANSACTION_RETRY_MAX, TRANSACTION_RETRY_MIN};
use crate::config::Flow;
use crate::kafka::{blocking, connect_error, ends_read, wire_error, StateReader};
use crate::retry::doubling;

/// The registry of Strait's batch producers on each cluster: compacted, one partition, keyed by
/// producer id (decimal), valued by a [`Registration`] as JSON.
pub const PRODUCER_IDS_TOPIC: &str = "strait-producer-ids.internal";

/// Keys of the registry that are copy-kind marks (`super::copy_marks`), not producer ids.
pub const FLOW_MARK_PREFIX: &str = "flow:";

/// Natives remembered at most; past it they are forgotten (and asked again), as applications
/// that start a producer per task would otherwise grow the set without end.
const NATIVES_MAX: usize = 100_000;

/// What a registered producer id writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    /// The flow that obtained the id (`<source>-><target>`), for errors and operators.
    pub flow: String,
    /// Ids of the clusters whose data its batches carry (Kafka cluster ids, as the record path's
    /// provenance header), oldest first.
    pub origins: Vec<String>,
}

/// Registers the producer ids of a flow's batch producers on its target, through a small
/// idempotent producer of its own (its registrations are acknowledged whatever the batch
/// producers' transaction does).
pub struct Registrar {
    producer: Producer,
    /// The ids registered so far: each batch producer's, renewed ones too.
    registered: HashSet<i64>,
}

impl Registrar {
    /// A registrar on `producer`'s cluster.
    pub fn new(producer: Producer) -> Self {
        Self { producer, registered: HashSet::new() }
    }

    /// Registers `producer_id`, whose batches carry the data of the clusters `origins` (ids,
    /// oldest first), unless it is registered already, and waits for the ack: call before every
    /// send, as a renewed producer may carry a new id. Errors: the registration was not written,
    /// as the batch producer's errors (`crate::kafka::wire_error`).
    pub async fn ensure(&mut self, flow: &Flow, producer_id: i64, origins: &[String]) -> ConnectResult<()> {
        if self.registered.contains(&producer_id) {
            return Ok(());
        }
        let key = producer_id.to_string().into_bytes();
        let registration = Registration { flow: flow.name.clone(), origins: origins.to_vec() };
        let value = serde_json::to_vec(&registration).expect("a registration serializes");
        let context = || format!("flow {}: register producer id {producer_id} in {PRODUCER_IDS_TOPIC}", flow.name);
        let batch = Batch::of_records(&[(Some(&key[..]), Some(&value[..]))], now_ms())
            .map_err(|e| ConnectError::backend(context(), e))?;
        let out = Outgoing { topic: PRODUCER_IDS_TOPIC.to_string(), partition: 0, batch };
        self.producer.produce(&[out]).await.map_err(|e| wire_error(context(), e))?;
        tracing::info!(flow = %flow.name, producer_id, origins = origins.join(","), "batch producer id registered on the target");
        self.registered.insert(producer_id);
        Ok(())
    }
}

/// What a flow does with a fetched batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Copy it: an application's batch (`None`), or a flow's that carries the data of the
    /// clusters given (ids, oldest first), none of them the target.
    Copy(Option<Arc<[String]>>),
    /// Drop it: its producer writes data that came from the target cluster.
    Echo,
}

/// The verdict on a batch whose producer carries the data of the clusters `origins`, for a
/// flow into the cluster with id `target_id`.
fn judge(origins: &Arc<[String]>, target_id: &str) -> Verdict {
    match origins.iter().any(|o| o == target_id) {
        true => Verdict::Echo,
        false => Verdict::Copy(Some(origins.clone())),
    }
}

/// The source cluster id of an unregistered producer that is a record flow's: its records carry
/// the provenance header, whose last cluster id is that flow's source, which all its records
/// come from. `None` for an application's producer. Its first batch tells, so it is opened once
/// per producer id. Errors: the batch's records do not decode.
fn record_flow_source(flow: &Flow, batch: &Batch) -> ConnectResult<Option<String>> {
    let header = batch.first_header(PROVENANCE_HEADER).map_err(|e| {
        ConnectError::backend(format!("flow {}: open the batch at offset {}", flow.name, batch.base_offset()), e)
    })?;
    Ok(header.and_then(|h| String::from_utf8_lossy(&h).rsplit(',').next().map(str::to_string)))
}

/// A batch flow's view of its source's registry.
pub struct EchoGuard {
    target_id: String,
    reader: Arc<StateReader>,
    /// The next registry offset to read (`None`: from its start).
    next: Option<i64>,
    /// Each registered id's origins.
    known: HashMap<i64, Arc<[String]>>,
    /// Ids missing from the registry read after their batch was fetched.
    natives: HashSet<i64>,
}

impl EchoGuard {
    /// Reads `flow`'s source registry from its start. Errors: the source cannot be read.
    pub async fn start(flow: &Flow, target_id: String) -> ConnectResult<Self> {
        let reader = StateReader::new(&flow.source, "strait-producer-ids-reader")
            .map_err(|e| ConnectError::backend(format!("read {PRODUCER_IDS_TOPIC} on {}", flow.source.alias), e))?;
        let mut guard =
            Self { target_id, reader: Arc::new(reader), next: None, known: HashMap::new(), natives: HashSet::new() };
        guard.reread(flow).await?;
        Ok(guard)
    }

    /// The verdict on `batch`, fetched before this call. `reread`: whether the registry was read
    /// again since the batch was fetched (set when it is: one read after a put's batches were
    /// fetched answers for all of them). Errors: the registry cannot be read, or holds a value
    /// that is not a registration.
    pub async fn verdict(&mut self, flow: &Flow, batch: &Batch, reread: &mut bool) -> ConnectResult<Verdict> {
        let id = batch.producer_id();
        if id < 0 || self.natives.contains(&id) {
            return Ok(Verdict::Copy(None));
        }
        if !self.known.contains_key(&id) && !std::mem::replace(reread, true) {
            self.reread(flow).await?;
        }
        let Some(origins) = self.known.get(&id) else {
            // A record flow's producer from the target writes nothing but echoes; one from
            // elsewhere is taken as the source's own, as before its header was read: its records
            // keep their header for record flows further on.
            if record_flow_source(flow, batch)?.is_some_and(|s| s == self.target_id) {
                self.known.insert(id, vec![self.target_id.clone()].into());
                return Ok(Verdict::Echo);
            }
            if self.natives.len() >= NATIVES_MAX {
                self.natives.clear();
            }
            self.natives.insert(id);
            return Ok(Verdict::Copy(None));
        };
        Ok(judge(origins, &self.target_id))
    }

    /// Reads the registry on from where the last read ended. A read that fails while the source
    /// cannot answer it (the registry's leader down or moving, this instance paused) is asked
    /// again, 0.2 s doubling to 5 s, for as long as a batch is retried ([`DELIVERY_TIMEOUT`]): the
    /// batches waiting on it cannot be judged without it. Errors: refused credentials or ACLs at
    /// once; otherwise the last failure once that time is up; a value that is not a registration.
    async fn reread(&mut self, flow: &Flow) -> ConnectResult<()> {
        let context = || format!("read {PRODUCER_IDS_TOPIC} on {}", flow.source.alias);
        let (mut waits, started) = (doubling(TRANSACTION_RETRY_MIN, TRANSACTION_RETRY_MAX), Instant::now());
        let (records, next) = loop {
            let (reader, next) = (self.reader.clone(), self.next);
            let e = match blocking(move || reader.read_new_records(PRODUCER_IDS_TOPIC, next)).await {
                Ok(read) => break read,
                Err(e) if ends_read(&e) => return Err(connect_error(context(), e)),
                Err(e) => e,
            };
            let wait = waits.next().unwrap_or(TRANSACTION_RETRY_MAX);
            if started.elapsed() + wait > DELIVERY_TIMEOUT {
                return Err(ConnectError::offset(context(), e));
            }
            tracing::warn!(flow = %flow.name, error = %e, retry_in_ms = wait.as_millis() as u64, "{}: the batches of unknown producers wait for it; retrying", context());
            tokio::time::sleep(wait).await;
        };
        for (offset, key, value) in records.into_iter().filter(|(_, k, _)| !k.starts_with(FLOW_MARK_PREFIX.as_bytes()))
        {
            let bad = || {
                ConnectError::offset(
                    format!("{PRODUCER_IDS_TOPIC} on {} offset {offset}", flow.source.alias),
                    "not a producer id registration",
                )
            };
            let id: i64 = std::str::from_utf8(&key).ok().and_then(|k| k.parse().ok()).ok_or_else(bad)?;
            let registration: Registration = serde_json::from_slice(&value).map_err(|_| bad())?;
            self.known.insert(id, registration.origins.into());
        }
        self.next = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{judge, Registration, Verdict};

    fn by(origins: &[&str]) -> Registration {
        Registration { flow: "a->b".into(), origins: origins.iter().map(|o| o.to_string()).collect() }
    }

    #[test]
    fn a_batch_from_the_target_is_an_echo_and_one_relayed_from_a_third_cluster_is_passed_on() {
        let origins = |o: &[&str]| -> Arc<[String]> { o.iter().map(|o| o.to_string()).collect() };
        // B→A reads what A→B wrote on B: its origins hold A.
        assert_eq!(judge(&origins(&["A"]), "A"), Verdict::Echo);
        assert_eq!(judge(&origins(&["C", "A"]), "A"), Verdict::Echo);
        // B→C reads what A→B wrote on B: A's data, which it passes on with a producer of their own.
        assert_eq!(judge(&origins(&["A"]), "C"), Verdict::Copy(Some(origins(&["A"]))));
    }

    #[test]
    fn a_registration_is_json_naming_the_flow_and_its_origins() {
        let json = serde_json::to_string(&by(&["x1"])).unwrap();
        assert_eq!(json, r#"{"flow":"a->b","origins":["x1"]}"#);
        assert_eq!(serde_json::from_str::<Registration>(&json).unwrap(), by(&["x1"]));
    }
}
