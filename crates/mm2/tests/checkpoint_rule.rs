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

/// The runbook walk of issue 25, with the offset syncs it wrote for `orders` partition 1
/// (upstream = downstream, a sync every 101 offsets, one at the end of each copied batch):
/// `billing` committed 480, then 500, then 1500, and its checkpoint stayed `(480, 1)`. MM2's
/// store remembers syncs exponentially spaced back from the newest, so all three offsets
/// translate from the sync at 0, and a pair whose downstream offset did not advance is not a
/// checkpoint (MM2 `checkpointIsMoreRecent`).
#[test]
fn a_far_behind_group_keeps_its_checkpoint_until_its_translation_advances() {
    use strait_mm2::{OffsetSync, OffsetSyncStore};
    let first_batch = (0..=2020).step_by(101).chain([2023]);
    let second_batch = (2124..=2932).step_by(101).chain([2999]);
    /// Applies one batch's syncs in order, then counts the store as read to its end.
    fn apply(store: &mut OffsetSyncStore, offsets: impl IntoIterator<Item = i64>) {
        for o in offsets {
            let (upstream, downstream) = (UpstreamOffset(o), DownstreamOffset(o));
            store.apply(&OffsetSync { topic: "orders".into(), partition: 1, upstream, downstream });
        }
        store.mark_read_to_end();
    }
    let mut store = OffsetSyncStore::keeping_history();
    let translate = |store: &OffsetSyncStore, g: i64| store.translate("orders", 1, UpstreamOffset(g));
    apply(&mut store, first_batch);
    let first = (UpstreamOffset(480), translate(&store, 480).expect("480 translates"));
    assert_eq!(first.1, DownstreamOffset(1), "from the sync at 0: those from 101 to 707 are no longer remembered");
    apply(&mut store, second_batch);
    for g in [500, 1500] {
        let down = translate(&store, g).expect("translates");
        assert_eq!(down, DownstreamOffset(1), "{g} translates from the sync at 0 too");
        assert!(!should_emit_checkpoint(Some(first), UpstreamOffset(g), down), "{g}: same downstream, no checkpoint");
    }
    // The oldest remembered sync above 1500 is 1616: from there on the translation advances.
    let down = translate(&store, 1616).expect("translates");
    assert_eq!(down, DownstreamOffset(1616));
    assert!(should_emit_checkpoint(Some(first), UpstreamOffset(1616), down));
}
