//! A record read from the source consumer, borrowed from librdkafka rather than copied.

use std::borrow::Cow;
use std::ffi::{c_char, c_void, CStr};
use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use rdkafka::bindings as rdsys;
use rdkafka::error::KafkaError;
use rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR;

use crate::client_log::LoggedConsumer;

/// A record read from a source consumer, held (not copied) until dropped, and dropped before
/// that consumer.
pub struct KafkaMessage {
    message: NonNull<rdsys::rd_kafka_message_t>,
    _consumer: Arc<LoggedConsumer>,
}

// SAFETY: a consumed message is read-only and librdkafka frees it from any thread.
unsafe impl Send for KafkaMessage {}
unsafe impl Sync for KafkaMessage {}

impl KafkaMessage {
    /// The record `m`, or its error (the message is then freed).
    ///
    /// # Safety
    /// `m` is a live message read from `consumer`, not owned elsewhere.
    pub(super) unsafe fn take(
        m: *mut rdsys::rd_kafka_message_t,
        consumer: &Arc<LoggedConsumer>,
    ) -> Result<Self, KafkaError> {
        let err = (*m).err;
        if err != RD_KAFKA_RESP_ERR_NO_ERROR {
            rdsys::rd_kafka_message_destroy(m);
            return Err(KafkaError::MessageConsumption(err.into()));
        }
        Ok(Self { message: NonNull::new_unchecked(m), _consumer: consumer.clone() })
    }

    fn raw(&self) -> &rdsys::rd_kafka_message_t {
        // SAFETY: live until `drop`.
        unsafe { self.message.as_ref() }
    }

    /// Key bytes; `None` for a null key.
    pub fn key(&self) -> Option<&[u8]> {
        let m = self.raw();
        // SAFETY: librdkafka's key buffer of `key_len` bytes, live with the message.
        (!m.key.is_null()).then(|| unsafe { std::slice::from_raw_parts(m.key.cast::<u8>(), m.key_len) })
    }

    /// Value bytes; `None` for a tombstone.
    pub fn payload(&self) -> Option<&[u8]> {
        let m = self.raw();
        // SAFETY: librdkafka's payload buffer of `len` bytes, live with the message.
        (!m.payload.is_null()).then(|| unsafe { std::slice::from_raw_parts(m.payload.cast::<u8>(), m.len) })
    }

    /// Source topic name (Kafka's names are ASCII, so this borrows).
    pub fn topic(&self) -> Cow<'_, str> {
        // SAFETY: the topic handle lives with the message, and its name is a C string.
        unsafe { CStr::from_ptr(rdsys::rd_kafka_topic_name(self.raw().rkt)) }.to_string_lossy()
    }

    /// Source partition.
    pub fn partition(&self) -> i32 {
        self.raw().partition
    }

    /// Upstream offset.
    pub fn offset(&self) -> i64 {
        self.raw().offset
    }

    /// Timestamp in ms (create or log-append time); `None` when the record has none.
    pub fn timestamp_ms(&self) -> Option<i64> {
        let mut kind = rdsys::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
        // SAFETY: a live message.
        let ts = unsafe { rdsys::rd_kafka_message_timestamp(self.message.as_ptr(), &mut kind) };
        (kind != rdsys::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE).then_some(ts)
    }

    /// Calls `f` with each header's key and value (`None` for a null value), in order.
    pub fn for_each_header(&self, mut f: impl FnMut(&str, Option<&[u8]>)) {
        let mut headers = ptr::null_mut();
        // SAFETY: a live message; the headers it returns live with it.
        if unsafe { rdsys::rd_kafka_message_headers(self.message.as_ptr(), &mut headers) } != RD_KAFKA_RESP_ERR_NO_ERROR
        {
            return;
        }
        for i in 0.. {
            let (mut name, mut value, mut size): (*const c_char, *const c_void, usize) = (ptr::null(), ptr::null(), 0);
            // SAFETY: live headers; the pointers returned live with them.
            if unsafe { rdsys::rd_kafka_header_get_all(headers, i, &mut name, &mut value, &mut size) }
                != RD_KAFKA_RESP_ERR_NO_ERROR
            {
                return;
            }
            // SAFETY: a header name is a C string, its value `size` bytes (or null).
            let key = unsafe { CStr::from_ptr(name) }.to_string_lossy();
            let value = (!value.is_null()).then(|| unsafe { std::slice::from_raw_parts(value.cast::<u8>(), size) });
            f(&key, value);
        }
    }
}

impl Drop for KafkaMessage {
    fn drop(&mut self) {
        // SAFETY: the message is ours (see `take`), freed once.
        unsafe { rdsys::rd_kafka_message_destroy(self.message.as_ptr()) }
    }
}

impl fmt::Debug for KafkaMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KafkaMessage({} partition {} offset {})", self.topic(), self.partition(), self.offset())
    }
}
