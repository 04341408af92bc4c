//! Strait's connector SPI: a small take on Kafka Connect's task model.
//!
//! A [`Source`] yields [`ConnectRecord`]s tagged with their [`SourceOffset`]; a [`Sink`] writes
//! them; the [`ConnectorRuntime`] drives poll → put → commit → save checkpoint → acknowledge, so
//! that a saved checkpoint never covers a record the sink has not made durable.

mod error;
mod record;
mod runtime;
mod traits;

pub use error::{Cause, ConnectError, ConnectResult};
pub use record::{ConnectRecord, Header, SourceOffset};
pub use runtime::{ConnectorRuntime, RuntimeConfig, RuntimeHandle, RuntimeState};
pub use traits::{Sink, Source};
