//! The records of a poll: taken from the consumer up to the batch's bounds, each holding its
//! message (no copy of key and value) and one shared copy of its topic name.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::error::KafkaError;
use strait_connect::{ConnectRecord, Header, SourceOffset};

use crate::consume::{KafkaMessage, SourceReader};
use crate::kafka::is_denied;
use crate::record::ReplicatedRecord;

/// One shared name per topic for the records of a flow.
#[derive(Default)]
pub(super) struct TopicNames {
    by_name: HashMap<String, Arc<str>>,
    /// The name last asked for: records come in runs of one partition, so most skip the map.
    last: Option<Arc<str>>,
}

impl TopicNames {
    pub(super) fn get(&mut self, topic: &str) -> Arc<str> {
        if let Some(last) = self.last.as_ref().filter(|l| ***l == *topic) {
            return last.clone();
        }
        let name = match self.by_name.get(topic) {
            Some(t) => t.clone(),
            None => self.by_name.entry(topic.to_string()).or_insert_with(|| Arc::from(topic)).clone(),
        };
        self.last = Some(name.clone());
        name
    }
}

/// Records taken from the consumer for one poll.
pub(super) struct Drained {
    pub(super) records: Vec<ConnectRecord<(), ReplicatedRecord>>,
    pub(super) bytes: usize,
    /// The consumer reported a refusal (missing ACL, refused credentials): no retry helps.
    pub(super) denied: Option<KafkaError>,
}

impl Drained {
    /// Takes records from `reader` until `max_records` or `max_bytes` is reached or none is
    /// left, waiting up to `wait` for the first one. The consumer's errors are served first.
    pub(super) fn drain(
        &mut self,
        reader: &SourceReader,
        names: &mut TopicNames,
        max_records: usize,
        max_bytes: usize,
        mut wait: Duration,
        flow: &str,
    ) {
        let mut read = Vec::new();
        for e in reader.events() {
            self.failed(e, flow);
        }
        while self.denied.is_none() && self.records.len() < max_records && self.bytes < max_bytes {
            // As many records as the bytes left hold at the average size so far (one record
            // first): large records overshoot `max_bytes` by about one, not by a whole read.
            let want = match self.records.len() {
                0 => 1,
                n => (max_records - n).min((max_bytes - self.bytes).div_ceil((self.bytes / n).max(64))),
            };
            if reader.read(want, wait, &mut read) == 0 {
                break;
            }
            for m in read.drain(..) {
                match m {
                    Ok(m) => {
                        let r = to_record(m, names);
                        self.bytes += r.size_bytes;
                        self.records.push(r);
                    }
                    Err(e) => self.failed(e, flow),
                }
            }
            wait = Duration::ZERO;
        }
    }

    /// Notes a refusal (no retry helps); logs any other error, which librdkafka retries itself.
    fn failed(&mut self, e: KafkaError, flow: &str) {
        if e.rdkafka_error_code().is_some_and(is_denied) {
            self.denied.get_or_insert(e);
        } else {
            crate::client_log::consumer_error(flow, &e);
        }
    }
}

/// The record of `m`, holding the message itself (no copy of key and value); its headers are
/// copied, as the loop guard edits them.
fn to_record(m: KafkaMessage, names: &mut TopicNames) -> ConnectRecord<(), ReplicatedRecord> {
    let mut headers = Vec::new();
    m.for_each_header(|key, value| headers.push(Header { key: key.to_string(), value: value.map(<[u8]>::to_vec) }));
    let size_bytes = 64
        + m.key().map_or(0, <[u8]>::len)
        + m.payload().map_or(0, <[u8]>::len)
        + headers.iter().map(|h| h.key.len() + h.value.as_ref().map_or(0, Vec::len)).sum::<usize>();
    let topic = names.get(&m.topic());
    let (partition, offset, timestamp_ms) = (m.partition(), m.offset(), m.timestamp_ms());
    ConnectRecord {
        key: None,
        value: Some(ReplicatedRecord::Kafka(m)),
        timestamp_ms,
        headers,
        source_offset: SourceOffset { topic, partition, offset },
        size_bytes,
    }
}
