//! The one schedule of retries of this crate: a first wait, doubled up to a most, for as long as
//! the caller retries (backon's exponential backoff, without jitter). The callers keep their own
//! loops, as each decides differently what ends them (a deadline, a refusal, a shutdown) and
//! logs each attempt in its own words; the connector runtime and `strait-wire` use the same
//! crate the same way.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// The waits between attempts: `first`, doubling up to `max`, without end.
pub fn doubling(first: Duration, max: Duration) -> ExponentialBackoff {
    ExponentialBuilder::new().with_min_delay(first).with_max_delay(max).without_max_times().build()
}
