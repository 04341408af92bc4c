//! Which translated group offsets become checkpoints (MM2 `MirrorCheckpointTask`, the
//! `downstreamOffset >= 0` filter followed by `checkpointIsMoreRecent`).
//!
//! Each emission round (MM2: every `emit.checkpoints.interval.seconds`, 60 s by default) the
//! checkpoint task translates every committed offset of every replicated group with
//! [`OffsetSyncStore::translate`](crate::OffsetSyncStore::translate) and keeps, per
//! (group, partition), the last checkpoint it emitted (reloaded from the checkpoints topic on
//! restart). [`should_emit_checkpoint`] decides whether a freshly translated pair is written.

use crate::offsets::{DownstreamOffset, UpstreamOffset};

/// Whether a new checkpoint `(upstream, downstream)` for a (group, partition) should be emitted
/// given the `previous` one emitted for it (if any) (MM2 `MirrorCheckpointTask.checkpointsForGroup`
/// and `checkpointIsMoreRecent`).
///
/// In order:
/// 1. `downstream < 0` (MM2's "cannot translate accurately" `-1`): `false`, even with no
///    previous checkpoint;
/// 2. no previous checkpoint: `true`;
/// 3. `upstream` below the previous upstream (the source group was reset backwards; checkpoints
///    may then go backwards too): `true`, whatever the downstream;
/// 4. `downstream` above the previous downstream: `true`;
/// 5. otherwise (same or larger upstream with the same or a smaller downstream): `false`, a
///    repeat or a downstream rewind is never emitted.
///
/// Offsets are Kafka record offsets; the comparison cannot fail or overflow.
pub fn should_emit_checkpoint(
    previous: Option<(UpstreamOffset, DownstreamOffset)>,
    upstream: UpstreamOffset,
    downstream: DownstreamOffset,
) -> bool {
    if downstream.0 < 0 {
        return false;
    }
    match previous {
        None => true,
        Some((prev_up, prev_down)) => upstream < prev_up || downstream > prev_down,
    }
}
