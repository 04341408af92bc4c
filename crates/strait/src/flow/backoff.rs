//! A flow's start attempts retried with doubling backoff while a cluster does not answer, a
//! permanent failure ([`classify_start`]) stopping the flow at once.

use std::future::Future;
use std::time::Duration;

use strait_connect::ConnectResult;
use tokio_util::sync::CancellationToken;

use crate::config::Flow;
use crate::kafka::{classify_start, StartFailure};
use crate::retry::doubling;

/// First wait before retrying a start; doubled per failure.
pub const BACKOFF_MIN: Duration = Duration::from_millis(500);
/// Longest wait between start attempts.
pub const BACKOFF_MAX: Duration = Duration::from_secs(15);

/// Calls `attempt` until it succeeds (`Ok(Some)`), `cancel` fires (`Ok(None)`) or it fails in a
/// way retrying cannot change ([`StartFailure::Permanent`] of [`classify_start`]: `Err`, naming
/// the setting), waiting 0.5 s doubling to 15 s between transient failures, each logged as a
/// warning naming `what`.
pub async fn with_backoff<T, F: Future<Output = ConnectResult<T>>>(
    flow: &Flow,
    what: &str,
    cancel: &CancellationToken,
    mut attempt: impl FnMut() -> F,
) -> ConnectResult<Option<T>> {
    let mut waits = doubling(BACKOFF_MIN, BACKOFF_MAX);
    loop {
        let result = tokio::select! {
            r = attempt() => r,
            _ = cancel.cancelled() => return Ok(None),
        };
        let e = match result {
            Ok(v) => return Ok(Some(v)),
            Err(e) => match classify_start(flow, e) {
                StartFailure::Permanent(e) => return Err(e),
                StartFailure::Transient(e) => e,
            },
        };
        let wait = waits.next().unwrap_or(BACKOFF_MAX);
        // At most BACKOFF_MAX: the milliseconds fit.
        tracing::warn!(flow = %flow.name, retry_in_ms = wait.as_millis() as u64, error = %e, "{what} could not start; retrying");
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = cancel.cancelled() => return Ok(None),
        }
    }
}
