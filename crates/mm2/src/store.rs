//! Offset translation from the offset-syncs topic (MM2 `OffsetSyncStore`, 3.5+ layout).
//!
//! The checkpoint side of a replication flow reads every [`OffsetSync`] of the offset-syncs
//! topic into an [`OffsetSyncStore`] and asks it to translate source consumer-group offsets
//! into target offsets ([`OffsetSyncStore::translate`]).
//!
//! Per source partition the store keeps [`SYNC_HISTORY_SLOTS`] slots, slot 0 the newest sync.
//! Older slots hold older syncs, spaced roughly exponentially, so a group that lags far behind
//! the head can still be translated, with precision that degrades with its distance from the
//! head. The layout obeys MM2's four invariants, where `up[i]` is the upstream offset of slot
//! `i` and `i < j` are two slots holding **different** syncs:
//!
//! - **A**: slot 0 is the newest sync applied;
//! - **B** (not too old): `up[i] <= up[j] + 2^j - 2^i`, so `up[0] - up[j] < 2^j`;
//! - **C** (not too close): `up[i] >= up[j] + 2^max(i-2, 0)`;
//! - **D**: slot 63 is the oldest sync still usable: the last sync of the initial read (or the
//!   first one after it if the initial read saw none for the partition), or the sync that
//!   caused the last rewind. This holds while the partition's upstream offsets span less than
//!   `2^62`; a bigger jump breaks B even for slot 63, which is then replaced (as in MM2).
//!
//! Bounds in B and C are exact integers: a bound above `i64::MAX` makes B hold and C fail, as
//! MM2's wrapping `long` arithmetic does for non-negative offsets. The update follows MM2's
//! `updateSyncArray` and reproduces the translations of MM2's `OffsetSyncStoreTest`.
//!
//! # Guarantees of [`translate`](OffsetSyncStore::translate)
//!
//! Let `s` be the sync used for a group offset `G`, `head` the newest sync (slot 0) and
//! `i` the slot `s` was found in.
//!
//! - **No skip**: `s.upstream <= G`, and the answer is `s.downstream` (if equal) or
//!   `s.downstream + 1`. Every record with upstream offset `>= G` was replicated at or after
//!   that answer, so a consumer resuming there may re-read records but never misses one
//!   (property-tested against replications whose syncs come from
//!   [`PartitionState`](crate::PartitionState)).
//! - **Coverage**: once ready, `G` translates if and only if `G >= up[63]` (invariant D).
//! - **Precision, proven from B**: if `i >= 1`, `G - s.upstream < 2^(i-1)` and
//!   `head.upstream - s.upstream < 2^i`. Slot `i` is reached only for groups behind slot
//!   `i - 1`, so the error grows with the distance `head.upstream - G`.
//! - **Precision, checked exhaustively for syncs at every offset** (no gaps, up to 1000 syncs):
//!   `G - s.upstream <= 2 * (head.upstream - G)`. E.g. after syncs at `0..=999` the distinct
//!   slots are `999, 998, 996, 992, 984, 976, 960, 896, 768, 512, 0`, so `G = 600` translates
//!   from 512 and `G = 500` from 0.
//! - **Precision, measured only** (random and hill-climbed gap sequences; not a guarantee): the
//!   largest `(G - s.upstream) / (head.upstream - G + g)` found was about 5.8, where `g` is
//!   the gap between the two applied syncs around `G`. The worst cases are young histories,
//!   where many slots still hold the oldest sync.

use std::collections::HashMap;

use crate::codec::OffsetSync;
use crate::offsets::{DownstreamOffset, UpstreamOffset};

/// Number of syncs remembered per source partition (MM2 `SYNCS_PER_PARTITION`, one per bit of
/// an `INT64` offset).
pub const SYNC_HISTORY_SLOTS: usize = 64;

/// One remembered sync. `id` gives each applied sync its own identity: MM2 compares slots by
/// object identity, so two syncs with the same offsets are still different syncs.
#[derive(Debug, Clone, Copy)]
struct Slot {
    upstream: i64,
    downstream: i64,
    id: u64,
}

type History = [Slot; SYNC_HISTORY_SLOTS];

