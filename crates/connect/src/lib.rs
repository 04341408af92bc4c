//! Strait's connector SPI: a small take on Kafka Connect's task model.
//!
//! A [`Source`] yields [`ConnectRecord`]s tagged with their [`SourceOffset`]; a [`Sink`] writes
//! them and, in the same commit, the source positions they reach; the [`ConnectorRuntime`] drives
//! poll → put → commit → acknowledge, so that a saved position never covers a record the sink has
//! not made durable, and (with a transactional sink) aborts, rewinds and retries a failed batch.

mod error;
mod record;
mod runtime;
mod traits;

pub use error::{Cause, ConnectError, ConnectResult, ErrorKind};
pub use record::{ConnectRecord, Header, SourceOffset};
pub use runtime::{ConnectorRuntime, RuntimeConfig, RuntimeHandle, RuntimeState};
pub use traits::{Sink, Source};
