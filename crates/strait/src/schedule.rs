//! The periodic control tasks' one scheduler (as MM2's `Scheduler`): heartbeats, checkpoints,
//! topic config and ACL sync and the lag watch each say which rounds they run and how often
//! ([`Periodic`]); [`run`] times them, stops them at `cancel`, and logs a failed round once,
//! in one wording, to be tried again at its next interval.

use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// One kind of round of a periodic task.
pub struct Every {
    /// The round's name in logs ("heartbeat", "topic config sync", ...).
    pub name: &'static str,
    /// Time between two rounds' starts; a round that overruns delays the next (tokio's
    /// `MissedTickBehavior::Delay`).
    pub interval: Duration,
    /// Time before the first round (zero: at once).
    pub first: Duration,
}

impl Every {
    /// `name` every `interval`, the first at once.
    pub fn now_and_every(name: &'static str, interval: Duration) -> Self {
        Self { name, interval, first: Duration::ZERO }
    }
}

/// A task of periodic rounds.
#[async_trait]
pub trait Periodic: Send {
    /// The kinds of round, in the order [`Self::round`] numbers them.
    fn rounds(&self) -> Vec<Every>;

    /// Runs round `index` of [`Self::rounds`]. Errors: the round failed (logged by [`run`] at
    /// warn, and tried again at the next interval).
    async fn round(&mut self, index: usize) -> Result<(), String>;
}

/// Runs `task`'s rounds, each at its interval, until `cancel`, which also cuts short a round under
/// way. Each failure is logged at warn with `flow` and the round's name.
pub async fn run(flow: &str, mut task: impl Periodic, cancel: CancellationToken) {
    let rounds = task.rounds();
    let start = Instant::now();
    let mut due: Vec<Instant> = rounds.iter().map(|r| start + r.first).collect();
    loop {
        let Some((index, at)) = due.iter().copied().enumerate().min_by_key(|(_, at)| *at) else { return };
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep_until(at) => {}
        }
        // Late (a round overran, or the runtime was busy): the next comes an interval after now.
        due[index] = Instant::now().max(at) + rounds[index].interval;
        // A round waiting on a cluster that does not answer (up to a metadata timeout per call)
        // must not hold a stopping flow: rounds only read, or write what the next round writes
        // again, so one cut short loses nothing.
        let outcome = tokio::select! {
            _ = cancel.cancelled() => return,
            outcome = task.round(index) => outcome,
        };
        if let Err(error) = outcome {
            let name = rounds[index].name;
            tracing::warn!(flow, error, "{name} failed; retrying at the next interval");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Counts its rounds of each kind; the slow one fails.
    struct Counting(Arc<Mutex<Vec<u32>>>);

    #[async_trait]
    impl Periodic for Counting {
        fn rounds(&self) -> Vec<Every> {
            vec![
                Every::now_and_every("fast", Duration::from_millis(10)),
                Every { name: "slow", interval: Duration::from_millis(100), first: Duration::from_millis(50) },
            ]
        }

        async fn round(&mut self, index: usize) -> Result<(), String> {
            self.0.lock().unwrap()[index] += 1;
            match index {
                1 => Err("refused".into()),
                _ => Ok(()),
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_round_runs_at_its_interval_until_cancelled() {
        let (cancel, counts) = (CancellationToken::new(), Arc::new(Mutex::new(vec![0, 0])));
        let task = tokio::spawn(run("f", Counting(counts.clone()), cancel.clone()));
        tokio::time::sleep(Duration::from_millis(255)).await;
        cancel.cancel();
        task.await.unwrap();
        // fast: at 0, 10, ..., 250 ms; slow: at 50, 150 and 250 ms, its failures not stopping it.
        assert_eq!(*counts.lock().unwrap(), vec![26, 3]);
        // Nothing runs once cancelled.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(*counts.lock().unwrap(), vec![26, 3]);
    }

    /// Its one round waits for ever, as a metadata call to a cluster that does not answer would.
    struct Stuck;

    #[async_trait]
    impl Periodic for Stuck {
        fn rounds(&self) -> Vec<Every> {
            vec![Every::now_and_every("stuck", Duration::from_secs(1))]
        }

        async fn round(&mut self, _: usize) -> Result<(), String> {
            std::future::pending().await
        }
    }

    #[tokio::test(start_paused = true)]
    async fn cancel_cuts_short_a_round_under_way() {
        let cancel = CancellationToken::new();
        let task = tokio::spawn(run("f", Stuck, cancel.clone()));
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.cancel();
        tokio::time::timeout(Duration::from_millis(10), task).await.expect("stopped at cancel").unwrap();
    }
}
