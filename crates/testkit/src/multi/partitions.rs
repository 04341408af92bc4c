//! Where the three-node cluster's partitions stand, from Metadata answers: leaders, replicas and
//! in-sync replicas, for tests that move leaders and wait for them to settle.

use std::io;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// Leader and replicas of one partition, from a Metadata answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionState {
    pub partition: i32,
    /// Node id of the leader; `None` while there is none.
    pub leader: Option<i32>,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// A Metadata answer of the cluster at `bootstrap` (of `topic`, or of every topic).
fn metadata(bootstrap: &str, topic: Option<&str>) -> io::Result<rdkafka::metadata::Metadata> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("log_level", "0")
        .create()
        .map_err(io::Error::other)?;
    consumer.fetch_metadata(topic, Duration::from_secs(10)).map_err(io::Error::other)
}

fn state(p: &rdkafka::metadata::MetadataPartition) -> PartitionState {
    PartitionState {
        partition: p.id(),
        leader: Some(p.leader()).filter(|l| *l >= 0),
        replicas: p.replicas().to_vec(),
        isr: p.isr().to_vec(),
    }
}

/// Every partition of `topic` as the cluster at `bootstrap` describes it (Metadata), in
/// partition order. Errors: no answer within 10 s, or the topic is unknown.
pub fn partitions(bootstrap: &str, topic: &str) -> io::Result<Vec<PartitionState>> {
    let md = metadata(bootstrap, Some(topic))?;
    let t = md
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .ok_or_else(|| io::Error::other(format!("topic {topic} not in the metadata")))?;
    if let Some(e) = t.error() {
        return Err(io::Error::other(format!("topic {topic}: {e:?}")));
    }
    let mut out: Vec<PartitionState> = t.partitions().iter().map(state).collect();
    out.sort_by_key(|p| p.partition);
    Ok(out)
}

/// Node id of the leader of `topic`/`partition`; `None` while there is none. Errors as
/// [`partitions`], or no such partition.
pub fn leader(bootstrap: &str, topic: &str, partition: i32) -> io::Result<Option<i32>> {
    partitions(bootstrap, topic)?
        .into_iter()
        .find(|p| p.partition == partition)
        .map(|p| p.leader)
        .ok_or_else(|| io::Error::other(format!("no partition {topic}/{partition}")))
}

/// Whether every partition of every topic (internal ones included) has a leader and all its
/// replicas in sync: a node restarted has caught up, and the next may go down without a
/// partition falling under its minimum ISR. Errors: no Metadata answer within 10 s.
pub fn fully_replicated(bootstrap: &str) -> io::Result<bool> {
    let md = metadata(bootstrap, None)?;
    Ok(md
        .topics()
        .iter()
        .flat_map(|t| t.partitions())
        .map(state)
        .all(|p| p.leader.is_some() && p.isr.len() == p.replicas.len()))
}
