//! What the fetch task and the reader share: each assigned partition's reading, and the queue
//! of batches fetched and not yet taken.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use backon::ExponentialBackoff;
use strait_connect::ConnectError;
use strait_wire::{Batch, Uuid};

/// Where an assigned partition is read.
pub(super) struct Next {
    /// The next offset to fetch; `None`: its log start, to be asked.
    pub(super) offset: Option<i64>,
    /// The leader epoch of the last batch fetched (-1 unknown), for KIP-320's divergence check.
    pub(super) epoch: i32,
    /// The assignment this read belongs to.
    pub(super) generation: u64,
    /// The offset after the last batch handed on (for an unassignment's positions).
    pub(super) handed: Option<i64>,
    /// The id of the topic it is read under (nil: the id the source's metadata gives).
    pub(super) topic_id: Uuid,
    /// The last stable offset its leader last answered under that id.
    pub(super) end: Option<i64>,
    /// After an error answer: not asked before the instant; the holds of the next errors.
    pub(super) held: Option<(Instant, ExponentialBackoff)>,
}

/// Where an unassigned partition stood.
pub(in crate::source) struct Left {
    /// The offset after the last batch handed on.
    pub(in crate::source) handed: Option<i64>,
    /// The last stable offset its leader last answered under the id it was read by.
    pub(in crate::source) end: Option<i64>,
}

/// A fetched batch waiting to be taken.
pub(super) struct Queued {
    pub(super) topic: String,
    pub(super) partition: i32,
    pub(super) generation: u64,
    /// The source offset of the batch's last record (a batch written anew without a compacted
    /// batch's gaps ends lower).
    pub(super) last: i64,
    pub(super) batch: Batch,
}

#[derive(Default)]
pub(super) struct Shared {
    pub(super) partitions: HashMap<(String, i32), Next>,
    pub(super) queue: VecDeque<Queued>,
    pub(super) queued_bytes: usize,
    pub(super) generations: u64,
    /// A failure retrying cannot mend (refused credentials, a batch that cannot be read), for
    /// the next drain to return.
    pub(super) failed: Option<ConnectError>,
    /// A leader answered that a partition's topic id is unknown since the source last asked.
    pub(super) topic_gone: bool,
}

/// `shared` locked, whatever a panic elsewhere left in it.
pub(super) fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
