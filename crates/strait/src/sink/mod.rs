//! TargetSink: where a source record is gated, renamed, loop-guarded and produced to the target,
//! and where produce acks become offset syncs.

pub mod gate;
pub mod loop_guard;
pub mod service;
pub mod syncs;
pub mod topics;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rdkafka::error::KafkaError;
use rdkafka::message::{Header as KafkaHeader, OwnedHeaders};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, FutureProducer};
use strait_connect::{ConnectError, ConnectRecord, ConnectResult, Sink};
use strait_mm2::OffsetSync;

use crate::admin::Admin;
use crate::config::{ClusterConfig, Flow};
use crate::kafka::{blocking, client_config};
use crate::source::ReplicatedRecord;
use loop_guard::{LoopGuard, PROVENANCE_HEADER};
use service::ProduceService;
use syncs::OffsetSyncWriter;
use topics::TopicRouter;

/// Producer settings Strait relies on: idempotence with acks=all keeps per-partition order and
/// no duplicates across retries; CreateTime timestamps are set per record.
const PRODUCER_SETTINGS: &[(&str, &str)] = &[
    ("enable.idempotence", "true"),
    // A batch that fails for good (say, too large for the target) stops the producer instead of
    // letting later batches of the partition through: no gap, no reordering on the target.
    ("enable.gapless.guarantee", "true"),
    ("acks", "all"),
    ("linger.ms", "5"),
    ("batch.size", "1000000"),
    ("compression.type", "none"),
    ("message.timeout.ms", "300000"),
    ("queue.buffering.max.kbytes", "32768"),
    // librdkafka's default (1,000,000) is below the broker's (1,048,588); let the target topic's
    // max.message.bytes decide, as for any Kafka client.
    ("message.max.bytes", "104857600"),
];

/// What the sink remembers of a produced record until its ack.
struct InFlight {
    /// Source topic.
    topic: Arc<str>,
    partition: i32,
    upstream: i64,
    /// Key + value + header bytes, for error messages.
    bytes: usize,
}

/// The [`Sink`] of a flow: writes [`ReplicatedRecord`]s to the target cluster.
pub struct TargetSink {
    flow: Arc<Flow>,
    service: ProduceService<InFlight>,
    router: TopicRouter,
    guard: LoopGuard,
    syncs: OffsetSyncWriter,
    loop_drops: u64,
}

/// The Kafka cluster id of `cluster`, waiting up to 10 s. Errors: a backend error when the
/// cluster does not answer.
async fn cluster_id(cluster: &ClusterConfig) -> ConnectResult<String> {
    let client: BaseConsumer =
        client_config(cluster, &[]).create().map_err(|e| ConnectError::backend(format!("client for {}", cluster.alias), e))?;
    blocking(move || client.client().fetch_cluster_id(Duration::from_secs(10))).await.ok_or_else(|| {
        ConnectError::backend(format!("connect to {} ({})", cluster.alias, cluster.bootstrap_servers), "no cluster id within 10 s")
    })
}

impl TargetSink {
    /// Connects an idempotent producer (acks=all) to the target, learns both cluster ids and
    /// ensures the offset-syncs topic (one partition, compacted) where the flow puts it.
    /// Errors: a backend error if a cluster cannot be reached or the topic cannot be created.
    pub async fn start(flow: Arc<Flow>) -> ConnectResult<Self> {
        let target_id = cluster_id(&flow.target).await?;
        let source_id = cluster_id(&flow.source).await?;
        let service = ProduceService::new(&flow.target, PRODUCER_SETTINGS)
            .map_err(|e| ConnectError::backend(format!("producer for {}", flow.target.alias), e))?;
        let (syncs_cluster, syncs_topic) = flow.offset_syncs();
        let syncs_producer: FutureProducer = client_config(syncs_cluster, &[("enable.idempotence", "true"), ("acks", "all"), ("linger.ms", "5")])
            .create()
            .map_err(|e| ConnectError::backend(format!("offset-syncs producer for {}", syncs_cluster.alias), e))?;
        Admin::new(syncs_cluster)
            .map_err(|e| ConnectError::backend("admin client", e))?
            .create_topic(&syncs_topic, 1, flow.settings.replication_factor, &[("cleanup.policy".into(), "compact".into())])
            .await
            .map_err(|e| ConnectError::backend(format!("create {syncs_topic} on {}", syncs_cluster.alias), e))?;
        Ok(Self {
            router: TopicRouter::new(flow.clone())?,
            guard: LoopGuard::new(source_id, target_id),
            syncs: OffsetSyncWriter::new(syncs_producer, syncs_topic, flow.settings.offset_lag_max),
            flow,
            service,
            loop_drops: 0,
        })
    }

