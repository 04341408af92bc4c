//! The source consumers the slots of a flow an instance owns share: one, or across a long link
//! several (the source's `connections_per_broker`, issue 43), each with connections of its own
//! and a share of every slot's partitions ([`strait_wire::connection_of`]), so that reading is not
//! held to one TCP window per broker (6 MiB per 80 ms round trip: 79 MB/s).

use std::sync::Arc;

use rdkafka::consumer::Consumer;
use strait_connect::{ConnectError, ConnectResult};
use strait_wire::Connections;

use super::CONSUMER_SETTINGS;
use crate::client_log::ClientLog;
use crate::config::{CopyKind, Flow};
use crate::consume::SharedConsumer;
use crate::kafka::{measure_round_trip, round_trip};

/// The source consumers of a flow on this instance, at least one; the first also serves the
/// source's metadata and offsets.
pub type SourceConsumers = Arc<[Arc<SharedConsumer>]>;

/// A source consumer of `flow`: manual assignment, `read_committed`, its prefetch the share of
/// one slot (so the slots together hold what one consumer would; each further consumer of
/// [`source_consumers`] holds as much again, as a far link needs more in flight). Errors: a
/// backend error when it cannot be created (invalid client settings).
pub fn source_consumer(flow: &Flow) -> ConnectResult<Arc<SharedConsumer>> {
    // The prefetch is split between the flow's slots (see `Flow::slot_share`); librdkafka
    // measures it against the queue a partition's records go to, which is the slot's.
    let prefetch = (flow.slot_share(8192, 1024).to_string(), flow.slot_share(20_000, 1_000).to_string());
    let mut settings = CONSUMER_SETTINGS.to_vec();
    settings
        .extend([("queued.max.messages.kbytes", prefetch.0.as_str()), ("queued.min.messages", prefetch.1.as_str())]);
    flow.source
        .client_config(&settings)
        .set("group.id", format!("strait-{}", flow.name))
        .create_with_context(ClientLog)
        .and_then(SharedConsumer::new)
        .map_err(|e| ConnectError::backend(format!("consumer for source {}", flow.source.alias), e))
}

/// `first` ([`source_consumer`]) and, with `copy = "records"`, as many more as the source's
/// `connections_per_broker` asks: as set, or `auto`'s ([`Connections::Auto`]) from `first`'s
/// [`round_trip`]. The batch path keeps connections of its own and reads through none of them.
/// Errors: as [`measure_round_trip`] when the source does not answer or refuses.
pub async fn source_consumers(flow: &Flow, first: Arc<SharedConsumer>) -> ConnectResult<SourceConsumers> {
    let connections = match flow.copy.kind {
        CopyKind::Records => flow.source.connections_per_broker.wire(),
        CopyKind::Batches => Connections::PerBroker(1),
    };
    let measured = match connections {
        Connections::PerBroker(_) => None,
        Connections::Auto => {
            let client = first.clone();
            Some(measure_round_trip(&flow.source, move || round_trip(client.consumer().client())).await?)
        }
    };
    let per_broker = connections.per_broker(measured.unwrap_or_default());
    let mut consumers = vec![first];
    while consumers.len() < per_broker {
        consumers.push(source_consumer(flow)?);
    }
    if per_broker > 1 {
        let round_trip_ms = measured.map(|t| t.as_millis() as u64);
        tracing::info!(flow = %flow.name, consumers = per_broker, round_trip_ms, "source consumers: one connection per broker each");
    }
    Ok(consumers.into())
}
