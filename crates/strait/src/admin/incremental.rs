//! IncrementalAlterConfigs (KIP-339) on one topic through librdkafka's C API: rdkafka 0.39 binds
//! only the legacy AlterConfigs, which replaces every dynamic config of the topic (losing the
//! target-only overrides KIP-894 says config sync must leave alone).

use std::ffi::CString;
use std::ptr;
use std::time::Duration;

use rdkafka::admin::AdminClient;
use rdkafka::bindings as rd;
use rdkafka::error::KafkaError;

use super::ffi::{admin_result, failed, Owned};
use crate::client_log::ClientLog;

/// Sets `configs` (name, value) on `topic`, leaving its other configs as they are. Blocks up to
/// `timeout`. Errors: the broker's error for the topic (say, an unknown config or a value out of
/// range), or a timeout.
pub fn set_topic_configs(
    client: &AdminClient<ClientLog>,
    topic: &str,
    configs: &[(String, String)],
    timeout: Duration,
) -> Result<(), KafkaError> {
    let nul = |_| KafkaError::AdminOpCreation(format!("a NUL byte in a config of topic {topic}"));
    let name = CString::new(topic).map_err(nul)?;
    let pairs: Vec<(CString, CString)> = configs
        .iter()
        .map(|(k, v)| Ok((CString::new(k.as_str())?, CString::new(v.as_str())?)))
        .collect::<Result<_, std::ffi::NulError>>()
        .map_err(nul)?;
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let rk = client.inner().native_ptr();
    // SAFETY: every pointer passed below is either a live librdkafka object owned by an `Owned`
    // (destroyed after its last use) or a CString that outlives the call using it; the client
    // outlives this function.
    unsafe {
        let queue = Owned(rd::rd_kafka_queue_new(rk), rd::rd_kafka_queue_destroy);
        let resource = Owned(
            rd::rd_kafka_ConfigResource_new(rd::rd_kafka_ResourceType_t::RD_KAFKA_RESOURCE_TOPIC, name.as_ptr()),
            rd::rd_kafka_ConfigResource_destroy,
        );
        for (k, v) in &pairs {
            let set = rd::rd_kafka_AlterConfigOpType_t::RD_KAFKA_ALTER_CONFIG_OP_TYPE_SET;
            let error = rd::rd_kafka_ConfigResource_add_incremental_config(resource.0, k.as_ptr(), set, v.as_ptr());
            if !error.is_null() {
                let error = Owned(error, rd::rd_kafka_error_destroy);
                return Err(failed(
                    "set topic config",
                    rd::rd_kafka_error_code(error.0),
                    rd::rd_kafka_error_string(error.0),
                ));
            }
        }
        let options = Owned(
            rd::rd_kafka_AdminOptions_new(rk, rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_INCREMENTALALTERCONFIGS),
            rd::rd_kafka_AdminOptions_destroy,
        );
        rd::rd_kafka_AdminOptions_set_request_timeout(options.0, timeout_ms, ptr::null_mut(), 0);
        let mut resources = [resource.0];
        rd::rd_kafka_IncrementalAlterConfigs(rk, resources.as_mut_ptr(), 1, options.0, queue.0);
        let event = admin_result(queue.0, timeout_ms, "incremental alter configs")?;
        let result = rd::rd_kafka_event_IncrementalAlterConfigs_result(event.0);
        let mut count = 0;
        let results = rd::rd_kafka_IncrementalAlterConfigs_result_resources(result, &mut count);
        for i in 0..count {
            let r = *results.add(i);
            let code = rd::rd_kafka_ConfigResource_error(r);
            if code != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                return Err(failed(
                    &format!("alter configs of {topic}"),
                    code,
                    rd::rd_kafka_ConfigResource_error_string(r),
                ));
            }
        }
        Ok(())
    }
}
