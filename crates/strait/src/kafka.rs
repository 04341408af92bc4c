//! Shared Kafka client plumbing: client configs per cluster, and retrying with backoff.

use std::future::Future;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};

use crate::config::ClusterConfig;

/// librdkafka config for a cluster: bootstrap servers, then `base` settings, then the cluster's
/// own `client` overrides (which win, so an operator can tune anything).
pub fn client_config(cluster: &ClusterConfig, base: &[(&str, &str)]) -> ClientConfig {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", &cluster.bootstrap_servers);
    cfg.set("client.id", format!("strait-{}", cluster.alias));
    for (k, v) in base {
        cfg.set(*k, *v);
    }
    for (k, v) in &cluster.client {
        cfg.set(k, v);
    }
    cfg
}

/// First and longest wait between attempts of [`retry`].
const BACKOFF_MIN: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(10);

/// Runs `op` until it succeeds, doubling the wait between attempts (250 ms up to 10 s) and
/// logging each failure as a warning with `what`. For calls that must eventually succeed, such as
/// reaching a cluster at start-up; it never gives up, so the caller bounds it with shutdown.
pub async fn retry<T, F, Fut>(what: &str, mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, KafkaError>>,
{
    let mut wait = BACKOFF_MIN;
    let mut attempt = 1u32;
    loop {
        match op().await {
            Ok(v) => return v,
            Err(e) => {
                tracing::warn!(attempt, retry_in_ms = wait.as_millis() as u64, error = %e, "{what} failed; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(BACKOFF_MAX);
                attempt += 1;
            }
        }
    }
}

/// Runs blocking librdkafka calls (metadata, watermarks) off the async workers.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(f).await {
        Ok(v) => v,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// Queues `record` on `producer`, sleeping briefly while librdkafka's queue is full, and returns
/// its ack future. For small control records (positions, offset syncs); the data path applies its
/// own backpressure. Errors: the produce error for anything but a full queue.
pub async fn enqueue(producer: &FutureProducer, mut record: FutureRecord<'_, [u8], [u8]>) -> Result<DeliveryFuture, KafkaError> {
    loop {
        match producer.send_result(record) {
            Ok(ack) => return Ok(ack),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// Awaits an ack from [`enqueue`]; the downstream offset on success.
pub async fn acked(ack: DeliveryFuture) -> Result<i64, KafkaError> {
    match ack.await {
        Ok(Ok(d)) => Ok(d.offset),
        Ok(Err((e, _))) => Err(e),
        Err(_) => Err(KafkaError::Canceled),
    }
}