/// Offset syncs of one offset-syncs topic and the translation built on them (MM2 class
/// `OffsetSyncStore`).
///
/// Feed it every sync of the topic in order with [`apply`](Self::apply), call
/// [`mark_read_to_end`](Self::mark_read_to_end) once the initial read has reached the end of the
/// topic, then [`translate`](Self::translate) group offsets. Partitions are keyed by the
/// **source** topic name and partition number, as in the sync's key.
///
/// ```
/// use strait_mm2::{DownstreamOffset, OffsetSync, OffsetSyncStore, UpstreamOffset};
///
/// let sync = |up, down| OffsetSync {
///     topic: "orders".into(),
///     partition: 0,
///     upstream: UpstreamOffset(up),
///     downstream: DownstreamOffset(down),
/// };
/// let mut store = OffsetSyncStore::new();
/// store.mark_read_to_end();
/// store.apply(&sync(100, 200));
/// assert_eq!(store.translate("orders", 0, UpstreamOffset(100)), Some(DownstreamOffset(200)));
/// assert_eq!(store.translate("orders", 0, UpstreamOffset(150)), Some(DownstreamOffset(201)));
/// assert_eq!(store.translate("orders", 0, UpstreamOffset(99)), None);
/// ```
#[derive(Debug, Clone, Default)]
pub struct OffsetSyncStore {
    /// Source topic -> partition -> history, slot 0 newest.
    partitions: HashMap<String, HashMap<i32, History>>,
    /// Whether the initial read of the offset-syncs topic has reached its end.
    ready: bool,
    /// Keep the history during the initial read too (see [`OffsetSyncStore::keeping_history`]).
    keep_history_while_loading: bool,
    /// Identity for the next applied sync.
    next_id: u64,
}

impl OffsetSyncStore {
    /// An empty store, not yet ready (nothing translates until
    /// [`mark_read_to_end`](Self::mark_read_to_end)).
    pub fn new() -> Self {
        Self::default()
    }

    /// A store that keeps the full history during the initial read as well, as newer MM2 does
    /// once it has reloaded its previous checkpoints. For callers that cannot emit a checkpoint
    /// behind an earlier one: a checkpoint writer that reloaded its checkpoints and never emits a
    /// rewind, or a read-only translation (`strait translate-offsets`). Translations then equal
    /// those of a store that has been running since the first sync.
    pub fn keeping_history() -> Self {
        Self { keep_history_while_loading: true, ..Self::default() }
    }

    /// Feeds one sync, in offset-syncs-topic order (MM2 `handleRecord` / `updateSyncArray`).
    ///
    /// - The first sync of a partition fills all its slots.
    /// - Before [`mark_read_to_end`](Self::mark_read_to_end), every sync **replaces** the
    ///   partition's history: only the newest sync of the initial read is kept, so a translation
    ///   made after a restart never falls behind a checkpoint emitted before it (unless the store
    ///   was made with [`keeping_history`](Self::keeping_history)).
    /// - A sync whose upstream offset is below slot 0's (an upstream rewind: the source topic
    ///   was recreated or truncated) also replaces the whole history.
    /// - Otherwise the sync becomes slot 0 and older slots are moved back or dropped so that
    ///   invariants B and C (module docs) hold again; a slot that still satisfies B is kept
    ///   together with every slot after it. Cost: `O(64)` per sync.
    ///
    /// An upstream offset equal to slot 0's is not a rewind. Downstream offsets are not
    /// compared: a target truncation shows up as a downstream rewind under an advancing upstream
    /// and is applied like any other sync.
    pub fn apply(&mut self, sync: &OffsetSync) {
        let slot = Slot { upstream: sync.upstream.0, downstream: sync.downstream.0, id: self.next_id };
        self.next_id += 1;
        let topic = match self.partitions.get_mut(sync.topic.as_str()) {
            Some(topic) => topic,
            None => self.partitions.entry(sync.topic.clone()).or_default(),
        };
        match topic.get_mut(&sync.partition) {
            Some(history)
                if (self.ready || self.keep_history_while_loading) && slot.upstream >= history[0].upstream =>
            {
                insert_newest(history, slot);
            }
            Some(history) => *history = [slot; SYNC_HISTORY_SLOTS],
            None => {
                topic.insert(sync.partition, [slot; SYNC_HISTORY_SLOTS]);
            }
        }
    }

    /// Records that the initial read of the offset-syncs topic reached its end (MM2 `start()`
    /// returning): translation is allowed from now on and later syncs build a history instead of
    /// replacing it. Idempotent.
    pub fn mark_read_to_end(&mut self) {
        self.ready = true;
    }

