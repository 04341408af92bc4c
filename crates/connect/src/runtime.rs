//! The loop that moves records from a [`Source`] to a [`Sink`]: poll → put → commit (records and
//! positions) → acknowledge, in batches bounded by records, bytes and time.
//!
//! Memory stays bounded whatever the source rate: the runtime never polls more than the room left
//! in the current batch, and a full batch is committed before the next poll.
//!
//! With a transactional sink each batch is one transaction (`begin` at its first record), and a
//! [`ConnectError::Retriable`] failure aborts it, rewinds the source to the last committed
//! positions and tries again after a backoff: nothing is skipped and nothing is committed twice.
//! Its records become visible only at the commit, so its batch is also committed as soon as a poll
//! finds the source drained (it returned less than it was allowed to take), once the batch is
//! [`RuntimeConfig::min_batch_wait`] old: the transaction boundary of MM2's exactly-once source
//! tasks (KIP-618's `transaction.boundary = poll`) with a floor. A catch-up, whose polls come back
//! full, still commits at the bounds.
//! Without transactions a batch is ended behind ([`Sink::commit_behind`]): the next batch is put
//! while the sink still awaits the last one's acks; the sink is flushed before a pause or a
//! stop, and saves what is acknowledged ([`Sink::save_acknowledged`]) while it waits for records.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use tokio::sync::watch;

use crate::{ConnectError, ConnectResult, Sink, Source, SourceOffset};

/// Batch bounds and retry backoff of a [`ConnectorRuntime`].
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// A batch is committed once it holds this many records. Default 50,000.
    pub max_batch_records: usize,
    /// A batch is committed once it holds this many bytes. Default 64 MiB.
    pub max_batch_bytes: usize,
    /// A non-empty batch is committed at most this long after its first record. Default 1 s.
    pub max_batch_wait: Duration,
    /// With a transactional sink, a batch is committed once it is this old (from its first
    /// record) and a poll finds the source drained; never later than [`Self::max_batch_wait`].
    /// Default 20 ms: a commit takes a few ms on a LAN (acks awaited, positions written, a
    /// transaction marker per partition), so this keeps a slot to at most 50 transactions a
    /// second while records become visible well within 100 ms.
    pub min_batch_wait: Duration,
    /// Longest single wait for records inside [`Source::poll`]. Default 100 ms.
    pub poll_timeout: Duration,
    /// Most bytes taken from the source per poll (the batch is filled by several polls), so the
    /// records held between poll and put stay few whatever the batch size: few enough to still
    /// be in the CPU's cache when put. Default 512 KiB.
    pub max_poll_bytes: usize,
    /// First wait before retrying an aborted batch; doubled per consecutive failure. Default 500 ms.
    pub retry_backoff: Duration,
    /// Longest wait between retries. Default 15 s.
    pub max_retry_backoff: Duration,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            max_batch_records: 50_000,
            max_batch_bytes: 64 << 20,
            max_batch_wait: Duration::from_secs(1),
            min_batch_wait: Duration::from_millis(20),
            poll_timeout: Duration::from_millis(100),
            max_poll_bytes: 512 << 10,
            retry_backoff: Duration::from_millis(500),
            max_retry_backoff: Duration::from_secs(15),
        }
    }
}

impl RuntimeConfig {
    /// The waits before the retries of consecutive aborted batches: [`Self::retry_backoff`],
    /// doubled up to [`Self::max_retry_backoff`] (backon's exponential backoff, no jitter).
    fn retry_waits(&self) -> ExponentialBackoff {
        let waits = ExponentialBuilder::new().with_min_delay(self.retry_backoff);
        waits.with_max_delay(self.max_retry_backoff).without_max_times().build()
    }
}