    /// Returns and clears the offset syncs written since the last call (for checkpointing).
    pub fn drain_offset_syncs(&mut self) -> Vec<OffsetSync> {
        self.syncs.drain()
    }
}

fn produce_error(flow: &Flow, (r, e): (InFlight, KafkaError)) -> ConnectError {
    let (topic, partition, offset, bytes) = (r.topic, r.partition, r.upstream, r.bytes);
    ConnectError::backend(
        format!(
            "flow {} topic {topic} partition {partition} offset {offset}: record of {bytes} bytes could not be produced to {}",
            flow.name, flow.target.alias
        ),
        e,
    )
}

#[async_trait]
impl Sink<(), ReplicatedRecord> for TargetSink {
    async fn put(&mut self, batch: Vec<ConnectRecord<(), ReplicatedRecord>>) -> ConnectResult<()> {
        let syncs = &mut self.syncs;
        let mut on_ack = |r: InFlight, downstream: i64| syncs.acked(&r.topic, r.partition, r.upstream, downstream);
        for mut record in batch {
            let Some(r) = record.value.take() else { continue };
            let Some(provenance) = self.guard.pass(&mut record.headers) else {
                self.loop_drops += 1;
                continue;
            };
            let Some(target) = self.router.route(&r.topic, r.partition, self.service.producer()).await? else { continue };
            let mut headers = OwnedHeaders::new_with_capacity(record.headers.len() + 1);
            for h in &record.headers {
                headers = headers.insert(KafkaHeader { key: &h.key, value: h.value.as_deref() });
            }
            headers = headers.insert(KafkaHeader { key: PROVENANCE_HEADER, value: Some(&*provenance) });
            let mut out = BaseRecord::<[u8], [u8], usize>::with_opaque_to(&target, 0).partition(r.partition).headers(headers);
            if let Some(k) = &r.key {
                out = out.key(k);
            }
            if let Some(v) = &r.value {
                out = out.payload(v);
            }
            if let Some(ts) = record.timestamp_ms {
                out = out.timestamp(ts);
            }
            let meta = InFlight { topic: r.topic.clone(), partition: r.partition, upstream: r.offset, bytes: record.size_bytes };
            self.service.send(out, meta, &mut on_ack).await.map_err(|f| produce_error(&self.flow, f))?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> ConnectResult<()> {
        let syncs = &mut self.syncs;
        let mut on_ack = |r: InFlight, downstream: i64| syncs.acked(&r.topic, r.partition, r.upstream, downstream);
        self.service.wait_acks(0, &mut on_ack).await.map_err(|f| produce_error(&self.flow, f))?;
        self.syncs.flush().await
    }

    async fn close(&mut self) -> ConnectResult<()> {
        let result = self.flush().await;
        for (topic, dropped) in self.router.residency_drops() {
            tracing::info!(flow = %self.flow.name, topic, dropped, "records withheld by residency");
        }
        if self.loop_drops > 0 {
            tracing::info!(flow = %self.flow.name, dropped = self.loop_drops, "records dropped by the loop guard");
        }
        result
    }
}
