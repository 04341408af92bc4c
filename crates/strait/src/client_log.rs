//! librdkafka's log lines and client-wide errors, forwarded to `tracing` (target `librdkafka`)
//! at WARN at most, one line per broker per kind per [`INTERVAL`], the next one counting those
//! held back.
//!
//! librdkafka reports every failed connection, and "all brokers down", while a broker restarts,
//! through each client (producer, consumer, admin), and rdkafka's default context logs them at
//! ERROR: a harmless leader bounce gave dozens of ERROR lines. librdkafka retries these itself;
//! whatever it cannot recover from reaches Strait as a failed call (a produce, a commit, a read),
//! which Strait reports as ERROR when it stops or loses something. So ERROR stays Strait's own.
//!
//! Every client Strait keeps polled uses [`ClientLog`] or calls [`log`] and [`error`] from its
//! own context.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, ConsumerContext};
use rdkafka::error::KafkaError;

/// A broker's lines of one kind are logged at most once per interval (30 s).
pub const INTERVAL: Duration = Duration::from_secs(30);

/// The context of clients with no callbacks of their own: logs and errors as this module says.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClientLog;

impl ClientContext for ClientLog {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        log(level, fac, message)
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self::error(&error, reason)
    }
}

impl ConsumerContext for ClientLog {}

/// A consumer whose logs and errors go through this module.
pub type LoggedConsumer = BaseConsumer<ClientLog>;

/// Forwards a librdkafka log line (facility `fac`, e.g. `FAIL`): its levels Emergency to Warning
/// at WARN, Notice and Info at INFO, each deduplicated; Debug (only logged when a `debug`
/// setting asks) at DEBUG, every line.
pub fn log(level: RDKafkaLogLevel, fac: &str, message: &str) {
    use RDKafkaLogLevel::*;
    if matches!(level, Debug) {
        return tracing::debug!(target: "librdkafka", "{fac} {message}");
    }
    let Some(suppressed) = admit(broker_of(message), fac) else { return };
    match (level, suppressed) {
        (Notice | Info, 0) => tracing::info!(target: "librdkafka", "{fac} {message}"),
        (Notice | Info, _) => tracing::info!(target: "librdkafka", suppressed, "{fac} {message}"),
        (_, 0) => tracing::warn!(target: "librdkafka", "{fac} {message}"),
        (_, _) => tracing::warn!(target: "librdkafka", suppressed, "{fac} {message}"),
    }
}

/// Forwards a client-wide error (a broker connection failed, all brokers down, a refused login)
/// at WARN, deduplicated by broker and error code.
pub fn error(error: &KafkaError, reason: &str) {
    let kind = error.rdkafka_error_code().map_or_else(|| error.to_string(), |code| format!("{code:?}"));
    warn_deduplicated(broker_of(reason), &kind, &format!("{error}: {reason}"));
}

/// A source consumer's error that librdkafka retries itself, at WARN, deduplicated by flow and
/// error.
pub fn consumer_error(flow: &str, error: &KafkaError) {
    let text = error.to_string();
    if let Some(suppressed) = admit(flow, &text) {
        tracing::warn!(flow, error = %text, suppressed, "source consumer error");
    }
}

/// WARN `text` unless a line of `broker` and `kind` was logged less than [`INTERVAL`] ago.
fn warn_deduplicated(broker: &str, kind: &str, text: &str) {
    match admit(broker, kind) {
        Some(0) => tracing::warn!(target: "librdkafka", "{text}"),
        Some(suppressed) => tracing::warn!(target: "librdkafka", suppressed, "{text}"),
        None => {}
    }
}

/// Whether a line of `broker` and `kind` is logged now: `Some(lines held back since the last
/// one)`, or `None` to hold it back.
fn admit(broker: &str, kind: &str) -> Option<u64> {
    static SEEN: LazyLock<Mutex<Dedup>> = LazyLock::new(Mutex::default);
    // Nothing panics while holding the lock; a poisoned map is still whole.
    SEEN.lock().unwrap_or_else(|e| e.into_inner()).admit(broker, kind, Instant::now())
}

/// When each (broker, kind) was last logged, and how many lines were held back since.
#[derive(Default)]
struct Dedup {
    seen: HashMap<(String, String), (Instant, u64)>,
}

impl Dedup {
    fn admit(&mut self, broker: &str, kind: &str, now: Instant) -> Option<u64> {
        let key = (broker.to_string(), kind.to_string());
        match self.seen.get_mut(&key) {
            Some((last, held)) if now.duration_since(*last) < INTERVAL => {
                *held += 1;
                None
            }
            Some((last, held)) => {
                *last = now;
                Some(std::mem::take(held))
            }
            None => {
                self.seen.insert(key, (now, 0));
                Some(0)
            }
        }
    }
}

/// The broker a librdkafka line is about: its `host:port/id: ` prefix (`sasl_ssl://host:port/2`,
/// `host:port/bootstrap`), or `""` for a client-wide line ("3/3 brokers are down").
fn broker_of(text: &str) -> &str {
    match text.split_once(": ") {
        Some((prefix, _)) if prefix.contains(':') && prefix.contains('/') && !prefix.contains(' ') => prefix,
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_broker_and_kind_per_interval_then_the_count_held_back() {
        let mut d = Dedup::default();
        let t = Instant::now();
        assert_eq!(d.admit("127.0.0.1:9092/1", "FAIL", t), Some(0));
        assert_eq!(d.admit("127.0.0.1:9092/1", "FAIL", t + Duration::from_secs(1)), None);
        assert_eq!(d.admit("127.0.0.1:9092/1", "FAIL", t + Duration::from_secs(29)), None);
        // Another broker, another kind: their own lines.
        assert_eq!(d.admit("127.0.0.1:9093/2", "FAIL", t + Duration::from_secs(2)), Some(0));
        assert_eq!(d.admit("127.0.0.1:9092/1", "BrokerTransportFailure", t + Duration::from_secs(2)), Some(0));
        assert_eq!(d.admit("127.0.0.1:9092/1", "FAIL", t + INTERVAL), Some(2));
        assert_eq!(d.admit("127.0.0.1:9092/1", "FAIL", t + INTERVAL + Duration::from_secs(1)), None);
        assert_eq!(d.admit("127.0.0.1:9092/1", "FAIL", t + INTERVAL * 3), Some(1));
    }

    #[test]
    fn the_broker_is_the_prefix_of_a_broker_line_only() {
        let line = "127.0.0.1:37969/2: Connect to ipv4#127.0.0.1:37969 failed: Connection refused";
        assert_eq!(broker_of(line), "127.0.0.1:37969/2");
        assert_eq!(broker_of("sasl_ssl://b1:9093/bootstrap: Disconnected"), "sasl_ssl://b1:9093/bootstrap");
        assert_eq!(broker_of("3/3 brokers are down"), "");
        assert_eq!(broker_of("Fatal error: Broker: Producer fenced"), "");
    }
}
