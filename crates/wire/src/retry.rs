//! The one schedule of retries in this crate: a first wait, doubled up to a most, for as long as
//! the caller retries (backon's exponential backoff, without jitter: each caller's own deadline
//! ends its retries).

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// The waits between attempts: `first`, doubling up to `max`, without end.
pub(crate) fn doubling(first: Duration, max: Duration) -> ExponentialBackoff {
    ExponentialBuilder::new().with_min_delay(first).with_max_delay(max).without_max_times().build()
}

/// The first wait before a batch, or a call, is sent again, doubled up to [`MAX_BACKOFF`].
pub(crate) const BACKOFF: Duration = Duration::from_millis(50);
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(1);
