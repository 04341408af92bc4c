//! `max_bytes_per_second`: a cap on the record bytes a flow's source reads (for WAN links and
//! noisy neighbours; KIP-1279's `mirror.replication.throttled.rate`). A debt clock: each read
//! moves "paid until" forward by its bytes at the rate, and the next read waits until then.
//! Waits never outlast the runtime's poll timeout, so batches still commit on time, and the
//! once-per-flow tasks (heartbeats, checkpoints) run on their own tasks, untouched.

use std::time::{Duration, Instant};

/// A byte rate and how far the bytes read so far have paid it.
#[derive(Debug, Clone)]
pub struct Throttle {
    /// Bytes per second, at least 1.
    rate: u64,
    /// When the bytes read so far are paid for at `rate`.
    paid_until: Instant,
}

impl Throttle {
    /// A cap of `rate` bytes per second (at least 1), with nothing read yet at `now`.
    pub fn new(rate: u64, now: Instant) -> Self {
        Self { rate: rate.max(1), paid_until: now }
    }

    /// How long a read at `now` must wait: until the bytes read so far are paid for.
    pub fn wait(&self, now: Instant) -> Duration {
        self.paid_until.saturating_duration_since(now)
    }

    /// The most bytes one read takes: a quarter of a second's worth (at least 1), so the rate
    /// holds within a quarter second rather than in bursts of a whole batch.
    pub fn burst(&self) -> usize {
        usize::try_from(self.rate / 4).unwrap_or(usize::MAX).max(1)
    }

    /// Accounts `bytes` read at `now`: what was not yet paid for is paid after the earlier debt.
    pub fn spend(&mut self, bytes: usize, now: Instant) {
        let nanos = u128::try_from(bytes).unwrap_or(u128::MAX).saturating_mul(1_000_000_000) / u128::from(self.rate);
        let cost = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
        self.paid_until = self.paid_until.max(now) + cost;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_wait_until_their_bytes_are_paid_for_at_the_rate() {
        let t0 = Instant::now();
        let mut t = Throttle::new(1_000_000, t0);
        assert_eq!(t.wait(t0), Duration::ZERO, "nothing read: no wait");
        assert_eq!(t.burst(), 250_000, "a quarter second's worth");
        t.spend(250_000, t0);
        assert_eq!(t.wait(t0), Duration::from_millis(250));
        t.spend(500_000, t0 + Duration::from_millis(100));
        assert_eq!(t.wait(t0 + Duration::from_millis(100)), Duration::from_millis(650), "debts add up");
        assert_eq!(t.wait(t0 + Duration::from_secs(1)), Duration::ZERO, "paid");
        // Idle time is not banked: a read after a pause waits for its own bytes only.
        t.spend(100_000, t0 + Duration::from_secs(10));
        assert_eq!(t.wait(t0 + Duration::from_secs(10)), Duration::from_millis(100));
        assert_eq!(Throttle::new(3, t0).burst(), 1, "at least one byte, so a record is read");
    }
}
