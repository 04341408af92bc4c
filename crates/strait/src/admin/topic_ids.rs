//! Topic ids (KIP-516) through librdkafka's DescribeTopics, which rdkafka 0.39 does not bind: a
//! topic deleted and created again under the same name gets a new id, so a saved position can be
//! told apart from one of an earlier topic of that name.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::raw::c_char;
use std::ptr;
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::client::{Client, ClientContext};
use rdkafka::error::KafkaError;

use super::ffi::{admin_result, string, Owned};
use crate::topic_id::TopicId;

/// The all-zero id, which a broker without topic ids (before Kafka 2.8) reports.
const ZERO_ID: &str = "AAAAAAAAAAAAAAAAAAAAAA";

/// The id of each of `topics` the cluster of `client` knows, in one DescribeTopics request,
/// waiting up to `timeout`. Any librdkafka client works (the source consumer's, say). A topic
/// the cluster does not describe (deleted meanwhile, not authorised) or describes without an id
/// (a broker older than Kafka 2.8) is missing from the map. Blocking: call from a blocking
/// thread. Errors: the request as a whole failed or timed out.
pub fn topic_ids<C: ClientContext>(
    client: &Client<C>,
    topics: &[String],
    timeout: Duration,
) -> Result<HashMap<String, TopicId>, KafkaError> {
    if topics.is_empty() {
        return Ok(HashMap::new());
    }
    let names: Vec<CString> = topics
        .iter()
        .map(|t| CString::new(t.as_str()))
        .collect::<Result<_, _>>()
        .map_err(|_| KafkaError::AdminOpCreation("a NUL byte in a topic name".into()))?;
    let mut pointers: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let rk = client.native_ptr();
    let mut ids = HashMap::new();
    // SAFETY: every pointer passed below is a live librdkafka object owned by an `Owned`
    // (destroyed after its last use), or a CString of `names` that outlives the calls; results
    // are read before the event owning them is destroyed; `client` outlives this function.
    unsafe {
        let queue = Owned(rd::rd_kafka_queue_new(rk), rd::rd_kafka_queue_destroy);
        let collection = Owned(
            rd::rd_kafka_TopicCollection_of_topic_names(pointers.as_mut_ptr(), pointers.len()),
            rd::rd_kafka_TopicCollection_destroy,
        );
        let options = Owned(
            rd::rd_kafka_AdminOptions_new(rk, rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBETOPICS),
            rd::rd_kafka_AdminOptions_destroy,
        );
        rd::rd_kafka_AdminOptions_set_request_timeout(options.0, timeout_ms, ptr::null_mut(), 0);
        rd::rd_kafka_DescribeTopics(rk, collection.0, options.0, queue.0);
        let event = admin_result(queue.0, timeout_ms, "describe topics")?;
        let result = rd::rd_kafka_event_DescribeTopics_result(event.0);
        let mut count = 0;
        let described = rd::rd_kafka_DescribeTopics_result_topics(result, &mut count);
        for i in 0..count {
            let topic = *described.add(i);
            if !rd::rd_kafka_TopicDescription_error(topic).is_null() {
                continue;
            }
            let id = rd::rd_kafka_TopicDescription_topic_id(topic);
            if id.is_null() {
                continue;
            }
            let id = string(rd::rd_kafka_Uuid_base64str(id));
            if !id.is_empty() && id != ZERO_ID {
                ids.insert(string(rd::rd_kafka_TopicDescription_name(topic)), TopicId(id));
            }
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_as_kafka_prints_it_gives_its_16_bytes() {
        let id = TopicId("Dm5aXb3nQ9-tH9t1jq4b1Q".into());
        assert_eq!(id.uuid().map(|u| u.simple().to_string()), Some("0e6e5a5dbde743dfad1fdb758eae1bd5".into()));
        let librdkafka = TopicId("Dm5aXb3nQ9+tH9t1jq4b1Q".into());
        assert_eq!(librdkafka.uuid(), id.uuid(), "librdkafka's standard alphabet");
        assert_eq!(TopicId("not an id".into()).uuid(), None);
        assert_eq!(TopicId("AAAA".into()).uuid(), None, "3 bytes, not 16");
    }
}
