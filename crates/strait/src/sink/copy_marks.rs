//! Copy-kind marks: the mixed-kind rule across separate deployments (issue 45). Under the
//! identity policy a record flow and a batch flow in opposite directions between two clusters
//! would echo each other's data: a batch carries no provenance header, and a record flow's
//! producer ids are not registered (librdkafka does not give them). `crate::config` refuses
//! such flows within one config; flows run by other deployments leave a mark instead.
//!
//! Each instance of an identity flow writes a mark into [`PRODUCER_IDS_TOPIC`] on its target,
//! keyed `flow:<source cluster id>-><target cluster id>/<kind>/<instance>`, valued
//! `{"flow":..,"at_ms":..}`: at start, then every minute, and with `at_ms = 0` (no mark) at a
//! clean stop or a refusal, which leaves the marks of the flow's other instances standing. A
//! mark holds the flow's topic filter. At start, after writing its own, a flow reads its source's registry: a
//! mark of the flow back with the other kind, refreshed within the last 3 minutes, whose filter
//! and this flow's both select a topic of either cluster, refuses the start, naming that flow
//! and topic. Both flows write before they read, so of two starting at once at least one sees
//! the other. A topic created after both started is checked at either flow's next start.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rdkafka::producer::BaseRecord;
use serde::{Deserialize, Serialize};
use strait_connect::{ConnectError, ConnectResult};
use tokio_util::sync::CancellationToken;

use super::producer_ids::{FLOW_MARK_PREFIX, PRODUCER_IDS_TOPIC};
use crate::admin::Admin;
use crate::config::{CopyKind, Flow};
use crate::kafka::{acked, blocking, connect_error, control_producer, enqueue, ControlProducer, StateReader};
use crate::rules::NameFilter;
use strait_mm2::ReplicationPolicy;

/// How often a running flow writes its mark again.
const REFRESH: Duration = Duration::from_secs(60);

/// A mark older than this (ms) is a flow's that stopped without a clean stop: three refreshes
/// missed.
const LIFE_MS: i64 = 180_000;

/// A mark's value.
#[derive(Debug, Serialize, Deserialize)]
struct Mark {
    /// The flow's name (`<source alias>-><target alias>` in its own config).
    flow: String,
    /// When it was written, ms since the epoch; 0 after a clean stop or a refusal.
    at_ms: i64,
    /// The flow's `topics` and `topics_exclude` regexes, anchored ([`NameFilter::patterns`]).
    topics: Vec<String>,
    topics_exclude: Vec<String>,
}

/// The key prefix of the marks of `kind` flows from the cluster with id `source` to the one
/// with id `target`; each instance's key adds its own suffix.
fn prefix(source: &str, target: &str, kind: CopyKind) -> String {
    format!("{FLOW_MARK_PREFIX}{source}->{target}/{}/", kind.name())
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// A running identity flow's mark on its target, kept fresh by [`Marker::run`] until the flow stops.
pub struct Marker {
    producer: ControlProducer,
    key: String,
    flow: String,
    filter: (Vec<String>, Vec<String>),
}

impl Marker {
    /// Writes `flow`'s mark on its target (cluster id `target_id`; its source's is `source_id`),
    /// then reads its source's registry for a fresh mark of the flow back with the other kind.
    /// `None` for a flow under the default policy, whose names stop loops. Errors:
    /// [`ConnectError::Invalid`] naming the flow back when there is one;
    /// [`ConnectError::Backend`] when the mark cannot be written or the registry read.
    pub async fn start(flow: &Flow, (source_id, target_id): (&str, &str)) -> ConnectResult<Option<Self>> {
        if !matches!(flow.policy, ReplicationPolicy::Identity { .. }) {
            return Ok(None);
        }
        let kind = flow.copy.kind;
        let producer = control_producer(&flow.target)
            .map_err(|e| connect_error(format!("mark of flow {} on {}", flow.name, flow.target.alias), e))?;
        // This process and its start time (ms): unique among the flow's instances.
        let instance = format!("{}-{}", std::process::id(), now_ms());
        let key = prefix(source_id, target_id, kind) + &instance;
        let marker = Self { producer, key, flow: flow.name.clone(), filter: flow.topics.patterns() };
        marker.write(now_ms()).await.map_err(|e| ConnectError::backend(marker.context(flow), e))?;
        let other = match kind {
            CopyKind::Records => CopyKind::Batches,
            CopyKind::Batches => CopyKind::Records,
        };
        let backs = fresh_marks(flow, &prefix(target_id, source_id, other)).await?;
        // Listed once, and only when a flow back runs: the common start asks nothing more.
        let topics = if backs.is_empty() { Vec::new() } else { topics_of_both(flow).await? };
        for (back, age_ms) in backs {
            let Some(topic) = shared_topic(flow, &back, &topics) else { continue };
            // A flow that does not run leaves no mark to refuse the flow back's next start.
            if let Err(e) = marker.write(0).await {
                tracing::warn!(flow = %flow.name, error = %e, "copy-kind mark not cleared; it lapses in 3 minutes");
            }
            return Err(ConnectError::invalid(
                format!("flow {} copies {} under the identity policy", flow.name, kind.name()),
                format!(
                    "flow {} (on {}: its mark in {PRODUCER_IDS_TOPIC} was written {} s ago) copies {} back \
                     under it, and both take topic {topic}, whose records would come round through the other \
                     kind; set copy alike on both flows (a flow stopped without a clean stop keeps its mark \
                     for {} s)",
                    back.flow,
                    flow.source.alias,
                    age_ms / 1000,
                    other.name(),
                    LIFE_MS / 1000
                ),
            ));
        }
        Ok(Some(marker))
    }

    /// Writes the mark again every minute until `cancel`, then clears it. Failures are logged and
    /// tried again at the next minute.
    pub async fn run(self, cancel: CancellationToken) {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(REFRESH) => {}
            }
            if let Err(e) = self.write(now_ms()).await {
                tracing::warn!(flow = %self.flow, error = %e, "copy-kind mark not written; tried again in a minute");
            }
        }
        if let Err(e) = self.write(0).await {
            tracing::warn!(flow = %self.flow, error = %e, "copy-kind mark not cleared; it lapses in 3 minutes");
        }
    }

    fn context(&self, flow: &Flow) -> String {
        format!("write {} into {PRODUCER_IDS_TOPIC} on {}", self.key, flow.target.alias)
    }

    async fn write(&self, at_ms: i64) -> Result<(), rdkafka::error::KafkaError> {
        let (topics, topics_exclude) = self.filter.clone();
        let mark = Mark { flow: self.flow.clone(), at_ms, topics, topics_exclude };
        let value = serde_json::to_vec(&mark).expect("a mark serializes");
        let record = BaseRecord::to(PRODUCER_IDS_TOPIC).partition(0).key(self.key.as_bytes()).payload(&value[..]);
        acked(enqueue(&self.producer, record).await?).await.map(|_| ())
    }
}

