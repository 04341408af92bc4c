//! The delivery mode as a type (after Arroyo's `ConsistencyMode`): each variant owns the state
//! only its mode has, so "are we transactional?" is a `match`.

use std::sync::Arc;
use std::time::Instant;

use strait_connect::{ConnectError, ConnectResult, SourceOffset};

use super::at_least_once::AtLeastOnce;
use super::errors::Retry;
use super::exactly_once::ExactlyOnce;
use super::mm2_offsets::Mm2Offsets;
use super::target::Unwritten;
use super::writer::Writer;
use crate::config::{ClusterConfig, Delivery, Flow};

/// How the sink makes a batch durable: the flow's `delivery`.
pub enum Mode {
    /// Records by the gap-less idempotent producer; offset syncs and positions by the slot's state
    /// producer, after them ([`AtLeastOnce`]; boxed, being the larger).
    AtLeastOnce(Box<AtLeastOnce>),
    /// One transaction per batch holding records, offset syncs and positions ([`ExactlyOnce`]).
    ExactlyOnce(ExactlyOnce),
}

impl Mode {
    /// The mode of `flow`'s `slot`, started (see [`AtLeastOnce::start`]), for a record producer
    /// already started. Errors: as [`AtLeastOnce::start`].
    pub async fn start(
        flow: &Arc<Flow>,
        slot: u32,
        syncs_cluster: &ClusterConfig,
        syncs_topic: &str,
    ) -> ConnectResult<Self> {
        Ok(match flow.delivery() {
            Delivery::AtLeastOnce => {
                Self::AtLeastOnce(Box::new(AtLeastOnce::start(flow, slot, syncs_cluster, syncs_topic).await?))
            }
            Delivery::ExactlyOnce { transaction_timeout } => {
                Self::ExactlyOnce(ExactlyOnce::new(transaction_timeout, Mm2Offsets::of(flow)))
            }
        })
    }

    /// Notes that a `put` or `flush` begins ([`AtLeastOnce::entered`]), returning when.
    pub fn entered(&mut self) -> Instant {
        match self {
            Self::AtLeastOnce(alo) => alo.entered(),
            Self::ExactlyOnce(_) => Instant::now(),
        }
    }

    /// Notes that a `put` or `flush` that began at `started` returned ([`AtLeastOnce::returned`]).
    pub fn returned(&mut self, started: Instant) {
        if let Self::AtLeastOnce(alo) = self {
            alo.returned(started);
        }
    }

    /// Writes MM2's source offsets of `positions` in a transaction of their own (with
    /// `write_mm2_offsets`, when the slot starts: [`super::mm2_offsets::at_start`]).
    pub async fn write_mm2_offsets(&mut self, w: &mut Writer, positions: Vec<SourceOffset>) -> ConnectResult<()> {
        match self {
            Self::AtLeastOnce(alo) => alo.write_mm2_offsets(positions).await,
            Self::ExactlyOnce(eos) => eos.write_mm2_offsets(w, positions).await,
        }
    }

    /// The error for a record, sync, position or whole batch that could not be written;
    /// at-least-once saves the positions of what was written before it first
    /// ([`AtLeastOnce::stop_on`]).
    pub async fn stop_on(&mut self, w: &mut Writer, unwritten: Unwritten) -> ConnectError {
        match self {
            Self::AtLeastOnce(alo) => alo.stop_on(w, unwritten).await,
            Self::ExactlyOnce(eos) => w.unwritten_error(unwritten, eos.retry()),
        }
    }

    /// How a failed write is classified ([`Retry`]).
    pub fn retry(&self) -> Retry {
        match self {
            Self::AtLeastOnce(_) => Retry::Never,
            Self::ExactlyOnce(eos) => eos.retry(),
        }
    }
}