/// Where a runtime is in its life.
#[derive(Debug, Clone)]
pub enum RuntimeState {
    /// Moving records.
    Running,
    /// Batch committed; not polling until resumed.
    Paused,
    /// Shut down after a final drain.
    Stopped,
    /// Stopped on an error; nothing after the last committed positions was acknowledged.
    Failed(Arc<ConnectError>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    Run,
    Pause,
    Shutdown,
}

/// Controls a running [`ConnectorRuntime`] from another task.
#[derive(Clone)]
pub struct RuntimeHandle {
    command: Arc<watch::Sender<Command>>,
    state: watch::Receiver<RuntimeState>,
}

impl RuntimeHandle {
    /// Commits the current batch and stops polling until [`RuntimeHandle::resume`].
    pub fn pause(&self) {
        self.command.send_replace(Command::Pause);
    }
    /// Resumes polling after [`RuntimeHandle::pause`].
    pub fn resume(&self) {
        self.command.send_replace(Command::Run);
    }
    /// Asks for a final drain (commit, acknowledge) and a clean stop.
    pub fn shutdown(&self) {
        self.command.send_replace(Command::Shutdown);
    }
    /// The current state.
    pub fn state(&self) -> RuntimeState {
        self.state.borrow().clone()
    }
    /// Waits until the state satisfies `pred`, returning it.
    pub async fn wait_for(&mut self, pred: impl Fn(&RuntimeState) -> bool) -> RuntimeState {
        let reached = self.state.wait_for(|s| pred(s)).await.map(|s| s.clone());
        reached.unwrap_or_else(|_| self.state())
    }
}

/// Drives one source into one sink. See the module docs for the cycle.
pub struct ConnectorRuntime<K, V, So, Si> {
    source: So,
    sink: Si,
    config: RuntimeConfig,
    command: watch::Receiver<Command>,
    state: watch::Sender<RuntimeState>,
    _records: PhantomData<fn() -> (K, V)>,
}

/// Records put into the sink since the last commit.
#[derive(Default)]
struct Batch {
    /// Last offset per (topic, partition).
    positions: BTreeMap<(Arc<str>, i32), i64>,
    records: usize,
    bytes: usize,
    started: Option<Instant>,
}

impl Batch {
    fn positions(&self) -> Vec<SourceOffset> {
        self.positions
            .iter()
            .map(|((topic, partition), offset)| SourceOffset {
                topic: topic.clone(),
                partition: *partition,
                offset: *offset,
            })
            .collect()
    }
}

impl<K, V, So, Si> ConnectorRuntime<K, V, So, Si>
where
    K: Send,
    V: Send,
    So: Source<K, V>,
    Si: Sink<K, V>,
{
    /// A runtime and the handle that controls it.
    pub fn new(source: So, sink: Si, config: RuntimeConfig) -> (Self, RuntimeHandle) {
        let (command_tx, command) = watch::channel(Command::Run);
        let (state, state_rx) = watch::channel(RuntimeState::Running);
        let handle = RuntimeHandle { command: Arc::new(command_tx), state: state_rx };
        (Self { source, sink, config, command, state, _records: PhantomData }, handle)
    }

    /// Runs until shutdown (→ [`RuntimeState::Stopped`]) or an error that cannot be retried
    /// (→ [`RuntimeState::Failed`]); returns the final state. Source and sink are closed either way.
    pub async fn run(mut self) -> RuntimeState {
        let outcome = self.drive().await;
        if outcome.is_err() && self.sink.supports_transactions() {
            if let Err(e) = self.sink.abort().await {
                tracing::warn!(error = %e, "abort after failure also failed");
            }
        }
        let closed = async {
            self.sink.close().await?;
            self.source.close().await
        }
        .await;
        let final_state = match outcome.and(closed) {
            Ok(()) => RuntimeState::Stopped,
            Err(e) => RuntimeState::Failed(Arc::new(e)),
        };
        self.state.send_replace(final_state.clone());
        final_state
    }

    /// Runs batches; a retriable failure of a transactional sink aborts the batch, rewinds the
    /// source and retries after a doubling backoff (reset by the next committed batch).
    async fn drive(&mut self) -> ConnectResult<()> {
        let mut backoff = self.config.retry_waits();
        loop {
            let mut batch = Batch::default();
            let failure = match self.batches(&mut batch, &mut backoff).await {
                Ok(()) => return Ok(()),
                Err(e) if e.is_retriable() && self.sink.supports_transactions() => e,
                Err(e) => return Err(e),
            };
            let wait = backoff.next().unwrap_or(self.config.max_retry_backoff);
            tracing::warn!(error = %failure, retry_in_ms = wait.as_millis() as u64, "batch aborted; rewinding the source and retrying");
            self.sink.abort().await?;
            self.source.rewind().await?;
            let mut command = self.command.clone();
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                // A shutdown during the backoff stops at once: the aborted batch is read again at start.
                Ok(_) = command.wait_for(|c| *c == Command::Shutdown) => return Ok(()),
            }
        }
    }

