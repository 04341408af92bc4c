//! When a replicated record must produce an offset sync (MM2 3.7+
//! `OffsetSyncWriter.PartitionState`).
//!
//! One [`PartitionState`] per source partition. After each data record is acknowledged by the
//! target, call [`PartitionState::update`] with its upstream and downstream offsets:
//! [`Emit::Now`] means write an [`OffsetSync`](crate::OffsetSync) for that record immediately;
//! [`Emit::Delayed`] means the record is remembered as the partition's pending sync, which the
//! caller writes later via [`PartitionState::take_delayed`] (MM2 does this on every offset
//! flush, `offset.flush.interval.ms`, 60 s by default) so that quiet partitions converge.

use crate::offsets::{DownstreamOffset, UpstreamOffset};

/// MM2's default `offset.lag.max`, in records.
pub const DEFAULT_OFFSET_LAG_MAX: u64 = 100;

/// Outcome of [`PartitionState::update`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emit {
    /// Write a sync for this record now; the state already counts it as written.
    Now,
    /// No sync needed yet; the record is now the partition's pending delayed sync.
    Delayed,
}

/// Offset-sync bookkeeping for one source partition (MM2 `OffsetSyncWriter.PartitionState`).
///
/// Starts with no previous record and no sync written, so the first record always syncs.
/// Offsets are compared with `i128` arithmetic, so extreme values cannot overflow.
#[derive(Debug, Clone)]
pub struct PartitionState {
    /// Upstream offset of the previous record, `-1` before the first.
    prev_upstream: i64,
    /// Downstream offset of the previous record, `-1` before the first.
    prev_downstream: i64,
    /// Downstream offset of the last sync written, `-1` before the first.
    last_sync_downstream: i64,
    /// Newest record not yet synced, if any.
    delayed: Option<(UpstreamOffset, DownstreamOffset)>,
}

impl Default for PartitionState {
    fn default() -> Self {
        Self::new()
    }
}

impl PartitionState {
    /// Fresh state: no previous record, no sync yet, nothing pending.
    pub fn new() -> Self {
        Self { prev_upstream: -1, prev_downstream: -1, last_sync_downstream: -1, delayed: None }
    }

    /// Records that the record at upstream offset `up` was acknowledged at downstream offset
    /// `down`, with MM2's `offset.lag.max` = `offset_lag_max` (records; 0 = sync every record).
    ///
    /// Returns [`Emit::Now`] if any of these holds, after which `down` counts as the last sync
    /// written and any pending delayed sync is dropped (it is superseded):
    /// 1. no sync has been written for this partition yet;
    /// 2. `down - (last_sync_down + 1) >= offset_lag_max` (a translation would be too stale);
    /// 3. `up - prev_up != 1` (upstream gap or rewind: compaction, transaction markers, restart);
    /// 4. `down < prev_down` (the target partition was truncated or recreated).
    ///
    /// Otherwise stores `(up, down)` as the pending delayed sync (replacing an older one) and
    /// returns [`Emit::Delayed`]. In both cases `(up, down)` becomes the previous record.
    pub fn update(&mut self, up: UpstreamOffset, down: DownstreamOffset, offset_lag_max: u64) -> Emit {
        let (u, d) = (i128::from(up.0), i128::from(down.0));
        let no_sync_yet = self.last_sync_downstream == -1;
        let too_stale = d - (i128::from(self.last_sync_downstream) + 1) >= i128::from(offset_lag_max);
        let upstream_gap = u - i128::from(self.prev_upstream) != 1;
        let downstream_truncated = d < i128::from(self.prev_downstream);
        self.prev_upstream = up.0;
        self.prev_downstream = down.0;
        if no_sync_yet || too_stale || upstream_gap || downstream_truncated {
            self.last_sync_downstream = down.0;
            self.delayed = None;
            Emit::Now
        } else {
            self.delayed = Some((up, down));
            Emit::Delayed
        }
    }

    /// Removes and returns the pending delayed sync `(up, down)`, if any; the caller must write
    /// it. It then counts as written (`last_sync_down = down`).
    ///
    /// Difference from MM2: promoting a delayed sync in MM2 does not update the partition's
    /// last-sync offset, so MM2 may emit the next sync a little earlier than this does. Both
    /// keep every translation at most `offset.lag.max` records behind.
    pub fn take_delayed(&mut self) -> Option<(UpstreamOffset, DownstreamOffset)> {
        let taken = self.delayed.take()?;
        self.last_sync_downstream = taken.1 .0;
        Some(taken)
    }

    /// The pending delayed sync `(up, down)`, if any, without taking it.
    pub fn delayed(&self) -> Option<(UpstreamOffset, DownstreamOffset)> {
        self.delayed
    }

    /// Downstream offset of the last sync counted as written, `None` before the first.
    pub fn last_sync_downstream(&self) -> Option<DownstreamOffset> {
        (self.last_sync_downstream != -1).then_some(DownstreamOffset(self.last_sync_downstream))
    }
}