    /// Whether [`mark_read_to_end`](Self::mark_read_to_end) has been called.
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// Translates the committed offset `group_offset` of a source consumer group on `topic`
    /// (source name) / `partition` into an offset on the target partition (MM2
    /// `translateDownstream`).
    ///
    /// Uses the newest remembered sync `s` with `s.upstream <= group_offset` (first slot from 0
    /// to 63) and returns `s.downstream` if `s.upstream == group_offset`, else
    /// `s.downstream + 1`: records after `s` may or may not have been replicated, so the result
    /// never extrapolates. Consumers resuming there may re-read records, never skip any.
    ///
    /// Returns `None` (MM2: empty or `-1`, no checkpoint) before
    /// [`mark_read_to_end`](Self::mark_read_to_end), when the partition has no sync, when every
    /// remembered sync is newer than `group_offset`, and when `s.downstream + 1` would overflow
    /// `i64`.
    ///
    /// Precision: if slot 0 is used (`group_offset >= ` newest upstream) the sync is the newest
    /// one; if slot `i >= 1` is used, invariant B gives
    /// `group_offset - s.upstream < up[i-1] - s.upstream <= 2^(i-1)` and
    /// `up[0] - s.upstream < 2^i`. See the [module docs](crate::store) for the tested bounds.
    pub fn translate(&self, topic: &str, partition: i32, group_offset: UpstreamOffset) -> Option<DownstreamOffset> {
        if !self.ready {
            return None;
        }
        let history = self.partitions.get(topic)?.get(&partition)?;
        let sync = history.iter().find(|s| s.upstream <= group_offset.0)?;
        through_sync((sync.upstream, sync.downstream), group_offset.0).map(DownstreamOffset)
    }

    /// The partition's [`SYNC_HISTORY_SLOTS`] slots as `(upstream, downstream)`, slot 0 newest,
    /// or `None` if no sync was applied for it (MM2's test hook `syncFor`). Adjacent slots
    /// holding the same sync appear as repeated pairs. For diagnostics and tests.
    pub fn history(
        &self,
        topic: &str,
        partition: i32,
    ) -> Option<[(UpstreamOffset, DownstreamOffset); SYNC_HISTORY_SLOTS]> {
        let history = self.partitions.get(topic)?.get(&partition)?;
        Some(history.map(|s| (UpstreamOffset(s.upstream), DownstreamOffset(s.downstream))))
    }
}

/// MM2's translation rule (`OffsetSyncStore.translateDownstream`): a group at `offset` on one side
/// of `sync` (`(this side, other side)`, at or below `offset`) goes to the sync's other side when
/// at the synced record, and one past it when beyond: it may re-read records, never skip one.
/// Read backwards (the sync's sides swapped) it moves a group back along the flow. `None` when
/// one past overflows `i64`.
pub fn through_sync((this_side, other_side): (i64, i64), offset: i64) -> Option<i64> {
    if this_side == offset {
        Some(other_side)
    } else {
        other_side.checked_add(1)
    }
}

/// Invariant B between slot `i` (holding `newer`) and slot `j > i` (holding `older`): `older` is
/// recent enough to sit at `j` behind `newer`.
fn within_reach(newer: Slot, older: Slot, i: usize, j: usize) -> bool {
    let bound = i128::from(older.upstream) + (1i128 << j) - (1i128 << i);
    newer.id == older.id || bound < 0 || i128::from(newer.upstream) <= bound
}

/// Invariant C between slot `i` (holding `newer`) and any later slot (holding `older`): the two
/// are far enough apart for `older` to be worth a slot of its own.
fn spaced(newer: Slot, older: Slot, i: usize) -> bool {
    let bound = i128::from(older.upstream) + (1i128 << i.saturating_sub(2));
    newer.id == older.id || (bound >= 0 && i128::from(newer.upstream) >= bound)
}

/// Puts `newest` (upstream not below slot 0's) in slot 0 and repairs invariants B and C.
///
/// Walks slots 1..63. For slot `k`, `pick` is the sync that would go there if the current
/// occupant now breaks invariant B against slot `k - 1`: the new sync itself, or a sync from the
/// previous layout that satisfies B and C on both sides (preferred, so more distinct syncs
/// survive). Previous-layout syncs are scanned once, oldest-first order never reversed; a sync
/// too close to slot `k - 1` or repeated in the next previous slot is passed over for good.
/// Stops at the first slot whose occupant still satisfies B: B then holds for all later slots.
fn insert_newest(history: &mut History, newest: Slot) {
    let before = *history;
    history[0] = newest;
    let mut pick = newest;
    let mut scan = 0;
    for k in 1..SYNC_HISTORY_SLOTS {
        let prev = history[k - 1];
        loop {
            let old = before[scan];
            let fits_after_prev = within_reach(prev, old, k - 1, k);
            let apart_from_prev = spaced(prev, old, k - 1);
            let apart_from_next = k + 1 == SYNC_HISTORY_SLOTS || spaced(old, history[k + 1], k);
            let repeated = scan + 1 < SYNC_HISTORY_SLOTS && before[scan + 1].id == old.id;
            let usable = fits_after_prev && apart_from_prev && apart_from_next;
            if usable {
                pick = old;
            }
            let pass_over = repeated || !apart_from_prev;
            if usable || pass_over {
                scan += 1;
            }
            if !pass_over || scan >= k {
                break;
            }
        }
        if within_reach(prev, history[k], k - 1, k) {
            break;
        }
        history[k] = pick;
    }
}