    /// Polls, puts and commits batches until shutdown or an error.
    async fn batches(&mut self, batch: &mut Batch, backoff: &mut ExponentialBackoff) -> ConnectResult<()> {
        // How old a batch must be to be committed when the source is drained (module docs).
        let floor =
            self.sink.supports_transactions().then(|| self.config.min_batch_wait.min(self.config.max_batch_wait));
        loop {
            let command = *self.command.borrow_and_update();
            match command {
                Command::Shutdown => return self.commit_durably(batch, backoff).await,
                Command::Pause => {
                    self.commit_durably(batch, backoff).await?;
                    self.state.send_replace(RuntimeState::Paused);
                    let _ = self.command.wait_for(|c| *c != Command::Pause).await;
                    self.state.send_replace(RuntimeState::Running);
                    continue;
                }
                Command::Run => {}
            }
            // Before the floor, a poll waits no longer than the floor: the batch is committed then
            // if nothing more arrived.
            let timeout = match batch.started {
                Some(t) => {
                    let until = floor.filter(|f| t.elapsed() < *f).unwrap_or(self.config.max_batch_wait);
                    until.saturating_sub(t.elapsed()).min(self.config.poll_timeout)
                }
                None => self.config.poll_timeout,
            };
            let max_records = self.config.max_batch_records - batch.records;
            let max_bytes =
                self.config.max_batch_bytes.saturating_sub(batch.bytes).clamp(1, self.config.max_poll_bytes);
            let records = self.source.poll(max_records, max_bytes, timeout).await?;
            let (polled, mut polled_bytes) = (records.len(), 0);
            let starts = self.source.positions_without_records();
            if records.is_empty() && starts.is_empty() && self.sink.behind() {
                // Nothing to read: what the sink holds back is saved now, not at the next record
                // (as far as it is written: a partition stuck at the target holds back only itself).
                self.sink.save_acknowledged().await?;
            }
            if (!records.is_empty() || !starts.is_empty()) && batch.started.is_none() {
                batch.started = Some(Instant::now());
                self.sink.begin().await?;
            }
            for so in starts {
                // A record of the partition already in the batch is further on.
                batch.positions.entry((so.topic, so.partition)).or_insert(so.offset);
            }
            if !records.is_empty() {
                // Records of a partition come in offset order: only the last one per run matters.
                let mut last: Option<&SourceOffset> = None;
                for r in &records {
                    let so = &r.source_offset;
                    if let Some(prev) = last.filter(|p| p.partition != so.partition || p.topic != so.topic) {
                        batch.positions.insert((prev.topic.clone(), prev.partition), prev.offset);
                    }
                    last = Some(so);
                    polled_bytes += r.size_bytes;
                }
                if let Some(so) = last {
                    batch.positions.insert((so.topic.clone(), so.partition), so.offset);
                }
                batch.bytes += polled_bytes;
                batch.records += polled;
                self.sink.put(records).await?;
            }
            // Less than the poll was allowed to take: nothing more was waiting at the source.
            let drained = polled < max_records && polled_bytes < max_bytes;
            let full = batch.records >= self.config.max_batch_records || batch.bytes >= self.config.max_batch_bytes;
            let age = batch.started.map(|t| t.elapsed());
            let due = age.is_some_and(|a| a >= self.config.max_batch_wait);
            let idle = drained && floor.is_some_and(|f| age.is_some_and(|a| a >= f));
            if full || due || idle {
                self.commit(batch, backoff).await?;
            }
        }
    }

    /// [`Self::commit`], then a flush when the sink is behind: before a pause or a stop,
    /// every record and position is durable.
    async fn commit_durably(&mut self, batch: &mut Batch, backoff: &mut ExponentialBackoff) -> ConnectResult<()> {
        self.commit(batch, backoff).await?;
        if self.sink.behind() {
            self.sink.flush().await?;
        }
        Ok(())
    }

    /// Stages the batch's positions and commits it through the sink (behind, without
    /// transactions: [`Sink::commit_behind`]), then acknowledges the positions to the source: a
    /// saved position never covers a record the sink has not made durable. A sink that commits
    /// behind is acknowledged before its records are durable; without transactions nothing is
    /// rewound, so the acknowledgement only reports progress.
    async fn commit(&mut self, batch: &mut Batch, backoff: &mut ExponentialBackoff) -> ConnectResult<()> {
        if batch.started.is_none() {
            return Ok(());
        }
        let positions = batch.positions();
        self.sink.stage_positions(&positions);
        if self.sink.supports_transactions() {
            self.sink.commit().await?;
        } else {
            self.sink.commit_behind().await?;
        }
        tracing::debug!(records = batch.records, bytes = batch.bytes, partitions = positions.len(), "batch committed");
        self.source.acknowledge(&positions).await?;
        *batch = Batch::default();
        *backoff = self.config.retry_waits();
        Ok(())
    }
}