/// The fresh marks keyed under `prefix` in `flow`'s source registry, each with its age (ms).
/// Errors: the registry cannot be read.
async fn fresh_marks(flow: &Flow, prefix: &str) -> ConnectResult<Vec<(Mark, i64)>> {
    let context = || format!("read {PRODUCER_IDS_TOPIC} on {}", flow.source.alias);
    let reader = StateReader::new(&flow.source, "strait-copy-marks-reader").map_err(|e| connect_error(context(), e))?;
    let records = blocking(move || reader.read_new_records(PRODUCER_IDS_TOPIC, None))
        .await
        .map_err(|e| connect_error(context(), e))?
        .0;
    // The last record per key holds: later ones overwrite earlier ones.
    let mut marks = HashMap::new();
    for (_, k, v) in records.into_iter().filter(|(_, k, _)| k.starts_with(prefix.as_bytes())) {
        marks.insert(k, serde_json::from_slice::<Mark>(&v).ok());
    }
    let age = |m: &Mark| now_ms() - m.at_ms;
    Ok(marks
        .into_values()
        .flatten()
        .filter(|m| m.at_ms > 0 && age(m) < LIFE_MS)
        .map(|m| {
            let age = age(&m);
            (m, age)
        })
        .collect())
}

/// The topic names of `flow`'s source and target clusters. Errors: a cluster's topics cannot be
/// listed.
async fn topics_of_both(flow: &Flow) -> ConnectResult<Vec<String>> {
    let mut all = Vec::new();
    for cluster in [&flow.source, &flow.target] {
        let context = || format!("list the topics of {}", cluster.alias);
        let admin = Admin::new(cluster).map_err(|e| connect_error(context(), e))?;
        all.extend(admin.topic_names().await.map_err(|e| connect_error(context(), e))?);
    }
    Ok(all)
}

/// A topic of `topics` (both clusters') that both `flow` and the flow of `back` select (under
/// the identity policy its name is the same on both), heartbeats and internal topics aside.
fn shared_topic(flow: &Flow, back: &Mark, topics: &[String]) -> Option<String> {
    // A mark's patterns were compiled once by the flow that wrote it; one that does not compile
    // here selects every topic, so the check errs on the side of refusing.
    let theirs = NameFilter::new("mark", &back.topics, "mark", &back.topics_exclude).ok();
    let both = |t: &str| {
        flow.topics.matches(t)
            && theirs.as_ref().is_none_or(|f| f.matches(t))
            && !flow.policy.is_internal_topic(t)
            && !flow.policy.is_heartbeats_topic(t)
    };
    topics.iter().find(|t| both(t)).cloned()
}

#[cfg(test)]
mod tests {
    use super::{prefix, Mark};
    use crate::config::CopyKind;

    #[test]
    fn a_mark_is_keyed_by_both_cluster_ids_the_kind_and_the_instance() {
        assert_eq!(prefix("src", "dst", CopyKind::Batches), "flow:src->dst/batches/");
        let mark = Mark { flow: "a->b".into(), at_ms: 5, topics: vec!["^(?:t)$".into()], topics_exclude: vec![] };
        let json = serde_json::to_string(&mark).unwrap();
        assert_eq!(json, r#"{"flow":"a->b","at_ms":5,"topics":["^(?:t)$"],"topics_exclude":[]}"#);
    }
}
