//! Bounded numeric settings, checked while the TOML is read: each `with` module reads an unsigned
//! integer (a `Duration` in ms, or a count), refuses a value outside its inclusive bounds with an
//! error that names them (`1001 is out of bounds: must be 1 to 1000 slots`), and writes it back
//! as it was written. The field path is added by the reader ([`super::Config::read`]).

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

/// Bounds (inclusive) of the flows' interval settings (`*_interval_ms`, `commit_interval_ms`):
/// 1 ms to one year (31,536,000,000 ms), far from where timers overflow.
pub const INTERVAL_MS: (u64, u64) = (1, 365 * 24 * 3600 * 1000);
/// Bounds of `transaction_timeout_ms`: librdkafka's range for `transaction.timeout.ms` (1 s to
/// `i32::MAX` ms); the target broker's `transaction.max.timeout.ms` (15 min by default) bounds it
/// further, checked at start.
pub const TRANSACTION_TIMEOUT_MS: (u64, u64) = (1_000, i32::MAX as u64);
/// Bounds of `[flows.scale_out] session_timeout_ms`: 1 s to librdkafka's most for
/// `session.timeout.ms` (1 h); the target brokers' `group.min/max.session.timeout.ms` (6 s and
/// 30 min by default) bound it further, checked at start.
pub const SESSION_TIMEOUT_MS: (u64, u64) = (1_000, 3_600_000);
/// Bounds of `[flows.scale_out] slots`, the coordination topic's partitions: 1 to 1,000. Each
/// slot an instance owns runs its own transactional producer (the instance's slots share its
/// consumer and at-least-once record producer), so more slots than instances costs threads and
/// connections; 1,000 instances of one flow is far past any deployment.
pub const SLOTS: (u64, u64) = (1, 1_000);
/// Bounds of `max_batch_records`: 1 to 100,000,000 records.
pub const BATCH_RECORDS: (u64, u64) = (1, 100_000_000);
/// Bounds of `max_batch_bytes`: 1 byte to 16 GiB (17,179,869,184 bytes).
pub const BATCH_BYTES: (u64, u64) = (1, 16 << 30);
/// Bounds of `offset_lag_max`: 0 to `i64::MAX` records (Kafka offsets are `i64`: a larger lag
/// cannot occur).
pub const OFFSET_LAG_MAX: (u64, u64) = (0, i64::MAX as u64);
/// Largest `replication_factor`: Kafka's replication factor is an `i16` (32,767).
pub const MAX_REPLICATION_FACTOR: i32 = i16::MAX as i32;

/// An unsigned integer within `(min, max)`, else an error naming the bounds and `unit`.
fn within<'de, D: Deserializer<'de>>(d: D, (min, max): (u64, u64), unit: &str) -> Result<u64, D::Error> {
    let value = u64::deserialize(d)?;
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(D::Error::custom(format!("{value} is out of bounds: must be {min} to {max} {unit}")))
    }
}

/// A `with` module for a `Duration` written in whole milliseconds within `$bounds`.
macro_rules! millis {
    ($(#[$doc:meta])* $name:ident, $bounds:expr) => {
        $(#[$doc])*
        pub mod $name {
            use std::time::Duration;

            use serde::{Deserializer, Serializer};

            /// Reads whole milliseconds within the bounds.
            pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
                super::within(d, $bounds, "ms").map(Duration::from_millis)
            }

            /// Writes whole milliseconds (the bounds keep them within `u64`).
            pub fn serialize<S: Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_u64(u64::try_from(value.as_millis()).unwrap_or(u64::MAX))
            }
        }
    };
}

/// A `with` module for a count written as an integer within `$bounds`, read as `$ty`.
macro_rules! count {
    ($(#[$doc:meta])* $name:ident, $ty:ty, $bounds:expr, $unit:literal) => {
        $(#[$doc])*
        pub mod $name {
            use serde::de::Error as _;
            use serde::{Deserializer, Serializer};

            /// Reads the count within the bounds.
            pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
                let value = super::within(d, $bounds, $unit)?;
                <$ty>::try_from(value).map_err(|_| D::Error::custom(format!("{value} is too large here")))
            }

            /// Writes the count.
            pub fn serialize<S: Serializer>(value: &$ty, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_u64(u64::try_from(*value).unwrap_or(u64::MAX))
            }
        }
    };
}

millis!(
    /// Interval settings: [`INTERVAL_MS`].
    interval,
    super::INTERVAL_MS
);
millis!(
    /// `transaction_timeout_ms`: [`TRANSACTION_TIMEOUT_MS`].
    transaction_timeout,
    super::TRANSACTION_TIMEOUT_MS
);
millis!(
    /// `session_timeout_ms`: [`SESSION_TIMEOUT_MS`].
    session_timeout,
    super::SESSION_TIMEOUT_MS
);
count!(
    /// `slots`: [`SLOTS`].
    slots,
    u32,
    super::SLOTS,
    "slots"
);
count!(
    /// `max_batch_records`: [`BATCH_RECORDS`].
    batch_records,
    usize,
    super::BATCH_RECORDS,
    "records"
);
count!(
    /// `max_batch_bytes`: [`BATCH_BYTES`].
    batch_bytes,
    usize,
    super::BATCH_BYTES,
    "bytes"
);
count!(
    /// `offset_lag_max`: [`OFFSET_LAG_MAX`].
    offset_lag_max,
    u64,
    super::OFFSET_LAG_MAX,
    "records"
);

/// `replication_factor`: 1 to [`MAX_REPLICATION_FACTOR`], or -1 for the broker's default.
pub mod replication_factor {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    use super::MAX_REPLICATION_FACTOR;

    /// Reads the factor, refusing 0, below -1 and above Kafka's `i16`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
        let value = i64::deserialize(d)?;
        match i32::try_from(value) {
            Ok(rf) if rf == -1 || (1..=MAX_REPLICATION_FACTOR).contains(&rf) => Ok(rf),
            _ => Err(D::Error::custom(format!("must be 1 to {MAX_REPLICATION_FACTOR}, or -1 for the broker default"))),
        }
    }

    /// Writes the factor.
    pub fn serialize<S: Serializer>(value: &i32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i32(*value)
    }
}
