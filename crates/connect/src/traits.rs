//! The two connector roles, after Kafka Connect's `SourceTask` and `SinkTask`.

use std::time::Duration;

use async_trait::async_trait;

use crate::{ConnectError, ConnectRecord, ConnectResult, SourceOffset};

/// Reads records from an external system. It never saves its own positions: the [`Sink`] saves
/// them with the records ([`Sink::commit`]), and the source is told where to start.
///
/// Positions passed to [`Source::acknowledge`] are the [`SourceOffset`] of the last record handled
/// per partition; the source resumes after them.
#[async_trait]
pub trait Source<K, V>: Send {
    /// Returns up to `max_records` records totalling about `max_bytes` bytes, waiting at most
    /// `timeout` for the first one; an empty vector means nothing arrived in time.
    async fn poll(
        &mut self,
        max_records: usize,
        max_bytes: usize,
        timeout: Duration,
    ) -> ConnectResult<Vec<ConnectRecord<K, V>>>;

    /// Positions to save though no record reaches them, each the [`SourceOffset`] before where a
    /// partition starts: a source starting a partition at its end (say, Strait's `start_from =
    /// "latest"`) has it saved before any record arrives, so a restart does not skip what is
    /// written meanwhile. The runtime calls it after each poll and commits them with the current
    /// batch (beginning one if none), behind any record of the same partition, then acknowledges
    /// them as usual; a source offers them again after a rewind until acknowledged. None by default.
    fn positions_without_records(&mut self) -> Vec<SourceOffset> {
        Vec::new()
    }

    /// Tells the source that records up to `positions` are committed: a later
    /// [`Source::rewind`] never goes back before them, and they may be released.
    async fn acknowledge(&mut self, positions: &[SourceOffset]) -> ConnectResult<()>;

    /// Makes the next poll of every partition start right after its last acknowledged position
    /// (or where the partition started, if none), so every record polled since is read again.
    /// The runtime calls it after a transactional sink aborted a batch.
    async fn rewind(&mut self) -> ConnectResult<()>;

    /// Releases the source's resources.
    async fn close(&mut self) -> ConnectResult<()>;
}

/// Writes records, and the source positions they reach, to an external system.
///
/// Records handed to [`Sink::put`] may be buffered; they are durable only once [`Sink::commit`]
/// returns `Ok`.
#[async_trait]
pub trait Sink<K, V>: Send {
    /// Accepts a batch; may apply backpressure by awaiting while its buffers are full.
    async fn put(&mut self, batch: Vec<ConnectRecord<K, V>>) -> ConnectResult<()>;

    /// Makes every record put since the last commit durable, then durably saves `positions` (the
    /// last source offset per partition those records reach) so a restart resumes after them.
    /// A saved position never covers a record that is not durable; with transactions, records and
    /// positions become visible together or not at all. Without transactions a sink may still be
    /// saving `positions` when it returns, so records keep flowing meanwhile: it then saves them
    /// before its next commit or its close returns, and either reports a failure to save them.
    /// Errors name the first record that could not be written; [`ConnectError::Retriable`] when
    /// trying the batch again may succeed.
    async fn commit(&mut self, positions: &[SourceOffset]) -> ConnectResult<()>;

    /// Whether [`Sink::begin`] / [`Sink::commit`] / [`Sink::abort`] give exactly-once batches.
    fn supports_transactions(&self) -> bool {
        false
    }

    /// Starts a transaction covering the next batch. No-op without transactions.
    async fn begin(&mut self) -> ConnectResult<()> {
        Ok(())
    }

    /// Aborts the current transaction: nothing put since [`Sink::begin`] becomes visible.
    /// Errors when the sink has no transactions.
    async fn abort(&mut self) -> ConnectResult<()> {
        Err(ConnectError::transaction("abort", "this sink does not support transactions"))
    }

    /// Releases the sink's resources. The runtime commits or aborts the last batch first.
    async fn close(&mut self) -> ConnectResult<()>;
}
