//! Small safe pieces shared by the admin calls made through librdkafka's C API (rdkafka 0.39 does
//! not bind them): ownership of librdkafka objects and its error strings.

use std::ffi::CStr;
use std::os::raw::c_char;

use rdkafka::bindings as rd;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// Owns a librdkafka object and destroys it when dropped, so every exit path frees it.
pub(super) struct Owned<T>(pub(super) *mut T, pub(super) unsafe extern "C" fn(*mut T));

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the pointer came from the matching librdkafka constructor and is freed once.
            unsafe { (self.1)(self.0) }
        }
    }
}

/// A librdkafka string as an owned `String` (empty for a null pointer).
///
/// # Safety
/// `s` is null or a NUL-terminated string that lives for the duration of the call.
pub(super) unsafe fn string(s: *const c_char) -> String {
    if s.is_null() {
        String::new()
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
    }
}

/// An admin error for `what`, logged at warn with librdkafka's `message`.
///
/// # Safety
/// As [`string`] for `message`.
pub(super) unsafe fn failed(what: &str, code: rd::rd_kafka_resp_err_t, message: *const c_char) -> KafkaError {
    let code = RDKafkaErrorCode::from(code);
    // SAFETY: guaranteed by the caller.
    let message = unsafe { string(message) };
    tracing::warn!(code = %code, "{what}: {message}");
    KafkaError::AdminOp(code)
}

/// Waits up to `timeout_ms` (plus 1 s for the reply to arrive) for the result event of the admin
/// request `what` sent to `queue`. Errors: a timeout, or the request's own error (logged at
/// warn).
///
/// # Safety
/// `queue` is a live librdkafka queue the request's result is sent to.
pub(super) unsafe fn admin_result(
    queue: *mut rd::rd_kafka_queue_t,
    timeout_ms: i32,
    what: &str,
) -> Result<Owned<rd::rd_kafka_event_t>, KafkaError> {
    // SAFETY: guaranteed by the caller.
    unsafe { poll_result(queue, timeout_ms) }.map_err(|(code, message)| {
        let code = RDKafkaErrorCode::from(code);
        if code != RDKafkaErrorCode::OperationTimedOut {
            tracing::warn!(code = %code, "{what}: {message}");
        }
        KafkaError::AdminOp(code)
    })
}

/// [`admin_result`] without the log: the error comes back with librdkafka's message, for callers
/// that decide themselves how loud a refusal is.
///
/// # Safety
/// As [`admin_result`].
pub(super) unsafe fn poll_result(
    queue: *mut rd::rd_kafka_queue_t,
    timeout_ms: i32,
) -> Result<Owned<rd::rd_kafka_event_t>, (rd::rd_kafka_resp_err_t, String)> {
    // SAFETY: guaranteed by the caller; the event is owned and destroyed by the `Owned`.
    unsafe {
        let event = Owned(rd::rd_kafka_queue_poll(queue, timeout_ms.saturating_add(1_000)), rd::rd_kafka_event_destroy);
        if event.0.is_null() {
            let waited = i64::from(timeout_ms) + 1_000;
            return Err((rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__TIMED_OUT, format!("no answer in {waited} ms")));
        }
        let code = rd::rd_kafka_event_error(event.0);
        if code != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err((code, string(rd::rd_kafka_event_error_string(event.0))));
        }
        Ok(event)
    }
}
