//! The two connector roles, after Kafka Connect's `SourceTask` and `SinkTask`.

use std::time::Duration;

use async_trait::async_trait;

#[cfg(doc)]
use crate::ConnectError;
use crate::{ConnectRecord, ConnectResult, SourceOffset};

/// Reads records from an external system. It never saves its own positions: the [`Sink`] saves
/// them with the records ([`Sink::stage_positions`], then [`Sink::commit`]), and the source is
/// told where to start.
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

/// Writes records to an external system: the seed's contract (`put`, `flush`, `begin`, `commit`,
/// `abort`, `close`, after Kafka Connect's `SinkTask`), extended by [`Sink::stage_positions`] for
/// a sink that also saves the source positions its records reach.
///
/// Records handed to [`Sink::put`] may be buffered; they are durable only once [`Sink::flush`] or
/// [`Sink::commit`] returns `Ok`. The [`crate::ConnectorRuntime`] drives a batch as `begin` (at
/// its first record), `put`..., `stage_positions`, `commit`; a failed batch of a transactional sink
/// as `abort`. A sink that saves positions never saves one that covers a record not yet durable.
///
/// Errors name the first record that could not be written; [`ConnectError::Retriable`] when
/// trying the batch again may succeed.
#[async_trait]
pub trait Sink<K, V>: Send {
    /// Accepts a batch; may apply backpressure by awaiting while its buffers are full.
    async fn put(&mut self, batch: Vec<ConnectRecord<K, V>>) -> ConnectResult<()>;

    /// Makes every record put so far durable (awaits every pending write, flushes the client),
    /// or fails naming the first record that could not be written. A sink that saves positions
    /// without transactions saves the staged ones here too (its commit is this flush); it may
    /// still be saving them when it returns, so records keep flowing meanwhile: it then saves
    /// them before its next flush, commit or close returns, and one of those reports a failure to
    /// save them. With transactions, nothing put becomes visible before [`Sink::commit`].
    async fn flush(&mut self) -> ConnectResult<()>;

    /// Whether [`Sink::begin`] / [`Sink::commit`] / [`Sink::abort`] give exactly-once batches.
    fn supports_transactions(&self) -> bool {
        false
    }

    /// Starts a transaction covering the next batch. No-op without transactions.
    async fn begin(&mut self) -> ConnectResult<()> {
        Ok(())
    }

    /// Hands the sink `positions` (the last source offset per partition that the records put
    /// since the last commit reach) to save at the next [`Sink::commit`], so a restart resumes
    /// after them; a later call before that commit replaces them, and [`Sink::abort`] drops them.
    /// Default: ignored, for a sink that does not save positions (the source is then told where
    /// to start by other means).
    fn stage_positions(&mut self, positions: &[SourceOffset]) {
        let _ = positions;
    }

    /// Commits the current batch: every record put since the last commit made durable, then the
    /// staged positions saved (see [`Sink::stage_positions`]). With transactions, records and
    /// positions become visible together or not at all. Without, this is [`Sink::flush`] (the
    /// default), which may still be saving the positions when it returns.
    async fn commit(&mut self) -> ConnectResult<()> {
        self.flush().await
    }

    /// Ends the current batch as [`Sink::commit`] does without transactions, but may return
    /// before its records are durable: the sink then saves its staged positions once they are,
    /// in order, while the next batch's records are put — so a long round trip to the target is
    /// not an idle link at every batch. Until then [`Sink::behind`] is true, and [`Sink::flush`]
    /// (or [`Sink::close`]) makes everything durable. The runtime calls it instead of `commit`
    /// for a sink without transactions. Default: [`Sink::commit`].
    async fn commit_behind(&mut self) -> ConnectResult<()> {
        self.commit().await
    }

    /// Whether the sink holds back work a [`Sink::flush`] would finish: a batch ended by
    /// [`Sink::commit_behind`] not yet durable, or records put but not yet sent. The runtime
    /// then flushes before it pauses or stops, and calls [`Sink::save_acknowledged`] when a
    /// poll finds nothing to put. Default: false.
    fn behind(&self) -> bool {
        false
    }

    /// Saves what of the batches ended by [`Sink::commit_behind`] is durable by now, waiting
    /// briefly for the rest but not for all of it: a record that cannot be written yet (its
    /// partition's leader does not answer) holds back only its own partition's positions, not
    /// the flow. The runtime calls it while [`Sink::behind`] and the source has nothing to put.
    /// Errors: as [`Sink::flush`]. Default: [`Sink::flush`].
    async fn save_acknowledged(&mut self) -> ConnectResult<()> {
        self.flush().await
    }

    /// Aborts the current transaction: nothing put since [`Sink::begin`] becomes visible, and
    /// staged positions are dropped. Default: nothing to do (no transactions).
    async fn abort(&mut self) -> ConnectResult<()> {
        Ok(())
    }

    /// Releases the sink's resources, once what it still writes in the background is written
    /// (reporting its error). The runtime commits or aborts the last batch first.
    async fn close(&mut self) -> ConnectResult<()>;
}
