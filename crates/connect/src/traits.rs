//! The two connector roles, after Kafka Connect's `SourceTask` and `SinkTask`.

use std::time::Duration;

use async_trait::async_trait;

use crate::{ConnectError, ConnectRecord, ConnectResult, SourceOffset};

/// Reads records from an external system and remembers how far it got.
///
/// Positions passed to [`Source::checkpoint`] and [`Source::acknowledge`] are the
/// [`SourceOffset`] of the last record handled per partition; a restarted source resumes after it.
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

    /// Durably saves `positions` so a restart resumes after them. The runtime calls it only
    /// once the sink has made every record up to these positions durable.
    async fn checkpoint(&mut self, positions: &[SourceOffset]) -> ConnectResult<()>;

    /// Makes the next poll of `position`'s partition start at `position.offset`.
    async fn seek(&mut self, position: &SourceOffset) -> ConnectResult<()>;

    /// Tells the source that records up to `positions` are saved and may be released.
    async fn acknowledge(&mut self, positions: &[SourceOffset]) -> ConnectResult<()>;

    /// Releases the source's resources.
    async fn close(&mut self) -> ConnectResult<()>;
}

/// Writes records to an external system.
///
/// Records handed to [`Sink::put`] may be buffered; they are durable only once [`Sink::flush`]
/// (or [`Sink::commit`]) returns `Ok`.
#[async_trait]
pub trait Sink<K, V>: Send {
    /// Accepts a batch; may apply backpressure by awaiting while its buffers are full.
    async fn put(&mut self, batch: Vec<ConnectRecord<K, V>>) -> ConnectResult<()>;

    /// Makes every record put so far durable, or fails naming the first that could not be.
    async fn flush(&mut self) -> ConnectResult<()>;

    /// Whether [`Sink::begin`] / [`Sink::commit`] / [`Sink::abort`] give exactly-once batches.
    fn supports_transactions(&self) -> bool {
        false
    }

    /// Starts a transaction covering the next batch. No-op without transactions.
    async fn begin(&mut self) -> ConnectResult<()> {
        Ok(())
    }

    /// Commits the current batch; without transactions this is [`Sink::flush`].
    async fn commit(&mut self) -> ConnectResult<()> {
        self.flush().await
    }

    /// Aborts the current transaction. Errors when the sink has no transactions.
    async fn abort(&mut self) -> ConnectResult<()> {
        Err(ConnectError::transaction("abort", "this sink does not support transactions"))
    }

    /// Flushes what is in flight and releases the sink's resources.
    async fn close(&mut self) -> ConnectResult<()>;
}
