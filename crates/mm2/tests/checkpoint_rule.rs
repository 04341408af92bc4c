//! Checkpoint emission filter (MM2 `MirrorCheckpointTask.checkpointIsMoreRecent` and the
//! `downstreamOffset >= 0` filter before it).

use strait_mm2::{should_emit_checkpoint, DownstreamOffset, UpstreamOffset};

/// Previous checkpoint `(upstream, downstream)`, if any.
type Previous = Option<(i64, i64)>;

/// The previous checkpoint most rows compare against.
const PREV: Previous = Some((100, 42));

const MAX: i64 = i64::MAX;

#[test]
fn emission_table() {
    // (previous, new upstream, new downstream) -> emit?, why
    let table: &[(Previous, i64, i64, bool, &str)] = &[
        (None, 0, 0, true, "first checkpoint"),
        (None, 100, 42, true, "first checkpoint"),
        (None, 100, -1, false, "untranslatable (-1), even first"),
        (None, 100, i64::MIN, false, "negative downstream"),
        (PREV, 100, 42, false, "repeat"),
        (PREV, 101, 43, true, "both advanced"),
        (PREV, 100, 43, true, "downstream advanced alone"),
        (PREV, 150, 42, false, "upstream advanced alone"),
        (PREV, 150, 41, false, "downstream rewind, upstream up"),
        (PREV, 100, 0, false, "downstream rewind, same upstream"),
        (PREV, 99, 41, true, "group reset backwards"),
        (PREV, 0, 0, true, "group reset to the start"),
        (PREV, 99, 42, true, "group reset, same downstream"),
        (PREV, 99, 500, true, "group reset, larger downstream"),
        (PREV, 99, -1, false, "group reset but untranslatable"),
        (PREV, 200, -1, false, "untranslatable"),
        (Some((-1, -1)), 0, 0, true, "previous was a placeholder"),
        (Some((MAX, MAX)), MAX, MAX, false, "repeat at i64::MAX"),
        (Some((MAX, 0)), i64::MIN, 0, true, "reset from i64::MAX"),
    ];
    for &(previous, up, down, want, why) in table {
        let previous = previous.map(|(u, d)| (UpstreamOffset(u), DownstreamOffset(d)));
        let got = should_emit_checkpoint(previous, UpstreamOffset(up), DownstreamOffset(down));
        assert_eq!(got, want, "{why}: {previous:?} -> ({up}, {down})");
    }
}
